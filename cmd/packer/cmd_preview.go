package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/jpeg"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"

	"github.com/packer-dev/packer/internal/fileutil"
	"github.com/packer-dev/packer/internal/humanize"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/transforms"
)

type previewOptions struct {
	IO    *iostreams
	Dir   string
	Out   string
	Count int
	Seed  uint64
	Tile  int
}

func newPreviewCommand(io *iostreams, runF func(context.Context, *previewOptions) error) *cobra.Command {
	opts := &previewOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "preview OUT -o sheet.png",
		Short: "Draw a contact sheet of packed records with their class names",
		Long: `Preview picks a seeded random sample of records from the dataset in OUT (any format) and
draws them as a grid in a PNG or JPEG (by the name of --out), each captioned with its record index and class name, so you
can look at what was packed (colour order, orientation, crops) instead of trusting numbers.
Float records are mapped back to pixels with the dataset's mean and std; clips show their
first frame. A dataset's fields are drawn on the tiles: boxes outlined, masks overlaid in a
colour per class value, and the start of the first text field (a caption) under the tile.
` + exitStatusHelp,
		Example: `  packer preview fmnist -o fmnist.png
  packer preview in224 -o sheet.png --count 100 --seed 7`,
		Args: argsUsage(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Dir = args[0]
			if opts.Out == "" {
				return usagef(errors.New("--out (-o) is required"))
			}
			if insideDir(opts.Out, opts.Dir) {
				return usagef(fmt.Errorf("--out %s lies inside the dataset %s: writing it there would damage the dataset", opts.Out, opts.Dir))
			}
			switch strings.ToLower(filepath.Ext(opts.Out)) {
			case ".png", ".jpg", ".jpeg":
			default:
				return usagef(fmt.Errorf("--out %s: the sheet is written as PNG (.png) or JPEG (.jpg, .jpeg); name the file with one of those", opts.Out))
			}
			if opts.Count < 1 || opts.Tile < 16 {
				return usagef(errors.New("--count must be at least 1 and --tile at least 16"))
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runPreview(c.Context(), opts)
		},
	}
	cmd.Flags().StringVarP(&opts.Out, "out", "o", "", "image file to write, .png or .jpg (required)")
	cmd.Flags().IntVar(&opts.Count, "count", 64, "records to show")
	cmd.Flags().Uint64Var(&opts.Seed, "seed", 1, "seed of the sample")
	cmd.Flags().IntVar(&opts.Tile, "tile", 128, "tile size in pixels")
	return cmd
}

