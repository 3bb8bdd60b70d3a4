package htcondor

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/bridge-runner/bridge-runner/backends"
)

// WaitEnd returns when the job's event log (job.log in its directory on
// the submit host, which the schedd writes anyway) holds the job's end:
// event 005 (terminated), 009 (aborted: condor_rm) or 012 (held, which
// the backend may read as FAILED). It waits with one remote command on the
// backend's connection (sshexec.WaitFor) that reads the log where it is
// written, a few KB; no file of the job's is needed, so a job that is
// evicted or killed hard still announces its end. condor_wait would read
// the same log but blocks without writing, so it could outlive a closed
// channel until its own timeout, and it ignores holds.
//
// An array (a cluster id) shares one log among its tasks: it is not
// watched, its polls find its end.
func (b *Backend) WaitEnd(ctx context.Context, id string) error {
	if !jobID().MatchString(id) {
		return fmt.Errorf("HTCondor job %s is not watched by its event log (only a single job is)", id)
	}
	b.mu.Lock()
	dir := b.iwd[id]
	b.mu.Unlock()
	if dir == "" {
		return fmt.Errorf("HTCondor job %s: its directory is not known yet", id)
	}
	return b.ssh.WaitFor(ctx, "grep", "-q", "-E", endEvent(id), path.Join(dir, logFile))
}

// endEvent matches the event log's line of job id's end: the event
// number, then "(cluster.proc.subproc)" with each number zero-padded to
// three digits at least ("005 (012.000.000) ...").
func endEvent(id string) string {
	c, p, _ := strings.Cut(id, ".")
	return `^0(05|09|12) \(0*` + c + `\.0*` + p + `\.`
}

var _ backends.EndWatcher = (*Backend)(nil)
