package main

import (
	"bytes"
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/storage"
	"github.com/packer-dev/packer/storage/s3"
	"github.com/packer-dev/packer/storage/s3/s3test"
)

// putTree uploads every file below dir as an object of bucket below prefix, through the SDK.
func putTree(t *testing.T, srv *s3test.Server, bucket, prefix, dir string) {
	t.Helper()
	c := srv.Client("")
	for name, data := range localFiles(t, dir) {
		key := strings.TrimPrefix(prefix+"/"+name, "/")
		if _, err := c.PutObject(context.Background(), &awss3.PutObjectInput{
			Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(data),
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// sameFiles fails unless the objects below u are exactly the files of the local dir.
func sameFiles(t *testing.T, srv *s3test.Server, u s3.URL, dir string) {
	t.Helper()
	want, got := localFiles(t, dir), objects(t, srv, u)
	if len(got) != len(want) {
		t.Errorf("%s holds %d objects, the local build %d files", u, len(got), len(want))
	}
	for name, data := range want {
		if !bytes.Equal(got[name], data) {
			t.Errorf("%s/%s: the object (%d bytes) differs from the local file (%d bytes)", u, name, len(got[name]), len(data))
		}
	}
}

// TestS3Source: builds from a bucket (an image folder, a list naming images relative to its
// folder, IDX files) into a bucket write exactly the objects of the same builds from local
// folders to a local folder; --source-cache keeps the copy, and a later build fetches only
// the objects that changed; an error in an input names it by its URL.
func TestS3Source(t *testing.T) {
	srv := s3Setup(t, "raw")
	srv.Bucket(t, "out")
	imgs := filepath.Join(t.TempDir(), "imgs")
	writePNGFolder(t, imgs, 5)
	list := "path,label\ncat/001.png,3\ndog/004.png,1\ncat/000.png,0\n"
	if err := os.WriteFile(filepath.Join(imgs, "train.csv"), []byte(list), 0o644); err != nil {
		t.Fatal(err)
	}
	idx := filepath.Join(t.TempDir(), "idx")
	if err := os.MkdirAll(idx, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"} {
		if err := os.WriteFile(filepath.Join(idx, f), readFile(t, filepath.Join(fmnist, f)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	putTree(t, srv, "raw", "photos", imgs)
	putTree(t, srv, "raw", "fm", idx)

	for _, c := range []struct {
		name, src, local string
		args             []string
	}{
		{"folder", "s3://raw/photos", imgs, []string{"--from", "folder", "--resize", "8", "--crop", "6"}},
		{"list", "s3://raw/photos/train.csv", filepath.Join(imgs, "train.csv"), []string{"--resize", "8", "--crop", "6"}},
		{"idx", "s3://raw/fm", idx, []string{"--split", "test", "--shard-size", "6MiB"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			local := filepath.Join(t.TempDir(), "local")
			mustRun(t, append([]string{"build", c.local, "-o", local}, c.args...)...)
			out := mustRun(t, append([]string{"build", c.src, "-o", "s3://out/" + c.name}, c.args...)...)
			if !strings.Contains(out, "into s3://out/"+c.name) {
				t.Errorf("summary: %q", out)
			}
			sameFiles(t, srv, s3.URL{Bucket: "out", Prefix: c.name}, local)
			mustRun(t, "verify", "s3://out/"+c.name)
		})
	}

	// --source-cache: the copy is kept; a second build fetches nothing, a third only the
	// replaced object, and removes the copy of a deleted one.
	cache := filepath.Join(t.TempDir(), "cache")
	args := []string{"build", "s3://raw/photos", "--from", "folder", "--source-cache", cache, "--force"}
	o1 := filepath.Join(t.TempDir(), "o1")
	_, errs, code := run(t, append(args, "-o", o1)...)
	if code != 0 || !strings.Contains(errs, "11 objects in "+cache+" (11 fetched, 0 unchanged)") {
		t.Fatalf("first build from the bucket with --source-cache: exit %d, %s", code, errs)
	}
	_, errs, _ = run(t, append(args, "-o", o1)...)
	if !strings.Contains(errs, "(0 fetched, 11 unchanged)") {
		t.Errorf("second build fetched again: %s", errs)
	}
	c := srv.Client("")
	writeTinyPNG(t, filepath.Join(imgs, "cat", "002.png"), 200)
	if _, err := c.PutObject(context.Background(), &awss3.PutObjectInput{Bucket: aws.String("raw"), Key: aws.String("photos/cat/002.png"),
		Body: bytes.NewReader(readFile(t, filepath.Join(imgs, "cat", "002.png")))}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteObject(context.Background(), &awss3.DeleteObjectInput{Bucket: aws.String("raw"), Key: aws.String("photos/dog/003.png")}); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(imgs, "dog", "003.png"))
	_, errs, _ = run(t, append(args, "-o", o1)...)
	if !strings.Contains(errs, "10 objects in "+cache+" (1 fetched, 9 unchanged)") {
		t.Errorf("third build: %s", errs)
	}
	if exists(filepath.Join(cache, "dog", "003.png")) {
		t.Error("the copy of a deleted object is still in the cache")
	}
	o2 := filepath.Join(t.TempDir(), "o2")
	mustRun(t, "build", imgs, "--from", "folder", "-o", o2)
	for _, f := range []string{"manifest.json", "shard-00000.pks"} {
		if !bytes.Equal(readFile(t, filepath.Join(o1, f)), readFile(t, filepath.Join(o2, f))) {
			t.Errorf("%s: the build from the updated cache differs from the local build", f)
		}
	}
	// A folder that is not a copy is never written into.
	foreign := t.TempDir()
	if err := os.WriteFile(filepath.Join(foreign, "mine.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errs, code = run(t, "build", "s3://raw/photos", "--from", "folder", "--source-cache", foreign, "-o", filepath.Join(t.TempDir(), "o3"))
	if code == 0 || !strings.Contains(errs, "is not empty and holds no .packer-mirror.json") {
		t.Errorf("a non-empty foreign --source-cache: exit %d, %s", code, errs)
	}

	// A damaged input is named by its URL, not by the local copy's path.
	if _, err := c.PutObject(context.Background(), &awss3.PutObjectInput{Bucket: aws.String("raw"), Key: aws.String("photos/cat/009.png"),
		Body: strings.NewReader("not a png")}); err != nil {
		t.Fatal(err)
	}
	_, errs, code = run(t, "build", "s3://raw/photos", "--from", "folder", "--on-error", "fail", "-o", filepath.Join(t.TempDir(), "o4"))
	if code == 0 || !strings.Contains(errs, "cat/009.png") || strings.Contains(errs, "packer-s3-source-") {
		t.Errorf("a damaged input in a bucket: exit %d, %s", code, errs)
	}
	// A missing prefix is an error naming it.
	_, errs, code = run(t, "build", "s3://raw/nothing", "-o", filepath.Join(t.TempDir(), "o5"))
	if code == 0 || !strings.Contains(errs, "s3://raw/nothing: no objects there") {
		t.Errorf("a missing prefix: exit %d, %s", code, errs)
	}
}

// TestS3PartsMerge: parts built from a bucket into a bucket and merged there give exactly the
// objects of one local build; a part with a replaced object is refused by the merge (exit 3,
// naming the part's URL) and nothing is published.
func TestS3PartsMerge(t *testing.T) {
	srv := s3Setup(t, "parts")
	args := []string{"--split", "test", "--shard-size", "2MiB"}
	local := filepath.Join(t.TempDir(), "whole")
	mustRun(t, append([]string{"build", fmnist, "-o", local}, args...)...)
	var parts []string
	for i := range 3 {
		p := "s3://parts/p" + string(rune('0'+i))
		mustRun(t, append([]string{"build", fmnist, "-o", p, "--part", string(rune('0'+i)) + "/3"}, args...)...)
		parts = append(parts, p)
	}
	out := mustRun(t, append([]string{"merge", "-o", "s3://parts/merged"}, parts...)...)
	if !strings.Contains(out, "into s3://parts/merged") {
		t.Errorf("merge summary: %q", out)
	}
	sameFiles(t, srv, s3.URL{Bucket: "parts", Prefix: "merged"}, local)
	// Leftovers at OUT (a shard no manifest lists) refuse the merge, which asks for the merge,
	// not a build, to be run again with --force.
	if _, err := srv.Client("").PutObject(context.Background(), &awss3.PutObjectInput{Bucket: aws.String("parts"), Key: aws.String("left/shard-00000.pks"), Body: strings.NewReader("left")}); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := run(t, append([]string{"merge", "-o", "s3://parts/left"}, parts...)...); code == 0 || !strings.Contains(errs, "merge again with --force") || strings.Contains(errs, "build again") {
		t.Errorf("merge over leftovers: exit %d, want a refusal asking to merge again with --force:\n%s", code, errs)
	}
	// Local parts into a bucket, and bucket parts into a local folder, agree too.
	lm := filepath.Join(t.TempDir(), "lm")
	mustRun(t, append([]string{"merge", "-o", lm}, parts...)...)
	for name, data := range localFiles(t, local) {
		if !bytes.Equal(readFile(t, filepath.Join(lm, name)), data) {
			t.Errorf("%s: merging bucket parts into a local folder gave other bytes", name)
		}
	}

	// Damage part 1: same size, other bytes.
	c := srv.Client("")
	key := "p1/shard-00000.pks"
	orig := objects(t, srv, s3.URL{Bucket: "parts", Prefix: "p1"})["shard-00000.pks"]
	bad := bytes.Clone(orig)
	bad[len(bad)/2] ^= 0x55
	if _, err := c.PutObject(context.Background(), &awss3.PutObjectInput{Bucket: aws.String("parts"), Key: aws.String(key), Body: bytes.NewReader(bad)}); err != nil {
		t.Fatal(err)
	}
	_, errs, code := run(t, append([]string{"merge", "-o", "s3://parts/m2"}, parts...)...)
	if code != exitCorrupt || !strings.Contains(errs, "s3://parts/p1") {
		t.Errorf("merge of a damaged part: exit %d, %s", code, errs)
	}
	if got := objects(t, srv, s3.URL{Bucket: "parts", Prefix: "m2"}); len(got) != 0 {
		t.Errorf("a refused merge left objects: %v", slices.Collect(maps.Keys(got)))
	}
}

// TestS3Loader: the Go Loader reading a dataset in a bucket (several buffers fetched at once,
// small shuffled reads through cached chunks) delivers the same batches as over the local
// build, for several orders and rank splits; bench runs against the bucket and its
// --cache-dir fills the cache.
func TestS3Loader(t *testing.T) {
	s3Setup(t, "loader")
	local := filepath.Join(t.TempDir(), "local")
	args := []string{"build", fmnist, "--split", "test", "--shard-size", "3MiB"}
	mustRun(t, append(args, "-o", local)...)
	mustRun(t, append(args, "-o", "s3://loader/fm")...)
	ld, err := shard.OpenDataset(local)
	if err != nil {
		t.Fatal(err)
	}
	defer ld.Close()
	b, err := s3.New(context.Background(), s3.URL{Bucket: "loader", Prefix: "fm"}, s3.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rd, err := shard.OpenDatasetFS(storage.ShardFS(context.Background(), b), shard.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	epoch := func(d *shard.Dataset, o shard.LoaderOptions) ([]int64, []byte) {
		l, err := d.NewLoader(o)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		var idx []int64
		var data []byte
		for l.Next() {
			bt := l.Batch()
			idx = append(idx, bt.Indices...)
			data = append(data, bt.Data...)
		}
		if err := l.Err(); err != nil {
			t.Fatal(err)
		}
		return idx, data
	}
	for _, o := range []shard.LoaderOptions{
		{BatchSize: 100},
		{BatchSize: 64, Shuffle: true, Seed: 5, Epoch: 2},
		{BatchSize: 33, Shuffle: true, Seed: 9, Rank: 1, World: 3, DropLast: true},
		{Order: shard.OrderV1, BatchSize: 33, Shuffle: true, Seed: 9, Rank: 1, World: 3, Buffer: 500, DropLast: true},
		{BatchSize: 7, Rank: 2, World: 4, Start: 123},
	} {
		li, lb := epoch(ld, o)
		ri, rb := epoch(rd, o)
		if !slices.Equal(li, ri) || !bytes.Equal(lb, rb) {
			t.Errorf("%+v: the bucket's batches differ from the local build's", o)
		}
	}
	cache := filepath.Join(t.TempDir(), "cache")
	out := mustRun(t, "bench", "s3://loader/fm", "--repeat", "1", "--cache-dir", cache, "--shuffle")
	if !strings.Contains(out, "ratio reader/GETs") || !strings.Contains(out, "10000 records, 3 files") {
		t.Errorf("bench on the bucket: %q", out)
	}
	if m, _ := filepath.Glob(filepath.Join(cache, "loader", "fm", "shard-*.pks.etag-*")); len(m) != 3 {
		t.Errorf("bench --cache-dir cached %v, want the 3 shards", m)
	}
}

// TestS3ForceReplace: --force over a dataset in a bucket replaces it without ever removing
// the old dataset's objects before the new manifest is in place: a replacing build killed
// mid-upload leaves the old dataset whole (it verifies and reads as before); the next --force
// build removes the killed one's leftovers, writes its files under a new generation
// sub-prefix, swaps the manifest and deletes the old files; the result verifies, holds
// exactly the new files and reads as the same build made locally.
func TestS3ForceReplace(t *testing.T) {
	srv := s3Setup(t, "replace")
	u := s3.URL{Bucket: "replace", Prefix: "ds"}
	old := []string{"build", fmnist, "--split", "test", "--shard-size", "6MiB", "-o", "s3://replace/ds"}
	mustRun(t, old...)
	before := objects(t, srv, u)

	cmd, _ := stalledS3Build(t, "replace", "--force")
	cmd.Process.Kill()
	cmd.Wait()
	if ups := srv.OpenUploads(t, "replace"); len(ups) != 1 {
		t.Fatalf("open uploads after killing the replacing build: %v", ups)
	}
	after := objects(t, srv, u)
	for name, data := range before {
		if !bytes.Equal(after[name], data) {
			t.Fatalf("%s: the old dataset's object changed or went before the new manifest was in place", name)
		}
	}
	mustRun(t, "verify", "s3://replace/ds")
	if _, errs, code := run(t, old...); code != exitFailure || !strings.Contains(errs, "already holds a dataset") {
		t.Errorf("a build without --force over the dataset: exit %d, %s", code, errs)
	}

	newArgs := []string{"--split", "test", "--resize", "14", "--shard-size", "1MiB"}
	local := filepath.Join(t.TempDir(), "local")
	mustRun(t, append([]string{"build", fmnist, "-o", local}, newArgs...)...)
	mustRun(t, append([]string{"build", fmnist, "-o", "s3://replace/ds", "--force"}, newArgs...)...)
	if ups := srv.OpenUploads(t, "replace"); len(ups) != 0 {
		t.Errorf("open uploads after the replacement: %v", ups)
	}
	got := objects(t, srv, u)
	m, err := shard.ReadManifest(local)
	if err != nil {
		t.Fatal(err)
	}
	rm, err := readManifestAt(context.Background(), "s3://replace/ds")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(m.Files)+1 || len(rm.Files) != len(m.Files) {
		t.Fatalf("after the replacement the prefix holds %v, want the manifest and %d files", slices.Sorted(maps.Keys(got)), len(m.Files))
	}
	gen := ""
	for i, fe := range rm.Files {
		dir, base, ok := strings.Cut(fe.Path, "/")
		if !ok || !strings.HasPrefix(dir, s3.GenerationPrefix) || base != m.Files[i].Path || (gen != "" && dir != gen) {
			t.Fatalf("file %d of the new manifest is %q; want %s<id>/%s", i, fe.Path, s3.GenerationPrefix, m.Files[i].Path)
		}
		gen = dir
		if !bytes.Equal(got[fe.Path], readFile(t, filepath.Join(local, m.Files[i].Path))) {
			t.Errorf("%s differs from the local build's %s", fe.Path, m.Files[i].Path)
		}
	}
	mustRun(t, "verify", "s3://replace/ds")
	ld, err := openAny(local)
	if err != nil {
		t.Fatal(err)
	}
	defer ld.Close()
	rd, err := openAny("s3://replace/ds")
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	for i := int64(0); i < ld.Len(); i += 611 {
		a, err1 := ld.Record(i)
		b, err2 := rd.Record(i)
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			t.Fatalf("record %d differs after the replacement: %v %v", i, err1, err2)
		}
	}
	// And once more: a replacement of a replacement removes the previous generation.
	mustRun(t, append(old, "--force")...)
	for name := range objects(t, srv, u) {
		if strings.HasPrefix(name, gen) {
			t.Errorf("%s: the replaced generation's object is still there", name)
		}
	}
	mustRun(t, "verify", "s3://replace/ds")
}

// TestS3SourceParts: parts built from a bucket source (each from its own fresh copy) record the
// same content digest (the copies carry the objects' times) and merge into the one-machine
// build; an OUT that is the source or a part, or lies in or around one, is refused (exit 2)
// and nothing is written there.
func TestS3SourceParts(t *testing.T) {
	srv := s3Setup(t, "raw")
	srv.Bucket(t, "out")
	imgs := filepath.Join(t.TempDir(), "imgs")
	writePNGFolder(t, imgs, 3)
	putTree(t, srv, "raw", "photos", imgs)
	whole := filepath.Join(t.TempDir(), "whole")
	mustRun(t, "build", "s3://raw/photos", "-o", whole)
	p0 := "s3://out/p0"
	mustRun(t, "build", "s3://raw/photos", "-o", p0, "--part", "0/2")
	p1 := filepath.Join(t.TempDir(), "p1")
	mustRun(t, "build", "s3://raw/photos", "-o", p1, "--part", "1/2")
	merged := filepath.Join(t.TempDir(), "merged")
	mustRun(t, "merge", "-o", merged, p0, p1)
	sameTree(t, whole, merged)

	for _, c := range []struct {
		out  string
		args []string
	}{
		{"s3://raw/photos/packed", []string{"merge", "-o", "s3://raw/photos/packed", "--force", p0, p1}},
		{p0, []string{"merge", "-o", p0, "--force", p0, p1}},
		{"s3://out", []string{"merge", "-o", "s3://out", "--force", p0, p1}},
		{"s3://raw/photos/packed", []string{"build", "s3://raw/photos", "-o", "s3://raw/photos/packed", "--force"}},
		{"s3://raw", []string{"build", "s3://raw/photos", "-o", "s3://raw", "--force"}},
	} {
		before := objects(t, srv, s3.URL{Bucket: "raw"})
		beforeOut := objects(t, srv, s3.URL{Bucket: "out"})
		_, errs, code := run(t, c.args...)
		if code != exitUsage || !strings.Contains(errs, c.out) || !strings.Contains(errs, "overlaps") {
			t.Errorf("%v: exit %d, want %d naming %s and the overlap:\n%s", c.args, code, exitUsage, c.out, errs)
		}
		if after := objects(t, srv, s3.URL{Bucket: "raw"}); !maps.EqualFunc(before, after, bytes.Equal) {
			t.Errorf("%v changed the source bucket: %v", c.args, slices.Sorted(maps.Keys(after)))
		}
		if after := objects(t, srv, s3.URL{Bucket: "out"}); !maps.EqualFunc(beforeOut, after, bytes.Equal) {
			t.Errorf("%v changed the parts' bucket: %v", c.args, slices.Sorted(maps.Keys(after)))
		}
	}
}

// TestS3SourceCacheOverlap: the local copy of an s3:// SRC is the source the build reads: an OUT
// that is the --source-cache folder, or lies in or around it, is refused (exit 2) as an OUT over
// a local source is, and nothing is written there.
func TestS3SourceCacheOverlap(t *testing.T) {
	srv := s3Setup(t, "raw")
	imgs := filepath.Join(t.TempDir(), "imgs")
	writePNGFolder(t, imgs, 2)
	putTree(t, srv, "raw", "photos", imgs)
	root := t.TempDir()
	cache := filepath.Join(root, "cache")
	mustRun(t, "build", "s3://raw/photos", "--source-cache", cache, "-o", filepath.Join(root, "first"))
	for _, out := range []string{filepath.Join(cache, "packed"), cache, root} {
		before := noLocks(treeSum(t, cache))
		_, errs, code := run(t, "build", "s3://raw/photos", "--source-cache", cache, "-o", out, "--force")
		t.Log(errs)
		if code != exitUsage || !strings.Contains(errs, "source") || !strings.Contains(errs, out) {
			t.Errorf("build -o %s with --source-cache %s: exit %d, want %d naming it and the source:\n%s", out, cache, code, exitUsage, errs)
		}
		if after := noLocks(treeSum(t, cache)); after != before {
			t.Errorf("build -o %s changed the source cache:\nbefore:\n%s\nafter:\n%s", out, before, after)
		}
	}
}
