package cifar

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/source/internal/fsentry"
)

// tarGz returns a .tar.gz holding files in the given order.
func tarGz(t *testing.T, names []string, files map[string][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(files[n]))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(files[n]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestEmptyBatchIsReported: a batch file that should hold records but is empty contributed 0
// records without a word. It is refused, naming the file, as a batch that is not a whole
// number of records already is: in a folder, in an archive, and given on its own.
func TestEmptyBatchIsReported(t *testing.T) {
	t.Run("folder", func(t *testing.T) {
		dir, err := WriteTestDataset(t.TempDir(), Kind10, 3)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "data_batch_3.bin"), nil)
		_, err = Open(dir, Kind10, "train")
		if err == nil || !strings.Contains(err.Error(), "data_batch_3.bin: empty (0 bytes)") {
			t.Fatalf("got %v, want an error naming the empty data_batch_3.bin", err)
		}
	})
	t.Run("archive", func(t *testing.T) {
		recs, err := testFiles(Kind100, 2)
		if err != nil {
			t.Fatal(err)
		}
		recs["cifar-100-binary/test.bin"] = nil
		recs["cifar-100-binary/train.bin"] = recs["train.bin"]
		p := filepath.Join(t.TempDir(), "c.tar.gz")
		writeFile(t, p, tarGz(t, []string{"cifar-100-binary/train.bin", "cifar-100-binary/test.bin"}, recs))
		if _, err := Open(p, Kind100, "train"); err != nil {
			t.Fatalf("train split: %v", err)
		}
		_, err = Open(p, Kind100, "test")
		if err == nil || !strings.Contains(err.Error(), "cifar-100-binary/test.bin: empty (0 bytes)") {
			t.Fatalf("got %v, want an error naming the empty test.bin member", err)
		}
	})
	t.Run("single file", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "mine.bin")
		writeFile(t, p, nil)
		_, err := Open(p, Kind10, "")
		if err == nil || !strings.Contains(err.Error(), "mine.bin: empty (0 bytes)") {
			t.Fatalf("got %v, want an error naming the empty mine.bin", err)
		}
	})
}

// TestClassNamesAreLossless: class names that differ only in bytes that are not UTF-8 stay
// distinct (escaped); a names file that names one class twice is refused.
func TestClassNamesAreLossless(t *testing.T) {
	dir, err := WriteTestDataset(t.TempDir(), Kind10, 1)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"a\xff", "a\xfe", "c", "d", "e", "f", "g", "h", "i", `j\k`}
	writeFile(t, filepath.Join(dir, "batches.meta.txt"), []byte(strings.Join(names, "\n")))
	s, err := Open(dir, Kind10, "test")
	if err != nil {
		t.Fatal(err)
	}
	got := s.Info().Classes
	if got[0] != `a\xff` || got[1] != `a\xfe` || got[9] != `j\\k` {
		t.Errorf("classes %q", got)
	}
	names[3] = "c"
	writeFile(t, filepath.Join(dir, "batches.meta.txt"), []byte(strings.Join(names, "\n")))
	if _, err := Open(dir, Kind10, "test"); !errors.Is(err, fsentry.ErrDuplicate) || !strings.Contains(err.Error(), "batches.meta.txt") {
		t.Errorf("duplicate names: got %v", err)
	}
}

// TestFIFONamesFileDoesNotBlock: a FIFO where the names file would be is refused, not opened
// for reading (which blocks until a writer comes).
func TestFIFONamesFileDoesNotBlock(t *testing.T) {
	dir, err := WriteTestDataset(t.TempDir(), Kind10, 1)
	if err != nil {
		t.Fatal(err)
	}
	meta := filepath.Join(dir, "batches.meta.txt")
	if err := os.Remove(meta); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(meta, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		s, err := Open(dir, Kind10, "test")
		if err == nil {
			err = s.Enumerate(context.Background(), func(source.Item) error { return nil })
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, fsentry.ErrNotRegular) || !strings.Contains(err.Error(), "batches.meta.txt") {
			t.Errorf("got %v, want an error naming the FIFO batches.meta.txt", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Open blocked on a FIFO")
	}
}

// TestDuplicateMemberRefused: an archive holding two members with one wanted name (in the same
// or another folder) is ambiguous: tar extraction keeps the last, packer took the first without
// a word. It is refused, naming both.
func TestDuplicateMemberRefused(t *testing.T) {
	recs, err := testFiles(Kind100, 2)
	if err != nil {
		t.Fatal(err)
	}
	other, err := testFiles(Kind100, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, second := range []string{"cifar-100-binary/train.bin", "elsewhere/train.bin", "cifar-100-binary/fine_label_names.txt"} {
		files := map[string][]byte{
			"cifar-100-binary/train.bin": recs["train.bin"],
			"cifar-100-binary/test.bin":  recs["test.bin"],
		}
		names := []string{"cifar-100-binary/train.bin", "cifar-100-binary/test.bin"}
		if strings.HasSuffix(second, ".txt") {
			files[second] = []byte("a\n")
			names = append(names, second, second)
		}
		var buf bytes.Buffer
		gz := gzip.NewWriter(&buf)
		tw := tar.NewWriter(gz)
		add := func(name string, data []byte) {
			if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data))}); err != nil {
				t.Fatal(err)
			}
			if _, err := tw.Write(data); err != nil {
				t.Fatal(err)
			}
		}
		for _, n := range names {
			add(n, files[n])
		}
		if !strings.HasSuffix(second, ".txt") {
			add(second, other["train.bin"])
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := gz.Close(); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), "c.tar.gz")
		writeFile(t, p, buf.Bytes())
		_, err = Open(p, Kind100, "train")
		if err == nil || !strings.Contains(err.Error(), "two members named") {
			t.Errorf("second member %s: got %v, want the archive refused as ambiguous", second, err)
		}
	}
}
