package record

// Fuzz targets for the record's parsers of outside input: the job
// description (Spec.Parse, SpecFromData on arbitrary ConfigMap data), the
// IBM-compatible bits (bucket:object, intervals) and the file store's
// record. Each asserts invariants, not just "no panic". Run one with
//
//	go test -run='^$' -fuzz='^FuzzSpecParse$' -fuzztime=30s ./record
//
// (hack/fuzz.sh runs them all briefly).

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
)

// fzCheckInvalid asserts that err is a FieldError wrapping ErrInvalid whose
// field is one of want (or, with no want, any ConfigMap key of Spec).
func fzCheckInvalid(t *testing.T, err error, want ...string) {
	t.Helper()
	if !errors.Is(err, backends.ErrInvalid) {
		t.Fatalf("error does not wrap ErrInvalid: %v", err)
	}
	var fe *backends.FieldError
	if !errors.As(err, &fe) || fe.Field == "" {
		t.Fatalf("error does not name a field: %v", err)
	}
	if len(want) == 0 {
		if _, ok := FieldByKey(fe.Field); !ok {
			t.Fatalf("error names %q, which is no ConfigMap key: %v", fe.Field, err)
		}
		return
	}
	for _, w := range want {
		if fe.Field == w {
			return
		}
	}
	t.Fatalf("error names %q, want one of %v: %v", fe.Field, want, err)
}

// fzCheckDescription asserts what every successfully parsed Description
// promises, and that the Spec survives the trip through the record
// (Spec → Data → SpecFromData, with and without defaults) unchanged.
func fzCheckDescription(t *testing.T, s Spec, d *Description) {
	t.Helper()
	fzCheckFields(t, d)
	fzCheckScript(t, d)
	fzCheckData(t, d)
	fzCheckRoundTrip(t, s, d)
}

// fzCheckFields: backend, update interval and jobproperties as promised.
func fzCheckFields(t *testing.T, d *Description) {
	t.Helper()
	if d.Backend == "" || d.Backend != strings.TrimSpace(d.Backend) {
		t.Fatalf("backend %q is empty or untrimmed", d.Backend)
	}
	if d.UpdateInterval < 100*time.Millisecond || d.UpdateInterval > MaxUpdateInterval {
		t.Fatalf("updateInterval %s out of range", d.UpdateInterval)
	}
	if d.Properties != nil {
		var obj map[string]any
		if err := json.Unmarshal(d.Properties, &obj); err != nil || obj == nil {
			t.Fatalf("jobproperties %q accepted but is no JSON object (%v)", d.Properties, err)
		}
	}
}

// fzCheckScript: the script and its extras are where their location says.
func fzCheckScript(t *testing.T, d *Description) {
	t.Helper()
	switch d.ScriptLocation {
	case Inline:
		if strings.TrimSpace(d.Script) == "" {
			t.Fatal("empty inline script accepted")
		}
	case Remote:
		if d.Script == "" || d.Script != strings.TrimSpace(d.Script) {
			t.Fatalf("remote script path %q empty or untrimmed", d.Script)
		}
	case S3:
		if _, err := ParseObjectRef("jobdata.jobScript", d.Script); err != nil {
			t.Fatalf("s3 script %q accepted but is no bucket:object", d.Script)
		}
	default:
		t.Fatalf("scriptLocation %q accepted", d.ScriptLocation)
	}
	switch d.ExtraLocation {
	case Inline:
		for _, v := range []string{d.Metadata, d.Parameters} {
			if v != "" && !json.Valid([]byte(v)) {
				t.Fatalf("inline metadata/parameters %q accepted but not JSON", v)
			}
		}
	case S3:
	default:
		t.Fatalf("scriptExtraLocation %q accepted", d.ExtraLocation)
	}
}

// fzCheckData: additional data and uploads are complete, with S3 set up.
func fzCheckData(t *testing.T, d *Description) {
	t.Helper()
	for _, ref := range d.AdditionalData {
		if ref.Bucket == "" || ref.Object == "" {
			t.Fatalf("additionalData entry %+v has an empty part", ref)
		}
	}
	for _, f := range d.UploadFiles {
		if f == "" || f != strings.TrimSpace(f) || strings.Contains(f, ",") {
			t.Fatalf("s3upload.files entry %q empty, untrimmed or with a comma", f)
		}
	}
	if d.UsesS3() && d.S3.Endpoint == "" {
		t.Fatal("a job that uses S3 was accepted without s3.endpoint")
	}
	if len(d.UploadFiles) > 0 && d.UploadBucket == "" {
		t.Fatal("s3upload.files accepted without s3upload.bucket")
	}
}

