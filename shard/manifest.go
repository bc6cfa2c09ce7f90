package shard

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
)

// The names of the formats this package reads, the manifest's "format": shards and npy
// (Dataset reads images.npy as one shard). The other formats packer writes are named by their
// own packages (output/hdf5), and which names a program knows is its own table's: shard reads
// a manifest of any format (ReadManifest) and refuses, on request, one not among a list of
// names (ReadManifestFormats); OpenDataset opens the two formats it reads. The writers of these
// two live in output/shards and output/npy, which take their names from here.
const (
	FormatShards = "shards" // this package's shard files (FORMAT.md)
	FormatNPY    = "npy"    // NumPy .npy columns (output/npy)
)

// ManifestName is the file name of a dataset's manifest, written last by every build.
const ManifestName = "manifest.json"

// MaxManifestSize bounds the manifest a reader will load.
const MaxManifestSize = 1 << 30

// Manifest describes a packed dataset directory: what it holds, how it was made, and the size and
// SHA-256 of every data file. It is the root of trust for verify and the entry point of readers.
type Manifest struct {
	Packer        string         `json:"packer"`         // packer version that wrote the dataset
	Format        string         `json:"format"`         // the output format: FormatShards, FormatNPY, or another output's name
	FormatVersion int            `json:"format_version"` // shard format version (FORMAT.md) for FormatShards
	Count         int64          `json:"count"`          // number of records
	Classes       []string       `json:"classes"`        // class names, indexed by label
	ClassCounts   []int64        `json:"class_counts"`   // records per label, same length as Classes
	Sample        SampleSpec     `json:"sample"`         // shape, dtype and layout of one record
	Label         LabelSpec      `json:"label"`          // label type and auxiliary label columns
	Source        map[string]any `json:"source"`         // source kind and its options
	Transform     map[string]any `json:"transform"`      // the full transform spec
	Files         []FileEntry    `json:"files"`          // every data file, in record order
	Skipped       []Skipped      `json:"skipped"`        // every input that was not packed
	// Inputs is how many inputs the source enumerated: each one was packed (yielded at least
	// one record) or is in Skipped. 0 in manifests written before packer recorded it.
	Inputs int64 `json:"inputs"`
	// Part is set in the manifest of one part of a build split in parts (packer build --part),
	// which packer merge joins; absent in a whole dataset.
	Part *PartInfo `json:"part,omitempty"`
	// Fields is the sample schema beyond the sample and labels (FORMAT.md "Fields"); absent
	// for an image-only dataset, whose manifest keeps its bytes.
	Fields []Field `json:"fields,omitempty"`
	// BoxesDropped counts, per boxes field, the boxes the transform's crop left with no area
	// (dropped with their rows of the fields that follow them); absent when none was dropped.
	BoxesDropped map[string]int64 `json:"boxes_dropped,omitempty"`
	// CutInputs is K of a dataset built with --cut-inputs K: a shard ends at every K-th input
	// of the source order besides the byte budget, so the shards of parts split at multiples
	// of K are the whole build's (FORMAT.md "Dataset"); absent (0) otherwise.
	CutInputs int64 `json:"cut_inputs,omitempty"`
}

// PartInfo describes one part of a build split in parts: which contiguous range of the source's
// one enumeration it holds, the digest of that enumeration, and the options of the merged
// dataset that only the merge applies.
type PartInfo struct {
	Index       int    `json:"index"`          // 0-based
	Count       int    `json:"count"`          // parts of the build
	FirstInput  int64  `json:"first_input"`    // position of the part's first input in the source order
	TotalInputs int64  `json:"total_inputs"`   // inputs of the whole source
	Listing     string `json:"listing_sha256"` // digest of the whole enumeration (positions, names, labels)
	// Content is the digest of what identifies every input's content without reading it
	// (sizes and modification times of the input files, a CRC of the bytes a record source's
	// listing read); Source is the source the part was built from (an absolute path or a
	// URL). Both are the part's own: a merged dataset's manifest has neither.
	Content   string `json:"content_sha256,omitempty"`
	Source    string `json:"source,omitempty"`
	Format    string `json:"format"`     // output format of the merged dataset
	ShardSize int64  `json:"shard_size"` // shard byte budget of the merged dataset; 0: the default
	MaxErrors int    `json:"max_errors"` // --max-errors, checked over all parts by the merge; 0: none
	// ChecksumBlock is the checksum block byte target of the parts and of the merged dataset
	// (--checksum-block); 0 (absent): the format's default.
	ChecksumBlock int64 `json:"checksum_block,omitempty"`
	// CutInputs is the build's --cut-inputs K (0, absent: none): the part's inputs start at a
	// multiple of K, and its shards are the merged dataset's (Manifest.CutInputs).
	CutInputs int64 `json:"cut_inputs,omitempty"`
}

