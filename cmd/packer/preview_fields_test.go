package main

import (
	"encoding/binary"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/packer-dev/packer/output"
	"github.com/packer-dev/packer/output/npy"
	"github.com/packer-dev/packer/shard"
)

// TestPreviewDrawsFields: preview of a dataset with a box, a mask and a caption draws the box's
// outline where its edges fall at the tile's scale, tints the mask's pixels and leaves the
// others, and writes the caption under the tile.
func TestPreviewDrawsFields(t *testing.T) {
	dir := t.TempDir()
	writeFieldsNPY(t, dir)

	sheetPath := filepath.Join(t.TempDir(), "s.png")
	mustRun(t, "preview", dir, "-o", sheetPath, "--count", "1", "--tile", "64")
	f, err := os.Open(sheetPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sheet, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	// The 20×20 record fills the 60×60 inside of the 64-pixel tile at (2, 2), scale 3: the box
	// [5, 15) covers sheet pixels 17 to 46 each way.
	if b := sheet.Bounds(); b.Dx() != 64 || b.Dy() != 64+16+14 {
		t.Fatalf("sheet is %v, want 64×94 (a line for the caption)", b)
	}
	grey := color.RGBA{100, 100, 100, 255}
	tinted := color.RGBA{half(100, maskColours[0].R), half(100, maskColours[0].G), half(100, maskColours[0].B), 255}
	for _, c := range []struct {
		x, y int
		want color.RGBA
	}{
		{17, 30, boxColour}, {46, 30, boxColour}, {30, 17, boxColour}, {30, 46, boxColour}, {17, 17, boxColour},
		{16, 30, tinted}, {18, 30, tinted}, {31, 30, tinted}, // left of x 10 (sheet 32): mask value 1
		{32, 30, grey}, {45, 30, grey}, {47, 30, grey}, {40, 47, grey}, {30, 47, tinted}, {50, 50, grey},
		{4, 4, tinted}, {4, 60, tinted}, {60, 4, grey},
	} {
		if got := color.RGBAModel.Convert(sheet.At(c.x, c.y)).(color.RGBA); got != c.want {
			t.Errorf("pixel (%d, %d) is %v, want %v", c.x, c.y, got, c.want)
		}
	}
	if !hasColour(sheet, image.Rect(0, 80, 64, 94), color.RGBA{255, 230, 140, 255}) {
		t.Error("no caption drawn under the tile")
	}
	if hasColour(sheet, image.Rect(0, 64, 64, 80), color.RGBA{255, 230, 140, 255}) {
		t.Error("caption drawn over the label line")
	}
}

// writeFieldsNPY writes in dir an npy dataset of one grey 20×20 record with a caption, a box
// [5, 15) each way and a mask whose left half is class 1, through the npy output.
func writeFieldsNPY(t *testing.T, dir string) {
	t.Helper()
	raw := shard.EncodingRaw
	cfg := output.Config{Dir: dir, Sample: shard.SampleSpec{Shape: []int{20, 20, 3}, DType: shard.Uint8, Layout: "hwc"},
		Label: shard.LabelSpec{DType: "int64"}, Fields: []shard.Field{
			{Name: "caption", Kind: shard.KindText, Encoding: raw},
			{Name: "boxes", Kind: shard.KindNDArray, DType: "float32", Shape: []int{-1, 4}, Encoding: raw, Geometry: shard.GeometryBoxes},
			{Name: "mask", Kind: shard.KindImage, DType: "uint8", Shape: []int{-1, -1, 1}, Encoding: raw, Geometry: shard.GeometryMask},
		}}
	data := make([]byte, 20*20*3)
	mask := make([]byte, 20*20)
	for i := range data {
		data[i] = 100
	}
	for y := range 20 {
		for x := range 10 {
			mask[y*20+x] = 1 // the left half is class 1
		}
	}
	var box []byte
	for _, v := range []float32{5, 5, 15, 15} {
		box = binary.LittleEndian.AppendUint32(box, math.Float32bits(v))
	}
	w, err := npy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(output.Record{Data: data, Fields: [][]byte{[]byte("a square\non grey, and a caption longer than forty characters"), box, mask}}); err != nil {
		t.Fatal(err)
	}
	files, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	m := &shard.Manifest{Format: shard.FormatNPY, FormatVersion: 1, Count: 1, Sample: cfg.Sample, Label: cfg.Label, Files: files, Fields: cfg.Fields}
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, shard.ManifestName), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func hasColour(img image.Image, r image.Rectangle, c color.RGBA) bool {
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if color.RGBAModel.Convert(img.At(x, y)).(color.RGBA) == c {
				return true
			}
		}
	}
	return false
}
