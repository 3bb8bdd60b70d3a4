#!/usr/bin/env bash
# Starts a real S3 server (versitygw, posix backend) on 127.0.0.1 for the tests
# of S3 staging, and writes an env file that the tests (and people) can source.
#
#   bash hack/s3-up.sh && source "${BRIDGE_S3_DIR:-/tmp/bridge-runner-s3}/env"
#   go test ./runner/ -run S3 -count=1
#   bash hack/s3-down.sh          # stops exactly what this started
#
# versitygw is built once from the Go module proxy (no release downloads are
# reachable here) with `go install` into $BRIDGE_CACHE/versitygw/<version>/ and
# reused afterwards. The build runs in a throwaway GOPATH and GOCACHE, removed
# afterwards: it would otherwise leave 0.7-2 GB of modules and objects behind
# for a single binary.
#
# Idempotent: if the server of this state dir is up and healthy, it only prints
# the env file path. A half-started or stale state dir is cleared first (its
# data included: it only ever holds test buckets).
#
# Environment:
#   BRIDGE_S3_DIR        state dir (data, credentials, env, log, PID file);
#                        default /tmp/bridge-runner-s3. versitygw keeps object
#                        metadata in extended attributes: the file system must
#                        support user xattrs (ext4, xfs, btrfs, tmpfs >= 6.6).
#   BRIDGE_CACHE         build cache (default ~/.cache/bridge-runner)
#   VERSITYGW_VERSION    version to build (default v1.8.0)
#   BRIDGE_S3_TIMEOUT    seconds to wait for the health endpoint (default 30)
#   BRIDGE_S3_LISTEN     the address of this machine to listen on instead of
#                        127.0.0.1, e.g. the node's own address so that pods of
#                        the e2e cluster reach it (default 127.0.0.1)
#
# The env file exports:
#   BRIDGE_TEST_S3_ENDPOINT    host:port (plain HTTP on 127.0.0.1)
#   BRIDGE_TEST_S3_ACCESS_KEY  root access key, random per start
#   BRIDGE_TEST_S3_SECRET_KEY  root secret key, random per start
#   BRIDGE_TEST_S3_CREDS_DIR   a directory laid out like a mounted Kubernetes
#                              Secret: files accesskey and secretkey (each
#                              ending in a newline, as `echo` would write them)
set -euo pipefail

HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/lib.sh
source "$HACK/lib.sh"

STATE=${BRIDGE_S3_DIR:-/tmp/bridge-runner-s3}
STATE=${STATE%/}
VERSION=${VERSITYGW_VERSION:-v1.8.0}
CACHE=${BRIDGE_CACHE:-$HOME/.cache/bridge-runner}
TIMEOUT=${BRIDGE_S3_TIMEOUT:-30}
LISTEN=${BRIDGE_S3_LISTEN:-127.0.0.1}
t0=$(now_ms)

mkdir -p "$(dirname "$STATE")"
with_lock "$STATE.lock"

# is_up : the server recorded in $STATE runs and answers its health endpoint.
is_up() {
  [ -f "$STATE/env" ] && [ -f "$STATE/port" ] || return 1
  pidfile_alive "$STATE/versitygw.pid" || return 1
  [ "$(cat "$STATE/listen" 2>/dev/null || echo 127.0.0.1)" = "$LISTEN" ] || return 1
  wait_for_http 3 "http://$LISTEN:$(cat "$STATE/port")/health" 2>/dev/null
}

if [ "$LISTEN" != 127.0.0.1 ]; then
  ip -o addr show 2>/dev/null | awk '{split($4, a, "/"); print a[1]}' | grep -qxF "$LISTEN" ||
    die "BRIDGE_S3_LISTEN=$LISTEN is not an address of this machine"
fi

if is_up; then
  log "versitygw already up at $LISTEN:$(cat "$STATE/port") (state $STATE)"
  echo "$STATE/env"
  exit 0
fi

if [ -e "$STATE" ]; then
  log "stale state in $STATE: cleaning up"
  stop_pidfile "$STATE/versitygw.pid"
  safe_rm_state_dir "$STATE"
fi

# ---------------------------------------------------------------- binary
need_cmd curl || die "could not install curl"

