package webdataset

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packer-dev/packer/internal/testfix"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source"
)

// TestFields: captions, JSON and other members beside the image, written by webdataset's
// TarWriter, become fields; samples with a caption that is not UTF-8, JSON that does not
// parse or a missing requested member are reported skips naming the member; without a .cls
// member a sample's label is -1.
func TestFields(t *testing.T) {
	dir := t.TempDir()
	good := testfix.Corpus("baseline-420.jpg")
	notUTF8 := filepath.Join(dir, "bad.txt")
	if err := os.WriteFile(notUTF8, []byte("caf\xe9 au lait"), 0o644); err != nil {
		t.Fatal(err)
	}
	shardPath := filepath.Join(dir, "a.tar")
	writeTar(t, shardPath, []member{
		{Name: "s1.jpg", File: good}, {Name: "s1.txt", Text: "a dog on a sofa ☺"}, {Name: "s1.json", Text: `{"w": 420, "tags": ["dog"]}`}, {Name: "s1.vec", Text: "\x01\x02"},
		{Name: "s2.jpg", File: good}, {Name: "s2.txt", Text: ""}, {Name: "s2.json", Text: `null`}, {Name: "s2.vec", Text: ""}, {Name: "s2.cls", Text: "4"},
		{Name: "latin1.jpg", File: good}, {Name: "latin1.txt", File: notUTF8}, {Name: "latin1.json", Text: "{}"}, {Name: "latin1.vec", Text: "x"},
		{Name: "badjson.jpg", File: good}, {Name: "badjson.txt", Text: "x"}, {Name: "badjson.json", Text: "{oops"}, {Name: "badjson.vec", Text: "x"},
		{Name: "nocaption.jpg", File: good}, {Name: "nocaption.json", Text: "1"}, {Name: "nocaption.vec", Text: "x"},
	})
	s, err := Open(shardPath, Options{Fields: []string{"txt", "json", "vec"}})
	if err != nil {
		t.Fatal(err)
	}
	f := s.Info().Fields
	if len(f) != 3 || f[0].Name != "txt" || f[0].Kind != shard.KindText || f[1].Kind != shard.KindJSON || f[2].Kind != shard.KindBytes {
		t.Fatalf("schema %+v", f)
	}
	type res struct {
		label  int64
		fields []string
		reason string
	}
	got := map[string]res{}
	err = s.Enumerate(context.Background(), func(it source.Item) error {
		var r res
		err := s.Decode(context.Background(), it, func(c source.Clip) error {
			r.label = c.Label
			for _, v := range c.Fields {
				r.fields = append(r.fields, string(v.Bytes))
			}
			return nil
		})
		var ie *source.InputError
		if errors.As(err, &ie) {
			r.reason = ie.Err.Error()
		} else if err != nil {
			t.Fatalf("%s: %v", it.Name, err)
		}
		got[strings.TrimPrefix(it.Name, "a.tar:")] = r
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if r := got["s1"]; r.reason != "" || r.label != -1 || strings.Join(r.fields, "|") != `a dog on a sofa ☺|{"w": 420, "tags": ["dog"]}|`+"\x01\x02" {
		t.Fatalf("s1: %+v", r)
	}
	if r := got["s2"]; r.reason != "" || r.label != 4 || strings.Join(r.fields, "|") != "|null|" {
		t.Fatalf("s2 (empty caption, a class): %+v", r)
	}
	for key, want := range map[string]string{
		"latin1":    "the .txt member is not UTF-8 text",
		"badjson":   "the .json member is not one JSON value",
		"nocaption": "no .txt member (--fields)",
	} {
		if !strings.Contains(got[key].reason, want) || !strings.Contains(got[key].reason, "bad field") {
			t.Errorf("%s: reason %q, want %q", key, got[key].reason, want)
		}
	}
}

func TestFieldsRefused(t *testing.T) {
	dir := t.TempDir()
	shardPath := filepath.Join(dir, "a.tar")
	writeTar(t, shardPath, []member{{Name: "s1.jpg", File: testfix.Corpus("baseline-420.jpg")}, {Name: "s1.cls", Text: "1"}})
	for _, fields := range [][]string{{"cls"}, {"jpg"}, {"txt", "TXT"}, {"label"}, {""}} {
		if _, err := Open(shardPath, Options{Fields: fields}); err == nil {
			t.Errorf("--fields %q accepted", fields)
		}
	}
}
