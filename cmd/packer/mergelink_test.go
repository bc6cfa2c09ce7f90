package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packer-dev/packer/output/shards"
	"github.com/packer-dev/packer/pipeline"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/verify"
)

// cutCorpus writes a WebDataset of two tar files: 23 samples of PNGs of several sizes, each with
// a caption (.txt) and a class (.cls), one of them damaged (a skipped input).
func cutCorpus(t *testing.T, root string) string {
	t.Helper()
	dir := filepath.Join(root, "wds")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	png := filepath.Join(root, "img.png")
	n := 0
	for s, count := range []int{12, 11} {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for k := 0; k < count; k++ {
			writePNG(t, png, 9+n%5*3, 7+n%3*4, n)
			img, err := os.ReadFile(png)
			if err != nil {
				t.Fatal(err)
			}
			if n == 9 {
				img = []byte("damaged")
			}
			key := fmt.Sprintf("s%03d", n)
			for _, m := range [][2]string{{key + ".png", string(img)}, {key + ".txt", strings.Repeat("caption ", n%4+1)}, {key + ".cls", fmt.Sprint(n % 3)}} {
				tw.WriteHeader(&tar.Header{Name: m[0], Mode: 0o644, Size: int64(len(m[1])), Typeflag: tar.TypeReg})
				tw.Write([]byte(m[1]))
			}
			n++
		}
		tw.Close()
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d.tar", s)), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestMergeCutInputsLinks: parts built with --cut-inputs (fixed-size records, variable-size
// records, records with fields) merge by linking their shard files into place, and the merged
// dataset is byte-identical to the one-machine build with the same options; --remove-parts
// then leaves OUT alone, readable and verified, and the parts gone.
func TestMergeCutInputsLinks(t *testing.T) {
	root := t.TempDir()
	src := cutCorpus(t, root)
	for _, c := range []struct {
		name string
		args []string
	}{
		{"fixed", []string{"--resize", "8", "--crop", "6"}},
		{"varsize", []string{"--resize", "8"}},
		{"fields", []string{"--resize", "8", "--crop", "6", "--fields", "txt"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"--classes", "x,y,z", "--shard-size", "250", "--cut-inputs", "4", "--workers", "2"}, c.args...)
			dir := filepath.Join(root, c.name)
			full := filepath.Join(dir, "full")
			mustRun(t, append([]string{"build", src, "-o", full}, args...)...)
			fm, err := shard.ReadManifest(full)
			if err != nil {
				t.Fatal(err)
			}
			pieces := 0 // shards that the byte budget cut within a chunk
			for _, f := range fm.Files {
				if f.Shard != nil && f.Shard.Piece > 0 {
					pieces++
				}
			}
			if fm.FormatVersion != 4 || fm.CutInputs != 4 || len(fm.Files) < 7 || pieces == 0 || len(fm.Skipped) != 1 {
				t.Fatalf("the one-machine build: format_version %d, cut_inputs %d, %d files, %d pieces past 0, skipped %d",
					fm.FormatVersion, fm.CutInputs, len(fm.Files), pieces, len(fm.Skipped))
			}
			var parts []string
			for i := 0; i < 3; i++ {
				p := filepath.Join(dir, fmt.Sprintf("p%d", i))
				mustRun(t, append([]string{"build", src, "-o", p, "--part", fmt.Sprintf("%d/3", i)}, args...)...)
				parts = append(parts, p)
			}
			merged := filepath.Join(dir, "merged")
			mustRun(t, "merge", "-o", merged, parts[2], parts[0], parts[1])
			sameTree(t, full, merged)
			mustBeLinked(t, parts[0], merged)
			// Again with --verify-parts and --remove-parts.
			merged2 := filepath.Join(dir, "merged2")
			mustRun(t, "merge", "-o", merged2, "--verify-parts", "--remove-parts", parts[0], parts[1], parts[2])
			sameTree(t, full, merged2)
			for _, p := range parts {
				if _, err := os.Stat(p); !os.IsNotExist(err) {
					t.Errorf("--remove-parts left %s: %v", p, err)
				}
			}
			mustRun(t, "verify", merged)
			mustRun(t, "verify", merged2)
		})
	}
}

