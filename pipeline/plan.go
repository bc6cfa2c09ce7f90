package pipeline

// A plan file lists a source once for every part of a build in parts (docs/cluster.md, "One
// listing: packer plan"): a header line, then one line per input in source order. Parts built
// from a plan take their listing from it (FromPlan) instead of listing the source each.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/packer-dev/packer/internal/fileutil"
	"github.com/packer-dev/packer/internal/humanize"
	"github.com/packer-dev/packer/source"
)

// PlanFormat is the version of the plan file format, the header's packer_plan. Format 2 added
// the content digest (content_sha256) and each item's size and mtime_ns; format 3 the file
// lines of a record source (files, files_sha256). Plans of format 2 are still read.
const PlanFormat = 3

// planFormatFiles is the first plan format with file lines.
const planFormatFiles = 3

// planMagic starts every plan file: the header's first key.
const planMagic = `{"packer_plan":`

// maxPlanLine bounds one line of a plan file (a header with thousands of class names, a long
// path), so that a damaged file cannot make a reader hold it whole.
const maxPlanLine = 64 << 20

// ErrPlan is wrapped by every error about a plan file that cannot be read: damaged, truncated,
// of another format or packer version.
var ErrPlan = errors.New("invalid plan file")

// ErrPlanSource is wrapped by the errors about a source that no longer matches its plan: other
// options or classes, or (for a plan without item lines) another listing.
var ErrPlanSource = errors.New("the source does not match its plan")

// PlanHeader is the first line of a plan file.
type PlanHeader struct {
	Plan   int    `json:"packer_plan"` // PlanFormat
	Packer string `json:"packer"`      // the packer Version that wrote it; parts need the same
	Kind   string `json:"kind"`        // the source kind (SourceInfo.Kind)
	Source string `json:"source"`      // the source's path, absolute, as parts reopen it
	// Options are the command's source options (flag name to value), to reopen the source with.
	Options map[string]string `json:"options"`
	// Spec is the source's SourceInfo.Spec when planned (before the build's transform).
	Spec     json.RawMessage `json:"spec"`
	Classes  []string        `json:"classes"`
	AuxNames []string        `json:"aux_names"`
	Count    int64           `json:"count"` // inputs in the listing
	// Items is set when the item lines follow; a plan of a source whose enumerator reads the
	// bytes (Item.Raw, Item.Note) has none, and its parts enumerate the source themselves.
	Items bool `json:"items"`
	// Listing is the listing digest a part records (shard.PartInfo.Listing).
	Listing string `json:"listing_sha256"`
	// Content is the content digest a part records (shard.PartInfo.Content): each input's
	// file size and modification time when planned (the item lines carry them), or the CRC of
	// the bytes a record source's listing reads.
	Content string `json:"content_sha256"`
	// ItemsDigest is the SHA-256 of the item lines as written (every byte after the header's
	// line), so that a damaged plan is refused; empty without item lines.
	ItemsDigest string `json:"items_sha256,omitempty"`
	// Files is the number of file lines that follow the header in a plan of a record source
	// (source.RecordSource: WebDataset, TFRecord, Parquet; format 3): one per file the source
	// reads, in order, with its size, time and ETag, the inputs it yields and, for Parquet, the
	// inputs of each row group (source.FileLayout). A part built from the plan opens only the
	// files that hold its inputs. 0 without file lines.
	Files int64 `json:"files,omitempty"`
	// FilesDigest is the SHA-256 of the file lines as written; empty without file lines.
	FilesDigest string `json:"files_sha256,omitempty"`
}

// planItem is one item line.
type planItem struct {
	Seq          int64   `json:"seq"`
	Name         string  `json:"name"`
	Path         string  `json:"path"`
	Label        int64   `json:"label"`
	Aux          []int64 `json:"aux,omitempty"`
	source.Stamp         // size and mtime_ns of Path when planned (size -1: it was missing)
}

