#!/usr/bin/env bash
# slurm-up.sh: start a private, single-node Slurm 22.05 with slurmrestd on
# 127.0.0.1 for the slurm backend's integration tests, and write an env file
# that the tests (and people) can source.
#
#   hack/slurm-up.sh            # install if needed, start, mint a token
#   . /tmp/bridge-runner-slurm/env && go test ./backends/slurm/ -count=1
#   hack/slurm-down.sh          # stop exactly what this started
#
# Everything lives under $BRIDGE_SLURM_DIR (default /tmp/bridge-runner-slurm):
# the config, keys, spool, logs and PID files. Nothing in /etc/slurm or
# /run/munge is touched, and every daemon listens on 127.0.0.1 on ports picked
# free for this run, so a system Slurm (or another copy of this script with
# another BRIDGE_SLURM_DIR) can run beside it.
#
# Idempotent: if everything is already running, it only mints a new token and
# rewrites the env file. A half-started set is stopped and started again.
#
# Needs root (apt-get, users, daemons that switch users). Settings:
#   BRIDGE_SLURM_DIR             state directory   (/tmp/bridge-runner-slurm)
#   BRIDGE_SLURM_JOB_USER        user jobs run as  (bridge; created with a home)
#   BRIDGE_SLURM_REST_USER       user of slurmrestd (slurmrest; it refuses root)
#   BRIDGE_SLURM_TOKEN_LIFESPAN  token lifespan in seconds (86400)
#   BRIDGE_SLURM_MIN_JOB_AGE     MinJobAge in seconds (600; ended jobs vanish after it)
#   BRIDGE_SLURM_LISTEN          an extra address of this machine for slurmrestd to
#                                listen on (same port), e.g. the node's own address
#                                for pods of the e2e cluster; unset: 127.0.0.1 only.
#                                The env file then also exports
#                                BRIDGE_TEST_SLURM_LISTEN_URL=http://<address>:<port>
#   BRIDGE_SLURM_ACCOUNTING      1: also a private MariaDB and slurmdbd, and slurmrestd
#                                serves /slurmdb/v0.0.38 (hack/slurm-accounting.sh)
#   BRIDGE_SLURM_ACCT_GATHER     JobAcctGatherType (jobacct_gather/none); jobacct_gather/linux
#                                makes accounting record the CPU time and peak memory jobs used
#   BRIDGE_SLURM_ENV_PREFIX      prefix of the env file's variables (BRIDGE_TEST_SLURM),
#                                so that a second instance can be sourced beside the first
set -euo pipefail

DIR=${BRIDGE_SLURM_DIR:-/tmp/bridge-runner-slurm}
JOB_USER=${BRIDGE_SLURM_JOB_USER:-bridge}
REST_USER=${BRIDGE_SLURM_REST_USER:-slurmrest}
LIFESPAN=${BRIDGE_SLURM_TOKEN_LIFESPAN:-86400}
MIN_JOB_AGE=${BRIDGE_SLURM_MIN_JOB_AGE:-600}
LISTEN=${BRIDGE_SLURM_LISTEN:-}
ACCOUNTING=${BRIDGE_SLURM_ACCOUNTING:-0}
P=${BRIDGE_SLURM_ENV_PREFIX:-BRIDGE_TEST_SLURM}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CONF=$DIR/etc/slurm.conf
ENVFILE=$DIR/env
START=$(date +%s.%N)

