package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source/cifar"
)

// TestMixPlan: mix-plan over two built datasets prints the realised proportions and epoch
// length (a batch of 50 at 0.7/0.3 holds exactly 35 and 15: the deviation is below 1 for two
// sources), and refuses bad weights as usage errors.
func TestMixPlan(t *testing.T) {
	tmp := t.TempDir()
	var dirs []string
	for i, n := range []int{70, 30} {
		path := filepath.Join(tmp, "data.bin")
		if err := cifar.WriteBinary(path, "cifar10", cifar.TestRecords("cifar10", n, uint64(i+1))); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(tmp, []string{"a", "b"}[i])
		mustRun(t, "build", path, "--from", "cifar10", "-o", out)
		dirs = append(dirs, out)
	}
	text := mustRun(t, "mix-plan", dirs[0], dirs[1], "--weights", "0.7,0.3", "--epoch-size", "1000", "--ranks", "4", "--batch-size", "50")
	for _, want := range []string{"epoch 0: 1000 records (with replacement, shuffled), seed 0", "4 ranks, batches of 50: 5 batches per rank",
		"0.70000          700   0.70000   10.000  35-35", "0.30000          300   0.30000   10.000  15-15"} {
		if !strings.Contains(text, want) {
			t.Errorf("mix-plan output lacks %q:\n%s", want, text)
		}
	}
	var s shard.MixSummary
	if err := json.Unmarshal([]byte(mustRun(t, "mix-plan", dirs[0], dirs[1], "--weights", "1,1", "--no-replacement", "--json")), &s); err != nil {
		t.Fatal(err)
	}
	if s.EpochSize != 60 || s.Sources[1].Drawn != 30 || s.Sources[1].Passes != 1 || s.Replacement {
		t.Errorf("1:1 without replacement of 70 and 30 records: %+v", s)
	}
	for _, c := range [][]string{{"--weights", "1"}, {"--weights", "1,x"}, {"--weights", "1,0"}, {"--weights", "1,1", "--no-replacement", "--epoch-size", "61"}} {
		if _, errs, code := run(t, append([]string{"mix-plan", dirs[0], dirs[1]}, c...)...); code != exitUsage {
			t.Errorf("mix-plan %v: exit %d, want %d (%s)", c, code, exitUsage, errs)
		}
	}
}
