#!/usr/bin/env bash
# Starts a real HTCondor 23.9 personal pool (collector, negotiator, schedd,
# startd) from Debian 13's minihtcondor in a chroot, on 127.0.0.1, and an
# OpenSSH server inside the same chroot, so that the chroot is the pool's
# login node: its ssh user finds condor_submit on the PATH. Writes an env
# file for the tests.
#
#   bash hack/htcondor-up.sh && source /tmp/bridge-runner-htcondor/env
#   go test ./backends/htcondor/ -count=1
#   bash hack/htcondor-down.sh      # stops exactly what this started
#
# The chroot is built once with debootstrap (trixie, minbase) and cached in
# $BRIDGE_CACHE/htcondor-23.9/root; Debian 13 is never added to this
# machine's apt sources. Build: about 3 min and 500 MB; start: about 15 s.
#
# Why jobs run here: HTCondor's starter gives each job a private /tmp and
# /var/tmp (MOUNT_UNDER_SCRATCH), which needs a mount namespace; this
# machine refuses unshare(CLONE_NEWNS), and the starter then fails every job
# with "Failed to execute ... (errno=22: 'Invalid argument')" and holds it.
# MOUNT_UNDER_SCRATCH is set empty (jobs share the node's /tmp), and cgroups
# are unused (none is writable), so the rest of HTCondor runs as shipped.
#
# Environment:
#   BRIDGE_CONDOR_DIR   state dir (env, PID file, logs); /tmp/bridge-runner-htcondor
#   BRIDGE_CACHE        where the chroot is cached; ~/.cache/bridge-runner
#   BRIDGE_DEBIAN_MIRROR  Debian mirror (default: the one apt uses, else deb.debian.org)
#   BRIDGE_CONDOR_ROOT  a root of the caller's (a copy of a built one) instead of
#                       the cached one: a second pool beside the suite's (hack/e2e.sh)
#   BRIDGE_CONDOR_SSH_LISTEN  the address the login node's sshd listens on
#                       (default 127.0.0.1; hack/sshd-up.sh's BRIDGE_SSHD_LISTEN)
#
# The env file exports BRIDGE_TEST_CONDOR_SSH_* (see hack/sshd-up.sh: URL,
# ADDR, USER, CREDS, CERT_CREDS, SSHD_CONFIG, ROOT) and BRIDGE_TEST_CONDOR_ROOT.
#
# hack/htcondor25-up.sh runs this script for HTCondor 25 in its own root, with
#   CONDOR_BUILD        the script that builds the root and prints its path
#   CONDOR_ENV_PREFIX   the env file's prefix instead of BRIDGE_TEST_CONDOR
# (one pool per root: the lock is the root's, beside it).
set -euo pipefail

HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/lib.sh
source "$HACK/lib.sh"

STATE=${BRIDGE_CONDOR_DIR:-/tmp/bridge-runner-htcondor}
STATE=${STATE%/}
BUILD=${CONDOR_BUILD:-build-trixie-htcondor.sh}
PREFIX=${CONDOR_ENV_PREFIX:-BRIDGE_TEST_CONDOR}
SSH_LISTEN=${BRIDGE_CONDOR_SSH_LISTEN:-127.0.0.1}
t0=$(now_ms)

[ "$(id -u)" = 0 ] || die "run as root (debootstrap, chroot, mounts, daemons that switch users)"
# --- the chroot, built once (hack/$BUILD; it waits for a build under way) -------------
ROOT=${BRIDGE_CONDOR_ROOT:-$(bash "$HACK/$BUILD" | tail -n 1)}
ROOT=${ROOT%/}
[ -d "$ROOT/etc/condor" ] || die "no HTCondor root at '$ROOT' (BRIDGE_CONDOR_ROOT, or what hack/$BUILD printed)"
BASE=$(dirname "$ROOT")
mkdir -p "$(dirname "$STATE")"
with_lock "$BASE/lock"

is_up() {
  [ -f "$STATE/env" ] && pidfile_alive "$STATE/condor_master.pid" || return 1
  [ -n "$(chroot "$ROOT" condor_status -schedd -af Name 2>/dev/null)" ] || return 1
  BRIDGE_SSHD_DIR=$STATE/sshd BRIDGE_SSHD_ROOT=$ROOT BRIDGE_SSHD_ENV_PREFIX=${PREFIX}_SSH BRIDGE_SSHD_LISTEN=$SSH_LISTEN \
    bash "$HACK/sshd-up.sh" >/dev/null 2>&1
}
if is_up; then
  log "HTCondor already up (state $STATE)"
  echo "$STATE/env"
  exit 0
