package runner

import (
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
)

// Start estimates (sbatch --test-only and the like) are checked before
// placement trusts them, recorded with the placement (the prediction) and
// again when the job is first seen running (the observation), so that
// their error can be measured by cluster and partition.

// trustEstimates is the one way candidates' start estimates reach a
// policy: absurd ones cleared (distrustAbsurd), the rest corrected by
// what their cluster's estimates were off by (correctByLearnt).
// TestEstimatesReachPoliciesOnlyThroughTrust holds every ranking to it.
func trustEstimates(cands []candidate, at time.Time) {
	distrustAbsurd(cands, at)
	correctByLearnt(cands)
}

// distrustAbsurd clears the start estimates no placement at time at may
// trust (record.PlausibleStart: before it, or years after it), marking
// them absurd, so that they rank nothing and are recorded as unknown.
func distrustAbsurd(cands []candidate, at time.Time) {
	for i := range cands {
		est := cands[i].load.EstimatedStart
		if !est.IsZero() && record.PlausibleStart(est, at).IsZero() {
			cands[i].load.EstimatedStart, cands[i].absurdStart = time.Time{}, true
		}
	}
}

// correctByLearnt moves each trusted estimate by what its target's
// partition's estimates were off by lately (record.StartError.Correction:
// the median error, bounded by the errors' range; nothing when unknown),
// so that a cluster whose estimates come true late ranks by when its jobs
// actually start.
func correctByLearnt(cands []candidate) {
	for i := range cands {
		c := &cands[i]
		se := record.StartErrorFor(c.target.StartErrors, c.load.Queue)
		if c.load.EstimatedStart.IsZero() || se == nil {
			continue
		}
		c.shift = se.Correction()
		c.load.EstimatedStart = c.load.EstimatedStart.Add(c.shift)
	}
}

// schedulerStart is c's start estimate as its scheduler gave it (before
// correctByLearnt): what the record keeps, so the errors measured are the
// scheduler's, not the correction's.
func (c candidate) schedulerStart() time.Time {
	if c.load.EstimatedStart.IsZero() {
		return time.Time{}
	}
	return c.load.EstimatedStart.Add(-c.shift)
}

// predictedStart is the record's start estimate for a placement at time
// at on c: "" when c's probe gave no estimate (the placement used none).
func predictedStart(c candidate, at time.Time) string {
	if c.load.EstimatedStart.IsZero() && !c.absurdStart {
		return ""
	}
	return record.StartEstimate{Cluster: clusterLabel(c.target), Partition: c.load.Queue,
		Predicted: record.PlausibleStart(c.schedulerStart(), at).UTC()}.String()
}

// clusterLabel is the cluster a target's estimates are counted for: the
// target's name, which for a BridgeJob is its BridgeCluster's (a target's
// cluster field is no better: every target inherits the record's).
func clusterLabel(t record.Target) string {
	return t.Name
}

// observedStart is the record's start estimate with the observed start
// once st first shows the job started: the backend's own start time when
// it reports one, else now (first seen running). "" when there is
// nothing to add: no prediction recorded, one observed already, or the
// job not started.
func observedStart(recorded string, st backends.Status, now time.Time) string {
	e, err := record.ParseStartEstimate(recorded)
	if err != nil || e == nil || !e.Observed.IsZero() {
		return ""
	}
	switch {
	case st.State == backends.Pending || st.State == "":
		return ""
	case !st.StartTime.IsZero():
		e.Observed = st.StartTime
	case st.State == backends.Running:
		e.Observed = now
	default:
		return "" // ended without a start the backend told: nothing observed
	}
	e.Observed = e.Observed.UTC().Truncate(time.Second)
	return e.String()
}
