package main

import (
	"os"
	"regexp"
	"testing"

	"github.com/packer-dev/packer/pipeline"
)

// TestVersionOneSource: the command's version (pipeline.Version, what `packer --version`
// prints and manifests record), the wheel's (python/pyproject.toml, from which
// scripts/make_wheel.py writes the wheel's metadata), CHANGELOG.md's latest release and the
// version of the reader's module (shard/go.mod) that go.mod requires, the tag shard/vX.Y.Z of
// the release, agree.
func TestVersionOneSource(t *testing.T) {
	py, err := os.ReadFile("../../python/pyproject.toml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^version = "([^"]+)"`).FindSubmatch(py)
	if m == nil || string(m[1]) != pipeline.Version {
		t.Fatalf("python/pyproject.toml version %q, pipeline.Version %q", m, pipeline.Version)
	}
	cl, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	r := regexp.MustCompile(`(?m)^## (\d+\.\d+\.\d+)`).FindSubmatch(cl)
	if r == nil || string(r[1]) != pipeline.Version {
		t.Fatalf("CHANGELOG.md's latest release is %q, pipeline.Version %q", r, pipeline.Version)
	}
	gm, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	req := regexp.MustCompile(`(?m)^\s*github\.com/packer-dev/packer/shard (v\S+)`).FindSubmatch(gm)
	if req == nil || string(req[1]) != "v"+pipeline.Version {
		t.Fatalf("go.mod requires the reader's module github.com/packer-dev/packer/shard at %q, want v%s (pipeline.Version)", req, pipeline.Version)
	}
}
