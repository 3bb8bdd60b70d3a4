package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/yaml"
)

// slurmExampleArgs are the arguments of the Slurm guide's plain Job (docs/guides/slurm-rest.md)
// (examples/slurm/job.yaml) pointed at c: its URL, credentials with their
// origin binding (as the example's Secret has), a state directory for the
// record, and a working directory that exists on the suite's node.
func slurmExampleArgs(t *testing.T, c slurmCluster) []string {
	t.Helper()
	b, err := os.ReadFile("../../examples/slurm/job.yaml")
	require.NoError(t, err)
	var job batchv1.Job
	require.NoError(t, yaml.Unmarshal(b, &job))
	args := job.Spec.Template.Spec.Containers[0].Args
	creds := t.TempDir()
	for _, f := range []string{"username", "token"} {
		v, err := os.ReadFile(filepath.Join(c.creds, f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(creds, f), v, 0o600))
	}
	require.NoError(t, os.WriteFile(filepath.Join(creds, "bridge-runner.origins"), []byte(c.url), 0o600))
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "--resource-url":
			args[i+1] = c.url
		case "--job-properties":
			args[i+1] = strings.Replace(args[i+1], `"/scratch/bridge"`, `"/tmp"`, 1)
		}
	}
	return append(args, "--credentials-dir", creds, "--state-dir", t.TempDir())
}

// slurmShown is shownLines for a Slurm step: job ids and the request
// counts masked too, and the job's wait and run (PENDING and its reason,
// RUNNING, a pending job's heartbeat: whether and how a poll sees them
// depends on the shared cluster's load) left out.
func slurmShown(text string) []string {
	for _, m := range []struct{ re, with string }{
		{`job_id=\d+`, "job_id=ID"}, {`Slurm job \d+`, "Slurm job ID"}, {`"id":"\d+"`, `"id":"ID"`},
		{`backend=\d+ kubernetes=\d+`, "backend=N kubernetes=N"},
		{`queueWaitSeconds\\":\d+`, `queueWaitSeconds\":N`},
	} {
		text = regexp.MustCompile(m.re).ReplaceAllString(text, m.with)
	}
	recs, _ := shownLines(text, "")
	var out []string
	for _, r := range recs {
		if !strings.Contains(r, "state=RUNNING") && !strings.Contains(r, "state=PENDING") && !strings.Contains(r, "pending") {
			out = append(out, r)
		}
	}
	return out
}

// TestSlurmExampleShowsWhatTheGuideSays runs the Slurm guide's plain Job
// (its arguments) against the real Slurm 22.05 and compares its log, from
// the second line on (the first says where the record is: a ConfigMap in
// the guide's pod, a file here), with the guide's block.
func TestSlurmExampleShowsWhatTheGuideSays(t *testing.T) {
	clearEnv(t)
	var c *slurmCluster
	for _, sc := range slurmClusters(t) {
		if sc.release == "22.05" {
			c = &sc
		}
	}
	if c == nil {
		t.Skip("the guide's block is of Slurm 22.05's slurmrestd")
	}
	block := readmeBlock(t, readDoc(t, "docs/guides/slurm-rest.md"), "What its log shows")
	_, block, _ = strings.Cut(block, "\n") // the "$ kubectl logs" line
	cmd := exec.Command(binary, slurmExampleArgs(t, *c)...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	got, want := slurmShown(string(out)), slurmShown(block)
	require.NotEmpty(t, got)
	assert.Contains(t, got[0], `msg="the job's record"`)
	assert.Equal(t, want[1:], got[1:], "the guide shows what the example's run prints:\n%s", out)
}
