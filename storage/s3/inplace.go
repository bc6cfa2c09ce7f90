package s3

// Parts built in place: parts built with --cut-inputs whose every chunk makes one shard write
// that shard under the name the one-machine build gives it, directly below the dataset's
// prefix, and their part manifest (the part record) below PartsPrefix; the merge then checks
// the parts where they are and writes only the dataset's manifest (PublishInPlace), copying
// nothing.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/storage"
)

// PartsPrefix is the sub-prefix of a dataset's prefix under which parts built in place keep
// their records until the merge: PartsPrefix + "part-IIIII-of-NNNNN/" + manifest.json.
const PartsPrefix = ".packer-parts/"

// PartRecordDir is the sub-prefix of the record of part index of count (with its slash).
func PartRecordDir(index, count int) string {
	return fmt.Sprintf("%spart-%05d-of-%05d/", PartsPrefix, index, count)
}

// ErrInPlace is what an error matches when a prefix cannot take, or merge, parts built in
// place: what is there is not theirs, or not of the same build.
var ErrInPlace = errors.New("the prefix cannot take parts built in place")

// InPlacePart is a part to write in place: its files in the local folder Dir (Files, as its
// manifest lists them), each uploaded as Names[i] below the prefix; Record is the part's
// manifest as the merge reads it, written last as RecordDir + manifest.json.
type InPlacePart struct {
	Dir       string
	Files     []shard.FileEntry
	Names     []string
	Record    []byte
	RecordDir string
	// Force removes this part's own objects (its record and the objects under Names) that
	// an earlier run left, and nothing else; without it they refuse the write.
	Force bool
	// Same checks the record of another part found under PartsPrefix (its name and bytes):
	// its error refuses the write before anything is written.
	Same func(name string, record []byte) error
}

// PutInPlacePart writes the part p below the prefix. Before it writes anything it refuses a
// prefix with a dataset (ErrDatasetExists), with a build's checkpoint or a merge's claim, or
// with objects that are neither shards nor part records (ErrInPlace), and a prefix whose part
// records are of another build (p.Same). Every object is written with a conditional write
// (If-None-Match: *): of two runs of one part, the loser fails and deletes only what it wrote;
// so does any failure. The record goes last.
func (b *Backend) PutInPlacePart(ctx context.Context, p InPlacePart) (err error) {
	own := map[string]bool{}
	for _, n := range p.Names {
		own[n] = true
	}
	var leftovers []string
	if err := b.scanInPlace(ctx, false, func(name string) error {
		switch {
		case strings.HasPrefix(name, p.RecordDir) || own[name]:
			leftovers = append(leftovers, name)
		case strings.HasPrefix(name, PartsPrefix):
			if path, ok := strings.CutSuffix(name, "/"+shard.ManifestName); ok && !strings.Contains(strings.TrimPrefix(path, PartsPrefix), "/") {
				data, _, err := b.readControl(ctx, name)
				if err != nil {
					return err
				}
				return p.Same(name, data)
			}
		}
		return nil
	}); err != nil {
		return err
	}
	if len(leftovers) > 0 {
		if !p.Force {
			return fmt.Errorf("%s: %w: %d objects of this part are there already (%s, ...): it was built, or an earlier run was interrupted; build it again with --force to remove them (only this part's objects)", b.url, ErrInPlace, len(leftovers), leftovers[0])
		}
		// The record first: from then on the part is not there for a merge.
		slices.SortFunc(leftovers, func(x, y string) int {
			return boolInt(!strings.HasPrefix(x, p.RecordDir)) - boolInt(!strings.HasPrefix(y, p.RecordDir))
		})
		keys := make([]string, len(leftovers))
		for i, n := range leftovers {
			keys[i] = b.url.keyPrefix() + n
		}
		if err := b.deleteKeys(ctx, keys); err != nil {
			return err
		}
	}
	// The part's claim: of two runs of it at once, the second fails here, having written
	// nothing.
	o, err := newOwner()
	if err != nil {
		return err
	}
	data, err := json.Marshal(o)
	if err != nil {
		return err
	}
	claim := p.RecordDir + PartClaimName
	etag, err := b.putControl(ctx, claim, data, "")
	if err != nil {
		return fmt.Errorf("%s: another run of this part is writing there: %w", b.url, err)
	}
	var written []string
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if derr := b.dropControl(cctx, claim, etag); err == nil {
			err = derr
		} else if errors.Is(derr, ErrTakenOver) {
			err = fmt.Errorf("%w; nothing was deleted: %w", err, derr)
			return
		}
		if err != nil {
			b.removeAll(written)
		}
	}()
	for i, fe := range p.Files {
		w, err := b.upload(ctx, p.Dir, fe, p.Names[i], PublishOptions{}, func(int64) {})
		if err != nil {
			return err
		}
		if w.etag == "" {
			// Its write was refused and the object there read back as this file: it may be
			// another run's, so it is not deleted on failure.
			continue
		}
		written = append(written, w.key)
		if !b.verified(ctx, w) {
			if err := b.checkObject(ctx, p.Names[i], fe.Size, fe.SHA256); err != nil {
				return err
			}
		}
	}
	if err := b.otherControl(ctx, ClaimName); err != nil {
		return fmt.Errorf("%s: a merge is writing there: %w", b.url, err)
	}
	if _, now, err := b.readControl(ctx, claim); err != nil || now != etag {
		return cmpOr(err, fmt.Errorf("%s: %w: the claim of this part was removed or replaced (a run with --force?)", b.objURL(b.url.keyPrefix()+claim), ErrTakenOver))
	}
	w, err := b.CreateObject(ctx, p.RecordDir+shard.ManifestName, true)
	if err != nil {
		return err
	}
	w.Write(p.Record)
	if err := w.Commit(ctx); err != nil {
		w.Abort()
		return fmt.Errorf("%s: write the part's record: %w", b.url, err)
	}
	return nil
}

