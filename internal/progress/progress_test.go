package progress

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestPlainLine: without a terminal, a line names the unit, labels elapsed and ETA, and after
// Resume counts the rate from what this run did, not from what was done before it.
func TestPlainLine(t *testing.T) {
	var buf bytes.Buffer
	b := New(&buf, "packing folder", "images", 100)
	b.Resume(50)
	b.interval = 0
	b.start = time.Now().Add(-2 * time.Second) // 10 images in 2 s: 5 images/s, not 30
	b.Set(60)
	line := buf.String()
	for _, want := range []string{"packing folder: 60/100 (60%)", " 5 images/s", "elapsed 2s", "ETA 8s"} {
		if !strings.Contains(line, want) {
			t.Errorf("line %q lacks %q", line, want)
		}
	}
}

// TestPlainLineBytes: a byte-counting line prints sizes and the rate in IEC units.
func TestPlainLineBytes(t *testing.T) {
	var buf bytes.Buffer
	b := New(&buf, "verifying", "bytes", 4<<30)
	b.interval = 0
	b.start = time.Now().Add(-2 * time.Second)
	b.Set(1 << 30)
	line := buf.String()
	for _, want := range []string{"verifying: 1.00 GiB/4.00 GiB (25%)", " MiB/s, elapsed 2s"} {
		if !strings.Contains(line, want) {
			t.Errorf("line %q lacks %q", line, want)
		}
	}
}
