package s3

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/storage"
)

// PublishOptions tune Publish.
type PublishOptions struct {
	// Clear removes the objects and open multipart uploads under the prefix, under the names a
	// build writes, that no manifest.json lists: an interrupted build's leftovers. Without it
	// such leftovers refuse the publish. The files of a dataset there are never cleared.
	Clear bool
	// Replace allows a prefix that holds a dataset: the new files are written under a new
	// generation sub-prefix (GenerationPrefix), the manifest is replaced with a conditional
	// write on the old one's ETag, and only then are the old dataset's files deleted.
	Replace bool
	// Formats, if set, are the format names a dataset Replace replaces may have: a manifest
	// there that names another is refused as invalid (not a packer dataset to delete).
	Formats []string
	// Warn, if set, is told what went wrong after the publish succeeded (an old file that
	// could not be deleted).
	Warn func(string)
	// Progress, if set, is called after each part or small file sent with the bytes sent so
	// far and the total.
	Progress func(sent, total int64)
	// PartSent, if set, is called after each part of a multipart upload is sent, with the
	// upload's context (a hook for tests that interrupt a build mid-upload).
	PartSent func(ctx context.Context, key string, part int32)
	// Command is the packer command that publishes ("build" or "merge"; "" is build): a
	// refusal that asks for it to be run again names it.
	Command string

	// beforeManifest, if set, is called once every file is in place, before the manifest is
	// written; its error fails the publish (StreamStage: the checkpoint object is removed).
	beforeManifest func(ctx context.Context) error
}

// ErrFilesKept is what the error of a publish matches when its manifest may be in place (it
// could be neither read back nor taken away): the files it wrote are left, also by the callers
// that remove them after a failure, so that no published manifest lists a deleted file.
var ErrFilesKept = errors.New("the manifest may be in place: the dataset's files are left")

// ErrDatasetExists is what Publish's error matches when the prefix already holds a dataset.
var ErrDatasetExists = errors.New("a dataset exists there")

// Publish uploads the complete local dataset in dir (its manifest.json and the files it lists)
// below the backend's prefix, the way a dataset is committed to an object store, without
// renames:
//
//   - It refuses a prefix that holds a manifest.json (a dataset) unless opts.Replace (see
//     there), objects a build does not write (always) and, unless opts.Clear, objects or open
//     multipart uploads that no manifest lists (an interrupted build's leftovers, or a build
//     running now).
//   - Every data file is uploaded with a conditional write (If-None-Match: *; multipart, parts
//     in parallel, for the large ones), the SHA-256 of the bytes sent checked against the
//     manifest before the upload is completed. Each body carries its SHA-256 checksum, which
//     the store verifies (checksums): where the store answers, at the commit, the checksum of
//     what it stored as what was sent, and has shown that it refuses a body whose checksum
//     does not match (storeVerifies), the object is checked; otherwise it is read back whole
//     (ranged GETs) and its SHA-256 and size checked against the manifest.
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
	old, err := b.prepare(ctx, opts.Clear, opts.Replace, opts.Formats, leftovers{}, opts.Command)
	if err != nil {
		return err
	}
	gen, err := newGeneration(old)
	if err != nil {
		return err
	}
	return b.publish(ctx, dir, m, manifest, opts, old, gen, nil)
}

// newGeneration is the generation sub-prefix the files of a new dataset go under: none for a
// prefix without a dataset; a new one where the new dataset replaces old, so that the old
// dataset's objects stay whole until the new manifest is in place.
func newGeneration(old *oldDataset) (string, error) {
	if old == nil {
		return "", nil
	}
	var r [8]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", err
	}
	return GenerationPrefix + hex.EncodeToString(r[:]) + "/", nil
}

