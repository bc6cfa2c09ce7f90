package npy

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/packer-dev/packer/output"
	"github.com/packer-dev/packer/shard"
)

// maxMetaLine bounds one line of meta.jsonl.
const maxMetaLine = 64 << 20

// expected returns the files an npy dataset described by m must have, with the NumPy type
// and shape of each .npy file (nil shape for meta.jsonl).
type expectedFile struct {
	name  string
	descr string
	shape []int64
	// valuesOf, for a variable field's offsets, names the file of the values they index
	valuesOf string
}

func expected(m *shard.Manifest) ([]expectedFile, error) {
	descr := Descr(m.Sample.DType)
	if descr == "" {
		return nil, fmt.Errorf("%s: dtype %q cannot be stored in .npy: %w", shard.ManifestName, m.Sample.DType, ErrFormat)
	}
	if !m.Sample.Fixed() {
		return nil, fmt.Errorf("%s: sample shape %v is not fixed: %w", shard.ManifestName, m.Sample.Shape, ErrFormat)
	}
	shape := []int64{m.Count}
	for _, d := range m.Sample.Shape {
		shape = append(shape, int64(d))
	}
	files := []expectedFile{{name: ImagesFile, descr: descr, shape: shape}, {name: LabelsFile, descr: LabelDescr, shape: []int64{m.Count}}}
	for _, a := range m.Label.Aux {
		if err := checkAuxName(a); err != nil {
			return nil, fmt.Errorf("%s: %v: %w", shard.ManifestName, err, ErrFormat)
		}
		files = append(files, expectedFile{name: AuxFile(a), descr: LabelDescr, shape: []int64{m.Count}})
	}
	return files, nil
}

// expectedFields returns the files of m's fields, in the order the manifest lists them. The
// row count of a variable field's values is -1 (any): its offsets give it.
func expectedFields(m *shard.Manifest) ([]expectedFile, error) {
	layouts, err := output.FieldLayouts(m.Fields, m.Sample)
	if err != nil {
		return nil, fmt.Errorf("%s: %v: %w", shard.ManifestName, err, ErrFormat)
	}
	var files []expectedFile
	for _, l := range layouts {
		names := fieldFiles(l)
		if l.Fixed {
			files = append(files, expectedFile{name: names[0], descr: fieldDescr(l.Field), shape: append([]int64{m.Count}, toInt64(l.Shape)...)})
			continue
		}
		values := expectedFile{name: names[0], descr: fieldDescr(l.Field), shape: []int64{-1}}
		if len(l.Shape) > 0 {
			values.shape = append(values.shape, toInt64(l.Shape[1:])...)
		}
		files = append(files, values, expectedFile{name: names[1], descr: LabelDescr, shape: []int64{m.Count + 1}, valuesOf: names[0]})
	}
	return files, nil
}

