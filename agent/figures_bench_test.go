package agent_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner/watcher"
)

// BenchmarkStepsAskingTheCluster: slurmrestd's requests a job, by sender
// (steps, agent) and kind, for N steps (BRIDGE_BENCH_FIGURES_STEPS,
// default 20) that name the cluster and each split an array (the array
// limit) placed by its targets (the load), on the real Slurm 26.05 behind
// a counting proxy: with the cluster's agent publishing the limit and the
// load, and without an agent. Kinds: disc (pings, the OpenAPI document),
// conf (the array limit), probe (partitions/, nodes/), list (GET jobs/:
// the probe's queue, batched queries, look-ups by key), job (one job's
// state), submit, accounting.
func BenchmarkStepsAskingTheCluster(b *testing.B) {
	u, creds := slurm2605(b)
	n := 20
	if v, err := strconv.Atoi(os.Getenv("BRIDGE_BENCH_FIGURES_STEPS")); err == nil && v > 0 {
		n = v
	}
	for _, withAgent := range []bool{true, false} {
		b.Run(fmt.Sprintf("agent=%t/steps=%d", withAgent, n), func(b *testing.B) {
			for range b.N {
				e := newSlurmEnvOn(b, u, creds, 1, time.Second)
				if withAgent {
					stop, _ := e.startAgentWith(agentOpts{figures: true})
					defer stop()
					e.awaitHeartbeat(e.nss[0], func(hb watcher.Heartbeat) bool { return hb.Load != "" && hb.ArrayLimit > 0 })
				}
				targets := fmt.Sprintf(`[{"name":"a","backend":"slurm","resourceURL":%q,"credentials":%q}]`, e.counter.URL, e.creds)
				res, _ := e.runSpecs(n, func(int) *record.Spec {
					return &record.Spec{JobScript: "#!/bin/sh\ntrue\n", Array: "0-2", Targets: targets, UpdateInterval: "5", Cluster: cluster}
				})
				for _, r := range res {
					if r.Status != "DONE" {
						b.Errorf("a step ended %s", r.Status)
					}
				}
				e.reportPerJob(b, n)
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// reportPerJob reports the counter's requests a job by sender and kind.
func (e *slurmEnv) reportPerJob(b *testing.B, n int) {
	c := e.counter
	b.Logf("requests by sender and kind: %s", c.pathCounts())
	for _, who := range []string{"step", "agent"} {
		total := 0
		for _, kind := range []string{"ping", "openapi", "conf", "probe", "list", "job", "submit", "accounting", "other"} {
			total += c.pathCount(who, kind)
		}
		disc := c.pathCount(who, "ping") + c.pathCount(who, "openapi")
		b.ReportMetric(float64(disc)/float64(n), who+"-disc/job")
		for _, kind := range []string{"conf", "probe", "list", "job", "submit", "accounting"} {
			b.ReportMetric(float64(c.pathCount(who, kind))/float64(n), who+"-"+kind+"/job")
		}
		b.ReportMetric(float64(total)/float64(n), who+"-all/job")
	}
}