// publish is Publish once the prefix is prepared (old: the dataset replaced, gen: the
// generation the files go under). stored, if set, reports the files that are in the store
// already (uploaded and checked as the build went: StreamStage), which are neither sent nor
// read back again.
func (b *Backend) publish(ctx context.Context, dir string, m *shard.Manifest, manifest []byte, opts PublishOptions, old *oldDataset, gen string, stored func(shard.FileEntry) bool) (err error) {
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
	// Each object the store did not verify is read back and checked while the next one uploads
	// (one check in flight); every check has passed before the manifest is written.
	checkCtx, cancelChecks := context.WithCancel(ctx)
	defer cancelChecks()
	var checking chan error
	waitCheck := func() error {
		if checking == nil {
			return nil
		}
		err := <-checking
		checking = nil
		return err
	}
	defer func() {
		cancelChecks()
		waitCheck() // no check outlives Publish (its error, if any, is already returned)
	}()
	for _, fe := range m.Files {
		if stored != nil && stored(fe) {
			sent += fe.Size
			continue
		}
		w, err := b.upload(ctx, dir, fe, gen+fe.Path, opts, func(n int64) {
			sent += n
			if opts.Progress != nil {
				opts.Progress(sent, total)
			}
		})
		if err != nil {
			return err
		}
		written = append(written, w.key)
		if err := waitCheck(); err != nil {
			return err
		}
		if b.verified(ctx, w) {
			continue
		}
		checking = make(chan error, 1)
		go func(name string, size int64, sum string, done chan<- error) {
			done <- b.checkObject(checkCtx, name, size, sum)
		}(gen+fe.Path, fe.Size, fe.SHA256, checking)
	}
	if err := waitCheck(); err != nil {
		return err
	}
	if opts.beforeManifest != nil {
		if err := opts.beforeManifest(ctx); err != nil {
			return err
		}
	}
	if old != nil {
		for i := range m.Files {
			m.Files[i].Path = gen + m.Files[i].Path
		}
		if manifest, err = m.Marshal(); err != nil {
			return err
		}
	}
	// The manifest is read back after its write, and on any failure taken away before its
	// files, so that no published manifest ever lists a file this publish deleted.
	werr := b.putManifest(ctx, manifest, old)
	ours, rerr := b.manifestIs(manifest)
	switch {
	case ours:
		// In place. Where werr is set, the store carried the write out but its answer was
		// lost, and the retry was refused (the manifest exists, or has another ETag than the
		// one replaced): the files it lists must stay.
	case werr != nil && rerr == nil:
		return werr // not written (another build's manifest is there, or none)
	case werr != nil:
		written = nil // this publish's manifest may be in place: its files stay, for --force to clear
		return fmt.Errorf("%w; %w: whether the manifest there is this build's could not be read (%v)", werr, ErrFilesKept, rerr)
	default:
		// Written, but it does not read back as sent: taken away, so that no dataset is
		// there rather than one that fails to verify; its files only once it is gone.
		if rerr == nil {
			rerr = fmt.Errorf("%s: the manifest written reads back with other bytes", b.objURL(b.url.keyPrefix()+shard.ManifestName))
		}
		if derr := b.removeKey(b.url.keyPrefix() + shard.ManifestName); derr != nil {
			written = nil
			return fmt.Errorf("%w; %w: the manifest could not be taken away (%v)", rerr, ErrFilesKept, derr)
		}
		return rerr
	}
	if old != nil {
		// The new dataset is in place: the old one's files are no longer read by anyone who
		// opens the dataset from now on. A reader that opened the old manifest before the
		// swap may still be reading them; it fails with an error naming the object (its
		// reads are pinned to the ETags it opened) rather than reading new bytes.
		for _, key := range old.files {
			if _, err := b.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(b.url.Bucket), Key: aws.String(key)}); err != nil && opts.Warn != nil {
				opts.Warn(fmt.Sprintf("%s: the replaced dataset's object could not be deleted (%v); the next build with --force removes it", b.objURL(key), b.wrap("DeleteObject", b.objURL(key), err)))
			}
		}
	}
	if opts.Progress != nil {
		opts.Progress(total, total)
	}
	return nil
}

// putManifest writes manifest.json: a new one (If-None-Match), or, where old is set, in place of
// old's (swapManifest).
func (b *Backend) putManifest(ctx context.Context, manifest []byte, old *oldDataset) error {
	if old != nil {
		return b.swapManifest(ctx, manifest, old.etag)
	}
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
	return nil
}

