package main

import (
	"fmt"
	"strings"

	"github.com/packer-dev/packer/output"
	"github.com/packer-dev/packer/output/hdf5"
	"github.com/packer-dev/packer/output/npy"
	"github.com/packer-dev/packer/output/shards"
	"github.com/packer-dev/packer/verify"
)

// outputFormat is one row of the table of output formats: the format package's own entry
// (name, constructor, structure check, fixed shape, version, reader half for inspect and
// preview) and what writing the format needs at run time.
type outputFormat struct {
	output.Entry
	// needs, when set, loads what writing the format needs at run time (libhdf5), so that a
	// build or merge is refused before it starts when it is missing.
	needs func() error
}

// outputs is the table of output formats, in the order --format's help lists them; the first
// is the default. --format, the build's output, verify's structure checks and the opening of a
// dataset by inspect and preview all come from it. Adding a format is a package exporting an
// output.Entry and one row here.
var outputs = []outputFormat{
	{shards.Entry, nil},
	{npy.Entry, nil},
	{hdf5.Entry, hdf5.Load},
}

// outputNamed returns the table's row of a format name.
func outputNamed(name string) (outputFormat, bool) {
	for _, o := range outputs {
		if o.Name == name {
			return o, true
		}
	}
	return outputFormat{}, false
}

// outputFor returns the entry of --format name, or an error listing the formats, or the error
// of a library the format needs that is missing.
func outputFor(name string) (output.Entry, error) {
	if o, ok := outputNamed(name); ok {
		if o.needs != nil {
			if err := o.needs(); err != nil {
				return output.Entry{}, fmt.Errorf("--format %s: %w", name, err)
			}
		}
		return o.Entry, nil
	}
	return output.Entry{}, fmt.Errorf("unknown --format %q (want %s)", name, orList(outputNames(false)))
}

// outputNames lists the formats' names, or only those of fixed-shape formats.
func outputNames(fixedOnly bool) []string {
	var names []string
	for _, o := range outputs {
		if !fixedOnly || o.FixedShape {
			names = append(names, o.Name)
		}
	}
	return names
}

// formatHelp is the help text of --format.
func formatHelp() string {
	return fmt.Sprintf("output format: %s (%s need a fixed size: --crop or --size)",
		strings.Join(outputNames(false), "|"), andList(outputNames(true)))
}

// formatCheckers maps every format of the table to its structural check (nil where it has
// none), for verify: a dataset of a format not in it is a fault.
func formatCheckers() map[string]verify.FormatChecker {
	m := map[string]verify.FormatChecker{}
	for _, o := range outputs {
		m[o.Name] = o.Check
	}
	return m
}

// orList writes "a, b or c"; andList "a, b and c".
func orList(s []string) string  { return joinLast(s, " or ") }
func andList(s []string) string { return joinLast(s, " and ") }

func joinLast(s []string, last string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + last + s[len(s)-1]
}
