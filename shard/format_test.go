package shard

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The golden shard: two records of shape [2, 2, 1] uint8 with one aux column. Its bytes were
// checked against an independent Python computation of FORMAT.md (CRC-32C included).
var goldenOptions = WriterOptions{
	Sample: SampleSpec{Shape: []int{2, 2, 1}, DType: Uint8, Layout: "hwc"},
	Label:  LabelSpec{DType: "int64", Aux: []string{"coarse_label"}},
	Meta:   map[string]any{"dataset": map[string]any{"name": "golden"}},
}

var goldenRecords = []testRecord{
	{data: []byte{1, 2, 3, 4}, label: 3, aux: []int64{1}},
	{data: []byte{5, 6, 7, 8}, label: -1, aux: []int64{2}},
}

const goldenMeta = `{"block_records":262144,"dataset":{"name":"golden"},"label":{"aux":["coarse_label"],"dtype":"int64"},` +
	`"sample":{"dtype":"uint8","layout":"hwc","shape":[2,2,1]},"shard":{"index":0}}`

// goldenShard lists the non-zero regions of the golden file by offset; every other byte of its
// goldenSize bytes is zero.
const goldenSize = 12288

var goldenShard = []struct {
	off   int
	bytes []byte
}{
	{0, []byte("PKSHARD\x00" + // magic
		"\x01\x00" + // version 1
		"\x00\x00" + // flags
		"\xb3\x00\x00\x00" + // meta_len 179
		"\x91\x7f\xf9\xce" + // header_crc
		"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" + // reserved
		goldenMeta)},
	{4096, []byte{1, 2, 3, 4, 5, 6, 7, 8}}, // data_offset: the two records
	{8192, []byte{ // index_offset
		0x03, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // labels 3, -1
		0x01, 0, 0, 0, 0, 0, 0, 0, 0x02, 0, 0, 0, 0, 0, 0, 0, // aux 1, 2
		0x81, 0x1f, 0x89, 0x46, // crcs[0]
	}},
	{goldenSize - FooterSize, []byte{ // footer
		0x02, 0, 0, 0, 0, 0, 0, 0, // record_count 2
		0x04, 0, 0, 0, 0, 0, 0, 0, // record_size 4
		0x00, 0x10, 0, 0, 0, 0, 0, 0, // data_offset 4096
		0x08, 0, 0, 0, 0, 0, 0, 0, // data_len 8
		0x00, 0x20, 0, 0, 0, 0, 0, 0, // index_offset 8192
		0x24, 0, 0, 0, 0, 0, 0, 0, // index_len 36
		0x00, 0x00, 0x04, 0x00, // block_records 262144
		0x8f, 0x81, 0xa8, 0x29, // index_crc
		0x17, 0x4d, 0x60, 0xb3, // footer_crc
		'P', 'K', 'S', '1', // trailer magic
	}},
}

func goldenBytes() []byte {
	b := make([]byte, goldenSize)
	for _, seg := range goldenShard {
		copy(b[seg.off:], seg.bytes)
	}
	return b
}

func TestGolden(t *testing.T) {
	want := goldenBytes()
	got := buildShard(t, goldenOptions, goldenRecords)
	if *update {
		writeTestdata(t, "golden.pks", want)
		writeTestdata(t, "valid-var-meta.pks", varShard(t))
	}
	if !bytes.Equal(got, want) {
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				t.Fatalf("writer output differs from the golden shard at offset %d (len %d, want %d)", i, len(got), len(want))
			}
		}
		t.Fatalf("writer output has %d bytes, want %d", len(got), len(want))
	}
	r, err := NewReader(bytes.NewReader(want), int64(len(want)), "golden")
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, r, goldenRecords)
	if string(r.MetaJSON()) != goldenMeta {
		t.Errorf("meta = %s", r.MetaJSON())
	}
}