fi
if [ -e "$STATE" ]; then
  log "stale state in $STATE: cleaning up"
  BRIDGE_CONDOR_LOCKED=1 bash "$HACK/htcondor-down.sh"
fi

# --- mounts (recorded, so that down removes exactly these) ---------------------------
mkdir -p "$STATE"
echo "$ROOT" >"$STATE/root" # first: down finds the root (and its lock) by it
: >"$STATE/mounts"
bind() { # bind SRC DST
  mountpoint -q "$2" && die "$2 is already a mount point: is another HTCondor running in $ROOT? (hack/htcondor-down.sh)"
  mount --bind "$1" "$2"
  echo "$2" >>"$STATE/mounts"
}
bind /proc "$ROOT/proc"
bind /sys "$ROOT/sys"
bind /dev "$ROOT/dev"
mountpoint -q "$ROOT/run" && die "$ROOT/run is already a mount point"
mount -t tmpfs -o mode=755,size=64m tmpfs "$ROOT/run"
echo "$ROOT/run" >>"$STATE/mounts"
echo "127.0.0.1 localhost $(hostname)" >"$ROOT/etc/hosts"

# --- configuration ---------------------------------------------------------------
PORT=$(free_ports 1)
cat >"$ROOT/etc/condor/config.d/99-bridge-runner" <<EOF
# Written by hack/htcondor-up.sh.
COLLECTOR_HOST = 127.0.0.1:$PORT
SHARED_PORT_PORT = $PORT
ENABLE_IPV6 = False
# Loopback only: 23.9's minihtcondor pinned this, 25's minicondor does not
# (its daemons took the machine's other interface).
CONDOR_HOST = 127.0.0.1
NETWORK_INTERFACE = 127.0.0.1
BIND_ALL_INTERFACES = False
# No mount namespaces here (see hack/htcondor-up.sh).
MOUNT_UNDER_SCRATCH =
# Quick scheduling for tests.
SCHEDD_INTERVAL = 1
NEGOTIATOR_INTERVAL = 1
NEGOTIATOR_CYCLE_DELAY = 1
EOF
# A fresh pool each start: no queue or history of an earlier run.
rm -rf "$ROOT"/var/spool/condor/* "$ROOT"/var/log/condor/* "$ROOT"/var/lib/condor/execute/*
for d in /run/condor /run/lock/condor; do
  mkdir -p "$ROOT$d"
  chroot "$ROOT" chown condor:condor "$d"
done

# --- start -------------------------------------------------------------------------
start_daemon "$STATE/condor_master.pid" "$STATE/condor_master.out" chroot "$ROOT" /usr/sbin/condor_master -f
deadline=$((SECONDS + 60))
until [ -n "$(chroot "$ROOT" condor_status -schedd -af Name 2>/dev/null)" ] &&
  [ -n "$(chroot "$ROOT" condor_status -startd -af Name 2>/dev/null)" ]; do
  if ! pidfile_alive "$STATE/condor_master.pid" || [ $SECONDS -ge $deadline ]; then
    tail_logs 20 "$STATE/condor_master.out" "$ROOT/var/log/condor/MasterLog"
    die "HTCondor did not come up; see $ROOT/var/log/condor"
  fi
  sleep 0.5
done

BRIDGE_SSHD_DIR=$STATE/sshd BRIDGE_SSHD_ROOT=$ROOT BRIDGE_SSHD_ENV_PREFIX=${PREFIX}_SSH BRIDGE_SSHD_LISTEN=$SSH_LISTEN \
  bash "$HACK/sshd-up.sh" >/dev/null
{
  cat "$STATE/sshd/env"
  echo "export ${PREFIX}_ROOT=$ROOT"
} >"$STATE/env.tmp"
mv "$STATE/env.tmp" "$STATE/env"
log "HTCondor $(chroot "$ROOT" condor_version | head -1 | awk '{print $2}') up (collector 127.0.0.1:$PORT), its login node at $(sed -n "s/^export ${PREFIX}_SSH_URL=//p" "$STATE/env"), in $(elapsed_s "$t0")s"
echo "$STATE/env"
