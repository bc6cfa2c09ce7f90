package fsentry

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestName(t *testing.T) {
	for in, want := range map[string]string{
		"plain.jpg":    "plain.jpg",
		"é/ü.png":      "é/ü.png",
		"a\xffb":       `a\xffb`,
		`back\slash`:   `back\\slash`,
		"\xc3":         `\xc3`,         // a truncated two-byte sequence
		"\xed\xa0\x80": `\xed\xa0\x80`, // an encoded surrogate is not UTF-8
		"tab\there":    "tab\there",
		`\xff`:         `\\xff`, // a name that looks escaped stays distinct from the byte
	} {
		got := Name(in)
		if got != want {
			t.Errorf("Name(%q) = %q, want %q", in, got, want)
		}
		back, err := Unname(got)
		if err != nil || back != in {
			t.Errorf("Unname(%q) = %q, %v; want %q", got, back, err, in)
		}
	}
	if _, err := Unname(`a\q`); err == nil {
		t.Error("Unname accepted a stray backslash")
	}
}

func TestNameIsInjective(t *testing.T) {
	seen := map[string]string{}
	for a := 0; a < 256; a++ {
		for b := 0; b < 256; b += 3 {
			s := string([]byte{byte(a), byte(b), '\\'})
			n := Name(s)
			if prev, ok := seen[n]; ok {
				t.Fatalf("Name(%q) == Name(%q) == %q", s, prev, n)
			}
			seen[n] = s
		}
	}
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	if err := os.WriteFile(p("file"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		os.Symlink("file", p("link")),
		os.Symlink("missing", p("dangling")),
		os.Symlink("loop", p("loop")),
		os.Symlink("/dev/null", p("null")),
		syscall.Mkfifo(p("fifo"), 0o644),
		os.Mkdir(p("dir"), 0o755),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]error{
		"file": nil, "link": nil, "dangling": ErrDangling, "loop": ErrLoop,
		"null": ErrNotRegular, "fifo": ErrNotRegular, "dir": ErrNotRegular,
	} {
		err := Check(p(name))
		if !errors.Is(err, want) || (want == nil) != (err == nil) {
			t.Errorf("Check(%s) = %v, want %v", name, err, want)
		}
		if err != nil && strings.Contains(err.Error(), dir) {
			t.Errorf("Check(%s) = %q names the host path", name, err)
		}
	}
	if err := Check(p("fifo")); err == nil || err.Error() != "not a regular file: FIFO" {
		t.Errorf("fifo: %v", err)
	}
	if err := CheckDir(p("dir")); err != nil {
		t.Errorf("CheckDir(dir) = %v", err)
	}
	if err := CheckDir(p("file")); !errors.Is(err, ErrNotFolder) {
		t.Errorf("CheckDir(file) = %v", err)
	}
	// Open never blocks on a FIFO, even one that Check did not see (it opens with O_NONBLOCK).
	done := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(p("fifo"), os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err == nil {
			f.Close()
		}
		_, err = Open(p("fifo"))
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotRegular) {
			t.Errorf("Open(fifo) = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Open(fifo) blocked")
	}
	f, err := Open(p("link"))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func TestCheckClasses(t *testing.T) {
	if err := CheckClasses([]string{"a", "b", `a\xff`}); err != nil {
		t.Error(err)
	}
	err := CheckClasses([]string{"a", "b", "a"})
	if !errors.Is(err, ErrDuplicate) || !strings.Contains(err.Error(), `"a" (labels 0 and 2)`) {
		t.Errorf("got %v", err)
	}
}
