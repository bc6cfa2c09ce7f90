// Package s3 is the object-store backend of the storage seam: a storage.Backend over the
// objects of an S3 (or S3-compatible) bucket below a key prefix, written with the AWS SDK for
// Go v2. Names are the keys below the prefix ("s3://b/ds" holds "shard-00000.pks" as the key
// "ds/shard-00000.pks").
//
// The client is configured from the standard AWS chain (environment variables, AWS_PROFILE,
// the shared config and credentials files, AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_S3 for an
// S3-compatible store), with path-style addressing (bucket in the path, which every
// S3-compatible store accepts) and checksums computed and validated only where S3 requires
// them (the SDK's default CRC32 trailers are refused or stored verbatim by several
// S3-compatible stores). Request bodies are always seekable byte slices, so the payload is
// signed with its SHA-256 and never sent as a streaming (aws-chunked) body.
//
// Errors (*Error) name the operation, the bucket and the key, and never a credential.
package s3

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/packer-dev/packer/storage"
)

// Options tune a Backend; the zero value is the defaults.
type Options struct {
	// PartSize is the size of a multipart upload's parts, and the size from which a file is
	// uploaded in parts (default 16 MiB; S3 wants at least 5 MiB for all but the last part).
	PartSize int64
	// Parallel is the number of parts of one file uploaded at once (default 4).
	Parallel int
	// CacheDir, if set, keeps a local copy of every object Open opens, for readers that read
	// a dataset more than once (training epochs): the first Open of an object fetches it
	// whole into CacheDir (under bucket/key, tagged with its ETag), later Opens of the same
	// object, unchanged, read the copy. A changed object (another ETag) is fetched again and
	// the stale copy removed. The copy's bytes are checked as the object's are: by the
	// readers' CRC checks. Remove the folder to clear the cache. Never set it for verify,
	// which must read the store itself.
	CacheDir string
	// ChunkCache is the memory budget of the cache of 2 MiB chunks that small reads of shard
	// files are served from (default 256 MiB). Shuffled readers of a dataset larger than
	// about half of it read their records with exact ranged GETs instead (shard.RangeReaderAt).
	ChunkCache int64
	// StallTimeout cuts a connection that makes no progress (no byte read or written) for
	// this long; its request is retried as after a reset (default DefaultStallTimeout). Only
	// New's client has it: NewWithClient's is the caller's.
	StallTimeout time.Duration
}

const (
	defaultPartSize = 16 << 20
	defaultParallel = 4
)

// Backend is a storage.Backend over the objects below a prefix of a bucket. It is safe for
// concurrent use.
type Backend struct {
	client  *awss3.Client
	url     URL
	opts    Options
	secrets []string // scrubbed from every error message
	chunks  chunkCache

	probe    sync.Once // storeVerifies
	verifies bool
}

var _ storage.Backend = (*Backend)(nil)

// New returns the Backend of u, with a client configured from the standard AWS chain. It
// fails when no credentials can be found; it sends no request.
func New(ctx context.Context, u URL, opts Options) (*Backend, error) {
	cfg, err := config.LoadDefaultConfig(ctx,
		config.WithDefaultRegion("us-east-1"),
		config.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired),
		config.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired),
		config.WithRetryer(newRetryer),
		config.WithHTTPClient(stallClient(cmp.Or(opts.StallTimeout, DefaultStallTimeout))),
	)
	if err != nil {
		return nil, fmt.Errorf("%s: loading the AWS configuration: %w", u, err)
	}
	creds, err := cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: no AWS credentials found (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE with a shared credentials file)", u)
	}
	client := awss3.NewFromConfig(cfg, func(o *awss3.Options) {
		o.UsePathStyle = true
	})
	b := NewWithClient(client, u, opts)
	b.secrets = []string{creds.SecretAccessKey, creds.SessionToken}
	return b, nil
}

// NewWithClient returns the Backend of u over a client the caller configured.
func NewWithClient(client *awss3.Client, u URL, opts Options) *Backend {
	if opts.PartSize <= 0 {
		opts.PartSize = defaultPartSize
	}
	if opts.Parallel <= 0 {
		opts.Parallel = defaultParallel
	}
	if opts.ChunkCache <= 0 {
		opts.ChunkCache = chunkBudget
	}
	return &Backend{client: client, url: u, opts: opts, chunks: chunkCache{budget: int(opts.ChunkCache)}}
}

// Client is the SDK client the backend sends its requests with.
func (b *Backend) Client() *awss3.Client { return b.client }

// URL is the location the backend holds.
func (b *Backend) URL() URL { return b.url }

