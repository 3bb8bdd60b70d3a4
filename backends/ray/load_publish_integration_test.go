package ray

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
)

// TestRealLoadFromAMeasureIsTheProbe: on the real Ray cluster, a step
// judging its job against the measure a cluster's agent published
// (ProbeRequests requests) gets the Load its own probe gets, for a job of
// one CPU, one of more CPUs than the cluster has, one asking a resource it
// lacks and one asking nothing, and sends no request; a measure it cannot
// read is neither invalid nor transient (the step then probes).
func TestRealLoadFromAMeasureIsTheProbe(t *testing.T) {
	rr := needRay(t)
	var creds backends.Credentials
	if rr.creds != "" {
		creds = rr.creds
	}
	b, ct := countedBackend(t, rr.url, creds)
	one := backends.Job{Name: "probe", Key: newKey(t), Script: "import time\ntime.sleep(30)\n"}
	for _, props := range []string{`{"entrypoint_num_cpus":1}`, `{"entrypoint_num_cpus":4096}`, `{"entrypoint_resources":{"no_such_thing":1}}`, `{}`} {
		j := withProps(one, props)
		m, want := stableRayProbe(t, b, ct, j)
		assert.NotContains(t, m, "\n", "one line")
		before := ct.n.Load()
		got, err := b.LoadFrom(m, j, nil)
		require.NoError(t, err, props)
		assert.Equal(t, before, ct.n.Load(), "%s: LoadFrom sends nothing", props)
		assert.Equal(t, want, got, props)
		assert.Positive(t, got.TotalCPUs, "%s: the measure has the cluster: %+v", props, got)
	}
	for _, bad := range []string{"", "{}", `{"f":2}`, "api=v0.0.45"} {
		_, err := b.LoadFrom(bad, one, nil)
		require.Error(t, err, bad)
		assert.False(t, errors.Is(err, backends.ErrInvalid) || errors.Is(err, backends.ErrTransient), bad)
	}
}

// stableRayProbe measures, probes and measures again until both measures
// agree (other tests share the cluster and may change it in between).
func stableRayProbe(t *testing.T, b *Backend, ct *countingTransport, j backends.Job) (string, backends.Load) {
	t.Helper()
	ctx := context.Background()
	for try := 0; try < 20; try++ {
		before := ct.n.Load()
		m1, err := b.MeasureLoad(ctx)
		require.NoError(t, err)
		require.EqualValues(t, ProbeRequests, ct.n.Load()-before, "requests of one measure")
		want := probeCounted(t, b, ct, j)
		m2, err := b.MeasureLoad(ctx)
		require.NoError(t, err)
		if m1 == m2 {
			return m1, want
		}
		time.Sleep(time.Second)
	}
	t.Fatal("the cluster never kept still between two measures")
	return "", backends.Load{}
}
