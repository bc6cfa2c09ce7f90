package imagedir

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packer-dev/packer/internal/testfix"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source"
)

// listRecords opens a list with fields and returns each line's label, its fields rendered as
// text, and the reported reason of each bad line.
func listRecords(t *testing.T, list string, fields []string) (*Source, map[string]string) {
	t.Helper()
	s, err := OpenList(list, Options{Fields: fields})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	err = s.Enumerate(context.Background(), func(it source.Item) error {
		err := s.Decode(context.Background(), it, func(c source.Clip) error {
			parts := []string{fmt.Sprint(c.Label)}
			for i, f := range s.Info().Fields {
				parts = append(parts, render(f, c.Fields[i].Bytes))
			}
			got[it.Name] = strings.Join(parts, " | ")
			return nil
		})
		var ie *source.InputError
		if errors.As(err, &ie) {
			got[it.Name] = "skip: " + ie.Err.Error()
		} else if err != nil {
			t.Fatalf("%s: %v", it.Name, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s, got
}

func render(f shard.Field, b []byte) string {
	switch {
	case f.DType == "int64":
		var v []int64
		for i := 0; i+8 <= len(b); i += 8 {
			v = append(v, int64(binary.LittleEndian.Uint64(b[i:])))
		}
		return fmt.Sprint(v)
	case f.DType == "float64":
		var v []float64
		for i := 0; i+8 <= len(b); i += 8 {
			v = append(v, math.Float64frombits(binary.LittleEndian.Uint64(b[i:])))
		}
		return fmt.Sprint(v)
	}
	return string(b)
}

func copyImage(t *testing.T, dir, name string) {
	t.Helper()
	data, err := os.ReadFile(testfix.Corpus("baseline-420.jpg"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestListFieldsJSONL(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"a.jpg", "b.jpg", "c.jpg"} {
		copyImage(t, dir, n)
	}
	list := filepath.Join(dir, "train.jsonl")
	text := `{"path": "a.jpg", "caption": "a cat", "labels": [1, 5], "score": [0.5, 2], "count": 3, "extra": {"k": 1}}
{"path": "b.jpg", "label": 2, "caption": "", "labels": [], "score": [1], "count": -1, "extra": [1]}
{"path": "c.jpg", "labels": [7], "score": [1], "count": 0, "extra": null}
`
	if err := os.WriteFile(list, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	s, got := listRecords(t, list, []string{"caption", "labels", "score", "count", "extra"})
	schema := s.Info().Fields
	kinds := []string{}
	for _, f := range schema {
		kinds = append(kinds, fmt.Sprintf("%s:%s:%s%v", f.Name, f.Kind, f.DType, f.Shape))
	}
	if k := strings.Join(kinds, " "); k != "caption:text:[] labels:ndarray:int64[-1] score:ndarray:float64[-1] count:ndarray:int64[1] extra:json:[]" {
		t.Fatalf("schema %s", k)
	}
	want := map[string]string{
		"a.jpg": `-1 | a cat | [1 5] | [0.5 2] | [3] | {"k": 1}`,
		"b.jpg": `2 |  | [] | [1] | [-1] | [1]`,
		"c.jpg": `skip: no "caption" (--fields)`,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
}

func TestListFieldsCSV(t *testing.T) {
	dir := t.TempDir()
	copyImage(t, dir, "a.jpg")
	copyImage(t, dir, "b.jpg")
	list := filepath.Join(dir, "train.csv")
	if err := os.WriteFile(list, []byte("path,Caption,label\na.jpg,\"a cat, sitting\",\nb.jpg,12,3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, got := listRecords(t, list, []string{"Caption"})
	if f := s.Info().Fields; len(f) != 1 || f[0].Name != "caption" || f[0].Kind != shard.KindText {
		t.Fatalf("schema %+v", f)
	}
	if got["a.jpg"] != "-1 | a cat, sitting" || got["b.jpg"] != "3 | 12" {
		t.Fatalf("records %q", got)
	}
	if _, err := OpenList(list, Options{Fields: []string{"nothere"}}); err == nil || !strings.Contains(err.Error(), `no column "nothere"`) {
		t.Fatalf("missing column: %v", err)
	}
	if _, err := OpenList(list, Options{Fields: []string{"label"}}); err == nil {
		t.Fatal("--fields label accepted")
	}
}
