package agent_test

import (
	"context"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/record"
)

// legs times where a detection's delay goes (the benchmark's, not the
// product's): per job, from the job's end (its stamp) to
//
//	saw        the end of the agent's batched query that first said final
//	observed   the agent's observation of a final state, as a watch of
//	           the namespace (one, the benchmark's own) received it
//	asked      the step's first one-job query after the agent saw the
//	           end (the step confirming what its record watch told it)
//	recorded   the step's write of the final state, as that watch got it
//	returned   the step's return (the detection figure)
//
// and the agent's rounds: how long a batched query took, and the time
// from one's end to the next's start (its writes, then its wait).
type legs struct {
	mu       sync.Mutex
	saw      map[string]time.Time   // by job id
	asked    map[string][]time.Time // by job id, every one-job query of a step
	observed map[string]time.Time   // by record name
	recorded map[string]time.Time   // by record name
	queries  []time.Duration
	gaps     []time.Duration
	lastEnd  time.Time
}

func newLegs() *legs {
	return &legs{saw: map[string]time.Time{}, asked: map[string][]time.Time{}, observed: map[string]time.Time{}, recorded: map[string]time.Time{}}
}

// query notes an agent's batched query from start to now and its answer.
func (l *legs) query(start time.Time, sts map[string]backends.Status) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.queries = append(l.queries, now.Sub(start))
	if !l.lastEnd.IsZero() {
		l.gaps = append(l.gaps, start.Sub(l.lastEnd))
	}
	l.lastEnd = now
	for id, st := range sts {
		if _, seen := l.saw[id]; !seen && st.State.Final() {
			l.saw[id] = now
		}
	}
}

// request notes a step's request to slurmrestd.
func (l *legs) request(who string, r *http.Request) {
	if who != "step" || pathKind(r) != "job" {
		return
	}
	id := path.Base(strings.TrimSuffix(r.URL.Path, "/"))
	l.mu.Lock()
	l.asked[id] = append(l.asked[id], time.Now())
	l.mu.Unlock()
}

// watch follows namespace ns's ConfigMaps with a client of its own until
// ctx ends, noting when each record first showed a final observation and
// a final state.
func (l *legs) watch(ctx context.Context, b *testing.B, ns string) {
	lister := record.NewSelectedLister(testkube.KubeClient(b, testkube.Config(b)), ns, "")
	_, version, err := lister.List(ctx)
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		for ev := range lister.Watch(ctx, version) {
			if ev.Deleted || ev.Listed.Record == nil {
				continue
			}
			now, d := time.Now(), ev.Listed.Record.Data
			l.mu.Lock()
			if f := strings.Fields(d[record.KeyWatchObserved]); len(f) > 1 && backends.State(f[1]).Final() {
				firstAt(l.observed, ev.Listed.Name, now)
			}
			if backends.State(d[record.KeyJobStatus]).Final() {
				firstAt(l.recorded, ev.Listed.Name, now)
			}
			l.mu.Unlock()
		}
	}()
}

func firstAt(m map[string]time.Time, k string, at time.Time) {
	if _, ok := m[k]; !ok {
		m[k] = at
	}
}

// report logs each leg's p50/p95 for the steps' ends (by job id and
// record name) and returns the report's lines.
func (l *legs) report(ends []stepEnd) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var saw, observed, asked, recorded, returned []float64
	since := func(out *[]float64, at time.Time, end float64) {
		if !at.IsZero() {
			*out = append(*out, float64(at.UnixNano())/1e9-end)
		}
	}
	for _, e := range ends {
		if e.stamp == 0 {
			continue // failed: no stamp, or no return
		}
		since(&saw, l.saw[e.id], e.stamp)
		since(&observed, l.observed[e.name], e.stamp)
		since(&recorded, l.recorded[e.name], e.stamp)
		since(&returned, e.returned, e.stamp)
		if at := l.saw[e.id]; !at.IsZero() {
			for _, q := range l.asked[e.id] {
				if !q.Before(at) {
					since(&asked, q, e.stamp)
					break
				}
			}
		}
	}
	lines := []string{
		leg("saw", saw), leg("observed", observed), leg("asked", asked), leg("recorded", recorded), leg("returned", returned),
		durs("agent query", l.queries), durs("agent query end to next start", l.gaps),
	}
	return strings.Join(lines, "\n")
}

// stepEnd is one step's job, record, end (its stamp) and return.
type stepEnd struct {
	id, name string
	stamp    float64
	returned time.Time
}

func leg(name string, v []float64) string {
	if len(v) == 0 {
		return name + ": none"
	}
	slices.Sort(v)
	return fmt.Sprintf("%-9s n=%4d p50 %6.2f s  p95 %6.2f s  max %6.2f s", name, len(v), v[len(v)/2], v[(len(v)*95+99)/100-1], v[len(v)-1])
}

func durs(name string, d []time.Duration) string {
	if len(d) == 0 {
		return name + ": none"
	}
	v := make([]float64, len(d))
	for i, x := range d {
		v[i] = x.Seconds()
	}
	return leg(name, v)
}
