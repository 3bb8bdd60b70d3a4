#!/usr/bin/env bash
# Starts a real single-node Ray cluster (head only, dashboard + Jobs REST API)
# on 127.0.0.1 for the ray backend's integration tests, and writes an env file
# that the tests (and people) can source.
#
#   bash hack/ray-up.sh && source "${BRIDGE_RAY_DIR:-/tmp/bridge-runner-ray}/env"
#   go test ./backends/ray/ -count=1 -v
#   bash hack/ray-down.sh          # stops exactly what this started
#
# Ray comes from PyPI ("ray[default]", pinned) into a virtual environment kept
# in $BRIDGE_CACHE/ray-venv/<version>, so that only the first run pays for the
# install. Every Ray port is picked free on 127.0.0.1 and every Ray process is
# bound to 127.0.0.1 (--node-ip-address; only the dashboard may listen on
# BRIDGE_RAY_LISTEN instead); usage statistics are off (flag and
# RAY_USAGE_STATS_ENABLED=0), so nothing leaves the machine.
#
# hack/ray-down.sh finds every process of this cluster (and the jobs' drivers)
# by the log files they keep open under the state dir, so it touches no other
# Ray on the machine, which `ray stop` would.
#
# Idempotent: if the cluster of this state dir is up and answers, it only prints
# the env file path. A half-started or stale state dir is stopped and cleared.
#
# Environment:
#   BRIDGE_RAY_DIR       state dir (Ray's temp dir, logs, env); default
#                        /tmp/bridge-runner-ray. Keep it short: Ray puts unix
#                        sockets under it (path limit 107 bytes).
#   BRIDGE_CACHE         venv cache (default ~/.cache/bridge-runner)
#   BRIDGE_RAY_VERSION   Ray version to install (default 2.60.0)
#   BRIDGE_RAY_AUTH      "token" starts Ray in token-auth mode (Ray >= 2.52) with
#                        a random token; default: no auth
#   BRIDGE_RAY_TIMEOUT   seconds to wait for the Jobs API (default 120)
#   BRIDGE_RAY_LISTEN    the address of this machine for the dashboard (Jobs
#                        API) to listen on instead of 127.0.0.1, e.g. the node's
#                        own address so that pods of the e2e cluster reach it;
#                        use it with BRIDGE_RAY_AUTH=token. The other Ray
#                        servers stay on 127.0.0.1 (default 127.0.0.1)
#   RAY_WRAP             a command prefix for `ray start`, to audit it, e.g.
#                        RAY_WRAP="strace -f -e trace=connect -o /tmp/ray.strace"
#
# The env file exports:
#   BRIDGE_TEST_RAY_URL        http://<BRIDGE_RAY_LISTEN>:<dashboard port>
#   BRIDGE_TEST_RAY_CREDS_DIR  a directory laid out like a mounted Secret; holds
#                              the file `token` in token mode, else is empty
#   BRIDGE_RAY_DIR, BRIDGE_RAY_VENV
set -euo pipefail

HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/lib.sh
source "$HACK/lib.sh"
# shellcheck source=hack/ray-lib.sh
source "$HACK/ray-lib.sh"

STATE=${BRIDGE_RAY_DIR:-/tmp/bridge-runner-ray}
STATE=${STATE%/}
VERSION=${BRIDGE_RAY_VERSION:-2.60.0}
CACHE=${BRIDGE_CACHE:-$HOME/.cache/bridge-runner}
VENV=$CACHE/ray-venv/$VERSION
TIMEOUT=${BRIDGE_RAY_TIMEOUT:-120}
AUTH=${BRIDGE_RAY_AUTH:-}
LISTEN=${BRIDGE_RAY_LISTEN:-127.0.0.1}
t0=$(now_ms)

