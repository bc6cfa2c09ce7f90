package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/storage"
	"github.com/packer-dev/packer/storage/s3"
	"github.com/packer-dev/packer/storage/s3/s3test"
)

// copyWatch is a fault plan that records the object GETs (path and Range) and the copies
// (PUTs with x-amz-copy-source), and hands each request to then, if set, for its fault.
type copyWatch struct {
	mu     sync.Mutex
	gets   []string // "path range"
	copies []string // path, and "part" for UploadPartCopy
	then   s3test.FaultPlan
}

func (w *copyWatch) plan(r *http.Request, n, body int) s3test.Fault {
	w.mu.Lock()
	if q := r.URL.Query(); r.Method == http.MethodGet && (len(q) == 0 || q.Get("x-id") == "GetObject") {
		w.gets = append(w.gets, r.URL.Path+" "+r.Header.Get("Range"))
	}
	if r.Method == http.MethodPut && r.Header.Get("X-Amz-Copy-Source") != "" {
		kind := "object"
		if r.URL.Query().Get("partNumber") != "" {
			kind = "part"
		}
		w.copies = append(w.copies, r.URL.Path+" "+kind)
	}
	then := w.then
	w.mu.Unlock()
	if then != nil {
		return then(r, n, body)
	}
	return s3test.None
}

func (w *copyWatch) reset(then s3test.FaultPlan) {
	w.mu.Lock()
	w.gets, w.copies, w.then = nil, nil, then
	w.mu.Unlock()
}

