#!/usr/bin/env bash
# Stops the Slurm with slurmdbd that hack/slurmdbd-up.sh started (--purge: and its data).
set -euo pipefail
export BRIDGE_SLURM_DIR=${BRIDGE_SLURMDBD_DIR:-/tmp/bridge-runner-slurmdbd}
exec bash "$(dirname "${BASH_SOURCE[0]}")/slurm-down.sh" "$@"