// WritePlan enumerates src once and writes its plan to path, atomically (a reader sees the old
// file or the whole new one). h gives Kind, Source, Options and Items; WritePlan fills in the
// rest and returns the header written. With Items, an item that carries bytes or a note
// (Item.Raw, Item.Note) is refused: it cannot be replayed from a list. files is what src reads
// its inputs through (source.Options.Files), or nil: the inputs' stamps are its listing's where
// it is set (Options.Files).
func WritePlan(ctx context.Context, path string, src source.Source, files source.Files, h PlanHeader) (*PlanHeader, error) {
	info := src.Info()
	spec, err := json.Marshal(info.Spec)
	if err != nil {
		return nil, fmt.Errorf("plan: source spec: %w", err)
	}
	h.Plan, h.Packer, h.Spec = PlanFormat, Version, spec
	h.Classes, h.AuxNames = nonNil(info.Classes), nonNil(info.AuxNames)
	dir, base := filepath.Dir(path), filepath.Base(path)
	var tmp *os.File
	var bw *bufio.Writer
	ih := sha256.New()
	if h.Items {
		if tmp, err = os.CreateTemp(dir, "."+base+".items-*"); err != nil {
			return nil, fmt.Errorf("plan: %w", err)
		}
		defer func() {
			tmp.Close()
			os.Remove(tmp.Name())
		}()
		bw = bufio.NewWriterSize(io.MultiWriter(tmp, ih), 1<<20)
	}
	rs, layout := src.(source.RecordSource)
	layout = layout && !h.Items
	if layout {
		if tmp, err = os.CreateTemp(dir, "."+base+".files-*"); err != nil {
			return nil, fmt.Errorf("plan: %w", err)
		}
		defer func() {
			tmp.Close()
			os.Remove(tmp.Name())
		}()
		bw = bufio.NewWriterSize(io.MultiWriter(tmp, ih), 1<<20)
	}
	lh, ch := newListingHash(), newContentHash()
	ch.files = files
	var n int64
	each := func(it source.Item) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		lh.add(it.Name, it.Label, it.Aux, it.Extra)
		st := it.Stamp // an object's, from a store's listing
		if st == nil {
			st = itemStamp(files, it)
		}
		ch.add(it, st)
		if h.Items {
			if it.Raw != nil || it.Note != nil || st == nil {
				return fmt.Errorf("plan: %s: the %s source reads its inputs' bytes as it lists them: it cannot be replayed from a list", it.Name, info.Kind)
			}
			line, err := json.Marshal(planItem{Seq: n, Name: it.Name, Path: it.Path, Label: it.Label, Aux: it.Aux, Stamp: *st})
			if err != nil {
				return err
			}
			bw.Write(line)
			bw.WriteByte('\n')
		}
		n++
		return nil
	}
	if layout {
		err = rs.EnumerateLayout(ctx, each, func(f source.FileLayout) error {
			line, err := json.Marshal(f)
			if err != nil {
				return err
			}
			bw.Write(line)
			bw.WriteByte('\n')
			h.Files++
			return nil
		})
	} else {
		err = src.Enumerate(ctx, each)
	}
	if err != nil {
		return nil, err
	}
	h.Count, h.Listing, h.Content = n, lh.sum(), ch.sum()
	if h.Items || layout {
		if err := bw.Flush(); err != nil {
			return nil, fmt.Errorf("plan: %w", err)
		}
		if _, err := tmp.Seek(0, io.SeekStart); err != nil {
			return nil, fmt.Errorf("plan: %w", err)
		}
		if h.Items {
			h.ItemsDigest = hex.EncodeToString(ih.Sum(nil))
		} else {
			h.FilesDigest = hex.EncodeToString(ih.Sum(nil))
		}
	}
	head, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	p, err := fileutil.Create(dir, base, false)
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	out := bufio.NewWriterSize(p.File(), 1<<20)
	out.Write(head)
	out.WriteByte('\n')
	if tmp != nil {
		if _, err := io.Copy(out, tmp); err != nil {
			p.Abort()
			return nil, fmt.Errorf("plan: %w", err)
		}
	}
	if err := out.Flush(); err != nil {
		p.Abort()
		return nil, fmt.Errorf("plan: %w", err)
	}
	if err := p.Commit(nil); err != nil {
		p.Abort()
		return nil, fmt.Errorf("plan: %w", err)
	}
	if err := fileutil.SyncDir(dir); err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	return &h, nil
}

// IsPlan reports whether the file at path is a plan file (its first bytes are a plan header's).
func IsPlan(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return false
	}
	head := make([]byte, len(planMagic))
	_, err = io.ReadFull(f, head)
	return err == nil && string(head) == planMagic
}

// ReadPlanHeader reads and checks the header of the plan file at path.
func ReadPlanHeader(path string) (*PlanHeader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	defer f.Close()
	return readPlanHeader(newPlanScanner(f), path)
}

