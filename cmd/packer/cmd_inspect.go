package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/packer-dev/packer/internal/humanize"
	"github.com/packer-dev/packer/pipeline"
	"github.com/packer-dev/packer/shard"
)

type inspectOptions struct {
	IO      *iostreams
	Dir     string
	JSON    bool
	Records int
}

func newInspectCommand(io *iostreams, runF func(context.Context, *inspectOptions) error) *cobra.Command {
	opts := &inspectOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "inspect OUT",
		Short: "Summarise a packed dataset: source, transform, classes, sample spec, files",
		Long: `Inspect prints what OUT holds, from its manifest: the source and transform it was built
with, the record count, every class with its record count, the sample shape, dtype and layout,
the files with their sizes, and how many inputs were skipped and why. With --records N it also
prints the labels and per-record metadata (for example video clip positions) of the first N
records. It does not check integrity: use packer verify for that.
` + exitStatusHelp,
		Example: `  packer inspect fmnist
  packer inspect --json fmnist | jq .classes
  packer inspect --records 5 ucf-clips
  packer inspect s3://bucket/fmnist`,
		Args: argsUsage(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Dir = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runInspect(c.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the summary as JSON")
	cmd.Flags().IntVar(&opts.Records, "records", 0, "also show the labels and metadata of the first N records")
	return cmd
}

// inspectSummary is the --json form of inspect.
type inspectSummary struct {
	Dir       string            `json:"dir"`
	Packer    string            `json:"packer"`
	Format    string            `json:"format"`
	Count     int64             `json:"count"`
	Sample    shard.SampleSpec  `json:"sample"`
	Label     shard.LabelSpec   `json:"label"`
	Source    map[string]any    `json:"source"`
	Transform map[string]any    `json:"transform"`
	Classes   []classCount      `json:"classes"`
	Files     []shard.FileEntry `json:"files"`
	Bytes     int64             `json:"bytes"`
	Skipped   int               `json:"skipped"`
	Reasons   map[string]int    `json:"skipped_by_reason"`
	Records   []recordInfo      `json:"records,omitempty"`
	// Fields is the sample schema beyond the sample and labels, and BoxesDropped the boxes
	// the transform dropped per boxes field (the manifest's fields and boxes_dropped).
	Fields       []shard.Field    `json:"fields,omitempty"`
	BoxesDropped map[string]int64 `json:"boxes_dropped,omitempty"`
	// ShapeRange is, for a dataset of variable-size records, the smallest and largest value of
	// each dimension over all records (fixed dimensions included).
	ShapeRange *shapeRange `json:"shape_range,omitempty"`
}

type shapeRange struct {
	Min []int `json:"min"`
	Max []int `json:"max"`
}

type classCount struct {
	Label int    `json:"label"`
	Name  string `json:"name"`
	Count int64  `json:"count"`
}

type recordInfo struct {
	Index int64           `json:"index"`
	Label int64           `json:"label"`
	Aux   []int64         `json:"aux,omitempty"`
	Meta  json.RawMessage `json:"meta,omitempty"`
	Shape []int           `json:"shape,omitempty"` // the record's own shape (variable-size datasets)
	// Fields are the record's field values, short (fieldValue), in schema order.
	Fields recordFields `json:"fields,omitempty"`
}

func runInspect(ctx context.Context, o *inspectOptions) error {
	m, err := readManifestAt(ctx, o.Dir)
	if err != nil {
		return err
	}
	s := inspectSummary{Dir: o.Dir, Packer: m.Packer, Format: m.Format, Count: m.Count, Sample: m.Sample, Label: m.Label,
		Source: m.Source, Transform: m.Transform, Files: m.Files, Skipped: len(m.Skipped), Reasons: map[string]int{},
		Fields: m.Fields, BoxesDropped: m.BoxesDropped}
	for i, name := range m.Classes {
		var n int64
		if i < len(m.ClassCounts) {
			n = m.ClassCounts[i]
		}
		s.Classes = append(s.Classes, classCount{Label: i, Name: name, Count: n})
	}
	for _, f := range m.Files {
		s.Bytes += f.Size
	}
	for _, sk := range m.Skipped {
		s.Reasons[skipKind(sk.Reason)]++
	}
	varShape := !m.Sample.Fixed() && m.Format == shard.FormatShards
	if o.Records > 0 || (varShape && m.Count > 0) {
		ds, err := openAny(o.Dir)
		if err != nil {
			return err
		}
		defer ds.Close()
		for i := int64(0); i < int64(o.Records) && i < ds.Len(); i++ {
			ri, err := infoOf(ds, i)
			if err != nil {
				return err
			}
			if varShape {
				if ri.Shape, err = ds.RecordShape(i); err != nil {
					return err
				}
			}
			if ri.Fields, err = fieldsOf(ds, m, i); err != nil {
				return fmt.Errorf("%s: %w", o.Dir, err)
			}
			s.Records = append(s.Records, ri)
		}
		if varShape {
			// Shapes live in each shard's index, which opening reads: no record data is read.
			if s.ShapeRange, err = shapeRangeOf(ctx, ds); err != nil {
				return err
			}
		}
	}
	if o.JSON {
		enc := json.NewEncoder(o.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	}
	w := tabwriter.NewWriter(o.IO.Out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "dataset\t%s\n", o.Dir)
	fmt.Fprintf(w, "format\t%s (packer %s)\n", m.Format, m.Packer)
	fmt.Fprintf(w, "source\t%s\n", compactJSON(m.Source))
	fmt.Fprintf(w, "transform\t%s\n", compactJSON(m.Transform))
	fmt.Fprintf(w, "order\t%s\n", describeOrder(m))
	fmt.Fprintf(w, "records\t%d\n", m.Count)
	if m.Sample.Fixed() {
		fmt.Fprintf(w, "sample\tshape %v, %s, layout %s (%s per record)\n", m.Sample.Shape, m.Sample.DType, m.Sample.Layout, byteSize(m.Sample.Size()))
	} else {
		fmt.Fprintf(w, "sample\t%s, %s, layout %s (shape %v: each record has its own)\n", describeShape(m.Sample), m.Sample.DType, m.Sample.Layout, m.Sample.Shape)
		if r := s.ShapeRange; r != nil {
			fmt.Fprintf(w, "sizes\t%s\n", describeRange(m.Sample, r))
		}
	}
	if len(m.Label.Aux) > 0 {
		fmt.Fprintf(w, "labels\tint64, auxiliary columns %s\n", strings.Join(m.Label.Aux, ", "))
	}
	fmt.Fprintf(w, "files\t%d, %s\n", len(m.Files), byteSize(s.Bytes))
	w.Flush()
	if len(m.Fields) > 0 {
		fmt.Fprintf(o.IO.Out, "\nfields (%d):\n", len(m.Fields))
		for _, f := range m.Fields {
			fmt.Fprintf(o.IO.Out, "  %-16s %s", f.Name, describeField(f))
			if n := m.BoxesDropped[f.Name]; n > 0 {
				fmt.Fprintf(o.IO.Out, " (%d dropped by the transform: no area left)", n)
			}
			fmt.Fprintln(o.IO.Out)
		}
	}
	if len(s.Classes) > 0 {
		fmt.Fprintf(o.IO.Out, "\nclasses (%d):\n", len(s.Classes))
		for _, c := range s.Classes {
			fmt.Fprintf(o.IO.Out, "  %4d  %-24s %d\n", c.Label, c.Name, c.Count)
		}
	}
	fmt.Fprintf(o.IO.Out, "\nfiles:\n")
	for i, f := range m.Files {
		if i == 20 && len(m.Files) > 24 {
			fmt.Fprintf(o.IO.Out, "  ... %d more\n", len(m.Files)-20)
			break
		}
		fmt.Fprintf(o.IO.Out, "  %-20s %10s", f.Path, byteSize(f.Size))
		switch {
		case f.Records == 1:
			fmt.Fprintf(o.IO.Out, "  record %d", f.FirstRecord)
		case f.Records > 1:
			fmt.Fprintf(o.IO.Out, "  records %d-%d", f.FirstRecord, f.FirstRecord+f.Records-1)
		}
		fmt.Fprintln(o.IO.Out)
	}
	fmt.Fprintf(o.IO.Out, "\nskipped inputs: %d\n", len(m.Skipped))
	keys := make([]string, 0, len(s.Reasons))
	for k := range s.Reasons {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(o.IO.Out, "  %6d  %s\n", s.Reasons[k], k)
	}
	if len(s.Records) > 0 {
		fmt.Fprintf(o.IO.Out, "\nfirst %s:\n", humanize.Count(len(s.Records), "record"))
		for _, r := range s.Records {
			name := ""
			if r.Label >= 0 && int(r.Label) < len(m.Classes) {
				name = " (" + m.Classes[r.Label] + ")"
			}
			fmt.Fprintf(o.IO.Out, "  %6d  label %d%s", r.Index, r.Label, name)
			if len(r.Aux) > 0 {
				fmt.Fprintf(o.IO.Out, "  aux %v", r.Aux)
			}
			if r.Shape != nil {
				fmt.Fprintf(o.IO.Out, "  shape %v", r.Shape)
			}
			if len(r.Meta) > 0 {
				fmt.Fprintf(o.IO.Out, "  %s", r.Meta)
			}
			fmt.Fprintln(o.IO.Out)
			for _, f := range r.Fields {
				fmt.Fprintf(o.IO.Out, "          %-16s %s\n", f.Name, f.Value)
			}
		}
	}
	return nil
}

// skipKind shortens a skip reason to its kind: the text after the last "path: " prefix.
func skipKind(reason string) string {
	if i := strings.LastIndex(reason, ": "); i >= 0 && i+2 < len(reason) {
		reason = reason[i+2:]
	}
	return pipeline.ShortReason(reason)
}

func compactJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func byteSize(n int64) string {
	if n < 0 {
		return "variable"
	}
	return humanize.Bytes(n)
}

// dimNames names the dimensions of a sample shape from its layout ("thwc" gives T, H, W, C),
// or nil when the layout does not name every dimension.
func dimNames(spec shard.SampleSpec) []string {
	if len(spec.Layout) != len(spec.Shape) {
		return nil
	}
	out := make([]string, len(spec.Shape))
	for i, c := range strings.ToUpper(spec.Layout) {
		out[i] = string(c)
	}
	return out
}

// describeShape says in words which dimensions of a variable shape vary and what the fixed
// ones are: "variable HxW, 3 channels", "16 frames, variable HxW, 3 channels".
func describeShape(spec shard.SampleSpec) string {
	names := dimNames(spec)
	if names == nil {
		return fmt.Sprintf("variable shape %v", spec.Shape)
	}
	var vary, fixed []string
	for i, d := range spec.Shape {
		switch {
		case d < 0:
			vary = append(vary, names[i])
		case names[i] == "C":
			fixed = append(fixed, humanize.Count(d, "channel"))
		case names[i] == "T":
			fixed = append(fixed, humanize.Count(d, "frame"))
		default:
			fixed = append(fixed, fmt.Sprintf("%s=%d", names[i], d))
		}
	}
	return strings.Join(append([]string{"variable " + strings.Join(vary, "x")}, fixed...), ", ")
}

// describeRange gives the range of each variable dimension: "H 64 to 192, W 64 to 12800".
func describeRange(spec shard.SampleSpec, r *shapeRange) string {
	names := dimNames(spec)
	var parts []string
	for i, d := range spec.Shape {
		if d >= 0 {
			continue
		}
		name := fmt.Sprintf("dim %d", i)
		if names != nil {
			name = names[i]
		}
		parts = append(parts, fmt.Sprintf("%s %d to %d", name, r.Min[i], r.Max[i]))
	}
	return strings.Join(parts, ", ")
}

// shapeRangeOf returns the smallest and largest value of each dimension over every record.
func shapeRangeOf(ctx context.Context, ds anyDataset) (*shapeRange, error) {
	var r *shapeRange
	for i := range ds.Len() {
		if i%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		sh, err := ds.RecordShape(i)
		if err != nil {
			return nil, err
		}
		if r == nil {
			r = &shapeRange{Min: slices.Clone(sh), Max: slices.Clone(sh)}
			continue
		}
		for k, d := range sh {
			r.Min[k], r.Max[k] = min(r.Min[k], d), max(r.Max[k], d)
		}
	}
	return r, nil
}

// describeOrder says in which order the records were written: source order, or the
// permutation of packer build --shuffle with its seed.
func describeOrder(m *shard.Manifest) string {
	seed, shuffled, err := m.BuildShuffle()
	switch {
	case err != nil:
		return "unknown: " + err.Error()
	case shuffled:
		return fmt.Sprintf("shuffled at build time (--shuffle --seed %d)", seed)
	}
	return "source order"
}
