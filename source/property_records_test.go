package source_test

// The property test of the record-format sources (WebDataset, TFRecord, Parquet): random
// archives full of what breaks them (members or features of one name twice, missing or bad
// labels, undecodable images, damaged framing, files cut short, special files where a shard
// should be) go through the real build; the generator knows what each sample must give, and
// checkBuild requires every one packed or skipped with a reason, exactly once
// (packed + skipped == enumerated), nothing else.

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/klauspost/compress/gzip"
	pq "github.com/parquet-go/parquet-go"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/packer-dev/packer/source/cifar"
	"github.com/packer-dev/packer/source/internal/fsentry"
	"github.com/packer-dev/packer/source/parquet"
	"github.com/packer-dev/packer/source/tfrecord"
	"github.com/packer-dev/packer/source/webdataset"
)

// badShard adds, in dir, a file named n that is not a readable shard, and returns the manifest
// name of the one input it must give ("" for none: an empty tar holds no sample).
func (g *gen) badShard(dir, n string, gz bool, rest string) string {
	p := filepath.Join(dir, n)
	switch g.r.IntN(4) {
	case 0:
		g.must(os.Symlink("missing", p))
		return n
	case 1:
		g.must(syscall.Mkfifo(p, 0o644))
		return n
	case 2:
		g.must(os.WriteFile(p, nil, 0o644))
		if gz {
			return n
		}
		return ""
	default:
		g.must(os.WriteFile(p, []byte("this is not an archive"), 0o644))
		if gz {
			return n
		}
		return fmt.Sprintf(rest, n)
	}
}

// TestPropertyWebDataset: random shards (tar or tar.gz) of good samples and of samples missing
// their image or label, with a bad label, an undecodable image, two members of one name (or of
// one extension in two cases), a link where the image should be; some cut short inside an
// image; special files named like shards.
func TestPropertyWebDataset(t *testing.T) {
	for _, seed := range seeds(t) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			g := newGen(t, seed)
			root := t.TempDir()
			var want expect
			for s := range 1 + g.r.IntN(3) {
				gz := g.r.IntN(3) == 0
				name := fmt.Sprintf("s%d.tar", s)
				if gz {
					name += ".gz"
				}
				var b bytes.Buffer
				tw := tar.NewWriter(&b)
				type sample struct {
					key  string
					good bool
				}
				var samples []sample
				member := 0
				cuttable := false // the member put next is a good sample's image, read whole
				cutAt, cutMember, cutSample := -1, -1, -1
				put := func(n string, data []byte, typ byte) {
					h := &tar.Header{Name: n, Mode: 0o644, Size: int64(len(data)), Typeflag: typ}
					if typ == tar.TypeSymlink {
						h.Size, h.Linkname = 0, "elsewhere.png"
					}
					g.must(tw.WriteHeader(h))
					if cuttable && cutAt < 0 && !gz && g.r.IntN(6) == 0 {
						// Cut the shard inside this image later: the sample and the rest go.
						cutAt, cutMember, cutSample = b.Len()+len(data)/2, member, len(samples)
					}
					if len(data) > 0 {
						_, err := tw.Write(data)
						g.must(err)
					}
					member++
				}
				for k := range 2 + g.r.IntN(6) {
					key := fmt.Sprintf("k%02d", k)
					if g.r.IntN(6) == 0 {
						key += "\xff"
					}
					img := g.png(8+g.r.IntN(4), 8+g.r.IntN(4))
					cls := []byte(fmt.Sprint(g.r.IntN(5)))
					good := false
					switch g.r.IntN(11) {
					case 0: // no label
						put(key+".png", img, tar.TypeReg)
					case 1: // no image
						put(key+".cls", cls, tar.TypeReg)
						put(key+".txt", []byte("caption"), tar.TypeReg)
					case 2: // a bad label
						put(key+".png", img, tar.TypeReg)
						put(key+".cls", []byte(g.pick([]string{"-1", "x", "", "1.5"})), tar.TypeReg)
					case 3: // an undecodable image
						put(key+".png", []byte("not a png"), tar.TypeReg)
						put(key+".cls", cls, tar.TypeReg)
					case 4: // the image twice
						put(key+".png", img, tar.TypeReg)
						put(key+".png", g.png(9, 9), tar.TypeReg)
						put(key+".cls", cls, tar.TypeReg)
					case 5: // the label twice
						put(key+".png", img, tar.TypeReg)
						put(key+".cls", cls, tar.TypeReg)
						put(key+".cls", []byte("4"), tar.TypeReg)
					case 6: // one extension in two cases
						put(key+".png", img, tar.TypeReg)
						put(key+".PNG", img, tar.TypeReg)
						put(key+".cls", cls, tar.TypeReg)
					case 7: // a link where the image should be
						put(key+".png", nil, tar.TypeSymlink)
						put(key+".cls", cls, tar.TypeReg)
					default:
						cuttable = true
						put(key+".png", img, tar.TypeReg)
						cuttable = false
						put(key+".cls", cls, tar.TypeReg)
						if g.r.IntN(3) == 0 {
							put(key+".json", []byte(`{"a": 1}`), tar.TypeReg)
						}
						good = true
					}
					samples = append(samples, sample{key, good})
				}
				g.must(tw.Close())
				data := b.Bytes()
				if cutAt >= 0 {
					data = data[:cutAt]
					samples = samples[:cutSample]
				}
				for _, smp := range samples {
					n := 0
					if smp.good {
						n = 1
					}
					want.add(fsentry.Name(name)+":"+fsentry.Name(smp.key), n)
				}
				if cutAt >= 0 {
					want.add(fmt.Sprintf("%s (after member %d)", name, cutMember), 0)
				}
				if gz {
					var z bytes.Buffer
					zw := gzip.NewWriter(&z)
					_, err := zw.Write(data)
					g.must(err)
					g.must(zw.Close())
					data = z.Bytes()
				}
				g.must(os.WriteFile(filepath.Join(root, name), data, 0o644))
			}
			if g.r.IntN(2) == 0 {
				gz := g.r.IntN(2) == 0
				n := "z.tar"
				if gz {
					n += ".gz"
				}
				if in := g.badShard(root, n, gz, "%s (after member 0)"); in != "" {
					want.add(in, 0)
				}
			}
			src, err := webdataset.Open(root, webdataset.Options{})
			if err != nil {
				t.Fatal(err)
			}
			checkBuild(t, src, root, want)
		})
	}
}

