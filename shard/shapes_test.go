package shard

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// shapesOptions and shapesRecords make the version-2 fixture shard/testdata/v2/valid-v2-shapes.pks:
// five images of shape [-1, -1, 3] (hwc, uint8) with per-record metadata and one aux column.
// Record i is h×w = shapesHW[i], every byte of it 16*i + (byte index mod 16), label 10+i,
// aux i/2. Readers in other languages test against it.
var shapesOptions = WriterOptions{
	Sample:  SampleSpec{Shape: []int{-1, -1, 3}, DType: Uint8, Layout: "hwc"},
	Label:   LabelSpec{Aux: []string{"coarse_label"}},
	HasMeta: true,
	Meta:    map[string]any{"dataset": map[string]any{"name": "valid-v2-shapes"}},
}

var shapesHW = [][2]int{{2, 3}, {3, 2}, {1, 1}, {4, 5}, {2, 2}}

func shapesRecords() []testRecord {
	var recs []testRecord
	for i, hw := range shapesHW {
		d := make([]byte, hw[0]*hw[1]*3)
		for j := range d {
			d[j] = byte(16*i + j%16)
		}
		recs = append(recs, testRecord{data: d, label: int64(10 + i), aux: []int64{int64(i / 2)},
			meta: []byte(`{"path":"img` + string(rune('0'+i)) + `.png"}`), shape: []int{hw[0], hw[1], 3}})
	}
	return recs
}

func shapesShard(t testing.TB) []byte { return buildShard(t, shapesOptions, shapesRecords()) }

// shapesOff returns the file offset of the shapes part of a shard made by shapesShard.
func shapesPartOff(b []byte) int {
	ft := footerOf(b)
	return int(le.Uint64(ft[ftIndexOffsetOff:])) + (len(shapesHW)+1)*8
}

