package transforms

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestUnknownFilterIsAnError: a filter name that is not one of the six is an error wherever a
// transform is read (flags and manifests go through UnmarshalText; a Filter value out of
// range through Compile), never a silent fallback to bilinear. So are unknown layouts and
// element types.
func TestUnknownFilterIsAnError(t *testing.T) {
	for _, doc := range []string{
		`{"resize":8,"filter":"cubic","layout":"hwc","dtype":"uint8"}`,
		`{"resize":8,"filter":"Bilinear","layout":"hwc","dtype":"uint8"}`,
		`{"resize":8,"filter":"bilinear","layout":"nhwc","dtype":"uint8"}`,
		`{"resize":8,"filter":"bilinear","layout":"hwc","dtype":"int8"}`,
	} {
		var s Spec
		if err := json.Unmarshal([]byte(doc), &s); err == nil {
			t.Errorf("%s: decoded as %+v", doc, s)
		} else if !strings.Contains(err.Error(), "unknown") {
			t.Errorf("%s: %v, want an unknown filter, layout or dtype", doc, err)
		}
	}
	var f Filter
	if err := f.UnmarshalText([]byte("cubic")); err == nil {
		t.Errorf("filter cubic: parsed as %v", f)
	}
	for _, bad := range []Filter{-1, 7, 42} {
		if c, err := (Spec{Resize: 8, Filter: bad}).Compile(); err == nil {
			t.Errorf("filter %d: compiled, resampling with %v", int(bad), c.ResampleFilter())
		}
		if _, err := json.Marshal(Spec{Resize: 8, Filter: bad}); err == nil {
			t.Errorf("filter %d: marshalled", int(bad))
		}
	}
}

// TestSpecText: the typed filter, layout and dtype read and write the names manifests have
// always held, and a compiled spec marshals to the bytes the manifest's "transform" had.
func TestSpecText(t *testing.T) {
	for _, f := range []Filter{Nearest, Box, Bilinear, Hamming, Bicubic, Lanczos} {
		var g Filter
		if err := g.UnmarshalText([]byte(f.String())); err != nil || g != f || f.Pillow() != int(f-Nearest) {
			t.Errorf("%v: read back as %v (%v)", f, g, err)
		}
	}
	if Nearest.Pillow() != 0 || Lanczos.Pillow() != 1 || Bilinear.Pillow() != 2 || Bicubic.Pillow() != 3 || Box.Pillow() != 4 || Hamming.Pillow() != 5 {
		t.Error("Pillow numbers differ from Image.Resampling's")
	}
	for _, c := range []struct {
		spec Spec
		want string
	}{
		{Spec{}, `{"layout":"hwc","dtype":"uint8"}`},
		{Spec{Resize: 256, CropW: 224, CropH: 224}, `{"resize":256,"filter":"bilinear","crop_w":224,"crop_h":224,"layout":"hwc","dtype":"uint8"}`},
		{Spec{Width: 64, Height: 48, Filter: Lanczos, Layout: CHW, DType: Float16, Mean: []float64{0.5}, Std: []float64{0.25}, Fast: true},
			`{"width":64,"height":48,"filter":"lanczos","layout":"chw","dtype":"float16","mean":[0.5],"std":[0.25],"fast":true}`},
		{Spec{CropW: 8, CropH: 8, DType: Float32}, `{"crop_w":8,"crop_h":8,"layout":"hwc","dtype":"float32"}`},
	} {
		data, err := json.Marshal(c.spec.MustCompile().Spec())
		if err != nil || string(data) != c.want {
			t.Errorf("%+v: %s (%v), want %s", c.spec, data, err, c.want)
			continue
		}
		var back Spec
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatal(err)
		}
		again, _ := json.Marshal(back.MustCompile().Spec())
		if string(again) != c.want {
			t.Errorf("%s: read back and compiled, %s", c.want, again)
		}
	}
}
