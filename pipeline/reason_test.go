package pipeline

import (
	"strings"
	"testing"
)

func TestShortReasonKeepsNumbersWhole(t *testing.T) {
	long := "image of 20000x20000 pixels is over the decompression-bomb limit of 178956970 pixels (--max-pixels)"
	got := ShortReason(long)
	if len(got) > maxReasonKind || !strings.HasSuffix(got, "...") {
		t.Fatalf("ShortReason(%q) = %q: want at most %d bytes ending in ...", long, got, maxReasonKind)
	}
	for _, f := range strings.Fields(strings.TrimSuffix(got, "...")) {
		if !strings.Contains(long, " "+f+" ") && !strings.HasPrefix(long, f+" ") {
			t.Errorf("ShortReason cut the word %q out of the middle of a word", f)
		}
	}
	if got := ShortReason("limit of 178956970"); got != "limit of 178956970" {
		t.Errorf("a short reason changed: %q", got)
	}
	if got := ShortReason(strings.Repeat("é", 60)); !strings.HasSuffix(got, "...") || !validUTF8(got) {
		t.Errorf("cut inside a UTF-8 sequence: %q", got)
	}
}

func validUTF8(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

// TestPartErrorCountsFaults: a part with one fault says "1 fault", with more the plural.
func TestPartErrorCountsFaults(t *testing.T) {
	for n, want := range map[int]string{1: "part p: 1 fault; rebuild that part", 3: "part p: 3 faults; rebuild that part"} {
		if got := (&PartError{Dir: "p", Faults: make([]string, n)}).Error(); got != want {
			t.Errorf("%d faults: %q, want %q", n, got, want)
		}
	}
}
