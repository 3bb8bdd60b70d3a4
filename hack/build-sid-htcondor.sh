#!/usr/bin/env bash
# build-sid-htcondor.sh: builds a Debian unstable (sid) root file system with
# HTCondor 25 (minicondor, which replaced minihtcondor: a one-machine pool)
# and an sshd, once, and caches
# it under $BRIDGE_CACHE/chroot/<name>/root; prints that path.
#
# Why sid: Debian 13 (hack/build-trixie-htcondor.sh) ships HTCondor 23.9; the
# 25 line is only in unstable. As for trixie, unstable is never added to the
# host's apt sources: debootstrap fetches it from the mirror apt already uses
# into a root of its own, and hack/htcondor25-up.sh starts the pool inside it.
# Unstable moves: the version found is logged, and docs/facts/htcondor-25.md
# says which one was measured.
#
# Idempotent: a finished build (marked by root/.bridge-built) is reused; a
# half-finished one is thrown away and built again. Two callers at once build
# once: the second waits for the first (hack/prefetch.sh builds it early).
set -euo pipefail
HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/lib.sh
source "$HACK/lib.sh"

# Bump NAME when the package list or the preparation below changes (and in
# hack/htcondor25-down.sh, which names the root's directory).
NAME=sid-htcondor-1
CACHE=${BRIDGE_CACHE:-$HOME/.cache/bridge-runner}
OUT=$CACHE/chroot/$NAME
ROOT=$OUT/root

[ "$(id -u)" = 0 ] || die "run as root (debootstrap and chroot need it)"
[ -e "$ROOT/.bridge-built" ] && { echo "$ROOT"; exit 0; }
mkdir -p "$CACHE/chroot"
with_lock "$CACHE/chroot/$NAME.lock" "$BUILD_LOCK_WAIT"
[ -e "$ROOT/.bridge-built" ] && { echo "$ROOT"; exit 0; }

need_cmd debootstrap
MIRROR=$(debian_mirror)
t0=$(now_ms)
tmp=$OUT/root.tmp
if [ -d "$tmp" ]; then
  umount "$tmp/proc" 2>/dev/null || true
  safe_rm_state_dir "$tmp"
fi
mkdir -p "$tmp"
log "debootstrap sid from $MIRROR into $tmp (once; a few minutes)"
debootstrap --variant=minbase --include=openssh-server,ca-certificates sid "$tmp" "$MIRROR" >"$OUT/build.log" 2>&1 ||
  { tail_logs 20 "$OUT/build.log"; die "debootstrap failed; see $OUT/build.log"; }
# No daemon may start while packages install: the pool is started by htcondor25-up.sh.
printf '#!/bin/sh\nexit 101\n' >"$tmp/usr/sbin/policy-rc.d"
chmod 755 "$tmp/usr/sbin/policy-rc.d"
mount --bind /proc "$tmp/proc"
DEBIAN_FRONTEND=noninteractive chroot "$tmp" apt-get install -y -q --no-install-recommends minicondor >>"$OUT/build.log" 2>&1 ||
  { umount "$tmp/proc"; tail_logs 20 "$OUT/build.log"; die "installing minicondor failed; see $OUT/build.log"; }
umount "$tmp/proc"
chroot "$tmp" apt-get clean
touch "$tmp/.bridge-built"
safe_rm_state_dir "$ROOT" 2>/dev/null || true
mv "$tmp" "$ROOT"
log "built $ROOT with $(chroot "$ROOT" dpkg-query -W -f '${Package} ${Version}' condor 2>/dev/null || echo 'HTCondor') in $(elapsed_s "$t0")s ($(du -sh "$ROOT" | cut -f1))"
echo "$ROOT"