// TestFormatDoc checks FORMAT.md's tables and named values against the constants.
func TestFormatDoc(t *testing.T) {
	doc, err := os.ReadFile("FORMAT.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	section := func(title string) string {
		i := strings.Index(text, "\n## "+title+"\n")
		if i < 0 {
			t.Fatalf("FORMAT.md has no section %q", title)
		}
		s := text[i+len(title)+5:]
		if j := strings.Index(s, "\n## "); j >= 0 {
			s = s[:j]
		}
		return s
	}
	// rows returns the table rows "| a | b | c | ..." of s as trimmed cells.
	rows := func(s string) [][]string {
		var out [][]string
		for _, line := range strings.Split(s, "\n") {
			if !strings.HasPrefix(line, "|") || strings.HasPrefix(line, "|--") || strings.HasPrefix(line, "|-") {
				continue
			}
			cells := strings.Split(strings.Trim(line, "|"), "|")
			for i := range cells {
				cells[i] = strings.TrimSpace(cells[i])
			}
			out = append(out, cells)
		}
		return out
	}
	atoi := func(s string) int {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("FORMAT.md: %q is not a number", s)
		}
		return n
	}
	checkLayout := func(title string, fields map[string]int, total int) {
		end := 0
		seen := map[string]bool{}
		for _, row := range rows(section(title))[1:] {
			if len(row) < 3 {
				continue
			}
			if _, err := strconv.Atoi(row[0]); err != nil {
				continue // another table of the section (flags)
			}
			off, name := atoi(row[0]), row[2]
			if off != end {
				t.Errorf("%s: field %s at offset %d, previous field ends at %d", title, name, off, end)
			}
			if want, ok := fields[name]; ok {
				seen[name] = true
				if off != want {
					t.Errorf("%s: FORMAT.md puts %s at %d, the code at %d", title, name, off, want)
				}
			}
			if name == "meta" {
				break
			}
			end = off + atoi(row[1])
		}
		for name := range fields {
			if !seen[name] {
				t.Errorf("%s: FORMAT.md has no field %s", title, name)
			}
		}
		if end != total {
			t.Errorf("%s: FORMAT.md's fields take %d bytes, the code says %d", title, end, total)
		}
	}
	checkLayout("Header", map[string]int{"magic": hdrMagicOff, "version": hdrVersionOff, "flags": hdrFlagsOff,
		"meta_len": hdrMetaLenOff, "header_crc": hdrCRCOff, "reserved": hdrCRCOff + 4, "meta": HeaderFixed}, HeaderFixed)
	checkLayout("Footer", map[string]int{"record_count": ftRecordCountOff, "record_size": ftRecordSizeOff,
		"data_offset": ftDataOffsetOff, "data_len": ftDataLenOff, "index_offset": ftIndexOffsetOff,
		"index_len": ftIndexLenOff, "block_records": ftBlockRecordsOff, "index_crc": ftIndexCRCOff,
		"footer_crc": ftFooterCRCOff, "trailer magic": ftMagicOff}, FooterSize)

	// Named values written as "`Name` = value" or "value (`Name`)".
	mustHave := []string{
		"Format version: **" + strconv.Itoa(Version) + "**",
		"`Version` = " + strconv.Itoa(Version),
		"`MinVersion` = " + strconv.Itoa(MinVersion),
		"`HeaderFixed` = " + strconv.Itoa(HeaderFixed) + " bytes",
		"`FooterSize` = " + strconv.Itoa(FooterSize) + " bytes",
		"`Align` = " + strconv.Itoa(Align),
		"`Align` (" + strconv.Itoa(Align) + " bytes)",
		"`BlockTarget` = 1 MiB",
		"`" + strings.ReplaceAll(HeaderMagic, "\x00", `\x00`) + "` (`HeaderMagic`)",
		"`" + FooterMagic + "` (`FooterMagic`)",
	}
	for _, s := range mustHave {
		if !strings.Contains(text, s) {
			t.Errorf("FORMAT.md does not say %q", s)
		}
	}
	// The manifest's file entry: the "Dataset" section names each member a shard's entry has,
	// by its JSON name; index_sha256 is defined there as the SHA-256 of the index section.
	ft := reflect.TypeFor[FileEntry]()
	for i := range ft.NumField() {
		name, _, _ := strings.Cut(ft.Field(i).Tag.Get("json"), ",")
		if name == "records" || name == "first_record" {
			continue // named in the README's Output section
		}
		if !strings.Contains(section("Dataset"), "`"+name+"`") {
			t.Errorf("FORMAT.md's Dataset section does not name the manifest file entry's %q", name)
		}
	}
	if !strings.Contains(section("Dataset"), "`index_sha256`: the lower-case hex SHA-256 of the shard's index section, the\n`index_len` bytes at `index_offset`") {
		t.Errorf("FORMAT.md's Dataset section does not define index_sha256 as the SHA-256 of the index section")
	}
	opts := WriterOptions{Sample: SampleSpec{Shape: []int{-1, 2}, DType: Uint8, Layout: "hwc"}, Label: LabelSpec{DType: "int64"}, HasMeta: true}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := w.Append(bytes.Repeat([]byte{byte(i)}, 2*(i+1)), int64(i), nil, []byte(`{"i":1}`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	file := buf.Bytes()
	foot := file[len(file)-FooterSize:]
	io, il := le.Uint64(foot[ftIndexOffsetOff:]), le.Uint64(foot[ftIndexLenOff:])
	sum := sha256.Sum256(file[io : io+il])
	r, err := NewReader(bytes.NewReader(file), int64(len(file)), "t")
	if err != nil {
		t.Fatal(err)
	}
	if want := hex.EncodeToString(sum[:]); w.IndexSHA256() != want || r.IndexSHA256() != want {
		t.Errorf("index_sha256: writer %s, reader %s, FORMAT.md's definition %s", w.IndexSHA256(), r.IndexSHA256(), want)
	}

	if BlockTarget != 1<<20 {
		t.Errorf("BlockTarget = %d", BlockTarget)
	}

	// Flags table: | bit | `Name` | meaning |.
	flags := map[string]int{"`FlagVarSize`": FlagVarSize, "`FlagMeta`": FlagMeta, "`FlagShapes`": FlagShapes, "`FlagFields`": FlagFields}
	nflags := 0
	for _, row := range rows(section("Header")) {
		if want, ok := flags[row[1]]; ok {
			nflags++
			if 1<<atoi(row[0]) != want {
				t.Errorf("FORMAT.md: %s is bit %s, the code says %#x", row[1], row[0], want)
			}
		}
	}
	if nflags != len(flags) || knownFlags != FlagVarSize|FlagMeta|FlagShapes|FlagFields || knownFlagsV2 != FlagVarSize|FlagMeta|FlagShapes || knownFlagsV1 != FlagVarSize|FlagMeta {
		t.Errorf("FORMAT.md's flags table does not match the code")
	}

	// Limits table: | `Name` | value |, values as "1 MiB", "2^32 - 1", "16".
	limits := map[string]int64{"`MaxMetaLen`": MaxMetaLen, "`MaxRecords`": MaxRecords, "`MaxRecordSize`": MaxRecordSize, "`MaxAux`": MaxAux, "`MaxFields`": MaxFields}
	units := map[string]int64{"": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
	valueRE := regexp.MustCompile(`^(\d+)(?:\^(\d+))?(?: - (\d+))? ?(KiB|MiB|GiB)?$`)
	nlimits := 0
	for _, row := range rows(section("Limits")) {
		want, ok := limits[row[0]]
		if !ok {
			continue
		}
		nlimits++
		m := valueRE.FindStringSubmatch(row[1])
		if m == nil {
			t.Errorf("FORMAT.md: cannot parse limit %s = %q", row[0], row[1])
			continue
		}
		v, _ := strconv.ParseInt(m[1], 10, 64)
		if m[2] != "" {
			e, _ := strconv.Atoi(m[2])
			v = 1
			for range e {
				v *= int64(atoi(m[1]))
			}
		}
		if m[3] != "" {
			s, _ := strconv.ParseInt(m[3], 10, 64)
			v -= s
		}
		v *= units[m[4]]
		if v != want {
			t.Errorf("FORMAT.md: %s = %d, the code says %d", row[0], v, want)
		}
	}
	if nlimits != len(limits) {
		t.Errorf("FORMAT.md's limits table has %d of the %d limits", nlimits, len(limits))
	}
}
