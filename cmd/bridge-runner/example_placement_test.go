package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/bridge-runner/bridge-runner/record"
)

// exampleSite maps the site-specific values of examples/placement (the
// two clusters' URLs, B's Secret's mount and the partitions) onto the
// suite's two real Slurms; everything else runs as shipped.
func exampleSite(old, young slurmCluster) *strings.Replacer {
	return strings.NewReplacer(
		"https://slurm-a.example.org:6820", old.url,
		"https://slurm-b.example.org:6820", young.url,
		"/targets/hpc-b", young.creds,
		`"partition": "batch"`, `"partition": "short"`,
		`"partition": "compute"`, `"partition": "debug"`,
	)
}

// exampleArgs reads an Argo example's workflow parameters and its step's
// arguments into invoke's flags: each parameter is the flag whose input
// name it carries (record.Fields), the step's arguments taking the
// workflow's values through {{workflow.parameters.X}}.
func exampleArgs(t *testing.T, path string, site *strings.Replacer) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	type param struct{ Name, Value string }
	var wf struct {
		Spec struct {
			Arguments struct{ Parameters []param }
			Templates []struct {
				DAG struct {
					Tasks []struct {
						Arguments struct{ Parameters []param }
					}
				}
			}
		}
	}
	require.NoError(t, yaml.Unmarshal([]byte(site.Replace(string(raw))), &wf))
	wfParams := map[string]string{}
	for _, p := range wf.Spec.Arguments.Parameters {
		wfParams[p.Name] = p.Value
	}
	flags := map[string]string{}
	for _, f := range record.Fields {
		flags[f.InputName()] = f.Flag
	}
	var args []string
	for _, tpl := range wf.Spec.Templates {
		for _, task := range tpl.DAG.Tasks {
			for _, p := range task.Arguments.Parameters {
				v := p.Value
				if name, ok := strings.CutPrefix(v, "{{workflow.parameters."); ok {
					v = wfParams[strings.TrimSuffix(name, "}}")]
				}
				if flag, ok := flags[p.Name]; ok {
					args = append(args, "--"+flag, v)
				}
			}
		}
	}
	require.NotEmpty(t, args, "%s: no step arguments found", path)
	return args
}

// TestExamplePlacementRunsOnBothClusters runs examples/placement's
// workflow, as shipped but for the site's URLs, Secret mount and
// partitions, against the suite's Slurm 22.05 (hpc-a, the job's own URL)
// and 24.11 (hpc-b: a URL of its own and no backend, which inherits the
// job's). Both targets are probed and usable; with hpc-a's partition
// full the job runs on hpc-b, and its output says where. The second
// cluster was skipped at every run before targets inherited the job's
// backend.
func TestExamplePlacementRunsOnBothClusters(t *testing.T) {
	clearEnv(t)
	old, young := twoSlurms(t)
	args := exampleArgs(t, "../../examples/placement/workflow.yaml", exampleSite(old, young))
	fill(t, old, 3) // hpc-a's partition short: two running on its two CPUs, one waiting

	// As the workflow's template runs it: create-configmap writes the
	// description, invoke reads it from the record alone (no --backend on
	// its command line to fall back on).
	state := t.TempDir()
	res := run(t, append([]string{"create-configmap", "--state-dir", state, "--job-name", "example-placement", "--update-interval", "1"}, args...)...)
	require.Equal(t, 0, res.code, "%s\n%s", res.stdout, res.stderr)
	res = run(t, "invoke", "--state-dir", state, "--job-name", "example-placement", "--credentials-dir", old.creds, "--watcher=false")
	require.Equal(t, 0, res.code, "%s\n%s", res.stdout, res.stderr)
	rec, err := record.NewFileStore(state, "example-placement").Get(context.Background())
	require.NoError(t, err)
	t.Logf("placement: %s", rec.Data[record.KeyPlacement])
	p, err := record.ParsePlaced(rec.Data[record.KeyPlacement])
	require.NoError(t, err)
	require.NotNil(t, p)
	require.Len(t, p.Probes, 2)
	for _, pr := range p.Probes {
		assert.Empty(t, pr.Skipped, "target %s is usable", pr.Target)
		assert.NotNil(t, pr.TotalCPUs, "target %s answered its probe", pr.Target)
	}
	assert.Equal(t, "hpc-b", p.Target, "hpc-a's partition is full; the job starts now on hpc-b")
	assert.Equal(t, "slurm", p.Backend, "hpc-b inherits the job's backend")
	assert.Equal(t, "hpc-b", res.summary["target"])
	assert.Equal(t, "DONE", res.summary["status"])
	assert.Equal(t, rec.Data[record.KeyID], jobWithKey(t, young, rec), "the recorded job is 24.11's")
	assert.Empty(t, jobWithKey(t, old, rec), "nothing was submitted to 22.05")
	// The job's output, where 24.11 (chrooted on this machine) wrote it:
	// the example's working directory /tmp, Slurm's default name.
	root := os.Getenv("BRIDGE_TEST_SLURM2411_ROOT")
	require.NotEmpty(t, root, "BRIDGE_TEST_SLURM2411_ROOT (hack/slurm2411-up.sh writes it) says where 24.11's files are")
	out := filepath.Join(root, "tmp", "slurm-"+rec.Data[record.KeyID]+".out")
	var raw []byte
	require.Eventually(t, func() bool { raw, err = os.ReadFile(out); return err == nil && len(raw) > 0 }, 30*time.Second, 500*time.Millisecond, out)
	t.Cleanup(func() { _ = os.Remove(out) })
	assert.Contains(t, string(raw), "in partition debug", "the job ran in hpc-b's partition")
}
