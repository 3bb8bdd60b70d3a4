#!/usr/bin/env bash
# slurm2605-up.sh: start a private, single-node Slurm 26.05 with slurmrestd
# (REST API v0.0.42-v0.0.45), slurmdbd and MariaDB (accounting) and
# slurmctld's OpenMetrics endpoints on 127.0.0.1, beside the host's Slurm
# 22.05 of hack/slurm-up.sh and the 24.11 of hack/slurm2411-up.sh, and write
# an env file for the tests:
#
#   hack/slurm2605-up.sh        # build the chroot if needed, start, mint a token
#   . /tmp/bridge-runner-slurm2605/env && go test ./backends/slurm/ -count=1
#   hack/slurm2605-down.sh      # stop exactly what this started, unmount
#
# Slurm 26.05 comes from Debian unstable, in a root built once by
# hack/build-sid-slurm.sh and cached, and started like hack/slurm2411-up.sh's 24.11.
# Each run mounts an overlay over that
# cached tree at $DIR/root (keys, config, spool and the jobs' /tmp of this
# run go to $DIR/upper), binds /proc, /sys and /dev into it and mounts a
# fresh tmpfs on /run. The daemons run chrooted, as the chroot's users. The
# host's /tmp is deliberately not shared: job ids of the two clusters
# collide, and Slurm's default slurm-<id>.out of one cluster's user would
# block the other's in a sticky /tmp. Tests find a job's file at
# $BRIDGE_TEST_SLURM2605_ROOT/<path>.
#
# Idempotent: if everything is already running it only mints a new token and
# rewrites the env file; a half-started set is stopped and started again.
#
# Needs root. Settings:
#   BRIDGE_SLURM2605_DIR         state directory (/tmp/bridge-runner-slurm2605)
#   BRIDGE_SLURM_TOKEN_LIFESPAN  token lifespan in seconds (86400)
#   BRIDGE_SLURM_MIN_JOB_AGE     MinJobAge in seconds (600)
#   BRIDGE_SLURM2605_CPUS        CPUs the node claims (default: this machine's, at
#                                least 8); the watcher's benchmark claims one per job
#   BRIDGE_SLURM2605_METRICS     1 (default): slurmctld serves /metrics/* on its port
#                                (MetricsType=metrics/openmetrics, MetricsAuthUsers=the
#                                job user, who sends a JWT); 0: none, as on a site that
#                                did not enable them
#   BRIDGE_SLURM2605_ACCOUNTING  1 (default): slurmdbd and MariaDB keep accounting
#                                (slurmrestd serves /slurmdb/); 0: none (a faster start)
#
# A second instance beside the shared one: another BRIDGE_SLURM2605_DIR (own
# ports, own overlay over the one read-only cached root, own munge key); the
# load probe's test of a 26.05 without metrics starts one this way:
#   BRIDGE_SLURM2605_DIR=/tmp/bridge-runner-slurm2605-nometrics \
#   BRIDGE_SLURM2605_METRICS=0 BRIDGE_SLURM2605_ACCOUNTING=0 hack/slurm2605-up.sh
set -euo pipefail
HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/lib.sh
source "$HACK/lib.sh"
# shellcheck source=hack/chroot-slurm.sh
source "$HACK/chroot-slurm.sh"

DIR=${BRIDGE_SLURM2605_DIR:-/tmp/bridge-runner-slurm2605}
LIFESPAN=${BRIDGE_SLURM_TOKEN_LIFESPAN:-86400}
MIN_JOB_AGE=${BRIDGE_SLURM_MIN_JOB_AGE:-600}
CPUS_WANTED=${BRIDGE_SLURM2605_CPUS:-}
case "$CPUS_WANTED" in
*[!0-9]*) echo "BRIDGE_SLURM2605_CPUS: a whole number of CPUs, e.g. 512" >&2; exit 2 ;;
esac
METRICS=${BRIDGE_SLURM2605_METRICS:-1}
ACCOUNTING=${BRIDGE_SLURM2605_ACCOUNTING:-1}
case "$METRICS$ACCOUNTING" in
[01][01]) ;;
*) echo "BRIDGE_SLURM2605_METRICS and BRIDGE_SLURM2605_ACCOUNTING: 0 or 1" >&2; exit 2 ;;
esac
JOB_USER=bridge # created in the chroot by build-sid-slurm.sh
# The API the script checks a token with: served by 26.05 and 26.11 alike
# (v0.0.42 is deprecated in 26.05 and gone in 26.11).
CHECK_API=v0.0.44
ROOT=$DIR/root
ENVFILE=$DIR/env
t0=$(now_ms)

[ "$(id -u)" = 0 ] || die "run as root (it mounts, chroots and starts daemons that switch users)"
# The host Slurm's SLURM_CONF (22.05's env file) must not reach the chroot.
unset SLURM_CONF
need_cmd curl

mkdir -p "$DIR"
with_lock "$DIR/lock"

in_root() { chroot "$ROOT" "$@"; }

