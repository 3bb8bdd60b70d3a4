#!/usr/bin/env bash
# slurm2411-up.sh: start a private, single-node Slurm 24.11 with slurmrestd
# (REST API v0.0.40, v0.0.41, v0.0.42) on 127.0.0.1, beside the host's Slurm
# 22.05 of hack/slurm-up.sh, and write an env file for the tests:
#
#   hack/slurm2411-up.sh        # build the chroot if needed, start, mint a token
#   . /tmp/bridge-runner-slurm2411/env && go test ./backends/slurm/ -count=1
#   hack/slurm2411-down.sh      # stop exactly what this started, unmount
#
# Slurm 24.11 comes from Debian 13, in a root built once by
# hack/build-trixie-slurm.sh and cached. Each run mounts an overlay over that
# cached tree at $DIR/root (keys, config, spool and the jobs' /tmp of this
# run go to $DIR/upper), binds /proc, /sys and /dev into it and mounts a
# fresh tmpfs on /run. The daemons run chrooted, as the chroot's users. The
# host's /tmp is deliberately not shared: job ids of the two clusters
# collide, and Slurm's default slurm-<id>.out of one cluster's user would
# block the other's in a sticky /tmp. Tests find a job's file at
# $BRIDGE_TEST_SLURM2411_ROOT/<path>.
#
# Idempotent: if everything is already running it only mints a new token and
# rewrites the env file; a half-started set is stopped and started again.
#
# Needs root. Settings:
#   BRIDGE_SLURM2411_DIR         state directory (/tmp/bridge-runner-slurm2411)
#   BRIDGE_SLURM_TOKEN_LIFESPAN  token lifespan in seconds (86400)
#   BRIDGE_SLURM_MIN_JOB_AGE     MinJobAge in seconds (600)
#   BRIDGE_SLURM2411_RL          appended to SlurmctldParameters, e.g.
#                                rl_enable,rl_bucket_size=10,rl_refill_rate=2,rl_refill_period=1
#                                (slurmctld's per-user RPC rate limit; none by default)
#   BRIDGE_SLURM2411_CPUS        CPUs the node claims (default: this machine's, at
#                                least 8); the watcher's benchmark claims one per job
#                                so that its N jobs run at once, as on a large cluster
#   BRIDGE_SLURM2411_ACCOUNTING  0 (default): no accounting, as on a site without
#                                slurmdbd; 1: slurmdbd 24.11 (the chroot's) storing
#                                into a private MariaDB (the host's Debian 12 one, as
#                                hack/slurm-accounting.sh runs it for 22.05), with
#                                jobacct_gather/linux and slurmrestd's /slurmdb/
#                                (hack/slurm2411dbd-up.sh starts such an instance)
#   BRIDGE_SLURM2411_LOGIN       0 (default); 1: a login node, an sshd in the root
#                                (hack/sshd-up.sh) whose user is the job user, for the
#                                SSH backend; the env file gets its PREFIX_SSH_* variables
#   BRIDGE_SLURM2411_ENV_PREFIX  the env file's variable prefix (BRIDGE_TEST_SLURM2411)
#
# A second instance beside the shared one: another BRIDGE_SLURM2411_DIR.
# Each instance has its own ports (picked free), its own overlay over the
# one read-only cached root (its own munge key and socket on its own /run,
# its own slurm.conf, spool and state), so two coexist; the bench of a
# rate-limited slurmctld (bench/ratelimit_test.go) starts one this way:
#   BRIDGE_SLURM2411_DIR=/tmp/bridge-runner-slurm2411-rl \
#   BRIDGE_SLURM2411_RL=rl_enable,rl_bucket_size=10 hack/slurm2411-up.sh
set -euo pipefail
HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/lib.sh
source "$HACK/lib.sh"
# shellcheck source=hack/chroot-slurm.sh
source "$HACK/chroot-slurm.sh"

DIR=${BRIDGE_SLURM2411_DIR:-/tmp/bridge-runner-slurm2411}
LIFESPAN=${BRIDGE_SLURM_TOKEN_LIFESPAN:-86400}
MIN_JOB_AGE=${BRIDGE_SLURM_MIN_JOB_AGE:-600}
RL=${BRIDGE_SLURM2411_RL:-}
case "$RL" in
*[!A-Za-z0-9_=,.]*) echo "BRIDGE_SLURM2411_RL: only SlurmctldParameters words (letters, digits, _ = , .), e.g. rl_enable,rl_bucket_size=10" >&2; exit 2 ;;
esac
CPUS_WANTED=${BRIDGE_SLURM2411_CPUS:-}
case "$CPUS_WANTED" in
*[!0-9]*) echo "BRIDGE_SLURM2411_CPUS: a whole number of CPUs, e.g. 512" >&2; exit 2 ;;
esac
ACCOUNTING=${BRIDGE_SLURM2411_ACCOUNTING:-0}
case "$ACCOUNTING" in
0 | 1) ;;
*) echo "BRIDGE_SLURM2411_ACCOUNTING: 0 or 1" >&2; exit 2 ;;
esac
LOGIN=${BRIDGE_SLURM2411_LOGIN:-0}
case "$LOGIN" in
0 | 1) ;;
*) echo "BRIDGE_SLURM2411_LOGIN: 0 or 1" >&2; exit 2 ;;
esac
PREFIX=${BRIDGE_SLURM2411_ENV_PREFIX:-BRIDGE_TEST_SLURM2411}
case "$PREFIX" in
"" | [0-9]* | *[!A-Z0-9_]*) echo "BRIDGE_SLURM2411_ENV_PREFIX: a shell variable prefix (A-Z, 0-9, _), e.g. BRIDGE_TEST_SLURM2411DBD" >&2; exit 2 ;;
esac
JOB_USER=bridge # created in the chroot by build-trixie-slurm.sh
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
		"http://127.0.0.1:$REST_PORT/slurm/v0.0.42/jobs/")" = 200 ]
}

