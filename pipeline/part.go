package pipeline

// Builds in parts: a part is a contiguous range of the source's one global enumeration, built
// into a dataset of its own (always the shards format, lossless), which Merge later joins into
// the dataset one build would have written.

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"strconv"

	"github.com/packer-dev/packer/internal/humanize"
	"github.com/packer-dev/packer/output"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source"
)

// Part asks Build for one part of a build split in Count parts.
type Part struct {
	Index, Count int // 0 <= Index < Count
	// Final is the output format the merged dataset is written in, and FinalShardSize its
	// shard byte budget (0: the format's default); the part itself is written as shards.
	Final          output.Entry
	FinalShardSize int64
	// Source is where the part's inputs come from, as the part records it (shard.PartInfo's
	// source): an absolute path, or a URL. The merge refuses an OUT over it.
	Source string
}

// ErrPartListing is returned when the source enumerated another number of inputs than it said
// it holds, or than the count of a first pass: the listing changed while the part was built.
var ErrPartListing = errors.New("the source listing changed while the part was built")

// ErrPartInput is returned when an input of a part built from a plan is not, by its size and
// modification time, the file the plan listed.
var ErrPartInput = errors.New("an input changed since the plan was made")

// partRange is the part's slice [lo, hi) of the source's inputs, and the digests of the whole
// listing as this part saw it.
type partRange struct {
	p       Part
	total   int64
	lo, hi  int64
	cut     int64 // Options.CutInputs
	list    listingHash
	content contentHash
	changed error // the first of the part's inputs not as its plan recorded it (done reports it)
	// old is the part recorded at OUT (oldAt) that this one replaces, if any: done refuses
	// another listing or content (partid.go).
	old   *shard.PartInfo
	oldAt string
	// planned is set when the source enumerates only the part's range (a planned record
	// source: planSource.enumeratePart): the digests are the plan's, and seen counts the
	// inputs of the range enumerated.
	planned *PlanHeader
	seen    int64
}

// ErrCutInputs is returned for a --cut-inputs that is negative, or given with an output format
// other than shards (whose merge writes one file anyway).
var ErrCutInputs = errors.New("--cut-inputs is a positive input count, for --format shards only")

// newPartRange is part p's slice of total inputs: an even share, its ends rounded to multiples
// of cut when cut > 0 (the whole chunks of cut inputs are shared out evenly, the last one short),
// so that the part's shards are those of the whole build (Options.CutInputs).
func newPartRange(p Part, total, cut int64) *partRange {
	lo := int64(p.Index) * total / int64(p.Count)
	hi := int64(p.Index+1) * total / int64(p.Count)
	if cut > 0 {
		chunks := (total + cut - 1) / cut
		lo = min(total, int64(p.Index)*chunks/int64(p.Count)*cut)
		hi = min(total, int64(p.Index+1)*chunks/int64(p.Count)*cut)
	}
	return &partRange{p: p, total: total, lo: lo, hi: hi, cut: cut, list: newListingHash(), content: newContentHash()}
}

// see adds an enumerated item to the listing and content digests and reports whether it is the
// part's. An item of a plan (Item.Stamp set) adds the stamp the plan recorded; when it is the
// part's, its file must still have that size and modification time, else done fails
// (ErrPartInput): after the whole plan was read, so that a damaged plan is reported as one.
func (r *partRange) see(it source.Item) bool {
	if r.planned != nil {
		r.seen++
		return true
	}
	n := r.list.n
	mine := n >= r.lo && n < r.hi
	r.list.add(it.Name, it.Label, it.Aux, it.Extra)
	st := it.Stamp
	if it.Path != "" && (st == nil || mine) {
		now := source.StatStamp(r.content.files, it.Path)
		// A file gone since the plan is a skipped input, as in any build from a plan; one
		// that is there must be the file planned.
		if st != nil && *st != now && now.Size >= 0 && r.changed == nil {
			r.changed = fmt.Errorf("part %d/%d: %w: %s (%s) is %s now; the plan recorded %s (make a new plan, and build every part from it)",
				r.p.Index, r.p.Count, ErrPartInput, it.Name, it.Path, now, *st)
		}
		if st == nil {
			st = &now
		}
	}
	r.content.add(it, st)
	return mine
}

// itemStamp is the stamp of the file an item is read from (through files where it is set:
// source.StatStamp), or nil for an item with no file.
func itemStamp(files source.Files, it source.Item) *source.Stamp {
	if it.Path == "" {
		return nil
	}
	s := source.StatStamp(files, it.Path)
	return &s
}

// StatStamp is the stamp of the file at path, following links.
func StatStamp(path string) source.Stamp { return source.StatStamp(nil, path) }

