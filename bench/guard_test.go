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
)

// The guard: figures that must not grow (size, memory, start-up) are kept in
// baseline.json. Each guarded figure a benchmark reports is compared with
// its recorded value, and one more than 10 % worse prints a line starting
// with "BENCH-GUARD FAIL" (hack/bench.sh then exits 1). It compares, it
// does not time: the benchmark itself never fails on a figure.
// BRIDGE_BENCH_RECORD=1 writes the figures measured into baseline.json
// instead (do it on a quiet machine, and say so in BENCHMARKS.md).

const (
	baselineFile = "baseline.json"
	tolerance    = 0.10
)

var (
	baselineMu sync.Mutex
	recording  = os.Getenv("BRIDGE_BENCH_RECORD") == "1"
)

// guarded are the units the guard watches: lower is better for all.
var guarded = map[string]bool{"binary-MiB": true, "maxrss-MiB": true, "first-req-ms": true, "sum-maxrss-MiB": true}

// metric reports v and, for a guarded unit, checks it against the baseline.
func metric(b *testing.B, v float64, unit string) {
	b.ReportMetric(v, unit)
	if !guarded[unit] || !finalPass(b) {
		return
	}
	key := b.Name() + " " + unit
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
	if fail {
		fmt.Printf("\n%s\n", line) // at the start of a line, whatever the benchmark printed
	} else {
		b.Log(line)
	}
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
