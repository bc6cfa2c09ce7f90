package pipeline

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/packer-dev/packer/shard"
)

// TestLinkShardCopiesWhereNoLink: a link the file system refuses (another file system, EXDEV;
// no hard links there or not for this file, EPERM, ENOTSUP, EMLINK) falls back to a copy of
// the shard, checked against its manifest entry, and says why; a copy that is not the entry's
// bytes is refused, naming the part; any other link error fails the merge.
func TestLinkShardCopiesWhereNoLink(t *testing.T) {
	part, out := t.TempDir(), t.TempDir()
	src := filepath.Join(part, "shard-00000.pks")
	data := []byte("the shard's bytes")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	before, err := os.Lstat(src)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	fe := shard.FileEntry{Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
	var errno syscall.Errno
	linkFile = func(oldname, newname string) error {
		return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: errno}
	}
	t.Cleanup(func() { linkFile = os.Link })
	for i, e := range []syscall.Errno{syscall.EXDEV, syscall.EPERM, syscall.ENOTSUP, syscall.EMLINK} {
		errno = e
		fe.Path = fmt.Sprintf("shard-%05d.pks", i+1)
		why, err := linkShard(src, before, part, fe, out)
		if err != nil || !errors.Is(why, e) {
			t.Errorf("link refused with %v: %v (why: %v); want a copy, saying why", e, err, why)
			continue
		}
		dst := filepath.Join(out, fe.Path)
		got, err := os.ReadFile(dst)
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("link refused with %v: the copy %s holds %q (%v)", e, dst, got, err)
		}
		if note := copiedNote(part, 1, 3, why); !strings.Contains(note, part) || !strings.Contains(note, e.Error()) || !strings.Contains(note, "copied") {
			t.Errorf("the note of a copy: %q; want the part, that its shards were copied, and why", note)
		}
	}
	// The copy must be the entry's bytes.
	errno = syscall.EPERM
	fe.Path = "shard-00009.pks"
	bad := fe
	bad.SHA256 = strings.Repeat("0", 64)
	var pe *PartError
	if _, err := linkShard(src, before, part, bad, out); !errors.As(err, &pe) || pe.Dir != part {
		t.Errorf("a copy of other bytes than the entry's: %v; want a PartError naming the part", err)
	}
	// Other link errors fail.
	for _, e := range []syscall.Errno{syscall.EIO, syscall.EEXIST, syscall.EACCES} {
		errno = e
		fe.Path = "shard-00008.pks"
		if why, err := linkShard(src, before, part, fe, out); !errors.Is(err, e) || why != nil {
			t.Errorf("link failed with %v: %v (why: %v); want that error", e, err, why)
		}
		if _, err := os.Stat(filepath.Join(out, fe.Path)); !os.IsNotExist(err) {
			t.Errorf("link failed with %v: %s made anyway (%v)", e, fe.Path, err)
		}
	}
}
