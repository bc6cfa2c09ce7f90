package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/packer-dev/packer/pipeline"
)

// TestS3RefusedCredentialsOfADataset: for a dataset that exists, an unknown access key id
// (which the test server answers with 404 and an access error code) and a wrong secret key
// fail every command that reads it with an access error naming the bucket and the store's
// code (exit 1), never as a missing object or "not a packed dataset", never with the secret.
func TestS3RefusedCredentialsOfADataset(t *testing.T) {
	s3Setup(t, "keys")
	mustRun(t, "build", fmnist, "--split", "test", "-o", "s3://keys/ds")
	const secret = "not-the-secret-Wn5cR2yT9a"
	for _, c := range []struct{ name, env, value, code string }{
		{"unknown access key", "AWS_ACCESS_KEY_ID", "no-such-access-key", "XAdminUserNotFound"},
		{"wrong secret", "AWS_SECRET_ACCESS_KEY", secret, "SignatureDoesNotMatch"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(c.env, c.value)
			for _, args := range [][]string{
				{"verify", "s3://keys/ds"},
				{"inspect", "s3://keys/ds"},
				{"bench", "--repeat", "1", "s3://keys/ds"},
				{"build", fmnist, "--split", "test", "-o", "s3://keys/ds"},
				{"build", "s3://keys/ds", "-o", t.TempDir() + "/copy"},
			} {
				out, errs, code := run(t, args...)
				if code != exitFailure || !strings.Contains(errs, `bucket "keys" denied (`+c.code+`)`) ||
					strings.Contains(errs, "no such object") || strings.Contains(errs, "not a packed dataset") ||
					strings.Contains(out+errs, secret) {
					t.Errorf("packer %s: exit %d, stderr %q: want exit 1 and an access error (%s) naming the bucket",
						strings.Join(args, " "), code, errs, c.code)
				}
			}
		})
	}
}

// TestS3BenchObjectChanged: an object replaced between the HEAD that opens it and its GETs
// (conditional on the ETag the HEAD saw) makes bench fail with an error naming the object and
// saying it changed (exit 1), not as an interruption (exit 130): no signal came. The GETs'
// failure cancels the other requests of the pass; the next file's open, cancelled, must not
// take the place of the error that cancelled it.
func TestS3BenchObjectChanged(t *testing.T) {
	srv := s3Setup(t, "bchg")
	mustRun(t, "build", fmnist, "--split", "test", "--shard-size", "6MiB", "-o", "s3://bchg/ds")
	key := "ds/shard-00000.pks"
	got, err := srv.Client("").GetObject(context.Background(), &awss3.GetObjectInput{Bucket: aws.String("bchg"), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	var data bytes.Buffer
	data.ReadFrom(got.Body)
	got.Body.Close()
	b := data.Bytes()
	b[len(b)/2] ^= 1
	testHookRawOpen = func(ctx context.Context, i int, opened bool) {
		switch {
		case i == 0 && opened: // shard 0 is open (its ETag noted), its GETs not sent: replace it
			if _, err := srv.Client("").PutObject(context.Background(), &awss3.PutObjectInput{
				Bucket: aws.String("bchg"), Key: aws.String(key), Body: bytes.NewReader(b),
			}); err != nil {
				t.Error(err)
			}
		case i == 1 && !opened: // shard 1 is opened only once shard 0's refused GET cancelled the pass
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Minute): // a guard against a hang, not a timing
				t.Error("shard 0's GETs, on a replaced object, did not fail")
			}
		}
	}
	t.Cleanup(func() { testHookRawOpen = nil })
	_, errs, code := run(t, "bench", "--repeat", "1", "s3://bchg/ds")
	t.Logf("bench: exit %d, %s", code, errs)
	if code != exitFailure || !strings.Contains(errs, "s3://bchg/"+key) || !strings.Contains(errs, "changed") ||
		strings.Contains(errs, "cancel") {
		t.Errorf("bench over an object replaced after its open: exit %d, %q; want exit 1 and an error naming %s as changed",
			code, errs, key)
	}
}

// TestExitCodeInterrupted: exit 130 (interrupted) is for a command whose context was
// cancelled, that is a signal came; an error that merely wraps context.Canceled (a request
// cancelled inside the command because another failed) is a failure, exit 1.
func TestExitCodeInterrupted(t *testing.T) {
	inner := fmt.Errorf("s3://b/k: HeadObject: %w", context.Canceled)
	if got := exitCode(context.Background(), inner); got != exitFailure {
		t.Errorf("exitCode of a cancelled request without a signal = %d, want %d", got, exitFailure)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := exitCode(ctx, inner); got != exitInterrupted {
		t.Errorf("exitCode after a signal = %d, want %d", got, exitInterrupted)
	}
	if got := exitCode(ctx, nil); got != exitOK {
		t.Errorf("exitCode of success after a late signal = %d, want 0", got)
	}
}

// TestReportInterruptedKeepsCheckpoint: the last line of an interrupted build that kept its
// checkpoint says where it is and to rerun with --resume; without a checkpoint it says
// nothing was committed, and a failure prints its error.
func TestReportInterruptedKeepsCheckpoint(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	kept := fmt.Errorf("build: %w", &pipeline.CheckpointKeptError{Err: context.Canceled, Staging: "/d/out.packer-partial"})
	for _, c := range []struct {
		ctx  context.Context
		err  error
		code int
		want string
	}{
		{ctx, kept, exitInterrupted, "packer: interrupted; nothing was committed; its last checkpoint is kept in /d/out.packer-partial: run the same build with --resume to continue from it\n"},
		{ctx, context.Canceled, exitInterrupted, "packer: interrupted; nothing was committed\n"},
		{context.Background(), errors.New("x: broken"), exitFailure, "packer: x: broken\n"},
	} {
		var w bytes.Buffer
		if code := report(c.ctx, &w, c.err); code != c.code || w.String() != c.want {
			t.Errorf("report(%v) = %d, %q; want %d, %q", c.err, code, w.String(), c.code, c.want)
		}
	}
}
