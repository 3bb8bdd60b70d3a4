package main

import (
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEveryFlagHasAGroup: every flag of the step commands is listed under
// one of the help's groups, so the next flag added cannot fall back into
// one long alphabetical list.
func TestEveryFlagHasAGroup(t *testing.T) {
	root := (&app{}).newRootCmd()
	for _, name := range []string{"invoke", "create-configmap", "cleanup"} {
		cmd, _, err := root.Find([]string{name})
		require.NoError(t, err)
		cmd.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if f.Name == "help" {
				return
			}
			assert.NotEmpty(t, groupOf(f.Name), "%s --%s has no help group: add it to groupOf", name, f.Name)
		})
	}
}

// helpScreen is `invoke --help` as Main writes it at a terminal of width
// columns.
func helpScreen(t *testing.T, width int, args ...string) string {
	t.Helper()
	clearEnv(t)
	t.Setenv("COLUMNS", fmt.Sprint(width))
	r := run(t, args...)
	require.Equal(t, ExitDone, r.code, r.stderr)
	return r.stdout
}

// TestInvokeHelpLeads: invoke's help fits the terminal (80 and 120
// columns), shows examples first (one per backend: Slurm REST, Slurm over
// SSH with a jump host, HTCondor, Ray, local), then the flags by group, the
// credential files each backend reads and every exit code. Before, it was
// one alphabetical list of 58 flags, lines of 200 columns, no Slurm
// example, and no exit code 5.
func TestInvokeHelpLeads(t *testing.T) {
	for _, width := range []int{80, 120} {
		t.Run(fmt.Sprint(width), func(t *testing.T) {
			out := helpScreen(t, width, "invoke", "--help")
			checkHelp(t, out, width)
		})
	}
}

func checkHelp(t *testing.T, out string, width int) {
	t.Helper()
	for i, line := range strings.Split(out, "\n") {
		assert.LessOrEqual(t, len([]rune(line)), width, "line %d is wider than %d columns: %q", i+1, width, line)
	}
	at := func(s string) int {
		i := strings.Index(out, s)
		require.GreaterOrEqual(t, i, 0, "the help has no %q", s)
		return i
	}
	ex := at("Examples:")
	assert.Less(t, ex, at("invoke reads the job description"), "examples first")
	last := ex
	for _, g := range []string{"Job flags:", "Record flags:", "Backend flags:", "Staging (S3) flags:", "Outputs and logs flags:", "Behaviour flags:", "Credential files:", "Exit codes:"} {
		i := at(g)
		assert.Greater(t, i, last, "%s in its place", g)
		last = i
	}
	examples := out[ex:at("invoke reads the job description")]
	for _, want := range []string{"--backend slurm", "--resource-url https://", "proxyjump=", "--backend htcondor", "--backend ray", "--backend local"} {
		assert.Contains(t, examples, want)
	}
	creds := out[at("Credential files:"):at("Exit codes:")]
	for _, want := range []string{"slurm (REST)", "username, token", "ssh-privatekey, known_hosts", "lsf", "ray", "quantum", "crn, apikey", "accesskey, secretkey"} {
		assert.Contains(t, creds, want)
	}
	codes := out[at("Exit codes:"):]
	for _, code := range []int{ExitDone, ExitFailed, ExitInvalid, ExitKilled, ExitUnknown, ExitInfra, ExitTempFail} {
		assert.Regexp(t, regexp.MustCompile(fmt.Sprintf(`(?m)^  %d\s`, code)), codes, "exit code %d", code)
	}
	// Each flag once, under a group.
	flags := out[at("Job flags:"):at("Credential files:")]
	for _, name := range []string{"script", "resource-url", "s3-endpoint", "output-status", "retry-budget", "state-dir"} {
		assert.Len(t, regexp.MustCompile(`(?m)^\s+--`+name+`\s`).FindAllString(flags, -1), 1, name)
	}
}

// TestEveryStepHelpFits: the other commands' help fits the terminal too.
func TestEveryStepHelpFits(t *testing.T) {
	for _, width := range []int{80, 120} {
		for _, command := range []string{"create-configmap", "cleanup", "status"} {
			out := helpScreen(t, width, command, "--help")
			for i, line := range strings.Split(out, "\n") {
				assert.LessOrEqual(t, len([]rune(line)), width, "%s --help line %d is wider than %d columns: %q", command, i+1, width, line)
			}
			assert.Contains(t, out, "Examples:")
			assert.NotContains(t, out, "Exit codes:", "invoke's exit codes are invoke's")
		}
	}
}

// TestRootHelpNamesEveryExitCode: the root help's summary of exit codes
// has 5 too.
func TestRootHelpNamesEveryExitCode(t *testing.T) {
	out := helpScreen(t, 80, "--help")
	for _, code := range []string{"0 DONE", "1 FAILED", "2 invalid input", "3 KILLED", "4 UNKNOWN", "5 FAILED by the infrastructure", "75 temporary failure"} {
		assert.Contains(t, out, code)
	}
}

// tmuxScreen runs args in a tmux terminal of width×height and returns the
// screen as a person sees it, with its history (wrapped lines stay split).
// tmux is part of the suite's tools (hack/test.sh installs it): under
// CI=true a missing tmux fails the test.
func tmuxScreen(t *testing.T, width, height int, env []string, args ...string) []string {
	t.Helper()
	return tmuxCapture(t, tmuxRun{width: width, height: height, env: env}, args...)
}

