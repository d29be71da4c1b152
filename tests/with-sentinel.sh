#!/bin/sh
# Runs one test program against a private Sentinel deployment (one master "mymaster", one
# replica, three sentinels) started once for the whole program: exports
# BATON_TEST_SENTINEL_MASTER, BATON_TEST_SENTINEL_REPLICA and BATON_TEST_SENTINEL_PORTS
# ("p1 p2 p3"), runs "$@", and stops every process by pid whatever happens.
. "$(dirname "$0")/../scripts/sentinel-lib.sh"
trap 'sentinel_stop' EXIT INT TERM
sentinel_start || exit 1
BATON_TEST_SENTINEL_MASTER=$SENTINEL_MASTER_PORT BATON_TEST_SENTINEL_REPLICA=$SENTINEL_REPLICA_PORT \
    BATON_TEST_SENTINEL_PORTS=$SENTINEL_PORTS "$@"
