package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/packer-dev/packer/pipeline"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/storage/s3"
)

// shuffleRecord is one record as a shuffled build must keep it: its bytes, shape, label and
// per-record metadata.
type shuffleRecord struct {
	data  string
	shape string
	label int64
	meta  string
}

// readRecords returns the records of the shards dataset at dir, in order.
func readRecords(t *testing.T, dir string) []shuffleRecord {
	t.Helper()
	d, err := shard.OpenDataset(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var out []shuffleRecord
	for i := int64(0); i < d.Len(); i++ {
		rec, err := d.Record(i)
		if err != nil {
			t.Fatal(err)
		}
		lab, err := d.Label(i)
		if err != nil {
			t.Fatal(err)
		}
		shape, err := d.RecordShape(i)
		if err != nil {
			t.Fatal(err)
		}
		s, j := d.Locate(i)
		r, err := d.Shard(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, shuffleRecord{data: string(rec), shape: fmt.Sprint(shape), label: lab, meta: string(r.RecordMeta(j))})
	}
	return out
}

func recordKey(r shuffleRecord) string {
	return fmt.Sprintf("%d|%s|%s|%x", r.label, r.shape, r.meta, r.data)
}

// samePermutation fails unless b holds the records of a, each as often, and reports whether
// the order differs.
func samePermutation(t *testing.T, a, b []shuffleRecord) bool {
	t.Helper()
	ka, kb := make([]string, len(a)), make([]string, len(b))
	for i := range a {
		ka[i] = recordKey(a[i])
	}
	for i := range b {
		kb[i] = recordKey(b[i])
	}
	moved := !slices.Equal(ka, kb)
	slices.Sort(ka)
	slices.Sort(kb)
	if !slices.Equal(ka, kb) {
		t.Fatalf("the shuffled build holds other records than the unshuffled one (%d vs %d)", len(b), len(a))
	}
	return moved
}

// maxRun is the longest run of one label in recs.
func maxRun(recs []shuffleRecord) int {
	best, run := 0, 0
	for i := range recs {
		if i > 0 && recs[i].label == recs[i-1].label {
			run++
		} else {
			run = 1
		}
		best = max(best, run)
	}
	return best
}

// TestBuildShuffle: packer build --shuffle --seed S writes a permutation of the unshuffled
// build's records (bytes, shape, label and metadata, skipped inputs still listed), exactly the
// one docs/decisions.md specifies (record i is input BuildOrder(N, S)[i]), the same with any
// --workers; another seed gives another order; a class-ordered folder comes out mixed; the
// manifest records the seed and differs from the unshuffled one's in nothing else but the
// files' digests; verify and inspect show it.
func TestBuildShuffle(t *testing.T) {
	root := t.TempDir()
	src := partsCorpus(t, root)
	// A class-ordered folder: 4 classes of 24 images each.
	for c, cls := range []string{"a", "b", "c", "d"} {
		for i := 0; i < 24; i++ {
			p := filepath.Join(root, "classes", cls, fmt.Sprintf("%02d.png", i))
			os.MkdirAll(filepath.Dir(p), 0o755)
			writePNG(t, p, 4, 3, c*31+i)
		}
	}
	out := func(name string) string { return filepath.Join(root, "out", name) }
	cases := []struct {
		name, src string
		args      []string
		exact     bool // every input yields one record and none is skipped: record i is input order[i]
	}{
		{"idx", src["idx"], []string{"--layout", "chw"}, true},
		{"cifar", src["cifar"], []string{"--from", "cifar10"}, true},
		{"classes", filepath.Join(root, "classes"), nil, true},
		{"folder-varsize", src["folder"], []string{"--resize", "8"}, false},
		{"list", src["list"], []string{"--resize", "6", "--crop", "6", "--classes", "x,y,z"}, false},
		{"frames-clips", src["frames"], []string{"--from", "frames", "--clip-len", "2", "--crop", "8"}, false},
	}
	for _, c := range cases {
		args := append(append([]string{}, c.args...), "--shard-size", "700")
		plain := out(c.name + "-plain")
		mustRun(t, append([]string{"build", c.src, "-o", plain, "--workers", "2"}, args...)...)
		s5 := out(c.name + "-s5")
		mustRun(t, append([]string{"build", c.src, "-o", s5, "--workers", "2", "--shuffle", "--seed", "5"}, args...)...)
		s5w := out(c.name + "-s5w")
		mustRun(t, append([]string{"build", c.src, "-o", s5w, "--workers", "1", "--shuffle", "--seed", "5"}, args...)...)
		sameTree(t, s5, s5w)
		s6 := out(c.name + "-s6")
		mustRun(t, append([]string{"build", c.src, "-o", s6, "--workers", "3", "--shuffle", "--seed", "6"}, args...)...)

		a, b5, b6 := readRecords(t, plain), readRecords(t, s5), readRecords(t, s6)
		if !samePermutation(t, a, b5) {
			t.Errorf("%s: --shuffle --seed 5 left the records in source order", c.name)
		}
		samePermutation(t, a, b6)
		if slices.EqualFunc(b5, b6, func(x, y shuffleRecord) bool { return x == y }) {
			t.Errorf("%s: seeds 5 and 6 gave the same order", c.name)
		}
		if c.exact {
			order := pipeline.BuildOrder(int64(len(a)), 5)
			for i, k := range order {
				if b5[i] != a[k] {
					t.Fatalf("%s: record %d of the shuffled build is not input %d (BuildOrder)", c.name, i, k)
				}
			}
		}
		mp, err := shard.ReadManifest(plain)
		if err != nil {
			t.Fatal(err)
		}
		m5, err := shard.ReadManifest(s5)
		if err != nil {
			t.Fatal(err)
		}
		if seed, ok, err := m5.BuildShuffle(); err != nil || !ok || seed != 5 {
			t.Errorf("%s: manifest source %v: BuildShuffle = %d, %v, %v; want seed 5", c.name, m5.Source, seed, ok, err)
		}
		if _, ok, _ := mp.BuildShuffle(); ok {
			t.Errorf("%s: the unshuffled build's manifest records a shuffle: %v", c.name, mp.Source)
		}
		// Apart from source.shuffle, the files and the order of the skipped inputs (the build
		// order), the manifests agree: the same skipped inputs and reasons, class counts, inputs.
		delete(m5.Source, pipeline.ShuffleSpec)
		m5.Files, mp.Files = nil, nil
		bySkipped := func(x, y shard.Skipped) int { return strings.Compare(x.Input, y.Input) }
		slices.SortFunc(m5.Skipped, bySkipped)
		slices.SortFunc(mp.Skipped, bySkipped)
		j5, _ := m5.Marshal()
		jp, _ := mp.Marshal()
		if !bytes.Equal(j5, jp) {
			t.Errorf("%s: manifests differ beyond the shuffle and the files:\n%s\n%s", c.name, jp, j5)
		}
		if v := mustRun(t, "verify", s5); !strings.Contains(v, "--shuffle --seed 5") {
			t.Errorf("%s: verify does not show the order: %s", c.name, v)
		}
		if v := mustRun(t, "inspect", s5); !strings.Contains(v, "shuffled at build time (--shuffle --seed 5)") {
			t.Errorf("%s: inspect does not show the order:\n%s", c.name, v)
		}
		if v := mustRun(t, "inspect", plain); !strings.Contains(v, "source order") {
			t.Errorf("%s: inspect of an unshuffled build:\n%s", c.name, v)
		}
		if c.name == "classes" {
			if r := maxRun(a); r != 24 {
				t.Fatalf("the class-ordered build has runs of %d, want 24", r)
			}
			// A uniform permutation of 4 × 24 labels has a longest run of about 4; 8 or more
			// happens with probability under 1%, and the seeds are fixed.
			if r5, r6 := maxRun(b5), maxRun(b6); r5 >= 8 || r6 >= 8 {
				t.Errorf("the shuffled class-ordered builds have runs of one class of %d and %d records", r5, r6)
			}
		}
	}
	// The largest seed is recorded whole (JSON numbers beyond 2^53 lose digits as floats).
	big := out("idx-big")
	mustRun(t, "build", src["idx"], "-o", big, "--shuffle", "--seed", "18446744073709551615")
	m, err := shard.ReadManifest(big)
	if err != nil {
		t.Fatal(err)
	}
	if seed, _, err := m.BuildShuffle(); err != nil || seed != 1<<64-1 {
		t.Fatalf("seed 2^64-1 recorded as %v (%v)", m.Source["shuffle"], err)
	}
	mustRun(t, "verify", big)
}

// TestBuildShuffleParts: a shuffled build in parts (from the source, or from a plan) merges
// into the one-machine shuffled build with the same seed, byte for byte, in every output
// format; parts of two seeds do not merge.
func TestBuildShuffleParts(t *testing.T) {
	root := t.TempDir()
	src := partsCorpus(t, root)
	cases := []struct {
		name, src string
		args      []string
		format    string
	}{
		{"folder-crop", src["folder"], []string{"--resize", "8", "--crop", "6"}, "npy"},
		{"folder-varsize", src["folder"], []string{"--resize", "8"}, "shards"},
		{"cifar", src["cifar"], []string{"--from", "cifar10"}, "hdf5"},
		{"frames-clips", src["frames"], []string{"--from", "frames", "--clip-len", "2", "--crop", "8"}, "shards"},
		{"list", src["list"], []string{"--resize", "6", "--crop", "6", "--classes", "x,y,z"}, "shards"},
		{"video-clips", src["video"], []string{"--from", "video", "--clip-len", "3", "--clip-stride", "2", "--resize", "12", "--crop", "10"}, "shards"},
	}
	for _, c := range cases {
		args := append(append([]string{}, c.args...), "--format", c.format, "--shard-size", "600", "--workers", "2", "--shuffle", "--seed", "11")
		full := filepath.Join(root, "out", c.name, "full")
		mustRun(t, append([]string{"build", c.src, "-o", full}, args...)...)
		var parts []string
		for i := 0; i < 3; i++ {
			p := filepath.Join(root, "out", c.name, fmt.Sprintf("p%d", i))
			mustRun(t, append([]string{"build", c.src, "-o", p, "--part", fmt.Sprintf("%d/3", i)}, args...)...)
			parts = append(parts, p)
		}
		merged := filepath.Join(root, "out", c.name, "merged")
		mustRun(t, append([]string{"merge", "-o", merged}, parts...)...)
		sameTree(t, full, merged)
		if c.name == "folder-varsize" || c.name == "cifar" {
			// Parts built from a plan made with --shuffle --seed (the listing read once) merge
			// into the same bytes: part 0 takes the order from the plan, part 1 repeats it.
			plan := filepath.Join(root, "out", c.name, "plan.jsonl")
			pargs := []string{"plan", c.src, "-o", plan, "--shuffle", "--seed", "11"}
			if c.name == "cifar" {
				pargs = append(pargs, "--from", "cifar10")
			}
			mustRun(t, pargs...)
			var pparts []string
			for i := 0; i < 2; i++ {
				p := filepath.Join(root, "out", c.name, fmt.Sprintf("plan-p%d", i))
				bargs := slices.DeleteFunc(slices.Clone(args), func(a string) bool { return a == "cifar10" || a == "--from" })
				if i == 0 {
					bargs = bargs[:len(bargs)-3] // without --shuffle --seed 11
				}
				mustRun(t, append([]string{"build", plan, "-o", p, "--part", fmt.Sprintf("%d/2", i)}, bargs...)...)
				pparts = append(pparts, p)
			}
			pmerged := filepath.Join(root, "out", c.name, "plan-merged")
			mustRun(t, append([]string{"merge", "-o", pmerged}, pparts...)...)
			sameTree(t, full, pmerged)
		}
		if c.name == "folder-varsize" {
			// Part 1 of another seed does not merge with parts 0 and 2 of seed 11.
			other := filepath.Join(root, "out", c.name, "p1-seed12")
			oargs := slices.Clone(args)
			oargs[len(oargs)-1] = "12"
			mustRun(t, append([]string{"build", c.src, "-o", other, "--part", "1/3"}, oargs...)...)
			if _, errs, code := run(t, "merge", "-o", filepath.Join(root, "out", c.name, "bad"), parts[0], other, parts[2]); code == 0 {
				t.Errorf("parts of seeds 11 and 12 merged")
			} else if !strings.Contains(errs, "p1-seed12") {
				t.Errorf("the refused merge does not name the odd part:\n%s", errs)
			}
		}
	}
}

// TestBuildShuffleRefused: --shuffle is refused (exit 2, naming the kind and why) for the
// sources that read their inputs' bytes from a stream as they list them, whether --from names
// the kind or detection finds it; --seed without --shuffle is refused; nothing is written.
func TestBuildShuffleRefused(t *testing.T) {
	root := t.TempDir()
	src := partsCorpus(t, root)
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"webdataset-detected", []string{src["wds"], "--shuffle", "--classes", "x,y,z"}, []string{"--from webdataset", "tar streams"}},
		{"webdataset-from", []string{src["wds"], "--from", "webdataset", "--shuffle", "--seed", "3"}, []string{"--from webdataset", "tar streams"}},
		{"tfrecord-from", []string{filepath.Join(root, "none.tfrecord"), "--from", "tfrecord", "--shuffle"}, []string{"--from tfrecord", "TFRecord stream"}},
		{"parquet-from", []string{filepath.Join(root, "none.parquet"), "--from", "parquet", "--shuffle"}, []string{"--from parquet", "page by page"}},
		{"seed-alone", []string{src["folder"], "--seed", "3"}, []string{"--seed is for --shuffle"}},
	} {
		o := filepath.Join(root, "out", c.name)
		_, errs, code := run(t, append(append([]string{"build"}, c.args...), "-o", o)...)
		if code != 2 {
			t.Errorf("%s: exit %d, want 2:\n%s", c.name, code, errs)
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%s: the error does not say %q:\n%s", c.name, w, errs)
			}
		}
		if exists(o) || exists(o+pipeline.StagingSuffix) {
			t.Errorf("%s: a refused build wrote %s", c.name, o)
		}
	}
}

