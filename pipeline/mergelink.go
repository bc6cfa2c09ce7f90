package pipeline

// The merge of parts built with a cut rule (Options.CutInputs): their shards are the whole
// build's (FORMAT.md "Dataset"), so the merge checks each part, links its shard files into the
// staging folder under their names in the merged dataset, and writes the manifest from the
// parts' manifests, without reading or writing a record.

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"syscall"

	"github.com/packer-dev/packer/internal/fileutil"
	"github.com/packer-dev/packer/shard"
)

// ErrCutParts is wrapped by the refusal of parts whose shards are not, by their chunks, the
// whole build's shards of their inputs.
var ErrCutParts = errors.New("the part's shards do not lie in its inputs' chunks")

// linkInto puts the shards of parts built with a cut rule into dir under their merged names
// (checkLinkPart, linkShard; with opts.VerifyParts each part is first read whole by
// opts.CheckPart) and writes the merged manifest from the parts' manifests.
func linkInto(ctx context.Context, parts *Parts, dir string, opts MergeOptions) (*Summary, error) {
	c := newCutMerge(parts, opts.ShardName)
	for k, d := range parts.Dirs {
		pm := parts.Manifests[k]
		// Each file is looked at before it is checked, and its link must be that file.
		before := make([]os.FileInfo, len(pm.Files))
		for i, fe := range pm.Files {
			st, err := os.Lstat(filepath.Join(d, filepath.FromSlash(fe.Path)))
			if err != nil {
				return nil, &PartError{Dir: d, Faults: []string{err.Error()}}
			}
			before[i] = st
		}
		if opts.VerifyParts {
			faults, err := opts.CheckPart(ctx, d, func(shard.FileEntry) io.Writer { return nil })
			if err != nil {
				return nil, fmt.Errorf("verify part %s: %w", d, err)
			}
			if len(faults) > 0 {
				return nil, &PartError{Dir: d, Faults: faults}
			}
		}
		bytes, err := checkLinkPart(d, pm)
		if err != nil {
			return nil, err
		}
		merged, err := c.add(k, bytes)
		if err != nil {
			return nil, err
		}
		var copied int
		var why error
		for i, orig := range pm.Files {
			linkErr, err := linkShard(filepath.Join(d, filepath.FromSlash(orig.Path)), before[i], d, merged[i], dir)
			if err != nil {
				return nil, err
			}
			if linkErr != nil {
				copied++
				why = cmp.Or(why, linkErr)
			}
		}
		if copied > 0 && opts.Warn != nil {
			opts.Warn(copiedNote(d, copied, len(pm.Files), why))
		}
		if opts.Progress != nil {
			opts.Progress(c.sum.Records, c.total)
		}
	}
	m, sum, err := c.finish()
	if err != nil {
		return nil, err
	}
	if err := fileutil.SyncDir(dir); err != nil {
		return nil, err
	}
	if err := WriteManifest(dir, m); err != nil {
		return nil, err
	}
	return sum, nil
}

// cutMerge makes the merged manifest of parts built with a cut rule from the parts' manifests,
// part by part, in order.
type cutMerge struct {
	parts *Parts
	name  func(int) string
	m     *shard.Manifest
	sum   *Summary
	total int64
}

func newCutMerge(parts *Parts, name func(int) string) *cutMerge {
	first := parts.Manifests[0]
	c := &cutMerge{parts: parts, name: name, sum: &Summary{Reasons: map[string]int{}}}
	for _, m := range parts.Manifests {
		c.total += m.Count
	}
	c.m = &shard.Manifest{
		Packer: first.Packer, Format: first.Format, FormatVersion: first.FormatVersion,
		Classes: nonNil(first.Classes), ClassCounts: make([]int64, len(first.Classes)),
		Sample: first.Sample, Label: first.Label, Source: first.Source, Transform: first.Transform,
		Files: []shard.FileEntry{}, Skipped: []shard.Skipped{}, Fields: first.Fields, CutInputs: first.CutInputs,
	}
	return c
}

