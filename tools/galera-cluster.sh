#!/bin/bash
# A three-node MariaDB Galera cluster on loopback, for the Galera tests.
#
#   tools/galera-cluster.sh start DIR    start it (DIR holds everything)
#   tools/galera-cluster.sh stop DIR     stop every node of DIR
#   tools/galera-cluster.sh status DIR   print each node's state
#   tools/galera-cluster.sh kill DIR N   SIGKILL node N (tests)
#   tools/galera-cluster.sh join DIR N   start node N again into the cluster
#
# Each node is a mariadbd of its own with its own data directory, socket,
# pid file and ports under DIR; nothing is shared with a server on 3306.
# Node N listens on 127.0.0.1:$((GALERA_BASE_PORT + N)) (4301-4303 unless
# GALERA_BASE_PORT is set), with its Galera (group communication), IST and
# SST ports distinct. Every node runs with wsrep_mode=REQUIRED_PRIMARY_KEY.
# The first node bootstraps the cluster (--wsrep-new-cluster); the others
# join it by SST (rsync). "start" returns once wsrep_cluster_size is 3 and
# the openstack_citest account exists, and prints how long that took and
# the cluster's addresses (HEALREQ_TEST_GALERA=...).
#
# Run as root (the nodes then run as the mysql user, when it exists) or as
# the mysql user.
# galera-4 and rsync are installed with apt-get when missing.
set -euo pipefail

NODES=3
BASE_PORT=${GALERA_BASE_PORT:-4300}
GCOMM_BASE=${GALERA_GCOMM_BASE:-45670}
IST_BASE=${GALERA_IST_BASE:-45680}
SST_BASE=${GALERA_SST_BASE:-45690}
START_TIMEOUT=${GALERA_START_TIMEOUT:-120}
DB_USER=openstack_citest
DB_PW=openstack_citest

log() {
    echo "[galera-cluster] $*"
}

die() {
    echo "[galera-cluster] ERROR: $*" >&2
    exit 1
}

usage() {
    die "usage: $0 start|stop|status DIR, or $0 kill|join DIR NODE"
}

