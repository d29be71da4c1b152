# bench/run --cluster: s1m, s2 and s3 on a Redis Cluster of 3 masters (no replicas; started
# with scripts/cluster-lib.sh) beside the same on one node, in one run, rounds alternating.
# The objects are spread evenly over the masters (baton-bench --cluster picks names whose
# slots fall on each master in turn; s2 and s3 run 3 groups of workers, each on its own
# lock or semaphore). On 2 cores the nodes share the CPU, so pairs/s cannot show the
# scaling; what predicts it is recorded instead: server commands, client round trips and
# server CPU µs per operation (summed over the masters), and the share of the scripts each
# master ran. Prints a table and replaces the "## Redis Cluster against one node" section
# of bench/RESULTS.md. Sourced by bench/run ($bench, $top, $work, $rounds set).

cluster_compare() {
    . "$top/scripts/cluster-lib.sh"
    redis_start
    single=$REDIS_PORT spid=$REDIS_PID sdir=$REDIS_DIR
    # a cluster of one master serving every slot: Redis's own cost of cluster mode, apart
    # from spreading the work
    REDIS_EXTRA_ARGS="--cluster-enabled yes --cluster-config-file nodes.conf" redis_start
    one=$REDIS_PORT opid=$REDIS_PID odir=$REDIS_DIR
    redis-cli -p "$one" CLUSTER ADDSLOTSRANGE 0 16383 >/dev/null
    _w=0
    until redis-cli -p "$one" cluster info | grep -q 'cluster_state:ok'; do
        _w=$((_w + 1)); [ $_w -gt 200 ] && { say "bench: the one-node cluster never got ready"; return 1; }
        sleep 0.05
    done
    cluster_start 3 0 || return 1
    masters=$(echo "$CLUSTER_PORTS" | tr ' ' ',')
    say "bench: one node on $single, a one-master cluster on $one, 3 masters on $masters, $rounds round(s)"
    : >"$work/cluster.figures"
    stop_all() {
        cluster_stop
        REDIS_PORT=$one REDIS_PID=$opid REDIS_DIR=$odir redis_stop
        REDIS_PORT=$single REDIS_PID=$spid REDIS_DIR=$sdir redis_stop
    }
    trap 'run_status=$?; stop_all; cleanup; exit $run_status' EXIT
    round=1
    while [ $round -le $rounds ]; do
        for sc in s1m s2 s3; do
            # third: the one node with a third of the clients, the load each of the 3
            # masters carries (as many commands per wake-up as a master sees)
            case $sc in
                s1m) full="--scenario s1m --workers 9 --k $s1mk"
                     third="--scenario s1m --workers 3 --k $s1mk" ;;
                s2) full="--scenario s2 --workers 9 --groups 3 --k $s2k"
                    third="--scenario s2 --workers 3 --groups 1 --k $s2k" ;;
                s3) full="--scenario s3 --workers 15 --groups 3 --permits 4 --k $s3k"
                    third="--scenario s3 --workers 5 --groups 1 --permits 4 --k $s3k" ;;
            esac
            for mode in single third one cluster; do
                args=$full
                case $mode in
                    single) where="--port $single" ;;
                    third) where="--port $single"; args=$third ;;
                    one) where="--cluster $one" ;;
                    cluster) where="--cluster $masters" ;;
                esac
                # shellcheck disable=SC2086
                if ! "$bench" $where $args >"$work/one.out" 2>"$work/one.err"; then
                    sed 's/^/  /' "$work/one.err" >&2
                    return 1
                fi
                [ $round -eq 1 ] && echo "baton-bench $(echo "$where" | sed 's/[0-9][0-9,]*/PORTS/') $args" >>"$work/cluster.commands"
                say "  $mode $(cut -c1-150 "$work/one.out")"
                # "SCENARIO MODE FIELD VALUE" for every key=value word of the summary
                sed 's/ server_calls=\[[^]]*\]//' "$work/one.out" | tr ' ' '\n' | grep '=' |
                    sed "s/=/ /; s/^/$sc $mode /" >>"$work/cluster.figures"
            done
        done
        round=$((round + 1))
    done
    awk '
        $4 ~ /^-?[0-9.]+$/ { v[$1 " " $2 " " $3] = v[$1 " " $2 " " $3] " " $4 }
        function median(s,    a, n, i, j, t) {
            n = split(s, a, " ")
            for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
                if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
            if (n == 0) return ""
            return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
        }
        function g(sc, m, f) { return median(v[sc " " m " " f]) }
        function fmt(r) { return r == "" ? "n/a" : sprintf("%.2f", r) }
        function verdict(r, target) { return r == "" ? "n/a" : (r <= target ? "ok" : "**missed**") }
        function row(sc, label, f, d, target,    a, t, o, b, ratio, rt, r1, ok) {
            a = g(sc, "single", f); t = g(sc, "third", f); o = g(sc, "one", f); b = g(sc, "cluster", f)
            ratio = (a != "" && a + 0 != 0) ? b / a : ""
            rt = (t != "" && t + 0 != 0) ? b / t : ""
            r1 = (o != "" && o + 0 != 0) ? b / o : ""
            ok = ""
            if (target != "") ok = "<= " target ": " verdict(ratio, target) ", " verdict(rt, target)
            printf "| %s | %s | %." d "f | %." d "f | %." d "f | %." d "f | %s | %s | %s | %s |\n", sc, label, a, t, o, b, \
                fmt(ratio), fmt(rt), ok, fmt(r1)
        }
        END {
            print "| scenario | per operation | one node | one node, a third of the clients (a master load) | one-master cluster | 3-master cluster | 3 masters ÷ one node | 3 masters ÷ one node at a master load | target (both ratios) | 3 masters ÷ one-master cluster |"
            print "|---|---|---|---|---|---|---|---|---|---|"
            split("s1m s2 s3", scs, " ")
            for (i = 1; i <= 3; i++) {
                sc = scs[i]
                row(sc, "server commands", "server_cmds_per_op", 2, "1.10")
                row(sc, "client round trips", "client_rtts_per_op", 2, "1.10")
                row(sc, "server CPU µs", "server_cpu_us_per_op", 1, "1.10")
                row(sc, "scripts run", "server_scripts_per_op", 2, "")
                row(sc, "operations/s (shared 2 cores)", "ops_per_s", 0, "")
                row(sc, "lost updates", "lost_updates", 0, "")
                row(sc, "errors", "errors", 0, "")
            }
            print ""
            print "| scenario | master 1 | master 2 | master 3 | largest deviation from even | target | server CPU µs per op it served (1, 2, 3) | capacity per master, ops/s | for 3 masters | for N masters |"
            print "|---|---|---|---|---|---|---|---|---|---|"
            for (i = 1; i <= 3; i++) {
                sc = scs[i]
                dev = g(sc, "cluster", "share_max_dev_pct")
                cpu = ""; worst = 0
                for (m = 1; m <= 3; m++) {
                    share = g(sc, "cluster", "master" m "_share_pct")
                    # CPU per operation that master served: its CPU per operation of the
                    # run divided by its share of the operations
                    c = (share > 0) ? g(sc, "cluster", "master" m "_cpu_us_per_op") * 100 / share : 0
                    cpu = cpu (m > 1 ? ", " : "") sprintf("%.1f", c)
                    if (c > worst) worst = c
                }
                cap = worst > 0 ? 1e6 / worst : 0
                printf "| %s | %.1f %% | %.1f %% | %.1f %% | %.1f %% | <= 15 %% %s | %s | %.0f | %.0f | %.0f × N |\n", sc,
                    g(sc, "cluster", "master1_share_pct"), g(sc, "cluster", "master2_share_pct"),
                    g(sc, "cluster", "master3_share_pct"), dev, (dev <= 15 ? "ok" : "**missed**"), cpu, cap, 3 * cap, cap
            }
        }' "$work/cluster.figures" >"$work/cluster.table"
    cat "$work/cluster.table"
    {
        echo "Written by \`bench/run --cluster\` on $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo '?'):"
        echo "medians of $rounds round(s), one node and the cluster alternating, on loopback,"
        echo "$(nproc) cores shared by every node and the clients, load before $load_before."
        echo "The cluster: 3 masters of redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') (no replicas, so that its"
        echo "masters do what the one node does), started by scripts/cluster-lib.sh. Names are"
        echo "chosen so that the objects fall on the masters in turn: s1m has 9 threads on 9"
        echo "locks (3 per master), s2 9 threads in 3 groups each contending for its own lock (non-atomic"
        echo "counter in the lock's slot), s3 15 threads in 3 groups on 3 semaphores of 4 permits."
        echo "The one node runs the same (9 locks, 3 groups) on itself, and so does a cluster of"
        echo "one master that serves every slot (cluster-enabled, so Redis does its cluster"
        echo "bookkeeping: the slot check of every command, the keys-per-slot index), which"
        echo "separates Redis's own cost of cluster mode from the cost of spreading the work."
        echo "The one node also runs a third of the clients (3 threads on 3 locks, 1 group of"
        echo "3, 1 group of 5): the load each master of the cluster carries, so that it wakes up"
        echo "for as many commands at a time as a master does."
        echo
        echo "Per operation (s1m, s3: an acquire+release pair; s2: an acquisition). Server"
        echo "commands and CPU are summed over the masters (INFO commandstats after CONFIG"
        echo "RESETSTAT, INFO cpu), less the critical section's commands; round trips are the"
        echo "library's counters (a pipelined batch counts once)."
        echo
        cat "$work/cluster.table"
        echo
        echo "Reading the CPU rows: commands, scripts and round trips per operation are the same"
        echo "on the cluster as on one node, so the cluster asks no more work of the servers."
        echo "Server CPU per operation depends on how many commands a server finds per wake-up:"
        echo "one node serving all the clients batches three times as many as each master does,"
        echo "and is cheaper per command for it. The fair comparison for a master is the one node"
        echo "at a master load, a third of the clients (the second ratio); the first adds the"
        echo "batching the one node enjoys when it alone serves everyone, and three server"
        echo "processes sharing 2 cores with the clients."
        echo
        echo "How the capacity is derived: Redis runs commands on one thread, so a master"
        echo "saturates when the CPU it spends reaches one core. The CPU each master spent per"
        echo "operation it served (its INFO cpu over the run ÷ the operations whose scripts it"
        echo "ran) gives what one master can serve: 10^6 ÷ that many µs per second, from the most"
        echo "loaded master. With names spread evenly (the share row), N masters serve N times"
        echo "that, as long as the clients and the network keep up, because the cluster adds no"
        echo "server work per operation (the first table: commands and CPU per operation as on"
        echo "one node). These CPU figures were taken with every node and the clients on the same"
        echo "2 cores, so they include the cost of contention for the CPU: on a dedicated core"
        echo "per master the capacity is higher, the N-fold scaling the same."
        echo
        echo "Commands (PORTS: the one node, or the cluster's masters):"
        echo
        echo '```'
        awk '!seen[$0]++' "$work/cluster.commands"
        echo '```'
        echo
    } | replace_section "Redis Cluster against one node"
    stop_all
}
