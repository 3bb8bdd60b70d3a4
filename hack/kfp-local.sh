#!/usr/bin/env bash
# Runs the shipped KFP pipelines under KFP's own local runner (kfp.local's
# DockerRunner, the pinned SDK of hack/kfp-requirements.txt) with a real Docker
# daemon: every examples/*/kfp_pipeline.py, as the calling user, on the host's
# network with credentials bound read-only, against the suite's services (the
# env files hack/services.sh writes: Slurm 22.05 and 24.11, HTCondor, Ray, S3)
# and the LSF and Quantum fakes (hack/fakes), all on loopback; and from a
# non-root user's 0700 folder (hack/kfp_local.py says what is checked). Prints
# "kfp-local: N passed, M failed, K skipped" and the time each part took; a
# pipeline whose service is missing is skipped, and fails under CI=true.
#
#   bash hack/kfp-local.sh          # part of make test (hack/test.sh)
#
# What it needs it brings: Debian's docker.io when dockerd is missing (apt, as
# root), a dockerd of its own when none answers at DOCKER_HOST (or
# /var/run/docker.sock), stopped again at the end, and the image built by
# hack/build-image.sh, loaded into that daemon under the tag the components pin.
# Its own dockerd makes no network: no bridge, no iptables rules, no registry
# (the image is loaded, never pulled); containers use the host's network
# (network_mode="host") and reach only the loopback services named above.
# Without root and without a daemon it skips, except under CI=true (fails).
#
# Environment: BRIDGE_CACHE, DOCKER_HOST, KEEP_WORK=1 (keep the pipeline roots).
set -euo pipefail
HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HACK")
# shellcheck source=hack/lib.sh
source "$HACK/lib.sh"
# shellcheck source=hack/kfp-venv.sh
source "$HACK/kfp-venv.sh"
t0=$(now_ms)
work=$(mktemp -d "${TMPDIR:-/tmp}/bridge-kfp-local.XXXXXX")
chmod 755 "$work" # the containers' users reach the pipeline roots beneath it
dockerd_pid=
cleanup() {
  if [ -n "$dockerd_pid" ]; then
    kill "$dockerd_pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$dockerd_pid" 2>/dev/null || break; sleep 0.1; done
    # What a killed dockerd may leave mounted beneath its directories.
    awk -v w="$work/" 'index($2, w) == 1 {print $2}' /proc/mounts | sort -r | xargs -r umount -l 2>/dev/null || true
  fi
  [ "${KEEP_WORK:-0}" = 1 ] || rm -rf "$work"
}
trap cleanup EXIT

skip() {
  [ "${CI:-}" = true ] && die "$*"
  log "kfp-local: skipped: $*"
  echo "kfp-local: 0 passed, 0 failed"
  exit 0
}

# ------------------------------------------------------------------ the daemon
export DOCKER_HOST=${DOCKER_HOST:-unix:///var/run/docker.sock}
docker_answers() { python3 - "$DOCKER_HOST" <<'PY'
import socket, sys
path = sys.argv[1].removeprefix("unix://")
s = socket.socket(socket.AF_UNIX)
s.settimeout(5)
try:
    s.connect(path)
    s.sendall(b"GET /_ping HTTP/1.0\r\n\r\n")
    sys.exit(0 if b" 200 " in s.recv(256) else 1)
except OSError:
    sys.exit(1)
PY
}
if [[ $DOCKER_HOST == unix://* ]] && docker_answers; then
  log "using the Docker daemon at $DOCKER_HOST"
else
  [ "$(id -u)" = 0 ] || skip "no Docker daemon at $DOCKER_HOST, and starting one needs root"
  if ! command -v dockerd >/dev/null; then
    ta=$(now_ms)
    log "installing Debian's docker.io"
    # Side by side with other scripts' apt-get: wait for their lock.
    if [ -z "${APT_CONFIG:-}" ]; then
      echo 'DPkg::Lock::Timeout "900";' >"$work/apt.conf"
      export APT_CONFIG=$work/apt.conf
    fi
    # Keep the maintainer scripts from starting a system dockerd (which would
    # make a bridge and iptables rules).
    policy_added=
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && policy_added=1
    fi
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -qq --no-install-recommends docker.io >/dev/null; then
      apt-get update -qq && apt-get install -y -qq --no-install-recommends docker.io >/dev/null
    fi
    [ -z "$policy_added" ] || rm -f /usr/sbin/policy-rc.d
    log "docker.io installed in $(elapsed_s "$ta")s"
  fi
  td=$(now_ms)
  D=$work/docker
  mkdir -p "$D"
  export DOCKER_HOST=unix://$D/docker.sock
  dockerd --data-root "$D/data" --exec-root "$D/exec" --pidfile "$D/dockerd.pid" -H "$DOCKER_HOST" \
    --iptables=false --ip6tables=false --bridge=none --ip-forward=false --ip-masq=false \
    >"$D/dockerd.log" 2>&1 &
  dockerd_pid=$!
  for _ in $(seq 300); do
    docker_answers && break
    kill -0 "$dockerd_pid" 2>/dev/null || { tail -20 "$D/dockerd.log" >&2; die "dockerd exited"; }
    sleep 0.1
  done
  docker_answers || { tail -20 "$D/dockerd.log" >&2; die "dockerd did not answer within 30 s"; }
  log "dockerd started in $(elapsed_s "$td")s"
fi

# ------------------------------------------------------------------ the image
ti=$(now_ms)
BRIDGE_IMAGE_LOAD=0 BRIDGE_IMAGE_OUT=$work/image.tar bash "$HACK/build-image.sh" >"$work/image.out"
image=$(tail -1 "$work/image.out")
docker load -q -i "$work/image.tar" >/dev/null
log "image $image built and loaded in $(elapsed_s "$ti")s"
grep -q "image: $image\$" "$ROOT/components/bridge-job.yaml" || die "components/bridge-job.yaml does not pin $image"

# ------------------------------------------------------------ the backends
# The suite's services as hack/services.sh exports them (make test sources
# it first); run alone, from the env files it leaves in their default places.
for svc in s3:BRIDGE_TEST_S3_ENDPOINT slurm:BRIDGE_TEST_SLURM_URL slurm2411:BRIDGE_TEST_SLURM2411_URL \
  htcondor:BRIDGE_TEST_CONDOR_SSH_URL ray:BRIDGE_TEST_RAY_URL; do
  f=/tmp/bridge-runner-${svc%%:*}/env var=${svc#*:}
  # shellcheck disable=SC1090
  if [ -z "${!var:-}" ] && [ -f "$f" ]; then source "$f"; fi
done
(cd "$ROOT" && go build -o "$work/fakes" ./hack/fakes)
export BRIDGE_FAKES=$work/fakes

# ------------------------------------------------------------------ kfp.local
tv=$(now_ms)
kfp_venv
log "KFP SDK ready in $(elapsed_s "$tv")s"
tp=$(now_ms)
rc=0
"$VENV/bin/python" "$HACK/kfp_local.py" "$ROOT" "$work" || rc=$?
log "pipelines ran in $(elapsed_s "$tp")s; kfp-local took $(elapsed_s "$t0")s in all"
exit "$rc"
