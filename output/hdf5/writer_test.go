package hdf5

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/packer-dev/packer/output"
	"github.com/packer-dev/packer/shard"
)

func TestNewRejects(t *testing.T) {
	base := output.Config{Dir: t.TempDir(), Sample: shard.SampleSpec{Shape: []int{2, 2}, DType: shard.Uint8}}
	cases := map[string]func(*output.Config){
		"varying-shape": func(c *output.Config) { c.Sample.Shape = []int{-1, 2} },
		"bad-dtype":     func(c *output.Config) { c.Sample.DType = "int7" },
		"no-shape":      func(c *output.Config) { c.Sample.Shape = nil },
		"aux-slash":     func(c *output.Config) { c.Label.Aux = []string{"a/b"} },
		"aux-empty":     func(c *output.Config) { c.Label.Aux = []string{""} },
		"label-dtype":   func(c *output.Config) { c.Label.DType = "float32" },
		"no-dir":        func(c *output.Config) { c.Dir = filepath.Join(c.Dir, "missing", "dir") },
	}
	for name, edit := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := base
			edit(&cfg)
			if out, err := New(cfg); err == nil {
				out.Abort()
				t.Fatal("no error")
			}
		})
	}
}

func TestWriteRejects(t *testing.T) {
	cases := []struct {
		name string
		meta bool
		rec  output.Record
		text string
	}{
		{"short", false, output.Record{Data: make([]byte, 3)}, "3 bytes, want 4"},
		{"aux", false, output.Record{Data: make([]byte, 4), Aux: []int64{1, 2}}, "2 auxiliary labels, want 1"},
		{"meta-not-declared", false, output.Record{Data: make([]byte, 4), Aux: []int64{1}, Meta: []byte("x")}, "HasMeta"},
		{"meta-nul", true, output.Record{Data: make([]byte, 4), Aux: []int64{1}, Meta: []byte("a\x00b")}, "NUL"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := output.Config{Dir: dir, Sample: shard.SampleSpec{Shape: []int{2, 2}, DType: shard.Uint8},
				Label: shard.LabelSpec{Aux: []string{"a"}}, HasMeta: c.meta}
			out, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer out.Abort()
			if err := out.Write(output.Record{Data: make([]byte, 4), Aux: []int64{7}}); err != nil {
				t.Fatal(err)
			}
			err = out.Write(c.rec)
			if err == nil || !strings.Contains(err.Error(), c.text) {
				t.Fatalf("Write: %v, want an error containing %q", err, c.text)
			}
		})
	}
}

// TestAbort: an aborted output leaves nothing behind, and an output that was never closed never
// shows a data.h5.
func TestAbort(t *testing.T) {
	dir := t.TempDir()
	s := makeSet(dir, 10, []int{4, 4, 3}, shard.Uint8, nil, false)
	out, err := New(s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range s.records {
		if err := out.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, DataFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("data.h5 exists before Close: %v", err)
	}
	out.Abort()
	out.Abort()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 0 {
		t.Fatalf("Abort left %v", ents)
	}
	if err := out.Write(s.records[0]); err == nil {
		t.Fatal("Write after Abort: no error")
	}
	if _, err := out.Close(); err == nil {
		t.Fatal("Close after Abort: no error")
	}
}

// TestConcurrentOutputs writes two files at once from two goroutines (the build may run two
// outputs; tests run in parallel): the package lock keeps libhdf5 calls apart.
func TestConcurrentOutputs(t *testing.T) {
	sets := []testSet{
		makeSet(t.TempDir(), 120, []int{16, 16, 3}, shard.Uint8, []string{"c"}, true),
		makeSet(t.TempDir(), 120, []int{16, 16, 3}, shard.Uint8, []string{"c"}, true),
	}
	errc := make(chan error, len(sets))
	for _, s := range sets {
		go func() {
			out, err := New(s.cfg)
			if err != nil {
				errc <- err
				return
			}
			for _, r := range s.records {
				if err := out.Write(r); err != nil {
					out.Abort()
					errc <- err
					return
				}
			}
			_, err = out.Close()
			errc <- err
		}()
	}
	for range sets {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	a, _ := os.ReadFile(filepath.Join(sets[0].cfg.Dir, DataFile))
	b, _ := os.ReadFile(filepath.Join(sets[1].cfg.Dir, DataFile))
	if len(a) == 0 || string(a) != string(b) {
		t.Fatal("the same records written concurrently gave different files")
	}
	readBack(t, sets[0])
}

// TestDiskFullNamesTheCause fills a small tmpfs: the error must say "no space left on device"
// (errors.Is ENOSPC), not a bare "library error". HDF5's cleanup calls after the failed write
// used to clear the error stack that holds the cause. Mounting needs root (as CI runs); the
// test says so and skips where it cannot mount.
//
// The writes run in a child process (this test binary, re-run with PACKER_HDF5_FILL set): a file
// whose close failed for lack of space stays open inside libhdf5, and the library's exit handler
// then crashes a -race binary (not a normal build, whose exit status is 1 as it should be). The
// parent judges the child by the error it prints, not by its exit.
func TestDiskFullNamesTheCause(t *testing.T) {
	if dir := os.Getenv("PACKER_HDF5_FILL"); dir != "" {
		err := fillHDF5(dir)
		fmt.Printf("ENOSPC=%v\nERR=%v\n", errors.Is(err, syscall.ENOSPC), err)
		return
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
	cmd := exec.Command(os.Args[0], "-test.run=^TestDiskFullNamesTheCause$", "-test.count=1")
	cmd.Env = append(os.Environ(), "PACKER_HDF5_FILL="+dir)
	out, _ := cmd.CombinedOutput()
	text := string(out)
	if !strings.Contains(text, "ENOSPC=true") || !strings.Contains(text, "no space left on device") {
		t.Fatalf("the error does not name the full disk; child output:\n%s", text)
	}
}

// fillHDF5 writes 12 MB of records into dir and returns the first error.
func fillHDF5(dir string) error {
	cfg := output.Config{Dir: dir, Sample: shard.SampleSpec{Shape: []int{64, 64, 3}, DType: shard.Uint8}}
	out, err := New(cfg)
	if err != nil {
		return err
	}
	defer out.Abort()
	rec := output.Record{Data: make([]byte, 64*64*3)}
	for i := range rec.Data {
		rec.Data[i] = byte(i * 7)
	}
	for i := 0; i < 1000 && err == nil; i++ {
		err = out.Write(rec)
	}
	if err == nil {
		_, err = out.Close()
	}
	if err == nil {
		return errors.New("12 MB written into a 512 KiB file system without an error")
	}
	return err
}
