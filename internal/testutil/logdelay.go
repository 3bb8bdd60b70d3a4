package testutil

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// StampedLines is a shell loop that prints n lines "BRLAT <unix-ns>", one
// every period (e.g. "0.5"), each stamped with the time it was printed.
func StampedLines(n int, period string) string {
	return fmt.Sprintf(`for i in $(seq 1 %d); do echo "BRLAT $(date +%%s%%N)"; sleep %s; done`, n, period)
}

// DelayWriter is an io.Writer in a step's log: for each "BRLAT <unix-ns>"
// line written through it, it notes how long after that time the line
// arrived (the job and the benchmark share this machine's clock).
type DelayWriter struct {
	mu      sync.Mutex
	partial []byte
	delays  []time.Duration
}

func (d *DelayWriter) Write(p []byte) (int, error) {
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.partial = append(d.partial, p...)
	for {
		i := bytes.IndexByte(d.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := d.partial[:i]
		if j := bytes.Index(line, []byte("BRLAT ")); j >= 0 {
			if ns, err := strconv.ParseInt(string(bytes.TrimSpace(line[j+6:])), 10, 64); err == nil {
				d.delays = append(d.delays, now.Sub(time.Unix(0, ns)))
			}
		}
		d.partial = d.partial[i+1:]
	}
}

// Delays returns the delays seen so far.
func (d *DelayWriter) Delays() []time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.delays)
}

// BenchLogDelay runs a log-delay benchmark for source at each log interval
// compared in BENCHMARKS.md: every iteration runs one job through run, which
// writes the step's log into log, and the delays of all iterations are
// reported together.
func BenchLogDelay(b *testing.B, source string, run func(b *testing.B, log *DelayWriter, interval time.Duration)) {
	for _, every := range []time.Duration{500 * time.Millisecond, 2 * time.Second} {
		b.Run("source="+source+"/log-interval="+every.String(), func(b *testing.B) {
			var delays []time.Duration
			for i := 0; i < b.N; i++ {
				d := &DelayWriter{}
				run(b, d, every)
				delays = append(delays, d.Delays()...)
			}
			reportDelays(b, delays)
		})
	}
}

// reportDelays reports the median, 90th percentile and largest delay in
// milliseconds, and how many stamped lines arrived.
func reportDelays(b *testing.B, delays []time.Duration) {
	b.Helper()
	if len(delays) == 0 {
		b.Fatal("no stamped line reached the step's log")
	}
	slices.Sort(delays)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(delays[len(delays)/2]), "delay-p50-ms")
	b.ReportMetric(ms(delays[len(delays)*9/10]), "delay-p90-ms")
	b.ReportMetric(ms(delays[len(delays)-1]), "delay-max-ms")
	b.ReportMetric(float64(len(delays)), "lines")
	b.ReportMetric(0, "ns/op")
}
