# Shell functions for a private Redis Cluster on loopback, shared by the test wrapper
# (tests/with-cluster.sh) and, later, the demo and the benchmark: start masters and replicas
# of Debian's redis-server on free ports (41000-51000; each node's cluster bus is its port
# + 10000), join them with redis-cli --cluster create, wait until every node says
# cluster_state:ok and every replica is in sync, and stop them by pid.
# After cluster_start: CLUSTER_PORTS ("p1 p2 ..."), CLUSTER_PIDS, CLUSTER_DIR.

# The server (BATON_SERVER: redis-server by default, valkey-server for Valkey, Sentinel and
# Cluster included) and its client (BATON_CLI: the -cli beside it, valkey-cli for Valkey).
: "${BATON_SERVER:=redis-server}"
: "${BATON_CLI:=${BATON_SERVER%-server}-cli}"
export BATON_SERVER BATON_CLI

cluster_start() {
    _masters=${1:-3}
    _replicas=${2:-1}
    _n=$((_masters * (1 + _replicas)))
    CLUSTER_DIR=$(mktemp -d /tmp/baton-cluster.XXXXXX) || return 1
    CLUSTER_PORTS=
    CLUSTER_PIDS=
    _i=0
    while [ $_i -lt $_n ]; do
        _ok=
        for _try in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
            _p=$(( 41000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 10000 ))
            "$BATON_CLI" -p "$_p" ping >/dev/null 2>&1 && continue
            "$BATON_CLI" -p $((_p + 10000)) ping >/dev/null 2>&1 && continue
            _d="$CLUSTER_DIR/$_p"
            mkdir -p "$_d"
            "$BATON_SERVER" --port "$_p" --bind 127.0.0.1 --dir "$_d" --save '' --appendonly no \
                --cluster-enabled yes --cluster-config-file nodes.conf \
                --cluster-node-timeout "${CLUSTER_NODE_TIMEOUT:-1000}" \
                --repl-diskless-sync-delay 0 --repl-ping-replica-period 1 \
                --logfile "$_d/redis.log" ${REDIS_EXTRA_ARGS:-} >/dev/null 2>&1 &
            _pid=$!
            _w=0
            while [ $_w -lt 100 ] && kill -0 "$_pid" 2>/dev/null; do
                if [ "$("$BATON_CLI" -p "$_p" ping 2>/dev/null)" = PONG ]; then
                    _ok=1
                    break
                fi
                sleep 0.05
                _w=$((_w + 1))
            done
            [ -n "$_ok" ] && break
            kill -9 "$_pid" 2>/dev/null # it exited at once (a port was taken), or hangs
        done
        if [ -z "$_ok" ]; then
            echo "could not start a cluster node (logs: $CLUSTER_DIR)" >&2
            return 1
        fi
        CLUSTER_PORTS="$CLUSTER_PORTS $_p"
        CLUSTER_PIDS="$CLUSTER_PIDS $_pid"
        _i=$((_i + 1))
    done
    CLUSTER_PORTS=${CLUSTER_PORTS# }
    CLUSTER_PIDS=${CLUSTER_PIDS# }
    _addrs=
    for _p in $CLUSTER_PORTS; do _addrs="$_addrs 127.0.0.1:$_p"; done
    # shellcheck disable=SC2086
    if ! "$BATON_CLI" --cluster create $_addrs --cluster-replicas "$_replicas" --cluster-yes \
            >"$CLUSTER_DIR/create.log" 2>&1; then
        cat "$CLUSTER_DIR/create.log" >&2
        return 1
    fi
    for _p in $CLUSTER_PORTS; do
        _w=0
        until "$BATON_CLI" -p "$_p" cluster info 2>/dev/null | grep -q 'cluster_state:ok'; do
            _w=$((_w + 1))
            [ $_w -gt 400 ] && { echo "cluster node $_p never reached state ok" >&2; return 1; }
            sleep 0.025
        done
        _w=0
        while "$BATON_CLI" -p "$_p" info replication 2>/dev/null | grep -q 'role:slave' &&
              ! "$BATON_CLI" -p "$_p" info replication 2>/dev/null | grep -q 'master_link_status:up'; do
            _w=$((_w + 1))
            [ $_w -gt 400 ] && { echo "replica $_p never synced" >&2; return 1; }
            sleep 0.025
        done
    done
    # and the cluster's own view: every node "online" (a replica is "loading" until its
    # first sync is gossiped; until then clients are not told it exists)
    # (as every node sees it: gossip reaches each at its own pace)
    for _p in $CLUSTER_PORTS; do
        _w=0
        until [ "$("$BATON_CLI" -p "$_p" cluster shards 2>/dev/null | grep -cx online)" = "$_n" ]; do
            _w=$((_w + 1))
            [ $_w -gt 800 ] && { echo "cluster nodes never all online (seen from $_p)" >&2; return 1; }
            sleep 0.025
        done
    done
    export CLUSTER_PORTS CLUSTER_PIDS CLUSTER_DIR
}

cluster_stop() {
    for _pid in ${CLUSTER_PIDS:-}; do
        kill -9 "$_pid" 2>/dev/null || true
    done
    CLUSTER_PIDS=
    [ -n "${CLUSTER_DIR:-}" ] && rm -rf "$CLUSTER_DIR"
    CLUSTER_DIR=
    return 0
}
