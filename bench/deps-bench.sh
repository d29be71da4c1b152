#!/bin/sh
# Installs what the benchmark's peers need beyond scripts/deps.sh (the build and test
# dependencies), if anything is missing: etcd's server and etcdctl for bench/elect.sh.
# Debian 12's packages; safe to run again. Not part of the tests' dependencies.
# Debian may start an etcd service on 2379 when it installs one; bench/elect.sh never uses
# it (it starts its own on free loopback ports with a private data directory).
exec "$(dirname "$0")/../scripts/deps.sh" etcd-server etcd-client
