package shard

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated files in testdata/")

// varOptions and varRecords make a small variable-size shard with per-record metadata and aux
// values: k = 1, so every record is its own checksum block. It is a version-1 shard (no
// per-record shapes), as the broken shards made from it have always been.
var varOptions = WriterOptions{
	Sample:   SampleSpec{Shape: []int{-1, 2}, DType: Uint8, Layout: "hwc"},
	Label:    LabelSpec{Aux: []string{"coarse_label"}},
	HasMeta:  true,
	NoShapes: true,
}

func varRecords() []testRecord {
	var recs []testRecord
	for i := range 6 {
		recs = append(recs, testRecord{
			data:  bytes.Repeat([]byte{byte(10 + i)}, 2*(i+1)),
			label: int64(i),
			aux:   []int64{int64(i / 2)},
			meta:  []byte(fmt.Sprintf(`{"path":"r%d"}`, i)),
		})
	}
	return recs
}

func varShard(t testing.TB) []byte { return buildShard(t, varOptions, varRecords()) }

// footerOf returns the footer of b.
func footerOf(b []byte) []byte { return b[len(b)-FooterSize:] }

// fixFooterCRC recomputes the footer CRC after an edit.
func fixFooterCRC(b []byte) {
	ft := footerOf(b)
	le.PutUint32(ft[ftFooterCRCOff:], crc32c(ft[:ftFooterCRCOff]))
}

// fixIndexCRC recomputes the index and footer CRCs after an edit of the index.
func fixIndexCRC(b []byte) {
	ft := footerOf(b)
	off, n := le.Uint64(ft[ftIndexOffsetOff:]), le.Uint64(ft[ftIndexLenOff:])
	le.PutUint32(ft[ftIndexCRCOff:], crc32c(b[off:off+n]))
	fixFooterCRC(b)
}

// brokenShards are damaged shards named for their fault. wantRecord is the first record of
// the range the error must name (-1: not a record fault); open says whether the fault is found
// when opening (otherwise by reading every record, or only by Scan when scanOnly).
var brokenShards = []struct {
	name       string
	damage     func(b []byte) []byte
	wantIs     error
	wantRecord int64
	scanOnly   bool
}{
	{"empty", func(b []byte) []byte { return nil }, ErrMagic, -1, false},
	{"not-a-shard", func(b []byte) []byte { return []byte("hello, world, this is not a shard at all") }, ErrMagic, -1, false},
	{"short-header", func(b []byte) []byte { return b[:20] }, ErrTruncated, -1, false},
	{"bad-magic", func(b []byte) []byte { b[0] = 'X'; return b }, ErrMagic, -1, false},
	{"version-99", func(b []byte) []byte { b[hdrVersionOff] = 99; return b }, ErrVersion, -1, false},
	{"unknown-flag", func(b []byte) []byte { b[hdrFlagsOff+1] = 0x80; return b }, ErrFormat, -1, false},
	{"meta-too-large", func(b []byte) []byte { le.PutUint32(b[hdrMetaLenOff:], MaxMetaLen+1); return b }, ErrTooLarge, -1, false},
	{"meta-past-end", func(b []byte) []byte { le.PutUint32(b[hdrMetaLenOff:], 100000); return b }, ErrTruncated, -1, false},
	{"bad-header-crc", func(b []byte) []byte { b[HeaderFixed+3] ^= 1; return b }, ErrChecksum, -1, false},
	{"reserved-not-zero", func(b []byte) []byte { b[25] = 1; return b }, ErrPadding, -1, false},
	{"truncated-footer", func(b []byte) []byte { return b[:len(b)-100] }, ErrTruncated, -1, false},
	{"truncated-half", func(b []byte) []byte { return b[:len(b)/2] }, ErrTruncated, -1, false},
	{"bad-footer-magic", func(b []byte) []byte { b[len(b)-1] = 'X'; return b }, ErrMagic, -1, false},
	{"bad-footer-crc", func(b []byte) []byte { footerOf(b)[ftDataLenOff] ^= 4; return b }, ErrChecksum, -1, false},
	{"record-count-too-large", func(b []byte) []byte {
		le.PutUint64(footerOf(b)[ftRecordCountOff:], 1<<40)
		fixFooterCRC(b)
		return b
	}, ErrTooLarge, -1, false},
	{"index-offset-wrong", func(b []byte) []byte {
		le.PutUint64(footerOf(b)[ftIndexOffsetOff:], 3*Align)
		fixFooterCRC(b)
		return b
	}, ErrFormat, -1, false},
	{"index-len-past-end", func(b []byte) []byte {
		le.PutUint64(footerOf(b)[ftIndexLenOff:], 1<<40)
		fixFooterCRC(b)
		return b
	}, ErrTruncated, -1, false},
	{"extra-block", func(b []byte) []byte {
		le.PutUint32(footerOf(b)[ftBlockRecordsOff:], 2)
		fixFooterCRC(b)
		return b
	}, ErrFormat, -1, false},
	{"bad-index-crc", func(b []byte) []byte { b[2*Align+(7*8)] ^= 0x10; return b }, ErrChecksum, -1, false},
	{"offsets-decreasing", func(b []byte) []byte {
		le.PutUint64(b[2*Align+3*8:], 1) // off[3] = 1 < off[2]
		fixIndexCRC(b)
		return b
	}, ErrFormat, 2, false},
	{"bad-crc-record3", func(b []byte) []byte { b[Align+2+4+6+1] ^= 0x40; return b }, ErrChecksum, 3, false},
	{"padding-not-zero", func(b []byte) []byte { b[Align+100] = 7; return b }, ErrPadding, -1, true},
	{"header-padding-not-zero", func(b []byte) []byte { b[Align-1] = 7; return b }, ErrPadding, -1, true},
	{"index-padding-not-zero", func(b []byte) []byte { b[len(b)-FooterSize-1] = 7; return b }, ErrPadding, -1, true},
}

