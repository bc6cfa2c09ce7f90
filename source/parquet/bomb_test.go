package parquet

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/packer-dev/packer/internal/testfix"
	"github.com/packer-dev/packer/output/shards"
	"github.com/packer-dev/packer/pipeline"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/transforms"
)

// zeros reads n zero bytes without holding them.
type zeros struct{ n int64 }

func (z *zeros) Read(p []byte) (int, error) {
	if z.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > z.n {
		p = p[:z.n]
	}
	clear(p)
	z.n -= int64(len(p))
	return len(p), nil
}

// plainValue is the PLAIN encoding of one BYTE_ARRAY value of n zero bytes, streamed.
func plainValue(n int64) io.Reader {
	return io.MultiReader(bytes.NewReader(binary.LittleEndian.AppendUint32(nil, uint32(n))), &zeros{n})
}

// compressed returns the page of codec holding one BYTE_ARRAY value of n zero bytes, made
// without holding the value: a decompression bomb of a few KiB when n is large.
func compressed(t *testing.T, codec format.CompressionCodec, n int64) []byte {
	t.Helper()
	var b bytes.Buffer
	var w io.WriteCloser
	var err error
	switch codec {
	case format.Zstd:
		w, err = zstd.NewWriter(&b, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithWindowSize(1<<20))
	case format.Gzip:
		w, err = gzip.NewWriterLevel(&b, gzip.BestSpeed)
	case format.Brotli:
		w = brotli.NewWriterLevel(&b, 1)
	case format.Snappy:
		// A raw snappy block whose preamble claims n+4 bytes, followed by too little data:
		// a decoder sizes its output from the preamble.
		return append(binary.AppendUvarint(nil, uint64(n+4)), 0, 0, 0, 0)
	case format.Lz4Raw:
		// An LZ4 block: the value's length and one zero as literals, then one match of
		// offset 1 repeating the zero n-1 times, then 5 literal zeros (the last sequence).
		lit := binary.LittleEndian.AppendUint32(nil, uint32(n))
		lit = append(lit, 0)
		ml := n - 5 - 1 - 4 // the match's length beyond the minimum of 4
		blk := []byte{byte(len(lit))<<4 | 15}
		blk = append(blk, lit...)
		blk = append(blk, 1, 0) // offset 1
		for ml -= 15; ml >= 255; ml -= 255 {
			blk = append(blk, 255)
		}
		blk = append(blk, byte(ml))
		return append(blk, 5<<4, 0, 0, 0, 0, 0)
	default:
		t.Fatalf("codec %v", codec)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(w, plainValue(n)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// writePage appends a data page (v1, PLAIN) holding data, whose header claims usize bytes
// uncompressed, and returns its offset.
func writePage(t *testing.T, f *bytes.Buffer, data []byte, usize int32, values int32) int64 {
	t.Helper()
	h, err := thrift.Marshal(new(thrift.CompactProtocol), &format.PageHeader{
		Type: format.DataPage, UncompressedPageSize: usize, CompressedPageSize: int32(len(data)),
		DataPageHeader: &format.DataPageHeader{NumValues: values, Encoding: format.Plain, DefinitionLevelEncoding: format.RLE, RepetitionLevelEncoding: format.RLE},
	})
	if err != nil {
		t.Fatal(err)
	}
	off := int64(f.Len())
	f.Write(h)
	f.Write(data)
	return off
}

// craftFile writes a Parquet file of one row: an image column (required binary) whose one page
// is page, compressed with codec, its header claiming usize bytes uncompressed; a label column
// (required int64, uncompressed) holding 0.
func craftFile(t *testing.T, path string, codec format.CompressionCodec, page []byte, usize int32, labelValues int32) {
	t.Helper()
	var f bytes.Buffer
	f.WriteString("PAR1")
	imgOff := writePage(t, &f, page, usize, 1)
	labelOff := writePage(t, &f, make([]byte, 8), 8, labelValues)
	end := int64(f.Len())
	req := format.Required
	ba, i64 := format.ByteArray, format.Int64
	chunk := func(typ format.Type, name string, codec format.CompressionCodec, off, size int64) format.ColumnChunk {
		return format.ColumnChunk{FileOffset: off, MetaData: format.ColumnMetaData{
			Type: typ, Encoding: []format.Encoding{format.Plain}, PathInSchema: []string{name}, Codec: codec,
			NumValues: 1, TotalUncompressedSize: size, TotalCompressedSize: size, DataPageOffset: off,
		}}
	}
	meta, err := thrift.Marshal(new(thrift.CompactProtocol), &format.FileMetaData{
		Version: 1, NumRows: 1,
		Schema: []format.SchemaElement{
			{Name: "schema", NumChildren: 2},
			{Name: "image", Type: &ba, RepetitionType: &req},
			{Name: "label", Type: &i64, RepetitionType: &req},
		},
		RowGroups: []format.RowGroup{{NumRows: 1, TotalByteSize: end - 4, Columns: []format.ColumnChunk{
			chunk(ba, "image", codec, imgOff, labelOff-imgOff),
			chunk(i64, "label", format.Uncompressed, labelOff, end-labelOff),
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	f.Write(meta)
	f.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(meta))))
	f.WriteString("PAR1")
	if err := os.WriteFile(path, f.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDecompressionBombs: a 33 KB Parquet file holding one 1000 MB cell of zeros took a build
// to 3.1 GB of memory: parquet-go sizes a page's buffer from its header, and decompresses
// whatever the data expands to. Each page is now checked before it is read: its header's sizes
// against MaxPageSize, and what its data actually decompresses to (headers can lie), counted
// without holding it. The build runs as a child process over one bomb per codec (the header
// honest or lying), next to a good file whose row is packed, and its peak memory is asserted.
func TestDecompressionBombs(t *testing.T) {
	const n = 320 << 20 // over MaxPageSize (256 MiB)
	dir := t.TempDir()
	img, err := os.ReadFile(testfix.Corpus("grey.jpg"))
	if err != nil {
		t.Fatal(err)
	}
	var good bytes.Buffer
	zw, _ := zstd.NewWriter(&good)
	zw.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(img))))
	zw.Write(img)
	zw.Close()
	craftFile(t, filepath.Join(dir, "a-good.parquet"), format.Zstd, good.Bytes(), int32(4+len(img)), 1)
	bombs := map[string]struct {
		codec  format.CompressionCodec
		usize  int32
		values int32 // the label page's value count; 0 means 1
	}{
		"zstd-honest.parquet":   {format.Zstd, n + 4, 0},
		"zstd-lying.parquet":    {format.Zstd, 100, 0},
		"gzip-lying.parquet":    {format.Gzip, 100, 0},
		"brotli-lying.parquet":  {format.Brotli, 100, 0},
		"snappy-lying.parquet":  {format.Snappy, 100, 0},
		"lz4-lying.parquet":     {format.Lz4Raw, 100, 0},
		"plain-honest.parquet":  {format.Uncompressed, n + 4, 0},
		"zstd-negative.parquet": {format.Zstd, -5, 0},
		"label-values.parquet":  {format.Snappy, 0, 1 << 30},
	}
	for name, b := range bombs {
		page := make([]byte, 16) // uncompressed: a header claiming more than the chunk holds
		if b.codec != format.Uncompressed {
			page = compressed(t, b.codec, n)
		}
		usize, values := b.usize, b.values
		if values == 0 {
			values = 1
		} else {
			// A good image page; the label page claims a billion values (parquet-go sizes
			// its decode buffers from the count).
			page, usize = good.Bytes(), int32(4+len(img))
			b.codec = format.Zstd
		}
		craftFile(t, filepath.Join(dir, name), b.codec, page, usize, values)
	}
	out := filepath.Join(t.TempDir(), "out")
	cmd := exec.Command(os.Args[0], "-test.run=^TestBombChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), "PACKER_BOMB_SRC="+dir, "PACKER_BOMB_OUT="+out)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("child build: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	peak := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10 // KiB on Linux
	if peak > 200<<20 {
		t.Errorf("the build's peak memory was %d MiB, want under 200 MiB (each bomb expands to %d MiB)", peak>>20, n>>20)
	}
	var res struct {
		Records int
		Skipped map[string]string
	}
	line := stdout.String()
	if i := strings.Index(line, "RESULT "); i >= 0 {
		line = line[i+len("RESULT "):]
		line = line[:strings.IndexByte(line, '\n')]
	}
	if err := json.Unmarshal([]byte(line), &res); err != nil {
		t.Fatalf("child output: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	if res.Records != 1 {
		t.Errorf("%d records, want the good file's one", res.Records)
	}
	for name := range bombs {
		in := name + " (from row 0)"
		if r := res.Skipped[in]; !strings.Contains(r, ErrFile.Error()) || !strings.Contains(r, "page") {
			t.Errorf("skipped[%s] = %q, want the file refused at its page", in, r)
		}
	}
	if len(res.Skipped) != len(bombs) {
		t.Errorf("skipped %v, want the %d bombs", res.Skipped, len(bombs))
	}
	t.Logf("peak memory %d MiB; skipped %v", peak>>20, res.Skipped)
}

// TestBombChild is TestDecompressionBombs's child process: it builds PACKER_BOMB_SRC and prints
// the records and the skipped list.
func TestBombChild(t *testing.T) {
	src, out := os.Getenv("PACKER_BOMB_SRC"), os.Getenv("PACKER_BOMB_OUT")
	if src == "" {
		t.Skip("run by TestDecompressionBombs")
	}
	s, err := Open(src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pipeline.Build(context.Background(), pipeline.Options{Source: s, Transform: transforms.Spec{CropW: 8, CropH: 8}.MustCompile(), Output: shards.Entry, Out: out, Workers: 1}); err != nil {
		t.Fatal(err)
	}
	ds, err := shard.OpenDataset(out)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	skipped := map[string]string{}
	for _, sk := range ds.Manifest().Skipped {
		skipped[sk.Input] = sk.Reason
	}
	b, _ := json.Marshal(map[string]any{"Records": ds.Len(), "Skipped": skipped})
	fmt.Printf("RESULT %s\n", b)
}