// FileEntry is one data file of a dataset.
type FileEntry struct {
	Path   string `json:"path"`   // relative to the dataset directory, slash separated
	Size   int64  `json:"size"`   // bytes
	SHA256 string `json:"sha256"` // lower-case hex
	// IndexSHA256 is the lower-case hex SHA-256 of a shard's index section (FORMAT.md,
	// "Dataset"), which readers check when they open the shard: its block CRCs cover every
	// record byte, so a shard of another build is refused at a small cost. Empty for files
	// that are not shards and in manifests written before packer recorded it.
	IndexSHA256 string `json:"index_sha256,omitempty"`
	Records     int64  `json:"records,omitempty"`
	FirstRecord int64  `json:"first_record,omitempty"`
	// Shard is what the header of a version-4 shard names instead of its position (FORMAT.md,
	// Dataset), which readers check against it; nil for every other file.
	Shard *ShardCut `json:"shard,omitempty"`
}

// ShardCut names a shard of a dataset cut at fixed input positions (--cut-inputs K, FORMAT.md
// "Dataset"): Chunk is the input chunk its records come from (the inputs [Chunk*K,
// (Chunk+1)*K) of the source order), Piece its number among that chunk's shards, from 0. It is
// a version-4 shard's meta "shard" and its manifest entry's "shard".
type ShardCut struct {
	Chunk int64 `json:"chunk"`
	Piece int64 `json:"piece"`
}

// Skipped is one input that was not packed, with the reason.
type Skipped struct {
	Input  string `json:"input"`
	Reason string `json:"reason"`
}

// Marshal encodes the manifest deterministically (struct field order, sorted map keys, 2-space
// indent, no HTML escaping, a final newline) and seals it with SealManifest, so the last member
// is the manifest's own checksum.
func (m *Manifest) Marshal() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return SealManifest(buf.Bytes())
}

// The manifest's own checksum is its last member, spliced in as the bytes
// sumOpen + 64 lower-case hex digits + sumClose at the very end of the file. FORMAT.md
// ("Dataset") specifies it.
const (
	sumOpen  = ",\n  \"manifest_sha256\": \""
	sumClose = "\"\n}\n"
	bodyEnd  = "\n}\n"
)

// SealManifest returns a manifest body (a JSON object whose bytes end with "\n}\n", as
// Marshal writes it) with the member "manifest_sha256" appended as its last member: the
// lower-case hex SHA-256 of body. Readers strip that member, put "\n}\n" back, and compare the
// hash, so any change to the file's bytes is detected without re-encoding the JSON.
func SealManifest(body []byte) ([]byte, error) {
	if !bytes.HasSuffix(body, []byte(bodyEnd)) {
		return nil, fmt.Errorf("manifest body does not end with %q", bodyEnd)
	}
	sum := sha256.Sum256(body)
	out := make([]byte, 0, len(body)+len(sumOpen)+64+len(sumClose))
	out = append(out, body[:len(body)-len(bodyEnd)]...)
	out = append(out, sumOpen...)
	out = hex.AppendEncode(out, sum[:])
	return append(out, sumClose...), nil
}

// ErrManifestChecksum is wrapped by the error for a manifest whose bytes do not match its
// manifest_sha256, or that has none.
var ErrManifestChecksum = errors.New("manifest checksum")

