package htcondor

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/bridge-runner/bridge-runner/backends"
)

func TestDescription(t *testing.T) {
	job := backends.Job{Name: "n", Key: "k-1", Script: "#!/bin/sh\n",
		Properties: json.RawMessage(`{"request_memory": "2GB", "request_cpus": 2, "+Project": "a \"b\" \\c", "MY.Flag": true, "should_transfer_files": "IF_NEEDED"}`),
		Parameters: json.RawMessage(`{"x": 1}`)}
	s, err := buildSubmit(job)
	if err != nil {
		t.Fatal(err)
	}
	d := s.description("/home/u/bridge-runner/k-1", "k-1")
	for _, line := range []string{
		"initialdir = /home/u/bridge-runner/k-1\n",
		"executable = /home/u/bridge-runner/k-1/job.run\n",
		"request_memory = 2GB\n", "request_cpus = 2\n",
		`+Project = "a \"b\" \\c"` + "\n", "MY.Flag = true\n",
		"should_transfer_files = IF_NEEDED\n", "universe = vanilla\n", "stream_output = true\n",
		"transfer_input_files = job.sh,parameters.json\n",
		`environment = "BRIDGE_JOB_NAME='n' BRIDGE_JOB_KEY='k-1' BRIDGE_JOB_PARAMETERS_FILE='parameters.json'"` + "\n",
		`+BridgeRunnerKey = "k-1"` + "\n",
	} {
		if !strings.Contains(d, line) {
			t.Errorf("description lacks %q:\n%s", line, d)
		}
	}
	if strings.Count(d, "should_transfer_files") != 1 || !strings.HasSuffix(d, "queue 1\n") {
		t.Errorf("a default was written beside the user's value, or queue is not last:\n%s", d)
	}
}

// TestRunWrapper: the job's executable runs its script, transferred or
// remote, with umask 077, so that what the job writes (and HTCondor
// transfers back with its mode) is its owner's only.
func TestRunWrapper(t *testing.T) {
	for _, c := range []struct {
		job  backends.Job
		exec string
	}{
		{backends.Job{Name: "n", Key: "k", Script: "#!/bin/sh\n"}, "exec ./job.sh \"$@\"\n"},
		{backends.Job{Name: "n", Key: "k", ScriptPath: "/opt/my job's.sh"}, `exec '/opt/my job'\''s.sh' "$@"` + "\n"},
	} {
		s, err := buildSubmit(c.job)
		if err != nil {
			t.Fatal(err)
		}
		if want := "#!/bin/sh\numask 077\n" + c.exec; s.run() != want {
			t.Errorf("run() = %q, want %q", s.run(), want)
		}
	}
}

func TestStateTable(t *testing.T) {
	i := func(n int) *int { return &n }
	for _, c := range []struct {
		ad   jobAd
		want backends.State
	}{
		{jobAd{JobStatus: 1}, backends.Pending},
		{jobAd{JobStatus: 2}, backends.Running},
		{jobAd{JobStatus: 6}, backends.Running},
		{jobAd{JobStatus: 7}, backends.Suspended},
		{jobAd{JobStatus: 3, RemoveReason: "via condor_rm"}, backends.Killed},
		{jobAd{JobStatus: 4, ExitCode: i(0)}, backends.Done},
		{jobAd{JobStatus: 4, ExitCode: i(2)}, backends.Failed},
		{jobAd{JobStatus: 4, ExitBySignal: true, ExitSignal: i(9)}, backends.Failed},
		{jobAd{JobStatus: 5, HoldReasonCode: i(1)}, backends.Pending}, // held before it ever started
		{jobAd{JobStatus: 5, HoldReasonCode: i(15)}, backends.Pending},
		{jobAd{JobStatus: 5, HoldReasonCode: i(1), JobStartDate: 1}, backends.Suspended}, // held after it ran
		{jobAd{JobStatus: 5, HoldReasonCode: i(1), JobCurrentStartDate: 1}, backends.Suspended},
		{jobAd{JobStatus: 5, HoldReasonCode: i(6), HoldReasonSubCode: i(2)}, backends.Failed},
		{jobAd{JobStatus: 5}, backends.Failed},
		{jobAd{JobStatus: 42}, backends.Running},
	} {
		st := c.ad.status()
		if st.State != c.want {
			t.Errorf("JobStatus %d (%+v): %s, want %s", c.ad.JobStatus, c.ad, st.State, c.want)
		}
	}
	st := (&jobAd{JobStatus: 4, ExitBySignal: true, ExitSignal: i(9)}).status()
	if *st.ExitCode != 137 {
		t.Errorf("killed by signal 9: exit code %d, want 137", *st.ExitCode)
	}
}

