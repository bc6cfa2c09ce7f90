package transforms

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDecodeReason: the reason a source records names neither the path it was given nor the
// DecodeError wrapper, and keeps the sentinel errors.
func TestDecodeReason(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.jpg")
	_, err := DecodeFile(missing, DecodeOptions{}, nil)
	if err == nil {
		t.Fatal("decoded a missing file")
	}
	r := DecodeReason(err)
	if !errors.Is(r, os.ErrNotExist) || strings.Contains(r.Error(), dir) || !strings.HasPrefix(r.Error(), "open: ") {
		t.Errorf("missing file: reason %q, want open: ... without the path", r)
	}

	bad := filepath.Join(dir, "bad.jpg")
	if err := os.WriteFile(bad, []byte("not an image at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = DecodeFile(bad, DecodeOptions{}, nil)
	var de *DecodeError
	if !errors.As(err, &de) {
		t.Fatalf("bad file: %v, want a DecodeError", err)
	}
	if r := DecodeReason(err); r != de.Err || strings.Contains(r.Error(), dir) {
		t.Errorf("bad file: reason %q, want the decoder's own error %q", r, de.Err)
	}
	if _, err = DecodeBytes([]byte{0xff, 0xd8, 0xff}, DecodeOptions{}, nil); !errors.Is(DecodeReason(err), ErrTruncated) && !errors.Is(DecodeReason(err), ErrCorrupt) {
		t.Errorf("cut JPEG in memory: reason %v, want truncated or corrupt", DecodeReason(err))
	}
	other := errors.New("context canceled")
	if r := DecodeReason(other); r != other {
		t.Errorf("other error: %v, want it unchanged", r)
	}
}
