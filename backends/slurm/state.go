package slurm

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
)

// jobInfo is the part of a job record (GET job/{id}, GET jobs/) we read.
// Fields whose shape changed between versions are kept raw and decoded by
// shape, so one decoder reads every version.
type jobInfo struct {
	JobID            json.RawMessage `json:"job_id"`
	Name             string          `json:"name"`
	Comment          string          `json:"comment"`
	UserName         string          `json:"user_name"`
	JobState         json.RawMessage `json:"job_state"`    // "RUNNING" (≤v0.0.39) or ["RUNNING","CONFIGURING"] (v0.0.40+)
	StateReason      string          `json:"state_reason"` // "None", "Priority", "NonZeroExitCode", ...
	StateDescription string          `json:"state_description"`
	ExitCode         json.RawMessage `json:"exit_code"` // wait status; {set,infinite,number}; or {status,return_code,signal}
	SubmitTime       json.RawMessage `json:"submit_time"`
	StartTime        json.RawMessage `json:"start_time"`
	EndTime          json.RawMessage `json:"end_time"`
	StandardOutput   string          `json:"standard_output"`
	StandardError    string          `json:"standard_error"`
	WorkingDir       string          `json:"current_working_directory"`
	Partition        string          `json:"partition"`
	Account          string          `json:"account"`
	QOS              string          `json:"qos"`
	// An array's records: each task's, plus one for the tasks not yet
	// started (array_task_id unset, array_task_string "3-5%3").
	ArrayJobID      json.RawMessage `json:"array_job_id"`  // 5 (v0.0.38) or {set,infinite,number}
	ArrayTaskID     json.RawMessage `json:"array_task_id"` // null (v0.0.38) or {"set":false} when none
	ArrayTaskString string          `json:"array_task_string"`
}

func (j *jobInfo) id() string {
	n, ok := number(j.JobID)
	if !ok {
		return ""
	}
	return strconv.FormatInt(n, 10)
}

// baseID is the job's id, or for an array task the array's id: what
// SubmitArray returned and FindByKey must find again.
func (j *jobInfo) baseID() string {
	if n, ok := number(j.ArrayJobID); ok && n > 0 {
		return strconv.FormatInt(n, 10)
	}
	return j.id()
}

// number reads an integer in any of slurmrestd's shapes: 5, "5",
// {"set":true,"infinite":false,"number":5}. ok is false for null, unset and
// infinite values.
func number(raw json.RawMessage) (int64, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return 0, false
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		i, err := n.Int64()
		if err != nil {
			f, ferr := n.Float64()
			if ferr != nil {
				return 0, false
			}
			i = int64(f)
		}
		return i, true
	}
	var st struct {
		Set      bool            `json:"set"`
		Infinite bool            `json:"infinite"`
		Number   json.RawMessage `json:"number"`
	}
	if json.Unmarshal(raw, &st) == nil && st.Set && !st.Infinite {
		return number(st.Number)
	}
	return 0, false
}

// flexInt is an integer in any of the shapes number reads.
type flexInt struct {
	n  int64
	ok bool
}

func (f *flexInt) UnmarshalJSON(b []byte) error {
	f.n, f.ok = number(b)
	return nil
}

func (f flexInt) String() string {
	if !f.ok {
		return ""
	}
	return strconv.FormatInt(f.n, 10)
}

// timestamp reads an epoch time; 0, unset and NO_VAL are the zero time.
func timestamp(raw json.RawMessage) time.Time {
	n, ok := number(raw)
	if !ok || n <= 0 || n >= 0xfffffffe {
		return time.Time{}
	}
	return time.Unix(n, 0).UTC()
}

// states reads job_state: a string before v0.0.40 (a flag, when one is set,
// instead of the base state) and an array of base state plus flags after.
func states(raw json.RawMessage) []string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []string{s}
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		return list
	}
	return nil
}

// The base states and what they mean.
var baseStates = map[string]backends.State{
	"PENDING":       backends.Pending,
	"RUNNING":       backends.Running,
	"SUSPENDED":     backends.Suspended,
	"COMPLETED":     backends.Done,
	"CANCELLED":     backends.Killed,
	"FAILED":        backends.Failed,
	"TIMEOUT":       backends.Failed,
	"NODE_FAIL":     backends.Failed,
	"PREEMPTED":     backends.Failed,
	"BOOT_FAIL":     backends.Failed,
	"DEADLINE":      backends.Failed,
	"OUT_OF_MEMORY": backends.Failed,
}

