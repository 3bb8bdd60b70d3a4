package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/record"
)

// statusFixture is a record as some step left it: every backend, every
// state, and one not yet invoked.
type statusFixture struct {
	job       string
	bridgeJob bool // controlled by a BridgeJob (ConfigMaps only)
	data      map[string]string
}

var statusFixtures = []statusFixture{
	{"a-slurm", true, map[string]string{"backend": "slurm", "resourceURL": "https://slurm.example.org:6820",
		record.KeyJobStatus: "RUNNING", record.KeyID: "4242", record.KeyRawState: "RUNNING"}},
	{"b-lsf", false, map[string]string{"backend": "lsf", "resourceURL": "https://lsf.example.org:8443/platform",
		record.KeyJobStatus: "PENDING", record.KeyID: "17", record.KeyOwner: "Workflow wf-1 (uid 0b6e) node wf-1.main.invoke"}},
	{"c-ray", false, map[string]string{"backend": "ray", "resourceURL": "http://ray-head.ray:8265",
		record.KeyJobStatus: "DONE", record.KeyID: "raysubmit_x", record.KeyOwner: "Job batch-1 (uid 9a) index 3"}},
	{"d-quantum", false, map[string]string{"backend": "quantum", "resourceURL": "https://quantum.cloud.ibm.com/api",
		record.KeyJobStatus: "FAILED", record.KeyID: "d1q", record.KeyMessage: "the program failed\nsecond line"}},
	{"e-htcondor", false, map[string]string{"backend": "htcondor", "resourceURL": "ssh://alice@condor.example.org:2222",
		record.KeyJobStatus: "KILLED", record.KeyID: "12.0", record.KeyKill: "true"}},
	{"f-local", false, map[string]string{"backend": "local", record.KeyJobStatus: "UNKNOWN", record.KeyID: "br-1"}},
	{"g-slurm", false, map[string]string{"backend": "slurm", "resourceURL": "https://slurm.example.org:6820",
		record.KeyJobStatus: "SUSPENDED", record.KeyID: "4243", record.KeyRawState: "PENDING", record.KeyReason: "JobHeldUser"}},
	{"h-new", false, map[string]string{"backend": "slurm", "resourceURL": "https://slurm.example.org:6820"}},
}

// The table for the fixtures, the same for state files and ConfigMaps: it
// fits 80 columns; -o wide adds the target, the owner and the rest.
const statusGoldenFiles = `NAME         BACKEND    STATE       JOB-ID        AGE
a-slurm      slurm      RUNNING     4242          3h
b-lsf        lsf        PENDING     17            3h
c-ray        ray        DONE        raysubmit_x   3h
d-quantum    quantum    FAILED      d1q           3h
e-htcondor   htcondor   KILLED      12.0          3h
f-local      local      UNKNOWN     br-1          3h
g-slurm      slurm      SUSPENDED   4243          3h
h-new        slurm      <none>      <none>        3h
`

func writeFileFixtures(t *testing.T, dir string) {
	for _, f := range statusFixtures {
		s := record.NewFileStore(dir, f.job)
		_, err := s.Create(context.Background(), f.data)
		require.NoError(t, err)
		// The record's age is its lock file's.
		old := time.Now().Add(-3 * time.Hour)
		require.NoError(t, os.Chtimes(s.Path+".lock", old, old))
	}
	// Not records: other JSON and a half-written file.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.json"), []byte(`{"a":1}`), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "x-bridge-cm.json.tmp"), []byte(`{`), 0o600))
}

// TestStatusFileStore lists a state directory: the table, filters, the
// JSON and YAML forms, and no credentials of a resourceURL anywhere.
func TestStatusFileStore(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	writeFileFixtures(t, dir)

	r := run(t, "status", "--state-dir", dir)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, alignGolden(statusGoldenFiles), r.stdout)
	assert.NotContains(t, r.stdout, "alice")

	r = run(t, "get", "--store", "file", "--state-dir", dir, "--state", "running,suspended", "--backend", "slurm")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, []string{"a-slurm", "g-slurm"}, firstColumn(r.stdout))

	r = run(t, "status", "--state-dir", dir, "c-ray", "f-local", "b-lsf", "-o", "wide")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, []string{"b-lsf", "c-ray", "f-local"}, firstColumn(r.stdout))
	for _, col := range []string{"TARGET", "OWNER", "BACKEND-STATE", "lsf.example.org:8443", "Workflow/wf-1 node wf-1.main.invoke", "Job/batch-1 index 3"} {
		assert.Contains(t, r.stdout, col)
	}

	rows := statusJSON(t, "--state-dir", dir)
	require.Len(t, rows, len(statusFixtures))
	assertRowsMatchFixtures(t, rows)
	assert.Equal(t, "state file "+filepath.Join(dir, "a-slurm-bridge-cm.json"), rows[0].Record)

	r = run(t, "status", "--state-dir", dir, "-o", "yaml")
	require.Equal(t, 0, r.code, r.stderr)
	var fromYAML struct{ Items []statusRow }
	require.NoError(t, yaml.UnmarshalStrict([]byte(r.stdout), &fromYAML))
	assert.Equal(t, rows, fromYAML.Items)

	// IBM's word for KILLED, as a BridgeJob's record has it, is ours here.
	_, err := record.NewFileStore(dir, "k-ibm").Create(context.Background(), map[string]string{"backend": "lsf", record.KeyJobStatus: "KILL"})
	require.NoError(t, err)
	rows = statusJSON(t, "--state-dir", dir, "--state", "killed")
	require.Len(t, rows, 2)
	assert.Equal(t, []string{"e-htcondor", "k-ibm"}, []string{rows[0].Name, rows[1].Name})
	assert.Equal(t, "KILLED", rows[1].State)

	r = run(t, "status", "--state-dir", filepath.Join(dir, "nothing-here"))
	assert.Equal(t, 0, r.code)
	assert.Empty(t, r.stdout)
	assert.Contains(t, r.stderr, "No records found")
}

