# Shell functions shared by the test wrapper, the demo and the benchmark: start a private
# redis-server on a free loopback port in a temporary directory, and stop it by pid.
# After redis_start: REDIS_PORT, REDIS_PID, REDIS_DIR.

# The server (BATON_SERVER: redis-server by default, valkey-server for Valkey, Sentinel and
# Cluster included) and its client (BATON_CLI: the -cli beside it, valkey-cli for Valkey).
: "${BATON_SERVER:=redis-server}"
: "${BATON_CLI:=${BATON_SERVER%-server}-cli}"
export BATON_SERVER BATON_CLI

redis_start() {
    REDIS_DIR=$(mktemp -d /tmp/baton-redis.XXXXXX) || return 1
    for _try in 1 2 3 4 5 6 7 8 9 10; do
        REDIS_PORT=$(( 20000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 20000 ))
        if "$BATON_CLI" -p "$REDIS_PORT" ping >/dev/null 2>&1; then
            continue  # taken
        fi
        "$BATON_SERVER" --port "$REDIS_PORT" --bind 127.0.0.1 --dir "$REDIS_DIR" \
            --save '' --appendonly no --daemonize yes \
            --pidfile "$REDIS_DIR/redis.pid" --logfile "$REDIS_DIR/redis.log" \
            ${REDIS_EXTRA_ARGS:-} >/dev/null 2>&1
        _i=0
        while [ $_i -lt 100 ]; do
            if [ -s "$REDIS_DIR/redis.pid" ] &&
               [ "$("$BATON_CLI" -p "$REDIS_PORT" ping 2>/dev/null)" = PONG ]; then
                REDIS_PID=$(cat "$REDIS_DIR/redis.pid")
                export REDIS_PORT REDIS_PID REDIS_DIR
                return 0
            fi
            sleep 0.05
            _i=$((_i + 1))
        done
    done
    echo "could not start "$BATON_SERVER" (log: $REDIS_DIR/redis.log)" >&2
    return 1
}

# Stops the server if it is still running, and removes its directory. Never fails: the
# callers run it from an EXIT trap under `set -e`, where (in dash) a failing command would
# become the script's exit status, and a server that has already gone is not an error.
redis_stop() {
    if [ -n "${REDIS_PID:-}" ]; then
        kill "$REDIS_PID" 2>/dev/null || :
        _i=0
        while kill -0 "$REDIS_PID" 2>/dev/null && [ $_i -lt 100 ]; do
            sleep 0.05
            _i=$((_i + 1))
        done
        if kill -0 "$REDIS_PID" 2>/dev/null; then
            kill -9 "$REDIS_PID" 2>/dev/null || :
        fi
        REDIS_PID=
    fi
    if [ -n "${REDIS_DIR:-}" ]; then
        rm -rf "$REDIS_DIR" || :
    fi
    REDIS_DIR=
    return 0
}
