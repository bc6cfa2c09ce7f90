package tfrecord

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/packer-dev/packer/source"
	"google.golang.org/protobuf/encoding/protowire"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packer-dev/packer/internal/testfix"
	"github.com/packer-dev/packer/output/shards"
	"github.com/packer-dev/packer/pipeline"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source/imagedir"
	"github.com/packer-dev/packer/transforms"
)

// writer writes the fixtures with the tfrecord package's TFRecordWriter (tf.train.Example
// records, its own protobuf encoding and masked CRC-32C); the damaged records (a wrong data
// checksum, data that is not an Example) are framed with the same package's masked_crc.
const writer = `
import json, struct, sys
from tfrecord.writer import TFRecordWriter
out, recs = sys.argv[1], json.loads(sys.argv[2])
w = TFRecordWriter(out)
for r in recs:
    if "raw" in r or r.get("badcrc"):
        data = r["raw"].encode() if "raw" in r else TFRecordWriter.serialize_tf_example(
            {"image/encoded": (open(r["bytes:image/encoded"], "rb").read(), "byte"), "image/class/label": (r["int:image/class/label"], "int")})
        head = struct.pack("<Q", len(data))
        crc = TFRecordWriter.masked_crc(data)
        if r.get("badcrc"):
            crc = bytes([crc[0] ^ 1]) + crc[1:]
        w.file.write(head + TFRecordWriter.masked_crc(head) + data + crc)
        continue
    datum = {}
    for k, v in r.items():
        if k.startswith("bytes:"): datum[k[6:]] = (open(v, "rb").read(), "byte")
        elif k.startswith("int:"): datum[k[4:]] = (v, "int")
        elif k.startswith("float:"): datum[k[6:]] = (v, "float")
    w.write(datum)
w.close()
`

func writeTFRecord(t *testing.T, path string, recs []map[string]any) {
	t.Helper()
	spec, _ := json.Marshal(recs)
	if out, err := exec.Command(testfix.NeedFixturePython(t, "tfrecord"), "-c", writer, path, string(spec)).CombinedOutput(); err != nil {
		t.Fatalf("fixture writer: %v\n%s", err, out)
	}
}

