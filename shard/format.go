package shard

import (
	"encoding/binary"
	"hash/crc32"
)

// These constants are part of the wire format and must not be changed.
// shard/FORMAT.md is the normative description; format_test.go checks that the two agree.
const (
	// HeaderMagic opens every shard file.
	HeaderMagic = "PKSHARD\x00"
	// FooterMagic closes every shard file.
	FooterMagic = "PKS1"
	// Version is the newest shard format version this package knows. It reads versions 1 to
	// Version; it writes the lowest version a shard needs (1 unless FlagShapes is set, 2 with
	// FlagShapes, 3 only when the shard has fields, 4 only for a shard of a dataset cut at fixed
	// input positions, whose header names its chunk and piece: WriterOptions.Cut).
	Version = 4
	// CutVersion is the version of every shard of a dataset cut at fixed input positions
	// (WriterOptions.Cut), whatever its layout version.
	CutVersion = 4
	// MinVersion is the oldest shard format version this package reads.
	MinVersion = 1

	// Align is the alignment of every section and of the file size.
	Align = 4096
	// HeaderFixed is the size of the fixed part of the header, before the meta JSON.
	HeaderFixed = 32
	// FooterSize is the size of the footer that ends the file.
	FooterSize = 64

	// FlagVarSize marks shards whose records have different sizes.
	FlagVarSize = 1 << 0
	// FlagMeta marks shards that carry per-record metadata.
	FlagMeta = 1 << 1
	// FlagShapes marks variable-size shards whose index stores each record's shape (the values
	// of the sample shape's -1 dimensions). Defined in version 2.
	FlagShapes = 1 << 2
	// FlagFields marks shards whose records carry fields besides the sample (the meta key
	// "fields" and the index part fieldlens). Defined in version 3.
	FlagFields = 1 << 3
	// knownFlagsV1 is every flag version 1 defines.
	knownFlagsV1 = FlagVarSize | FlagMeta
	// knownFlagsV2 is every flag version 2 defines.
	knownFlagsV2 = FlagVarSize | FlagMeta | FlagShapes
	// knownFlags is every flag versions 3 and 4 define.
	knownFlags = FlagVarSize | FlagMeta | FlagShapes | FlagFields

	// BlockTarget is the byte size the writer aims for per checksum block.
	BlockTarget = 1 << 20

	// MaxMetaLen bounds the header's meta JSON.
	MaxMetaLen = 1 << 20
	// MaxRecords bounds the record count of one shard.
	MaxRecords = 1<<32 - 1
	// MaxRecordSize bounds the size of one record.
	MaxRecordSize = 1 << 30
	// MaxAux bounds the number of auxiliary label columns.
	MaxAux = 16
	// MaxFields bounds the number of fields of a sample schema (version 3).
	MaxFields = 64
)

// Header field offsets (bytes from the start of the file).
const (
	hdrMagicOff   = 0
	hdrVersionOff = 8
	hdrFlagsOff   = 10
	hdrMetaLenOff = 12
	hdrCRCOff     = 16
)

// Footer field offsets (bytes from the start of the footer).
const (
	ftRecordCountOff  = 0
	ftRecordSizeOff   = 8
	ftDataOffsetOff   = 16
	ftDataLenOff      = 24
	ftIndexOffsetOff  = 32
	ftIndexLenOff     = 40
	ftBlockRecordsOff = 48
	ftIndexCRCOff     = 52
	ftFooterCRCOff    = 56
	ftMagicOff        = 60
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crc32c returns the CRC-32C of b.
func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// crc32cUpdate extends crc with b.
func crc32cUpdate(crc uint32, b []byte) uint32 { return crc32.Update(crc, castagnoli, b) }

// alignUp rounds x up to a multiple of Align.
func alignUp(x int64) int64 { return x + (-x & (Align - 1)) }

// le is the byte order of every integer in a shard.
var le = binary.LittleEndian
