# bench/run --sync: s1 with sync_replicas = 1 (WAIT 1 after each acquisition, in the same
# round trip) beside s1 without, in one run against a master with one replica on loopback,
# rounds alternating. Prints a table and replaces the "## s1 with sync_replicas" section of
# bench/RESULTS.md. Sourced by bench/run ($bench, $top, $work, $rounds, $s1n set).

sync_compare() {
    redis_start
    mport=$REDIS_PORT mpid=$REDIS_PID mdir=$REDIS_DIR
    REDIS_EXTRA_ARGS="--replicaof 127.0.0.1 $mport --repl-diskless-sync-delay 0" redis_start
    rport=$REDIS_PORT rpid=$REDIS_PID rdir=$REDIS_DIR
    _w=0
    until redis-cli -p "$rport" info replication | grep -q 'master_link_status:up'; do
        _w=$((_w + 1)); [ $_w -gt 200 ] && { say "bench: the replica never synced"; return 1; }
        sleep 0.05
    done
    say "bench: s1 with and without sync_replicas = 1, master $mport, replica $rport, $rounds round(s)"
    : >"$work/sync.jsonl"
    round=1
    while [ $round -le $rounds ]; do
        for n in 0 1; do
            if ! RESULTS_JSONL="$work/one.json" "$bench" --port "$mport" --scenario s1 --n "$s1n" \
                --sync-replicas $n >"$work/one.out" 2>"$work/one.err"; then
                sed 's/^/  /' "$work/one.err" >&2
                return 1
            fi
            say "  sync=$n $(cut -c1-160 "$work/one.out")"
            sed "s/^{/{\"sync\":\"$n\",/" "$work/one.json" >>"$work/sync.jsonl"
            rm -f "$work/one.json"
        done
        round=$((round + 1))
    done
    REDIS_PORT=$rport REDIS_PID=$rpid REDIS_DIR=$rdir redis_stop
    REDIS_PORT=$mport REDIS_PID=$mpid REDIS_DIR=$mdir redis_stop
    awk -F'[,:]' '
        { for (i = 1; i <= NF; i++) gsub(/[{}"]/, "", $i)
          m = ""; o = ""; p = ""; q = ""
          for (i = 1; i < NF; i += 2) {
            if ($i == "sync") m = $(i + 1); if ($i == "ops_per_s") o = $(i + 1)
            if ($i == "lat_p50_ms") p = $(i + 1); if ($i == "lat_p99_ms") q = $(i + 1) }
          ops[m] = ops[m] " " o; p50[m] = p50[m] " " p; p99[m] = p99[m] " " q }
        function median(v,    a, n, i, j, t) {
            n = split(v, a, " ")
            for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
                if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
            return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
        END {
            printf "| s1 | sync_replicas 0 | sync_replicas 1 | 1 ÷ 0 |\n|---|---|---|---|\n"
            printf "| pairs/s | %.0f | %.0f | %.2f |\n", median(ops[0]), median(ops[1]), median(ops[1]) / median(ops[0])
            printf "| pair p50 ms | %.4f | %.4f | %.2f |\n", median(p50[0]), median(p50[1]), median(p50[1]) / median(p50[0])
            printf "| pair p99 ms | %.3f | %.3f | %.2f |\n", median(p99[0]), median(p99[1]), median(p99[1]) / median(p99[0])
        }' "$work/sync.jsonl" >"$work/sync.table"
    cat "$work/sync.table"
    {
        echo "Written by \`bench/run --sync\` on $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo '?'):"
        echo "medians of $rounds round(s), alternating, against a master with one replica on"
        echo "loopback (diskless sync), $(nproc) cores, load before $load_before;"
        echo "\`--scenario s1 --n $s1n\` with \`--sync-replicas 0\` and \`1\`. With 1, each"
        echo "acquisition pipelines \`WAIT 1 1000\` behind its script: still one round trip, plus"
        echo "the replica's acknowledgement."
        echo
        cat "$work/sync.table"
        echo
    } | replace_section "s1 with sync_replicas"
}
