# Sourced by hack/slurm-up.sh when BRIDGE_SLURM_ACCOUNTING=1: a private MariaDB
# (Debian's, on 127.0.0.1 and a free port; data under $DIR/db) and slurmdbd (on
# 127.0.0.1 and a free port) so that slurmctld keeps accounting and slurmrestd can
# serve /slurmdb/: jobs purged from slurmctld after MinJobAge stay known there.
# Uses from slurm-up.sh: DIR, HOST, log, die, free_port, wait_for, used_ports, picked.
# Stopped by hack/slurm-down.sh (PID files $DIR/db/mariadbd.pid, $DIR/dbd/slurmdbd.pid).

ACCT_PKGS=(mariadb-server slurmdbd)

# accounting_conf: the slurm.conf lines that point slurmctld at slurmdbd.
accounting_conf() {
	printf 'AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost=127.0.0.1\nAccountingStoragePort=%s\n' "$DBD_PORT"
	# Not a password: with auth/munge, where munged's socket is (for the connection to slurmdbd).
	printf 'AccountingStoragePass=%s\n' "$DIR/munge/munge.socket"
	# The comment carries the record's key: keep it in the database too.
	printf 'AccountingStoreFlags=job_comment\n'
}

# accounting_ports: picks the two ports before slurm.conf is written.
accounting_ports() {
	DB_PORT=$(free_port)
	picked+=("$DB_PORT")
	DBD_PORT=$(free_port)
	picked+=("$DBD_PORT")
}

# accounting_start: MariaDB, the database user, slurmdbd; after munged, before slurmctld.
accounting_start() {
	mkdir -p "$DIR/db" "$DIR/dbd"
	chown mysql:mysql "$DIR/db" && chmod 700 "$DIR/db"
	chown slurm:slurm "$DIR/dbd" && chmod 700 "$DIR/dbd"
	if [ ! -d "$DIR/db/data/mysql" ]; then
		mariadb-install-db --user=mysql --datadir="$DIR/db/data" --auth-root-authentication-method=socket \
			--skip-test-db >"$DIR/db/install.log" 2>&1 || die "mariadb-install-db failed; see $DIR/db/install.log"
	fi
	log "starting mariadbd (127.0.0.1:$DB_PORT) and slurmdbd (127.0.0.1:$DBD_PORT)"
	(
		exec setsid /usr/sbin/mariadbd --no-defaults --user=mysql --datadir="$DIR/db/data" \
			--bind-address=127.0.0.1 --port="$DB_PORT" --socket="$DIR/db/mariadbd.sock" \
			--pid-file="$DIR/db/mariadbd.pid" --log-error="$DIR/db/mariadbd.log" \
			--innodb-buffer-pool-size=64M --innodb-log-file-size=48M --innodb-lock-wait-timeout=900 </dev/null >/dev/null 2>&1
	) &
	db_up() { mariadb --no-defaults --socket="$DIR/db/mariadbd.sock" -u root -e 'select 1'; }
	wait_for 60 mariadbd db_up
	local pass
	pass=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
	mariadb --no-defaults --socket="$DIR/db/mariadbd.sock" -u root <<SQL
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
SQL
	(
		umask 077
		cat >"$DIR/etc/slurmdbd.conf" <<CONF
# Written by hack/slurm-up.sh (BRIDGE_SLURM_ACCOUNTING=1).
AuthType=auth/munge
AuthInfo=socket=$DIR/munge/munge.socket
# slurmrestd forwards the caller's token: slurmdbd checks it with slurmctld's key.
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$DIR/ctld/jwt_hs256.key
DbdHost=$HOST
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=slurm
PidFile=$DIR/dbd/slurmdbd.pid
LogFile=$DIR/dbd/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$pass
StorageLoc=slurm_acct_db
CONF
	)
	chown slurm:slurm "$DIR/etc/slurmdbd.conf"
	slurmdbd
	dbd_up() { sacctmgr -n -P show cluster; }
	wait_for 60 slurmdbd dbd_up
	# slurmctld registers with slurmdbd only as a known cluster.
	sacctmgr -i add cluster bridge >/dev/null 2>&1 || true
}
