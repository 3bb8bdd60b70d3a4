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
	"sync"
	"testing"
	"time"
)

// BenchmarkRESTConnections: N invoke processes at once (default 200,
// BRIDGE_BENCH_CONNS), each following its own Slurm job of 10 s (the
// single node runs 8 at once: the others wait PENDING, their steps
// polling) with a file record, against one slurmrestd (BRIDGE_TEST_SLURM_URL: run it on a
// private Slurm, hack/slurm-up.sh with another BRIDGE_SLURM_DIR, since a
// build that swamps the daemon can wedge it for everyone). Every second it
// counts the connections on the daemon's port (ss: ESTABLISHED and
// CLOSE-WAIT) and times one request of its own; a second in which that
// request took over 5 s or failed is a stalled second. slurmrestd 22.05
// serves 124 connections at once; past that a new one waits unanswered.
// Each invoke has a retry budget of 3 min and the run a ceiling of 15 min,
// so that a swamped daemon ends it rather than holds it.
//
//	max-established  the most connections ESTABLISHED on the port at once
//	max-close-wait   the most in CLOSE-WAIT (abandoned by a client, not yet
//	                 closed by the daemon)
//	stalled-s        seconds in which the daemon did not answer within 5 s
//	exit0, exit75, exit-other  invokes by exit code
func BenchmarkRESTConnections(b *testing.B) {
	env := needEnv(b, "BRIDGE_TEST_SLURM_URL", "BRIDGE_TEST_SLURM_CREDS")
	n := 200
	if s := os.Getenv("BRIDGE_BENCH_CONNS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	u, err := url.Parse(env[0])
	if err != nil || u.Port() == "" {
		b.Fatalf("BRIDGE_TEST_SLURM_URL %q has no port", env[0])
	}
	b.Run(fmt.Sprintf("steps=%d", n), func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			connsOnce(b, n, u, env[1])
		}
	})
}

func connsOnce(b *testing.B, n int, u *url.URL, creds string) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var mu sync.Mutex
	var maxEst, maxCW, stalled, samples int
	var series []string // "seconds:established/close-wait", for the log
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		probe := &http.Client{Timeout: 5 * time.Second}
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			est, cw := countConns(u.Port(), "established"), countConns(u.Port(), "close-wait")
			ok := false
			if resp, err := probe.Get(u.String() + "/slurm/v0.0.38/ping"); err == nil {
				resp.Body.Close()
				ok = true
			}
			mu.Lock()
			maxEst, maxCW, samples = max(maxEst, est), max(maxCW, cw), samples+1
			series = append(series, fmt.Sprintf("%d:%d/%d", samples-1, est, cw))
			if !ok {
				stalled++
			}
			mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	cmds := make([]*exec.Cmd, n)
	errs := make([]bytes.Buffer, n)
	start := time.Now()
	for i := range cmds {
		cmds[i] = exec.CommandContext(ctx, binary, "invoke", "--state-dir", b.TempDir(), "--job-name", fmt.Sprintf("bench-conns-%d", i),
			"--backend", "slurm", "--resource-url", u.String(), "--credentials-dir", creds, "--script", "#!/bin/sh\nsleep 10\n",
			"--update-interval", "5", "--follow-logs=false", "--retry-budget", "3m")
		cmds[i].Stderr = &errs[i]
		if err := cmds[i].Start(); err != nil {
			b.Fatal(err)
		}
	}
	codes := map[int]int{}
	for i, c := range cmds {
		err := c.Wait()
		var ee *exec.ExitError
		switch {
		case err == nil:
			codes[0]++
		case errors.As(err, &ee):
			codes[ee.ExitCode()]++
			if codes[ee.ExitCode()] == 1 {
				b.Logf("invoke %d exited %d:\n%s", i, ee.ExitCode(), lastLines(errs[i].String(), 5))
			}
		default:
			b.Fatal(err)
		}
	}
	wall := time.Since(start)
	time.Sleep(10 * time.Second) // what the daemon still holds once every step is gone
	leftCW := countConns(u.Port(), "close-wait")
	cancel()
	<-sampled
	mu.Lock()
	defer mu.Unlock()
	b.Logf("steps=%d wall=%.0fs exit codes=%v samples=%d max established=%d max close-wait=%d stalled=%ds close-wait 10 s after=%d",
		n, wall.Seconds(), codes, samples, maxEst, maxCW, stalled, leftCW)
	b.Logf("connections each second (s:established/close-wait): %s", strings.Join(series, " "))
	b.ReportMetric(float64(maxEst), "max-established")
	b.ReportMetric(float64(maxCW), "max-close-wait")
	b.ReportMetric(float64(stalled), "stalled-s")
	b.ReportMetric(float64(codes[0]), "exit0")
	b.ReportMetric(float64(codes[75]), "exit75")
	b.ReportMetric(float64(n-codes[0]-codes[75]), "exit-other")
	b.ReportMetric(wall.Seconds(), "wall-s")
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
