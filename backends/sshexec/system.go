package sshexec

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/bridge-runner/bridge-runner/backends"
)

// System is a job system driven by its commands on a login node, as the
// backends over SSH (Slurm's sbatch, HTCondor's condor_submit) share it:
// where each job's files go, and how its commands fail.
type System struct {
	Host        string   // what resourceURL must name: "a Slurm login node"
	Controller  string   // the daemon the commands talk to: "slurmctld"
	Unreachable []string // the commands' words for a Controller they cannot reach
}

// JobDir is the job's directory on the login node, absolute: DIR/<key>,
// with DIR from resourceURL (relative to the login user's home) or
// bridge-runner.
func (c *Client) JobDir(ctx context.Context, key string) (string, error) {
	root := c.target.Dir
	if root == "" {
		root = "bridge-runner"
	}
	if !path.IsAbs(root) {
		home, err := c.RealPath(ctx, ".")
		if err != nil {
			return "", err
		}
		root = path.Join(home, root)
	}
	return path.Join(root, key), nil
}

// Text is what a message may quote of a command's answer: its stderr, or
// its stdout when stderr is empty, trimmed and cut at 2000 bytes.
func (r Result) Text() string {
	text := strings.TrimSpace(string(r.Stderr))
	if text == "" {
		text = strings.TrimSpace(string(r.Stdout))
	}
	if len(text) > 2000 {
		text = text[:2000] + "..."
	}
	return text
}

// Says reports whether the command's answer holds any of words: the job
// systems' tools tell some outcomes only in words.
func (r Result) Says(words ...string) bool {
	return containsAny(string(r.Stderr), words...) || containsAny(string(r.Stdout), words...)
}

// CommandError turns a failed command of sys into an error: a missing
// command (exit 127) is a login node of another kind (invalid resourceURL),
// an unreachable Controller is transient, the rest is a refusal of field's
// value.
func (c *Client) CommandError(sys System, cmd string, res Result, field string) error {
	text := res.Text()
	switch {
	case res.ExitCode == 127:
		return backends.Invalid("resourceURL", "%s is not on the PATH of %s on %s; point resourceURL at %s", cmd, c.target.User, c.target.Host, sys.Host)
	case res.Says(sys.Unreachable...):
		return backends.Transient(fmt.Errorf("%s: %s cannot be reached (exit %d): %s", cmd, sys.Controller, res.ExitCode, text))
	}
	return backends.Invalid(field, "%s refused the job (exit %d): %s", cmd, res.ExitCode, text)
}