func newPlanScanner(r io.Reader) *bufio.Scanner {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxPlanLine)
	return sc
}

// scanErr names the line a scanner stopped at.
func scanErr(name string, line int64, err error) error {
	if errors.Is(err, bufio.ErrTooLong) {
		return fmt.Errorf("%w: %s:%d: a line longer than %d bytes", ErrPlan, name, line, maxPlanLine)
	}
	return fmt.Errorf("plan: %s:%d: %w", name, line, err)
}

// strictJSON decodes one JSON value that must fill line, refusing unknown fields.
func strictJSON(line []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(line))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		return errors.New("data after the JSON object")
	}
	return nil
}

// readPlanHeader reads line 1 of a plan from sc and checks it.
func readPlanHeader(sc *bufio.Scanner, name string) (*PlanHeader, error) {
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return nil, scanErr(name, 1, err)
		}
		return nil, fmt.Errorf("%w: %s is empty", ErrPlan, name)
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s:1: %s", ErrPlan, name, fmt.Sprintf(format, a...))
	}
	line := sc.Bytes()
	if !bytes.HasPrefix(line, []byte(planMagic)) {
		return nil, bad("not a packer plan (it does not start with %s)", planMagic)
	}
	var h PlanHeader
	if err := strictJSON(line, &h); err != nil {
		return nil, bad("the header: %v", err)
	}
	switch {
	case h.Plan != PlanFormat && h.Plan != 2:
		return nil, bad("plan format %d; this packer reads formats 2 and %d", h.Plan, PlanFormat)
	case h.Plan < planFormatFiles && (h.Files != 0 || h.FilesDigest != ""):
		return nil, bad("file lines in a plan of format %d", h.Plan)
	case h.Packer != Version:
		return nil, bad("made by packer %s; this is packer %s (make the plan and build every part with one version)", h.Packer, Version)
	case h.Kind == "" || h.Source == "":
		return nil, bad("the header names no source kind or source")
	case h.Count < 0:
		return nil, bad("negative count %d", h.Count)
	case !isHexDigest(h.Listing):
		return nil, bad("listing_sha256 %q is not a SHA-256 in hex", h.Listing)
	case !isHexDigest(h.Content):
		return nil, bad("content_sha256 %q is not a SHA-256 in hex", h.Content)
	case h.Items && !isHexDigest(h.ItemsDigest):
		return nil, bad("items_sha256 %q is not a SHA-256 in hex", h.ItemsDigest)
	case !h.Items && h.ItemsDigest != "":
		return nil, bad("items_sha256 without item lines")
	case h.Files < 0 || h.Files > 0 && h.Items:
		return nil, bad("%d file lines (with item lines: %v)", h.Files, h.Items)
	case h.Files > 0 && !isHexDigest(h.FilesDigest):
		return nil, bad("files_sha256 %q is not a SHA-256 in hex", h.FilesDigest)
	case h.Files == 0 && h.FilesDigest != "":
		return nil, bad("files_sha256 without file lines")
	case len(h.Spec) == 0 || h.Spec[0] != '{':
		return nil, bad("the source spec is not an object")
	}
	return &h, nil
}

func isHexDigest(s string) bool {
	b, err := hex.DecodeString(s)
	return err == nil && len(b) == sha256.Size
}

