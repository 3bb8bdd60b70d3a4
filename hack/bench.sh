#!/usr/bin/env bash
# The benchmarks (make bench): starts the real services, runs ./bench,
# prints the figures (see BENCHMARKS.md for a recorded run), stops what it
# started. BENCH='Local|Startup' runs some; BRIDGE_BENCH_SCALE=100,250
# picks the scale sizes (default 100,250,500); BRIDGE_BENCH_PROCS the
# number of concurrent invoke processes (default 100); BRIDGE_BENCH_WATCH
# and BRIDGE_BENCH_WATCH_SECONDS the watcher benchmark's sizes and job
# lengths (default 1,100 jobs of 5 s; Slurm 22.05 and 24.11, about 8 min),
# BRIDGE_BENCH_WATCH_BACKENDS its clusters (default slurm=22.05,slurm=24.11;
# also slurm=26.05, slurm=ssh, htcondor, ray); BRIDGE_BENCH_AGENT and
# BRIDGE_BENCH_AGENT_SECONDS the agent benchmark's (the cluster's agent, the
# in-step watcher and polling alone in turn: default 1,100 jobs of 5 s on
# Slurm 24.11, about 7 min; BRIDGE_BENCH_AGENT=1,100,500 adds 500: 500
# invoke processes at once, about 10 GiB of RSS);
# BRIDGE_BENCH_PROBE_JOBS the Slurm load probe's job counts (default
# 100,1000 on the real 26.05: jobs/ against slurmctld's metrics, about 2 min);
# BRIDGE_BENCH_ARRAY the array benchmark's sizes (here 100 tasks against
# 100 invokes, about 30 s: at 1,000 the separate invokes swamp this
# machine's one slurmrestd for over 10 min, see BENCHMARKS.md, Arrays);
# BRIDGE_BENCH_ARRAY_CHUNKS the split array benchmark's sizes (an array past
# 22.05's MaxArraySize against arrays of 1,000 by hand; here 2000, about
# 15 min on this machine; the benchmark's own default is 5000);
# BRIDGE_BENCH_PLACE_JOBS, BRIDGE_BENCH_PLACE_SECONDS and
# BRIDGE_BENCH_PLACE_FILL_SECONDS the placement benchmark's jobs, their
# length and its background jobs' (default 40 of 10 s, 40 s: about 7 min;
# it needs root, for the private Slurm 24.11 it fills).
#
# The guard (bench/guard_test.go) compares size and memory figures with
# bench/baseline.json (more than 10 % worse fails), time figures with a
# reference build timed in turn with this one in the same run
# (bench/reference_test.go: more than 1.25x its time fails), and the scale
# benchmark's heap per invoker with a ceiling; a failure prints a
# "BENCH-GUARD FAIL" line and this script exits 1 at the end.
# BRIDGE_BENCH_RECORD=1 records the size and memory figures as the new
# baseline; BRIDGE_BENCH_REFERENCE=/path/to/bridge-runner is the reference
# build to time against (by default one built from the commit the baseline
# was recorded at, which needs the git history).
set -euo pipefail
HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$(dirname "$HACK")"
# shellcheck source=hack/services.sh
source "$HACK/services.sh"
BENCH=${BENCH:-.}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "== machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(go version)"
# Per-job figures are averaged over 3 runs; each scale size and the
# concurrent processes run once.
if [ "$BENCH" = . ]; then BENCH='^Benchmark(Local|Slurm|SlurmSSH|HTCondor|SlurmConfigMap|ConfigMapStore|Startup|FirstRequest)$'; ONCE=1; fi
go test -tags bridgetest -run '^$' -bench "$BENCH" -benchtime 3x -timeout 30m ./bench/ | tee -a "$out"
if [ -n "${ONCE:-}" ]; then
  # Job output in the step's log: each figure is one run of a job printing
  # 12 stamped lines (LSF and Quantum through their fakes, in process).
  go test -tags bridgetest -run '^$' -bench '^BenchmarkLog' -benchtime 1x -timeout 30m ./bench/ ./backends/lsf/ ./backends/quantum/ | tee -a "$out"
  BRIDGE_BENCH_ARRAY=${BRIDGE_BENCH_ARRAY:-100} go test -tags bridgetest -run '^$' -bench '^Benchmark(Scale|ConcurrentInvokes|Operator|Watcher|Agent|Array|Placement)$' -benchtime 1x -timeout 55m ./bench/ | tee -a "$out"
  BRIDGE_BENCH_ARRAY_CHUNKS=${BRIDGE_BENCH_ARRAY_CHUNKS:-2000} go test -tags bridgetest -run '^$' -bench '^BenchmarkArrayChunks$' -benchtime 1x -timeout 60m ./bench/ | tee -a "$out"
  # Last: it leaves its cancelled jobs known to the 26.05 for MinJobAge.
  go test -tags bridgetest -run '^$' -bench '^BenchmarkRealProbeScale$' -benchtime 1x -timeout 20m ./backends/slurm/ | tee -a "$out"
fi
if grep -q 'BENCH-GUARD FAIL' "$out"; then
  echo "== the guard found regressions (against bench/baseline.json, the reference build or a ceiling):"
  grep -o 'BENCH-GUARD FAIL.*' "$out"
  exit 1
fi
echo "== guard: no figure regressed (size and memory within 10 % of bench/baseline.json, time within 1.25x of the reference build, heap under its ceiling)"
