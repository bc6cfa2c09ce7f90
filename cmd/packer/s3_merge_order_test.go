package main

import (
	"strings"
	"testing"

	"github.com/packer-dev/packer/storage/s3"
)

// TestS3MergeByCopyPartsAnyOrder: parts given out of their index order merge by server-side
// copy into the same bytes as the local build, as a local merge takes them in any order (each
// part's check reads that part, not the one given in its place).
func TestS3MergeByCopyPartsAnyOrder(t *testing.T) {
	srv := s3Setup(t, "oparts")
	srv.Bucket(t, "oout")
	t.Setenv("AWS_ENDPOINT_URL", srv.Endpoint)
	want, parts := localAndTwoParts(t, []string{"--split", "test", "--cut-inputs", "3000"}, "s3://oparts/p")
	stdout, errs, code := run(t, "merge", "-o", "s3://oout/m", parts[1], parts[0])
	if code != 0 || !strings.Contains(stdout, "by server-side copy") {
		t.Fatalf("merge of the parts given as 1, 0: exit %d\n%s%s", code, stdout, errs)
	}
	if got := objects(t, srv, s3.URL{Bucket: "oout", Prefix: "m"}); !mapsEqualBytes(got, want) {
		t.Errorf("the merged objects differ from the local build's files (%d objects, %d files)", len(got), len(want))
	}
}
