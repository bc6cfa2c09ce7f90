package main

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/packer-dev/packer/storage/s3"
	"github.com/packer-dev/packer/storage/s3/s3test"
)

// inPlaceArgs: 10 chunks of 1000 inputs (784 KB each), one shard each.
var inPlaceArgs = []string{"--split", "test", "--cut-inputs", "1000", "--shard-size", "64MB"}

func buildInPlace(t *testing.T, out, part string, extra ...string) (string, string, int) {
	t.Helper()
	return run(t, append(append([]string{"build", fmnist, "-o", out, "--part", part, "--in-place"}, inPlaceArgs...), extra...)...)
}

// TestS3InPlaceMerge: three parts built in place into the dataset's prefix merge by writing the
// manifest only (no copy, no GET of record data), byte-identical to the one-machine build; a
// merge with a part missing publishes nothing; a part of another N or other options is refused
// before it writes anything; a part built again without --force is refused, with --force it replaces only its
// own objects; a second merge finds the dataset and is refused.
func TestS3InPlaceMerge(t *testing.T) {
	srv := s3Setup(t, "ipm")
	watch := &copyWatch{}
	px := s3test.StartFaultProxy(t, srv, watch.plan)
	t.Setenv("AWS_ENDPOINT_URL", px.Endpoint)
	local := filepath.Join(t.TempDir(), "local")
	mustRun(t, append([]string{"build", fmnist, "-o", local}, inPlaceArgs...)...)
	want := localFiles(t, local)
	out, at := "s3://ipm/ds", s3.URL{Bucket: "ipm", Prefix: "ds"}
	mustRun(t, append([]string{"build", fmnist, "-o", out, "--part", "0/3", "--in-place"}, inPlaceArgs...)...)
	mustRun(t, append([]string{"build", fmnist, "-o", out, "--part", "2/3", "--in-place"}, inPlaceArgs...)...)

	// A part missing: refused, nothing published.
	_, errs, code := run(t, "merge", "--in-place", "-o", out)
	if code == 0 {
		t.Fatalf("merge with part 1 missing: exit 0\n%s", errs)
	}
	if _, ok := objects(t, srv, at)["manifest.json"]; ok {
		t.Fatalf("the refused merge published a manifest")
	}
	// A part of another N: refused before it writes anything, naming both.
	before := objects(t, srv, at)
	_, errs, code = buildInPlace(t, out, "1/4")
	if code != exitUsage || !strings.Contains(errs, "part count") {
		t.Errorf("a part of another N: exit %d, want %d naming the part count:\n%s", code, exitUsage, errs)
	}
	if got := objects(t, srv, at); !mapsEqualBytes(got, before) {
		t.Errorf("the refused part changed the prefix: %v", slices.Sorted(maps.Keys(got)))
	}
	// A part of other options: refused before it writes anything too.
	_, errs, code = buildInPlace(t, out, "1/3", "--max-errors", "3")
	if code != exitUsage || !strings.Contains(errs, "merge options") {
		t.Errorf("a part of other options: exit %d, want %d naming them:\n%s", code, exitUsage, errs)
	}
	if got := objects(t, srv, at); !mapsEqualBytes(got, before) {
		t.Errorf("the refused part changed the prefix: %v", slices.Sorted(maps.Keys(got)))
	}
	mustRun(t, append([]string{"build", fmnist, "-o", out, "--part", "1/3", "--in-place"}, inPlaceArgs...)...)
	// Part 1 again: refused without --force; with it, only its own objects are replaced.
	if _, errs, code = buildInPlace(t, out, "1/3"); code != exitUsage || !strings.Contains(errs, "--force") {
		t.Errorf("part 1 built again without --force: exit %d, want %d asking for --force:\n%s", code, exitUsage, errs)
	}
	done := objects(t, srv, at)
	// Interrupted before its record was written: its shards are there, its record not.
	if err := srvDelete(srv, "ipm", "ds/"+s3.PartRecordDir(1, 3)+"manifest.json"); err != nil {
		t.Fatal(err)
	}
	mustRun(t, append([]string{"build", fmnist, "-o", out, "--part", "1/3", "--in-place", "--force"}, inPlaceArgs...)...)
	if got := objects(t, srv, at); !mapsEqualBytes(got, done) {
		t.Errorf("part 1 rebuilt with --force: the prefix differs from the one of three finished parts")
	}

	watch.reset(nil)
	stdout, errs, code := run(t, "merge", "--in-place", "-o", out)
	if code != 0 || !strings.Contains(stdout, "in place") {
		t.Fatalf("merge --in-place: exit %d\n%s%s", code, stdout, errs)
	}
	if got := objects(t, srv, at); !mapsEqualBytes(got, want) {
		t.Errorf("the merged objects differ from the one-machine build's files: %v", slices.Sorted(maps.Keys(got)))
	}
	var shardBytes, read int64
	for k, v := range want {
		if strings.HasPrefix(k, "shard-") {
			shardBytes += int64(len(v))
		}
	}
	watch.mu.Lock()
	for _, g := range watch.gets {
		path, rng, _ := strings.Cut(g, " ")
		var lo, hi int64
		if _, err := fmt.Sscanf(rng, "bytes=%d-%d", &lo, &hi); err != nil {
			if !strings.HasSuffix(path, "manifest.json") && !strings.HasSuffix(path, ".json") {
				t.Errorf("GET %s without a range", path)
			}
			continue
		}
		read += hi - lo + 1
	}
	t.Logf("merge --in-place: %d GETs, %d bytes of %d read, copies %v", len(watch.gets), read, shardBytes, watch.copies)
	if len(watch.copies) != 0 || read*20 > shardBytes {
		t.Errorf("merge --in-place copied %v and read %d of the shards' %d bytes; want no copy and only headers, indexes and footers", watch.copies, read, shardBytes)
	}
	watch.mu.Unlock()
	mustRun(t, "verify", out)
	if _, errs, code = run(t, "merge", "--in-place", "-o", out); code != exitUsage || !strings.Contains(errs, "already holds a dataset") {
		t.Errorf("merge --in-place over the dataset: exit %d, want %d:\n%s", code, exitUsage, errs)
	}
	if _, errs, code = buildInPlace(t, out, "0/3", "--force"); code != exitUsage || !strings.Contains(errs, "already holds a dataset") {
		t.Errorf("a part built in place over the dataset: exit %d, want %d:\n%s", code, exitUsage, errs)
	}
}