// fzCheckRoundTrip: what create-configmap writes is what invoke reads.
func fzCheckRoundTrip(t *testing.T, s Spec, d *Description) {
	t.Helper()
	for _, in := range []Spec{s, s.WithDefaults()} {
		back := SpecFromData(in.Data())
		if back != in {
			t.Fatalf("Spec → Data → SpecFromData changed the spec:\n in: %+v\nout: %+v", in, back)
		}
		if diff := Diff(back, s); len(diff) > 0 {
			t.Fatalf("round trip differs in %v", diff)
		}
		d2, err := back.Parse()
		if err != nil {
			t.Fatalf("the round-tripped spec no longer parses: %v", err)
		}
		if !reflect.DeepEqual(d, d2) {
			t.Fatalf("the round-tripped spec parses differently:\n%+v\n%+v", d, d2)
		}
	}
	if !reflect.DeepEqual(s.WithDefaults(), s.WithDefaults().WithDefaults()) {
		t.Fatal("WithDefaults is not idempotent")
	}
}

func FuzzSpecParse(f *testing.F) {
	type seed struct {
		backend, url, interval, props, script, loc, meta, params, extraLoc, additional, endpoint, secure, bucket, files, create string
	}
	seeds := []seed{
		{"local", "", "", "", "echo hi", "", "", "", "", "", "", "", "", "", ""},
		{"slurm", "https://slurm.example.org:6820", "20", `{"partition":"debug","nodes":1,"time_limit":30,"current_working_directory":"/scratch/bridge"}`, "#!/bin/bash\nsrun hostname\n", "inline", "", "", "inline", "", "", "true", "", "", "false"},
		{"slurm", "http://slurm:6820/slurm/v0.0.38/", "1m30s", `{"NodesNumber":"1","Queue":"debug","slurmJobName":"x"}`, "/home/u/job.sh", "remote", `{"a":1}`, `{"p":[1,2]}`, "", "", "", "", "", "", ""},
		{"lsf", "https://pac.example.org:8443", "0.5", `{"queue":"normal","RunLimitHour":"1"}`, "in:job.sh", "s3", "in:meta.json", "in:params.json", "s3", "in:a.dat, in:b.dat", "minio:9000", "false", "out", "result.txt,logs/x.log", "true"},
		{"ray", "http://ray-head:8265", "5s", `{"runtime_env":{"pip":["numpy"]},"entrypoint_num_cpus":1}`, "print('hi')", "", "", "", "", "", "", "", "", "", ""},
		{"quantum", "https://quantum.cloud.ibm.com/api/v1", "60", `{"program_id":"sampler","backend":"ibm_torino"}`, "OPENQASM 3.0; include \"stdgates.inc\"; bit[2] c; h $0; cx $0,$1; c[0]=measure $0; c[1]=measure $1;", "inline", "", `{"params":{"pubs":[]}}`, "", "", "", "", "", "", ""},
		{"", "", "", "", "x", "", "", "", "", "", "", "", "", "", ""},
		{"local", "", "-3", "", "x", "", "", "", "", "", "", "", "", "", ""},
		{"local", "", "2h", "", "x", "", "", "", "", "", "", "", "", "", ""},
		{"local", "", "NaN", "[1]", "x", "git", "a=b", "", "ftp", "nocolon", "", "yes", "", "f", "maybe"},
		{"local", "", "1e-9", "null", " ", "", "", "", "", "", "", "", "", "", ""},
		{"local", "", " 20 ", "{}", "b:o", "S3", "", "", "S3", ",,", "e:1", "TRUE", "b", " , a ,", "0"},
	}
	for _, s := range seeds {
		f.Add(s.backend, s.url, s.interval, s.props, s.script, s.loc, s.meta, s.params, s.extraLoc, s.additional, s.endpoint, s.secure, s.bucket, s.files, s.create)
	}
	f.Fuzz(func(t *testing.T, backend, url, interval, props, script, loc, meta, params, extraLoc, additional, endpoint, secure, bucket, files, create string) {
		s := Spec{Backend: backend, ResourceURL: url, UpdateInterval: interval, JobProperties: props, JobScript: script,
			ScriptLocation: loc, ScriptMetadata: meta, JobParameters: params, ScriptExtraLocation: extraLoc,
			AdditionalData: additional, S3Endpoint: endpoint, S3Secure: secure, S3UploadBucket: bucket,
			S3UploadFiles: files, S3CreateBucket: create}
		d, err := s.Parse()
		if err != nil {
			if d != nil {
				t.Fatal("Parse returned both a Description and an error")
			}
			fzCheckInvalid(t, err)
			return
		}
		fzCheckDescription(t, s, d)
	})
}