// tfExample encodes a tf.train.Example of the feature map entries given.
func tfExample(entries ...[]byte) []byte {
	var feats, ex []byte
	for _, e := range entries {
		feats = protowire.AppendBytes(protowire.AppendTag(feats, 1, protowire.BytesType), e)
	}
	return protowire.AppendBytes(protowire.AppendTag(ex, 1, protowire.BytesType), feats)
}

// tfFeature is one feature map entry: key and a bytes_list (field 1) or int64_list (field 3).
func tfFeature(key string, bs [][]byte, ints []int64) []byte {
	var list, feat, e []byte
	num := protowire.Number(1)
	for _, b := range bs {
		list = protowire.AppendBytes(protowire.AppendTag(list, 1, protowire.BytesType), b)
	}
	for _, x := range ints {
		num = 3
		list = protowire.AppendVarint(protowire.AppendTag(list, 1, protowire.VarintType), uint64(x))
	}
	feat = protowire.AppendBytes(protowire.AppendTag(feat, num, protowire.BytesType), list)
	e = protowire.AppendBytes(protowire.AppendTag(e, 1, protowire.BytesType), []byte(key))
	return protowire.AppendBytes(protowire.AppendTag(e, 2, protowire.BytesType), feat)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func tfMasked(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return (c>>15 | c<<17) + 0xa282ead8
}

// TestPropertyTFRecord: random TFRecord files of good Examples and of records with a wrong data
// checksum, data that is not an Example, no image or label, the image or label feature twice or
// with two values, a negative label, an undecodable image; some files with damaged framing (a
// wrong length checksum, cut short) from some record on; special files named like them.
func TestPropertyTFRecord(t *testing.T) {
	const ik, lk = tfrecord.DefaultImageKey, tfrecord.DefaultLabelKey
	for _, seed := range seeds(t) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			g := newGen(t, seed)
			root := t.TempDir()
			var want expect
			for f := range 1 + g.r.IntN(3) {
				name := fmt.Sprintf("f%d.tfrecord", f)
				var data []byte
				n := 1 + g.r.IntN(7)
				damage := -1 // the record from which the framing is damaged
				if g.r.IntN(3) == 0 {
					damage = g.r.IntN(n)
				}
				for i := range n {
					img := g.png(8+g.r.IntN(4), 8+g.r.IntN(4))
					label := int64(g.r.IntN(5))
					ex, good := tfExample(tfFeature(ik, [][]byte{img}, nil), tfFeature(lk, nil, []int64{label})), false
					badCRC := false
					switch g.r.IntN(11) {
					case 0:
						badCRC = true
					case 1:
						ex = []byte("\xff\xff\xff not protobuf")
					case 2:
						ex = tfExample(tfFeature(lk, nil, []int64{label}))
					case 3:
						ex = tfExample(tfFeature(ik, [][]byte{img}, nil))
					case 4:
						ex = tfExample(tfFeature(ik, [][]byte{img}, nil), tfFeature(lk, nil, []int64{label}), tfFeature(lk, nil, []int64{label + 1}))
					case 5:
						ex = tfExample(tfFeature(ik, [][]byte{img}, nil), tfFeature(ik, [][]byte{img}, nil), tfFeature(lk, nil, []int64{label}))
					case 6:
						ex = tfExample(tfFeature(ik, [][]byte{img, img}, nil), tfFeature(lk, nil, []int64{label}))
					case 7:
						ex = tfExample(tfFeature(ik, [][]byte{img}, nil), tfFeature(lk, nil, []int64{label, 1}))
					case 8:
						ex = tfExample(tfFeature(ik, [][]byte{img}, nil), tfFeature(lk, nil, []int64{-3}))
					case 9:
						ex = tfExample(tfFeature(ik, [][]byte{[]byte("not a png")}, nil), tfFeature(lk, nil, []int64{label}))
					default:
						good = true
					}
					head := binary.LittleEndian.AppendUint64(nil, uint64(len(ex)))
					rec := binary.LittleEndian.AppendUint32(append([]byte(nil), head...), tfMasked(head))
					crc := tfMasked(ex)
					if badCRC {
						crc ^= 1
					}
					rec = binary.LittleEndian.AppendUint32(append(rec, ex...), crc)
					if i == damage {
						if g.r.IntN(2) == 0 {
							rec[8] ^= 1 // the length checksum
						} else {
							rec = rec[:len(rec)-1-g.r.IntN(len(rec)-1)] // cut short: the file ends here
						}
						data = append(data, rec...)
						want.add(fmt.Sprintf("%s (from record %d)", name, i), 0)
						break
					}
					data = append(data, rec...)
					k := 0
					if good {
						k = 1
					}
					want.add(fmt.Sprintf("%s#%d", name, i), k)
				}
				g.must(os.WriteFile(filepath.Join(root, name), data, 0o644))
			}
			if g.r.IntN(2) == 0 {
				if in := g.badShard(root, "z.tfrecord", false, "%s (from record 0)"); in != "" {
					want.add(in, 0)
				}
			}
			src, err := tfrecord.Open(root, tfrecord.Options{})
			if err != nil {
				t.Fatal(err)
			}
			checkBuild(t, src, root, want)
		})
	}
}

