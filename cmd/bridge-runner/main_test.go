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
	// -test.parallel keeps its default of 1 (taken while GOMAXPROCS was 1):
	// two at once made the watcher's fault tests (parallel subtests, watcher
	// on and off) see their jobs end before the fault began (CI run of
	// 2026-11-29), as four at once had before.
	scrubDeveloperEnv()
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

// scrubDeveloperEnv removes once, for the whole process, the variables
// that clearEnv removes per test, so that a parallel test (which may not
// call t.Setenv, hence not clearEnv) runs as clean as a serial one. A
// parallel test passes --state-dir itself and changes no environment.
func scrubDeveloperEnv() {
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if developerVar(name) {
			_ = os.Unsetenv(name)
		}
	}
}

// developerVar: a variable of the developer's shell that would change what
// the CLI does (the test services' BRIDGE_TEST_* stay: they say where the
// services are).
func developerVar(name string) bool {
	if strings.HasPrefix(name, "BRIDGE_TEST_") {
		return false
	}
	for _, p := range []string{"BRIDGE_", "ARGO_"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return name == "JOBNAME" || name == "NAMESPACE" || name == "KUBECONFIG"
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
		if name, _, _ := strings.Cut(kv, "="); developerVar(name) {
			t.Setenv(name, "")
			require.NoError(t, os.Unsetenv(name))
		}
	}
	t.Setenv("XDG_STATE_HOME", t.TempDir())
}
