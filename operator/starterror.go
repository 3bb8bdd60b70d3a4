package operator

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
)

// startErrorBuckets span a job that started a day earlier than its
// placement predicted to one a day later (the error has a sign).
var startErrorBuckets = []float64{-86400, -4 * 3600, -3600, -900, -300, -60, -15, 0, 15, 60, 300, 900, 3600, 4 * 3600, 86400}

// observeStartError observes a placed job's start estimate error when its
// observed start is first recorded (status.startEstimate gains observed=),
// fed from the records like the queue wait.
func (rm *recordMetrics) observeStartError(od, d map[string]string) {
	if d[record.KeyStartEstimate] == od[record.KeyStartEstimate] {
		return
	}
	e, err := record.ParseStartEstimate(d[record.KeyStartEstimate])
	if err != nil || e == nil {
		return
	}
	if was, _ := record.ParseStartEstimate(od[record.KeyStartEstimate]); was != nil && !was.Observed.IsZero() {
		return // observed before: counted then
	}
	if secs, ok := e.ErrorSeconds(); ok {
		rm.m.startError.Observe(float64(secs), e.Cluster, e.Partition)
	}
}

// clusterStartErrors learns, by partition, what the start estimates of
// the jobs placed at bc (records of its namespace whose targets came from
// it) were off by: record.LearnStartError of the newest observed errors.
// summary is the same in one line for kubectl get, "debug +5m (6)".
func (r *reconciler) clusterStartErrors(bc *BridgeCluster) (errs []record.StartError, summary string) {
	type obs struct {
		at   time.Time
		secs int64
	}
	by := map[string][]obs{}
	for _, o := range r.cms.GetStore().List() {
		cm := o.(*kube.ConfigMap)
		if cm.Namespace != bc.Namespace {
			continue
		}
		e, err := record.ParseStartEstimate(cm.Data[record.KeyStartEstimate])
		if err != nil || e == nil || e.Cluster != bc.Name {
			continue
		}
		secs, ok := e.ErrorSeconds()
		if sn := clusterProbe(cm, bc); ok && sn != nil && sn.placed.Target == bc.Name {
			by[e.Partition] = append(by[e.Partition], obs{e.Observed, secs})
		}
	}
	var parts []string
	for _, p := range slices.Sorted(maps.Keys(by)) {
		list := by[p]
		slices.SortStableFunc(list, func(a, b obs) int { return a.at.Compare(b.at) })
		secs := make([]int64, len(list))
		for i, o := range list {
			secs[i] = o.secs
		}
		se := record.LearnStartError(p, secs)
		errs = append(errs, se)
		parts = append(parts, fmt.Sprintf("%s %s (%d)", cmp.Or(p, "default"), signed(se.MedianSeconds), se.Samples))
	}
	return errs, strings.Join(parts, ", ")
}

// signed is a number of seconds as kubectl writes ages, with its sign:
// +5m (late), -30s (early).
func signed(secs int64) string {
	if secs < 0 {
		return "-" + duration.HumanDuration(time.Duration(-secs)*time.Second)
	}
	return "+" + duration.HumanDuration(time.Duration(secs)*time.Second)
}
