package sshexec_test

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/sshexec"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

// TestCommandErrorClassifies: the one classifier both SSH backends use.
func TestCommandErrorClassifies(t *testing.T) {
	target, err := sshexec.ParseURL("ssh://alice@login.example")
	if err != nil {
		t.Fatal(err)
	}
	c := sshexec.New(target, testutil.MapCreds{}, nil, sshexec.Options{})
	sys := sshexec.System{Host: "a Slurm login node", Controller: "slurmctld", Unreachable: []string{"Unable to contact slurm controller"},
		Errors: []*regexp.Regexp{regexp.MustCompile(`^sbatch: error: (.+)$`)}}

	err = c.CommandError(sys, "sbatch", sshexec.Result{ExitCode: 127, Stderr: []byte("sh: sbatch: not found")}, "jobproperties")
	testutil.RequireFieldError(t, err, "resourceURL")
	if !strings.Contains(err.Error(), "point resourceURL at a Slurm login node") {
		t.Errorf("a missing command: %v", err)
	}
	err = c.CommandError(sys, "sbatch", sshexec.Result{ExitCode: 1, Stdout: []byte("sbatch: error: Unable to contact slurm controller (connect failure)")}, "jobproperties")
	if !errors.Is(err, backends.ErrTransient) || !strings.Contains(err.Error(), "slurmctld cannot be reached") {
		t.Errorf("an unreachable controller (said on stdout): want transient, got %v", err)
	}
	err = c.CommandError(sys, "sbatch", sshexec.Result{ExitCode: 1, Stderr: []byte("  sbatch: error: invalid partition  \n"), Stdout: []byte("ignored")}, "jobproperties")
	testutil.RequireFieldError(t, err, "jobproperties")
	if !strings.HasSuffix(err.Error(), "(exit 1): invalid partition") {
		t.Errorf("a refusal quotes the documented error's reason: %v", err)
	}
	if got := sys.Said("sbatch", sshexec.Result{Stderr: []byte(strings.Repeat("x", 3000))}); got != "sbatch wrote 3000 bytes to stderr that are not a documented error, not shown" {
		t.Errorf("undocumented output is named by its size: %q", got)
	}
}
