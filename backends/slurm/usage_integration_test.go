package slurm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/testssh"
	"github.com/bridge-runner/bridge-runner/record"
)

// The efficiency tests run a job that burns CPU (a shell loop for 3 s on
// its one CPU) and one that sleeps 3 s on the Slurm with slurmdbd, and
// compare the backend's figures with what sacct, run here as the test's
// own subprocess against the same cluster, prints for the same jobs.
const (
	busyScript  = "#!/bin/sh\ntimeout 3 sh -c 'while :; do :; done'\nexit 0\n"
	sleepScript = "#!/bin/sh\nsleep 3\n"
)

// slurmCmd runs a Slurm command against one cluster: with its SLURM_CONF
// here (22.05 with slurmdbd), or in its root (26.05, chrooted).
type slurmCmd func(args ...string) *exec.Cmd

// slurmdbdCmd is the Slurm with slurmdbd's command runner; the test fails
// in CI without it.
func slurmdbdCmd(t *testing.T) slurmCmd {
	conf := os.Getenv(accountingEnv + "_CONF")
	if conf == "" {
		msg := "no real Slurm with slurmdbd: hack/slurmdbd-up.sh writes " + accountingEnv + "_CONF"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return func(args ...string) *exec.Cmd {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(os.Environ(), "SLURM_CONF="+conf)
		return cmd
	}
}

// gathers says whether the cluster records jobs' CPU time and memory
// (a JobAcctGatherType other than jobacct_gather/none).
func gathers(t *testing.T, run slurmCmd) bool {
	// slurmctld may be slow to answer while other tests flood it (the probe
	// benchmark's 5,000 jobs): scontrol gives up after its MessageTimeout,
	// so ask again with back-off, within two minutes.
	var out []byte
	var err error
	wait := record.Backoff{Initial: time.Second, Max: 15 * time.Second}
	for end := time.Now().Add(2 * time.Minute); ; {
		if out, err = run("scontrol", "show", "config").Output(); err == nil || time.Now().After(end) {
			break
		}
		time.Sleep(wait.Next())
	}
	require.NoError(t, err, "scontrol show config")
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && strings.TrimSpace(k) == "JobAcctGatherType" {
			v = strings.TrimSpace(v) // 26.05 says (null) for none
			return v != "jobacct_gather/none" && v != "(null)"
		}
	}
	t.Fatal("scontrol show config names no JobAcctGatherType")
	return false
}

// sacctSays is sacct's own lines for the job: its line and its steps'.
type sacctLine struct{ allocCPUs, elapsedRaw, timelimitRaw, totalCPU, maxRSS, reqMem string }

func sacctSays(t *testing.T, run slurmCmd, id string) (job sacctLine, steps []sacctLine) {
	// --noconvert: MaxRSS exact, as slurmdbd keeps it (without it 22.05
	// printed 4718592 bytes as "4.50M").
	out, err := run("sacct", "--parsable2", "--noheader", "--noconvert", "-j", id, "-o", "JobID,AllocCPUS,ElapsedRaw,TimelimitRaw,TotalCPU,MaxRSS,ReqMem").Output()
	require.NoError(t, err, "sacct")
	t.Logf("sacct -j %s:\n%s", id, out)
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "|")
		require.Len(t, f, 7, line)
		l := sacctLine{f[1], f[2], f[3], f[4], f[5], f[6]}
		if f[0] == id {
			job = l
		} else {
			steps = append(steps, l)
		}
	}
	return job, steps
}