// add adds part k, checked (its records' data bytes long), and returns the merged manifest's
// entries of its files, in the part's order.
func (c *cutMerge) add(k int, bytes int64) ([]shard.FileEntry, error) {
	d, pm, m := c.parts.Dirs[k], c.parts.Manifests[k], c.m
	var merged []shard.FileEntry
	for _, orig := range pm.Files {
		fe := orig
		fe.Path, fe.FirstRecord = c.name(len(m.Files)), m.Count
		m.Files = append(m.Files, fe)
		merged = append(merged, fe)
		m.Count += fe.Records
		c.sum.FileBytes += fe.Size
	}
	if len(pm.ClassCounts) != len(m.ClassCounts) {
		return nil, fmt.Errorf("%w: %s counts %d classes, its manifest names %d", ErrParts, d, len(pm.ClassCounts), len(m.ClassCounts))
	}
	for i, n := range pm.ClassCounts {
		m.ClassCounts[i] += n
	}
	m.Skipped = append(m.Skipped, pm.Skipped...)
	m.Inputs += pm.Inputs
	for name, n := range pm.BoxesDropped {
		if m.BoxesDropped == nil {
			m.BoxesDropped = map[string]int64{}
		}
		m.BoxesDropped[name] += n
	}
	c.sum.Bytes += bytes
	c.sum.Records = m.Count
	return merged, nil
}

// finish checks the record count and returns the merged manifest and the merge's summary.
func (c *cutMerge) finish() (*shard.Manifest, *Summary, error) {
	m, sum := c.m, c.sum
	if m.Count != c.total {
		return nil, nil, fmt.Errorf("%w: the parts' manifests count %d records, their shards hold %d", ErrParts, c.total, m.Count)
	}
	for _, s := range m.Skipped {
		sum.Reasons[ShortReason(s.Reason)]++
	}
	sum.Items, sum.Skipped, sum.Manifest = m.Inputs, int64(len(m.Skipped)), m
	return m, sum, nil
}

// checkLinkPart checks the part in dir, whose manifest m ReadParts read, as a reader opening
// each of its shards does (shard.OpenDataset: the manifest's seal; each shard's header, index
// and footer, its size, record count and index_sha256 against the manifest, its chunk and piece
// against the manifest's), and that every shard's chunk lies within the part's inputs, so that
// the parts' shards follow each other as the whole build's do. The record bytes are not read:
// the block CRCs the checked index holds cover them whenever they are read (packer verify of
// the merged dataset reads them all). It returns the size of the records' data.
func checkLinkPart(dir string, m *shard.Manifest) (int64, error) {
	ds, err := shard.OpenDataset(dir)
	if err != nil {
		return 0, &PartError{Dir: dir, Faults: []string{err.Error()}}
	}
	defer ds.Close()
	data, _, err := checkCutDataset(ds, dir, m)
	return data, err
}

// checkCutDataset is checkLinkPart of the part dir opened as ds; it also returns each shard's
// chunk and piece.
func checkCutDataset(ds *shard.Dataset, dir string, m *shard.Manifest) (int64, []shard.ShardCut, error) {
	// The shards checked must be the ones m lists, whose entries the merged manifest takes: a
	// part whose manifest changed since it was read (another build's files now) is refused.
	if !reflect.DeepEqual(ds.Manifest().Files, m.Files) {
		return 0, nil, &PartError{Dir: dir, Faults: []string{fmt.Sprintf("its %s changed while the merge read it (another build of the part?)", shard.ManifestName)}}
	}
	if ds.NumShards() != len(m.Files) {
		return 0, nil, &PartError{Dir: dir, Faults: []string{fmt.Sprintf("its manifest lists %d files, %d of them shards", len(m.Files), ds.NumShards())}}
	}
	lo, hi := m.Part.FirstInput, m.Part.FirstInput+m.Inputs
	k := m.CutInputs
	if k <= 0 || lo%k != 0 && lo != m.Part.TotalInputs {
		return 0, nil, fmt.Errorf("%w: %s starts at input %d, not a multiple of --cut-inputs %d", ErrCutParts, dir, lo, k)
	}
	var data int64
	var cuts []shard.ShardCut
	for s := range ds.NumShards() {
		r, err := ds.Shard(s)
		if err != nil {
			return 0, nil, &PartError{Dir: dir, Faults: []string{err.Error()}}
		}
		c := r.Cut()
		if c == nil || c.Chunk*k < lo || c.Chunk*k >= hi {
			return 0, nil, fmt.Errorf("%w: %s: %s is of %s, the part holds inputs [%d, %d) (--cut-inputs %d)", ErrCutParts, dir, m.Files[s].Path, cutString(c), lo, hi, k)
		}
		data += r.DataSize()
		cuts = append(cuts, *c)
	}
	return data, cuts, nil
}

