package main

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/packer-dev/packer/storage/s3"
	"github.com/packer-dev/packer/storage/s3/s3test"
)

// TestS3StreamedPublishChecksStored: a build to s3:// uploads each shard as it finishes, and the
// shards wait below the prefix, with no manifest, until the build ends: hours, for a large one.
// Whatever happens to them meanwhile (a build of the same OUT run elsewhere with --force clears
// them as leftovers; a person deletes or overwrites one), the manifest must not be written over
// a shard that is not the one uploaded. Here shard-00000.pks is deleted, and shard-00001.pks
// overwritten with other bytes, while the build goes on: the build fails naming the object, and
// no dataset is published.
func TestS3StreamedPublishChecksStored(t *testing.T) {
	srv := s3Setup(t, "storedgone")
	t.Setenv("TMPDIR", t.TempDir())
	client := srv.Client("")
	var stored atomic.Int64
	s3ShardStoredHook = func(name string) {
		if stored.Add(1) != 4 {
			return
		}
		ctx := context.Background()
		if _, err := client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String("storedgone"), Key: aws.String("ds/shard-00000.pks")}); err != nil {
			t.Error(err)
		}
		if _, err := client.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("storedgone"), Key: aws.String("ds/shard-00001.pks"), Body: strings.NewReader("not the shard")}); err != nil {
			t.Error(err)
		}
	}
	defer func() { s3ShardStoredHook = nil }()
	_, errs, code := run(t, append([]string{"build", fmnist, "-o", "s3://storedgone/ds"}, streamArgs...)...)
	s3ShardStoredHook = nil
	if stored.Load() < 4 {
		t.Fatalf("the build stored %d shards; want 4 or more", stored.Load())
	}
	got := objects(t, srv, s3.URL{Bucket: "storedgone", Prefix: "ds"})
	if _, ok := got["manifest.json"]; ok || code == 0 {
		_, verrs, vcode := run(t, "verify", "s3://storedgone/ds")
		t.Fatalf("the build published a dataset over a deleted and an overwritten shard (exit %d; verify exit %d):\n%s\n%s", code, vcode, errs, verrs)
	}
	t.Logf("stderr:\n%s", errs)
	if !strings.Contains(errs, "shard-00000.pks") && !strings.Contains(errs, "shard-00001.pks") {
		t.Errorf("the build's error names neither changed shard:\n%s", errs)
	}
}

// TestS3StreamedManifestLeftWhole: a build to s3:// whose manifest, once written, cannot be
// read back nor deleted (every GET and DELETE of it fails) fails, and whatever it leaves is
// not a published manifest over deleted shards: either no manifest, or the manifest with every
// file it lists (verify passes). Before, the failed build removed its uploads under the
// manifest it could not take away.
func TestS3StreamedManifestLeftWhole(t *testing.T) {
	srv := s3Setup(t, "leftwhole")
	t.Setenv("TMPDIR", t.TempDir())
	var written atomic.Bool
	px := s3test.StartFaultProxy(t, srv, func(r *http.Request, _, _ int) s3test.Fault {
		if !strings.HasSuffix(r.URL.Path, "/manifest.json") {
			return s3test.None
		}
		if r.Method == http.MethodPut {
			written.Store(true)
		} else if written.Load() && (r.Method == http.MethodGet || r.Method == http.MethodDelete) {
			return s3test.Status500
		}
		return s3test.None
	})
	t.Setenv("AWS_ENDPOINT_URL", px.Endpoint)
	_, errs, code := run(t, append([]string{"build", fmnist, "-o", "s3://leftwhole/ds"}, streamArgs...)...)
	if code == 0 || !written.Load() {
		t.Fatalf("the build: exit %d, manifest written %v; want a failure after the manifest was written\n%s", code, written.Load(), errs)
	}
	t.Setenv("AWS_ENDPOINT_URL", srv.Endpoint)
	got := objects(t, srv, s3.URL{Bucket: "leftwhole", Prefix: "ds"})
	if _, ok := got["manifest.json"]; ok {
		if _, verrs, vcode := run(t, "verify", "s3://leftwhole/ds"); vcode != 0 {
			t.Errorf("the failed build left a manifest whose dataset verify refuses (exit %d):\n%s\nthe build said:\n%s", vcode, verrs, errs)
		}
	}
}

// TestS3StreamedShardAnswerLost: the answer to a shard's conditional upload is lost after the
// store wrote it (a 500 to a request that was carried out), so the retry is refused (the
// object exists). The object is this build's, byte for byte: the build goes on and publishes
// the dataset, rather than failing as if another build were writing there and leaving the
// object behind.
func TestS3StreamedShardAnswerLost(t *testing.T) {
	srv := s3Setup(t, "shardlost")
	t.Setenv("TMPDIR", t.TempDir())
	var lost atomic.Bool
	px := s3test.StartFaultProxy(t, srv, func(r *http.Request, _, _ int) s3test.Fault {
		if r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/shard-00002.pks") && lost.CompareAndSwap(false, true) {
			return s3test.LostAnswer
		}
		return s3test.None
	})
	t.Setenv("AWS_ENDPOINT_URL", px.Endpoint)
	_, errs, code := run(t, append([]string{"build", fmnist, "-o", "s3://shardlost/ds"}, streamArgs...)...)
	if !lost.Load() {
		t.Fatal("no answer was lost")
	}
	if code != 0 {
		t.Fatalf("a build whose shard upload's answer was lost: exit %d\n%s", code, errs)
	}
	t.Setenv("AWS_ENDPOINT_URL", srv.Endpoint)
	mustRun(t, "verify", "s3://shardlost/ds")
}

// TestS3StreamedLeavesOthersObjects: a build to s3:// (not resumed) that finds, under a name it
// is about to upload, an object it did not write (another build writing to the same prefix
// since this one checked it) fails naming it, as a conditional write refused, and leaves that
// object alone. Before, it deleted the other build's object and wrote its own there.
func TestS3StreamedLeavesOthersObjects(t *testing.T) {
	srv := s3Setup(t, "others")
	t.Setenv("TMPDIR", t.TempDir())
	client := srv.Client("")
	var stored atomic.Int64
	s3ShardStoredHook = func(name string) {
		if stored.Add(1) == 2 {
			if _, err := client.PutObject(context.Background(), &awss3.PutObjectInput{Bucket: aws.String("others"), Key: aws.String("ds/shard-00015.pks"), Body: strings.NewReader("another build's")}); err != nil {
				t.Error(err)
			}
		}
	}
	defer func() { s3ShardStoredHook = nil }()
	_, errs, code := run(t, append([]string{"build", fmnist, "-o", "s3://others/ds"}, streamArgs...)...)
	s3ShardStoredHook = nil
	got := objects(t, srv, s3.URL{Bucket: "others", Prefix: "ds"})
	if string(got["shard-00015.pks"]) != "another build's" {
		t.Errorf("the build (exit %d) replaced another build's object shard-00015.pks (%d bytes now)\n%s", code, len(got["shard-00015.pks"]), errs)
	}
	if code == 0 || !strings.Contains(errs, "shard-00015.pks") {
		t.Errorf("the build: exit %d; want a failure naming shard-00015.pks\n%s", code, errs)
	}
}