find_mariadbd() {
    local candidate
    for candidate in "$(command -v mariadbd || true)" /usr/sbin/mariadbd \
            /usr/libexec/mariadbd "$(command -v mysqld || true)" \
            /usr/sbin/mysqld; do
        if [ -n "$candidate" ] && [ -x "$candidate" ]; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

find_provider() {
    local candidate
    for candidate in /usr/lib/galera/libgalera_smm.so \
            /usr/lib/galera-4/libgalera_smm.so \
            /usr/lib64/galera-4/libgalera_smm.so \
            /usr/lib64/galera/libgalera_smm.so \
            /usr/lib/libgalera_smm.so; do
        if [ -e "$candidate" ]; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

ensure_packages() {
    local missing=()
    find_provider >/dev/null || missing+=(galera-4)
    command -v rsync >/dev/null 2>&1 || missing+=(rsync)
    [ "${#missing[@]}" -eq 0 ] && return 0
    command -v apt-get >/dev/null 2>&1 || \
        die "missing ${missing[*]} and no apt-get to install them"
    log "installing ${missing[*]} with apt-get"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" \
        >/dev/null || {
        apt-get update -q >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
            "${missing[@]}" >/dev/null
    } || die "apt-get could not install ${missing[*]}"
}

node_dir() { echo "$DIR/node$1"; }
node_port() { echo $((BASE_PORT + $1)); }
node_socket() { echo "$(node_dir "$1")/mysqld.sock"; }
node_pidfile() { echo "$(node_dir "$1")/mysqld.pid"; }

client() {
    local node=$1
    shift
    mariadb --no-defaults -uroot --socket="$(node_socket "$node")" \
        --connect-timeout=2 -N -B "$@"
}

# As root the nodes run as mysql when that user exists: the rsync daemon
# of an SST run as root writes as nobody, which cannot create the
# joiner's files.
run_user() {
    if [ "$(id -u)" -ne 0 ]; then
        id -un
    elif id mysql >/dev/null 2>&1; then
        echo mysql
    else
        echo root
    fi
}

# Give DIR to the user the nodes run as; it must be able to reach it.
own_dir() {
    local user
    user=$(run_user)
    [ "$(id -u)" -eq 0 ] && [ "$user" != root ] || return 0
    chown -R "$user:" "$DIR"
    if command -v runuser >/dev/null 2>&1 && \
            ! runuser -u "$user" -- test -w "$DIR"; then
        die "$user cannot write to $DIR (is a parent directory closed?)"
    fi
}

write_config() {
    local node=$1 dir provider gcomm="" i
    dir=$(node_dir "$node")
    provider=$(find_provider)
    for i in $(seq 1 "$NODES"); do
        gcomm+="${gcomm:+,}127.0.0.1:$((GCOMM_BASE + i))"
    done
    cat >"$dir/my.cnf" <<EOF
[mysqld]
user=$(run_user)
datadir=$dir/data
tmpdir=$dir/tmp
socket=$(node_socket "$node")
pid-file=$(node_pidfile "$node")
log-error=$dir/error.log
bind-address=127.0.0.1
port=$(node_port "$node")
skip-name-resolve
character-set-server=utf8mb4
collation-server=utf8mb4_general_ci
max_connections=300
innodb_buffer_pool_size=64M
innodb_log_file_size=32M
innodb_flush_log_at_trx_commit=2
innodb_autoinc_lock_mode=2
binlog_format=ROW
default_storage_engine=InnoDB
wsrep_on=ON
wsrep_provider=$provider
wsrep_cluster_name=healreq-galera
wsrep_cluster_address=gcomm://$gcomm
wsrep_node_name=node$node
wsrep_node_address=127.0.0.1:$((GCOMM_BASE + node))
wsrep_node_incoming_address=127.0.0.1:$(node_port "$node")
wsrep_provider_options="gmcast.listen_addr=tcp://127.0.0.1:$((GCOMM_BASE + node));ist.recv_addr=127.0.0.1:$((IST_BASE + node));gcache.size=64M;evs.suspect_timeout=PT3S;evs.inactive_timeout=PT6S;evs.install_timeout=PT4S"
wsrep_sst_method=rsync
wsrep_sst_receive_address=127.0.0.1:$((SST_BASE + node))
wsrep_mode=REQUIRED_PRIMARY_KEY
EOF
}

node_pid() {
    local pidfile
    pidfile=$(node_pidfile "$1")
    [ -s "$pidfile" ] || return 1
    local pid
    pid=$(cat "$pidfile")
    kill -0 "$pid" 2>/dev/null || return 1
    echo "$pid"
}

start_node() {
    local node=$1 dir mariadbd
    shift
    dir=$(node_dir "$node")
    mariadbd=$(find_mariadbd) || die "no mariadbd found"
    mkdir -p "$dir/tmp"
    write_config "$node"
    touch "$dir/error.log"
    own_dir
    # "$@": --wsrep-new-cluster for the first node of a new cluster.
    PATH="$PATH:/usr/bin:/usr/sbin:/bin:/sbin" \
        nohup "$mariadbd" --defaults-file="$dir/my.cnf" "$@" \
        >>"$dir/error.log" 2>&1 </dev/null &
}

wait_synced() {
    local node=$1 waited=0 state
    # Counted in half seconds.
    while :; do
        state=$(client "$node" -e \
            "SHOW STATUS LIKE 'wsrep_local_state_comment'" 2>/dev/null \
            | cut -f2 || true)
        [ "$state" = "Synced" ] && return 0
        if [ "$waited" -ge $((START_TIMEOUT * 2)) ]; then
            tail -n 30 "$(node_dir "$node")/error.log" >&2 || true
            die "node $node is not synced after ${START_TIMEOUT}s" \
                "(state: ${state:-down})"
        fi
        sleep 0.5
        waited=$((waited + 1))
    done
}

cluster_size() {
    client "$1" -e "SHOW STATUS LIKE 'wsrep_cluster_size'" 2>/dev/null \
        | cut -f2
}

create_account() {
    client 1 <<SQL
CREATE USER IF NOT EXISTS '$DB_USER'@'localhost' IDENTIFIED BY '$DB_PW';
CREATE USER IF NOT EXISTS '$DB_USER'@'127.0.0.1' IDENTIFIED BY '$DB_PW';
CREATE USER IF NOT EXISTS '$DB_USER'@'%' IDENTIFIED BY '$DB_PW';
GRANT ALL PRIVILEGES ON *.* TO '$DB_USER'@'localhost' WITH GRANT OPTION;
GRANT ALL PRIVILEGES ON *.* TO '$DB_USER'@'127.0.0.1' WITH GRANT OPTION;
GRANT ALL PRIVILEGES ON *.* TO '$DB_USER'@'%' WITH GRANT OPTION;
CREATE DATABASE IF NOT EXISTS $DB_USER;
SQL
}

addresses() {
    local out="" i
    for i in $(seq 1 "$NODES"); do
        out+="${out:+,}127.0.0.1:$(node_port "$i")"
    done
    echo "$out"
}

# Whether something listens on 127.0.0.1:PORT.
port_taken() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") >/dev/null 2>&1
}