BIN=$(VERSITYGW_VERSION=$VERSION bash "$HACK/build-versitygw.sh" 9>&- | tail -n 1)
[ -x "$BIN" ] || die "hack/build-versitygw.sh did not build versitygw $VERSION"
t_bin=$(now_ms)

# ---------------------------------------------------------------- credentials
# Random per start, so nothing depends on a well-known key. Hex only: valid in
# an access key, and safe unquoted in the env file.
rand_hex() { od -An -N"$1" -tx1 /dev/urandom | tr -d ' \n'; }
ACCESS_KEY=BRT$(rand_hex 8 | tr a-f A-F)
SECRET_KEY=$(rand_hex 20)

mkdir -p "$STATE/data" "$STATE/creds"
chmod 700 "$STATE" "$STATE/creds"
# Files as in a mounted Secret made with `kubectl create secret --from-file` of
# files written by echo: trailing newline included, the reader must trim it.
printf '%s\n' "$ACCESS_KEY" >"$STATE/creds/accesskey"
printf '%s\n' "$SECRET_KEY" >"$STATE/creds/secretkey"
chmod 600 "$STATE/creds/accesskey" "$STATE/creds/secretkey"

# versitygw's posix backend stores object metadata (ETag, content type, ...) in
# user xattrs; fail early and clearly where the file system lacks them.
if command -v setfattr >/dev/null 2>&1; then
  touch "$STATE/data/.xattr-probe"
  setfattr -n user.probe -v 1 "$STATE/data/.xattr-probe" 2>/dev/null \
    || die "$STATE is on a file system without user xattrs; set BRIDGE_S3_DIR to a directory on ext4/xfs"
  rm -f "$STATE/data/.xattr-probe"
fi

# ---------------------------------------------------------------- start
start_server() {
  PORT=$(free_ports 1) || return 1
  echo "$PORT" >"$STATE/port"
  echo "$LISTEN" >"$STATE/listen"
  # The keys go through the environment, not argv, so they do not show in ps.
  # `env` execs versitygw, so the PID in the PID file is versitygw's own.
  start_daemon "$STATE/versitygw.pid" "$STATE/versitygw.log" \
    env ROOT_ACCESS_KEY="$ACCESS_KEY" ROOT_SECRET_KEY="$SECRET_KEY" \
    "$BIN" --port "$LISTEN:$PORT" --health /health posix "$STATE/data" || return 1
  wait_for_http -p "$STATE/versitygw.pid" "$TIMEOUT" "http://$LISTEN:$PORT/health"
}

# A picked port can be taken before versitygw binds it: retry with a new one.
ok=
for attempt in 1 2 3; do
  rc=0
  start_server || rc=$?
  if [ "$rc" = 0 ]; then ok=1; break; fi
  tail_logs 30 "$STATE/versitygw.log"
  stop_pidfile "$STATE/versitygw.pid"
  if grep -qi 'address already in use' "$STATE/versitygw.log" 2>/dev/null && [ "$attempt" -lt 3 ]; then
    log "port clash on attempt $attempt: retrying with a new port"
    mv "$STATE/versitygw.log" "$STATE/versitygw.log.$attempt"
    continue
  fi
  die "versitygw did not become healthy (rc=$rc); log in $STATE/versitygw.log (hack/s3-down.sh removes the state dir)"
done
[ -n "$ok" ]

cat >"$STATE/env" <<ENV
# Written by hack/s3-up.sh; source it before running the tests.
export BRIDGE_TEST_S3_ENDPOINT=$LISTEN:$PORT
export BRIDGE_TEST_S3_ACCESS_KEY=$ACCESS_KEY
export BRIDGE_TEST_S3_SECRET_KEY=$SECRET_KEY
export BRIDGE_TEST_S3_CREDS_DIR=$STATE/creds
export BRIDGE_S3_DIR=$STATE
ENV
chmod 600 "$STATE/env"

log "versitygw $VERSION ready at http://$LISTEN:$PORT: $(elapsed_s "$t0")s total," \
  "$(elapsed_s "$t_bin")s from the binary"
log "to use it: source $STATE/env"
echo "$STATE/env"
