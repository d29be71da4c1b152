#!/bin/sh
# Runs one test program against a private Redis Cluster (3 masters, 3 replicas) started once
# for the whole program: exports BATON_TEST_CLUSTER_PORTS ("p1 p2 ..."), runs "$@", and
# stops every node by pid whatever happens.
. "$(dirname "$0")/../scripts/cluster-lib.sh"
trap 'cluster_stop' EXIT INT TERM
cluster_start 3 1 || exit 1
BATON_TEST_CLUSTER_PORTS=$CLUSTER_PORTS "$@"