// checkSeal checks that data ends with its manifest_sha256 member and that the member is the
// SHA-256 of the rest. name is the file's name for errors.
func checkSeal(name string, data []byte) error {
	n := len(sumOpen) + 64 + len(sumClose)
	if len(data) < n || !bytes.HasSuffix(data, []byte(sumClose)) ||
		!bytes.Equal(data[len(data)-n:len(data)-n+len(sumOpen)], []byte(sumOpen)) {
		return fmt.Errorf("%s has no manifest_sha256: written by packer < 0.2 or edited; rebuild: %w", name, ErrManifestChecksum)
	}
	want := data[len(data)-64-len(sumClose) : len(data)-len(sumClose)]
	h := sha256.New()
	h.Write(data[:len(data)-n])
	h.Write([]byte(bodyEnd))
	var got [64]byte
	hex.Encode(got[:], h.Sum(nil))
	if !bytes.Equal(got[:], want) {
		return fmt.Errorf("%s: checksum mismatch: the manifest was edited or damaged: %w", name, ErrManifestChecksum)
	}
	return nil
}

// ReadManifest loads dir/manifest.json. It refuses a manifest whose manifest_sha256 is missing
// or does not match its bytes (see SealManifest), so nothing reads an edited or damaged manifest.
func ReadManifest(dir string) (*Manifest, error) { return ReadManifestFS(DirFS(dir)) }