func runPreview(ctx context.Context, o *previewOptions) error {
	ds, err := openAny(o.Dir)
	if err != nil {
		return err
	}
	defer ds.Close()
	m := ds.Manifest()
	n := ds.Len()
	if n == 0 {
		return fmt.Errorf("%s: the dataset has no records", o.Dir)
	}
	k := int64(o.Count)
	if k > n {
		k = n
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x9e3779b97f4a7c15))
	picked := map[int64]bool{}
	for int64(len(picked)) < k {
		picked[rng.Int64N(n)] = true
	}
	idx := make([]int64, 0, k)
	for i := range picked {
		idx = append(idx, i)
	}
	sort.Slice(idx, func(a, b int) bool { return idx[a] < idx[b] })

	cols := int(math.Ceil(math.Sqrt(float64(k))))
	rows := (int(k) + cols - 1) / cols
	infos := make([]recordInfo, len(idx))
	fields := make([][][]byte, len(idx)) // the records' field values; nil without fields
	caption, pathLine, textLine := 16, false, false
	for p, i := range idx {
		if infos[p], err = infoOf(ds, i); err != nil {
			return err
		}
		pathLine = pathLine || recordPath(infos[p]) != "" // a second line: the record's source path
		if len(m.Fields) > 0 {
			if fields[p], err = ds.Fields(i); err != nil {
				return err
			}
			textLine = textLine || captionOf(m, fields[p]) != "" // a line of the record's text
		}
	}
	textY := o.Tile + 26
	if pathLine {
		caption, textY = 30, o.Tile+40
	}
	if textLine {
		caption += 14
	}
	tw, th := o.Tile, o.Tile+caption
	sheet := image.NewRGBA(image.Rect(0, 0, cols*tw, rows*th))
	draw.Draw(sheet, sheet.Bounds(), image.NewUniform(color.RGBA{32, 32, 32, 255}), image.Point{}, draw.Src)
	for p, i := range idx {
		if err := ctx.Err(); err != nil {
			return err
		}
		data, err := ds.Record(i)
		if err != nil {
			return err
		}
		ri := infos[p]
		shape, err := ds.RecordShape(i)
		if err != nil {
			return err
		}
		img, err := recordImage(m, shape, data)
		if err != nil {
			return err
		}
		x0, y0 := (p%cols)*tw, (p/cols)*th
		place := drawScaled(sheet, image.Rect(x0+2, y0+2, x0+tw-2, y0+o.Tile-2), img)
		if fields[p] != nil {
			drawFields(sheet, place, m, shape, fields[p])
		}
		name := fmt.Sprint(ri.Label)
		if ri.Label >= 0 && int(ri.Label) < len(m.Classes) {
			name = m.Classes[ri.Label]
		}
		label := fmt.Sprintf("%d %s", i, name)
		if max := (tw - 4) / 7; len(label) > max {
			label = label[:max]
		}
		d := font.Drawer{Dst: sheet, Src: image.White, Face: basicfont.Face7x13,
			Dot: fixed.P(x0+3, y0+o.Tile+12)}
		d.DrawString(label)
		if path := recordPath(ri); path != "" {
			if max := (tw - 4) / 7; len(path) > max && max > 1 {
				path = "~" + path[len(path)-max+1:] // keep the file name, the end of the path
			}
			d = font.Drawer{Dst: sheet, Src: image.NewUniform(color.RGBA{180, 180, 180, 255}), Face: basicfont.Face7x13,
				Dot: fixed.P(x0+3, y0+o.Tile+26)}
			d.DrawString(path)
		}
		if text := captionOf(m, fields[p]); text != "" {
			if max := (tw - 4) / 7; len([]rune(text)) > max && max > 1 {
				text = string([]rune(text)[:max-1]) + "~"
			}
			d = font.Drawer{Dst: sheet, Src: image.NewUniform(color.RGBA{255, 230, 140, 255}), Face: basicfont.Face7x13,
				Dot: fixed.P(x0+3, y0+textY)}
			d.DrawString(text)
		}
	}
	var buf bytes.Buffer
	switch strings.ToLower(filepath.Ext(o.Out)) {
	case ".jpg", ".jpeg":
		err = jpeg.Encode(&buf, sheet, &jpeg.Options{Quality: 92})
	default:
		err = png.Encode(&buf, sheet)
	}
	if err != nil {
		return err
	}
	if err := writeFileReplacing(o.Out, buf.Bytes()); err != nil {
		return err
	}
	fmt.Fprintf(o.IO.Out, "wrote %s: %s of %s in a %dx%d grid\n", o.Out, humanize.Count(k, "record"), o.Dir, cols, rows)
	return nil
}

