# bench/run --peers: baton beside its peers (issue 30's targets), in one run against one
# private redis-server: node-redlock, redis-semaphore and node-redisson on ioredis
# (bench/peers/peers.js), redis-py's Lock (bench/peers/peers.py) and baton-bench run s1, s2
# (think 0 and 5 ms) and s3 in turn, in every round, the order reversed every other
# round so that the shared machine's load touches all alike; redis-benchmark's 1-client
# PING and EVALSHA (of baton's lock_acquire) on the same server, in every round, give the
# wire limit. Prints a table of the medians and the ratios against the targets, and
# replaces the "## Peers side by side" section of bench/RESULTS.md. Sourced by bench/run,
# which has built baton ($bench) and set $top, $work, $load_before, $rounds and the sizes
# $s1n, $s2k, $s3k. bench/deps-peers.sh installs the peers.
# shellcheck shell=sh
# shellcheck disable=SC2154 # bench, top, work, rounds, load_before, s1n...: set by bench/run

# peers_run LABEL KIND ARGS...: one run (KIND baton, js or py); its JSON line, tagged with
# the label and the round, goes to $work/peers.jsonl. A run that fails, or counts errors,
# is named in $peers_failed with the reason.
peers_run() {
    label=$1 kind=$2
    shift 2
    case $kind in
        baton) set -- "$bench" --port "$port" "$@" ;;
        js) set -- node "$top/bench/peers/peers.js" --port "$port" "$@" ;;
        py) set -- /usr/bin/python3 "$top/bench/peers/peers.py" --port "$port" "$@" ;;
    esac
    if [ "$round" -eq 1 ]; then
        echo "$*" | sed "s|$bench|baton-bench|; s|$top/||g; s|--port $port|--port PORT|" \
            >>"$work/peers.commands"
    fi
    rm -f "$work/one.json"
    # Each program bounds its own waits (--max-seconds 60); timeout is the last resort.
    if ! RESULTS_JSONL="$work/one.json" timeout 120 "$@" </dev/null >"$work/one.out" \
        2>"$work/one.err" || [ ! -s "$work/one.json" ]; then
        say "bench: $label (round $round) failed:"
        tail -n 5 "$work/one.err" | sed 's/^/  /' >&2
        peers_failed="$peers_failed $label(round $round: $(tail -n 1 "$work/one.err" | cut -c1-120))"
        return 0
    fi
    sed "s/^{/{\"label\":\"$label\",\"round\":$round,/" "$work/one.json" >>"$work/peers.jsonl"
    errs=$(sed -n 's/.*"errors":\([0-9]*\).*/\1/p' "$work/one.json")
    if [ "${errs:-0}" -gt 0 ]; then
        say "bench: $label (round $round): $errs error(s):"
        grep -i 'error\|stopped\|failed' "$work/one.err" | head -n 3 | sed 's/^/  /' >&2
        peers_failed="$peers_failed $label(round $round: $errs errors)"
    fi
    say "  $label: $(tr ',' ' ' <"$work/one.json" | tr -d '{}"' | tr ':' '=' |
        grep -o 'ops_per_s=[^ ]*\|lat_p50_ms=[^ ]*\|lat_p99_ms=[^ ]*\|lat_max_ms=[^ ]*\|lost_updates=[^ ]*\|max_holders=[^ ]*\|errors=[^ ]*' |
        tr '\n' ' ')"
}

