package source_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	pq "github.com/parquet-go/parquet-go"

	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/source/parquet"
	"github.com/packer-dev/packer/source/tfrecord"
	"github.com/packer-dev/packer/source/webdataset"
)

// countFiles serves local files as Options.Files does a view's, counting the opens of each file
// and recording the byte ranges read at offsets.
type countFiles struct {
	mu    sync.Mutex
	opens map[string]int
	reads map[string][][2]int64 // [offset, end) of each ReadAt
}

func (c *countFiles) reset() {
	c.mu.Lock()
	c.opens, c.reads = map[string]int{}, map[string][][2]int64{}
	c.mu.Unlock()
}

func (c *countFiles) Open(_ context.Context, p string, _ *source.Stamp) (io.ReadCloser, int64, error) {
	c.mu.Lock()
	c.opens[filepath.Base(p)]++
	c.mu.Unlock()
	f, err := os.Open(p)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}

func (c *countFiles) OpenAt(ctx context.Context, p string, st *source.Stamp) (source.ReadAtCloser, int64, error) {
	r, n, err := c.Open(ctx, p, st)
	if err != nil {
		return nil, 0, err
	}
	return &countReaderAt{f: r.(*os.File), c: c, name: filepath.Base(p)}, n, nil
}

type countReaderAt struct {
	f    *os.File
	c    *countFiles
	name string
}

func (r *countReaderAt) ReadAt(p []byte, off int64) (int, error) {
	r.c.mu.Lock()
	r.c.reads[r.name] = append(r.c.reads[r.name], [2]int64{off, off + int64(len(p))})
	r.c.mu.Unlock()
	return r.f.ReadAt(p, off)
}

func (r *countReaderAt) Close() error { return r.f.Close() }

