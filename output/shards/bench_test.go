package shards

import (
	"testing"

	"github.com/packer-dev/packer/output"
	"github.com/packer-dev/packer/shard"
)

// BenchmarkWriterStage is a build's serial stage alone (issue 15, item 4): ImageNet-sized
// 224×224×3 uint8 records, with their source-path metadata, written in order through the shard
// output (record CRC-32C, SHA-256 of every byte, the file writes, shards of 256 MiB, every
// shard committed), with no decoding. Compare its records/s with one worker's decode+resize
// rate (scripts/bench_vs_limits.sh row 1) for the writer's headroom.
func BenchmarkWriterStage(b *testing.B) {
	rec := output.Record{Data: make([]byte, 224*224*3), Label: 3, Meta: []byte(`{"path":"n01440764/n01440764_10026.JPEG"}`)}
	for i := range rec.Data {
		rec.Data[i] = byte(i * 7)
	}
	out, err := New(output.Config{Dir: b.TempDir(), Sample: shard.SampleSpec{Shape: []int{224, 224, 3}, DType: shard.Uint8},
		Label: shard.LabelSpec{DType: "int64", Aux: []string{}}, HasMeta: true, ShardSize: 256 << 20})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(rec.Data)))
	b.ResetTimer()
	for range b.N {
		if err := out.Write(rec); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := out.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// chunkCopier does what a sink's Write does on the build writer's goroutine: it copies the bytes
// into a 4 MiB chunk, here reused, with no hashing and no file behind it.
type chunkCopier struct{ cur []byte }

func (c *chunkCopier) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		k := copy(c.cur[len(c.cur):cap(c.cur)], p)
		c.cur, p = c.cur[:len(c.cur)+k], p[k:]
		if len(c.cur) == cap(c.cur) {
			c.cur = c.cur[:0]
		}
	}
	return n, nil
}

// BenchmarkWriterSerial is the part of BenchmarkWriterStage that stays on the build writer's
// goroutine once shards are hashed and written on goroutines of their own: the record's
// CRC-32C, its index entries and the copy into the sink's chunk. Its records/s is the writer
// stage's ceiling on a machine with enough cores for the hashing (one SHA-256 goroutine per
// shard in flight); compare it with one worker's rate.
func BenchmarkWriterSerial(b *testing.B) {
	rec := output.Record{Data: make([]byte, 224*224*3), Label: 3, Meta: []byte(`{"path":"n01440764/n01440764_10026.JPEG"}`)}
	for i := range rec.Data {
		rec.Data[i] = byte(i * 7)
	}
	opts := shard.WriterOptions{Sample: shard.SampleSpec{Shape: []int{224, 224, 3}, DType: shard.Uint8},
		Label: shard.LabelSpec{DType: "int64", Aux: []string{}}, HasMeta: true, Unbuffered: true}
	sink := &chunkCopier{cur: alignedChunk()}
	perShard := (256 << 20) / len(rec.Data)
	b.SetBytes(int64(len(rec.Data)))
	b.ResetTimer()
	var w *shard.Writer
	for i := range b.N {
		if i%perShard == 0 {
			if w != nil {
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
			}
			var err error
			if w, err = shard.NewWriter(sink, opts); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.AppendShape(rec.Data, nil, rec.Label, rec.Aux, rec.Meta); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