// FuzzSpecFromData feeds SpecFromData arbitrary ConfigMap data (a JSON
// object of strings, as a hand-edited ConfigMap may hold), including state
// keys and unknown keys, which must not change the job description.
func FuzzSpecFromData(f *testing.F) {
	for _, d := range []map[string]string{
		{"backend": "local", "jobdata.jobScript": "echo hi"},
		{"backend": "slurm", "resourceURL": "https://slurm.example.org:6820", "jobproperties": `{"partition":"debug"}`,
			"jobdata.jobScript": "#!/bin/bash\nsrun hostname\n", "updateInterval": "20", "id": "42", "kill": "true",
			"status.jobStatus": "RUNNING", "status.submitIntent": "host/1/2@2025-01-01T00:00:00Z"},
		{"backend": "lsf", "jobdata.jobScript": "b:o", "jobdata.scriptLocation": "s3", "s3.endpoint": "minio:9000", "s3.secure": "false",
			"s3upload.bucket": "out", "s3upload.files": "a,b", "s3upload.createBucket": "true", "jobdata.additionalData": "b:x,b:y"},
		{"backend": "local", "jobdata.jobScript": "x", "updateInterval": "soon", "unknown.key": "v"},
		{"backend": "local", "jobdata.jobScript": "x", "s3.secure": "perhaps"},
	} {
		b, _ := json.Marshal(d)
		f.Add(b)
	}
	f.Add([]byte(`{"backend":"local","jobdata.jobScript":"x","jobproperties":"{\"env\":"}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var data map[string]string
		if json.Unmarshal(raw, &data) != nil {
			return
		}
		s := SpecFromData(data)
		// Keys that are no Spec field are ignored.
		withState := map[string]string{}
		for k, v := range data {
			withState[k] = v
		}
		for _, k := range append(StateKeys, KeyKill, "unrelated") {
			withState[k] = "junk"
		}
		for _, fl := range Fields {
			if v, ok := data[fl.Key]; ok {
				withState[fl.Key] = v
			} else {
				delete(withState, fl.Key)
			}
		}
		if SpecFromData(withState) != s {
			t.Fatal("state keys changed the job description")
		}
		d, err := s.Parse()
		if err != nil {
			fzCheckInvalid(t, err)
			return
		}
		fzCheckDescription(t, s, d)
	})
}

func FuzzParseObjectRef(f *testing.F) {
	for _, s := range []string{"bucket:object", "my-bucket:path/to/object.json", " b : o ", ":o", "b:", "nocolon", "b:o:with:colons", "b:\x00", "\tb:o\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		ref, err := ParseObjectRef("jobdata.additionalData", v)
		if err != nil {
			fzCheckInvalid(t, err, "jobdata.additionalData")
			return
		}
		if ref.Bucket == "" || ref.Object == "" || strings.Contains(ref.Bucket, ":") {
			t.Fatalf("%q parsed as %+v", v, ref)
		}
		back, err := ParseObjectRef("x", ref.String())
		if err != nil || back != ref {
			t.Fatalf("%+v does not survive String and ParseObjectRef: %+v, %v", ref, back, err)
		}
	})
}

func FuzzParseInterval(f *testing.F) {
	for _, s := range []string{"20", "1m", "1m30s", "0.1", "0.05", "3600", "3601", "1h", "1h0m1s", "-3", "NaN", "Inf", "1e308", "-1e308", "100ms", " 5 ", "", "0x10", "1_000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d, err := parseInterval(v)
		if err != nil {
			fzCheckInvalid(t, err, "updateInterval")
			return
		}
		if d < 100*time.Millisecond || d > MaxUpdateInterval {
			t.Fatalf("%q gave %s, out of range", v, d)
		}
		// What Parse accepted survives being written back as a duration.
		d2, err := parseInterval(d.String())
		if err != nil || d2 != d {
			t.Fatalf("%q → %s → %s, %v", v, d, d2, err)
		}
	})
}

// FuzzFileStoreRecord: the state file (--state-dir) edited by hand. Get
// either fails or returns a record with data, and a record that was read can
// be written back and read again unchanged.
func FuzzFileStoreRecord(f *testing.F) {
	f.Add([]byte(`{"uid":"abc","version":3,"data":{"backend":"local","jobdata.jobScript":"echo hi","id":"br-1"}}`))
	f.Add([]byte(`{"uid":"abc","version":1}`))
	f.Add([]byte(`{"uid":"abc","version":"1","data":{}}`))
	f.Add([]byte(`{"data":{"backend":null}}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, raw []byte) {
		dir := t.TempDir()
		s := NewFileStore(dir, "j")
		if err := os.WriteFile(s.Path, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		rec, err := s.Get(ctx)
		if err != nil {
			if errors.Is(err, ErrNoRecord) {
				t.Fatal("an existing file reads as no record")
			}
			return
		}
		if rec.Data == nil {
			t.Fatal("a record without data map")
		}
		next := rec.Clone()
		next.Data["status.message"] = "x"
		up, err := s.Update(ctx, next)
		if err != nil {
			t.Fatalf("a record that was read cannot be updated: %v", err)
		}
		again, err := s.Get(ctx)
		if err != nil || !reflect.DeepEqual(again, up) {
			t.Fatalf("update then get differ: %+v %+v %v", up, again, err)
		}
		if _, err := s.Update(ctx, next); !errors.Is(err, ErrConflict) {
			t.Fatalf("a stale update was not a conflict: %v", err)
		}
		_ = filepath.Base(s.Path)
	})
}