// recordFixtures writes, under root, a WebDataset, a TFRecord and a Parquet source of several
// files of a few records each: an empty file among them, and a damaged one (a tar cut short, a
// TFRecord file whose framing fails from a record on, a Parquet file cut short).
func recordFixtures(t *testing.T, root string) map[string]string {
	t.Helper()
	dirs := map[string]string{}
	for _, k := range []string{"wds", "tfr", "pq"} {
		dirs[k] = filepath.Join(root, k)
		if err := os.MkdirAll(dirs[k], 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p string, b []byte) {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	image := func(f, i int) []byte { return []byte(fmt.Sprintf("image %d of file %d", i, f)) }
	for f, n := range []int{3, 4, 0, 5, 2} {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for i := range n {
			for _, m := range [][2]string{{fmt.Sprintf("k%d.png", i), string(image(f, i))}, {fmt.Sprintf("k%d.cls", i), fmt.Sprint(i % 3)}} {
				tw.WriteHeader(&tar.Header{Name: m[0], Mode: 0o644, Size: int64(len(m[1])), Typeflag: tar.TypeReg})
				tw.Write([]byte(m[1]))
			}
		}
		tw.Close()
		data := b.Bytes()
		if f == 4 {
			data = data[:1500] // cut inside the second sample
		}
		write(filepath.Join(dirs["wds"], fmt.Sprintf("shard-%d.tar", f)), data)

		var out []byte
		for i := range n {
			ex := tfExample(tfFeature("image/encoded", [][]byte{image(f, i)}, nil), tfFeature("image/class/label", nil, []int64{int64(i % 3)}))
			head := binary.LittleEndian.AppendUint64(nil, uint64(len(ex)))
			crc := tfMasked(head)
			if f == 3 && i == 3 {
				crc++ // the framing fails from record 3 on
			}
			out = binary.LittleEndian.AppendUint32(append(out, head...), crc)
			out = binary.LittleEndian.AppendUint32(append(out, ex...), tfMasked(ex))
		}
		write(filepath.Join(dirs["tfr"], fmt.Sprintf("train-%d.tfrecord", f)), out)

		if n == 0 {
			continue // a Parquet file holds at least its schema: no empty one
		}
		var rows []pqRow
		for i := range n {
			l := int64(i % 3)
			rows = append(rows, pqRow{Image: image(f, i), Label: &l})
		}
		var pb bytes.Buffer
		w := pq.NewGenericWriter[pqRow](&pb, pq.MaxRowsPerRowGroup(2))
		if _, err := w.Write(rows); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		data = pb.Bytes()
		if f == 4 {
			data = data[:len(data)/2]
		}
		write(filepath.Join(dirs["pq"], fmt.Sprintf("f%d.parquet", f)), data)
	}
	return dirs
}

// TestRecordSourceRanges: for every range of its inputs, a WebDataset, TFRecord or Parquet
// source given the layout EnumerateLayout reported enumerates exactly those inputs of the whole
// enumeration (same Seq, name, bytes, label and fault), opening only the files that hold them,
// each once; a Parquet range reads, of each file it opens, only the footer and the row groups
// that hold its rows. A layout whose counts are not the files' fails, naming the file.
func TestRecordSourceRanges(t *testing.T) {
	dirs := recordFixtures(t, t.TempDir())
	files := &countFiles{}
	files.reset()
	classes := []string{"a", "b", "c"}
	kinds := []struct {
		name string
		open func() (source.Source, error)
	}{
		{"webdataset", func() (source.Source, error) {
			return webdataset.Open(dirs["wds"], webdataset.Options{Files: files, Classes: classes})
		}},
		{"tfrecord", func() (source.Source, error) {
			return tfrecord.Open(dirs["tfr"], tfrecord.Options{Files: files, Classes: classes})
		}},
		{"parquet", func() (source.Source, error) {
			return parquet.Open(dirs["pq"], parquet.Options{Files: files, Classes: classes})
		}},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			s, err := k.open()
			if err != nil {
				t.Fatal(err)
			}
			rs := s.(source.RecordSource)
			root, names := rs.InputFiles()
			var all []source.Item
			var layout []source.FileLayout
			if err := rs.EnumerateLayout(context.Background(), func(it source.Item) error { all = append(all, it); return nil },
				func(f source.FileLayout) error { layout = append(layout, f); return nil }); err != nil {
				t.Fatal(err)
			}
			var plain []source.Item
			if err := s.Enumerate(context.Background(), func(it source.Item) error { plain = append(plain, it); return nil }); err != nil {
				t.Fatal(err)
			}
			if len(layout) != len(names) || len(plain) != len(all) {
				t.Fatalf("layout of %d files for %d; %d inputs, Enumerate %d", len(layout), len(names), len(all), len(plain))
			}
			var sum int64
			for i, f := range layout {
				if f.Path != names[i] || f.Stamp != source.StatStamp(nil, filepath.Join(root, names[i])) {
					t.Errorf("file %d: layout %+v, want %s with its stamp", i, f, names[i])
				}
				sum += f.Items
			}
			if sum != int64(len(all)) {
				t.Fatalf("the layout counts %d inputs, the enumeration %d: %+v", sum, len(all), layout)
			}
			for _, f := range layout {
				t.Logf("%s: %d inputs, row groups %v", f.Path, f.Items, f.Groups)
			}
			groups := parquetGroups(t, k.name, root, names)
			n := int64(len(all))
			for lo := int64(0); lo < n; lo++ {
				for hi := lo + 1; hi <= n; hi++ {
					files.reset()
					var got []source.Item
					if err := rs.EnumerateRange(context.Background(), layout, lo, hi, func(it source.Item) error { got = append(got, it); return nil }); err != nil {
						t.Fatalf("[%d, %d): %v", lo, hi, err)
					}
					if d := diffItems(got, all[lo:hi]); d != "" {
						t.Fatalf("[%d, %d): %s", lo, hi, d)
					}
					// The files that hold inputs of the range, each opened once; no other.
					want := map[string]int{}
					var at int64
					for _, f := range layout {
						if f.Items > 0 && at < hi && at+f.Items > lo {
							want[f.Path] = 1
						}
						at += f.Items
					}
					files.mu.Lock()
					opens, reads := files.opens, files.reads
					files.mu.Unlock()
					if fmt.Sprint(opens) != fmt.Sprint(want) {
						t.Fatalf("[%d, %d): opened %v, want %v", lo, hi, opens, want)
					}
					if groups != nil {
						checkParquetReads(t, lo, hi, layout, groups, reads)
					}
				}
			}
			// A layout that says a file holds more inputs than it has: refused, naming it.
			bad := slices.Clone(layout)
			bad[1].Items++
			bad[1].Groups = nil
			err = rs.EnumerateRange(context.Background(), bad, 0, n+1, func(source.Item) error { return nil })
			if err == nil || !bytes.Contains([]byte(err.Error()), []byte(filepath.Join(root, names[1]))) {
				t.Errorf("a layout with a wrong count: %v, want an error naming %s", err, names[1])
			}
		})
	}
}

