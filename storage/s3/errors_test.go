package s3_test

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/packer-dev/packer/storage"
	"github.com/packer-dev/packer/storage/s3"
	"github.com/packer-dev/packer/storage/s3/s3test"
	"github.com/packer-dev/packer/storage/storagetest"
)

// backendRequests runs every kind of request a Backend sends about the object "obj" below
// s3://BUCKET/ds (HEAD through Stat and Open, LIST, PUT, Download) and returns each one's
// error by name. (The ranged GET of a reader: TestRefusedRead.)
func backendRequests(t *testing.T, b *s3.Backend) map[string]error {
	t.Helper()
	ctx := context.Background()
	errs := map[string]error{}
	_, errs["stat"] = b.Stat(ctx, "obj")
	_, errs["open"] = b.Open(ctx, "obj")
	errs["list"] = b.List(ctx, func(storage.FileInfo) error { return nil })
	w, err := b.Create(ctx, "new")
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("x"))
	errs["put"] = w.Commit(ctx)
	_, errs["download"] = b.Download(ctx, filepath.Join(t.TempDir(), "copy"), storage.DownloadOptions{NoRecord: true})
	return errs
}

// TestRefusedCredentialsOfAnExistingObject: an unknown access key id and a wrong secret key,
// for an object that exists, are access errors (matching s3.ErrAccess, never fs.ErrNotExist,
// naming the store's code and the bucket, never the secret), for every request: the HEAD
// requests too, whose responses carry no body and so no error code. The test server answers
// an unknown key id with 404 and the code XAdminUserNotFound, and a HEAD with a wrong key
// with a bare 404, as a missing object's.
func TestRefusedCredentialsOfAnExistingObject(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "refused")
	u := s3.URL{Bucket: "refused", Prefix: "ds"}
	good := s3.NewWithClient(srv.Client(""), u, s3.Options{})
	storagetest.Put(t, good, "obj", []byte("an object that exists"))
	const secret = "wrong-secret-Lp4vQ9sX2nB7"
	for _, c := range []struct {
		name, access, secret, code string
	}{
		{"unknown access key", "no-such-access-key", "", "XAdminUserNotFound"},
		{"wrong secret", "", secret, "SignatureDoesNotMatch"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := s3.NewWithClient(srv.ClientKeys(c.access, c.secret), u, s3.Options{})
			for op, err := range backendRequests(t, b) {
				checkAccessError(t, op, err, c.code, secret)
			}
		})
	}
}

func checkAccessError(t *testing.T, op string, err error, code, secret string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: a request with refused credentials succeeded", op)
		return
	}
	msg := err.Error()
	if !errors.Is(err, s3.ErrAccess) || errors.Is(err, fs.ErrNotExist) || !strings.Contains(msg, `"refused"`) ||
		!strings.Contains(msg, code) || strings.Contains(msg, secret) {
		t.Errorf("%s: %q: want an access error (%s) naming the bucket, not a missing object, without the secret", op, msg, code)
	}
}

// TestMissingObjectAndBucket: with good credentials, a missing object and a missing bucket
// are told apart, by HEAD requests too (whose 404 carries no code): both match fs.ErrNotExist,
// the bucket's error says the bucket does not exist, the object's that the object does not.
func TestMissingObjectAndBucket(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "present")
	ctx := context.Background()
	b := s3.NewWithClient(srv.Client(""), s3.URL{Bucket: "present", Prefix: "ds"}, s3.Options{})
	nb := s3.NewWithClient(srv.Client(""), s3.URL{Bucket: "absent", Prefix: "ds"}, s3.Options{})
	_, statObj := b.Stat(ctx, "missing")
	_, openObj := b.Open(ctx, "missing")
	_, statBucket := nb.Stat(ctx, "missing")
	_, openBucket := nb.Open(ctx, "missing")
	listBucket := nb.List(ctx, func(storage.FileInfo) error { return nil })
	for _, err := range []error{statObj, openObj} {
		if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "no such object") || !strings.Contains(err.Error(), "s3://present/ds/missing") {
			t.Errorf("a missing object: %v", err)
		}
	}
	for _, err := range []error{statBucket, openBucket, listBucket} {
		if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), `bucket "absent" does not exist`) {
			t.Errorf("a missing bucket: %v", err)
		}
	}
}

// TestWrongRegion: a client signing for another region than the store's is told so, by a
// HEAD request too (whose 400 carries no code), not "Bad Request".
func TestWrongRegion(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "region")
	storagetest.Put(t, s3.NewWithClient(srv.Client(""), s3.URL{Bucket: "region", Prefix: "ds"}, s3.Options{}), "obj", []byte("x"))
	client := awss3.New(awss3.Options{
		BaseEndpoint: aws.String(srv.Endpoint), Region: "eu-west-1", UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(s3test.AccessKey, s3test.SecretKey, ""),
	})
	b := s3.NewWithClient(client, s3.URL{Bucket: "region", Prefix: "ds"}, s3.Options{})
	ctx := context.Background()
	_, statErr := b.Stat(ctx, "obj")
	listErr := b.List(ctx, func(storage.FileInfo) error { return nil })
	for _, err := range []error{statErr, listErr} {
		if err == nil || errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "AWS_REGION") {
			t.Errorf("a request signed for the wrong region: %v; want an error saying to set AWS_REGION", err)
		}
	}
}