// TestBuildShuffleResume: a shuffled build killed (SIGKILL, at the rename of a shard) and resumed with
// --resume gives the bytes of an uninterrupted shuffled build with the same seed, and went on
// from a checkpoint; a resume with another seed, or without --shuffle, does not take the
// checkpoint over.
func TestBuildShuffleResume(t *testing.T) {
	strace := needStrace(t)
	bin := buildBinary(t)
	renames := syscallSet(t, strace, "rename", "renameat", "renameat2")
	root := t.TempDir()
	src := partsCorpus(t, root)
	cases := []struct {
		name, src string
		args      []string
	}{
		{"folder-varsize", src["folder"], []string{"--resize", "8"}},
		{"cifar", src["cifar"], []string{"--from", "cifar10"}},
		{"frames-part", src["frames"], []string{"--from", "frames", "--clip-len", "2", "--crop", "8", "--part", "1/2"}},
	}
	for _, c := range cases {
		args := append(append([]string{}, c.args...), "--shard-size", "500", "--workers", "2", "--checkpoint-every", "0", "--shuffle", "--seed", "9")
		full := filepath.Join(root, "out", c.name, "full")
		mustRun(t, append([]string{"build", c.src, "-o", full}, args...)...)
		out := filepath.Join(root, "out", c.name, "out")
		bargs := append([]string{"build", c.src, "-o", out}, args...)
		// Killed at the commit of its third shard: the checkpoint holds the first two.
		killedAtShard(t, strace, bin, renames, out, 2, bargs...)
		if !exists(filepath.Join(out+pipeline.StagingSuffix, pipeline.JournalName)) {
			t.Fatalf("%s: no checkpoint after the kill", c.name)
		}
		// Another seed, or no shuffle, is another build: the checkpoint is not taken over.
		other := slices.Clone(bargs)
		other[len(other)-1] = "10"
		for _, a := range [][]string{other, bargs[:len(bargs)-3]} {
			if _, errs, code := run(t, append(slices.Clone(a), "--resume")...); code == 0 || !strings.Contains(errs, "source: was") {
				t.Errorf("%s: resume with %v: exit %d, want a refusal naming the source spec:\n%s", c.name, a[len(a)-3:], code, errs)
			}
		}
		stdout := mustRun(t, append(bargs, "--resume")...)
		if !strings.Contains(stdout, "resumed: kept") {
			t.Errorf("%s: the resumed build did not go on from its checkpoint:\n%s", c.name, stdout)
		}
		sameTree(t, full, out)
		checkOnlyOut(t, out)
	}
}

