package bench

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// BenchmarkAgent: issue 39's one agent per cluster beside issue 27's
// in-step watcher and polling alone, side by side in one run (the same
// services, minutes apart), as BenchmarkWatcher runs them (its figures,
// with the prefix agent-, watcher- or poll-). In the agent half, a `bridge-runner
// agent` process serves the records' namespace with the query interval
// BRIDGE_BENCH_AGENT_INTERVAL (default 1s: the in-step watcher's default
// budget), and every invoke names its cluster (--cluster); kube-req/job
// counts the agent's own Kubernetes requests too. Sizes: BRIDGE_BENCH_AGENT
// (default 1,100); job lengths in seconds: BRIDGE_BENCH_AGENT_SECONDS
// (default 5); clusters: BRIDGE_BENCH_WATCH_BACKENDS (default, here,
// slurm=24.11). BRIDGE_BENCH_AGENT_ONLY=1 runs the agent half alone.
// Beside BenchmarkWatcher's figures, each half reports the cluster's
// requests a job by kind (all senders: steps, watchers, the agent):
// disc-req/job (pings, the OpenAPI document), submit-req/job,
// status-req/job (one job's), list-req/job (batched queries, look-ups by
// key); exit75 counts the steps of the burst (all N start at once) that
// gave up on the cluster. With the agent, steps send no discovery: the
// agent's one discovery is shared by the N jobs.
func BenchmarkAgent(b *testing.B) {
	kubeconfig := needEnv(b, "BRIDGE_TEST_KUBECONFIG")[0]
	sizes := envInts("BRIDGE_BENCH_AGENT", []int{1, 100})
	lengths := envInts("BRIDGE_BENCH_AGENT_SECONDS", []int{5})
	if os.Getenv("BRIDGE_BENCH_WATCH_BACKENDS") == "" {
		b.Setenv("BRIDGE_BENCH_WATCH_BACKENDS", "slurm=24.11")
	}
	interval := os.Getenv("BRIDGE_BENCH_AGENT_INTERVAL")
	if interval == "" {
		interval = "1s"
	}
	for _, t := range selectedTargets(b) {
		b.Run(t.name, func(b *testing.B) {
			cl := t.cluster(b, kubeconfig, slices.Max(sizes))
			for _, secs := range lengths {
				for _, n := range sizes {
					b.Run(fmt.Sprintf("job=%ds/jobs=%d", secs, n), func(b *testing.B) {
						for i := 0; i < b.N; i++ {
							agent := watchMode(b, cl, n, secs, true, cl.agent(b, interval))
							agent.report(b, "agent-")
							if os.Getenv("BRIDGE_BENCH_AGENT_ONLY") != "" {
								continue // the agent half alone (its logs, say)
							}
							on := watchOnce(b, cl, n, secs, true)
							off := watchOnce(b, cl, n, secs, false)
							// Not on- and off-: BenchmarkWatcher guards those.
							on.report(b, "watcher-")
							off.report(b, "poll-")
						}
						b.ReportMetric(0, "ns/op")
					})
				}
			}
		})
	}
}

// agentKubeRE reads what the agent says as it stops.
var agentKubeRE = regexp.MustCompile(`msg="agent stopped" kubernetes_requests=(\d+)`)

// agent is the side of an agent half: a `bridge-runner agent` for the
// invokes' namespace, started before them and stopped (SIGTERM) after.
func (cl watchCluster) agent(b *testing.B, interval string) func(ns, url string) ([]string, func() int) {
	return func(ns, url string) ([]string, func() int) {
		const cluster = "bench"
		cmd := exec.Command(binary, "agent", "--cluster", cluster, "--backend", cl.backend, "--resource-url", url,
			"--credentials-dir", cl.creds, "--namespaces", ns, "--query-interval", interval,
			"--health-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0")
		cmd.Env = append(os.Environ(), "KUBECONFIG="+cl.kubeconfig)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		// Its first heartbeat, before the invokes start, so that they find it.
		time.Sleep(3 * time.Second)
		stop := func() int {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case err := <-done:
				if err != nil {
					b.Errorf("the agent: %v\n%s", err, stderr.String())
				}
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				b.Errorf("the agent did not end within 10 s of SIGTERM")
			}
			m := agentKubeRE.FindStringSubmatch(stderr.String())
			if m == nil {
				b.Errorf("the agent said no request count:\n%s", stderr.String())
				return 0
			}
			n, _ := strconv.Atoi(m[1])
			b.Logf("the agent sent %d Kubernetes requests", n)
			return n
		}
		return []string{"--cluster", cluster}, stop
	}
}
