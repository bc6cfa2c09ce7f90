package s3

// The checkpoint of a StreamStage in the bucket, in segments. The checkpoint object
// (CheckpointName) stays small: it names the build's owner and a short list of segment objects
// (segmentPrefix…), each immutable (written once, with If-None-Match: *) and named in the
// checkpoint with its size and SHA-256. A segment holds what changed since the segment before
// it: the uploads recorded or forgotten, and the journal as a delta (jdelta: the members of the
// journal's JSON that changed, the entries appended to its arrays), so that a checkpoint writes
// about what the build did since the last one, not everything it did. The segments are merged
// as a binary counter's digits are carried (a new segment of level 0 is merged with the last
// one while their levels are equal, the merged one a level higher), so that the checkpoint
// names at most about log2 of the checkpoints taken, a resume reads as many segments, and each
// entry is written again at most that many times: the bytes written for N checkpoints grow as
// N log N, where a checkpoint that rewrote the whole record made them grow as N².

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
)

// segmentPrefix begins the names of a checkpoint's segment objects.
const segmentPrefix = ".packer-checkpoint-"

// segmentName reports whether name (relative to the prefix) is a checkpoint's segment.
func segmentName(name string) bool {
	return strings.HasPrefix(name, segmentPrefix) && strings.HasSuffix(name, ".json") && !strings.Contains(name, "/")
}

// sameWriter reports whether the segments a and b were written by one build (their names
// carry its token).
func sameWriter(a, b string) bool {
	n := len(segmentPrefix) + 16
	return len(a) > n && len(b) > n && a[:n] == b[:n]
}

// segRef names a segment in the checkpoint object.
type segRef struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	Level  int    `json:"level"`
}

// segment is what a segment object holds: the change from the state the segments before it
// make to the state after it (the first segment's: from nothing).
type segment struct {
	URL      string                `json:"url"`
	Gen      string                `json:"generation"`
	Replaces string                `json:"replaces_etag,omitempty"`
	Sent     map[string]sentObject `json:"sent,omitempty"`   // uploads recorded (or recorded anew)
	Unsent   []string              `json:"unsent,omitempty"` // uploads forgotten, before Sent is applied
	Journal  jdelta                `json:"journal"`
}

// newSegment is the change from the uploads sent0 and journal j0 (the last checkpoint's) to st
// and j.
func newSegment(sent0 map[string]sentObject, j0 []byte, st streamState, j []byte) segment {
	seg := segment{URL: st.URL, Gen: st.Gen, Replaces: st.Replaces, Sent: map[string]sentObject{}, Journal: diffJSON(j0, j)}
	for name, o := range st.Sent {
		if old, ok := sent0[name]; !ok || old != o {
			seg.Sent[name] = o
		}
	}
	for name := range sent0 {
		if _, ok := st.Sent[name]; !ok {
			seg.Unsent = append(seg.Unsent, name)
		}
	}
	return seg
}

// apply applies the segment to the uploads st and the journal j.
func (seg segment) apply(st *streamState, j []byte) ([]byte, error) {
	st.URL, st.Gen, st.Replaces = seg.URL, seg.Gen, seg.Replaces
	if st.Sent == nil {
		st.Sent = map[string]sentObject{}
	}
	for _, name := range seg.Unsent {
		delete(st.Sent, name)
	}
	maps.Copy(st.Sent, seg.Sent)
	return seg.Journal.apply(j)
}

// compose is the segment that makes the change of a followed by b.
func composeSegments(a, b segment) (segment, error) {
	j, err := composeJSON(a.Journal, b.Journal)
	if err != nil {
		return segment{}, err
	}
	out := segment{URL: b.URL, Gen: b.Gen, Replaces: b.Replaces, Sent: map[string]sentObject{}, Journal: j}
	unsent := map[string]bool{}
	for _, name := range b.Unsent {
		unsent[name] = true
	}
	for name, o := range a.Sent {
		if !unsent[name] {
			out.Sent[name] = o
		}
	}
	maps.Copy(out.Sent, b.Sent)
	for _, name := range a.Unsent {
		unsent[name] = true
	}
	for name := range unsent {
		out.Unsent = append(out.Unsent, name)
	}
	return out, nil
}

// encodeSegment is the segment's object and its reference (name and level given).
func encodeSegment(seg segment, name string, level int) ([]byte, segRef, error) {
	data, err := json.Marshal(seg)
	if err != nil {
		return nil, segRef{}, err
	}
	sum := sha256.Sum256(data)
	return data, segRef{Name: name, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:]), Level: level}, nil
}

// Kinds of jdelta.
const (
	deltaSame = "same" // the value is unchanged
	deltaLit  = "lit"  // the value is Lit
	deltaApp  = "app"  // the value (an array) has the elements App appended
	deltaObj  = "obj"  // the value (an object) has the members Obj, in order, each changed by its delta
)

// jdelta is the change of a JSON value (the journal, or a member or element of it) from one
// checkpoint's bytes to the next's. The values are kept as bytes, so that the journal the
// deltas make is byte for byte the one the build wrote (its seal covers its bytes).
type jdelta struct {
	Kind string   `json:"k"`
	Lit  []byte   `json:"lit,omitempty"`
	App  [][]byte `json:"app,omitempty"`
	Obj  []member `json:"obj,omitempty"`
}

type member struct {
	Key   string `json:"key"`
	Delta jdelta `json:"d"`
}

