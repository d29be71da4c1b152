#!/bin/sh
# Configures and builds baton into build/ (or build-<sanitizer>/ when BATON_SANITIZER is
# set), after installing what is missing. Prints the build directory on the last line.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/deps.sh"
san=${BATON_SANITIZER:-}
dir="$top/build${san:+-$san}"
werror=OFF
[ -n "${CI:-}" ] && werror=ON
# Build output goes to stderr: stdout carries only the directory, for the callers.
cmake -S "$top" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBATON_SANITIZER="$san" \
    -DBATON_WERROR=$werror >&2
cmake --build "$dir" -j "$(nproc)" >&2
echo "$dir"
