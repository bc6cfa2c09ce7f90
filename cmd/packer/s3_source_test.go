package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

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
