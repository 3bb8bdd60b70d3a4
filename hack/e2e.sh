#!/usr/bin/env bash
# The end-to-end suite: the product the way users run it. Starts (and afterwards
# stops) a real Slurm with slurmrestd and a real S3 server listening on the node's
# own address as well, a real single-node Kubernetes with Argo Workflows
# (hack/cluster-up.sh), builds the bridge-runner image and loads it, runs the Go
# tests in e2e/, and tears everything down, leaving the host as it found it.
#
#   make e2e                     # what CI runs (CI=true: a missing service fails)
#   KEEP_E2E=1 bash hack/e2e.sh  # leave everything up afterwards, for re-runs
#   E2E_TEST_FLAGS='-run Stop' bash hack/e2e.sh
#
# Prints a timing summary at the end, and the peak memory used on the machine
# (MemTotal - MemAvailable, sampled every second) above what it was at the start.
set -euo pipefail
HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HACK")
# shellcheck source=hack/lib.sh
source "$HACK/lib.sh"
cd "$ROOT"

export BRIDGE_SLURM_DIR=${BRIDGE_E2E_SLURM_DIR:-/tmp/bridge-runner-e2e-slurm}
export BRIDGE_S3_DIR=${BRIDGE_E2E_S3_DIR:-/tmp/bridge-runner-e2e-s3}
export BRIDGE_CLUSTER_DIR=${BRIDGE_CLUSTER_DIR:-/tmp/bridge-runner-cluster}
t0=$(now_ms)
timings=()
mark() { timings+=("$1: $(elapsed_s "$2")s"); }

NODE_IP=${BRIDGE_NODE_IP:-}
if [ -z "$NODE_IP" ]; then
  dev=$(ip -4 route show default | awk '{for (i = 1; i < NF; i++) if ($i == "dev") {print $(i+1); exit}}')
  [ -n "$dev" ] && NODE_IP=$(ip -4 -o addr show dev "$dev" | awk '{split($4, a, "/"); print a[1]; exit}')
fi
[ -n "$NODE_IP" ] || die "could not find the node's own address; set BRIDGE_NODE_IP"
export BRIDGE_NODE_IP=$NODE_IP

# ---------------------------------------------------------------- memory sampling
mem_used_kb() { awk '/^MemTotal:/ {t = $2} /^MemAvailable:/ {a = $2} END {print t - a}' /proc/meminfo; }
MEM0=$(mem_used_kb)
MEMFILE=$(mktemp "${TMPDIR:-/tmp}/bridge-e2e-mem.XXXXXX")
echo "$MEM0" >"$MEMFILE"
( peak=$MEM0; while sleep 1; do m=$(mem_used_kb); [ "$m" -gt "$peak" ] && { peak=$m; echo "$peak" >"$MEMFILE"; }; done ) 9>&- &
SAMPLER=$!

teardown() {
  local rc=$?
  kill "$SAMPLER" 2>/dev/null || true
  wait "$SAMPLER" 2>/dev/null || true
  if [ "${KEEP_E2E:-0}" = 1 ]; then
    log "KEEP_E2E=1: leaving the cluster, Slurm and S3 up (hack/cluster-down.sh, slurm-down.sh --purge, s3-down.sh stop them)"
  else
    local td; td=$(now_ms)
    if ! bash "$HACK/cluster-down.sh"; then
      log "cluster-down.sh reported a problem"
      [ "$rc" != 0 ] || rc=1
    fi
    bash "$HACK/slurm-down.sh" --purge || true
    bash "$HACK/s3-down.sh" || true
    mark "tear-down" "$td"
  fi
  local peak; peak=$(cat "$MEMFILE" 2>/dev/null || echo "$MEM0")
  rm -f "$MEMFILE"
  mark "total" "$t0"
  echo "== e2e timings: ${timings[*]}" >&2
  echo "== e2e peak memory used on the machine: $((peak / 1024)) MiB ($(((peak - MEM0) / 1024)) MiB above the $((MEM0 / 1024)) MiB at the start)" >&2
  exit "$rc"
}
trap teardown EXIT

# ---------------------------------------------------------------- services
ts=$(now_ms)
BRIDGE_SLURM_LISTEN=$NODE_IP bash "$HACK/slurm-up.sh" >/dev/null
# shellcheck disable=SC1091
source "$BRIDGE_SLURM_DIR/env"
mark "slurm up" "$ts"
WORKDIR=$BRIDGE_SLURM_DIR/work
mkdir -p "$WORKDIR" && chown "$BRIDGE_TEST_SLURM_USER" "$WORKDIR" && chmod 755 "$WORKDIR"

ts=$(now_ms)
BRIDGE_S3_LISTEN=$NODE_IP bash "$HACK/s3-up.sh" >/dev/null
# shellcheck disable=SC1091
source "$BRIDGE_S3_DIR/env"
mark "s3 up" "$ts"

ts=$(now_ms)
bash "$HACK/cluster-up.sh" >/dev/null
# shellcheck disable=SC1091
source "$BRIDGE_CLUSTER_DIR/env"
mark "cluster up (incl. build)" "$ts"

ts=$(now_ms)
IMAGE=$(bash "$HACK/build-image.sh" | tail -n 1)
mark "image build+load" "$ts"

# ---------------------------------------------------------------- tests
export BRIDGE_E2E_IMAGE=$IMAGE BRIDGE_E2E_REPO=$ROOT BRIDGE_E2E_SLURM_WORKDIR=$WORKDIR
ts=$(now_ms)
rc=0
# shellcheck disable=SC2086
(cd e2e && go test -count=1 -timeout 25m -v ${E2E_TEST_FLAGS:-} ./...) || rc=$?
mark "tests" "$ts"
exit "$rc"
