#!/usr/bin/env bash
# Stops the kube-apiserver + etcd started by hack/kube-up.sh and removes its state dir.
# Only the processes recorded in the state dir's PID files are signalled (SIGTERM, then
# SIGKILL after a timeout), and only if they are still the very processes that were
# started (PID and start time match). Idempotent: a missing or half-removed state dir is
# fine.
#
# Environment: BRIDGE_KUBE_DIR (default /tmp/bridge-runner-kube), as for kube-up.sh.
set -euo pipefail

HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/lib.sh
source "$HACK/lib.sh"

STATE=${BRIDGE_KUBE_DIR:-/tmp/bridge-runner-kube}
STATE=${STATE%/}
t0=$(now_ms)

# Serialize with a kube-up.sh that may be starting right now. The lock file (empty,
# beside the state dir) is deliberately never deleted: removing it while another run
# waits on it would let a third run lock a fresh file and race with that one.
[ -d "$(dirname "$STATE")" ] || { log "nothing to stop: $STATE does not exist"; exit 0; }
with_lock "$STATE.lock"
if [ ! -e "$STATE" ]; then
  log "nothing to stop: $STATE does not exist"
  exit 0
fi

# The apiserver first, so that it does not log etcd connection errors while shutting down.
stop_pidfile "$STATE/kube-apiserver.pid" 15
stop_pidfile "$STATE/etcd.pid" 10
# Remove the unreachable route for the service CIDR only if kube-up.sh added it.
if [ -f "$STATE/route-added" ]; then
  ip route del unreachable "$(cat "$STATE/route-added")" 2>/dev/null || true
fi
safe_rm_state_dir "$STATE"
log "stopped and removed $STATE in $(elapsed_s "$t0")s"