// checkRequestAgainstSacct compares the job's time limit and memory with
// sacct's. slurmdbd 22.05, busy with other users' jobs (hack/noise.sh's
// short ones), kept a 3 s job's record without them: TimelimitRaw empty and
// ReqMem NO_VAL (18446744073709551616.00M). The figures then claim none;
// only when sacct's own line says so.
func checkRequestAgainstSacct(t assert.TestingT, job sacctLine, u backends.Usage) {
	if job.timelimitRaw == "" {
		assert.Zero(t, u.TimeLimit, "no TimelimitRaw in slurmdbd: no time limit claimed")
	} else {
		assert.Equal(t, job.timelimitRaw, strconv.Itoa(int(u.TimeLimit/time.Minute)), "TimelimitRaw")
	}
	if strings.HasPrefix(job.reqMem, "18446744073709551") { // NO_VAL64, however 22.05 prints it
		assert.Zero(t, u.ReqMemBytes, "ReqMem NO_VAL in slurmdbd: no memory request claimed")
	} else {
		assert.Equal(t, job.reqMem, fmt.Sprintf("%dM", u.ReqMemBytes>>20), "ReqMem")
	}
}

// cpuSeconds reads sacct's TotalCPU the plain way: MM:SS.mmm or HH:MM:SS.
func cpuSeconds(t *testing.T, s string) float64 {
	total := 0.0
	for _, p := range strings.Split(s, ":") {
		f, err := strconv.ParseFloat(p, 64)
		require.NoError(t, err, "TotalCPU %q", s)
		total = total*60 + f
	}
	return total
}

// checkAgainstSacct compares the figures with sacct's for the same job.
func checkAgainstSacct(t *testing.T, run slurmCmd, id string, u backends.Usage, gathered bool) {
	job, steps := sacctSays(t, run, id)
	assert.Equal(t, 1, u.Tasks)
	assert.Equal(t, job.allocCPUs, strconv.Itoa(u.CPUs), "AllocCPUS")
	assert.Equal(t, job.elapsedRaw, strconv.Itoa(int(u.Elapsed/time.Second)), "ElapsedRaw")
	checkRequestAgainstSacct(t, job, u)
	assert.InDelta(t, cpuSeconds(t, job.totalCPU), u.CPUSeconds, 0.0015, "TotalCPU %s", job.totalCPU)
	peak := int64(0) // bytes, the largest step's
	for _, s := range steps {
		if s.maxRSS != "" { // with --noconvert: bytes, or KiB with a K (as slurmdbd keeps it)
			text, unit := strings.TrimSuffix(s.maxRSS, "K"), int64(1)
			if text != s.maxRSS {
				unit = 1024
			}
			n, err := strconv.ParseInt(text, 10, 64)
			require.NoError(t, err, "MaxRSS %q", s.maxRSS)
			peak = max(peak, n*unit)
		}
	}
	if gathered {
		assert.Equal(t, peak, u.MaxRSSBytes, "MaxRSS of the largest step, in bytes")
	} else {
		assert.Zero(t, peak, "a cluster that gathers nothing has no MaxRSS")
		assert.Zero(t, u.MaxRSSBytes)
	}
}

// usageOf waits until the accounting knows the ended job.
func usageOf(t *testing.T, acct backends.Accountant, id string) backends.Usage {
	deadline := time.Now().Add(time.Minute)
	for {
		u, err := acct.Usage(context.Background(), id)
		if err == nil {
			return u
		}
		require.True(t, errors.Is(err, backends.ErrNotFound) || errors.Is(err, backends.ErrTransient), "%v", err)
		require.True(t, time.Now().Before(deadline), "the accounting did not know job %s within a minute: %v", id, err)
		time.Sleep(500 * time.Millisecond)
	}
}

