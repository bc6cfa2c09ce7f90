package s3

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/storage"
)

// PublishOptions tune Publish.
type PublishOptions struct {
	// Clear removes what lies under the prefix when it holds no dataset (no manifest.json):
	// the objects and the open multipart uploads an interrupted build left. Without it such
	// leftovers refuse the publish. A prefix that holds a dataset is never cleared.
	Clear bool
	// Progress, if set, is called after each part or small file sent with the bytes sent so
	// far and the total.
	Progress func(sent, total int64)
	// PartSent, if set, is called after each part of a multipart upload is sent, with the
	// upload's context (a hook for tests that interrupt a build mid-upload).
	PartSent func(ctx context.Context, key string, part int32)
}

// ErrDatasetExists is what Publish's error matches when the prefix already holds a dataset.
var ErrDatasetExists = errors.New("a dataset exists there")

// Publish uploads the complete local dataset in dir (its manifest.json and the files it lists)
// below the backend's prefix, the way a dataset is committed to an object store, without
// renames:
//
//   - It refuses a prefix that holds a manifest.json (a dataset: replacing one is not done
//     yet) and, unless opts.Clear, a prefix that holds other objects or open multipart uploads
//     (an interrupted build's leftovers, or a build running now).
//   - Every data file is uploaded with a conditional write (If-None-Match: *; multipart, parts
//     in parallel, for the large ones), the SHA-256 of the bytes sent checked against the
//     manifest before the upload is completed, and the object then read back whole (ranged
//     GETs) and its SHA-256 and size checked against the manifest.
//   - manifest.json is uploaded last, also with If-None-Match: *, and read back. A dataset
//     exists exactly when its manifest does: a reader never sees a half-uploaded one, and of
//     two builds racing to one prefix at most one completes (the other's conditional writes
//     are refused, and it removes what it wrote).
//   - On any failure, cancellation included, the open multipart upload is aborted and the
//     objects this publish wrote are deleted (on a context of its own, so that a cancelled
//     build still cleans up); no manifest is ever written. A process killed outright leaves
//     its objects and at most one open upload per file in flight; the next Publish with Clear
//     removes them.
func (b *Backend) Publish(ctx context.Context, dir string, opts PublishOptions) (err error) {
	m, err := shard.ReadManifest(dir)
	if err != nil {
		return err
	}
	manifest, err := os.ReadFile(filepath.Join(dir, shard.ManifestName))
	if err != nil {
		return err
	}
	if err := b.CheckPrefix(ctx, opts.Clear); err != nil {
		return err
	}
	var total, sent int64
	for _, fe := range m.Files {
		total += fe.Size
	}
	total += int64(len(manifest))
	var written []string
	defer func() {
		if err != nil {
			b.removeAll(written)
		}
	}()
	for _, fe := range m.Files {
		key, err := b.upload(ctx, dir, fe, opts, func(n int64) {
			sent += n
			if opts.Progress != nil {
				opts.Progress(sent, total)
			}
		})
		if key != "" {
			written = append(written, key)
		}
		if err != nil {
			return err
		}
		if err := b.checkObject(ctx, fe.Path, fe.Size, fe.SHA256); err != nil {
			return err
		}
	}
	sum := sha256.Sum256(manifest)
	w, err := b.CreateObject(ctx, shard.ManifestName, true)
	if err != nil {
		return err
	}
	w.Write(manifest)
	if err := w.Commit(ctx); err != nil {
		w.Abort()
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s: another build published a dataset here first: %w (%w)", b.url, ErrDatasetExists, err)
		}
		return err
	}
	if err := b.checkObject(ctx, shard.ManifestName, int64(len(manifest)), hex.EncodeToString(sum[:])); err != nil {
		// The manifest is in place but does not read back as sent: take it away, so that no
		// dataset is there, rather than leave one that fails to verify.
		written = append(written, b.url.keyPrefix()+shard.ManifestName)
		return err
	}
	if opts.Progress != nil {
		opts.Progress(total, total)
	}
	return nil
}

// DatasetFileName reports whether name, relative to a dataset's prefix, is a file a packer build
// writes at the top of its output: manifest.json, shard-NNNNN.pks, the npy columns (images.npy,
// labels.npy, aux_NAME.npy, meta.jsonl) or data.h5 (TestDatasetFileNames in cmd/packer checks
// this list against what every output format writes). Nothing else under a prefix is ever
// removed by a build.
func DatasetFileName(name string) bool {
	if strings.Contains(name, "/") {
		return false
	}
	switch name {
	case shard.ManifestName, "images.npy", "labels.npy", "meta.jsonl", "data.h5":
		return true
	}
	return strings.HasPrefix(name, "shard-") && strings.HasSuffix(name, ".pks") ||
		strings.HasPrefix(name, "aux_") && strings.HasSuffix(name, ".npy")
}