// TestStatusBadInput: every bad flag or argument exits 2 naming it.
func TestStatusBadInput(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--state", "DON"}, "--state"},
		{[]string{"--backend", "pbs"}, "--backend"},
		{[]string{"-o", "xml"}, "--output"},
		{[]string{"--store", "etcd"}, "--store"},
		{[]string{"--watch=maybe"}, "--watch"},
		{[]string{"Bad_Name"}, "job name argument"},
		{[]string{"-A", "-n", "x"}, "--all-namespaces"},
	} {
		r := run(t, append([]string{"status", "--state-dir", dir}, c.args...)...)
		assert.Equal(t, 2, r.code, "%v: %s", c.args, r.stderr)
		assert.Contains(t, r.stderr, c.want, c.args)
	}
	// A pod's BRIDGE_BACKEND does not filter a listing.
	writeFileFixtures(t, dir)
	t.Setenv("BRIDGE_BACKEND", "ray")
	r := run(t, "status", "--state-dir", dir)
	assert.Len(t, firstColumn(r.stdout), len(statusFixtures))
}

// TestStatusFileWatch: a change to a state file is printed by --watch.
func TestStatusFileWatch(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	writeFileFixtures(t, dir)
	lines, stop := startWatch(t, "--state-dir", dir)
	defer stop()
	assert.Len(t, collect(t, lines, len(statusFixtures)), len(statusFixtures))

	s := record.NewFileStore(dir, "h-new")
	rec, err := s.Get(context.Background())
	require.NoError(t, err)
	rec.Data[record.KeyJobStatus] = "PENDING"
	_, err = s.Update(context.Background(), rec)
	require.NoError(t, err)
	got := collect(t, lines, 1)[0]
	assert.Equal(t, "h-new", got.Name)
	assert.Equal(t, "PENDING", got.State)
	assert.Equal(t, "MODIFIED", got.Event)

	require.NoError(t, record.NewFileStore(dir, "c-ray").Delete(context.Background()))
	got = collect(t, lines, 1)[0]
	assert.Equal(t, "c-ray", got.Name)
	assert.Equal(t, "DELETED", got.Event)
}

// TestStatusConfigMaps lists records in the real apiserver as the shipped
// Role's ServiceAccount (list and watch on configmaps are enough), then
// watches them change.
func TestStatusConfigMaps(t *testing.T) {
	clearEnv(t)
	admin := testkube.Client(t)
	ns := testkube.Namespace(t, admin)
	installShippedRBAC(t, admin, ns)
	kubeconfig := writeKubeconfig(t, testkube.ServiceAccountConfig(t, admin, ns, "bridge-runner"), ns)
	for _, f := range statusFixtures {
		createRecordCM(t, admin, ns, f)
	}
	// Not a record: no managed-by label.
	_, err := admin.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "other-bridge-cm"}, Data: map[string]string{"backend": "slurm"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	code, out := runBinary(t, "status", "--kubeconfig", kubeconfig)
	require.Equal(t, 0, code, out)
	assert.Equal(t, maskAges(alignGolden(statusGoldenFiles)), maskAges(out))
	assert.NotContains(t, out, "alice")

	rows := statusJSON(t, "--kubeconfig", kubeconfig, "-n", ns)
	require.Len(t, rows, len(statusFixtures))
	assertRowsMatchFixtures(t, rows)
	assert.Equal(t, "BridgeJob/a-slurm", rows[0].Owner)
	assert.Equal(t, ns, rows[0].Namespace)
	assert.WithinDuration(t, time.Now(), rows[0].Created, 5*time.Minute)

	lines, stop := startWatch(t, "--kubeconfig", kubeconfig, "--backend", "slurm")
	defer stop()
	assert.Len(t, collect(t, lines, 3), 3) // a-slurm, g-slurm, h-new
	cms := admin.CoreV1().ConfigMaps(ns)
	ctx := context.Background()
	cm, err := cms.Get(ctx, "h-new-bridge-cm", metav1.GetOptions{})
	require.NoError(t, err)
	cm.Data[record.KeyLogOffset] = "100" // no column changes: no line
	cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	cm.Data[record.KeyJobStatus], cm.Data[record.KeyID] = "RUNNING", "4244"
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	got := collect(t, lines, 1)[0]
	assert.Equal(t, statusRow{Name: "h-new", State: "RUNNING", JobID: "4244", Event: "MODIFIED"},
		statusRow{Name: got.Name, State: got.State, JobID: got.JobID, Event: got.Event})

	createRecordCM(t, admin, ns, statusFixture{"i-ray", false, map[string]string{"backend": "ray"}}) // filtered out
	createRecordCM(t, admin, ns, statusFixture{"j-slurm", false, map[string]string{"backend": "slurm"}})
	got = collect(t, lines, 1)[0]
	assert.Equal(t, "j-slurm", got.Name)
	assert.Equal(t, "ADDED", got.Event)
	require.NoError(t, cms.Delete(ctx, "a-slurm-bridge-cm", metav1.DeleteOptions{}))
	got = collect(t, lines, 1)[0]
	assert.Equal(t, "a-slurm", got.Name)
	assert.Equal(t, "DELETED", got.Event)
}

