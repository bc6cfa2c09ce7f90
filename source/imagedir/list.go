package imagedir

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/packer-dev/packer/internal/humanize"
	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/source/internal/fsentry"
)

// ListExtensions are the file extensions of list files (--from list), matched
// case-insensitively: ".csv" is CSV, the others JSON Lines. A list with another name is read
// by its content (a first non-blank byte '{' means JSON Lines), but only these names are
// detected as lists.
var ListExtensions = []string{".csv", ".jsonl", ".ndjson", ".json"}

// maxListLine bounds one line of a list file.
const maxListLine = 1 << 20

// listEntry is one line of a list: a path and its label (the class index once resolved).
type listEntry struct {
	path   string
	name   string // class name, for lists labelled by name
	label  int64
	fields []json.RawMessage // the requested fields' values as JSON (nil where missing)
}

// OpenList opens a list of images: a CSV file with a header naming the columns "path" and
// "label" (other columns are ignored), or JSON Lines of objects {"path": ..., "label": ...}.
// Files ending in .csv are CSV, .jsonl/.ndjson/.json JSON Lines; otherwise a first
// non-blank byte '{' means JSON Lines. Labels are all integers (used as they are, and the
// dataset has no class names) or class names (the classes are the sorted distinct names and a
// label is its name's index); in CSV a list is integer-labelled when every label parses as a
// non-negative integer. Relative paths are relative to the list's folder. The whole list is
// read and checked here; Enumerate reads it again.
func OpenList(list string, opts Options) (*Source, error) {
	s := &Source{kind: KindList, list: list, root: filepath.Dir(list), opts: opts.normalized()}
	// The list is read twice (here and by Enumerate), so it must be a regular file: a FIFO
	// would block the second open forever.
	f, err := fsentry.Open(list)
	if err != nil {
		return nil, fmt.Errorf("imagedir: %s: %w", list, err)
	}
	defer f.Close()
	s.listFmt, err = listFormat(list, f)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	allInt := true
	maxLabel, maxLine := int64(-1), 0
	var hashes []uint64 // of every entry's file, to find a file listed twice
	if _, err := source.CheckFieldNames(opts.Fields); err != nil {
		return nil, fmt.Errorf("imagedir: %s: --fields: %w", list, err)
	}
	for _, k := range opts.Fields {
		if k == "path" || k == "label" {
			return nil, fmt.Errorf("imagedir: %s: --fields %s: that key is the sample's path or label", list, k)
		}
	}
	inf := newFieldInference(opts.Fields)
	err = parseList(context.Background(), f, s.listFmt, list, opts.Fields, func(e rawEntry) error {
		s.count++
		hashes = append(hashes, pathHash(s.resolve(e.path)))
		inf.add(e.fields)
		if e.noLabel {
			return nil
		}
		if !e.isInt {
			allInt = false
		} else if v, err := strconv.ParseInt(e.label, 10, 64); err == nil && v > maxLabel {
			maxLabel, maxLine = v, e.line
		}
		names[e.label] = true
		return nil
	})
	if err != nil {
		return nil, err
	}
	if s.count == 0 {
		return nil, fmt.Errorf("%s: %w", list, FormatError("the list has no entries"))
	}
	if err := s.checkDuplicates(f, hashes); err != nil {
		return nil, err
	}
	s.named = !allInt
	s.fields = inf.fields()
	switch {
	case s.named && len(opts.Classes) > 0:
		return nil, fmt.Errorf("%s: %w", list, FormatError("--classes names the classes of integer labels; this list's labels are class names already"))
	case !s.named && len(opts.Classes) > 0:
		if maxLabel >= int64(len(opts.Classes)) {
			return nil, fmt.Errorf("%s:%d: %w", list, maxLine, FormatError(fmt.Sprintf("label %d, but --classes names only %d classes", maxLabel, len(opts.Classes))))
		}
		s.classes = append([]string(nil), opts.Classes...)
	}
	if s.named {
		for n := range names {
			s.classes = append(s.classes, n)
		}
		sort.Strings(s.classes)
		s.index = make(map[string]int64, len(s.classes))
		for i, n := range s.classes {
			s.index[n] = int64(i)
			s.classes[i] = fsentry.Name(n) // the index keeps the names as the list spells them
		}
		if err := fsentry.CheckClasses(s.classes); err != nil {
			return nil, fmt.Errorf("imagedir: %s: %w", list, err)
		}
	}
	return s, nil
}

