package bench

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The guard. Size and memory figures that must not grow are kept in
// baseline.json: each one a benchmark reports is compared with its recorded
// value, and one more than 10 % worse prints a line starting with
// "BENCH-GUARD FAIL" (hack/bench.sh then exits 1). Time figures are not
// recorded: each is a ratio to a reference build timed side by side in the
// same run (reference_test.go), and a ratio above 1 + ratioTolerance
// fails. A few memory figures with no stable per-key value (the heap per
// invoker of BenchmarkScale, which varies with the number of invokers and
// the moment of the collector's runs) have an absolute ceiling instead. It
// compares, it does not time: the benchmark itself never fails on a figure.
// BRIDGE_BENCH_RECORD=1 writes the size and memory figures measured into
// baseline.json instead (do it on a quiet machine, and say so in
// BENCHMARKS.md).

const (
	baselineFile = "baseline.json"
	tolerance    = 0.10
)

var (
	baselineMu sync.Mutex
	recording  = os.Getenv("BRIDGE_BENCH_RECORD") == "1"
)

// guarded are the units the guard compares with baseline.json: lower is
// better for all.
var guarded = map[string]bool{"binary-MiB": true, "maxrss-MiB": true, "sum-maxrss-MiB": true}

// ratioGuarded are the time figures, ratios of this build's time to the
// reference build's (see sideBySide).
var ratioGuarded = map[string]bool{"startup-ratio": true, "first-req-ratio": true}

// ceilings are absolute limits for figures judged without a baseline.
// heap-KiB/invoker: 105–117 KiB at 100 invokers, 93–99 at 250 and 500
// (2026-11-26, BENCHMARKS.md); holding each invoker's copy of slurmrestd's
// /openapi/v3 had raised it to 150–192. The ceiling leaves room for the
// collector's timing, not for another copy of a large answer.
//
// on-batch-req/s: the cluster watcher's batched queries a second
// (BenchmarkWatcher, watcher on, every N): at most --max-requests-per-second
// (1) by design, whatever the number of jobs; above 2, two invokes query
// at once (leaders overlapping) or the rate limit is lost.
// on-backend-req/job: every request the cluster got per job with the
// watcher on, from 100 jobs on: 5.8 on 22.05 and 6.1 on 24.11 at N=100 once
// the invokes followed the lease by watch and looked again when it would
// run out (2026-11-27, later), 8.3 and 9.0 as of 2ab4034 (2026-11-27),
// 9.7 and 10.4 as of cf8c677 (2026-11-26, see
// BENCHMARKS.md, Watcher; the 5.2 of the first
// build came from invokes that skipped their polls for jobs the watcher did
// not report) (discovery, submit, the job's own first poll and one per
// observed change, polls while leadership changes hands, a share of the
// batched queries), against 19–20 with the watcher off.
//
// array-backend-req/task: a job array's requests to slurmrestd per task
// (BenchmarkArray, from 100 tasks on): 0.18 at 100 tasks, 0.17 at 300, 0.04
// at 500 and 0.09 at 1,000 (2026-11-27, BENCHMARKS.md, Arrays): discovery,
// one submit and one query per poll for the whole array, against 4.7 to
// 9.6 per job for separate invokes, which cannot go below one submit and
// one poll each. Above 1, the array's status is being asked task by task.
//
// on-kube-req/job: the invokes' Kubernetes requests per job with the
// watcher on, from 100 jobs on: 13.9 on both Slurms at N=100 (8.1 with it
// off) once members followed the lease by watch and observations were
// patched (2026-11-27, later); 18.3-19.8 before, when every member read
// the lease each time its renewal ran out and every observation was a GET
// and a PUT.
//
// detect-p95-on/off: BenchmarkWatcher's p95 detection latency with the
// watcher over without it, side by side in the same run, from 100 jobs on:
// 0.36-0.60 (2026-11-27, later: the ceiling of 1 says the watcher is
// never slower than polling alone at the tail),
// 0.68-0.75 on 22.05 and 24.11 (2026-11-27, BENCHMARKS.md, Watcher) once
// the lease passed on live and rounds stopped waiting for the records'
// writes; 1.6-3.5 before, when every handover or burst of writes left the
// cluster unasked for seconds. A time figure, but a ratio of two runs
// minutes apart on the same machine.
//
// makespan-placement/fixed: BenchmarkPlacement's makespan with targets
// [filled, free] over the filled cluster's alone: 0.40-0.42 on 2026-11-27
// (BENCHMARKS.md, Placement), 0.93 in a run where 34 of 40 probes of the
// free cluster timed out and their jobs went to the filled one, 1 when all
// do.
var ceilings = map[string]float64{"heap-KiB/invoker": 150, "on-batch-req/s": 2, "on-backend-req/job": 9, "array-backend-req/task": 1,
	"makespan-placement/fixed": 0.75, "detect-p95-on/off": 1, "on-kube-req/job": 17}

// metric reports v and, for a guarded unit, checks it against the
// baseline, the ratio's tolerance or the unit's ceiling.
func metric(b *testing.B, v float64, unit string) {
	b.ReportMetric(v, unit)
	if !finalPass(b) {
		return
	}
	key := b.Name() + " " + unit
	switch {
	case ratioGuarded[unit]:
		line, fail := judgeRatio(key, v)
		guardLine(b, line, fail)
		return
	case ceilings[unit] > 0:
		line, fail := judgeCeiling(key, v, ceilings[unit])
		guardLine(b, line, fail)
		return
	case !guarded[unit]:
		return
	}
	baselineMu.Lock()
	defer baselineMu.Unlock()
	base, err := readBaseline()
	if err != nil {
		b.Logf("BENCH-GUARD FAIL %s: %v", key, err)
		return
	}
	if recording {
		base[key] = roundTo(v, 2)
		if err := writeBaseline(base); err != nil {
			b.Logf("BENCH-GUARD FAIL recording %s: %v", key, err)
		}
		return
	}
	line, fail := verdict(base, key, v)
	guardLine(b, line, fail)
}

