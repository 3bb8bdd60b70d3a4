#!/usr/bin/env bash
# Starts a real kube-apiserver backed by a real etcd, both on 127.0.0.1 only, for the
# tests that need Kubernetes semantics (ConfigMap state store, watches, RBAC). There is
# no controller-manager, scheduler, kubelet or kube-proxy: nothing runs pods and nothing
# ever routes to the service CIDR.
#
# Usage: bash hack/kube-up.sh        then   source "${BRIDGE_KUBE_DIR:-/tmp/bridge-runner-kube}/env"
#
# Idempotent: if the stack of this state dir is already up and ready, it only prints the
# env file path. Stop it with hack/kube-down.sh.
#
# Environment:
#   BRIDGE_KUBE_DIR       state dir (certs, tokens, kubeconfigs, data, logs, PID files);
#                         default /tmp/bridge-runner-kube
#   KUBE_VERSION          kube-apiserver version built by hack/build-kube.sh (default v1.32.4)
#   BRIDGE_KUBE_TIMEOUT   seconds to wait for readiness (default 90)
#
# The state dir afterwards holds: kubeconfig (admin, group system:masters),
# kubeconfig-user (user "bridge-tester", no RBAC grants), env (exports
# BRIDGE_TEST_KUBECONFIG and BRIDGE_TEST_KUBECONFIG_USER), *.pid, *.log, pki/, etcd-data/.
# An empty lock file <state dir>.lock beside it serializes concurrent up/down runs.
set -euo pipefail

HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/lib.sh
source "$HACK/lib.sh"

STATE=${BRIDGE_KUBE_DIR:-/tmp/bridge-runner-kube}
STATE=${STATE%/}
TIMEOUT=${BRIDGE_KUBE_TIMEOUT:-90}
# Only a configuration value for the apiserver (it must allocate ClusterIPs from some
# range); see ensure_blackhole_route for why nothing can leave the machine through it.
SERVICE_CIDR=10.96.0.0/24
t0=$(now_ms)

mkdir -p "$(dirname "$STATE")"
with_lock "$STATE.lock"

# Undoes ensure_blackhole_route, only if this state dir added the route.
remove_owned_route() {
  if [ -f "$STATE/route-added" ]; then
    ip route del unreachable "$(cat "$STATE/route-added")" 2>/dev/null || true
    rm -f "$STATE/route-added"
  fi
}

# is_up : the stack recorded in $STATE is running and the apiserver answers /readyz.
is_up() {
  [ -f "$STATE/env" ] && [ -f "$STATE/ports" ] || return 1
  pidfile_alive "$STATE/etcd.pid" && pidfile_alive "$STATE/kube-apiserver.pid" || return 1
  # shellcheck disable=SC1091
  source "$STATE/ports"
  EXPECT_BODY=ok wait_for_http 3 "https://127.0.0.1:$APISERVER_PORT/readyz" \
    --cacert "$STATE/pki/ca.crt" -H "Authorization: Bearer $(cat "$STATE/admin.token")" \
    2>/dev/null
}

if is_up; then
  log "kube-apiserver already up at https://127.0.0.1:$APISERVER_PORT (state $STATE)"
  echo "$STATE/env"
  exit 0
fi

# Something half-up (a crashed etcd, a stale dir from a reboot): clear it first, stopping
# only the processes whose PID files we wrote.
if [ -e "$STATE" ]; then
  log "stale state in $STATE: cleaning up"
  stop_pidfile "$STATE/kube-apiserver.pid"
  stop_pidfile "$STATE/etcd.pid"
  remove_owned_route
  safe_rm_state_dir "$STATE"
fi

# ---------------------------------------------------------------- binaries
need_cmd etcd etcd-server || die "could not install etcd (Debian package etcd-server)"
need_cmd openssl || die "could not install openssl"
need_cmd curl || die "could not install curl"
log "getting kube-apiserver from hack/build-kube.sh (cached after the first build)"
KUBE_BIN_DIR=$(bash "$HACK/build-kube.sh" | tail -n 1)
APISERVER=$KUBE_BIN_DIR/kube-apiserver
[ -x "$APISERVER" ] || die "hack/build-kube.sh did not produce $APISERVER"
t_bin=$(now_ms)

mkdir -p "$STATE/pki"
chmod 700 "$STATE"
PKI=$STATE/pki

# ---------------------------------------------------------------- certificates and keys
# A throwaway CA signs the serving certificate. It is also the --client-ca-file (no
# client certificates are issued; the tests authenticate with tokens). EC P-256 keys
# throughout: generating three RSA keys took ~0.6 s of a ~3.5 s start.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -sha256 -days 365 \
  -keyout "$PKI/ca.key" -out "$PKI/ca.crt" -subj "/CN=bridge-runner-test-ca" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -sha256 -keyout "$PKI/apiserver.key" \
  -out "$PKI/apiserver.csr" -subj "/CN=kube-apiserver" 2>/dev/null
