package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/builtin"
	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// BenchmarkArraySpread (issue 43): an array of N tasks of `true` spread
// over the suite's Slurm 22.05 and 24.11 (placement: spread) against the
// same array on 22.05 alone, in turn in the same run: makespan, backend
// requests and record size, with the prefixes spread- and one-, and
// wall-spread/one. Sizes: BRIDGE_BENCH_SPREAD (default 2000).
func BenchmarkArraySpread(b *testing.B) {
	env := needEnv(b, "BRIDGE_TEST_SLURM_URL", "BRIDGE_TEST_SLURM_CREDS", "BRIDGE_TEST_SLURM2411_URL", "BRIDGE_TEST_SLURM2411_CREDS", "BRIDGE_TEST_KUBECONFIG")
	targets := fmt.Sprintf(`[{"name":"old","resourceURL":%q,"credentials":%q},{"name":"young","resourceURL":%q,"credentials":%q}]`,
		env[0], env[1], env[2], env[3])
	for _, n := range envInts("BRIDGE_BENCH_SPREAD", []int{2000}) {
		b.Run(fmt.Sprintf("tasks=%d", n), func(b *testing.B) {
			base := record.Spec{Backend: "slurm", JobScript: "#!/bin/sh\ntrue\n", UpdateInterval: "5",
				Array: fmt.Sprintf("0-%d", n-1), JobProperties: `{"partition":"debug","time_limit":5}`}
			for i := 0; i < b.N; i++ {
				spread, one := base, base
				spread.Targets, spread.Placement = targets, record.PolicySpread
				one.ResourceURL = env[0]
				s := spreadBenchOnce(b, spread, env[1], n)
				o := spreadBenchOnce(b, one, env[1], n)
				s.report(b, "spread-")
				o.report(b, "one-")
				b.ReportMetric(s.wall.Seconds()/o.wall.Seconds(), "wall-spread/one")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// spreadBenchOnce runs one invoke of the array spec describes, its record
// a ConfigMap in a namespace of its own, and checks that all n tasks
// ended DONE. A transient failure is retried as a step's retryStrategy
// would (the retry re-attaches).
func spreadBenchOnce(b *testing.B, spec record.Spec, creds string, n int) arrayFigures {
	cfg := testkube.Config(b)
	kc, err := kube.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	client := testkube.Client(b)
	ns := testkube.Namespace(b, client)
	hc, err := runner.NewHTTPClient("", false)
	if err != nil {
		b.Fatal(err)
	}
	iv := &runner.Invoker{
		JobName: "spread", Spec: &spec, Registry: builtin.Registry(),
		Store:       &record.ConfigMapStore{Client: kc, Namespace: ns, Name: record.ConfigMapName("spread")},
		Backend:     backends.Config{Credentials: runner.DirCredentials{Dir: creds, Secrets: &runner.Secrets{}}, HTTPClient: hc},
		Log:         slog.New(slog.DiscardHandler),
		RetryBudget: 5 * time.Minute,
	}
	heapBefore, peak := heapPeak()
	f := arrayFigures{}
	start := time.Now()
	for try := 0; try < 3; try++ {
		if err = iv.Run(context.Background()); err == nil || errors.Is(err, backends.ErrInvalid) {
			break
		}
		f.retries++
	}
	f.wall, f.heap = time.Since(start), peak()-heapBefore
	f.backend, f.kube = runner.RequestCount(hc), kc.Requests()
	r := iv.Result()
	if err != nil || r.ArrayCounts != fmt.Sprintf("DONE=%d", n) {
		b.Fatalf("the array ended %s with counts %q: %v (%s)", r.Status, r.ArrayCounts, err, r.Message)
	}
	f.recordBytes = recordBytes(b, client, ns)
	rec, err := iv.Store.Get(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%s on %s: wall %.1fs, backend %d requests, kube %d, record %d bytes, retries %d\nplacement: %s\nchunks: %s",
		spec.Array, r.Target, f.wall.Seconds(), f.backend, f.kube, f.recordBytes, f.retries, rec.Data[record.KeyPlacement], rec.Data[record.KeyArrayChunks])
	return f
}
