package video

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"testing"

	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/transforms"
)

func TestNaturalLess(t *testing.T) {
	names := []string{"frame_10.jpg", "frame_2.jpg", "frame_1.jpg", "frame_002.jpg", "frame_02.jpg", "a.jpg", "frame_1a.jpg",
		"frame_100.jpg", "frame_99.jpg", "img00001.png", "img00010.png", "img00002.png", "frame_.jpg", "frame-1.jpg"}
	sort.Slice(names, func(i, j int) bool { return NaturalLess(names[i], names[j]) })
	want := []string{"a.jpg", "frame-1.jpg", "frame_.jpg", "frame_1.jpg", "frame_1a.jpg", "frame_002.jpg", "frame_02.jpg",
		"frame_2.jpg", "frame_10.jpg", "frame_99.jpg", "frame_100.jpg", "img00001.png", "img00002.png", "img00010.png"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("natural order\n got %q\nwant %q", names, want)
	}
	// Numbers longer than any integer type.
	if !NaturalLess("f99999999999999999999999", "f100000000000000000000000") {
		t.Error("long numbers compare by value")
	}
}

// FuzzNaturalSort checks that NaturalLess is a strict total order (irreflexive, asymmetric,
// total on distinct names, transitive) and orders frame_%d names numerically.
func FuzzNaturalSort(f *testing.F) {
	f.Add("frame_2", "frame_10", "frame_010")
	f.Add("a1b2", "a01b2", "a1b02")
	f.Add("", "0", "00")
	f.Add("x9", "x09a", "x9a")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		if NaturalLess(a, a) {
			t.Fatalf("%q < itself", a)
		}
		ab, ba := NaturalLess(a, b), NaturalLess(b, a)
		if ab && ba {
			t.Fatalf("%q and %q are both less than each other", a, b)
		}
		if a != b && !ab && !ba {
			t.Fatalf("%q and %q are distinct but unordered", a, b)
		}
		if ab && NaturalLess(b, c) && !NaturalLess(a, c) {
			t.Fatalf("not transitive: %q < %q < %q but not %q < %q", a, b, c, a, c)
		}
		n, m := len(a), len(b)
		x, y := fmt.Sprintf("frame_%d.png", n), fmt.Sprintf("frame_%d.png", m)
		if NaturalLess(x, y) != (n < m) {
			t.Fatalf("%q vs %q", x, y)
		}
	})
}

// clipRun pushes n frames through a clipper and returns each record's first frame indexes,
// its metadata, and the most frames held at once.
func clipRun(t *testing.T, n, clipLen, stride int, pad bool) (recs [][]int, metas []recordMeta, maxHeld int, err error) {
	t.Helper()
	held := 0
	imgs := make([]transforms.Image, n)
	for i := range imgs {
		imgs[i] = transforms.Image{W: 1, H: 1, C: 3, Pix: []byte{byte(i), 0, 0}}
	}
	c := newClipper(clipLen, stride, pad, "c/v.mp4", 7, func(cl source.Clip) error {
		var idx []int
		for _, f := range cl.Frames {
			idx = append(idx, int(f.Pix[0]))
		}
		recs = append(recs, idx)
		var m recordMeta
		if err := json.Unmarshal(cl.Meta, &m); err != nil {
			t.Fatal(err)
		}
		metas = append(metas, m)
		return nil
	}, func(frame) { held-- })
	for i := 0; i < n; i++ {
		held++
		maxHeld = max(maxHeld, held)
		if err := c.push(frame{img: imgs[i], index: i, time: float64(i) / 10, has: true}); err != nil {
			t.Fatal(err)
		}
	}
	err = c.finish()
	if held != 0 {
		t.Errorf("%d frames not released", held)
	}
	return recs, metas, maxHeld, err
}

func TestClipper(t *testing.T) {
	seq := func(a, b int) []int {
		var s []int
		for i := a; i < b; i++ {
			s = append(s, i)
		}
		return s
	}
	for _, tc := range []struct {
		n, t, s int
		pad     bool
		want    [][]int
		short   bool
	}{
		{n: 3, t: 4, short: true},
		{n: 1, t: 4, short: true},
		{n: 4, t: 4, want: [][]int{seq(0, 4)}},
		{n: 5, t: 4, want: [][]int{seq(0, 4)}},
		{n: 8, t: 4, want: [][]int{seq(0, 4), seq(4, 8)}},
		{n: 9, t: 4, want: [][]int{seq(0, 4), seq(4, 8)}},
		{n: 9, t: 4, s: 2, want: [][]int{seq(0, 4), seq(2, 6), seq(4, 8)}},
		{n: 9, t: 4, s: 1, want: [][]int{seq(0, 4), seq(1, 5), seq(2, 6), seq(3, 7), seq(4, 8), seq(5, 9)}},
		{n: 9, t: 2, s: 5, want: [][]int{seq(0, 2), seq(5, 7)}},
		{n: 3, t: 4, pad: true, want: [][]int{{0, 1, 2, 2}}},
		{n: 1, t: 4, pad: true, want: [][]int{{0, 0, 0, 0}}},
		{n: 5, t: 4, pad: true, want: [][]int{seq(0, 4)}},
		{n: 3, t: 0, want: [][]int{{0}, {1}, {2}}},
	} {
		name := fmt.Sprintf("n%d_t%d_s%d_pad%v", tc.n, tc.t, tc.s, tc.pad)
		t.Run(name, func(t *testing.T) {
			recs, metas, held, err := clipRun(t, tc.n, tc.t, tc.s, tc.pad)
			if tc.short {
				var se *shortError
				if !errors.Is(err, ErrShort) || !errors.As(err, &se) || err.Error() != fmt.Sprintf("video has %d %s, fewer than --clip-len %d", tc.n, map[bool]string{true: "frame", false: "frames"}[tc.n == 1], tc.t) {
					t.Fatalf("err = %v, want the short-video reason", err)
				}
				if len(recs) != 0 {
					t.Fatalf("short video emitted %v", recs)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(recs, tc.want) {
				t.Fatalf("records %v, want %v", recs, tc.want)
			}
			if lim := max(tc.t, 1); held > lim {
				t.Errorf("held %d frames at once, want at most %d", held, lim)
			}
			for i, m := range metas {
				want := recordMeta{Frame: tc.want[i][0], Frames: len(tc.want[i]), Label: 7, Video: "c/v.mp4"}
				if tc.pad && tc.n < tc.t {
					want.Padded = tc.t - tc.n
				}
				if m.Time == nil || *m.Time != roundMicro(float64(want.Frame)/10) {
					t.Errorf("record %d time %v", i, m.Time)
				}
				m.Time = nil
				if m != want {
					t.Errorf("record %d meta %+v, want %+v", i, m, want)
				}
			}
		})
	}
	if _, _, _, err := clipRun(t, 0, 4, 4, true); !errors.Is(err, errNoFrames) {
		t.Errorf("no frames: %v", err)
	}
}

func TestMetaJSONSorted(t *testing.T) {
	tm := 1.5
	b, err := json.Marshal(recordMeta{File: "f_1.png", Frame: 3, Frames: 4, Label: 2, Padded: 1, Time: &tm, Video: "a/b"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"file":"f_1.png","frame":3,"frames":4,"label":2,"padded":1,"time":1.5,"video":"a/b"}`
	if string(b) != want {
		t.Fatalf("meta %s, want %s", b, want)
	}
}