// flagStates are the flags that decide the state whatever the base state
// says, in order of precedence. Before v0.0.40 slurmrestd reports the flag
// instead of the base state, so each flag must also stand on its own.
var flagStates = []struct {
	flag  string
	state backends.State
}{
	{"REVOKED", backends.Unknown},         // federation: the job runs on a sibling cluster, which we do not follow
	{"REQUEUED", backends.Pending},        // going back to the queue
	{"REQUEUE_FED", backends.Pending},     // the same, by the federation
	{"REQUEUE_HOLD", backends.Suspended},  // requeued and held
	{"EXPEDITING", backends.Pending},      // v0.0.44+: an expedited requeue under way
	{"SPECIAL_EXIT", backends.Suspended},  // requeued and held after a special exit code
	{"RESV_DEL_HOLD", backends.Suspended}, // held because its reservation was deleted
	{"STOPPED", backends.Suspended},       // SIGSTOPped, keeping its resources
	{"COMPLETING", backends.Running},      // ended, epilog still running: not final yet
	{"STAGE_OUT", backends.Running},       // ended, burst buffer staging out: not final yet
}

// Flags that say nothing about where the job is (they ride on a base state);
// alone they mean the job holds resources and is active.
var activeFlags = map[string]bool{
	"CONFIGURING": true, "POWER_UP_NODE": true, "RESIZING": true, "SIGNALING": true,
	"LAUNCH_FAILED": true, "UPDATE_DB": true, "RECONFIG_FAIL": true,
}

// mapState maps job_state (base state and flags) onto the contract's states.
// reason is what the runner records beside it: the raw state for the
// failures that are not plain FAILED, Slurm's state_reason otherwise.
func mapState(st []string, stateReason string) (state backends.State, reason string) {
	has := map[string]bool{}
	base := ""
	for _, s := range st {
		s = strings.ToUpper(strings.TrimSpace(s))
		has[s] = true
		if _, ok := baseStates[s]; ok && base == "" {
			base = s
		}
	}
	if stateReason == "None" {
		stateReason = ""
	}
	for _, f := range flagStates {
		if has[f.flag] {
			if f.state == backends.Running && base == "PENDING" {
				return backends.Pending, f.flag // a requeue in progress
			}
			return f.state, cmp.Or(stateReason, f.flag)
		}
	}
	switch base {
	case "":
		for s := range has {
			if activeFlags[s] {
				return backends.Running, s
			}
		}
		// A state this package does not know: keep following the job
		// rather than end it on a guess.
		return backends.Running, "unrecognized Slurm state " + strings.Join(st, ",")
	case "PENDING":
		// A held job (scontrol hold, or held by an administrator) waits for
		// a person, not for resources: SUSPENDED, as the README's state
		// table says of held jobs (and as HTCondor's held jobs are).
		if strings.HasPrefix(stateReason, "JobHeld") {
			return backends.Suspended, stateReason
		}
	case "FAILED":
		return backends.Failed, cmp.Or(stateReason, base)
	case "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY":
		return backends.Failed, base
	}
	return baseStates[base], stateReason
}

// baseCategories says whose doing each failed base state was. The rest
// take the default (FAILED: job, CANCELLED: cancelled).
//   - PREEMPTED, NODE_FAIL, BOOT_FAIL: the cluster took the node or the
//     job's place away; the same job may well succeed on another try.
//   - TIMEOUT, DEADLINE: the job's own time limit or deadline ran out.
//   - OUT_OF_MEMORY is the job's: it used more than it asked for, and
//     running it again with the same request fails the same way (Armada
//     and Flyte count it apart from node failures for the same reason).
var baseCategories = map[string]backends.Category{
	"PREEMPTED":     backends.CategoryInfrastructure,
	"NODE_FAIL":     backends.CategoryInfrastructure,
	"BOOT_FAIL":     backends.CategoryInfrastructure,
	"TIMEOUT":       backends.CategoryTimeout,
	"DEADLINE":      backends.CategoryTimeout,
	"OUT_OF_MEMORY": backends.CategoryJob,
	"FAILED":        backends.CategoryJob,
	"CANCELLED":     backends.CategoryCancelled,
}

// category is the failure category of a final job_state: the first base
// state in it that has one.
func category(st []string) backends.Category {
	for _, s := range st {
		if c, ok := baseCategories[strings.ToUpper(strings.TrimSpace(s))]; ok {
			return c
		}
	}
	return ""
}

