#!/bin/sh
# Configures and builds baton into build/ (or build-<sanitizer>/ when BATON_SANITIZER is
# set), after installing what is missing. Prints only the build directory on stdout; the
# build's own output goes to <dir>/build.log, shown on stderr if the build fails.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/deps.sh"
san=${BATON_SANITIZER:-}
dir="$top/build${san:+-$san}"
werror=OFF
[ -n "${CI:-}" ] && werror=ON
mkdir -p "$dir"
echo "building baton in $dir ..." >&2
if ! { cmake -S "$top" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBATON_SANITIZER="$san" \
           -DBATON_WERROR=$werror &&
       cmake --build "$dir" -j "$(nproc)"; } >"$dir/build.log" 2>&1; then
    cat "$dir/build.log" >&2
    echo "build failed (log: $dir/build.log)" >&2
    exit 1
fi
echo "$dir"
