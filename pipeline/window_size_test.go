package pipeline

import (
	"testing"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source"
)

// TestWindow checks the reorder window's size: two jobs per worker, widened for items of one
// fixed-size record each as far as windowBytes allows, never for video or frame folders (many
// clips per item) or records of varying size.
func TestWindow(t *testing.T) {
	img := shard.SampleSpec{Shape: []int{224, 224, 3}, DType: shard.Uint8}
	hd := shard.SampleSpec{Shape: []int{1080, 1920, 3}, DType: shard.Float32}
	vary := shard.SampleSpec{Shape: []int{-1, -1, 3}, DType: shard.Uint8}
	for _, c := range []struct {
		info source.SourceInfo
		spec shard.SampleSpec
		want int
	}{
		{source.SourceInfo{Kind: "folder"}, img, 4 + windowBytes/(9*groupBytes)},
		{source.SourceInfo{Kind: "cifar10"}, shard.SampleSpec{Shape: []int{32, 32, 3}, DType: shard.Uint8}, 4 + windowBytes/(9*groupBytes)},
		{source.SourceInfo{Kind: "folder"}, hd, 4 + int(windowBytes/(9*hd.Size()))},
		{source.SourceInfo{Kind: "folder"}, vary, 4},
		{source.SourceInfo{Kind: "video", ClipLen: 8}, img, 4},
		{source.SourceInfo{Kind: "frames", ClipLen: 8}, img, 4},
	} {
		b := &builder{opts: Options{Workers: 2}, info: c.info, spec: c.spec}
		if got := b.window(); got != c.want {
			t.Errorf("%s %v: window %d, want %d", c.info.Kind, c.spec.Shape, got, c.want)
		}
		if got := b.window(); got-4 > 64 {
			t.Errorf("%s: window %d past the cap", c.info.Kind, got)
		}
	}
}
