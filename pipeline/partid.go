package pipeline

// Part identity: what a retry may replace. A finished part records its identity in its
// manifest (shard.PartInfo: index, count, total_inputs, listing_sha256, content_sha256), and an
// interrupted one in its checkpoint's journal (the part's index, count and slice). A build (or a
// merge) over OUT replaces a part there, finished or interrupted, only when it builds the same
// part: the same index and count, checked before anything is touched, and the same listing and
// content, checked when the enumeration ends, before the new part is published. Anything else is
// refused with ErrPartIdentity, naming both parts, and the part at OUT is left as it was: a
// retry given a wrong index or count, or run over a changed source, cannot destroy finished
// work.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/packer-dev/packer/internal/humanize"
	"github.com/packer-dev/packer/shard"
)

// ErrPartIdentity is returned when a build or merge would replace a part, finished or
// interrupted, by anything but a build of the same part.
var ErrPartIdentity = errors.New("a part is replaced only by a build of the same part (the same index, count and listing)")

// recordedPart is the identity the manifest at dir/manifest.json records, or nil when there is
// none to read (no manifest, not a part, unreadable). The seal is not checked: a part whose
// files were damaged keeps its identity, and is replaced by a retry of the same part.
func recordedPart(dir string) *shard.PartInfo {
	p := filepath.Join(dir, shard.ManifestName)
	st, err := os.Lstat(p)
	if err != nil || !st.Mode().IsRegular() || st.Size() > shard.MaxManifestSize {
		return nil
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil
	}
	return ManifestPart(data)
}

// ManifestPart is the part a manifest's bytes record, or nil (not a part, not JSON). The seal is
// not checked, as for recordedPart.
func ManifestPart(data []byte) *shard.PartInfo {
	var m struct {
		Part *shard.PartInfo `json:"part"`
	}
	if json.Unmarshal(data, &m) != nil {
		return nil
	}
	return m.Part
}

// checkpointedPart is the part index and count the journal of an interrupted build in staging
// records, and whether it records a part. A missing, damaged or unsealed journal records none
// (a resume refuses it on its own).
func checkpointedPart(staging string) (index, count int, ok bool) {
	p := filepath.Join(staging, JournalName)
	st, err := os.Lstat(p)
	if err != nil || !st.Mode().IsRegular() || st.Size() > maxJournalSize {
		return 0, 0, false
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return 0, 0, false
	}
	body, err := checkJournalSeal(p, data)
	if err != nil {
		return 0, 0, false
	}
	var j struct {
		Options struct {
			Part *struct {
				Index int `json:"index"`
				Count int `json:"count"`
			} `json:"part"`
		} `json:"options"`
	}
	if json.NewDecoder(bytes.NewReader(body)).Decode(&j) != nil || j.Options.Part == nil {
		return 0, 0, false
	}
	return j.Options.Part.Index, j.Options.Part.Count, true
}

// describeBuild names what a build or merge writes: its part, or a whole dataset.
func describeBuild(p *Part) string {
	if p == nil {
		return "this command writes a whole dataset, not a part"
	}
	return fmt.Sprintf("this build is part %d/%d", p.Index, p.Count)
}

// describePart names a recorded part with what identifies it.
func describePart(pi *shard.PartInfo) string {
	return fmt.Sprintf("part %d/%d of a listing of %s (listing_sha256 %s)", pi.Index, pi.Count, humanize.Count(pi.TotalInputs, "input"), pi.Listing)
}

// partKept is the advice of a refusal to replace the part at what (OUT, or its staging folder).
func partKept(what string, index, count int) string {
	return fmt.Sprintf("%s is left as it was: retry it as part %d/%d of the same source or plan, or remove it yourself if it is to go", what, index, count)
}

// checkStagedPart refuses to discard or resume the checkpoint of an interrupted part in staging
// unless p is the same part (index and count): with --resume or without, --force or not.
func checkStagedPart(staging string, p *Part) error {
	i, n, ok := checkpointedPart(staging)
	if !ok || p != nil && p.Index == i && p.Count == n {
		return nil
	}
	return fmt.Errorf("%s holds the checkpoint of an interrupted part %d/%d; %s: %w; %s",
		staging, i, n, describeBuild(p), ErrPartIdentity, partKept(staging, i, n))
}

// checkReplacedPart refuses to replace the part recorded at out (a dataset that --force may
// otherwise replace) unless p is the same part: the same index and count here, the same
// listing when the enumeration ends (partRange.replacing).
func checkReplacedPart(out string, p *Part) error {
	return CheckPartReplace(out, recordedPart(out), p)
}

// CheckPartReplace refuses to replace old, the part recorded at at (nil: none), unless p is the
// same part by index and count (nil: a whole dataset, which replaces no part). The listing and
// content are CheckSamePart's, once known. An object-store OUT is checked with it by the
// command, which reads the manifest there.
func CheckPartReplace(at string, old *shard.PartInfo, p *Part) error {
	if old == nil || p != nil && p.Index == old.Index && p.Count == old.Count {
		return nil
	}
	return fmt.Errorf("%s holds %s; %s: %w; %s", at, describePart(old), describeBuild(p), ErrPartIdentity, partKept(at, old.Index, old.Count))
}

// CheckSamePart refuses to replace old, the part recorded at at, by built, a part of another
// listing (by size; by digest where built has one) or content (where both record one).
func CheckSamePart(at string, old, built *shard.PartInfo) error {
	var this string
	switch {
	case built.TotalInputs != old.TotalInputs || built.Listing != "" && built.Listing != old.Listing:
		this = "of a listing of " + humanize.Count(built.TotalInputs, "input")
		if built.Listing != "" {
			this += fmt.Sprintf(" (listing_sha256 %s)", built.Listing)
		}
	case built.Content != "" && old.Content != "" && built.Content != old.Content:
		this = fmt.Sprintf("of the same listing with other input files (content_sha256 %s; the part at %s has %s: the source was copied or changed since)", built.Content, at, old.Content)
	default:
		return nil
	}
	return fmt.Errorf("%s holds %s; this build is part %d/%d %s: %w; %s",
		at, describePart(old), built.Index, built.Count, this, ErrPartIdentity, partKept(at, old.Index, old.Count))
}

// replacing makes the part check, as it sees the listing, that it is the part old recorded at
// out, which it replaces: a listing of another size is refused now, before anything is decoded,
// and another listing or content digest when the enumeration ends (done), before the new part
// is published.
func (r *partRange) replacing(out string, old *shard.PartInfo) error {
	r.old, r.oldAt = old, out
	return CheckSamePart(out, old, &shard.PartInfo{Index: r.p.Index, Count: r.p.Count, TotalInputs: r.total})
}

// checkOld is done's check against the part it replaces, if any.
func (r *partRange) checkOld() error {
	if r.old == nil {
		return nil
	}
	return CheckSamePart(r.oldAt, r.old, r.info(0))
}