func build(t *testing.T, src source.Source, spec transforms.Spec) (recs [][]byte, labels []int64, metas []string, skipped map[string]string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	if _, err := pipeline.Build(context.Background(), pipeline.Options{Source: src, Transform: spec.MustCompile(), Output: shards.Entry, Out: out, Workers: 3}); err != nil {
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
		data, err := os.ReadFile(testfix.Corpus(im))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(dst, data, 0o644)
		r := map[string]any{"bytes:image/encoded": testfix.Corpus(im), "int:image/class/label": []int{i % 2}, "float:extra": []float64{0.5}}
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
	for _, spec := range []transforms.Spec{{CropW: 16, CropH: 16}, {Resize: 24, CropW: 20, CropH: 20, Layout: transforms.CHW, Filter: transforms.Bicubic}} {
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
	good := map[string]any{"bytes:image/encoded": testfix.Corpus("grey.jpg"), "int:image/class/label": []int{1}}
	writeTFRecord(t, filepath.Join(dir, "a.tfrecord"), []map[string]any{
		good,
		{"bytes:image/encoded": testfix.Corpus("grey.jpg"), "int:image/class/label": []int{0}, "badcrc": true},
		{"raw": "\xff\xff\xff"},
		{"bytes:image/encoded": testfix.Corpus("grey.jpg")},
		{"int:image/class/label": []int{0}},
		{"bytes:image/encoded": testfix.Corpus("truncated.jpg"), "int:image/class/label": []int{0}},
		{"bytes:image/encoded": testfix.Corpus("grey.jpg"), "int:image/class/label": []int{7}},
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
	writeTFRecord(t, filepath.Join(dir, "x.tfrecord"), []map[string]any{{"bytes:jpeg": testfix.Corpus("grey.jpg"), "int:cls": []int{3}}})
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

// example encodes a tf.train.Example whose feature map lists the entries in order, repeated
// keys included (protobuf map entries; a parser keeps the last one of a key).
func example(entries ...[]byte) []byte {
	var feats []byte
	for _, e := range entries {
		feats = protowire.AppendTag(feats, 1, protowire.BytesType)
		feats = protowire.AppendBytes(feats, e)
	}
	var ex []byte
	ex = protowire.AppendTag(ex, 1, protowire.BytesType)
	return protowire.AppendBytes(ex, feats)
}

// entry is one feature map entry: key, and a Feature holding a bytes_list (field 1) of bs or an
// int64_list (field 3) of ints.
func entry(key string, bs [][]byte, ints []int64) []byte {
	var list []byte
	for _, b := range bs {
		list = protowire.AppendTag(list, 1, protowire.BytesType)
		list = protowire.AppendBytes(list, b)
	}
	for _, x := range ints {
		list = protowire.AppendTag(list, 1, protowire.VarintType)
		list = protowire.AppendVarint(list, uint64(x))
	}
	num := protowire.Number(1)
	if ints != nil {
		num = 3
	}
	var feat []byte
	feat = protowire.AppendTag(feat, num, protowire.BytesType)
	feat = protowire.AppendBytes(feat, list)
	var e []byte
	e = protowire.AppendTag(e, 1, protowire.BytesType)
	e = protowire.AppendBytes(e, []byte(key))
	e = protowire.AppendTag(e, 2, protowire.BytesType)
	return protowire.AppendBytes(e, feat)
}

// frame appends one TFRecord record holding data.
func frame(dst, data []byte) []byte {
	head := binary.LittleEndian.AppendUint64(nil, uint64(len(data)))
	dst = binary.LittleEndian.AppendUint32(append(dst, head...), masked(head))
	return binary.LittleEndian.AppendUint32(append(dst, data...), masked(data))
}

// TestDuplicateFeatures: an Example naming the image or label feature twice (map entries of one
// key: TensorFlow's parser keeps the last, packer took the first) or whose image or label
// feature holds several values (a FixedLenFeature of shape [] refuses it; packer took the
// first) was packed silently. It is skipped naming the feature.
func TestDuplicateFeatures(t *testing.T) {
	img, _ := os.ReadFile(testfix.Corpus("grey.jpg"))
	png, _ := os.ReadFile(testfix.Corpus("grey.png"))
	const ik, lk = DefaultImageKey, DefaultLabelKey
	var data []byte
	for _, ex := range [][]byte{
		example(entry(ik, [][]byte{img}, nil), entry(lk, nil, []int64{1})),
		example(entry(ik, [][]byte{img}, nil), entry(lk, nil, []int64{1}), entry(lk, nil, []int64{2})),
		example(entry(ik, [][]byte{img}, nil), entry(ik, [][]byte{png}, nil), entry(lk, nil, []int64{0})),
		example(entry(ik, [][]byte{img, png}, nil), entry(lk, nil, []int64{0})),
		example(entry(ik, [][]byte{img}, nil), entry(lk, nil, []int64{0, 1})),
		example(entry(ik, [][]byte{png}, nil), entry(lk, nil, []int64{0})),
	} {
		data = frame(data, ex)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "d.tfrecord"), data, 0o644)
	src, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, labels, metas, skipped := build(t, src, transforms.Spec{CropW: 8, CropH: 8})
	if fmt.Sprint(labels) != "[1 0]" || len(metas) != 2 || !strings.Contains(metas[1], `"record":5`) {
		t.Errorf("packed %v labels %v, want records 0 and 5", metas, labels)
	}
	want := map[string]string{
		"d.tfrecord#1": fmt.Sprintf("feature %q twice", lk),
		"d.tfrecord#2": fmt.Sprintf("feature %q twice", ik),
		"d.tfrecord#3": fmt.Sprintf("feature %q holds 2 values, want one", ik),
		"d.tfrecord#4": fmt.Sprintf("feature %q holds 2 values, want one", lk),
	}
	for in, reason := range want {
		if r := skipped[in]; !strings.Contains(r, reason) {
			t.Errorf("skipped[%s] = %q, want %q", in, r, reason)
		}
	}
	if len(skipped) != len(want) {
		t.Errorf("skipped %v, want exactly %d", skipped, len(want))
	}
}