// checkEfficiency: the busy job's CPU efficiency is high, the sleeper's
// low, when the cluster gathers CPU time; none is claimed when it does not.
func checkEfficiency(t *testing.T, busy, sleeper backends.Usage, gathered bool) {
	eb, es := record.NewEfficiency(busy, time.Time{}, time.Time{}), record.NewEfficiency(sleeper, time.Time{}, time.Time{})
	t.Logf("busy: %s\nsleeper: %s", eb, es)
	// A limit or memory request slurmdbd did not keep (see
	// checkRequestAgainstSacct, which held the figures to sacct's) gives
	// no efficiency against it.
	if busy.TimeLimit > 0 {
		require.NotNil(t, eb.Time, "elapsed against the time limit")
		assert.Greater(t, *eb.Time, 0.0)
	} else {
		assert.Nil(t, eb.Time, "no time limit known: no time efficiency claimed")
	}
	require.NotNil(t, eb.QueueWaitSeconds)
	if !gathered {
		assert.Nil(t, eb.CPU, "a cluster with jobacct_gather/none has no CPU time: no efficiency is claimed")
		return
	}
	require.NotNil(t, eb.CPU)
	require.NotNil(t, es.CPU)
	// Relative bounds: the machine is shared (a load of 60 on 2 cores was
	// seen), so the loop may get a tenth of its CPU; the sleeper uses
	// milliseconds whatever the load.
	assert.Greater(t, *eb.CPU, 5*(*es.CPU), "the busy job against the sleeper")
	assert.Less(t, *es.CPU, 0.1, "the sleeper")
	if busy.ReqMemBytes > 0 {
		require.NotNil(t, eb.Memory)
		assert.Greater(t, *eb.Memory, 0.0)
	} else {
		assert.Nil(t, eb.Memory, "no memory request known: no memory efficiency claimed")
	}
}

// TestRealSlurmUsageREST: slurmdbd's figures over REST equal sacct's, on
// Slurm 22.05 (/slurmdb/v0.0.38), 24.11 with slurmdbd (v0.0.40-v0.0.42: the
// same jobs read over each) and 26.05 (v0.0.45). The shared 24.11 keeps no
// accounting (hack/slurm2411-up.sh starts no slurmdbd); its twin of
// hack/slurm2411dbd-up.sh does.
func TestRealSlurmUsageREST(t *testing.T) {
	t.Run("22.05+slurmdbd", func(t *testing.T) {
		run := slurmdbdCmd(t)
		rs := realSlurmEnv(t, accountingEnv)
		require.NotNil(t, rs, "%s_URL and _CREDS", accountingEnv)
		testUsageREST(t, rs, run)
	})
	t.Run("24.11+slurmdbd", func(t *testing.T) {
		rs := chrootedSlurm(t, slurm2411dbdEnv, "hack/slurm2411dbd-up.sh")
		testUsageREST(t, rs, chrootCmd(rs.root), "v0.0.40", "v0.0.41")
	})
	t.Run("26.05", func(t *testing.T) {
		rs := chrootedSlurm(t, "BRIDGE_TEST_SLURM2605", "hack/slurm2605-up.sh")
		testUsageREST(t, rs, chrootCmd(rs.root))
	})
}

// slurm2411dbdEnv names the variables of the Slurm 24.11 with slurmdbd.
const slurm2411dbdEnv = "BRIDGE_TEST_SLURM2411DBD"

// chrootedSlurm is the cluster of env that runs in a root here; the test
// fails in CI without it.
func chrootedSlurm(t *testing.T, env, up string) *realSlurm {
	rs := realSlurmEnv(t, env)
	if rs == nil || rs.root == "" {
		msg := fmt.Sprintf("no real Slurm: %s writes %s_URL, _CREDS and _ROOT", up, env)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return rs
}

// chrootCmd runs a Slurm command in the cluster's root, with its own
// /etc/slurm/slurm.conf: the suite's env names 22.05's (SLURM_CONF, a host
// path), which must not reach it.
func chrootCmd(root string) slurmCmd {
	return func(args ...string) *exec.Cmd {
		cmd := exec.Command("/usr/sbin/chroot", append([]string{root}, args...)...)
		cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "SLURM_CONF=") })
		return cmd
	}
}

