package pipeline

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packer-dev/packer/shard"
)

// TestCheckMountRealMountPoint: /dev/shm is a mount point on Linux (tmpfs over devtmpfs), so
// checkMount must refuse it as OUT without anyone mounting anything.
func TestCheckMountRealMountPoint(t *testing.T) {
	st, err1 := os.Stat("/dev/shm")
	pst, err2 := os.Stat("/dev")
	if err1 != nil || err2 != nil {
		t.Skip("no /dev/shm here")
	}
	d, ok1 := deviceOf(st)
	pd, ok2 := deviceOf(pst)
	if !ok1 || !ok2 || d == pd {
		t.Skip("/dev/shm is not a separate filesystem here")
	}
	p, err := newOutPaths("/dev/shm")
	if err != nil {
		t.Fatal(err)
	}
	if err := checkMount(p); !errors.Is(err, ErrOutputMount) || !strings.Contains(err.Error(), "subdirectory") {
		t.Fatalf("checkMount(/dev/shm) = %v, want ErrOutputMount pointing at a subdirectory", err)
	}
	// A folder on the same filesystem as its parent passes.
	p, err = newOutPaths(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(p.out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := checkMount(p); err != nil {
		t.Fatalf("checkMount of a plain folder: %v", err)
	}
}

func mkDataset(t *testing.T, dir, tag string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{shard.ManifestName, "shard-00000.pks"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(tag+f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readTag(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, shard.ManifestName))
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(b), shard.ManifestName)
}

// TestRecoverOut covers every state an interrupted commit can leave beside OUT: the old OUT
// set aside is put back when OUT is missing and removed only when OUT holds a dataset; a
// leftover staging folder is discarded; OUT.packer-old beside an OUT that holds no dataset is
// refused, not deleted. Discarded folders wait in OUT.packer-trash, intact, until emptyTrash.
func TestRecoverOut(t *testing.T) {
	cases := []struct {
		name                string
		out, staging, old   string // tags of datasets present ("" absent, "-" a folder without manifest)
		wantOut             string
		wantErr             bool
		wantOld, wantStaged bool
		wantTrash           []string // tags of the datasets discarded into the trash
	}{
		{name: "clean"},
		{name: "killed before any rename", out: "old", staging: "new", wantOut: "old", wantTrash: []string{"new"}},
		{name: "killed between the two renames", staging: "new", old: "old", wantOut: "old", wantTrash: []string{"new"}},
		{name: "killed before removing the old", out: "new", old: "old", wantOut: "new", wantTrash: []string{"old"}},
		{name: "killed after the exchange", out: "new", staging: "old", wantOut: "new", wantTrash: []string{"old"}},
		{name: "killed removing the old", out: "new", old: "-", wantOut: "new"},
		{name: "old beside a foreign OUT", out: "-", old: "old", wantOut: "-", wantErr: true, wantOld: true},
		{name: "first build killed", staging: "-"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := newOutPaths(filepath.Join(t.TempDir(), "out"))
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range []struct{ tag, dir string }{{c.out, p.out}, {c.staging, p.staging}, {c.old, p.old}} {
				switch d.tag {
				case "":
				case "-":
					if err := os.MkdirAll(filepath.Join(d.dir, "sub"), 0o755); err != nil {
						t.Fatal(err)
					}
				default:
					mkDataset(t, d.dir, d.tag)
				}
			}
			err = recoverOut(p, false)
			if (err != nil) != c.wantErr {
				t.Fatalf("recoverOut: %v, want error %v", err, c.wantErr)
			}
			switch {
			case c.wantOut == "":
				if exists(p.out) {
					t.Fatalf("OUT appeared")
				}
			case c.wantOut == "-":
				if !exists(p.out) || hasManifest(p.out) {
					t.Fatalf("the foreign OUT changed")
				}
			default:
				if got := readTag(t, p.out); got != c.wantOut {
					t.Fatalf("OUT holds %q, want %q", got, c.wantOut)
				}
			}
			if exists(p.old) != c.wantOld {
				t.Fatalf("OUT.packer-old exists: %v, want %v", exists(p.old), c.wantOld)
			}
			if exists(p.staging) != c.wantStaged {
				t.Fatalf("staging exists: %v, want %v", exists(p.staging), c.wantStaged)
			}
			ents, _ := os.ReadDir(p.trash)
			var trashed []string
			for _, e := range ents {
				if tag := readTag(t, filepath.Join(p.trash, e.Name())); tag != "" {
					trashed = append(trashed, tag)
				}
			}
			if strings.Join(trashed, ",") != strings.Join(c.wantTrash, ",") {
				t.Fatalf("trash holds datasets %v, want %v", trashed, c.wantTrash)
			}
			if err := emptyTrash(p); err != nil || exists(p.trash) {
				t.Fatalf("emptyTrash: %v", err)
			}
		})
	}
}
