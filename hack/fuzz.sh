#!/usr/bin/env bash
# Run every fuzz target for a short time, one at a time (go test runs one
# fuzz target per invocation), and exit non-zero if any failed.
#
#   bash hack/fuzz.sh                    # FUZZTIME=10s each
#   FUZZTIME=5s bash hack/fuzz.sh        # CI
#   FUZZTIME=5m bash hack/fuzz.sh ./backends/lsf   # one package, longer
#
# A failing input is written to <pkg>/testdata/fuzz/<FuzzX>/<hash>; from then
# on it runs as an ordinary test case of `go test` (commit it with the fix).
set -uo pipefail
cd "$(dirname "$0")/.."

FUZZTIME=${FUZZTIME:-10s}
# Parallel fuzzing workers per target (go test's default is GOMAXPROCS).
FUZZ_PARALLEL=${FUZZ_PARALLEL:-}
pkgs=("$@")
if [ ${#pkgs[@]} -eq 0 ]; then
	pkgs=(./record ./runner ./backends/slurm ./backends/lsf ./backends/quantum ./backends/ray ./backends/local)
fi

start=$SECONDS
total=0
failed=()
log=$(mktemp)
trap 'rm -f "$log"' EXIT

for pkg in "${pkgs[@]}"; do
	# Build the package's test binary once, to list the targets and catch
	# compile errors before any fuzzing.
	if ! targets=$(go test -tags bridgetest -list '^Fuzz' "$pkg" 2>"$log" | grep '^Fuzz'); then
		if grep -q . "$log"; then
			echo "FAIL $pkg: cannot list fuzz targets:"
			cat "$log"
			failed+=("$pkg")
		fi
		continue
	fi
	for target in $targets; do
		total=$((total + 1))
		t0=$SECONDS
		args=(-run='^$' -fuzz="^${target}\$" -fuzztime="$FUZZTIME" -tags=bridgetest)
		[ -n "$FUZZ_PARALLEL" ] && args+=(-parallel="$FUZZ_PARALLEL")
		ok=false
		if go test "${args[@]}" "$pkg" >"$log" 2>&1; then
			ok=true
		elif grep -q 'context deadline exceeded' "$log" && ! grep -q 'Failing input written' "$log"; then
			# Go's fuzzer fails this way when FUZZTIME ends while it is still
			# running the seed corpus for baseline coverage (a slow or busy
			# machine): no input failed. Give it time to get past that once.
			echo "     $pkg $target: FUZZTIME ended before the seed corpus ran; again with 3x$FUZZTIME"
			args[2]="-fuzztime=$(awk -v t="$FUZZTIME" 'BEGIN { n = t + 0; u = substr(t, length(n "") + 1); print n * 3 u }')"
			go test "${args[@]}" "$pkg" >"$log" 2>&1 && ok=true
		fi
		if $ok; then
			execs=$(grep -o 'execs: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
			echo "ok   $pkg $target ($((SECONDS - t0)) s, ${execs:-?} execs)"
		else
			echo "FAIL $pkg $target ($((SECONDS - t0)) s)"
			sed 's/^/    /' "$log" | grep -v '^    fuzz: elapsed' | tail -40
			failed+=("$pkg:$target")
		fi
	done
done

if [ ${#failed[@]} -gt 0 ]; then
	echo "fuzz: ${#failed[@]} of $total targets FAILED in $((SECONDS - start)) s (FUZZTIME=$FUZZTIME): ${failed[*]}"
	exit 1
fi
echo "fuzz: all $total targets passed in $((SECONDS - start)) s (FUZZTIME=$FUZZTIME each)"
