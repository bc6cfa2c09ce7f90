package s3

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/packer-dev/packer/shard"
)

// Server-side copies: a dataset made of objects that are already in the store (the shards of
// parts built with --cut-inputs) is published by copying each object inside the store, never
// reading or sending its bytes.

// MaxCopySize is the largest object one CopyObject request copies (S3's limit); a larger one
// is copied in parts (UploadPartCopy).
const MaxCopySize = 5 << 30

// copyParallel is the number of objects CopyPublish copies at once. A copy moves no bytes
// through this machine: what bounds it is the store, which serves many such requests at once,
// so more are in flight than the Parallel uploads that each send bytes from here.
const copyParallel = 16

// PinnedFS reads the objects below a backend's prefix for a check that must not read more than
// it asks for (shard.OpenDatasetFS of a part: headers, indexes, footers): every read is one
// exact ranged GET (no chunk cache), pinned to the ETag the object had when it was opened, and
// ETag reports that ETag, for a copy pinned to the same version (CopySource.ETag).
type PinnedFS struct {
	b   *Backend
	ctx context.Context

	mu    sync.Mutex
	etags map[string]string
}

// PinnedFS returns the backend's PinnedFS, whose reads use ctx.
func (b *Backend) PinnedFS(ctx context.Context) *PinnedFS {
	return &PinnedFS{b: b, ctx: ctx, etags: map[string]string{}}
}

// Open opens name (a HEAD request) and records its ETag.
func (p *PinnedFS) Open(name string) (shard.File, error) {
	r, err := p.b.openStore(p.ctx, name)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.etags[name]; ok && e != r.etag {
		return nil, fmt.Errorf("%s: %w: its ETag was %s, now %s", p.b.objURL(r.key), ErrChanged, e, r.etag)
	}
	p.etags[name] = r.etag
	return exactReader{r}, nil
}

// ETag is the ETag name had when it was first opened ("" if it never was); a later Open that
// finds another one fails with ErrChanged.
func (p *PinnedFS) ETag(name string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.etags[name]
}

// exactReader reads its object with exact ranged GETs only.
type exactReader struct{ r *reader }

func (e exactReader) ReadAt(p []byte, off int64) (int, error) { return e.r.ReadRangeAt(p, off) }
func (e exactReader) Close() error                            { return e.r.Close() }
func (e exactReader) Size() int64                             { return e.r.size }

// CopySource is an object to copy: the file Name below the prefix of From (a backend of the
// same store), as it was when it was checked (ETag, Size, and the SHA-256 its manifest lists).
type CopySource struct {
	From   *Backend
	Name   string
	ETag   string
	Size   int64
	SHA256 string
}

// CopyOptions tune CopyPublish.
type CopyOptions struct {
	PublishOptions
	// PartThreshold: an object larger than this is copied in parts (UploadPartCopy), of this
	// size unless the source was uploaded in parts, whose sizes the copy then keeps (default
	// and most MaxCopySize). An object uploaded in parts is always copied in its parts.
	PartThreshold int64
	// Copied, if set, is called after each object is copied and checked, with the bytes
	// copied so far and the total.
	Copied func(done, total int64)
}

