package verify

import "testing"

// TestFaultString: a fault in a shard names its records in the dataset's numbering, and in
// the shard's only where the two differ (not in the first shard, where they agree).
func TestFaultString(t *testing.T) {
	for _, c := range []struct {
		f    Fault
		want string
	}{
		{Fault{File: "shard-00003.pks", Kind: KindChecksum, First: 1200, Count: 100, ShardFirst: 200, Offset: -1, Message: "m"},
			"shard-00003.pks: records 1200-1299 (shard-00003.pks records 200-299): checksum: m"},
		{Fault{File: "shard-00000.pks", Kind: KindChecksum, First: 5, Count: 10, ShardFirst: 5, Offset: -1, Message: "m"},
			"shard-00000.pks: records 5-14: checksum: m"},
		{Fault{File: "shard-00000.pks", Kind: KindChecksum, First: 7, Count: 1, ShardFirst: 7, Offset: 64, Message: "m"},
			"shard-00000.pks: record 7 at offset 64: checksum: m"},
		{Fault{File: "shard-00001.pks", Kind: KindStructure, First: 9, Count: 1, ShardFirst: 0, Offset: -1, Message: "m"},
			"shard-00001.pks: record 9 (shard-00001.pks record 0): structure: m"},
		{Fault{File: "images.npy", Kind: KindStructure, First: 3, Count: 2, ShardFirst: 3, Offset: -1, Message: "m"},
			"images.npy: records 3-4: structure: m"},
		{Fault{File: "manifest.json", Kind: KindManifest, First: -1, ShardFirst: -1, Offset: -1, Message: "m"},
			"manifest.json: manifest: m"},
	} {
		if got := c.f.String(); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
	}
}
