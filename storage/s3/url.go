package s3

import (
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// Scheme is the prefix of a location in an object store: s3://bucket/prefix.
const Scheme = "s3://"

// IsURL reports whether loc names a location in an object store (it starts with s3://).
func IsURL(loc string) bool { return strings.HasPrefix(loc, Scheme) }

// URL is a parsed s3://bucket/prefix location. Prefix has no leading or trailing slash and
// may be empty (the whole bucket).
type URL struct {
	Bucket string
	Prefix string
}

// String is the location as s3://bucket/prefix.
func (u URL) String() string {
	if u.Prefix == "" {
		return Scheme + u.Bucket
	}
	return Scheme + u.Bucket + "/" + u.Prefix
}

// Join returns the URL of name below u.
func (u URL) Join(name string) URL {
	if u.Prefix == "" {
		return URL{u.Bucket, name}
	}
	return URL{u.Bucket, u.Prefix + "/" + name}
}

// keyPrefix is the prefix of the keys below u: "" or "prefix/".
func (u URL) keyPrefix() string {
	if u.Prefix == "" {
		return ""
	}
	return u.Prefix + "/"
}

// ParseURL parses s3://bucket/prefix. The bucket must be a valid bucket name (3 to 63
// lowercase letters, digits, dots and hyphens); the prefix, cleaned of a trailing slash, must
// be a valid slash-separated relative path (no "..", no empty elements). Query strings,
// credentials and ports have no place in it.
func ParseURL(loc string) (URL, error) {
	if !IsURL(loc) {
		return URL{}, fmt.Errorf("%q is not an s3:// location", loc)
	}
	rest := strings.TrimPrefix(loc, Scheme)
	bucket, prefix, _ := strings.Cut(rest, "/")
	if !validBucket(bucket) {
		return URL{}, fmt.Errorf("%s: %q is not a valid bucket name (3 to 63 lowercase letters, digits, '.' and '-')", loc, bucket)
	}
	prefix = strings.TrimSuffix(prefix, "/")
	if prefix != "" && (!fs.ValidPath(prefix) || path.Clean(prefix) != prefix) {
		return URL{}, fmt.Errorf("%s: %q is not a valid key prefix (slash-separated names, no '.', '..' or empty elements)", loc, prefix)
	}
	return URL{Bucket: bucket, Prefix: prefix}, nil
}

func validBucket(b string) bool {
	if len(b) < 3 || len(b) > 63 {
		return false
	}
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || (c == '.' || c == '-') && i > 0 && i < len(b)-1
		if !ok {
			return false
		}
	}
	return true
}