log() { printf 'slurm-up: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (it installs packages, creates users and starts daemons that switch users)"

# alive PIDFILE NAME: the process in PIDFILE runs and is called NAME.
alive() {
	local pid
	[ -s "$1" ] || return 1
	pid=$(cat "$1")
	[ -n "$pid" ] && [ -r "/proc/$pid/comm" ] && [ "$(cat "/proc/$pid/comm")" = "$2" ]
}

all_alive() {
	alive "$DIR/munge/munged.pid" munged &&
		alive "$DIR/ctld/slurmctld.pid" slurmctld &&
		alive "$DIR/d/slurmd.pid" slurmd &&
		alive "$DIR/rest/slurmrestd.pid" slurmrestd &&
		{ [ "$ACCOUNTING" != 1 ] || { alive "$DIR/db/mariadbd.pid" mariadbd && alive "$DIR/dbd/slurmdbd.pid" slurmdbd; }; }
}

# --- packages -----------------------------------------------------------------
PKGS=(munge slurmctld slurmd slurm-client slurmrestd slurm-wlm-jwt-plugin curl)
if [ "$ACCOUNTING" = 1 ]; then
	# shellcheck source=hack/slurm-accounting.sh
	source "$(dirname "${BASH_SOURCE[0]}")/slurm-accounting.sh"
	PKGS+=("${ACCT_PKGS[@]}")
fi
missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	log "installing ${missing[*]}"
	# Keep the packages' maintainer scripts from starting system daemons
	# (with /etc configs) that we did not ask for and would not stop.
	policy_added=
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod 755 /usr/sbin/policy-rc.d
		policy_added=1
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	[ -z "$policy_added" ] || rm -f /usr/sbin/policy-rc.d
fi

# --- users ----------------------------------------------------------------------
getent group slurm >/dev/null || groupadd --system slurm
getent passwd slurm >/dev/null || useradd --system --gid slurm --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin slurm
getent passwd munge >/dev/null || die "the munge package did not create the munge user"
getent passwd "$REST_USER" >/dev/null || useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$REST_USER"
getent passwd "$JOB_USER" >/dev/null || useradd --create-home --shell /bin/bash "$JOB_USER"

# --- already up? ----------------------------------------------------------------
mint_token() {
	local out
	out=$(SLURM_CONF=$CONF scontrol token username="$JOB_USER" lifespan="$LIFESPAN")
	TOKEN=${out#SLURM_JWT=}
	if [ -z "$TOKEN" ] || [ "$TOKEN" = "$out" ]; then
		die "scontrol token printed no token: $out"
	fi
}

rest_port() { sed -n 's/^# rest port //p' "$CONF"; }

# check_token: an authenticated request that slurmctld must answer (ping alone
# does not check the token).
check_token() {
	local code
	code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 \
		-H "X-SLURM-USER-NAME: $JOB_USER" -H "X-SLURM-USER-TOKEN: $TOKEN" \
		"http://127.0.0.1:$REST_PORT/slurm/v0.0.38/jobs/")
	[ "$code" = 200 ]
}

write_env() {
	umask 077
	mkdir -p "$DIR/creds"
	chmod 700 "$DIR/creds"
	printf '%s\n' "$JOB_USER" >"$DIR/creds/username"
	printf '%s\n' "$TOKEN" >"$DIR/creds/token"
	local tmp=$ENVFILE.tmp
	cat >"$tmp" <<EOF
# Written by hack/slurm-up.sh at $(date -u +%Y-%m-%dT%H:%M:%SZ); token valid for ${LIFESPAN}s.
export ${P}_URL=http://127.0.0.1:$REST_PORT
export ${P}_USER=$JOB_USER
export ${P}_TOKEN=$TOKEN
export ${P}_JWT_KEY=$DIR/ctld/jwt_hs256.key
export ${P}_CREDS=$DIR/creds
export SLURM_CONF=$CONF
EOF
	# SLURM_CONF names the first instance; a second one keeps its own as ${P}_CONF.
	[ "$P" = BRIDGE_TEST_SLURM ] || sed -i "s/^export SLURM_CONF=/export ${P}_CONF=/" "$tmp"
	if [ -n "$LISTEN" ]; then
		echo "export ${P}_LISTEN_URL=http://$LISTEN:$REST_PORT" >>"$tmp"
	fi
	mv "$tmp" "$ENVFILE"
}

# The extra listen address of a running slurmrestd (from its config comment).
rest_listen() { sed -n 's/^# rest listen //p' "$CONF"; }

if [ -f "$CONF" ] && all_alive && [ "$(rest_listen)" = "$LISTEN" ]; then
	REST_PORT=$(rest_port)
	mint_token
	check_token || die "the daemons run but slurmrestd refuses a fresh token; see $DIR/*/*.log, or run hack/slurm-down.sh and try again"
	write_env
	log "already running; new token written to $ENVFILE"
	echo "$ENVFILE"
	exit 0
fi
if compgen -G "$DIR/*/*.pid" >/dev/null; then
	log "stopping a partial earlier start"
	BRIDGE_SLURM_DIR=$DIR "$HERE/slurm-down.sh"
fi

# --- layout and keys ------------------------------------------------------------
mkdir -p "$DIR"/{etc,munge,ctld,d,rest}
chmod 755 "$DIR" "$DIR/etc"
chown munge:munge "$DIR/munge" && chmod 711 "$DIR/munge" # munged: the socket dir must be searchable by all
chown slurm:slurm "$DIR/ctld" && chmod 700 "$DIR/ctld"
chmod 755 "$DIR/d" "$DIR/rest"

if [ ! -s "$DIR/munge/munge.key" ]; then
	if command -v mungekey >/dev/null; then
		mungekey --create --keyfile="$DIR/munge/munge.key" --force
	else
		dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
	fi
fi
chown munge:munge "$DIR/munge/munge.key" && chmod 400 "$DIR/munge/munge.key"
if [ ! -s "$DIR/ctld/jwt_hs256.key" ]; then
	dd if=/dev/urandom of="$DIR/ctld/jwt_hs256.key" bs=32 count=1 status=none
fi
chown slurm:slurm "$DIR/ctld/jwt_hs256.key" && chmod 600 "$DIR/ctld/jwt_hs256.key"

# --- ports and slurm.conf ---------------------------------------------------------
used_ports=$(ss -Htan 2>/dev/null | awk '{print $4}' | sed 's/.*://' | sort -u)
picked=()
free_port() {
	local p
	for _ in $(seq 200); do
		p=$((20000 + RANDOM % 30000))
		if ! grep -qx "$p" <<<"$used_ports" && ! [[ " ${picked[*]} " == *" $p "* ]]; then
			picked+=("$p")
			echo "$p"
			return
		fi
	done
	die "no free port found"
}
CTLD_PORT=$(free_port)
picked+=("$CTLD_PORT")
SLURMD_PORT=$(free_port)
picked+=("$SLURMD_PORT")
REST_PORT=$(free_port)
picked+=("$REST_PORT")
acct_conf="AccountingStorageType=accounting_storage/none"
rest_plugins=openapi/v0.0.36,openapi/v0.0.37,openapi/v0.0.38
if [ "$ACCOUNTING" = 1 ]; then
	accounting_ports
	acct_conf=$(accounting_conf)
	rest_plugins+=,openapi/dbv0.0.38
fi

HOST=$(hostname -s)
# At least 8 CPUs, even on a 2-core machine (config_overrides lets slurmd
# believe the config), so that parallel tests do not queue behind each other.
CPUS=$(nproc)
[ "$CPUS" -ge 8 ] || CPUS=8
MEM_MB=$(awk '/^MemTotal:/ {printf "%d", $2 / 1024 * 0.8}' /proc/meminfo)
cat >"$CONF" <<EOF
# Written by hack/slurm-up.sh: a private one-node cluster on 127.0.0.1.
# rest port $REST_PORT
# rest listen $LISTEN
ClusterName=bridge
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$DIR/munge/munge.socket
CredType=cred/munge
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$DIR/ctld/jwt_hs256.key
StateSaveLocation=$DIR/ctld
SlurmdSpoolDir=$DIR/d
SlurmctldPidFile=$DIR/ctld/slurmctld.pid
SlurmdPidFile=$DIR/d/slurmd.pid
SlurmctldLogFile=$DIR/ctld/slurmctld.log
SlurmdLogFile=$DIR/d/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=${BRIDGE_SLURM_ACCT_GATHER:-jobacct_gather/none}
JobAcctGatherFrequency=task=1
JobAcctGatherFrequency=task=1
$acct_conf
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
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM_MB State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
# short: a second partition (two CPUs of the node, an hour) for partition lists
# ("debug,short") and the load probe's tests; debug stays the default.
PartitionName=short Nodes=ALL MaxTime=60 MaxCPUsPerNode=2 State=UP
EOF
chmod 644 "$CONF"
export SLURM_CONF=$CONF

# --- daemons ----------------------------------------------------------------------
wait_for() { # wait_for SECONDS WHAT COMMAND...
	local deadline=$((SECONDS + $1)) what=$2
	shift 2
	until "$@" >/dev/null 2>&1; do
		[ $SECONDS -lt $deadline ] || die "$what not ready after ${deadline}s; see the logs under $DIR"
		sleep 0.2
	done
}
log "starting munged, slurmctld, slurmd (ports $CTLD_PORT, $SLURMD_PORT)"
runuser -u munge -- /usr/sbin/munged --socket="$DIR/munge/munge.socket" \
	--key-file="$DIR/munge/munge.key" --pid-file="$DIR/munge/munged.pid" \
	--log-file="$DIR/munge/munged.log" --seed-file="$DIR/munge/munged.seed"
[ "$ACCOUNTING" != 1 ] || accounting_start
slurmctld
slurmd

node_idle() { [ "$(sinfo -h -p debug -o %t 2>/dev/null)" = idle ]; }
wait_for 60 "the node" node_idle

rest_addrs=("127.0.0.1:$REST_PORT")
if [ -n "$LISTEN" ]; then
	ip -o addr show 2>/dev/null | awk '{split($4, a, "/"); print a[1]}' | grep -qxF "$LISTEN" ||
		die "BRIDGE_SLURM_LISTEN=$LISTEN is not an address of this machine"
	rest_addrs+=("$LISTEN:$REST_PORT")
fi
log "starting slurmrestd on ${rest_addrs[*]}"
(
	cd "$DIR/rest"
	SLURM_JWT=daemon exec setsid slurmrestd -u "$REST_USER" -g "$(id -gn "$REST_USER")" \
		-s "$rest_plugins" -a rest_auth/jwt \
		"${rest_addrs[@]}" </dev/null >"$DIR/rest/slurmrestd.log" 2>&1
) &
echo $! >"$DIR/rest/slurmrestd.pid"
rest_unauth() { [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$REST_PORT/openapi/v3")" = 401 ]; }
wait_for 30 slurmrestd rest_unauth

mint_token
wait_for 30 "an authenticated request" check_token
write_env
END=$(date +%s.%N)
log "ready in $(awk -v a="$START" -v b="$END" 'BEGIN {printf "%.1f", b - a}')s: slurmrestd at http://127.0.0.1:$REST_PORT (v0.0.38), jobs run as $JOB_USER"
log "env file: $ENVFILE"
echo "$ENVFILE"