# peers_limit: redis-benchmark with 1 client, PING and bench/run's EVALSHA of lock_acquire.lua
# (acquire_args), as bench/run measures its limit; appends "round ping_rps ping_p50
# evalsha_rps evalsha_p50".
peers_limit() {
    n=10000
    ping=$(redis-benchmark -p "$port" -n $n -c 1 --csv PING 2>/dev/null | tail -n 1)
    # shellcheck disable=SC2046 # acquire_args prints words
    evl=$(redis-benchmark -p "$port" -n $n -c 1 --csv $(acquire_args "$sha") 2>/dev/null |
        tail -n 1)
    acquire_reset
    if [ "$round" -eq 1 ]; then
        echo "redis-benchmark -p PORT -n $n -c 1 --csv PING" >>"$work/peers.commands"
        echo "redis-benchmark -p PORT -n $n -c 1 --csv $(acquire_args "<sha of lua/lock_acquire.lua>")" \
            >>"$work/peers.commands"
    fi
    # "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",...
    printf '%s\n%s\n' "$ping" "$evl" | awk -F'","' -v r="$round" '
        { v[NR] = $2 " " $5 }
        END { if (v[1] != "" && v[2] != "") print r, v[1], v[2] }' >>"$work/peers.limit"
    say "  limit: $(tail -n 1 "$work/peers.limit")"
}

# The runs of one round, one per line: "label|kind|arguments".
peers_list() {
    echo "s1:baton|baton|--scenario s1 --n $s1n"
    for p in redlock semaphore redisson; do
        [ "$peers_js" -eq 1 ] && echo "s1:$p|js|--peer $p --scenario s1 --n $s1n"
    done
    [ "$peers_py" -eq 1 ] && echo "s1:redis-py|py|--scenario s1 --n $s1n"
    for t in 0 5; do
        echo "s2t$t:baton|baton|--scenario s2 --workers 8 --k $s2k --think-ms $t"
        echo "s2t$t:baton-processes|baton|--scenario s2 --workers 8 --k $s2k --think-ms $t --processes"
        [ "$t" -eq 0 ] && echo "s2t0:baton-loop|baton|--scenario s2 --workers 8 --k $s2k --loop"
        for p in redlock semaphore redisson; do
            [ "$peers_js" -eq 1 ] && echo "s2t$t:$p|js|--peer $p --scenario s2 --workers 8 --k $s2k --think-ms $t"
        done
        [ "$peers_py" -eq 1 ] && echo "s2t$t:redis-py|py|--scenario s2 --workers 8 --k $s2k --think-ms $t"
    done
    echo "s3:baton|baton|--scenario s3 --workers 16 --permits 4 --k $s3k"
    echo "s3:baton-loop|baton|--scenario s3 --workers 16 --permits 4 --k $s3k --loop"
    [ "$peers_js" -eq 1 ] && echo "s3:semaphore|js|--peer semaphore --scenario s3 --workers 16 --permits 4 --k $s3k"
    return 0
}

peers_compare() {
    peers_failed=
    started=$(date +%s)
    peers_js=1
    peers_py=1
    if ! command -v node >/dev/null 2>&1 || ! [ -d "$top/bench/peers/node_modules/redlock" ]; then
        say "bench: the Node peers are not installed (bench/deps-peers.sh): skipped"
        peers_js=0
        peers_failed="$peers_failed node-peers(not installed)"
    fi
    if ! /usr/bin/python3 -c 'import redis' 2>/dev/null; then
        say "bench: redis-py is not installed (bench/deps-peers.sh): skipped"
        peers_py=0
        peers_failed="$peers_failed redis-py(not installed)"
    fi
    redis_start
    port=$REDIS_PORT
    sha=$(acquire_load)
    say "bench: peers side by side, redis-server port $port, $rounds round(s)"
    : >"$work/peers.jsonl"
    : >"$work/peers.limit"
    : >"$work/peers.commands"
    peers_list >"$work/peers.list"
    round=1
    while [ "$round" -le "$rounds" ]; do
        say "bench: round $round/$rounds"
        peers_limit
        if [ $((round % 2)) -eq 1 ]; then
            cp "$work/peers.list" "$work/peers.order"
        else
            sed -n '1!G;h;$p' "$work/peers.list" >"$work/peers.order"
        fi
        while IFS='|' read -r label kind args; do
            # shellcheck disable=SC2086
            peers_run "$label" "$kind" $args
        done <"$work/peers.order"
        round=$((round + 1))
    done
    redis_stop
    elapsed=$(( $(date +%s) - started ))
    peers_report
    [ -z "$peers_failed" ] || { say "bench: FAILED:$peers_failed"; return 1; }
}

