package record

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/bridge-runner/bridge-runner/backends"
)

// FuzzCheckKeys: any record is either accepted, with every key ours, IBM's
// or state, or refused as invalid input naming one of its own keys.
func FuzzCheckKeys(f *testing.F) {
	for _, d := range []map[string]string{
		{"jobProperties": `{"Queue":"a"}`, "updateinterval": "20", "imagepullpolicy": "Always", "jobdata.jobScript": "x"},
		{"jobproperties": "{}", "jobProperties": "{ }", "resourceURL": "https://h/platform/"},
		{"jobproperites": "{}"},
		{"status.whatever": "x", "jobStatus": "KILL", "kill": "true", "id": "1"},
		{"s3storage.endpoint": "h:9000", "s3.endpoint": "other:9000"},
	} {
		b, _ := json.Marshal(d)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var d map[string]string
		if json.Unmarshal(raw, &d) != nil {
			return
		}
		rep, err := CheckKeys(d)
		if err != nil {
			var fe *backends.FieldError
			if !errors.Is(err, backends.ErrInvalid) || !errors.As(err, &fe) {
				t.Fatalf("not an invalid-input error naming a field: %v", err)
			}
			if _, ok := d[fe.Field]; !ok {
				t.Fatalf("the error names %q, which is not a key of the record", fe.Field)
			}
			return
		}
		for k := range d {
			if !isOurKey(k) && ibmKeyAliases[k] == "" && ibmInertKeys[k] == "" {
				t.Fatalf("unknown key %q accepted", k)
			}
		}
		// An accepted record reads every field from one of its spellings.
		s := SpecFromData(d)
		for _, fl := range Fields {
			v := fl.Get(&s)
			if v == "" || v == d[fl.Key] {
				continue
			}
			found := false
			for _, ibm := range aliasesOf(fl.Key) {
				found = found || d[ibm] == v
			}
			if !found {
				t.Fatalf("%s = %q comes from no spelling in the record", fl.Key, v)
			}
		}
		_ = rep
	})
}

// FuzzInferBackend: any resourceURL yields one of the systems the rules
// name, or none; never local. The Ray probe gets a client that reaches
// nothing, so fuzzing sends no request.
func FuzzInferBackend(f *testing.F) {
	for _, u := range []string{"https://h:6820/slurm/v0.0.40/", "https://h:8443/platform/", "https://us-east.quantum-computing.cloud.ibm.com/",
		"http://127.0.0.1:8265", "ftp://x", "https://quantum.cloud.ibm.com/platform", "https://h/slurm/v0.0.x"} {
		f.Add(u)
	}
	offline := &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, errors.New("offline") })}
	f.Fuzz(func(t *testing.T, raw string) {
		name, why := inferBackend(context.Background(), raw, offline)
		switch name {
		case "":
			if why == "" {
				t.Fatal("no backend and no reason")
			}
		case "slurm":
			if !strings.Contains(raw, "slurm/v0.0.") {
				t.Fatalf("slurm from %q", raw)
			}
		case "lsf":
			if !strings.Contains(raw, "platform") {
				t.Fatalf("lsf from %q", raw)
			}
		case "quantum":
			if !strings.Contains(strings.ToLower(raw), "quantum") {
				t.Fatalf("quantum from %q", raw)
			}
		default:
			t.Fatalf("inferred %q from %q", name, raw)
		}
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
