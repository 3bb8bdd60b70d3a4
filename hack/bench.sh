#!/usr/bin/env bash
# The benchmarks (make bench): starts the real services, runs ./bench,
# prints the figures (see BENCHMARKS.md for a recorded run), stops what it
# started. BENCH='Local|Startup' runs some; BRIDGE_BENCH_SCALE=100,250
# picks the scale sizes (default 100,250,500).
set -euo pipefail
HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$(dirname "$HACK")"
# shellcheck source=hack/services.sh
source "$HACK/services.sh"
BENCH=${BENCH:-.}
echo "== machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(go version)"
# Per-job figures are averaged over 3 runs; each scale size runs once.
if [ "$BENCH" = . ]; then BENCH='^Benchmark(Local|Slurm|ConfigMapStore|Startup)'; SCALE=1; fi
go test -tags bridgetest -run '^$' -bench "$BENCH" -benchtime 3x -timeout 30m ./bench/
if [ -n "${SCALE:-}" ]; then
  go test -tags bridgetest -run '^$' -bench '^BenchmarkScale' -benchtime 1x -timeout 30m ./bench/
fi
