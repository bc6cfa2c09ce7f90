package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUnknownTransformFlags: an unknown --filter, --layout or --dtype is a usage error (exit 2)
// naming the flag, before anything is read or written, with or without --resize: a filter
// given without a resize used to be dropped unread.
func TestUnknownTransformFlags(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--resize", "8", "--filter", "cubic"}, `--filter: transforms: unknown filter "cubic"`},
		{[]string{"--filter", "cubic"}, `--filter: transforms: unknown filter "cubic"`},
		{[]string{"--layout", "nhwc"}, `--layout: transforms: unknown layout "nhwc"`},
		{[]string{"--dtype", "int8"}, `--dtype: transforms: unknown dtype "int8"`},
	} {
		args := append([]string{"build", dir, "-o", out}, c.args...)
		_, errs, code := run(t, args...)
		if code != exitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("packer %s: exit %d, stderr %q: want a usage error saying %q", strings.Join(args, " "), code, errs, c.want)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a refused build left %s (%v)", out, err)
	}
}