// CopyPublish publishes the dataset of manifest m (its marshalled bytes manifest) below the
// backend's prefix, its files copied inside the store from srcs (srcs[i] is m.Files[i]), the way
// Publish publishes a local dataset: the prefix is checked and prepared as Publish does (a
// dataset there replaced under a new generation sub-prefix with opts.Replace), each file is a
// server-side copy of its source pinned to the source's ETag (a source changed since it was
// checked is refused, naming it) and then checked (copyObject), manifest.json is written last
// with the same conditional write and read back, and on any failure the objects copied are
// deleted and no manifest is written.
//
// Before it copies anything, the merge claims the prefix with a conditional write of a small
// object (ClaimName, If-None-Match: *), removed again before the manifest is written or when
// the merge fails: of two merges racing to one prefix, the second's claim is refused and it
// fails naming the first, having written nothing. This keeps them apart also on a store that
// ignores If-None-Match on CopyObject (versitygw does), where two copies to one key would
// both succeed. A merge that finds its claim gone or replaced when it fails (someone removed
// it with --force) deletes nothing: the objects there may be another command's.
func (b *Backend) CopyPublish(ctx context.Context, m *shard.Manifest, manifest []byte, srcs []CopySource, opts CopyOptions) (err error) {
	if len(srcs) != len(m.Files) {
		return fmt.Errorf("%s: %d sources for %d files", b.url, len(srcs), len(m.Files))
	}
	if opts.PartThreshold <= 0 || opts.PartThreshold > MaxCopySize {
		opts.PartThreshold = MaxCopySize
	}
	old, err := b.prepare(ctx, opts.Clear, opts.Replace, opts.Formats, leftovers{}, opts.Command)
	if err != nil {
		return err
	}
	gen, err := newGeneration(old)
	if err != nil {
		return err
	}
	c, err := b.claimPrefix(ctx)
	if err != nil {
		return err
	}
	held := true
	var (
		mu     sync.Mutex
		copied []string
		done   int64
		total  int64
	)
	for _, s := range srcs {
		total += s.Size
	}
	defer func() {
		if err == nil {
			return
		}
		if held {
			if rerr := c.release(); errors.Is(rerr, ErrTakenOver) {
				err = fmt.Errorf("%w; its copies are left in place: %w", err, rerr)
				return
			}
		}
		if errors.Is(err, ErrFilesKept) {
			return // the manifest may be in place: its files stay
		}
		b.removeAll(copied)
	}()
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(srcs))
	sem := make(chan struct{}, copyParallel)
	var wg sync.WaitGroup
	for i, fe := range m.Files {
		select {
		case sem <- struct{}{}:
		case <-cctx.Done():
		}
		if cctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func(i int, fe shard.FileEntry) {
			defer wg.Done()
			defer func() { <-sem }()
			key, err := b.copyObject(cctx, srcs[i], gen+fe.Path, fe, opts.PartThreshold)
			mu.Lock()
			defer mu.Unlock()
			if key != "" {
				copied = append(copied, key)
			}
			if err != nil {
				errs[i] = err
				cancel()
				return
			}
			done += fe.Size
			if opts.Copied != nil {
				opts.Copied(done, total)
			}
		}(i, fe)
	}
	wg.Wait()
	if err := firstErr(errs); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// Every file is in place and checked: the claim is removed (no published dataset has one
	// beside it) and the manifest goes last, as Publish writes it.
	popts := opts.PublishOptions
	popts.beforeManifest = func(ctx context.Context) error {
		if err := c.b.dropControl(ctx, ClaimName, c.etag); err != nil {
			return err
		}
		held = false
		return nil
	}
	if err := b.publish(ctx, "", m, manifest, popts, old, gen, func(shard.FileEntry) bool { return true }); err != nil {
		return err
	}
	return nil
}

// firstErr is the first of errs that is not a cancellation another error caused, else the
// first cancellation, else nil.
func firstErr(errs []error) error {
	var cancelled error
	for _, e := range errs {
		if e != nil && !errors.Is(e, context.Canceled) {
			return e
		}
		if cancelled == nil {
			cancelled = e
		}
	}
	return cancelled
}

// SameStore reports whether o is a backend of the same store as b (the same endpoint), whose
// objects b can copy inside the store (CopyPublish).
func (b *Backend) SameStore(o *Backend) bool {
	return aws.ToString(b.client.Options().BaseEndpoint) == aws.ToString(o.client.Options().BaseEndpoint) &&
		b.client.Options().Region == o.client.Options().Region
}

