package slurm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/testssh"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

func TestBuildSbatch(t *testing.T) {
	j := backends.Job{Name: "n", Key: "k1", Script: "#!/bin/sh\n",
		Properties: json.RawMessage(`{"partition":"debug","time_limit":"10:00","exclusive":true,"requeue":false,"cpus_per_task":2,"Queue":"q2","slurmJobName":"mine"}`)}
	s, err := buildSbatch(j)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(s.args, " ")
	for _, want := range []string{"--partition=q2", "--time=10:00", "--exclusive", "--cpus-per-task=2", "--comment=k1", "--job-name=mine"} {
		if !strings.Contains(got, want) {
			t.Errorf("sbatch options %q lack %q", got, want)
		}
	}
	if strings.Contains(got, "requeue") {
		t.Errorf("false must leave the option out: %q", got)
	}
	for _, bad := range []string{`{"comment":"x"}`, `{"export":"ALL"}`, `{"bad key":1}`, `{"x":{"a":1}}`, `[1]`, `{"envPath":"a,b"}`, `{"envPath":1}`} {
		_, err := buildSbatch(backends.Job{Key: "k", Script: "#!/bin/sh\n", Properties: json.RawMessage(bad)})
		testutil.RequireFieldError(t, err, "jobproperties")
	}
	_, err = buildSbatch(backends.Job{Key: "k", Script: "echo no shebang"})
	testutil.RequireFieldError(t, err, "jobdata.jobScript")
}

// TestSbatchNamesAndEnvironment: the job keeps its user's name (squeue -n
// finds it), the key goes in the comment, and IBM's envPath/envLibPath give
// the job PATH and LD_LIBRARY_PATH over SSH as over REST.
func TestSbatchNamesAndEnvironment(t *testing.T) {
	args := func(script, props string) string {
		t.Helper()
		s, err := buildSbatch(backends.Job{Name: "step", Key: "k1", Script: script, Properties: json.RawMessage(props)})
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(s.args, " ")
	}
	for _, c := range []struct{ script, props, want, not string }{
		{"#!/bin/sh\n", `{}`, "--comment=k1 --job-name=step", "k1-"},
		{"#!/bin/sh\n#SBATCH -J mine\n", `{}`, "--comment=k1", "--job-name"}, // sbatch reads the script's
		{"#!/bin/sh\n#SBATCH -J mine\n", `{"slurmJobName":"props"}`, "--job-name=props", "mine"},
		{"#!/bin/sh\n", `{"slurmJobName":""}`, "--job-name=step", "--job-name= "},
		{"#!/bin/sh\n", `{"envPath":"/opt/x/bin:/usr/bin:/bin","envLibPath":"/opt/x/lib"}`,
			"--export=ALL,PATH=/opt/x/bin:/usr/bin:/bin,LD_LIBRARY_PATH=/opt/x/lib", "envPath"},
		{"#!/bin/sh\n", `{"envPath":""}`, "--comment", "--export"},
	} {
		got := args(c.script, c.props)
		if !strings.Contains(got, c.want) || strings.Contains(got, c.not) {
			t.Errorf("%q %s: sbatch %q, want %q and not %q", c.script, c.props, got, c.want, c.not)
		}
	}
	_, err := buildSbatch(backends.Job{Key: "k", Script: "#!/bin/sh\n#SBATCH --export=NONE\n", Properties: json.RawMessage(`{"envPath":"/bin"}`)})
	testutil.RequireFieldError(t, err, "jobproperties")
}

// TestScontrolSharesTheStateTable: the states scontrol prints go through
// the REST backend's table.
func TestScontrolSharesTheStateTable(t *testing.T) {
	for state, want := range map[string]backends.State{
		"PENDING": backends.Pending, "RUNNING": backends.Running, "COMPLETED": backends.Done, "CANCELLED": backends.Killed,
		"TIMEOUT": backends.Failed, "OUT_OF_MEMORY": backends.Failed, "NODE_FAIL": backends.Failed, "COMPLETING": backends.Running,
		"SUSPENDED": backends.Suspended, "PREEMPTED": backends.Failed, "REQUEUED": backends.Pending,
	} {
		f := parseScontrol("JobId=7 JobName=a b JobState=" + state + " Reason=None ExitCode=0:9 WorkDir=/home/u/my dir StdOut=/o")
		st := scontrolStatus("7", f)
		if st.State != want {
			t.Errorf("%s: %s, want %s", state, st.State, want)
		}
		if f["WorkDir"] != "/home/u/my dir" || f["JobName"] != "a b" {
			t.Errorf("values with spaces: %q %q", f["WorkDir"], f["JobName"])
		}
		if st.State.Final() && (st.ExitCode == nil || *st.ExitCode != 137) {
			t.Errorf("%s: killed by signal 9 must be exit code 137, got %v", state, st.ExitCode)
		}
	}
}