// pqSpan is a byte range of a Parquet file: its footer, or the column chunks of a row group.
type pqSpan struct{ lo, hi int64 }

// parquetGroups is, for the Parquet kind, each file's footer span and the span of each row
// group's column chunks (nil for other kinds, or a file the reader cannot open).
func parquetGroups(t *testing.T, kind, root string, names []string) map[string][]pqSpan {
	if kind != "parquet" {
		return nil
	}
	m := map[string][]pqSpan{}
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		f, err := pq.OpenFile(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			continue
		}
		footer := int64(binary.LittleEndian.Uint32(data[len(data)-8:]))
		spans := []pqSpan{{int64(len(data)) - 8 - footer, int64(len(data))}}
		for _, rg := range f.Metadata().RowGroups {
			s := pqSpan{lo: 1 << 62}
			for _, c := range rg.Columns {
				md := c.MetaData
				start := md.DataPageOffset
				if md.DictionaryPageOffset > 0 && md.DictionaryPageOffset < start {
					start = md.DictionaryPageOffset
				}
				s.lo, s.hi = min(s.lo, start), max(s.hi, start+md.TotalCompressedSize)
			}
			spans = append(spans, s)
		}
		m[name] = spans
	}
	return m
}

// checkParquetReads fails when a read of the range [lo, hi) touched a file outside its footer
// and the row groups that hold rows of the range (files the reader could not open are left out:
// they are read from their start, their one input being the fault).
func checkParquetReads(t *testing.T, lo, hi int64, layout []source.FileLayout, groups map[string][]pqSpan, reads map[string][][2]int64) {
	t.Helper()
	var at int64
	for _, f := range layout {
		spans, ok := groups[f.Path]
		if !ok || f.Groups == nil {
			at += f.Items
			continue
		}
		allowed := []pqSpan{spans[0]}
		g0 := at
		for g, rows := range f.Groups {
			if g0 < hi && g0+rows > lo {
				allowed = append(allowed, spans[1+g])
			}
			g0 += rows
		}
		for _, r := range reads[f.Path] {
			in := false
			for _, s := range allowed {
				in = in || r[0] >= s.lo && r[1] <= s.hi
			}
			if !in && r[1] > 8 { // the magic at the start is not data
				t.Fatalf("[%d, %d): read [%d, %d) of %s, outside its footer and the row groups of the range %v", lo, hi, r[0], r[1], f.Path, allowed)
			}
		}
		at += f.Items
	}
}

// diffItems says how got differs from want (Seq, name, bytes, label, fault), or "".
func diffItems(got, want []source.Item) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d inputs, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Seq != w.Seq || g.Name != w.Name || !bytes.Equal(g.Raw, w.Raw) || g.Label != w.Label || fmt.Sprint(g.Note) != fmt.Sprint(w.Note) {
			return fmt.Sprintf("input %d: %d %q label %d %v, want %d %q label %d %v", i, g.Seq, g.Name, g.Label, g.Note, w.Seq, w.Name, w.Label, w.Note)
		}
	}
	return ""
}

