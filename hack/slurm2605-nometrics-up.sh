#!/usr/bin/env bash
# slurm2605-nometrics-up.sh: a second Slurm 26.05 of hack/slurm2605-up.sh, as
# a site that did not enable slurmctld's metrics (MetricsType unset), without
# slurmdbd (a start of a few seconds), in its own directory and ports.
set -euo pipefail
HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BRIDGE_SLURM2605_DIR=${BRIDGE_SLURM2605_NOMETRICS_DIR:-/tmp/bridge-runner-slurm2605-nometrics} \
	BRIDGE_SLURM2605_METRICS=0 BRIDGE_SLURM2605_ACCOUNTING=0 exec bash "$HACK/slurm2605-up.sh" "$@"
