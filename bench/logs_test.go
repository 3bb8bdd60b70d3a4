package bench

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

// Job output in the step's log. BenchmarkLogDelay reports, per log source,
// how long after the job printed a line invoke's stderr showed it
// (delay-p50-ms, delay-p90-ms, delay-max-ms; the job prints a time-stamped
// line every 0.7 s). BenchmarkLogMemory reports invoke's peak RSS while it
// streams a job's 10 MB of output, beside a job that prints one line.

// logLines and logPeriod: the stamped lines each delay run prints.
const (
	logLines  = 12
	logPeriod = "0.7"
)

// invokeLogs runs invoke, its stderr going to w too, and returns its peak
// RSS (see peakRSS).
func invokeLogs(b *testing.B, w io.Writer, args ...string) int64 {
	b.Helper()
	cmd := exec.Command(binary, append([]string{"invoke"}, args...)...)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+b.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = io.MultiWriter(&stderr, w)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	stop := peakRSS(cmd.Process.Pid, 10*time.Millisecond)
	err := cmd.Wait()
	peak := stop()
	if err != nil {
		b.Fatalf("invoke %v: %v\n%s", args, err, stderr.String())
	}
	return peak
}

// logSources are the ways invoke reads a job's output, each as invoke's
// arguments for a job running script (a shell script without its #! line).
func logSources(b *testing.B) map[string]func(script string) []string {
	srcs := map[string]func(string) []string{
		"local": func(script string) []string {
			return []string{"--backend", "local", "--script", script}
		},
	}
	if url, creds := os.Getenv("BRIDGE_TEST_SLURM_URL"), os.Getenv("BRIDGE_TEST_SLURM_CREDS"); url != "" {
		slurm := []string{"--backend", "slurm", "--resource-url", url, "--credentials-dir", creds}
		srcs["slurm-shared-file"] = func(script string) []string {
			dir, err := os.MkdirTemp("/tmp", "bench-logs-")
			if err != nil {
				b.Fatal(err)
			}
			_ = os.Chmod(dir, 0o777)
			b.Cleanup(func() { os.RemoveAll(dir) })
			return append(clone(slurm), "--script", "#!/bin/bash\n"+script+"\n", "--log-dir", dir,
				"--job-properties", `{"standard_output":"`+dir+`/%j.out"}`)
		}
		if ep, creds3 := os.Getenv("BRIDGE_TEST_S3_ENDPOINT"), os.Getenv("BRIDGE_TEST_S3_CREDS_DIR"); ep != "" {
			srcs["slurm-s3-shipper"] = func(script string) []string {
				return append(clone(slurm), "--script", "#!/bin/bash\n"+script+"\n", "--s3-endpoint", ep, "--s3-secure", "false",
					"--s3-credentials-dir", creds3, "--s3-upload-bucket", benchBucket(b), "--s3-create-bucket", "true")
			}
		}
	}
	if url := os.Getenv("BRIDGE_TEST_RAY_URL"); url != "" {
		srcs["ray"] = func(script string) []string {
			return []string{"--backend", "ray", "--resource-url", url, "--script", "import subprocess\nsubprocess.run(" + pyQuote(script) + ", shell=True, check=True)\n"}
		}
	}
	return srcs
}

func clone(s []string) []string { return append([]string(nil), s...) }

func pyQuote(s string) string {
	var b bytes.Buffer
	b.WriteString("'")
	for _, r := range s {
		switch r {
		case '\'', '\\':
			b.WriteRune('\\')
			b.WriteRune(r)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteString("'")
	return b.String()
}

// benchBucket is a bucket for the benchmarks' outputs, made on first use.
func benchBucket(*testing.B) string { return "bench-logs" }

func BenchmarkLogDelay(b *testing.B) {
	for name, args := range logSources(b) {
		testutil.BenchLogDelay(b, name, func(b *testing.B, log *testutil.DelayWriter, every time.Duration) {
			invokeLogs(b, log, append(args(testutil.StampedLines(logLines, logPeriod)), "--state-dir", b.TempDir(),
				"--job-name", "bench-logs", "--update-interval", "20", "--log-interval", every.String())...)
		})
	}
}

func BenchmarkLogMemory(b *testing.B) {
	for name, args := range logSources(b) {
		for _, job := range []struct{ name, sh string }{
			{"1-line", "echo one line"},
			{"10MB", "head -c 7500000 /dev/urandom | base64"},
			{"50MB", "head -c 37500000 /dev/urandom | base64"},
		} {
			if job.name == "50MB" && name != "local" {
				continue // the local figure shows that memory does not follow the size
			}
			b.Run("source="+name+"/output="+job.name, func(b *testing.B) {
				var rss int64
				for i := 0; i < b.N; i++ {
					rss = max(rss, invokeLogs(b, io.Discard, append(args(job.sh), "--state-dir", b.TempDir(),
						"--job-name", "bench-mem", "--update-interval", "5")...))
				}
				b.ReportMetric(float64(rss)/(1<<20), "maxrss-MiB")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}
