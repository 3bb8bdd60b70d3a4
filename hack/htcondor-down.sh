#!/usr/bin/env bash
# Stops what hack/htcondor-up.sh started: the sshd in the chroot (and its
# sessions), condor_master (which stops its daemons and their jobs), any
# process still running inside that chroot, and the mounts it made; then
# removes the state dir. The cached chroot stays for the next start.
# Idempotent.
#
# Environment: BRIDGE_CONDOR_DIR, BRIDGE_CACHE, as for htcondor-up.sh;
# CONDOR_BASE, the root's cache dir (hack/htcondor25-down.sh sets it), is
# the fallback when the state dir lost its record of the root.
set -euo pipefail

HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/lib.sh
source "$HACK/lib.sh"

STATE=${BRIDGE_CONDOR_DIR:-/tmp/bridge-runner-htcondor}
STATE=${STATE%/}
CACHE=${BRIDGE_CACHE:-$HOME/.cache/bridge-runner}
BASE=${CONDOR_BASE:-$CACHE/htcondor-23.9}

if [ ! -e "$STATE" ]; then
  log "nothing to stop: $STATE does not exist"
  exit 0
fi
ROOT=$(cat "$STATE/root" 2>/dev/null || echo "$BASE/root")
# htcondor-up.sh calls this script while it holds the lock (the root's).
[ -n "${BRIDGE_CONDOR_LOCKED:-}" ] || with_lock "$(dirname "$ROOT")/lock"

BRIDGE_SSHD_DIR=$STATE/sshd bash "$HACK/sshd-down.sh" || true
stop_pidfile "$STATE/condor_master.pid" 30

# Anything left inside the chroot was started by this pool (a job, a
# starter): end it, or the mounts cannot go.
in_root() {
  local p
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/root" 2>/dev/null)" = "$ROOT" ] && echo "${p#/proc/}"
  done
  return 0
}
left=$(in_root)
if [ -n "$left" ]; then
  log "ending processes left in the chroot: $(tr '\n' ' ' <<<"$left")"
  # shellcheck disable=SC2086
  kill -KILL $left 2>/dev/null || true
  sleep 0.5
fi

if [ -f "$STATE/mounts" ]; then
  tac "$STATE/mounts" | while read -r m; do
    mountpoint -q "$m" || continue
    umount "$m" 2>/dev/null || umount -l "$m"
  done
fi
safe_rm_state_dir "$STATE"
log "stopped HTCondor and removed $STATE"
