package runner_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/fake"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// twoClusters is a harness with two fake clusters, a and b, each its own
// backend at its own URL; b's credentials are in the subdirectory b of the
// step's credentials directory.
type twoClusters struct {
	*harness
	a, b  *fake.Backend
	creds string
	// credsOf records the credentials directory each backend was built with.
	mu      sync.Mutex
	credsOf map[string]string
}

const twoTargets = `[{"name":"a","backend":"fakea","resourceURL":"https://a.example.org:6820"},` +
	`{"name":"b","backend":"fakeb","resourceURL":"https://b.example.org:6820","credentials":"b"}]`

func newTwoClusters(t *testing.T) *twoClusters {
	h := newHarness(t, nil)
	tc := &twoClusters{harness: h, a: fake.New(), b: fake.New(), creds: t.TempDir(), credsOf: map[string]string{}}
	require.NoError(t, os.MkdirAll(filepath.Join(tc.creds, "b"), 0o700))
	for name, f := range map[string]*fake.Backend{"fakea": tc.a, "fakeb": tc.b} {
		require.NoError(t, h.reg.Register(name, func(cfg backends.Config) (backends.Backend, error) {
			if dc, ok := cfg.Credentials.(runner.DirCredentials); ok {
				tc.mu.Lock()
				tc.credsOf[name] = dc.Dir
				tc.mu.Unlock()
			}
			return f, nil
		}))
	}
	return tc
}

func (tc *twoClusters) invoker(policy string) *runner.Invoker {
	spec := &record.Spec{Targets: twoTargets, Placement: policy, ResourceURL: "https://a.example.org:6820",
		JobScript: "#!/bin/sh\ntrue\n", JobProperties: `{"run":"50ms"}`, UpdateInterval: "0.5"}
	iv := tc.harness.invoker(spec)
	iv.Backend.Credentials = runner.DirCredentials{Dir: tc.creds, Secrets: &runner.Secrets{}}
	return iv
}

func loadOf(free, total, pending int) *backends.Load {
	l := backends.UnknownLoad("batch")
	l.FreeCPUs, l.TotalCPUs, l.PendingJobs, l.JobCPUs = free, total, pending, 1
	return &l
}

func TestPlacementSubmitsWhereTheJobStartsFirst(t *testing.T) {
	tc := newTwoClusters(t)
	tc.a.SetLoad(loadOf(0, 4, 12), nil)
	tc.b.SetLoad(loadOf(4, 4, 0), nil)
	iv := tc.invoker("")
	require.NoError(t, iv.Run(context.Background()))
	assert.Equal(t, "DONE", iv.Result().Status)
	assert.Equal(t, "b", iv.Result().Target)
	assert.Len(t, tc.b.Jobs(), 1, "the job went to b, where it starts now")
	assert.Empty(t, tc.a.Jobs())
	assert.Equal(t, 1, tc.a.Count("probe"))
	assert.Equal(t, filepath.Join(tc.creds, "b"), tc.credsOf["fakeb"], "b gets its own credentials")
	assert.Equal(t, tc.creds, tc.credsOf["fakea"], "a (the job's own URL) gets the step's")

	p, err := record.ParsePlaced(tc.record()[record.KeyPlacement])
	require.NoError(t, err)
	require.NotNil(t, p)
	assert.Equal(t, "b", p.Target)
	assert.Equal(t, "fakeb", p.Backend)
	assert.Equal(t, record.PolicyEarliestStart, p.Policy)
	require.Len(t, p.Probes, 2)
	assert.Equal(t, 12, *p.Probes[0].PendingJobs)
	assert.Equal(t, 4, *p.Probes[1].FreeCPUs)

	// A re-attach (another invoke of the same record) neither probes nor
	// submits again: the recorded placement stands.
	tc.a.SetLoad(loadOf(4, 4, 0), nil)
	tc.b.SetLoad(loadOf(0, 4, 50), nil)
	again := tc.invoker("")
	require.NoError(t, again.Run(context.Background()))
	assert.Equal(t, "b", again.Result().Target)
	assert.Equal(t, 2, tc.a.Count("probe")+tc.b.Count("probe"), "one probe each, in the first run only")
	assert.Len(t, tc.b.Jobs(), 1)
	assert.Empty(t, tc.a.Jobs())
}

func TestPlacementSkipsATargetThatDoesNotAnswer(t *testing.T) {
	tc := newTwoClusters(t)
	tc.a.SetDown(true) // its error carries a server's text, which must go nowhere
	tc.b.SetLoad(loadOf(0, 4, 30), nil)
	iv := tc.invoker(record.PolicyOrdered)
	require.NoError(t, iv.Run(context.Background()))
	assert.Equal(t, "b", iv.Result().Target)
	assert.Len(t, tc.b.Jobs(), 1)
	pl := tc.record()[record.KeyPlacement]
	assert.Contains(t, pl, `"skipped":"did not answer"`)
	assert.NotContains(t, pl, "5ecret-detail")
}