// ReadManifestFS is ReadManifest of the dataset fsys holds.
func ReadManifestFS(fsys FS) (*Manifest, error) {
	path := fsName(fsys, ManifestName)
	f, err := fsys.Open(ManifestName)
	if err != nil {
		return nil, fmt.Errorf("open manifest: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(io.NewSectionReader(f, 0, math.MaxInt64), MaxManifestSize+1))
	if err != nil {
		return nil, fmt.Errorf("read manifest %s: %w", path, err)
	}
	if len(data) > MaxManifestSize {
		return nil, fmt.Errorf("%s: manifest larger than %d bytes", path, MaxManifestSize)
	}
	if err := checkSeal(path, data); err != nil {
		return nil, err
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%s: invalid manifest: %w", path, err)
	}
	if err := m.check(); err != nil {
		return nil, fmt.Errorf("%s: invalid manifest: %w", path, err)
	}
	return &m, nil
}

// ReadManifestFormats is ReadManifestFS that also refuses, as an invalid manifest, a format
// not among formats: the names of the output formats the caller knows (packer's command, its
// table of outputs); with none, it is ReadManifestFS. The error names the manifest and the
// format.
func ReadManifestFormats(fsys FS, formats []string) (*Manifest, error) {
	m, err := ReadManifestFS(fsys)
	if err != nil {
		return nil, err
	}
	if len(formats) > 0 && !slices.Contains(formats, m.Format) {
		return nil, fmt.Errorf("%s: invalid manifest: unknown format %q", fsName(fsys, ManifestName), m.Format)
	}
	return m, nil
}

// check checks the manifest's structure. Its format may be any name: which formats exist is
// not this package's to say (ReadManifestFormats).
func (m *Manifest) check() error {
	if m.Count < 0 {
		return fmt.Errorf("negative count %d", m.Count)
	}
	if err := m.Sample.Validate(); err != nil {
		return err
	}
	for _, f := range m.Files {
		if f.Path == "" || filepath.IsAbs(f.Path) || !filepath.IsLocal(filepath.FromSlash(f.Path)) {
			return fmt.Errorf("file path %q is not a local relative path", f.Path)
		}
		if f.Size < 0 {
			return fmt.Errorf("file %s: negative size", f.Path)
		}
		if f.IndexSHA256 != "" && !isHexSHA256(f.IndexSHA256) {
			return fmt.Errorf("file %s: index_sha256 %q is not 64 lower-case hex digits", f.Path, f.IndexSHA256)
		}
	}
	return nil
}

// isHexSHA256 reports whether s is a SHA-256 as the manifest writes it: 64 lower-case hex digits.
func isHexSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// DatasetMetaDiff compares the dataset description packer stores in its data files (a shard
// header's meta key "dataset", an HDF5 file's "spec" attribute: packer version, source,
// transform and class names) with the manifest, and returns the keys that differ, in order.
// A key missing from meta differs.
func DatasetMetaDiff(meta map[string]any, m *Manifest) []string {
	var diff []string
	want := []struct {
		key string
		v   any
	}{{"packer", m.Packer}, {"source", m.Source}, {"transform", m.Transform}, {"classes", m.Classes}}
	for _, w := range want {
		got, ok := meta[w.key]
		if !ok || !sameJSON(got, w.v) {
			diff = append(diff, w.key)
		}
	}
	return diff
}

// sameJSON reports whether a and b encode to the same JSON value; numbers compare by value and
// a null list equals an empty one.
func sameJSON(a, b any) bool {
	return reflect.DeepEqual(canonJSON(a), canonJSON(b))
}

func canonJSON(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return err.Error()
	}
	if out == nil {
		return []any{}
	}
	return out
}

// LabelTally checks a dataset's labels against its manifest: every label must be >= 0 and, when
// the manifest names classes, below their number (in a dataset with fields a label may also be
// -1, a record without a class: COCO images, captioned images); the labels per class must be
// the manifest's class_counts. Feed it every label with Add (in any order, records numbered dataset-wide), then
// call Faults.
type LabelTally struct {
	classes  int
	noClass  bool // -1 is a record without a class (a dataset with fields)
	counts   []int64
	n        int64
	bad      int64
	firstBad int64 // record number of the first bad label seen (lowest)
	badValue int64
}

// NewLabelTally returns an empty tally for the manifest's classes.
func NewLabelTally(m *Manifest) *LabelTally {
	return &LabelTally{classes: len(m.Classes), noClass: len(m.Fields) > 0, counts: make([]int64, len(m.Classes)), firstBad: -1}
}

// Add counts the labels of records first, first+1, ...
func (t *LabelTally) Add(first int64, labels []int64) {
	for i, l := range labels {
		t.n++
		if l >= 0 && (t.classes == 0 || l < int64(t.classes)) {
			if t.classes > 0 {
				t.counts[l]++
			}
			continue
		}
		if l == -1 && t.noClass {
			continue
		}
		t.bad++
		if r := first + int64(i); t.firstBad < 0 || r < t.firstBad {
			t.firstBad, t.badValue = r, l
		}
	}
}

// Faults returns what is wrong with the labels counted against m, one message each.
func (t *LabelTally) Faults(m *Manifest) []string {
	var out []string
	if t.bad > 0 {
		rng := "negative"
		if t.classes > 0 {
			rng = fmt.Sprintf("outside [0, %d) (the %d classes)", t.classes, t.classes)
		}
		out = append(out, fmt.Sprintf("%d labels are %s, the first at record %d (label %d)", t.bad, rng, t.firstBad, t.badValue))
	}
	if t.classes > 0 && len(m.ClassCounts) == t.classes {
		diff, first := 0, -1
		for i, c := range t.counts {
			if m.ClassCounts[i] != c {
				if diff++; first < 0 {
					first = i
				}
			}
		}
		if diff > 0 {
			out = append(out, fmt.Sprintf("class_counts differ from the labels for %d classes, first class %d (%q): manifest says %d, the labels hold %d",
				diff, first, m.Classes[first], m.ClassCounts[first], t.counts[first]))
		}
	}
	return out
}

// BuildShuffle reads the build-time order the manifest's source records (packer build
// --shuffle --seed S: "shuffle": {"seed": S}): shuffled is false for a dataset written in
// source order; an error says how a "shuffle" member is malformed (not an object holding
// exactly an integer seed in [0, 2^64)).
func (m *Manifest) BuildShuffle() (seed uint64, shuffled bool, err error) {
	v, ok := m.Source["shuffle"]
	if !ok {
		return 0, false, nil
	}
	obj, ok := v.(map[string]any)
	if !ok || len(obj) != 1 {
		return 0, true, fmt.Errorf("source.shuffle is %v, not {\"seed\": S}", v)
	}
	var s string
	switch n := obj["seed"].(type) {
	case json.Number:
		s = n.String()
	case float64: // a manifest decoded without UseNumber
		s = strconv.FormatFloat(n, 'f', -1, 64)
	default:
		return 0, true, fmt.Errorf("source.shuffle.seed is %v, not an integer", obj["seed"])
	}
	seed, err = strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, true, fmt.Errorf("source.shuffle.seed %s is not an integer in [0, 2^64)", s)
	}
	return seed, true, nil
}
