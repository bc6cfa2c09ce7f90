package shard

import (
	"strings"
	"testing"
)

// TestNpyDamagedLabels: labels.npy carries no checksum, and a changed label was read as the
// record's label. The labels are checked against the manifest's classes and class_counts when
// the dataset's array is opened: a label outside the classes, or one moved from a class to
// another, is refused naming labels.npy, through Label, Record and the Loader alike.
func TestNpyDamagedLabels(t *testing.T) {
	hdr := "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }"
	for name, tc := range map[string]struct {
		labels []int64
		want   string
	}{
		"moved":    {[]int64{2, 0, 0}, "class_counts"},
		"outside":  {[]int64{2, 0, 7}, "outside"},
		"negative": {[]int64{2, -1, 1}, "outside"},
	} {
		dir := writeNpyDataset(t, map[string][]byte{"labels.npy": npyFile(hdr, int64s(tc.labels...))})
		for _, read := range []string{"label", "record", "loader"} {
			d, err := OpenDataset(dir)
			if err == nil {
				switch read {
				case "label":
					_, err = d.Label(0)
				case "record":
					_, err = d.Record(0)
				default:
					var l *Loader
					if l, err = d.NewLoader(LoaderOptions{BatchSize: 3}); err == nil {
						for l.Next() {
						}
						err = l.Err()
						l.Close()
					}
				}
				d.Close()
			}
			if err == nil || !strings.Contains(err.Error(), "labels.npy") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s, %s: %v, want an error naming labels.npy and %q", name, read, err, tc.want)
			}
		}
	}
}
