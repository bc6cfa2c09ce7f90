package shard

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"unsafe"
)

// scanInputs returns clean and damaged shards, fixed- and variable-size, named.
func scanInputs(t *testing.T) map[string][]byte {
	in := map[string][]byte{}
	opts := WriterOptions{Sample: SampleSpec{Shape: []int{64, 1024}, DType: Uint8, Layout: "hwc"}, Label: LabelSpec{Aux: []string{"a"}}} // k = 16
	fixed := buildShard(t, opts, randomRecords(opts, 40, 4))
	vopts := WriterOptions{Sample: SampleSpec{Shape: []int{-1}, DType: Uint8}, HasMeta: true}
	vs := buildShard(t, vopts, randomRecords(vopts, 300, 4))
	in["fixed"], in["var"] = fixed, vs
	for _, tc := range brokenShards {
		in["small/"+tc.name] = tc.damage(varShard(t))
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for name, orig := range map[string][]byte{"fixed": fixed, "var": vs} {
		for i := range 5 {
			b := bytes.Clone(orig)
			for range 1 + i%3 {
				b[rng.IntN(len(b))] ^= 1 << rng.IntN(8)
			}
			in[fmt.Sprintf("%s/flip%d", name, i)] = b
		}
		in[name+"/cut"] = orig[:len(orig)-3*Align-17]
	}
	return in
}

// scanRecord is what one scan produced: the faults as text, the bytes hashed and the progress.
type scanRecord struct {
	faults   []string
	hashed   []byte
	progress int64
}

func recordScan(t *testing.T, scan func(ScanOptions, func(*CorruptionError)) error, opts ScanOptions) scanRecord {
	t.Helper()
	var rec scanRecord
	var buf bytes.Buffer
	opts.Hash = &buf
	opts.Progress = func(n int64) { rec.progress += n }
	err := scan(opts, func(e *CorruptionError) {
		rec.faults = append(rec.faults, fmt.Sprintf("offset %d records %d+%d: %v", e.Offset, e.Record, e.Records, e.Err))
	})
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	rec.hashed = buf.Bytes()
	return rec
}

// TestScanHash checks that ScanOptions.Hash receives exactly the file's bytes, in order, for
// clean and damaged shards, whatever the chunk size, from memory and from files with and without
// O_DIRECT; and that the faults do not depend on how the file was read.
func TestScanHash(t *testing.T) {
	dirs := map[string]string{"tmp": t.TempDir()}
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() { // tmpfs: O_DIRECT is refused
		d, err := os.MkdirTemp("/dev/shm", "scanhash")
		if err == nil {
			dirs["shm"] = d
			t.Cleanup(func() { os.RemoveAll(d) })
		}
	}
	for name, b := range scanInputs(t) {
		t.Run(name, func(t *testing.T) {
			size := int64(len(b))
			ref := recordScan(t, func(o ScanOptions, rep func(*CorruptionError)) error {
				return ScanWith(bytes.NewReader(b), size, name, o, rep)
			}, ScanOptions{})
			if !bytes.Equal(ref.hashed, b) {
				t.Fatalf("hashed %d bytes that differ from the file's %d", len(ref.hashed), len(b))
			}
			if ref.progress != size {
				t.Errorf("progress %d, want %d", ref.progress, size)
			}
			if name != "fixed" && name != "var" && len(ref.faults) == 0 {
				t.Errorf("no faults found")
			}
			if (name == "fixed" || name == "var") && len(ref.faults) > 0 {
				t.Errorf("faults in a clean shard: %v", ref.faults)
			}
			check := func(how string, got scanRecord) {
				t.Helper()
				if !bytes.Equal(got.hashed, b) {
					t.Errorf("%s: hashed %d bytes that differ from the file's %d", how, len(got.hashed), len(b))
				}
				if got.progress != size {
					t.Errorf("%s: progress %d, want %d", how, got.progress, size)
				}
				if !slices.Equal(got.faults, ref.faults) {
					t.Errorf("%s: faults\n%q\nwant\n%q", how, got.faults, ref.faults)
				}
			}
			chunks := []int{4095, Align, 3*Align + 1, 100003}
			if len(b) < 1<<16 {
				chunks = append(chunks, 1, 7)
			}
			for _, chunk := range chunks {
				check(fmt.Sprintf("chunk %d", chunk), recordScan(t, func(o ScanOptions, rep func(*CorruptionError)) error {
					return ScanWith(bytes.NewReader(b), size, name, o, rep)
				}, ScanOptions{ChunkSize: chunk}))
			}
			for dname, dir := range dirs {
				path := filepath.Join(dir, filepath.Base(name)+".pks")
				if err := os.WriteFile(path, b, 0o644); err != nil {
					t.Fatal(err)
				}
				for _, direct := range []bool{false, true} {
					for _, chunk := range []int{0, 5000} {
						check(fmt.Sprintf("%s direct=%v chunk %d", dname, direct, chunk), recordScan(t, func(o ScanOptions, rep func(*CorruptionError)) error {
							return ScanFile(path, o, rep)
						}, ScanOptions{Direct: direct, ChunkSize: chunk}))
					}
				}
			}
		})
	}
}

// TestStreamFile checks that StreamFile hashes any file exactly, sizes not a multiple of Align
// included, with and without O_DIRECT.
func TestStreamFile(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{0, 1, 100, Align, 3*Align + 5, 1<<20 + 123} {
		b := make([]byte, size)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		path := filepath.Join(dir, fmt.Sprint(size))
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if src, _, err := openSource(path, true); err == nil {
			t.Logf("%s: O_DIRECT %v", path, src.direct)
			src.close()
		}
		for _, direct := range []bool{false, true} {
			for _, chunk := range []int{0, 1000, 2 * Align} {
				var buf bytes.Buffer
				var progress int64
				err := StreamFile(path, ScanOptions{Hash: &buf, Direct: direct, ChunkSize: chunk, Progress: func(n int64) { progress += n }})
				if err != nil {
					t.Fatalf("size %d direct=%v chunk %d: %v", size, direct, chunk, err)
				}
				if !bytes.Equal(buf.Bytes(), b) || progress != int64(size) {
					t.Errorf("size %d direct=%v chunk %d: hashed %d bytes (progress %d) that differ from the file", size, direct, chunk, buf.Len(), progress)
				}
			}
		}
	}
	if err := StreamFile(filepath.Join(dir, "missing"), ScanOptions{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

type failingWriter struct{ n int }

var errStop = errors.New("stop")

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.n++; w.n == 2 {
		return 0, errStop
	}
	return len(p), nil
}

// TestScanHashError checks that an error from Hash stops the scan and is returned.
func TestScanHashError(t *testing.T) {
	opts := WriterOptions{Sample: SampleSpec{Shape: []int{64, 1024}, DType: Uint8, Layout: "hwc"}}
	b := buildShard(t, opts, randomRecords(opts, 40, 4))
	w := &failingWriter{}
	err := ScanWith(bytes.NewReader(b), int64(len(b)), "s.pks", ScanOptions{Hash: w, ChunkSize: 1 << 16}, nil)
	if !errors.Is(err, errStop) || w.n != 2 {
		t.Errorf("err %v after %d writes, want %v after 2", err, w.n, errStop)
	}
}

// TestAlignedBuf checks the scan's buffers, small and huge-page sized: aligned for O_DIRECT, of
// the length asked with room for whole blocks, writable to the end, and released.
func TestAlignedBuf(t *testing.T) {
	for _, n := range []int{1, Align, 2<<20 - Align, 2 << 20, 8<<20 + Align} {
		b, free := alignedBuf(n)
		if len(b) != n || cap(b) < int(alignUp(int64(n))) {
			t.Fatalf("alignedBuf(%d): len %d cap %d", n, len(b), cap(b))
		}
		if p := uintptr(unsafe.Pointer(&b[0])); p%Align != 0 {
			t.Fatalf("alignedBuf(%d) at %#x, not aligned to %d", n, p, Align)
		}
		if hugePage > 0 && n >= hugePage {
			if p := uintptr(unsafe.Pointer(&b[0])); p%hugePage != 0 {
				t.Fatalf("alignedBuf(%d) at %#x, not on a huge page boundary", n, p)
			}
		}
		for i := range b {
			b[i] = byte(i)
		}
		free()
	}
}
