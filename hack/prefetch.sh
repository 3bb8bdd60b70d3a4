#!/usr/bin/env bash
# prefetch.sh: builds every cached part that `make test` and `make e2e` need
# (the Debian 13 roots of Slurm 24.11 and HTCondor 23.9, Debian unstable's of
# Slurm 26.05 and HTCondor 25, kube-apiserver, versitygw,
# the e2e cluster's Kubernetes and Argo binaries) ahead of them, so that CI's
# cold run overlaps them with lint, build and the tests instead of waiting for
# each in turn. .ci/run starts it in the background first thing.
#
# Safe beside the suite: each part's own script builds it under a lock, so a
# service that needs a part still being built here waits for this build and
# then finds it done; nothing is built twice. The downloads (debootstrap) run at
# once; the compiles run one after another at the lowest CPU priority, so the
# foreground keeps the cores and these use what the tests leave idle. A part
# that fails here is only logged: the suite builds it again and fails loudly.
# On a warm cache it finds everything built and exits in a second.
set -uo pipefail
HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/lib.sh
source "$HACK/lib.sh"

t0=$(now_ms)
# step NAME CMD... : runs CMD, logging its time and outcome; never fails the script.
step() {
  local name=$1 ts
  shift
  ts=$(now_ms)
  if "$@" >/dev/null; then
    log "prefetch: $name ready in $(elapsed_s "$ts")s"
  else
    log "prefetch: $name FAILED after $(elapsed_s "$ts")s (the suite will build it again)"
  fi
}

if [ "$(id -u)" = 0 ]; then
  # The one host package install, done before anything else runs apt.
  need_cmd debootstrap || log "prefetch: could not install debootstrap"
  step "Slurm 24.11 root" nice -n 10 bash "$HACK/build-trixie-slurm.sh" &
  step "Slurm 26.05 root" nice -n 10 bash "$HACK/build-sid-slurm.sh" &
  step "HTCondor root" nice -n 10 bash "$HACK/build-trixie-htcondor.sh" &
  step "HTCondor 25 root" nice -n 10 bash "$HACK/build-sid-htcondor.sh" &
fi
{
  step kube-apiserver nice -n 19 bash "$HACK/build-kube.sh"
  step versitygw nice -n 19 bash "$HACK/build-versitygw.sh"
  for v in "$ARGO_DEFAULT_VERSION" ${E2E_ARGO_ALSO-$ARGO_ALSO_DEFAULT}; do
    step "e2e cluster binaries, Argo $v" env ARGO_VERSION="$v" BRIDGE_SKIP_APT=1 nice -n 19 bash "$HACK/build-cluster.sh"
  done
} &
wait
log "prefetch: done in $(elapsed_s "$t0")s"
