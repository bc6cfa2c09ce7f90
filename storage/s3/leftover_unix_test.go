//go:build unix

package s3_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/packer-dev/packer/storage"
	"github.com/packer-dev/packer/storage/s3"
	"github.com/packer-dev/packer/storage/s3/s3test"
	"github.com/packer-dev/packer/storage/storagetest"
)

// fetchLeftovers puts, in folder, the temporary file of a fetch whose process was killed
// (unlocked) and that of a fetch running in another process (locked, by an open file that
// stays open until the test ends), and returns their paths.
func fetchLeftovers(t *testing.T, folder string) (dead, live string) {
	t.Helper()
	dead, live = filepath.Join(folder, ".packer-fetch-111"), filepath.Join(folder, ".packer-fetch-222")
	for _, p := range []string{dead, live} {
		if err := os.WriteFile(p, []byte("part of an object"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := storage.OpenLockFile(live)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if ok, err := storage.TryLock(f); !ok || err != nil {
		t.Fatalf("lock %s: %v %v", live, ok, err)
	}
	return dead, live
}

func checkLeftovers(t *testing.T, what, dead, live string) {
	t.Helper()
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("%s: the temporary file of a killed fetch is still there (%v)", what, err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("%s: the temporary file of a fetch running elsewhere was removed: %v", what, err)
	}
}

// TestFetchLeftovers: a --source-cache folder (Download) and a reader's CacheDir shared by
// several processes: the temporary file of a fetch killed mid-object is removed by the next
// Download, or the next fetch of that object, and that of a fetch in progress in another
// process never is.
func TestFetchLeftovers(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "left")
	ctx := context.Background()
	u := s3.URL{Bucket: "left", Prefix: "src"}
	plain := s3.NewWithClient(srv.Client(""), u, s3.Options{})
	storagetest.Put(t, plain, "a/1.jpg", []byte("one"))
	dir := filepath.Join(t.TempDir(), "mirror")
	if _, err := plain.Download(ctx, dir, storage.DownloadOptions{}); err != nil {
		t.Fatal(err)
	}
	dead, live := fetchLeftovers(t, filepath.Join(dir, "a"))
	storagetest.Put(t, plain, "a/1.jpg", []byte("changed"))
	if _, err := plain.Download(ctx, dir, storage.DownloadOptions{}); err != nil {
		t.Fatal(err)
	}
	checkLeftovers(t, "Download", dead, live)

	cache := t.TempDir()
	cached := s3.NewWithClient(srv.Client(""), u, s3.Options{CacheDir: cache})
	storagetest.Get(t, cached, "a/1.jpg")
	dead, live = fetchLeftovers(t, filepath.Join(cache, "left", "src", "a"))
	storagetest.Put(t, plain, "a/1.jpg", []byte("changed again"))
	if got := storagetest.Get(t, cached, "a/1.jpg"); string(got) != "changed again" {
		t.Fatalf("read through the cache: %q", got)
	}
	checkLeftovers(t, "CacheDir", dead, live)
}
