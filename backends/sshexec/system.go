package sshexec

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/httpx"
)

// System is a job system driven by its commands on a login node, as the
// backends over SSH (Slurm's sbatch, HTCondor's condor_submit) share it:
// where each job's files go, and how its commands fail.
type System struct {
	Host        string   // what resourceURL must name: "a Slurm login node"
	Controller  string   // the daemon the commands talk to: "slurmctld"
	Unreachable []string // the commands' words for a Controller they cannot reach
	// Errors match a line in the commands' documented error shape, the
	// reason in the first submatch (see Said).
	Errors []*regexp.Regexp
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

// Said is all a message may say of a command's answer, and the one way a
// command's output reaches a message, record or output: the reason of the
// first line (stderr's, then stdout's) in the documented error shape of
// sys's commands ("sbatch: error: <reason>"), made fit by httpx.Reason.
// Anything else is named by kind and size: a login node's shell, profile
// or wrapper may print anything, a credential included.
func (s System) Said(cmd string, r Result) string {
	for _, out := range [][]byte{r.Stderr, r.Stdout} {
		for _, line := range strings.Split(string(out), "\n") {
			line = strings.TrimSpace(line)
			for _, re := range s.Errors {
				if m := re.FindStringSubmatch(line); m != nil {
					if reason := httpx.Reason(m[1]); reason != "" {
						return reason
					}
				}
			}
		}
	}
	var parts []string
	for _, p := range []struct {
		n    int
		name string
	}{{len(r.Stderr), "stderr"}, {len(r.Stdout), "stdout"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d bytes to %s", p.n, p.name))
		}
	}
	if len(parts) == 0 {
		return cmd + " wrote nothing"
	}
	return cmd + " wrote " + strings.Join(parts, " and ") + " that are not a documented error, not shown"
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
	text := sys.Said(cmd, res)
	switch {
	case res.ExitCode == 127:
		return backends.Invalid("resourceURL", "%s is not on the PATH of %s on %s; point resourceURL at %s", cmd, c.target.User, c.target.Host, sys.Host)
	case res.Says(sys.Unreachable...):
		return backends.Transient(fmt.Errorf("%s: %s cannot be reached (exit %d): %s", cmd, sys.Controller, res.ExitCode, text))
	}
	return backends.Invalid(field, "%s refused the job (exit %d): %s", cmd, res.ExitCode, text)
}
