#!/usr/bin/env bash
# Stops the e2e cluster that hack/cluster-up.sh started and undoes every change it
# made to the host: pods and their sandboxes (through the kubelet, so that the CNI
# plugin removes veths, addresses and netns), every process it started (by PID file,
# checked by start time; containerd shims by the state dir's own socket path), the
# iptables chains of kube-proxy, kubelet and the egress guard, the bridge, leftover
# network namespaces, mounts under the state dir, the kubepods cgroups, the routes it
# added, the sysctls kubelet and the bridge plugin changed, and the paths it created.
# Then it compares the host with the snapshot cluster-up.sh took and reports (and
# fails on) anything that still differs.
#
# Idempotent; a missing or half-started state dir is fine.
# Environment: BRIDGE_CLUSTER_DIR (default /tmp/bridge-runner-cluster);
#              BRIDGE_CLUSTER_KEEP_STATE=1 keeps the state dir (logs) afterwards.
set -uo pipefail
HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/lib.sh
source "$HACK/lib.sh"

STATE=${BRIDGE_CLUSTER_DIR:-/tmp/bridge-runner-cluster}
STATE=${STATE%/}
BRIDGE=bre2e0
t0=$(now_ms)

[ -d "$(dirname "$STATE")" ] || { log "nothing to stop: $STATE does not exist"; exit 0; }
with_lock "$STATE.lock"
[ -e "$STATE" ] || { log "nothing to stop: $STATE does not exist"; exit 0; }

CD=$STATE/containerd
KUBECTL=$STATE/bin/kubectl
export KUBECONFIG=$STATE/kubeconfig
CTR=(ctr --address "$CD/containerd.sock" -n k8s.io)
api_alive() { pidfile_alive "$STATE/kube-apiserver.pid" && [ -x "$KUBECTL" ]; }

# 1. Nothing may create pods any more.
stop_pidfile "$STATE/workflow-controller.pid" 10
stop_pidfile "$STATE/kube-controller-manager.pid" 10
stop_pidfile "$STATE/kube-scheduler.pid" 10

# 2. Pods away through the kubelet: it stops the containers and tears the sandboxes
#    down, with the CNI DEL that removes veth, address and netns.
if api_alive && pidfile_alive "$STATE/kubelet.pid"; then
  timeout 20 "$KUBECTL" delete pods --all --all-namespaces --grace-period=1 --wait=false >/dev/null 2>&1 || true
  # Gone from the API means the kubelet has stopped them and torn down their sandboxes.
  for _ in $(seq 100); do
    n=$(timeout 5 "$KUBECTL" get pods --all-namespaces --no-headers 2>/dev/null | wc -l)
    [ "$n" = 0 ] && break
    sleep 0.2
  done
  [ "${n:-0}" = 0 ] || log "$n pods still there after 20s: removing their containers with ctr"
fi
stop_pidfile "$STATE/kubelet.pid" 15
stop_pidfile "$STATE/kube-proxy.pid" 10

# 3. Whatever the kubelet did not remove: kill the tasks and remove the containers.
if pidfile_alive "$STATE/containerd.pid"; then
  for c in $("${CTR[@]}" tasks ls -q 2>/dev/null); do
    "${CTR[@]}" tasks kill -s SIGKILL "$c" >/dev/null 2>&1 || true
  done
  sleep 0.5
  for c in $("${CTR[@]}" tasks ls -q 2>/dev/null); do
    "${CTR[@]}" tasks delete -f "$c" >/dev/null 2>&1 || true
  done
  for c in $("${CTR[@]}" containers ls -q 2>/dev/null); do
    "${CTR[@]}" containers delete "$c" >/dev/null 2>&1 || true
  done
fi
stop_pidfile "$STATE/containerd.pid" 15
# containerd's shims outlive it; ours are the ones started with our socket.
for pid in $(grep -lsF -- "$CD/containerd.sock" /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3); do
  [ "$pid" != $$ ] || continue
  log "killing leftover containerd shim $pid"
  kill -KILL "$pid" 2>/dev/null || true
done

# 4. The control plane.
stop_pidfile "$STATE/kube-apiserver.pid" 15
stop_pidfile "$STATE/etcd.pid" 10

# 5. iptables: kube-proxy's own cleanup, then every KUBE-* chain (kubelet's canaries),
#    then the egress guard.
KPROXY=$(cat "$STATE/kube-proxy-bin" 2>/dev/null)
if [ -n "$KPROXY" ] && [ -x "$KPROXY" ] && [ -f "$STATE/kube-proxy.yaml" ]; then
  "$KPROXY" --cleanup --config="$STATE/kube-proxy.yaml" >>"$STATE/kube-proxy-cleanup.log" 2>&1 || true
