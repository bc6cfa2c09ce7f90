package s3_test

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/storage"
	"github.com/packer-dev/packer/storage/s3"
	"github.com/packer-dev/packer/storage/s3/s3test"
	"github.com/packer-dev/packer/storage/storagetest"
)

// lostManifestAnswer is a plan that, while lose is set, loses the answer to the next PUT of
// manifest.json (and clears lose): the store writes it, the client is told 500 and tries again.
func lostManifestAnswer(lose *atomic.Bool) s3test.FaultPlan {
	return func(r *http.Request, _, _ int) s3test.Fault {
		if r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/"+shard.ManifestName) && lose.CompareAndSwap(true, false) {
			return s3test.LostAnswer
		}
		return s3test.None
	}
}

// TestPublishManifestAnswerLost: the answer to the manifest's conditional write is lost after
// the store wrote it (a 500 to a request that was carried out, which S3 documents), so the retry
// is refused (the manifest exists, or no longer has the ETag replaced). The manifest there is
// this publish's, so the publish succeeded: it must say so, and above all keep the files the
// manifest lists, for a new prefix and for a dataset replaced. Before, it took the refusal for
// another build's dataset and deleted its files under its own manifest: a published dataset
// that verify refuses.
func TestPublishManifestAnswerLost(t *testing.T) {
	var lose atomic.Bool
	b, px := faultyBackend(t, "lost", lostManifestAnswer(&lose))
	ctx := context.Background()
	check := func(what, dir string) {
		t.Helper()
		m, err := shard.ReadManifestFS(storage.ShardFS(ctx, b))
		if err != nil {
			t.Fatalf("%s: the published manifest: %v", what, err)
		}
		local, err := shard.ReadManifest(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Files) != len(local.Files) {
			t.Fatalf("%s: the published manifest lists %d files, the dataset has %d", what, len(m.Files), len(local.Files))
		}
		for i, fe := range m.Files {
			want, err := os.ReadFile(filepath.Join(dir, local.Files[i].Path))
			if err != nil {
				t.Fatal(err)
			}
			if got := storagetest.Get(t, b, fe.Path); !bytes.Equal(got, want) {
				t.Errorf("%s: %s, which the published manifest lists, is not the file published (%d bytes)", what, fe.Path, len(got))
			}
		}
	}
	first := fakeDataset(t, 1, 1000, 2000)
	lose.Store(true)
	if err := b.Publish(ctx, first, s3.PublishOptions{}); err != nil {
		t.Errorf("publish to a new prefix, its manifest's answer lost: %v", err)
	}
	check("new prefix", first)
	second := fakeDataset(t, 2, 3000, 500, 700)
	lose.Store(true)
	if err := b.Publish(ctx, second, s3.PublishOptions{Replace: true}); err != nil {
		t.Errorf("publish replacing a dataset, its manifest's answer lost: %v", err)
	}
	check("replaced", second)
	if n := px.Injected()[s3test.LostAnswer]; n != 2 {
		t.Errorf("%d answers lost; want 2", n)
	}
}

// TestPublishManifestTakenAwayFirst: when the manifest, once written, cannot be read back (here
// every GET of it fails), the publish fails and takes its dataset away: the manifest first, its
// files only once it is gone. Where the manifest cannot be deleted either, the files must stay:
// before, they were deleted first and the manifest left listing them, a published dataset whose
// files are gone.
func TestPublishManifestTakenAwayFirst(t *testing.T) {
	var written atomic.Bool // the manifest was written: from then on, no GET or DELETE of it works
	plan := func(r *http.Request, _, _ int) s3test.Fault {
		if !strings.HasSuffix(r.URL.Path, "/"+shard.ManifestName) {
			return s3test.None
		}
		if r.Method == http.MethodPut {
			written.Store(true)
		} else if written.Load() && (r.Method == http.MethodGet || r.Method == http.MethodDelete) {
			return s3test.Status500
		}
		return s3test.None
	}
	b, _ := faultyBackend(t, "takeaway", plan)
	ctx := context.Background()
	dir := fakeDataset(t, 1, 1000, 2000)
	err := b.Publish(ctx, dir, s3.PublishOptions{})
	t.Logf("publish: %v", err)
	if err == nil {
		t.Fatal("a publish whose manifest cannot be read back succeeded")
	}
	got := listAll(t, b)
	if _, ok := got[shard.ManifestName]; ok && len(got) != 3 {
		t.Errorf("the manifest is left, its files are not: %v", got)
	}
}
