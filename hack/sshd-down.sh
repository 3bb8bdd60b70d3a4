#!/usr/bin/env bash
# Stops the sshd started by hack/sshd-up.sh, and the sessions it serves (its
# child processes), and removes its state dir (keys, config, env, log) and,
# for a server in a chroot, its config dir there. Only processes recorded in
# the state dir's PID file, or children of that very process, are signalled.
# The test user is left in place. Idempotent.
#
# Environment: BRIDGE_SSHD_DIR (default /tmp/bridge-runner-sshd), as for
# sshd-up.sh.
set -euo pipefail

HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/lib.sh
source "$HACK/lib.sh"

STATE=${BRIDGE_SSHD_DIR:-/tmp/bridge-runner-sshd}
STATE=${STATE%/}

if [ ! -e "$STATE" ]; then
  log "nothing to stop: $STATE does not exist"
  [ -n "${BRIDGE_SSHD_LOCKED:-}" ] || rm -f "$STATE.lock"
  exit 0
fi
# sshd-up.sh calls this script while it holds the lock.
[ -n "${BRIDGE_SSHD_LOCKED:-}" ] || with_lock "$STATE.lock"

# children PID : the PIDs whose parent is PID (sshd forks one per connection).
children() { awk -v p="$1" '/^PPid:/ && $2 == p {split(FILENAME, a, "/"); print a[3]}' /proc/[0-9]*/status 2>/dev/null || true; }

if pidfile_alive "$STATE/sshd.pid"; then
  pid=$(pidfile_pid "$STATE/sshd.pid")
  kids=$(children "$pid")
  stop_pidfile "$STATE/sshd.pid" 10
  # The sessions outlive the listener: end them too (they are ours).
  for k in $kids; do kill -TERM "$k" 2>/dev/null || true; done
fi
rm -f "$STATE/sshd.pid"
root=$(sed -n 's/^export [A-Z_]*_ROOT=//p' "$STATE/env" 2>/dev/null || true)
if [ -n "$root" ] && [ -d "$root/etc/ssh/bridge-runner-$(basename "$STATE")" ]; then
  rm -rf "$root/etc/ssh/bridge-runner-$(basename "$STATE")"
fi
safe_rm_state_dir "$STATE"
[ -n "${BRIDGE_SSHD_LOCKED:-}" ] || rm -f "$STATE.lock"
log "stopped sshd and removed $STATE"
