package backends

import (
	"bytes"
	"encoding/json"
	"sort"
)

// PropertyObject reads jobproperties, which must be a JSON object, and
// renames each key found in aliases to its canonical name, so that a
// backend can accept the keys of IBM's Bridge Operator samples beside its
// own. Two keys that name the same property are refused. vals maps canonical
// names to values; given maps them back to the key as the user wrote it,
// for messages. Empty jobproperties give empty maps.
func PropertyObject(raw json.RawMessage, aliases map[string]string) (vals map[string]json.RawMessage, given map[string]string, err error) {
	vals, given = map[string]json.RawMessage{}, map[string]string{}
	if len(bytes.TrimSpace(raw)) == 0 {
		return vals, given, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, nil, Invalid("jobproperties", "not a JSON object: %v", err)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the same message for the same input
	for _, k := range keys {
		c := k
		if a, ok := aliases[k]; ok {
			c = a
		}
		if prev, dup := given[c]; dup {
			return nil, nil, Invalid("jobproperties", "%q and %q set the same thing; keep one", prev, k)
		}
		given[c], vals[c] = k, m[k]
	}
	return vals, given, nil
}

// SortedKeys returns m's keys in order.
func SortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
