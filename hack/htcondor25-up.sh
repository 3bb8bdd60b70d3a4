#!/usr/bin/env bash
# Starts a real HTCondor 25 personal pool beside the 23.9 one: the same pool
# and login node as hack/htcondor-up.sh (read it: configuration, why jobs share
# the node's /tmp), from Debian unstable's minihtcondor in a root of its own
# (hack/build-sid-htcondor.sh), on ports of its own. Writes an env file for
# the tests.
#
#   bash hack/htcondor25-up.sh && source /tmp/bridge-runner-htcondor25/env
#   go test -tags bridgetest ./backends/htcondor/ -count=1
#   bash hack/htcondor25-down.sh    # stops exactly what this started
#
# Environment:
#   BRIDGE_CONDOR25_DIR  state dir (env, PID file, logs); /tmp/bridge-runner-htcondor25
#   BRIDGE_CACHE, BRIDGE_DEBIAN_MIRROR as for hack/htcondor-up.sh
#
# The env file exports BRIDGE_TEST_CONDOR25_SSH_* (URL, ADDR, USER, CREDS,
# CERT_CREDS, SSHD_CONFIG, ROOT) and BRIDGE_TEST_CONDOR25_ROOT.
set -euo pipefail
HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BRIDGE_CONDOR_DIR=${BRIDGE_CONDOR25_DIR:-/tmp/bridge-runner-htcondor25} \
  CONDOR_BUILD=build-sid-htcondor.sh CONDOR_ENV_PREFIX=BRIDGE_TEST_CONDOR25 \
  exec bash "$HACK/htcondor-up.sh"
