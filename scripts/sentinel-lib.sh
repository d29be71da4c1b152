# Shell functions for a private Sentinel deployment on loopback, shared by the test wrapper
# (tests/with-sentinel.sh) and, later, the demo and the benchmark: one master, one replica
# and three sentinels (quorum 2) of Debian's redis-server, on free ports, stopped by pid.
# Sentinels mark a silent master down after SENTINEL_DOWN_MS (default 1000 ms).
# After sentinel_start: SENTINEL_MASTER_PORT, SENTINEL_REPLICA_PORT, SENTINEL_PORTS
# ("p1 p2 p3"), SENTINEL_PIDS, SENTINEL_DIR; the master's name is "mymaster".

# The server (BATON_SERVER: redis-server by default, valkey-server for Valkey, Sentinel and
# Cluster included) and its client (BATON_CLI: the -cli beside it, valkey-cli for Valkey).
: "${BATON_SERVER:=redis-server}"
: "${BATON_CLI:=${BATON_SERVER%-server}-cli}"
export BATON_SERVER BATON_CLI

# Starts "$@" (a redis-server command line without --port) on a free port in 30000-40000;
# sets _port and _pid.
_sentinel_spawn() {
    for _try in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
        _port=$(( 30000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 10000 ))
        "$BATON_CLI" -p "$_port" ping >/dev/null 2>&1 && continue
        "$@" --port "$_port" >/dev/null 2>&1 &
        _pid=$!
        _w=0
        while [ $_w -lt 100 ] && kill -0 "$_pid" 2>/dev/null; do
            [ "$("$BATON_CLI" -p "$_port" ping 2>/dev/null)" = PONG ] && return 0
            sleep 0.05
            _w=$((_w + 1))
        done
        kill -9 "$_pid" 2>/dev/null
    done
    echo "could not start: $*" >&2
    return 1
}

sentinel_start() {
    SENTINEL_DIR=$(mktemp -d /tmp/baton-sentinel.XXXXXX) || return 1
    SENTINEL_PIDS=
    SENTINEL_PORTS=
    mkdir -p "$SENTINEL_DIR/master" "$SENTINEL_DIR/replica"
    _sentinel_spawn "$BATON_SERVER" --bind 127.0.0.1 --save '' --appendonly no \
        --repl-diskless-sync-delay 0 --repl-ping-replica-period 1 --dir "$SENTINEL_DIR/master" \
        --logfile "$SENTINEL_DIR/master/redis.log" ${REDIS_EXTRA_ARGS:-} || return 1
    SENTINEL_MASTER_PORT=$_port
    SENTINEL_PIDS="$_pid"
    _sentinel_spawn "$BATON_SERVER" --bind 127.0.0.1 --save '' --appendonly no \
        --repl-diskless-sync-delay 0 --repl-ping-replica-period 1 --dir "$SENTINEL_DIR/replica" \
        --logfile "$SENTINEL_DIR/replica/redis.log" \
        --replicaof 127.0.0.1 "$SENTINEL_MASTER_PORT" ${REDIS_EXTRA_ARGS:-} || return 1
    SENTINEL_REPLICA_PORT=$_port
    SENTINEL_PIDS="$SENTINEL_PIDS $_pid"
    for _s in 1 2 3; do
        _d="$SENTINEL_DIR/s$_s"
        mkdir -p "$_d"
        # a sentinel rewrites its configuration file: each has its own
        cat >"$_d/sentinel.conf" <<EOC
bind 127.0.0.1
dir $_d
logfile $_d/sentinel.log
sentinel monitor mymaster 127.0.0.1 $SENTINEL_MASTER_PORT 2
sentinel down-after-milliseconds mymaster ${SENTINEL_DOWN_MS:-1000}
sentinel failover-timeout mymaster 5000
sentinel parallel-syncs mymaster 1
EOC
        _sentinel_spawn "$BATON_SERVER" "$_d/sentinel.conf" --sentinel || return 1
        SENTINEL_PORTS="$SENTINEL_PORTS $_port"
        SENTINEL_PIDS="$SENTINEL_PIDS $_pid"
    done
    SENTINEL_PORTS=${SENTINEL_PORTS# }
    # ready: the replica is in sync, and every sentinel knows the replica and the others
    _w=0
    until "$BATON_CLI" -p "$SENTINEL_REPLICA_PORT" info replication 2>/dev/null |
            grep -q 'master_link_status:up'; do
        _w=$((_w + 1))
        [ $_w -gt 400 ] && { echo "the replica never synced" >&2; return 1; }
        sleep 0.025
    done
    for _p in $SENTINEL_PORTS; do
        _w=0
        until [ "$("$BATON_CLI" -p "$_p" sentinel master mymaster 2>/dev/null |
                   sed -n '/^num-other-sentinels$/{n;p}')" = 2 ] &&
              [ "$("$BATON_CLI" -p "$_p" sentinel master mymaster 2>/dev/null |
                   sed -n '/^num-slaves$/{n;p}')" = 1 ]; do
            _w=$((_w + 1))
            [ $_w -gt 600 ] && { echo "sentinel $_p never saw its peers" >&2; return 1; }
            sleep 0.025
        done
    done
    export SENTINEL_MASTER_PORT SENTINEL_REPLICA_PORT SENTINEL_PORTS SENTINEL_PIDS SENTINEL_DIR
}

sentinel_stop() {
    for _pid in ${SENTINEL_PIDS:-}; do
        kill -9 "$_pid" 2>/dev/null || true
    done
    SENTINEL_PIDS=
    [ -n "${SENTINEL_DIR:-}" ] && rm -rf "$SENTINEL_DIR"
    SENTINEL_DIR=
    return 0
}