// copySource is the x-amz-copy-source of src: bucket/key, the key URL-escaped.
func copySource(src CopySource) string {
	key := src.From.url.keyPrefix() + src.Name
	parts := strings.Split(key, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return src.From.url.Bucket + "/" + strings.Join(parts, "/")
}

// copyObject copies src to name below the prefix, pinned to src.ETag, and checks the copy
// (checkCopy); it returns the key once a request that may make the object was sent (the
// prefix is a new one, or a new generation: the key is none but this copy's). An object up to threshold, not
// uploaded in parts, is one CopyObject; any other is copied in parts (copyParts).
func (b *Backend) copyObject(ctx context.Context, src CopySource, name string, fe shard.FileEntry, threshold int64) (string, error) {
	key, err := b.key(ctx, "copy", name)
	if err != nil {
		return "", err
	}
	if src.Size != fe.Size || src.ETag == "" {
		return "", fmt.Errorf("%s: the source was checked as %d bytes (ETag %q), its manifest lists %d", b.objURL(copyKey(src)), src.Size, src.ETag, fe.Size)
	}
	var etag, sha string
	if partsCount(src.ETag) == 0 && src.Size <= threshold {
		out, err := b.client.CopyObject(ctx, &awss3.CopyObjectInput{
			Bucket: aws.String(b.url.Bucket), Key: aws.String(key),
			CopySource: aws.String(copySource(src)), CopySourceIfMatch: aws.String(src.ETag),
			ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
		})
		if err != nil {
			// A copy whose answer was lost may have been made: the key goes to the clean-up.
			return key, b.copyErr("CopyObject", src, key, err)
		}
		if r := out.CopyObjectResult; r != nil {
			etag, sha = aws.ToString(r.ETag), aws.ToString(r.ChecksumSHA256)
		}
	} else {
		var err error
		if etag, err = b.copyParts(ctx, src, key, threshold); err != nil {
			return key, err // its completion may have been made: the key goes to the clean-up
		}
	}
	if err := b.checkCopy(ctx, src, key, fe, etag, sha); err != nil {
		return key, err
	}
	return key, nil
}

// copyKey is the source's key.
func copyKey(src CopySource) string { return src.From.url.keyPrefix() + src.Name }

// copyErr wraps err, naming the source and the destination.
func (b *Backend) copyErr(op string, src CopySource, key string, err error) error {
	return fmt.Errorf("copy %s to %s: %w", src.From.objURL(copyKey(src)), b.objURL(key), b.wrap(op, src.From.objURL(copyKey(src)), err))
}

// partsCount is the number of parts an ETag of an object uploaded in parts names (its
// "-N" suffix), 0 for any other.
func partsCount(etag string) int {
	_, n, ok := strings.Cut(strings.Trim(etag, `"`), "-")
	if !ok {
		return 0
	}
	var k int
	if _, err := fmt.Sscanf(n, "%d", &k); err != nil {
		return 0
	}
	return k
}

// copyParts copies src to key in parts (copyPartsOf: UploadPartCopy, each pinned to src.ETag,
// several at once), in the parts the source was uploaded in where it was (their size read with
// a HEAD of its first part), else of threshold bytes, and completes the upload with a conditional write; it returns the
// copy's ETag. On failure the upload is aborted.
func (b *Backend) copyParts(ctx context.Context, src CopySource, key string, threshold int64) (string, error) {
	partSize := threshold
	if n := partsCount(src.ETag); n > 0 {
		h, err := src.From.client.HeadObject(ctx, &awss3.HeadObjectInput{
			Bucket: aws.String(src.From.url.Bucket), Key: aws.String(copyKey(src)),
			PartNumber: aws.Int32(1), IfMatch: aws.String(src.ETag),
		})
		if err != nil {
			return "", b.copyErr("HeadObject", src, key, err)
		}
		partSize = aws.ToInt64(h.ContentLength)
		if partSize <= 0 || (src.Size+partSize-1)/partSize != int64(n) {
			return "", fmt.Errorf("%s: its first part is %d bytes, which does not make %d parts of %d bytes", src.From.objURL(copyKey(src)), partSize, n, src.Size)
		}
	}
	up, err := b.client.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: aws.String(b.url.Bucket), Key: aws.String(key)})
	if err != nil {
		return "", b.wrap("CreateMultipartUpload", b.objURL(key), err)
	}
	ok := false
	defer func() {
		if !ok {
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
			defer cancel()
			b.client.AbortMultipartUpload(actx, &awss3.AbortMultipartUploadInput{Bucket: aws.String(b.url.Bucket), Key: aws.String(key), UploadId: up.UploadId})
		}
	}()
	parts, err := b.copyPartsOf(ctx, src, key, up.UploadId, partSize)
	if err != nil {
		return "", err
	}
	out, err := b.client.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{
		Bucket: aws.String(b.url.Bucket), Key: aws.String(key), UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
		IfNoneMatch:     aws.String("*"),
	})
	if err != nil {
		err = b.wrap("CompleteMultipartUpload", b.objURL(key), err)
		if errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("%s: another build is writing there: %w", b.url, err)
		}
		return "", err
	}
	ok = true
	// The ETag of an object completed from parts is the MD5 of its parts' MD5s: it must be
	// the one the parts' ETags make.
	want := partsETag(parts)
	if got := aws.ToString(out.ETag); want != "" && got != "" && got != want {
		return got, fmt.Errorf("%s: the copy completed with ETag %s, its parts make %s", b.objURL(key), got, want)
	}
	return aws.ToString(out.ETag), nil
}