// listFormat decides between CSV and JSON Lines and leaves f at its start.
func listFormat(name string, f *os.File) (string, error) {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".csv":
		return "csv", nil
	case ".jsonl", ".ndjson", ".json":
		return "jsonl", nil
	}
	head := make([]byte, 4096)
	n, err := io.ReadFull(f, head)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return "", fmt.Errorf("imagedir: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", fmt.Errorf("imagedir: %w", err)
	}
	if t := bytes.TrimLeft(head[:n], " \t\r\n\ufeff"); len(t) > 0 && t[0] == '{' {
		return "jsonl", nil
	}
	return "csv", nil
}

// rawEntry is a parsed line before labels are resolved.
type rawEntry struct {
	line     int
	path     string
	label    string            // the label as text
	isInt    bool              // label is a non-negative decimal integer (CSV) or JSON integer
	isString bool              // label was a JSON string
	noLabel  bool              // the line has no label (allowed with fields: label -1)
	fields   []json.RawMessage // the requested keys' values, as JSON; nil where absent or null
}

// parseList reads a list in format fmt and calls fn for every entry, in order.
func parseList(ctx context.Context, r io.Reader, format, name string, fields []string, fn func(rawEntry) error) error {
	bad := func(line int, msg string, args ...any) error {
		return fmt.Errorf("%s:%d: %w", name, line, FormatError(fmt.Sprintf(msg, args...)))
	}
	if format == "jsonl" {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), maxListLine)
		line := 0
		sawString, sawNumber := false, false
		for sc.Scan() {
			line++
			if line%4096 == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			b := bytes.TrimSpace(sc.Bytes())
			if line == 1 {
				b = bytes.TrimPrefix(b, []byte("\ufeff"))
			}
			if len(b) == 0 {
				continue
			}
			var obj struct {
				Path  *string         `json:"path"`
				Label json.RawMessage `json:"label"`
			}
			if err := json.Unmarshal(b, &obj); err != nil {
				return bad(line, "%v", err)
			}
			var extra []json.RawMessage
			if len(fields) > 0 {
				var all map[string]json.RawMessage
				if err := json.Unmarshal(b, &all); err != nil {
					return bad(line, "%v", err)
				}
				extra = make([]json.RawMessage, len(fields))
				for i, k := range fields {
					if v := bytes.TrimSpace(all[k]); len(v) > 0 && string(v) != "null" {
						extra[i] = v
					}
				}
			}
			if obj.Path == nil || *obj.Path == "" {
				return bad(line, "no \"path\"")
			}
			e := rawEntry{line: line, path: *obj.Path, fields: extra}
			lab := bytes.TrimSpace(obj.Label)
			switch {
			case (len(lab) == 0 || string(lab) == "null") && len(fields) > 0:
				e.noLabel = true
			case len(lab) == 0 || string(lab) == "null":
				return bad(line, "no \"label\"")
			case lab[0] == '"':
				if err := json.Unmarshal(lab, &e.label); err != nil {
					return bad(line, "label: %v", err)
				}
				if e.label == "" {
					return bad(line, "empty label")
				}
				e.isString = true
				sawString = true
			default:
				v, err := strconv.ParseInt(string(lab), 10, 64)
				if err != nil || v < 0 {
					return bad(line, "label %s is not a non-negative integer or a class name", lab)
				}
				e.label, e.isInt = strconv.FormatInt(v, 10), true
				sawNumber = true
			}
			if sawString && sawNumber {
				return bad(line, "labels mix numbers and class names")
			}
			if err := fn(e); err != nil {
				return err
			}
		}
		if err := sc.Err(); err != nil {
			if errors.Is(err, bufio.ErrTooLong) {
				return bad(line+1, "line longer than %d bytes", maxListLine)
			}
			return fmt.Errorf("imagedir: %s: %w", name, err)
		}
		return nil
	}
	cr := csv.NewReader(bufio.NewReader(r))
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err == io.EOF {
		return bad(1, "empty file (want a header line path,label)")
	}
	if err != nil {
		return bad(1, "%v", err)
	}
	pathCol, labelCol := -1, -1
	fieldCols := make([]int, len(fields))
	for i := range fieldCols {
		fieldCols[i] = -1
	}
	for i, h := range header {
		raw := strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))
		h = strings.ToLower(raw)
		switch h {
		case "path":
			pathCol = i
		case "label":
			labelCol = i
		}
		for k, f := range fields {
			if f == raw && fieldCols[k] < 0 {
				fieldCols[k] = i
			}
		}
	}
	for k, c := range fieldCols {
		if c < 0 {
			return bad(1, "header %q has no column %q (--fields)", strings.Join(header, ","), fields[k])
		}
	}
	if labelCol < 0 && len(fields) > 0 {
		labelCol = -2 // no label column: every label is -1
	}
	if pathCol < 0 || labelCol == -1 {
		return bad(1, "header %q lacks a path or label column (want path,label)", strings.Join(header, ","))
	}
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return bad(pe.Line, "%v", pe.Err)
			}
			return fmt.Errorf("imagedir: %s: %w", name, err)
		}
		line, _ := cr.FieldPos(0) // valid only after a successful Read
		if line%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue
		}
		need := max(pathCol, labelCol)
		for _, c := range fieldCols {
			need = max(need, c)
		}
		if need >= len(rec) {
			return bad(line, "%s, want at least %d", humanize.Count(len(rec), "field"), need+1)
		}
		e := rawEntry{line: line, path: strings.TrimSpace(rec[pathCol])}
		if labelCol >= 0 {
			e.label = strings.TrimSpace(rec[labelCol])
		}
		if len(fields) > 0 {
			e.fields = make([]json.RawMessage, len(fields))
			for k, c := range fieldCols {
				e.fields[k], _ = json.Marshal(rec[c]) // a CSV cell is text
			}
		}
		if e.path == "" {
			return bad(line, "empty path")
		}
		if e.label == "" && len(fields) > 0 {
			e.noLabel = true
		} else if e.label == "" {
			return bad(line, "empty label")
		}
		if v, err := strconv.ParseInt(e.label, 10, 64); !e.noLabel && err == nil && v >= 0 && e.label[0] != '+' {
			e.isInt = true
		}
		if err := fn(e); err != nil {
			return err
		}
	}
}

