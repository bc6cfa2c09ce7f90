package cifar

import (
	"archive/tar"
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/klauspost/compress/gzip"
)

// Record is one CIFAR record, for writing test and demo files.
type Record struct {
	Label  uint8  // the label (CIFAR-10) or fine label (CIFAR-100)
	Coarse uint8  // the coarse label (CIFAR-100 only)
	Pixels []byte // ImageSize bytes: the red, green and blue 32×32 planes
}

// AppendRecord appends the binary form of r for kind to b.
func AppendRecord(b []byte, kind string, r Record) ([]byte, error) {
	if len(r.Pixels) != ImageSize {
		return b, fmt.Errorf("cifar: record has %d pixel bytes, want %d", len(r.Pixels), ImageSize)
	}
	switch kind {
	case Kind10:
		b = append(b, r.Label)
	case Kind100:
		b = append(b, r.Coarse, r.Label)
	default:
		return b, fmt.Errorf("cifar: unknown kind %q", kind)
	}
	return append(b, r.Pixels...), nil
}

// WriteBinary writes records to path in the binary layout of kind ("cifar10" or "cifar100").
func WriteBinary(path, kind string, recs []Record) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	w := bufio.NewWriterSize(f, 1<<20)
	var buf []byte
	for _, r := range recs {
		if buf, err = AppendRecord(buf[:0], kind, r); err != nil {
			return err
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	return w.Flush()
}

// TestRecords returns n deterministic synthetic records for kind: labels cycle through the
// classes (offset by seed) and each image is a smooth, label-dependent colour pattern with
// some deterministic noise, so a contact sheet of them is recognisable.
func TestRecords(kind string, n int, seed uint64) []Record {
	nClasses, nCoarse := NumClasses10, 1
	if kind == Kind100 {
		nClasses, nCoarse = NumFine100, NumCoarse100
	}
	state := seed*0x9E3779B97F4A7C15 + 1
	rnd := func() uint64 {
		state += 0x9E3779B97F4A7C15
		z := state
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
		z = (z ^ (z >> 27)) * 0x94D049BB133111EB
		return z ^ (z >> 31)
	}
	recs := make([]Record, n)
	for i := range recs {
		label := int((uint64(i) + seed) % uint64(nClasses))
		pix := make([]byte, ImageSize)
		for c := 0; c < Channels; c++ {
			base := (label*53 + c*85) % 256
			for y := 0; y < Height; y++ {
				for x := 0; x < Width; x++ {
					v := base + (x*(c+1)+y*(3-c))*2 + int(rnd()%16)
					pix[c*plane+y*Width+x] = byte(v)
				}
			}
		}
		recs[i] = Record{Label: uint8(label), Coarse: uint8(label % nCoarse), Pixels: pix}
	}
	return recs
}

// OfficialNames10 are the CIFAR-10 class names, as in batches.meta.txt.
var OfficialNames10 = []string{"airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"}

// testFiles lists the files of a synthetic dataset of kind, with perFile records each.
func testFiles(kind string, perFile int) (map[string][]byte, error) {
	files := make(map[string][]byte)
	add := func(name string, seed uint64) error {
		var b []byte
		var err error
		for _, r := range TestRecords(kind, perFile, seed) {
			if b, err = AppendRecord(b, kind, r); err != nil {
				return err
			}
		}
		files[name] = b
		return nil
	}
	switch kind {
	case Kind10:
		for i := 1; i <= 5; i++ {
			if err := add("data_batch_"+strconv.Itoa(i)+".bin", uint64(i)); err != nil {
				return nil, err
			}
		}
		if err := add("test_batch.bin", 6); err != nil {
			return nil, err
		}
		files["batches.meta.txt"] = []byte(strings.Join(OfficialNames10, "\n") + "\n\n")
	case Kind100:
		if err := add("train.bin", 1); err != nil {
			return nil, err
		}
		if err := add("test.bin", 2); err != nil {
			return nil, err
		}
		files["fine_label_names.txt"] = []byte(strings.Join(prefixedNames("fine_", NumFine100), "\n") + "\n")
		files["coarse_label_names.txt"] = []byte(strings.Join(prefixedNames("coarse_", NumCoarse100), "\n") + "\n")
	default:
		return nil, fmt.Errorf("cifar: unknown kind %q", kind)
	}
	return files, nil
}

func prefixedNames(prefix string, n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s%02d", prefix, i)
	}
	return names
}

// archiveOrder is the member order of the synthetic archives: like the official CIFAR-10
// archive, it is not the file order.
var archiveOrder = map[string][]string{
	Kind10: {"data_batch_1.bin", "batches.meta.txt", "data_batch_3.bin", "data_batch_4.bin",
		"test_batch.bin", "data_batch_5.bin", "data_batch_2.bin"},
	Kind100: {"train.bin", "test.bin", "fine_label_names.txt", "coarse_label_names.txt"},
}

// WriteTestDataset writes a synthetic dataset of kind with perFile records in each data file,
// in the official layout, into dir/cifar-10-batches-bin or dir/cifar-100-binary, with class
// names files (official CIFAR-10 names; "fine_00".. and "coarse_00".. for CIFAR-100). It
// returns the folder it wrote.
func WriteTestDataset(dir, kind string, perFile int) (string, error) {
	files, err := testFiles(kind, perFile)
	if err != nil {
		return "", err
	}
	folder := filepath.Join(dir, Folder10)
	if kind == Kind100 {
		folder = filepath.Join(dir, Folder100)
	}
	if err := os.MkdirAll(folder, 0o755); err != nil {
		return "", err
	}
	for _, name := range archiveOrder[kind] {
		if err := os.WriteFile(filepath.Join(folder, name), files[name], 0o644); err != nil {
			return "", err
		}
	}
	return folder, nil
}

// WriteTestArchive writes the dataset of WriteTestDataset as a .tar.gz at path, with the
// members under the official folder name and out of file order, as in the official archive.
func WriteTestArchive(path, kind string, perFile int) error {
	b, err := TestArchive(kind, perFile, archiveOrder[kind])
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// TestArchive returns a .tar.gz of the synthetic dataset with the members in the given order
// (names from the dataset; unknown names are left out).
func TestArchive(kind string, perFile int, order []string) ([]byte, error) {
	files, err := testFiles(kind, perFile)
	if err != nil {
		return nil, err
	}
	folder := Folder10
	if kind == Kind100 {
		folder = Folder100
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	if err := tw.WriteHeader(&tar.Header{Name: folder + "/", Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
		return nil, err
	}
	for _, name := range order {
		data, ok := files[name]
		if !ok {
			continue
		}
		h := &tar.Header{Name: folder + "/" + name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data))}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