// CutCopy is a file of the dataset merged from parts built with a cut rule (CheckCutParts):
// the file Source of the part Part (an index into Parts.Dirs) is the merged manifest's Files[i];
// Cut is its chunk and piece, as its header says.
type CutCopy struct {
	Part   int
	Source shard.FileEntry
	Cut    shard.ShardCut
}

// CheckCutParts checks parts built with a cut rule that are read through fss (fss[k] holds the
// part Parts.Dirs[k]: parts in object storage, to be merged there by copying their files) as
// the linked merge checks local ones (the sealed manifest; every shard's header, index against
// its index_sha256, footer, size and chunk, read through fss, never the records), and the
// --max-errors of the parts, and returns the merged manifest, the file of a part each of its
// files is to be a copy of, and the merge's summary (but its Elapsed and Out).
func CheckCutParts(parts *Parts, fss []shard.FS, shardName func(int) string, progress func(records, total int64)) (*shard.Manifest, []CutCopy, *Summary, error) {
	info := parts.Info()
	if info.CutInputs <= 0 {
		return nil, nil, nil, fmt.Errorf("%w: the parts were not built with --cut-inputs", ErrCutParts)
	}
	var skipped int
	for _, m := range parts.Manifests {
		skipped += len(m.Skipped)
	}
	if info.MaxErrors > 0 && skipped > info.MaxErrors {
		return nil, nil, nil, fmt.Errorf("%w: %d inputs skipped over all parts, more than --max-errors %d", ErrTooManyErrors, skipped, info.MaxErrors)
	}
	c := newCutMerge(parts, shardName)
	bytes, cuts, errs := checkCutFSs(parts, fss)
	var copies []CutCopy
	for k := range parts.Dirs {
		pm := parts.Manifests[k]
		if errs[k] != nil {
			return nil, nil, nil, errs[k]
		}
		if _, err := c.add(k, bytes[k]); err != nil {
			return nil, nil, nil, err
		}
		for i, fe := range pm.Files {
			copies = append(copies, CutCopy{Part: k, Source: fe, Cut: cuts[k][i]})
		}
		if progress != nil {
			progress(c.sum.Records, c.total)
		}
	}
	m, sum, err := c.finish()
	if err != nil {
		return nil, nil, nil, err
	}
	return m, copies, sum, nil
}

// cutCheckParallel is the number of parts CheckCutParts checks, and ReadPartsFS reads the
// manifests of, at once: in a bucket each is a few small requests (a HEAD and ranged GETs of
// each shard's header, index and footer), whose round trips are what it waits for.
const cutCheckParallel = 8

// checkCutFSs opens each part k of parts in fss[k] and checks it (checkCutDataset),
// cutCheckParallel parts at once: bytes[k] is part k's record bytes, cuts[k] its shards' chunks
// and pieces, errs[k] its fault.
func checkCutFSs(parts *Parts, fss []shard.FS) (bytes []int64, cuts [][]shard.ShardCut, errs []error) {
	bytes, cuts, errs = make([]int64, len(parts.Dirs)), make([][]shard.ShardCut, len(parts.Dirs)), make([]error, len(parts.Dirs))
	sem := make(chan struct{}, cutCheckParallel)
	var wg sync.WaitGroup
	for k, d := range parts.Dirs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ds, err := shard.OpenDatasetFS(fss[k], shard.ReaderOptions{})
			if err != nil {
				errs[k] = &PartError{Dir: d, Faults: []string{err.Error()}}
				return
			}
			defer ds.Close()
			bytes[k], cuts[k], errs[k] = checkCutDataset(ds, d, parts.Manifests[k])
		}()
	}
	wg.Wait()
	return bytes, cuts, errs
}

// cutString names a shard's chunk and piece.
func cutString(c *shard.ShardCut) string {
	if c == nil {
		return "no chunk (not a version-4 shard)"
	}
	return fmt.Sprintf("chunk %d piece %d", c.Chunk, c.Piece)
}

