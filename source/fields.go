package source

import (
	"fmt"
	"strings"

	"github.com/packer-dev/packer/shard"
)

// FieldName is the field name of a member extension, column or key a user names with
// --fields: lower case, with every byte outside [a-z0-9_] replaced by '_' ("Caption" →
// "caption", "meta.json" → "meta_json"), at most 64 bytes. It is an error when the result is
// empty, too long, or a name the format reserves.
func FieldName(key string) (string, error) {
	b := []byte(strings.ToLower(key))
	for i, c := range b {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	name := string(b)
	switch {
	case name == "" || len(name) > 64:
		return "", fmt.Errorf("field %q: a field name is 1 to 64 bytes", key)
	case name == "sample" || name == "label" || name == "image":
		return "", fmt.Errorf("field %q: the name %q is the sample's own", key, name)
	}
	return name, nil
}

// ScalarField returns a field of the given kind (text, bytes or json).
func ScalarField(name string, kind shard.FieldKind) shard.Field {
	return shard.Field{Name: name, Kind: kind, Encoding: shard.EncodingRaw}
}

// CheckFieldNames refuses two requested fields that map to one name.
func CheckFieldNames(keys []string) ([]string, error) {
	names := make([]string, len(keys))
	seen := map[string]string{}
	for i, k := range keys {
		n, err := FieldName(k)
		if err != nil {
			return nil, err
		}
		if prev, ok := seen[n]; ok {
			return nil, fmt.Errorf("fields %q and %q both become the field %q", prev, k, n)
		}
		seen[n] = k
		names[i] = n
	}
	return names, nil
}
