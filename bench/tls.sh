# bench/run --tls: s1 and s3 over TLS beside plain TCP, in one run against one server that
# serves both (a plain port and a TLS port, throw-away certificates from
# scripts/tls-lib.sh), rounds alternating plain and TLS so that the shared machine's load
# touches both alike. Prints a table and replaces the "## TLS against plain TCP" section of
# bench/RESULTS.md. Sourced by bench/run, which has built baton ($bench) and set $top,
# $work, $rounds and the s1/s3 sizes.

tls_compare() {
    . "$top/scripts/tls-lib.sh"
    certs="$work/certs"
    mkdir -p "$certs"
    tls_make_certs "$certs" || { say "bench: could not make certificates"; return 1; }
    tport=$(( 40000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 20000 ))
    REDIS_EXTRA_ARGS=$(tls_server_args "$certs" "$tport") redis_start
    port=$REDIS_PORT
    say "bench: TLS against plain TCP, redis-server ports $port (plain) and $tport (TLS), $rounds round(s)"
    tls="--tls-port $tport --tls-ca $certs/ca.crt"
    : >"$work/tls.jsonl"
    round=1
    while [ $round -le $rounds ]; do
        for mode in plain tls; do
            extra=
            [ $mode = tls ] && extra=$tls
            for sc in s1 s3; do
                args="--scenario s1 --n $s1n"
                [ $sc = s3 ] && args="--scenario s3 --workers 16 --permits 4 --k $s3k"
                # shellcheck disable=SC2086
                if ! RESULTS_JSONL="$work/one.json" "$bench" --port "$port" $extra $args \
                    >"$work/one.out" 2>"$work/one.err"; then
                    sed 's/^/  /' "$work/one.err" >&2
                    return 1
                fi
                say "  $mode $(cut -c1-160 "$work/one.out")"
                sed "s/^{/{\"mode\":\"$mode\",/" "$work/one.json" >>"$work/tls.jsonl"
                rm -f "$work/one.json"
            done
        done
        round=$((round + 1))
    done
    redis_stop
    # medians per (mode, scenario) of ops/s and p50
    awk -F'[,:]' '
        { for (i = 1; i < NF; i++) { gsub(/[{}"]/, "", $i); gsub(/[{}"]/, "", $(i + 1)) }
          m = ""; s = ""; o = ""; p = ""
          for (i = 1; i < NF; i += 2) {
            if ($i == "mode") m = $(i + 1); if ($i == "scenario") s = $(i + 1)
            if ($i == "ops_per_s") o = $(i + 1); if ($i == "lat_p50_ms") p = $(i + 1) }
          ops[m " " s] = ops[m " " s] " " o; p50[m " " s] = p50[m " " s] " " p }
        function median(v,    a, n, i, j, t) {
            n = split(v, a, " ")
            for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
                if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
            return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
        END {
            for (k in ops) { O[k] = median(ops[k]); P[k] = median(p50[k]) }
            printf "| figure | plain TCP | TLS | TLS ÷ plain | target |\n|---|---|---|---|---|\n"
            printf "| s1 pair p50 ms | %.4f | %.4f | %.2f | <= 1.3 |\n", P["plain s1"], P["tls s1"], P["tls s1"] / P["plain s1"]
            printf "| s1 pairs/s | %.0f | %.0f | %.2f | |\n", O["plain s1"], O["tls s1"], O["tls s1"] / O["plain s1"]
            printf "| s3 ops/s | %.0f | %.0f | %.2f | |\n", O["plain s3"], O["tls s3"], O["tls s3"] / O["plain s3"]
            printf "| s3 acquire-wait p50 ms | %.3f | %.3f | %.2f | |\n", P["plain s3"], P["tls s3"], P["tls s3"] / P["plain s3"]
        }' "$work/tls.jsonl" >"$work/tls.table"
    cat "$work/tls.table"
    {
        echo "Written by \`bench/run --tls\` on $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo '?'):"
        echo "medians of $rounds round(s), plain and TLS alternating, against one redis-server"
        echo "serving a plain port and a TLS port (TLS 1.3, EC P-256 certificates, verification"
        echo "on), $(nproc) cores, load before $load_before. s1: \`--scenario s1 --n $s1n\`;"
        echo "s3: \`--scenario s3 --workers 16 --permits 4 --k $s3k\`; TLS adds"
        echo "\`--tls-port P --tls-ca ca.crt\`."
        echo
        cat "$work/tls.table"
        echo
    } | replace_section "TLS against plain TCP"
}
