#!/bin/bash
# A three-node MariaDB Galera cluster on loopback, for the Galera tests,
# and the HAProxy in front of it that production deployments use.
#
#   tools/galera-cluster.sh start DIR          start it (DIR holds everything)
#   tools/galera-cluster.sh stop DIR           stop the proxy (if running)
#                                              and every node of DIR
#   tools/galera-cluster.sh status DIR         print each node's state
#   tools/galera-cluster.sh kill DIR N         SIGKILL node N (tests)
#   tools/galera-cluster.sh join DIR N         start node N again into the
#                                              cluster
#   tools/galera-cluster.sh pause DIR N        SIGSTOP node N (tests): its
#                                              connections stay open and
#                                              nothing answers, as on a
#                                              host that hangs
#   tools/galera-cluster.sh resume DIR N       SIGCONT node N; it rejoins
#                                              the cluster by itself
#   tools/galera-cluster.sh proxy-start DIR    start HAProxy and a
#                                              clustercheck per node
#   tools/galera-cluster.sh proxy-stop DIR     stop them
#   tools/galera-cluster.sh proxy-restart DIR  stop and start HAProxy alone
#   tools/galera-cluster.sh proxy-status DIR   print HAProxy's view of the
#                                              nodes and the active one
#
# Each node is a mariadbd of its own with its own data directory, socket,
# pid file and ports under DIR; nothing is shared with a server on 3306.
# Node N listens on 127.0.0.1:$((GALERA_BASE_PORT + N)) (4301-4303 unless
# GALERA_BASE_PORT is set), with its Galera (group communication), IST and
# SST ports distinct (4561-4563, 4571-4573, 4581-4583 unless GALERA_GCOMM_BASE,
# GALERA_IST_BASE or GALERA_SST_BASE is set): below the kernel's ephemeral
# range, so that no client connection (a test's to 3306, say) can hold
# one when a node binds it. Every node runs with
# wsrep_mode=REQUIRED_PRIMARY_KEY.
# The first node bootstraps the cluster (--wsrep-new-cluster); the others
# join it by SST (rsync). "start" returns once wsrep_cluster_size is 3 and
# the openstack_citest account exists, and prints how long that took and
# the cluster's addresses (HEALREQ_TEST_GALERA=...).
#
# The proxy is the topology kolla-ansible deploys: HAProxy in TCP mode on
# 127.0.0.1:$GALERA_PROXY_PORT (4310), node 1 the active server and the
# others "backup", each checked every second with "option httpchk"
# against a clustercheck responder of its own (tools/clustercheck.py, on
# 127.0.0.1:$((GALERA_CHECK_BASE + N)), 4321-4323), which answers 200 only
# while the node's wsrep_local_state_comment is Synced, else 503. A server
# is down after 2 failed checks and up after 2 good ones; the sessions of
# a server marked down are shut (on-marked-down shutdown-sessions). Clients
# go to node 1 while it is up, else to the first backup that is.
# "timeout connect" is 2s; "timeout client" and "timeout server" are
# GALERA_PROXY_TIMEOUT seconds (8 unless set): kolla's are 3600s, which no
# test can wait out, while the tests must see what an idle connection
# dropped by the proxy does. 8s is longer than any pause of a run under
# test (a lease is renewed every 5s) yet short to wait for.
# A second listener on 127.0.0.1:$GALERA_PROXY_LONG_PORT (4311) has
# kolla's timeouts ("timeout client" and "timeout server" 3600s) and
# never shuts the sessions of a server marked down: the same servers,
# backups and health (each tracks the first listener's server), for the
# tests of a node that hangs while the proxy keeps its clients'
# connections open, as kolla's does.
# "proxy-start" returns once SELECT 1 answers through the proxy, and
# prints how long that took and its addresses (HEALREQ_TEST_GALERA_PROXY=...
# and HEALREQ_TEST_GALERA_PROXY_LONG=...).
# HAProxy runs in the background as the nodes do (not under systemd), its
# pid file, configuration, stats socket and log (each server going DOWN or
# UP) under DIR/proxy, with the clustercheck responders' pid files and
# logs. Nothing ever points the proxy at a server on 3306.
#
# Run as root (the nodes then run as the mysql user, when it exists) or as
# the mysql user.
# galera-4, rsync and haproxy are installed with apt-get when missing.
set -euo pipefail