# as_user USER: sets AS to the command prefix that runs a command in the
# chroot as the chroot's USER with no process in between (so a PID file
# holds the daemon's own PID). Numeric ids: the chroot's users need not
# exist on the host.
as_user() {
	local uid gid
	uid=$(in_root id -u "$1") gid=$(in_root id -g "$1")
	AS=(chroot --userspec="$uid:$gid" --groups="$gid" "$ROOT")
}

mint_token() {
	local out
	out=$(in_root scontrol token username="$JOB_USER" lifespan="$LIFESPAN")
	TOKEN=${out#SLURM_JWT=}
	[ -n "$TOKEN" ] && [ "$TOKEN" != "$out" ] || die "scontrol token printed no token: $out"
}

# check_token: an authenticated request that slurmctld must answer (ping
# alone does not check the token).
check_token() {
	[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 \
		-H "X-SLURM-USER-NAME: $JOB_USER" -H "X-SLURM-USER-TOKEN: $TOKEN" \
		"http://127.0.0.1:$REST_PORT/slurm/$CHECK_API/jobs/")" = 200 ]
}

write_env() {
	local version metrics_url=
	version=$(cat "$ROOT/.bridge-slurm-version" 2>/dev/null || echo unknown)
	[ "$METRICS" = 0 ] || metrics_url=http://127.0.0.1:$(cat "$DIR/ctld-port")
	umask 077
	mkdir -p "$DIR/creds"
	printf '%s\n' "$JOB_USER" >"$DIR/creds/username"
	printf '%s\n' "$TOKEN" >"$DIR/creds/token"
	cat >"$ENVFILE.tmp" <<EOF
# Written by hack/slurm2605-up.sh at $(date -u +%Y-%m-%dT%H:%M:%SZ); token valid for ${LIFESPAN}s.
# Slurm $version from Debian unstable (it moves: tests log the version they ran on).
export BRIDGE_TEST_SLURM2605_URL=http://127.0.0.1:$REST_PORT
export BRIDGE_TEST_SLURM2605_USER=$JOB_USER
export BRIDGE_TEST_SLURM2605_TOKEN=$TOKEN
export BRIDGE_TEST_SLURM2605_JWT_KEY=$ROOT/var/lib/slurm/jwt_hs256.key
export BRIDGE_TEST_SLURM2605_CREDS=$DIR/creds
export BRIDGE_TEST_SLURM2605_ROOT=$ROOT
export BRIDGE_TEST_SLURM2605_METRICS_URL=$metrics_url
export BRIDGE_TEST_SLURM2605_CTLD_URL=http://127.0.0.1:$(cat "$DIR/ctld-port")
export BRIDGE_TEST_SLURM2605_VERSION=$version
EOF
	mv "$ENVFILE.tmp" "$ENVFILE"
}


# The settings an instance was started with: another set restarts it.
SETTINGS="metrics=$METRICS accounting=$ACCOUNTING cpus=$CPUS_WANTED"
if [ -s "$DIR/port" ] && [ "$(cat "$DIR/settings" 2>/dev/null)" = "$SETTINGS" ] && all_alive; then
	REST_PORT=$(cat "$DIR/port")
	mint_token
	check_token || die "the daemons run but slurmrestd refuses a fresh token; see $DIR/*.log, or run hack/slurm2605-down.sh"
	write_env
	log "slurm 26.05 already running; new token in $ENVFILE"
	echo "$ENVFILE"
	exit 0
fi
if mountpoint -q "$ROOT" || compgen -G "$DIR/*.pid" >/dev/null; then
	log "stopping a partial earlier start (or one with other settings)"
	BRIDGE_SLURM2605_DIR=$DIR bash "$HACK/slurm2605-down.sh"
fi

LOWER=$(bash "$HACK/build-sid-slurm.sh")

# --- mounts -----------------------------------------------------------------------
# A fresh upper layer per start: nothing of an earlier run (or of an older
# cached root) leaks into this one.
rm -rf "$DIR/upper" "$DIR/work"
mkdir -p "$DIR/upper" "$DIR/work" "$ROOT"
mount -t overlay overlay -o "lowerdir=$LOWER,upperdir=$DIR/upper,workdir=$DIR/work" "$ROOT"
mount --bind /proc "$ROOT/proc"
mount --bind /sys "$ROOT/sys"
mount --bind /dev "$ROOT/dev"
mount -t tmpfs -o mode=755 tmpfs "$ROOT/run"

# --- keys and config --------------------------------------------------------------
HOST=$(hostname -s)
printf '127.0.0.1 localhost %s\n' "$HOST" >"$ROOT/etc/hosts"
mapfile -t ports < <(free_ports 5)
CTLD_PORT=${ports[0]} SLURMD_PORT=${ports[1]} REST_PORT=${ports[2]} DB_PORT=${ports[3]} DBD_PORT=${ports[4]}
echo "$REST_PORT" >"$DIR/port"
echo "$CTLD_PORT" >"$DIR/ctld-port"
echo "$SETTINGS" >"$DIR/settings"
in_root /bin/sh -e <<'SH'
mkdir -p /run/munge /var/lib/slurm /var/spool/slurmd /var/log/slurm
chown munge:munge /run/munge /etc/munge
[ -s /etc/munge/munge.key ] || mungekey --create --keyfile=/etc/munge/munge.key
chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
[ -s /var/lib/slurm/jwt_hs256.key ] || dd if=/dev/urandom of=/var/lib/slurm/jwt_hs256.key bs=32 count=1 status=none
chown -R slurm:slurm /var/lib/slurm /var/log/slurm && chmod 600 /var/lib/slurm/jwt_hs256.key
SH
# At least 8 CPUs, even on a 2-core machine (config_overrides lets slurmd
# believe the config), so that parallel tests do not queue behind each other.
CPUS=$(nproc)
[ "$CPUS" -ge 8 ] || CPUS=8
[ -z "$CPUS_WANTED" ] || CPUS=$CPUS_WANTED
MEM_MB=$(awk '/^MemTotal:/ {printf "%d", $2 / 1024 * 0.8}' /proc/meminfo)
ACCT_CONF=AccountingStorageType=accounting_storage/none
REST_PLUGINS=openapi/slurmctld
if [ "$ACCOUNTING" = 1 ]; then
	# The comment carries the record's key: keep it in the database too.
	ACCT_CONF="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$DBD_PORT
AccountingStoreFlags=job_comment"
	REST_PLUGINS=openapi/slurmctld,openapi/slurmdbd
fi
# Metrics (Slurm >= 25.11): served on SlurmctldPort to the users listed (and
# SlurmUser and root), who send a JWT as to slurmrestd (X-SLURM-USER-TOKEN or
# Authorization: Bearer). Without SlurmctldHttpAuthParameters naming the key,
# 26.05.5 answers every token 401 "Invalid authentication credential" and logs
# nothing of why.
METRICS_CONF=
[ "$METRICS" = 0 ] || METRICS_CONF="MetricsType=metrics/openmetrics
MetricsAuthUsers=$JOB_USER
SlurmctldHttpAuthParameters=jwt_key=/var/lib/slurm/jwt_hs256.key"
cat >"$ROOT/etc/slurm/slurm.conf" <<EOF
# Written by hack/slurm2605-up.sh: a private one-node cluster on 127.0.0.1.
ClusterName=bridge2605
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=/var/lib/slurm/jwt_hs256.key
StateSaveLocation=/var/lib/slurm
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
$ACCT_CONF
$METRICS_CONF
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
MailProg=/bin/true
ReturnToService=2
MinJobAge=$MIN_JOB_AGE
KillWait=5
InactiveLimit=0
SlurmdParameters=config_overrides
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM_MB State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
# short: a second partition (two CPUs of the node, an hour) for partition lists
# ("debug,short") and the load probe's tests; debug stays the default.
PartitionName=short Nodes=ALL MaxTime=60 MaxCPUsPerNode=2 State=UP
# held: where the load probe's benchmark parks its held jobs (slurmctld knows
# them; no other test's partition counts them).
PartitionName=held Nodes=ALL MaxTime=60 State=UP
EOF
# No cgroup file system is mounted in the chroot.
echo 'CgroupPlugin=disabled' >"$ROOT/etc/slurm/cgroup.conf"

# --- daemons ------------------------------------------------------------------------
log "starting munged"
as_user munge
start_daemon "$DIR/munged.pid" "$DIR/munged.log" "${AS[@]}" /usr/sbin/munged --foreground
for _ in $(seq 50); do [ -S "$ROOT/run/munge/munge.socket.2" ] && break; sleep 0.1; done
[ "$ACCOUNTING" = 0 ] || start_chroot_accounting slurm slurm_acct_db bridge2605 hack/slurm2605-up.sh
log "starting slurmctld, slurmd (ports $CTLD_PORT, $SLURMD_PORT)"
in_root slurmctld 9>&-
in_root slurmd -N localhost 9>&-
node_idle() { [ "$(in_root sinfo -h -p debug -o %t 2>/dev/null)" = idle ]; }
until_ok 60 "the node" "$ROOT/var/log/slurm/slurmctld.log" node_idle

log "starting slurmrestd on 127.0.0.1:$REST_PORT"
as_user slurmrest
start_daemon "$DIR/slurmrestd.pid" "$DIR/slurmrestd.log" \
	"${AS[@]}" env SLURM_JWT=daemon slurmrestd -a rest_auth/jwt -s "$REST_PLUGINS" "127.0.0.1:$REST_PORT"
mint_token
deadline=$((SECONDS + 30))
until check_token; do
	pidfile_alive "$DIR/slurmrestd.pid" || { tail_logs 20 "$DIR/slurmrestd.log"; die "slurmrestd exited"; }
	[ $SECONDS -lt $deadline ] || { tail_logs 20 "$DIR/slurmrestd.log"; die "slurmrestd refuses a fresh token after 30 s"; }
	sleep 0.2
done
write_env
log "slurm 26.05 ($(cat "$ROOT/.bridge-slurm-version")) ready in $(elapsed_s "$t0") s: slurmrestd at http://127.0.0.1:$REST_PORT, jobs run as $JOB_USER"
echo "$ENVFILE"
