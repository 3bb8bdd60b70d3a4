package runner_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// Twenty steps placed at once share two clusters' probes through the
// real kube-apiserver: a few probes in all, not one per step and target,
// and each placement counts against the shared figures, so the steps
// spread over both clusters as their free CPUs go, instead of all going
// to the one that looked best on the figures they all read at once.
func TestPlacementSharesProbesAcrossAFanOut(t *testing.T) {
	tc := newTwoClusters(t)
	tc.withCredentials(t)
	tc.a.SetLoad(loadOf(2, 4, 0), nil)
	tc.b.SetLoad(loadOf(4, 4, 0), nil)
	// Their figures show the jobs placed on them, and the jobs outlast a
	// shared probe (LoadShareTTL): on a loaded machine the burst's steps
	// take longer than one TTL, and a probe taken again must see the
	// placements so far as a real scheduler's would (static figures made
	// the later steps see two idle clusters: 4 and 16 in CI).
	tc.a.LoadCountsJobs, tc.b.LoadCountsJobs = true, true
	base := testkube.RecordStore(t)
	const n = 20
	start := time.Now()
	var wg sync.WaitGroup
	targets := make([]string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			job := fmt.Sprintf("fan-%d", i)
			iv := tc.invoker("")
			iv.Spec.JobProperties = `{"run":"12s"}`
			iv.JobName, iv.Holder = job, job
			iv.Store = &record.ConfigMapStore{Client: base.Client, Namespace: base.Namespace, Name: record.ConfigMapName(job)}
			iv.Watch.Off = true
			if assert.NoError(t, iv.Run(context.Background()), job) {
				targets[i] = iv.Result().Target
			}
		}()
	}
	wg.Wait()
	count := map[string]int{}
	for _, tg := range targets {
		count[tg]++
	}
	t.Logf("placed: %v; probes a=%d b=%d", count, tc.a.Count("probe"), tc.b.Count("probe"))
	assert.Equal(t, n, count["a"]+count["b"])
	assert.Len(t, tc.a.Jobs(), count["a"], "one job per step placed on a")
	assert.Len(t, tc.b.Jobs(), count["b"], "one job per step placed on b")
	// On the same figures every step would take b (the smaller backlog per
	// CPU); counted in turn, they split as placing them one after another
	// does (9 and 11).
	assert.GreaterOrEqual(t, count["a"], 5, "the burst's placements see each other's")
	assert.GreaterOrEqual(t, count["b"], 5)
	// A shared probe stands for LoadShareTTL: the burst probes each
	// cluster about once per TTL of the time its placements took (one
	// more for a probe taken as one expires), not once per step. On a
	// loaded machine the placements take longer, and so more probes.
	var last time.Time
	for _, j := range append(tc.a.Jobs(), tc.b.Jobs()...) {
		if j.Submitted.After(last) {
			last = j.Submitted
		}
	}
	most := 2 + int(last.Sub(start)/runner.LoadShareTTL)
	t.Logf("placements took %s: at most %d probes a cluster", last.Sub(start).Round(time.Millisecond), most)
	assert.LessOrEqual(t, tc.a.Count("probe"), min(most, n/2), "a fan-out shares its probes")
	assert.LessOrEqual(t, tc.b.Count("probe"), min(most, n/2), "a fan-out shares its probes")

	cms, err := testkube.Client(t).CoreV1().ConfigMaps(base.Namespace).List(context.Background(),
		metav1.ListOptions{LabelSelector: runner.LabelLoadGroup})
	require.NoError(t, err)
	assert.Len(t, cms.Items, 2, "one shared-load ConfigMap per cluster")
	for _, cm := range cms.Items {
		for _, v := range cm.Data {
			assert.NotContains(t, v, "5ecret")
		}
	}
}