// TestS3MergeByCopy: two parts built with --cut-inputs into a bucket merge into another bucket
// of the store by server-side copies (one shard uploaded in parts, so copied in its parts; one
// copied whole), byte-identical to the one-machine local build, without one GET of the shards'
// record data; through bursts of 500, 503 and cut bodies, the same bytes; a copy that keeps
// failing, or a part's shard replaced between the check and its copy (the copy is pinned to
// the ETag checked), fails the merge and leaves nothing at OUT; --verify-parts reads the parts
// in the bucket and refuses one with a damaged record byte (exit 3), and one damaged after it
// read it (its reads pinned as the check's and copies are); --remove-parts deletes the parts'
// objects once OUT is published.
func TestS3MergeByCopy(t *testing.T) {
	srv := s3Setup(t, "cparts")
	srv.Bucket(t, "cout")
	watch := &copyWatch{}
	px := s3test.StartFaultProxy(t, srv, watch.plan)
	t.Setenv("AWS_ENDPOINT_URL", px.Endpoint)
	// 7000 inputs of 784 bytes make a shard of 5.2 MiB: uploaded in two parts of up to 5 MiB.
	args := []string{"--split", "test", "--cut-inputs", "7000", "--shard-size", "64MB"}
	want, parts := localAndTwoParts(t, args, "s3://cparts/p")
	ctx := context.Background()
	// The record data of the parts' shards: no GET may touch it.
	type region struct{ lo, hi int64 }
	data := map[string]region{}
	for i := range parts {
		b := s3.NewWithClient(srv.Client(""), s3.URL{Bucket: "cparts", Prefix: fmt.Sprintf("p%d", i)}, s3.Options{})
		ds, err := shard.OpenDatasetFS(storage.ShardFS(ctx, b), shard.ReaderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		m := ds.Manifest()
		for s := range ds.NumShards() {
			r, err := ds.Shard(s)
			if err != nil {
				t.Fatal(err)
			}
			data[fmt.Sprintf("/cparts/p%d/%s", i, m.Files[s].Path)] = region{r.DataOffset(), r.DataOffset() + r.DataSize()}
		}
		ds.Close()
	}
	merge := func(out string, extra ...string) (string, string, int) {
		t.Helper()
		return run(t, append(append([]string{"merge", "-o", out}, extra...), parts...)...)
	}
	watch.reset(nil)
	stdout, errs, code := merge("s3://cout/merged")
	if code != 0 || !strings.Contains(stdout, "by server-side copy") {
		t.Fatalf("merge: exit %d\n%s%s", code, stdout, errs)
	}
	if got := objects(t, srv, s3.URL{Bucket: "cout", Prefix: "merged"}); !mapsEqualBytes(got, want) {
		t.Errorf("the merged objects differ from the local build's files (%d objects, %d files)", len(got), len(want))
	}
	watch.mu.Lock()
	var ranged int
	for _, g := range watch.gets {
		path, rng, _ := strings.Cut(g, " ")
		reg, ok := data[path]
		if !ok {
			continue
		}
		var lo, hi int64
		if _, err := fmt.Sscanf(rng, "bytes=%d-%d", &lo, &hi); err != nil {
			t.Errorf("GET %s without a range", path)
			continue
		}
		ranged++
		if lo < reg.hi && hi >= reg.lo {
			t.Errorf("GET %s %s reads record data [%d, %d)", path, rng, reg.lo, reg.hi)
		}
	}
	partCopies := 0
	for _, c := range watch.copies {
		if strings.HasSuffix(c, " part") {
			partCopies++
		}
	}
	t.Logf("merge: %d ranged GETs of shards, copies %v", ranged, watch.copies)
	if ranged == 0 || partCopies != 2 || len(watch.copies) != 3 {
		t.Errorf("want ranged GETs of the shards' headers, indexes and footers, one shard copied whole and one in 2 parts; got %d GETs, copies %v", ranged, watch.copies)
	}
	watch.mu.Unlock()
	mustRun(t, "verify", "s3://cout/merged")
	// --force replaces it: the new files under a generation sub-prefix, the manifest swapped.
	mustRun(t, merge2(parts, "s3://cout/merged", "--force")...)
	mustRun(t, "verify", "s3://cout/merged")
	if got := objects(t, srv, s3.URL{Bucket: "cout", Prefix: "merged"}); len(got) != len(want) {
		t.Errorf("merge --force left %d objects (%v), want the %d of one dataset", len(got), keysOf(got), len(want))
	}

	// Faults on the wire: retried, the same bytes.
	watch.reset(s3test.Bursts)
	mustRun(t, merge2(parts, "s3://cout/faults")...)
	if got := objects(t, srv, s3.URL{Bucket: "cout", Prefix: "faults"}); !mapsEqualBytes(got, want) {
		t.Errorf("merged through faults: the objects differ from the local build's files")
	}
	if inj := px.Injected(); inj[s3test.Status500] == 0 || inj[s3test.SlowDown] == 0 {
		t.Errorf("faults injected: %s; want 500s and 503s", px.Summary())
	}
	watch.mu.Lock()
	faulted := len(watch.copies)
	watch.mu.Unlock()
	if faulted <= 3 {
		t.Errorf("%d copy requests through the faults, want more than the 3 copies (retries)", faulted)
	}

	// A copy refused every time: the merge fails, naming the attempts, and leaves nothing.
	watch.reset(func(r *http.Request, _, _ int) s3test.Fault {
		if r.Header.Get("X-Amz-Copy-Source") != "" && strings.Contains(r.URL.Path, "shard-00001") {
			return s3test.Status500
		}
		return s3test.None
	})
	_, errs, code = merge("s3://cout/failed")
	t.Logf("always refused: %s", errs)
	if code == 0 || !strings.Contains(errs, "attempts") {
		t.Errorf("merge with a copy always refused: exit %d, want a failure naming the attempts:\n%s", code, errs)
	}
	watch.mu.Lock()
	first := 0 // the copies of the other shard, made before the failure and then deleted
	for _, c := range watch.copies {
		if strings.HasPrefix(c, "/cout/failed/shard-00000.pks") {
			first++
		}
	}
	watch.mu.Unlock()
	if first == 0 {
		t.Errorf("the other shard was not copied before the failure: the test no longer fails mid-way")
	}
	if left := objects(t, srv, s3.URL{Bucket: "cout", Prefix: "failed"}); len(left) != 0 {
		t.Errorf("the failed merge left objects: %v", keysOf(left))
	}
	if ups := srv.OpenUploads(t, "cout"); len(ups) != 0 {
		t.Errorf("the failed merge left open uploads: %v", ups)
	}

	// A part's shard replaced after the check, before its copy: refused, nothing left.
	src := "p1/shard-00000.pks"
	orig := objects(t, srv, s3.URL{Bucket: "cparts", Prefix: "p1"})["shard-00000.pks"]
	put := func(data []byte) {
		if _, err := srv.Client("").PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("cparts"), Key: aws.String(src), Body: bytes.NewReader(data)}); err != nil {
			t.Fatal(err)
		}
	}
	var once sync.Once
	watch.reset(func(r *http.Request, _, _ int) s3test.Fault {
		if r.Header.Get("X-Amz-Copy-Source") != "" {
			once.Do(func() {
				changed := bytes.Clone(orig)
				changed[len(changed)/2] ^= 1
				put(changed)
			})
		}
		return s3test.None
	})
	_, errs, code = merge("s3://cout/changed")
	t.Logf("replaced: %s", errs)
	if code == 0 || !strings.Contains(errs, "changed since it was checked") || !strings.Contains(errs, src) {
		t.Errorf("merge with a shard replaced before its copy: exit %d, want a refusal naming %s:\n%s", code, src, errs)
	}
	if left := objects(t, srv, s3.URL{Bucket: "cout", Prefix: "changed"}); len(left) != 0 {
		t.Errorf("the refused merge left objects: %v", keysOf(left))
	}
	// A record byte of that shard damaged: --verify-parts reads it and refuses the part (exit
	// 3), nothing is published.
	damaged := bytes.Clone(orig)
	damaged[data["/cparts/p1/shard-00000.pks"].lo+100] ^= 1
	put(damaged)
	watch.reset(nil)
	_, errs, code = merge("s3://cout/damaged", "--verify-parts")
	if code != exitCorrupt || !strings.Contains(errs, "s3://cparts/p1") {
		t.Errorf("merge --verify-parts of a damaged part: exit %d, want %d naming the part:\n%s", code, exitCorrupt, errs)
	}
	if left := objects(t, srv, s3.URL{Bucket: "cout", Prefix: "damaged"}); len(left) != 0 {
		t.Errorf("the refused merge left objects: %v", keysOf(left))
	}
	put(orig)
	// That record byte changed after --verify-parts read the part whole, before the merge's
	// check opens it (at the check's first request, for part 0, once all the record data of
	// that shard was read in one GET): the check and the copies are pinned to the versions
	// verified, so the merge is refused before it copies anything (not only by the copy's
	// SHA-256, which not every store computes).
	var (
		mu           sync.Mutex
		read, cycled bool
	)
	reg := data["/cparts/"+src]
	watch.reset(func(r *http.Request, _, _ int) s3test.Fault {
		mu.Lock()
		defer mu.Unlock()
		if read && !cycled && strings.HasPrefix(r.URL.Path, "/cparts/p0/shard-") {
			cycled = true
			put(damaged)
		}
		var lo, hi int64
		if _, err := fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-%d", &lo, &hi); err == nil && r.Method == http.MethodGet &&
			r.URL.Path == "/cparts/"+src && lo <= reg.lo && hi >= reg.hi-1 {
			read = true
		}
		return s3test.None
	})
	_, errs, code = merge("s3://cout/swapped", "--verify-parts")
	t.Logf("swapped after --verify-parts: %s", errs)
	watch.mu.Lock()
	copies := watch.copies
	watch.mu.Unlock()
	if !cycled || code == 0 || !strings.Contains(errs, src) || !strings.Contains(errs, "changed since it was opened") || len(copies) != 0 {
		t.Errorf("merge --verify-parts with a shard swapped after its check (swapped: %v): exit %d, copies %v; want a refusal naming %s before any copy:\n%s", cycled, code, copies, src, errs)
	}
	if left := objects(t, srv, s3.URL{Bucket: "cout", Prefix: "swapped"}); len(left) != 0 {
		t.Errorf("the refused merge left objects: %v", keysOf(left))
	}
	put(orig)

	// A killed merge's leftovers (a copied shard and its claim) refuse the next merge there,
	// which asks for the merge, not a build, to be run again with --force.
	for _, key := range []string{"left/shard-00000.pks", "left/" + s3.ClaimName} {
		if _, err := srv.Client("").PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("cout"), Key: aws.String(key), Body: bytes.NewReader(orig[:64])}); err != nil {
			t.Fatal(err)
		}
	}
	_, errs, code = merge("s3://cout/left")
	if code == 0 || !strings.Contains(errs, "merge again with --force") || strings.Contains(errs, "build again") {
		t.Errorf("merge over a killed merge's leftovers: exit %d, want a refusal asking to merge again with --force:\n%s", code, errs)
	}

	// --verify-parts (every byte of the parts read where they are) and --remove-parts: OUT
	// published, the parts' objects gone.
	watch.reset(nil)
	mustRun(t, merge2(parts, "s3://cout/final", "--remove-parts", "--verify-parts")...)
	if got := objects(t, srv, s3.URL{Bucket: "cout", Prefix: "final"}); !mapsEqualBytes(got, want) {
		t.Errorf("merged with --remove-parts: the objects differ from the local build's files")
	}
	if left := objects(t, srv, s3.URL{Bucket: "cparts", Prefix: ""}); len(left) != 0 {
		t.Errorf("--remove-parts left the parts' objects: %v", keysOf(left))
	}
}

// merge2 is the arguments of a merge of parts into out.
func merge2(parts []string, out string, extra ...string) []string {
	return append(append([]string{"merge", "-o", out}, extra...), parts...)
}

func keysOf(m map[string][]byte) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