// guardLine prints a failure at the start of a line of the output (where
// hack/bench.sh looks for it, whatever the benchmark printed) and logs the
// rest.
func guardLine(b *testing.B, line string, fail bool) {
	if fail {
		fmt.Printf("\n%s\n", line)
	} else {
		b.Log(line)
	}
}

// judgeRatio judges a time ratio (this build / the reference).
func judgeRatio(key string, ratio float64) (string, bool) {
	if ratio > 1+ratioTolerance {
		return fmt.Sprintf("BENCH-GUARD FAIL %s: %.2fx the reference build's time, run side by side (more than %.2fx)", key, ratio, 1+ratioTolerance), true
	}
	return fmt.Sprintf("BENCH-GUARD ok %s: %.2fx the reference build's time", key, ratio), false
}

// judgeCeiling judges a figure with an absolute ceiling.
func judgeCeiling(key string, v, ceiling float64) (string, bool) {
	if v > ceiling {
		return fmt.Sprintf("BENCH-GUARD FAIL %s: %.2f, above its ceiling of %.2f", key, v, ceiling), true
	}
	return fmt.Sprintf("BENCH-GUARD ok %s: %.2f (ceiling %.2f)", key, v, ceiling), false
}

// verdict judges figure v of key against the baseline: a line to print, and
// whether it is a regression.
func verdict(base map[string]float64, key string, v float64) (string, bool) {
	want, ok := base[key]
	switch {
	case !ok:
		return fmt.Sprintf("BENCH-GUARD note: %s = %.2f has no baseline (BRIDGE_BENCH_RECORD=1 records one)", key, v), false
	case v > want*(1+tolerance):
		return fmt.Sprintf("BENCH-GUARD FAIL %s: %.2f against a baseline of %.2f (+%.0f %%, more than %.0f %%)",
			key, v, want, (v/want-1)*100, tolerance*100), true
	}
	return fmt.Sprintf("BENCH-GUARD ok %s: %.2f (baseline %.2f)", key, v, want), false
}

func TestGuardVerdict(t *testing.T) {
	base := map[string]float64{"BenchmarkX maxrss-MiB": 18}
	for _, c := range []struct {
		v    float64
		fail bool
	}{{10, false}, {18, false}, {19.7, false}, {19.9, true}, {36, true}} {
		line, fail := verdict(base, "BenchmarkX maxrss-MiB", c.v)
		if fail != c.fail || fail != strings.HasPrefix(line, "BENCH-GUARD FAIL") {
			t.Errorf("%.1f MiB against 18: fail=%v %q, want fail=%v", c.v, fail, line, c.fail)
		}
	}
	if _, fail := verdict(base, "BenchmarkY maxrss-MiB", 100); fail {
		t.Error("a figure without a baseline is a note, not a failure")
	}
	for _, c := range []struct {
		ratio float64
		fail  bool
	}{{0.2, false}, {1, false}, {1.24, false}, {1.26, true}, {3, true}} {
		if line, fail := judgeRatio("BenchmarkStartup startup-ratio", c.ratio); fail != c.fail || fail != strings.HasPrefix(line, "BENCH-GUARD FAIL") {
			t.Errorf("ratio %.2f: fail=%v %q, want fail=%v", c.ratio, fail, line, c.fail)
		}
	}
	for _, c := range []struct {
		v    float64
		fail bool
	}{{90, false}, {150, false}, {150.5, true}, {192, true}} {
		if line, fail := judgeCeiling("BenchmarkScale/invokers=100 heap-KiB/invoker", c.v, 150); fail != c.fail || fail != strings.HasPrefix(line, "BENCH-GUARD FAIL") {
			t.Errorf("%.1f KiB against a ceiling of 150: fail=%v %q, want fail=%v", c.v, fail, line, c.fail)
		}
	}
}

// The medians and ratios sideBySide reports.
func TestMedian(t *testing.T) {
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median of 3, 1, 2: %v", m)
	}
	if m := median([]time.Duration{40, 10, 30, 20}); m != 30 {
		t.Errorf("median of 40, 10, 30, 20: %v (the upper of the two middle ones)", m)
	}
}

// finalPass: the testing package first calls a benchmark with b.N = 1,
// then with the N of -benchtime Nx; only the last pass is judged.
func finalPass(b *testing.B) bool {
	f := flag.Lookup("test.benchtime")
	if f == nil {
		return true
	}
	s := f.Value.String()
	n, err := strconv.Atoi(strings.TrimSuffix(s, "x"))
	return err != nil || !strings.HasSuffix(s, "x") || b.N >= n
}

func readBaseline() (map[string]float64, error) {
	m := map[string]float64{}
	data, err := os.ReadFile(baselineFile)
	if os.IsNotExist(err) && recording {
		return m, nil
	}
	if err != nil {
		return nil, err
	}
	return m, json.Unmarshal(data, &m)
}

func writeBaseline(m map[string]float64) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(baselineFile, append(data, '\n'), 0o644)
}

func roundTo(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}
