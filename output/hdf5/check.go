package hdf5

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/packer-dev/packer/shard"
)

// ErrFormat is wrapped by errors reporting a data.h5 whose structure (datasets, shapes, types,
// counts) does not match what it must hold: the file is damaged or is not packer's.
var ErrFormat = errors.New("hdf5: invalid file structure")

// ErrDamaged is wrapped by errors reporting a data.h5 whose bytes are not those the manifest
// describes (size, SHA-256 or signature): the file is corrupt.
var ErrDamaged = errors.New("hdf5: file damaged")

// expect is what a data.h5 must hold.
type expect struct {
	count  int64
	sample shard.SampleSpec
	aux    []string
	meta   bool // /meta must exist (when false it may still exist)
	// m, when set, is the manifest the attributes (classes, label, spec) and the labels (range,
	// class_counts) must agree with
	m *shard.Manifest
	// fields is the schema: a dataset per field, and the root attribute "fields"
	fields []shard.Field
}

// Check checks dir/data.h5 against the manifest and reports every fault found, each naming the
// file (and the dataset, for structural faults). It never panics and never hands a damaged file
// to libhdf5:
//
//  1. the file must be listed in the manifest, exist, and have the listed size;
//  2. its SHA-256 must match the manifest. libhdf5 does not survive arbitrary damage (random bit
//     flips in a small data.h5 made it crash with SIGSEGV or loop forever in 3 of 400 trials), so
//     a file whose bytes are not the ones written is reported as damaged (with what a plain read
//     of its superblock signature shows) and is not parsed further;
//  3. the intact file must open, and /images, /labels, /aux/<name> (and /meta when present) must
//     have the shapes, element types and record count of the manifest, the "sample" attribute
//     must match it, and the labels and the first and last record must read back.
//
// A caller that has just checked the file's size and SHA-256 against the manifest itself (as
// verify.Dir does) uses CheckStructure instead, so the file is not read twice.
func Check(dir string, m *shard.Manifest) []error {
	path, entry, errs := listed(dir, m)
	if errs != nil {
		return errs
	}
	if errs := checkBytes(path, *entry); len(errs) > 0 {
		return errs
	}
	return checkFile(path, expect{count: m.Count, sample: m.Sample, aux: m.Label.Aux, m: m, fields: m.Fields})
}

// CheckStructure is step 3 of Check alone. The caller must already know that data.h5 has the
// size and SHA-256 the manifest lists: libhdf5 must never see a damaged file.
func CheckStructure(dir string, m *shard.Manifest) []error {
	path, _, errs := listed(dir, m)
	if errs != nil {
		return errs
	}
	return checkFile(path, expect{count: m.Count, sample: m.Sample, aux: m.Label.Aux, m: m, fields: m.Fields})
}

// listed returns data.h5's path and manifest entry, or the error saying why it cannot be checked.
func listed(dir string, m *shard.Manifest) (string, *shard.FileEntry, []error) {
	path := filepath.Join(dir, DataFile)
	if m == nil {
		return path, nil, []error{fmt.Errorf("%s: no manifest to check against", path)}
	}
	for i := range m.Files {
		if m.Files[i].Path == DataFile {
			return path, &m.Files[i], nil
		}
	}
	return path, nil, []error{fmt.Errorf("%s: not listed in the manifest, so it cannot be checked: %w", path, ErrFormat)}
}

// signature is the HDF5 format signature, at offset 0 of every file this package writes.
const signature = "\x89HDF\r\n\x1a\n"