// TestShapesFixture checks the checked-in version-2 fixture: written by this package, it reads
// back with every record at its own shape (go test -run TestShapesFixture -update rewrites it).
func TestShapesFixture(t *testing.T) {
	b := shapesShard(t)
	path := filepath.Join("testdata", "v2", "valid-v2-shapes.pks")
	if *update {
		writeTestdata(t, filepath.Join("v2", "valid-v2-shapes.pks"), b)
	}
	disk, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(disk, b) {
		t.Fatalf("%s is stale; run go test -run TestShapesFixture -update", path)
	}
	if v := le.Uint16(b[hdrVersionOff:]); v != 2 {
		t.Fatalf("version %d, want 2", v)
	}
	if f := le.Uint16(b[hdrFlagsOff:]); f != FlagVarSize|FlagMeta|FlagShapes {
		t.Fatalf("flags %#x", f)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	checkRecords(t, r, shapesRecords())
	// The shapes part lies right after the offsets: h and w of each record as u32.
	p := shapesPartOff(b)
	for i, hw := range shapesHW {
		if h, w := le.Uint32(b[p+8*i:]), le.Uint32(b[p+8*i+4:]); int(h) != hw[0] || int(w) != hw[1] {
			t.Fatalf("shapes part record %d = %d, %d, want %v", i, h, w, hw)
		}
	}
}

// TestVersionChoice: a writer writes the lowest version a shard needs.
func TestVersionChoice(t *testing.T) {
	for _, tc := range []struct {
		opts    WriterOptions
		version uint16
		flags   uint16
	}{
		{WriterOptions{Sample: SampleSpec{Shape: []int{2, 2, 3}, DType: Uint8, Layout: "hwc"}}, 1, 0},
		{WriterOptions{Sample: SampleSpec{Shape: []int{-1, -1, 3}, DType: Uint8, Layout: "hwc"}}, 2, FlagVarSize | FlagShapes},
		{WriterOptions{Sample: SampleSpec{Shape: []int{-1, 3}, DType: Uint8, Layout: "hwc"}}, 2, FlagVarSize | FlagShapes},
		{WriterOptions{Sample: SampleSpec{Shape: []int{-1, 3}, DType: Uint8, Layout: "hwc"}, NoShapes: true}, 1, FlagVarSize},
	} {
		b := buildShard(t, tc.opts, randomRecords(tc.opts, 3, 1))
		if v, f := le.Uint16(b[hdrVersionOff:]), le.Uint16(b[hdrFlagsOff:]); v != tc.version || f != tc.flags {
			t.Errorf("%v: version %d flags %#x, want %d %#x", tc.opts.Sample.Shape, v, f, tc.version, tc.flags)
		}
	}
}

// TestAppendShapeChecks: the writer refuses a shape that does not fit the spec or the bytes.
func TestAppendShapeChecks(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, WriterOptions{Sample: SampleSpec{Shape: []int{-1, -1, 3}, DType: Uint8, Layout: "hwc"}})
	if err != nil {
		t.Fatal(err)
	}
	d := make([]byte, 2*3*3)
	for _, bad := range [][]int{nil, {2, 3}, {2, 3, 1}, {0, 9, 3}, {3, 3, 3}, {2, 3, 3, 1}} {
		if err := w.AppendShape(d, bad, 0, nil, nil); err == nil {
			t.Errorf("AppendShape(%v) accepted", bad)
		}
	}
	if err := w.AppendShape(d, []int{2, 3, 3}, 0, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestVersion1ShapeUnknown: a version-1 variable-size shard with two -1 dimensions has no
// record shapes; the reader says so instead of guessing.
func TestVersion1ShapeUnknown(t *testing.T) {
	opts := WriterOptions{Sample: SampleSpec{Shape: []int{-1, -1, 3}, DType: Uint8, Layout: "hwc"}, NoShapes: true}
	recs := randomRecords(opts, 3, 2)
	for i := range recs {
		recs[i].shape = nil
	}
	b := buildShard(t, opts, recs)
	r, err := NewReader(bytes.NewReader(b), int64(len(b)), "v1.pks")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.RecordShape(1); !errors.Is(err, ErrShapeUnknown) || !strings.Contains(err.Error(), "v1.pks") {
		t.Fatalf("RecordShape = %v, want ErrShapeUnknown naming the file", err)
	}
}

// brokenV2 are damaged version-2 shards (from shapesShard) and version mix-ups, kept in
// testdata/v2 for other readers' tests.
var brokenV2 = []struct {
	name       string
	damage     func(b []byte) []byte
	wantRecord int64
}{
	{"v2-shape-zero", func(b []byte) []byte { le.PutUint32(b[shapesPartOff(b)+8*3:], 0); fixIndexCRC(b); return b }, 3},
	{"v2-shape-mismatch", func(b []byte) []byte { le.PutUint32(b[shapesPartOff(b)+8*1+4:], 3); fixIndexCRC(b); return b }, 1},
	{"v2-var-no-shapes-flag", func(b []byte) []byte {
		le.PutUint16(b[hdrFlagsOff:], FlagVarSize|FlagMeta)
		fixHeaderCRC(b)
		return b
	}, -1},
	{"v1-shapes-flag", func(b []byte) []byte { le.PutUint16(b[hdrVersionOff:], 1); fixHeaderCRC(b); return b }, -1},
}

// fixHeaderCRC recomputes the header CRC after an edit of the header.
func fixHeaderCRC(b []byte) {
	metaLen := le.Uint32(b[hdrMetaLenOff:])
	le.PutUint32(b[hdrCRCOff:], crc32cUpdate(crc32c(b[:hdrCRCOff]), b[HeaderFixed:HeaderFixed+metaLen]))
}

func TestBrokenV2(t *testing.T) {
	for _, tc := range brokenV2 {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.damage(shapesShard(t))
			if *update {
				writeTestdata(t, filepath.Join("v2", tc.name+".pks"), b)
			}
			if disk, err := os.ReadFile(filepath.Join("testdata", "v2", tc.name+".pks")); err != nil || !bytes.Equal(disk, b) {
				t.Errorf("testdata/v2/%s.pks is missing or stale (%v); run go test -run TestBrokenV2 -update", tc.name, err)
			}
			_, err := NewReader(bytes.NewReader(b), int64(len(b)), tc.name+".pks")
			checkErr(t, "reader", err, ErrFormat, tc.wantRecord, tc.name)
			var faults []*CorruptionError
			if err := Scan(bytes.NewReader(b), int64(len(b)), tc.name+".pks", func(e *CorruptionError) { faults = append(faults, e) }); err != nil {
				t.Fatal(err)
			}
			if len(faults) == 0 {
				t.Fatal("Scan found nothing")
			}
			checkErr(t, "Scan", faults[0], ErrFormat, tc.wantRecord, tc.name)
		})
	}
}

// TestScanFlippedShape flips one bit of one record's stored width without fixing the index
// CRC, as a disk would: Scan reports the index CRC and names the record whose shape is wrong,
// and still checks the data blocks.
func TestScanFlippedShape(t *testing.T) {
	b := shapesShard(t)
	b[shapesPartOff(b)+8*2+4] ^= 0x02 // record 2's width 1 -> 3
	b[Align+5] ^= 1                   // and a data byte of record 0
	var faults []*CorruptionError
	if err := Scan(bytes.NewReader(b), int64(len(b)), "flip.pks", func(e *CorruptionError) { faults = append(faults, e) }); err != nil {
		t.Fatal(err)
	}
	var crc, shape, data bool
	for _, f := range faults {
		switch {
		case errors.Is(f, ErrChecksum) && f.Record == -1:
			crc = true
		case errors.Is(f, ErrFormat) && f.Record == 2 && strings.Contains(f.Error(), "shape"):
			shape = true
		case errors.Is(f, ErrChecksum) && f.Record == 0:
			data = true
		}
	}
	if !crc || !shape || !data {
		t.Fatalf("faults %v: index CRC %v, record 2 shape %v, record 0 data %v", faults, crc, shape, data)
	}
	if _, err := NewReader(bytes.NewReader(b), int64(len(b)), "flip.pks"); !errors.Is(err, ErrChecksum) {
		t.Fatalf("reader: %v, want the index CRC error", err)
	}
}

