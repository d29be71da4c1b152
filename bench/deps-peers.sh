#!/bin/sh
# Installs what `bench/run --peers` (bench/peers.sh) needs beyond scripts/deps.sh, if
# anything is missing: Node.js and npm for the Node peers (node-redlock, redis-semaphore,
# node-redisson), Debian's python3-redis (redis-py) for the Python one, then the pinned npm
# packages of bench/peers/package-lock.json (`npm ci`, into bench/peers/node_modules). Safe
# to run again: it installs nothing when all is there. Not part of the tests' dependencies.
# A Node.js that is already there is kept (NodeSource's nodejs package has npm inside and
# conflicts with Debian's npm package, so npm is asked for only when the command is missing).
set -e
here=$(cd "$(dirname "$0")" && pwd)
pkgs=python3-redis
command -v node >/dev/null 2>&1 || pkgs="$pkgs nodejs"
command -v npm >/dev/null 2>&1 || pkgs="$pkgs npm"
# shellcheck disable=SC2086
"$here/../scripts/deps.sh" $pkgs
cd "$here/peers"
# npm ls fails when a package of package.json is missing or at another version.
if [ -d node_modules ] && npm ls --omit=dev >/dev/null 2>&1; then
    exit 0
fi
echo "bench/peers: npm ci" >&2
npm ci --no-audit --no-fund --loglevel=error