// checkBytes checks path's size and SHA-256 against the manifest entry without libhdf5.
func checkBytes(path string, fe shard.FileEntry) []error {
	f, err := os.Open(path)
	if err != nil {
		return []error{fmt.Errorf("%s: %w", path, err)}
	}
	defer f.Close()
	var errs []error
	st, err := f.Stat()
	if err != nil {
		return []error{fmt.Errorf("%s: %w", path, err)}
	}
	if st.Size() != fe.Size {
		what := "truncated"
		if st.Size() > fe.Size {
			what = "has extra bytes"
		}
		errs = append(errs, fmt.Errorf("%s: size is %d bytes, manifest says %d (%s): %w", path, st.Size(), fe.Size, what, ErrDamaged))
	}
	var sig [len(signature)]byte
	if _, err := io.ReadFull(f, sig[:]); err != nil || string(sig[:]) != signature {
		errs = append(errs, fmt.Errorf("%s: no HDF5 signature at offset 0 (superblock damaged or not an HDF5 file): %w", path, ErrDamaged))
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return append(errs, fmt.Errorf("%s: %w", path, err))
	}
	h := sha256.New()
	if _, err := io.CopyBuffer(h, f, make([]byte, 4<<20)); err != nil {
		return append(errs, fmt.Errorf("%s: read: %w", path, err))
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != strings.ToLower(fe.SHA256) {
		errs = append(errs, fmt.Errorf("%s: SHA-256 is %s, manifest says %s; the damaged file's HDF5 structure is not parsed (libhdf5 can crash on damaged input): %w", path, sum, fe.SHA256, ErrDamaged))
	}
	return errs
}

// checkFile checks the structure of the HDF5 file at path.
func checkFile(path string, exp expect) []error {
	var errs []error
	fail := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{path}, a...)...))
	}
	err := lib(func() error {
		f, err := openFile(path)
		if err != nil {
			fail("not a readable HDF5 file: %w", h5error("H5Fopen", err))
			return nil
		}
		defer f.Close()

		if s, err := strAttr(f.ID(), "format"); err != nil || s != FormatName {
			fail("root attribute \"format\" is %q, want %q: %w", s, FormatName, ErrFormat)
		}
		if s, err := strAttr(f.ID(), "sample"); err != nil {
			fail("root attribute \"sample\": %w", err)
		} else {
			var spec shard.SampleSpec
			if err := json.Unmarshal([]byte(s), &spec); err != nil {
				fail("root attribute \"sample\" %q: %v: %w", s, err, ErrFormat)
			} else if !slices.Equal(spec.Shape, exp.sample.Shape) || spec.DType != exp.sample.DType || spec.Layout != exp.sample.Layout {
				fail("root attribute \"sample\" is %s, manifest says %v %s %s: %w", s, exp.sample.Shape, exp.sample.DType, exp.sample.Layout, ErrFormat)
			}
		}

		if exp.m != nil {
			checkAttrs(f, exp.m, fail)
		}

		// /images: [count, shape...] of the sample dtype.
		shape := []uint64{uint64(exp.count)}
		for _, d := range exp.sample.Shape {
			shape = append(shape, uint64(d))
		}
		images := openChecked(f, ImagesName, shape, fail, func(t typeInfo) bool {
			dt, ok := dtypeOf(t)
			return ok && dt == exp.sample.DType
		}, string(exp.sample.DType))
		if images != nil {
			if exp.count > 0 && exp.sample.Size() > 0 {
				buf := make([]byte, exp.sample.Size())
				for _, i := range []int64{0, exp.count - 1} {
					if err := readRows(images, i, 1, buf); err != nil {
						fail("/%s: record %d: %w", ImagesName, i, err)
					}
				}
			}
			images.Close()
		}

		// /labels and /aux/<name>: [count] int64, read in full.
		cols := []string{LabelsName}
		if len(exp.aux) > 0 && !linkExists(f.ID(), AuxGroup) {
			fail("no group /%s for auxiliary labels %v: %w", AuxGroup, exp.aux, ErrFormat)
		} else {
			for _, a := range exp.aux {
				cols = append(cols, AuxGroup+"/"+a)
			}
		}
		for _, name := range cols {
			ds := openChecked(f, name, []uint64{uint64(exp.count)}, fail, isInt64, "int64")
			if ds == nil {
				continue
			}
			buf := make([]byte, 8*labelChunkRows)
			var tally *shard.LabelTally
			if name == LabelsName && exp.m != nil {
				tally = shard.NewLabelTally(exp.m)
			}
			labels := make([]int64, 0, labelChunkRows)
			for start := int64(0); start < exp.count; start += labelChunkRows {
				n := min(exp.count-start, labelChunkRows)
				if err := readRows(ds, start, n, buf[:8*n]); err != nil {
					fail("/%s: %w", name, err)
					tally = nil
					break
				}
				if tally != nil {
					labels = labels[:0]
					for i := range n {
						labels = append(labels, int64(binary.LittleEndian.Uint64(buf[8*i:])))
					}
					tally.Add(start, labels)
				}
			}
			if tally != nil {
				for _, msg := range tally.Faults(exp.m) {
					fail("/%s: %s: %w", name, msg, ErrFormat)
				}
			}
			ds.Close()
		}

		// /meta: [count] strings, when present.
		if linkExists(f.ID(), MetaName) || exp.meta {
			ds := openChecked(f, MetaName, []uint64{uint64(exp.count)}, fail, func(t typeInfo) bool { return t.vlenStr }, "variable-length string")
			if ds != nil {
				for _, i := range []int64{0, exp.count - 1} {
					if exp.count == 0 {
						break
					}
					if _, err := readString(ds, i); err != nil {
						fail("/%s: record %d: %w", MetaName, i, err)
					}
				}
				ds.Close()
			}
		}
		checkFields(f, exp, fail)
		return nil
	})
	if err != nil {
		// libhdf5 is missing: the structure is not checked, and verify must not pass.
		fail("structure not checked: %w", err)
	}
	return errs
}

