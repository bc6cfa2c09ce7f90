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
