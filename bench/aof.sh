# bench/run --aof: s1 with sync_aof (WAITAOF 1 0 after each acquisition, in the same round
# trip) beside s1 without, against a server with an append-only file, once fsynced at every
# write (appendfsync always) and once every second (everysec), rounds alternating. Needs
# Redis 7.2+ or Valkey 8+ (BATON_SERVER; scripts/trixie-root.sh runs Debian 13's). Prints
# a table and replaces the "## s1 with sync_aof (SERVER)" section of bench/RESULTS.md. Sourced by
# bench/run ($bench, $top, $work, $rounds, $s1n, $s1n_everysec set).

aof_compare() {
    : >"$work/aof.jsonl"
    for fsync in always everysec; do
        REDIS_EXTRA_ARGS="--appendonly yes --appendfsync $fsync" redis_start
        say "bench: s1 with and without sync_aof, appendfsync $fsync, port $REDIS_PORT, $rounds round(s)"
        round=1
        while [ $round -le $rounds ]; do
            for a in 0 1; do
                n=$s1n
                [ $fsync = everysec ] && [ $a = 1 ] && n=$s1n_everysec
                flag=
                [ $a = 1 ] && flag=--sync-aof
                if ! RESULTS_JSONL="$work/one.json" "$bench" --port "$REDIS_PORT" --scenario s1 \
                    --n "$n" $flag --sync-timeout-ms 3000 >"$work/one.out" 2>"$work/one.err"; then
                    sed 's/^/  /' "$work/one.err" >&2
                    return 1
                fi
                say "  $fsync sync_aof=$a $(cut -c1-160 "$work/one.out")"
                sed "s/^{/{\"cfg\":\"$fsync$a\",/" "$work/one.json" >>"$work/aof.jsonl"
                rm -f "$work/one.json"
            done
            round=$((round + 1))
        done
        redis_stop
    done
    awk -F'[,:]' '
        { for (i = 1; i <= NF; i++) gsub(/[{}"]/, "", $i)
          m = ""; o = ""; p = ""; q = ""
          for (i = 1; i < NF; i += 2) {
            if ($i == "cfg") m = $(i + 1); if ($i == "ops_per_s") o = $(i + 1)
            if ($i == "lat_p50_ms") p = $(i + 1); if ($i == "lat_p99_ms") q = $(i + 1) }
          ops[m] = ops[m] " " o; p50[m] = p50[m] " " p; p99[m] = p99[m] " " q }
        function median(v,    a, n, i, j, t) {
            n = split(v, a, " ")
            for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
                if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
            return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
        END {
            printf "| s1 | always, sync_aof 0 | always, sync_aof 1 | 1 ÷ 0 | everysec, sync_aof 0 | everysec, sync_aof 1 | 1 ÷ 0 |\n|---|---|---|---|---|---|---|\n"
            printf "| pairs/s | %.0f | %.0f | %.2f | %.0f | %.1f | %.4f |\n", median(ops["always0"]), median(ops["always1"]), median(ops["always1"]) / median(ops["always0"]), median(ops["everysec0"]), median(ops["everysec1"]), median(ops["everysec1"]) / median(ops["everysec0"])
            printf "| pair p50 ms | %.4f | %.4f | %.2f | %.4f | %.1f | %.0f |\n", median(p50["always0"]), median(p50["always1"]), median(p50["always1"]) / median(p50["always0"]), median(p50["everysec0"]), median(p50["everysec1"]), median(p50["everysec1"]) / median(p50["everysec0"])
            printf "| pair p99 ms | %.3f | %.3f | %.2f | %.3f | %.1f | %.0f |\n", median(p99["always0"]), median(p99["always1"]), median(p99["always1"]) / median(p99["always0"]), median(p99["everysec0"]), median(p99["everysec1"]), median(p99["everysec1"]) / median(p99["everysec0"])
        }' "$work/aof.jsonl" >"$work/aof.table"
    cat "$work/aof.table"
    {
        echo "Written by \`bench/run --aof\` on $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo '?'):"
        echo "$BATON_SERVER $("$BATON_SERVER" --version | sed 's/.*v=\([^ ]*\).*/\1/'), medians of $rounds round(s), alternating, one server with"
        echo "\`appendonly yes\` per column pair, $(nproc) cores, load before $load_before;"
        echo "\`--scenario s1 --n $s1n\` (with sync_aof under everysec: \`--n $s1n_everysec\`) with and without"
        echo "\`--sync-aof --sync-timeout-ms 3000\`. With it, each acquisition pipelines \`WAITAOF 1 0 3000\` behind its"
        echo "script: still one round trip, plus the wait for the fsync. Under \`always\` the"
        echo "server fsyncs before it answers the script, so WAITAOF answers at once; under"
        echo "\`everysec\` it waits for the next fsync of the second."
        echo
        cat "$work/aof.table"
        echo
    } | replace_section "s1 with sync_aof ($BATON_SERVER)"
}
