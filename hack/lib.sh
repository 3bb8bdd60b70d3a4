# shellcheck shell=bash
# Shared helpers for the hack/*-up.sh / *-down.sh scripts that run real services on
# loopback for the tests (kube-apiserver + etcd, Slurm, ...). Source it:
#
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#
# Every function is generic (no knowledge of a particular service) and only ever binds
# to / talks to 127.0.0.1. Functions return non-zero instead of exiting, except die.
# The caller is expected to run with `set -euo pipefail`.

# log MSG... : prints a timestamped message on stderr (stdout stays free for results).
log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# die MSG... : logs and exits 1.
die() { log "ERROR: $*"; exit 1; }

# now_ms : milliseconds since the epoch (for timings).
now_ms() { date +%s%3N; }

# elapsed_s START_MS : seconds since START_MS with one decimal, e.g. "3.4".
elapsed_s() {
  local d=$(( $(now_ms) - $1 ))
  printf '%d.%d' $(( d / 1000 )) $(( (d % 1000) / 100 ))
}

# need_cmd CMD [DEBIAN_PACKAGE] : makes sure CMD is on PATH, installing the Debian package
# (default: CMD) with apt-get if it is missing. `apt-get update` is run only when the
# plain install fails, since the package lists are usually already there and updating
# them costs tens of seconds.
need_cmd() {
  local cmd=$1 pkg=${2:-$1}
  command -v "$cmd" >/dev/null 2>&1 && return 0
  log "$cmd not found: installing Debian package $pkg"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -q "$pkg" >&2; then
    log "apt-get install $pkg failed; retrying after apt-get update"
    apt-get update -q >&2 && apt-get install -y -q "$pkg" >&2 || return 1
  fi
  command -v "$cmd" >/dev/null 2>&1
}

# need_cmd_no_service CMD DEBIAN_PACKAGE : as need_cmd, for a package that ships a daemon
# (e.g. prometheus, for its promtool): its maintainer scripts are kept from starting it
# (policy-rc.d) and, under systemd, its unit is disabled. Only our scripts run it, on
# loopback, with their own config.
need_cmd_no_service() {
  local cmd=$1 pkg=$2 policy_added= rc=0
  command -v "$cmd" >/dev/null 2>&1 && return 0
  log "$cmd not found: installing Debian package $pkg (its service kept off)"
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    policy_added=1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends "$pkg" >/dev/null ||
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends "$pkg" >/dev/null; } || rc=$?
  [ -z "$policy_added" ] || rm -f /usr/sbin/policy-rc.d
  if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    systemctl disable --now "$pkg" >/dev/null 2>&1 || true
  fi
  [ "$rc" = 0 ] && command -v "$cmd" >/dev/null 2>&1
}

