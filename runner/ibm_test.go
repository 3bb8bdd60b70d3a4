package runner_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
)

// ibmLSFRecord is a record shaped like IBM's LSF samples: lower-case
// updateinterval, imagepullpolicy, no backend key.
func ibmLSFRecord() map[string]string {
	return map[string]string{
		"resourceURL":            "https://pac.example.org:8443/platform/",
		"resourcesecret":         "lsf-secret",
		"imagepullpolicy":        "Always",
		"updateinterval":         "20",
		"jobdata.jobScript":      "/home/lsfadmin/run.sh",
		"jobdata.scriptLocation": "remote",
		"jobproperties":          `{"Queue":"normal","RunLimitHour":"1"}`,
	}
}

func TestIBMKeysAreRead(t *testing.T) {
	d := ibmLSFRecord()
	rep, err := record.CheckKeys(d)
	require.NoError(t, err)
	assert.Equal(t, []string{"updateinterval=updateInterval"}, rep.Aliased)
	assert.Equal(t, []string{"imagepullpolicy"}, rep.Inert)
	s := record.SpecFromData(d)
	assert.Equal(t, "20", s.UpdateInterval)

	// The Slurm sample's jobProperties, the BridgeJob's field names, the
	// unprefixed state keys IBM's pods wrote: all known.
	d = map[string]string{"jobProperties": `{"Queue":"skylake"}`, "jobdata.jobscript": "echo", "s3storage.endpoint": "s3:9000",
		"jobStatus": "SUBMITTED", "submitTime": "1700000000", "message": "x", "history": "[]", "status.anything": "y", "id": "5", "kill": "false"}
	_, err = record.CheckKeys(d)
	require.NoError(t, err)
	s = record.SpecFromData(d)
	assert.Equal(t, `{"Queue":"skylake"}`, s.JobProperties)
	assert.Equal(t, "echo", s.JobScript)
	assert.Equal(t, "s3:9000", s.S3Endpoint)
}

func TestUnknownKeyNamesTheNearest(t *testing.T) {
	for key, nearest := range map[string]string{
		"jobproperites":          "jobproperties",
		"updateIntervall":        "updateInterval",
		"jobdata.jobscrpit":      "jobdata.jobScript",
		"s3upload.bukcet":        "s3upload.bucket",
		"resourceUrl":            "resourceURL",
		"jobdata.scriptlocaiton": "jobdata.scriptLocation",
	} {
		d := ibmLSFRecord()
		d[key] = "x"
		_, err := record.CheckKeys(d)
		var fe *backends.FieldError
		require.True(t, errors.As(err, &fe), "%s: %v", key, err)
		assert.ErrorIs(t, err, backends.ErrInvalid)
		assert.Equal(t, key, fe.Field)
		assert.Contains(t, err.Error(), "did you mean "+nearest+"?")
	}
}

func TestIBMSpellingConflict(t *testing.T) {
	d := ibmLSFRecord()
	d["updateInterval"] = "5"
	_, err := record.CheckKeys(d)
	require.ErrorIs(t, err, backends.ErrInvalid)
	assert.Contains(t, err.Error(), "updateinterval")
	d["updateInterval"] = "20"
	_, err = record.CheckKeys(d)
	assert.NoError(t, err, "the same value twice is fine")
}

func TestSelectBackend(t *testing.T) {
	ray := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/version" {
			_, _ = w.Write([]byte(`{"version":"4","ray_version":"2.9.3","ray_commit":"abc"}`))
			return
		}
		http.NotFound(w, r)
	}))
	defer ray.Close()
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()
	names := []string{"local", "lsf", "quantum", "ray", "slurm"}
	for _, c := range []struct {
		recorded, given, url string
		want                 string // "" = refused
		text                 string
	}{
		{"lsf", "slurm", "https://h/slurm/v0.0.40", "lsf", "record"},
		{"", "slurm", "https://h:6820", "slurm", "--backend"},
		{"", "", "", "local", "no resourceURL"},
		{"", "", "https://hpc.example.org:6820/slurm/v0.0.38/", "slurm", "/slurm/v0.0.NN/"},
		{"", "", "http://127.0.0.1:6820/slurm/v0.0.41", "slurm", "/slurm/v0.0.NN/"},
		{"", "", "https://10.0.0.1:8443/platform/", "lsf", "/platform/"},
		{"", "", "https://us-east.quantum-computing.cloud.ibm.com/", "quantum", "IBM Quantum"},
		{"", "", "https://quantum.cloud.ibm.com/api/v1", "quantum", "IBM Quantum"},
		{"", "", ray.URL, "ray", "Ray 2.9.3"},
		{"", "", other.URL, "", "does not say which system"},
		{"", "", "https://quantum.cloud.ibm.com/platform/", "", "matches lsf and quantum"},
		{"", "local", "https://h/slurm/v0.0.40", "", "would run the job on this machine"},
		{"local", "", "https://h/slurm/v0.0.40", "", "would run the job on this machine"},
		{"", "pbs", "", "", "unknown backend"},
	} {
		name, why, err := record.SelectBackend(context.Background(), c.recorded, c.given, c.url, names, nil)
		if c.want == "" {
			require.ErrorIs(t, err, backends.ErrInvalid, "%+v", c)
			assert.Contains(t, err.Error(), c.text)
			if c.given != "pbs" {
				assert.Contains(t, err.Error(), "lsf, quantum, ray, slurm", "the choices are named")
			}
			continue
		}
		require.NoError(t, err, "%+v", c)
		assert.Equal(t, c.want, name, "%+v", c)
		assert.Contains(t, why, c.text)
	}
}

