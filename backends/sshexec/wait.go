package sshexec

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
)

// MaxWaiters is how many WaitFor commands one Client runs at once. sshd
// allows MaxSessions (10 by default) channels per connection, and the
// backends' own commands, SFTP and a cluster's watcher need theirs: a
// process following many jobs on one connection (a benchmark, a watcher)
// waits for the first MaxWaiters of them and polls for the rest.
const MaxWaiters = 4

// waitRound bounds one remote wait command: the loop on the login node
// ends by itself after it, and WaitFor starts the next. A process that
// vanished without closing its channel leaves a loop behind for at most
// this long.
const waitRound = 10 * time.Minute

// waitLoop is the remote side of WaitFor: it runs the condition (its
// arguments) every 0.2 s (1 s where sleep takes whole seconds only) until it
// succeeds (exit 0) or the round's seconds ($1) are over (exit 3). Each turn
// writes one byte to the channel: once the channel is closed that write
// fails and ends the loop (SIGPIPE), so no loop outlives its channel by
// more than a turn. inotifywait is not used: it blocks without writing, and
// would outlive a closed channel until its own timeout.
const waitLoop = `end=$(( $(date +%s) + $1 )); shift
s=0.2; sleep "$s" 2>/dev/null || s=1
while :; do
	"$@" >/dev/null 2>&1 && exit 0
	[ "$(date +%s)" -lt "$end" ] || exit 3
	sleep "$s"
	echo . || exit 4
done`

// WaitFor waits, with one long-running remote command at a time, until
// the command cond (an argv, quoted like Cmd.Args) succeeds on the login
// node, e.g. {"test", "-e", path}. It returns nil when it did, ctx's error
// when ctx ended first (the remote command is signalled and its channel
// closed, which ends it), or a transient error when the connection failed.
func (c *Client) WaitFor(ctx context.Context, cond ...string) error {
	if len(cond) == 0 {
		return backends.Invalid("command", "no condition to wait for")
	}
	select {
	case c.waiters <- struct{}{}:
		defer func() { <-c.waiters }()
	case <-ctx.Done():
		return ctx.Err()
	}
	round := strconv.Itoa(int(waitRound / time.Second))
	args := append([]string{"sh", "-c", waitLoop, "sh", round}, cond...)
	for {
		res, err := c.Run(ctx, Cmd{Args: args, Stdout: io.Discard, Timeout: waitRound + c.opts.ReplyTimeout})
		switch {
		case err != nil:
			return err
		case res.ExitCode == 0:
			return nil
		case res.ExitCode != 3:
			return backends.Transient(fmt.Errorf("ssh: the wait for %s on %s ended with exit %d", cond[0], c.target.Addr(), res.ExitCode))
		}
	}
}