cat >"$PKI/apiserver.ext" <<'EXT'
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,DNS:localhost
EXT
openssl x509 -req -in "$PKI/apiserver.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" \
  -CAcreateserial -days 365 -sha256 -extfile "$PKI/apiserver.ext" -out "$PKI/apiserver.crt" \
  2>/dev/null
# Key pair the apiserver signs ServiceAccount tokens with (TokenRequest API) and verifies
# them against (ES256 tokens).
openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/sa.key" 2>/dev/null
openssl ec -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null

# ---------------------------------------------------------------- static tokens
# Format: token,user,uid[,"group1,group2"]. Every authenticated user also gets the group
# system:authenticated, so bridge-tester can do only what the default RBAC policy allows
# any authenticated user (discovery, self-review): good for Forbidden checks.
ADMIN_TOKEN=$(openssl rand -hex 24)
USER_TOKEN=$(openssl rand -hex 24)
printf '%s' "$ADMIN_TOKEN" >"$STATE/admin.token"
printf '%s' "$USER_TOKEN" >"$STATE/user.token"
cat >"$PKI/tokens.csv" <<CSV
$ADMIN_TOKEN,bridge-admin,uid-bridge-admin,"system:masters"
$USER_TOKEN,bridge-tester,uid-bridge-tester
CSV
chmod 600 "$STATE/admin.token" "$STATE/user.token" "$PKI/tokens.csv" "$PKI"/*.key

# ---------------------------------------------------------------- network safety
# Workplace rule: no packet may leave the machine for a private or public address. The
# apiserver allocates ClusterIPs from SERVICE_CIDR (at least the built-in "kubernetes"
# Service, which it creates itself). Nothing here sends to them (no kube-proxy, no pods,
# no webhooks or aggregated APIs), but should anything try, an "unreachable" route makes
# the kernel reject it locally instead of handing it to the default gateway. Best effort:
# needs CAP_NET_ADMIN; an existing route (another stack's) is left alone and not owned.
ensure_blackhole_route() {
  command -v ip >/dev/null 2>&1 || { log "no 'ip' command: skipping the unreachable route for $SERVICE_CIDR"; return 0; }
  if ip route show table main to exact "$SERVICE_CIDR" 2>/dev/null | grep -q .; then
    return 0
  fi
  if ip route add unreachable "$SERVICE_CIDR" 2>/dev/null; then
    echo "$SERVICE_CIDR" >"$STATE/route-added"
  else
    log "warning: could not add 'unreachable $SERVICE_CIDR' route (no CAP_NET_ADMIN?); continuing"
  fi
}
ensure_blackhole_route

# ---------------------------------------------------------------- start etcd + apiserver
start_stack() {
  local ports
  ports=$(free_ports 3) || return 1
  ETCD_CLIENT_PORT=$(sed -n 1p <<<"$ports")
  ETCD_PEER_PORT=$(sed -n 2p <<<"$ports")
  APISERVER_PORT=$(sed -n 3p <<<"$ports")
  cat >"$STATE/ports" <<PORTS
ETCD_CLIENT_PORT=$ETCD_CLIENT_PORT
ETCD_PEER_PORT=$ETCD_PEER_PORT
APISERVER_PORT=$APISERVER_PORT
PORTS

  rm -rf "$STATE/etcd-data"
  local -a etcd_args=(
    --name bridge-test
    --data-dir "$STATE/etcd-data"
    --listen-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT"
    --advertise-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT"
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT"
    --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT"
    --initial-cluster "bridge-test=http://127.0.0.1:$ETCD_PEER_PORT"
    --initial-cluster-state new
    # A lone member only waits for the election timeout once, at start (nobody can
    # outvote it later), so a short one saves ~0.9 s per start at no risk.
    --heartbeat-interval 20
    --election-timeout 200
    --logger zap
    --log-level warn
  )
  # Test data is disposable: skipping fsync makes every write (and so every test) faster.
  if etcd --help 2>&1 | grep -q -- --unsafe-no-fsync; then etcd_args+=(--unsafe-no-fsync); fi
  start_daemon "$STATE/etcd.pid" "$STATE/etcd.log" etcd "${etcd_args[@]}" || return 1
  EXPECT_BODY='' wait_for_http -p "$STATE/etcd.pid" 30 "http://127.0.0.1:$ETCD_CLIENT_PORT/health" \
    || return 1
  t_etcd=$(now_ms)

  local -a api_args=(
    --bind-address=127.0.0.1
    --advertise-address=127.0.0.1
    --secure-port="$APISERVER_PORT"
    --etcd-servers="http://127.0.0.1:$ETCD_CLIENT_PORT"
    --cert-dir="$PKI"
    --tls-cert-file="$PKI/apiserver.crt"
    --tls-private-key-file="$PKI/apiserver.key"
    --client-ca-file="$PKI/ca.crt"
    --token-auth-file="$PKI/tokens.csv"
    --authorization-mode=RBAC
    --service-account-issuer=https://kubernetes.default.svc
    --service-account-key-file="$PKI/sa.pub"
    --service-account-signing-key-file="$PKI/sa.key"
    --service-cluster-ip-range="$SERVICE_CIDR"
    # etcd 3.4 lacks RequestWatchProgress; with WatchList on, watches without a
    # resourceVersion are rejected (or events arrive tens of seconds late).
    --feature-gates=WatchList=false
    # Fewer moving parts and a faster start; no multi-tenant fairness needed in tests.
    --enable-priority-and-fairness=false
    # No Endpoints/EndpointSlices for the "kubernetes" Service: its only address would be
    # 127.0.0.1, which is not a valid endpoint anyway, and nothing consumes it here.
    --endpoint-reconciler-type=none
    --allow-privileged=false
    --profiling=false
    --v=1
  )
  start_daemon "$STATE/kube-apiserver.pid" "$STATE/kube-apiserver.log" "$APISERVER" "${api_args[@]}" \
    || return 1
  # /readyz is "ok" only after every post-start hook ran, including the RBAC bootstrap
  # policy, so RBAC tests can start right away.
  EXPECT_BODY=ok wait_for_http -p "$STATE/kube-apiserver.pid" -p "$STATE/etcd.pid" "$TIMEOUT" \
    "https://127.0.0.1:$APISERVER_PORT/readyz" \
    --cacert "$PKI/ca.crt" -H "Authorization: Bearer $ADMIN_TOKEN"
}

# A picked port can be taken by someone else before our server binds it: retry with new
# ports in that case (a bind failure shows up as the process dying during the wait).
ok=
for attempt in 1 2 3; do
  rc=0
  start_stack || rc=$?
  if [ "$rc" = 0 ]; then ok=1; break; fi
  tail_logs 40 "$STATE/etcd.log" "$STATE/kube-apiserver.log"
  stop_pidfile "$STATE/kube-apiserver.pid"
  stop_pidfile "$STATE/etcd.pid"
  if grep -qiE 'address already in use' "$STATE/etcd.log" "$STATE/kube-apiserver.log" 2>/dev/null \
     && [ "$attempt" -lt 3 ]; then
    log "port clash on attempt $attempt: retrying with new ports"
    mv "$STATE/etcd.log" "$STATE/etcd.log.$attempt" 2>/dev/null || true
    mv "$STATE/kube-apiserver.log" "$STATE/kube-apiserver.log.$attempt" 2>/dev/null || true
    continue
  fi
  remove_owned_route
  die "kube-apiserver/etcd did not become ready (rc=$rc); logs above, full logs in $STATE (kept for inspection; hack/kube-down.sh removes it)"
done
[ -n "$ok" ]

# ---------------------------------------------------------------- kubeconfigs + env file
CA_DATA=$(base64 -w0 <"$PKI/ca.crt")
write_kubeconfig() { # FILE USER TOKEN
  cat >"$1" <<KC
apiVersion: v1
kind: Config
clusters:
- name: bridge-test
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority-data: $CA_DATA
users:
- name: $2
  user:
    token: $3
contexts:
- name: $2@bridge-test
  context:
    cluster: bridge-test
    user: $2
    namespace: default
current-context: $2@bridge-test
KC
  chmod 600 "$1"
}
write_kubeconfig "$STATE/kubeconfig" bridge-admin "$ADMIN_TOKEN"
write_kubeconfig "$STATE/kubeconfig-user" bridge-tester "$USER_TOKEN"
cat >"$STATE/env" <<ENV
# Written by hack/kube-up.sh; source it before running the tests.
export BRIDGE_TEST_KUBECONFIG=$STATE/kubeconfig
export BRIDGE_TEST_KUBECONFIG_USER=$STATE/kubeconfig-user
export BRIDGE_KUBE_DIR=$STATE
ENV

log "kube-apiserver ready at https://127.0.0.1:$APISERVER_PORT (etcd 127.0.0.1:$ETCD_CLIENT_PORT):" \
  "$(elapsed_s "$t0")s total, $(elapsed_s "$t_bin")s from binaries (etcd ready after" \
  "$(( (t_etcd - t_bin) / 1000 )).$(( (t_etcd - t_bin) % 1000 / 100 ))s)"
log "to use it: source $STATE/env"
echo "$STATE/env"