NODES=3
BASE_PORT=${GALERA_BASE_PORT:-4300}
GCOMM_BASE=${GALERA_GCOMM_BASE:-4560}
IST_BASE=${GALERA_IST_BASE:-4570}
SST_BASE=${GALERA_SST_BASE:-4580}
START_TIMEOUT=${GALERA_START_TIMEOUT:-120}
PROXY_PORT=${GALERA_PROXY_PORT:-4310}
PROXY_LONG_PORT=${GALERA_PROXY_LONG_PORT:-4311}
CHECK_BASE=${GALERA_CHECK_BASE:-4320}
PROXY_TIMEOUT=${GALERA_PROXY_TIMEOUT:-8}
PROXY_START_TIMEOUT=30
# The server the proxy must never front: the tests' plain MariaDB.
PLAIN_SERVER_PORT=3306
TOOLS=$(cd "$(dirname "$0")" && pwd)
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
    local actions=start\|stop\|status\|proxy-start\|proxy-stop
    actions+=\|proxy-restart\|proxy-status
    die "usage: $0 $actions DIR, or $0 kill|join|pause|resume DIR NODE"
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

# apt_install PACKAGE...: install them with apt-get, updating its lists
# once first if they are too old to find them.
apt_install() {
    command -v apt-get >/dev/null 2>&1 || \
        die "missing $* and no apt-get to install them"
    log "installing $* with apt-get"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" \
        >/dev/null || {
        apt-get update -q >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >/dev/null
    } || die "apt-get could not install $*"
}

ensure_packages() {
    local missing=()
    find_provider >/dev/null || missing+=(galera-4)
    command -v rsync >/dev/null 2>&1 || missing+=(rsync)
    [ "${#missing[@]}" -eq 0 ] && return 0
    apt_install "${missing[@]}"
}

