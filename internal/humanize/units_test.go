package humanize

import "testing"

// TestBytesAndRate: sizes and rates print in IEC units, one convention.
func TestBytesAndRate(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 8 << 20: "8.0 MiB", 7_900_000: "7.5 MiB",
		256 << 20: "256.0 MiB", 3 << 29: "1.50 GiB", 5 << 40: "5.00 TiB", -2048: "-2.0 KiB",
	} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
	if got := Rate(36.4 * float64(MiB)); got != "36.4 MiB/s" {
		t.Errorf("Rate = %q", got)
	}
	if got := Rate(-1); got != "- B/s" {
		t.Errorf("Rate(-1) = %q", got)
	}
}

// TestParseSize: the suffixes packer prints parse back to the same bytes, case aside; SI
// suffixes mean powers of 1000; a bare number takes the caller's unit; anything else, zero,
// negatives and overflow are refused.
func TestParseSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		bare int64
		want int64
	}{
		{"256MiB", 1, 256 << 20}, {"256mib", 1, 256 << 20}, {"1GiB", 1, 1 << 30}, {"64K", 1, 64 << 10},
		{"2t", 1, 2 << 40}, {"100MB", 1, 100e6}, {"5kb", 1, 5000}, {"4096", 1, 4096}, {"4096B", 1, 4096},
		{" 8 MiB ", 1, 8 << 20}, {"8", MiB, 8 << 20}, {"8KiB", MiB, 8 << 10},
	} {
		if got, err := ParseSize(c.in, c.bare); err != nil || got != c.want {
			t.Errorf("ParseSize(%q, %d) = %d, %v; want %d", c.in, c.bare, got, err, c.want)
		}
	}
	for _, in := range []string{"", "0", "-1MiB", "1.5GiB", "MiB", "12 parsecs", "9000000000000TiB"} {
		if got, err := ParseSize(in, 1); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, got)
		}
	}
}

// TestCount: one of a thing is singular, every other count plural, whatever the integer type.
func TestCount(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{Count(1, "file"), "1 file"}, {Count(0, "file"), "0 files"}, {Count(2, "record"), "2 records"},
		{Count(int64(1), "input"), "1 input"}, {Count(int64(10000), "input"), "10000 inputs"},
		{Count(1, "shard file"), "1 shard file"}, {Count(3, "HDF5 file"), "3 HDF5 files"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
