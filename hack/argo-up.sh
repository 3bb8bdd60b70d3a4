#!/usr/bin/env bash
# Starts the Argo workflow-controller of ARGO_VERSION on the e2e cluster that
# hack/cluster-up.sh started, or swaps the running one for it: stops the controller,
# installs that version's CRDs (server-side apply, so a later version's fields replace
# an earlier one's), imports its argoexec image and starts its controller. The rest of
# the cluster (Kubernetes, containerd, the project's image, the templates) stays as it is,
# so the e2e suite can run against a second Argo line for seconds instead of a new cluster.
#
#   ARGO_VERSION=v3.7.18 bash hack/argo-up.sh  # binaries built and cached by build-cluster.sh
#
# Environment: BRIDGE_CLUSTER_DIR (default /tmp/bridge-runner-cluster), ARGO_VERSION
# (default ARGO_DEFAULT_VERSION of hack/lib.sh), BRIDGE_CLUSTER_TIMEOUT (default 120), BRIDGE_CACHE.
set -euo pipefail
HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/lib.sh
source "$HACK/lib.sh"

STATE=${BRIDGE_CLUSTER_DIR:-/tmp/bridge-runner-cluster}
STATE=${STATE%/}
ARGO_VERSION=${ARGO_VERSION:-$ARGO_DEFAULT_VERSION}
TIMEOUT=${BRIDGE_CLUSTER_TIMEOUT:-120}
ARGO_NS=argo
KUBECTL=$STATE/bin/kubectl
export KUBECONFIG=$STATE/kubeconfig
t0=$(now_ms)

[ "$(id -u)" = 0 ] || die "run as root (containerd)"
[ -s "$KUBECONFIG" ] || die "no cluster in $STATE: start it with hack/cluster-up.sh"
# cluster-up.sh calls this script while it holds the state lock itself.
[ "${ARGO_UP_LOCKED:-0}" = 1 ] || with_lock "$STATE.lock"

CACHE=$(ARGO_VERSION=$ARGO_VERSION bash "$HACK/build-cluster.sh" 9>&- | tail -n 1)
ABIN=$CACHE/argo/$ARGO_VERSION
[ -x "$ABIN/workflow-controller" ] || die "missing $ABIN/workflow-controller"
t_bin=$(now_ms)

# The controller's health server has a fixed port: the old controller must be gone first.
stop_pidfile "$STATE/workflow-controller.pid" 10
if ss -Htln 2>/dev/null | awk '{print $4}' | grep -qE '(^|:)6060$'; then
  die "port 6060 is taken; the Argo workflow-controller needs it"
fi
ctr --address "$STATE/containerd/containerd.sock" -n k8s.io images import \
  "$CACHE/images/argoexec-$ARGO_VERSION.tar" >/dev/null || die "ctr could not import argoexec $ARGO_VERSION"

"$KUBECTL" apply --server-side --force-conflicts -f "$ABIN/crds/" >/dev/null
"$KUBECTL" create namespace "$ARGO_NS" --dry-run=client -o yaml | "$KUBECTL" apply -f - >/dev/null
mkdir -p "$STATE/manifests"
cat >"$STATE/manifests/argo-config.yaml" <<CM
apiVersion: v1
kind: ConfigMap
metadata: {name: workflow-controller-configmap, namespace: $ARGO_NS}
data:
  metricsConfig: |
    enabled: false
  telemetryConfig: |
    enabled: false
  executor: |
    imagePullPolicy: Never
CM
"$KUBECTL" apply -f "$STATE/manifests/argo-config.yaml" >/dev/null
# kubectl wait fails at once ("status.conditions accessor error") on a CRD whose
# status the apiserver has not written yet: ask again until the deadline.
crd_deadline=$((SECONDS + 60))
until "$KUBECTL" wait --for condition=established --timeout=60s crd/workflows.argoproj.io \
  crd/workflowtemplates.argoproj.io crd/workflowtaskresults.argoproj.io >/dev/null 2>&1; do
  [ "$SECONDS" -lt "$crd_deadline" ] || die "Argo's CRDs were not established within 60 s"
  sleep 0.5
done
# DEFAULT_REQUEUE_TIME=1s: the default 10 s after each pod event would dominate every test.
start_daemon "$STATE/workflow-controller.pid" "$STATE/workflow-controller.log" \
  env DEFAULT_REQUEUE_TIME=1s LEADER_ELECTION_DISABLE=true ARGO_NAMESPACE="$ARGO_NS" \
  "$ABIN/workflow-controller" --kubeconfig="$KUBECONFIG" --namespace="$ARGO_NS" \
  --configmap=workflow-controller-configmap \
  --executor-image="bridge-e2e.local/argoexec:$ARGO_VERSION" --executor-image-pull-policy=Never \
  --loglevel=info
if ! wait_for_http -p "$STATE/workflow-controller.pid" "$TIMEOUT" "http://127.0.0.1:6060/healthz"; then
  tail_logs 40 "$STATE/workflow-controller.log"
  die "workflow-controller $ARGO_VERSION did not become ready; logs in $STATE"
fi
echo "$ARGO_VERSION" >"$STATE/argo-version"
log "Argo $ARGO_VERSION up in $(elapsed_s "$t0")s ($(elapsed_s "$t_bin")s from binaries)"
