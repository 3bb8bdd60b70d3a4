#!/usr/bin/env bash
# Starts a private OpenSSH server (Debian's openssh-server) on 127.0.0.1, on
# a port of its own with a host key of its own, for the tests of the SSH
# transport and of the backends reached over SSH, and writes an env file that
# the tests (and people) can source.
#
#   bash hack/sshd-up.sh && source "${BRIDGE_SSHD_DIR:-/tmp/bridge-runner-sshd}/env"
#   go test ./backends/sshexec/ -count=1
#   bash hack/sshd-down.sh          # stops exactly what this started
#
# The script makes a test user (password locked, login by key only), a client
# key pair and a user certificate signed by a CA of its own (both accepted),
# and a known_hosts file that holds the host key. Nothing of the system's
# sshd (/etc/ssh/sshd_config, its host keys, port 22) is used or touched.
#
# With BRIDGE_SSHD_ROOT set to a chroot (a Debian tree with openssh-server),
# the server runs inside it: the user is made there and logs into that tree,
# which then plays the cluster's login node (hack/htcondor-up.sh uses this).
#
# Idempotent: if the server of this state dir runs with the same settings, it
# only prints the env file path; otherwise it is stopped and started again.
#
# Environment:
#   BRIDGE_SSHD_DIR     state dir (config, keys, env, log, PID file);
#                       default /tmp/bridge-runner-sshd
#   BRIDGE_SSHD_USER    the user to log in as (default bridgessh; created)
#   BRIDGE_SSHD_ROOT    a chroot to run the server in (default: none)
#   BRIDGE_SSHD_SETENV  space-separated NAME=VALUE pairs set in every session
#                       (sshd's SetEnv), e.g. SLURM_CONF=/path/slurm.conf
#   BRIDGE_SSHD_LISTEN  the IPv4 address to listen on (default 127.0.0.1); the
#                       e2e suite gives the node's own, which its pods reach
#
# The env file exports (PREFIX is BRIDGE_TEST_SSH, or BRIDGE_SSHD_ENV_PREFIX):
#   PREFIX_URL        ssh://USER@LISTEN:PORT (LISTEN: 127.0.0.1 by default)
#   PREFIX_ADDR       LISTEN:PORT
#   PREFIX_USER       the user
#   PREFIX_CREDS      a directory laid out like a mounted Secret: ssh-privatekey
#                     (OpenSSH format) and known_hosts
#   PREFIX_CERT_CREDS the same with a certificate key: ssh-privatekey,
#                     ssh-certificate, known_hosts
#   PREFIX_SSHD_CONFIG the server's config (host path), for tests that start
#                     a server of their own from it (e.g. to restart it)
#   PREFIX_ROOT       the chroot, if any
set -euo pipefail

HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/lib.sh
source "$HACK/lib.sh"

STATE=${BRIDGE_SSHD_DIR:-/tmp/bridge-runner-sshd}
STATE=${STATE%/}
SSH_USER=${BRIDGE_SSHD_USER:-bridgessh}
ROOT=${BRIDGE_SSHD_ROOT:-}
ROOT=${ROOT%/}
SETENV=${BRIDGE_SSHD_SETENV:-}
PREFIX=${BRIDGE_SSHD_ENV_PREFIX:-BRIDGE_TEST_SSH}
LISTEN=${BRIDGE_SSHD_LISTEN:-127.0.0.1}
t0=$(now_ms)

