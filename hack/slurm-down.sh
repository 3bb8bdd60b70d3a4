#!/usr/bin/env bash
# slurm-down.sh: stop the Slurm that hack/slurm-up.sh started: first its jobs,
# then slurmrestd, slurmd, slurmctld, slurmdbd and MariaDB (if
# BRIDGE_SLURM_ACCOUNTING started them) and munged, each found by its PID file and
# checked by name before it is signalled. Idempotent: nothing running is fine.
#
#   hack/slurm-down.sh           # stop; keep $BRIDGE_SLURM_DIR (keys, logs)
#   hack/slurm-down.sh --purge   # stop and delete $BRIDGE_SLURM_DIR
set -euo pipefail

DIR=${BRIDGE_SLURM_DIR:-/tmp/bridge-runner-slurm}
PURGE=
case "${1:-}" in
--purge) PURGE=1 ;;
"") ;;
*) echo "usage: $0 [--purge]" >&2; exit 2 ;;
esac

log() { printf 'slurm-down: %s\n' "$*" >&2; }

[ -d "$DIR" ] || { log "nothing to stop ($DIR does not exist)"; exit 0; }

# pid_of PIDFILE NAME: the PID in PIDFILE if that process runs and is NAME.
pid_of() {
	local pid
	[ -s "$1" ] || return 1
	pid=$(cat "$1")
	[ -n "$pid" ] && [ -r "/proc/$pid/comm" ] && [ "$(cat "/proc/$pid/comm")" = "$2" ] && echo "$pid"
}

stop() { # stop PIDFILE NAME
	local pid
	if pid=$(pid_of "$1" "$2"); then
		kill -TERM "$pid" 2>/dev/null || true
		for _ in $(seq 100); do
			[ -d "/proc/$pid" ] || break
			sleep 0.1
		done
		if [ -d "/proc/$pid" ]; then
			log "$2 (pid $pid) ignored SIGTERM for 10s; killing it"
			kill -KILL "$pid" 2>/dev/null || true
		fi
		log "stopped $2 (pid $pid)"
	fi
	rm -f "$1"
}

# Jobs first: their slurmstepd processes would outlive slurmd.
CONF=$DIR/etc/slurm.conf
if [ -f "$CONF" ] && pid_of "$DIR/ctld/slurmctld.pid" slurmctld >/dev/null && command -v squeue >/dev/null; then
	jobs=$(SLURM_CONF=$CONF timeout 10 squeue -h -o %i 2>/dev/null || true)
	if [ -n "$jobs" ]; then
		log "cancelling jobs: $(tr '\n' ' ' <<<"$jobs")"
		# shellcheck disable=SC2086
		SLURM_CONF=$CONF timeout 10 scancel $jobs 2>/dev/null || true
		for _ in $(seq 50); do
			[ -z "$(SLURM_CONF=$CONF timeout 5 squeue -h -t R,CG,S -o %i 2>/dev/null || true)" ] && break
			sleep 0.2
		done
	fi
fi

stop "$DIR/rest/slurmrestd.pid" slurmrestd
stop "$DIR/d/slurmd.pid" slurmd
stop "$DIR/ctld/slurmctld.pid" slurmctld
stop "$DIR/dbd/slurmdbd.pid" slurmdbd
stop "$DIR/db/mariadbd.pid" mariadbd
stop "$DIR/munge/munged.pid" munged
rm -f "$DIR/env"

if [ -n "$PURGE" ]; then
	rm -rf "$DIR"
	log "removed $DIR"
fi
