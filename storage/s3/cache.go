package s3

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/packer-dev/packer/storage"
)

// cacheFile is a Reader over the local copy of an object in Options.CacheDir.
type cacheFile struct {
	*os.File
	size int64
}

func (f *cacheFile) Size() int64 { return f.size }

// cachePath is where the copy of the object key with the given ETag lives: CacheDir/bucket/
// key, suffixed with the ETag's letters and digits, so that a replaced object never reuses
// the copy of the one before.
func (b *Backend) cachePath(key, etag string) string {
	tag := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return -1
	}, etag)
	return filepath.Join(b.opts.CacheDir, b.url.Bucket, filepath.FromSlash(key)) + ".etag-" + tag
}

// cached returns a Reader over the cached copy of r's object, fetching it whole first when it
// is not cached (with r's ETag as the condition, so the copy is of the version opened), and
// removing copies of other versions of the object.
func (b *Backend) cached(ctx context.Context, r *reader) (storage.Reader, error) {
	p := b.cachePath(r.key, r.etag)
	if f, err := os.Open(p); err == nil {
		if st, err := f.Stat(); err == nil && st.Size() == r.size {
			return &cacheFile{f, r.size}, nil
		}
		f.Close()
	}
	stale, _ := filepath.Glob(filepath.Join(filepath.Dir(p), globEscape(filepath.Base(b.cachePath(r.key, "")))+"*"))
	for _, s := range stale {
		if s != p {
			os.Remove(s)
		}
	}
	removeAbandonedFetches(filepath.Dir(p), false)
	if err := b.fetch(ctx, mirrorObject{Key: r.key, Size: r.size, ETag: r.etag}, p); err != nil {
		return nil, fmt.Errorf("caching in %s: %w", b.opts.CacheDir, err)
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	return &cacheFile{f, r.size}, nil
}

// globEscape escapes the characters filepath.Match treats specially.
func globEscape(s string) string {
	var sb strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			sb.WriteByte('\\')
		}
		sb.WriteRune(r)
	}
	return sb.String()
}
