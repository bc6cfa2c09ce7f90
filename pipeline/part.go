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
	"strconv"

	"github.com/packer-dev/packer/output"
	"github.com/packer-dev/packer/shard"
)

// Part asks Build for one part of a build split in Count parts.
type Part struct {
	Index, Count int // 0 <= Index < Count
	// Final is the output format the merged dataset is written in, and FinalShardSize its
	// shard byte budget (0: the format's default); the part itself is written as shards.
	Final          output.Entry
	FinalShardSize int64
}

// ErrPartListing is returned when the source enumerated another number of inputs than it said
// it holds, or than the count of a first pass: the listing changed while the part was built.
var ErrPartListing = errors.New("the source listing changed while the part was built")

// partRange is the part's slice [lo, hi) of the source's inputs, and the digest of the whole
// listing as this part saw it.
type partRange struct {
	p      Part
	total  int64
	lo, hi int64
	list   listingHash
}

func newPartRange(p Part, total int64) *partRange {
	lo := int64(p.Index) * total / int64(p.Count)
	hi := int64(p.Index+1) * total / int64(p.Count)
	return &partRange{p: p, total: total, lo: lo, hi: hi, list: newListingHash()}
}

// see adds an enumerated item to the listing digest and reports whether it is the part's.
func (r *partRange) see(it Item) bool {
	n := r.list.n
	r.list.add(it.Name, it.Label, it.Aux)
	return n >= r.lo && n < r.hi
}

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

func (l *listingHash) add(name string, label int64, aux []int64) {
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
	l.h.Write([]byte{'\n'})
}

// sum is the digest so far, in hex.
func (l *listingHash) sum() string { return hex.EncodeToString(l.h.Sum(nil)) }

// done checks that the whole listing was seen, as many inputs as expected.
func (r *partRange) done() error {
	if r.list.n != r.total {
		return fmt.Errorf("part %d/%d: %w: %d inputs enumerated, %d expected", r.p.Index, r.p.Count, ErrPartListing, r.list.n, r.total)
	}
	return nil
}

// info is the part's record in its manifest.
func (r *partRange) info(maxErrors int) *shard.PartInfo {
	return &shard.PartInfo{
		Index: r.p.Index, Count: r.p.Count,
		FirstInput: r.lo, TotalInputs: r.total,
		Listing:   r.list.sum(),
		Format:    r.p.Final.Name,
		ShardSize: r.p.FinalShardSize,
		MaxErrors: maxErrors,
	}
}
