#!/usr/bin/env bash
# build-trixie-slurm.sh: builds a Debian 13 (trixie) root file system with
# Slurm 24.11, slurmrestd, the JWT plugin, slurmdbd and MariaDB (and curl
# for stage-out jobs, and an OpenSSH server for the login node of
# hack/slurm2411dbd-up.sh), once, and
# caches it under $BRIDGE_CACHE/chroot/<name>/root; prints that path.
#
# Why a chroot: the machines run Debian 12, whose Slurm is 22.05. Adding
# trixie to the host's apt sources would upgrade the host's libc and much
# else, so the newer Slurm lives in its own root, built with debootstrap from
# the Debian mirror that apt already uses. hack/slurm2411-up.sh mounts it
# read-only below an overlay, so the cached tree never changes after the
# build and one build serves every run.
#
# Idempotent: a finished build (marked by root/.bridge-built) is reused; a
# half-finished one is thrown away and built again.
set -euo pipefail
HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/lib.sh
source "$HACK/lib.sh"

# Bump NAME when the package list or the preparation below changes.
NAME=trixie-slurm-3
CACHE=${BRIDGE_CACHE:-$HOME/.cache/bridge-runner}
OUT=$CACHE/chroot/$NAME
ROOT=$OUT/root
PKGS=slurmctld,slurmd,slurmrestd,slurm-client,slurm-wlm-jwt-plugin,slurmdbd,munge,mariadb-server,openssh-server,ca-certificates,curl

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
	# A half-finished build: its mounts (if any) go first, then the tree.
	for m in proc sys dev; do umount "$tmp/$m" 2>/dev/null || true; done
	safe_rm_state_dir "$tmp"
fi
mkdir -p "$tmp"
log "debootstrap trixie from $MIRROR into $tmp (about a minute)"
debootstrap --variant=minbase --include="$PKGS" trixie "$tmp" "$MIRROR" >"$OUT/debootstrap.log" 2>&1 || {
	tail_logs 30 "$OUT/debootstrap.log"
	die "debootstrap failed"
}

# Users the up script runs things as. The job user gets a home, as on a real
# cluster; slurmrestd refuses to run as root or SlurmUser.
chroot "$tmp" /bin/sh -e <<'SH'
getent passwd slurmrest >/dev/null || useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin slurmrest
getent passwd bridge >/dev/null || useradd --create-home --shell /bin/bash bridge
# The packages' own keys and state: each run writes its own into the overlay.
rm -f /etc/munge/munge.key
apt-get clean
SH
touch "$tmp/.bridge-built"
safe_rm_state_dir "$ROOT" 2>/dev/null || true
mv "$tmp" "$ROOT"
log "built $ROOT in $(elapsed_s "$t0") s ($(du -sh "$ROOT" | cut -f1))"
echo "$ROOT"