// TestInvokeRecordWithURLNeverRunsLocally: a record with a resourceURL and
// no backend is never run on this machine, even with a script that would.
func TestInvokeRecordWithURLNeverRunsLocally(t *testing.T) {
	h := newHarness(t, nil)
	require.NoError(t, h.reg.Register("local", func(backends.Config) (backends.Backend, error) {
		t.Error("the local backend was built")
		return nil, errors.New("no")
	}))
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	_, err := h.store.Create(context.Background(), map[string]string{"resourceURL": srv.URL, "jobdata.jobScript": "touch /tmp/never"})
	require.NoError(t, err)
	iv := h.invoker(nil)
	err = iv.Run(context.Background())
	require.ErrorIs(t, err, backends.ErrInvalid)
	assert.Contains(t, err.Error(), "does not say which system")
	assert.Empty(t, h.fake.Jobs(), "nothing submitted")
}

// TestInvokeBackendChoiceFillsTheRecord: --backend names the backend of a
// record without one; the choice is recorded for cleanup and retries.
func TestInvokeBackendChoiceFillsTheRecord(t *testing.T) {
	h := newHarness(t, nil)
	_, err := h.store.Create(context.Background(), map[string]string{"jobdata.jobScript": "x", "updateinterval": "0.5",
		"jobproperties": `{"run":"50ms"}`, "imagepullpolicy": "IfNotPresent"})
	require.NoError(t, err)
	iv := h.invoker(nil)
	iv.BackendChoice = "fake"
	require.NoError(t, iv.Run(context.Background()))
	assert.Equal(t, "DONE", iv.Result().Status)
	assert.Equal(t, "fake", h.record()["backend"])
	assert.Contains(t, h.logs.String(), "imagepullpolicy", "IBM's inert key is named in the log")
}

func TestInvokeUnknownKeyIsRefused(t *testing.T) {
	h := newHarness(t, nil)
	_, err := h.store.Create(context.Background(), map[string]string{"backend": "fake", "jobdata.jobScript": "x", "jobproperites": `{"run":"50ms"}`})
	require.NoError(t, err)
	err = h.invoker(nil).Run(context.Background())
	require.ErrorIs(t, err, backends.ErrInvalid)
	assert.Contains(t, err.Error(), "jobproperites")
	assert.Contains(t, err.Error(), "did you mean jobproperties?")
	assert.Empty(t, h.fake.Jobs(), "nothing submitted")
}