// checkAttrs checks the root attributes the writer stores against the manifest: "classes",
// "label" and "spec" (the dataset meta: packer version, source, transform, classes).
func checkAttrs(f *handle, m *shard.Manifest, fail func(string, ...any)) {
	if s, err := strAttr(f.ID(), "classes"); err != nil {
		fail("root attribute \"classes\": %w", err)
	} else {
		var classes []string
		if err := json.Unmarshal([]byte(s), &classes); err != nil || !slices.Equal(classes, nonNil(m.Classes)) {
			fail("root attribute \"classes\" differs from the manifest's class names: %w", ErrFormat)
		}
	}
	if s, err := strAttr(f.ID(), "label"); err != nil {
		fail("root attribute \"label\": %w", err)
	} else {
		var l shard.LabelSpec
		want := labelSpec(m.Label)
		if err := json.Unmarshal([]byte(s), &l); err != nil || l.DType != want.DType || !slices.Equal(nonNil(l.Aux), want.Aux) {
			fail("root attribute \"label\" is %s, manifest says dtype %q aux %q: %w", s, m.Label.DType, m.Label.Aux, ErrFormat)
		}
	}
	if s, err := strAttr(f.ID(), "spec"); err != nil {
		fail("root attribute \"spec\": %w", err)
	} else {
		var meta map[string]any
		if err := json.Unmarshal([]byte(s), &meta); err != nil {
			fail("root attribute \"spec\" %q: %v: %w", s, err, ErrFormat)
		} else if diff := shard.DatasetMetaDiff(meta, m); len(diff) > 0 {
			fail("root attribute \"spec\": dataset %s differ from the manifest's: %w", strings.Join(diff, ", "), ErrFormat)
		}
	}
}

// openChecked opens dataset name and checks its shape and element type, reporting faults through
// fail. It returns the open dataset when both match, else nil.
func openChecked(f *handle, name string, shape []uint64, fail func(string, ...any), typeOK func(typeInfo) bool, typeName string) *handle {
	if !linkExists(f.ID(), name) {
		fail("no dataset /%s: %w", name, ErrFormat)
		return nil
	}
	ds, err := openDataset(f, name, nil)
	if err != nil {
		fail("open /%s: %w", name, h5error("H5Dopen", err))
		return nil
	}
	ok := true
	if cur, _, err := dims(ds); err != nil {
		fail("/%s: %w", name, err)
		ok = false
	} else if !slices.Equal(cur, shape) {
		fail("/%s has shape %v, manifest says %v: %w", name, cur, shape, ErrFormat)
		ok = false
	}
	if t, err := datasetType(ds); err != nil {
		fail("/%s: %w", name, err)
		ok = false
	} else if !typeOK(t) {
		fail("/%s: element type (class %d, %d bytes) is not %s: %w", name, t.class, t.size, typeName, ErrFormat)
		ok = false
	}
	if !ok {
		ds.Close()
		return nil
	}
	return ds
}
