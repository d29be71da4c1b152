#!/bin/sh
# Runs one test program against a private redis-server: starts the server on a free
# loopback port in a temporary directory, exports BATON_TEST_PORT, runs "$@", and stops the
# server by pid whatever happens.
. "$(dirname "$0")/../scripts/redis-lib.sh"
redis_start || exit 1
trap 'redis_stop' EXIT INT TERM
BATON_TEST_PORT=$REDIS_PORT "$@"
