#!/usr/bin/env bash
# Stops what hack/htcondor25-up.sh started (see hack/htcondor-down.sh); the
# cached root stays for the next start. Idempotent.
#
# Environment: BRIDGE_CONDOR25_DIR, BRIDGE_CACHE, as for htcondor25-up.sh.
set -euo pipefail
HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BRIDGE_CONDOR_DIR=${BRIDGE_CONDOR25_DIR:-/tmp/bridge-runner-htcondor25} \
  CONDOR_BASE=${BRIDGE_CACHE:-$HOME/.cache/bridge-runner}/chroot/sid-htcondor-1 \
  exec bash "$HACK/htcondor-down.sh"
