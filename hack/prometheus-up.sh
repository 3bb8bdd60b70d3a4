#!/usr/bin/env bash
# Starts a real Prometheus (Debian's package, 2.42 on bookworm) for the e2e
# suite: it scrapes /metrics of the operator's and the agents' pods of the e2e
# cluster every 2 s through the API server's pod proxy (the path the suite's
# own scrapes take), and answers queries on 127.0.0.1 only. The dashboard test
# (e2e/dashboard_test.go) evaluates every query of deploy/grafana/*.json
# against it.
#
#   bash hack/cluster-up.sh && bash hack/prometheus-up.sh
#   source /tmp/bridge-runner-e2e-prometheus/env   # BRIDGE_E2E_PROMETHEUS_URL
#   bash hack/prometheus-down.sh
#
# The package is installed if missing, with a policy-rc.d that keeps its
# maintainer scripts from starting the system service (and, under systemd,
# the unit disabled): only this script's process runs, with its own config and
# data under the state dir, as a ServiceAccount of the cluster that may list
# pods and get pods/proxy and nothing else (its token in the state dir, 0600).
#
# Environment:
#   BRIDGE_PROMETHEUS_DIR   state dir (default /tmp/bridge-runner-e2e-prometheus)
#   BRIDGE_CLUSTER_DIR      the e2e cluster's (default /tmp/bridge-runner-cluster)
set -euo pipefail
HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/lib.sh
source "$HACK/lib.sh"

STATE=${BRIDGE_PROMETHEUS_DIR:-/tmp/bridge-runner-e2e-prometheus}
STATE=${STATE%/}
CLUSTER=${BRIDGE_CLUSTER_DIR:-/tmp/bridge-runner-cluster}
t0=$(now_ms)
[ -f "$CLUSTER/env" ] || die "no e2e cluster: $CLUSTER/env is missing (hack/cluster-up.sh)"
# shellcheck disable=SC1091
source "$CLUSTER/env"
mkdir -p "$(dirname "$STATE")"
with_lock "$STATE.lock"

if pidfile_alive "$STATE/prometheus.pid"; then
  log "Prometheus already up ($STATE)"
  exit 0
fi

need_cmd_no_service prometheus prometheus || die "apt-get install prometheus failed"

safe_rm_state_dir "$STATE"
mkdir -p "$STATE/data"
chmod 700 "$STATE"

# A ServiceAccount that may find the pods and read their /metrics through
# the API server's proxy, and nothing else.
kubectl apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: ServiceAccount
metadata: {name: bridge-e2e-prometheus, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: bridge-e2e-prometheus}
rules:
  - {apiGroups: [""], resources: [pods], verbs: [get, list, watch]}
  - {apiGroups: [""], resources: [pods/proxy], verbs: [get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: bridge-e2e-prometheus}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: bridge-e2e-prometheus}
subjects: [{kind: ServiceAccount, name: bridge-e2e-prometheus, namespace: kube-system}]
YAML
(umask 077; kubectl -n kube-system create token bridge-e2e-prometheus --duration=24h >"$STATE/token")
kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}' | base64 -d >"$STATE/ca.crt"
SERVER=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')
cat >"$STATE/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters: [{name: e2e, cluster: {server: "$SERVER", certificate-authority: "$STATE/ca.crt"}}]
users: [{name: prometheus, user: {tokenFile: "$STATE/token"}}]
contexts: [{name: e2e, context: {cluster: e2e, user: prometheus}}]
current-context: e2e
KC

# Debian's build has no Kubernetes service discovery: a small loop (its own
# process, stopped by prometheus-down.sh) lists the pods every 2 s and writes
# one file_sd file per component (the dashboard's $job), each pod's /metrics
# (port 8080, the operator's and the agent's contract) through the pod proxy.
discover() {
  local name
  while :; do
    for name in bridge-runner-operator bridge-runner-agent; do
      kubectl --kubeconfig "$STATE/kubeconfig" get pods -A -l "app.kubernetes.io/name=$name" --field-selector=status.phase=Running \
        -o jsonpath='{range .items[*]}{.metadata.namespace} {.metadata.name}{"\n"}{end}' 2>/dev/null |
        awk -v server="${SERVER#https://}" 'BEGIN {printf "["} NF == 2 {
            printf "%s{\"targets\":[\"%s\"],\"labels\":{\"__metrics_path__\":\"/api/v1/namespaces/%s/pods/%s:8080/proxy/metrics\",\"pod\":\"%s\"}}", sep, server, $1, $2, $2; sep = ","
          } END {print "]"}' >"$STATE/$name.json.tmp" && mv "$STATE/$name.json.tmp" "$STATE/$name.json"
    done
    sleep 2
  done
}
# honor_labels as the shipped ServiceMonitor: the cluster gauges carry their
# BridgeCluster's own namespace label.
scrape_job() {
  cat <<YAML
  - job_name: $1
    honor_labels: true
    scheme: https
    authorization: {credentials_file: $STATE/token}
    tls_config: {ca_file: $STATE/ca.crt}
    file_sd_configs: [{files: [$STATE/$1.json], refresh_interval: 2s}]
YAML
}
{
  printf 'global: {scrape_interval: 2s, evaluation_interval: 2s}\nscrape_configs:\n'
  scrape_job bridge-runner-operator
  scrape_job bridge-runner-agent
} >"$STATE/prometheus.yml"
promtool check config "$STATE/prometheus.yml" >/dev/null 2>&1 || die "promtool check config $STATE/prometheus.yml failed: $(promtool check config "$STATE/prometheus.yml" 2>&1 | tail -3)"
export -f discover
export STATE SERVER
start_daemon "$STATE/discover.pid" "$STATE/discover.log" bash -c discover

for attempt in 1 2 3; do
  PORT=$(free_ports 1)
  start_daemon "$STATE/prometheus.pid" "$STATE/prometheus.log" prometheus \
    --config.file="$STATE/prometheus.yml" --storage.tsdb.path="$STATE/data" \
    --web.listen-address="127.0.0.1:$PORT" --storage.tsdb.retention.time=1d || continue
  if wait_for_http -p "$STATE/prometheus.pid" 60 "http://127.0.0.1:$PORT/-/ready"; then
    echo "export BRIDGE_E2E_PROMETHEUS_URL=http://127.0.0.1:$PORT" >"$STATE/env"
    log "Prometheus $(prometheus --version 2>&1 | awk 'NR==1 {print $3}') up at http://127.0.0.1:$PORT in $(elapsed_s "$t0")s (state $STATE)"
    exit 0
  fi
  stop_pidfile "$STATE/prometheus.pid"
  log "Prometheus did not start (attempt $attempt)"; tail_logs 10 "$STATE/prometheus.log"
done
die "Prometheus did not start; see $STATE/prometheus.log"