func TestPlacementWithNoTargetAnsweringSubmitsNothing(t *testing.T) {
	tc := newTwoClusters(t)
	tc.a.SetDown(true)
	tc.b.SetDown(true)
	iv := tc.invoker("")
	err := iv.Run(context.Background())
	require.Error(t, err)
	assert.True(t, errors.Is(err, backends.ErrTransient), "exit 75: a retry may find a target back: %v", err)
	assert.NotContains(t, err.Error(), "5ecret-detail")
	assert.Empty(t, tc.record()[record.KeyPlacement], "no choice is recorded")
	assert.Empty(t, tc.a.Jobs())
	assert.Empty(t, tc.b.Jobs())

	tc.a.SetDown(false)
	tc.b.SetDown(false)
	tc.a.SetLoad(nil, backends.Invalid("jobproperties.partition", "no partition batch on this cluster"))
	l := loadOf(4, 4, 0)
	l.Fits, l.Why = false, "asks 64 CPUs, the partition has 4"
	tc.b.SetLoad(l, nil)
	err = tc.invoker("").Run(context.Background())
	require.Error(t, err)
	assert.True(t, errors.Is(err, backends.ErrInvalid), "no target can take the job: exit 2: %v", err)
	assert.Contains(t, err.Error(), "a: refused the job: jobproperties.partition")
	assert.Contains(t, err.Error(), "b: does not fit: asks 64 CPUs")
	assert.Empty(t, tc.a.Jobs())
	assert.Empty(t, tc.b.Jobs())
}

func TestCleanupCancelsOnThePlacedTarget(t *testing.T) {
	tc := newTwoClusters(t)
	tc.a.SetLoad(loadOf(4, 4, 0), nil)
	tc.b.SetLoad(loadOf(0, 4, 3), nil)
	spec := tc.invoker("").Spec
	spec.JobProperties = `{"run":"1h"}`
	iv := tc.invoker("")
	iv.Spec = spec
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- iv.Run(ctx) }()
	require.Eventually(t, func() bool {
		rec, err := tc.store.Get(context.Background())
		return err == nil && rec.Data[record.KeyID] != ""
	}, 5*time.Second, 10*time.Millisecond)
	c := tc.harness.cleaner()
	c.Backend.Credentials = runner.DirCredentials{Dir: tc.creds, Secrets: &runner.Secrets{}}
	res, err := c.Run(context.Background())
	require.NoError(t, err)
	assert.True(t, res.Cancelled, "%+v", res)
	// The invoke, seeing kill=true, and cleanup both cancel; which asks
	// first is a race (a loaded machine made it two), but both ask a.
	assert.GreaterOrEqual(t, tc.a.Count("cancel"), 1, "cancelled where the job runs")
	assert.Zero(t, tc.b.Count("cancel"))
	cancel()
	<-done
}

func TestTargetsRefuseCredentialsForAnotherOrigin(t *testing.T) {
	tc := newTwoClusters(t)
	iv := tc.invoker("")
	iv.Spec.Targets = strings.Replace(twoTargets, `,"credentials":"b"`, "", 1)
	err := iv.Run(context.Background())
	require.Error(t, err)
	assert.True(t, errors.Is(err, backends.ErrInvalid))
	assert.Contains(t, err.Error(), "targets[1].credentials")
	assert.Zero(t, tc.a.Count("probe")+tc.b.Count("probe"), "refused before anything was asked")
}

// Invokers of one record that place it at once agree on one target: the
// first placement recorded wins, whatever the others' probes said, and
// exactly one job is submitted in all.
func TestConcurrentInvokersPlaceOnce(t *testing.T) {
	tc := newTwoClusters(t)
	tc.a.SetLoad(loadOf(4, 4, 0), nil)
	tc.b.SetLoad(loadOf(4, 4, 0), nil)
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i == 3 { // later probes see a full, as if it filled meanwhile
				tc.a.SetLoad(loadOf(0, 4, 9), nil)
			}
			iv := tc.invoker("")
			iv.Holder = fmt.Sprintf("invoker-%d", i)
			assert.NoError(t, iv.Run(context.Background()))
		}()
	}
	wg.Wait()
	assert.Equal(t, 1, len(tc.a.Jobs())+len(tc.b.Jobs()), "one job for the record, on one target")
	p, err := record.ParsePlaced(tc.record()[record.KeyPlacement])
	require.NoError(t, err)
	id := tc.record()[record.KeyID]
	placedOn := map[string]*fake.Backend{"a": tc.a, "b": tc.b}[p.Target]
	require.Len(t, placedOn.Jobs(), 1, "the job is on the recorded target")
	assert.Equal(t, id, placedOn.Jobs()[0].ID)
}
