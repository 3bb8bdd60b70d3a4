#!/usr/bin/env bash
# Starts a real single-node Kubernetes that runs pods, with Argo Workflows, for the
# e2e suite (e2e/): etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# kube-proxy (iptables), kubelet, containerd + runc + the CNI bridge plugin, and the
# Argo workflow-controller. Everything is built or installed by hack/build-cluster.sh
# (cached); the images (pause, argoexec) are imported into containerd from tarballs:
# there is no registry, pods use imagePullPolicy: Never.
#
#   bash hack/cluster-up.sh && source /tmp/bridge-runner-cluster/env
#   kubectl get nodes                # the kubectl built with the cluster, on PATH via env
#   bash hack/cluster-down.sh        # stops it all and undoes every change to the host
#
# Network rule of this workplace, and how it holds here:
# - every server binds to 127.0.0.1 or to the node's own address (BRIDGE_NODE_IP,
#   default: the address of the interface of the default route);
# - before anything starts, an `unreachable` route covers the whole service CIDR and
#   the pod range, so a packet to a Service IP without kube-proxy's DNAT rule, or to
#   a pod address without the bridge, dies locally;
# - pods live on a bridge with a private /24 of this machine; the bridge plugin does
#   no masquerading, and a FORWARD guard (chain BRIDGE-E2E-EGRESS) drops every packet
#   from a pod to anything but another pod (pods reach the node's own address, and
#   through it the Service IPs, by local delivery, not forwarding);
# - kubelet gives pods no DNS server (resolvConf: ""), so nothing in a pod ever asks
#   the machine's resolver.
# All host changes (routes, iptables chains, sysctls, the bridge, netns, mounts,
# cgroups, /var/log/containers links) are recorded under the state dir and undone by
# hack/cluster-down.sh, which also compares the host with the snapshot taken here.
#
# Environment:
#   BRIDGE_CLUSTER_DIR      state dir (default /tmp/bridge-runner-cluster)
#   BRIDGE_NODE_IP          the node's own address (default: from the default route)
#   BRIDGE_CLUSTER_TIMEOUT  seconds to wait for each component (default 120)
#   BRIDGE_CACHE, KUBE_VERSION, ARGO_VERSION: see hack/build-cluster.sh
#
# The env file exports KUBECONFIG, BRIDGE_E2E_KUBECONFIG, BRIDGE_E2E_NODE_IP,
# BRIDGE_E2E_CLUSTER_DIR and puts the cluster's kubectl first on PATH.
set -euo pipefail
HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/lib.sh
source "$HACK/lib.sh"

STATE=${BRIDGE_CLUSTER_DIR:-/tmp/bridge-runner-cluster}
STATE=${STATE%/}
TIMEOUT=${BRIDGE_CLUSTER_TIMEOUT:-120}
KUBE_VERSION=${KUBE_VERSION:-v1.32.4}
ARGO_VERSION=${ARGO_VERSION:-$ARGO_DEFAULT_VERSION}
SERVICE_CIDR=10.98.0.0/24
SERVICE_IP=10.98.0.1
POD_CIDR=10.244.77.0/24
POD_RANGE="10.244.0.0/16" # covered by an unreachable route; the bridge's /24 is more specific
BRIDGE=bre2e0
NODE_NAME=bridge-e2e-node
EGRESS_CHAIN="BRIDGE-E2E-EGRESS"
t0=$(now_ms)

[ "$(id -u)" = 0 ] || die "run as root (containerd, kubelet, iptables, routes)"
mkdir -p "$(dirname "$STATE")"
with_lock "$STATE.lock"

# ---------------------------------------------------------------- already up?
is_up() {
  [ -f "$STATE/env" ] || return 1
  local p
  for p in etcd kube-apiserver containerd kubelet kube-proxy kube-controller-manager kube-scheduler workflow-controller; do
    pidfile_alive "$STATE/$p.pid" || return 1
  done
  KUBECONFIG=$STATE/kubeconfig timeout 10 "$STATE/bin/kubectl" get --raw /readyz >/dev/null 2>&1
}
if is_up; then
  log "cluster already up (state $STATE)"
  echo "$STATE/env"
  exit 0
fi
if [ -e "$STATE" ]; then
  log "stale state in $STATE: tearing it down first"
  exec 9>&- # cluster-down takes the lock itself
  BRIDGE_CLUSTER_DIR=$STATE bash "$HACK/cluster-down.sh"
  with_lock "$STATE.lock"
