#!/usr/bin/env bash
# build-versitygw.sh: builds the S3 server versitygw (VERSITYGW_VERSION, default
# v1.8.0) once from the Go module proxy (no release downloads are reachable here)
# into $BRIDGE_CACHE/versitygw/<version>/ and prints the binary's path.
#
# The build runs in a throwaway GOPATH and GOCACHE, removed afterwards: it would
# otherwise leave 0.7-2 GB of modules and objects behind for a single binary.
# Idempotent; two callers at once build once (the second waits for the first).
set -euo pipefail
HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/lib.sh
source "$HACK/lib.sh"

VERSION=${VERSITYGW_VERSION:-v1.8.0}
CACHE=${BRIDGE_CACHE:-$HOME/.cache/bridge-runner}
OUT=$CACHE/versitygw/$VERSION
BIN=$OUT/versitygw

[ -x "$BIN" ] && { echo "$BIN"; exit 0; }
mkdir -p "$OUT"
with_lock "$OUT.lock" "$BUILD_LOCK_WAIT"
[ -x "$BIN" ] && { echo "$BIN"; exit 0; }
need_cmd go golang-go || die "Go is needed to build versitygw"

work=$(mktemp -d "${TMPDIR:-/tmp}/versitygw-build.XXXXXX")
# shellcheck disable=SC2064
trap "rm -rf '$work'" EXIT
log "building versitygw $VERSION with go install (about 2.5 min on a cold cache)..."
tb=$(now_ms)
# GOSUMDB=off: sum.golang.org is not reachable here, only the module proxy.
# -modcacherw: the throwaway module cache must be removable with rm -rf.
# CGO_ENABLED=0: a static binary, independent of the host's libc.
env GOPATH="$work/gopath" GOCACHE="$work/gocache" GOBIN="$work/bin" \
  GOFLAGS="-modcacherw -buildvcs=false" GOSUMDB=off GOTOOLCHAIN=local CGO_ENABLED=0 \
  go install -trimpath -ldflags='-s -w' "github.com/versity/versitygw/cmd/versitygw@$VERSION" >&2 \
  || die "go install github.com/versity/versitygw/cmd/versitygw@$VERSION failed"
mv "$work/bin/versitygw" "$BIN.tmp"
mv "$BIN.tmp" "$BIN"
log "built $BIN in $(elapsed_s "$tb")s ($(du -m "$BIN" | cut -f1) MiB)"
echo "$BIN"
