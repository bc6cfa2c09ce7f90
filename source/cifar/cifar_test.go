package cifar

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/packer-dev/packer/source"
)

// collect enumerates and decodes every item of s.
func collect(t testing.TB, s *Source) ([]source.Item, []source.Clip) {
	t.Helper()
	var items []source.Item
	if err := s.Enumerate(context.Background(), func(it source.Item) error {
		items = append(items, it)
		return nil
	}); err != nil {
		t.Fatalf("Enumerate: %v", err)
	}
	var clips []source.Clip
	for _, it := range items {
		if err := s.Decode(context.Background(), it, func(c source.Clip) error {
			clips = append(clips, c)
			return nil
		}); err != nil {
			t.Fatalf("Decode %s: %v", it.Name, err)
		}
	}
	return items, clips
}

// want returns the records expected from the synthetic dataset, in file order, with names.
func want(kind, split string, perFile int) (names []string, recs []Record) {
	var files []string
	var seeds []uint64
	switch {
	case kind == Kind10 && split == "train":
		for i := 1; i <= 5; i++ {
			files = append(files, "data_batch_"+strconv.Itoa(i)+".bin")
			seeds = append(seeds, uint64(i))
		}
	case kind == Kind10:
		files, seeds = []string{"test_batch.bin"}, []uint64{6}
	case split == "train":
		files, seeds = []string{"train.bin"}, []uint64{1}
	default:
		files, seeds = []string{"test.bin"}, []uint64{2}
	}
	for i, f := range files {
		for j, r := range TestRecords(kind, perFile, seeds[i]) {
			names = append(names, f+"#"+strconv.Itoa(j))
			recs = append(recs, r)
		}
	}
	return names, recs
}

func checkItems(t *testing.T, s *Source, kind, split string, perFile int) {
	t.Helper()
	items, clips := collect(t, s)
	names, recs := want(kind, split, perFile)
	if len(items) != len(recs) || len(clips) != len(recs) || s.Len() != int64(len(recs)) {
		t.Fatalf("got %d items, %d clips, Len %d; want %d", len(items), len(clips), s.Len(), len(recs))
	}
	for i, it := range items {
		r := recs[i]
		if it.Seq != int64(i) || it.Name != names[i] || it.Label != int64(r.Label) || !bytes.Equal(it.Raw, r.Pixels) {
			t.Fatalf("item %d: seq %d name %q label %d; want %d %q %d (raw equal %v)",
				i, it.Seq, it.Name, it.Label, i, names[i], r.Label, bytes.Equal(it.Raw, r.Pixels))
		}
		c := clips[i]
		if c.Label != int64(r.Label) || len(c.Frames) != 1 {
			t.Fatalf("clip %d: label %d frames %d", i, c.Label, len(c.Frames))
		}
		if kind == Kind100 {
			if len(it.Aux) != 1 || it.Aux[0] != int64(r.Coarse) || len(c.Aux) != 1 || c.Aux[0] != int64(r.Coarse) {
				t.Fatalf("item %d: aux %v clip aux %v, want [%d]", i, it.Aux, c.Aux, r.Coarse)
			}
		} else if len(it.Aux) != 0 || len(c.Aux) != 0 {
			t.Fatalf("item %d: unexpected aux %v", i, it.Aux)
		}
		im := c.Frames[0]
		if im.W != 32 || im.H != 32 || im.C != 3 || len(im.Pix) != ImageSize {
			t.Fatalf("clip %d: image %dx%dx%d (%d bytes)", i, im.W, im.H, im.C, len(im.Pix))
		}
		for y := 0; y < 32; y++ {
			for x := 0; x < 32; x++ {
				for ch := 0; ch < 3; ch++ {
					if im.Pix[(y*32+x)*3+ch] != r.Pixels[ch*1024+y*32+x] {
						t.Fatalf("clip %d: pixel (%d,%d,%d) differs", i, x, y, ch)
					}
				}
			}
		}
		back := make([]byte, ImageSize)
		ToCHW(back, im.Pix)
		if !bytes.Equal(back, r.Pixels) {
			t.Fatalf("clip %d: ToCHW does not invert ToHWC", i)
		}
	}
}

