package sharedidle

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// noise runs hack/noise.sh with args as an instance of its own (its state
// in dir, its jobs named bridge-noise-test): make test runs its own noise
// meanwhile, which this test's stop must leave alone.
func noise(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("bash", append([]string{"../../hack/noise.sh"}, args...)...)
	cmd.Env = append(os.Environ(), "BRIDGE_NOISE_DIR="+dir, "BRIDGE_NOISE_PERIOD=2", "BRIDGE_NOISE_NAME=bridge-noise-test")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "hack/noise.sh %s: %s", strings.Join(args, " "), out)
	return string(out)
}

// slurmLine is status's line of the shared Slurm 22.05 ("slurm: [...]").
func slurmLine(status string) string {
	for _, line := range strings.Split(status, "\n") {
		if strings.HasPrefix(line, "slurm: ") {
			return line
		}
	}
	return ""
}

// TestNoiseStartsOtherUsersJobsAndStopCancelsThem runs the noise maker the
// docs name (docs/architecture.md) against the shared Slurm 22.05: start
// leaves a job held for its begin time and a running sleeper, named
// bridge-noise; stop cancels every one of them.
func TestNoiseStartsOtherUsersJobsAndStopCancelsThem(t *testing.T) {
	if _, err := os.Stat("/tmp/bridge-runner-slurm/env"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("Slurm 22.05 is not running (hack/slurm-up.sh writes /tmp/bridge-runner-slurm/env): %v", err)
		}
		t.Skip("Slurm 22.05 is not running: bash hack/slurm-up.sh")
	}
	dir := t.TempDir()
	t.Cleanup(func() { noise(t, dir, "stop") })
	noise(t, dir, "start")
	var line string
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		line = slurmLine(noise(t, dir, "status"))
		if strings.Contains(line, `"PENDING"`) && strings.Contains(line, `"RUNNING"`) {
			break
		}
		time.Sleep(time.Second)
	}
	assert.Contains(t, line, `"PENDING"`, "a job held for its begin time")
	assert.Contains(t, line, `"RUNNING"`, "the sleeper")
	t.Logf("noise on Slurm 22.05: %s", line)

	stopped := noise(t, dir, "stop")
	assert.Contains(t, stopped, "slurm: cancelled ")
	assert.Equal(t, "slurm: []", slurmLine(noise(t, dir, "status")), "every bridge-noise job cancelled")
}
