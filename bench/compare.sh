#!/bin/sh
# bench/compare.sh OLD_BENCH NEW_BENCH [--rounds N] [--out FILE] [--scenarios FILE]
#                  [--new-args ARGS] [--old-args ARGS]
#
# Compares two builds of bench/baton-bench (say, main and a branch) on ONE private
# redis-server on a free loopback port, in alternating rounds (old, new, old, new, ...),
# so that both builds see the same server and the same load drift. Scenarios: s1, s2
# threads, s2 processes, s3, s2 --async, s3 --async. Prints a markdown table of the medians
# over rounds (ops/s old, new, new/old, then the other figures as "old / new"), the date,
# the two trees' commits (from $OLD_TREE / $NEW_TREE, else the tree above each binary's
# build dir) and the command line; --out FILE writes the same text to FILE.
# --scenarios FILE replaces the scenario list (lines "name|baton-bench arguments");
# --new-args ARGS are added to the new build's arguments only (one option of the new
# build against the old default, e.g. --new-args "--starve-ms 10"); --old-args ARGS the same
# for the old one (one binary against itself with an option off: --old-args "--multiplex -1").
#
# Each binary runs with LD_LIBRARY_PATH set to its own build dir (dirname of dirname of the
# binary), in case it links libbaton dynamically. A figure a build does not print (an
# older build) shows as "-". Exits 0 when every run succeeded, 1 otherwise.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cmdline="bench/compare.sh $*"
usage() {
    echo "usage: bench/compare.sh OLD_BENCH NEW_BENCH [--rounds N] [--out FILE]" \
        "[--scenarios FILE] [--new-args ARGS] [--old-args ARGS]" >&2
    exit 2
}
[ $# -ge 2 ] || usage
old=$1 new=$2
shift 2
rounds=4 out= scenario_file= new_args= old_args=
while [ $# -gt 0 ]; do
    case $1 in
        --rounds) [ $# -ge 2 ] || usage; rounds=$2; shift 2 ;;
        --out) [ $# -ge 2 ] || usage; out=$2; shift 2 ;;
        --scenarios) [ $# -ge 2 ] && [ -r "$2" ] || usage; scenario_file=$2; shift 2 ;;
        --new-args) [ $# -ge 2 ] || usage; new_args=$2; shift 2 ;;
        --old-args) [ $# -ge 2 ] || usage; old_args=$2; shift 2 ;;
        *) usage ;;
    esac
done
case $rounds in '' | *[!0-9]* | 0) usage ;; esac
for b in "$old" "$new"; do
    [ -x "$b" ] || { echo "bench/compare.sh: $b is not an executable" >&2; exit 2; }
done
old=$(cd "$(dirname "$old")" && pwd)/$(basename "$old")
new=$(cd "$(dirname "$new")" && pwd)/$(basename "$new")
olddir=$(dirname "$(dirname "$old")")
newdir=$(dirname "$(dirname "$new")")

say() { printf '%s\n' "$*" >&2; }

# libbaton: which one each binary loads (with its own build dir first on the path).
libof() {
    LD_LIBRARY_PATH="$2${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ldd "$1" 2>/dev/null |
        awk '/libbaton/ { print $3; found = 1 } END { if (!found) print "static" }'
}
oldlib=$(libof "$old" "$olddir")
newlib=$(libof "$new" "$newdir")
if [ "$oldlib" = static ] || [ "$newlib" = static ]; then
    libnote="libbaton: old $oldlib, new $newlib (a static libbaton is part of the binary)"
elif [ "$oldlib" = "$newlib" ]; then
    libnote="libbaton: BOTH load $oldlib: the comparison is of one library"
    say "bench/compare.sh: warning: both binaries load $oldlib"
else
    libnote="libbaton: old $oldlib, new $newlib"
fi
if cmp -s "$old" "$new" && [ "$oldlib" = "$newlib" ] && [ -z "$new_args$old_args" ]; then
    say "bench/compare.sh: warning: the two binaries are identical (a noise measurement)"
    libnote="$libnote; the two binaries are identical (this measures noise)"
fi

# commit TREE_ENV BUILD_DIR: the short commit of the tree, "?" when unknown.
commit() {
    tree=${1:-$(dirname "$2")}
    c=$(git -C "$tree" rev-parse --short HEAD 2>/dev/null) || c=
    if [ -n "$c" ]; then
        git -C "$tree" diff --quiet HEAD 2>/dev/null || c="$c+dirty"
        echo "$c ($tree)"
    else
        echo "? ($tree)"
    fi
}
oldc=$(commit "${OLD_TREE:-}" "$olddir")
newc=$(commit "${NEW_TREE:-}" "$newdir")