[ "$(id -u)" = 0 ] || die "run as root (sshd must be root to switch to the user it logs in)"
[[ $LISTEN =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "BRIDGE_SSHD_LISTEN=$LISTEN: give an IPv4 address, e.g. 127.0.0.1"
case "$SSH_USER" in
  '' | *[!a-z0-9_-]* | [!a-z]*) die "BRIDGE_SSHD_USER=$SSH_USER: use a lower-case user name" ;;
esac

mkdir -p "$(dirname "$STATE")"
with_lock "$STATE.lock"

if [ -n "$ROOT" ]; then
  [ -x "$ROOT/usr/sbin/sshd" ] || die "BRIDGE_SSHD_ROOT=$ROOT has no /usr/sbin/sshd (install openssh-server in it)"
  # In a chroot the server's files must be inside the tree; each state dir
  # gets its own directory there.
  CONF_IN=/etc/ssh/bridge-runner-$(basename "$STATE")
  in_root() { chroot "$ROOT" "$@"; }
else
  if [ ! -x /usr/sbin/sshd ]; then
    # Keep the package's maintainer scripts from starting the system's sshd
    # on port 22, which this script would not stop.
    policy_added=
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
      chmod 755 /usr/sbin/policy-rc.d
      policy_added=1
    fi
    need_cmd /usr/sbin/sshd openssh-server || die "cannot install openssh-server"
    [ -z "$policy_added" ] || rm -f /usr/sbin/policy-rc.d
  fi
  CONF_IN=$STATE/etc
  in_root() { "$@"; }
fi
need_cmd ssh-keygen openssh-client
need_cmd ssh openssh-client
CONF=$ROOT$CONF_IN
SETTINGS="user=$SSH_USER root=$ROOT setenv=$SETENV"
# Only an address other than the default is part of them: a server started
# before this option existed still counts as up (no restart, no new port).
[ "$LISTEN" = 127.0.0.1 ] || SETTINGS+=" listen=$LISTEN"

# is_up : the server of this state dir runs, with these settings, and lets
# the user in.
is_up() {
  [ -f "$STATE/env" ] && [ -f "$STATE/port" ] && pidfile_alive "$STATE/sshd.pid" || return 1
  [ "$(cat "$STATE/settings" 2>/dev/null)" = "$SETTINGS" ] || return 1
  try_login
}

try_login() {
  ssh -F none -o BatchMode=yes -o ConnectTimeout=3 -o IdentitiesOnly=yes \
    -o UserKnownHostsFile="$STATE/creds/known_hosts" -o StrictHostKeyChecking=yes \
    -i "$STATE/creds/ssh-privatekey" -p "$(cat "$STATE/port")" "$SSH_USER@$LISTEN" true </dev/null >/dev/null 2>&1
}

if is_up; then
  log "sshd already up at $LISTEN:$(cat "$STATE/port") (state $STATE)"
  echo "$STATE/env"
  exit 0
fi
if [ -e "$STATE" ]; then
  log "stale state in $STATE: cleaning up"
  BRIDGE_SSHD_DIR=$STATE BRIDGE_SSHD_LOCKED=1 bash "$HACK/sshd-down.sh"
fi

# --- the user -------------------------------------------------------------------
if ! in_root getent passwd "$SSH_USER" >/dev/null; then
  in_root useradd --create-home --shell /bin/bash "$SSH_USER"
fi
# "*" instead of useradd's "!": without PAM, sshd refuses every login, keys
# included, to an account whose password field starts with "!".
in_root usermod -p '*' "$SSH_USER"
HOME_IN=$(in_root getent passwd "$SSH_USER" | cut -d: -f6)
USER_HOME=$ROOT$HOME_IN

# --- keys -----------------------------------------------------------------------
rm -rf "$CONF"
mkdir -p "$STATE/creds" "$STATE/certcreds" "$STATE/ca" "$CONF"
chmod 700 "$STATE/creds" "$STATE/certcreds" "$STATE/ca"
chmod 755 "$CONF"
ssh-keygen -q -t ed25519 -N '' -C "bridge-runner test host" -f "$CONF/ssh_host_ed25519_key"
ssh-keygen -q -t ed25519 -N '' -C "bridge-runner test user CA" -f "$STATE/ca/user_ca"
cp "$STATE/ca/user_ca.pub" "$CONF/user_ca.pub"
ssh-keygen -q -t ed25519 -N '' -C "bridge-runner test client" -f "$STATE/creds/ssh-privatekey"
ssh-keygen -q -t ed25519 -N '' -C "bridge-runner test client (certificate)" -f "$STATE/certcreds/ssh-privatekey"
ssh-keygen -q -s "$STATE/ca/user_ca" -I bridge-runner-test -n "$SSH_USER" -V -5m:+30d "$STATE/certcreds/ssh-privatekey.pub"
mv "$STATE/certcreds/ssh-privatekey-cert.pub" "$STATE/certcreds/ssh-certificate"

install -d -m 700 -o "$(in_root id -u "$SSH_USER")" -g "$(in_root id -g "$SSH_USER")" "$USER_HOME/.ssh"
install -m 600 -o "$(in_root id -u "$SSH_USER")" -g "$(in_root id -g "$SSH_USER")" \
  "$STATE/creds/ssh-privatekey.pub" "$USER_HOME/.ssh/authorized_keys"

# --- config ---------------------------------------------------------------------
PORT=$(free_ports 1)
{
  echo "# Written by hack/sshd-up.sh: a private sshd for bridge-runner's tests."
  echo "Port $PORT"
  echo "ListenAddress $LISTEN"
  echo "HostKey $CONF_IN/ssh_host_ed25519_key"
  echo "PidFile none"
  echo "UsePAM no"
  echo "PermitRootLogin no"
  echo "AllowUsers $SSH_USER"
  echo "PubkeyAuthentication yes"
  echo "AuthorizedKeysFile .ssh/authorized_keys"
  echo "TrustedUserCAKeys $CONF_IN/user_ca.pub"
  echo "PasswordAuthentication no"
  echo "KbdInteractiveAuthentication no"
  echo "X11Forwarding no"
  echo "AllowTcpForwarding no"
  echo "PrintMotd no"
  echo "MaxSessions 64"
  echo "MaxStartups 64:30:128"
  echo "LogLevel VERBOSE"
  echo "Subsystem sftp internal-sftp"
  [ -z "$SETENV" ] || echo "SetEnv $SETENV"
} >"$CONF/sshd_config"
chmod 644 "$CONF/sshd_config"
echo "$PORT" >"$STATE/port"
echo "$SETTINGS" >"$STATE/settings"
printf '[%s]:%s %s\n' "$LISTEN" "$PORT" "$(cut -d' ' -f1,2 "$CONF/ssh_host_ed25519_key.pub")" >"$STATE/creds/known_hosts"
cp "$STATE/creds/known_hosts" "$STATE/certcreds/known_hosts"
chmod 600 "$STATE"/creds/* "$STATE"/certcreds/*

# --- start ------------------------------------------------------------------------
mkdir -p "$ROOT/run/sshd" && chmod 755 "$ROOT/run/sshd" # privilege separation dir
in_root /usr/sbin/sshd -t -f "$CONF_IN/sshd_config" || die "sshd refused its config $CONF/sshd_config"
if [ -n "$ROOT" ]; then
  start_daemon "$STATE/sshd.pid" "$STATE/sshd.log" chroot "$ROOT" /usr/sbin/sshd -D -e -f "$CONF_IN/sshd_config"
else
  start_daemon "$STATE/sshd.pid" "$STATE/sshd.log" /usr/sbin/sshd -D -e -f "$CONF_IN/sshd_config"
fi
deadline=$((SECONDS + 20))
until try_login; do
  if ! pidfile_alive "$STATE/sshd.pid" || [ $SECONDS -ge $deadline ]; then
    tail_logs 20 "$STATE/sshd.log"
    die "sshd did not let $SSH_USER in; see $STATE/sshd.log"
  fi
  sleep 0.1
done

umask 077
{
  echo "# Written by hack/sshd-up.sh at $(date -u +%Y-%m-%dT%H:%M:%SZ)."
  echo "export ${PREFIX}_URL=ssh://$SSH_USER@$LISTEN:$PORT"
  echo "export ${PREFIX}_ADDR=$LISTEN:$PORT"
  echo "export ${PREFIX}_USER=$SSH_USER"
  echo "export ${PREFIX}_CREDS=$STATE/creds"
  echo "export ${PREFIX}_CERT_CREDS=$STATE/certcreds"
  echo "export ${PREFIX}_SSHD_CONFIG=$CONF/sshd_config"
  echo "export ${PREFIX}_ROOT=$ROOT"
} >"$STATE/env.tmp"
mv "$STATE/env.tmp" "$STATE/env"
log "sshd up at $LISTEN:$PORT for $SSH_USER${ROOT:+ in $ROOT} in $(elapsed_s "$t0")s (state $STATE)"
echo "$STATE/env"
