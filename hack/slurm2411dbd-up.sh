#!/usr/bin/env bash
# slurm2411dbd-up.sh: a second Slurm 24.11 (hack/slurm2411-up.sh) that keeps
# accounting: slurmdbd 24.11 from the same cached Debian 13 root, storing into
# a private MariaDB (the host's Debian 12 one, on its own port and data
# directory, database slurm2411_acct_db, user slurm2411), with
# jobacct_gather/linux so that it records the CPU time and peak memory jobs
# used, and slurmrestd serving /slurmdb/v0.0.40-v0.0.42, and that forgets
# ended jobs after MinJobAge=2 s (as hack/slurmdbd-up.sh's 22.05); for the
# efficiency tests and those of jobs past MinJobAge. The shared 24.11 stays
# without accounting (its "keeps none" tests).
# It has a login node too (an sshd in the root, hack/sshd-up.sh), where
# the job user runs sbatch and sacct over SSH. Its env file
# (/tmp/bridge-runner-slurm2411dbd/env) exports BRIDGE_TEST_SLURM2411DBD_URL,
# _USER, _TOKEN, _JWT_KEY, _CREDS, _ROOT and the login node's _SSH_URL, _SSH_ADDR,
# _SSH_USER, _SSH_CREDS, _SSH_CERT_CREDS, _SSH_SSHD_CONFIG, _SSH_ROOT.
# hack/slurm2411dbd-down.sh stops it.
set -euo pipefail
export BRIDGE_SLURM2411_DIR=${BRIDGE_SLURM2411DBD_DIR:-/tmp/bridge-runner-slurm2411dbd}
export BRIDGE_SLURM2411_ACCOUNTING=1 BRIDGE_SLURM_MIN_JOB_AGE=2 BRIDGE_SLURM2411_LOGIN=1 BRIDGE_SLURM2411_ENV_PREFIX=BRIDGE_TEST_SLURM2411DBD
unset BRIDGE_SLURM2411_RL BRIDGE_SLURM2411_CPUS
exec bash "$(dirname "${BASH_SOURCE[0]}")/slurm2411-up.sh"
