#!/usr/bin/env bash
# Sourced by hack/test.sh and hack/bench.sh: start the real services the
# tests and benchmarks use (a kube-apiserver with etcd, an S3 server, a
# Slurm 22.05, a Slurm 24.11 and a Slurm 26.05 with slurmrestd, a Slurm 22.05
# and a Slurm 24.11 with slurmdbd, a Ray cluster, an sshd whose user runs the Slurm 22.05 commands,
# HTCondor 23.9 and 25 pools, each in a chroot with an sshd of its own), export their env, and on exit stop
# the ones this run started (services already up are left up, so a
# developer's second run is fast; KEEP_SERVICES=1 keeps all).
KUBE_DIR=${BRIDGE_KUBE_DIR:-/tmp/bridge-runner-kube}
SLURM_DIR=${BRIDGE_SLURM_DIR:-/tmp/bridge-runner-slurm}
SLURM2411_DIR=${BRIDGE_SLURM2411_DIR:-/tmp/bridge-runner-slurm2411}
SLURM2605_DIR=${BRIDGE_SLURM2605_DIR:-/tmp/bridge-runner-slurm2605}
SLURM2605_NOMETRICS_DIR=${BRIDGE_SLURM2605_NOMETRICS_DIR:-/tmp/bridge-runner-slurm2605-nometrics}
SLURMDBD_DIR=${BRIDGE_SLURMDBD_DIR:-/tmp/bridge-runner-slurmdbd}
SLURM2411DBD_DIR=${BRIDGE_SLURM2411DBD_DIR:-/tmp/bridge-runner-slurm2411dbd}
S3_DIR=${BRIDGE_S3_DIR:-/tmp/bridge-runner-s3}
RAY_DIR=${BRIDGE_RAY_DIR:-/tmp/bridge-runner-ray}
RAY_AUTH_DIR=${BRIDGE_RAY_AUTH_DIR:-/tmp/bridge-runner-ray-auth}
SSHD_DIR=${BRIDGE_SSHD_DIR:-/tmp/bridge-runner-sshd}
CONDOR_DIR=${BRIDGE_CONDOR_DIR:-/tmp/bridge-runner-htcondor}
CONDOR25_DIR=${BRIDGE_CONDOR25_DIR:-/tmp/bridge-runner-htcondor25}
started=()

# alive PID_FILE: the process of a PID file is running.
alive() { [ -f "$1" ] && kill -0 "$(awk '{print $1; exit}' "$1")" 2>/dev/null; }

# ray_alive: the Ray dashboard of RAY_DIR answers.
ray_alive() { ray_alive_in "$RAY_DIR"; }
ray_auth_alive() { ray_alive_in "$RAY_AUTH_DIR"; }

# ray_alive_in DIR: the Ray dashboard of DIR answers (with its token, if any).
ray_alive_in() {
  local hdr=()
  [ -s "$1/creds/token" ] && hdr=(-H "Authorization: Bearer $(tr -d '\n' <"$1/creds/token")")
  [ -f "$1/port" ] && curl -fsS -o /dev/null --max-time 2 "${hdr[@]}" "http://127.0.0.1:$(head -1 "$1/port")/api/version"
}

# up NAME UP_SCRIPT DOWN_SCRIPT CHECK...: start a service; if CHECK says it
# was already running, it is left running afterwards.
up() {
  local name=$1 upscript=$2 downscript=$3
  shift 3
  if "$@"; then
    echo "== $name: already running, will be left running"
  else
    started+=("$downscript")
  fi
  local t0=$SECONDS
  bash "$upscript"
  echo "== $name: up in $((SECONDS - t0)) s"
}

down() {
  [ "${KEEP_SERVICES:-0}" = 1 ] && return 0
  local s
  for s in "${started[@]}"; do
    bash "$s" || echo "== $s failed" >&2
  done
}
trap down EXIT

