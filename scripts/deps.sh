#!/bin/sh
# Installs what building, testing and running baton needs, if anything is missing, from
# Debian's packages (Debian 12 and Debian 13: the same names). Safe to run again: it installs
# nothing when all is there. BATON_SERVER=valkey-server adds Valkey (valkey-server,
# valkey-tools) when no valkey-server is on the PATH (Debian 12 has none: see
# scripts/trixie-root.sh). With arguments, those packages instead (bench/deps-bench.sh: the
# benchmark's peers).
set -e
PKGS="$*"
[ -n "$PKGS" ] || PKGS="build-essential cmake pkg-config libhiredis-dev libssl-dev libsystemd-dev openssl redis-server redis-tools libcriterion-dev
go-md2man man-db tmux dpkg-dev debhelper lintian systemd perl libfaketime iproute2
mariadb-server mariadb-client"
if [ $# -eq 0 ] && [ "${BATON_SERVER:-}" = valkey-server ] && ! command -v valkey-server >/dev/null; then
    PKGS="$PKGS valkey-server valkey-tools"
fi
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
# Debian starts a redis-server service on 6379 when it installs one; baton never uses it
# (every test, demo and benchmark starts its own), so leave it as the system set it up.