// FromPlan returns src, opened afresh from the plan's recorded source and options, with its
// listing taken from the plan at path (header h, from ReadPlanHeader):
//
//   - with item lines (h.Items), Enumerate reads the plan and never lists the source: a source
//     that changed since the plan still gives the planned inputs; a damaged plan fails the
//     build, naming the file and line;
//   - without (a source whose enumerator reads the bytes: CIFAR, IDX, WebDataset, TFRecord,
//     Parquet), Enumerate lists the source and fails when its listing is not the plan's.
//
// Either way Info's Count is the plan's, so a part needs no counting pass, and a part built
// from a plan records what a part built from the source itself records. src must describe
// itself (kind, classes, auxiliary labels, spec) as it did when planned.
func FromPlan(path string, h *PlanHeader, src source.Source, files source.Files) (source.Source, error) {
	info := src.Info()
	spec, err := json.Marshal(info.Spec)
	if err != nil {
		return nil, fmt.Errorf("plan %s: source spec: %w", path, err)
	}
	var hspec bytes.Buffer
	if err := json.Compact(&hspec, h.Spec); err != nil {
		return nil, fmt.Errorf("%w: %s:1: the source spec: %v", ErrPlan, path, err)
	}
	differ := func(what string, now, then any) error {
		return fmt.Errorf("%w: the %s source %s now has %s %v; the plan %s recorded %v (make a new plan)", ErrPlanSource, h.Kind, h.Source, what, now, path, then)
	}
	switch {
	case info.Kind != h.Kind:
		return nil, differ("kind", info.Kind, h.Kind)
	case !slices.Equal(nonNil(info.Classes), h.Classes):
		return nil, differ("classes", info.Classes, h.Classes)
	case !slices.Equal(nonNil(info.AuxNames), h.AuxNames):
		return nil, differ("auxiliary labels", info.AuxNames, h.AuxNames)
	case !bytes.Equal(spec, hspec.Bytes()):
		return nil, differ("options", string(spec), hspec.String())
	}
	ps := &planSource{src: src, path: path, h: h, files: files}
	if d, ok := src.(source.DirectSource); ok {
		return &planDirect{planSource: ps, d: d}, nil
	}
	return ps, nil
}

// planSource is a Source whose listing comes from a plan (FromPlan).
type planSource struct {
	src   source.Source
	path  string
	h     *PlanHeader
	files source.Files // what src reads its inputs through (FromPlan), or nil
}

// planDirect is a planSource over a DirectSource, which stays one.
type planDirect struct {
	*planSource
	d source.DirectSource
}

var (
	_ source.PlannedSource = (*planSource)(nil)
	_ source.DirectSource  = (*planDirect)(nil)
)

func (p *planDirect) FrameShape() (w, h, c int) { return p.d.FrameShape() }
func (p *planDirect) DecodeTo(ctx context.Context, it source.Item, pix []byte) (source.Clip, error) {
	return p.d.DecodeTo(ctx, it, pix)
}

// PlanDecode hands the build's decode plan on to the source, when it takes one.
func (p *planSource) PlanDecode(d source.DecodePlan) {
	if ps, ok := p.src.(source.PlannedSource); ok {
		ps.PlanDecode(d)
	}
}

// Info is the source's, with the plan's count.
func (p *planSource) Info() source.SourceInfo {
	i := p.src.Info()
	i.Count = p.h.Count
	return i
}

func (p *planSource) Decode(ctx context.Context, it source.Item, emit func(source.Clip) error) error {
	return p.src.Decode(ctx, it, emit)
}

func (p *planSource) Enumerate(ctx context.Context, emit func(source.Item) error) error {
	if !p.h.Items {
		return p.enumerateChecked(ctx, emit)
	}
	f, err := os.Open(p.path)
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	defer f.Close()
	sc := newPlanScanner(f)
	h, err := readPlanHeader(sc, p.path)
	if err != nil {
		return err
	}
	if h.Listing != p.h.Listing || h.Content != p.h.Content || h.ItemsDigest != p.h.ItemsDigest || h.Count != p.h.Count {
		return fmt.Errorf("%w: %s changed while it was read (another plan written over it)", ErrPlan, p.path)
	}
	return replayPlan(ctx, sc, p.path, h, emit)
}

