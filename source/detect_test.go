package source_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/source/cifar"
	"github.com/packer-dev/packer/source/idx"
	"github.com/packer-dev/packer/source/imagedir"
	"github.com/packer-dev/packer/source/parquet"
	"github.com/packer-dev/packer/source/tfrecord"
	"github.com/packer-dev/packer/source/video"
	"github.com/packer-dev/packer/source/webdataset"
)

// entries is the command's table of source kinds (cmd/packer/sources.go), in its order;
// TestSourceTable there checks that the two agree.
var entries = []source.Entry{
	imagedir.FolderEntry, imagedir.ListEntry, cifar.Entry10, cifar.Entry100, idx.Entry, video.FramesEntry, video.VideoEntry,
	webdataset.Entry, tfrecord.Entry, parquet.Entry,
}

func TestDetect(t *testing.T) {
	root := t.TempDir()
	mk := func(rel string, data []byte) string {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	dir := func(rel string) string { return filepath.Join(root, rel) }

	c10, err := cifar.WriteTestDataset(dir("c10"), cifar.Kind10, 1)
	if err != nil {
		t.Fatal(err)
	}
	c100, err := cifar.WriteTestDataset(dir("c100"), cifar.Kind100, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := cifar.WriteTestArchive(dir("c10.tar.gz"), cifar.Kind10, 1); err != nil {
		t.Fatal(err)
	}
	if err := cifar.WriteTestArchive(dir("archive.tgz"), cifar.Kind100, 1); err != nil {
		t.Fatal(err)
	}
	rec10, _ := cifar.AppendRecord(nil, cifar.Kind10, cifar.TestRecords(cifar.Kind10, 1, 0)[0])
	rec100, _ := cifar.AppendRecord(nil, cifar.Kind100, cifar.TestRecords(cifar.Kind100, 1, 0)[0])
	mk("odd/mine10.bin", rec10)
	mk("odd/mine100.bin", rec100)
	if err := os.MkdirAll(dir("mnist"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := idx.WriteFile(dir("mnist/t10k-images-idx3-ubyte.gz"), idx.TypeUbyte, []int{1, 2, 2}, make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	if err := idx.WriteFile(dir("odd/digits.gz"), idx.TypeUbyte, []int{1, 2, 2}, make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	if err := idx.WriteFile(dir("odd/digits.raw"), idx.TypeUbyte, []int{1, 2, 2}, make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	mk("imgs/cat/1.jpg", []byte("x"))
	mk("imgs/dog/2.PNG", []byte("x"))
	mk("imgs/.DS_Store", []byte("x"))
	mk("vids/run/a.mp4", []byte("x"))
	mk("frames/run/vid1/0001.jpg", []byte("x"))
	mk("frames/walk/vid2/0001.jpg", []byte("x"))
	mk("lists/train.csv", []byte("path,label\n"))
	mk("lists/train.jsonl", []byte("{}\n"))
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	for _, m := range []string{"000000.jpg", "000000.cls"} {
		tw.WriteHeader(&tar.Header{Name: m, Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
		tw.Write([]byte("1"))
	}
	tw.Close()
	mk("wds/shard-000000.tar", tb.Bytes())
	mk("odd/samples.tar", tb.Bytes())
	mk("tfr/train.tfrecord-00000-of-00002", []byte("x"))
	mk("tfr/train.tfrecord-00001-of-00002", []byte("x"))
	mk("clip.MKV", []byte("x"))
	mk("mixed/data_batch_1.bin", rec10)
	mk("mixed/train-images-idx3-ubyte", []byte{0, 0, 8, 3})
	mk("empty/readme.txt", []byte("hello"))
	mk("odd/noise.bin", []byte("not cifar"))

	cases := []struct{ path, want string }{
		{c10, cifar.Kind10}, {dir("c10"), cifar.Kind10}, {c100, cifar.Kind100}, {dir("c100"), cifar.Kind100},
		{dir("c10.tar.gz"), cifar.Kind10}, {dir("archive.tgz"), cifar.Kind100},
		{filepath.Join(c10, "data_batch_3.bin"), cifar.Kind10}, {filepath.Join(c100, "test.bin"), cifar.Kind100},
		{dir("odd/mine10.bin"), cifar.Kind10}, {dir("odd/mine100.bin"), cifar.Kind100},
		{dir("mnist"), idx.Kind}, {dir("mnist/t10k-images-idx3-ubyte.gz"), idx.Kind},
		{dir("odd/digits.gz"), idx.Kind}, {dir("odd/digits.raw"), idx.Kind},
		{dir("imgs"), imagedir.KindFolder}, {dir("vids"), video.KindVideo}, {dir("frames"), video.KindFrames},
		{dir("lists/train.csv"), imagedir.KindList}, {dir("lists/train.jsonl"), imagedir.KindList}, {dir("clip.MKV"), video.KindVideo},
		{dir("wds"), webdataset.Kind}, {dir("odd/samples.tar"), webdataset.Kind},
		{dir("tfr"), tfrecord.Kind}, {dir("tfr/train.tfrecord-00001-of-00002"), tfrecord.Kind},
	}
	if _, err := os.Stat("/usr/share/datasets/fashion-mnist"); err == nil {
		cases = append(cases, struct{ path, want string }{"/usr/share/datasets/fashion-mnist", idx.Kind})
	}
	for _, tc := range cases {
		got, err := source.Detect(tc.path, entries)
		if err != nil || got != tc.want {
			t.Errorf("Detect(%s) = %q, %v; want %q", strings.TrimPrefix(tc.path, root), got, err, tc.want)
		}
	}
	for _, tc := range []struct{ path, want string }{
		{dir("mixed"), "it looks like cifar10 and idx"},
		{dir("empty"), "cifar10 (data_batch_1.bin"},
		{dir("odd/noise.bin"), "looked for"},
		{dir("lists"), "looked for"},
	} {
		_, err := source.Detect(tc.path, entries)
		if !errors.Is(err, source.ErrUnknown) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Detect(%s): %v, want source.ErrUnknown with %q", strings.TrimPrefix(tc.path, root), err, tc.want)
		}
	}
	if _, err := source.Detect(dir("missing"), entries); err == nil || errors.Is(err, source.ErrUnknown) {
		t.Errorf("missing path: %v", err)
	}
}

// TestDetectAgreesWithSources: detection uses the sources' own extension lists, so what it
// calls a folder, video or list dataset is one the source accepts. A folder of .flv files was
// detected as video and then refused by the video source; .gif files as a folder, refused by
// the folder source; a .tsv file as a list, which the list source does not read.
func TestDetectAgreesWithSources(t *testing.T) {
	root := t.TempDir()
	mk := func(rel string) string {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mk("flv/run/a.flv")
	mk("gif/cat/a.gif")
	mk("list.tsv")
	for _, rel := range []string{"flv", "gif", "list.tsv"} {
		got, err := source.Detect(filepath.Join(root, rel), entries)
		if !errors.Is(err, source.ErrUnknown) {
			t.Errorf("Detect(%s) = %q, %v; want source.ErrUnknown (the sources refuse it)", rel, got, err)
		}
	}
	check := func(exts []string, layout, want string) {
		for _, ext := range exts {
			dir := filepath.Join(root, want+strings.ToUpper(ext))
			for _, l := range strings.Split(layout, " ") {
				mk(filepath.Join(filepath.Base(dir), strings.ReplaceAll(l, "%s", ext)))
			}
			if got, err := source.Detect(dir, entries); err != nil || got != want {
				t.Errorf("Detect(folder of %s) = %q, %v; want %q", ext, got, err, want)
			}
		}
	}
	check(imagedir.Extensions, "c/x%s", imagedir.KindFolder)
	check(imagedir.Extensions, "c/v/x%s d/w/x%s", video.KindFrames)
	check(video.VideoExtensions, "c/x%s", video.KindVideo)
	for _, ext := range imagedir.ListExtensions {
		if got, err := source.Detect(mk("l"+ext), entries); err != nil || got != imagedir.KindList {
			t.Errorf("Detect(l%s) = %q, %v; want list", ext, got, err)
		}
	}
}

// TestDetectFollowsSymlinks: symbolic links to class folders and to IDX files are ordinary
// inputs to detection, as they are to the sources.
func TestDetectFollowsSymlinks(t *testing.T) {
	root := t.TempDir()
	real := filepath.Join(root, "real")
	if err := os.MkdirAll(filepath.Join(real, "cat"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(real, "cat", "a.jpg"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := idx.WriteFile(filepath.Join(real, "train-images-idx3-ubyte.gz"), idx.TypeUbyte, []int{1, 2, 2}, make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	for _, l := range [][2]string{{"imgs/cat", "real/cat"}, {"mnist/train-images-idx3-ubyte.gz", "real/train-images-idx3-ubyte.gz"}} {
		p := filepath.Join(root, l[0])
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(root, l[1]), p); err != nil {
			t.Fatal(err)
		}
	}
	for rel, want := range map[string]string{"imgs": imagedir.KindFolder, "mnist": idx.Kind} {
		if got, err := source.Detect(filepath.Join(root, rel), entries); err != nil || got != want {
			t.Errorf("Detect(%s) = %q, %v; want %q", rel, got, err, want)
		}
	}
}

// TestDetectRefusesAmbiguousLayouts: a folder that two readings fit, or whose reading would
// leave files out, is refused with what was seen and what to give. The parent of train/ and
// val/ (each with class folders) was detected as frames and packed as one class; the parent of
// train/ and val/ holding images as a folder of two classes named train and val.
func TestDetectRefusesAmbiguousLayouts(t *testing.T) {
	root := t.TempDir()
	mk := func(rels ...string) {
		for _, rel := range rels {
			p := filepath.Join(root, rel)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	mk("splits/train/cat/1.jpg", "splits/train/dog/2.jpg", "splits/val/cat/3.jpg", "splits/val/dog/4.jpg")
	mk("flatsplits/train/1.jpg", "flatsplits/test/2.jpg")
	mk("onesplit/train/cat/1.jpg", "onesplit/train/dog/2.jpg")
	mk("groups/a/cat/1.jpg", "groups/a/dog/2.jpg", "groups/b/cat/3.jpg", "groups/b/dog/4.jpg")
	mk("wrapper/images/cat/1.jpg", "wrapper/images/dog/2.jpg")
	mk("loose/x.jpg", "loose/cat/1.jpg", "loose/dog/2.jpg")
	mk("oneclass/1.jpg", "oneclass/2.png")
	mk("onevideo/a.mp4")
	mk("imgvid/cat/1.jpg", "imgvid/cat/a.mp4", "imgvid/dog/2.jpg")
	for _, tc := range []struct{ rel, want string }{
		{"splits", "named like dataset splits"},
		{"splits", filepath.Join(root, "splits", "train")},
		{"flatsplits", "named like dataset splits"},
		{"onesplit", "point at one, e.g. " + filepath.Join(root, "onesplit", "train")},
		{"groups", "both hold a folder cat/"},
		{"wrapper", "point at " + filepath.Join(root, "wrapper", "images") + " (--from folder)"},
		{"loose", "it holds 1 image or video file (x.jpg) directly besides 2 subfolders (cat/ and dog/)"},
		{"oneclass", "it holds 2 image or video files (1.jpg and 2.png) and no subfolders: it looks like a single class folder"},
		{"onevideo", "single class folder"},
		{"imgvid", "cat/ holds files of different kinds (1.jpg: folder, a.mp4: video)"},
	} {
		got, err := source.Detect(filepath.Join(root, tc.rel), entries)
		if !errors.Is(err, source.ErrUnknown) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Detect(%s) = %q, %v; want source.ErrUnknown saying %q", tc.rel, got, err, tc.want)
		}
	}
	// The unambiguous readings next to them stay detected.
	mk("split1/train/1.jpg", "split1/cat/2.jpg", "split1/dog/3.jpg")
	mk("vids2/run/v1/0001.jpg", "vids2/walk/v2/0001.jpg")
	mk("vids3/run/v1/0001.jpg", "vids3/run/v2/0001.jpg", "vids3/walk/v1/0001.jpg", "vids3/walk/v2/0001.jpg")
	for rel, want := range map[string]string{
		"splits/train": imagedir.KindFolder, "groups/a": imagedir.KindFolder, "wrapper/images": imagedir.KindFolder,
		"split1": imagedir.KindFolder, "vids2": video.KindFrames, "vids3": video.KindFrames,
	} {
		if got, err := source.Detect(filepath.Join(root, rel), entries); err != nil || got != want {
			t.Errorf("Detect(%s) = %q, %v; want %q", rel, got, err, want)
		}
	}
}

// TestDetectBoundsArchiveScan: detection looks at an archive's first member names, and a tar
// reader skips a member by reading it: a .tar.gz whose first member was 80 MiB of zeros (80 KB
// of gzip) was decompressed whole to find the next name. Detection reads at most the first
// 64 MiB of an archive; past that it says it cannot tell (--from names the kind).
func TestDetectBoundsArchiveScan(t *testing.T) {
	p := filepath.Join(t.TempDir(), "samples.tar.gz")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	const big = 80 << 20
	tw.WriteHeader(&tar.Header{Name: "readme.txt", Mode: 0o644, Size: big, Typeflag: tar.TypeReg})
	chunk := make([]byte, 1<<20)
	for range big / len(chunk) {
		tw.Write(chunk)
	}
	for _, m := range []string{"000000.jpg", "000000.cls"} {
		tw.WriteHeader(&tar.Header{Name: m, Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
		tw.Write([]byte("1"))
	}
	tw.Close()
	zw.Close()
	f.Close()
	if got, err := source.Detect(p, entries); !errors.Is(err, source.ErrUnknown) {
		t.Errorf("Detect = %q, %v; want source.ErrUnknown (the members are past the first 64 MiB)", got, err)
	}
}

// TestDetectRefusesSplitNameVariants: split folders are named in more ways than train/ and
// val/: COCO's train2017/ and val2017/ (images directly inside) were packed as a folder of two
// classes, and train_set/ and valid_set/ holding class folders with digits in their names (0/,
// 1/; n01440764/) as frames, the classes taken for videos, both at exit 0.
func TestDetectRefusesSplitNameVariants(t *testing.T) {
	root := t.TempDir()
	for _, rel := range []string{
		"coco/train2017/1.jpg", "coco/val2017/2.jpg",
		"kaggle/train_set/0/1.jpg", "kaggle/train_set/1/2.jpg", "kaggle/valid_set/0/3.jpg", "kaggle/valid_set/1/4.jpg",
		"synsets/training-set/n01440764/1.jpg", "synsets/training-set/n01443537/2.jpg",
		"synsets/test-set/n01440764/3.jpg", "synsets/test-set/n01443537/4.jpg",
		"years/train_2012/c1/1.jpg", "years/val_2012/c1/2.jpg",
	} {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, rel := range []string{"coco", "kaggle", "synsets", "years"} {
		got, err := source.Detect(filepath.Join(root, rel), entries)
		if !errors.Is(err, source.ErrUnknown) || !strings.Contains(err.Error(), "named like dataset splits") {
			t.Errorf("Detect(%s) = %q, %v; want source.ErrUnknown saying the folders are named like dataset splits", rel, got, err)
		}
	}
}

// TestDetectRefusesPerClassTars: ImageNet's training archive holds one tar of images per class
// (n01440764.tar: n01440764_10026.JPEG, ...); extracted, that is a folder of .tar files, which
// was detected as WebDataset shards and packed as zero records, every sample skipped for want
// of a label, at exit 0. Shards whose first sample carries a .cls or a .json member are still
// WebDataset.
func TestDetectRefusesPerClassTars(t *testing.T) {
	root := t.TempDir()
	writeTar := func(rel string, members ...string) {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for _, m := range members {
			tw.WriteHeader(&tar.Header{Name: m, Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
			tw.Write([]byte("1"))
		}
		tw.Close()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeTar("classes/n01440764.tar", "n01440764_10026.JPEG", "n01440764_10027.JPEG")
	writeTar("classes/n01443537.tar", "n01443537_1.JPEG")
	writeTar("labelled/s-0.tar", "k0.jpg", "k0.cls", "k1.jpg", "k1.cls")
	writeTar("jsonlabel/s-0.tar", "k0.json", "k0.jpg")
	got, err := source.Detect(filepath.Join(root, "classes"), entries)
	if !errors.Is(err, source.ErrUnknown) || !strings.Contains(err.Error(), "n01440764.tar") || !strings.Contains(err.Error(), "extract each") {
		t.Errorf("Detect(per-class tars) = %q, %v; want source.ErrUnknown naming n01440764.tar and saying to extract each", got, err)
	}
	for _, rel := range []string{"labelled", "jsonlabel"} {
		if got, err := source.Detect(filepath.Join(root, rel), entries); got != webdataset.Kind || err != nil {
			t.Errorf("Detect(%s) = %q, %v; want webdataset", rel, got, err)
		}
	}
}
