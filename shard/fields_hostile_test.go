package shard

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestFieldsHostileShards: damaged version-3 shards whose checksums were made whole again (only
// the format's own rules can catch them) are refused at open by NewReader and reported by Scan,
// as format errors naming the record where there is one.
func TestFieldsHostileShards(t *testing.T) {
	clean := buildFieldsShard(t, fieldsOpts(true), testFieldsRecords(5, true))
	r, err := NewReader(bytes.NewReader(clean), int64(len(clean)), "clean.pks")
	if err != nil {
		t.Fatal(err)
	}
	flen := func(i, k int) int { return int(r.ft.indexOffset + r.l.fieldLens + int64(i*7+k)*4) }
	meta := func(old, new string) func(b []byte) {
		return func(b []byte) {
			at := bytes.Index(b[:HeaderFixed+int(r.h.metaLen)], []byte(old))
			if at < 0 || len(old) != len(new) {
				t.Fatalf("%q not in the meta JSON", old)
			}
			copy(b[at:], new)
			fixHeaderCRC(b)
		}
	}
	for _, c := range []struct {
		name   string
		damage func(b []byte)
		record int64
		want   string
	}{
		{"fieldlens past the record", func(b []byte) { le.PutUint32(b[flen(2, 6):], 1<<30); fixIndexCRC(b) }, 2, "field lengths sum to"},
		{"fieldlens moves the sample", func(b []byte) {
			le.PutUint32(b[flen(3, 4):], le.Uint32(b[flen(3, 4):])+1) // the bytes field eats a byte of the caption
			le.PutUint32(b[flen(3, 0):], le.Uint32(b[flen(3, 0):])-1)
			le.PutUint32(b[flen(3, 6):], le.Uint32(b[flen(3, 6):])+3) // the mask eats the sample's last pixel
			fixIndexCRC(b)
		}, 3, "holds"},
		{"mask of another size", func(b []byte) {
			le.PutUint32(b[flen(1, 6):], le.Uint32(b[flen(1, 6):])-1)
			le.PutUint32(b[flen(1, 5):], le.Uint32(b[flen(1, 5):])+1)
			fixIndexCRC(b)
		}, 1, `field "mask"`},
		{"rows_of broken", func(b []byte) {
			le.PutUint32(b[flen(2, 2):], le.Uint32(b[flen(2, 2):])-8) // one category less than boxes
			le.PutUint32(b[flen(2, 4):], le.Uint32(b[flen(2, 4):])+8)
			fixIndexCRC(b)
		}, 2, `field "category" has 1 rows, its rows_of field "boxes" has 2`},
		{"unknown encoding", meta(`"encoding":"raw"`, `"encoding":"zzz"`), -1, `encoding "zzz"`},
		{"-1 in a later dimension", meta(`[-1,4]`, `[4,-1]`), -1, `dimension 1 is -1`},
		{"unknown field member", meta(`"geometry":"boxes"`, `"geometrx":"boxes"`), -1, `unknown field "geometrx"`},
		{"bad field name", meta(`"name":"caption"`, `"name":"Caption"`), -1, `name "Caption"`},
		{"no fields flag", func(b []byte) { b[hdrFlagsOff] &^= FlagFields; fixHeaderCRC(b) }, -1, "without the fields and variable-size flags"},
		{"fields flag in version 2", func(b []byte) { b[hdrVersionOff] = 2; fixHeaderCRC(b) }, -1, "unknown flags 0x0008 for version 2"},
	} {
		b := bytes.Clone(clean)
		c.damage(b)
		_, err := NewReader(bytes.NewReader(b), int64(len(b)), "hostile.pks")
		var ce *CorruptionError
		if !errors.As(err, &ce) || !errors.Is(err, ErrFormat) || ce.Record != c.record || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: NewReader = %v, want a format error at record %d saying %q", c.name, err, c.record, c.want)
			continue
		}
		var faults []*CorruptionError
		if err := Scan(bytes.NewReader(b), int64(len(b)), "hostile.pks", func(e *CorruptionError) { faults = append(faults, e) }); err != nil || len(faults) == 0 {
			t.Errorf("%s: Scan found nothing (%v)", c.name, err)
		}
	}
}

// TestFieldsLargeJSON: a JSON value of 100 MB is written, read back and checked in time linear
// in its size, and a record past MaxRecordSize is refused naming the field.
func TestFieldsLargeJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and reads 100 MB")
	}
	const n = 100 << 20
	v := make([]byte, 0, n)
	v = append(v, '[')
	for len(v) < n-8 {
		v = append(v, "12345,"...)
	}
	v = append(v, "0]"...)
	opts := WriterOptions{Sample: SampleSpec{Shape: []int{2}, DType: Uint8, Layout: "hwc"},
		Fields: []Field{{Name: "doc", Kind: KindJSON, Encoding: EncodingRaw}, {Name: "note", Kind: KindText, Encoding: EncodingRaw}}}
	start := time.Now()
	var buf bytes.Buffer
	buf.Grow(n + 3*Align)
	w, err := NewWriter(&buf, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AppendFields([]byte{1, 2}, nil, 0, nil, nil, [][]byte{v, []byte("big")}); err != nil {
		t.Fatal(err)
	}
	big := [][]byte{v, make([]byte, MaxRecordSize-len(v))}
	if err := w.AppendFields([]byte{1, 2}, nil, 0, nil, nil, big); err == nil || !strings.Contains(err.Error(), `more than the record size limit 1073741824 with field "note"`) {
		t.Fatalf("a record past MaxRecordSize: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	r, err := NewReader(bytes.NewReader(b), int64(len(b)), "big.pks")
	if err != nil {
		t.Fatal(err)
	}
	_, fields, err := r.RecordFields(0)
	if err != nil || !bytes.Equal(fields[0], v) || string(fields[1]) != "big" {
		t.Fatalf("read back: %v", err)
	}
	if err := r.CheckFieldValues(func(e *CorruptionError) { t.Errorf("CheckFieldValues: %v", e) }); err != nil {
		t.Fatal(err)
	}
	// Linear work is well under a second a pass on any machine this runs on; a quadratic pass
	// over 100 MB would take hours.
	if d := time.Since(start); d > 60*time.Second {
		t.Fatalf("100 MB JSON value took %v", d)
	}
}
