package pipeline

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/packer-dev/packer/shard"
)

// TestLinkShardRefusesReplaced: a part's shard replaced (renamed over, the same size) between
// the merge's first look at it (before its check) and its link is refused, naming the part (the
// staging folder it was linked into is then discarded with the failed merge); the file looked
// at is linked.
func TestLinkShardRefusesReplaced(t *testing.T) {
	part, out := t.TempDir(), t.TempDir()
	src := filepath.Join(part, "shard-00000.pks")
	if err := os.WriteFile(src, []byte("checked!"), 0o644); err != nil {
		t.Fatal(err)
	}
	before, err := os.Lstat(src)
	if err != nil {
		t.Fatal(err)
	}
	fe := shard.FileEntry{Path: "shard-00003.pks", Size: 8}
	if _, err := linkShard(src, before, part, fe, out); err != nil {
		t.Fatalf("the file looked at: %v", err)
	}
	// Replaced by another file of the same size after the look.
	other := filepath.Join(part, "other")
	if err := os.WriteFile(other, []byte("swapped!"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, src); err != nil {
		t.Fatal(err)
	}
	fe.Path = "shard-00004.pks"
	_, err = linkShard(src, before, part, fe, out)
	var pe *PartError
	if !errors.As(err, &pe) || pe.Dir != part {
		t.Fatalf("a shard replaced after it was looked at: %v; want a PartError naming the part", err)
	}
}
