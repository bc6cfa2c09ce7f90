package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source/cifar"
	"github.com/packer-dev/packer/storage"
	"github.com/packer-dev/packer/storage/s3"
	"github.com/packer-dev/packer/storage/s3/s3test"
)

const fmnist = "/usr/share/datasets/fashion-mnist"

// s3Setup starts the test server with a bucket, points the standard AWS chain at it and
// makes multipart uploads start at 5 MiB, so that a 6 MiB shard is sent in parts.
func s3Setup(t *testing.T, bucket string) *s3test.Server {
	t.Helper()
	if _, err := os.Stat(fmnist); err != nil {
		t.Skipf("%s is missing (scripts/setup.sh installs it)", fmnist)
	}
	srv := s3test.Start(t)
	srv.Bucket(t, bucket)
	srv.SetEnv(t)
	t.Setenv("PACKER_S3_PART_SIZE", "5MiB")
	return srv
}

// objects reads every object below u through the SDK, by name below the prefix.
func objects(t *testing.T, srv *s3test.Server, u s3.URL) map[string][]byte {
	t.Helper()
	b := s3.NewWithClient(srv.Client(""), u, s3.Options{})
	got := map[string][]byte{}
	err := b.List(context.Background(), func(fi storage.FileInfo) error {
		r, err := b.Open(context.Background(), fi.Name)
		if err != nil {
			return err
		}
		defer r.Close()
		data := make([]byte, r.Size())
		if _, err := r.ReadAt(data, 0); err != nil && !(err == io.EOF && len(data) == 0) {
			return err
		}
		got[fi.Name] = data
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// localFiles reads every file below dir, by slash-separated relative name.
func localFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	got := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		got[filepath.ToSlash(rel)] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestS3Build: a build to a bucket writes exactly the objects of the same build to a local
// folder, byte for byte (shard 0 through a multipart upload); verify, inspect and preview
// read it as they read the local one; a second build to the prefix is refused, with --force
// too, and leaves the dataset as it was.
func TestS3Build(t *testing.T) {
	srv := s3Setup(t, "data")
	local := filepath.Join(t.TempDir(), "local")
	args := []string{"build", fmnist, "--split", "test", "--shard-size", "6MiB"}
	mustRun(t, append(args, "-o", local)...)
	out := mustRun(t, append(args, "-o", "s3://data/fm/test")...)
	if !strings.Contains(out, "into s3://data/fm/test [shards, 2 files") {
		t.Errorf("the summary does not name the bucket location: %q", out)
	}
	want := localFiles(t, local)
	got := objects(t, srv, s3.URL{Bucket: "data", Prefix: "fm/test"})
	if len(got) != len(want) {
		t.Errorf("the bucket holds %d objects, the local build %d files", len(got), len(want))
	}
	for name, data := range want {
		if !bytes.Equal(got[name], data) {
			t.Errorf("%s: the object (%d bytes) differs from the local file (%d bytes)", name, len(got[name]), len(data))
		}
	}
	if ups := srv.OpenUploads(t, "data"); len(ups) != 0 {
		t.Errorf("open multipart uploads after the build: %v", ups)
	}

	out = mustRun(t, "verify", "s3://data/fm/test")
	if !strings.Contains(out, "ok: s3://data/fm/test: 10000 records in 2 shard files") {
		t.Errorf("verify: %q", out)
	}
	li := mustRun(t, "inspect", "--json", "--records", "3", local)
	ri := mustRun(t, "inspect", "--json", "--records", "3", "s3://data/fm/test")
	if strings.Replace(ri, "s3://data/fm/test", local, 1) != li {
		t.Errorf("inspect of the bucket differs from inspect of the local build:\n%s\n%s", ri, li)
	}
	lp, rp := filepath.Join(t.TempDir(), "l.png"), filepath.Join(t.TempDir(), "r.png")
	mustRun(t, "preview", local, "-o", lp)
	mustRun(t, "preview", "s3://data/fm/test", "-o", rp)
	if a, b := readFile(t, lp), readFile(t, rp); !bytes.Equal(a, b) {
		t.Error("preview of the bucket differs from preview of the local build")
	}

	// Every record, through the Go loader's dataset reader, as the local build's.
	ld, err := openAny(local)
	if err != nil {
		t.Fatal(err)
	}
	defer ld.Close()
	rd, err := openAny("s3://data/fm/test")
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	if ld.Len() != rd.Len() {
		t.Fatalf("%d records in the bucket, %d locally", rd.Len(), ld.Len())
	}
	for i := int64(0); i < ld.Len(); i += 997 {
		a, err1 := ld.Record(i)
		b, err2 := rd.Record(i)
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			t.Fatalf("record %d differs: %v %v", i, err1, err2)
		}
	}

	_, errs, code := run(t, slices.Concat(args, []string{"-o", "s3://data/fm/test"})...)
	if code != exitFailure || !strings.Contains(errs, "already holds a dataset") {
		t.Errorf("a second build without --force: exit %d, %q; want a refusal", code, errs)
	}
	if got := objects(t, srv, s3.URL{Bucket: "data", Prefix: "fm/test"}); !mapsEqualBytes(got, want) {
		t.Error("a refused build changed the dataset")
	}
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mapsEqualBytes(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

// TestS3VerifyReplacedObject: an object replaced with other bytes of the same size is found
// by verify (from the bytes: SHA-256 and the block CRCs), with the exit code of the same
// damage in a local folder; a missing object too.
func TestS3VerifyReplacedObject(t *testing.T) {
	srv := s3Setup(t, "vfy")
	local := filepath.Join(t.TempDir(), "local")
	args := []string{"build", fmnist, "--split", "test", "--shard-size", "6MiB"}
	mustRun(t, append(args, "-o", local)...)
	mustRun(t, append(args, "-o", "s3://vfy/ds")...)
	data := readFile(t, filepath.Join(local, "shard-00001.pks"))
	data[len(data)/2] ^= 0x40
	if _, err := srv.Client("").PutObject(context.Background(), &awss3.PutObjectInput{
		Bucket: aws.String("vfy"), Key: aws.String("ds/shard-00001.pks"), Body: bytes.NewReader(data),
	}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(local, "shard-00001.pks"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, localCode := run(t, "verify", local)
	out, _, code := run(t, "verify", "--json", "s3://vfy/ds")
	if code != exitCorrupt || localCode != exitCorrupt {
		t.Fatalf("verify of the replaced object: exit %d (local: %d), want %d", code, localCode, exitCorrupt)
	}
	var rep struct {
		Faults []struct{ File, Kind string }
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, f := range rep.Faults {
		if f.File == "shard-00001.pks" {
			kinds = append(kinds, f.Kind)
		}
	}
	if !slices.Contains(kinds, "sha256") || !slices.Contains(kinds, "checksum") {
		t.Errorf("faults of the replaced shard: %v, want sha256 and checksum", kinds)
	}
	if _, err := srv.Client("").DeleteObject(context.Background(), &awss3.DeleteObjectInput{
		Bucket: aws.String("vfy"), Key: aws.String("ds/shard-00000.pks"),
	}); err != nil {
		t.Fatal(err)
	}
	if out, _, code := run(t, "verify", "s3://vfy/ds"); code != exitCorrupt || !strings.Contains(out, "shard-00000.pks: missing") {
		t.Errorf("verify with a missing object: exit %d, %q", code, out)
	}
}

// TestS3WrongCredentials: a wrong secret key fails build and verify with an error naming
// the bucket and never the secret, before any build work.
func TestS3WrongCredentials(t *testing.T) {
	s3Setup(t, "creds")
	const secret = "not-the-secret-Hq3ZpX81"
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	for _, args := range [][]string{
		{"build", fmnist, "--split", "test", "-o", "s3://creds/ds"},
		{"verify", "s3://creds/ds"},
		{"inspect", "s3://creds/ds"},
	} {
		out, errs, code := run(t, args...)
		if code != exitFailure || !strings.Contains(errs, `bucket "creds" denied`) || strings.Contains(out+errs, secret) {
			t.Errorf("packer %s: exit %d, stdout %q, stderr %q: want exit 1 and an access error naming the bucket, without the secret",
				strings.Join(args, " "), code, out, errs)
		}
		if strings.Contains(errs, "packing") {
			t.Errorf("packer %s started building before checking the bucket: %q", strings.Join(args, " "), errs)
		}
	}
}

// stalledS3Build starts the crash-test binary building to s3://BUCKET/ds and returns once
// the build has sent a part of its first multipart upload and stalls there (until it is
// cancelled). It returns the running command and the build's arguments.
func stalledS3Build(t *testing.T, bucket string, extra ...string) (*exec.Cmd, []string) {
	t.Helper()
	bin := buildBinary(t, "packer_crashtest")
	args := append([]string{"build", fmnist, "--split", "test", "--shard-size", "6MiB", "-o", "s3://" + bucket + "/ds"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "PACKER_TEST_S3_STALL=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(stderr)
	var log []string
	for sc.Scan() {
		log = append(log, sc.Text())
		// part 1 or 2 of shard 0 (6 MiB in 5 MiB parts), or of images.npy, whichever is sent first
		if strings.HasPrefix(sc.Text(), "packer-test: stalled after part ") && (strings.HasSuffix(sc.Text(), "/shard-00000.pks") || strings.HasSuffix(sc.Text(), "/images.npy")) {
			go io.Copy(io.Discard, stderr)
			return cmd, args
		}
	}
	cmd.Wait()
	t.Fatalf("the build ended before its first part was sent:\n%s", strings.Join(log, "\n"))
	return nil, nil
}

// TestS3BuildKilled: a build killed (SIGKILL) in the middle of a multipart upload leaves no
// manifest, so no dataset; its leftovers (objects, the open upload) refuse the next build,
// and the next build with --force aborts the upload, removes them and publishes.
func TestS3BuildKilled(t *testing.T) {
	srv := s3Setup(t, "kill")
	cmd, args := stalledS3Build(t, "kill")
	cmd.Process.Kill()
	cmd.Wait()
	u := s3.URL{Bucket: "kill", Prefix: "ds"}
	if _, ok := objects(t, srv, u)[shard.ManifestName]; ok {
		t.Fatal("a killed build left a manifest")
	}
	if ups := srv.OpenUploads(t, "kill"); len(ups) != 1 {
		t.Fatalf("open uploads after the kill: %v, want the killed one", ups)
	}
	// The build uploads each shard as it is finished: the prefix may hold one without a
	// manifest, which verify reports.
	if out, errs, code := run(t, "verify", "s3://kill/ds"); !(code == exitFailure && strings.Contains(errs, "not a packed dataset") ||
		code == exitCorrupt && strings.Contains(out+errs, "manifest.json")) {
		t.Errorf("verify of the killed build's prefix: exit %d, %q %q", code, out, errs)
	}
	_, errs, code := run(t, args...)
	if code != exitFailure || !strings.Contains(errs, "unfinished multipart uploads that no manifest.json lists") {
		t.Errorf("a build over the leftovers: exit %d, %q; want a refusal", code, errs)
	}
	mustRun(t, append(args, "--force")...)
	if ups := srv.OpenUploads(t, "kill"); len(ups) != 0 {
		t.Errorf("open uploads after the build with --force: %v", ups)
	}
	mustRun(t, "verify", "s3://kill/ds")
}

// TestS3BuildInterrupted: a build interrupted (SIGINT) in the middle of a multipart upload
// exits 130 having aborted the upload and deleted what it had written: no manifest, no
// object, no open upload; the next build needs no --force.
func TestS3BuildInterrupted(t *testing.T) {
	srv := s3Setup(t, "intr")
	cmd, args := stalledS3Build(t, "intr")
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
		t.Errorf("the interrupted build exited %d, want %d", code, exitInterrupted)
	}
	if got := objects(t, srv, s3.URL{Bucket: "intr", Prefix: "ds"}); len(got) != 0 {
		t.Errorf("the interrupted build left objects: %d of them", len(got))
	}
	if ups := srv.OpenUploads(t, "intr"); len(ups) != 0 {
		t.Errorf("open uploads after the interrupt: %v", ups)
	}
	mustRun(t, args...)
	mustRun(t, "verify", "s3://intr/ds")
}

// TestS3ForceNeverDeletesForeignObjects: a prefix that holds objects a packer build does not
// write (the user's own data, or other datasets under sub-prefixes) is refused, --force
// included, and every object stays; only a build's own leftovers are ever removed.
func TestS3ForceNeverDeletesForeignObjects(t *testing.T) {
	srv := s3Setup(t, "mine")
	put := func(key, body string) {
		t.Helper()
		if _, err := srv.Client("").PutObject(context.Background(), &awss3.PutObjectInput{
			Bucket: aws.String("mine"), Key: aws.String(key), Body: strings.NewReader(body),
		}); err != nil {
			t.Fatal(err)
		}
	}
	put("raw/cat.jpg", "the user's photo")
	put("datasets/a/manifest.json", "{}")
	put("datasets/a/shard-00000.pks", "another dataset's shard")
	for _, out := range []string{"s3://mine/raw", "s3://mine/datasets", "s3://mine"} {
		for _, force := range []bool{false, true} {
			args := []string{"build", fmnist, "-o", out}
			if force {
				args = append(args, "--force")
			}
			_, errs, code := run(t, args...)
			if code == 0 || !strings.Contains(errs, "does not write") {
				t.Errorf("build -o %s (force %v): exit %d, stderr %q; want a refusal naming the foreign objects", out, force, code, errs)
			}
		}
	}
	got := objects(t, srv, s3.URL{Bucket: "mine"})
	if string(got["raw/cat.jpg"]) != "the user's photo" || string(got["datasets/a/shard-00000.pks"]) != "another dataset's shard" || len(got) != 3 {
		t.Fatalf("objects after the refused builds: %v", slices.Sorted(func(yield func(string) bool) {
			for k := range got {
				if !yield(k) {
					return
				}
			}
		}))
	}
}

// TestDatasetFileNames: every file each output format writes is a name s3.DatasetFileName
// accepts (the names a build may remove from an interrupted build's prefix), and the names of
// other files are not.
func TestDatasetFileNames(t *testing.T) {
	src, err := cifar.WriteTestDataset(t.TempDir(), cifar.Kind100, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"shards", "npy", "hdf5"} {
		out := filepath.Join(t.TempDir(), format)
		mustRun(t, "build", src, "-o", out, "--format", format, "--shard-size", "8KiB")
		ents, err := os.ReadDir(out)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if !s3.DatasetFileName(e.Name()) {
				t.Errorf("--format %s writes %s, which s3.DatasetFileName refuses", format, e.Name())
			}
		}
	}
	for _, n := range []string{"meta.jsonl", "aux_coarse.npy", "shard-00012.pks"} {
		if !s3.DatasetFileName(n) {
			t.Errorf("%s refused", n)
		}
	}
	for _, n := range []string{"cat.jpg", "a/manifest.json", "shard-00000.pks/x", "notes.txt", "images.npy.bak"} {
		if s3.DatasetFileName(n) {
			t.Errorf("%s accepted", n)
		}
	}
}

// TestS3InspectNpy: an npy dataset in a bucket is read by shard through the storage seam, so
// inspect and preview read it as they read the local one; an HDF5 dataset there (its reader
// reads local files) is refused by name.
func TestS3InspectNpy(t *testing.T) {
	s3Setup(t, "data")
	for _, format := range []string{"npy", "hdf5"} {
		local := filepath.Join(t.TempDir(), "local")
		loc := "s3://data/fm/" + format
		args := []string{"build", fmnist, "--split", "test", "--format", format}
		mustRun(t, append(args, "-o", local)...)
		mustRun(t, append(args, "-o", loc)...)
		if format == "hdf5" {
			_, errs, code := run(t, "inspect", "--records", "1", loc)
			if code == 0 || !strings.Contains(errs, loc+": a hdf5 dataset in object storage cannot be opened by this command yet") {
				t.Errorf("inspect of an HDF5 dataset in a bucket: exit %d, %q", code, errs)
			}
			continue
		}
		li := mustRun(t, "inspect", "--json", "--records", "3", local)
		ri := mustRun(t, "inspect", "--json", "--records", "3", loc)
		if strings.Replace(ri, loc, local, 1) != li {
			t.Errorf("inspect of the bucket differs from inspect of the local build:\n%s\n%s", ri, li)
		}
		lp, rp := filepath.Join(t.TempDir(), "l.png"), filepath.Join(t.TempDir(), "r.png")
		mustRun(t, "preview", local, "-o", lp)
		mustRun(t, "preview", loc, "-o", rp)
		if a, b := readFile(t, lp), readFile(t, rp); !bytes.Equal(a, b) {
			t.Error("preview of the bucket differs from preview of the local build")
		}
	}
}
