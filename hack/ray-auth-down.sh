#!/usr/bin/env bash
# ray-auth-down.sh: stop the Ray of hack/ray-auth-up.sh.
set -euo pipefail
export BRIDGE_RAY_DIR=${BRIDGE_RAY_AUTH_DIR:-/tmp/bridge-runner-ray-auth}
exec bash "$(dirname "${BASH_SOURCE[0]}")/ray-down.sh" "$@"
