package transforms

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// The decode fidelity tests compare with Pillow itself: Debian's /usr/bin/python3 with
// python3-pil (Pillow 9.4, linked against the same libjpeg-turbo). A missing Pillow fails
// them; PACKER_NO_PILLOW=1 skips them explicitly.
const decodePython = "/usr/bin/python3"

// pillowDecodeScript decodes each path on stdin (one JSON job a line) the way a torchvision
// pipeline does, Image.open(p).convert("RGB"), and writes the raw RGB bytes to job["out"].
// Options: "exif" applies ImageOps.exif_transpose first; "draft" [w, h] calls im.draft("RGB",
// (w, h)) before loading. It prints one JSON result a line.
const pillowDecodeScript = `
import json, sys, warnings
from PIL import Image, ImageOps
warnings.simplefilter("ignore")
for line in sys.stdin:
    job = json.loads(line)
    try:
        im = Image.open(job["path"])
        if job.get("draft"):
            im.draft("RGB", tuple(job["draft"]))
        im.load()
        if job.get("exif"):
            im = ImageOps.exif_transpose(im)
        im = im.convert("RGB")
        with open(job["out"], "wb") as f:
            f.write(im.tobytes())
        print(json.dumps({"w": im.size[0], "h": im.size[1]}))
    except Exception as e:
        print(json.dumps({"error": "%s: %s" % (type(e).__name__, e)}))
    sys.stdout.flush()
`

type pillowDecodeJob struct {
	Path  string `json:"path"`
	Out   string `json:"out"`
	Exif  bool   `json:"exif,omitempty"`
	Draft []int  `json:"draft,omitempty"`
}

type pillowDecodeResult struct {
	W, H  int
	Error string
	Pix   []byte
}

func requirePillowDecode(t testing.TB) {
	t.Helper()
	if os.Getenv("PACKER_NO_PILLOW") == "1" {
		t.Skip("PACKER_NO_PILLOW=1: Pillow fidelity tests skipped")
	}
	out, err := exec.Command(decodePython, "-c", "import PIL.Image").CombinedOutput()
	if err != nil {
		t.Fatalf("decode fidelity tests need Pillow: %s -c 'import PIL.Image' failed: %v\n%s\n"+
			"install Debian's python3-pil, or set PACKER_NO_PILLOW=1 to skip these tests", decodePython, err, out)
	}
}

func pillowDecode(t testing.TB, jobs []pillowDecodeJob) []pillowDecodeResult {
	t.Helper()
	requirePillowDecode(t)
	dir := t.TempDir()
	var in bytes.Buffer
	for i := range jobs {
		jobs[i].Out = filepath.Join(dir, fmt.Sprintf("out%d.raw", i))
		b, _ := json.Marshal(jobs[i])
		in.Write(b)
		in.WriteByte('\n')
	}
	cmd := exec.Command(decodePython, "-c", pillowDecodeScript)
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pillow decode script: %v\n%s", err, stderr.String())
	}
	var res []pillowDecodeResult
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var r pillowDecodeResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("pillow decode script output %q: %v", sc.Text(), err)
		}
		res = append(res, r)
	}
	if len(res) != len(jobs) {
		t.Fatalf("pillow decode script gave %d results for %d jobs\n%s", len(res), len(jobs), stderr.String())
	}
	for i := range res {
		if res[i].Error == "" {
			if res[i].Pix, err = os.ReadFile(jobs[i].Out); err != nil {
				t.Fatal(err)
			}
		}
	}
	return res
}

