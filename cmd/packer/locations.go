package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/packer-dev/packer/storage"
	"github.com/packer-dev/packer/storage/s3"
)

// locations is the table every command resolves a location through: a path is local, and a
// location that starts with a registered SCHEME:// is opened by its store's package (a
// storage.Location whose backends implement storage.Remote). Adding an object store is its
// package plus one line here.
var locations = storage.NewRegistry(
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
// bench) find it in: the object store of a remote location (openRemote), else the local
// directory.
func openStore(ctx context.Context, loc string) (storage.Backend, error) {
	if !remote(loc) {
		return storage.NewLocal(loc), nil
	}
	b, _, err := openRemote(ctx, loc, "")
	if err != nil {
		return nil, err
	}
	return b, nil
}

// openRemote opens the object-store location loc through its store's registry entry, with
// the tuning knobs of the environment (storeOptions) and, where cacheDir is set, a local cache
// of the files read. A location that does not parse is a usage error. It returns the
// location in its canonical form too (scheme://bucket/prefix, no trailing slash).
func openRemote(ctx context.Context, loc, cacheDir string) (storage.Remote, string, error) {
	l, ok := locations.Lookup(loc)
	if !ok {
		return nil, "", usagef(fmt.Errorf("%s: not an object-store location (%s)", loc, remoteForms("bucket/prefix")))
	}
	c, err := locations.Parse(loc)
	if err != nil {
		return nil, "", usagef(err)
	}
	opts, err := storeOptions()
	if err != nil {
		return nil, "", err
	}
	opts.CacheDir = cacheDir
	b, err := l.Open(ctx, loc, opts)
	if err != nil {
		return nil, "", err
	}
	return b, c, nil
}

// storeOptions are the object store's tuning knobs from the environment: PACKER_S3_PART_SIZE
// (the multipart part size, e.g. 64MiB) and PACKER_S3_PARALLEL (parts of one file sent at
// once).
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
	return o, nil
}
