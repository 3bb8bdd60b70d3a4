#!/usr/bin/env bash
# Stops the Prometheus of hack/prometheus-up.sh and removes its state dir
# (config, token, data, log) and its ServiceAccount and grant in the e2e
# cluster, if that is still up. Idempotent. The package stays installed.
#
# Environment: BRIDGE_PROMETHEUS_DIR, BRIDGE_CLUSTER_DIR, as for prometheus-up.sh.
set -euo pipefail
HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/lib.sh
source "$HACK/lib.sh"

STATE=${BRIDGE_PROMETHEUS_DIR:-/tmp/bridge-runner-e2e-prometheus}
STATE=${STATE%/}
CLUSTER=${BRIDGE_CLUSTER_DIR:-/tmp/bridge-runner-cluster}
t0=$(now_ms)
if [ ! -e "$STATE" ]; then
  rm -f "$STATE.lock"
  exit 0
fi
with_lock "$STATE.lock"
stop_pidfile "$STATE/prometheus.pid" 10
stop_pidfile "$STATE/discover.pid" 5
if [ -f "$CLUSTER/env" ]; then
  # shellcheck disable=SC1091
  source "$CLUSTER/env"
  kubectl delete --ignore-not-found --wait=false clusterrolebinding/bridge-e2e-prometheus clusterrole/bridge-e2e-prometheus \
    >/dev/null 2>&1 || true
  kubectl -n kube-system delete --ignore-not-found --wait=false serviceaccount/bridge-e2e-prometheus >/dev/null 2>&1 || true
fi
safe_rm_state_dir "$STATE"
rm -f "$STATE.lock"
log "stopped Prometheus and removed $STATE in $(elapsed_s "$t0")s"