# peers_report: the medians, the table, the targets; printed and written to RESULTS.md.
peers_report() {
    awk -v limits="$work/peers.limit" -v rounds="$rounds" -v s2k="$s2k" -v s1n="$s1n" -v s3k="$s3k" '
        function jf(line, key,    re, v) {
            re = "\"" key "\":(\"[^\"]*\"|[^,}]*)"
            if (!match(line, re)) return ""
            v = substr(line, RSTART + length(key) + 3, RLENGTH - length(key) - 3)
            gsub(/"/, "", v)
            return v == "null" ? "" : v
        }
        function median(s,    a, n, i, j, t) {
            n = split(s, a, " ")
            if (n == 0) return ""
            for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
                if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
            return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
        }
        function num(x, d) {
            if (x == "") return "n/a"
            if (d == "") d = (x >= 100 ? 0 : (x >= 10 ? 1 : (x >= 1 ? 2 : 3)))
            return sprintf("%." d "f", x)
        }
        BEGIN {
            split("ops_per_s lat_p50_ms lat_p99_ms lat_max_ms handoff_p50_ms self_reacquire_pct server_cmds_per_op client_rtts_per_op server_scripts_per_op", MED, " ")
            while ((getline line < limits) > 0) {
                split(line, p, " ")
                ping = ping " " p[2]; pingp50 = pingp50 " " p[3]
                ev = ev " " p[4]; evp50 = evp50 " " p[5]
            }
            PING = median(ping); PINGP50 = median(pingp50); EV = median(ev); EVP50 = median(evp50)
        }
        {
            l = jf($0, "label")
            if (!(l in seen)) { seen[l] = 1; order[++nl] = l }
            runs[l]++
            for (i = 1; i in MED; i++) {
                v = jf($0, MED[i])
                if (v != "") V[l, MED[i]] = V[l, MED[i]] " " v
            }
            v = jf($0, "lost_updates"); if (v != "") { LOST[l] += v; hasLost[l] = 1 }
            v = jf($0, "max_holders"); if (v != "" && (!(l in MAXH) || v + 0 > MAXH[l])) MAXH[l] = v + 0
            ERR[l] += jf($0, "errors")
            v = jf($0, "lat_max_ms")
            if (v != "" && v + 0 >= 5000) LONG = LONG (LONG == "" ? "" : "; ") l " round " jf($0, "round") ": " sprintf("%.1f s", v / 1000)
            VER[l] = jf($0, "peer_version")
        }
        function m(l, f) { return ((l, f) in V) ? median(V[l, f]) : "" }
        function who(l,    p) {
            p = l; sub(/^[^:]*:/, "", p)
            if (p == "baton") return "baton (C, " (l ~ /^s1/ ? "1 thread" : (l ~ /^s3/ ? "16 threads" : "8 threads")) ", one client)"
            if (p == "baton-processes") return "baton (C, 8 processes, a client each)"
            if (p == "baton-loop") return "baton (C, one event loop, " (l ~ /^s3/ ? "16" : "8") " owners, BATON_CALLBACKS_LOOP)"
            if (p == "redlock") return "node-redlock " VER[l] " (JS)"
            if (p == "semaphore") return "redis-semaphore " VER[l] " " (l ~ /^s3/ ? "Semaphore" : "Mutex") " (JS)"
            if (p == "redisson") return "node-redisson " VER[l] " (JS)"
            if (p == "redis-py") return "redis-py " VER[l] " Lock, sleep 0.01 (Python, " (l ~ /^s1/ ? "1 thread" : "8 threads") ")"
            return p
        }
        function peer_of(l,    p) { p = l; sub(/^[^:]*:/, "", p); return p }
        function ratio(a, b) { return (a != "" && b != "" && b + 0 > 0) ? a / b : "" }
        function verdict(r, op, t) {
            if (r == "") return "n/a"
            return ((op == ">=" && r >= t) || (op == "<=" && r <= t)) ? "met" : "**missed**"
        }
        END {
            split("s1 s2t0 s2t5 s3", scs, " ")
            split("s1|s2 think 0|s2 think 5|s3", scname, "|")
            split("s1: 1 worker, " s1n " acquire+release pairs|s2, think 0: 8 workers, " s2k " acquisitions each|s2, think 5 ms: 8 workers, " s2k " acquisitions each|s3: semaphore, 4 permits, 16 workers, " s3k " acquire+release each", titles, "|")
            print "| scenario | runner | ops/s | wait p50 ms | wait p99 ms | wait max ms | handoff p50 ms | self-reacquire % | lost updates (all rounds) | max holders | errors (all rounds) | server cmds/op | scripts/op | client round trips/op | rounds |"
            print "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
            for (s = 1; s <= 4; s++)
                for (i = 1; i <= nl; i++) {
                    l = order[i]
                    if (l !~ ("^" scs[s] ":")) continue
                    printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d | %s | %s | %s | %d |\n", \
                        scname[s], who(l), num(m(l, "ops_per_s"), 0), num(m(l, "lat_p50_ms"), 3), \
                        num(m(l, "lat_p99_ms"), 2), num(m(l, "lat_max_ms"), 1), \
                        (scs[s] ~ /^s2/ ? num(m(l, "handoff_p50_ms"), 3) : "-"), \
                        (scs[s] ~ /^s2/ ? num(m(l, "self_reacquire_pct"), 1) : "-"), \
                        (hasLost[l] ? LOST[l] : "-"), ((l in MAXH) ? MAXH[l] : "-"), ERR[l], \
                        num(m(l, "server_cmds_per_op"), 1), num(m(l, "server_scripts_per_op"), 2), \
                        num(m(l, "client_rtts_per_op"), 2), runs[l]
                }
            print ""
            print "Scenarios: " titles[1] "; " titles[2] "; " titles[3] "; " titles[4] ". ops/s is pairs/s for s1 and s3, acquisitions/s for s2; the s1 wait is the whole acquire+release pair."
            print ""
            printf "Waits of 5 s or more (the longest of a run, any round): %s.\n\n", (LONG == "" ? "none" : LONG)
            printf "Wire limit (redis-benchmark, 1 client, same server, medians): PING %s requests/s, p50 %s ms; EVALSHA of lock_acquire %s requests/s, p50 %s ms, so two EVALSHA round trips take %s ms.\n", \
                num(PING, 0), num(PINGP50, 3), num(EV, 0), num(EVP50, 3), num(2 * EVP50, 3)
            print ""
            # best peer of s1 and s2 think 0 (baton and its processes line excluded)
            for (s = 1; s <= 3; s++) {
                best[scs[s]] = ""; bestl[scs[s]] = ""
                for (i = 1; i <= nl; i++) {
                    l = order[i]
                    if (l !~ ("^" scs[s] ":") || peer_of(l) ~ /^baton/) continue
                    o = m(l, "ops_per_s")
                    if (o != "" && (best[scs[s]] == "" || o + 0 > best[scs[s]] + 0)) { best[scs[s]] = o; bestl[scs[s]] = l }
                }
            }
            print "| target | figures | ratio | verdict |"
            print "|---|---|---|---|"
            r = ratio(m("s1:baton", "ops_per_s"), best["s1"])
            printf "| s1 pairs/s: baton ≥ 1.15× the best peer | baton %s, best peer %s: %s | %s | %s |\n", \
                num(m("s1:baton", "ops_per_s"), 0), who(bestl["s1"]), num(best["s1"], 0), num(r, 2), verdict(r, ">=", 1.15)
            r = ratio(m("s1:baton", "lat_p50_ms"), 2 * EVP50)
            printf "| s1 pair p50: baton ≤ 1.2× the wire limit (2 EVALSHA round trips) | baton %s ms, limit %s ms (2 × %s) | %s | %s |\n", \
                num(m("s1:baton", "lat_p50_ms"), 3), num(2 * EVP50, 3), num(EVP50, 3), num(r, 2), verdict(r, "<=", 1.2)
            r = ratio(m("s2t0:baton", "ops_per_s"), best["s2t0"])
            printf "| s2 think 0 acquisitions/s: baton ≥ 1.0× the best peer | baton (threads) %s, best peer %s: %s | %s | %s |\n", \
                num(m("s2t0:baton", "ops_per_s"), 0), who(bestl["s2t0"]), num(best["s2t0"], 0), num(r, 2), verdict(r, ">=", 1.0)
            r = ratio(m("s2t0:baton-processes", "ops_per_s"), best["s2t0"])
            if (r != "")
                printf "| (for comparison, not a target: baton with 8 processes) | baton (processes) %s, best peer %s | %s | |\n", \
                    num(m("s2t0:baton-processes", "ops_per_s"), 0), num(best["s2t0"], 0), num(r, 2)
            r = ratio(m("s2t5:baton", "ops_per_s"), best["s2t5"])
            printf "| s2 think 5 acquisitions/s (no target) | baton (threads) %s, best peer %s: %s | %s | |\n", \
                num(m("s2t5:baton", "ops_per_s"), 0), who(bestl["s2t5"]), num(best["s2t5"], 0), num(r, 2)
            lostl = ""; lostn = 0
            for (i = 1; i <= nl; i++) if (order[i] ~ /^s[23]/ && hasLost[order[i]]) {
                lostn++
                if (LOST[order[i]] != 0) lostl = lostl " " order[i] "=" LOST[order[i]]
            }
            printf "| s2/s3 lost updates: 0 for every runner | %s | | %s |\n", \
                (lostl == "" ? "0 in all " lostn " runner/scenario lines, every round" : "lost:" lostl), \
                (lostn == 0 ? "n/a" : (lostl == "" ? "met" : "**missed**"))
            r = ratio(m("s3:baton", "ops_per_s"), m("s3:semaphore", "ops_per_s"))
            printf "| s3 ops/s: baton ≥ 2× redis-semaphore | baton %s, redis-semaphore %s | %s | %s |\n", \
                num(m("s3:baton", "ops_per_s"), 0), num(m("s3:semaphore", "ops_per_s"), 0), num(r, 2), verdict(r, ">=", 2)
            r = ratio(m("s3:baton-loop", "ops_per_s"), m("s3:semaphore", "ops_per_s"))
            if (r != "")
                printf "| s3 ops/s, baton as an event loop (one thread, as the Node peers run) ≥ 2× redis-semaphore | baton (loop) %s, redis-semaphore %s | %s | %s |\n", \
                    num(m("s3:baton-loop", "ops_per_s"), 0), num(m("s3:semaphore", "ops_per_s"), 0), num(r, 2), verdict(r, ">=", 2)
            r = ratio(m("s2t0:baton-loop", "ops_per_s"), best["s2t0"])
            if (r != "")
                printf "| (for comparison, not a target: s2 think 0, baton as an event loop) | baton (loop) %s, best peer %s | %s | |\n", \
                    num(m("s2t0:baton-loop", "ops_per_s"), 0), num(best["s2t0"], 0), num(r, 2)
            mh = ("s3:baton" in MAXH) ? MAXH["s3:baton"] : ""
            ms = ("s3:semaphore" in MAXH) ? MAXH["s3:semaphore"] : ""
            printf "| s3 max holders ≤ 4 | baton %s, redis-semaphore %s | | %s |\n", \
                (mh == "" ? "n/a" : mh), (ms == "" ? "n/a" : ms), \
                ((mh == "" && ms == "") ? "n/a" : ((mh + 0 <= 4 && ms + 0 <= 4) ? "met" : "**missed**"))
            printf "| s3 wait p99 (reported) | baton %s ms, redis-semaphore %s ms | %s | |\n", \
                num(m("s3:baton", "lat_p99_ms"), 2), num(m("s3:semaphore", "lat_p99_ms"), 2), \
                num(ratio(m("s3:baton", "lat_p99_ms"), m("s3:semaphore", "lat_p99_ms")), 2)
        }' "$work/peers.jsonl" >"$work/peers.table"
    echo
    cat "$work/peers.table"
    echo
    node_v=$(node --version 2>/dev/null || echo none)
    py_v=$(/usr/bin/python3 -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null || echo none)
    ioredis_v=$(sed -n 's/.*"ioredis_version":"\([^"]*\)".*/\1/p' "$work/peers.jsonl" | head -n 1)
    peer_versions=$(sed -n 's/.*"peer":"\([^"]*\)","peer_version":"\([^"]*\)".*/\1 \2/p' \
        "$work/peers.jsonl" | sed 's/^redlock/node-redlock/; s/^semaphore/redis-semaphore/;
        s/^redisson/node-redisson/' | sort -u | paste -sd, - | sed 's/,/, /g')
    {
        echo "Written by \`${PEERS_ROUNDS:+PEERS_ROUNDS=$PEERS_ROUNDS }bench/run --peers\` on $(date -u '+%Y-%m-%d %H:%M UTC'); the run took ${elapsed} s."
        echo
        echo "- machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), shared; load average before"
        echo "  $load_before, after $(cut -d' ' -f1-3 /proc/loadavg)"
        echo "- baton $(sed -n 's/#define BATON_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)/\2/p' "$top/include/baton/version.h" | paste -sd. -), commit $(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo '?'); Redis $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'), one private server on loopback, no persistence"
        echo "- peers: $peer_versions"
        echo "- Node $node_v with ioredis ${ioredis_v:-?}; Python $py_v with Debian's python3-redis"
        echo "- s1 \`--n $s1n\`; s2 8 workers \`--k $s2k\`, think 0 and 5 ms; s3 16 workers, 4 permits, \`--k $s3k\`"
        echo
        echo "Medians of $rounds round(s); in each round the wire limit, then every runner ran each"
        echo "scenario in turn, the order reversed every other round. Lost updates and errors are"
        echo "summed over the rounds, max holders is the largest; every other figure is a median."
        echo
        cat "$work/peers.table"
        echo
        echo "How each runner runs (bench/README.md, \"Peers side by side\"): baton-bench as in"
        echo "bench/run (threads share one client; \`--processes\`: a process and a client each);"
        echo "the Node peers are W concurrent async loops in one Node process (one thread), each"
        echo "with its own ioredis connection (node-redisson: its own Redisson, two connections);"
        echo "redis-py is W threads of one Python process, each with its own client. Every lease"
        echo "is 30 s. node-redlock: \`retryCount: -1\` (unlimited), its default retryDelay 200 ms"
        echo "and retryJitter 100 ms; redis-semaphore: \`lockTimeout: 30000\`, its default"
        echo "retryInterval 10 ms; node-redisson: \`lock()\` with the watchdog (30 s) and the"
        echo "unlock message; redis-py: \`Lock(timeout=30, sleep=0.01)\`. The critical section"
        echo "runs on a separate connection in every runner and is left out of the command counts."
        echo
        echo "Commands (PORT: the private server's):"
        echo
        echo '```'
        cat "$work/peers.commands"
        echo '```'
        if [ -n "$peers_failed" ]; then
            echo
            echo "Failed or with errors:$peers_failed"
        fi
        echo
    } | replace_section "Peers side by side"
}
