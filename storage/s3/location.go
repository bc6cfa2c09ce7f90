package s3

import (
	"context"

	"github.com/packer-dev/packer/storage"
)

// Location is the object store's entry in a storage.Registry: the s3://bucket/prefix
// locations, opened with a client configured from the standard AWS chain (New).
func Location() storage.Location {
	return storage.Location{
		Scheme: "s3",
		Parse: func(loc string) (string, error) {
			u, err := ParseURL(loc)
			if err != nil {
				return "", err
			}
			return u.String(), nil
		},
		Open: func(ctx context.Context, loc string, opts storage.OpenOptions) (storage.Backend, error) {
			u, err := ParseURL(loc)
			if err != nil {
				return nil, err
			}
			b, err := New(ctx, u, Options{PartSize: opts.PartSize, Parallel: opts.Parallel, CacheDir: opts.CacheDir, StallTimeout: opts.StallTimeout})
			if err != nil {
				return nil, err // not a nil *Backend in a non-nil storage.Backend
			}
			return b, nil
		},
	}
}

var _ storage.Remote = (*Backend)(nil)
