package shards

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
)

// TestSinkSizes checks that the sink writes exactly the bytes given, with their SHA-256, for
// sizes around the chunk and O_DIRECT alignment boundaries, in the temporary directory (where
// O_DIRECT is usually used) and in /dev/shm (tmpfs refuses it, so the buffered fallback runs).
func TestSinkSizes(t *testing.T) {
	dirs := []string{t.TempDir()}
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "packer-sink-test"); err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			dirs = append(dirs, d)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 2*sinkChunk+3*directAlign+123)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	sizes := []int{0, 1, directAlign - 1, directAlign, directAlign + 1, sinkChunk - 1, sinkChunk, sinkChunk + 1,
		2 * sinkChunk, 2*sinkChunk + 3*directAlign, len(data)}
	for _, dir := range dirs {
		for _, n := range sizes {
			s, err := newSink(dir, fmt.Sprintf("f-%d", n))
			if err != nil {
				t.Fatal(err)
			}
			for p := data[:n]; len(p) > 0; {
				k := min(len(p), 1+rng.IntN(3*directAlign))
				s.Write(p[:k])
				p = p[k:]
			}
			path := s.p.Name()
			sum, err := s.finish()
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if err := s.f.Close(); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			want := sha256.Sum256(data[:n])
			if !bytes.Equal(got, data[:n]) || sum != hex.EncodeToString(want[:]) || s.size != int64(n) {
				t.Fatalf("%s: %d bytes written, want %d; sha %s", path, len(got), n, sum)
			}
		}
	}
}