fi
for ipt in iptables ip6tables; do
  command -v "$ipt" >/dev/null || continue
  chain=$(cat "$STATE/egress-chain" 2>/dev/null)
  if [ -n "$chain" ]; then
    while $ipt -w -D FORWARD -j "$chain" 2>/dev/null; do :; done
    $ipt -w -F "$chain" 2>/dev/null && $ipt -w -X "$chain" 2>/dev/null
  fi
  # The e2e outage test's chain, should a test have died before removing it.
  while $ipt -w -D INPUT -j BRIDGE-E2E-BLOCK 2>/dev/null; do :; done
  $ipt -w -F BRIDGE-E2E-BLOCK 2>/dev/null && $ipt -w -X BRIDGE-E2E-BLOCK 2>/dev/null
  for table in filter nat mangle; do
    rules=$($ipt -w -t "$table" -S 2>/dev/null) || continue
    # Rules in built-in chains that jump to KUBE-* chains, then the chains.
    grep -E '^-A (INPUT|OUTPUT|FORWARD|PREROUTING|POSTROUTING) .*-j KUBE-' <<<"$rules" | sed 's/^-A /-D /' |
      while read -r r; do eval "$ipt -w -t $table $r" 2>/dev/null || true; done
    for c in $(grep -oE '^-N KUBE-[A-Za-z0-9-]+' <<<"$rules" | awk '{print $2}'); do
      $ipt -w -t "$table" -F "$c" 2>/dev/null || true
    done
    for c in $(grep -oE '^-N KUBE-[A-Za-z0-9-]+' <<<"$rules" | awk '{print $2}'); do
      $ipt -w -t "$table" -X "$c" 2>/dev/null || true
    done
  done
done
# iptables-nft leaves the (now empty) tables it created; drop those that were not there.
if command -v nft >/dev/null && [ -f "$STATE/pre/nft-tables" ]; then
  nft list tables 2>/dev/null | while read -r _ fam name; do
    grep -qx "table $fam $name" "$STATE/pre/nft-tables" && continue
    # Only if it holds no rule (someone else may have put rules there meanwhile).
    nft list table "$fam" "$name" 2>/dev/null | grep -vE '^\s*(table|chain) .*\{$|^\s*\}$|^\s*type .* hook |^\s*$' | grep -q . && continue
    nft delete table "$fam" "$name" 2>/dev/null || true
  done
fi

# 6. Mounts under the state dir and in the paths we created, deepest first.
created=$(cat "$STATE/paths-created" 2>/dev/null)
mounts=$(findmnt -rn -o TARGET | sort -r)
while read -r m; do
  [ -n "$m" ] || continue
  case "$m" in
    "$STATE"/*) umount -l "$m" 2>/dev/null || true ;;
    /run/netns/cni-*|/var/run/netns/cni-*)
      grep -qx "${m##*/}" "$STATE/pre/netns" 2>/dev/null || umount -l "$m" 2>/dev/null || true ;;
    /run/containerd/*) grep -qx /run/containerd <<<"$created" && { umount -l "$m" 2>/dev/null || true; } ;;
  esac
done <<<"$mounts"
for nsf in /var/run/netns/cni-*; do
  [ -e "$nsf" ] || continue
  ns=${nsf##*/}
  case "$ns" in cni-*) grep -qx "$ns" "$STATE/pre/netns" 2>/dev/null || ip netns delete "$ns" 2>/dev/null || rm -f "/var/run/netns/$ns" ;; esac
done

# 7. Links: the bridge, and any veth of ours left behind.
ip link show "$BRIDGE" >/dev/null 2>&1 && ip link delete "$BRIDGE" 2>/dev/null
if [ -f "$STATE/pre/links" ]; then
  ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | while read -r l; do
    case "$l" in veth*) grep -qx "$l" "$STATE/pre/links" || ip link delete "$l" 2>/dev/null || true ;; esac
  done
fi

# 8. Routes we added.
while read -r r; do
  [ -n "$r" ] && ip route del unreachable "$r" 2>/dev/null
done < <(cat "$STATE/routes-added" 2>/dev/null)

# 9. Sysctls back to what they were.
while IFS='=' read -r k v; do
  [ -n "$k" ] || continue
  cur=$(sysctl -n "$k" 2>/dev/null) || continue
  [ "$cur" = "$v" ] || sysctl -q -w "$k=$v" >/dev/null 2>&1 || log "could not restore $k=$v (now $cur)"
done < <(cat "$STATE/pre/sysctl" 2>/dev/null)

