package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/packer-dev/packer/storage"
	"github.com/packer-dev/packer/storage/s3"
)

// locations is the table every command opens a location through: a location that starts with
// a registered SCHEME:// is opened by its store's package (a storage.Location whose backends
// implement storage.Remote), and a path by the local file system's entry. Adding an object
// store is its package plus one line here.
var locations = storage.NewRegistry(
	storage.LocalLocation(),
	s3.Location(),
)

// remote reports whether loc lies in an object store (it is not a local path).
func remote(loc string) bool { return locations.Remote(loc) }

// remoteForms are the forms of the object-store locations, for messages: "s3://bucket/prefix".
func remoteForms(suffix string) string {
	var forms []string
	for _, s := range locations.Schemes() {
		forms = append(forms, s+"://"+suffix)
	}
	return strings.Join(forms, " or ")
}

// openStore opens the storage the commands that read a dataset (verify, inspect, preview,
// bench) find it in: the backend of loc's entry in the table (openLocation).
func openStore(ctx context.Context, loc string) (storage.Backend, error) {
	b, _, err := openLocation(ctx, loc, "")
	return b, err
}

// openLocation opens loc through its entry in the table: a local path as a storage.Local, an
// object-store location with the tuning knobs of the environment (storeOptions, read only for
// a store's location) and, where cacheDir is set, a local cache of the files read. A location
// that does not parse is a usage error. It returns the location in its canonical form too
// (scheme://bucket/prefix with no trailing slash; a path as it is).
func openLocation(ctx context.Context, loc, cacheDir string) (storage.Backend, string, error) {
	if _, err := locations.Parse(loc); err != nil {
		return nil, "", usagef(err)
	}
	var opts storage.OpenOptions
	if remote(loc) {
		var err error
		if opts, err = storeOptions(); err != nil {
			return nil, "", err
		}
	}
	opts.CacheDir = cacheDir
	return locations.Open(ctx, loc, opts)
}

// openRemote opens the object-store location loc (openLocation): the commands that upload to
// it or download from it. A local path is a usage error.
func openRemote(ctx context.Context, loc, cacheDir string) (storage.Remote, string, error) {
	if !remote(loc) {
		return nil, "", usagef(fmt.Errorf("%s: not an object-store location (%s)", loc, remoteForms("bucket/prefix")))
	}
	b, c, err := openLocation(ctx, loc, cacheDir)
	if err != nil {
		return nil, "", err
	}
	r, ok := b.(storage.Remote)
	if !ok {
		return nil, "", fmt.Errorf("%s: the %T of its store cannot upload or download", loc, b)
	}
	return r, c, nil
}

// storeOptions are the object store's tuning knobs from the environment: PACKER_S3_PART_SIZE
// (the multipart part size, e.g. 64MiB) and PACKER_S3_PARALLEL (parts of one file sent at
// once), PACKER_S3_STALL_TIMEOUT (how long a connection may make no progress before its
// request is retried, e.g. 60s).
func storeOptions() (storage.OpenOptions, error) {
	var o storage.OpenOptions
	if v := os.Getenv("PACKER_S3_PART_SIZE"); v != "" {
		n, err := parseBytes(v)
		if err != nil {
			return o, fmt.Errorf("PACKER_S3_PART_SIZE: %w", err)
		}
		o.PartSize = n
	}
	if v := os.Getenv("PACKER_S3_PARALLEL"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return o, fmt.Errorf("PACKER_S3_PARALLEL: want a positive number, got %q", v)
		}
		o.Parallel = n
	}
	if v := os.Getenv("PACKER_S3_STALL_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return o, fmt.Errorf("PACKER_S3_STALL_TIMEOUT: want a positive duration such as 60s, got %q", v)
		}
		o.StallTimeout = d
	}
	return o, nil
}
