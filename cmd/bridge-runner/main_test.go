package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends/local"
)

// binary is bridge-runner built once for the tests that run it as a process.
var binary string

func TestMain(m *testing.M) {
	// Local jobs re-execute the running binary as their supervisor; in
	// tests that is this test binary.
	local.RunSupervisorIfRequested()
	// The binary runs on one P (internal/oneproc), and so would this test
	// process, which imports it: give the parallel tests every core again.
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.SetDefaultGOMAXPROCS()
	}
	dir, err := os.MkdirTemp("", "bridge-runner-bin")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "bridge-runner")
	// With the crash hook (see runner.CrashPoints), which releases lack.
	out, err := exec.Command("go", "build", "-tags", "bridgetest", "-o", binary, ".").CombinedOutput()
	if err != nil {
		panic("building bridge-runner: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// cli runs the CLI in-process with a clean BRIDGE_* environment.
type cliResult struct {
	code           int
	stdout, stderr string
	summary        map[string]any
}

func run(t *testing.T, args ...string) cliResult {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(args, &out, &errb)
	r := cliResult{code: code, stdout: out.String(), stderr: errb.String()}
	if lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")); len(lines) > 0 && len(lines[len(lines)-1]) > 0 {
		_ = json.Unmarshal(lines[len(lines)-1], &r.summary)
	}
	return r
}

// clearEnv makes sure no BRIDGE_* variable of the developer's leaks in.
func clearEnv(t *testing.T) {
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "BRIDGE_TEST_") {
			continue // where the test services are
		}
		for _, p := range []string{"BRIDGE_", "JOBNAME=", "NAMESPACE=", "KUBECONFIG=", "ARGO_"} {
			if len(kv) >= len(p) && kv[:len(p)] == p {
				name := kv[:bytes.IndexByte([]byte(kv), '=')]
				t.Setenv(name, "")
				require.NoError(t, os.Unsetenv(name))
			}
		}
	}
	t.Setenv("XDG_STATE_HOME", t.TempDir())
}
