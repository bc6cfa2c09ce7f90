package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/packer-dev/packer/pipeline"
	"github.com/packer-dev/packer/shard"
)

// writeSiblingPNGFolder writes what writePNGFolder writes (the same class folders and file
// names, images of the same size) with other pixels: a sibling source a user could mix up with
// the first one.
func writeSiblingPNGFolder(t *testing.T, root string, n int) {
	t.Helper()
	for _, cls := range []string{"cat", "dog"} {
		dir := filepath.Join(root, cls)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			writeTinyPNG(t, filepath.Join(dir, fmt.Sprintf("%03d.png", i)), byte(i*37+len(cls)+101))
		}
	}
}

// flipDataByte flips one bit of the first record's bytes in the shard file p (its data
// section: header, index and footer keep their checksums right).
func flipDataByte(t *testing.T, p string) {
	t.Helper()
	r, err := shard.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	off := r.DataOffset() + 5
	r.Close()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	data[off] ^= 0x10
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// editJournal rewrites the journal in staging with edit applied to its bytes, failing when
// edit changed nothing (the case would not test what it says).
func editJournal(t *testing.T, staging string, edit func([]byte) []byte) {
	t.Helper()
	p := filepath.Join(staging, pipeline.JournalName)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	out := edit(append([]byte{}, data...))
	if bytes.Equal(out, data) {
		t.Errorf("the edit left the journal as it was:\n%s", data)
		return
	}
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// replaceOnce replaces the first match of re in data by repl, failing when there is none.
func replaceOnce(t *testing.T, data []byte, re, repl string) []byte {
	t.Helper()
	rx := regexp.MustCompile(re)
	loc := rx.FindIndex(data)
	if loc == nil {
		t.Fatalf("the journal has no %s:\n%s", re, data)
	}
	return append(append(append([]byte{}, data[:loc[0]]...), rx.ReplaceAll(data[loc[0]:loc[1]], []byte(repl))...), data[loc[1]:]...)
}

// TestResumeTampered: a resumed build trusts nothing in the staging folder it did not check.
// An interrupted build (a part, too) is killed with a checkpoint in its staging folder; then one
// thing is changed there (a flipped byte in a kept shard, a kept shard replaced by the shard of
// the same position from a build of a sibling folder with the same names and options, the
// journal edited into other valid JSON, a kept shard, the journal or the staging folder turned
// into a link), an input the checkpoint covers is rewritten in place with other pixels, or the
// resume is run from the sibling folder: each resume is refused with an error naming what is
// wrong, nothing is published, and a build without --resume then writes the uninterrupted
// build's bytes. Foreign files and folders in the staging folder never reach OUT. The
// untouched checkpoint, in its OUT or moved to another, resumes into the uninterrupted build's
// bytes.
func TestResumeTampered(t *testing.T) {
	strace := needStrace(t)
	bin := buildBinary(t)
	renames := syscallSet(t, strace, "rename", "renameat", "renameat2")
	root := t.TempDir()
	src := filepath.Join(root, "src")
	writePNGFolder(t, src, 12)
	sib := filepath.Join(root, "sibling")
	writeSiblingPNGFolder(t, sib, 12)
	for _, mode := range []struct {
		name    string
		args    []string
		covered string // an input the checkpoint covers
	}{
		{"whole", nil, "cat/000.png"},
		{"part", []string{"--part", "1/2"}, "dog/000.png"},
	} {
		t.Run(mode.name, func(t *testing.T) {
			opts := append([]string{"--from", "folder", "--crop", "8", "--shard-size", "500", "--workers", "1", "--checkpoint-every", "0"}, mode.args...)
			full := filepath.Join(root, mode.name, "full")
			mustRun(t, append([]string{"build", src, "-o", full}, opts...)...)
			sibFull := filepath.Join(root, mode.name, "sibling-full")
			mustRun(t, append([]string{"build", sib, "-o", sibFull}, opts...)...)
			if a, b := readFile(t, filepath.Join(full, "shard-00001.pks")), readFile(t, filepath.Join(sibFull, "shard-00001.pks")); len(a) != len(b) || bytes.Equal(a, b) {
				t.Fatalf("the sibling's shard-00001.pks has %d bytes, the source's %d, equal %v: want the same size and other bytes", len(b), len(a), bytes.Equal(a, b))
			}
			out := filepath.Join(root, mode.name, "out")
			staging := out + pipeline.StagingSuffix
			args := append([]string{"build", src, "-o", out}, opts...)
			// Killed at the commit of its third shard: the journal lists shard-00000.pks and
			// shard-00001.pks.
			killedAtShard(t, strace, bin, renames, out, 2, args...)
			if journal := filepath.Join(staging, pipeline.JournalName); !bytes.Contains(readFile(t, journal), []byte(`"shard-00001.pks"`)) {
				t.Fatalf("the journal after the kill does not list shard-00001.pks:\n%s", readFile(t, journal))
			}
			saved := filepath.Join(root, mode.name, "saved")
			if err := os.CopyFS(saved, os.DirFS(staging)); err != nil {
				t.Fatal(err)
			}
			restore := func() {
				t.Helper()
				for _, p := range []string{out, staging} {
					if err := os.RemoveAll(p); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.CopyFS(staging, os.DirFS(saved)); err != nil {
					t.Fatal(err)
				}
			}
			kept := filepath.Join(staging, "shard-00001.pks")
			coveredPath := filepath.Join(src, mode.covered)
			coveredData := readFile(t, coveredPath)
			coveredStat, err := os.Stat(coveredPath)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				name   string
				tamper func()
				src    string   // the source to resume from (default src)
				extra  []string // arguments replacing the shard size
				want   []string // what the refusal says
			}{
				{name: "flipped byte in a kept shard", tamper: func() { flipDataByte(t, kept) },
					want: []string{"shard-00001.pks", "SHA-256"}},
				{name: "kept shard from a sibling build", tamper: func() {
					copyFile(t, filepath.Join(sibFull, "shard-00001.pks"), kept)
				}, want: []string{"shard-00001.pks", "SHA-256"}},
				{name: "kept shard a link to a copy of itself", tamper: func() {
					cp := filepath.Join(root, mode.name, "linked.pks")
					copyFile(t, kept, cp)
					if err := os.Remove(kept); err != nil {
						t.Fatal(err)
					}
					if err := os.Symlink(cp, kept); err != nil {
						t.Fatal(err)
					}
				}, want: []string{"shard-00001.pks", "not a regular file"}},
				{name: "journal record count edited", tamper: func() {
					editJournal(t, staging, func(d []byte) []byte { return replaceOnce(t, d, `"records":[0-9]+`, `"records":1`) })
				}, want: []string{pipeline.JournalName, "checksum"}},
				{name: "journal file list edited", tamper: func() {
					// The last kept shard is dropped from the output's list.
					editJournal(t, staging, func(d []byte) []byte {
						return replaceOnce(t, d, `,\{"path":"shard-0000[1-9]\.pks"[^}]*\}\]`, `]`)
					})
				}, want: []string{pipeline.JournalName, "checksum"}},
				{name: "journal option edited with the command line", tamper: func() {
					// (A part records the final dataset's shard size too.)
					editJournal(t, staging, func(d []byte) []byte {
						return regexp.MustCompile(`"((final_)?shard_size)":500`).ReplaceAll(d, []byte(`"$1":700`))
					})
				}, extra: []string{"--shard-size", "700"}, want: []string{pipeline.JournalName, "checksum"}},
				{name: "journal without its checksum", tamper: func() {
					editJournal(t, staging, func(d []byte) []byte {
						return regexp.MustCompile(`,"journal_sha256":"[0-9a-f]*"`).ReplaceAll(d, nil)
					})
				}, want: []string{pipeline.JournalName, "checksum"}},
				{name: "journal a link to a copy of itself", tamper: func() {
					j := filepath.Join(staging, pipeline.JournalName)
					cp := filepath.Join(root, mode.name, "linked.json")
					copyFile(t, j, cp)
					if err := os.Remove(j); err != nil {
						t.Fatal(err)
					}
					if err := os.Symlink(cp, j); err != nil {
						t.Fatal(err)
					}
				}, want: []string{pipeline.JournalName, "not a regular file"}},
				{name: "staging folder a link to a copy of itself", tamper: func() {
					moved := filepath.Join(root, mode.name, "moved")
					if err := os.RemoveAll(moved); err != nil {
						t.Fatal(err)
					}
					if err := os.Rename(staging, moved); err != nil {
						t.Fatal(err)
					}
					if err := os.Symlink(moved, staging); err != nil {
						t.Fatal(err)
					}
				}, want: []string{staging, "not the folder the interrupted build created"}},
				{name: "input the checkpoint covers rewritten in place", tamper: func() {
					// The sibling's image of the same name: other pixels, the same name and
					// label. (The original, with its modification time, is put back below.)
					copyFile(t, filepath.Join(sib, mode.covered), filepath.Join(src, mode.covered))
				}, want: []string{mode.covered, "was modified at"}},
				{name: "resumed from a sibling folder", tamper: func() {}, src: sib,
					want: []string{"source_path: was", sib}},
			} {
				restore()
				a := append([]string{}, args...)
				if c.src != "" {
					a[1] = c.src
				}
				a = append(a, c.extra...)
				a = append(a, "--resume")
				c.tamper()
				stdout, errs, code := run(t, a...)
				if code == 0 {
					t.Errorf("%s: the resume succeeded (exit 0):\n%s", c.name, stdout)
				} else {
					t.Logf("%s: %s", c.name, strings.TrimSpace(errs))
					for _, w := range c.want {
						if !strings.Contains(errs, w) {
							t.Errorf("%s: exit %d, stderr %q; want it to say %q", c.name, code, errs, w)
						}
					}
				}
				if exists(filepath.Join(out, "manifest.json")) {
					t.Errorf("%s: a dataset was published at %s", c.name, out)
				}
				if !bytes.Equal(readFile(t, coveredPath), coveredData) {
					if err := os.WriteFile(coveredPath, coveredData, 0o644); err != nil {
						t.Fatal(err)
					}
					if err := os.Chtimes(coveredPath, coveredStat.ModTime(), coveredStat.ModTime()); err != nil {
						t.Fatal(err)
					}
				}
			}
			// A foreign file in the staging folder is not part of the checkpoint: it never
			// reaches OUT.
			restore()
			if err := os.WriteFile(filepath.Join(staging, "notes.txt"), []byte("not a shard"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(filepath.Join(staging, "extra"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(staging, "packer-notes.json"), []byte("{}"), 0o644); err != nil {
				t.Fatal(err)
			}
			stdout := mustRun(t, append(append([]string{}, args...), "--resume")...)
			if !strings.Contains(stdout, "resumed: kept") {
				t.Fatalf("the untouched checkpoint did not resume: %s", stdout)
			}
			sameTree(t, full, out)
			if exists(filepath.Join(out, "extra")) {
				t.Errorf("the staging folder's foreign folder reached OUT")
			}
			checkOnlyOut(t, out)
			// The checkpoint of the same build into another OUT (its staging folder moved) makes
			// the same bytes: nothing in a dataset depends on where it is written.
			restore()
			other := filepath.Join(root, mode.name, "other")
			if err := os.Rename(staging, other+pipeline.StagingSuffix); err != nil {
				t.Fatal(err)
			}
			oargs := append([]string{}, args...)
			oargs[3] = other
			stdout = mustRun(t, append(oargs, "--resume")...)
			if !strings.Contains(stdout, "resumed: kept") {
				t.Fatalf("the moved checkpoint did not resume: %s", stdout)
			}
			sameTree(t, full, other)
			checkOnlyOut(t, other)
			// After a refusal, a build without --resume starts over and writes the same bytes.
			restore()
			flipDataByte(t, kept)
			mustRun(t, args...)
			sameTree(t, full, out)
			checkOnlyOut(t, out)
		})
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data := readFile(t, from)
	if err := os.Remove(to); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