write_env() {
	umask 077
	mkdir -p "$DIR/creds"
	printf '%s\n' "$JOB_USER" >"$DIR/creds/username"
	printf '%s\n' "$TOKEN" >"$DIR/creds/token"
	cat >"$ENVFILE.tmp" <<EOF
# Written by hack/slurm2411-up.sh at $(date -u +%Y-%m-%dT%H:%M:%SZ); token valid for ${LIFESPAN}s.
export ${PREFIX}_URL=http://127.0.0.1:$REST_PORT
export ${PREFIX}_USER=$JOB_USER
export ${PREFIX}_TOKEN=$TOKEN
export ${PREFIX}_JWT_KEY=$ROOT/var/lib/slurm/jwt_hs256.key
export ${PREFIX}_CREDS=$DIR/creds
export ${PREFIX}_ROOT=$ROOT
EOF
	[ "$LOGIN" = 0 ] || cat "$DIR/sshd/env" >>"$ENVFILE.tmp"
	mv "$ENVFILE.tmp" "$ENVFILE"
}

# login_node: the sshd of BRIDGE_SLURM2411_LOGIN=1, in the root, so that its
# sessions run this cluster's commands with its slurm.conf and munge socket;
# the job user logs in (by key), as a cluster's user would. Idempotent
# (hack/sshd-up.sh is); hack/slurm2411-down.sh stops it.
login_node() {
	[ "$LOGIN" = 1 ] || return 0
	BRIDGE_SSHD_DIR=$DIR/sshd BRIDGE_SSHD_ROOT=$ROOT BRIDGE_SSHD_USER=$JOB_USER BRIDGE_SSHD_ENV_PREFIX=${PREFIX}_SSH \
		bash "$HACK/sshd-up.sh" >/dev/null
}


# The settings an instance was started with: another set restarts it (an
# instance started before this file was written had none: rl=; one without
# accounting says nothing of it).
SETTINGS="rl=$RL"
[ "$ACCOUNTING" = 0 ] || SETTINGS="$SETTINGS accounting=1 min_job_age=$MIN_JOB_AGE"
started_with() { if [ -s "$DIR/settings" ]; then cat "$DIR/settings"; else echo rl=; fi; }
if [ -s "$DIR/port" ] && all_alive && [ "$(started_with)" = "$SETTINGS" ]; then
	REST_PORT=$(cat "$DIR/port")
	mint_token
	check_token || die "the daemons run but slurmrestd refuses a fresh token; see $DIR/*.log, or run hack/slurm2411-down.sh"
	login_node
	write_env
	log "slurm 24.11 already running; new token in $ENVFILE"
	echo "$ENVFILE"
	exit 0
fi
if mountpoint -q "$ROOT" || compgen -G "$DIR/*.pid" >/dev/null; then
	log "stopping a partial earlier start (or one with other settings)"
	BRIDGE_SLURM2411_DIR=$DIR bash "$HACK/slurm2411-down.sh"
fi

LOWER=$(bash "$HACK/build-trixie-slurm.sh")

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
ACCT_CONF="JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none"
REST_PLUGINS=openapi/slurmctld
if [ "$ACCOUNTING" = 1 ]; then
	# What a job used (CPU time, peak memory per step), sampled every second
	# (JobAcctGatherFrequency) so that a job of a few seconds has its peak.
	# The comment carries the record's key: keep it in the database too.
	ACCT_CONF="JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$DBD_PORT
AccountingStoreFlags=job_comment"
	REST_PLUGINS=openapi/slurmctld,openapi/slurmdbd
fi
cat >"$ROOT/etc/slurm/slurm.conf" <<EOF
# Written by hack/slurm2411-up.sh: a private one-node cluster on 127.0.0.1.
ClusterName=bridge2411
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
$ACCT_CONF
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
${RL:+SlurmctldParameters=$RL}
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
EOF
# No cgroup file system is mounted in the chroot.
echo 'CgroupPlugin=disabled' >"$ROOT/etc/slurm/cgroup.conf"

# --- daemons ------------------------------------------------------------------------
log "starting munged"
as_user munge
start_daemon "$DIR/munged.pid" "$DIR/munged.log" "${AS[@]}" /usr/sbin/munged --foreground
for _ in $(seq 50); do [ -S "$ROOT/run/munge/munge.socket.2" ] && break; sleep 0.1; done
[ "$ACCOUNTING" = 0 ] || start_chroot_accounting slurm2411 slurm2411_acct_db bridge2411 "hack/slurm2411-up.sh (BRIDGE_SLURM2411_ACCOUNTING=1)"
log "starting slurmctld, slurmd (ports $CTLD_PORT, $SLURMD_PORT)"
in_root slurmctld
in_root slurmd -N localhost
node_idle() { [ "$(in_root sinfo -h -p debug -o %t 2>/dev/null)" = idle ]; }
deadline=$((SECONDS + 60))
until node_idle; do
	[ $SECONDS -lt $deadline ] || { tail_logs 20 "$ROOT/var/log/slurm/slurmctld.log" "$ROOT/var/log/slurm/slurmd.log"; die "the node is not idle after 60 s"; }
	sleep 0.2
done

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
login_node
write_env
log "slurm 24.11 ready in $(elapsed_s "$t0") s: slurmrestd at http://127.0.0.1:$REST_PORT (v0.0.40-v0.0.42$([ "$ACCOUNTING" = 0 ] || echo ', with /slurmdb/')), jobs run as $JOB_USER"
echo "$ENVFILE"
