package shard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// ManifestName is the file name of a dataset's manifest, written last by every build.
const ManifestName = "manifest.json"

// MaxManifestSize bounds the manifest a reader will load.
const MaxManifestSize = 1 << 30

// Manifest describes a packed dataset directory: what it holds, how it was made, and the size and
// SHA-256 of every data file. It is the root of trust for verify and the entry point of readers.
type Manifest struct {
	Packer        string         `json:"packer"`         // packer version that wrote the dataset
	Format        string         `json:"format"`         // "shards", "npy" or "hdf5"
	FormatVersion int            `json:"format_version"` // shard format version (FORMAT.md) for "shards"
	Count         int64          `json:"count"`          // number of records
	Classes       []string       `json:"classes"`        // class names, indexed by label
	ClassCounts   []int64        `json:"class_counts"`   // records per label, same length as Classes
	Sample        SampleSpec     `json:"sample"`         // shape, dtype and layout of one record
	Label         LabelSpec      `json:"label"`          // label type and auxiliary label columns
	Source        map[string]any `json:"source"`         // source kind and its options
	Transform     map[string]any `json:"transform"`      // the full transform spec
	Files         []FileEntry    `json:"files"`          // every data file, in record order
	Skipped       []Skipped      `json:"skipped"`        // every input that was not packed
	// Inputs is how many inputs the source enumerated: each one was packed (yielded at least
	// one record) or is in Skipped. 0 in manifests written before packer recorded it.
	Inputs int64 `json:"inputs"`
}

// FileEntry is one data file of a dataset.
type FileEntry struct {
	Path        string `json:"path"`   // relative to the dataset directory, slash separated
	Size        int64  `json:"size"`   // bytes
	SHA256      string `json:"sha256"` // lower-case hex
	Records     int64  `json:"records,omitempty"`
	FirstRecord int64  `json:"first_record,omitempty"`
}

// Skipped is one input that was not packed, with the reason.
type Skipped struct {
	Input  string `json:"input"`
	Reason string `json:"reason"`
}

// Marshal encodes the manifest deterministically (struct field order, sorted map keys).
func (m *Manifest) Marshal() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ReadManifest loads dir/manifest.json.
func ReadManifest(dir string) (*Manifest, error) {
	path := filepath.Join(dir, ManifestName)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open manifest: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxManifestSize+1))
	if err != nil {
		return nil, fmt.Errorf("read manifest %s: %w", path, err)
	}
	if len(data) > MaxManifestSize {
		return nil, fmt.Errorf("%s: manifest larger than %d bytes", path, MaxManifestSize)
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%s: invalid manifest: %w", path, err)
	}
	if err := m.check(); err != nil {
		return nil, fmt.Errorf("%s: invalid manifest: %w", path, err)
	}
	return &m, nil
}

func (m *Manifest) check() error {
	switch m.Format {
	case "shards", "npy", "hdf5":
	default:
		return fmt.Errorf("unknown format %q", m.Format)
	}
	if m.Count < 0 {
		return fmt.Errorf("negative count %d", m.Count)
	}
	if err := m.Sample.Validate(); err != nil {
		return err
	}
	for _, f := range m.Files {
		if f.Path == "" || filepath.IsAbs(f.Path) || !filepath.IsLocal(filepath.FromSlash(f.Path)) {
			return fmt.Errorf("file path %q is not a local relative path", f.Path)
		}
		if f.Size < 0 {
			return fmt.Errorf("file %s: negative size", f.Path)
		}
	}
	return nil
}
