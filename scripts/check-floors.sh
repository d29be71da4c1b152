#!/bin/sh
# Checks the floors of docs/ARCHITECTURE.md ("Which file may call which"):
#  1. no object of src/core/ refers to a symbol that a primitive's room defines (nm on the
#     built objects: the core never calls up);
#  2. no file of a primitive's room includes a core-only header: of src/core/ it includes
#     prim.h (and the headers prim.h gathers), nothing else, and those include no
#     core-only header either.
# Usage: scripts/check-floors.sh [BUILD_DIR]   (default build/; run after a build)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build}
objs=$build/CMakeFiles/baton_objects.dir/src
rooms="lock fairlock rwlock multilock latch semaphore permits inspect"
# what a primitive may include of the core (prim.h and what it gathers)
allowed="prim.h internal.h keys.h object.h ops.h wait.h stats.h baton_scripts.h"
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

[ -d "$objs/core" ] || { echo "check-floors: no objects in $objs (build first)" >&2; exit 2; }

# 1. symbols
for r in $rooms; do
    for o in "$objs/$r"/*.o; do
        nm -g --defined-only "$o" | awk 'NF >= 3 { print $3 }'
    done
done | sort -u >"$tmp/defined"
for o in "$objs/core"/*.o; do
    nm -u "$o" | awk '{ print $NF }' | sort -u >"$tmp/undef"
    up=$(comm -12 "$tmp/undef" "$tmp/defined")
    if [ -n "$up" ]; then
        echo "check-floors: src/core/$(basename "$o" .o) calls up into a primitive: $up" >&2
        fail=1
    fi
done

# 2. headers
check_includes() { # file: its quoted includes of the core must be in $allowed
    for h in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$1"); do
        case $h in
        ../core/*) name=${h#../core/} ;;
        */*) continue ;; # the room's own (../inspect/decode.h and the like)
        *) name=$h
           [ -f "$(dirname "$1")/$h" ] && [ "$(dirname "$1")" != "$top/src/core" ] && continue ;;
        esac
        ok=0
        for a in $allowed; do [ "$name" = "$a" ] && ok=1; done
        if [ $ok = 0 ]; then
            echo "check-floors: ${1#$top/} includes core-only $name" >&2
            fail=1
        fi
    done
}
for r in $rooms; do
    for f in "$top/src/$r"/*.[ch]; do check_includes "$f"; done
done
for a in $allowed; do
    [ -f "$top/src/core/$a" ] && check_includes "$top/src/core/$a"
done

if [ $fail = 0 ]; then
    echo "check-floors: ok (no call up from src/core, no core-only header in a primitive's room)"
fi
exit $fail