// testUsageREST runs the busy job and the sleeper through the backend that
// discovers the newest API, and reads their figures over it and over each
// older API of apis too (pinned through the URL); each equals sacct's.
func testUsageREST(t *testing.T, rs *realSlurm, run slurmCmd, apis ...string) {
	gathered := gathers(t, run)
	b, _ := rs.backend(t, nil)
	readers := map[string]*Backend{"newest": b}
	for _, api := range apis {
		pinned := *rs
		pinned.url = strings.TrimRight(rs.url, "/") + "/slurm/" + api
		readers[api], _ = pinned.backend(t, nil)
	}
	usage := map[string]backends.Usage{}
	for name, script := range map[string]string{"busy": busyScript, "sleeper": sleepScript} {
		key := newKey()
		props := json.RawMessage(fmt.Sprintf(`{"standard_output":%q,"time_limit":2,"memory_per_node":64}`, outPath(key, "out")))
		id, err := b.Submit(context.Background(), backends.Job{Name: "usage-" + name, Key: key, Script: script, Properties: props})
		require.NoError(t, err)
		t.Cleanup(func() { os.Remove(filepath.Join(rs.root, outPath(key, "out"))) })
		st, _ := waitFor(t, b, id, 2*time.Minute, final)
		require.Equal(t, backends.Done, st.State, st.Message)
		for api, r := range readers {
			u := usageOf(t, r, id)
			t.Run(name+"-"+api, func(t *testing.T) { checkAgainstSacct(t, run, id, u, gathered) })
			usage[name] = u
		}
	}
	checkEfficiency(t, usage["busy"], usage["sleeper"], gathered)
}

// TestRealSlurmUsageSSH: sacct's figures over SSH equal sacct's run here,
// on 22.05 with slurmdbd (from a login node whose sessions use that
// cluster: a private sshd copied from the shared one, with its SLURM_CONF)
// and on 24.11 with slurmdbd (its login node, an sshd in its root).
func TestRealSlurmUsageSSH(t *testing.T) {
	t.Run("22.05+slurmdbd", func(t *testing.T) {
		run := slurmdbdCmd(t)
		conf := os.Getenv(accountingEnv + "_CONF")
		srv := testssh.Default(t)
		d := testssh.StartCustom(t, srv, testssh.Config{Set: map[string]string{"SetEnv": "SLURM_CONF=" + conf}})
		url := fmt.Sprintf("ssh://%s@%s", srv.User, d.Addr())
		creds := testssh.Creds(t, srv.CredsDir)
		kh, _ := creds.Get("known_hosts")
		_, port, _ := strings.Cut(srv.Addr, ":")
		creds.Set("known_hosts", strings.Replace(kh, "]:"+port+" ", fmt.Sprintf("]:%d ", d.Port), 1))
		testUsageSSH(t, url, creds, run)
	})
	t.Run("24.11+slurmdbd", func(t *testing.T) {
		rs := chrootedSlurm(t, slurm2411dbdEnv, "hack/slurm2411dbd-up.sh")
		srv := testssh.Env(t, slurm2411dbdEnv+"_SSH", "hack/slurm2411dbd-up.sh starts its login node")
		testUsageSSH(t, srv.URL, testssh.Creds(t, srv.CredsDir), chrootCmd(rs.root))
	})
}

// testUsageSSH runs the busy job and the sleeper through the SSH backend at
// url and checks its figures against sacct's (run).
func testUsageSSH(t *testing.T, url string, creds backends.Credentials, run slurmCmd) {
	gathered := gathers(t, run)
	be, err := New(backends.Config{URL: url, Credentials: creds})
	require.NoError(t, err)
	b := be.(*SSHBackend)
	t.Cleanup(func() { b.Close() })
	usage := map[string]backends.Usage{}
	for name, script := range map[string]string{"busy": busyScript, "sleeper": sleepScript} {
		props := json.RawMessage(`{"time":"2","mem":"64M"}`)
		id, err := b.Submit(testssh.Ctx(t, time.Minute), backends.Job{Name: "usage-" + name, Key: sshKey(t), Script: script, Properties: props})
		require.NoError(t, err)
		st := sshFollow(t, b, id, backends.Done)
		require.Equal(t, backends.Done, st.State, st.Message)
		usage[name] = usageOf(t, b, id)
		t.Run(name, func(t *testing.T) { checkAgainstSacct(t, run, id, usage[name], gathered) })
	}
	checkEfficiency(t, usage["busy"], usage["sleeper"], gathered)
}