// rawMember is a member of a JSON object as its bytes.
type rawMember struct {
	key   string
	value []byte
}

// diffJSON is the delta from prev to cur (prev nil: there was none).
func diffJSON(prev, cur []byte) jdelta {
	if prev != nil && bytes.Equal(prev, cur) {
		return jdelta{Kind: deltaSame}
	}
	if len(prev) > 0 && len(cur) > 0 {
		switch {
		case prev[0] == '{' && cur[0] == '{':
			pm, ok1 := splitObject(prev)
			cm, ok2 := splitObject(cur)
			if ok1 && ok2 {
				old := map[string][]byte{}
				for _, m := range pm {
					old[m.key] = m.value
				}
				d := jdelta{Kind: deltaObj, Obj: make([]member, 0, len(cm))}
				for _, m := range cm {
					d.Obj = append(d.Obj, member{Key: m.key, Delta: diffJSON(old[m.key], m.value)})
				}
				return d
			}
		case prev[0] == '[' && cur[0] == '[':
			pe, ok1 := splitArray(prev)
			ce, ok2 := splitArray(cur)
			if ok1 && ok2 && len(ce) >= len(pe) && prefixOf(pe, ce) {
				return jdelta{Kind: deltaApp, App: ce[len(pe):]}
			}
		}
	}
	return jdelta{Kind: deltaLit, Lit: bytes.Clone(cur)}
}

func prefixOf(p, s [][]byte) bool {
	for i := range p {
		if !bytes.Equal(p[i], s[i]) {
			return false
		}
	}
	return true
}

// apply is the value the delta makes of prev.
func (d jdelta) apply(prev []byte) ([]byte, error) {
	switch d.Kind {
	case deltaSame:
		return prev, nil
	case deltaLit:
		return d.Lit, nil
	case deltaApp:
		el, ok := splitArray(prev)
		if !ok {
			return nil, errors.New("a checkpoint segment appends to a value that is not an array")
		}
		return joinArray(append(el, d.App...)), nil
	case deltaObj:
		var pm []rawMember
		if prev != nil {
			var ok bool
			if pm, ok = splitObject(prev); !ok {
				return nil, errors.New("a checkpoint segment changes the members of a value that is not an object")
			}
		}
		old := map[string][]byte{}
		for _, m := range pm {
			old[m.key] = m.value
		}
		out := make([]rawMember, 0, len(d.Obj))
		for _, m := range d.Obj {
			v, err := m.Delta.apply(old[m.Key])
			if err != nil {
				return nil, err
			}
			out = append(out, rawMember{m.Key, v})
		}
		return joinObject(out), nil
	}
	return nil, fmt.Errorf("a checkpoint segment holds a change of unknown kind %q", d.Kind)
}

// composeJSON is the delta that makes the change of a followed by b.
func composeJSON(a, b jdelta) (jdelta, error) {
	switch {
	case b.Kind == deltaSame:
		return a, nil
	case b.Kind == deltaLit, a.Kind == deltaSame:
		return b, nil
	case a.Kind == deltaLit:
		v, err := b.apply(a.Lit)
		if err != nil {
			return jdelta{}, err
		}
		return jdelta{Kind: deltaLit, Lit: v}, nil
	case a.Kind == deltaApp && b.Kind == deltaApp:
		return jdelta{Kind: deltaApp, App: append(append([][]byte{}, a.App...), b.App...)}, nil
	case a.Kind == deltaObj && b.Kind == deltaObj:
		byKey := map[string]jdelta{}
		for _, m := range a.Obj {
			byKey[m.Key] = m.Delta
		}
		out := jdelta{Kind: deltaObj, Obj: make([]member, 0, len(b.Obj))}
		for _, m := range b.Obj {
			d := m.Delta
			if ad, ok := byKey[m.Key]; ok {
				var err error
				if d, err = composeJSON(ad, d); err != nil {
					return jdelta{}, err
				}
			}
			out.Obj = append(out.Obj, member{Key: m.Key, Delta: d})
		}
		return out, nil
	}
	return jdelta{}, fmt.Errorf("checkpoint segments of kinds %q and %q do not compose", a.Kind, b.Kind)
}

// splitObject is the members of the JSON object raw, when joinObject makes raw of them again
// (a compact object, as json.Marshal writes).
func splitObject(raw []byte) ([]rawMember, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	var out []rawMember
	for dec.More() {
		t, err := dec.Token()
		key, ok := t.(string)
		if err != nil || !ok {
			return nil, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		out = append(out, rawMember{key, v})
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') || dec.More() {
		return nil, false
	}
	return out, bytes.Equal(joinObject(out), raw)
}

func joinObject(ms []rawMember) []byte {
	out := []byte{'{'}
	for i, m := range ms {
		if i > 0 {
			out = append(out, ',')
		}
		k, _ := json.Marshal(m.key)
		out = append(append(append(out, k...), ':'), m.value...)
	}
	return append(out, '}')
}

// splitArray is the elements of the JSON array raw, when joinArray makes raw of them again.
func splitArray(raw []byte) ([][]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return nil, false
	}
	var out [][]byte
	for dec.More() {
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		out = append(out, v)
	}
	if t, err := dec.Token(); err != nil || t != json.Delim(']') || dec.More() {
		return nil, false
	}
	return out, bytes.Equal(joinArray(out), raw)
}

func joinArray(el [][]byte) []byte {
	return append(append([]byte{'['}, bytes.Join(el, []byte{','})...), ']')
}
