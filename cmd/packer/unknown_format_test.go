package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/packer-dev/packer/storage/s3"
)

// TestUnknownFormatRefused: a dataset whose sealed manifest names a format no row of the
// output table has is refused by every command that reads it, naming its manifest and the
// format: verify reports it as a fault (exit 3, never "OK" from the hashes alone), inspect,
// preview and bench fail (exit 1), merge refuses such a part (exit 1), and build and merge
// with --force refuse to replace it (exit 2: it is not a packer dataset).
func TestUnknownFormatRefused(t *testing.T) {
	root := t.TempDir()
	src := filepath.Join(root, "src")
	writePNGFolder(t, src, 2)
	zarr := func(name string, args ...string) string {
		dir := filepath.Join(root, name)
		mustRun(t, append([]string{"build", src, "--from", "folder", "-o", dir}, args...)...)
		editManifest(t, dir, func(m map[string]any) { m["format"] = "zarr" })
		return dir
	}
	ds := zarr("ds")
	manifest := filepath.Join(ds, "manifest.json")
	want := fmt.Sprintf("%s: invalid manifest: unknown format %q", manifest, "zarr")
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"verify", ds}, exitCorrupt},
		{[]string{"verify", "--json", ds}, exitCorrupt},
		{[]string{"inspect", ds}, exitFailure},
		{[]string{"preview", ds, "-o", filepath.Join(root, "preview.png")}, exitFailure},
		{[]string{"bench", ds}, exitFailure},
	} {
		out, errs, code := run(t, c.args...)
		if c.args[1] == "--json" {
			out = strings.ReplaceAll(out, `\"`, `"`)
		}
		if code != c.code || !strings.Contains(out+errs, want) {
			t.Errorf("%s: exit %d, want %d saying %q:\nstdout: %s\nstderr: %s", strings.Join(c.args, " "), code, c.code, want, out, errs)
		}
		if strings.Contains(out, `"ok": true`) || strings.Contains(out, "OK") {
			t.Errorf("%s: reported OK:\n%s", strings.Join(c.args, " "), out)
		}
	}

	part0 := filepath.Join(root, "p0")
	mustRun(t, "build", src, "--from", "folder", "-o", part0, "--part", "0/2")
	part1 := zarr("p1", "--part", "1/2")
	_, errs, code := run(t, "merge", "-o", filepath.Join(root, "merged"), part0, part1)
	wantPart := fmt.Sprintf("%s: invalid manifest: unknown format %q", filepath.Join(part1, "manifest.json"), "zarr")
	if code != exitFailure || !strings.Contains(errs, wantPart) {
		t.Errorf("merge of a part of an unknown format: exit %d, want %d saying %q:\n%s", code, exitFailure, wantPart, errs)
	}

	part1ok := filepath.Join(root, "p1ok")
	mustRun(t, "build", src, "--from", "folder", "-o", part1ok, "--part", "1/2")
	for _, args := range [][]string{
		{"build", src, "--from", "folder", "-o", ds, "--force"},
		{"merge", "-o", ds, "--force", part0, part1ok},
	} {
		before, err := os.ReadFile(manifest)
		if err != nil {
			t.Fatal(err)
		}
		_, errs, code := run(t, args...)
		if code != exitUsage || !strings.Contains(errs, ds) || !strings.Contains(errs, "is not a packer manifest") {
			t.Errorf("%s: exit %d, want %d naming %s as not a packer dataset:\n%s", strings.Join(args, " "), code, exitUsage, ds, errs)
		}
		if after, _ := os.ReadFile(manifest); string(after) != string(before) {
			t.Errorf("%s replaced the dataset of an unknown format", strings.Join(args, " "))
		}
	}
}

// TestS3UnknownFormatRefused: in an object store too, a dataset whose manifest names a format
// the output table lacks is a fault for verify and is never replaced by a build with --force
// (its objects stay), the refusal naming the manifest and the format.
func TestS3UnknownFormatRefused(t *testing.T) {
	srv := s3Setup(t, "unk")
	root := t.TempDir()
	src := filepath.Join(root, "src")
	writePNGFolder(t, src, 2)
	ds := filepath.Join(root, "ds")
	mustRun(t, "build", src, "--from", "folder", "-o", ds)
	editManifest(t, ds, func(m map[string]any) { m["format"] = "zarr" })
	ents, err := os.ReadDir(ds)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if _, err := srv.Client("").PutObject(context.Background(), &awss3.PutObjectInput{
			Bucket: aws.String("unk"), Key: aws.String("ds/" + e.Name()), Body: bytes.NewReader(readFile(t, filepath.Join(ds, e.Name()))),
		}); err != nil {
			t.Fatal(err)
		}
	}
	before := objects(t, srv, s3.URL{Bucket: "unk", Prefix: "ds"})
	want := `manifest.json: invalid manifest: unknown format "zarr"`
	if out, _, code := run(t, "verify", "s3://unk/ds"); code != exitCorrupt || !strings.Contains(out, want) {
		t.Errorf("verify: exit %d, want %d saying %q:\n%s", code, exitCorrupt, want, out)
	}
	_, errs, code := run(t, "build", src, "--from", "folder", "-o", "s3://unk/ds", "--force")
	if code != exitFailure || !strings.Contains(errs, "the dataset to replace: "+want) {
		t.Errorf("build --force over it: exit %d, want %d saying %q:\n%s", code, exitFailure, want, errs)
	}
	if after := objects(t, srv, s3.URL{Bucket: "unk", Prefix: "ds"}); !mapsEqualBytes(after, before) {
		t.Errorf("build --force changed the objects of the dataset of an unknown format")
	}
}
