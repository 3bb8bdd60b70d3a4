package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/builtin"
	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// BenchmarkArray (issue 28): one job array of N short tasks against N
// separate invokes of the same job, in turn in the same run, on the suite's
// real Slurm 22.05 (slurmrestd) and kube-apiserver. As in BenchmarkScale the
// invokers run in this process (N processes of ~20 MiB would measure this
// machine's memory), each with its own ConfigMap record in one namespace,
// the cluster's watcher on (the default); the array is one invoker with
// `array: 0-(N-1)`. Every run is checked: the array DONE with DONE=N, the N
// invokes all DONE with N distinct Slurm jobs. Sizes: BRIDGE_BENCH_ARRAY
// (default 1000). Figures, each with the prefix array- or sep-:
//
//	wall-s            first submit to the last invoker's return
//	backend-req       every request slurmrestd got from the invokers
//	kube-req          every request the kube-apiserver got from them
//	record-KiB        the records' ConfigMaps as the API returns them
//	                  (JSON, without the server's managedFields), summed
//	heap-KiB          the heap's peak over its level before the run
//	retries           invokers run again after a transient failure (exit
//	                  75 in a step: a submit slurmctld did not answer in
//	                  time), as a retryStrategy would; counted in wall-s
//
// and wall-array/sep, the ratio of the two wall times. The guard holds
// array-backend-req/task (the array's requests per task, from 100 tasks
// on) under a ceiling: a separate job costs at least its submit and a poll.
func BenchmarkArray(b *testing.B) {
	env := needEnv(b, "BRIDGE_TEST_SLURM_URL", "BRIDGE_TEST_SLURM_CREDS", "BRIDGE_TEST_KUBECONFIG")
	for _, n := range envInts("BRIDGE_BENCH_ARRAY", []int{1000}) {
		b.Run(fmt.Sprintf("tasks=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				arr := arrayBenchOnce(b, env[0], env[1], []string{fmt.Sprintf("0-%d", n-1)})
				sep := arrayBenchOnce(b, env[0], env[1], make([]string, n))
				arr.report(b, "array-")
				sep.report(b, "sep-")
				b.ReportMetric(arr.wall.Seconds()/sep.wall.Seconds(), "wall-array/sep")
				perTask := float64(arr.backend) / float64(n)
				if n >= 100 {
					metric(b, perTask, "array-backend-req/task")
				} else {
					b.ReportMetric(perTask, "array-backend-req/task")
				}
				b.ReportMetric(float64(sep.backend)/float64(n), "sep-backend-req/job")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// arrayFigures is one side's run.
type arrayFigures struct {
	wall          time.Duration
	backend, kube int64
	recordBytes   int
	heap          uint64
	retries       int64 // runs of an invoker after a transient failure
}

func (f arrayFigures) report(b *testing.B, p string) {
	b.ReportMetric(f.wall.Seconds(), p+"wall-s")
	b.ReportMetric(float64(f.backend), p+"backend-req")
	b.ReportMetric(float64(f.kube), p+"kube-req")
	b.ReportMetric(float64(f.recordBytes)/1024, p+"record-KiB")
	b.ReportMetric(float64(f.heap)/1024, p+"heap-KiB")
	b.ReportMetric(float64(f.retries), p+"retries")
}

// BenchmarkArrayChunks (issue 43): an array of N tasks of `true` past the
// suite's Slurm 22.05's MaxArraySize (1,001), split by invoke into native
// arrays under one record, against the same tasks as the separate arrays
// of 1,000 a user would write by hand (one step each), in turn in the same
// run, as BenchmarkArray runs its sides. Sizes: BRIDGE_BENCH_ARRAY_CHUNKS
// (default 5000). Figures with the prefix chunked- or byhand-, as
// BenchmarkArray's, and wall-chunked/byhand.
func BenchmarkArrayChunks(b *testing.B) {
	env := needEnv(b, "BRIDGE_TEST_SLURM_URL", "BRIDGE_TEST_SLURM_CREDS", "BRIDGE_TEST_KUBECONFIG")
	for _, n := range envInts("BRIDGE_BENCH_ARRAY_CHUNKS", []int{5000}) {
		b.Run(fmt.Sprintf("tasks=%d", n), func(b *testing.B) {
			var byHand []string
			for first := 0; first < n; first += 1000 {
				byHand = append(byHand, fmt.Sprintf("0-%d", min(n-first, 1000)-1))
			}
			for i := 0; i < b.N; i++ {
				chunked := arrayBenchOnce(b, env[0], env[1], []string{fmt.Sprintf("0-%d", n-1)})
				hand := arrayBenchOnce(b, env[0], env[1], byHand)
				chunked.report(b, "chunked-")
				hand.report(b, "byhand-")
				b.ReportMetric(chunked.wall.Seconds()/hand.wall.Seconds(), "wall-chunked/byhand")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// arrayBenchOnce runs one invoker per key of arrays (an array key, or ""
// for a single job), all in a namespace of their own, and checks that
// every task ended DONE.
func arrayBenchOnce(b *testing.B, slurmURL, creds string, arrays []string) arrayFigures {
	cfg := testkube.Config(b)
	cfg.QPS, cfg.Burst = 1000, 2000
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
	reg := builtin.Registry()
	newInvoker := func(name string, spec *record.Spec) *runner.Invoker {
		return &runner.Invoker{
			JobName: name, Spec: spec, Registry: reg,
			Store:       &record.ConfigMapStore{Client: kc, Namespace: ns, Name: record.ConfigMapName(name)},
			Backend:     backends.Config{Credentials: runner.DirCredentials{Dir: creds, Secrets: &runner.Secrets{}}, HTTPClient: hc},
			Log:         slog.New(slog.DiscardHandler),
			RetryBudget: 5 * time.Minute,
		}
	}
	spec := record.Spec{Backend: "slurm", ResourceURL: slurmURL, JobScript: "#!/bin/sh\ntrue\n", UpdateInterval: "5"}
	jobs := len(arrays)
	invokers := make([]*runner.Invoker, jobs)
	for i := range invokers {
		s := spec
		s.Array = arrays[i]
		invokers[i] = newInvoker(fmt.Sprintf("arr-%v-%d", s.Array != "", i), &s)
	}
	heapBefore, peak := heapPeak()
	errs := make([]error, jobs)
	var retries atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i, iv := range invokers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A transient failure (exit 75: slurmctld overwhelmed by N
			// submits at once) is retried as a step's retryStrategy would
			// (the retry re-attaches, or submits what never was).
			for try := 0; try < 3; try++ {
				if errs[i] = iv.Run(context.Background()); errs[i] == nil || errors.Is(errs[i], backends.ErrInvalid) {
					return
				}
				retries.Add(1)
			}
		}()
	}
	wg.Wait()
	f := arrayFigures{wall: time.Since(start), heap: peak() - heapBefore,
		backend: runner.RequestCount(hc), kube: kc.Requests(), retries: retries.Load()}
	checkArrayBench(b, arrays, invokers, errs)
	f.recordBytes = recordBytes(b, client, ns)
	b.Logf("arrays %q (%d invokers): wall %.1fs, backend %d requests, kube %d, records %d bytes, heap %d KiB, retries %d",
		strings.Join(arrays[:min(len(arrays), 3)], " "), jobs, f.wall.Seconds(), f.backend, f.kube, f.recordBytes, f.heap/1024, f.retries)
	return f
}

// checkArrayBench fails the benchmark unless every task ended DONE: each
// array with DONE= its tasks, and every invoker with a Slurm job (or
// array) of its own.
func checkArrayBench(b *testing.B, arrays []string, invokers []*runner.Invoker, errs []error) {
	ids := map[string]bool{}
	for i, iv := range invokers {
		r := iv.Result()
		if errs[i] != nil || r.Status != "DONE" {
			b.Fatalf("invoker %d (array %q): %v (%s: %s)", i, arrays[i], errs[i], r.Status, r.Message)
		}
		ids[r.ID] = true
		if arrays[i] == "" {
			continue
		}
		a, err := backends.ParseArray(arrays[i])
		if err != nil {
			b.Fatal(err)
		}
		if r.ArrayCounts != fmt.Sprintf("DONE=%d", a.Count()) {
			b.Fatalf("the array %s ended with counts %q", arrays[i], r.ArrayCounts)
		}
	}
	if len(ids) != len(invokers) {
		b.Fatalf("%d invokers made %d distinct Slurm jobs", len(invokers), len(ids))
	}
}

// heapPeak starts following the heap in use; peak stops and returns its
// highest level since, and before is the level at the start (after a GC).
func heapPeak() (before uint64, peak func() uint64) {
	runtime.GC()
	before = heapInUse()
	stop := make(chan struct{})
	peakc := make(chan uint64)
	go func() {
		top := heapInUse()
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				top = max(top, heapInUse())
			case <-stop:
				peakc <- top
				return
			}
		}
	}()
	return before, func() uint64 {
		close(stop)
		return <-peakc
	}
}

// recordBytes sums the records' ConfigMaps in ns as the API returns them
// in JSON, less managedFields (the server's bookkeeping, not the record).
func recordBytes(b *testing.B, client kubernetes.Interface, ns string) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	total := 0
	for _, cm := range list.Items {
		if !strings.HasSuffix(cm.Name, "-bridge-cm") {
			continue
		}
		cm.ManagedFields = nil
		data, err := json.Marshal(cm)
		if err != nil {
			b.Fatal(err)
		}
		total += len(data)
	}
	return total
}
