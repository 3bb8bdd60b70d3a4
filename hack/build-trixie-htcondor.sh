#!/usr/bin/env bash
# build-trixie-htcondor.sh: builds a Debian 13 (trixie) root file system with
# HTCondor 23.9 (minihtcondor: a one-machine pool) and an sshd, once, and caches
# it under $BRIDGE_CACHE/htcondor-23.9/root; prints that path.
#
# Why a chroot: Debian 12 has no HTCondor, and adding trixie to the host's apt
# sources would upgrade the host's libc and much else (see
# hack/build-trixie-slurm.sh). hack/htcondor-up.sh starts the pool inside it.
#
# Idempotent: a finished build (marked by ../built) is reused; a half-finished
# one is thrown away and built again. Two callers at once build once: the
# second waits for the first (hack/prefetch.sh builds it early in CI).
set -euo pipefail
HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/lib.sh
source "$HACK/lib.sh"

CACHE=${BRIDGE_CACHE:-$HOME/.cache/bridge-runner}
BASE=$CACHE/htcondor-23.9
ROOT=$BASE/root

[ "$(id -u)" = 0 ] || die "run as root (debootstrap and chroot need it)"
[ -e "$BASE/built" ] && { echo "$ROOT"; exit 0; }
mkdir -p "$BASE"
with_lock "$BASE/build.lock" "$BUILD_LOCK_WAIT"
[ -e "$BASE/built" ] && { echo "$ROOT"; exit 0; }

need_cmd debootstrap
t0=$(now_ms)
tmp=$BASE/root.tmp
if [ -d "$tmp" ]; then
  umount "$tmp/proc" 2>/dev/null || true
  safe_rm_state_dir "$tmp"
fi
log "building the Debian 13 chroot in $ROOT (once; a few minutes)"
debootstrap --variant=minbase --include=openssh-server,ca-certificates trixie "$tmp" "$(debian_mirror)" >"$BASE/build.log" 2>&1 ||
  { tail_logs 20 "$BASE/build.log"; die "debootstrap failed; see $BASE/build.log"; }
# No daemon may start while packages install: the pool is started by htcondor-up.sh.
printf '#!/bin/sh\nexit 101\n' >"$tmp/usr/sbin/policy-rc.d"
chmod 755 "$tmp/usr/sbin/policy-rc.d"
mount --bind /proc "$tmp/proc"
DEBIAN_FRONTEND=noninteractive chroot "$tmp" apt-get install -y -q --no-install-recommends minihtcondor >>"$BASE/build.log" 2>&1 ||
  { umount "$tmp/proc"; tail_logs 20 "$BASE/build.log"; die "installing minihtcondor failed; see $BASE/build.log"; }
umount "$tmp/proc"
chroot "$tmp" apt-get clean
safe_rm_state_dir "$ROOT" 2>/dev/null || true
mv "$tmp" "$ROOT"
touch "$BASE/built"
log "chroot built in $(elapsed_s "$t0")s ($(du -sh "$ROOT" | cut -f1))"
echo "$ROOT"
