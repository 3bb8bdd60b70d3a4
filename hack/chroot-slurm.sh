#!/usr/bin/env bash
# What hack/slurm2411-up.sh and hack/slurm2605-up.sh share, sourced after
# lib.sh (with their DIR, ROOT, ACCOUNTING, DB_PORT, DBD_PORT and in_root):
# a Slurm that runs in a Debian root, its liveness and its accounting.

# plain_alive PIDFILE: the daemon that wrote its bare PID there runs.
plain_alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

all_alive() {
	pidfile_alive "$DIR/munged.pid" && pidfile_alive "$DIR/slurmrestd.pid" &&
		plain_alive "$ROOT/run/slurmctld.pid" && plain_alive "$ROOT/run/slurmd.pid" &&
		{ [ "$ACCOUNTING" = 0 ] || { pidfile_alive "$DIR/mariadbd.pid" && plain_alive "$ROOT/run/slurmdbd.pid"; }; }
}

# until_ok SECONDS WHAT LOG CMD...: waits for CMD to succeed; dies with LOG's
# tail after SECONDS.
until_ok() {
	local limit=$1 what=$2 logf=$3 deadline
	shift 3
	deadline=$((SECONDS + limit))
	until "$@" >/dev/null 2>&1; do
		[ $SECONDS -lt "$deadline" ] || { tail_logs 20 "$logf"; die "$what is not up after $limit s"; }
		sleep 0.2
	done
}

# start_chroot_accounting DBUSER DBNAME CLUSTER SCRIPT: MariaDB and slurmdbd
# (after munged, before slurmctld), the database and its user with a fresh
# password, and the cluster. MariaDB is the host's (Debian 12's 10.11, as
# hack/slurm-accounting.sh runs it for 22.05), on the instance's own port and
# data directory, with a database and user of its own: nothing is shared with
# the other clusters' accounting. Not the root's MariaDB: 26.05.5's slurmdbd
# cannot talk to unstable's MariaDB 11.8 (its first query fails "Number of
# columns in result (=1) set exceeds maximum allowed number of columns (=0)",
# error 5027, and slurmdbd exits); over TCP to 10.11 it can.
start_chroot_accounting() {
	local dbuser=$1 dbname=$2 cluster=$3 script=$4
	log "starting mariadbd (127.0.0.1:$DB_PORT) and slurmdbd (127.0.0.1:$DBD_PORT)"
	need_cmd mariadbd mariadb-server
	mkdir -p "$DIR/db"
	chown mysql:mysql "$DIR/db" && chmod 700 "$DIR/db"
	rm -rf "$DIR/db/data"
	mariadb-install-db --user=mysql --datadir="$DIR/db/data" --auth-root-authentication-method=socket \
		--skip-test-db >"$DIR/db/install.log" 2>&1 || die "mariadb-install-db failed; see $DIR/db/install.log"
	start_daemon "$DIR/mariadbd.pid" "$DIR/mariadbd.log" /usr/sbin/mariadbd --no-defaults --user=mysql \
		--datadir="$DIR/db/data" --bind-address=127.0.0.1 --port="$DB_PORT" --socket="$DIR/db/mariadbd.sock" \
		--innodb-buffer-pool-size=64M --innodb-log-file-size=48M --innodb-lock-wait-timeout=900
	until_ok 60 mariadbd "$DIR/mariadbd.log" mariadb --no-defaults --socket="$DIR/db/mariadbd.sock" -u root -e 'select 1'
	local pass
	pass=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
	mariadb --no-defaults --socket="$DIR/db/mariadbd.sock" -u root <<SQL
CREATE USER IF NOT EXISTS '$dbuser'@'127.0.0.1' IDENTIFIED BY '$pass';
GRANT ALL ON $dbname.* TO '$dbuser'@'127.0.0.1';
SQL
	(
		umask 077
		cat >"$ROOT/etc/slurm/slurmdbd.conf" <<CONF
# Written by $script.
AuthType=auth/munge
# slurmrestd forwards the caller's token: slurmdbd checks it with slurmctld's key.
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=/var/lib/slurm/jwt_hs256.key
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=slurm
PidFile=/run/slurmdbd.pid
LogFile=/var/log/slurm/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=$dbuser
StoragePass=$pass
StorageLoc=$dbname
CONF
	)
	in_root chown slurm:slurm /etc/slurm/slurmdbd.conf
	# 9>&-: slurmdbd keeps inherited descriptors, and would hold with_lock's
	# lock for as long as it runs (the next up would wait for it in vain).
	in_root slurmdbd 9>&-
	until_ok 60 slurmdbd "$ROOT/var/log/slurm/slurmdbd.log" in_root sacctmgr -n -P show cluster
	# slurmctld registers with slurmdbd only as a known cluster.
	in_root sacctmgr -i add cluster "$cluster" >/dev/null 2>&1 || true
}
