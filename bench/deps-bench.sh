#!/bin/sh
# Installs what the benchmark's peers need beyond scripts/deps.sh (the build and test
# dependencies), if anything is missing: etcd's server and etcdctl for bench/elect.sh.
# Debian 12's packages; safe to run again. Not part of the tests' dependencies.
set -e
PKGS="etcd-server etcd-client"
missing=
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0
echo "installing:$missing" >&2
SUDO=
[ "$(id -u)" -ne 0 ] && SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
# Debian may start an etcd service on 2379 when it installs one; bench/elect.sh never uses
# it (it starts its own on free loopback ports with a private data directory).
