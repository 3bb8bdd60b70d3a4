package slurm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/sshexec"
)

// parityScript carries its resources in #SBATCH lines, as users' batch
// scripts do. --begin keeps the job pending: nothing runs, and the jobs of
// both sides are compared as slurmctld holds them.
const parityScript = `#!/bin/bash
# a batch script as users write them
#SBATCH --job-name=parity
#SBATCH -p debug
#SBATCH -N 1
#SBATCH --ntasks 1
#SBATCH --cpus-per-task=2
#SBATCH --mem=64M
#SBATCH -t 1:30
#SBATCH --time-min=1
#SBATCH -D /tmp
#SBATCH -o /tmp/parity-%j.out
#SBATCH -e /tmp/parity-%j.err
#SBATCH --exclusive
#SBATCH --mail-type=END,FAIL
#SBATCH --mail-user=nobody@example.org
#SBATCH --no-requeue
#SBATCH --nice=5
#SBATCH --ntasks-per-node=1
#SBATCH --begin=now+1hours

sleep 1
`

// parityFields are the scontrol show job fields that must agree.
var parityFields = []string{"JobName", "Partition", "NumNodes", "NumCPUs", "NumTasks", "CPUs/Task", "TimeLimit", "TimeMin",
	"MinMemoryNode", "OverSubscribe", "MailType", "MailUser", "Requeue", "Nice", "WorkDir", "StdOut", "StdErr"}

// sbatchSide submits a script the way sbatch users do and shows jobs with
// that cluster's scontrol.
type sbatchSide struct {
	submit func(t *testing.T, script, key string) string
	show   func(t *testing.T, id string) map[string]string
	cancel func(id string)
	// run runs one of that cluster's commands as the job user.
	run func(t *testing.T, stdin string, args ...string) string
}

// TestRealSbatchDirectivesParity: the same script gives the same job over
// REST as with sbatch: on 22.05 against the suite's sshd (whose user runs
// 22.05's commands) through the SSH flavour, and on 24.11 (every API it
// serves) against 24.11's own sbatch in its chroot. And no API version
// answers the submit with a warning (24.11 warns of nodes sent as a number).
func TestRealSbatchDirectivesParity(t *testing.T) {
	for _, rs := range realSlurms(t) {
		t.Run(rs.name, func(t *testing.T) {
			side := paritySide(t, rs)
			var logs bytes.Buffer
			b, _ := rs.backend(t, nil)
			b.log = slog.New(slog.NewTextHandler(&logs, nil))
			ctx := context.Background()
			key := newKey()
			restID, err := b.Submit(ctx, backends.Job{Name: "step", Key: key, Script: parityScript})
			require.NoError(t, err)
			t.Cleanup(func() { _ = b.Cancel(context.Background(), restID) })
			sbID := side.submit(t, parityScript, newKey())
			t.Cleanup(func() { side.cancel(sbID) })
			require.NotContains(t, logs.String(), "slurmrestd warning", "the submit must draw no warning")

			// The first thing a Slurm user types finds both.
			named := strings.Fields(side.run(t, "", "squeue", "--noheader", "--name=parity", "--format=%i"))
			require.Contains(t, named, restID, "squeue -n parity")
			require.Contains(t, named, sbID, "squeue -n parity")

			rest, sb := side.show(t, restID), side.show(t, sbID)
			for _, f := range parityFields {
				r, s := rest[f], sb[f]
				if f == "StdOut" || f == "StdErr" { // %j is each job's own id
					r, s = strings.ReplaceAll(r, "-"+restID+".", "-ID."), strings.ReplaceAll(s, "-"+sbID+".", "-ID.")
				}
				if r != s {
					t.Errorf("%s: REST %q, sbatch %q", f, r, s)
				}
			}
			t.Logf("REST job %s: %s", restID, pick(rest))
			// --begin=now+1hours: the same hour, give or take the seconds
			// between the two submits.
			rb, sbb := slurmTime(rest["StartTime"]), slurmTime(sb["StartTime"])
			require.False(t, rb.IsZero(), "REST StartTime %q", rest["StartTime"])
			require.InDelta(t, float64(sbb.Unix()), float64(rb.Unix()), 120, "StartTime REST %s sbatch %s", rb, sbb)
		})
	}
}