// Check checks the npy dataset in dir against its manifest and returns every fault found,
// each an error starting with the file's name and wrapping ErrFormat (or an I/O error):
// images.npy, labels.npy and aux_<name>.npy must be listed in the manifest, exist, have a
// header that parses, the manifest's dtype (labels: <i8), C order, the shape [count, ...sample],
// a 64-byte aligned data start, exactly the size that header and shape call for, and the size
// the manifest lists. meta.jsonl, when listed, must hold count lines of valid JSON. Listed
// files that an npy dataset does not have are reported too. SHA-256 sums are not checked here:
// verify.Dir hashes every listed file.
func Check(dir string, m *shard.Manifest) []error {
	if m == nil {
		return []error{fmt.Errorf("%s: no manifest to check against: %w", shard.ManifestName, ErrFormat)}
	}
	files, err := expected(m)
	if err != nil {
		return []error{err}
	}
	ffiles, err := expectedFields(m)
	if err != nil {
		return []error{err}
	}
	listed := map[string]shard.FileEntry{}
	for _, fe := range m.Files {
		listed[fe.Path] = fe
	}
	var errs []error
	known := map[string]bool{MetaFile: true}
	var order []string
	for _, ef := range files {
		known[ef.name] = true
		order = append(order, ef.name)
		fe, ok := listed[ef.name]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: not listed in the manifest: %w", ef.name, ErrFormat))
		}
		aerrs := checkArray(dir, ef, fe, ok)
		errs = append(errs, aerrs...)
		if ef.name == LabelsFile && len(aerrs) == 0 {
			errs = append(errs, checkLabels(dir, m)...)
		}
	}
	if fe, ok := listed[MetaFile]; ok {
		order = append(order, MetaFile)
		errs = append(errs, checkMeta(dir, fe, m.Count)...)
	}
	for _, ef := range ffiles {
		known[ef.name] = true
		order = append(order, ef.name)
		fe, ok := listed[ef.name]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: not listed in the manifest: %w", ef.name, ErrFormat))
		}
		aerrs := checkArray(dir, ef, fe, ok)
		errs = append(errs, aerrs...)
		if ef.valuesOf != "" && len(aerrs) == 0 {
			errs = append(errs, checkOffsets(dir, ef.valuesOf, ef.name)...)
		}
	}
	var got []string
	for _, fe := range m.Files {
		got = append(got, fe.Path)
	}
	if !slices.Equal(got, order) {
		errs = append(errs, fmt.Errorf("%s: files are listed as %q; an npy dataset lists %q: %w", shard.ManifestName, got, order, ErrFormat))
	}
	for _, fe := range m.Files {
		if !known[fe.Path] {
			errs = append(errs, fmt.Errorf("%s: listed in the manifest but not a file of an npy dataset: %w", fe.Path, ErrFormat))
		}
	}
	return errs
}

func checkArray(dir string, ef expectedFile, fe shard.FileEntry, listed bool) []error {
	name := ef.name
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		return []error{fmt.Errorf("%s: %w", name, unwrapPath(err))}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return []error{fmt.Errorf("%s: %w", name, unwrapPath(err))}
	}
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s: %w", name, fmt.Sprintf(format, args...), ErrFormat))
	}
	if listed && st.Size() != fe.Size {
		bad("size is %d bytes, manifest says %d", st.Size(), fe.Size)
	}
	h, off, err := ReadHeader(bufio.NewReader(f))
	if err != nil {
		return append(errs, fmt.Errorf("%s: %w", name, err))
	}
	if h.Descr != ef.descr {
		bad("dtype %s, want %s", h.Descr, ef.descr)
	}
	if h.Fortran {
		bad("Fortran order, want C order")
	}
	if !sameShape(h.Shape, ef.shape) {
		bad("shape %v, want %v", h.Shape, ef.shape)
	}
	if off%Align != 0 {
		bad("data starts at offset %d, not a multiple of %d", off, Align)
	}
	if ds := h.DataSize(); ds < 0 {
		bad("shape %v of %s is too large", h.Shape, h.Descr)
	} else {
		if want := off + ds; st.Size() != want {
			what := "truncated"
			if st.Size() > want {
				what = "extra bytes"
			}
			bad("size is %d bytes, header %v %s needs %d (%s)", st.Size(), h.Shape, h.Descr, want, what)
		}
	}
	return errs
}

