# bench/run --waiters [N]: N asynchronous waiters on N names in one process (issue 49, item
# 4; bench/waiters.c): one client, one lock handle per name, each name held by a foreign
# owner in Redisson's layout, then every hold released as Redisson's unlock does (DEL,
# PUBLISH "0" on redisson_lock__channel:{name}). Bytes per waiter (RSS delta / N, handles
# included), and the rate at which all are through, beside redis-benchmark's PING from 50
# connections against the same server in the same run (rounds alternating). Prints a table
# and replaces the "## Many asynchronous waiters" section of bench/RESULTS.md. Sourced by
# bench/run, which has built baton and set $top, $work, $rounds, $dir. BATON_WAITERS_ARGS:
# more arguments for baton-waiters (--pool S, --starve-ms M, --multiplex M), named in the
# section.

waiters_compare() {
    n=$1
    wbench="$dir/bench/baton-waiters"
    [ -x "$wbench" ] || { say "bench/run: $wbench was not built"; return 1; }
    redis_start
    port=$REDIS_PORT
    say "bench: $n async waiters, redis-server port $port, $rounds round(s)"
    : >"$work/waiters.jsonl"
    : >"$work/ping"
    round=1
    while [ "$round" -le "$rounds" ]; do
        ping=$("$BATON_BENCHMARK" -p "$port" -t ping -c 50 -n 200000 -q --csv 2>/dev/null |
            awk -F'","' '/PING_MBULK/ { gsub(/"/, "", $2); print $2 }')
        echo "$ping" >>"$work/ping"
        "$BATON_CLI" -p "$port" FLUSHALL >/dev/null
        # shellcheck disable=SC2086 # the extra arguments are words
        if ! "$wbench" --port "$port" --n "$n" ${BATON_WAITERS_ARGS:-} >"$work/one.out" \
            2>"$work/one.err"; then
            sed 's/^/  /' "$work/one.err" >&2
            return 1
        fi
        say "  round $round: PING $ping/s; $(tail -n 1 "$work/one.err" | cut -c16-)"
        sed "s/^{/{\"ping\":$ping,/" "$work/one.out" >>"$work/waiters.jsonl"
        round=$((round + 1))
    done
    redis_stop
    awk -F'[,:]' '
        { for (i = 1; i < NF; i++) { gsub(/[{}"]/, "", $i); gsub(/[{}"]/, "", $(i + 1)) }
          for (i = 1; i < NF; i += 2) {
            if ($i == "ping") p = p " " $(i + 1); if ($i == "rate") r = r " " $(i + 1)
            if ($i == "bytes_per_waiter") b = b " " $(i + 1)
            if ($i == "bytes_per_handle") h = h " " $(i + 1)
            if ($i == "maps_waiting") m = m " " $(i + 1)
            if ($i == "failed") f += $(i + 1); if ($i == "acquired") a = a " " $(i + 1)
            if ($i == "rate") { split(r, rr, " "); split(p, pp, " "); q = q " " rr[length(rr)] / pp[length(pp)] } } }
        function median(v,    x, n, i, j, t) {
            n = split(v, x, " ")
            for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
                if (x[j] + 0 < x[i] + 0) { t = x[i]; x[i] = x[j]; x[j] = t }
            return n % 2 ? x[(n + 1) / 2] : (x[n / 2] + x[n / 2 + 1]) / 2 }
        END {
            printf "| figure | median | rounds | target |\n|---|---|---|---|\n"
            printf "| bytes per waiter (handle included) | %.0f |%s | <= 2048 |\n", median(b), b
            printf "| of which the handle | %.0f |%s | |\n", median(h), h
            printf "| mappings while waiting | %.0f |%s | |\n", median(m), m
            printf "| acquired | %.0f |%s | all |\n", median(a), a
            printf "| failed (all rounds) | %d | | 0 |\n", f
            printf "| acquisitions/s once released | %.0f |%s | |\n", median(r), r
            printf "| PING/s, 50 connections | %.0f |%s | |\n", median(p), p
            printf "| ÷ PING (each round its own) | %.2f |%s | >= 0.5 |\n", median(q), q
        }' "$work/waiters.jsonl" >"$work/waiters.table"
    cat "$work/waiters.table"
    {
        echo "Written by \`bench/run --waiters $n\` on $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo '?'):"
        echo "$rounds round(s), $(nproc) cores, one redis-server. Each round: \`redis-benchmark -t ping"
        echo "-c 50 -n 200000 -q\` (PING_MBULK), then \`baton-waiters --n $n${BATON_WAITERS_ARGS:+ $BATON_WAITERS_ARGS}\` (bench/waiters.c): one"
        echo "client, one lock handle per name, each name held by a foreign owner in Redisson's"
        echo "layout (HSET of \`<uuid>:57\`, PEXPIRE), one \`baton_lock_acquire_async\` per handle"
        echo "(wait forever, watchdog). Bytes per waiter: the resident set (/proc/self/statm) once"
        echo "every waiter has made its two attempts and sleeps, minus the client's alone (engine"
        echo "started, one acquisition done), over N: handles, operations, saved frames and"
        echo "subscriptions. Then every hold is released as Redisson's unlock does (DEL, PUBLISH"
        echo "\"0\" on \`redisson_lock__channel:{name}\`), pipelined from a second connection; the rate"
        echo "is N over the time from the first release sent to the last callback."
        echo
        cat "$work/waiters.table"
        echo
    } | replace_section "Many asynchronous waiters${BATON_WAITERS_ARGS:+ ($BATON_WAITERS_ARGS)}"
}
