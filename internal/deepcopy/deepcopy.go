// Package deepcopy copies the small Kubernetes objects that the runner's and
// the operator's own clients decode into (their DeepCopyObject methods).
package deepcopy

import "encoding/json"

// JSON deep-copies an object by a JSON round trip: these objects are small
// and copied rarely, so a round trip beats hand-written copies of each type
// that would have to be kept in step with its fields.
func JSON[T any](in *T) *T {
	out := new(T)
	b, err := json.Marshal(in)
	if err == nil {
		err = json.Unmarshal(b, out)
	}
	if err != nil {
		panic("deep copy: " + err.Error()) // these types always round-trip
	}
	return out
}
