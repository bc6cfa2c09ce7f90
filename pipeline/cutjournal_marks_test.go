package pipeline

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/packer-dev/packer/output"
	"github.com/packer-dev/packer/shard"
)

// TestCutJournalBadMarks: a journal whose marks do not fit it (a mark of a negative skipped
// count or record count, one past the journal's own records or skipped inputs: a journal made
// by hand, or sealed again after an edit) is refused naming the journal, or leaves nothing
// to go on from; it never panics, and never cuts to a mark past the journal.
func TestCutJournalBadMarks(t *testing.T) {
	entry := output.Entry{CutState: func(state []byte, records int64) ([]byte, error) { return state, nil }}
	for _, tc := range []struct {
		name string
		m    mark
	}{
		{"negative skipped", mark{Records: 5, Skipped: -1}},
		{"negative inputs", mark{Records: 5, Inputs: -3}},
		{"records past the journal", mark{Records: 50, Inputs: 1}},
		{"inputs past the journal", mark{Records: 5, Inputs: 99}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			j := journal{Packer: "x", Inputs: 10, Records: 20, Skipped: []shard.Skipped{{Input: "a.jpg"}},
				Output: json.RawMessage(`{"files":[]}`), Marks: []mark{tc.m}}
			data, err := json.Marshal(j)
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, JournalName)
			if err := os.WriteFile(p, sealJournal(data), 0o644); err != nil {
				t.Fatal(err)
			}
			var info *ResumeInfo
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("CutJournal panicked: %v", r)
					}
				}()
				info, err = CutJournal(dir, entry, 100)
			}()
			if err != nil {
				if !errors.Is(err, ErrResume) {
					t.Fatalf("refused with %v; want an ErrResume naming the journal", err)
				}
				return
			}
			if info != nil {
				t.Fatalf("cut to the mark %+v of a journal of %d inputs and %d records: %+v; want it refused or nothing kept", tc.m, j.Inputs, j.Records, info)
			}
		})
	}
}
