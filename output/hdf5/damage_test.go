package hdf5

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packer-dev/packer/shard"
)

// TestCheckDamaged damages a good data.h5 in many ways; Check must report each, naming the file,
// and must not crash.
func TestCheckDamaged(t *testing.T) {
	s := makeSet(t.TempDir(), 50, []int{8, 8, 3}, shard.Uint8, []string{"coarse"}, true)
	m := write(t, s)
	good, err := os.ReadFile(filepath.Join(s.cfg.Dir, DataFile))
	if err != nil {
		t.Fatal(err)
	}
	flip := func(offs ...int) func([]byte) []byte {
		return func(b []byte) []byte {
			for _, o := range offs {
				b[o] ^= 0x10
			}
			return b
		}
	}
	cases := []struct {
		name   string
		damage func([]byte) []byte
		want   error
		text   string
	}{
		{"truncated-half", func(b []byte) []byte { return b[:len(b)/2] }, ErrDamaged, "truncated"},
		{"truncated-superblock", func(b []byte) []byte { return b[:40] }, ErrDamaged, "truncated"},
		{"empty", func(b []byte) []byte { return b[:0] }, ErrDamaged, "no HDF5 signature"},
		{"extra-bytes", func(b []byte) []byte { return append(b, 0) }, ErrDamaged, "extra bytes"},
		{"signature", flip(1), ErrDamaged, "no HDF5 signature"},
		{"superblock-version", flip(8), ErrDamaged, "SHA-256"},
		{"superblock-eof-address", flip(40), ErrDamaged, "SHA-256"},
		{"root-object-header", flip(100, 200, 300), ErrDamaged, "SHA-256"},
		{"object-headers", flip(700, 900, 1100, 1500), ErrDamaged, "SHA-256"},
		{"pixel", flip(len(good) / 2), ErrDamaged, "SHA-256"},
		{"last-byte", flip(len(good) - 1), ErrDamaged, "SHA-256"},
		{"garbage", func(b []byte) []byte {
			rng := rand.New(rand.NewPCG(3, 3))
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			return b
		}, ErrDamaged, "no HDF5 signature"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			b := c.damage(append([]byte(nil), good...))
			if err := os.WriteFile(filepath.Join(dir, DataFile), b, 0o644); err != nil {
				t.Fatal(err)
			}
			errs := Check(dir, m)
			requireFault(t, errs, c.want, c.text)
			if c.name == "truncated-half" {
				if err := writeManifest(dir, m); err != nil {
					t.Fatal(err)
				}
				if r, err := Open(dir); err == nil || !errors.Is(err, ErrDamaged) {
					if r != nil {
						r.Close()
					}
					t.Fatalf("Open of a truncated file: %v, want ErrDamaged", err)
				}
			}
		})
	}

	t.Run("missing", func(t *testing.T) {
		errs := Check(t.TempDir(), m)
		requireFault(t, errs, os.ErrNotExist, "")
	})
	t.Run("not-in-manifest", func(t *testing.T) {
		m2 := *m
		m2.Files = nil
		requireFault(t, Check(s.cfg.Dir, &m2), ErrFormat, "not listed")
	})
	t.Run("nil-manifest", func(t *testing.T) {
		if errs := Check(s.cfg.Dir, nil); len(errs) == 0 {
			t.Fatal("no error")
		}
	})
}