// pqRow is a row of the generated Parquet files. (parquet-go's writer writes an optional
// []byte as null whatever it holds; null images are in source/parquet's TestBadRows.)
type pqRow struct {
	Image []byte `parquet:"image"`
	Label *int64 `parquet:"label,optional"`
}

// TestPropertyParquet: random Parquet files (every codec, small row groups and pages) of good
// rows and of rows with an empty image, a null label, a label out of the named classes, an undecodable
// image; later files cut short, replaced by garbage or special files.
func TestPropertyParquet(t *testing.T) {
	codecs := []pq.WriterOption{
		pq.Compression(&pq.Uncompressed), pq.Compression(&pq.Snappy), pq.Compression(&pq.Gzip),
		pq.Compression(&pq.Zstd), pq.Compression(&pq.Brotli), pq.Compression(&pq.Lz4Raw),
	}
	classes := []string{"a", "b", "c"}
	for _, seed := range seeds(t) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			g := newGen(t, seed)
			root := t.TempDir()
			var want expect
			for f := range 1 + g.r.IntN(3) {
				name := fmt.Sprintf("f%d.parquet", f)
				var rows []pqRow
				var exp []int
				for range 1 + g.r.IntN(7) {
					l := int64(g.r.IntN(len(classes)))
					r, k := pqRow{Image: g.png(8+g.r.IntN(4), 8+g.r.IntN(4)), Label: &l}, 0
					switch g.r.IntN(6) {
					case 0:
						r.Image = []byte{}
					case 1:
						r.Label = nil
					case 2:
						bad := int64(len(classes) + g.r.IntN(3))
						r.Label = &bad
					case 3:
						r.Image = []byte("not a png")
					default:
						k = 1
					}
					rows = append(rows, r)
					exp = append(exp, k)
				}
				var b bytes.Buffer
				w := pq.NewGenericWriter[pqRow](&b, codecs[g.r.IntN(len(codecs))],
					pq.MaxRowsPerRowGroup(int64(1+g.r.IntN(3))), pq.PageBufferSize(64+g.r.IntN(512)))
				_, err := w.Write(rows)
				g.must(err)
				g.must(w.Close())
				data := b.Bytes()
				if f > 0 && g.r.IntN(4) == 0 {
					// A later file cut short or replaced: the whole file is one skipped entry.
					if g.r.IntN(2) == 0 {
						data = data[:g.r.IntN(len(data))]
						g.must(os.WriteFile(filepath.Join(root, name), data, 0o644))
					} else {
						g.special(root, name)
					}
					want.add(name+" (from row 0)", 0)
					continue
				}
				g.must(os.WriteFile(filepath.Join(root, name), data, 0o644))
				for i, k := range exp {
					want.add(fmt.Sprintf("%s#%d", name, i), k)
				}
			}
			src, err := parquet.Open(root, parquet.Options{Classes: classes})
			if err != nil {
				t.Fatal(err)
			}
			checkBuild(t, src, root, want)
		})
	}
}

