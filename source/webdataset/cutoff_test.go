package webdataset

import (
	"archive/tar"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packer-dev/packer/internal/testfix"
	"github.com/packer-dev/packer/transforms"
)

// TestCutOffAtBlockBoundary: a plain .tar cut off between two members (a copy or download
// stopped at a multiple of 512 bytes, as copies in chunks stop) has no end-of-archive blocks;
// archive/tar (like Python's tarfile) reads it as a complete archive, so the samples past the
// cut vanished without a word. The shard is reported from where it ends; a shard that is empty
// is reported too.
func TestCutOffAtBlockBoundary(t *testing.T) {
	good, err := os.ReadFile(testfix.Corpus("baseline-420.jpg"))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	var cuts []int // the archive's length after each member
	for _, k := range []string{"a", "b", "c"} {
		for _, m := range []struct {
			name string
			data []byte
		}{{k + ".jpg", good}, {k + ".cls", []byte("1")}} {
			if err := tw.WriteHeader(&tar.Header{Name: m.name, Mode: 0o644, Size: int64(len(m.data)), Typeflag: tar.TypeReg}); err != nil {
				t.Fatal(err)
			}
			tw.Write(m.data)
			tw.Flush()
			cuts = append(cuts, b.Len())
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	whole := b.Bytes()

	dir := t.TempDir()
	write := func(name string, data []byte) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("1.tar", whole)           // complete: a, b, c
	write("2.tar", whole[:cuts[3]]) // cut after b.cls: a read; b (read at the cut) and c reported
	write("3.tar", whole[:cuts[2]]) // cut after b.jpg: a read; b and c reported
	write("4.tar", nil)             // empty
	src, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, labels, metas, skipped := records(t, src, transforms.Spec{CropW: 8, CropH: 8})
	var keys []string
	for _, m := range metas {
		keys = append(keys, m[strings.Index(m, `"key":"`)+7:strings.Index(m, `","shard"`)]+"@"+m[strings.Index(m, `"shard":"`)+9:len(m)-2])
	}
	// The sample read when the archive ends may be incomplete: it goes with the rest.
	if got := strings.Join(keys, " "); got != "a@1.tar b@1.tar c@1.tar a@2.tar a@3.tar" || len(labels) != 5 {
		t.Errorf("packed %s, want a, b and c of 1.tar, a of 2.tar and of 3.tar", got)
	}
	want := map[string]string{
		"2.tar (after member 4)": "no end-of-archive blocks",
		"3.tar (after member 3)": "no end-of-archive blocks",
		"4.tar (after member 0)": "no end-of-archive blocks",
	}
	for in, r := range want {
		if s := skipped[in]; !strings.Contains(s, ErrTruncated.Error()) || !strings.Contains(s, r) {
			t.Errorf("skipped[%s] = %q, want %q", in, s, r)
		}
	}
	if len(skipped) != len(want) {
		t.Errorf("skipped %v, want %d", fmt.Sprint(skipped), len(want))
	}
}