// recordImage turns one record of the given shape (its own: records of a variable-size
// dataset each have theirs) into an RGBA image: first frame of a clip, CHW or HWC, uint8 or
// float mapped back through mean/std. The caller scales it into its cell.
func recordImage(m *shard.Manifest, shape []int, data []byte) (*image.RGBA, error) {
	layout := m.Sample.Layout
	if len(layout) == 4 && layout[0] == 't' { // clip: first frame
		layout = layout[1:]
		shape = shape[1:]
	}
	if len(shape) != 3 {
		return nil, fmt.Errorf("preview: cannot draw records of shape %v", shape)
	}
	var h, w, c int
	if layout == "chw" {
		c, h, w = shape[0], shape[1], shape[2]
	} else {
		h, w, c = shape[0], shape[1], shape[2]
	}
	es := m.Sample.DType.Size()
	if len(data) < h*w*c*es {
		return nil, fmt.Errorf("preview: record is %d bytes, want at least %d", len(data), h*w*c*es)
	}
	mean, std := floatsOf(m.Transform["mean"]), floatsOf(m.Transform["std"])
	val := func(y, x, ch int) uint8 {
		var i int
		if layout == "chw" {
			i = (ch*h+y)*w + x
		} else {
			i = (y*w+x)*c + ch
		}
		switch m.Sample.DType {
		case shard.Uint8:
			return data[i]
		case shard.Float32:
			v := float64(math.Float32frombits(le32(data[i*4:])))
			return denorm(v, ch, mean, std)
		case shard.Float16:
			v := float64(transforms.Float16ToFloat32(uint16(data[i*2]) | uint16(data[i*2+1])<<8))
			return denorm(v, ch, mean, std)
		}
		return 0
	}
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			var r, g, b uint8
			if c >= 3 {
				r, g, b = val(y, x, 0), val(y, x, 1), val(y, x, 2)
			} else {
				r = val(y, x, 0)
				g, b = r, r
			}
			img.SetRGBA(x, y, color.RGBA{r, g, b, 255})
		}
	}
	return img, nil
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func denorm(v float64, ch int, mean, std []float64) uint8 {
	if ch < len(std) {
		v *= std[ch]
	}
	if ch < len(mean) {
		v += mean[ch]
	}
	if len(mean) == 0 && len(std) == 0 && v > 1.5 {
		v /= 255 // unnormalised float pixels
	}
	return uint8(math.Round(math.Min(math.Max(v, 0), 1) * 255))
}

func floatsOf(v any) []float64 {
	arr, _ := v.([]any)
	out := make([]float64, 0, len(arr))
	for _, x := range arr {
		switch t := x.(type) {
		case float64:
			out = append(out, t)
		case interface{ Float64() (float64, error) }:
			f, _ := t.Float64()
			out = append(out, f)
		}
	}
	return out
}

// drawScaled draws src into r of dst, scaled by nearest neighbour to fit, keeping aspect, and
// returns where (for the fields drawn over it).
func drawScaled(dst *image.RGBA, r image.Rectangle, src *image.RGBA) placement {
	sw, sh := src.Bounds().Dx(), src.Bounds().Dy()
	scale := math.Min(float64(r.Dx())/float64(sw), float64(r.Dy())/float64(sh))
	// At least one pixel each way: a 64x12800 strip still shows as a line.
	w, h := max(1, int(float64(sw)*scale)), max(1, int(float64(sh)*scale))
	p := placement{x: r.Min.X + (r.Dx()-w)/2, y: r.Min.Y + (r.Dy()-h)/2, w: w, h: h, scale: scale, sw: sw, sh: sh}
	for dy := 0; dy < h; dy++ {
		for dx := 0; dx < w; dx++ {
			sx, sy := p.src(dx, dy)
			dst.SetRGBA(p.x+dx, p.y+dy, src.RGBAAt(sx, sy))
		}
	}
	return p
}

// insideDir reports whether the file path p would lie in dir or below it, comparing directories
// by identity (device and inode), so links and relative paths cannot hide it.
func insideDir(p, dir string) bool {
	di, err := os.Stat(dir)
	if err != nil {
		return false
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return false
	}
	for d := filepath.Dir(abs); ; d = filepath.Dir(d) {
		if st, err := os.Stat(d); err == nil && os.SameFile(st, di) {
			return true
		}
		if d == filepath.Dir(d) {
			return false
		}
	}
}

// writeFileReplacing writes data to path through a temporary file committed over it
// (fileutil.WriteFileAtomic: synced, then renamed), so a failure never leaves a truncated file behind.
func writeFileReplacing(path string, data []byte) error {
	return fileutil.WriteFileAtomic(path, data)
}

// recordPath is the source path an image record's metadata carries ({"path": ...}, folder and
// list sources), or "".
func recordPath(ri recordInfo) string {
	var m struct {
		Path string `json:"path"`
	}
	if len(ri.Meta) == 0 || json.Unmarshal(ri.Meta, &m) != nil {
		return ""
	}
	return m.Path
}