func createRecordCM(t *testing.T, c kubernetes.Interface, ns string, f statusFixture) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: record.ConfigMapName(f.job),
		Labels: map[string]string{record.LabelManagedBy: "bridge-runner", record.LabelJob: record.ConfigMapName(f.job)}}, Data: f.data}
	if f.bridgeJob {
		yes := true
		cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "bridgejob.ibm.com/v1alpha1", Kind: "BridgeJob",
			Name: f.job, UID: "6f1c2a57-0000-4000-8000-000000000001", Controller: &yes}}
	}
	_, err := c.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{})
	require.NoError(t, err)
}

func statusJSON(t *testing.T, args ...string) []statusRow {
	code, out := runBinaryStdout(t, append([]string{"status", "-o", "json"}, args...)...)
	require.Equal(t, 0, code, out)
	var list struct{ Items []statusRow }
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&list), out)
	return list.Items
}

func assertRowsMatchFixtures(t *testing.T, rows []statusRow) {
	for i, f := range statusFixtures {
		r := rows[i]
		assert.Equal(t, f.job, r.Name)
		assert.Equal(t, f.data["backend"], r.Backend)
		assert.Equal(t, f.data[record.KeyJobStatus], r.State)
		assert.Equal(t, f.data[record.KeyID], r.JobID)
		assert.Equal(t, f.data[record.KeyMessage], r.Message)
		assert.Equal(t, f.data[record.KeyReason], r.Reason)
		assert.Equal(t, f.data[record.KeyKill] == "true", r.Kill)
		assert.NotContains(t, r.Target, "alice")
		assert.Empty(t, r.Event)
	}
}

// runBinaryStdout runs the binary and returns its stdout alone.
func runBinaryStdout(t *testing.T, args ...string) (int, string) {
	cmd := exec.Command(binary, args...)
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if exitOf(err) != 0 {
		return exitOf(err), errb.String()
	}
	return 0, string(out)
}

// startWatch runs status -w -o json and returns its lines as rows.
func startWatch(t *testing.T, args ...string) (<-chan statusRow, func()) {
	cmd := exec.Command(binary, append([]string{"status", "-w", "-o", "json"}, args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	ch := make(chan statusRow, 64)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var r statusRow
			if json.Unmarshal(sc.Bytes(), &r) == nil {
				ch <- r
			}
		}
	}()
	return ch, func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_, _ = io.Copy(io.Discard, out)
		assert.NoError(t, cmd.Wait(), "an interrupted watch exits 0")
	}
}

func collect(t *testing.T, ch <-chan statusRow, n int) []statusRow {
	t.Helper()
	var got []statusRow
	timeout := time.After(20 * time.Second)
	for len(got) < n {
		select {
		case r, ok := <-ch:
			require.True(t, ok, "the watch ended after %d of %d lines", len(got), n)
			got = append(got, r)
		case <-timeout:
			require.FailNow(t, "no line from the watch", "after %d of %d lines", len(got), n)
		}
	}
	return got
}

func firstColumn(table string) []string {
	var out []string
	for i, l := range strings.Split(strings.TrimSpace(table), "\n") {
		if i > 0 && l != "" {
			out = append(out, strings.Fields(l)[0])
		}
	}
	return out
}

// alignGolden re-pads a hand-written table as the printer pads: each
// column three spaces wider than its widest cell.
func alignGolden(s string) string {
	var rows [][]string
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		rows = append(rows, regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(l), -1))
	}
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], len(c))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		for i, c := range r {
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-len(c)+3))
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// maskAges replaces the AGE column (the last) of a table.
func maskAges(s string) string {
	return regexp.MustCompile(`(?m)\S+$`).ReplaceAllStringFunc(s, func(a string) string {
		if a == "AGE" {
			return a
		}
		return "<age>"
	})
}