// sigLaunchFailed is the "signal" slurmstepd gives a batch job it could not
// launch (seen on 22.05 and 24.11 for a missing working directory: state
// reason JobLaunchFailure or RaisedSignal); no process was killed.
const sigLaunchFailed = 53

// exitStatus is a decoded exit code.
type exitStatus struct {
	code   int // the exit code; 128+signal when a signal ended the job
	signal int // 0 unless a signal ended the job
}

func (e exitStatus) String() string {
	if e.signal == sigLaunchFailed {
		return "the job did not start (Slurm reports a job slurmstepd could not launch as signal 53, most often because its working directory does not exist on the compute node: create it there, or set current_working_directory (over SSH: chdir, or #SBATCH -D) to a directory that exists)"
	}
	if e.signal != 0 {
		return fmt.Sprintf("killed by signal %d (%s), exit code %d", e.signal, signalName(e.signal), e.code)
	}
	return fmt.Sprintf("exit code %d", e.code)
}

// decodeExitCode reads exit_code in its three shapes: a raw wait status
// (v0.0.38: exit 3 is 768), the same in {set,infinite,number} (v0.0.39), or
// {"status":[...],"return_code":{...},"signal":{"id":{...},"name":...}}
// (v0.0.40+). ok is false while there is none.
func decodeExitCode(raw json.RawMessage) (exitStatus, bool) {
	var verbose struct {
		Status     []string        `json:"status"`
		ReturnCode json.RawMessage `json:"return_code"`
		Signal     struct {
			ID   json.RawMessage `json:"id"`
			Name string          `json:"name"`
		} `json:"signal"`
	}
	if bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) && json.Unmarshal(raw, &verbose) == nil && (verbose.Status != nil || verbose.ReturnCode != nil) {
		for _, s := range verbose.Status {
			switch s {
			case "SIGNALED", "CORE_DUMPED":
				if sig, ok := number(verbose.Signal.ID); ok && sig > 0 {
					return exitStatus{code: 128 + int(sig), signal: int(sig)}, true
				}
			case "PENDING", "INVALID":
				return exitStatus{}, false
			}
		}
		if rc, ok := number(verbose.ReturnCode); ok {
			return exitStatus{code: int(rc)}, true
		}
		return exitStatus{}, false
	}
	ws, ok := number(raw)
	if !ok || ws < 0 || ws >= 0xfffffffe {
		return exitStatus{}, false
	}
	return waitStatus(uint32(ws)), true
}

// waitStatus decodes a POSIX wait status.
func waitStatus(ws uint32) exitStatus {
	if sig := int(ws & 0x7f); sig != 0 && sig != 0x7f {
		return exitStatus{code: 128 + sig, signal: sig}
	}
	return exitStatus{code: int(ws>>8) & 0xff}
}

var signalNames = map[int]string{
	1: "HUP", 2: "INT", 3: "QUIT", 4: "ILL", 5: "TRAP", 6: "ABRT", 7: "BUS", 8: "FPE", 9: "KILL",
	10: "USR1", 11: "SEGV", 12: "USR2", 13: "PIPE", 14: "ALRM", 15: "TERM", 24: "XCPU", 25: "XFSZ",
}

func signalName(n int) string {
	if s, ok := signalNames[n]; ok {
		return "SIG" + s
	}
	return "signal " + strconv.Itoa(n)
}

// status turns a job record into the runner's Status.
func (j *jobInfo) status() backends.Status {
	st := states(j.JobState)
	out := backends.Status{Raw: strings.Join(st, ","), SubmitTime: timestamp(j.SubmitTime)}
	out.State, out.Reason = mapState(st, j.StateReason)
	// start_time of a pending job is a forecast and end_time of a running
	// one is its deadline: report them only once they are facts.
	if out.State != backends.Pending {
		out.StartTime = timestamp(j.StartTime)
	}
	msg := fmt.Sprintf("Slurm job %s is %s", j.id(), out.Raw)
	if j.StateReason != "" && j.StateReason != "None" {
		msg += " (" + j.StateReason + ")"
	}
	if out.State.Final() {
		out.Category = category(st)
		out.EndTime = timestamp(j.EndTime)
		if ec, ok := decodeExitCode(j.ExitCode); ok {
			code := ec.code
			out.ExitCode = &code
			msg += ", " + ec.String()
		}
	}
	if d := strings.TrimSpace(j.StateDescription); d != "" {
		msg += ": " + d
	}
	out.Message = msg
	return out
}
