// Package bench holds bridge-runner's benchmarks: figures, not assertions
// on time. Run them with `make bench` (which starts the real services);
// BENCHMARKS.md records a run. Each benchmark reports custom metrics:
//
//	overhead-ms     invoke's wall time minus the job's own run time
//	backend-req/op  requests sent to the backend (counted by invoke)
//	kube-req/op     requests sent to the Kubernetes API (counted by invoke)
//	maxrss-MiB      peak RSS of the invoke process (its VmHWM, see peakRSS)
//	cpu-ms/op       user+system CPU of the invoke process
//	*-ratio         this build's time over the reference build's, timed in turn
package bench

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/bridge-runner/bridge-runner/backends/local"
)

var (
	binary  string
	workDir string // the binaries built for the run
)

func TestMain(m *testing.M) {
	local.RunSupervisorIfRequested()
	var err error
	if workDir, err = os.MkdirTemp("", "bridge-bench"); err != nil {
		panic(err)
	}
	binary = filepath.Join(workDir, "bridge-runner")
	// Built as `make build` builds it: static, stripped. BRIDGE_BENCH_BINARY
	// measures another build instead (e.g. an older one, for comparison).
	if bin := os.Getenv("BRIDGE_BENCH_BINARY"); bin != "" {
		binary = bin
	} else if err := build("..", binary); err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(workDir)
	os.Exit(code)
}

var requestsRE = regexp.MustCompile(`msg="requests sent" backend=(\d+) kubernetes=(\d+)`)

// run is one invoke process and what it cost.
type run struct {
	wall        time.Duration
	backendReqs int
	kubeReqs    int
	maxRSS      int64 // bytes
	cpu         time.Duration
}

func invoke(b *testing.B, env []string, args ...string) run {
	b.Helper()
	return invokeBin(b, binary, env, args...)
}

// invokeBin runs invoke of the build bin.
func invokeBin(b *testing.B, bin string, env []string, args ...string) run {
	b.Helper()
	cmd := exec.Command(bin, append([]string{"invoke"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	stop := peakRSS(cmd.Process.Pid, 5*time.Millisecond)
	err := cmd.Wait()
	r := run{wall: time.Since(start), maxRSS: stop()}
	if err != nil {
		b.Fatalf("invoke %v: %v\n%s", args, err, stderr.String())
	}
	if m := requestsRE.FindStringSubmatch(stderr.String()); m != nil {
		r.backendReqs, _ = strconv.Atoi(m[1])
		r.kubeReqs, _ = strconv.Atoi(m[2])
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return r
}

// report averages runs into the benchmark's metrics.
func report(b *testing.B, runs []run, jobTime time.Duration) {
	var wall, cpu time.Duration
	var rss int64
	var breq, kreq int
	for _, r := range runs {
		wall += r.wall
		cpu += r.cpu
		rss = max(rss, r.maxRSS)
		breq += r.backendReqs
		kreq += r.kubeReqs
	}
	n := time.Duration(len(runs))
	b.ReportMetric(float64((wall/n-jobTime).Microseconds())/1000, "overhead-ms")
	b.ReportMetric(float64((cpu/n).Microseconds())/1000, "cpu-ms/op")
	metric(b, float64(rss)/(1<<20), "maxrss-MiB")
	b.ReportMetric(float64(breq)/float64(len(runs)), "backend-req/op")
	b.ReportMetric(float64(kreq)/float64(len(runs)), "kube-req/op")
	b.ReportMetric(0, "ns/op") // wall time per op is meaningless here: see overhead-ms
}

// jobs are the short and long jobs every backend runs.
var jobs = []struct {
	name   string
	sh     string
	length time.Duration
}{
	{"true", "true", 0},
	{"sleep1", "sleep 1", time.Second},
	{"sleep10", "sleep 10", 10 * time.Second},
}

// intervals are the updateInterval settings (the longest poll delay).
var intervals = []string{"1", "20"}

func BenchmarkLocal(b *testing.B) {
	for _, job := range jobs {
		for _, iv := range intervals {
			b.Run(fmt.Sprintf("job=%s/interval=%ss", job.name, iv), func(b *testing.B) {
				var runs []run
				for i := 0; i < b.N; i++ {
					runs = append(runs, invoke(b, []string{"XDG_STATE_HOME=" + b.TempDir()}, "--state-dir", b.TempDir(),
						"--job-name", "bench", "--backend", "local", "--script", job.sh, "--update-interval", iv))
				}
				report(b, runs, job.length)
			})
		}
	}
}

func needEnv(b *testing.B, names ...string) []string {
	var vals []string
	for _, n := range names {
		v := os.Getenv(n)
		if v == "" {
			b.Skipf("%s is not set: run `make bench`, which starts the services", n)
		}
		vals = append(vals, v)
	}
	return vals
}

// BenchmarkSlurm: real Slurm 22.05 (REST v0.0.38) and 24.11 (v0.0.42).
func BenchmarkSlurm(b *testing.B) {
	for _, c := range []struct{ release, env string }{{"22.05", "BRIDGE_TEST_SLURM"}, {"24.11", "BRIDGE_TEST_SLURM2411"}} {
		b.Run("slurm="+c.release, func(b *testing.B) {
			env := needEnv(b, c.env+"_URL", c.env+"_CREDS")
			for _, job := range jobs {
				for _, iv := range intervals {
					b.Run(fmt.Sprintf("job=%s/interval=%ss", job.name, iv), func(b *testing.B) {
						var runs []run
						for i := 0; i < b.N; i++ {
							runs = append(runs, invoke(b, nil, "--state-dir", b.TempDir(), "--job-name", "bench", "--backend", "slurm",
								"--resource-url", env[0], "--credentials-dir", env[1], "--script", "#!/bin/sh\n"+job.sh+"\n", "--update-interval", iv))
						}
						report(b, runs, job.length)
					})
				}
			}
		})
	}
}

// BenchmarkConfigMapStore: the record in a real ConfigMap (local jobs).
func BenchmarkConfigMapStore(b *testing.B) {
	env := needEnv(b, "BRIDGE_TEST_KUBECONFIG")
	for _, job := range jobs[:2] {
		b.Run("job="+job.name, func(b *testing.B) {
			var runs []run
			for i := 0; i < b.N; i++ {
				runs = append(runs, invoke(b, []string{"XDG_STATE_HOME=" + b.TempDir()}, "--kubeconfig", env[0], "--namespace", "default",
					"--job-name", fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), i), "--backend", "local", "--script", job.sh, "--update-interval", "20"))
			}
			report(b, runs, job.length)
		})
	}
}

// BenchmarkStartup: how long the binary takes to start and print its
// version (the median of at least 10 runs), timed in turn with the
// reference build's (startup-ratio, guarded: see sideBySide).
func BenchmarkStartup(b *testing.B) {
	fi, err := os.Stat(binary)
	if err != nil {
		b.Fatal(err)
	}
	this, ref, ratio, ok := sideBySide(b, max(b.N, 40), func(bin string) time.Duration {
		start := time.Now()
		if out, err := exec.Command(bin, "version").CombinedOutput(); err != nil {
			b.Fatalf("%s version: %v: %s", bin, err, out)
		}
		return time.Since(start)
	})
	if ok {
		b.ReportMetric(float64(this.Microseconds())/1000, "startup-ms")
		b.ReportMetric(float64(ref.Microseconds())/1000, "ref-startup-ms")
		metric(b, ratio, "startup-ratio")
	}
	metric(b, float64(fi.Size())/(1<<20), "binary-MiB")
	b.ReportMetric(0, "ns/op")
}
