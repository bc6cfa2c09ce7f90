package s3

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/packer-dev/packer/storage"
)

// TestFolderTimesListing: a view's folder stands for a frames video, its time for the video's
// stamp: two listings that differ below a folder (a frame removed that is not the newest, a
// frame replaced by one of the same time) give it different times, so that a part refuses a
// video whose frames are not the plan's; the same listing gives the same time in every view,
// within the second of the newest object below it.
func TestFolderTimesListing(t *testing.T) {
	base := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	listing := func(drop string, etag3 string) map[string]storage.ViewObject {
		m := map[string]storage.ViewObject{}
		for i, name := range []string{"f1.jpg", "f2.jpg", "f3.jpg"} {
			if name == drop {
				continue
			}
			etag := "e" + name
			if name == "f3.jpg" && etag3 != "" {
				etag = etag3
			}
			m[name] = storage.ViewObject{Size: 10, ModTime: base.Add(time.Duration(i) * time.Second).UnixNano(), ETag: etag}
		}
		return m
	}
	stamp := func(files map[string]storage.ViewObject) time.Time {
		dir := filepath.Join(t.TempDir(), "v")
		vid := filepath.Join(dir, "class", "video1")
		if err := os.MkdirAll(vid, 0o755); err != nil {
			t.Fatal(err)
		}
		abs := map[string]storage.ViewObject{}
		for name, o := range files {
			abs[filepath.Join(vid, name)] = o
		}
		if err := folderTimes(dir, abs); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(vid)
		if err != nil {
			t.Fatal(err)
		}
		return st.ModTime()
	}
	all := stamp(listing("", ""))
	newest := base.Add(2 * time.Second)
	if again := stamp(listing("", "")); !again.Equal(all) {
		t.Errorf("one listing, two views: folder times %v and %v", all, again)
	}
	if all.Before(newest) || !all.Before(newest.Add(time.Second)) {
		t.Errorf("folder time %v, want within the second of the newest object %v", all, newest)
	}
	if got := stamp(listing("f1.jpg", "")); got.Equal(all) {
		t.Errorf("a frame removed (not the newest): the folder keeps the time %v", got)
	}
	if got := stamp(listing("", "other")); got.Equal(all) {
		t.Errorf("the newest frame replaced by one of the same time: the folder keeps the time %v", got)
	}
}
