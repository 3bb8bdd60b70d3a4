package main

import (
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/bridge-runner/bridge-runner/record"
)

// startEstimate is a placed job's predicted start against its observed
// one, as status shows it (-o json and yaml whole, -o wide as START).
type startEstimate struct {
	Cluster   string `json:"cluster"`
	Partition string `json:"partition,omitempty"`
	// Predicted is "" when the scheduler's estimate was absurd (unknown).
	Predicted string `json:"predicted,omitempty"`
	Observed  string `json:"observed,omitempty"`
	// ErrorSeconds is observed − predicted: positive when the job started
	// later than predicted.
	ErrorSeconds *int64 `json:"errorSeconds,omitempty"`
}

// startEstimateOf is the record's start estimate; one edited into
// something bridge-runner never writes shows as none.
func startEstimateOf(d map[string]string) *startEstimate {
	e, err := record.ParseStartEstimate(d[record.KeyStartEstimate])
	if err != nil || e == nil {
		return nil
	}
	s := &startEstimate{Cluster: e.Cluster, Partition: e.Partition, Predicted: rfc3339(e.Predicted), Observed: rfc3339(e.Observed)}
	if secs, ok := e.ErrorSeconds(); ok {
		s.ErrorSeconds = &secs
	}
	return s
}

func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// cell is the START column: "late 5m" or "early 30s" once the job
// started, "on time" within a second, the predicted start while it waits,
// "unknown" for an absurd estimate; "" for a job placed without one.
func (s *startEstimate) cell() string {
	switch {
	case s == nil:
		return ""
	case s.ErrorSeconds != nil && *s.ErrorSeconds > 0:
		return "late " + duration.HumanDuration(time.Duration(*s.ErrorSeconds)*time.Second)
	case s.ErrorSeconds != nil && *s.ErrorSeconds < 0:
		return "early " + duration.HumanDuration(time.Duration(-*s.ErrorSeconds)*time.Second)
	case s.ErrorSeconds != nil:
		return "on time"
	case s.Predicted == "":
		return "unknown"
	}
	return "predicted " + s.Predicted
}