cmd_start() {
    local start=$SECONDS node size waited=0 port
    ensure_packages
    for node in $(seq 1 "$NODES"); do
        if node_pid "$node" >/dev/null; then
            die "node $node of $DIR is already running; stop it first"
        fi
        for port in "$(node_port "$node")" "$((GCOMM_BASE + node))" \
                "$((IST_BASE + node))" "$((SST_BASE + node))"; do
            if port_taken "$port"; then
                die "port $port of node $node is in use (another cluster?);" \
                    "stop it or set GALERA_BASE_PORT and the other bases"
            fi
        done
    done
    for node in $(seq 1 "$NODES"); do
        local dir
        dir=$(node_dir "$node")
        rm -rf "$dir"
        mkdir -p "$dir/data" "$dir/tmp"
        mariadb-install-db --no-defaults --user="$(run_user)" \
            --datadir="$dir/data" --auth-root-authentication-method=socket \
            --skip-test-db >"$dir/install.log" 2>&1 || {
            tail -n 20 "$dir/install.log" >&2
            die "mariadb-install-db failed for node $node"
        }
    done
    start_node 1 --wsrep-new-cluster
    wait_synced 1
    create_account
    for node in $(seq 2 "$NODES"); do
        start_node "$node"
    done
    for node in $(seq 2 "$NODES"); do
        wait_synced "$node"
    done
    until [ "$(cluster_size 1)" = "$NODES" ]; do
        [ "$waited" -lt "$START_TIMEOUT" ] || \
            die "wsrep_cluster_size is $(cluster_size 1), not $NODES"
        sleep 1
        waited=$((waited + 1))
    done
    for node in $(seq 1 "$NODES"); do
        mariadb --no-defaults -u"$DB_USER" -p"$DB_PW" --protocol=TCP \
            -h127.0.0.1 -P"$(node_port "$node")" -e 'SELECT 1' \
            >/dev/null || die "$DB_USER cannot log in to node $node"
    done
    log "cluster of $NODES nodes synced in $((SECONDS - start))s"
    echo "HEALREQ_TEST_GALERA=$(addresses)"
}

cmd_stop() {
    local node pid waited
    for node in $(seq 1 "$NODES"); do
        pid=$(node_pid "$node") || continue
        kill -TERM "$pid"
        waited=0
        while kill -0 "$pid" 2>/dev/null; do
            if [ "$waited" -ge 60 ]; then
                kill -KILL "$pid" 2>/dev/null || true
                break
            fi
            sleep 0.5
            waited=$((waited + 1))
        done
        log "node $node stopped"
    done
}

cmd_status() {
    local node pid rc=0
    for node in $(seq 1 "$NODES"); do
        if pid=$(node_pid "$node"); then
            echo "node$node 127.0.0.1:$(node_port "$node") pid=$pid" \
                "state=$(client "$node" -e \
                "SHOW STATUS LIKE 'wsrep_local_state_comment'" \
                2>/dev/null | cut -f2) size=$(cluster_size "$node")"
        else
            echo "node$node 127.0.0.1:$(node_port "$node") down"
            rc=1
        fi
    done
    return "$rc"
}

cmd_kill() {
    local pid
    pid=$(node_pid "$1") || die "node $1 is not running"
    kill -KILL "$pid"
    while kill -0 "$pid" 2>/dev/null; do
        sleep 0.1
    done
}

cmd_join() {
    node_pid "$1" >/dev/null && die "node $1 is already running"
    start_node "$1"
    wait_synced "$1"
}

[ $# -ge 2 ] || usage
ACTION=$1
mkdir -p "$2"
DIR=$(cd "$2" && pwd)
case $ACTION in
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    kill) [ $# -eq 3 ] || usage; cmd_kill "$3" ;;
    join) [ $# -eq 3 ] || usage; cmd_join "$3" ;;
    *) usage ;;
esac