func pick(f map[string]string) string {
	var out []string
	for _, k := range parityFields {
		out = append(out, k+"="+f[k])
	}
	return strings.Join(out, " ")
}

// paritySide is the sbatch of the cluster rs speaks to.
func paritySide(t *testing.T, rs *realSlurm) sbatchSide {
	t.Helper()
	if rs.root == "" { // 22.05 on this machine: the suite's sshd runs its commands
		b := sshBackend(t)
		return sbatchSide{
			submit: func(t *testing.T, script, key string) string {
				id, err := b.Submit(context.Background(), backends.Job{Name: "step", Key: key, Script: script})
				require.NoError(t, err)
				return id
			},
			show: func(t *testing.T, id string) map[string]string {
				res, err := b.ssh.Run(context.Background(), sshexec.Cmd{Args: []string{"scontrol", "show", "job", "--oneliner", id}})
				require.NoError(t, err)
				require.Zero(t, res.ExitCode, "%s", res.Stderr)
				return parseScontrol(string(res.Stdout))
			},
			cancel: func(id string) { _ = b.Cancel(context.Background(), id) },
			run: func(t *testing.T, stdin string, args ...string) string {
				res, err := b.ssh.Run(context.Background(), sshexec.Cmd{Args: args, Stdin: strings.NewReader(stdin)})
				require.NoError(t, err)
				require.Zero(t, res.ExitCode, "%v: %s", args, res.Stderr)
				return string(res.Stdout)
			},
		}
	}
	return chrootSide(t, rs.root)
}

// chrootSide runs the chroot's own Slurm commands (24.11) as the job user.
func chrootSide(t *testing.T, root string) sbatchSide {
	t.Helper()
	run := func(stdin string, args ...string) (string, error) {
		cmd := exec.Command("/usr/sbin/chroot", append([]string{"--userspec=" + chrootUser(t, root), root}, args...)...)
		cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/bin", "HOME=/tmp"}
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	return sbatchSide{
		submit: func(t *testing.T, script, key string) string {
			out, err := run(script, "sbatch", "--parsable")
			require.NoError(t, err, out)
			id := strings.TrimSpace(out)
			_, err = strconv.Atoi(id)
			require.NoError(t, err, out)
			return id
		},
		show: func(t *testing.T, id string) map[string]string {
			out, err := run("", "scontrol", "show", "job", "--oneliner", id)
			require.NoError(t, err, out)
			return parseScontrol(out)
		},
		cancel: func(id string) { _, _ = run("", "scancel", id) },
		run: func(t *testing.T, stdin string, args ...string) string {
			out, err := run(stdin, args...)
			require.NoError(t, err, out)
			return out
		},
	}
}

var idLine = regexp.MustCompile(`^\d+$`)

func chrootUser(t *testing.T, root string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("running the chroot's sbatch needs root")
	}
	var ids []string
	for _, flag := range []string{"-u", "-g"} {
		out, err := exec.Command("/usr/sbin/chroot", root, "id", flag, "bridge").Output()
		require.NoError(t, err)
		id := strings.TrimSpace(string(out))
		require.Regexp(t, idLine, id)
		ids = append(ids, id)
	}
	return fmt.Sprintf("%s:%s", ids[0], ids[1])
}

