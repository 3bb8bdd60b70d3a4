#!/usr/bin/env bash
# Stops the Ray cluster started by hack/ray-up.sh and removes its state dir
# (Ray's temp dir with its logs, the env file, the credentials). The venv in
# $BRIDGE_CACHE stays for the next start.
#
# Which processes: every process that has a file open (or its working
# directory) under the state dir, and their descendants. Ray's temp dir is there, and every Ray
# process — GCS, raylet, dashboard and its agents, workers, and the jobs'
# drivers, whose output goes to a log file there — keeps its log files open,
# even the ones whose parent died. (Marks in the environment do not work:
# Ray's setproctitle overwrites /proc/PID/environ of its agents and workers.)
# They get SIGTERM, then SIGKILL after 5 s — what `ray stop` does, but `ray
# stop` matches processes by name and would also stop any other Ray cluster
# of this user on the machine, so it is not used.
# Idempotent: nothing running and no state dir is fine.
#
# Environment: BRIDGE_RAY_DIR (default /tmp/bridge-runner-ray), as for ray-up.sh.
set -euo pipefail

HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/lib.sh
source "$HACK/lib.sh"
# shellcheck source=hack/ray-lib.sh
source "$HACK/ray-lib.sh"

STATE=${BRIDGE_RAY_DIR:-/tmp/bridge-runner-ray}
STATE=${STATE%/}
t0=$(now_ms)

# ray-up.sh calls this while it holds the lock (BRIDGE_RAY_NOLOCK=1), and with
# BRIDGE_RAY_KEEP=1 when it only wants the processes gone.
if [ -z "${BRIDGE_RAY_NOLOCK:-}" ]; then
  mkdir -p "$(dirname "$STATE")"
  with_lock "$STATE.lock"
fi

# wait_gone: wait up to 5 s for the marked processes to end; the ones left
# are in $left afterwards.
wait_gone() {
  for (( i = 0; i < 50; i++ )); do
    mapfile -t left < <(marked_pids)
    [ "${#left[@]}" = 0 ] && return
    sleep 0.1
  done
  mapfile -t left < <(marked_pids)
}

mapfile -t pids < <(marked_pids)
if [ "${#pids[@]}" -gt 0 ]; then
  log "stopping ${#pids[@]} Ray processes of $STATE: ${pids[*]}"
  kill -TERM "${pids[@]}" 2>/dev/null || true
  wait_gone
  if [ "${#left[@]}" -gt 0 ]; then
    log "still there after 5s, sending SIGKILL: ${left[*]}"
    kill -KILL "${left[@]}" 2>/dev/null || true
    wait_gone
  fi
  [ "${#left[@]}" = 0 ] || die "Ray processes of $STATE survived SIGKILL: ${left[*]}"
fi

if [ -n "${BRIDGE_RAY_KEEP:-}" ]; then
  exit 0
fi
existed=
if [ -f "$STATE/route-added" ]; then # the metadata route ray-up.sh added
  ip route del unreachable "$(cat "$STATE/route-added")" 2>/dev/null || true
fi
if [ -e "$STATE" ]; then
  existed=1
  safe_rm_state_dir "$STATE"
fi
[ -n "${BRIDGE_RAY_NOLOCK:-}" ] || rm -f "$STATE.lock"
if [ -n "$existed" ] || [ "${#pids[@]}" -gt 0 ]; then
  log "stopped Ray and removed $STATE in $(elapsed_s "$t0")s"
else
  log "nothing to stop: no Ray of $STATE runs"
fi
