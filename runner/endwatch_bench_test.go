package runner_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/testssh"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// BenchmarkEndMarker: N jobs of 5 s at once (N from BRIDGE_BENCH_END_N,
// default 20), each followed by an invoke of its own (its own SSH
// connection, as separate steps have), on Slurm over SSH and on HTCondor:
// with the jobs announcing their end (marker, event log) and with polling
// alone, side by side in one run. It prints the detection latency (from
// the job's own end stamp to the end of its invoke) p50/p95/max and the
// scheduler status queries per job; it asserts nothing about time.
//
//	go test -tags bridgetest -run '^$' -bench BenchmarkEndMarker -benchtime 1x ./runner/
func BenchmarkEndMarker(b *testing.B) {
	n := 20
	if v, err := strconv.Atoi(os.Getenv("BRIDGE_BENCH_END_N")); err == nil && v > 0 {
		n = v
	}
	for _, target := range benchTargets(b) {
		for _, announce := range []bool{true, false} {
			mode := map[bool]string{true: "marker", false: "polling"}[announce]
			b.Run(fmt.Sprintf("%s/%s/n=%d", target.backend, mode, n), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					endBatch(b, target, n, announce)
				}
			})
		}
	}
}

// benchTarget is a login node and the directory its jobs see as root.
type benchTarget struct {
	sshTarget
	root string // the chroot the jobs run in ("" for none)
}

func benchTargets(b *testing.B) []benchTarget {
	var out []benchTarget
	for _, tg := range sshTargets(b) {
		out = append(out, benchTarget{tg, tg.srv.Root})
	}
	return out
}

// endBatch runs n jobs at once and reports their figures.
func endBatch(b *testing.B, target benchTarget, n int, announce bool) {
	dir, err := os.MkdirTemp("/tmp", "bridge-bench-end-")
	if err != nil {
		b.Fatal(err)
	}
	hostDir := filepath.Join(target.root, dir)
	if err := os.MkdirAll(hostDir, 0o1777); err != nil {
		b.Fatal(err)
	}
	if err := os.Chmod(hostDir, 0o1777); err != nil { // the job runs as the login node's user
		b.Fatal(err)
	}
	defer os.RemoveAll(hostDir)
	defer os.RemoveAll(dir)
	delays, queries := make([]float64, n), make([]int, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			stamp := filepath.Join(dir, "job-"+strconv.Itoa(i))
			iv, probe := benchInvoker(b, target.sshTarget, endScript(stamp), announce)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			if err := iv.Run(ctx); err != nil || iv.Result().Status != "DONE" {
				b.Errorf("job %d: %v %s", i, err, iv.Result().Message)
				return
			}
			done := time.Now()
			delays[i] = float64(done.UnixNano())/1e9 - readEndStamp(b, filepath.Join(target.root, stamp))
			before, after, _ := probe.split()
			queries[i] = len(before) + len(after)
		}(i)
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	reportEnds(b, delays, queries)
}

// endScript sleeps 5 s and a fraction of its own (from its stamp's name,
// so that the jobs' ends do not fall in step with the polls), then writes
// the time it ends into stamp.
func endScript(stamp string) string {
	h := fnv.New32a()
	h.Write([]byte(filepath.Base(stamp)))
	return fmt.Sprintf("#!/bin/sh\nsleep 5.%03d\ndate +%%s.%%N > %s\n", h.Sum32()%1000, stamp)
}

// benchInvoker is endInvoker for a benchmark: update interval 5 s and the
// default first poll delay, the backend announcing ends or not.
func benchInvoker(b *testing.B, target sshTarget, script string, announce bool) (*runner.Invoker, *statusProbe) {
	probe := &statusProbe{}
	reg := backends.NewRegistry()
	if err := reg.Register(target.backend, func(cfg backends.Config) (backends.Backend, error) {
		be, err := target.new(cfg)
		probe.Backend = be
		if announce {
			return announcingProbe{probe}, err
		}
		return probe, err
	}); err != nil {
		b.Fatal(err)
	}
	spec := &record.Spec{Backend: target.backend, ResourceURL: target.srv.URL, JobScript: script, UpdateInterval: "5"}
	iv := &runner.Invoker{JobName: "endbench", Store: record.NewFileStore(b.TempDir(), "endbench"), Registry: reg, Spec: spec,
		Backend: backends.Config{Credentials: testssh.Creds(b, target.srv.CredsDir)},
		Log:     slog.New(slog.NewTextHandler(io.Discard, nil)), SubmitLease: 5 * time.Second,
		RetryBudget: time.Minute, CancelWait: 10 * time.Second, Grace: 10 * time.Second}
	return iv, probe
}

func readEndStamp(b *testing.B, path string) float64 {
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatalf("a job left no end stamp: %v", err)
	}
	end, err := strconv.ParseFloat(strings.TrimSpace(string(data)), 64)
	if err != nil {
		b.Fatalf("end stamp %s: %q: %v", path, data, err)
	}
	return end
}

// reportEnds prints the batch's detection latency and queries per job.
func reportEnds(b *testing.B, delays []float64, queries []int) {
	sort.Float64s(delays)
	n := len(delays)
	p50, p95 := delays[n/2], delays[(n*95+99)/100-1]
	total := 0
	for _, q := range queries {
		total += q
	}
	perJob := float64(total) / float64(n)
	b.ReportMetric(p50, "p50-s")
	b.ReportMetric(p95, "p95-s")
	b.ReportMetric(delays[n-1], "max-s")
	b.ReportMetric(perJob, "queries/job")
	b.Logf("detection p50 %.3fs p95 %.3fs max %.3fs; status queries per job %.1f", p50, p95, delays[n-1], perJob)
}
