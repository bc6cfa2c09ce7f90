package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source/cifar"
)

// TestBenchRefusesDamagedRecords: bench reads the way training does, so a flipped byte in a
// record must fail it (naming the shard and records) unless the check is turned off.
func TestBenchRefusesDamagedRecords(t *testing.T) {
	tmp := t.TempDir()
	src := filepath.Join(tmp, "data.bin")
	if err := cifar.WriteBinary(src, "cifar10", cifar.TestRecords("cifar10", 300, 3)); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(tmp, "out")
	mustRun(t, "build", src, "--from", "cifar10", "-o", out, "--shard-size", "300KiB")
	mustRun(t, "bench", "--repeat", "1", out)
	m, err := shard.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(out, m.Files[1].Path)
	// record 3 of the second shard: data starts at the first 4096-byte boundary after the
	// header, records are 3072 bytes
	flip(t, path, 4096+3*3072+17, 0x10)
	stdout, stderr, code := run(t, "bench", "--repeat", "1", out)
	if code == 0 {
		t.Fatalf("bench of a dataset with a flipped record byte exited 0:\n%s%s", stdout, stderr)
	}
	if !strings.Contains(stderr, m.Files[1].Path) || !strings.Contains(stderr, "CRC") || !strings.Contains(stderr, "record") {
		t.Fatalf("bench error does not name the shard and the CRC mismatch:\n%s", stderr)
	}
	t.Logf("bench error: %s", stderr)
	stdout = mustRun(t, "bench", "--repeat", "1", "--no-crc", out)
	if !strings.Contains(stdout, "CRC not checked") {
		t.Fatalf("bench --no-crc does not say the CRC was not checked:\n%s", stdout)
	}
}