func TestFolderAndArchive(t *testing.T) {
	const perFile = 5
	for _, kind := range []string{Kind10, Kind100} {
		for _, split := range []string{"train", "test"} {
			t.Run(kind+"/"+split, func(t *testing.T) {
				dir := t.TempDir()
				folder, err := WriteTestDataset(dir, kind, perFile)
				if err != nil {
					t.Fatal(err)
				}
				archive := filepath.Join(dir, "data.tar.gz")
				if err := WriteTestArchive(archive, kind, perFile); err != nil {
					t.Fatal(err)
				}
				var infos []source.SourceInfo
				for _, p := range []string{folder, dir, archive} {
					s, err := Open(p, kind, split)
					if err != nil {
						t.Fatalf("Open(%s): %v", p, err)
					}
					checkItems(t, s, kind, split, perFile)
					infos = append(infos, s.Info())
					if p == archive {
						// Force every early member through further passes.
						s.bufLimit = 0
						checkItems(t, s, kind, split, perFile)
						s.bufLimit = ImageSize + 2 // room for one tiny member at a time
						checkItems(t, s, kind, split, perFile)
					}
				}
				for _, info := range infos {
					if info.Kind != kind || info.Spec["split"] != split {
						t.Errorf("info %+v", info)
					}
					if kind == Kind10 {
						if strings.Join(info.Classes, ",") != strings.Join(OfficialNames10, ",") {
							t.Errorf("classes %v", info.Classes)
						}
						if info.AuxNames != nil {
							t.Errorf("aux names %v", info.AuxNames)
						}
					} else {
						if len(info.Classes) != 100 || info.Classes[7] != "fine_07" || info.AuxNames[0] != "coarse_label" {
							t.Errorf("classes %v aux %v", info.Classes, info.AuxNames)
						}
					}
					for _, f := range info.Spec["files"].([]string) {
						if filepath.IsAbs(f) || strings.ContainsRune(f, '/') {
							t.Errorf("spec file %q is not a bare name", f)
						}
					}
				}
				if infos[0].Spec["archive"] != nil || infos[2].Spec["archive"] != "data.tar.gz" {
					t.Errorf("archive spec: %v / %v", infos[0].Spec["archive"], infos[2].Spec["archive"])
				}
			})
		}
	}
}

func TestArchiveMemberOrders(t *testing.T) {
	orders := [][]string{
		{"data_batch_5.bin", "data_batch_4.bin", "data_batch_3.bin", "data_batch_2.bin", "data_batch_1.bin", "batches.meta.txt"},
		{"batches.meta.txt", "data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin"},
		{"data_batch_2.bin", "data_batch_1.bin", "data_batch_4.bin", "data_batch_3.bin", "data_batch_5.bin"},
	}
	for i, order := range orders {
		for _, limit := range []int64{ArchiveBuffer, 0, 2 * 3 * RecordSize10} {
			b, err := TestArchive(Kind10, 3, order)
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(t.TempDir(), "c.tar.gz")
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			s, err := Open(p, Kind10, "train")
			if err != nil {
				t.Fatalf("order %d: %v", i, err)
			}
			s.bufLimit = limit
			checkItems2(t, s, 3)
		}
	}
}

func checkItems2(t *testing.T, s *Source, perFile int) {
	t.Helper()
	items, _ := collect(t, s)
	names, recs := want(Kind10, "train", perFile)
	if len(items) != len(recs) {
		t.Fatalf("%d items, want %d", len(items), len(recs))
	}
	for i, it := range items {
		if it.Name != names[i] || !bytes.Equal(it.Raw, recs[i].Pixels) {
			t.Fatalf("item %d is %s, want %s", i, it.Name, names[i])
		}
	}
}

func TestSingleFileAndNoNames(t *testing.T) {
	dir := t.TempDir()
	recs := TestRecords(Kind100, 4, 9)
	p := filepath.Join(dir, "mine.bin")
	if err := WriteBinary(p, Kind100, recs); err != nil {
		t.Fatal(err)
	}
	s, err := Open(p, Kind100, "")
	if err != nil {
		t.Fatal(err)
	}
	items, clips := collect(t, s)
	if len(items) != 4 || items[3].Name != "mine.bin#3" || clips[2].Label != int64(recs[2].Label) {
		t.Fatalf("items %d name %q", len(items), items[3].Name)
	}
	info := s.Info()
	if len(info.Classes) != 100 || info.Classes[42] != "42" || info.Spec["classes_from"] != "label values" {
		t.Errorf("classes %v from %v", info.Classes[:3], info.Spec["classes_from"])
	}
	if _, ok := info.Spec["split"]; ok {
		t.Errorf("single file has a split in its spec")
	}
	if len(s.CoarseClasses()) != 20 {
		t.Errorf("coarse classes %v", s.CoarseClasses())
	}
}