// TestCheckMismatch checks intact files (their SHA-256 matches) against manifests that
// disagree with them: the structural checks run and name the dataset.
func TestCheckMismatch(t *testing.T) {
	s := makeSet(t.TempDir(), 20, []int{4, 4, 3}, shard.Uint8, []string{"coarse"}, false)
	m := write(t, s)
	cases := []struct {
		name  string
		edit  func(*shard.Manifest)
		wants []string
	}{
		{"count", func(m *shard.Manifest) { m.Count++ }, []string{"/images has shape [20 4 4 3], manifest says [21 4 4 3]", "/labels has shape [20]", "/aux/coarse has shape [20]"}},
		{"dtype", func(m *shard.Manifest) { m.Sample.DType = shard.Float32 }, []string{"/images: element type", "\"sample\""}},
		{"shape", func(m *shard.Manifest) { m.Sample.Shape = []int{3, 4, 4} }, []string{"/images has shape"}},
		{"aux", func(m *shard.Manifest) { m.Label.Aux = []string{"coarse", "fine"} }, []string{"no dataset /aux/fine"}},
		{"no-aux-group", func(m *shard.Manifest) { m.Label.Aux = []string{"x"} }, []string{"no dataset /aux/x"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m2 := *m
			m2.Sample.Shape = append([]int(nil), m.Sample.Shape...)
			c.edit(&m2)
			errs := Check(s.cfg.Dir, &m2)
			for _, w := range c.wants {
				requireFault(t, errs, ErrFormat, w)
			}
		})
	}

	// A valid HDF5 file that is not packer's: the float32 file of another set, hashed into the
	// manifest of a uint8 one.
	other := makeSet(t.TempDir(), 20, []int{4, 4, 3}, shard.Float32, nil, false)
	om := write(t, other)
	m2 := *m
	m2.Files = om.Files
	errs := Check(other.cfg.Dir, &m2)
	requireFault(t, errs, ErrFormat, "/images: element type")
	requireFault(t, errs, ErrFormat, "no group /aux")
}

// requireFault fails unless some error wraps want (when non-nil), contains text, and names the
// data file.
func requireFault(t *testing.T, errs []error, want error, text string) {
	t.Helper()
	for _, err := range errs {
		if (want == nil || errors.Is(err, want)) && strings.Contains(err.Error(), text) && strings.Contains(err.Error(), DataFile) {
			return
		}
	}
	t.Fatalf("no error wrapping %v containing %q among %d:\n%v", want, text, len(errs), errors.Join(errs...))
}

func writeManifest(dir string, m *shard.Manifest) error {
	m2 := *m
	m2.Packer, m2.Format = "test", "hdf5"
	b, err := m2.Marshal()
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, shard.ManifestName), b, 0o644)
}

// TestFuzzStructure damages random bytes of a good file and requires Check to report every
// variant (the SHA-256 gate) without crashing; the pre-hash size and signature checks must agree
// with the file.
func TestFuzzStructure(t *testing.T) {
	s := makeSet(t.TempDir(), 30, []int{8, 8, 3}, shard.Uint8, []string{"coarse"}, true)
	m := write(t, s)
	good, err := os.ReadFile(filepath.Join(s.cfg.Dir, DataFile))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 1))
	for i := range 200 {
		b := append([]byte(nil), good...)
		for range 1 + rng.IntN(4) {
			b[rng.IntN(min(len(b), 4096))] ^= 1 << rng.IntN(8)
		}
		if rng.IntN(8) == 0 {
			b = b[:rng.IntN(len(b))]
		}
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) == m.Files[0].SHA256 {
			continue // flips cancelled out
		}
		if err := os.WriteFile(filepath.Join(dir, DataFile), b, 0o644); err != nil {
			t.Fatal(err)
		}
		if errs := Check(dir, m); len(errs) == 0 {
			t.Fatalf("variant %d: damage not reported", i)
		}
	}
}

// TestCheckStructureAfterVerifiedBytes checks that CheckStructure, used by verify once the
// file's SHA-256 matched the manifest, accepts an intact file and still finds a manifest that
// disagrees with the file's structure.
func TestCheckStructureAfterVerifiedBytes(t *testing.T) {
	s := makeSet(t.TempDir(), 20, []int{4, 4, 3}, shard.Uint8, nil, false)
	m := write(t, s)
	if errs := CheckStructure(s.cfg.Dir, m); len(errs) != 0 {
		t.Fatalf("intact file: %v", errs)
	}
	bad := *m
	bad.Count++
	requireFault(t, CheckStructure(s.cfg.Dir, &bad), ErrFormat, "/images has shape [20 4 4 3], manifest says [21 4 4 3]")
}