# free_ports N : prints N distinct TCP ports that are free on 127.0.0.1, one per line.
# With python3 the kernel picks them (bind to port 0); all N sockets are held open at
# once so that the same port cannot be returned twice. There is an unavoidable window
# between picking and the service binding the port, so callers should retry on a bind
# failure. Without python3, falls back to probing random ports in the ephemeral range
# with bash's /dev/tcp (a refused connection = nobody listens there).
free_ports() {
  local n=$1
  if command -v python3 >/dev/null 2>&1; then
    python3 - "$n" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print("\n".join(str(s.getsockname()[1]) for s in socks))
PY
    return
  fi
  local -a got=() ; local p tries=0
  while [ ${#got[@]} -lt "$n" ]; do
    (( ++tries > 1000 )) && return 1
    p=$(( 20000 + RANDOM % 30000 ))
    [[ " ${got[*]} " == *" $p "* ]] && continue
    # A successful connect means the port is taken.
    if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then continue; fi
    got+=("$p")
  done
  printf '%s\n' "${got[@]}"
}

# proc_starttime PID : prints the start time of PID (field 22 of /proc/PID/stat, in clock
# ticks since boot), or fails if PID does not exist. Together with the PID it identifies
# a process uniquely, so a recycled PID is never mistaken for ours.
proc_starttime() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  # The command name (field 2) may contain spaces; cut after its closing parenthesis.
  stat=${stat##*) }
  # Now field 3 (state) is the first word, so field 22 is word 20.
  awk '{print $20}' <<<"$stat"
}

# pidfile_alive PIDFILE : succeeds if PIDFILE exists and the process it names is still the
# one that was started (same PID and start time) and is not a zombie.
pidfile_alive() {
  local f=$1 pid start cur state
  [ -s "$f" ] || return 1
  read -r pid start <"$f" || return 1
  [ -n "$pid" ] || return 1
  cur=$(proc_starttime "$pid") || return 1
  [ -z "$start" ] || [ "$cur" = "$start" ] || return 1
  state=$(awk '/^State:/{print $2}' "/proc/$pid/status" 2>/dev/null) || return 1
  [ "$state" != Z ]
}

# pidfile_pid PIDFILE : prints the PID recorded in PIDFILE.
pidfile_pid() { awk '{print $1; exit}' "$1"; }

# start_daemon PIDFILE LOGFILE CMD [ARGS...] : starts CMD in the background, detached
# from this shell (own session via setsid, stdin from /dev/null, stdout+stderr appended to
# LOGFILE) so that it survives the end of the calling script and its terminal, and writes
# "PID STARTTIME" to PIDFILE. The recorded PID is CMD's own: setsid does not fork when
# the caller is not a process-group leader, which a background job of a script never is.
start_daemon() {
  local pidfile=$1 logfile=$2 pid start; shift 2
  # 9>&- : do not hand the with_lock descriptor down, or the daemon would hold the
  # lock for as long as it runs.
  setsid "$@" >>"$logfile" 2>&1 </dev/null 9>&- &
  pid=$!
  start=$(proc_starttime "$pid") || { log "$1 exited immediately; see $logfile"; return 1; }
  echo "$pid $start" >"$pidfile"
}

# stop_pidfile PIDFILE [TIMEOUT_S=10] : stops the process recorded in PIDFILE, if it is
# still the one we started: SIGTERM, then SIGKILL after TIMEOUT_S seconds. Removes PIDFILE.
# Never signals a process that merely reuses the PID. Idempotent.
stop_pidfile() {
  local f=$1 timeout=${2:-10} pid i
  [ -e "$f" ] || return 0
  if pidfile_alive "$f"; then
    pid=$(pidfile_pid "$f")
    kill -TERM "$pid" 2>/dev/null || true
    for (( i = 0; i < timeout * 10; i++ )); do
      pidfile_alive "$f" || break
      sleep 0.1
    done
    if pidfile_alive "$f"; then
      log "pid $pid ignored SIGTERM for ${timeout}s: sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      for (( i = 0; i < 50; i++ )); do pidfile_alive "$f" || break; sleep 0.1; done
    fi
    # The daemon was orphaned when its starter exited, so PID 1 reaps it. Some inits (this
    # sandbox's) do that only every second or two, leaving a "<defunct>" entry that
    # confuses `pgrep`; wait a little for it to disappear. Harmless if it never does.
    local start; start=$(awk '{print $2}' "$f")
    for (( i = 0; i < 50; i++ )); do
      [ "$(proc_starttime "$pid" 2>/dev/null)" = "$start" ] || break
      sleep 0.1
    done
  fi
  rm -f "$f"
}

# wait_for_http [-p PIDFILE]... TIMEOUT_S URL [CURL_ARGS...] : polls URL with curl until it
# answers 2xx (and, if EXPECT_BODY is set, the body equals it), for at most TIMEOUT_S
# seconds. Each -p PIDFILE names a process that must stay alive meanwhile: if it dies
# the wait fails at once instead of running into the timeout. Extra CURL_ARGS pass
# credentials, e.g. --cacert ca.crt -H "Authorization: Bearer ...".
# Returns 0 when ready, 1 on timeout, 2 if a watched process died.
wait_for_http() {
  local -a pidfiles=()
  while [ "${1:-}" = -p ]; do pidfiles+=("$2"); shift 2; done
  local timeout=$1 url=$2; shift 2
  local deadline=$(( $(now_ms) + timeout * 1000 )) body f
  while :; do
    if body=$(curl -fsS --max-time 2 "$@" "$url" 2>/dev/null); then
      if [ -z "${EXPECT_BODY:-}" ] || [ "$body" = "$EXPECT_BODY" ]; then return 0; fi
    fi
    for f in "${pidfiles[@]}"; do
      pidfile_alive "$f" || { log "process of $f died while waiting for $url"; return 2; }
    done
    [ "$(now_ms)" -lt "$deadline" ] || { log "timed out after ${timeout}s waiting for $url"; return 1; }
    sleep 0.1
  done
}

# tail_logs N FILE... : prints the last N lines of each existing FILE on stderr, with a
# header, to explain a failed start.
tail_logs() {
  local n=$1 f; shift
  for f in "$@"; do
    [ -e "$f" ] || continue
    printf -- '----- last %s lines of %s -----\n' "$n" "$f" >&2
    tail -n "$n" "$f" >&2
  done
}

# safe_rm_state_dir DIR : rm -rf DIR, refusing paths that are obviously not a dedicated
# state directory (empty, /, a top-level directory, $HOME), in case a variable is unset
# or mistyped.
safe_rm_state_dir() {
  local d=${1%/}
  case "$d" in
    ''|/|"$HOME") die "refusing to remove suspicious state dir '$1'" ;;
  esac
  [[ "/$d/" != *"/../"* ]] || die "refusing to remove a path with '..': '$1'"
  [[ "$d" == /*/* ]] || die "refusing to remove top-level directory '$1'"
  rm -rf -- "$d"
}

# with_lock LOCKFILE [SECONDS] : takes an exclusive flock on LOCKFILE (waiting up to
# SECONDS, default 120) on fd 9 for the rest of the calling script, so that concurrent
# up/down runs on the same state dir serialize instead of racing. start_daemon closes fd 9
# for its children; close it yourself (9>&-) for any other long-lived process you start
# while holding the lock. Builds of cached parts wait longer (BUILD_LOCK_WAIT): a second
# caller, such as a service starting while hack/prefetch.sh still builds its part, waits
# for that build and then finds it done.
BUILD_LOCK_WAIT=2400
with_lock() {
  local wait=${2:-120}
  exec 9>"$1"
  flock -w "$wait" 9 || die "could not lock $1 within ${wait}s (another run still holds it?)"
}

# debian_mirror : the Debian mirror apt already uses (deb822 or one-line sources), so a
# debootstrap reaches nothing new; BRIDGE_DEBIAN_MIRROR overrides it, deb.debian.org if
# none is found.
debian_mirror() {
  [ -n "${BRIDGE_DEBIAN_MIRROR:-}" ] && { echo "$BRIDGE_DEBIAN_MIRROR"; return; }
  local m
  m=$(grep -hE '^[[:space:]]*(URIs:|deb )' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null |
    grep -oE 'https?://[^ ]+/debian/?( |$)' | head -1 | tr -d ' ' || true)
  echo "${m:-http://deb.debian.org/debian}"
}

# The Argo release the e2e cluster starts with (the whole suite runs on it), and the
# releases hack/e2e.sh swaps in afterwards for the controller-decided subset
# (E2E_ARGO_ALSO overrides the latter). Argo 4 is the default: 3.7 is out of
# upstream support and KFP 3.0 drops Argo 3.x. v4.0.7: the newest Argo 4 the Go
# module proxy serves here on 2026-11-29 (v4.0.3, .4, .6 and .8 on are refused;
# v4.0.5 is served but reported with security flaws, so not it); v3.7.18: the
# newest 3.7.
ARGO_DEFAULT_VERSION=v4.0.7
ARGO_ALSO_DEFAULT=v3.7.18

# report_failures LOG: the failed Go tests of a `go test` log (-v or not) and
# their own messages (file_test.go:N: lines and up to 8 lines continuing
# each, as testify's Error and Messages; each cut at 240 characters; a dump
# a test logs after its "--- " heading is left out), printed last so
# that a log's tail (all CI shows) names the failure, not only the dumps.
report_failures() {
  [ -s "$1" ] || return 0
  grep -q -- '--- FAIL: ' "$1" || return 0
  echo "== failed tests and their messages (from $1):" >&2
  awk '
    FNR == NR { if (match($0, /--- FAIL: [^ ]+/)) failed[substr($0, RSTART + 10, RLENGTH - 10)] = 1; next }
    /^=== (RUN|CONT|NAME|PAUSE) / { cur = $3; more = 0; next }
    /^ *--- (FAIL|PASS|SKIP): / { cur = $3; more = 0; if ($2 == "FAIL:") print substr($0, 1, 240); next }
    /^ +[A-Za-z0-9_]+_test\.go:[0-9]+: / {
      more = 0
      if ((cur in failed) && !/_test\.go:[0-9]+: --- /) { print substr($0, 1, 240); more = 8 }
      next
    }
    more > 0 && /Error Trace:|_test\.go:[0-9]+$/ { next }
    more > 0 && /^ / { print substr($0, 1, 240); more--; next }
    { more = 0 }
  ' "$1" "$1" | head -n 160 >&2
}