// TestMergeCutInputsRefuses: parts cut with other --cut-inputs, or parts of which one was
// built without it, do not make one dataset; a damaged part is refused; --cut-inputs is refused
// for npy.
func TestMergeCutInputsRefuses(t *testing.T) {
	root := t.TempDir()
	src := cutCorpus(t, root)
	args := []string{"--classes", "x,y,z", "--resize", "8", "--crop", "6", "--shard-size", "600", "--workers", "2"}
	part := func(i int, extra ...string) string {
		p := filepath.Join(root, fmt.Sprintf("p%d-%s", i, strings.Join(extra, "")))
		mustRun(t, append(append([]string{"build", src, "-o", p, "--part", fmt.Sprintf("%d/2", i)}, args...), extra...)...)
		return p
	}
	p0 := part(0, "--cut-inputs", "4")
	for _, other := range []string{part(1, "--cut-inputs", "5"), part(1)} {
		_, errs, code := run(t, "merge", "-o", filepath.Join(root, "m"), p0, other)
		if code == 0 || !strings.Contains(errs, "--cut-inputs") {
			t.Errorf("merge of parts cut at 4 and other: exit %d, %s", code, errs)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "m")); !os.IsNotExist(err) {
		t.Errorf("a refused merge wrote its OUT: %v", err)
	}
	// A damaged part: a changed index is refused (exit 3, naming the part) as the shards are
	// opened; a changed record byte only with --verify-parts (the readers' block CRCs and
	// packer verify of OUT catch it otherwise). Nothing is published.
	p1 := part(1, "--cut-inputs", "4")
	shardPath := filepath.Join(p1, "shard-00000.pks")
	r, err := shard.Open(shardPath)
	if err != nil {
		t.Fatal(err)
	}
	dataAt, indexAt := r.DataOffset(), r.IndexOffset()
	r.Close()
	orig, err := os.ReadFile(shardPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		at   int64
		args []string
	}{{indexAt, nil}, {dataAt, []string{"--verify-parts"}}} {
		bad := bytes.Clone(orig)
		bad[c.at] ^= 0xff
		if err := os.WriteFile(shardPath, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		_, errs, code := run(t, append(append([]string{"merge", "-o", filepath.Join(root, "m")}, c.args...), p0, p1)...)
		if code != 3 || !strings.Contains(errs, p1) {
			t.Errorf("merge %v with a byte of %s changed at %d: exit %d, %s", c.args, shardPath, c.at, code, errs)
		}
		if _, err := os.Stat(filepath.Join(root, "m")); !os.IsNotExist(err) {
			t.Errorf("a refused merge wrote its OUT: %v", err)
		}
	}
	_, errs, code := run(t, "build", src, "-o", filepath.Join(root, "npy"), "--format", "npy", "--cut-inputs", "4", "--resize", "8", "--crop", "6", "--classes", "x,y,z")
	if code != 2 || !strings.Contains(errs, "--cut-inputs") {
		t.Errorf("--format npy --cut-inputs: exit %d, %s", code, errs)
	}
}

// mustBeLinked checks that the merged dataset's first shard is the first part's file (the same
// inode): the parts were merged by link, not copied.
func mustBeLinked(t *testing.T, part0, merged string) {
	t.Helper()
	a, err := os.Stat(filepath.Join(part0, "shard-00000.pks"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.Stat(filepath.Join(merged, "shard-00000.pks"))
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(a, b) {
		t.Errorf("the merged shard-00000.pks is not part 0's file: the parts were not merged by link")
	}
}

// TestVerifyPartsChecksTheLinkedFile: merge --verify-parts links the very shards it read whole:
// a shard swapped after its part was verified (renamed over by one of the same size, header,
// index and footer, but a changed record byte) is refused, naming the part, not linked.
func TestVerifyPartsChecksTheLinkedFile(t *testing.T) {
	root := t.TempDir()
	src := cutCorpus(t, root)
	args := []string{"--classes", "x,y,z", "--resize", "8", "--crop", "6", "--shard-size", "600", "--cut-inputs", "4", "--workers", "2"}
	var dirs []string
	for i := range 2 {
		p := filepath.Join(root, fmt.Sprintf("p%d", i))
		mustRun(t, append([]string{"build", src, "-o", p, "--part", fmt.Sprintf("%d/2", i)}, args...)...)
		dirs = append(dirs, p)
	}
	shardPath := filepath.Join(dirs[1], "shard-00000.pks")
	r, err := shard.Open(shardPath)
	if err != nil {
		t.Fatal(err)
	}
	dataAt := r.DataOffset()
	r.Close()
	orig, err := os.ReadFile(shardPath)
	if err != nil {
		t.Fatal(err)
	}
	parts, err := pipeline.ReadParts(dirs, outputNames(false))
	if err != nil {
		t.Fatal(err)
	}
	entry, err := outputFor(parts.Info().Format)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(root, "merged")
	_, err = pipeline.Merge(context.Background(), parts, pipeline.MergeOptions{
		Parts: parts.Dirs, Output: entry, Out: out, Formats: outputNames(false),
		ShardName: shards.ShardName, VerifyParts: true,
		CheckPart: func(ctx context.Context, dir string, _ func(shard.FileEntry) io.Writer) ([]string, error) {
			rep, err := verify.Dir(ctx, dir, verify.Options{Cached: true, Strict: true}, nil)
			if err != nil || len(rep.Faults) > 0 || dir != dirs[1] {
				return nil, err
			}
			// Verified: now a shard of the same entry but one record byte is renamed over it.
			bad := bytes.Clone(orig)
			bad[dataAt] ^= 0xff
			tmp := filepath.Join(dir, "swap.tmp")
			if err := os.WriteFile(tmp, bad, 0o644); err != nil {
				return nil, err
			}
			return nil, os.Rename(tmp, shardPath)
		},
	})
	var pe *pipeline.PartError
	if !errors.As(err, &pe) || pe.Dir != dirs[1] {
		t.Fatalf("merge --verify-parts with a shard swapped after the part was verified: %v; want a refusal naming %s", err, dirs[1])
	}
	t.Logf("refused: %v", pe.Faults)
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a refused merge wrote its OUT: %v", err)
	}
}