. "$top/scripts/redis-lib.sh"
work=$(mktemp -d /tmp/baton-compare.XXXXXX)
cleanup() { redis_stop; rm -rf "$work" || :; }
trap 'run_status=$?; cleanup; exit $run_status' EXIT
trap 'exit 130' INT TERM
redis_start
port=$REDIS_PORT
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
say "bench/compare.sh: redis-server on 127.0.0.1:$port, $rounds round(s), work dir $work"

# name|arguments
scenarios='s1|--scenario s1 --n 5000
s2 threads|--scenario s2 --workers 8 --n 1600
s2 processes|--scenario s2 --workers 8 --n 1600 --processes
s3|--scenario s3 --workers 16 --permits 4 --n 3000
s2 async|--scenario s2 --workers 8 --n 1600 --async
s3 async|--scenario s3 --workers 16 --permits 4 --n 3000 --async'
[ -z "$scenario_file" ] || scenarios=$(grep -v '^[[:space:]]*\(#\|$\)' "$scenario_file")

: >"$work/lines"
failed=0
r=1
while [ $r -le "$rounds" ]; do
    echo "$scenarios" | while IFS='|' read -r name args; do
        for side in old new; do
            if [ $side = old ]; then b=$old d=$olddir extra=$old_args; else b=$new d=$newdir extra=$new_args; fi
            # shellcheck disable=SC2086 # args and extra are word lists
            if LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" RESULTS_JSONL='' \
                "$b" --port "$port" $args $extra >"$work/one.out" 2>"$work/one.err"; then
                line=$(grep -m1 ' ops_per_s=' "$work/one.out" || :)
                printf '%s|%s|%s|%s\n' "$side" "$name" "$r" "$line" >>"$work/lines"
                say "round $r $side $name: $(echo "$line" | grep -o 'ops_per_s=[^ ]*')"
            else
                say "round $r $side $name: FAILED ($(tail -1 "$work/one.err"))"
                echo fail >>"$work/failed"
            fi
        done
    done
    r=$((r + 1))
done
[ ! -s "$work/failed" ] || failed=1

{
    echo "# baton-bench: old against new"
    echo
    echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load before $load_before,"
    echo "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'), one server for both builds,"
    echo "medians of $rounds round(s), old and new alternating."
    echo
    echo "- old: \`$old\`, commit $oldc"
    echo "- new: \`$new\`, commit $newc"
    echo "- $libnote"
    echo "- command: \`$cmdline\`"
    echo
    python3 - "$work/lines" "$scenarios" <<'EOF'
import sys, statistics
lines = open(sys.argv[1]).read().splitlines()
order = [s.split("|", 1)[0] for s in sys.argv[2].splitlines()]
vals = {}  # (side, scenario) -> {key: [floats]}
for l in lines:
    side, name, _r, summary = l.split("|", 3)
    d = vals.setdefault((side, name), {})
    for tok in summary.split():
        if "=" not in tok:
            continue
        k, v = tok.split("=", 1)
        try:
            d.setdefault(k, []).append(float(v))
        except ValueError:
            pass  # "-", "5000/5000", "[...]"

def med(side, name, key):
    xs = vals.get((side, name), {}).get(key)
    return statistics.median(xs) if xs else None

def f(v, prec):
    return "-" if v is None else f"{v:.{prec}f}"

cols = [("p50 ms", "p50", 3), ("p99 ms", "p99", 3), ("p999 ms", "p999", 3),
        ("max ms", "max", 3), ("self-reacq %", "self_reacquire_pct", 1),
        ("srv cmds/op", "server_cmds_per_op", 2), ("srv scripts/op", "server_scripts_per_op", 2),
        ("syscalls/rt", "syscalls_per_rt", 2), ("srv CPU µs/op", "server_cpu_us_per_op", 1),
        ("client CPU µs/op", "client_cpu_us_per_op", 1)]
print("| scenario | ops/s old | ops/s new | new/old | " + " | ".join(c[0] + " old / new" for c in cols) + " |")
print("|---" * (4 + len(cols)) + "|")
for name in order:
    o, n = med("old", name, "ops_per_s"), med("new", name, "ops_per_s")
    ratio = f(n / o, 2) if o and n is not None else "-"
    row = [name, f(o, 0), f(n, 0), ratio]
    for _label, key, prec in cols:
        cell = []
        for side in ("old", "new"):
            v = med(side, name, key)
            s = f(v, prec)
            if v is None and key == "p999":  # an older build: its max instead
                m = med(side, name, "max")
                s = "-" if m is None else f"{m:.{prec}f} (max)"
            cell.append(s)
        row.append(" / ".join(cell))
    print("| " + " | ".join(row) + " |")
EOF
    [ $failed -eq 0 ] || echo "Some runs FAILED: their rounds are missing from the medians."
} >"$work/table.md"
cat "$work/table.md"
if [ -n "$out" ]; then
    cp "$work/table.md" "$out"
    say "bench/compare.sh: wrote $out"
fi
exit $failed