// copyPartsOf copies the parts of src, of partSize bytes each, into the multipart upload id at
// key (UploadPartCopy, each pinned to src.ETag), Parallel of them at once, and returns them in
// order for its completion. The first part that fails stops the others (none is started after
// it) and is the error.
func (b *Backend) copyPartsOf(ctx context.Context, src CopySource, key string, id *string, partSize int64) ([]types.CompletedPart, error) {
	n := int((src.Size + partSize - 1) / partSize)
	parts := make([]types.CompletedPart, n)
	errs := make([]error, n)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, b.opts.Parallel)
	var wg sync.WaitGroup
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			num, off := int32(i+1), int64(i)*partSize
			out, err := b.client.UploadPartCopy(ctx, &awss3.UploadPartCopyInput{
				Bucket: aws.String(b.url.Bucket), Key: aws.String(key), UploadId: id, PartNumber: aws.Int32(num),
				CopySource: aws.String(copySource(src)), CopySourceIfMatch: aws.String(src.ETag),
				CopySourceRange: aws.String(fmt.Sprintf("bytes=%d-%d", off, min(off+partSize, src.Size)-1)),
			})
			switch {
			case err != nil:
				errs[i] = b.copyErr("UploadPartCopy", src, key, err)
			case out.CopyPartResult == nil:
				errs[i] = fmt.Errorf("copy %s to %s: part %d: the store answered no ETag", src.From.objURL(copyKey(src)), b.objURL(key), num)
			default:
				parts[i] = types.CompletedPart{PartNumber: aws.Int32(num), ETag: out.CopyPartResult.ETag}
				return
			}
			cancel()
		}(i)
	}
	wg.Wait()
	if err := firstErr(errs); err != nil {
		return nil, err
	}
	// A cancelled ctx may have stopped the loop before every part was started.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return parts, nil
}

// partsETag is the ETag of an object completed from parts with these ETags (each the MD5 of
// its bytes): the MD5 of their MD5s, "-" and their count; "" when a part's ETag is not an MD5.
func partsETag(parts []types.CompletedPart) string {
	h := md5.New()
	for _, p := range parts {
		d, err := hex.DecodeString(strings.Trim(aws.ToString(p.ETag), `"`))
		if err != nil || len(d) != md5.Size {
			return ""
		}
		h.Write(d)
	}
	return fmt.Sprintf(`"%s-%d"`, hex.EncodeToString(h.Sum(nil)), len(parts))
}

// checkCopy checks the copy at key of src: a HEAD must find it of the size the manifest lists
// (fe) with the ETag the copy answered; and its content must be src's, by the first of these
// the store gives: the SHA-256 it computed of the copy (CopyObject's checksum) against the
// manifest's; the copy's ETag equal to the source's (an MD5 of the same bytes, or of the same
// parts' MD5s: a copy made in the source's parts); else the copy is read back whole and its
// SHA-256 checked (checkObject), the only case that reads the bytes.
func (b *Backend) checkCopy(ctx context.Context, src CopySource, key string, fe shard.FileEntry, etag, sha string) error {
	h, err := b.head(ctx, key)
	if err != nil {
		return err
	}
	name := strings.TrimPrefix(key, b.url.keyPrefix())
	got := aws.ToString(h.ETag)
	if aws.ToInt64(h.ContentLength) != fe.Size || etag != "" && got != etag {
		return fmt.Errorf("%s: the copy of %s is %d bytes with ETag %s; the manifest lists %d bytes and the copy answered ETag %s",
			b.objURL(key), src.From.objURL(copyKey(src)), aws.ToInt64(h.ContentLength), got, fe.Size, etag)
	}
	if sha != "" {
		want, err := hex.DecodeString(fe.SHA256)
		if err != nil {
			return fmt.Errorf("%s: its manifest lists SHA-256 %q", fe.Path, fe.SHA256)
		}
		if sha != base64.StdEncoding.EncodeToString(want) {
			return fmt.Errorf("%s: the store computed the copy of %s's SHA-256 as %s (base64); the manifest lists %s", b.objURL(key), src.From.objURL(copyKey(src)), sha, fe.SHA256)
		}
		return nil
	}
	if got == src.ETag {
		return nil
	}
	return b.checkObject(ctx, name, fe.Size, fe.SHA256)
}

// RemoveDataset deletes the dataset of manifest m below the prefix (a part merged into a
// dataset: merge --remove-parts), whose manifest.json had the ETag etag when m was read: its
// manifest first, so that no reader opens it from then on, then the files m lists. Where the
// manifest is gone or has another ETag (the part was rebuilt since it was read: another dataset,
// whose files m does not name), nothing is deleted.
func (b *Backend) RemoveDataset(ctx context.Context, m *shard.Manifest, etag string) error {
	now, err := b.etag(ctx, shard.ManifestName)
	if err != nil {
		return fmt.Errorf("%s: its manifest, read with ETag %s, cannot be found again (%w): nothing deleted", b.url, etag, err)
	}
	if etag == "" || now != etag {
		return fmt.Errorf("%s: its manifest has ETag %s, not the one read (%s): the dataset was replaced since; nothing deleted", b.url, now, etag)
	}
	keys := []string{b.url.keyPrefix() + shard.ManifestName}
	for _, fe := range m.Files {
		keys = append(keys, b.url.keyPrefix()+fe.Path)
	}
	return b.deleteKeys(ctx, keys)
}
