package record_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
)

func TestFieldsAreUniqueAndIBMCompatible(t *testing.T) {
	keys, flags := map[string]bool{}, map[string]bool{}
	for _, f := range record.Fields {
		require.NotEmpty(t, f.Key)
		require.NotEmpty(t, f.Flag)
		require.NotEmpty(t, f.Help, f.Key)
		assert.False(t, keys[f.Key], "duplicate key %s", f.Key)
		assert.False(t, flags[f.Flag], "duplicate flag %s", f.Flag)
		keys[f.Key], flags[f.Flag] = true, true
	}
	// The keys IBM's Bridge Operator and its KFP step write must all be here.
	for _, k := range []string{"resourceURL", "resourcesecret", "updateInterval", "jobproperties",
		"jobdata.jobScript", "jobdata.scriptLocation", "jobdata.scriptMetadata", "jobdata.jobParameters",
		"jobdata.scriptExtraLocation", "jobdata.additionalData", "s3.endpoint", "s3.secure", "s3.secret",
		"s3upload.bucket", "s3upload.files", "backend"} {
		assert.True(t, keys[k], "missing ConfigMap key %s", k)
	}
	for _, k := range record.StateKeys {
		assert.False(t, keys[k], "state key %s collides with a job-description key", k)
	}
}

func TestSpecDataRoundTrip(t *testing.T) {
	s := record.Spec{Backend: "slurm", ResourceURL: "https://h:6820", JobScript: "#!/bin/sh\necho 'a\"b'\n", JobProperties: `{"partition":"debug"}`}
	d := s.Data()
	assert.Equal(t, "slurm", d["backend"])
	assert.Equal(t, s.JobScript, d["jobdata.jobScript"])
	assert.NotContains(t, d, "s3.endpoint", "empty fields are not written")
	d["status.jobStatus"] = "RUNNING" // state keys are ignored
	assert.Equal(t, s, record.SpecFromData(d))
	assert.Empty(t, record.Diff(s, s.WithDefaults()), "an explicit default equals an omitted one")
	assert.Equal(t, []string{"jobdata.jobScript"}, record.Diff(s, record.Spec{Backend: "slurm", ResourceURL: "https://h:6820", JobProperties: `{"partition":"debug"}`, JobScript: "x"}))
}

func TestParseNamesTheField(t *testing.T) {
	ok := record.Spec{Backend: "local", JobScript: "echo hi"}
	cases := []struct {
		name  string
		edit  func(*record.Spec)
		field string
	}{
		{"empty script", func(s *record.Spec) { s.JobScript = "  " }, "jobdata.jobScript"},
		{"bad location", func(s *record.Spec) { s.ScriptLocation = "ftp" }, "jobdata.scriptLocation"},
		{"s3 script not bucket:object", func(s *record.Spec) { s.ScriptLocation, s.JobScript, s.S3Endpoint = "s3", "justaname", "h:9000" }, "jobdata.jobScript"},
		{"s3 without endpoint", func(s *record.Spec) { s.ScriptLocation, s.JobScript = "s3", "b:o" }, "s3.endpoint"},
		{"properties not JSON", func(s *record.Spec) { s.JobProperties = "{nope" }, "jobproperties"},
		{"properties an array", func(s *record.Spec) { s.JobProperties = "[1,2]" }, "jobproperties"},
		{"properties null", func(s *record.Spec) { s.JobProperties = "null" }, "jobproperties"},
		{"interval words", func(s *record.Spec) { s.UpdateInterval = "soon" }, "updateInterval"},
		{"interval zero", func(s *record.Spec) { s.UpdateInterval = "0" }, "updateInterval"},
		{"interval too long", func(s *record.Spec) { s.UpdateInterval = "2h" }, "updateInterval"},
		{"params not JSON", func(s *record.Spec) { s.JobParameters = "a=b" }, "jobdata.jobParameters"},
		{"metadata not JSON", func(s *record.Spec) { s.ScriptMetadata = "{" }, "jobdata.scriptMetadata"},
		{"extra location", func(s *record.Spec) { s.ScriptExtraLocation = "remote" }, "jobdata.scriptExtraLocation"},
		{"additional data", func(s *record.Spec) { s.AdditionalData, s.S3Endpoint = "b:o, nocolon", "h:9000" }, "jobdata.additionalData"},
		{"s3 secure", func(s *record.Spec) { s.S3Secure = "yes please" }, "s3.secure"},
		{"upload files without bucket", func(s *record.Spec) { s.S3UploadFiles, s.S3Endpoint = "out.txt", "h:9000" }, "s3upload.bucket"},
		{"backend blank", func(s *record.Spec) { s.Backend = " " }, "backend"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := ok
			c.edit(&s)
			_, err := s.Parse()
			require.Error(t, err)
			assert.ErrorIs(t, err, backends.ErrInvalid)
			var fe *backends.FieldError
			require.True(t, errors.As(err, &fe))
			assert.Equal(t, c.field, fe.Field, err.Error())
		})
	}
	d, err := ok.Parse()
	require.NoError(t, err)
	assert.Equal(t, "inline", d.ScriptLocation)
	assert.Equal(t, "20s", d.UpdateInterval.String(), "IBM's default interval")
}

func TestParseAcceptsIBMForms(t *testing.T) {
	s := record.Spec{Backend: "lsf", JobScript: "/home/u/run.sh", ScriptLocation: "remote", UpdateInterval: "1m30s",
		AdditionalData: "in:a.txt, in:b.txt", S3Endpoint: "minio:9000", S3Secure: "false", S3UploadBucket: "out", S3UploadFiles: "a,b"}
	d, err := s.Parse()
	require.NoError(t, err)
	assert.Equal(t, "/home/u/run.sh", d.Script)
	assert.Equal(t, "1m30s", d.UpdateInterval.String())
	assert.Equal(t, []record.ObjectRef{{Bucket: "in", Object: "a.txt"}, {Bucket: "in", Object: "b.txt"}}, d.AdditionalData)
	assert.False(t, d.S3.Secure)
	assert.Equal(t, []string{"a", "b"}, d.UploadFiles)
}

// TestUploadFilesEachAnObject: s3upload.files that cannot each have an
// object of their own are refused when the description is parsed, before
// anything is submitted: the job's directory itself (its key would be the
// run's prefix, which versitygw refuses with 400 DirectoryObjectContainsData
// once the job has run), the log's name, or one object named twice.
func TestUploadFilesEachAnObject(t *testing.T) {
	base := record.Spec{Backend: "local", JobScript: "true", S3Endpoint: "minio:9000", S3UploadBucket: "out"}
	for files, want := range map[string]string{
		".": "the job's directory", "/": "the job's directory", "a/..": "the job's directory",
		"job.log": "where the job's log goes", "./job.log": "where the job's log goes",
		"a/x.csv,a/./x.csv": "both uploaded as a/x.csv", "/abs/x,abs/x": "both uploaded as abs/x",
	} {
		s := base
		s.S3UploadFiles = files
		_, err := s.Parse()
		require.ErrorIs(t, err, backends.ErrInvalid, files)
		assert.ErrorContains(t, err, "s3upload.files", files)
		assert.ErrorContains(t, err, want, files)
	}
	s := base
	s.S3UploadFiles = "out,out/data.csv,logs/job.log,b/x.csv,a/x.csv"
	_, err := s.Parse()
	assert.NoError(t, err, "distinct objects, a job.log below a directory, a name below another's (S3 holds both)")
}