find_haproxy() {
    local candidate
    for candidate in "$(command -v haproxy || true)" /usr/sbin/haproxy; do
        if [ -n "$candidate" ] && [ -x "$candidate" ]; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

ensure_haproxy() {
    find_haproxy >/dev/null && return 0
    apt_install haproxy
    find_haproxy >/dev/null || die "haproxy is not installed"
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

# The pid a pid file names, if that process is alive.
pidfile_pid() {
    local pid
    [ -s "$1" ] || return 1
    pid=$(cat "$1")
    kill -0 "$pid" 2>/dev/null || return 1
    echo "$pid"
}

node_pid() {
    pidfile_pid "$(node_pidfile "$1")"
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
    if [ -d "$(proxy_dir)" ]; then
        cmd_proxy_stop
    fi
    for node in $(seq 1 "$NODES"); do
        pid=$(node_pid "$node") || continue
        # A paused node handles its TERM only once continued.
        kill -CONT "$pid" 2>/dev/null || true
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

# SIGSTOP: the process stays, with its sockets open, and answers nothing
# (neither its clients nor the other nodes, which drop it from the
# cluster after evs.inactive_timeout).
cmd_pause() {
    local pid
    pid=$(node_pid "$1") || die "node $1 is not running"
    kill -STOP "$pid"
}

cmd_resume() {
    local pid
    pid=$(node_pid "$1") || die "node $1 is not running"
    kill -CONT "$pid"
}

# --------------------------------------------------------------------------
# The proxy: HAProxy and a clustercheck responder per node, under DIR/proxy
# --------------------------------------------------------------------------

proxy_dir() { echo "$DIR/proxy"; }
proxy_address() { echo "127.0.0.1:$PROXY_PORT"; }
proxy_long_address() { echo "127.0.0.1:$PROXY_LONG_PORT"; }
check_port() { echo $((CHECK_BASE + $1)); }
check_pidfile() { echo "$(proxy_dir)/clustercheck$1.pid"; }
haproxy_pidfile() { echo "$(proxy_dir)/haproxy.pid"; }
haproxy_socket() { echo "$(proxy_dir)/haproxy.sock"; }

check_proxy_settings() {
    local port node
    [[ $PROXY_TIMEOUT =~ ^[1-9][0-9]*$ ]] || \
        die "GALERA_PROXY_TIMEOUT is a number of seconds, not" \
            "'$PROXY_TIMEOUT'"
    [ "$PROXY_LONG_PORT" != "$PROXY_PORT" ] || \
        die "GALERA_PROXY_LONG_PORT and GALERA_PROXY_PORT are both $PROXY_PORT"
    for port in "$PROXY_PORT" "$PROXY_LONG_PORT" $(for node in \
            $(seq 1 "$NODES"); do node_port "$node"; check_port "$node"
            done); do
        [ "$port" != "$PLAIN_SERVER_PORT" ] || \
            die "the proxy never uses port $PLAIN_SERVER_PORT (the plain" \
                "MariaDB server's); set GALERA_PROXY_PORT," \
                "GALERA_PROXY_LONG_PORT, GALERA_CHECK_BASE or GALERA_BASE_PORT"
    done
}

# The node the proxy sends a new client to (its wsrep_node_name), if any.
proxy_select() {
    mariadb --no-defaults -u"$DB_USER" -p"$DB_PW" --protocol=TCP \
        -h127.0.0.1 -P"$PROXY_PORT" --connect-timeout=2 -N -B \
        -e 'SELECT @@wsrep_node_name' 2>/dev/null
}

write_proxy_config() {
    local node backup cfg
    cfg="$(proxy_dir)/haproxy.cfg"
    cat >"$cfg" <<CFG
# Written by tools/galera-cluster.sh proxy-start: kolla-ansible's
# topology, on loopback, with timeouts the tests can wait out.
global
    maxconn 1000
    stats socket $(haproxy_socket) mode 600 level admin

defaults
    mode tcp
    timeout connect 2s
    timeout client ${PROXY_TIMEOUT}s
    timeout server ${PROXY_TIMEOUT}s

listen galera
    bind $(proxy_address)
    mode tcp
    option clitcpka
    option srvtcpka
    option httpchk
CFG
    for node in $(seq 1 "$NODES"); do
        backup=""
        [ "$node" -eq 1 ] || backup=" backup"
        echo "    server node$node 127.0.0.1:$(node_port "$node") check" \
            "port $(check_port "$node") inter 1s fall 2 rise 2" \
            "on-marked-down shutdown-sessions$backup" >>"$cfg"
    done
    cat >>"$cfg" <<CFG

# kolla's timeouts, and the sessions of a server marked down left open:
# a client of a node that hangs waits on its open connection.
listen galera-long
    bind $(proxy_long_address)
    mode tcp
    timeout client 3600s
    timeout server 3600s
    option clitcpka
    option srvtcpka
CFG
    for node in $(seq 1 "$NODES"); do
        backup=""
        [ "$node" -eq 1 ] || backup=" backup"
        echo "    server node$node 127.0.0.1:$(node_port "$node")" \
            "track galera/node$node$backup" >>"$cfg"
    done
}

start_check() {
    local node=$1 python
    python=$(command -v python3) || die "python3 is needed for clustercheck"
    nohup "$python" "$TOOLS/clustercheck.py" \
        --listen "$(check_port "$node")" \
        --node-port "$(node_port "$node")" --name "node$node" \
        >>"$(proxy_dir)/clustercheck$node.log" 2>&1 </dev/null &
    echo $! >"$(check_pidfile "$node")"
}

start_haproxy() {
    local haproxy log
    haproxy=$(find_haproxy)
    log="$(proxy_dir)/haproxy.log"
    "$haproxy" -c -q -f "$(proxy_dir)/haproxy.cfg" >>"$log" 2>&1 || {
        tail -n 20 "$log" >&2
        die "haproxy refuses $(proxy_dir)/haproxy.cfg"
    }
    # In the foreground of a background job, as the nodes run: its
    # warnings (each server going DOWN or UP) go to the log.
    nohup "$haproxy" -db -f "$(proxy_dir)/haproxy.cfg" >>"$log" 2>&1 \
        </dev/null &
    echo $! >"$(haproxy_pidfile)"
}

# stop_pidfile FILE WHAT: TERM the process FILE names, KILL it after 10s.
stop_pidfile() {
    local pid waited=0
    pid=$(pidfile_pid "$1") || { rm -f "$1"; return 1; }
    kill -TERM "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do
        if [ "$waited" -ge 20 ]; then
            kill -KILL "$pid" 2>/dev/null || true
            break
        fi
        sleep 0.5
        waited=$((waited + 1))
    done
    rm -f "$1"
    log "$2 stopped"
}

# Wait until a node answers through the proxy; undo the start if none
# does.
wait_proxy() {
    local waited=0
    until proxy_select >/dev/null; do
        if ! pidfile_pid "$(haproxy_pidfile)" >/dev/null; then
            tail -n 20 "$(proxy_dir)/haproxy.log" >&2 || true
            cmd_proxy_stop >/dev/null
            die "haproxy exited (see $(proxy_dir)/haproxy.log)"
        fi
        if [ "$waited" -ge $((PROXY_START_TIMEOUT * 2)) ]; then
            tail -n 20 "$(proxy_dir)/haproxy.log" >&2 || true
            cmd_proxy_status >&2 || true
            cmd_proxy_stop >/dev/null
            die "no node answers through $(proxy_address) after" \
                "${PROXY_START_TIMEOUT}s"
        fi
        sleep 0.5
        waited=$((waited + 1))
    done
}

cmd_proxy_start() {
    local start=$SECONDS node port running=0 waited
    ensure_haproxy
    check_proxy_settings
    if pidfile_pid "$(haproxy_pidfile)" >/dev/null; then
        die "the proxy of $DIR is already running; stop it first"
    fi
    for node in $(seq 1 "$NODES"); do
        if pidfile_pid "$(check_pidfile "$node")" >/dev/null; then
            die "the clustercheck of node $node of $DIR is already" \
                "running; run proxy-stop first"
        fi
        if node_pid "$node" >/dev/null; then
            running=$((running + 1))
        fi
    done
    [ "$running" -gt 0 ] || \
        die "no node of $DIR is running; start the cluster first"
    for port in "$PROXY_PORT" "$PROXY_LONG_PORT" $(for node in \
            $(seq 1 "$NODES"); do check_port "$node"; done); do
        if port_taken "$port"; then
            die "port $port of the proxy is in use (another proxy?);" \
                "stop it or set GALERA_PROXY_PORT, GALERA_PROXY_LONG_PORT" \
                "and GALERA_CHECK_BASE"
        fi
    done
    mkdir -p "$(proxy_dir)"
    for node in $(seq 1 "$NODES"); do
        start_check "$node"
    done
    # HAProxy's first checks must find the responders.
    for node in $(seq 1 "$NODES"); do
        waited=0
        until port_taken "$(check_port "$node")"; do
            if ! pidfile_pid "$(check_pidfile "$node")" >/dev/null || \
                    [ "$waited" -ge 20 ]; then
                tail -n 5 "$(proxy_dir)/clustercheck$node.log" >&2 || true
                cmd_proxy_stop >/dev/null
                die "the clustercheck of node $node does not answer on" \
                    "127.0.0.1:$(check_port "$node")"
            fi
            sleep 0.5
            waited=$((waited + 1))
        done
    done
    write_proxy_config
    start_haproxy
    wait_proxy
    log "proxy $(proxy_address) answers in $((SECONDS - start))s, sending" \
        "clients to $(proxy_select)"
    print_proxy_addresses
}

print_proxy_addresses() {
    echo "HEALREQ_TEST_GALERA_PROXY=$(proxy_address)"
    echo "HEALREQ_TEST_GALERA_PROXY_LONG=$(proxy_long_address)"
}

cmd_proxy_stop() {
    local node
    stop_pidfile "$(haproxy_pidfile)" haproxy || true
    for node in $(seq 1 "$NODES"); do
        stop_pidfile "$(check_pidfile "$node")" \
            "the clustercheck of node $node" || true
    done
}

# HAProxy alone: the clustercheck responders go on answering, and every
# connection through the proxy is cut.
cmd_proxy_restart() {
    local start=$SECONDS node
    ensure_haproxy
    check_proxy_settings
    for node in $(seq 1 "$NODES"); do
        pidfile_pid "$(check_pidfile "$node")" >/dev/null || \
            die "the clustercheck of node $node of $DIR is not running;" \
                "run proxy-stop, then proxy-start"
    done
    stop_pidfile "$(haproxy_pidfile)" haproxy || true
    for port in "$PROXY_PORT" "$PROXY_LONG_PORT"; do
        if port_taken "$port"; then
            die "port $port of the proxy is in use by another process"
        fi
    done
    write_proxy_config
    start_haproxy
    wait_proxy
    log "proxy $(proxy_address) restarted, answering in" \
        "$((SECONDS - start))s, sending clients to $(proxy_select)"
    print_proxy_addresses
}

# "proxy ADDRESS pid=PID active=NODE" (the server HAProxy sends new
# clients to: node 1 while it is up, else the first backup that is, or
# "none"), then a line per node: its role, HAProxy's status of it and its
# last check. Exits 1 when the proxy is down or no node is usable.
cmd_proxy_status() {
    local pid
    pid=$(pidfile_pid "$(haproxy_pidfile)") || {
        echo "proxy $(proxy_address) down"
        return 1
    }
    python3 - "$(haproxy_socket)" "$(proxy_address)" "$pid" <<'PY'
import csv
import io
import socket
import sys

sock, address, pid = sys.argv[1:4]
client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
client.settimeout(5)
try:
    client.connect(sock)
    client.sendall(b'show stat\n')
    data = b''
    while True:
        chunk = client.recv(65536)
        if not chunk:
            break
        data += chunk
except OSError as exc:
    print('proxy %s pid=%s unreadable: %s' % (address, pid, exc))
    sys.exit(1)
finally:
    client.close()
text = data.decode().lstrip('# ')
servers = [row for row in csv.DictReader(io.StringIO(text))
           if row['pxname'] == 'galera'
           and row['svname'] not in ('FRONTEND', 'BACKEND')]
usable = [row for row in servers if row['status'].startswith('UP')]
active = ([row for row in usable if row['bck'] == '0']
          or [row for row in usable if row['bck'] == '1'])
print('proxy %s pid=%s active=%s' % (
    address, pid, active[0]['svname'] if active else 'none'))
for row in servers:
    print('%s %s %s check=%s/%s last-change=%ss' % (
        row['svname'], 'backup' if row['bck'] == '1' else 'active',
        row['status'].replace(' ', '_'), row['check_status'],
        row['check_code'] or '-', row['lastchg']))
sys.exit(0 if active else 1)
PY
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
    pause) [ $# -eq 3 ] || usage; cmd_pause "$3" ;;
    resume) [ $# -eq 3 ] || usage; cmd_resume "$3" ;;
    proxy-start) cmd_proxy_start ;;
    proxy-stop) cmd_proxy_stop ;;
    proxy-restart) cmd_proxy_restart ;;
    proxy-status) cmd_proxy_status ;;
    *) usage ;;
esac
