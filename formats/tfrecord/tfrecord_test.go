package tfrecord

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packer-dev/packer/formats/imagedir"
	"github.com/packer-dev/packer/formats/shards"
	"github.com/packer-dev/packer/pipeline"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/transforms"
)

func python() string {
	if p := os.Getenv("PACKER_PYTHON"); p != "" {
		return p
	}
	return "/usr/bin/python3"
}

// writer is the fixture writer: tf.train.Example messages encoded by the protobuf library
// itself (Debian's python3-protobuf, from a descriptor of TensorFlow's example.proto and
// feature.proto built here), framed as TFRecord with the CRC-32C of Debian's python3-crc32c.
// TensorFlow itself is not installed here.
const writer = `
import json, struct, sys
import crc32c as crclib
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

fd = descriptor_pb2.FileDescriptorProto(name="example.proto", package="tensorflow", syntax="proto3")
F = descriptor_pb2.FieldDescriptorProto
def msg(name, fields, nested=None, oneof=None):
    m = fd.message_type.add(name=name)
    for fname, num, typ, label, tname, oi in fields:
        f = m.field.add(name=fname, number=num, type=typ, label=label)
        if tname: f.type_name = tname
        if oi is not None: f.oneof_index = oi
    if oneof: m.oneof_decl.add(name=oneof)
    if nested:
        e = m.nested_type.add(name=nested[0]); e.options.map_entry = True
        e.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
        e.field.add(name="value", number=2, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL, type_name=nested[1])
R, O = F.LABEL_REPEATED, F.LABEL_OPTIONAL
msg("BytesList", [("value", 1, F.TYPE_BYTES, R, None, None)])
msg("FloatList", [("value", 1, F.TYPE_FLOAT, R, None, None)])
msg("Int64List", [("value", 1, F.TYPE_INT64, R, None, None)])
msg("Feature", [("bytes_list", 1, F.TYPE_MESSAGE, O, ".tensorflow.BytesList", 0),
                ("float_list", 2, F.TYPE_MESSAGE, O, ".tensorflow.FloatList", 0),
                ("int64_list", 3, F.TYPE_MESSAGE, O, ".tensorflow.Int64List", 0)], oneof="kind")
msg("Features", [("feature", 1, F.TYPE_MESSAGE, R, ".tensorflow.Features.FeatureEntry", None)],
    nested=("FeatureEntry", ".tensorflow.Feature"))
msg("Example", [("features", 1, F.TYPE_MESSAGE, O, ".tensorflow.Features", None)])
pool = descriptor_pool.DescriptorPool(); pool.Add(fd)
def cls(n):
    d = pool.FindMessageTypeByName("tensorflow." + n)
    return message_factory.GetMessageClass(d) if hasattr(message_factory, "GetMessageClass") else message_factory.MessageFactory(pool).GetPrototype(d)
Example = cls("Example")

def masked(b):
    c = crclib.crc32c(b)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF

out, recs = sys.argv[1], json.loads(sys.argv[2])
with open(out, "wb") as f:
    for r in recs:
        if "raw" in r:
            data = r["raw"].encode()
        else:
            ex = Example()
            for k, v in r.items():
                if k.startswith("bytes:"): ex.features.feature[k[6:]].bytes_list.value.append(open(v, "rb").read())
                elif k.startswith("int:"): ex.features.feature[k[4:]].int64_list.value.extend(v)
                elif k.startswith("float:"): ex.features.feature[k[6:]].float_list.value.extend(v)
            data = ex.SerializeToString()
        head = struct.pack("<Q", len(data))
        crc = masked(data) ^ (1 if r.get("badcrc") else 0)
        f.write(head + struct.pack("<I", masked(head)) + data + struct.pack("<I", crc))
`

func writeTFRecord(t *testing.T, path string, recs []map[string]any) {
	t.Helper()
	spec, _ := json.Marshal(recs)
	if out, err := exec.Command(python(), "-c", writer, path, string(spec)).CombinedOutput(); err != nil {
		t.Fatalf("fixture writer: %v\n%s", err, out)
	}
}

func corpus(name string) string {
	p, _ := filepath.Abs(filepath.Join("..", "..", "transforms", "testdata", "corpus", name))
	return p
}

func build(t *testing.T, src pipeline.Source, spec transforms.Spec) (recs [][]byte, labels []int64, metas []string, skipped map[string]string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	if _, err := pipeline.Build(context.Background(), pipeline.Options{Source: src, Transform: spec, Output: shards.Entry, Out: out, Workers: 3}); err != nil {
		t.Fatal(err)
	}
	ds, err := shard.OpenDataset(out)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	for i := int64(0); i < ds.Len(); i++ {
		r, _ := ds.Record(i)
		l, _ := ds.Label(i)
		s, j := ds.Locate(i)
		rd, _ := ds.Shard(s)
		recs, labels, metas = append(recs, append([]byte(nil), r...)), append(labels, l), append(metas, string(rd.RecordMeta(j)))
	}
	skipped = map[string]string{}
	for _, s := range ds.Manifest().Skipped {
		skipped[s.Input] = s.Reason
	}
	return
}