// TestIBMStatusKeys: in IBM mode a cancelled job is written as IBM's KILL,
// with the unprefixed keys of IBM's pods; read back, it is our KILLED.
func TestIBMStatusKeys(t *testing.T) {
	h := newHarness(t, nil)
	iv := h.invoker(h.spec(`{"run":"50ms","final":"KILLED"}`))
	iv.StatusKeys = record.StatusKeysIBM
	require.NoError(t, iv.Run(context.Background()))
	assert.Equal(t, "KILLED", iv.Result().Status)
	raw := h.record() // as IBM's operator sees it
	assert.Equal(t, "KILL", raw[record.KeyJobStatus])
	assert.Equal(t, "KILL", raw["jobStatus"])
	rec, err := record.WithStatusKeys(h.store, record.StatusKeysOurs, nil).Get(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "KILLED", rec.Data[record.KeyJobStatus], "read back as ours")
	d := raw
	assert.Equal(t, d[record.KeyEnd], d["endTime"])
	assert.Equal(t, d[record.KeySubmit], d["submitTime"])
	assert.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`, d[record.KeyEnd], "the operator's time layout")

	// ours: no IBM keys.
	h2 := newHarness(t, nil)
	iv2 := h2.invoker(h2.spec(`{"run":"50ms","final":"KILLED"}`))
	iv2.StatusKeys = record.StatusKeysOurs
	require.NoError(t, iv2.Run(context.Background()))
	assert.NotContains(t, h2.record(), "jobStatus")
	assert.Equal(t, "KILLED", h2.record()[record.KeyJobStatus])
	// auto without IBM's operator as owner: ours.
	h3 := newHarness(t, nil)
	iv3 := h3.invoker(h3.spec(`{"run":"50ms"}`))
	require.NoError(t, iv3.Run(context.Background()))
	assert.NotContains(t, h3.record(), "jobStatus")
	assert.False(t, strings.Contains(h3.logs.String(), "IBM's Bridge Operator"))
}

// TestCleanupReadsIBMKill: a job recorded as IBM's KILL is over; cleanup
// neither asks for a kill nor cancels it, and deletes the record.
func TestCleanupReadsIBMKill(t *testing.T) {
	h := newHarness(t, nil)
	iv := h.invoker(h.spec(`{"run":"50ms","final":"KILLED"}`))
	iv.StatusKeys = record.StatusKeysIBM
	require.NoError(t, iv.Run(context.Background()))
	require.Equal(t, "KILL", h.record()[record.KeyJobStatus])
	res, err := h.cleaner().Run(context.Background())
	require.NoError(t, err)
	assert.False(t, res.Cancelled)
	assert.True(t, res.Deleted)
	assert.Equal(t, 0, h.fake.Count("cancel"))
	_, err = h.store.Get(context.Background())
	assert.ErrorIs(t, err, record.ErrNoRecord)
}

// TestIBMRefusalIsFailedWithItsReason: IBM's controller shows a failed
// pod's record only through status.jobStatus (FAILED or KILL) and then
// status.message; a job refused before submission, whatever refused it,
// must say FAILED and why, and leave no submit intent behind.
func TestIBMRefusalIsFailedWithItsReason(t *testing.T) {
	for _, c := range []struct {
		name, props string
		fault       error
		extraKey    bool
		reason      string
	}{
		{name: "validation", props: `{"final":"BOGUS"}`, reason: "not a final state"},
		{name: "submit", props: `{}`, fault: backends.Invalid("jobproperties", "Invalid partition name specified"), reason: "Invalid partition name"},
		{name: "credentials", props: `{}`, fault: fmt.Errorf("token refused: %w", backends.ErrAuth), reason: "token refused"},
		{name: "record key", props: `{}`, extraKey: true, reason: "jobproperites"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, mode := range []string{record.StatusKeysIBM, record.StatusKeysOurs} {
				h := newHarness(t, nil)
				if c.fault != nil {
					h.fake.SubmitFaults = []error{c.fault}
				}
				spec := h.spec(c.props)
				if c.extraKey {
					_, err := h.store.Create(context.Background(), map[string]string{"backend": "fake", "jobdata.jobScript": "x", "jobproperites": `{}`})
					require.NoError(t, err)
					spec = nil
				}
				iv := h.invoker(spec)
				iv.StatusKeys = mode
				err := iv.Run(context.Background())
				require.ErrorIs(t, err, backends.ErrInvalid)
				assert.Empty(t, h.fake.Jobs(), "nothing submitted")
				d := h.record()
				assert.Contains(t, d[record.KeyMessage], c.reason)
				assert.Empty(t, d[record.KeyIntent], "no submit intent is left to wait out")
				if mode == record.StatusKeysOurs {
					assert.Empty(t, d[record.KeyJobStatus], "ours: nothing ran, no state")
					continue
				}
				// What IBM's controller reads (and IBM's pods' unprefixed keys).
				assert.Equal(t, "FAILED", d[record.KeyJobStatus])
				assert.Equal(t, "FAILED", d["jobStatus"])
				assert.Contains(t, d["message"], c.reason)
				assert.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`, d[record.KeyEnd])
			}
		})
	}
}

// TestMissingRecordNamesBRIDGE_CONFIGMAP: IBM's samples name their
// ConfigMap <job>-slurm-cm, not <job>-bridge-cm; a record that is not found
// says how to name another one.
func TestMissingRecordNamesBRIDGE_CONFIGMAP(t *testing.T) {
	h := newHarness(t, nil)
	err := h.invoker(nil).Run(context.Background())
	require.ErrorIs(t, err, backends.ErrInvalid)
	assert.Contains(t, err.Error(), "BRIDGE_CONFIGMAP")
	assert.Contains(t, err.Error(), "--configmap")
}

// TestRayWithTokenAuthIsRecognised: a Ray dashboard with token auth
// answers the probe (which has no token) 401; the real one is recognised
// by Ray's words, and any other 401 or 403 is said as such, with the fix.
func TestRayWithTokenAuthIsRecognised(t *testing.T) {
	url := os.Getenv("BRIDGE_TEST_RAY_AUTH_URL")
	if url == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("no Ray with token auth: hack/services.sh starts one and exports BRIDGE_TEST_RAY_AUTH_URL")
		}
		t.Skip("no Ray with token auth (BRIDGE_TEST_RAY_AUTH_URL)")
	}
	names := []string{"local", "ray", "slurm"}
	name, why, err := record.SelectBackend(context.Background(), "", "", url, names, nil)
	require.NoError(t, err)
	assert.Equal(t, "ray", name)
	assert.Contains(t, why, "token authentication")

	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusUnauthorized)
	}))
	defer other.Close()
	_, _, err = record.SelectBackend(context.Background(), "", "", other.URL, names, nil)
	require.ErrorIs(t, err, backends.ErrInvalid)
	assert.Contains(t, err.Error(), "answered 401")
	assert.Contains(t, err.Error(), "set backend: ray")
	assert.NotContains(t, err.Error(), "no Ray dashboard answering")
}