// swapManifest replaces manifest.json with data on the condition that it is still the one
// with the ETag etag (If-Match): of two builds replacing one dataset at once, one wins.
func (b *Backend) swapManifest(ctx context.Context, data []byte, etag string) error {
	key := b.url.keyPrefix() + shard.ManifestName
	_, err := b.client.PutObject(ctx, &awss3.PutObjectInput{
		Bucket:        aws.String(b.url.Bucket),
		Key:           aws.String(key),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
		IfMatch:       aws.String(etag),
	})
	if err != nil {
		err = b.wrap("PutObject", b.objURL(key), err)
		if errors.Is(err, fs.ErrExist) || errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s: the dataset was replaced or removed by someone else while this build ran: %w", b.url, err)
		}
	}
	return err
}

// DatasetFileName reports whether name, relative to a dataset's prefix, is a file a packer build
// writes at the top of its output: manifest.json, shard-NNNNN.pks, the npy columns (images.npy,
// labels.npy, aux_NAME.npy, meta.jsonl) or data.h5 (TestDatasetFileNames in cmd/packer checks
// this list against what every output format writes). Nothing else under a prefix is ever
// removed by a build.
func DatasetFileName(name string) bool {
	if gen, rest, ok := strings.Cut(name, "/"); ok {
		return isGeneration(gen) && !strings.Contains(rest, "/") && rest != shard.ManifestName && DatasetFileName(rest)
	}
	switch name {
	case shard.ManifestName, "images.npy", "labels.npy", "meta.jsonl", "data.h5":
		return true
	}
	return strings.HasPrefix(name, "shard-") && strings.HasSuffix(name, ".pks") ||
		strings.HasPrefix(name, "aux_") && strings.HasSuffix(name, ".npy")
}

// GenerationPrefix starts the name of the sub-prefix a dataset replacing another one
// (PublishOptions.Replace) writes its files under: .packer-gen-<16 hex digits>/.
const GenerationPrefix = ".packer-gen-"

func isGeneration(s string) bool {
	hexs, ok := strings.CutPrefix(s, GenerationPrefix)
	if !ok || len(hexs) != 16 {
		return false
	}
	_, err := hex.DecodeString(hexs)
	return err == nil
}

// CheckPrefix refuses a prefix that holds a dataset (an error matching ErrDatasetExists)
// unless replace, and one that holds objects or open multipart uploads a packer build does not
// write (always), or the leftovers of an interrupted build (open uploads and data objects
// under the names a build writes that no manifest lists) unless clear, which removes them. It
// never removes the files of the dataset there. Publish calls it first; a build calls it
// before building, to fail before the work. formats, if set, are the format names the dataset
// there may have (PublishOptions.Formats).
func (b *Backend) CheckPrefix(ctx context.Context, clear, replace bool, formats []string) error {
	_, err := b.prepare(ctx, clear, replace, formats, leftovers{}, "")
	return err
}

// leftovers tells prepare which leftovers under the names a build writes are an interrupted
// build's of this stage's own (StreamStage): mine reports them (nil: none are); with keep they
// are kept, for the resumed build to check and take over, and every open upload under those
// names is aborted; without it they are removed, clear or not.
type leftovers struct {
	mine func(name string) bool
	keep bool
}

// againWithForce tells how the packer command (PublishOptions.Command) removes the leftovers
// that refuse it: run again with --force (a build, also with --resume).
func againWithForce(command string) string {
	if command == "" || command == "build" {
		return "build again with --force to remove them (or with --resume, where they are an interrupted build's)"
	}
	return command + " again with --force to remove them"
}

// oldDataset is the dataset a publish replaces: its manifest's ETag and its files' keys.
type oldDataset struct {
	etag  string
	files []string
}

