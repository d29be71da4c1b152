# bench/run --async: s2 and s3 run by one thread's event loop (baton-bench --async: W
# owners, asynchronous acquisition, the critical section in the callback), with the
# client's engine thread (--async) and without one (--loop: BATON_CALLBACKS_LOOP), beside
# the same scenarios run by W threads, rounds alternating so that the shared machine's load
# touches all three alike. Prints a table and replaces the "## Async from one thread against threads"
# section of bench/RESULTS.md. Sourced by bench/run, which has built baton ($bench) and set
# $top, $work, $rounds and $k.

async_compare() {
    redis_start
    port=$REDIS_PORT
    say "bench: async from one thread against threads, redis-server port $port, $rounds round(s)"
    : >"$work/async.jsonl"
    round=1
    while [ $round -le $rounds ]; do
        for mode in threads async loop; do
            extra=
            [ $mode = threads ] || extra=--$mode
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
            printf "| figure | threads | async, engine thread | ÷ threads | async, loop mode | ÷ threads | target |\n|---|---|---|---|---|---|---|\n"
            for (sc = 2; sc <= 3; sc++) {
                t = "threads s" sc; a = "async s" sc; l = "loop s" sc
                printf "| s%d %s | %.0f | %.0f | %.2f | %.0f | %.2f | >= 1 |\n", sc, sc == 2 ? "acq/s (8 workers)" : "ops/s (16 workers, 4 permits)", O[t], O[a], O[a] / O[t], O[l], O[l] / O[t]
                printf "| s%d acquire-wait p50 ms | %.3f | %.3f | %.2f | %.3f | %.2f | |\n", sc, P[t], P[a], P[a] / P[t], P[l], P[l] / P[t]
                printf "| s%d client round trips / op | %.2f | %.2f | | %.2f | | |\n", sc, R[t], R[a], R[l]
                printf "| s%d socket syscalls / round trip | %.2f | %.2f | | %.2f | | |\n", sc, Y[t], Y[a], Y[l]
                if (sc == 2) printf "| s2 lost updates (all rounds) | %d | %d | | %d | | 0 |\n", lost[t], lost[a], lost[l]
            }
        }' "$work/async.jsonl" >"$work/async.table"
    cat "$work/async.table"
    {
        echo "Written by \`bench/run --async\` on $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo '?'):"
        echo "medians of $rounds round(s), threads, async and loop alternating, one redis-server,"
        echo "$(nproc) cores, load before $load_before. \`--scenario s2 --k $k\` (8 workers) and"
        echo "\`--scenario s3 --k $k\` (16 workers, 4 permits), threads: W threads sharing one"
        echo "client, each blocking in its critical section (the counter's commands on a raw"
        echo "connection of its own). async adds \`--async\`: one thread, one poll() loop, W owners,"
        echo "\`baton_*_acquire_async\`; the critical section sent from the callback on a"
        echo "non-blocking connection whose replies come back through the same loop (an"
        echo "event-loop program does not block its loop on its own I/O), then an asynchronous"
        echo "release and, when it completes, the next acquisition. The operations run as fibers"
        echo "that yield on their sockets, so their round trips overlap: on the client's engine"
        echo "thread (\`--async\`), or on the loop's own thread inside \`baton_client_process\`"
        echo "(\`--loop\`: \`BATON_CALLBACKS_LOOP\`, no engine thread, no hand-off between threads)."
        echo
        cat "$work/async.table"
        echo
    } | replace_section "Async from one thread against threads"
}
