#!/usr/bin/env bash
# A second Slurm 22.05 (hack/slurm-up.sh) that keeps accounting in a real slurmdbd
# with Debian's MariaDB and forgets ended jobs after MinJobAge=2 s, for the tests of
# jobs past MinJobAge; it gathers the CPU time and peak memory jobs used (jobacct_gather/linux),
# for the efficiency tests. Its env file (/tmp/bridge-runner-slurmdbd/env) exports
# BRIDGE_TEST_SLURMDBD_URL, _USER, _TOKEN, _CREDS, _CONF. hack/slurmdbd-down.sh stops it.
set -euo pipefail
export BRIDGE_SLURM_DIR=${BRIDGE_SLURMDBD_DIR:-/tmp/bridge-runner-slurmdbd}
export BRIDGE_SLURM_ACCOUNTING=1 BRIDGE_SLURM_MIN_JOB_AGE=2 BRIDGE_SLURM_ACCT_GATHER=jobacct_gather/linux BRIDGE_SLURM_ENV_PREFIX=BRIDGE_TEST_SLURMDBD
unset BRIDGE_SLURM_LISTEN
exec bash "$(dirname "${BASH_SOURCE[0]}")/slurm-up.sh"