// corpusExpect lists the files packer refuses, with the error kind. Every other corpus file
// must decode byte-identical to Pillow. Pillow's verdict for each is in the comment.
var corpusExpect = map[string]error{
	"truncated.jpg":             ErrTruncated,   // Pillow: OSError image file is truncated
	"missing-eoi.jpg":           ErrTruncated,   // Pillow: OSError image file is truncated
	"empty.jpg":                 ErrEmpty,       // Pillow: UnidentifiedImageError
	"text.jpg":                  ErrUnsupported, // Pillow: UnidentifiedImageError
	"huge-60000x60000.jpg":      ErrTooLarge,    // Pillow: DecompressionBombError
	"truncated.png":             ErrTruncated,   // Pillow: OSError image file is truncated
	"bad-zlib.png":              ErrCorrupt,     // Pillow: OSError broken data stream
	"bad-crc-ihdr.png":          ErrCorrupt,     // Pillow: UnidentifiedImageError (bad header checksum)
	"bad-marker-in-scan.jpg":    ErrCorrupt,     // Pillow: OSError broken data stream
	"webp-exif-cut.webp":        ErrTruncated,   // Pillow: OSError could not create decoder object
	"webp-chunk-past-riff.webp": ErrCorrupt,     // Pillow: OSError could not create decoder object
	"webp-leftover.webp":        ErrCorrupt,     // Pillow: OSError could not create decoder object
}

// corpusDeliberate lists files Pillow opens and packer refuses, deliberately (docs/fidelity.md):
// skipped with a reason rather than decoded differently.
var corpusDeliberate = map[string]error{
	"anim.webp": ErrUnsupported, // golang.org/x/image/webp has no animation; Pillow gives frame 0
}

func corpusFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "corpus", "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus files: %v", err)
	}
	sort.Strings(files)
	return files
}

func compareRGB(t *testing.T, name string, got Image, want pillowDecodeResult) {
	t.Helper()
	if want.Error != "" {
		t.Errorf("%s: packer decoded %dx%d, Pillow refused it: %s", name, got.W, got.H, want.Error)
		return
	}
	if got.C != 3 || got.W != want.W || got.H != want.H {
		t.Errorf("%s: packer %dx%dx%d, Pillow %dx%dx3", name, got.W, got.H, got.C, want.W, want.H)
		return
	}
	if !bytes.Equal(got.Pix, want.Pix) {
		n, first := 0, -1
		maxd := 0
		for i := range got.Pix {
			if got.Pix[i] != want.Pix[i] {
				if first < 0 {
					first = i
				}
				n++
				d := int(got.Pix[i]) - int(want.Pix[i])
				maxd = max(maxd, d, -d)
			}
		}
		px := first / 3
		t.Errorf("%s: %d of %d bytes differ from Pillow (max diff %d); first at x=%d y=%d ch=%d: packer %d, Pillow %d",
			name, n, len(got.Pix), maxd, px%got.W, px/got.W, first%3, got.Pix[first], want.Pix[first])
	}
}