// contentHash is the digest of what identifies the content of a listing's inputs without
// reading them (content_sha256): for each input, in order, its position and either its file's
// stamp (Item.Path: size and modification time), or, for an input whose bytes the enumerator
// read (Item.Raw), their length and CRC-32C, or nothing (an input the enumerator found
// faulty, which the listing names), then, for an input read from a second file (Item.Side:
// pairs' masks), that file's stamp. It stays out of every dataset's files and manifest: it
// changes when a source is copied without its times, which changes no record.
type contentHash struct {
	// files, when set, is the view the inputs are listed from (Options.Files): the stamps are
	// its listing's.
	files source.Files
	h     hash.Hash
	n     int64
	buf   []byte
}

func newContentHash() contentHash { return contentHash{h: sha256.New()} }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (c *contentHash) add(it source.Item, st *source.Stamp) {
	b := binary.LittleEndian.AppendUint64(c.buf[:0], uint64(c.n))
	c.n++
	switch {
	case st != nil:
		b = append(b, 'f')
		b = binary.LittleEndian.AppendUint64(b, uint64(st.Size))
		b = binary.LittleEndian.AppendUint64(b, uint64(st.ModTime))
	case it.Raw != nil:
		b = append(b, 'r')
		b = binary.LittleEndian.AppendUint64(b, uint64(len(it.Raw)))
		b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(it.Raw, castagnoli))
	default:
		b = append(b, '-')
	}
	if it.Side != "" {
		// Only sources with a second file per input (pairs) add this: others keep their digest.
		s := source.StatStamp(c.files, it.Side)
		b = append(b, 's')
		b = binary.LittleEndian.AppendUint64(b, uint64(s.Size))
		b = binary.LittleEndian.AppendUint64(b, uint64(s.ModTime))
	}
	c.buf = b
	c.h.Write(b)
}

func (c *contentHash) sum() string { return hex.EncodeToString(c.h.Sum(nil)) }

// listingHash is the digest of a listing (listing_sha256): each input's position, name, label
// and auxiliary labels, what decides the records and their order. Parts record it over the
// whole listing (the same for every part of one listing), and so does a plan file (WritePlan);
// the resume journal over the inputs done.
type listingHash struct {
	h   hash.Hash
	n   int64 // inputs added
	num [8]byte
}

func newListingHash() listingHash { return listingHash{h: sha256.New()} }

func (l *listingHash) add(name string, label int64, aux []int64, extra []byte) {
	binary.LittleEndian.PutUint64(l.num[:], uint64(l.n))
	l.n++
	l.h.Write(l.num[:])
	binary.LittleEndian.PutUint64(l.num[:], uint64(len(name)))
	l.h.Write(l.num[:])
	l.h.Write([]byte(name))
	l.h.Write(strconv.AppendInt(l.num[:0], label, 10))
	for _, a := range aux {
		l.h.Write([]byte{','})
		l.h.Write(strconv.AppendInt(l.num[:0], a, 10))
	}
	if extra != nil {
		// Only sources that have an Extra (coco) add this, so other listings keep their digest.
		l.h.Write([]byte{';'})
		binary.LittleEndian.PutUint64(l.num[:], uint64(len(extra)))
		l.h.Write(l.num[:])
		l.h.Write(extra)
	}
	l.h.Write([]byte{'\n'})
}

// sum is the digest so far, in hex.
func (l *listingHash) sum() string { return hex.EncodeToString(l.h.Sum(nil)) }

// done checks that the whole listing was seen, as many inputs as expected.
func (r *partRange) done() error {
	if r.changed != nil {
		return r.changed
	}
	if r.planned != nil && r.seen != r.hi-r.lo {
		return fmt.Errorf("part %d/%d: %w: %s of its range enumerated, %d expected", r.p.Index, r.p.Count, ErrPartListing, humanize.Count(r.seen, "input"), r.hi-r.lo)
	}
	if r.planned == nil && r.list.n != r.total {
		return fmt.Errorf("part %d/%d: %w: %s enumerated, %d expected", r.p.Index, r.p.Count, ErrPartListing, humanize.Count(r.list.n, "input"), r.total)
	}
	return r.checkOld()
}

// info is the part's record in its manifest.
func (r *partRange) info(maxErrors int) *shard.PartInfo {
	listing, content := r.list.sum(), r.content.sum()
	if r.planned != nil {
		listing, content = r.planned.Listing, r.planned.Content
	}
	return &shard.PartInfo{
		Index: r.p.Index, Count: r.p.Count,
		FirstInput: r.lo, TotalInputs: r.total,
		Listing:   listing,
		Content:   content,
		Source:    r.p.Source,
		Format:    r.p.Final.Name,
		ShardSize: r.p.FinalShardSize,
		MaxErrors: maxErrors,
		CutInputs: r.cut,
	}
}