// TestPropertyCIFARArchive: random CIFAR-10 archives (tar or tar.gz; members in any order,
// under any folder) with some batch missing, empty or cut short, or present twice, bad labels,
// and members that are not batches (links, folders, other files): either the source refuses the
// archive naming the bad member, or every record is packed or skipped.
func TestPropertyCIFARArchive(t *testing.T) {
	for _, seed := range seeds(t) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			g := newGen(t, seed)
			root := t.TempDir()
			type member struct {
				name string
				data []byte
				typ  byte
			}
			var members []member
			var want expect
			var refuse []string // member names one of which Open must name
			folder := g.pick([]string{"cifar-10-batches-bin/", "", "x/y/"})
			for i := 1; i <= 5; i++ {
				name := fmt.Sprintf("data_batch_%d.bin", i)
				if g.r.IntN(20) == 0 {
					refuse = append(refuse, name) // missing
					continue
				}
				var b []byte
				n := 1 + g.r.IntN(3)
				if g.r.IntN(15) == 0 {
					n = 0
				}
				for rec := range n {
					label := byte(g.r.IntN(10))
					if g.r.IntN(5) == 0 {
						label = byte(10 + g.r.IntN(200))
					}
					b = append(b, label)
					b = append(b, bytes.Repeat([]byte{byte(rec)}, cifar.ImageSize)...)
					ok := 0
					if label < 10 {
						ok = 1
					}
					want.add(fmt.Sprintf("%s#%d", name, rec), ok)
				}
				if g.r.IntN(15) == 0 && len(b) > 0 {
					b = b[:len(b)-1]
				}
				if len(b)%cifar.RecordSize10 != 0 || len(b) == 0 {
					refuse = append(refuse, name)
				}
				members = append(members, member{folder + name, b, tar.TypeReg})
				if g.r.IntN(20) == 0 {
					members = append(members, member{"other/" + name, b, tar.TypeReg}) // twice
					refuse = append(refuse, name)
				}
			}
			if g.r.IntN(2) == 0 {
				members = append(members, member{folder + "batches.meta.txt", []byte(strings.Join(cifar.OfficialNames10, "\n")), tar.TypeReg})
			}
			for range g.r.IntN(3) {
				switch g.r.IntN(3) {
				case 0:
					members = append(members, member{folder + "readme.html", []byte("<p>"), tar.TypeReg})
				case 1:
					members = append(members, member{folder + "sub/", nil, tar.TypeDir})
				default:
					members = append(members, member{folder + "link.bin", nil, tar.TypeSymlink})
				}
			}
			g.r.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
			var b bytes.Buffer
			tw := tar.NewWriter(&b)
			for _, m := range members {
				h := &tar.Header{Name: m.name, Mode: 0o644, Size: int64(len(m.data)), Typeflag: m.typ}
				if m.typ == tar.TypeSymlink {
					h.Linkname = "data_batch_1.bin"
				}
				g.must(tw.WriteHeader(h))
				_, err := tw.Write(m.data)
				g.must(err)
			}
			g.must(tw.Close())
			data, name := b.Bytes(), "cifar-10-binary.tar"
			if g.r.IntN(2) == 0 {
				var z bytes.Buffer
				zw := gzip.NewWriter(&z)
				_, err := zw.Write(data)
				g.must(err)
				g.must(zw.Close())
				data, name = z.Bytes(), name+".gz"
			}
			p := filepath.Join(root, name)
			g.must(os.WriteFile(p, data, 0o644))
			src, err := cifar.Open(p, cifar.Kind10, "train")
			if len(refuse) > 0 {
				if err == nil || !slices.ContainsFunc(refuse, func(n string) bool { return strings.Contains(err.Error(), n) }) {
					t.Fatalf("Open: %v; want an error naming one of %v", err, refuse)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkBuild(t, src, root, want)
		})
	}
}

