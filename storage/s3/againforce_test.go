package s3_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/storage"
	"github.com/packer-dev/packer/storage/s3"
	"github.com/packer-dev/packer/storage/s3/s3test"
)

// TestLeftoversNameTheCommand: the leftovers of a killed merge (a shard copied and its claim)
// refuse a stage and a merge by copy, and the refusal asks for the command that met them to be
// run again with --force: "merge again" for a merge, "build again" for a build (the default).
func TestLeftoversNameTheCommand(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "left")
	ctx := context.Background()
	for _, key := range []string{"ds/shard-00000.pks", "ds/" + s3.ClaimName} {
		if _, err := srv.Client("").PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("left"), Key: aws.String(key), Body: bytes.NewReader([]byte("{}"))}); err != nil {
			t.Fatal(err)
		}
	}
	b := s3.NewWithClient(srv.Client(""), s3.URL{Bucket: "left", Prefix: "ds"}, s3.Options{})
	tmp := t.TempDir()
	staging := func() (*storage.Staging, error) { return storage.NewStaging(tmp, "st-*") }
	check := func(what string, err error, want, not string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), not) {
			t.Errorf("%s over a killed merge's leftovers: %v; want a refusal saying %q", what, err, want)
		}
	}
	_, err := b.Stage(ctx, storage.StageOptions{Staging: staging, Command: "merge"})
	check("a merge's stage", err, "merge again with --force", "build again")
	_, err = b.Stage(ctx, storage.StageOptions{Staging: staging})
	check("a build's stage", err, "build again with --force", "merge again")
	m := &shard.Manifest{Files: []shard.FileEntry{}}
	err = b.CopyPublish(ctx, m, []byte("{}"), nil, s3.CopyOptions{PublishOptions: s3.PublishOptions{Command: "merge"}})
	check("a merge by copy", err, "merge again with --force", "build again")
	t.Logf("refused: %v", err)
}