// TestS3InPlaceRefused: a damaged shard of a part built in place (a record byte: found by
// --verify-parts; a header byte: by the plain merge) refuses the merge (exit 3), nothing
// published; a chunk that makes two shards refuses the part (exit 2), nothing written; a
// prefix with foreign objects refuses the part.
func TestS3InPlaceRefused(t *testing.T) {
	srv := s3Setup(t, "ipr")
	out, at := "s3://ipr/ds", s3.URL{Bucket: "ipr", Prefix: "ds"}
	for i := range 3 {
		mustRun(t, append([]string{"build", fmnist, "-o", out, "--part", fmt.Sprintf("%d/3", i), "--in-place"}, inPlaceArgs...)...)
	}
	orig := objects(t, srv, at)["shard-00004.pks"]
	put := func(key string, data []byte) {
		t.Helper()
		if _, err := srv.Client("").PutObject(context.Background(), &awss3.PutObjectInput{Bucket: aws.String("ipr"), Key: aws.String(key), Body: bytes.NewReader(data)}); err != nil {
			t.Fatal(err)
		}
	}
	damaged := bytes.Clone(orig)
	damaged[len(damaged)/2] ^= 1
	put("ds/shard-00004.pks", damaged)
	_, errs, code := run(t, "merge", "--in-place", "--verify-parts", "-o", out)
	if code != exitCorrupt {
		t.Errorf("merge --in-place --verify-parts of a damaged record byte: exit %d, want %d:\n%s", code, exitCorrupt, errs)
	}
	damaged = bytes.Clone(orig)
	damaged[9] ^= 1
	put("ds/shard-00004.pks", damaged)
	_, errs, code = run(t, "merge", "--in-place", "-o", out)
	if code != exitCorrupt || !strings.Contains(errs, "part-00001") {
		t.Errorf("merge --in-place of a damaged header: exit %d, want %d naming the part:\n%s", code, exitCorrupt, errs)
	}
	got := objects(t, srv, at)
	if _, ok := got["manifest.json"]; ok {
		t.Errorf("a refused merge published a manifest")
	}
	if _, ok := got[s3.ClaimName]; ok {
		t.Errorf("a refused merge left its claim")
	}

	// A chunk that makes two shards: refused before anything is written.
	_, errs, code = run(t, "build", fmnist, "-o", "s3://ipr/two", "--part", "0/2", "--in-place", "--split", "test", "--cut-inputs", "2000", "--shard-size", "1MB")
	if code != exitUsage || !strings.Contains(errs, "more than one shard") {
		t.Errorf("a chunk of two shards: exit %d, want %d:\n%s", code, exitUsage, errs)
	}
	if left := objects(t, srv, s3.URL{Bucket: "ipr", Prefix: "two"}); len(left) != 0 {
		t.Errorf("the refused part wrote %v", slices.Sorted(maps.Keys(left)))
	}
	// A foreign object: refused.
	put("foreign/notes.txt", []byte("x"))
	if _, errs, code = buildInPlace(t, "s3://ipr/foreign", "0/3"); code != exitUsage || !strings.Contains(errs, "notes.txt") {
		t.Errorf("a prefix with a foreign object: exit %d, want %d naming it:\n%s", code, exitUsage, errs)
	}
}

