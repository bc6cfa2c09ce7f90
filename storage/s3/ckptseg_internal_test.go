package s3

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/packer-dev/packer/storage"
	"github.com/packer-dev/packer/storage/s3/s3test"
)

// TestJSONDeltaChain: journals shaped as the engine's (members that change, arrays that grow,
// an object member holding a growing array) made again from their deltas, composed as a
// checkpoint merges its segments, are the journals' bytes; a journal that is not JSON is
// taken whole.
func TestJSONDeltaChain(t *testing.T) {
	var journals [][]byte
	for n := range 37 {
		files, skipped := []string{}, []string{}
		for k := range n {
			files = append(files, fmt.Sprintf(`{"path":"shard-%05d.pks","size":%d}`, k, 1000+k))
			if k%5 == 0 {
				skipped = append(skipped, fmt.Sprintf(`{"input":"a <%d>.jpg"}`, k))
			}
		}
		journals = append(journals, fmt.Appendf(nil, `{"packer":"1","inputs":%d,"counts":[%d,%d],"skipped":[%s],"output":{"files":[%s]},"journal_sha256":"%x"}`,
			n*10, n, 2*n, strings.Join(skipped, ","), strings.Join(files, ","), n))
	}
	journals = append(journals, []byte("not JSON"), []byte(`{"a":[1]}`))
	var deltas []jdelta
	var prev []byte
	for i, j := range journals {
		d := diffJSON(prev, j)
		if i > 1 && i < 37 && d.Kind != deltaObj {
			t.Errorf("journal %d: a delta of kind %q; want the members' changes", i, d.Kind)
		}
		got, err := d.apply(prev)
		if err != nil || !bytes.Equal(got, j) {
			t.Fatalf("journal %d made from its delta: %q, %v; want %q", i, got, err, j)
		}
		deltas, prev = append(deltas, d), j
	}
	// Composed as segments are merged (any split into runs): the last journal again.
	for split := 1; split < len(deltas); split += 7 {
		var a, b jdelta
		var err error
		for i, d := range deltas {
			run := &a
			if i >= split {
				run = &b
			}
			if run.Kind == "" {
				*run = d
			} else if *run, err = composeJSON(*run, d); err != nil {
				t.Fatal(err)
			}
		}
		mid, err := a.apply(nil)
		if err != nil || !bytes.Equal(mid, journals[split-1]) {
			t.Fatalf("the first %d deltas composed make %q, %v; want %q", split, mid, err, journals[split-1])
		}
		last, err := b.apply(mid)
		if err != nil || !bytes.Equal(last, prev) {
			t.Fatalf("the deltas from %d composed make %q, %v; want %q", split, last, err, prev)
		}
	}
}