// TestIdleReason: an idle job carries the negotiator's reason for not
// matching it, unless a match came since; its message says how to see
// which requirement no machine meets.
func TestIdleReason(t *testing.T) {
	for _, c := range []struct {
		ad   jobAd
		want string
	}{
		{jobAd{JobStatus: 1}, ""},
		{jobAd{JobStatus: 1, LastRejMatchReason: "no match found ", LastRejMatchTime: 10}, "no match found"},
		{jobAd{JobStatus: 1, LastRejMatchReason: "insufficient priority", LastRejMatchTime: 10, LastMatchTime: 5}, "insufficient priority"},
		{jobAd{JobStatus: 1, LastRejMatchReason: "no match found", LastRejMatchTime: 10, LastMatchTime: 11}, ""}, // matched since
		{jobAd{JobStatus: 1, LastRejMatchReason: strings.Repeat("x", 500), LastRejMatchTime: 1}, strings.Repeat("x", maxMatchReason)},
	} {
		st := c.ad.status()
		if st.State != backends.Pending || st.Reason != c.want {
			t.Errorf("%+v: %s %q, want PENDING %q", c.ad, st.State, st.Reason, c.want)
		}
		if c.want != "" && !strings.Contains(st.Message, "condor_q -better-analyze 0.0") {
			t.Errorf("%+v: the message %q does not say how to see the unmet requirement", c.ad, st.Message)
		}
	}
}

// TestHoldCategories: a hold by the pool is infrastructure, a duration
// limit is timeout, the job's own troubles (a missing executable, its own
// policy, SystemPolicy) are the job's, and an evicted job (back to IDLE) is
// no failure at all.
func TestHoldCategories(t *testing.T) {
	i := func(n int) *int { return &n }
	for _, c := range []struct {
		ad   jobAd
		want backends.Category
	}{
		{jobAd{JobStatus: 5, HoldReasonCode: i(21)}, backends.CategoryInfrastructure},
		{jobAd{JobStatus: 5, HoldReasonCode: i(45)}, backends.CategoryInfrastructure},
		{jobAd{JobStatus: 5, HoldReasonCode: i(46)}, backends.CategoryTimeout},
		{jobAd{JobStatus: 5, HoldReasonCode: i(49)}, backends.CategoryInfrastructure}, // new since 23.9
		{jobAd{JobStatus: 5, HoldReasonCode: i(6), HoldReasonSubCode: i(2)}, backends.CategoryJob},
		{jobAd{JobStatus: 5, HoldReasonCode: i(26)}, backends.CategoryJob},
		{jobAd{JobStatus: 5}, backends.CategoryJob},
		{jobAd{JobStatus: 5, HoldReasonCode: i(1)}, ""},
		{jobAd{JobStatus: 1, JobCurrentStartDate: 1}, ""},
		{jobAd{JobStatus: 3}, backends.CategoryCancelled},
	} {
		if got := c.ad.status().FailureCategory(); got != c.want {
			t.Errorf("%+v: category %q, want %q", c.ad, got, c.want)
		}
	}
}

// TestArrayDescription: an array is one cluster queued over its indexes,
// each task with its index in the environment, an attribute, and its own
// output; %M is max_materialize.
func TestArrayDescription(t *testing.T) {
	s, err := buildSubmit(backends.Job{Name: "n", Key: "k-1", Script: "#!/bin/sh\n"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := backends.ParseArray("1,3,8-9%2")
	if err != nil {
		t.Fatal(err)
	}
	d := s.arrayDescription("/d", "k-1", &a)
	for _, line := range []string{
		"output = task-$(TaskIndex).out\n", "error = task-$(TaskIndex).err\n", "log = job.log\n",
		`environment = "BRIDGE_JOB_NAME='n' BRIDGE_JOB_KEY='k-1' BRIDGE_TASK_INDEX='$(TaskIndex)'"` + "\n",
		"max_materialize = 2\n", "+BridgeTaskIndex = $(TaskIndex)\n", "+BridgeTaskCount = 4\n",
	} {
		if !strings.Contains(d, line) {
			t.Errorf("description lacks %q:\n%s", line, d)
		}
	}
	if !strings.HasSuffix(d, "queue TaskIndex from (\n1\n3\n8\n9\n)\n") || strings.Contains(d, "queue 1") {
		t.Errorf("the queue is not the indexes:\n%s", d)
	}
	if d := s.description("/d", "k-1"); strings.Contains(d, "TaskIndex") || strings.Contains(d, "max_materialize") {
		t.Errorf("a single job's description has array commands:\n%s", d)
	}
	if _, err := buildSubmit(backends.Job{Name: "n", Key: "k", Script: "#!/bin/sh\n", Properties: json.RawMessage(`{"max_materialize": 5}`)}); err == nil {
		t.Error("max_materialize in jobproperties was accepted")
	}
}
