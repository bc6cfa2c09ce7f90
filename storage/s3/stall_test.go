package s3_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/packer-dev/packer/storage/s3"
	"github.com/packer-dev/packer/storage/s3/s3test"
)

// TestStallsRetried: through a proxy that stalls about a third of all requests once (no answer,
// or a GET body stopped halfway) for far longer than the backend's stall timeout, objects
// written (whole and multipart) and read back have their bytes; a store that stalls every
// answer is given up on after the bounded tries, the error naming the object, the stall and
// the count.
func TestStallsRetried(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "stalls")
	px := s3test.StartFaultProxy(t, srv, s3test.Stalls)
	px.StallFor = 3 * time.Second
	srv.SetEnv(t)
	t.Setenv("AWS_ENDPOINT_URL", px.Endpoint)
	b, err := s3.New(context.Background(), s3.URL{Bucket: "stalls", Prefix: "p"}, s3.Options{PartSize: 5 << 20, StallTimeout: 250 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	files := putRandomFiles(t, b, rand.New(rand.NewPCG(5, 6)), []int{10, 70 << 10, 1 << 20, 11 << 20})
	for n, d := range files {
		r, err := b.Open(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(d))
		if _, err := r.ReadAt(got, 0); err != nil || !bytes.Equal(got, d) {
			t.Fatalf("%s: read back: %v (same bytes: %v)", n, err, bytes.Equal(got, d))
		}
		r.Close()
	}
	t.Logf("faults injected: %s", px.Summary())
	if inj := px.Injected(); inj[s3test.Stall] == 0 || inj[s3test.StallBody] == 0 {
		t.Errorf("faults injected: %s; want stalls before the answer and mid-body", px.Summary())
	}

	px.SetPlan(s3test.Always(http.MethodGet, s3test.StallBody))
	r, err := b.Open(ctx, "f02.bin")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	start := time.Now()
	_, err = r.ReadAt(make([]byte, 1<<20), 0)
	msg := fmt.Sprint(err)
	for _, w := range []string{"s3://stalls/p/f02.bin", "stalled", "gave up after 5 attempts"} {
		if !strings.Contains(msg, w) {
			t.Errorf("a read of a store that always stalls: error %q lacks %q", msg, w)
		}
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("giving up took %v", d)
	}
}