// readList reads the list again and calls fn with resolved labels.
func (s *Source) readList(ctx context.Context, fn func(listEntry) error) error {
	f, err := fsentry.Open(s.list)
	if err != nil {
		return fmt.Errorf("imagedir: %s: %w", s.list, err)
	}
	defer f.Close()
	return parseList(ctx, f, s.listFmt, s.list, s.opts.Fields, func(e rawEntry) error {
		le := listEntry{path: e.path, fields: e.fields}
		if e.noLabel {
			le.label = -1
			return fn(le)
		}
		if s.named {
			idx, ok := s.index[e.label]
			if !ok {
				return fmt.Errorf("%s:%d: %w", s.list, e.line, FormatError(fmt.Sprintf("class %q appeared since the list was opened", e.label)))
			}
			le.name, le.label = e.label, idx
		} else {
			v, err := strconv.ParseInt(e.label, 10, 64)
			if err != nil {
				return fmt.Errorf("%s:%d: %w", s.list, e.line, FormatError(fmt.Sprintf("label %q is not an integer", e.label)))
			}
			le.label = v
		}
		return fn(le)
	})
}

// pathHash hashes the cleaned path of the file a list entry names.
func pathHash(p string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(filepath.Clean(p)))
	return h.Sum64()
}

// checkDuplicates refuses a list that names one file twice: it would be packed twice (under
// two labels, if they differ). Entries name the same file when their paths, resolved against
// the list's folder and cleaned, are equal; links and hard links to one file are not looked
// through. Only 8 bytes per entry are kept; the lines whose hashes collide are read again and
// compared by path. f is rewound.
func (s *Source) checkDuplicates(f *os.File, hashes []uint64) error {
	sorted := slices.Clone(hashes)
	slices.Sort(sorted)
	dup := map[uint64]bool{}
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			dup[sorted[i]] = true
		}
	}
	if len(dup) == 0 {
		return nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("imagedir: %s: %w", s.list, err)
	}
	seen := map[string]int{} // cleaned path -> first line
	return parseList(context.Background(), f, s.listFmt, s.list, s.opts.Fields, func(e rawEntry) error {
		p := filepath.Clean(s.resolve(e.path))
		if !dup[pathHash(p)] {
			return nil
		}
		if first, ok := seen[p]; ok {
			return fmt.Errorf("%s:%d: %w", s.list, e.line, FormatError(fmt.Sprintf(
				"%s is listed twice (lines %d and %d): it would be packed twice", fsentry.Name(e.path), first, e.line)))
		}
		seen[p] = e.line
		return nil
	})
}
