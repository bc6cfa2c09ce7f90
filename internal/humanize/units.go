// Package humanize is how packer writes amounts for people and reads them back: every amount
// of bytes in IEC binary units (B, KiB, MiB, GiB, TiB; powers of 1024), rates in the same units
// per second, through Bytes and Rate; size flags and settings take the same suffixes through
// ParseSize. One convention, because a shard budget of 256MiB printed back as "268.4 MB" reads
// as a different number. Count writes a count with its noun in the right number ("1 file",
// "2 files"). It imports only the standard library and no package of the module.
package humanize

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Binary size units.
const (
	KiB int64 = 1 << (10 * (iota + 1))
	MiB
	GiB
	TiB
)

// Bytes formats n bytes for people: "512 B", "7.9 KiB", "244.1 MiB", "1.25 GiB".
func Bytes(n int64) string {
	if n < 0 {
		return "-" + Bytes(-n)
	}
	return human(float64(n), "")
}

// Rate formats a rate in bytes per second: "36.4 MiB/s".
func Rate(bytesPerSecond float64) string {
	if bytesPerSecond < 0 || math.IsNaN(bytesPerSecond) || math.IsInf(bytesPerSecond, 0) {
		return "- B/s"
	}
	return human(bytesPerSecond, "/s")
}

func human(v float64, per string) string {
	switch {
	case v >= float64(TiB):
		return fmt.Sprintf("%.2f TiB%s", v/float64(TiB), per)
	case v >= float64(GiB):
		return fmt.Sprintf("%.2f GiB%s", v/float64(GiB), per)
	case v >= float64(MiB):
		return fmt.Sprintf("%.1f MiB%s", v/float64(MiB), per)
	case v >= float64(KiB):
		return fmt.Sprintf("%.1f KiB%s", v/float64(KiB), per)
	}
	return fmt.Sprintf("%.0f B%s", v, per)
}

// sizeSuffixes are the suffixes ParseSize takes, matched without regard to case, longest
// first: the IEC units packer prints, their one-letter short forms (also binary), and the
// SI units (powers of 1000) for those who mean them.
var sizeSuffixes = []struct {
	suffix string
	mult   int64
}{
	{"kib", KiB}, {"mib", MiB}, {"gib", GiB}, {"tib", TiB},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
	{"k", KiB}, {"m", MiB}, {"g", GiB}, {"t", TiB},
	{"b", 1},
}

// ParseSize parses a positive size such as 256MiB, 1GiB, 64M (binary), 100MB (SI) or 4096;
// bare is the unit of a number without a suffix (1 for bytes).
func ParseSize(s string, bare int64) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := bare
	for _, u := range sizeSuffixes {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("%q is not a positive size such as 256MiB (units B, KiB, MiB, GiB, TiB; K, M, G, T are the same; KB, MB, GB, TB are powers of 1000)", s)
	}
	if v > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is too large a size", s)
	}
	return v * mult, nil
}

// Count writes n and a regular noun in the number n asks for: "1 file", "0 files", "8 files".
// noun is the singular; the plural adds an s.
func Count[N ~int | ~int64](n N, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
