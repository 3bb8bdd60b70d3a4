#!/usr/bin/env bash
# ray-auth-up.sh: a second Ray, with token authentication (Ray >= 2.52; on
# by default from 2.61), in its own state dir, for the tests of the
# bearer-token path. hack/services.sh starts it beside the default one.
set -euo pipefail
export BRIDGE_RAY_DIR=${BRIDGE_RAY_AUTH_DIR:-/tmp/bridge-runner-ray-auth}
export BRIDGE_RAY_AUTH=token
exec bash "$(dirname "${BASH_SOURCE[0]}")/ray-up.sh" "$@"