// key checks ctx and name and returns the object key of name.
func (b *Backend) key(ctx context.Context, op, name string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if c := path.Clean(name); name == "" || c == "." || !fs.ValidPath(c) {
		return "", &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	return b.url.keyPrefix() + path.Clean(name), nil
}

func (b *Backend) objURL(key string) URL { return URL{b.url.Bucket, key} }

// List lists the objects below the prefix (ListObjectsV2, page by page). Keys ending in a
// slash (folder markers some tools create) are not files and are skipped.
func (b *Backend) List(ctx context.Context, fn func(storage.FileInfo) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	prefix := b.url.keyPrefix()
	p := awss3.NewListObjectsV2Paginator(b.client, &awss3.ListObjectsV2Input{
		Bucket: aws.String(b.url.Bucket),
		Prefix: aws.String(prefix),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return b.wrap("ListObjectsV2", b.url, err)
		}
		for _, o := range page.Contents {
			name := strings.TrimPrefix(aws.ToString(o.Key), prefix)
			if name == "" || strings.HasSuffix(name, "/") {
				continue
			}
			if err := fn(storage.FileInfo{Name: name, Size: aws.ToInt64(o.Size)}); err != nil {
				return err
			}
		}
	}
	return nil
}

// Stat is a HEAD request.
func (b *Backend) Stat(ctx context.Context, name string) (storage.FileInfo, error) {
	key, err := b.key(ctx, "stat", name)
	if err != nil {
		return storage.FileInfo{}, err
	}
	out, err := b.head(ctx, key)
	if err != nil {
		return storage.FileInfo{}, err
	}
	return storage.FileInfo{Name: path.Clean(name), Size: aws.ToInt64(out.ContentLength)}, nil
}

// Open is a HEAD request for the size and the ETag; the Reader's reads are ranged GETs on the
// condition that the object still has that ETag (If-Match), so that a file replaced while it
// is read is an error, never a mix of two versions.
func (b *Backend) Open(ctx context.Context, name string) (storage.Reader, error) {
	r, err := b.openStore(ctx, name)
	if err != nil {
		return nil, err
	}
	if b.opts.CacheDir == "" {
		return r, nil
	}
	return b.cached(ctx, r)
}

// openStore is Open without the cache.
func (b *Backend) openStore(ctx context.Context, name string) (*reader, error) {
	key, err := b.key(ctx, "open", name)
	if err != nil {
		return nil, err
	}
	out, err := b.head(ctx, key)
	if err != nil {
		return nil, err
	}
	return &reader{b: b, ctx: ctx, key: key, size: aws.ToInt64(out.ContentLength), etag: aws.ToString(out.ETag)}, nil
}

type reader struct {
	b    *Backend
	ctx  context.Context
	key  string
	size int64
	etag string
}

func (r *reader) Size() int64  { return r.size }
func (r *reader) Close() error { return nil }

// ReadAt is one ranged GET of the bytes [off, off+len(p)) that lie in the object.
func (r *reader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, &fs.PathError{Op: "read", Path: r.b.objURL(r.key).String(), Err: fs.ErrInvalid}
	}
	if len(p) == 0 {
		return 0, nil
	}
	if off >= r.size {
		return 0, io.EOF
	}
	n := min(int64(len(p)), r.size-off)
	get := r.get
	if n <= smallRead {
		get = r.readSmall
	}
	if err := get(p[:n], off); err != nil {
		return 0, err
	}
	if n < int64(len(p)) {
		return int(n), io.EOF
	}
	return int(n), nil
}

// ReadRangeAt is one ranged GET of exactly the bytes [off, off+len(p)) that lie in the
// object, whatever their size: it never goes through the chunk cache (shard.RangeReaderAt).
func (r *reader) ReadRangeAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, &fs.PathError{Op: "read", Path: r.b.objURL(r.key).String(), Err: fs.ErrInvalid}
	}
	if len(p) == 0 {
		return 0, nil
	}
	if off >= r.size {
		return 0, io.EOF
	}
	n := min(int64(len(p)), r.size-off)
	if err := r.get(p[:n], off); err != nil {
		return 0, err
	}
	if n < int64(len(p)) {
		return int(n), io.EOF
	}
	return int(n), nil
}

// CacheBytes is the budget of the chunk cache that ReadAt serves small reads from.
func (r *reader) CacheBytes() int64 { return int64(r.b.chunks.budget) }

// get reads p from off with ranged GETs: a body cut short is asked again for the bytes still
// missing (bodyRetry), pinned to the ETag the object was opened with.
func (r *reader) get(p []byte, off int64) error {
	done := 0
	err := bodyRetry(r.ctx, func() (bool, error) {
		at := off + int64(done)
		in := &awss3.GetObjectInput{
			Bucket: aws.String(r.b.url.Bucket),
			Key:    aws.String(r.key),
			Range:  aws.String(fmt.Sprintf("bytes=%d-%d", at, off+int64(len(p))-1)),
		}
		if r.etag != "" {
			in.IfMatch = aws.String(r.etag)
		}
		out, err := r.b.client.GetObject(r.ctx, in)
		if err != nil {
			return false, err
		}
		defer out.Body.Close()
		n, err := io.ReadFull(out.Body, p[done:])
		done += n
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			err = fmt.Errorf("%w: %d of the %d bytes at offset %d", errShortBody, n, len(p)-(done-n), at)
		}
		return true, err
	})
	return r.b.wrap("GetObject", r.b.objURL(r.key), err)
}

// Remove is a HEAD (S3 reports no error for deleting a missing object) and a DELETE.
func (b *Backend) Remove(ctx context.Context, name string) error {
	if _, err := b.Stat(ctx, name); err != nil {
		return err
	}
	key, err := b.key(ctx, "remove", name)
	if err != nil {
		return err
	}
	_, err = b.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(b.url.Bucket), Key: aws.String(key)})
	return b.wrap("DeleteObject", b.objURL(key), err)
}

// Create starts an object that replaces any object of that name when committed.
func (b *Backend) Create(ctx context.Context, name string) (storage.Writer, error) {
	return b.CreateObject(ctx, name, false)
}

// CreateObject starts the object name. With noReplace set the commit is a conditional write
// (If-None-Match: *): it fails with an error matching fs.ErrExist when an object of that name
// exists, whoever wrote it and however recently.
func (b *Backend) CreateObject(ctx context.Context, name string, noReplace bool) (*Writer, error) {
	key, err := b.key(ctx, "create", name)
	if err != nil {
		return nil, err
	}
	return newWriter(ctx, b, key, noReplace), nil
}

// putInput is the PutObject of data at key (conditional with noReplace).
func (b *Backend) putInput(key string, data []byte, noReplace bool) *awss3.PutObjectInput {
	in := &awss3.PutObjectInput{
		Bucket:        aws.String(b.url.Bucket),
		Key:           aws.String(key),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
	}
	if noReplace {
		in.IfNoneMatch = aws.String("*")
	}
	return in
}
