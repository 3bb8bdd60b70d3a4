#!/usr/bin/env bash
# slurm2411-down.sh: stop the Slurm 24.11 of hack/slurm2411-up.sh (its jobs,
# slurmrestd, slurmd, slurmctld, munged: each by its PID file) and unmount
# its root. Idempotent. The cached chroot is never touched. The same steps as
# 26.05's (hack/slurm2605-down.sh, whose daemons are a superset: what 24.11
# does not run has no PID file and is skipped), on 24.11's directory.
#
#   hack/slurm2411-down.sh          # stop; keep $BRIDGE_SLURM2411_DIR (logs)
#   hack/slurm2411-down.sh --purge  # stop and delete $BRIDGE_SLURM2411_DIR
set -euo pipefail
HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DIR=${BRIDGE_SLURM2411_DIR:-/tmp/bridge-runner-slurm2411}
# The login node (BRIDGE_SLURM2411_LOGIN=1) first: its sshd runs in the root.
[ ! -d "$DIR/sshd" ] || BRIDGE_SSHD_DIR=$DIR/sshd bash "$HACK/sshd-down.sh"
BRIDGE_SLURM2605_DIR=$DIR \
	exec bash "$HACK/slurm2605-down.sh" "$@"