// TestSameRecordsAsFolder: the same image bytes packed from a folder and from TFRecord files of
// tf.train.Example (written by the protobuf library) give identical records and labels.
func TestSameRecordsAsFolder(t *testing.T) {
	root := t.TempDir()
	imgs := []string{"baseline-420.jpg", "grey.png", "progressive.jpg", "rgb.ppm", "rgba-alpha.png"}
	var f0, f1 []map[string]any
	for i, im := range imgs {
		dst := filepath.Join(root, "folder", fmt.Sprint("c", i%2), fmt.Sprintf("%02d%s", i, filepath.Ext(im)))
		os.MkdirAll(filepath.Dir(dst), 0o755)
		data, err := os.ReadFile(corpus(im))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(dst, data, 0o644)
		r := map[string]any{"bytes:image/encoded": corpus(im), "int:image/class/label": []int{i % 2}, "float:extra": []float64{0.5}}
		// The folder orders by class, then name: class 0 holds images 0, 2, 4.
		if i%2 == 0 {
			f0 = append(f0, r)
		} else {
			f1 = append(f1, r)
		}
	}
	os.MkdirAll(filepath.Join(root, "tfr"), 0o755)
	writeTFRecord(t, filepath.Join(root, "tfr", "train.tfrecord-00000-of-00002"), f0)
	writeTFRecord(t, filepath.Join(root, "tfr", "train.tfrecord-00001-of-00002"), f1)
	for _, spec := range []transforms.Spec{{CropW: 16, CropH: 16}, {Resize: 24, CropW: 20, CropH: 20, Layout: "chw", Filter: "bicubic"}} {
		fsrc, err := imagedir.OpenFolder(filepath.Join(root, "folder"), imagedir.Options{})
		if err != nil {
			t.Fatal(err)
		}
		tsrc, err := Open(filepath.Join(root, "tfr"), Options{Classes: []string{"c0", "c1"}})
		if err != nil {
			t.Fatal(err)
		}
		frecs, flabels, _, _ := build(t, fsrc, spec)
		trecs, tlabels, metas, skipped := build(t, tsrc, spec)
		if len(skipped) != 0 || len(trecs) != len(imgs) || len(frecs) != len(imgs) {
			t.Fatalf("%d folder records, %d tfrecord records, skipped %v", len(frecs), len(trecs), skipped)
		}
		for i := range frecs {
			if !bytes.Equal(frecs[i], trecs[i]) || flabels[i] != tlabels[i] {
				t.Errorf("%+v: record %d differs from the folder's", spec, i)
			}
		}
		if want := `{"file":"train.tfrecord-00001-of-00002","record":1}`; metas[4] != want {
			t.Errorf("record 4 metadata %s, want %s", metas[4], want)
		}
	}
}

// TestDamage: a bad data checksum, a record that is not an Example, missing features, a bad
// image and a label out of --classes are skipped with their reasons; a file cut short keeps
// the records before the damage; the next file is still read.
func TestDamage(t *testing.T) {
	dir := t.TempDir()
	good := map[string]any{"bytes:image/encoded": corpus("grey.jpg"), "int:image/class/label": []int{1}}
	writeTFRecord(t, filepath.Join(dir, "a.tfrecord"), []map[string]any{
		good,
		{"bytes:image/encoded": corpus("grey.jpg"), "int:image/class/label": []int{0}, "badcrc": true},
		{"raw": "\xff\xff\xff"},
		{"bytes:image/encoded": corpus("grey.jpg")},
		{"int:image/class/label": []int{0}},
		{"bytes:image/encoded": corpus("truncated.jpg"), "int:image/class/label": []int{0}},
		{"bytes:image/encoded": corpus("grey.jpg"), "int:image/class/label": []int{7}},
		good,
	})
	writeTFRecord(t, filepath.Join(dir, "b.tfrecord"), []map[string]any{good, good, good})
	data, _ := os.ReadFile(filepath.Join(dir, "b.tfrecord"))
	os.WriteFile(filepath.Join(dir, "b.tfrecord"), data[:len(data)*2/3+5], 0o644)
	writeTFRecord(t, filepath.Join(dir, "c.tfrecord"), []map[string]any{good})

	src, err := Open(dir, Options{Classes: []string{"x", "y"}})
	if err != nil {
		t.Fatal(err)
	}
	recs, _, metas, skipped := build(t, src, transforms.Spec{CropW: 8, CropH: 8})
	if len(recs) != 5 || !strings.Contains(metas[4], `"c.tfrecord"`) {
		t.Errorf("%d records (%v), want a#0 a#7 b#0 b#1 c#0", len(recs), metas)
	}
	want := map[string]string{
		"a.tfrecord#1":               ErrChecksum.Error(),
		"a.tfrecord#2":               ErrExample.Error(),
		"a.tfrecord#3":               ErrNoLabel.Error(),
		"a.tfrecord#4":               ErrNoImage.Error(),
		"a.tfrecord#5":               "truncated",
		"a.tfrecord#6":               "bad label: 7",
		"b.tfrecord (from record 2)": ErrFraming.Error(),
	}
	for in, reason := range want {
		if r, ok := skipped[in]; !ok || !strings.Contains(r, reason) {
			t.Errorf("skipped[%s] = %q (present %v), want %q", in, r, ok, reason)
		}
	}
	if len(skipped) != len(want) {
		t.Errorf("skipped %v", skipped)
	}
}

// TestFeatureKeys: --image-key and --label-key name other features.
func TestFeatureKeys(t *testing.T) {
	dir := t.TempDir()
	writeTFRecord(t, filepath.Join(dir, "x.tfrecord"), []map[string]any{{"bytes:jpeg": corpus("grey.jpg"), "int:cls": []int{3, 9}}})
	src, err := Open(dir, Options{ImageKey: "jpeg", LabelKey: "cls"})
	if err != nil {
		t.Fatal(err)
	}
	_, labels, _, skipped := build(t, src, transforms.Spec{})
	if len(skipped) != 0 || fmt.Sprint(labels) != "[3]" {
		t.Errorf("labels %v skipped %v", labels, skipped)
	}
	if _, err := Open(t.TempDir(), Options{}); err == nil || !errors.Is(err, err) || !strings.Contains(err.Error(), "no TFRecord file") {
		t.Errorf("empty folder: %v", err)
	}
}