// TestParquetRangeGroupsDisagree: a plan whose row-group counts for a file add up to the file's
// rows but are not its footer's (a plan edited by hand, or a file rewritten with the size and
// time it had) would start a part's read at the wrong row: the part fails, naming the file,
// rather than emitting other rows under the planned numbers.
func TestParquetRangeGroupsDisagree(t *testing.T) {
	dirs := recordFixtures(t, t.TempDir())
	files := &countFiles{}
	files.reset()
	s, err := parquet.Open(dirs["pq"], parquet.Options{Files: files, Classes: []string{"a", "b", "c"}})
	if err != nil {
		t.Fatal(err)
	}
	var layout []source.FileLayout
	if err := s.EnumerateLayout(context.Background(), func(source.Item) error { return nil },
		func(f source.FileLayout) error { layout = append(layout, f); return nil }); err != nil {
		t.Fatal(err)
	}
	var base int64
	k := -1
	for i, f := range layout {
		if len(f.Groups) >= 2 && f.Groups[0] >= 2 {
			k = i
			break
		}
		base += f.Items
	}
	if k < 0 {
		t.Fatalf("no file of two row groups of 2 rows or more: %+v", layout)
	}
	// The first row group said to be one row shorter, the second one longer: same total.
	layout[k].Groups = slices.Clone(layout[k].Groups)
	layout[k].Groups[0]--
	layout[k].Groups[1]++
	lo := base + layout[k].Groups[0]
	var got []source.Item
	err = s.EnumerateRange(context.Background(), layout, lo, lo+1, func(it source.Item) error { got = append(got, it); return nil })
	name := filepath.Join(dirs["pq"], layout[k].Path)
	if err == nil || !errors.Is(err, source.ErrLayout) || !strings.Contains(err.Error(), name) {
		t.Fatalf("row groups that are not the footer's: %v (inputs %v), want ErrLayout naming %s", err, got, name)
	}
}

// TestRecordRangeEndsAtFileEnd: a part whose range ends where the layout says a file ends
// checks that the file ends there: with a layout that gives a file one input fewer than it
// has (and the next file one more, the total the same), that file's last input would be read
// by no part and missed without a word.
func TestRecordRangeEndsAtFileEnd(t *testing.T) {
	dirs := recordFixtures(t, t.TempDir())
	classes := []string{"a", "b", "c"}
	for _, k := range []struct {
		name string
		open func() (source.Source, error)
	}{
		{"webdataset", func() (source.Source, error) {
			return webdataset.Open(dirs["wds"], webdataset.Options{Classes: classes})
		}},
		{"tfrecord", func() (source.Source, error) { return tfrecord.Open(dirs["tfr"], tfrecord.Options{Classes: classes}) }},
		{"parquet", func() (source.Source, error) { return parquet.Open(dirs["pq"], parquet.Options{Classes: classes}) }},
	} {
		t.Run(k.name, func(t *testing.T) {
			s, err := k.open()
			if err != nil {
				t.Fatal(err)
			}
			rs := s.(source.RecordSource)
			root, _ := rs.InputFiles()
			var layout []source.FileLayout
			if err := rs.EnumerateLayout(context.Background(), func(source.Item) error { return nil },
				func(f source.FileLayout) error { layout = append(layout, f); return nil }); err != nil {
				t.Fatal(err)
			}
			if layout[0].Items < 2 {
				t.Fatalf("the first file has %d inputs, want 2 or more", layout[0].Items)
			}
			layout[0].Items--
			layout[1].Items++
			layout[0].Groups, layout[1].Groups = nil, nil
			var got []source.Item
			err = rs.EnumerateRange(context.Background(), layout, 0, layout[0].Items, func(it source.Item) error { got = append(got, it); return nil })
			name := filepath.Join(root, layout[0].Path)
			if !errors.Is(err, source.ErrLayout) || !strings.Contains(err.Error(), name) {
				t.Fatalf("a range ending where the layout ends a file that holds one more input: %v (%d inputs), want ErrLayout naming %s", err, len(got), name)
			}
		})
	}
}