// tmuxScreenEscapes is tmuxScreen with the screen's colours as escape
// sequences, joined.
func tmuxScreenEscapes(t *testing.T, width, height int, env []string, args ...string) string {
	t.Helper()
	return strings.Join(tmuxCapture(t, tmuxRun{width: width, height: height, env: env, escapes: true}, args...), "\n")
}

// tmuxRun is how tmuxCapture runs a command and reads its screen.
type tmuxRun struct {
	width, height int
	env           []string
	escapes       bool          // the colours as escape sequences
	joined        bool          // lines the terminal wrapped joined again (tmux -J): a line wider than the screen was wrapped by it
	timeout       time.Duration // for the command to end; 0: 30 s
}

func tmuxCapture(t *testing.T, o tmuxRun, args ...string) []string {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("tmux is not installed: hack/test.sh installs it (need_cmd tmux)")
		}
		t.Skip("tmux is not installed (apt-get install tmux); the rendered-text tests still run")
	}
	sock := filepath.Join(t.TempDir(), "tmux.sock")
	done := filepath.Join(t.TempDir(), "done")
	script := filepath.Join(t.TempDir(), "run.sh")
	var b strings.Builder
	b.WriteString("#!/bin/sh\nunset COLUMNS LINES\n")
	for _, kv := range o.env {
		fmt.Fprintf(&b, "export %q\n", kv)
	}
	b.WriteString(shellQuote(append([]string{binary}, args...)))
	fmt.Fprintf(&b, "\ntouch %s\nsleep 600\n", done)
	require.NoError(t, os.WriteFile(script, []byte(b.String()), 0o700))
	tmux := func(a ...string) *exec.Cmd {
		return exec.Command("tmux", append([]string{"-S", sock, "-f", "/dev/null"}, a...)...)
	}
	out, err := tmux("new-session", "-d", "-x", fmt.Sprint(o.width), "-y", fmt.Sprint(o.height), script).CombinedOutput()
	require.NoError(t, err, "%s", out)
	_ = tmux("set-option", "-g", "history-limit", "5000").Run()
	t.Cleanup(func() { _ = tmux("kill-server").Run() })
	deadline := time.Now().Add(cmp.Or(o.timeout, 30*time.Second))
	for {
		if _, err := os.Stat(done); err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "the command did not finish in tmux")
		time.Sleep(50 * time.Millisecond)
	}
	capture := []string{"capture-pane", "-p", "-S", "-", "-E", "-"}
	if o.escapes {
		capture = append(capture, "-e")
	}
	if o.joined {
		capture = append(capture, "-J")
	}
	out, err = tmux(capture...).Output()
	require.NoError(t, err)
	return strings.Split(strings.TrimRight(string(out), "\n"), "\n")
}

func shellQuote(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// TestInvokeHelpOnScreen: at a real terminal (tmux, no COLUMNS) of 80 and
// 120 columns, invoke's help is wrapped to the terminal: no line of it
// wraps on the screen, which shows exactly the lines the help wrote.
func TestInvokeHelpOnScreen(t *testing.T) {
	for _, width := range []int{80, 120} {
		t.Run(fmt.Sprint(width), func(t *testing.T) {
			got := helpOnScreen(t, width, "Submit the job", "invoke", "--help")
			checkHelp(t, strings.Join(got, "\n"), width)
		})
	}
}

// TestRootHelpOnScreen: the root's help, its list of commands too, fits a
// real terminal of 80 and 120 columns (cobra's list ran to 103 columns),
// and names every exit code.
func TestRootHelpOnScreen(t *testing.T) {
	for _, width := range []int{80, 120} {
		t.Run(fmt.Sprint(width), func(t *testing.T) {
			got := strings.Join(helpOnScreen(t, width, "Run a workflow step's job", "--help"), "\n")
			for _, code := range []string{"0 DONE", "1 FAILED", "2 invalid input", "3 KILLED", "4 UNKNOWN", "5 FAILED by the infrastructure", "75 temporary failure"} {
				assert.Contains(t, got, code)
			}
			assert.Contains(t, got, "Commands:\n  agent ")
		})
	}
}

// helpOnScreen runs args (a --help) in tmux at width columns and returns
// the screen's lines from the one that starts with first: they must be
// exactly the lines the help wrote (none wrapped by the terminal), and
// none wider than the screen.
func helpOnScreen(t *testing.T, width int, first string, args ...string) []string {
	t.Helper()
	want := strings.Split(strings.TrimRight(helpScreen(t, width, args...), "\n"), "\n")
	screen := tmuxScreen(t, width, 50, nil, args...)
	// The history holds the help from its first line on.
	start := 0
	for start < len(screen) && !strings.HasPrefix(screen[start], first) {
		start++
	}
	require.Less(t, start, len(screen), "the screen:\n%s", strings.Join(screen, "\n"))
	got := screen[start:]
	for len(got) > 0 && strings.TrimSpace(got[len(got)-1]) == "" {
		got = got[:len(got)-1]
	}
	for i := range want {
		want[i] = strings.TrimRight(want[i], " ")
	}
	assert.Equal(t, want, got, "the screen shows the help's lines unwrapped")
	for i, line := range got {
		assert.LessOrEqual(t, len([]rune(line)), width, "line %d is wider than %d columns: %q", i+1, width, line)
	}
	return got
}
