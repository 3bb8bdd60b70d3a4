#!/usr/bin/env bash
# node-down-test.sh: TestRealNodeDownIsInfrastructure on Slurm clusters of its
# own. The test sets a cluster's only node down, which ends or requeues every
# job on it; on the suite's shared clusters it had to wait until every other
# test was done (~4.5 min at the end of `make test`). Here it gets a private
# 22.05, 24.11 and 26.05 (own state dirs, own free ports, the same up scripts
# as the shared ones), so hack/test.sh runs it beside the rest of the suite.
# The clusters are stopped and their state dirs removed afterwards.
#
#   bash hack/node-down-test.sh    # needs root, as the shared clusters do
set -euo pipefail
HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$(dirname "$HACK")"
base=${BRIDGE_NODE_DOWN_DIR:-/tmp/bridge-runner-nodedown}
d2205=$base-2205 d2411=$base-2411 d2605=$base-2605

down() {
  BRIDGE_SLURM_DIR=$d2205 bash "$HACK/slurm-down.sh" --purge >/dev/null 2>&1 || echo "node-down: stopping $d2205 failed" >&2
  BRIDGE_SLURM2411_DIR=$d2411 bash "$HACK/slurm2411-down.sh" --purge >/dev/null 2>&1 || echo "node-down: stopping $d2411 failed" >&2
  BRIDGE_SLURM2605_DIR=$d2605 bash "$HACK/slurm2605-down.sh" --purge >/dev/null 2>&1 || echo "node-down: stopping $d2605 failed" >&2
}
trap down EXIT

t0=$SECONDS
BRIDGE_SLURM_DIR=$d2205 bash "$HACK/slurm-up.sh"
BRIDGE_SLURM2411_DIR=$d2411 bash "$HACK/slurm2411-up.sh"
BRIDGE_SLURM2605_DIR=$d2605 bash "$HACK/slurm2605-up.sh"
echo "node-down: three private Slurms up in $((SECONDS - t0)) s"
# Only these clusters' variables reach the test: the shared ones' are
# dropped so that no node of theirs can be set down.
unset "${!BRIDGE_TEST_SLURM@}" SLURM_CONF
# shellcheck disable=SC1091
source "$d2205/env"
# shellcheck disable=SC1091
source "$d2411/env"
# shellcheck disable=SC1091
source "$d2605/env"
BRIDGE_TEST_NODE_DOWN=1 go test -tags bridgetest -count=1 -timeout 10m -run '^TestRealNodeDownIsInfrastructure$' ./backends/slurm