# 10. cgroups kubelet and containerd made (empty once every process is gone).
for d in /sys/fs/cgroup/*/kubepods; do
  [ -d "$d" ] || continue
  grep -qx "$d" "$STATE/pre/cgroups" 2>/dev/null && continue
  find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
done

# 11. Paths we created.
while read -r pth; do
  case "$pth" in
    /var/log/containers) find /var/log/containers -maxdepth 1 -type l -lname "$STATE/*" -delete 2>/dev/null
                         rmdir /var/log/containers 2>/dev/null ;;
    /run/containerd) rm -rf /run/containerd ;;
    /var/run/netns|/run/netns) rmdir "$pth" 2>/dev/null ;;
    /var/lib/cni) rm -rf /var/lib/cni ;;
  esac
done <<<"$created"
# kubelet makes /var/lib/kubelet (device-plugins, pod-resources) despite --root-dir.
if [ -d /var/lib/kubelet ] && [ -f "$STATE/pre/paths" ] && ! grep -qx /var/lib/kubelet "$STATE/pre/paths"; then
  rm -rf /var/lib/kubelet
fi
# containerd's CRI keeps CNI results in /var/lib/cni, kubelet writes /var/log/containers:
# both may appear without cluster-up having seen them; remove them if they were not there.
for pth in /var/lib/cni /var/run/netns /var/log/containers /run/containerd; do
  [ -e "$pth" ] || continue
  grep -qx "$pth" "$STATE/pre/paths" 2>/dev/null && continue
  case "$pth" in
    /var/lib/cni|/run/containerd) rm -rf "$pth" ;;
    /var/log/containers) find "$pth" -maxdepth 1 -type l -lname "$STATE/*" -delete 2>/dev/null; rmdir "$pth" 2>/dev/null ;;
    /var/run/netns) rmdir "$pth" 2>/dev/null ;;
  esac
done

# 12. Check: the host as it was. Other people's services on a shared machine may
#     change routes or mounts meanwhile: a difference fails only if it is ours
#     (matches OURS), and is otherwise just reported.
diffs=0
OURS="10\\.98\\.0\\.|10\\.244\\.|$BRIDGE|veth|KUBE-|BRIDGE-E2E|cni|$STATE|/run/containerd|/run/netns|kubepods|/var/log/containers|/var/lib/cni|/var/lib/kubelet"
check() { # WHAT PRE-FILE CURRENT
  local d ours
  [ -f "$2" ] || return 0
  d=$(diff <(cat "$2") <(printf '%s\n' "$3" | sed '/^$/d') 2>/dev/null | grep -E '^[<>]') || true
  [ -n "$d" ] || return 0
  ours=$(grep -E "$OURS" <<<"$d") || true
  if [ -n "$ours" ] || [ "$1" = sysctls ]; then
    log "host differs from before cluster-up ($1):"
    printf '%s\n' "$d" >&2
    diffs=$((diffs + 1))
  else
    log "note: $1 changed meanwhile, not by this cluster: $(tr '\n' ' ' <<<"$d")"
  fi
}
if [ -d "$STATE/pre" ]; then
  check routes "$STATE/pre/routes" "$(ip route show table main)"
  check links "$STATE/pre/links" "$(ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort)"
  check iptables "$STATE/pre/iptables" "$(iptables-save 2>/dev/null | grep -vE '^#|^:' | sed 's/\[[0-9:]*\]//')"
  check ip6tables "$STATE/pre/ip6tables" "$(ip6tables-save 2>/dev/null | grep -vE '^#|^:' | sed 's/\[[0-9:]*\]//')"
  check mounts "$STATE/pre/mounts" "$(findmnt -rn -o TARGET | sort)"
  check netns "$STATE/pre/netns" "$(ls /var/run/netns 2>/dev/null | sort)"
  check paths "$STATE/pre/paths" "$(for d in /var/run/netns /var/lib/cni /var/log/containers /run/containerd /opt/containerd /etc/cni /var/lib/kubelet; do [ -e "$d" ] && echo "$d"; done)"
  check cgroups "$STATE/pre/cgroups" "$(ls -d /sys/fs/cgroup/*/kubepods 2>/dev/null)"
  cur_sysctl=$(while IFS='=' read -r k _; do [ -n "$k" ] && printf '%s=%s\n' "$k" "$(sysctl -n "$k" 2>/dev/null)"; done <"$STATE/pre/sysctl")
  check sysctls "$STATE/pre/sysctl" "$cur_sysctl"
  if command -v nft >/dev/null && [ -f "$STATE/pre/nft-tables" ]; then
    check nft-tables "$STATE/pre/nft-tables" "$(nft list tables 2>/dev/null)"
  fi
fi

if [ "$diffs" -gt 0 ]; then
  log "cluster stopped in $(elapsed_s "$t0")s, but $diffs aspect(s) of the host differ; state kept in $STATE"
  exit 1
fi
if [ "${BRIDGE_CLUSTER_KEEP_STATE:-0}" = 1 ]; then
  log "cluster stopped in $(elapsed_s "$t0")s; host as before; state kept in $STATE"
else
  safe_rm_state_dir "$STATE"
  log "cluster stopped and host restored in $(elapsed_s "$t0")s"
fi
