# bench/run --async: s2 and s3 run by one thread's event loop (baton-bench --async: W
# owners, asynchronous acquisition, the critical section in the callback) beside the same
# scenarios run by W threads, rounds alternating so that the shared machine's load touches
# both alike. Prints a table and replaces the "## Async from one thread against threads"
# section of bench/RESULTS.md. Sourced by bench/run, which has built baton ($bench) and set
# $top, $work, $rounds and $k.

async_compare() {
    redis_start
    port=$REDIS_PORT
    say "bench: async from one thread against threads, redis-server port $port, $rounds round(s)"
    : >"$work/async.jsonl"
    round=1
    while [ $round -le $rounds ]; do
        for mode in threads async; do
            extra=
            [ $mode = async ] && extra=--async
            for sc in s2 s3; do
                # shellcheck disable=SC2086
                if ! RESULTS_JSONL="$work/one.json" "$bench" --port "$port" --scenario $sc \
                    --k "$k" $extra >"$work/one.out" 2>"$work/one.err"; then
                    sed 's/^/  /' "$work/one.err" >&2
                    return 1
                fi
                say "  $mode $(cut -c1-160 "$work/one.out")"
                sed "s/^{/{\"mode\":\"$mode\",/" "$work/one.json" >>"$work/async.jsonl"
                rm -f "$work/one.json"
            done
        done
        round=$((round + 1))
    done
    redis_stop
    awk -F'[,:]' '
        { for (i = 1; i < NF; i++) { gsub(/[{}"]/, "", $i); gsub(/[{}"]/, "", $(i + 1)) }
          m = ""; s = ""; o = ""; p = ""; r = ""; l = ""; y = ""
          for (i = 1; i < NF; i += 2) {
            if ($i == "mode") m = $(i + 1); if ($i == "scenario") s = $(i + 1)
            if ($i == "ops_per_s") o = $(i + 1); if ($i == "lat_p50_ms") p = $(i + 1)
            if ($i == "client_rtts_per_op") r = $(i + 1); if ($i == "lost_updates") l = $(i + 1)
            if ($i == "syscalls_per_rt") y = $(i + 1) }
          sys[m " " s] = sys[m " " s] " " y
          ops[m " " s] = ops[m " " s] " " o; p50[m " " s] = p50[m " " s] " " p
          rtt[m " " s] = rtt[m " " s] " " r; lost[m " " s] += l }
        function median(v,    a, n, i, j, t) {
            n = split(v, a, " ")
            for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
                if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
            return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
        END {
            for (k in ops) { O[k] = median(ops[k]); P[k] = median(p50[k]); R[k] = median(rtt[k]); Y[k] = median(sys[k]) }
            printf "| figure | threads | one loop thread (async) | async ÷ threads | target |\n|---|---|---|---|---|\n"
            printf "| s2 acq/s (8 workers) | %.0f | %.0f | %.2f | >= 1 |\n", O["threads s2"], O["async s2"], O["async s2"] / O["threads s2"]
            printf "| s2 acquire-wait p50 ms | %.3f | %.3f | %.2f | |\n", P["threads s2"], P["async s2"], P["async s2"] / P["threads s2"]
            printf "| s2 client round trips / acq | %.2f | %.2f | | |\n", R["threads s2"], R["async s2"]
            printf "| s2 socket syscalls / round trip | %.2f | %.2f | | |\n", Y["threads s2"], Y["async s2"]
            printf "| s2 lost updates (all rounds) | %d | %d | | 0 |\n", lost["threads s2"], lost["async s2"]
            printf "| s3 ops/s (16 workers, 4 permits) | %.0f | %.0f | %.2f | >= 1 |\n", O["threads s3"], O["async s3"], O["async s3"] / O["threads s3"]
            printf "| s3 acquire-wait p50 ms | %.3f | %.3f | %.2f | |\n", P["threads s3"], P["async s3"], P["async s3"] / P["threads s3"]
            printf "| s3 client round trips / op | %.2f | %.2f | | |\n", R["threads s3"], R["async s3"]
            printf "| s3 socket syscalls / round trip | %.2f | %.2f | | |\n", Y["threads s3"], Y["async s3"]
        }' "$work/async.jsonl" >"$work/async.table"
    cat "$work/async.table"
    {
        echo "Written by \`bench/run --async\` on $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo '?'):"
        echo "medians of $rounds round(s), threads and async alternating, one redis-server,"
        echo "$(nproc) cores, load before $load_before. \`--scenario s2 --k $k\` (8 workers) and"
        echo "\`--scenario s3 --k $k\` (16 workers, 4 permits), threads: W threads sharing one"
        echo "client, each blocking in its critical section (the counter's commands on a raw"
        echo "connection of its own). async adds \`--async\`: one thread, one poll() loop, W owners,"
        echo "\`baton_*_acquire_async\`; the critical section sent from the callback on a"
        echo "non-blocking connection whose replies come back through the same loop (an"
        echo "event-loop program does not block its loop on its own I/O), then the short blocking"
        echo "release (one round trip) and the next acquisition. The client's one engine thread"
        echo "runs the operations as fibers that yield on their sockets, so their round trips"
        echo "overlap. Both runs barge as Redisson's unfair lock does: a holder that releases and"
        echo "asks again at once often wins over the waiter the release woke."
        echo
        cat "$work/async.table"
        echo
    } | replace_section "Async from one thread against threads"
}
