//go:build purego

package transforms

import "testing"

// puregoTag: this test binary was built with the purego tag, which forces the portable Go
// loops.
const puregoTag = true

// TestPuregoTag: with the purego tag the AVX2 passes are not in the build, whatever the CPU
// and cgo, so every other test of this package exercises the Go loops.
func TestPuregoTag(t *testing.T) {
	if useAVX2 {
		t.Fatal("built with -tags purego, but the AVX2 resize passes are on")
	}
	if simdPrecision != PrecisionBits {
		t.Fatalf("simdPrecision %d, want the Go loops' PrecisionBits %d", simdPrecision, PrecisionBits)
	}
}