func TestBadInputs(t *testing.T) {
	good := TestRecords(Kind10, 10, 1)
	cases := []struct {
		name  string
		setup func(dir string) string // returns the path to open
		kind  string
		split string
		want  string // substring of the error
	}{
		{"size not multiple", func(dir string) string {
			writeFile(t, filepath.Join(dir, "data_batch_1.bin"), make([]byte, 10*RecordSize10+1))
			return dir
		}, Kind10, "train", "data_batch_1.bin: size 30731 is not a multiple of 3073"},
		{"cifar100 file as cifar10", func(dir string) string {
			if err := WriteBinary(filepath.Join(dir, "test_batch.bin"), Kind100, good); err != nil {
				t.Fatal(err)
			}
			return dir
		}, Kind10, "test", "test_batch.bin: size 30740 is not a multiple of 3073"},
		{"missing batch", func(dir string) string {
			for _, n := range []string{"data_batch_1.bin", "data_batch_2.bin"} {
				if err := WriteBinary(filepath.Join(dir, n), Kind10, good); err != nil {
					t.Fatal(err)
				}
			}
			return dir
		}, Kind10, "train", "data_batch_3.bin not found"},
		{"nothing there", func(dir string) string { return dir }, Kind100, "train",
			"found neither train.bin, cifar-100-binary/train.bin nor cifar-100-binary.tar.gz"},
		{"bad names file", func(dir string) string {
			if err := WriteBinary(filepath.Join(dir, "test_batch.bin"), Kind10, good); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(dir, "batches.meta.txt"), []byte("cat\ndog\n"))
			return dir
		}, Kind10, "test", "batches.meta.txt: 2 class names, want 10"},
		{"unknown kind", func(dir string) string { return dir }, "cifar20", "train", `unknown kind "cifar20"`},
		{"unknown split", func(dir string) string { return dir }, Kind10, "val", `unknown split "val"`},
		{"archive without member", func(dir string) string {
			b, err := TestArchive(Kind10, 2, []string{"data_batch_1.bin", "test_batch.bin"})
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, "x.tar.gz")
			writeFile(t, p, b)
			return p
		}, Kind10, "train", "x.tar.gz: no member named data_batch_2.bin"},
		{"truncated archive", func(dir string) string {
			b, err := TestArchive(Kind10, 2, archiveOrder[Kind10])
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, "x.tar.gz")
			writeFile(t, p, b[:len(b)/2])
			return p
		}, Kind10, "train", "x.tar.gz: unexpected EOF"},
		{"corrupt gzip", func(dir string) string {
			b, err := TestArchive(Kind10, 2, archiveOrder[Kind10])
			if err != nil {
				t.Fatal(err)
			}
			for i := 100; i < 200; i++ {
				b[i] ^= 0x55
			}
			p := filepath.Join(dir, "x.tar.gz")
			writeFile(t, p, b)
			return p
		}, Kind10, "train", "x.tar.gz: "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.setup(t.TempDir())
			s, err := Open(p, tc.kind, tc.split)
			if err == nil {
				err = s.Enumerate(context.Background(), func(source.Item) error { return nil })
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestBadLabel(t *testing.T) {
	dir := t.TempDir()
	recs := TestRecords(Kind100, 3, 1)
	recs[1].Label = 100
	recs[2].Coarse = 20
	if err := WriteBinary(filepath.Join(dir, "train.bin"), Kind100, recs); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, Kind100, "train")
	if err != nil {
		t.Fatal(err)
	}
	var items []source.Item
	if err := s.Enumerate(context.Background(), func(it source.Item) error { items = append(items, it); return nil }); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"", "train.bin#1: cifar: label out of range: 100, want 0..99", "train.bin#2: cifar: coarse label out of range: 20, want 0..19"} {
		err := s.Decode(context.Background(), items[i], func(source.Clip) error { return nil })
		_, derr := s.DecodeTo(context.Background(), items[i], make([]byte, ImageSize))
		if fmt.Sprint(derr) != fmt.Sprint(err) {
			t.Errorf("item %d: DecodeTo error %v, Decode error %v", i, derr, err)
		}
		if want == "" {
			if err != nil {
				t.Errorf("item %d: %v", i, err)
			}
			continue
		}
		var ie *source.InputError
		if !errors.As(err, &ie) || !errors.Is(err, ErrLabel) || ie.Input != items[i].Name || err.Error() != want {
			t.Errorf("item %d: error %v, want input error %q", i, err, want)
		}
	}
}