// TestRecordSourcesRefuseOneFileTwice: a shard or record file reached under two names (a link
// to another one in the folder, a list naming one shard twice) was read twice and its records
// packed twice. Every record-format source refuses it at open, naming both.
func TestRecordSourcesRefuseOneFileTwice(t *testing.T) {
	g := newGen(t, 1)
	mkdir := func() string { return t.TempDir() }
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	for _, m := range [][2]string{{"k.png", string(g.png(8, 8))}, {"k.cls", "1"}} {
		g.must(tw.WriteHeader(&tar.Header{Name: m[0], Mode: 0o644, Size: int64(len(m[1])), Typeflag: tar.TypeReg}))
		_, err := tw.Write([]byte(m[1]))
		g.must(err)
	}
	g.must(tw.Close())
	var pb bytes.Buffer
	l := int64(0)
	w := pq.NewGenericWriter[pqRow](&pb)
	_, err := w.Write([]pqRow{{Image: g.png(8, 8), Label: &l}})
	g.must(err)
	g.must(w.Close())
	ex := tfExample(tfFeature(tfrecord.DefaultImageKey, [][]byte{g.png(8, 8)}, nil), tfFeature(tfrecord.DefaultLabelKey, nil, []int64{0}))
	head := binary.LittleEndian.AppendUint64(nil, uint64(len(ex)))
	tf := binary.LittleEndian.AppendUint32(append(binary.LittleEndian.AppendUint32(append([]byte(nil), head...), tfMasked(head)), ex...), tfMasked(ex))

	linked := func(a, b string, data []byte) string {
		dir := mkdir()
		g.must(os.WriteFile(filepath.Join(dir, a), data, 0o644))
		g.must(os.Symlink(a, filepath.Join(dir, b)))
		return dir
	}
	wdsDir := linked("a.tar", "b.tar", tb.Bytes())
	listDir := linked("s.tar", "other.txt", nil)
	g.must(os.Remove(filepath.Join(listDir, "other.txt")))
	g.must(os.WriteFile(filepath.Join(listDir, "s.tar"), tb.Bytes(), 0o644))
	g.must(os.WriteFile(filepath.Join(listDir, "list.txt"), []byte("s.tar\n./s.tar\n"), 0o644))
	tfDir := linked("a.tfrecord", "b.tfrecord", tf)
	pqDir := linked("a.parquet", "b.parquet", pb.Bytes())
	for _, c := range []struct {
		what string
		open func() error
		want string
	}{
		{"webdataset folder", func() error { _, err := webdataset.Open(wdsDir, webdataset.Options{}); return err }, "a.tar and b.tar are the same file"},
		{"webdataset list", func() error {
			_, err := webdataset.Open(filepath.Join(listDir, "list.txt"), webdataset.Options{})
			return err
		}, "s.tar and ./s.tar are the same file"},
		{"tfrecord folder", func() error { _, err := tfrecord.Open(tfDir, tfrecord.Options{}); return err }, "a.tfrecord and b.tfrecord are the same file"},
		{"parquet folder", func() error { _, err := parquet.Open(pqDir, parquet.Options{}); return err }, "a.parquet and b.parquet are the same file"},
		{"parquet glob", func() error {
			_, err := parquet.Open(filepath.Join(pqDir, "*.parquet"), parquet.Options{})
			return err
		}, "a.parquet and b.parquet are the same file"},
	} {
		if err := c.open(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Open: %v, want %q", c.what, err, c.want)
		}
	}
}