// PartClaimName is the object below a part's record sub-prefix that a run of the part writes
// first and removes last (If-None-Match: one run of a part at a time).
const PartClaimName = "claim.json"

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func boolInt(v bool) int {
	if v {
		return 1
	}
	return 0
}

// scanInPlace checks the prefix for parts built in place (PutInPlacePart, PublishInPlace): no
// dataset, no build's checkpoint or merge's claim, and nothing but shards and part records;
// fn is called with the name of each shard and object under PartsPrefix. claimed: the claim
// there is the caller's (a merge's own).
func (b *Backend) scanInPlace(ctx context.Context, claimed bool, fn func(name string) error) error {
	if err := b.noDataset(ctx); err != nil {
		return err
	}
	return b.List(ctx, func(fi storage.FileInfo) error {
		n := fi.Name
		switch {
		case n == CheckpointName || segmentName(n):
			return fmt.Errorf("%s: %w: it holds %s, the checkpoint of a build of a whole dataset there", b.url, ErrInPlace, n)
		case n == ClaimName && claimed:
			return nil
		case n == ClaimName:
			return fmt.Errorf("%s: %w: a merge is writing there (%s)", b.url, ErrInPlace, n)
		case strings.HasPrefix(n, PartsPrefix) || !strings.Contains(n, "/") && strings.HasPrefix(n, "shard-") && strings.HasSuffix(n, ".pks"):
			return fn(n)
		}
		return fmt.Errorf("%s: %w: %s is not a shard or part record of parts built in place (not packer's, or another kind of build's)", b.url, ErrInPlace, n)
	})
}

