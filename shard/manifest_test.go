package shard

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func testManifest() *Manifest {
	return &Manifest{Packer: "0.2.0", Format: "shards", FormatVersion: 1, Count: 2,
		Classes: []string{"cat", "<dog>"}, ClassCounts: []int64{1, 1},
		Sample: SampleSpec{Shape: []int{2, 2, 3}, DType: "uint8", Layout: "hwc"},
		Label:  LabelSpec{DType: "int64", Aux: []string{}},
		Source: map[string]any{"kind": "imagedir"}, Transform: map[string]any{},
		Files:   []FileEntry{{Path: "shard-00000.pks", Size: 4096, SHA256: strings.Repeat("ab", 32), Records: 2}},
		Skipped: []Skipped{}}
}

// The manifest ends with its own checksum: the SHA-256 of the file without that last member.
func TestManifestChecksumMember(t *testing.T) {
	data, err := testManifest().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	tail := regexp.MustCompile(`,\n  "manifest_sha256": "[0-9a-f]{64}"\n}\n$`)
	loc := tail.FindIndex(data)
	if loc == nil {
		t.Fatalf("manifest does not end with the manifest_sha256 member:\n%s", data)
	}
	if !bytes.Contains(data, []byte(`"<dog>"`)) {
		t.Errorf("HTML escaping is on:\n%s", data)
	}
	body := append(append([]byte{}, data[:loc[0]]...), "\n}\n"...)
	sum := sha256.Sum256(body)
	want := hex.EncodeToString(sum[:])
	if got := string(data[loc[1]-64-4 : loc[1]-4]); got != want {
		t.Errorf("manifest_sha256 is %s, the SHA-256 of the body is %s", got, want)
	}
}

func TestReadManifestChecksum(t *testing.T) {
	data, err := testManifest().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	write := func(t *testing.T, b []byte) string {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, ManifestName), b, 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	if _, err := ReadManifest(write(t, data)); err != nil {
		t.Fatalf("intact manifest refused: %v", err)
	}
	cases := map[string]struct {
		data []byte
		want string
	}{
		"count edited":     {bytes.Replace(data, []byte(`"count": 2`), []byte(`"count": 3`), 1), "manifest.json: checksum mismatch: the manifest was edited or damaged"},
		"class renamed":    {bytes.Replace(data, []byte(`"cat"`), []byte(`"cow"`), 1), "checksum mismatch"},
		"member removed":   {append(append([]byte{}, data[:bytes.LastIndex(data, []byte(`,`))]...), "\n}\n"...), "has no manifest_sha256: written by packer < 0.2 or edited; rebuild"},
		"trailing bytes":   {append(append([]byte{}, data...), "\n"...), "has no manifest_sha256"},
		"sum edited":       {append(append([]byte{}, data[:len(data)-8]...), "0000\"\n}\n"...), "checksum mismatch"},
		"no final newline": {data[:len(data)-1], "has no manifest_sha256"},
	}
	// the sum must be lower-case hex
	up := append([]byte{}, data...)
	copy(up[len(up)-68:len(up)-4], strings.ToUpper(string(up[len(up)-68:len(up)-4])))
	cases["sum upper case"] = struct {
		data []byte
		want string
	}{up, "manifest.json"}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if bytes.Equal(c.data, data) {
				t.Fatal("the case does not change the manifest")
			}
			_, err := ReadManifest(write(t, c.data))
			if err == nil {
				t.Fatal("damaged manifest accepted")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not contain %q", err, c.want)
			}
		})
	}
}