// checkLabels reads labels.npy (whose header checkArray has accepted) and checks the labels
// against the manifest: range and class_counts.
func checkLabels(dir string, m *shard.Manifest) []error {
	f, err := os.Open(filepath.Join(dir, LabelsFile))
	if err != nil {
		return []error{fmt.Errorf("%s: %w", LabelsFile, unwrapPath(err))}
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	if _, _, err := ReadHeader(br); err != nil {
		return []error{fmt.Errorf("%s: %w", LabelsFile, err)}
	}
	tally := shard.NewLabelTally(m)
	buf := make([]byte, 8<<10)
	labels := make([]int64, 0, len(buf)/8)
	for rec := int64(0); rec < m.Count; {
		n := min(m.Count-rec, int64(len(buf)/8))
		if _, err := io.ReadFull(br, buf[:8*n]); err != nil {
			return []error{fmt.Errorf("%s: record %d: %w", LabelsFile, rec, err)}
		}
		labels = labels[:0]
		for i := range n {
			labels = append(labels, int64(binary.LittleEndian.Uint64(buf[8*i:])))
		}
		tally.Add(rec, labels)
		rec += n
	}
	var errs []error
	for _, msg := range tally.Faults(m) {
		errs = append(errs, fmt.Errorf("%s: %s: %w", LabelsFile, msg, ErrFormat))
	}
	return errs
}

// sameShape compares a header's shape with the one expected, whose first dimension may be -1
// (any).
func sameShape(a []int, b []int64) bool {
	if len(a) > 0 && len(b) > 0 && b[0] == -1 {
		return equalShape(a[1:], b[1:])
	}
	return equalShape(a, b)
}

// checkOffsets checks a variable field's offsets (whose header checkArray has accepted): 0
// first, never decreasing, and last the row count of the values' header.
func checkOffsets(dir, values, offsets string) []error {
	vf, err := os.Open(filepath.Join(dir, values))
	if err != nil {
		return []error{fmt.Errorf("%s: %w", values, unwrapPath(err))}
	}
	defer vf.Close()
	vh, _, err := ReadHeader(bufio.NewReader(vf))
	if err != nil || len(vh.Shape) == 0 {
		return nil // checkArray reported it
	}
	f, err := os.Open(filepath.Join(dir, offsets))
	if err != nil {
		return []error{fmt.Errorf("%s: %w", offsets, unwrapPath(err))}
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	h, _, err := ReadHeader(br)
	if err != nil {
		return []error{fmt.Errorf("%s: %w", offsets, err)}
	}
	var b [8]byte
	prev := int64(0)
	for i := 0; i < h.Shape[0]; i++ {
		if _, err := io.ReadFull(br, b[:]); err != nil {
			return []error{fmt.Errorf("%s: entry %d: %w", offsets, i, err)}
		}
		v := int64(binary.LittleEndian.Uint64(b[:]))
		if i == 0 && v != 0 || v < prev {
			return []error{fmt.Errorf("%s: entry %d is %d after %d (want 0 first, then never decreasing): %w", offsets, i, v, prev, ErrFormat)}
		}
		prev = v
	}
	if prev != int64(vh.Shape[0]) {
		return []error{fmt.Errorf("%s: the last offset is %d, %s holds %d rows: %w", offsets, prev, values, vh.Shape[0], ErrFormat)}
	}
	return nil
}

// unwrapPath drops the directory from an *os.PathError so messages name the dataset file.
func unwrapPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}

func checkMeta(dir string, fe shard.FileEntry, count int64) []error {
	f, err := os.Open(filepath.Join(dir, MetaFile))
	if err != nil {
		return []error{fmt.Errorf("%s: %w", MetaFile, unwrapPath(err))}
	}
	defer f.Close()
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s: %w", MetaFile, fmt.Sprintf(format, args...), ErrFormat))
	}
	if st, err := f.Stat(); err == nil && st.Size() != fe.Size {
		bad("size is %d bytes, manifest says %d", st.Size(), fe.Size)
	}
	br := bufio.NewReaderSize(f, 1<<20)
	var lines, badLines int64
	for {
		line, err := readLine(br)
		if err == io.EOF {
			break
		}
		if err != nil {
			bad("line %d: %v", lines+1, err)
			break
		}
		if !json.Valid(line) {
			if badLines++; badLines <= 10 {
				bad("record %d: line is not valid JSON", lines)
			}
		}
		lines++
	}
	if badLines > 10 {
		bad("%d lines in all are not valid JSON", badLines)
	}
	if lines != count {
		bad("%d lines, want one per record (%d)", lines, count)
	}
	return errs
}

// readLine returns the next newline-terminated line without its newline; a last line
// without a newline is an error, since the writer ends every line with one.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(line)+len(frag) > maxMetaLine {
			return nil, fmt.Errorf("line longer than %d bytes", maxMetaLine)
		}
		line = append(line, frag...)
		switch err {
		case nil:
			return line[:len(line)-1], nil
		case bufio.ErrBufferFull:
			continue
		case io.EOF:
			if len(line) == 0 {
				return nil, io.EOF
			}
			return nil, fmt.Errorf("last line %q has no newline", strings.TrimSpace(string(line[:min(len(line), 40)])))
		default:
			return nil, err
		}
	}
}