fi

# ---------------------------------------------------------------- binaries
log "getting binaries and images from hack/build-cluster.sh (cached after the first build)"
CACHE=$(bash "$HACK/build-cluster.sh" 9>&- | tail -n 1)
KBIN=$CACHE/kube/$KUBE_VERSION
ABIN=$CACHE/argo/$ARGO_VERSION
IMGS=$CACHE/images
for b in kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet kubectl; do
  [ -x "$KBIN/$b" ] || die "missing $KBIN/$b"
done
[ -x "$ABIN/workflow-controller" ] || die "missing $ABIN/workflow-controller"
need_cmd etcd etcd-server || die "could not install etcd"
need_cmd openssl || die "could not install openssl"
t_bin=$(now_ms)

NODE_IP=${BRIDGE_NODE_IP:-}
if [ -z "$NODE_IP" ]; then
  dev=$(ip -4 route show default | awk '{for (i = 1; i < NF; i++) if ($i == "dev") {print $(i+1); exit}}')
  [ -n "$dev" ] && NODE_IP=$(ip -4 -o addr show dev "$dev" | awk '{split($4, a, "/"); print a[1]; exit}')
fi
[ -n "$NODE_IP" ] || die "could not find the node's own address; set BRIDGE_NODE_IP"
ip -4 -o addr show | awk '{split($4, a, "/"); print a[1]}' | grep -qx "$NODE_IP" ||
  die "BRIDGE_NODE_IP=$NODE_IP is not an address of this machine"
# Argo's controller serves its health check on port 6060 (patched to 127.0.0.1).
if ss -Htln 2>/dev/null | awk '{print $4}' | grep -qE '(^|:)6060$'; then
  die "port 6060 is taken; the Argo workflow-controller needs it"
fi

mkdir -p "$STATE"/{pki,bin,pre,containerd,kubelet,cni/net.d,cni/ipam,pod-logs,manifests}
chmod 700 "$STATE"
cp "$KBIN/kubectl" "$STATE/bin/kubectl"
PKI=$STATE/pki
echo "$NODE_IP" >"$STATE/node-ip"

# ---------------------------------------------------------------- host snapshot
# What cluster-down.sh restores and checks against.
SYSCTLS=(net.ipv4.ip_forward net.ipv4.conf.all.route_localnet net.bridge.bridge-nf-call-iptables
  net.bridge.bridge-nf-call-ip6tables vm.overcommit_memory vm.panic_on_oom kernel.panic
  kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes)
: >"$STATE/pre/sysctl"
for s in "${SYSCTLS[@]}"; do
  v=$(sysctl -n "$s" 2>/dev/null) && printf '%s=%s\n' "$s" "$v" >>"$STATE/pre/sysctl"
done
ip route show table main >"$STATE/pre/routes"
ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort >"$STATE/pre/links"
iptables-save 2>/dev/null | grep -vE '^#|^:' | sed 's/\[[0-9:]*\]//' >"$STATE/pre/iptables" || true
ip6tables-save 2>/dev/null | grep -vE '^#|^:' | sed 's/\[[0-9:]*\]//' >"$STATE/pre/ip6tables" || true
findmnt -rn -o TARGET | sort >"$STATE/pre/mounts"
for d in /var/run/netns /var/lib/cni /var/log/containers /run/containerd /opt/containerd /etc/cni /var/lib/kubelet; do
  [ -e "$d" ] && echo "$d"