// prepare is CheckPrefix, returning the dataset to replace, if any; command is the packer
// command that is to write there (PublishOptions.Command), which a refusal of leftovers asks to
// be run again with --force.
func (b *Backend) prepare(ctx context.Context, clear, replace bool, formats []string, own leftovers, command string) (*oldDataset, error) {
	var old *oldDataset
	if etag, err := b.etag(ctx, shard.ManifestName); err == nil {
		if !replace {
			return nil, fmt.Errorf("%s already holds a dataset (%s): %w; --force replaces it (its objects are deleted only once the new manifest is in place)", b.url, shard.ManifestName, ErrDatasetExists)
		}
		m, err := shard.ReadManifestFormats(storage.ShardFS(ctx, b), formats)
		if err != nil {
			return nil, fmt.Errorf("the dataset to replace: %w", err)
		}
		if again, err := b.etag(ctx, shard.ManifestName); err != nil || again != etag {
			return nil, fmt.Errorf("%s: the dataset there changed while it was read (another build?); try again", b.url)
		}
		old = &oldDataset{etag: etag}
		for _, fe := range m.Files {
			old.files = append(old.files, b.url.keyPrefix()+fe.Path)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var objects, foreign, mine, control []string
	if err := b.List(ctx, func(fi storage.FileInfo) error {
		key := b.url.keyPrefix() + fi.Name
		if old != nil && (fi.Name == shard.ManifestName || slices.Contains(old.files, key)) {
			// The dataset being replaced (its manifest lists the file, whatever its name: the
			// files of its fields, NAME.npy, are named by the schema): kept until the new one
			// is in place.
			return nil
		}
		if !DatasetFileName(fi.Name) && !controlObject(fi.Name) {
			foreign = append(foreign, fi.Name)
		} else if own.mine != nil && own.mine(fi.Name) {
			if !own.keep {
				mine = append(mine, key)
			}
			return nil
		}
		if controlObject(fi.Name) {
			control = append(control, fi.Name)
		}
		objects = append(objects, key)
		return nil
	}); err != nil {
		return nil, err
	}
	allUploads, err := b.OpenUploads(ctx)
	if err != nil {
		return nil, err
	}
	var uploads, mineUploads []Upload
	for _, u := range allUploads {
		name := strings.TrimPrefix(u.Key, b.url.keyPrefix())
		switch {
		case !DatasetFileName(name):
			foreign = append(foreign, name+" (an unfinished upload)")
		case own.keep && own.mine != nil && own.mine(name):
			mineUploads = append(mineUploads, u)
		default:
			uploads = append(uploads, u)
		}
	}
	if len(foreign) == 0 {
		// An interrupted build's own leftovers: its unfinished uploads are aborted (a resumed
		// build uploads those files again), its objects removed unless kept.
		if err := b.abortUploads(ctx, mineUploads); err != nil {
			return nil, err
		}
		if err := b.deleteKeys(ctx, mine); err != nil {
			return nil, err
		}
	}
	if len(objects) == 0 && len(uploads) == 0 && len(foreign) == 0 {
		return old, nil
	}
	if len(foreign) > 0 {
		// Never delete what a packer build did not write: the prefix may hold the user's own
		// data, or other datasets under sub-prefixes.
		more := ""
		if len(foreign) > 3 {
			more = fmt.Sprintf(" and %d more", len(foreign)-3)
			foreign = foreign[:3]
		}
		return nil, fmt.Errorf("%s holds objects a packer build does not write (%s%s): refusing to build there, --force included (it never deletes them); give -o a new or empty prefix",
			b.url, strings.Join(foreign, ", "), more)
	}
	if !clear {
		who := ""
		for _, name := range control {
			// A build's checkpoint or a merge's claim names the command that wrote it.
			if data, _, err := b.readControl(ctx, name); err == nil && data != nil {
				who += fmt.Sprintf(" (%s: %s)", name, b.controlOwner(data))
			}
		}
		return nil, fmt.Errorf("%s holds %d objects and %d unfinished multipart uploads that no %s lists: the leftovers of an interrupted build or merge, or one writing there now%s; when none is running, %s", b.url, len(objects), len(uploads), shard.ManifestName, who, againWithForce(command))
	}
	if err := b.abortUploads(ctx, uploads); err != nil {
		return nil, err
	}
	if err := b.deleteKeys(ctx, objects); err != nil {
		return nil, err
	}
	return old, nil
}

// abortUploads aborts the open multipart uploads ups.
func (b *Backend) abortUploads(ctx context.Context, ups []Upload) error {
	for _, u := range ups {
		if _, err := b.client.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{
			Bucket: aws.String(b.url.Bucket), Key: aws.String(u.Key), UploadId: aws.String(u.ID),
		}); err != nil {
			return b.wrap("AbortMultipartUpload", b.objURL(u.Key), err)
		}
	}
	return nil
}

// deleteKeys deletes the objects keys.
func (b *Backend) deleteKeys(ctx context.Context, keys []string) error {
	for _, key := range keys {
		if _, err := b.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(b.url.Bucket), Key: aws.String(key)}); err != nil {
			return b.wrap("DeleteObject", b.objURL(key), err)
		}
	}
	return nil
}