// noDataset refuses a prefix with a manifest.json.
func (b *Backend) noDataset(ctx context.Context) error {
	if _, err := b.etag(ctx, shard.ManifestName); err == nil {
		return fmt.Errorf("%s already holds a dataset (%s): %w; parts are built and merged in place only where no dataset is (remove it, or build the parts into folders of their own and merge them by copy)", b.url, shard.ManifestName, ErrDatasetExists)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// InPlaceFS reads the part whose record is below recordDir as a dataset: its manifest.json is
// the record, its shards the objects of their names below the prefix, each pinned as p pins
// them.
type InPlaceFS struct {
	P         *PinnedFS
	RecordDir string
}

func (f InPlaceFS) name(n string) string {
	if n == shard.ManifestName {
		return f.RecordDir + n
	}
	return n
}

// Open opens name (the part's manifest: its record).
func (f InPlaceFS) Open(name string) (shard.File, error) { return f.P.Open(f.name(name)) }

// ETag is the ETag name was pinned to.
func (f InPlaceFS) ETag(name string) string { return f.P.ETag(f.name(name)) }

// PartRecords lists the part records below PartsPrefix (their sub-prefixes, in name order);
// a prefix with a dataset is refused (ErrDatasetExists).
func (b *Backend) PartRecords(ctx context.Context) ([]string, error) {
	if err := b.noDataset(ctx); err != nil {
		return nil, err
	}
	var dirs []string
	err := b.List(ctx, func(fi storage.FileInfo) error {
		if d, ok := strings.CutSuffix(fi.Name, shard.ManifestName); ok && strings.HasPrefix(d, PartsPrefix) && strings.Count(d, "/") == 2 {
			dirs = append(dirs, d)
		}
		return nil
	})
	slices.Sort(dirs)
	return dirs, err
}

// PublishInPlace publishes the dataset of manifest m (its bytes manifest), whose files are
// below the prefix already, each the version of ETag etags[i] (of m.Files[i]), as checked: it
// claims the prefix as CopyPublish does (ClaimName), checks the prefix (scanInPlace: nothing
// there but shards and part records, no dataset) and that every file is there with its ETag
// and no other shard is, writes manifest.json last as a publish does (conditional write, read
// back), then deletes everything under PartsPrefix (the part records). It copies nothing.
func (b *Backend) PublishInPlace(ctx context.Context, m *shard.Manifest, manifest []byte, etags []string, opts PublishOptions) (err error) {
	c, err := b.claimPrefix(ctx)
	if err != nil {
		return err
	}
	held := true
	defer func() {
		if err != nil && held {
			err = errors.Join(err, c.release())
		}
	}()
	listed := map[string]bool{}
	for _, fe := range m.Files {
		listed[fe.Path] = true
	}
	var parts []string
	if err := b.scanInPlace(ctx, true, func(name string) error {
		if strings.HasSuffix(name, "/"+PartClaimName) {
			return fmt.Errorf("%s: %w: %s: a part is being built there, or was interrupted (build it again with --force)", b.url, ErrInPlace, name)
		}
		if strings.HasPrefix(name, PartsPrefix) {
			parts = append(parts, b.url.keyPrefix()+name)
			return nil
		}
		if !listed[name] {
			return fmt.Errorf("%s: %w: %s is a shard no part lists (a part of another build, or one rebuilt while the merge ran?)", b.url, ErrInPlace, name)
		}
		return nil
	}); err != nil {
		return err
	}
	for i, fe := range m.Files {
		e, err := b.etag(ctx, fe.Path)
		if err != nil {
			return err
		}
		if e != etags[i] {
			return fmt.Errorf("%s: %w: its ETag was %s when checked, now %s", b.objURL(b.url.keyPrefix()+fe.Path), ErrChanged, etags[i], e)
		}
	}
	opts.beforeManifest = func(ctx context.Context) error {
		if err := c.b.dropControl(ctx, ClaimName, c.etag); err != nil {
			return err
		}
		held = false
		return nil
	}
	if err := b.publish(ctx, "", m, manifest, opts, nil, "", func(shard.FileEntry) bool { return true }); err != nil {
		return err // no file is deleted: they are the parts'
	}
	// Published: the records are no longer needed.
	if err := b.deleteKeys(ctx, parts); err != nil && opts.Warn != nil {
		opts.Warn(fmt.Sprintf("the dataset is published, but the part records under %s%s could not all be deleted (%v): delete them", b.url, PartsPrefix, err))
	}
	return nil
}
