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

# shellcheck disable=SC2086
# bridgetest: the test hooks (crash points), absent from release builds.
# 60m per package: cmd/bridge-runner's tests against the real services (grace
# periods, retry budgets, black holes, crash points) wait out real time: ~40 min
# with make e2e running beside (as in CI), under the 90 of CI.
testlog=$(mktemp "${TMPDIR:-/tmp}/bridge-test.XXXXXX")
rc=0
go test -tags bridgetest -count=1 -timeout 60m ${GO_TEST_FLAGS:-} ./... 2>&1 | tee "$testlog" || rc=$?
# The slowest packages (CI's time goes where these are), then the failures
# again, last: a long log's tail then names them.
echo "== slowest packages:"
awk -F'\t' '$1 ~ /^(ok|FAIL) *$/ && $3 ~ /s$/ {sub(/s$/, "", $3); printf "%8.1f s  %s\n", $3, $2}' "$testlog" | sort -rn | head -n 8
[ "$rc" = 0 ] || { report_failures "$testlog"; rm -f "$testlog"; exit "$rc"; }
rm -f "$testlog"
# Alone, once nothing else uses the Slurm clusters: a node set down ends or
# requeues every job on it, so this test would fail other tests' jobs.
[ -n "${GO_TEST_FLAGS:-}" ] || BRIDGE_TEST_NODE_DOWN=1 go test -tags bridgetest -count=1 -timeout 10m -run '^TestRealNodeDownIsInfrastructure$' ./backends/slurm
# Argo 4's own validator on every template and example (a module of its
# own: Argo 4 needs other Kubernetes library versions than the project),
# built as hack/build-cluster.sh builds Argo 4 so that both share the build
# cache (see ARGO4_GO in the Makefile).
(cd workflows/argo4 && CGO_ENABLED=0 go test -trimpath -count=1 ./...)
# The real KFP SDK loads every component and compiles every example pipeline.
bash hack/kfp-check.sh
# ... and runs the components under kfp.local's DockerRunner with a real
# Docker daemon (installed and started here if missing, stopped after).
bash hack/kfp-local.sh