func TestBrokenShards(t *testing.T) {
	for _, tc := range brokenShards {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.damage(varShard(t))
			if *update {
				writeTestdata(t, tc.name+".pks", b)
			}
			var err error
			r, err := NewReader(bytes.NewReader(b), int64(len(b)), tc.name+".pks")
			if err == nil {
				for i := 0; i < r.Len() && err == nil; i++ {
					_, err = r.Record(i)
				}
			}
			if tc.scanOnly {
				if err != nil {
					t.Fatalf("reader: %v", err)
				}
			} else {
				checkErr(t, "reader", err, tc.wantIs, tc.wantRecord, tc.name)
			}
			var faults []*CorruptionError
			if err := Scan(bytes.NewReader(b), int64(len(b)), tc.name+".pks", func(e *CorruptionError) { faults = append(faults, e) }); err != nil {
				t.Fatalf("Scan: %v", err)
			}
			if len(faults) == 0 {
				t.Fatalf("Scan found nothing")
			}
			checkErr(t, "Scan", faults[0], tc.wantIs, tc.wantRecord, tc.name)
		})
	}
}

func writeTestdata(t testing.TB, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join("testdata", name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func checkErr(t *testing.T, who string, err error, wantIs error, wantRecord int64, name string) {
	t.Helper()
	if !errors.Is(err, wantIs) {
		t.Fatalf("%s: error %v, want %v", who, err, wantIs)
	}
	var ce *CorruptionError
	if !errors.As(err, &ce) {
		t.Fatalf("%s: error %v is not a *CorruptionError", who, err)
	}
	if ce.Record != wantRecord {
		t.Errorf("%s: error %v names record %d, want %d", who, err, ce.Record, wantRecord)
	}
	if !strings.Contains(err.Error(), name) {
		t.Errorf("%s: error %q does not name the file", who, err)
	}
}

// TestCheckedInBroken reads the broken shards kept in testdata (made by go test -update) and
// checks that they still give their fault.
func TestCheckedInBroken(t *testing.T) {
	for _, tc := range brokenShards {
		b, err := os.ReadFile(filepath.Join("testdata", tc.name+".pks"))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, tc.damage(varShard(t))) {
			t.Errorf("testdata/%s.pks is stale; run go test -run TestBrokenShards -update", tc.name)
		}
	}
}

// TestScanEveryFault damages several places of a multi-block shard and expects each fault to be
// reported with its record range.
func TestScanEveryFault(t *testing.T) {
	opts := WriterOptions{Sample: SampleSpec{Shape: []int{256, 1024}, DType: Uint8, Layout: "hwc"}} // 256 KiB: k = 4
	recs := randomRecords(opts, 10, 3)
	b := buildShard(t, opts, recs)
	const rs = 256 << 10
	b[Align+1*rs+5] ^= 1        // block 0 (records 0-3)
	b[Align+9*rs+7] ^= 1        // block 2 (records 8-9)
	b[len(b)-FooterSize-9] ^= 1 // index padding
	b[HeaderFixed+2] ^= 1       // header CRC
	var faults []*CorruptionError
	var progress int64
	err := ScanWith(bytes.NewReader(b), int64(len(b)), "multi.pks", ScanOptions{ChunkSize: 100000, Progress: func(n int64) { progress += n }},
		func(e *CorruptionError) { faults = append(faults, e) })
	if err != nil {
		t.Fatal(err)
	}
	if progress != int64(len(b)) {
		t.Errorf("progress adds up to %d, want %d", progress, len(b))
	}
	want := []struct {
		is            error
		first, number int64
	}{{ErrChecksum, -1, 0}, {ErrChecksum, 0, 4}, {ErrChecksum, 8, 2}, {ErrPadding, -1, 0}}
	if len(faults) != len(want) {
		t.Fatalf("faults %v, want %d", faults, len(want))
	}
	for i, w := range want {
		if !errors.Is(faults[i], w.is) || faults[i].Record != w.first || faults[i].Records != w.number {
			t.Errorf("fault %d = %v, want %v records %d+%d", i, faults[i], w.is, w.first, w.number)
		}
	}
}

// TestBitFlips flips single bits at random positions (fixed seed) of a multi-block shard and
// requires Scan to find each, and to name the damaged block's records when the bit is in
// record data.
func TestBitFlips(t *testing.T) {
	opts := WriterOptions{Sample: SampleSpec{Shape: []int{64, 1024}, DType: Uint8, Layout: "hwc"}, Label: LabelSpec{Aux: []string{"a"}}} // 64 KiB: k = 16
	recs := randomRecords(opts, 40, 4)
	orig := buildShard(t, opts, recs)
	rng := rand.New(rand.NewPCG(5, 5))
	const rs = 64 << 10
	dataEnd := int64(Align + 40*rs)
	for trial := 0; trial < 300; trial++ {
		b := bytes.Clone(orig)
		pos := rng.Int64N(int64(len(b)))
		if trial%3 == 0 { // bias towards the small header, index and footer
			pos = []int64{rng.Int64N(Align), dataEnd + rng.Int64N(int64(len(b))-dataEnd)}[trial%2]
		}
		b[pos] ^= 1 << rng.IntN(8)
		var faults []*CorruptionError
		if err := Scan(bytes.NewReader(b), int64(len(b)), "flip.pks", func(e *CorruptionError) { faults = append(faults, e) }); err != nil {
			t.Fatal(err)
		}
		if len(faults) == 0 {
			t.Fatalf("flip at %d not found", pos)
		}
		if pos >= Align && pos < dataEnd {
			rec := (pos - Align) / rs
			found := false
			for _, f := range faults {
				found = found || (f.Record >= 0 && rec >= f.Record && rec < f.Record+f.Records)
			}
			if !found || len(faults) != 1 {
				t.Fatalf("flip in record %d reported as %v", rec, faults)
			}
		}
	}
}