// TestS3BuildShuffle: a shuffled build to a bucket writes exactly the objects of the same
// shuffled build to a local folder, and verify of the bucket shows the order.
func TestS3BuildShuffle(t *testing.T) {
	srv := s3Setup(t, "data")
	local := filepath.Join(t.TempDir(), "local")
	args := []string{"build", fmnist, "--split", "test", "--shard-size", "2MiB", "--shuffle", "--seed", "3"}
	mustRun(t, append(args, "-o", local)...)
	mustRun(t, append(args, "-o", "s3://data/fm/shuf")...)
	want := localFiles(t, local)
	if got := objects(t, srv, s3.URL{Bucket: "data", Prefix: "fm/shuf"}); !mapsEqualBytes(got, want) {
		t.Errorf("the bucket's objects (%d) differ from the local shuffled build's files (%d)", len(got), len(want))
	}
	if v := mustRun(t, "verify", "s3://data/fm/shuf"); !strings.Contains(v, "--shuffle --seed 3") {
		t.Errorf("verify of the bucket: %q", v)
	}
}

// TestPlanShuffle: a plan records --shuffle --seed; a part that asks for another record order
// than its plan records (another seed, no shuffle, or shuffle from a plan without it) is refused
// (exit 2, naming the flag and the plan) and writes nothing; a plan written before the order was
// recorded leaves it to each part; plan refuses --shuffle where build does.
func TestPlanShuffle(t *testing.T) {
	root := t.TempDir()
	src := partsCorpus(t, root)
	plain := filepath.Join(root, "plain.plan")
	seeded := filepath.Join(root, "seeded.plan")
	mustRun(t, "plan", src["folder"], "-o", plain)
	mustRun(t, "plan", src["folder"], "-o", seeded, "--shuffle", "--seed", "11")
	for _, c := range []struct {
		name, plan string
		args       []string
		want       string
	}{
		{"other-seed", seeded, []string{"--shuffle", "--seed", "12"}, "--seed"},
		{"unshuffled", seeded, []string{"--shuffle=false"}, "--shuffle"},
		{"shuffle-unplanned", plain, []string{"--shuffle", "--seed", "11"}, "--shuffle"},
	} {
		o := filepath.Join(root, "out", c.name)
		_, errs, code := run(t, append([]string{"build", c.plan, "-o", o, "--part", "0/2", "--resize", "8"}, c.args...)...)
		if code != 2 {
			t.Errorf("%s: exit %d, want 2:\n%s", c.name, code, errs)
		}
		if !strings.Contains(errs, c.want) || !strings.Contains(errs, c.plan) {
			t.Errorf("%s: the error does not name %s and the plan:\n%s", c.name, c.want, errs)
		}
		if exists(o) || exists(o+pipeline.StagingSuffix) {
			t.Errorf("%s: a refused build wrote %s", c.name, o)
		}
	}
	// The plan's record order reaches a part that gives no order flags.
	part := filepath.Join(root, "out", "seeded-p0")
	mustRun(t, "build", seeded, "-o", part, "--part", "0/2", "--resize", "8")
	m, err := shard.ReadManifest(part)
	if err != nil {
		t.Fatal(err)
	}
	if seed, ok, err := m.BuildShuffle(); err != nil || !ok || seed != 11 {
		t.Errorf("a part built from the seeded plan records shuffle %v seed %d (%v), want seed 11", ok, seed, err)
	}

	// A plan of an earlier version records no order: each part gives its own, as before.
	data, err := os.ReadFile(seeded)
	if err != nil {
		t.Fatal(err)
	}
	head, rest, _ := strings.Cut(string(data), "\n")
	head2 := strings.NewReplacer(`"seed":"11",`, "", `"shuffle":"true",`, "").Replace(head)
	var h struct{ Options map[string]string }
	if err := json.Unmarshal([]byte(head2), &h); err != nil || len(head2) != len(head)-len(`"seed":"11","shuffle":"true",`) {
		t.Fatalf("the plan's header, less its order: %v\n%s", err, head2)
	}
	old := filepath.Join(root, "old.plan")
	if err := os.WriteFile(old, []byte(head2+"\n"+rest), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "build", old, "-o", filepath.Join(root, "out", "old-p0"), "--part", "0/2", "--resize", "8", "--shuffle", "--seed", "5")

	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"webdataset", []string{src["wds"], "--shuffle", "--classes", "x,y,z"}, "--from webdataset"},
		{"seed-alone", []string{src["folder"], "--seed", "3"}, "--seed is for --shuffle"},
	} {
		p := filepath.Join(root, c.name+".plan")
		_, errs, code := run(t, append([]string{"plan", "-o", p}, c.args...)...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("plan %s: exit %d, want 2 saying %q:\n%s", c.name, code, c.want, errs)
		}
		if exists(p) {
			t.Errorf("plan %s: a refused plan was written", c.name)
		}
	}
}
