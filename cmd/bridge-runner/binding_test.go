package main

// Secrets bound to their origins: a credentials directory whose Secret
// lists its origins (record.OriginsKey) goes nowhere else, whichever field
// of the job description names the other place; the step's own directory
// goes to one origin whatever its spelling; no target reads the pod's own
// identity. Each refusal exits 2 naming the field, before any request: the
// place that would have received the credentials sees none.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/record"
)

func TestBoundSecretGoesOnlyToItsOrigins(t *testing.T) {
	clearEnv(t)
	owner := fakeSlurm(t, slurmToken, "ok") // where the Secret's owner bound it
	thief := recordingServer(t)             // a place a job's author names
	bound := credsDir(t, map[string]string{"username": "bridge", "token": slurmToken, record.OriginsKey: owner.URL + "\n"})
	unbound := credsDir(t, map[string]string{"username": "bridge", "token": slurmToken})
	quantum := credsDir(t, map[string]string{"crn": "crn:v1:bluemix:public:quantum-computing:us-east:a/acct:inst::", "apikey": quantumAPIKey,
		record.OriginsKey: owner.URL + ", https://iam.cloud.ibm.com"})
	s3creds := credsDir(t, map[string]string{"accesskey": s3AccessKey, "secretkey": s3SecretKey, record.OriginsKey: "https://s3.example.org:9000"})
	typo := credsDir(t, map[string]string{"token": slurmToken, record.OriginsKey: owner.URL + "/slurm/v0.0.40"})
	link := filepath.Join(t.TempDir(), "innocent")
	require.NoError(t, os.Symlink("/proc/self", link))

	slurm := func(url, creds string, extra ...string) []string {
		return append([]string{"invoke", "--job-name", "j", "--backend", "slurm", "--resource-url", url, "--credentials-dir", creds,
			"--script", "#!/bin/bash\nhostname\n"}, extra...)
	}
	targets := func(creds string, ts ...string) []string {
		return []string{"invoke", "--job-name", "j", "--credentials-dir", creds, "--script", "#!/bin/bash\nhostname\n",
			"--targets", "[" + strings.Join(ts, ",") + "]"}
	}
	target := func(name, url, creds string) string {
		return fmt.Sprintf(`{"name":%q,"backend":"slurm","resourceURL":%q,"credentials":%q}`, name, url, creds)
	}
	for _, c := range []struct {
		name, field string
		args        []string
	}{
		{"resourceURL elsewhere", "resourceURL", slurm(thief.URL+"/slurm/v0.0.40", bound)},
		{"iam_url elsewhere", "jobproperties.iam_url", []string{"invoke", "--job-name", "j", "--backend", "quantum", "--resource-url", owner.URL + "/api/v1",
			"--credentials-dir", quantum, "--script", "OPENQASM 3.0; qubit q; bit c; h q; c = measure q;",
			"--job-properties", fmt.Sprintf(`{"program_id":"sampler","backend":"ibm_torino","iam_url":%q}`, thief.URL+"/iam/token")}},
		{"iamURL spelling elsewhere", "jobproperties.iamURL", []string{"invoke", "--job-name", "j", "--backend", "quantum", "--resource-url", owner.URL + "/api/v1",
			"--credentials-dir", quantum, "--script", "OPENQASM 3.0; qubit q; bit c; h q; c = measure q;",
			"--job-properties", fmt.Sprintf(`{"program_id":"sampler","backend":"ibm_torino","iamURL":%q}`, thief.URL+"/iam/token")}},
		{"a bound target elsewhere", "targets[1].resourceURL", targets(bound, target("a", owner.URL, ""), target("b", thief.URL, bound))},
		{"S3 endpoint elsewhere", "s3.endpoint", slurm(owner.URL+"/slurm/v0.0.40", bound, "--s3-endpoint", strings.TrimPrefix(thief.URL, "http://"),
			"--s3-secure=false", "--s3-credentials-dir", s3creds, "--script-location", "s3", "--script", "bucket:job.sh")},
		{"step's own as .", "targets[1].credentials", targets(unbound, target("a", owner.URL, ""), target("b", thief.URL, "."))},
		{"step's own as ./", "targets[1].credentials", targets(unbound, target("a", owner.URL, ""), target("b", thief.URL, "./"))},
		{"step's own spelt absolutely", "targets[1].resourceURL", targets(unbound, target("a", owner.URL, ""), target("b", thief.URL, unbound))},
		{"the pod's token", "targets[1].credentials", targets(unbound, target("a", owner.URL, ""),
			target("b", thief.URL, "/var/run/secrets/kubernetes.io/serviceaccount"))},
		{"the pod's token by /proc", "targets[1].credentials", targets(unbound, target("a", owner.URL, ""),
			target("b", thief.URL, "/proc/self/root/var/run/secrets/kubernetes.io/serviceaccount"))},
		{"a symlink into /proc", "targets[1].credentials", targets(unbound, target("a", owner.URL, ""), target("b", thief.URL, link))},
		{"a binding that is not origins", record.OriginsKey, slurm(owner.URL+"/slurm/v0.0.40", typo)},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := len(owner.requests)
			r := run(t, append(c.args, "--state-dir", t.TempDir(), "--retry-budget", "2s")...)
			assert.Equal(t, ExitInvalid, r.code, "stdout=%s stderr=%s", r.stdout, r.stderr)
			assert.Contains(t, r.stdout+r.stderr, c.field+":", "the message names the field")
			assert.Empty(t, thief.requests, "the other place saw a request")
			assert.Equal(t, before, len(owner.requests), "a request went out before the refusal")
			assertNoSecret(t, r.stdout+r.stderr, slurmToken, quantumAPIKey, s3SecretKey)
		})
	}

	t.Run("bound and at its origin", func(t *testing.T) {
		r := run(t, append(slurm(owner.URL+"/slurm/v0.0.40", bound), "--state-dir", t.TempDir(), "--retry-budget", "2s")...)
		assert.Equal(t, ExitFailed, r.code, "the fake's job FAILED: stdout=%s stderr=%s", r.stdout, r.stderr)
		assert.Equal(t, 1, owner.submitted(), "the job went to the bound origin")
		assert.Empty(t, thief.requests)
	})
	t.Run("unbound is the user's own, with a warning", func(t *testing.T) {
		r := run(t, append(slurm(owner.URL+"/slurm/v0.0.40", unbound), "--state-dir", t.TempDir(), "--retry-budget", "2s")...)
		assert.Equal(t, ExitFailed, r.code, "stdout=%s stderr=%s", r.stdout, r.stderr)
		assert.Contains(t, r.stderr, record.OriginsKey, "the warning names the key that binds it")
	})
}