case "$STATE" in /*) ;; *) die "BRIDGE_RAY_DIR must be an absolute path" ;; esac
[ "${#STATE}" -le 40 ] || log "warning: $STATE is long; Ray's unix socket paths under it may exceed 107 bytes"

if [ "$LISTEN" != 127.0.0.1 ]; then
  ip -o addr show 2>/dev/null | awk '{split($4, a, "/"); print a[1]}' | grep -qxF "$LISTEN" ||
    die "BRIDGE_RAY_LISTEN=$LISTEN is not an address of this machine"
fi

mkdir -p "$(dirname "$STATE")"
with_lock "$STATE.lock"

# Nothing of Ray may leave the machine. Usage statistics off is not enough:
# with them off, Ray 2.60's dashboard still probes the cloud metadata
# endpoints (169.254.169.254, metadata.google.internal) to name the cloud in
# a "usage disabled" report, and posts that report to usage-stats.ray.io.
# So, for the Ray processes only (pip needs the real network), the report URL
# points at a closed port on 127.0.0.1, and every HTTP(S) client (Python
# requests/aiohttp, gRPC) is sent to a proxy on a closed port of 127.0.0.1
# for anything but loopback: such a request fails at once, locally, without
# even a DNS lookup.
NOPROXY=127.0.0.1,localhost,::1
[ "$LISTEN" = 127.0.0.1 ] || NOPROXY=$NOPROXY,$LISTEN
RAY_ENV=(
  RAY_USAGE_STATS_ENABLED=0 RAY_USAGE_STATS_PROMPT_ENABLED=0
  RAY_USAGE_STATS_REPORT_URL=http://127.0.0.1:9/
  http_proxy=http://127.0.0.1:9 https_proxy=http://127.0.0.1:9
  HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9
  "no_proxy=$NOPROXY" "NO_PROXY=$NOPROXY"
)

# is_up : the cluster recorded in $STATE answers its Jobs API on $LISTEN.
is_up() {
  [ -f "$STATE/env" ] && [ -f "$STATE/port" ] || return 1
  [ "$(cat "$STATE/listen" 2>/dev/null || echo 127.0.0.1)" = "$LISTEN" ] || return 1
  local -a hdr=()
  [ -s "$STATE/creds/token" ] && hdr=(-H "Authorization: Bearer $(cat "$STATE/creds/token")")
  wait_for_http 3 "http://$LISTEN:$(cat "$STATE/port")/api/version" "${hdr[@]}" 2>/dev/null
}

if is_up; then
  log "Ray already up at http://$LISTEN:$(cat "$STATE/port") (state $STATE)"
  echo "$STATE/env"
  exit 0
fi

if [ -e "$STATE" ]; then
  log "stale state in $STATE: stopping what is left and cleaning up"
  BRIDGE_RAY_DIR=$STATE BRIDGE_RAY_NOLOCK=1 bash "$HACK/ray-down.sh"
fi

# ---------------------------------------------------------------- venv
need_cmd curl || die "could not install curl"
need_cmd python3 || die "could not install python3"
if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
  pyver=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  log "python3 has no venv/ensurepip: installing python3-venv"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q "python$pyver-venv" >&2 || apt-get install -y -q python3-venv >&2 \
    || { apt-get update -q >&2 && apt-get install -y -q python3-venv >&2; } \
    || die "could not install python3-venv"
fi

install_ray() {
  mkdir -p "$(dirname "$VENV")"
  # A second lock (fd 8), per version, so that two state dirs starting at once
  # install only once; the second waits and then finds the venv.
  exec 8>"$VENV.lock"
  flock -w 1200 8 || die "could not lock $VENV.lock (another install still running?)"
  if [ -f "$VENV/.complete" ]; then exec 8>&-; return 0; fi
  rm -rf "$VENV"
  local ti; ti=$(now_ms)
  log "installing ray[default]==$VERSION into $VENV (first run only)..."
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --no-input "ray[default]==$VERSION" >&2 \
    || die "pip install ray[default]==$VERSION failed"
  touch "$VENV/.complete"
  exec 8>&-
  log "installed Ray $VERSION in $(elapsed_s "$ti")s ($(du -sm "$VENV" | cut -f1) MiB)"
}
[ -f "$VENV/.complete" ] || install_ray
t_venv=$(now_ms)

# ---------------------------------------------------------------- start
mkdir -p "$STATE/tmp" "$STATE/creds"
chmod 700 "$STATE" "$STATE/creds"
unset RAY_AUTH_MODE RAY_AUTH_TOKEN RAY_ADDRESS
if [ "$AUTH" = token ]; then
  od -An -N24 -tx1 /dev/urandom | tr -d ' \n' >"$STATE/creds/token"
  printf '\n' >>"$STATE/creds/token" # as `echo` would write it: the reader trims
  chmod 600 "$STATE/creds/token"
  export RAY_AUTH_MODE=token
  RAY_AUTH_TOKEN=$(tr -d '\n' <"$STATE/creds/token")
  export RAY_AUTH_TOKEN
elif [ -n "$AUTH" ]; then
  die "BRIDGE_RAY_AUTH must be empty or 'token', not '$AUTH'"
fi

# Ray's workers take ports MIN_WORKER_PORT..MAX_WORKER_PORT (Ray's defaults,
# passed explicitly below), and `ray start` refuses a component port inside
# that range; the kernel may pick free ports anywhere in 1024-65535, so the
# ones inside it are dropped (otherwise most starts fail on the first try).
MIN_WORKER_PORT=10002 MAX_WORKER_PORT=19999

start_ray() {
  local -a p
  mapfile -t p < <(free_ports 30 | awk -v lo="$MIN_WORKER_PORT" -v hi="$MAX_WORKER_PORT" \
    '$1 < lo || $1 > hi' | head -n 9)
  [ "${#p[@]}" = 9 ] || return 1
  echo "${p[0]}" >"$STATE/port"
  echo "$LISTEN" >"$STATE/listen"
  # The job drivers run `python` (see backends/ray): the venv's, first on PATH.
  # RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0: Ray otherwise "resolves" the
  # --node-ip-address 127.0.0.1 to the host's outward address (it asks the
  # kernel for the route to 8.8.8.8) and has its processes talk to each other
  # and listen there; with it, the node address stays 127.0.0.1 and the GCS
  # and raylet gRPC servers listen on 127.0.0.1 only. It also makes this a
  # cluster no other node can join, which is what a test cluster wants.
  # 9>&- 8>&- : the daemons must not inherit the locks.
  # nice -n -10: `ray start` gives its raylet 30 s (fixed in Ray's node.py)
  # to register with the GCS; on a loaded 2-core machine (CI's, load 30-46
  # while the e2e cluster comes up beside it) that failed three attempts in
  # a row. The daemons start at a higher priority and get the default back
  # once Ray answers (below). Without the right to raise it, nice says so
  # and starts them as they were.
  # shellcheck disable=SC2086 # RAY_WRAP is a command prefix: split it into words.
  nice -n -10 env -u ALL_PROXY -u all_proxy -u RAY_ADDRESS "${RAY_ENV[@]}" PATH="$VENV/bin:$PATH" RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 \
    ${RAY_WRAP:-} \
    "$VENV/bin/ray" start --head \
    --node-ip-address=127.0.0.1 \
    --num-cpus=1 --num-gpus=0 \
    --temp-dir="$STATE/tmp" \
    --disable-usage-stats \
    --include-dashboard=true \
    --dashboard-host="$LISTEN" \
    --dashboard-port="${p[0]}" \
    --port="${p[1]}" \
    --node-manager-port="${p[2]}" \
    --object-manager-port="${p[3]}" \
    --ray-client-server-port="${p[4]}" \
    --dashboard-agent-listen-port="${p[5]}" \
    --dashboard-agent-grpc-port="${p[6]}" \
    --metrics-export-port="${p[7]}" \
    --runtime-env-agent-port="${p[8]}" \
    --min-worker-port="$MIN_WORKER_PORT" --max-worker-port="$MAX_WORKER_PORT" \
    >>"$STATE/ray-start.log" 2>&1 </dev/null 9>&- 8>&- || return 1
  local -a hdr=()
  [ "$AUTH" = token ] && hdr=(-H "Authorization: Bearer $RAY_AUTH_TOKEN")
  wait_for_http "$TIMEOUT" "http://$LISTEN:${p[0]}/api/version" "${hdr[@]}" || return 1
  local pid
  for pid in $(marked_pids); do
    renice -n 0 -p "$pid" >/dev/null 2>&1 || true
  done
}

# Belt and braces for the proxy settings above: while this cluster runs, the
# cloud metadata address is unreachable, so a probe dies locally whatever
# library makes it. An existing route is left alone and not owned.
METADATA_NET=169.254.169.254/32
if ! ip route show table main to exact "$METADATA_NET" 2>/dev/null | grep -q .; then
  if ip route add unreachable "$METADATA_NET" 2>/dev/null; then
    echo "$METADATA_NET" >"$STATE/route-added"
  else
    log "warning: could not add 'unreachable $METADATA_NET' (no CAP_NET_ADMIN?); relying on the proxy settings"
  fi
fi

ok=
for attempt in 1 2 3; do
  rc=0
  start_ray || rc=$?
  if [ "$rc" = 0 ]; then ok=1; break; fi
  tail_logs 40 "$STATE/ray-start.log"
  if [ "$attempt" -lt 3 ]; then
    log "Ray did not start (attempt $attempt, rc=$rc): stopping what started and retrying with new ports"
    BRIDGE_RAY_DIR=$STATE BRIDGE_RAY_NOLOCK=1 BRIDGE_RAY_KEEP=1 bash "$HACK/ray-down.sh"
    mv "$STATE/ray-start.log" "$STATE/ray-start.log.$attempt"
    continue
  fi
  die "Ray did not come up (rc=$rc); logs in $STATE/ray-start.log and $STATE/tmp/session_latest/logs (hack/ray-down.sh cleans up)"
done
[ -n "$ok" ]
PORT=$(cat "$STATE/port")

cat >"$STATE/env" <<ENV
# Written by hack/ray-up.sh; source it before running the tests.
export BRIDGE_TEST_RAY_URL=http://$LISTEN:$PORT
export BRIDGE_TEST_RAY_CREDS_DIR=$STATE/creds
export BRIDGE_RAY_DIR=$STATE
export BRIDGE_RAY_VENV=$VENV
ENV
chmod 600 "$STATE/env"

log "Ray $VERSION ready at http://$LISTEN:$PORT${AUTH:+ (token auth)}: $(elapsed_s "$t0")s total," \
  "$(elapsed_s "$t_venv")s to start from an installed venv"
log "to use it: source $STATE/env"
echo "$STATE/env"
