package s3

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/packer-dev/packer/storage/s3/s3test"
	"github.com/packer-dev/packer/storage/storagetest"
)

// TestRefusedRead: the ranged GETs of an object opened with good credentials, sent with an
// unknown access key id or a wrong secret (credentials rotated or revoked while a dataset is
// read), are access errors, not a missing object; the same GET with good credentials after
// the object was replaced is refused (If-Match) as a changed object, matching ErrChanged and
// neither fs.ErrExist nor a cancellation.
func TestRefusedRead(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "reads")
	u := URL{Bucket: "reads", Prefix: "ds"}
	good := NewWithClient(srv.Client(""), u, Options{})
	storagetest.Put(t, good, "obj", []byte("an object that exists"))
	ctx := context.Background()
	opened, err := good.openStore(ctx, "obj")
	if err != nil {
		t.Fatal(err)
	}
	const secret = "wrong-secret-Tr6mW3kZ8qJ1"
	for _, c := range []struct{ access, secret, code string }{
		{"no-such-access-key", "", "XAdminUserNotFound"},
		{"", secret, "SignatureDoesNotMatch"},
	} {
		r := *opened
		r.b = NewWithClient(srv.ClientKeys(c.access, c.secret), u, Options{})
		for _, n := range []int{3, smallRead + 1} { // a chunk read and a direct GET
			_, err := r.ReadAt(make([]byte, n), 0)
			if err == nil || !errors.Is(err, ErrAccess) || errors.Is(err, fs.ErrNotExist) ||
				!strings.Contains(err.Error(), c.code) || strings.Contains(err.Error(), secret) {
				t.Errorf("a %d-byte read with refused credentials (%s): %v; want an access error naming the code", n, c.code, err)
			}
		}
	}
	storagetest.Put(t, good, "obj", []byte("another object, same name"))
	_, err = opened.ReadAt(make([]byte, 3), 0)
	if err == nil || !errors.Is(err, ErrChanged) || errors.Is(err, fs.ErrExist) || errors.Is(err, context.Canceled) ||
		!strings.Contains(err.Error(), "s3://reads/ds/obj") || !strings.Contains(err.Error(), "changed") {
		t.Errorf("a read of a replaced object: %v; want ErrChanged naming the object", err)
	}
}
