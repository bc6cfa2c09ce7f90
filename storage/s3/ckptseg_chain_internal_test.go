package s3

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packer-dev/packer/storage"
	"github.com/packer-dev/packer/storage/s3/s3test"
)

// TestCheckpointSegmentsForget: uploads recorded, forgotten (a resume past a damaged shard
// forgets those after it) and recorded anew with another ETag, with journals whose arrays
// shrink (the marks thinned, the shard list cut) and whose members come and go, written as
// checkpoints merged into segments: a resume on another machine after any number of them
// takes exactly the last record of the uploads and the last journal's bytes.
func TestCheckpointSegmentsForget(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "fseg")
	b := NewWithClient(srv.Client(""), URL{Bucket: "fseg", Prefix: "ds"}, Options{})
	ctx := context.Background()
	tmp := t.TempDir()
	open := func(dir string, resume bool) *StreamStage {
		t.Helper()
		opts := storage.StageOptions{Staging: func() (*storage.Staging, error) { return storage.OpenStaging(filepath.Join(tmp, dir), "stage") }}
		s, err := b.StreamStage(ctx, opts, resume)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Release)
		return s
	}
	rng := rand.New(rand.NewPCG(11, 12))
	a := open("a", false)
	sent := map[string]sentObject{}
	var files []string
	for n := range 40 {
		switch rng.IntN(4) {
		case 0: // forget the last few uploads, the shard list cut with them
			k := rng.IntN(len(files) + 1)
			for _, f := range files[k:] {
				delete(sent, f)
			}
			files = files[:k]
		default:
			f := fmt.Sprintf("shard-%05d.pks", len(files))
			files = append(files, f)
			sent[f] = sentObject{Size: int64(n), SHA256: fmt.Sprintf("%02x", n), ETag: fmt.Sprint("e", n)}
		}
		a.mu.Lock()
		a.st.Sent = maps.Clone(sent)
		a.mu.Unlock()
		quoted := make([]string, len(files))
		for i, f := range files {
			quoted[i] = fmt.Sprintf("%q", f)
		}
		extra := ""
		if n%3 == 0 {
			extra = fmt.Sprintf(`,"next":"in-%d"`, n)
		}
		journal := fmt.Appendf(nil, `{"inputs":%d%s,"marks":[%s],"output":{"files":[%s]}}`, n, extra, strings.Repeat(`{"m":1},`, n%5)+`{"m":0}`, strings.Join(quoted, ","))
		if err := a.SaveCheckpoint(journal); err != nil {
			t.Fatal(err)
		}
		if n%7 != 6 {
			continue
		}
		r := open(fmt.Sprintf("r%d", n), true)
		if got := r.TakenJournal(); !bytes.Equal(got, journal) {
			t.Fatalf("after %d checkpoints a resume elsewhere took the journal %s; want %s", n+1, got, journal)
		}
		if !maps.Equal(r.st.Sent, sent) {
			t.Fatalf("after %d checkpoints a resume elsewhere took the uploads %v; want %v", n+1, r.st.Sent, sent)
		}
		// The resume took OUT over: the next checkpoints are the resumed build's.
		a = r
	}
}
