package record

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
)

// KeyEfficiency is what the job used against what it was given, read from
// the system's own accounting once the job ended (Efficiency as JSON, the
// same text as the step output efficiency). invoke writes it after the
// final state, best-effort: a cluster that keeps no accounting, or whose
// accounting did not know the job within a few seconds, gets the reason in
// "unavailable" and the queue wait alone; the exit code never depends on it.
const KeyEfficiency = "status.efficiency"

// Efficiency is KeyEfficiency's value. The ratios are fractions (0.93 is
// 93 %) and are left out when a figure they need is unknown:
//
//	cpu     CPU time used / (CPUs × elapsed), summed over an array's tasks
//	memory  peak resident memory / memory requested (the largest task's)
//	time    elapsed / time limit (the longest task's)
//
// queueWaitSeconds is start − submit (an array's earliest task). The raw
// figures beside them are the system's, so that a reader can check them
// against sacct or condor_history.
type Efficiency struct {
	CPU              *float64 `json:"cpu,omitempty"`
	Memory           *float64 `json:"memory,omitempty"`
	Time             *float64 `json:"time,omitempty"`
	QueueWaitSeconds *int64   `json:"queueWaitSeconds,omitempty"`
	Tasks            int      `json:"tasks,omitempty"`
	CPUSeconds       float64  `json:"cpuSeconds,omitempty"`
	CoreSeconds      float64  `json:"coreSeconds,omitempty"`
	CPUs             int      `json:"cpus,omitempty"`
	ElapsedSeconds   int64    `json:"elapsedSeconds,omitempty"`
	TimeLimitSeconds int64    `json:"timeLimitSeconds,omitempty"`
	MaxRSSBytes      int64    `json:"maxRSSBytes,omitempty"`
	ReqMemBytes      int64    `json:"reqMemBytes,omitempty"`
	// Unavailable says why there is no accounting, e.g. "accounting
	// unavailable: the backend keeps none".
	Unavailable string `json:"unavailable,omitempty"`
}

// NewEfficiency computes the ratios from u; submit and start (the job's
// status times) give the queue wait when u has none.
func NewEfficiency(u backends.Usage, submit, start time.Time) Efficiency {
	e := Efficiency{Tasks: u.Tasks, CPUSeconds: round3(u.CPUSeconds), CoreSeconds: round3(u.CoreSeconds), CPUs: u.CPUs,
		ElapsedSeconds: int64(u.Elapsed / time.Second), TimeLimitSeconds: int64(u.TimeLimit / time.Second),
		MaxRSSBytes: u.MaxRSSBytes, ReqMemBytes: u.ReqMemBytes}
	// Zero means not gathered (see backends.Usage), never "used nothing".
	e.CPU = ratio(u.CPUSeconds, u.CoreSeconds)
	e.Memory = ratio(float64(u.MaxRSSBytes), float64(u.ReqMemBytes))
	e.Time = ratio(u.Elapsed.Seconds(), u.TimeLimit.Seconds())
	if !u.Submit.IsZero() && !u.Start.IsZero() {
		submit, start = u.Submit, u.Start
	}
	e.QueueWaitSeconds = QueueWait(submit, start)
	return e
}

// Unavailable is the efficiency of a job whose accounting could not be
// read: the queue wait alone, and why.
func Unavailable(why string, submit, start time.Time) Efficiency {
	return Efficiency{QueueWaitSeconds: QueueWait(submit, start), Unavailable: "accounting unavailable: " + why}
}

// QueueWait is start − submit in whole seconds; nil when either is unknown.
func QueueWait(submit, start time.Time) *int64 {
	if submit.IsZero() || start.IsZero() {
		return nil
	}
	w := max(int64(start.Sub(submit)/time.Second), 0)
	return &w
}

func ratio(used, asked float64) *float64 {
	if used <= 0 || asked <= 0 {
		return nil
	}
	r := round3(used / asked)
	return &r
}

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

// String is the JSON the record and the step output hold.
func (e Efficiency) String() string {
	b, _ := json.Marshal(e)
	return string(b)
}

// ParseEfficiency reads KeyEfficiency; "" is nil. A record is
// user-editable: a ratio that is negative or not finite is refused.
func ParseEfficiency(s string) (*Efficiency, error) {
	if s == "" {
		return nil, nil
	}
	var e Efficiency
	if err := json.Unmarshal([]byte(s), &e); err != nil {
		return nil, fmt.Errorf("%s is not the JSON bridge-runner writes: %w", KeyEfficiency, err)
	}
	for _, r := range []*float64{e.CPU, e.Memory, e.Time} {
		if r != nil && (*r < 0 || math.IsInf(*r, 0) || math.IsNaN(*r)) {
			return nil, fmt.Errorf("%s holds a ratio %v that bridge-runner never writes", KeyEfficiency, *r)
		}
	}
	if e.QueueWaitSeconds != nil && *e.QueueWaitSeconds < 0 {
		return nil, fmt.Errorf("%s holds a negative queue wait", KeyEfficiency)
	}
	return &e, nil
}