// CheckPrefix refuses a prefix that holds a dataset (an error matching ErrDatasetExists), and
// one that holds objects or open multipart uploads a packer build does not write (always), or
// the leftovers of an interrupted build (open uploads and data objects under the names a build
// writes, no manifest) unless clear, which removes them.
// Publish calls it first; a build calls it before building, to fail before the work.
func (b *Backend) CheckPrefix(ctx context.Context, clear bool) error {
	if _, err := b.Stat(ctx, shard.ManifestName); err == nil {
		return fmt.Errorf("%s already holds a dataset (%s): %w; replacing a dataset in object storage is not supported yet (--force is refused there): build to another prefix, or delete its objects first", b.url, shard.ManifestName, ErrDatasetExists)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var objects, foreign []string
	if err := b.List(ctx, func(fi storage.FileInfo) error {
		objects = append(objects, b.url.keyPrefix()+fi.Name)
		if !DatasetFileName(fi.Name) {
			foreign = append(foreign, fi.Name)
		}
		return nil
	}); err != nil {
		return err
	}
	uploads, err := b.OpenUploads(ctx)
	if err != nil {
		return err
	}
	for _, u := range uploads {
		if name := strings.TrimPrefix(u.Key, b.url.keyPrefix()); !DatasetFileName(name) {
			foreign = append(foreign, name+" (an unfinished upload)")
		}
	}
	if len(objects) == 0 && len(uploads) == 0 {
		return nil
	}
	if len(foreign) > 0 {
		// Never delete what a packer build did not write: the prefix may hold the user's own
		// data, or other datasets under sub-prefixes.
		more := ""
		if len(foreign) > 3 {
			more = fmt.Sprintf(" and %d more", len(foreign)-3)
			foreign = foreign[:3]
		}
		return fmt.Errorf("%s holds objects a packer build does not write (%s%s): refusing to build there, --force included (it never deletes them); give -o a new or empty prefix",
			b.url, strings.Join(foreign, ", "), more)
	}
	if !clear {
		return fmt.Errorf("%s holds %d objects and %d unfinished multipart uploads but no %s: the leftovers of an interrupted build, or a build writing there now; when no build is running, build again with --force to remove them", b.url, len(objects), len(uploads), shard.ManifestName)
	}
	for _, u := range uploads {
		if _, err := b.client.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{
			Bucket: aws.String(b.url.Bucket), Key: aws.String(u.Key), UploadId: aws.String(u.ID),
		}); err != nil {
			return b.wrap("AbortMultipartUpload", b.objURL(u.Key), err)
		}
	}
	for _, key := range objects {
		if _, err := b.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(b.url.Bucket), Key: aws.String(key)}); err != nil {
			return b.wrap("DeleteObject", b.objURL(key), err)
		}
	}
	return nil
}

// Upload is an open multipart upload.
type Upload struct {
	Key, ID string
}

// OpenUploads lists the multipart uploads open below the prefix.
func (b *Backend) OpenUploads(ctx context.Context) ([]Upload, error) {
	var ups []Upload
	in := &awss3.ListMultipartUploadsInput{Bucket: aws.String(b.url.Bucket), Prefix: aws.String(b.url.keyPrefix())}
	for {
		out, err := b.client.ListMultipartUploads(ctx, in)
		if err != nil {
			return nil, b.wrap("ListMultipartUploads", b.url, err)
		}
		for _, u := range out.Uploads {
			ups = append(ups, Upload{Key: aws.ToString(u.Key), ID: aws.ToString(u.UploadId)})
		}
		if !aws.ToBool(out.IsTruncated) {
			return ups, nil
		}
		in.KeyMarker, in.UploadIdMarker = out.NextKeyMarker, out.NextUploadIdMarker
	}
}

// upload sends the local file of fe with a conditional write, checking the SHA-256 of what
// was sent against the manifest before completing it. It returns the key once the object
// exists (committed by this upload).
func (b *Backend) upload(ctx context.Context, dir string, fe shard.FileEntry, opts PublishOptions, sent func(int64)) (string, error) {
	f, err := os.Open(filepath.Join(dir, filepath.FromSlash(fe.Path)))
	if err != nil {
		return "", err
	}
	defer f.Close()
	w, err := b.CreateObject(ctx, fe.Path, true)
	if err != nil {
		return "", err
	}
	w.partSent = opts.PartSent
	buf := make([]byte, 1<<20)
	for {
		n, rerr := f.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				w.Abort()
				return "", err
			}
			sent(int64(n))
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			w.Abort()
			return "", rerr
		}
	}
	if got := hex.EncodeToString(w.Sum()); got != strings.ToLower(fe.SHA256) || w.Size() != fe.Size {
		w.Abort()
		return "", fmt.Errorf("%s: the local file changed during the upload (SHA-256 %s, %d bytes; the manifest says %s, %d bytes)", fe.Path, got, w.Size(), fe.SHA256, fe.Size)
	}
	if err := w.Commit(ctx); err != nil {
		w.Abort()
		if errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("%s: another build is writing there: %w", b.url, err)
		}
		return "", err
	}
	return w.key, nil
}

// checkObject reads the object name back whole and checks its size and SHA-256.
func (b *Backend) checkObject(ctx context.Context, name string, size int64, sha string) error {
	r, err := b.Open(ctx, name)
	if err != nil {
		return err
	}
	defer r.Close()
	h := sha256.New()
	buf := make([]byte, 8<<20)
	var off int64
	for off < r.Size() {
		n, err := r.ReadAt(buf[:min(int64(len(buf)), r.Size()-off)], off)
		h.Write(buf[:n])
		off += int64(n)
		if err != nil && !(errors.Is(err, io.EOF) && off == r.Size()) {
			return err
		}
	}
	if got := hex.EncodeToString(h.Sum(nil)); r.Size() != size || got != strings.ToLower(sha) {
		return fmt.Errorf("%s: the uploaded object reads back as %d bytes with SHA-256 %s, but %d bytes with SHA-256 %s were sent",
			b.objURL(b.url.keyPrefix()+name), r.Size(), got, size, sha)
	}
	return nil
}

// removeAll deletes the keys (the objects a failed publish wrote), on a context of its own.
func (b *Backend) removeAll(keys []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, key := range keys {
		b.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(b.url.Bucket), Key: aws.String(key)})
	}
}