// linkShard makes src, a shard of the part in partDir that its manifest lists as fe (but for
// fe's Path and FirstRecord, the merged dataset's), the file fe.Path in dir: a hard link, which
// must be the file before describes (src as it was before the part was checked); where the link
// cannot be made (linkRefused: dir on another file system, or one that makes no hard links
// there), a copy whose SHA-256 must be the entry's, and linkErr says why.
func linkShard(src string, before os.FileInfo, partDir string, fe shard.FileEntry, dir string) (linkErr, err error) {
	dst := filepath.Join(dir, filepath.FromSlash(fe.Path))
	if !before.Mode().IsRegular() || before.Size() != fe.Size {
		return nil, &PartError{Dir: partDir, Faults: []string{fmt.Sprintf("%s is not a regular file of the size its manifest lists", src)}}
	}
	err = linkFile(src, dst)
	if linkRefused(err) {
		return err, copyShard(src, partDir, fe, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("link %s into the merged dataset: %w", src, err)
	}
	after, err := os.Lstat(dst)
	if err != nil {
		return nil, err
	}
	if !os.SameFile(before, after) {
		return nil, &PartError{Dir: partDir, Faults: []string{fmt.Sprintf("%s was replaced while the part was checked and linked", src)}}
	}
	return nil, nil
}

// linkFile is os.Link; tests replace it to make a link fail as some file systems do.
var linkFile = os.Link

// linkRefused reports whether err, a failed link, is one a copy goes around: the target on
// another file system (EXDEV), or a file system or file that takes no (more) hard links
// (EPERM: FAT, some network and FUSE file systems, or Linux's protected_hardlinks for a file
// of another user; ENOTSUP; EMLINK).
func linkRefused(err error) bool {
	for _, e := range []syscall.Errno{syscall.EXDEV, syscall.EPERM, syscall.ENOTSUP, syscall.EMLINK} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// copiedNote is the line that tells that copied of the part's total shards were copied into
// the merged dataset, not linked, and why (the first failed link).
func copiedNote(part string, copied, total int, why error) string {
	return fmt.Sprintf("part %s: %d of its %d shards copied into the merged dataset, not linked (%v)", part, copied, total, why)
}

// copyShard copies src to fe.Path in dir, durably, and checks the copy's SHA-256 against fe's:
// linkShard's way across file systems, at the cost of one read and one write of the shard.
func copyShard(src, partDir string, fe shard.FileEntry, dir string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	p, err := fileutil.Create(dir, filepath.Base(fe.Path), false)
	if err != nil {
		return err
	}
	defer p.Abort()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(p.File(), h), in)
	if err != nil {
		return fmt.Errorf("copy %s into the merged dataset: %w", src, err)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); n != fe.Size || sum != fe.SHA256 {
		return &PartError{Dir: partDir, Faults: []string{fmt.Sprintf("%s: %d bytes of SHA-256 %s, the part's manifest says %d of %s", src, n, sum, fe.Size, fe.SHA256)}}
	}
	return p.Commit(nil)
}

// RemovePart removes the part in the folder dir after a merge published the dataset made of it
// (merge --remove-parts): its manifest first, so that the folder is no dataset from then on,
// then the files m (its manifest, as the merge read it) lists, then the folder. Only a folder
// whose manifest records a part is touched, and nothing in it but what the part's build wrote:
// a file or folder of anyone else's there is kept, with the folder, and named in left.
func RemovePart(dir string, m *shard.Manifest) (left []string, err error) {
	dir = filepath.Clean(dir)
	if recordedPart(dir) == nil {
		return nil, fmt.Errorf("%s: not a part (its manifest records none): left as it is", dir)
	}
	names := []string{shard.ManifestName}
	for _, fe := range m.Files {
		names = append(names, filepath.FromSlash(fe.Path))
	}
	for _, n := range names {
		if err := os.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("remove part %s: %w", dir, err)
		}
	}
	if err := os.Remove(dir); err != nil {
		ents, rerr := os.ReadDir(dir)
		if rerr != nil || len(ents) == 0 {
			return nil, fmt.Errorf("remove part %s: %w", dir, err)
		}
		for _, e := range ents {
			left = append(left, e.Name())
		}
		if err := fileutil.SyncDir(dir); err != nil {
			return nil, err
		}
	}
	// Its lock file (held by the merge until it ends) goes with it.
	if p, err := newOutPaths(dir); err == nil {
		if err := os.Remove(p.lock); err != nil && !os.IsNotExist(err) {
			return nil, fmt.Errorf("remove part %s: %w", dir, err)
		}
	}
	return left, fileutil.SyncDir(filepath.Dir(dir))
}
