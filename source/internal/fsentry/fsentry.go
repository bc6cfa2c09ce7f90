// Package fsentry holds what every file-based source does the same way with the file-system
// entries it enumerates: it checks that an entry is a file that can be read before anything opens it, and
// names entries losslessly in the manifest.
//
// # Entries that are not regular files
//
// A source enumerates every entry its layout rules name (an entry with an image extension in a
// class folder, say) whatever the entry is, and each one ends up packed or in the manifest's
// skipped list with a reason. [Check] gives that reason without opening the entry: "dangling
// symlink", "symlink loop", "not a regular file: FIFO" (or character device, block device,
// socket, folder). A FIFO or a device is never opened for reading: opening a FIFO blocks until a
// writer comes, and opening some devices has side effects. [Open] opens with O_NONBLOCK as a
// second guard and checks the opened file again. A symbolic link to a regular file is an
// ordinary input.
//
// # Names
//
// File and folder names are bytes on Linux; the manifest is JSON, which holds UTF-8 text. JSON
// encoders replace bytes that are not UTF-8 with U+FFFD, so two class folders whose names
// differ only in such bytes would become two classes with the same name. [Name] escapes names
// instead, reversibly: valid UTF-8 is kept as it is, every byte that is not part of valid UTF-8
// is written as \xHH (two lower-case hex digits) and a backslash as \\. Every class name,
// skipped input and per-record name a source writes goes through Name.
package fsentry

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"
)

// Reasons an entry cannot be read as a file. The errors Check returns wrap one of them.
var (
	ErrDangling   = errors.New("dangling symlink")
	ErrLoop       = errors.New("symlink loop")
	ErrNotRegular = errors.New("not a regular file")
	ErrNotFolder  = errors.New("not a folder")
	ErrDuplicate  = errors.New("duplicate class name")
)

// Check reports whether path is, after following symbolic links, a regular file, without
// opening it. The error wraps ErrDangling, ErrLoop or ErrNotRegular (its text then names the
// kind: "not a regular file: FIFO"), or is the stat error (permission denied ...), with the
// operation but not the path, since callers name the entry themselves.
func Check(path string) error { return CheckIn(nil, path) }

// Stater is a listing that answers os.Stat for its paths: the Files of an object store's view
// held in memory (source.Lister), whose entries are folders and regular files, no links.
type Stater interface {
	Stat(path string) (fs.FileInfo, error)
}

// CheckIn is Check of an entry of the listing l, or of the file system where l is nil.
func CheckIn(l Stater, path string) error {
	st, err := statIn(l, path)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%w: %s", ErrNotRegular, Kind(st.Mode()))
	}
	return nil
}

// CheckDir is Check for an entry that must be a folder; the error wraps ErrNotFolder for
// anything else.
func CheckDir(path string) error { return CheckDirIn(nil, path) }

// CheckDirIn is CheckDir of an entry of the listing l, or of the file system where l is nil.
func CheckDirIn(l Stater, path string) error {
	st, err := statIn(l, path)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%w: %s", ErrNotFolder, Kind(st.Mode()))
	}
	return nil
}

// statIn follows path's symbolic links and names why that fails: in the listing l where it is
// not nil (which holds no link), else on the file system.
func statIn(l Stater, path string) (fs.FileInfo, error) {
	var st fs.FileInfo
	var err error
	if l != nil {
		st, err = l.Stat(path)
	} else {
		st, err = os.Stat(path)
	}
	if err == nil {
		return st, nil
	}
	if l != nil {
		return nil, opError(err)
	}
	lst, lerr := os.Lstat(path)
	if lerr == nil && lst.Mode()&fs.ModeSymlink != 0 {
		switch {
		case errors.Is(err, syscall.ELOOP):
			return nil, fmt.Errorf("%w (too many levels of symbolic links)", ErrLoop)
		case errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("%w: its target does not exist", ErrDangling)
		}
	}
	return nil, opError(err)
}

// opError is a stat error with its operation but not its path.
func opError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}

// Kind names a file mode's type in words: "FIFO", "character device", ...
func Kind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "regular file"
	case m.IsDir():
		return "folder"
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	}
	return "irregular file"
}

// Open checks path with Check, then opens it for reading with O_NONBLOCK (so that an entry
// replaced by a FIFO after the check does not block) and checks the opened file is regular.
// Errors are as Check's.
func Open(path string) (*os.File, error) {
	if err := Check(path); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("%s: %w", pe.Op, pe.Err)
		}
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%w: %s", ErrNotRegular, Kind(st.Mode()))
	}
	return f, nil
}

// Name escapes a file name (or a slash-separated relative path, or any name read from a file)
// for the manifest: valid UTF-8 is kept, a backslash becomes \\ and every byte that is not part
// of valid UTF-8 becomes \xHH. The escaping is reversible, so distinct names stay distinct.
func Name(s string) string {
	if utf8.ValidString(s) && !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		c := s[i]
		if c == '\\' {
			b.WriteString(`\\`)
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 {
			fmt.Fprintf(&b, `\x%02x`, c)
			i++
			continue
		}
		b.WriteString(s[i : i+n])
		i += n
	}
	return b.String()
}

// Unname reverses Name; it fails on text Name cannot have written.
func Unname(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case i+1 < len(s) && s[i+1] == '\\':
			b.WriteByte('\\')
			i++
		case i+3 < len(s) && s[i+1] == 'x' && isHex(s[i+2]) && isHex(s[i+3]):
			b.WriteByte(unhex(s[i+2])<<4 | unhex(s[i+3]))
			i += 3
		default:
			return "", fmt.Errorf("inputs: %q: a backslash at byte %d escapes nothing", s, i)
		}
	}
	return b.String(), nil
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' }

func unhex(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'a' + 10
}

// CheckClasses refuses a list of class names in which a name appears twice: two classes that
// the manifest cannot tell apart. The error wraps ErrDuplicate and names the class and both
// labels.
func CheckClasses(classes []string) error {
	seen := make(map[string]int, len(classes))
	for i, c := range classes {
		if j, ok := seen[c]; ok {
			return fmt.Errorf("%w %q (labels %d and %d): class names must be distinct", ErrDuplicate, c, j, i)
		}
		seen[c] = i
	}
	return nil
}

// ErrSameFile is wrapped by SameFiles' error.
var ErrSameFile = errors.New("one file named twice")

// SameFiles refuses a list of files (names relative to root) in which two names lead to one
// file (the same path written twice, or links to one file): a source reading each name would
// pack that file's records twice. Names that cannot be stat'ed are left to the source, which
// reports them as bad inputs. The error names both, escaped with Name.
func SameFiles(root string, names []string) error {
	type seen struct {
		name string
		st   fs.FileInfo
	}
	bySize := map[int64][]seen{}
	for _, n := range names {
		st, err := os.Stat(filepath.Join(root, n))
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		for _, o := range bySize[st.Size()] {
			if os.SameFile(o.st, st) {
				return fmt.Errorf("%w: %s and %s are the same file: its records would be packed twice", ErrSameFile, Name(o.name), Name(n))
			}
		}
		bySize[st.Size()] = append(bySize[st.Size()], seen{n, st})
	}
	return nil
}
