#!/bin/sh
# Checks the floors of docs/ARCHITECTURE.md ("Which file may call which") on a build:
#  1. no object of a floor refers to a symbol that a higher floor defines (nm on the built
#     objects), the floors from the ground up being
#       src/util < src/net < src/engine < src/core < src/lockbase < the primitives' rooms
#     (src/lock, fairlock, rwlock, multilock, latch, semaphore, permits, inspect, election,
#     barrier): every room of src/ but the CLI is on exactly one floor;
#  2. no loop between rooms (the rooms' graph of references, a room's own ones aside, is
#     ordered by tsort with no cycle);
#  3. src/core holds at most 4,500 lines, and no room more than 35 % of the library (the
#     lines of src/ without src/cli);
#  4. no file of a primitive's room includes a header of the floors below but prim.h (and
#     the headers prim.h gathers, and the lock base's lockbase.h), and those include no other
#     either;
#  5. the key names a Lua script makes itself are lua/lib/keys.lua's, the same as keys.h's;
#  6. no file of a floor includes a header that a higher floor holds.
# Usage: scripts/check-floors.sh [BUILD_DIR]   (default build/; run after a build)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build}
objs=$build/CMakeFiles/baton_objects.dir/src
floors="util net engine core lockbase"
prims="lock fairlock rwlock multilock latch semaphore permits inspect election barrier"
core_max=4500
share_max=35
# what a primitive may include of the floors below (prim.h and what it gathers)
allowed="prim.h lockbase.h internal.h util.h net.h keys.h object.h ops.h wait.h stats.h baton_scripts.h"
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

[ -d "$objs/core" ] || { echo "check-floors: no objects in $objs (build first)" >&2; exit 2; }

rank() { # room -> its floor (1 = the ground)
    n=1
    for f in $floors; do
        [ "$f" = "$1" ] && { echo $n; return; }
        n=$((n + 1))
    done
    for p in $prims; do [ "$p" = "$1" ] && { echo $n; return; }; done
    echo 0
}