// TestRealFindByKeyAdoptsOldNames: a job submitted before the upgrade, named
// "<key>-<name>" (and, were its comment lost, by that name alone), is still
// found by its key, over REST and over SSH; and a job of today is found by
// its comment while it keeps its user's name.
func TestRealFindByKeyAdoptsOldNames(t *testing.T) {
	for _, rs := range realSlurms(t) {
		if strings.Contains(rs.name, "-v0.0.") {
			continue // the API version does not matter to the name
		}
		t.Run(rs.name, func(t *testing.T) {
			b, _ := rs.backend(t, nil)
			ctx := context.Background()
			key := newKey()
			// As an older bridge-runner submitted it, minus the comment.
			body := map[string]any{"job": map[string]any{"name": key + "-old", "current_working_directory": "/tmp",
				"environment": map[string]string{"PATH": DefaultPath}, "begin_time": "now+3600"}}
			v, err := b.version(ctx)
			require.NoError(t, err)
			if v.scriptInJob() {
				body["job"].(map[string]any)["script"] = "#!/bin/sh\ntrue\n"
			} else {
				body["script"] = "#!/bin/sh\ntrue\n"
			}
			if !v.envAsObject() {
				body["job"].(map[string]any)["environment"] = []string{"PATH=" + DefaultPath}
				body["job"].(map[string]any)["begin_time"] = map[string]any{"set": true, "number": time.Now().Add(time.Hour).Unix()}
			}
			r, err := b.do(ctx, "POST", b.apiPath("job/submit"), body)
			require.NoError(t, err)
			require.Equal(t, 200, r.status, "%s", r.body)
			var sr submitResponse
			require.NoError(t, json.Unmarshal(r.body, &sr))
			old := sr.JobID.String()
			t.Cleanup(func() { _ = b.Cancel(context.Background(), old) })
			found, err := b.FindByKey(ctx, key)
			require.NoError(t, err)
			require.Equal(t, old, found, "the job of the old naming is adopted")

			if rs.root != "" {
				return // no SSH to the 24.11 cluster
			}
			sb := sshBackend(t)
			key2 := newKey()
			res, err := sb.ssh.Run(ctx, sshexec.Cmd{Args: []string{"sbatch", "--parsable", "--begin=now+1hour", "--job-name=" + key2 + "-old", "--chdir=/tmp"},
				Stdin: strings.NewReader("#!/bin/sh\ntrue\n")})
			require.NoError(t, err)
			require.Zero(t, res.ExitCode, "%s", res.Stderr)
			oldSSH := strings.TrimSpace(string(res.Stdout))
			t.Cleanup(func() { _ = sb.Cancel(context.Background(), oldSSH) })
			found, err = sb.FindByKey(ctx, key2)
			require.NoError(t, err)
			require.Equal(t, oldSSH, found, "over SSH too")
		})
	}
}

// TestRealNumbersDrawNoWarning: jobproperties as IBM's samples and our
// examples give them (NodesNumber "1", nodes 1, memory_per_node 64) are
// sent in each version's type: no slurmrestd warning on submit.
func TestRealNumbersDrawNoWarning(t *testing.T) {
	for _, rs := range realSlurms(t) {
		t.Run(rs.name, func(t *testing.T) {
			for _, props := range []string{`{"NodesNumber":"1","Tasks":"1"}`, `{"nodes":1,"memory_per_node":64,"time_limit":5}`} {
				var logs bytes.Buffer
				b, _ := rs.backend(t, nil)
				b.log = slog.New(slog.NewTextHandler(&logs, nil))
				id, err := b.Submit(context.Background(), backends.Job{Name: "numbers", Key: newKey(), Script: "#!/bin/sh\ntrue\n", Properties: json.RawMessage(props)})
				require.NoError(t, err)
				t.Cleanup(func() { _ = b.Cancel(context.Background(), id) })
				require.NotContains(t, logs.String(), "slurmrestd warning", props)
			}
		})
	}
}

// TestRealSSHEnvPath: IBM's envPath and envLibPath give the job PATH and
// LD_LIBRARY_PATH over SSH as over REST, so a record moves between them
// unchanged.
func TestRealSSHEnvPath(t *testing.T) {
	b := sshBackend(t)
	ctx := context.Background()
	id, err := b.Submit(ctx, backends.Job{Name: "envpath", Key: newKey(), Script: "#!/bin/sh\necho \"$PATH|$LD_LIBRARY_PATH\"\n",
		Properties: json.RawMessage(`{"envPath":"/opt/ibm/bin:/usr/bin:/bin","envLibPath":"/opt/ibm/lib"}`)})
	require.NoError(t, err)
	st := sshFollow(t, b, id, backends.Done)
	require.Equal(t, backends.Done, st.State, "%+v", st)
	var out bytes.Buffer
	_, err = b.ReadLogs(ctx, id, 0, &out)
	require.NoError(t, err)
	require.Equal(t, "/opt/ibm/bin:/usr/bin:/bin|/opt/ibm/lib\n", out.String())
}