up kube-apiserver hack/kube-up.sh hack/kube-down.sh alive "$KUBE_DIR/kube-apiserver.pid"
# shellcheck disable=SC1091
source "$KUBE_DIR/env"
up s3 hack/s3-up.sh hack/s3-down.sh alive "$S3_DIR/versitygw.pid"
# shellcheck disable=SC1091
source "$S3_DIR/env"
up slurm hack/slurm-up.sh hack/slurm-down.sh alive "$SLURM_DIR/rest/slurmrestd.pid"
# shellcheck disable=SC1091
source "$SLURM_DIR/env"
# Slurm 24.11 (REST v0.0.40-v0.0.42) from a cached Debian 13 chroot.
up slurm-24.11 hack/slurm2411-up.sh hack/slurm2411-down.sh alive "$SLURM2411_DIR/slurmrestd.pid"
# shellcheck disable=SC1091
source "$SLURM2411_DIR/env"
# A second 24.11 with slurmdbd (the host's MariaDB), jobacct_gather/linux,
# MinJobAge=2 s and a login node (sshd in its root), for the efficiency tests
# over REST and SSH; the first keeps no accounting. 10-25 s.
up slurm-24.11-slurmdbd hack/slurm2411dbd-up.sh hack/slurm2411dbd-down.sh alive "$SLURM2411DBD_DIR/slurmrestd.pid"
# shellcheck disable=SC1091
source "$SLURM2411DBD_DIR/env"
# Slurm 26.05 (REST v0.0.42-v0.0.45, slurmdbd, slurmctld's metrics) from a cached
# Debian unstable chroot (hack/prefetch.sh builds it in the background).
up slurm-26.05 hack/slurm2605-up.sh hack/slurm2605-down.sh alive "$SLURM2605_DIR/slurmrestd.pid"
# shellcheck disable=SC1091
source "$SLURM2605_DIR/env"
# A second 26.05 as a site without metrics (MetricsType unset) and without
# slurmdbd, for the load probe's tests; its variables get a _NOMETRICS_ infix.
up slurm-26.05-nometrics hack/slurm2605-nometrics-up.sh hack/slurm2605-nometrics-down.sh alive "$SLURM2605_NOMETRICS_DIR/slurmrestd.pid"
BRIDGE_TEST_SLURM2605_NOMETRICS_URL=$(. "$SLURM2605_NOMETRICS_DIR/env" && echo "$BRIDGE_TEST_SLURM2605_URL")
BRIDGE_TEST_SLURM2605_NOMETRICS_CREDS=$(. "$SLURM2605_NOMETRICS_DIR/env" && echo "$BRIDGE_TEST_SLURM2605_CREDS")
BRIDGE_TEST_SLURM2605_NOMETRICS_CTLD_URL=$(. "$SLURM2605_NOMETRICS_DIR/env" && echo "$BRIDGE_TEST_SLURM2605_CTLD_URL")
export BRIDGE_TEST_SLURM2605_NOMETRICS_URL BRIDGE_TEST_SLURM2605_NOMETRICS_CREDS BRIDGE_TEST_SLURM2605_NOMETRICS_CTLD_URL
# Slurm 22.05 with slurmdbd and MariaDB, MinJobAge=2 s: jobs past MinJobAge.
up slurmdbd hack/slurmdbd-up.sh hack/slurmdbd-down.sh alive "$SLURMDBD_DIR/rest/slurmrestd.pid"
# shellcheck disable=SC1091
source "$SLURMDBD_DIR/env"
up ray hack/ray-up.sh hack/ray-down.sh ray_alive
# shellcheck disable=SC1091
source "$RAY_DIR/env"
# A second Ray with token authentication (as Ray 2.61 runs by default) for
# the tests of the bearer-token path; its variables get an _AUTH_ infix.
up ray-auth hack/ray-auth-up.sh hack/ray-auth-down.sh ray_auth_alive
BRIDGE_TEST_RAY_AUTH_URL=$(. "$RAY_AUTH_DIR/env" && echo "$BRIDGE_TEST_RAY_URL")
BRIDGE_TEST_RAY_AUTH_CREDS_DIR=$(. "$RAY_AUTH_DIR/env" && echo "$BRIDGE_TEST_RAY_CREDS_DIR")
export BRIDGE_TEST_RAY_AUTH_URL BRIDGE_TEST_RAY_AUTH_CREDS_DIR

# The sshd's sessions get the Slurm 22.05's SLURM_CONF, as a login node of
# that cluster would.
BRIDGE_SSHD_SETENV="SLURM_CONF=$(. "$SLURM_DIR/env" && echo "$SLURM_CONF")" up sshd hack/sshd-up.sh hack/sshd-down.sh alive "$SSHD_DIR/sshd.pid"
# shellcheck disable=SC1091
source "$SSHD_DIR/env"
up htcondor hack/htcondor-up.sh hack/htcondor-down.sh alive "$CONDOR_DIR/condor_master.pid"
# shellcheck disable=SC1091
source "$CONDOR_DIR/env"
# HTCondor 25 from a cached Debian unstable root (hack/prefetch.sh builds it
# early); its variables are BRIDGE_TEST_CONDOR25_*.
up htcondor-25 hack/htcondor25-up.sh hack/htcondor25-down.sh alive "$CONDOR25_DIR/condor_master.pid"
# shellcheck disable=SC1091
source "$CONDOR25_DIR/env"