// TestDecodeCorpusMatchesPillow decodes every corpus file and requires Pillow's bytes, or the
// expected refusal where Pillow refuses too.
func TestDecodeCorpusMatchesPillow(t *testing.T) {
	files := corpusFiles(t)
	jobs := make([]pillowDecodeJob, len(files))
	for i, f := range files {
		jobs[i] = pillowDecodeJob{Path: f}
	}
	want := pillowDecode(t, jobs)
	var s DecodeScratch
	for i, f := range files {
		name := filepath.Base(f)
		if !jpegCgo && strings.HasSuffix(name, ".jpg") {
			t.Logf("%s: skipped, built without cgo (JPEG is refused)", name)
			continue
		}
		got, err := DecodeFile(f, DecodeOptions{}, &s)
		if wantErr, ok := corpusDeliberate[name]; ok {
			if !errors.Is(err, wantErr) {
				t.Errorf("%s: got error %v, want %v", name, err, wantErr)
			}
			if want[i].Error != "" {
				t.Errorf("%s: listed as a deliberate difference, but Pillow refuses it too: %s", name, want[i].Error)
			}
			continue
		}
		if wantErr, ok := corpusExpect[name]; ok {
			if !errors.Is(err, wantErr) {
				t.Errorf("%s: got error %v, want %v", name, err, wantErr)
			} else if !strings.Contains(err.Error(), f) {
				t.Errorf("%s: error %q does not name the file", name, err)
			}
			if want[i].Error == "" {
				t.Errorf("%s: packer refuses it (%v) but Pillow opens it", name, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v (Pillow: %s)", name, err, orOK(want[i].Error))
			continue
		}
		compareRGB(t, name, got, want[i])
	}
}

func orOK(s string) string {
	if s == "" {
		return "decodes"
	}
	return s
}

// TestDecodeExifOrient checks ExifOrient against ImageOps.exif_transpose, and that the
// default ignores the tag.
func TestDecodeExifOrient(t *testing.T) {
	files := []string{"exif-rotate6.jpg", "exif-rotate3.png", "baseline-420.jpg", "exif-count2.jpg", "exif-count3.jpg"}
	var jobs []pillowDecodeJob
	for _, f := range files {
		jobs = append(jobs, pillowDecodeJob{Path: filepath.Join("testdata", "corpus", f), Exif: true})
	}
	want := pillowDecode(t, jobs)
	for i, f := range files {
		got, err := DecodeFile(jobs[i].Path, DecodeOptions{ExifOrient: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		compareRGB(t, f+" (exif)", got, want[i])
	}
	plain, err := DecodeFile(filepath.Join("testdata", "corpus", "exif-rotate6.jpg"), DecodeOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if plain.W != 40 || plain.H != 24 {
		t.Errorf("default decode applied EXIF orientation: %dx%d", plain.W, plain.H)
	}
}

func TestDecodeMaxPixels(t *testing.T) {
	f := filepath.Join("testdata", "corpus", "wide-4000x20.jpg")
	if _, err := DecodeFile(f, DecodeOptions{MaxPixels: 79999}, nil); !errors.Is(err, ErrTooLarge) {
		t.Errorf("MaxPixels 79999: got %v, want ErrTooLarge", err)
	}
	if _, err := DecodeFile(f, DecodeOptions{MaxPixels: 80000}, nil); err != nil {
		t.Errorf("MaxPixels 80000: %v", err)
	}
}

func TestDraftDenom(t *testing.T) {
	for _, c := range []struct{ w, h, tw, th, want int }{
		{3840, 2400, 410, 256, 8}, {3840, 2400, 480, 300, 8}, {3840, 2400, 481, 300, 4},
		{500, 375, 341, 256, 1}, {1024, 768, 341, 256, 2}, {100, 100, 0, 0, 1}, {64, 64, 8, 8, 8},
	} {
		if got := draftDenom(c.w, c.h, c.tw, c.th); got != c.want {
			t.Errorf("draftDenom(%d,%d,%d,%d) = %d, want %d", c.w, c.h, c.tw, c.th, got, c.want)
		}
	}
}

// TestDecodeDraftMatchesPillow checks that fast mode decodes exactly what Pillow's draft()
// decodes for the same requested size.
func TestDecodeDraftMatchesPillow(t *testing.T) {
	files := []string{"baseline-420.jpg", "progressive.jpg", "grey.jpg", "cmyk-adobe.jpg", "wide-4000x20.jpg"}
	sizes := [][2]int{{16, 11}, {33, 22}, {8, 5}}
	var jobs []pillowDecodeJob
	for _, f := range files {
		for _, sz := range sizes {
			jobs = append(jobs, pillowDecodeJob{Path: filepath.Join("testdata", "corpus", f), Draft: sz[:]})
		}
	}
	want := pillowDecode(t, jobs)
	for i, j := range jobs {
		tw, th := j.Draft[0], j.Draft[1]
		got, err := DecodeFile(j.Path, DecodeOptions{Draft: func(w, h int) (int, int) { return tw, th }}, nil)
		if err != nil {
			t.Fatal(err)
		}
		compareRGB(t, fmt.Sprintf("%s draft %dx%d", filepath.Base(j.Path), tw, th), got, want[i])
	}
}

// TestDecodeWallpapersMatchPillow decodes Debian's wallpapers (large real JPEGs and PNGs).
func TestDecodeWallpapersMatchPillow(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	files, _ := filepath.Glob("/usr/share/backgrounds/*.jpg")
	pngs, _ := filepath.Glob("/usr/share/backgrounds/*.png")
	files = append(files, pngs...)
	if len(files) == 0 {
		t.Skip("no wallpapers in /usr/share/backgrounds")
	}
	sort.Strings(files)
	for _, f := range files {
		want := pillowDecode(t, []pillowDecodeJob{{Path: f}})
		got, err := DecodeFile(f, DecodeOptions{}, nil)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		compareRGB(t, f, got, want[0])
	}
}

// psnr returns the PSNR in dB between two equal-sized byte slices, and the max and mean
// absolute differences.
func psnr(a, b []byte) (p float64, maxd int, mean float64) {
	var se, sa float64
	for i := range a {
		d := int(a[i]) - int(b[i])
		if d < 0 {
			d = -d
		}
		maxd = max(maxd, d)
		sa += float64(d)
		se += float64(d * d)
	}
	n := float64(len(a))
	if se == 0 {
		return math.Inf(1), 0, 0
	}
	return 10 * math.Log10(255*255/(se/n)), maxd, sa / n
}

// TestFastModeError measures fast mode (reduced-scale JPEG decode) against the exact decode,
// both followed by Resize(256) + CenterCrop(224) bilinear, on Debian's wallpaper JPEGs. It
// logs max/mean absolute difference and PSNR per gap (see docs/fidelity.md for the numbers)
// and fails if fast mode falls below 30 dB on any photo.
func TestFastModeError(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	files, _ := filepath.Glob("/usr/share/backgrounds/*.jpg")
	if len(files) == 0 {
		t.Skip("no wallpapers in /usr/share/backgrounds")
	}
	sort.Strings(files)
	spec := Spec{Resize: 256, CropW: 224, CropH: 224, Fast: true}
	w := spec.MustCompile().NewWorker()
	out := spec.MustCompile().OutputSpec(224, 224, 3)
	run := func(f string, draft func(int, int) (int, int)) ([]byte, Image, time.Duration) {
		t0 := time.Now()
		img, err := DecodeFile(f, DecodeOptions{Draft: draft}, nil)
		if err != nil {
			t.Fatal(err)
		}
		dst := make([]byte, out.Size())
		if err := w.Apply(img, dst); err != nil {
			t.Fatal(err)
		}
		return dst, img, time.Since(t0)
	}
	for _, gap := range []int{1, 2} {
		var worst, sumMean float64 = math.Inf(1), 0
		worstMax := 0
		var tExact, tFast time.Duration
		for _, f := range files {
			exact, _, te := run(f, nil)
			fast, img, tf := run(f, DraftSize(spec.MustCompile(), gap))
			tExact += te
			tFast += tf
			p, maxd, mean := psnr(exact, fast)
			t.Logf("gap %d %s: decoded %dx%d: max %d mean %.3f PSNR %.2f dB", gap, filepath.Base(f), img.W, img.H, maxd, mean, p)
			worst = math.Min(worst, p)
			worstMax = max(worstMax, maxd)
			sumMean += mean
			if p < 30 {
				t.Errorf("gap %d %s: PSNR %.2f dB below 30", gap, f, p)
			}
		}
		t.Logf("gap %d: worst PSNR %.2f dB, max abs diff %d, mean abs diff %.3f; time exact %v fast %v (%.1fx)",
			gap, worst, worstMax, sumMean/float64(len(files)), tExact, tFast, float64(tExact)/float64(tFast))
	}
}

// BenchmarkDecode decodes a wallpaper JPEG and PNG, exact and at the draft scale fast mode
// picks for Resize(256) (gap 1).
func BenchmarkDecode(b *testing.B) {
	for _, f := range []string{"/usr/share/backgrounds/the-mouse.jpg", "/usr/share/backgrounds/calla.png"} {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Skip(err)
		}
		for _, mode := range []string{"exact", "draft"} {
			b.Run(filepath.Ext(f)[1:]+"/"+mode, func(b *testing.B) {
				opts := DecodeOptions{}
				if mode == "draft" {
					opts.Draft = DraftSize(Spec{Resize: 256, Fast: true}.MustCompile(), 1)
				}
				var s DecodeScratch
				b.SetBytes(int64(len(data)))
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := DecodeBytes(data, opts, &s); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
