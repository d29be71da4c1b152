#!/bin/sh
# bench/elect.sh: baton's command against etcd's (issue 31), each on a private server on
# loopback: a redis-server (scripts/redis-lib.sh) and an etcd with a data directory of its
# own on free ports, both stopped by pid at the end.
#
#   lock handover  the holder (`etcdctl lock --ttl=2 N -- CMD`, `baton lock N --watchdog 2s
#                  -- CMD`: a lease of 2 s renewed while the holder lives) is killed with
#                  kill -9 while a second one waits; the time from the kill to the waiter's
#                  command starting (its own `date +%s%N`)
#   lock round     one uncontended `etcdctl lock N true` / `baton lock N -- true`, process
#                  start included (wall time of the command)
#   elect handover the leader (`etcdctl elect N PROPOSAL`) gets SIGTERM (it resigns) while a
#                  second candidate campaigns; the time to the second one's election (its
#                  first line of output). `baton elect N --watchdog 2s -- CMD` (a lease of
#                  2 s renewed while the leader lives, as `etcdctl lock --ttl=2`'s) gets
#                  SIGTERM (COMMAND ends, baton resigns) or kill -9; the time to the
#                  standby's COMMAND starting. etcdctl elect has no --ttl (its session lease
#                  is 60 s), so its kill -9 would measure that constant: the kill -9 yardstick
#                  at the same 2 s lease is `etcdctl lock --ttl=2` (the same kind of etcd
#                  session lease that elect's campaign holds). ETCD_ELECT_KILL9=1 adds that
#                  60 s row anyway (one round).
#   ended first    whether the killed holder's COMMAND (which stamps its end on SIGTERM)
#                  ended before the next one started: "yes" in every round, "no" if it ended
#                  after, "ran-on" if it was still running when the next one started (the
#                  bench then kills it by pid); "n/a" for etcdctl elect (no COMMAND).
#
# Prints one table (medians of ROUNDS handovers, default 3, and of 10 rounds); writes no
# results file. Installs etcd if missing (bench/deps-bench.sh). BATON_BIN: the baton
# command to use (default: build it with scripts/build.sh).
#
# A peer is four shell functions, PEER_hold NAME READY (start the holder in the
# background, set held_pid, make READY non-empty once it holds, with a pid to kill beside
# the holder if any), PEER_wait NAME STAMP (start the waiter in the background, set
# wait_pid, write `date +%s%N` into STAMP when it gets the lock), PEER_waiting NAME (true
# once the waiter is queued on the server) and PEER_round NAME (one uncontended round);
# adding a peer is writing those and naming it in a `row` call at the end.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
rounds=${ROUNDS:-3}
"$top/bench/deps-bench.sh"
baton=${BATON_BIN:-$("$top/scripts/build.sh")/bin/baton}
. "$top/scripts/redis-lib.sh"
work=$(mktemp -d /tmp/baton-elect.XXXXXX)
bg_pids= # every background process started here, killed (by pid) at the end
etcd_pid=
cleanup() {
    for p in $bg_pids; do kill -9 "$p" 2>/dev/null || :; done
    if [ -n "$etcd_pid" ]; then
        kill "$etcd_pid" 2>/dev/null || :
        wait "$etcd_pid" 2>/dev/null || :
    fi
    redis_stop
    rm -rf "$work" || :
}
trap 'st=$?; cleanup; exit $st' EXIT
trap 'exit 130' INT TERM
say() { printf '%s\n' "$*" >&2; }
ns() { date +%s%N; }
# until_true SECONDS CMD...: polls CMD every 10 ms; false when SECONDS passed first.
until_true() {
    _end=$(($(date +%s) + $1))
    shift
    until "$@"; do
        [ "$(date +%s)" -lt "$_end" ] || return 1
        sleep 0.01
    done
}
nonempty() { [ -s "$1" ]; }
free_port() {
    while :; do
        _p=$((20000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 20000))
        ss -ltn | grep -q ":$_p " || { echo "$_p"; return; }
    done
}
median() { sort -n | awk '{ a[NR] = $1 } END { if (NR == 0) print "n/a"; else print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }

# ---- the servers --------------------------------------------------------------------------
redis_start
rurl="redis://127.0.0.1:$REDIS_PORT"
cport=$(free_port)
pport=$(free_port)
etcd --name elect-bench --data-dir "$work/etcd" \
    --listen-client-urls "http://127.0.0.1:$cport" --advertise-client-urls "http://127.0.0.1:$cport" \
    --listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
    --initial-cluster "elect-bench=http://127.0.0.1:$pport" >"$work/etcd.log" 2>&1 &
etcd_pid=$!
# etcdctl with the private endpoint. Background commands run etcdctl itself (not a shell
# function, whose `&` would fork a subshell): $! must be the process to kill.
ep="--endpoints=127.0.0.1:$cport"
ec() { etcdctl "$ep" "$@"; }
etcd_up() { ec endpoint health >/dev/null 2>&1; }
until_true 20 etcd_up || { say "elect.sh: etcd did not start (log below)"; cat "$work/etcd.log" >&2; exit 1; }
say "elect.sh: redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') on $REDIS_PORT, etcd $(etcd --version | sed -n 's/etcd Version: //p') on $cport, baton $("$baton" --version | head -n 1)"

# ---- the peers ----------------------------------------------------------------------------
# the holder's command: writes "pid N" to READY, then sleeps; SIGTERM stamps its end in
# READY.end (`date +%s%N`) and ends it
hold_cmd() {
    echo "trap 'date +%s%N > \"$1.end\"; exit 0' TERM; echo pid \$\$ > '$1'; while :; do sleep 0.05; done"
}
etcd_keys() { ec get --prefix "$1" --keys-only | grep -c . || :; }

etcd_lock_hold() { etcdctl "$ep" lock --ttl=2 "$1" -- sh -c "$(hold_cmd "$2")" & held_pid=$!; }
etcd_lock_wait() { etcdctl "$ep" lock --ttl=2 "$1" -- sh -c "date +%s%N > '$2'" & wait_pid=$!; }
etcd_lock_waiting() { [ "$(etcd_keys "$1")" -ge 2 ]; }
etcd_lock_round() { ec lock --ttl=2 "$1" true; }

baton_lock_hold() { "$baton" --url "$rurl" lock "$1" --watchdog 2s -- sh -c "$(hold_cmd "$2")" & held_pid=$!; }
baton_lock_wait() { "$baton" --url "$rurl" lock "$1" --watchdog 2s -- sh -c "date +%s%N > '$2'" & wait_pid=$!; }
baton_lock_waiting() {
    [ "$(redis-cli -p "$REDIS_PORT" PUBSUB NUMSUB "redisson_lock__channel:{$1}" | sed -n 2p)" -ge 1 ]
}
baton_lock_round() { "$baton" --url "$rurl" lock "$1" --watchdog 2s -- true; }

# a candidate whose first line of output (printed when elected) is stamped into STAMP; the
# holder's READY is its stamp (no command pid in it)
campaign() { # STAMP CMD...
    _stamp=$1
    shift
    rm -f "$_stamp.fifo"
    mkfifo "$_stamp.fifo"
    "$@" >"$_stamp.fifo" &
    campaign_pid=$!
    { read -r _ && date +%s%N >"$_stamp"; cat >/dev/null; } <"$_stamp.fifo" &
    bg_pids="$bg_pids $!"
}
etcd_elect_hold() { campaign "$2" etcdctl "$ep" elect "$1" leader-a; held_pid=$campaign_pid; }
etcd_elect_wait() { campaign "$2" etcdctl "$ep" elect "$1" leader-b; wait_pid=$campaign_pid; }
etcd_elect_waiting() { [ "$(etcd_keys "$1")" -ge 2 ]; }

# baton elect: a candidate runs its COMMAND once elected (as baton lock does); a standby
# waits on the election's lock channel, as a lock waiter does.
baton_elect_hold() { "$baton" --url "$rurl" elect "$1" --watchdog 2s -- sh -c "$(hold_cmd "$2")" & held_pid=$!; }
baton_elect_wait() { "$baton" --url "$rurl" elect "$1" --watchdog 2s -- sh -c "date +%s%N > '$2'" & wait_pid=$!; }
baton_elect_waiting() { baton_lock_waiting "$1"; }
baton_elect_round() { "$baton" --url "$rurl" elect "$1" --watchdog 2s -- true; }

# ---- the measurements ---------------------------------------------------------------------
# handover PEER SIGNAL: "MS ENDED": ms from signalling the holder to the waiter's stamp, and
# whether the holder's COMMAND ended before that stamp (yes, no, ran-on, n/a: see the
# header); "fail" if the holder, the waiter or the handover did not happen within its bound.
handover() {
    name="elect-bench-$1-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')"
    ready="$work/ready-$name" stamp="$work/stamp-$name" # a round's own: a holder killed
    # late in the round before may still write its end stamp
    "$1_hold" "$name" "$ready"
    bg_pids="$bg_pids $held_pid"
    until_true 10 nonempty "$ready" || { echo fail; return; }
    "$1_wait" "$name" "$stamp"
    bg_pids="$bg_pids $wait_pid"
    until_true 10 "$1_waiting" "$name" || { echo fail; return; }
    cmd_pid=$(sed -n 's/^pid //p' "$ready")
    t0=$(ns)
    kill "-$2" "$held_pid" 2>/dev/null || :
    if until_true 70 nonempty "$stamp"; then
        ended=n/a
        if [ -n "$cmd_pid" ]; then
            if kill -0 "$cmd_pid" 2>/dev/null && [ ! -s "$ready.end" ]; then
                ended=ran-on
            else
                until_true 2 nonempty "$ready.end" || :
                ended=no
                [ ! -s "$ready.end" ] || [ "$(cat "$ready.end")" -ge "$(cat "$stamp")" ] || ended=yes
            fi
        fi
        echo "$((($(cat "$stamp") - t0) / 1000000)) $ended"
    else
        echo fail
    fi
    [ -z "$cmd_pid" ] || kill "$cmd_pid" 2>/dev/null || :
    kill -TERM "$wait_pid" 2>/dev/null || :
    wait "$wait_pid" 2>/dev/null || :
    wait "$held_pid" 2>/dev/null || :
}
# round PEER: ms of one uncontended round, median of 10
round() {
    name="elect-bench-$1-round"
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        t0=$(ns)
        "$1_round" "$name" >/dev/null
        echo $((($(ns) - t0) / 1000000))
    done | median
}
# row LABEL PEER SIGNAL [ROUND [ROUNDS]]: one line of the table
row() {
    for _ in $(seq "${5:-$rounds}"); do handover "$2" "$3"; done >"$work/h"
    say "  $1: handovers (ms, COMMAND ended first): $(tr '\n' ' ' <"$work/h")"
    h=$(grep -v fail "$work/h" | cut -d' ' -f1 | median)
    fails=$(grep -c fail "$work/h" || :)
    ended=$(grep -v fail "$work/h" | cut -d' ' -f2 | sort -u | tr '\n' ' ' | sed 's/ $//')
    r="n/a"
    [ -z "${4:-}" ] || r=$(round "$2")
    printf '| %s | %s | %s | %s | %s |\n' "$1" "$h" "$fails" "${ended:-n/a}" "$r"
}

echo "| peer | handover ms (median of $rounds) | failed | killed holder's COMMAND ended first | uncontended round ms (median of 10) |"
echo "|---|---|---|---|---|"
row "etcdctl lock --ttl=2, kill -9" etcd_lock 9 yes
row "baton lock --watchdog 2s, kill -9" baton_lock 9 yes
row "baton lock --watchdog 2s, SIGTERM (release)" baton_lock TERM
row "etcdctl elect, SIGTERM (resign)" etcd_elect TERM
[ -z "${ETCD_ELECT_KILL9:-}" ] || row "etcdctl elect (60 s session lease), kill -9" etcd_elect 9 "" 1
row "baton elect --watchdog 2s, SIGTERM (resign)" baton_elect TERM
row "baton elect --watchdog 2s, kill -9" baton_elect 9 yes