# every room of src/ (but the CLI) is on a floor
for d in "$top"/src/*/; do
    r=$(basename "$d")
    [ "$r" = cli ] && continue
    if [ "$(rank "$r")" = 0 ]; then
        echo "check-floors: src/$r is on no floor (add it to scripts/check-floors.sh)" >&2
        fail=1
    fi
done

# 1. symbols: "symbol room" for every definition, "room symbol object" for every use
for r in $floors $prims; do
    for o in "$objs/$r"/*.o; do
        [ -f "$o" ] || continue
        [ -f "$top/src/$r/$(basename "$o" .o)" ] || continue # a stale object of a moved file
        nm -g --defined-only "$o" | awk -v r="$r" 'NF >= 3 { print $3, r }'
    done
done | sort -u >"$tmp/defined"
for r in $floors $prims; do
    for o in "$objs/$r"/*.o; do
        [ -f "$o" ] || continue
        [ -f "$top/src/$r/$(basename "$o" .o)" ] || continue
        nm -u "$o" | awk -v r="$r" -v o="$(basename "$o" .c.o)" '{ print $NF, r, o }'
    done
done | sort >"$tmp/used"
join "$tmp/used" "$tmp/defined" >"$tmp/refs" # symbol user-room object definer-room
while read -r sym user obj definer; do
    [ "$user" = "$definer" ] && continue
    echo "$user $definer" >>"$tmp/edges"
    if [ "$(rank "$user")" -lt "$(rank "$definer")" ]; then
        echo "check-floors: src/$user/$obj.c calls up into src/$definer: $sym" >&2
        fail=1
    fi
done <"$tmp/refs"

# 2. no loop between rooms
if [ -s "$tmp/edges" ]; then
    sort -u "$tmp/edges" >"$tmp/pairs"
    if ! tsort "$tmp/pairs" >/dev/null 2>"$tmp/cycle"; then
        echo "check-floors: rooms call each other in a loop:" >&2
        cat "$tmp/cycle" >&2
        fail=1
    fi
fi

# 3. sizes
lines() { cat "$@" 2>/dev/null | wc -l; }
total=0
for r in $floors $prims; do
    n=$(lines "$top/src/$r"/*.[ch])
    total=$((total + n))
    echo "$r $n" >>"$tmp/sizes"
done
while read -r r n; do
    if [ "$r" = core ] && [ "$n" -gt $core_max ]; then
        echo "check-floors: src/core holds $n lines (at most $core_max)" >&2
        fail=1
    fi
    if [ $((n * 100)) -gt $((total * share_max)) ]; then
        echo "check-floors: src/$r holds $n of the library's $total lines (over $share_max %)" >&2
        fail=1
    fi
done <"$tmp/sizes"

# 4. headers
below=""
for f in $floors; do below="$below $top/src/$f"; done
check_includes() { # file: the headers it includes of the floors below must be in $allowed
    for h in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$1"); do
        name=$(basename "$h")
        case $h in
        ../core/prim.h) ;;
        */*) [ -f "$(dirname "$1")/$h" ] && case $(cd "$(dirname "$1")/$(dirname "$h")" && pwd) in
                 "$top"/src/util | "$top"/src/net | "$top"/src/engine | "$top"/src/core | \
                     "$top"/src/lockbase) ;;
                 *) continue ;; # the room's own (../inspect/decode.h and the like)
             esac ;;
        *) [ -f "$(dirname "$1")/$h" ] && ! echo "$below" | grep -q "$(dirname "$1")" &&
               continue ;; # a header of the room's own
        esac
        ok=0
        for a in $allowed; do [ "$name" = "$a" ] && ok=1; done
        if [ $ok = 0 ]; then
            echo "check-floors: ${1#$top/} includes $h, which is not for the primitives" >&2
            fail=1
        fi
    done
}
for r in $prims; do
    for f in "$top/src/$r"/*.[ch]; do [ -f "$f" ] && check_includes "$f"; done
done
for a in $allowed; do
    for d in $below; do [ -f "$d/$a" ] && check_includes "$d/$a"; done
done

# 6. every floor includes headers of its own floor or below
for r in $floors $prims; do
    for f in "$top/src/$r"/*.[ch]; do
        [ -f "$f" ] || continue
        for h in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f"); do
            for d in $floors $prims; do
                [ -f "$top/src/$d/$(basename "$h")" ] || continue
                if [ "$(rank "$d")" -gt "$(rank "$r")" ]; then
                    echo "check-floors: ${f#$top/} includes src/$d/$(basename "$h"), a floor above" >&2
                    fail=1
                fi
                break
            done
        done
    done
done

# 5. the key names a script makes itself come from one Lua library, the same as keys.h's
for k in LOCK_META RWLOCK_TIMEOUT; do
    c=$(sed -n "s/^#define BATON__KEY_$k \"\(.*\)\"/\1/p" "$top/src/core/keys.h")
    l=$(sed -n "s/^local KEY_$k = '\([^']*\)'.*/\1/p" "$top/lua/lib/keys.lua")
    if [ -z "$c" ] || [ "$c" != "$l" ]; then
        echo "check-floors: BATON__KEY_$k is '$c' in src/core/keys.h, '$l' in lua/lib/keys.lua" >&2
        fail=1
    fi
done
if grep -n "'baton_lock_meta:'\|':rwlock_timeout:'" "$top"/lua/*.lua >&2; then
    echo "check-floors: a script spells a key name of lua/lib/keys.lua itself" >&2
    fail=1
fi

if [ $fail = 0 ]; then
    echo "check-floors: ok (floors $floors < the primitives; no call up, no loop between" \
        "rooms; src/core $(awk '$1 == "core" { print $2 }' "$tmp/sizes") lines;" \
        "no core-only header in a primitive's room)"
fi
exit $fail
