#!/usr/bin/env bash
# slurm2605-down.sh: stop the Slurm 26.05 of hack/slurm2605-up.sh (its jobs,
# slurmrestd, slurmd, slurmctld, slurmdbd, MariaDB, munged: each by its PID
# file; a daemon without one is skipped) and unmount its root. Idempotent.
# The cached chroot is never touched. slurm2411-down.sh and
# slurm2605-nometrics-down.sh run it on their own directories.
#
#   hack/slurm2605-down.sh          # stop; keep $BRIDGE_SLURM2605_DIR (logs)
#   hack/slurm2605-down.sh --purge  # stop and delete $BRIDGE_SLURM2605_DIR
set -euo pipefail
HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/lib.sh
source "$HACK/lib.sh"

DIR=${BRIDGE_SLURM2605_DIR:-/tmp/bridge-runner-slurm2605}
ROOT=$DIR/root
PURGE=
case "${1:-}" in
--purge) PURGE=1 ;;
"") ;;
*) echo "usage: $0 [--purge]" >&2; exit 2 ;;
esac
[ -d "$DIR" ] || exit 0
unset SLURM_CONF # the host Slurm's, if its env file was sourced

# stop_plain PIDFILE NAME: a daemon that wrote its bare PID itself (slurmctld,
# slurmd), signalled only if that PID still runs NAME.
stop_plain() {
	local pid i
	[ -s "$1" ] || return 0
	pid=$(cat "$1")
	if [ -r "/proc/$pid/comm" ] && [ "$(cat "/proc/$pid/comm")" = "$2" ]; then
		kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < 100; i++)); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
		[ ! -d "/proc/$pid" ] || kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$1"
}

if mountpoint -q "$ROOT"; then
	# Jobs first: their slurmstepd processes would outlive slurmd.
	if [ -s "$ROOT/run/slurmctld.pid" ]; then
		jobs=$(timeout 10 chroot "$ROOT" squeue -h -o %i 2>/dev/null || true)
		if [ -n "$jobs" ]; then
			# shellcheck disable=SC2086
			timeout 10 chroot "$ROOT" scancel $jobs 2>/dev/null || true
			for _ in $(seq 50); do
				[ -z "$(timeout 5 chroot "$ROOT" squeue -h -t R,CG,S -o %i 2>/dev/null || true)" ] && break
				sleep 0.2
			done
		fi
	fi
	stop_pidfile "$DIR/slurmrestd.pid"
	stop_plain "$ROOT/run/slurmd.pid" slurmd
	stop_plain "$ROOT/run/slurmctld.pid" slurmctld
	stop_plain "$ROOT/run/slurmdbd.pid" slurmdbd
fi
stop_pidfile "$DIR/mariadbd.pid" 30
stop_pidfile "$DIR/munged.pid"
stop_pidfile "$DIR/slurmrestd.pid"

# Unmount in the reverse order of the up script's mounts; lazily as a last resort so
# that a process still holding a file cannot keep the tree mounted.
for m in run dev sys proc ""; do
	t=$ROOT${m:+/$m}
	mountpoint -q "$t" || continue
	umount "$t" 2>/dev/null || umount -l "$t"
done
rm -f "$DIR/env" "$DIR/port" "$DIR/ctld-port" "$DIR/settings"
if [ -n "$PURGE" ]; then
	# Never rm -rf through a mount: the root binds the host's /dev.
	! findmnt -rn -o TARGET | grep -q "^$ROOT" || die "$ROOT still has mounts; not removing $DIR"
	safe_rm_state_dir "$DIR"
	log "removed $DIR"
fi
