#!/usr/bin/env bash
# Stops the versitygw started by hack/s3-up.sh and removes its state dir (data,
# credentials, env file, log). Only the process recorded in the state dir's PID
# file is signalled (SIGTERM, then SIGKILL after a timeout), and only if it is
# still the very process that was started (PID and start time match).
# Idempotent: a missing or half-removed state dir is fine. The built binary in
# $BRIDGE_CACHE stays for the next start.
#
# Environment: BRIDGE_S3_DIR (default /tmp/bridge-runner-s3), as for s3-up.sh.
set -euo pipefail

HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/lib.sh
source "$HACK/lib.sh"

STATE=${BRIDGE_S3_DIR:-/tmp/bridge-runner-s3}
STATE=${STATE%/}
t0=$(now_ms)

if [ ! -e "$STATE" ]; then
  log "nothing to stop: $STATE does not exist"
  rm -f "$STATE.lock"
  exit 0
fi
with_lock "$STATE.lock"

stop_pidfile "$STATE/versitygw.pid" 10
safe_rm_state_dir "$STATE"
rm -f "$STATE.lock"
log "stopped versitygw and removed $STATE in $(elapsed_s "$t0")s"
