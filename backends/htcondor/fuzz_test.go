package htcondor

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/bridge-runner/bridge-runner/backends"
)

// FuzzSubmitDescription: whatever jobproperties hold, an accepted job's
// description has one line per command it set and ends with the one queue
// statement, with the key attribute bridge-runner's: no value can inject a
// submit command.
func FuzzSubmitDescription(f *testing.F) {
	for _, s := range []string{`{"request_cpus":2}`, `{"+A":"x\"y"}`, `{"requirements":"a\nqueue"}`, `{"x":"$(y)"}`, `{"MY.K":"\\"}`, `{"a":"b\rc"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, props string) {
		s, err := buildSubmit(backends.Job{Name: "n", Key: "key", Script: "#!/bin/sh\n", Properties: json.RawMessage(props)})
		if err != nil {
			return
		}
		d := s.description("/d", "key")
		lines := strings.Split(strings.TrimSuffix(d, "\n"), "\n")
		if lines[len(lines)-1] != "queue 1" || strings.Count(d, "\nqueue") != 1 {
			t.Fatalf("queue statement: %q", d)
		}
		if strings.Count(d, "BridgeRunnerKey") != 1 || !strings.Contains(d, "+BridgeRunnerKey = \"key\"\n") {
			t.Fatalf("key attribute: %q", d)
		}
		if want := 8 + len(s.commands) + 2; len(lines) != want { // fixed lines, commands, key, queue
			t.Fatalf("%d lines, want %d: %q", len(lines), want, d)
		}
	})
}

func FuzzParseAds(f *testing.F) {
	f.Add(`[{"ClusterId":1,"ProcId":0,"JobStatus":4,"ExitCode":3}]`)
	f.Add("[\n]\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, out string) {
		ads, err := parseAds([]byte(out))
		if err != nil {
			return
		}
		for _, a := range ads {
			if a != nil && !a.status().State.Valid() {
				t.Fatalf("state %q", a.status().State)
			}
		}
	})
}