func sshBackend(t *testing.T) *SSHBackend {
	t.Helper()
	srv := testssh.Default(t)
	be, err := New(backends.Config{URL: srv.URL, Credentials: testssh.Creds(t, srv.CredsDir)})
	if err != nil {
		t.Fatal(err)
	}
	b, ok := be.(*SSHBackend)
	if !ok {
		t.Fatalf("an ssh:// resourceURL gave %T", be)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func sshFollow(t *testing.T, b *SSHBackend, id string, want backends.State) backends.Status {
	t.Helper()
	ctx := testssh.Ctx(t, 2*time.Minute)
	for {
		st, err := b.Status(ctx, id)
		if err != nil {
			t.Fatalf("status of %s: %v", id, err)
		}
		if st.State == want || st.State.Final() {
			return st
		}
		select {
		case <-ctx.Done():
			t.Fatalf("job %s still %s", id, st.State)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func sshKey(t *testing.T) string { return fmt.Sprintf("k%d", time.Now().UnixNano()) }

func TestSSHDoneWithFilesAndLogs(t *testing.T) {
	b := sshBackend(t)
	ctx := testssh.Ctx(t, time.Minute)
	j := backends.Job{Name: "ssh-done", Key: sshKey(t),
		Script:     "#!/bin/sh\necho \"params: $BRIDGE_JOB_PARAMETERS\"\ncat in.txt\necho out > result.txt\n",
		Parameters: json.RawMessage(`{"q":"'$(id)'"}`),
		Inputs: []backends.InputFile{{Name: "in.txt", Open: func(context.Context) (io.ReadCloser, error) {
			return io.NopCloser(strings.NewReader("input\n")), nil
		}}}}
	if err := b.Validate(j); err != nil {
		t.Fatal(err)
	}
	id, err := b.Submit(ctx, j)
	if err != nil {
		t.Fatal(err)
	}
	if found, err := b.FindByKey(ctx, j.Key); err != nil || found != id {
		t.Fatalf("FindByKey: %q %v, want %s", found, err, id)
	}
	st := sshFollow(t, b, id, backends.Done)
	if st.State != backends.Done || st.ExitCode == nil || *st.ExitCode != 0 {
		t.Fatalf("want DONE, got %+v", st)
	}
	var out bytes.Buffer
	if _, err := b.ReadLogs(ctx, id, 0, &out); err != nil || out.String() != "params: {\"q\":\"'$(id)'\"}\ninput\n" {
		t.Fatalf("job output: %v %q", err, out.String())
	}
	out.Reset()
	if err := b.FetchOutput(ctx, id, "result.txt", &out); err != nil || out.String() != "out\n" {
		t.Fatalf("result.txt: %v %q", err, out.String())
	}
}

func TestSSHFailedKilledAndRefused(t *testing.T) {
	b := sshBackend(t)
	ctx := testssh.Ctx(t, time.Minute)
	id, err := b.Submit(ctx, backends.Job{Name: "ssh-fail", Key: sshKey(t), Script: "#!/bin/sh\nexit 3\n"})
	if err != nil {
		t.Fatal(err)
	}
	if st := sshFollow(t, b, id, backends.Failed); st.State != backends.Failed || *st.ExitCode != 3 {
		t.Fatalf("want FAILED with exit 3, got %+v", st)
	}
	id, err = b.Submit(ctx, backends.Job{Name: "ssh-kill", Key: sshKey(t), Script: "#!/bin/sh\nsleep 300\n"})
	if err != nil {
		t.Fatal(err)
	}
	sshFollow(t, b, id, backends.Running)
	if err := b.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	if st := sshFollow(t, b, id, backends.Killed); st.State != backends.Killed {
		t.Fatalf("want KILLED, got %+v", st)
	}
	if err := b.Cancel(ctx, id); err != nil {
		t.Fatalf("cancelling an ended job: %v", err)
	}
	_, err = b.Submit(ctx, backends.Job{Name: "ssh-bad", Key: sshKey(t), Script: "#!/bin/sh\n", Properties: json.RawMessage(`{"partition":"no-such-partition"}`)})
	testutil.RequireFieldError(t, err, "jobproperties")
	if _, err := b.Status(ctx, "99999999"); !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("an unknown job: want ErrNotFound, got %v", err)
	}
	if id, err := b.FindByKey(ctx, "no-such-key"); err != nil || id != "" {
		t.Fatalf("an unknown key: %q %v", id, err)
	}
}

// TestSSHThroughBastion: a job is submitted, followed to DONE and its
// output read through a real sshd jump host (its own host key in
// jump1-known_hosts, its own key in jump1-ssh-privatekey), which logs
// that it forwarded the connection to the login node.
func TestSSHThroughBastion(t *testing.T) {
	srv := testssh.Default(t)
	var log testutil.SyncBuffer
	url, creds, _ := testssh.ViaBastion(t, srv, srv, &log)
	be, err := New(backends.Config{URL: url, Credentials: creds})
	if err != nil {
		t.Fatal(err)
	}
	b := be.(*SSHBackend)
	t.Cleanup(func() { b.Close() })
	ctx := testssh.Ctx(t, time.Minute)
	j := backends.Job{Name: "ssh-bastion", Key: sshKey(t), Script: "#!/bin/sh\necho through the bastion\n"}
	if err := b.Validate(j); err != nil {
		t.Fatal(err)
	}
	id, err := b.Submit(ctx, j)
	if err != nil {
		t.Fatal(err)
	}
	if st := sshFollow(t, b, id, backends.Done); st.State != backends.Done {
		t.Fatalf("want DONE, got %+v", st)
	}
	var out bytes.Buffer
	if _, err := b.ReadLogs(ctx, id, 0, &out); err != nil || out.String() != "through the bastion\n" {
		t.Fatalf("job output: %v %q", err, out.String())
	}
	_, port, _ := strings.Cut(srv.Addr, ":")
	testssh.WaitLog(t, "the jump host", &log, "Accepted publickey for "+srv.User, "direct-tcpip", "port "+port)
	if d := b.ssh.Dials(); d != 1 {
		t.Errorf("%d connections through the jump host for one job, want 1", d)
	}
}