done >"$STATE/pre/paths"
ls /var/run/netns 2>/dev/null | sort >"$STATE/pre/netns" || true
if command -v nft >/dev/null; then nft list tables >"$STATE/pre/nft-tables" 2>/dev/null || true; fi
ls -d /sys/fs/cgroup/*/kubepods 2>/dev/null >"$STATE/pre/cgroups" || true

# ---------------------------------------------------------------- network safety first
# Before any component starts: Service IPs and pod addresses never leave the machine.
add_unreachable() { # CIDR
  if ip route show table main to exact "$1" 2>/dev/null | grep -q .; then
    log "a route for $1 exists already: leaving it (not owned)"
  else
    ip route add unreachable "$1" && echo "$1" >>"$STATE/routes-added"
  fi
}
add_unreachable "$SERVICE_CIDR"
add_unreachable "$POD_RANGE"
# The egress guard: pods may talk to pods; everything else a pod sends that would be
# forwarded (i.e. is not for this machine's own addresses) is dropped.
iptables -w -N "$EGRESS_CHAIN" 2>/dev/null || iptables -w -F "$EGRESS_CHAIN"
iptables -w -A "$EGRESS_CHAIN" -s "$POD_CIDR" -d "$POD_CIDR" -j RETURN
iptables -w -A "$EGRESS_CHAIN" -s "$POD_CIDR" -j DROP
iptables -w -A "$EGRESS_CHAIN" -i "$BRIDGE" -j DROP
iptables -w -I FORWARD 1 -j "$EGRESS_CHAIN"
echo "$EGRESS_CHAIN" >"$STATE/egress-chain"

# ---------------------------------------------------------------- certificates, tokens
ec_key() { openssl ecparam -name prime256v1 -genkey -noout -out "$1" 2>/dev/null; }
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -sha256 -days 30 \
  -keyout "$PKI/ca.key" -out "$PKI/ca.crt" -subj "/CN=bridge-e2e-ca" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
sign() { # NAME SUBJ EXT
  ec_key "$PKI/$1.key"
  openssl req -new -key "$PKI/$1.key" -out "$PKI/$1.csr" -subj "$2" 2>/dev/null
  printf '%b' "$3" >"$PKI/$1.ext"
  openssl x509 -req -in "$PKI/$1.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 30 -sha256 -extfile "$PKI/$1.ext" -out "$PKI/$1.crt" 2>/dev/null
}
sign apiserver "/CN=kube-apiserver" "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:$NODE_IP,IP:127.0.0.1,IP:$SERVICE_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\n"
sign apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n"
sign kubelet "/CN=$NODE_NAME" "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:$NODE_IP,DNS:$NODE_NAME\n"
ec_key "$PKI/sa.key"
openssl ec -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
ADMIN_TOKEN=$(openssl rand -hex 24)
printf '%s' "$ADMIN_TOKEN" >"$PKI/admin.token"
echo "$ADMIN_TOKEN,bridge-e2e-admin,uid-bridge-e2e-admin,\"system:masters\"" >"$PKI/tokens.csv"
chmod 600 "$PKI"/*.key "$PKI/tokens.csv" "$PKI/admin.token"

# ---------------------------------------------------------------- ports
ports=$(free_ports 9)
p() { sed -n "$1p" <<<"$ports"; }
ETCD_PORT=$(p 1) ETCD_PEER_PORT=$(p 2) API_PORT=$(p 3) KUBELET_PORT=$(p 4) KUBELET_HEALTHZ=$(p 5)
KCM_PORT=$(p 6) SCHED_PORT=$(p 7) PROXY_METRICS=$(p 8) PROXY_HEALTHZ=$(p 9)
cat >"$STATE/ports" <<EOF
ETCD_PORT=$ETCD_PORT
API_PORT=$API_PORT
KUBELET_PORT=$KUBELET_PORT
EOF
SERVER=https://$NODE_IP:$API_PORT
cat >"$STATE/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: bridge-e2e
  cluster:
    server: $SERVER
    certificate-authority-data: $(base64 -w0 <"$PKI/ca.crt")
users:
- name: admin
  user:
    token: $ADMIN_TOKEN
contexts:
- name: admin@bridge-e2e
  context: {cluster: bridge-e2e, user: admin, namespace: default}
current-context: admin@bridge-e2e
KC
chmod 600 "$STATE/kubeconfig"
export KUBECONFIG=$STATE/kubeconfig
KUBECTL=$STATE/bin/kubectl

fail_start() { # WHAT LOGS...
  local what=$1; shift
  tail_logs 40 "$@"
  die "$what did not become ready; logs in $STATE (hack/cluster-down.sh undoes everything)"
}

# ---------------------------------------------------------------- etcd + apiserver
etcd_args=(--name bridge-e2e --data-dir "$STATE/etcd-data"
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT"
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT"
  --initial-cluster "bridge-e2e=http://127.0.0.1:$ETCD_PEER_PORT" --initial-cluster-state new
  --heartbeat-interval 20 --election-timeout 200 --logger zap --log-level warn)
if etcd --help 2>&1 | grep -q -- --unsafe-no-fsync; then etcd_args+=(--unsafe-no-fsync); fi
start_daemon "$STATE/etcd.pid" "$STATE/etcd.log" etcd "${etcd_args[@]}"
wait_for_http -p "$STATE/etcd.pid" 30 "http://127.0.0.1:$ETCD_PORT/health" || fail_start etcd "$STATE/etcd.log"

start_daemon "$STATE/kube-apiserver.pid" "$STATE/kube-apiserver.log" "$KBIN/kube-apiserver" \
  --bind-address="$NODE_IP" --advertise-address="$NODE_IP" --secure-port="$API_PORT" \
  --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
  --cert-dir="$PKI" --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
  --client-ca-file="$PKI/ca.crt" --token-auth-file="$PKI/tokens.csv" \
  --authorization-mode=Node,RBAC \
  --service-account-issuer=https://kubernetes.default.svc \
  --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
  --service-cluster-ip-range="$SERVICE_CIDR" \
  --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" \
  --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
  --kubelet-preferred-address-types=InternalIP,Hostname \
  --feature-gates=WatchList=false \
  --enable-priority-and-fairness=false --allow-privileged=false --profiling=false --v=1
EXPECT_BODY=ok wait_for_http -p "$STATE/kube-apiserver.pid" -p "$STATE/etcd.pid" "$TIMEOUT" "$SERVER/readyz" \
  --cacert "$PKI/ca.crt" -H "Authorization: Bearer $ADMIN_TOKEN" ||
  fail_start kube-apiserver "$STATE/kube-apiserver.log" "$STATE/etcd.log"
t_api=$(now_ms)

# ---------------------------------------------------------------- controllers, scheduler
start_daemon "$STATE/kube-controller-manager.pid" "$STATE/kube-controller-manager.log" "$KBIN/kube-controller-manager" \
  --kubeconfig="$STATE/kubeconfig" --authentication-kubeconfig="$STATE/kubeconfig" --authorization-kubeconfig="$STATE/kubeconfig" \
  --bind-address=127.0.0.1 --secure-port="$KCM_PORT" --leader-elect=false \
  --root-ca-file="$PKI/ca.crt" --service-account-private-key-file="$PKI/sa.key" \
  --use-service-account-credentials=false --service-cluster-ip-range="$SERVICE_CIDR" \
  --controllers='*,-node-ipam-controller,-cloud-node-lifecycle-controller,-service-lb-controller,-node-route-controller' \
  --profiling=false --v=1
start_daemon "$STATE/kube-scheduler.pid" "$STATE/kube-scheduler.log" "$KBIN/kube-scheduler" \
  --kubeconfig="$STATE/kubeconfig" --authentication-kubeconfig="$STATE/kubeconfig" --authorization-kubeconfig="$STATE/kubeconfig" \
  --bind-address=127.0.0.1 --secure-port="$SCHED_PORT" --leader-elect=false --profiling=false --v=1

# ---------------------------------------------------------------- containerd
CD=$STATE/containerd
[ -e /run/containerd ] || echo /run/containerd >>"$STATE/paths-created"
cat >"$CD/config.toml" <<EOF
version = 2
root = "$CD/root"
state = "$CD/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "$CD/containerd.sock"
[ttrpc]
  address = "$CD/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$CD/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "bridge-e2e.local/pause:3.10"
  # This machine withholds CAP_SYS_RESOURCE: without this every sandbox fails with
  # "can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    discard_unpacked_layers = false
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$CD/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$STATE/cni/net.d"
    max_conf_num = 1
EOF
cat >"$STATE/cni/net.d/10-bridge-e2e.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "bridge-e2e",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$STATE/cni/ipam",
        "ranges": [[{"subnet": "$POD_CIDR"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "loopback"}
  ]
}
EOF
# containerd can never pull (every image is imported): its proxy is a closed port on
# loopback, so a pull fails at once, without even a DNS query leaving the machine.
start_daemon "$STATE/containerd.pid" "$STATE/containerd.log" \
  env HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 NO_PROXY= \
  containerd --config "$CD/config.toml"
CTR=(ctr --address "$CD/containerd.sock" -n k8s.io)
deadline=$(( $(now_ms) + TIMEOUT * 1000 ))
until "${CTR[@]}" version >/dev/null 2>&1; do
  pidfile_alive "$STATE/containerd.pid" || fail_start containerd "$STATE/containerd.log"
  [ "$(now_ms)" -lt "$deadline" ] || fail_start containerd "$STATE/containerd.log"
  sleep 0.1
done
for t in "$IMGS/pause.tar"; do # argoexec: by hack/argo-up.sh
  "${CTR[@]}" images import "$t" >/dev/null || die "ctr could not import $t"
done
t_cd=$(now_ms)

# ---------------------------------------------------------------- kubelet
cat >"$STATE/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ
tlsCertFile: $PKI/kubelet.crt
tlsPrivateKeyFile: $PKI/kubelet.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$CD/containerd.sock
failSwapOn: false
# Imported images can never be pulled again: never collect or evict them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
# No DNS server in pods: nothing in them may ask the machine's resolver.
resolvConf: ""
podLogsDir: $STATE/pod-logs
serializeImagePulls: false
# Fewer than Kubernetes' 110 on two CPUs: the suite's one test that fills
# the node (the agent's, e2e/agent_test.go) runs alone instead. A run here
# at 110 did not help the tests beside it and took that one 27 min, not 12.
maxPods: 40
syncFrequency: 10s
fileCheckFrequency: 1h
rotateCertificates: false
serverTLSBootstrap: false
EOF
[ -e /var/log/containers ] || echo /var/log/containers >>"$STATE/paths-created"
start_daemon "$STATE/kubelet.pid" "$STATE/kubelet.log" "$KBIN/kubelet" \
  --config="$STATE/kubelet/config.yaml" --kubeconfig="$STATE/kubeconfig" \
  --root-dir="$STATE/kubelet" --cert-dir="$PKI" \
  --hostname-override="$NODE_NAME" --node-ip="$NODE_IP" --v=1

# ---------------------------------------------------------------- kube-proxy
cat >"$STATE/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: $STATE/kubeconfig}
hostnameOverride: $NODE_NAME
bindAddress: $NODE_IP
clusterCIDR: $POD_CIDR
healthzBindAddress: 127.0.0.1:$PROXY_HEALTHZ
metricsBindAddress: 127.0.0.1:$PROXY_METRICS
nodePortAddresses: ["$NODE_IP/32"]
# 0: leave the host's conntrack sysctls alone.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
echo "$KBIN/kube-proxy" >"$STATE/kube-proxy-bin"
start_daemon "$STATE/kube-proxy.pid" "$STATE/kube-proxy.log" "$KBIN/kube-proxy" --config="$STATE/kube-proxy.yaml" --v=1

# ---------------------------------------------------------------- node ready
deadline=$(( $(now_ms) + TIMEOUT * 1000 ))
until [ "$("$KUBECTL" get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; do
  for d in kubelet containerd kube-proxy kube-controller-manager kube-scheduler; do
    pidfile_alive "$STATE/$d.pid" || fail_start "$d" "$STATE/$d.log"
  done
  [ "$(now_ms)" -lt "$deadline" ] || fail_start "the node" "$STATE/kubelet.log" "$STATE/containerd.log"
  sleep 0.2
done
# kube-proxy prepends its own FORWARD rules (once, at its first sync): wait for them,
# then put the egress guard first again.
for _ in $(seq 100); do iptables -w -S FORWARD 2>/dev/null | grep -q -- '-j KUBE-EXTERNAL-SERVICES' && break; sleep 0.1; done
iptables -w -D FORWARD -j "$EGRESS_CHAIN" 2>/dev/null || true
iptables -w -I FORWARD 1 -j "$EGRESS_CHAIN"
t_node=$(now_ms)

# ---------------------------------------------------------------- Argo
ARGO_UP_LOCKED=1 ARGO_VERSION=$ARGO_VERSION BRIDGE_CLUSTER_DIR=$STATE bash "$HACK/argo-up.sh" ||
  fail_start workflow-controller "$STATE/workflow-controller.log"
t_argo=$(now_ms)

cat >"$STATE/env" <<EOF
# Written by hack/cluster-up.sh; source it to use the e2e cluster.
export KUBECONFIG=$STATE/kubeconfig
export BRIDGE_E2E_KUBECONFIG=$STATE/kubeconfig
export BRIDGE_E2E_NODE_IP=$NODE_IP
export BRIDGE_E2E_CLUSTER_DIR=$STATE
export BRIDGE_E2E_CONTAINERD_SOCK=$CD/containerd.sock
export PATH=$STATE/bin:\$PATH
EOF
d() { printf '%d.%d' $(( ($2 - $1) / 1000 )) $(( ($2 - $1) % 1000 / 100 )); }
log "cluster up at $SERVER: $(elapsed_s "$t0")s total, $(elapsed_s "$t_bin")s from binaries" \
  "(apiserver $(d "$t_bin" "$t_api")s, containerd+images $(d "$t_api" "$t_cd")s," \
  "node Ready $(d "$t_cd" "$t_node")s, argo $(d "$t_node" "$t_argo")s)"
echo "$STATE/env"