func srvDelete(srv *s3test.Server, bucket, key string) error {
	_, err := srv.Client("").DeleteObject(context.Background(), &awss3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	return err
}

// TestS3InPlaceRaces: two runs of one part started at once (a retried task while the first
// still runs): their conditional writes keep them apart, a loser deletes only what it wrote, so
// the parts then merge byte-identical to the one-machine build; two merges started at once:
// exactly one publishes, the other fails cleanly, no shard is ever deleted.
func TestS3InPlaceRaces(t *testing.T) {
	srv := s3Setup(t, "iprace")
	watch := &deleteWatch{}
	px := s3test.StartFaultProxy(t, srv, watch.plan)
	t.Setenv("AWS_ENDPOINT_URL", px.Endpoint)
	local := filepath.Join(t.TempDir(), "local")
	mustRun(t, append([]string{"build", fmnist, "-o", local}, inPlaceArgs...)...)
	want := localFiles(t, local)
	race := func(args ...string) (codes [2]int, errs [2]string) {
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range codes {
			wg.Go(func() {
				<-start
				_, errs[i], codes[i] = run(t, args...)
			})
		}
		close(start)
		wg.Wait()
		return codes, errs
	}
	for round := range 2 {
		out := fmt.Sprintf("s3://iprace/r%d", round)
		at := s3.URL{Bucket: "iprace", Prefix: fmt.Sprintf("r%d", round)}
		codes, errs := race(append([]string{"build", fmnist, "-o", out, "--part", "1/3", "--in-place"}, inPlaceArgs...)...)
		t.Logf("round %d: parts 1/3 raced: exits %v", round, codes)
		if codes[0] == 0 && codes[1] == 0 {
			t.Fatalf("round %d: both runs of part 1 succeeded:\n%s\n%s", round, errs[0], errs[1])
		}
		if codes[0] != 0 && codes[1] != 0 {
			mustRun(t, append([]string{"build", fmnist, "-o", out, "--part", "1/3", "--in-place", "--force"}, inPlaceArgs...)...)
		}
		for _, p := range []string{"0/3", "2/3"} {
			mustRun(t, append([]string{"build", fmnist, "-o", out, "--part", p, "--in-place"}, inPlaceArgs...)...)
		}
		watch.take()
		codes, errs = race("merge", "--in-place", "-o", out)
		if (codes[0] == 0) == (codes[1] == 0) {
			t.Fatalf("round %d: merges raced: exits %v, want exactly one success:\n%s\n%s", round, codes, errs[0], errs[1])
		}
		for _, d := range watch.take() {
			if strings.Contains(d, "/shard-") {
				t.Errorf("round %d: the merges deleted %s", round, d)
			}
		}
		if got := objects(t, srv, at); !mapsEqualBytes(got, want) {
			t.Errorf("round %d: the merged objects differ from the one-machine build's: %v", round, slices.Sorted(maps.Keys(got)))
		}
		mustRun(t, "verify", out)
	}
}