// replayPlan emits the item lines that follow the header h in sc, checking them against it.
func replayPlan(ctx context.Context, sc *bufio.Scanner, name string, h *PlanHeader, emit func(source.Item) error) error {
	lh, ch, ih := newListingHash(), newContentHash(), sha256.New()
	var n int64
	for sc.Scan() {
		if err := ctx.Err(); err != nil {
			return err
		}
		lineNo := n + 2
		line := sc.Bytes()
		ih.Write(line)
		ih.Write([]byte{'\n'})
		if n >= h.Count {
			return fmt.Errorf("%w: %s:%d: more item lines than the header's count %d", ErrPlan, name, lineNo, h.Count)
		}
		var pi planItem
		if err := strictJSON(line, &pi); err != nil {
			return fmt.Errorf("%w: %s:%d: %v", ErrPlan, name, lineNo, err)
		}
		if pi.Seq != n || pi.Name == "" || pi.Path == "" {
			return fmt.Errorf("%w: %s:%d: want input %d with a name and a path, got seq %d, name %q, path %q", ErrPlan, name, lineNo, n, pi.Seq, pi.Name, pi.Path)
		}
		if pi.Size < -1 {
			return fmt.Errorf("%w: %s:%d: size %d", ErrPlan, name, lineNo, pi.Size)
		}
		st := pi.Stamp
		it := source.Item{Seq: n, Name: pi.Name, Path: pi.Path, Label: pi.Label, Aux: pi.Aux, Stamp: &st}
		lh.add(it.Name, it.Label, it.Aux, it.Extra)
		ch.add(it, &st)
		n++
		if err := emit(it); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return scanErr(name, n+2, err)
	}
	switch {
	case n != h.Count:
		return fmt.Errorf("%w: %s:%d: truncated: %d item lines, the header says %d", ErrPlan, name, n+1, n, h.Count)
	case hex.EncodeToString(ih.Sum(nil)) != h.ItemsDigest:
		return fmt.Errorf("%w: %s: the item lines do not match the header's items_sha256 (a damaged or edited plan)", ErrPlan, name)
	case lh.sum() != h.Listing:
		return fmt.Errorf("%w: %s: the item lines do not match the header's listing_sha256 (a damaged or edited plan)", ErrPlan, name)
	case ch.sum() != h.Content:
		return fmt.Errorf("%w: %s: the item lines do not match the header's content_sha256 (a damaged or edited plan)", ErrPlan, name)
	}
	return nil
}

// enumerateChecked lists the source itself and fails when its listing is not the plan's.
func (p *planSource) enumerateChecked(ctx context.Context, emit func(source.Item) error) error {
	lh, ch := newListingHash(), newContentHash()
	ch.files = p.files
	var n int64
	changed := func(what string) error {
		return fmt.Errorf("%w: the %s source %s no longer lists what the plan %s recorded: %s (the source changed since the plan was made; make a new plan)",
			ErrPlanSource, p.h.Kind, p.h.Source, p.path, what)
	}
	err := p.src.Enumerate(ctx, func(it source.Item) error {
		if n >= p.h.Count {
			return changed("more than " + humanize.Count(p.h.Count, "input"))
		}
		lh.add(it.Name, it.Label, it.Aux, it.Extra)
		ch.add(it, itemStamp(p.files, it))
		n++
		return emit(it)
	})
	if err != nil {
		return err
	}
	if n != p.h.Count {
		return changed(fmt.Sprintf("%s, the plan %d", humanize.Count(n, "input"), p.h.Count))
	}
	if got := lh.sum(); got != p.h.Listing {
		return changed(fmt.Sprintf("listing_sha256 %s, the plan %s", got, p.h.Listing))
	}
	if got := ch.sum(); got != p.h.Content {
		return changed(fmt.Sprintf("the same names and labels, but content_sha256 %s, the plan %s (an input's bytes, size or modification time changed)", got, p.h.Content))
	}
	return nil
}

// partEnumerator is a source that enumerates a part's range of inputs itself (planSource).
type partEnumerator interface {
	enumeratePart(ctx context.Context, r *partRange, emit func(source.Item) error) error
}

// enumeratePart emits the inputs of the part r. A plan with file lines of a record source
// (source.RecordSource) gives where they lie: only the files that hold them are opened, once
// the source's files are found to be the plan's, each with the stamp the plan recorded (else
// ErrPlanSource or ErrPartInput, naming the file), and the part records the plan's digests.
// Any other plan's part enumerates the whole listing (Enumerate) and keeps its range.
func (p *planSource) enumeratePart(ctx context.Context, r *partRange, emit func(source.Item) error) error {
	rs, ok := p.src.(source.RecordSource)
	if !ok || p.h.Files == 0 {
		return p.Enumerate(ctx, emit)
	}
	files, err := p.readFiles()
	if err != nil {
		return err
	}
	if err := p.checkFiles(rs, files, r.p); err != nil {
		return err
	}
	r.planned = p.h
	if err := rs.EnumerateRange(ctx, files, r.lo, r.hi, emit); err != nil {
		if errors.Is(err, source.ErrLayout) {
			return fmt.Errorf("part %d/%d: %w: %w", r.p.Index, r.p.Count, ErrPartInput, err)
		}
		return err
	}
	return nil
}

