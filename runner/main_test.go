package runner_test

import (
	"os"
	"testing"

	"github.com/bridge-runner/bridge-runner/backends/local"
)

func TestMain(m *testing.M) {
	// Local jobs re-execute the running binary (this test binary) as their supervisor.
	local.RunSupervisorIfRequested()
	os.Exit(m.Run())
}