// etag is the ETag of the object name (a HEAD request).
func (b *Backend) etag(ctx context.Context, name string) (string, error) {
	key, err := b.key(ctx, "stat", name)
	if err != nil {
		return "", err
	}
	out, err := b.head(ctx, key)
	if err != nil {
		return "", err
	}
	return aws.ToString(out.ETag), nil
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
// was sent against the manifest before completing it, each body with its checksum for the store
// to verify (Writer.checksums). It returns the committed writer once the object exists
// (committed by this upload).
func (b *Backend) upload(ctx context.Context, dir string, fe shard.FileEntry, name string, opts PublishOptions, sent func(int64)) (*Writer, error) {
	f, err := os.Open(filepath.Join(dir, filepath.FromSlash(fe.Path)))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if !readBack() {
		// The probe goes first, before any upload of this run is under way, so that a run
		// killed while it uploads leaves only its uploads' leftovers.
		b.storeVerifies(ctx, b.url.keyPrefix()+name)
	}
	w, err := b.CreateObject(ctx, name, true)
	if err != nil {
		return nil, err
	}
	w.partSent = opts.PartSent
	w.unsigned = b.unsignedPayload()
	w.checksums = true
	buf := make([]byte, 1<<20)
	for {
		n, rerr := f.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				w.Abort()
				return nil, err
			}
			sent(int64(n))
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			w.Abort()
			return nil, rerr
		}
	}
	if got := hex.EncodeToString(w.Sum()); got != strings.ToLower(fe.SHA256) || w.Size() != fe.Size {
		w.Abort()
		return nil, fmt.Errorf("%s: the local file changed during the upload (SHA-256 %s, %d bytes; the manifest says %s, %d bytes)", fe.Path, got, w.Size(), fe.SHA256, fe.Size)
	}
	if err := w.Commit(ctx); err != nil {
		w.Abort()
		// A write the store carried out but whose answer was lost is tried again, and the
		// retry is refused (the object exists; a multipart upload is gone): where the object
		// there is this file, byte for byte, the upload was made.
		if !errors.Is(err, context.Canceled) && b.checkObject(ctx, name, fe.Size, fe.SHA256) == nil {
			w.etag = "" // its answer was lost: the ETag is asked for again, the bytes were read back
			return w, nil
		}
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("%s: another build is writing there: %w", b.url, err)
		}
		return nil, err
	}
	return w, nil
}

// unsignedPayload reports whether Publish sends a dataset's files as UNSIGNED-PAYLOAD. As the AWS
// SDKs do, only over HTTPS (the default AWS endpoint, or an https:// AWS_ENDPOINT_URL), where TLS
// protects the bodies; over plain HTTP each body is signed with its SHA-256, so the server checks
// it. Either way Publish hashes what it sends and has the store verify each body's SHA-256
// checksum (or reads the object back); the signed payload's hash is that same sum, computed once.
// PACKER_S3_UNSIGNED_PAYLOAD=1 or 0 overrides the choice.
func (b *Backend) unsignedPayload() bool {
	switch os.Getenv("PACKER_S3_UNSIGNED_PAYLOAD") {
	case "1":
		return true
	case "0":
		return false
	}
	ep := b.client.Options().BaseEndpoint
	return ep == nil || strings.HasPrefix(strings.ToLower(*ep), "https://")
}

// verified reports whether the object w committed needs no read-back: the store answered the
// checksum of the bytes sent (Writer.StoreVerified), and it is a store that verifies the
// checksums it is sent (storeVerifies). PACKER_S3_READBACK=1 reads every object back all the
// same.
func (b *Backend) verified(ctx context.Context, w *Writer) bool {
	return !readBack() && w.StoreVerified() && b.storeVerifies(ctx, w.key)
}

// readBack reports whether PACKER_S3_READBACK=1 asks for every uploaded object to be read back.
func readBack() bool { return os.Getenv("PACKER_S3_READBACK") == "1" }