// TestLoaderShapes reads a version-2 dataset of images of many sizes through the Loader, with
// and without shuffle and O_DIRECT, and checks each record's bytes and shape.
func TestLoaderShapes(t *testing.T) {
	opts := WriterOptions{Sample: SampleSpec{Shape: []int{-1, -1, 3}, DType: Uint8, Layout: "hwc"}}
	recs := randomRecords(opts, 70, 11)
	dir := buildDataset(t, opts, recs, []int{25, 45})
	d, err := OpenDataset(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for i, rec := range recs {
		if got, err := d.RecordShape(int64(i)); err != nil || !slices.Equal(got, rec.shape) {
			t.Fatalf("Dataset.RecordShape(%d) = %v, %v, want %v", i, got, err, rec.shape)
		}
	}
	for _, direct := range []bool{false, true} {
		for _, shuffle := range []bool{false, true} {
			l, err := d.NewLoader(LoaderOptions{BatchSize: 8, Shuffle: shuffle, Seed: 5, Buffer: 16, Direct: direct, ReadSize: 3000})
			if err != nil {
				t.Fatal(err)
			}
			seen := 0
			for l.Next() {
				bt := l.Batch()
				if len(bt.Dims) != 2*bt.Len() {
					t.Fatalf("Dims has %d values for %d records", len(bt.Dims), bt.Len())
				}
				for k := range bt.Len() {
					rec := recs[bt.Indices[k]]
					if got := bt.Shape(k); !slices.Equal(got, rec.shape) {
						t.Fatalf("record %d: Shape = %v, want %v", bt.Indices[k], got, rec.shape)
					}
					if !bytes.Equal(bt.Data[bt.Offsets[k]:bt.Offsets[k+1]], rec.data) {
						t.Fatalf("record %d differs", bt.Indices[k])
					}
					seen++
				}
			}
			if err := l.Err(); err != nil {
				t.Fatal(err)
			}
			l.Close()
			if seen != len(recs) {
				t.Fatalf("read %d records, want %d", seen, len(recs))
			}
		}
	}
}

// TestLoaderVersion1ShapesUnknown: a version-1 dataset of [-1, -1, 3] records (no shapes
// stored) still streams its bytes; the shape values it never recorded are -1.
func TestLoaderVersion1ShapesUnknown(t *testing.T) {
	opts := WriterOptions{Sample: SampleSpec{Shape: []int{-1, -1, 3}, DType: Uint8, Layout: "hwc"}, NoShapes: true}
	recs := randomRecords(opts, 12, 4)
	for i := range recs {
		recs[i].shape = nil
	}
	d, err := OpenDataset(buildDataset(t, opts, recs, []int{12}))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	l, err := d.NewLoader(LoaderOptions{BatchSize: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	n := 0
	for l.Next() {
		b := l.Batch()
		for k := range b.Len() {
			if !bytes.Equal(b.Data[b.Offsets[k]:b.Offsets[k+1]], recs[b.Indices[k]].data) || !slices.Equal(b.Shape(k), []int{-1, -1, 3}) {
				t.Fatalf("record %d: shape %v", b.Indices[k], b.Shape(k))
			}
			n++
		}
	}
	if l.Err() != nil || n != 12 {
		t.Fatalf("read %d records: %v", n, l.Err())
	}
}

// TestDatasetShardNewerThanManifest: a version-2 shard in a dataset whose manifest says
// format_version 1 is an inconsistency, reported with the shard's path.
func TestDatasetShardNewerThanManifest(t *testing.T) {
	opts := WriterOptions{Sample: SampleSpec{Shape: []int{-1, -1, 3}, DType: Uint8, Layout: "hwc"}}
	dir := buildDataset(t, opts, randomRecords(opts, 3, 4), []int{3})
	m, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.FormatVersion != 2 {
		t.Fatalf("format_version %d, want 2", m.FormatVersion)
	}
	m.FormatVersion = 1 // resealed: the inconsistency itself must be caught, not the checksum
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ManifestName), b, 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := OpenDataset(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Record(0); err == nil || !strings.Contains(err.Error(), "format_version 1") || !strings.Contains(err.Error(), "shard-00000.pks") {
		t.Fatalf("Record(0) = %v, want the version mismatch naming the shard", err)
	}
}
