#!/usr/bin/env bash
# Stops the Slurm 24.11 with slurmdbd that hack/slurm2411dbd-up.sh started (its
# jobs, daemons, MariaDB; --purge: and its data).
set -euo pipefail
export BRIDGE_SLURM2411_DIR=${BRIDGE_SLURM2411DBD_DIR:-/tmp/bridge-runner-slurm2411dbd}
exec bash "$(dirname "${BASH_SOURCE[0]}")/slurm2411-down.sh" "$@"