// storeVerifies reports whether the store refuses a body whose SHA-256 checksum does not match
// it, found once per backend: a store could answer the checksum it was sent without computing
// one. The probe is one part, of a few bytes and the wrong checksum, of a multipart upload
// under key (the name of a file being uploaded, so that the upload, should the process be
// killed before aborting it, is an interrupted build's leftover like any other), which the
// store must refuse with BadDigest; the upload is then aborted. Nothing is stored either way.
func (b *Backend) storeVerifies(ctx context.Context, key string) bool {
	b.probe.Do(func() {
		out, err := b.client.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{
			Bucket: aws.String(b.url.Bucket), Key: aws.String(key), ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
		})
		if err != nil {
			return
		}
		body := []byte("packer: a part whose checksum is not its own")
		wrong := sha256.Sum256(append(body, '!'))
		_, err = b.client.UploadPart(ctx, &awss3.UploadPartInput{
			Bucket: aws.String(b.url.Bucket), Key: aws.String(key), UploadId: out.UploadId,
			PartNumber: aws.Int32(1), Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body))),
			ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(wrong[:])),
		})
		var api smithy.APIError
		refused := errors.As(err, &api) && api.ErrorCode() == "BadDigest"
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_, aerr := b.client.AbortMultipartUpload(actx, &awss3.AbortMultipartUploadInput{
			Bucket: aws.String(b.url.Bucket), Key: aws.String(key), UploadId: out.UploadId,
		})
		b.verifies = refused && aerr == nil
	})
	return b.verifies
}

// checkParallel is how many ranged GETs checkObject keeps in flight.
const checkParallel = 4

// checkObject reads the object name back whole and checks its size and SHA-256.
func (b *Backend) checkObject(ctx context.Context, name string, size int64, sha string) error {
	r, err := b.openStore(ctx, name) // the store's bytes, never a cached copy
	if err != nil {
		return err
	}
	defer r.Close()
	// Ranged GETs of 8 MiB, up to checkParallel in flight, hashed in order as they arrive.
	const chunk = 8 << 20
	n := int((r.Size() + chunk - 1) / chunk)
	type result struct {
		buf []byte
		err error
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel (deferred below, so run first): no GET outlives r
	defer cancel()
	results := make([]chan result, n)
	for i := range results {
		results[i] = make(chan result, 1)
	}
	sem := make(chan struct{}, checkParallel)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < n; i++ {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				off := int64(i) * chunk
				buf := make([]byte, min(chunk, r.Size()-off))
				k, err := r.ReadAt(buf, off)
				if err != nil && errors.Is(err, io.EOF) && k == len(buf) {
					err = nil
				}
				results[i] <- result{buf[:k], err}
			}(i)
		}
	}()
	h := sha256.New()
	for i := 0; i < n; i++ {
		var res result
		select {
		case res = <-results[i]:
		case <-ctx.Done():
			return ctx.Err()
		}
		<-sem
		if res.err != nil {
			return res.err
		}
		h.Write(res.buf)
	}
	if got := hex.EncodeToString(h.Sum(nil)); r.Size() != size || got != strings.ToLower(sha) {
		return fmt.Errorf("%s: the uploaded object reads back as %d bytes with SHA-256 %s, but %d bytes with SHA-256 %s were sent",
			b.objURL(b.url.keyPrefix()+name), r.Size(), got, size, sha)
	}
	return nil
}

// manifestIs reports whether manifest.json below the prefix holds data, byte for byte (read
// from the store, never a cached copy), on a context of its own (a publish cancelled as it
// wrote the manifest must still tell whether it is there); a missing manifest is false.
func (b *Backend) manifestIs(data []byte) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := b.openStore(ctx, shard.ManifestName)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer r.Close()
	if r.Size() != int64(len(data)) {
		return false, nil
	}
	got := make([]byte, len(data))
	if _, err := r.ReadAt(got, 0); err != nil && !(errors.Is(err, io.EOF) && len(got) == 0) {
		return false, err
	}
	return bytes.Equal(got, data), nil
}

// removeKey deletes the object key, on a context of its own (a cancelled publish still cleans
// up).
func (b *Backend) removeKey(key string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := b.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(b.url.Bucket), Key: aws.String(key)})
	return b.wrap("DeleteObject", b.objURL(key), err)
}

// removeAll deletes the keys (the objects a failed publish wrote), on a context of its own.
func (b *Backend) removeAll(keys []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, key := range keys {
		b.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(b.url.Bucket), Key: aws.String(key)})
	}
}