// TestCheckpointSegments: a build's checkpoint names few segments however many checkpoints
// were taken; a resume on another machine makes the last journal and record of the uploads
// from them; a checkpoint written by a packer before segments (the record and the journal in
// the object itself) is still resumed from; a segment edited in the bucket is refused, naming
// it.
func TestCheckpointSegments(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "seg")
	b := NewWithClient(srv.Client(""), URL{Bucket: "seg", Prefix: "ds"}, Options{})
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
	a := open("a", false)
	var journal []byte
	for n := range 100 {
		a.mu.Lock()
		a.st.Sent[fmt.Sprintf("shard-%05d.pks", n)] = sentObject{Size: int64(n), SHA256: "00", ETag: fmt.Sprint(n)}
		a.mu.Unlock()
		journal = fmt.Appendf(nil, `{"inputs":%d,"output":{"files":[%s]}}`, n, strings.Repeat(`{"f":1},`, n)+`{"f":1}`)
		if err := a.SaveCheckpoint(journal); err != nil {
			t.Fatal(err)
		}
	}
	data, _, err := b.readControl(ctx, CheckpointName)
	if err != nil {
		t.Fatal(err)
	}
	var cp bucketCheckpoint
	if err := json.Unmarshal(data, &cp); err != nil || len(cp.Segments) == 0 || len(cp.Segments) > 8 {
		t.Fatalf("the checkpoint after 101 writes names %d segments (%v); want a few", len(cp.Segments), err)
	}
	segs := 0
	b.List(ctx, func(fi storage.FileInfo) error {
		if segmentName(fi.Name) {
			segs++
		}
		return nil
	})
	if segs != len(cp.Segments) {
		t.Errorf("%d segment objects in the bucket, the checkpoint names %d: the merged ones are left", segs, len(cp.Segments))
	}
	r := open("b", true)
	if !bytes.Equal(r.TakenJournal(), journal) || len(r.st.Sent) != 100 || r.st.Sent["shard-00042.pks"].ETag != "42" {
		t.Fatalf("the resume elsewhere took the journal %q and %d uploads; want %q and 100", r.TakenJournal(), len(r.st.Sent), journal)
	}
	// The resumed build's first checkpoint replaces the segments it went on from.
	if err := r.SaveCheckpoint(journal); err != nil {
		t.Fatal(err)
	}
	segs = 0
	b.List(ctx, func(fi storage.FileInfo) error {
		if segmentName(fi.Name) {
			segs++
		}
		return nil
	})
	if segs != 1 {
		t.Errorf("%d segment objects after the resumed build's first checkpoint; want its one", segs)
	}

	// A checkpoint of a packer before segments.
	etag, err := b.etag(ctx, CheckpointName)
	if err != nil {
		t.Fatal(err)
	}
	old, err := json.Marshal(map[string]any{"owner": "x", "host": "h", "pid": 1,
		"uploads": streamState{URL: b.url.String(), Sent: map[string]sentObject{"shard-00000.pks": {Size: 5, ETag: "e"}}}, "journal": []byte("old journal")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.putControl(ctx, CheckpointName, old, etag); err != nil {
		t.Fatal(err)
	}
	o := open("c", true)
	if string(o.TakenJournal()) != "old journal" || len(o.st.Sent) != 1 {
		t.Errorf("the resume from an old checkpoint took the journal %q and %d uploads; want %q and 1", o.TakenJournal(), len(o.st.Sent), "old journal")
	}

	// An edited segment.
	if err := o.SaveCheckpoint([]byte("journal 2")); err != nil {
		t.Fatal(err)
	}
	o.mu.Lock()
	name := o.st.Segments[0]
	o.mu.Unlock()
	if _, err := b.client.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("seg"), Key: aws.String("ds/" + name),
		Body: bytes.NewReader([]byte(`{"url":"s3://elsewhere/ds","journal":{"k":"lit"}}`))}); err != nil {
		t.Fatal(err)
	}
	opts := storage.StageOptions{Staging: func() (*storage.Staging, error) { return storage.OpenStaging(filepath.Join(tmp, "d"), "stage") }}
	if _, err := b.StreamStage(ctx, opts, true); err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "SHA-256") {
		t.Errorf("a resume over an edited segment: %v; want a refusal naming it and its SHA-256", err)
	}
	// A segment of the right SHA-256 whose change does not apply.
	bad := []byte(`{"url":"s3://seg/ds","generation":"","journal":{"k":"app","app":["MQ=="]}}`)
	_, ref, err := encodeSegment(segment{}, segmentPrefix+"bad.json", 0)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(bad)
	ref.Size, ref.SHA256 = int64(len(bad)), hex.EncodeToString(sum[:])
	if _, err := b.client.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("seg"), Key: aws.String("ds/" + ref.Name), Body: bytes.NewReader(bad)}); err != nil {
		t.Fatal(err)
	}
	data, etag, err = b.readControl(ctx, CheckpointName)
	if err != nil {
		t.Fatal(err)
	}
	cp = bucketCheckpoint{}
	if err := json.Unmarshal(data, &cp); err != nil {
		t.Fatal(err)
	}
	cp.Segments = []segRef{ref}
	if data, err = json.Marshal(cp); err != nil {
		t.Fatal(err)
	}
	if _, err := b.putControl(ctx, CheckpointName, data, etag); err != nil {
		t.Fatal(err)
	}
	if _, err := b.StreamStage(ctx, opts, true); err == nil || !strings.Contains(err.Error(), ref.Name) || !strings.Contains(err.Error(), "not an array") {
		t.Errorf("a resume over a segment that does not apply: %v; want a refusal naming it", err)
	}
}

// TestCheckpointDropsStraySegments: a build that deletes its checkpoint (before its manifest)
// deletes every segment under the prefix, those no checkpoint names (a merged one a killed
// build had not deleted yet) included, so that none stays beside the dataset.
func TestCheckpointDropsStraySegments(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "stray")
	b := NewWithClient(srv.Client(""), URL{Bucket: "stray", Prefix: "ds"}, Options{})
	ctx := context.Background()
	opts := storage.StageOptions{Staging: func() (*storage.Staging, error) { return storage.OpenStaging(t.TempDir(), "stage") }}
	s, err := b.StreamStage(ctx, opts, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	for n := range 3 {
		if err := s.SaveCheckpoint(fmt.Appendf(nil, `{"n":%d}`, n)); err != nil {
			t.Fatal(err)
		}
	}
	stray := segmentPrefix + "0123456789abcdef-7.json"
	if _, err := b.client.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("stray"), Key: aws.String("ds/" + stray), Body: bytes.NewReader([]byte("{}"))}); err != nil {
		t.Fatal(err)
	}
	if err := s.dropCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}
	b.List(ctx, func(fi storage.FileInfo) error {
		t.Errorf("%s is left after the checkpoint was deleted", fi.Name)
		return nil
	})
}
