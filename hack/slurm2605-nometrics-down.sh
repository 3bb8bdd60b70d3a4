#!/usr/bin/env bash
# slurm2605-nometrics-down.sh: stop the Slurm 26.05 of
# hack/slurm2605-nometrics-up.sh (see hack/slurm2605-down.sh).
set -euo pipefail
HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BRIDGE_SLURM2605_DIR=${BRIDGE_SLURM2605_NOMETRICS_DIR:-/tmp/bridge-runner-slurm2605-nometrics} \
	exec bash "$HACK/slurm2605-down.sh" "$@"
