package runner

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
)

func load(free, total, pending int) backends.Load {
	l := backends.UnknownLoad("p")
	l.FreeCPUs, l.TotalCPUs, l.PendingJobs, l.PendingCPUs, l.JobCPUs = free, total, pending, pending, 1
	return l
}

func cands(loads ...backends.Load) []candidate {
	out := make([]candidate, len(loads))
	for i, l := range loads {
		out[i] = candidate{target: record.Target{Name: string(rune('a' + i))}, load: l}
	}
	return out
}

func TestPlacementPolicies(t *testing.T) {
	full, idle, busy := load(0, 4, 12), load(4, 4, 0), load(1, 8, 3)
	unknown := backends.UnknownLoad("")
	soon, later := load(0, 4, 2), load(0, 4, 2)
	soon.EstimatedStart, later.EstimatedStart = time.Unix(1000, 0), time.Unix(2000, 0)
	for _, c := range []struct {
		name   string
		policy string
		cands  []candidate
		want   int
	}{
		{"earliest-start takes the idle one", record.PolicyEarliestStart, cands(full, idle), 1},
		{"earliest-start: free CPUs but a queue loses to an idle one", record.PolicyEarliestStart, cands(busy, idle), 1},
		{"earliest-start: the scheduler's estimates decide", record.PolicyEarliestStart, cands(later, soon), 1},
		{"earliest-start: the smaller backlog per CPU", record.PolicyEarliestStart, cands(full, busy), 1},
		{"earliest-start: an unknown load loses to a known one", record.PolicyEarliestStart, cands(unknown, full), 1},
		{"earliest-start: ties go to the first listed", record.PolicyEarliestStart, cands(idle, idle), 0},
		{"unknown loads go by order", record.PolicyEarliestStart, cands(unknown, unknown), 0},
		{"least-pending per free CPU", record.PolicyLeastPending, cands(full, busy, idle), 2},
		{"least-pending: a full queue vs a fuller one", record.PolicyLeastPending, cands(load(0, 4, 12), load(0, 4, 3)), 1},
		{"ordered: the first where it starts now", record.PolicyOrdered, cands(full, idle, idle), 1},
		{"ordered: spills to the first that fits when none starts now", record.PolicyOrdered, cands(full, busy), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := choose(c.policy, c.cands)
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
			again, _ := choose(c.policy, c.cands)
			assert.Equal(t, got, again, "the same inputs give the same choice")
		})
	}
}

func TestPlacementSkipsWhatCannotTakeTheJob(t *testing.T) {
	cs := cands(load(4, 4, 0), load(4, 4, 0), load(0, 4, 1))
	cs[0].skip, cs[0].down = "did not answer", true
	cs[1].skip = "does not fit: too many CPUs"
	got, err := choose(record.PolicyEarliestStart, cs)
	require.NoError(t, err)
	assert.Equal(t, 2, got, "only the third can take the job, loaded as it is")

	cs[2].skip = "does not fit: time limit"
	_, err = choose(record.PolicyEarliestStart, cs)
	require.Error(t, err)
	assert.True(t, errors.Is(err, backends.ErrTransient), "a target that did not answer may answer a retry: %v", err)
	assert.Contains(t, err.Error(), "a: did not answer")

	cs[0].down = false
	cs[0].skip = "refused the job: jobproperties.partition: no such partition"
	_, err = choose(record.PolicyEarliestStart, cs)
	assert.True(t, errors.Is(err, backends.ErrInvalid), "every target refused the job: exit 2: %v", err)
	assert.False(t, errors.Is(err, backends.ErrTransient))
}

func TestSkipReasonQuotesNoServerText(t *testing.T) {
	server := errors.New("upstream said: <html>secret-token-123</html>")
	for _, err := range []error{server, backends.Transient(server), errors.Join(backends.ErrAuth, server)} {
		assert.NotContains(t, skipReason(err), "secret-token-123")
	}
	assert.Equal(t, "refused the job: jobproperties.partition: does not exist",
		skipReason(backends.Invalid("jobproperties.partition", "does not exist")))
}

// Where both probes tell CPU-seconds, they decide over counts: one long
// job waiting is more work than several short ones, under either policy
// that weighs the queue.
func TestPlacementWeighsCPUSeconds(t *testing.T) {
	long, short := load(0, 4, 1), load(0, 4, 4)
	require.True(t, better(record.PolicyLeastPending, long, short), "by counts the single job looks lighter")
	long.PendingCPUSeconds, long.CPUSecondsKnown = 4*3600, true
	short.PendingCPUSeconds, short.CPUSecondsKnown = 4*60, true
	for _, policy := range []string{record.PolicyLeastPending, record.PolicyEarliestStart} {
		i, err := choose(policy, cands(long, short))
		require.NoError(t, err)
		assert.Equal(t, 1, i, policy)
	}
	short.RunningCPUSeconds = 8 * 3600 // its CPUs are taken for longer
	i, err := choose(record.PolicyEarliestStart, cands(long, short))
	require.NoError(t, err)
	assert.Equal(t, 0, i, "running work counts for earliest start")
	short.CPUSecondsKnown = false
	i, err = choose(record.PolicyLeastPending, cands(long, short))
	require.NoError(t, err)
	assert.Equal(t, 0, i, "one probe without CPU-seconds: counts decide")
}

// A shared probe's figures carry the work of the jobs placed since: their
// CPU-seconds are ahead of the next job; one placed without a time makes
// the sum unknown (counts decide then).
func TestSharedLoadCountsPlacedCPUSeconds(t *testing.T) {
	l := load(0, 4, 1)
	l.PendingCPUSeconds, l.CPUSecondsKnown = 600, true
	e := shareEntry{Load: l, PlacedJobs: 2, PlacedCPUs: 2, PlacedCPUSeconds: 7200}
	got := e.withPlaced()
	assert.Equal(t, int64(7800), got.PendingCPUSeconds)
	assert.True(t, got.CPUSecondsKnown)
	e.PlacedUntimed = 1
	assert.False(t, e.withPlaced().CPUSecondsKnown)
}

// A target may name the cluster whose agent measures its load; a name
// that is not a cluster's is refused as the field it is, naming the fix.
func TestTargetNamesItsCluster(t *testing.T) {
	spec := func(c string) *record.Spec {
		return &record.Spec{Backend: "slurm", ResourceURL: "http://127.0.0.1:6820", JobScript: "#!/bin/sh\ntrue\n",
			Targets: `[{"name":"a"},{"name":"b","resourceURL":"http://127.0.0.2:6820","credentials":"b","cluster":"` + c + `"}]`}
	}
	d, err := spec(" hpc-2 ").Parse()
	require.NoError(t, err)
	assert.Equal(t, []string{"", "hpc-2"}, []string{d.Targets[0].Cluster, d.Targets[1].Cluster})
	s := spec("hpc-2")
	s.Cluster = "hpc-1"
	d, err = s.Parse()
	require.NoError(t, err)
	assert.Equal(t, []string{"hpc-1", "hpc-2"}, []string{d.Targets[0].Cluster, d.Targets[1].Cluster}, "the record's unless given")
	_, err = spec("HPC_2").Parse()
	require.ErrorIs(t, err, backends.ErrInvalid)
	assert.Contains(t, err.Error(), "targets[1].cluster")
	assert.Contains(t, err.Error(), "lowercase letters")
}
