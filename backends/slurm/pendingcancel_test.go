package slurm

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
)

// scriptedSlurm answers Status from a script of states and records the
// hold, release and cancel calls, failing the ones a test names.
type scriptedSlurm struct {
	states    []string // Raw states, one per Status call; the last repeats
	calls     []string
	failOn    string // "hold", "release", "cancel" or "status2" (the second read)
	statusN   int
	cancelled bool
	ranFor    time.Duration
}

func (s *scriptedSlurm) Status(_ context.Context, id string) (backends.Status, error) {
	s.statusN++
	s.calls = append(s.calls, "status")
	if s.failOn == "status2" && s.statusN == 2 {
		return backends.Status{}, backends.Transient(errors.New("dark"))
	}
	raw := s.states[min(s.statusN, len(s.states))-1]
	st, _ := mapState([]string{raw}, "")
	out := backends.Status{State: st, Raw: raw, Reason: "JobHeldUser"}
	if raw == "CANCELLED" && s.ranFor > 0 { // cancelled by someone else after a run
		out.EndTime = time.Now()
		out.StartTime = out.EndTime.Add(-s.ranFor)
	}
	return out, nil
}

func (s *scriptedSlurm) hold(_ context.Context, id string, on bool) error {
	verb := map[bool]string{true: "hold", false: "release"}[on]
	s.calls = append(s.calls, verb)
	if s.failOn == verb {
		return backends.Transient(errors.New("dark"))
	}
	return nil
}

func (s *scriptedSlurm) Cancel(_ context.Context, id string) error {
	s.calls = append(s.calls, "cancel")
	if s.failOn == "cancel" {
		return backends.Transient(errors.New("dark"))
	}
	s.cancelled = true
	return nil
}

// TestCancelIfPendingSteps: the job is cancelled only when a read after the
// hold still says PENDING; a job that started while we asked (the read after
// the hold says RUNNING) is released and never cancelled; any failure is an
// error (unknown), never a Cancelled, and lifts our hold.
func TestCancelIfPendingSteps(t *testing.T) {
	cases := []struct {
		name      string
		states    []string
		failOn    string
		cancelled bool
		err       bool
		calls     string
		ranFor    time.Duration
	}{
		{"pending", []string{"PENDING", "PENDING", "CANCELLED"}, "", true, false, "status hold status cancel status", 0},
		{"started while asked", []string{"PENDING", "RUNNING"}, "", false, false, "status hold status release", 0},
		{"running", []string{"RUNNING"}, "", false, false, "status", 0},
		{"asked again after a cancel", []string{"CANCELLED"}, "", true, false, "status", 0},
		{"dark at the hold", []string{"PENDING"}, "hold", false, true, "status hold release", 0},
		{"dark after the hold", []string{"PENDING"}, "status2", false, true, "status hold status release", 0},
		{"dark at the cancel", []string{"PENDING", "PENDING"}, "cancel", false, true, "status hold status cancel release", 0},
		{"cancelled by another after a run", []string{"CANCELLED"}, "", false, false, "status", time.Minute},
		{"requeued, ran before", []string{"PENDING", "PENDING,REQUEUED"}, "", false, false, "status hold status release", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &scriptedSlurm{states: c.states, failOn: c.failOn, ranFor: c.ranFor}
			pc, err := cancelIfPending(context.Background(), s, "7")
			if (err != nil) != c.err || pc.Cancelled != c.cancelled {
				t.Fatalf("got %+v, %v; want cancelled=%v err=%v", pc, err, c.cancelled, c.err)
			}
			if got := strings.Join(s.calls, " "); got != c.calls {
				t.Fatalf("calls %q, want %q", got, c.calls)
			}
			if !c.cancelled && s.cancelled && c.failOn != "cancel" {
				t.Fatal("a started job was cancelled")
			}
		})
	}
}