func TestEnumerateStops(t *testing.T) {
	dir := t.TempDir()
	if _, err := WriteTestDataset(dir, Kind10, 100); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, Kind10, "train")
	if err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stop")
	n := 0
	err = s.Enumerate(context.Background(), func(source.Item) error {
		if n++; n == 150 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 150 {
		t.Fatalf("err %v after %d items", err, n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Enumerate(ctx, func(source.Item) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

func writeFile(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkEnumerateDecode(b *testing.B) {
	dir := b.TempDir()
	if _, err := WriteTestDataset(dir, Kind10, 2000); err != nil {
		b.Fatal(err)
	}
	s, err := Open(dir, Kind10, "train")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(s.Len() * RecordSize10)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		err := s.Enumerate(context.Background(), func(it source.Item) error {
			return s.Decode(context.Background(), it, func(source.Clip) error { return nil })
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

func TestSparseArchiveMember(t *testing.T) {
	// A tar member can declare a huge size at no storage cost (a sparse file); Open must
	// refuse it by its declared size before reading anything.
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	h := &tar.Header{Name: "cifar-10-batches-bin/test_batch.bin", Typeflag: tar.TypeReg, Size: 3073 * 1000000, Mode: 0o644}
	if err := tw.WriteHeader(h); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "sparse.tar")
	writeFile(t, p, append(buf.Bytes(), make([]byte, 1024)...))
	_, err := Open(p, Kind10, "test")
	if err == nil || !strings.Contains(err.Error(), "sparse.tar: cifar-10-batches-bin/test_batch.bin: size 3073000000 is over the limit") {
		t.Fatalf("error %v", err)
	}
}

// TestDecodeToEqualsDecode checks the pipeline's direct path: DecodeTo writes the pixels, labels
// and aux labels that Decode emits, and ToHWC handles every pixel position.
func TestDecodeToEqualsDecode(t *testing.T) {
	for _, kind := range []string{Kind10, Kind100} {
		dir := t.TempDir()
		folder, err := WriteTestDataset(dir, kind, 7)
		if err != nil {
			t.Fatal(err)
		}
		s, err := Open(folder, kind, "train")
		if err != nil {
			t.Fatal(err)
		}
		items, clips := collect(t, s)
		if w, h, c := s.FrameShape(); w != Width || h != Height || c != Channels {
			t.Fatalf("FrameShape %d %d %d", w, h, c)
		}
		for i, it := range items {
			pix := make([]byte, ImageSize)
			c, err := s.DecodeTo(context.Background(), it, pix)
			want := clips[i]
			if err != nil || !bytes.Equal(pix, want.Frames[0].Pix) || c.Label != want.Label ||
				fmt.Sprint(c.Aux) != fmt.Sprint(want.Aux) || c.Frames != nil {
				t.Fatalf("%s item %d: DecodeTo differs from Decode (%v)", kind, i, err)
			}
		}
	}
	src := make([]byte, ImageSize)
	for i := range src {
		src[i] = byte(i*7 + i/251)
	}
	got := make([]byte, ImageSize)
	ToHWC(got, src)
	for p := 0; p < plane; p++ {
		for c := 0; c < Channels; c++ {
			if got[3*p+c] != src[c*plane+p] {
				t.Fatalf("ToHWC: pixel %d channel %d = %d, want %d", p, c, got[3*p+c], src[c*plane+p])
			}
		}
	}
	back := make([]byte, ImageSize)
	ToCHW(back, got)
	if !bytes.Equal(back, src) {
		t.Fatal("ToCHW(ToHWC(x)) != x")
	}
}
