package record

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
)

// KeyStartEstimate is a placed job's start as its placement predicted it
// and as it came (StartEstimate, as text), written by invoke: the
// prediction with the placement, the observed start when the job is first
// seen running. The operator turns the two into the estimate's error by
// cluster and partition.
const KeyStartEstimate = "status.startEstimate"

// MaxEstimateAhead bounds a start estimate worth trusting: a scheduler's
// forecast further out than this (one sweep saw the year 4068) says
// nothing about when the job starts, and is recorded as unknown.
const MaxEstimateAhead = 90 * 24 * time.Hour

// estimateSlack is how far before its placement an estimate may lie and
// still count (the scheduler's clock and ours differ a little): a start
// in the past is "now" in the scheduler's words.
const estimateSlack = time.Minute

// StartEstimate is KeyStartEstimate's value: the cluster and partition
// the job was placed at, the predicted start (zero: unknown or absurd)
// and the observed one (zero: not seen running yet).
type StartEstimate struct {
	Cluster, Partition  string
	Predicted, Observed time.Time
}

// PlausibleStart is est when a placement at time at may trust it, else
// the zero time: an estimate before the placement (beyond a little clock
// skew) or more than MaxEstimateAhead after it is absurd.
func PlausibleStart(est, at time.Time) time.Time {
	if est.IsZero() || est.Before(at.Add(-estimateSlack)) || est.After(at.Add(MaxEstimateAhead)) {
		return time.Time{}
	}
	return est
}

// ErrorSeconds is observed − predicted in whole seconds (positive: the job
// started later than predicted); ok is false while either is unknown.
func (e StartEstimate) ErrorSeconds() (secs int64, ok bool) {
	if e.Predicted.IsZero() || e.Observed.IsZero() {
		return 0, false
	}
	return int64(e.Observed.Sub(e.Predicted).Round(time.Second) / time.Second), true
}

// String is the record's text: "cluster=a partition=debug
// predicted=<RFC 3339|unknown>", then " observed=<RFC 3339>" once seen.
func (e StartEstimate) String() string {
	s := fmt.Sprintf("cluster=%s partition=%s predicted=%s", e.Cluster, e.Partition, timeOrUnknown(e.Predicted))
	if !e.Observed.IsZero() {
		s += " observed=" + e.Observed.UTC().Format(time.RFC3339)
	}
	return s
}

func timeOrUnknown(t time.Time) string {
	if t.IsZero() {
		return "unknown"
	}
	return t.UTC().Format(time.RFC3339)
}

// ParseStartEstimate reads KeyStartEstimate; "" is nil. The record is
// user-editable, so anything else than what String writes is an error.
func ParseStartEstimate(v string) (*StartEstimate, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	bad := fmt.Errorf("%s is not the text bridge-runner writes (cluster=… partition=… predicted=… [observed=…])", KeyStartEstimate)
	var e StartEstimate
	seen := map[string]bool{}
	for _, f := range strings.Fields(v) {
		k, val, ok := strings.Cut(f, "=")
		if !ok || seen[k] || len(val) > 64 {
			return nil, bad
		}
		seen[k] = true
		var err error
		switch k {
		case "cluster":
			e.Cluster = val
		case "partition":
			e.Partition = val
		case "predicted":
			if val != "unknown" {
				e.Predicted, err = time.Parse(time.RFC3339, val)
			}
		case "observed":
			e.Observed, err = time.Parse(time.RFC3339, val)
		default:
			return nil, bad
		}
		if err != nil {
			return nil, bad
		}
	}
	if !seen["cluster"] || !seen["predicted"] {
		return nil, bad
	}
	return &e, nil
}

// Learning from the errors: the operator keeps, per BridgeCluster and
// partition, what the newest estimates were off by (StartError, in the
// cluster's status) and hands it to the records it makes in the
// BridgeJob's targets (Target.StartErrors), so a placement corrects an
// estimate with no request of its own.
const (
	// LearnWindow is how many of a partition's newest errors are learnt from.
	LearnWindow = 20
	// MinLearnSamples is the fewest errors that correct an estimate: one
	// or two odd starts teach nothing.
	MinLearnSamples = 3
)

// StartError is what a partition's start estimates were off by lately
// (observed − predicted, seconds): the median of the newest errors and
// their range.
type StartError struct {
	Partition     string `json:"partition"`
	MedianSeconds int64  `json:"medianSeconds"`
	LowSeconds    int64  `json:"lowSeconds"`
	HighSeconds   int64  `json:"highSeconds"`
	Samples       int    `json:"samples"`
}

// LearnStartError is partition's StartError from its errors, oldest
// first: the newest LearnWindow of them count.
func LearnStartError(partition string, errs []int64) StartError {
	errs = errs[max(0, len(errs)-LearnWindow):]
	s := StartError{Partition: partition, Samples: len(errs)}
	if len(errs) == 0 {
		return s
	}
	sorted := append([]int64(nil), errs...)
	slices.Sort(sorted)
	s.LowSeconds, s.HighSeconds = sorted[0], sorted[len(sorted)-1]
	mid := len(sorted) / 2
	s.MedianSeconds = sorted[mid]
	if len(sorted)%2 == 0 {
		s.MedianSeconds = (sorted[mid-1] + sorted[mid]) / 2
	}
	return s
}

// Correction is how far an estimate moves: the median error, never
// outside the range of the errors observed (nor beyond MaxEstimateAhead),
// and nothing with fewer than MinLearnSamples errors.
func (s StartError) Correction() time.Duration {
	if s.Samples < MinLearnSamples || s.LowSeconds > s.HighSeconds {
		return 0
	}
	secs := min(max(s.MedianSeconds, s.LowSeconds), s.HighSeconds)
	limit := int64(MaxEstimateAhead / time.Second)
	return time.Duration(min(max(secs, -limit), limit)) * time.Second
}

// StartErrorFor is the StartError of partition among errs, nil if none.
func StartErrorFor(errs []StartError, partition string) *StartError {
	for i := range errs {
		if errs[i].Partition == partition {
			return &errs[i]
		}
	}
	return nil
}

// checkStartErrors checks a target's startErrors as the operator writes
// them: one per partition, each median within its range.
func checkStartErrors(field string, errs []StartError) error {
	if len(errs) > MaxTargets*4 {
		return backends.Invalid(field, "lists %d partitions; give at most %d", len(errs), MaxTargets*4)
	}
	seen := map[string]bool{}
	for _, e := range errs {
		if seen[e.Partition] || len(e.Partition) > 64 || e.Samples < 0 || e.LowSeconds > e.MedianSeconds || e.MedianSeconds > e.HighSeconds {
			return backends.Invalid(field, "is not what the operator writes (one entry per partition, lowSeconds ≤ medianSeconds ≤ highSeconds, samples ≥ 0); remove it")
		}
		seen[e.Partition] = true
	}
	return nil
}