// TestManifestIndexSHA256: a file entry's index_sha256, when present, is 64 lower-case hex
// digits; anything else is an invalid manifest, refused naming the file. Absent, it is not
// written at all (npy and HDF5 entries, manifests of older packers).
func TestManifestIndexSHA256(t *testing.T) {
	m := testManifest()
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte("index_sha256")) {
		t.Errorf("an entry without index_sha256 writes the member:\n%s", data)
	}
	for _, v := range []string{strings.Repeat("ab", 32), strings.Repeat("AB", 32), "abc", strings.Repeat("xy", 32)} {
		m.Files[0].IndexSHA256 = v
		data, err := m.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, ManifestName), data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = ReadManifest(dir)
		if ok := v == strings.Repeat("ab", 32); ok != (err == nil) {
			t.Errorf("index_sha256 %q: %v", v, err)
		} else if err != nil && !strings.Contains(err.Error(), "shard-00000.pks: index_sha256") {
			t.Errorf("index_sha256 %q: error %q does not name the file", v, err)
		}
	}
}

// TestManifestBuildShuffle: the build order a manifest records (source.shuffle) is read back
// exactly, the largest seed included; a malformed one is an error, never a seed.
func TestManifestBuildShuffle(t *testing.T) {
	for _, c := range []struct {
		src      string
		seed     uint64
		shuffled bool
		bad      bool
	}{
		{`{"kind": "folder"}`, 0, false, false},
		{`{"kind": "folder", "shuffle": {"seed": 0}}`, 0, true, false},
		{`{"kind": "folder", "shuffle": {"seed": 18446744073709551615}}`, 1<<64 - 1, true, false},
		{`{"kind": "folder", "shuffle": {"seed": 18446744073709551616}}`, 0, true, true},
		{`{"kind": "folder", "shuffle": {"seed": -1}}`, 0, true, true},
		{`{"kind": "folder", "shuffle": {"seed": 1.5}}`, 0, true, true},
		{`{"kind": "folder", "shuffle": {"seed": "5"}}`, 0, true, true},
		{`{"kind": "folder", "shuffle": {"seed": 5, "rounds": 6}}`, 0, true, true},
		{`{"kind": "folder", "shuffle": true}`, 0, true, true},
	} {
		m := testManifest()
		m.Source = nil
		dec := json.NewDecoder(strings.NewReader(c.src))
		dec.UseNumber()
		if err := dec.Decode(&m.Source); err != nil {
			t.Fatal(err)
		}
		seed, shuffled, err := m.BuildShuffle()
		if (err != nil) != c.bad || shuffled != c.shuffled || (!c.bad && seed != c.seed) {
			t.Errorf("%s: BuildShuffle = %d, %v, %v", c.src, seed, shuffled, err)
		}
	}
}

// TestReadManifestFormats: ReadManifest reads a manifest of any format name (which names exist
// is the program's table, not this package's); ReadManifestFormats refuses one not among the
// names it is given, as an invalid manifest naming the file and the format, and with no names
// reads any.
func TestReadManifestFormats(t *testing.T) {
	dir := t.TempDir()
	m := testManifest()
	m.Format = "zarr"
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ManifestName), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadManifest(dir); err != nil || got.Format != "zarr" {
		t.Fatalf("ReadManifest of format zarr: %v, %v", got, err)
	}
	if got, err := ReadManifestFormats(DirFS(dir), nil); err != nil || got.Format != "zarr" {
		t.Errorf("ReadManifestFormats with no names: %v, %v", got, err)
	}
	if got, err := ReadManifestFormats(DirFS(dir), []string{"zarr"}); err != nil || got.Format != "zarr" {
		t.Errorf("ReadManifestFormats of a listed format: %v, %v", got, err)
	}
	want := filepath.Join(dir, ManifestName) + `: invalid manifest: unknown format "zarr"`
	if _, err := ReadManifestFormats(DirFS(dir), []string{FormatShards, FormatNPY}); err == nil || err.Error() != want {
		t.Errorf("ReadManifestFormats of an unlisted format: %v, want %s", err, want)
	}
	if _, err := OpenDataset(dir); err == nil || !strings.Contains(err.Error(), `"zarr"`) {
		t.Errorf("OpenDataset of format zarr: %v, want a refusal naming it", err)
	}
}
