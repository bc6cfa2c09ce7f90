package pipeline

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/transforms"
)

// emptySource's items decode to one record each, except those in none, which decode to no
// record and no error (a source bug, or a video that yields nothing).
type emptySource struct {
	n    int
	none map[int]bool
}

func (s *emptySource) Info() source.SourceInfo {
	return source.SourceInfo{Kind: "gen", Classes: []string{"a"}, Spec: map[string]any{"kind": "gen"}, Count: int64(s.n), Frame: source.FrameShape{W: 2, H: 2, C: 1}}
}

func (s *emptySource) Enumerate(ctx context.Context, emit func(source.Item) error) error {
	for i := 0; i < s.n; i++ {
		if err := emit(source.Item{Seq: int64(i), Name: fmt.Sprintf("item-%03d", i)}); err != nil {
			return err
		}
	}
	return nil
}

func (s *emptySource) Decode(ctx context.Context, it source.Item, emit func(source.Clip) error) error {
	if s.none[int(it.Seq)] {
		return nil
	}
	return emit(source.Clip{Frames: []transforms.Image{{W: 2, H: 2, C: 1, Pix: make([]byte, 4)}}})
}

// TestBuildZeroRecordItemIsSkipped: an item that yields no record and no error used to vanish:
// neither packed nor listed. It is listed in skipped with a "no records" reason (or fails the
// build with --on-error fail), and the manifest records how many inputs were enumerated.
func TestBuildZeroRecordItemIsSkipped(t *testing.T) {
	src := &emptySource{n: 7, none: map[int]bool{2: true, 5: true}}
	out := filepath.Join(t.TempDir(), "out")
	sum, err := build(t, src, out, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := shard.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	if m.Count != 5 || m.Inputs != 7 || sum.Items != 7 {
		t.Errorf("count %d, inputs %d, items %d; want 5, 7, 7", m.Count, m.Inputs, sum.Items)
	}
	if len(m.Skipped) != 2 || m.Skipped[0].Input != "item-002" || m.Skipped[1].Input != "item-005" ||
		!strings.HasPrefix(m.Skipped[0].Reason, "no records") {
		t.Errorf("skipped %+v, want item-002 and item-005 with a \"no records\" reason", m.Skipped)
	}
	_, err = build(t, src, filepath.Join(t.TempDir(), "out"), func(o *Options) { o.OnError = OnErrorFail })
	var ie *source.InputError
	if !errors.As(err, &ie) || ie.Input != "item-002" {
		t.Errorf("--on-error fail: got %v, want an InputError naming item-002", err)
	}
}

// TestCheckInputs: the build refuses to commit when packed and skipped inputs do not add up to
// the enumerated ones.
func TestCheckInputs(t *testing.T) {
	for _, c := range []struct {
		enumerated, done, packed, skipped int64
		ok                                bool
	}{
		{7, 7, 5, 2, true},
		{0, 0, 0, 0, true},
		{7, 7, 5, 1, false}, // an input neither packed nor skipped
		{7, 7, 5, 3, false}, // an input counted twice
		{7, 6, 4, 2, false}, // an input that never came back from the workers
	} {
		err := checkInputs(c.enumerated, c.done, c.packed, c.skipped)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrInputsUnaccounted)) {
			t.Errorf("checkInputs(%d, %d, %d, %d) = %v", c.enumerated, c.done, c.packed, c.skipped, err)
		}
	}
}

// failingSource emits a few pre-read items (which the pipeline groups) and then fails.
type failingSource struct{ emptySource }

var errEnumerate = errors.New("listing failed")

func (s *failingSource) Enumerate(ctx context.Context, emit func(source.Item) error) error {
	for i := 0; i < 3; i++ {
		if err := emit(source.Item{Seq: int64(i), Name: fmt.Sprintf("item-%03d", i), Raw: []byte{1}}); err != nil {
			return err
		}
	}
	return errEnumerate
}

// TestBuildEnumerateErrorWins: when the source's enumeration fails, the build fails with that
// error, not with an inputs count that could not add up.
func TestBuildEnumerateErrorWins(t *testing.T) {
	for i := 0; i < 50; i++ {
		_, err := build(t, &failingSource{}, filepath.Join(t.TempDir(), "out"), nil)
		if !errors.Is(err, errEnumerate) {
			t.Fatalf("run %d: got %v, want the enumeration error", i, err)
		}
	}
}