// checkFiles refuses a source whose files are not the plan's, in the plan's order, each with
// the size, modification time and ETag the plan recorded.
func (p *planSource) checkFiles(rs source.RecordSource, files []source.FileLayout, part Part) error {
	root, names := rs.InputFiles()
	for i := 0; i < max(len(names), len(files)); i++ {
		switch {
		case i >= len(files):
			return fmt.Errorf("%w: the %s source %s has the file %s, which the plan %s does not list (make a new plan)", ErrPlanSource, p.h.Kind, p.h.Source, filepath.Join(root, names[i]), p.path)
		case i >= len(names) || filepath.ToSlash(names[i]) != files[i].Path:
			return fmt.Errorf("%w: the %s source %s no longer has the file %s that the plan %s lists as its file %d (make a new plan)", ErrPlanSource, p.h.Kind, p.h.Source, filepath.Join(root, filepath.FromSlash(files[i].Path)), p.path, i+1)
		}
		if now := rs.FileStamp(names[i]); now != files[i].Stamp {
			return fmt.Errorf("part %d/%d: %w: %s is %s%s now; the plan %s recorded %s%s (make a new plan, and build every part from it)",
				part.Index, part.Count, ErrPartInput, filepath.Join(root, names[i]), now, etagOf(now), p.path, files[i].Stamp, etagOf(files[i].Stamp))
		}
	}
	return nil
}

// etagOf is how an error names a stamp's ETag, if it has one.
func etagOf(s source.Stamp) string {
	if s.ETag == "" {
		return ""
	}
	return ", ETag " + s.ETag
}

// readFiles reads the file lines of the plan, checked against its header.
func (p *planSource) readFiles() ([]source.FileLayout, error) {
	f, err := os.Open(p.path)
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	defer f.Close()
	sc := newPlanScanner(f)
	h, err := readPlanHeader(sc, p.path)
	if err != nil {
		return nil, err
	}
	if h.Listing != p.h.Listing || h.Content != p.h.Content || h.FilesDigest != p.h.FilesDigest || h.Count != p.h.Count {
		return nil, fmt.Errorf("%w: %s changed while it was read (another plan written over it)", ErrPlan, p.path)
	}
	return readFileLines(sc, p.path, h)
}

// readFileLines reads the file lines that follow the header h in sc, checking them against it.
func readFileLines(sc *bufio.Scanner, name string, h *PlanHeader) ([]source.FileLayout, error) {
	ih := sha256.New()
	var files []source.FileLayout
	var items, over int64 // over: the line whose count passes the header's, if any
	for sc.Scan() {
		lineNo := int64(len(files)) + 2
		line := sc.Bytes()
		ih.Write(line)
		ih.Write([]byte{'\n'})
		if int64(len(files)) >= h.Files {
			return nil, fmt.Errorf("%w: %s:%d: more file lines than the header's %d", ErrPlan, name, lineNo, h.Files)
		}
		var f source.FileLayout
		if err := strictJSON(line, &f); err != nil {
			return nil, fmt.Errorf("%w: %s:%d: %v", ErrPlan, name, lineNo, err)
		}
		// Each count is at most what is left of the header's, so that no sum wraps around
		// (one over it is refused after the digest, which tells a damaged plan).
		var groups int64
		for _, g := range f.Groups {
			if g < 0 || g > f.Items-groups {
				groups = -1
				break
			}
			groups += g
		}
		if f.Path == "" || f.Items < 0 || f.Size < -1 || f.Groups != nil && groups != f.Items {
			return nil, fmt.Errorf("%w: %s:%d: want a file with a path, its size and its input counts", ErrPlan, name, lineNo)
		}
		if f.Items > h.Count-items && over == 0 {
			over = lineNo
		}
		if over == 0 {
			items += f.Items
		}
		files = append(files, f)
	}
	if err := sc.Err(); err != nil {
		return nil, scanErr(name, int64(len(files))+2, err)
	}
	switch {
	case int64(len(files)) != h.Files:
		return nil, fmt.Errorf("%w: %s: truncated: %d file lines, the header says %d", ErrPlan, name, len(files), h.Files)
	case hex.EncodeToString(ih.Sum(nil)) != h.FilesDigest:
		return nil, fmt.Errorf("%w: %s: the file lines do not match the header's files_sha256 (a damaged or edited plan)", ErrPlan, name)
	case over != 0:
		return nil, fmt.Errorf("%w: %s:%d: the file lines count more inputs than the header's %d", ErrPlan, name, over, h.Count)
	case items != h.Count:
		return nil, fmt.Errorf("%w: %s: the file lines count %d inputs, the header %d", ErrPlan, name, items, h.Count)
	}
	return files, nil
}
