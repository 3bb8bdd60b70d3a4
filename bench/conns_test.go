package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkRESTConnections: N invoke processes at once (default 200,
// BRIDGE_BENCH_CONNS), each following its own Slurm job of 10 s (a node
// of 8 CPUs runs 8 at once: the others wait PENDING, their steps polling)
// with a file record, against one slurmrestd (BRIDGE_TEST_SLURM_URL and
// BRIDGE_TEST_SLURM_CREDS: point them at a private Slurm, hack/slurm-up.sh
// with another BRIDGE_SLURM_DIR, or the env file of a private
// hack/slurm2411-up.sh / slurm2605-up.sh renamed to these two, since a
// build that swamps the daemon can wedge it for everyone). Every second it
// counts the connections on the daemon's port (ss: ESTABLISHED and
// CLOSE-WAIT) and times one request of its own (a v0.0.38 ping: any
// answer, a 404 on a release without v0.0.38 included, is an answer); a
// second in which that request took over 5 s or failed is a stalled
// second. slurmrestd 22.05 serves 124 connections at once; past that a new
// one waits unanswered. Each invoke has a retry budget of 3 min and the run
// a ceiling of 15 min, so that a swamped daemon ends it rather than holds
// it. The invokes run under nice -n 15 (BRIDGE_BENCH_NICE): on a shared
// machine N processes starting at once would starve everything else, and
// what is measured is the daemon, which runs at normal priority.
//
//	max-established   the most connections ESTABLISHED on the port at once
//	max-close-wait    the most in CLOSE-WAIT (abandoned by a client, not yet
//	                  closed by the daemon)
//	stalled-s         seconds in which the daemon did not answer within 5 s
//	exit0, exit75, exit-other  invokes by exit code
//	sum-peak-rss-MiB  the invokes' peak RSS summed (they all live for the
//	                  whole run: about what N steps hold at once)
//	max-peak-rss-MiB  the largest one
func BenchmarkRESTConnections(b *testing.B) {
	env := needEnv(b, "BRIDGE_TEST_SLURM_URL", "BRIDGE_TEST_SLURM_CREDS")
	n := 200
	if s := os.Getenv("BRIDGE_BENCH_CONNS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	nice := "15"
	if s := os.Getenv("BRIDGE_BENCH_NICE"); s != "" {
		nice = s
	}
	u, err := url.Parse(env[0])
	if err != nil || u.Port() == "" {
		b.Fatalf("BRIDGE_TEST_SLURM_URL %q has no port", env[0])
	}
	b.Run(fmt.Sprintf("steps=%d", n), func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			connsOnce(b, n, u, env[1], nice)
		}
	})
}

// connSamples is what sampleConns saw, one sample a second.
type connSamples struct {
	maxEst, maxCW, stalled, samples int
	series                          []string // "seconds:established/close-wait", for the log
}

// sampleConns counts the connections on u's port and times one request to
// it every second until ctx ends; wait returns what it saw once it stopped.
func sampleConns(ctx context.Context, u *url.URL) (wait func() connSamples) {
	var s connSamples
	done := make(chan struct{})
	go func() {
		defer close(done)
		probe := &http.Client{Timeout: 5 * time.Second}
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			est, cw := countConns(u.Port(), "established"), countConns(u.Port(), "close-wait")
			if resp, err := probe.Get(u.String() + "/slurm/v0.0.38/ping"); err == nil {
				resp.Body.Close()
			} else {
				s.stalled++
			}
			s.maxEst, s.maxCW, s.samples = max(s.maxEst, est), max(s.maxCW, cw), s.samples+1
			s.series = append(s.series, fmt.Sprintf("%d:%d/%d", s.samples-1, est, cw))
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() connSamples { <-done; return s }
}

// invokeResults is how the N invokes ended and what memory they took.
type invokeResults struct {
	codes          map[int]int // exit code: invokes
	sumRSS, maxRSS int64       // bytes
}

// waitInvokes waits for every invoke and logs the last lines of the first
// to end with each failing exit code.
func waitInvokes(b *testing.B, cmds []*exec.Cmd, errs []bytes.Buffer) invokeResults {
	r := invokeResults{codes: map[int]int{}}
	for i, c := range cmds {
		err := c.Wait()
		var ee *exec.ExitError
		switch {
		case err == nil:
			r.codes[0]++
		case errors.As(err, &ee):
			r.codes[ee.ExitCode()]++
			if r.codes[ee.ExitCode()] == 1 {
				b.Logf("invoke %d exited %d:\n%s", i, ee.ExitCode(), lastLines(errs[i].String(), 5))
			}
		default:
			b.Fatal(err)
		}
		if ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage); ok {
			rss := ru.Maxrss << 10 // KiB on Linux
			r.sumRSS, r.maxRSS = r.sumRSS+rss, max(r.maxRSS, rss)
		}
	}
	return r
}

func connsOnce(b *testing.B, n int, u *url.URL, creds, nice string) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	wait := sampleConns(ctx, u)
	cmds := make([]*exec.Cmd, n)
	errs := make([]bytes.Buffer, n)
	start := time.Now()
	for i := range cmds {
		// nice execs the binary: the process waited for is the invoke.
		cmds[i] = exec.CommandContext(ctx, "nice", "-n", nice, binary, "invoke", "--state-dir", b.TempDir(), "--job-name", fmt.Sprintf("bench-conns-%d", i),
			"--backend", "slurm", "--resource-url", u.String(), "--credentials-dir", creds, "--script", "#!/bin/sh\nsleep 10\n",
			"--update-interval", "5", "--follow-logs=false", "--retry-budget", "3m")
		cmds[i].Stderr = &errs[i]
		if err := cmds[i].Start(); err != nil {
			b.Fatal(err)
		}
	}
	r := waitInvokes(b, cmds, errs)
	wall := time.Since(start)
	time.Sleep(10 * time.Second) // what the daemon still holds once every step is gone
	leftCW := countConns(u.Port(), "close-wait")
	cancel()
	s := wait()
	b.Logf("steps=%d wall=%.0fs exit codes=%v samples=%d max established=%d max close-wait=%d stalled=%ds close-wait 10 s after=%d peak RSS sum=%.0f MiB max=%.1f MiB",
		n, wall.Seconds(), r.codes, s.samples, s.maxEst, s.maxCW, s.stalled, leftCW, float64(r.sumRSS)/(1<<20), float64(r.maxRSS)/(1<<20))
	b.Logf("connections each second (s:established/close-wait): %s", strings.Join(s.series, " "))
	b.ReportMetric(float64(s.maxEst), "max-established")
	b.ReportMetric(float64(s.maxCW), "max-close-wait")
	b.ReportMetric(float64(s.stalled), "stalled-s")
	b.ReportMetric(float64(r.codes[0]), "exit0")
	b.ReportMetric(float64(r.codes[75]), "exit75")
	b.ReportMetric(float64(n-r.codes[0]-r.codes[75]), "exit-other")
	b.ReportMetric(wall.Seconds(), "wall-s")
	b.ReportMetric(float64(r.sumRSS)/(1<<20), "sum-peak-rss-MiB")
	b.ReportMetric(float64(r.maxRSS)/(1<<20), "max-peak-rss-MiB")
	b.ReportMetric(0, "ns/op")
}

// countConns counts the TCP connections in state on local port port (the
// daemon's side).
func countConns(port, state string) int {
	out, err := exec.Command("ss", "-Htan", "state", state, "( sport = :"+port+" )").Output()
	if err != nil {
		return -1
	}
	return strings.Count(string(out), "\n")
}
