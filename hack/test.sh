#!/usr/bin/env bash
# The project's whole test suite: starts the real services the tests use (a
# kube-apiserver with etcd, an S3 server, a Slurm with slurmrestd, a Ray
# cluster), runs `go test ./...` against them, then the KFP SDK's checks and
# kfp.local with a real Docker daemon (hack/kfp-check.sh, hack/kfp-local.sh),
# and stops the services it started (services that were already up are left
# up, so a developer's second run is fast).
#
#   make test                      # what the README and CI run
#   KEEP_SERVICES=1 make test      # leave what this run started, for re-runs
#   GO_TEST_FLAGS='-run Slurm -v' make test
#
# Under CI=true a test that needs a service fails instead of skipping, so a
# service that did not come up is a red build, never a silent pass.
set -euo pipefail
HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HACK")
cd "$ROOT"

# shellcheck source=hack/services.sh
source "$HACK/services.sh"
# The terminal tests read the screen in tmux (cmd/bridge-runner/help_test.go).
# shellcheck source=hack/lib.sh
source "$HACK/lib.sh"
need_cmd tmux
# The dashboard's tests parse and evaluate its queries with promtool
# (operator/dashboard*_test.go).
need_cmd_no_service promtool prometheus

# bridgetest: the test hooks (crash points), absent from release builds.
# 60m per package: cmd/bridge-runner's tests against the real services (grace
# periods, retry budgets, black holes, crash points) wait out real time: ~44 min
# with make e2e running beside (as in CI), under the 90 of CI. It is the long
# pole, so it runs in a lane of its own from the start (under one `go test
# ./...` it waited ~5 min for a free slot of -p), in two halves; every other package, then
# Argo 4's validator and the KFP checks, run in the second lane meanwhile;
# the node-down test on Slurms of its own (hack/node-down-test.sh) in a third.
# Each lane's output is printed whole as it ends; the failures of all, last.
logs=$(mktemp -d "${TMPDIR:-/tmp}/bridge-test.XXXXXX")
# shellcheck disable=SC2086
gotest() { go test -tags bridgetest -count=1 -timeout 60m ${GO_TEST_FLAGS:-} "$@"; }
# Its parallel tests (crash points, outages: each runs its cases side by
# side, and they run one after another once the sequential tests are done)
# are a quarter of its time: they get a lane of their own, found as the top-level
# tests whose first statement is t.Parallel(), so a new one joins by itself.
# The sequential tests' partition fills (placement, re-placement) use
# partition short, which no parallel test uses.
cmd_parallel=$(awk '/^func Test[A-Za-z0-9_]*\(t \*testing\.T\) \{/ {
    name = $2; sub(/\(.*/, "", name)
    while ((getline line) > 0 && line ~ /^[ \t]*\/\//) {}
    if (line ~ /^\tt\.Parallel\(\)/) print name
  }' cmd/bridge-runner/*_test.go | paste -sd'|')
# ... and, to even the halves (~20 min each), the longest sequential test:
# the watcher's faults on Slurm (11 min: its cases side by side in it).
cmd_parallel=${cmd_parallel:+$cmd_parallel|TestWatcherFaultsOnSlurm}
cmd_lanes=()
if [ -n "${GO_TEST_FLAGS:-}" ] || [ -z "$cmd_parallel" ]; then
  gotest ./cmd/bridge-runner >"$logs/cmd.log" 2>&1 &
  cmd_lanes+=($!)
else
  # Each lane's package line says which half it is (the slowest list).
  (gotest -skip "^($cmd_parallel)\$" ./cmd/bridge-runner 2>&1 |
    sed 's|cmd/bridge-runner\t|cmd/bridge-runner (sequential tests)\t|') >"$logs/cmd.log" &
  cmd_lanes+=($!)
  (gotest -run "^($cmd_parallel)\$" ./cmd/bridge-runner 2>&1 |
    sed 's|cmd/bridge-runner\t|cmd/bridge-runner (parallel tests)\t|') >"$logs/cmd-parallel.log" &
  cmd_lanes+=($!)
fi
# Alone on its clusters: a node set down ends or requeues every job on it,
# so on the shared clusters it would fail other tests' jobs.
node_lane=
if [ -z "${GO_TEST_FLAGS:-}" ]; then
  bash "$HACK/node-down-test.sh" >"$logs/node-down.log" 2>&1 &
  node_lane=$!
fi
# BRIDGE_NOISE=1: other users' load on the shared services while the lanes
# run (hack/noise.sh: a job held for its begin time in every Slurm
# partition, a 1-CPU sleeper, a 3 s job every ~5 s; HTCondor and Ray
# likewise), so that a test which assumes a shared service idle fails on
# every run, not on the rare one where the lanes collide. Not yet the
# default: under it, the KFP check of examples/replace waits forever (its
# second cluster must look free, and the noise's begin-held job counts as
# backlog there), and a whole run under it has yet to pass.
noise() { BRIDGE_NOISE_DIR=$logs/noise bash "$HACK/noise.sh" "$@"; }
if [ "${BRIDGE_NOISE:-0}" = 1 ]; then
  noise start
  trap 'noise stop >/dev/null 2>&1 || true; down' EXIT
fi
rc=0
mapfile -t pkgs < <(go list -tags bridgetest ./... | grep -v '/cmd/bridge-runner$')
gotest "${pkgs[@]}" 2>&1 | tee "$logs/rest.log" || rc=$?
# Argo 4's own validator on every template and example (a module of its
# own: Argo 4 needs other Kubernetes library versions than the project),
# built as hack/build-cluster.sh builds Argo 4 so that both share the build
# cache (see ARGO4_GO in the Makefile).
(cd workflows/argo4 && CGO_ENABLED=0 go test -trimpath -count=1 ./...) || rc=$?
# The real KFP SDK loads every component and compiles every example pipeline.
bash hack/kfp-check.sh || rc=$?
# ... and runs the components under kfp.local's DockerRunner with a real
# Docker daemon (installed and started here if missing, stopped after).
bash hack/kfp-local.sh || rc=$?
echo "== go test ./cmd/bridge-runner (lanes of its own, from the start):"
for lane in "${cmd_lanes[@]}"; do
  wait "$lane" || rc=$?
done
cat "$logs/cmd.log" "$logs/cmd-parallel.log" 2>/dev/null || true
if [ -n "$node_lane" ]; then
  echo "== TestRealNodeDownIsInfrastructure on Slurms of its own (hack/node-down-test.sh):"
  wait "$node_lane" || rc=$?
  cat "$logs/node-down.log"
fi
if [ "${BRIDGE_NOISE:-0}" = 1 ]; then
  echo "== hack/noise.sh stop: $(noise stop 2>&1 | grep -c 'cancelled\|stopped\|marked for removal' || true) of the noise's jobs ended"
fi
cat "$logs"/{rest,cmd,cmd-parallel,node-down}.log >"$logs/all.log" 2>/dev/null || true
# The slowest packages (CI's time goes where these are), then the failures
# again, last: a long log's tail then names them.
echo "== slowest packages:"
awk -F'\t' '$1 ~ /^(ok|FAIL) *$/ && $3 ~ /s$/ {sub(/s$/, "", $3); printf "%8.1f s  %s\n", $3, $2}' "$logs/all.log" | sort -rn | head -n 8
[ "$rc" = 0 ] || report_failures "$logs/all.log"
rm -rf "$logs"
exit "$rc"
