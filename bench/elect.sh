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
#                  first line of output). etcdctl elect has no --ttl (its session lease is
#                  60 s), so a kill -9 would measure that constant. The `baton elect` row
#                  runs when `baton elect --help` works in this build; until then it is
#                  skipped with a note.
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
# the holder's command: writes "pid N" (exec keeps it) to READY, then sleeps
hold_cmd() { echo "echo pid \$\$ > '$1'; exec sleep 120"; }
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

# baton elect (another helper is writing it): assumed to take etcdctl elect's shape, a
# campaign that prints a line once elected and leads until SIGTERM, with --lease.
baton_elect_hold() { campaign "$2" "$baton" --url "$rurl" elect "$1" leader-a --lease 2s; held_pid=$campaign_pid; }
baton_elect_wait() { campaign "$2" "$baton" --url "$rurl" elect "$1" leader-b --lease 2s; wait_pid=$campaign_pid; }
baton_elect_waiting() { sleep 0.5; } # no server-side sign known yet: give the campaign 0.5 s

# ---- the measurements ---------------------------------------------------------------------
# handover PEER SIGNAL: ms from signalling the holder to the waiter's stamp; "fail" if the
# holder, the waiter or the handover did not happen within its bound.
handover() {
    name="elect-bench-$1-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')"
    ready="$work/ready" stamp="$work/stamp"
    rm -f "$ready" "$stamp"
    "$1_hold" "$name" "$ready"
    bg_pids="$bg_pids $held_pid"
    until_true 10 nonempty "$ready" || { echo fail; return; }
    "$1_wait" "$name" "$stamp"
    bg_pids="$bg_pids $wait_pid"
    until_true 10 "$1_waiting" "$name" || { echo fail; return; }
    t0=$(ns)
    kill "-$2" "$held_pid" 2>/dev/null || :
    cmd_pid=$(sed -n 's/^pid //p' "$ready")
    [ -z "$cmd_pid" ] || kill "$cmd_pid" 2>/dev/null || :
    if until_true 70 nonempty "$stamp"; then
        echo $((($(cat "$stamp") - t0) / 1000000))
    else
        echo fail
    fi
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
# row LABEL PEER SIGNAL [ROUND]: one line of the table
row() {
    for _ in $(seq "$rounds"); do handover "$2" "$3"; done >"$work/h"
    say "  $1: handovers (ms): $(tr '\n' ' ' <"$work/h")"
    h=$(grep -v fail "$work/h" | median)
    fails=$(grep -c fail "$work/h" || :)
    r="n/a"
    [ -z "${4:-}" ] || r=$(round "$2")
    printf '| %s | %s | %s | %s |\n' "$1" "$h" "$fails" "$r"
}

echo "| peer | handover ms (median of $rounds) | failed | uncontended round ms (median of 10) |"
echo "|---|---|---|---|"
row "etcdctl lock --ttl=2, kill -9" etcd_lock 9 yes
row "baton lock --watchdog 2s, kill -9" baton_lock 9 yes
row "etcdctl elect, SIGTERM (resign)" etcd_elect TERM
if "$baton" elect --help >/dev/null 2>&1; then
    row "baton elect --lease 2s, SIGTERM (resign)" baton_elect TERM
    row "baton elect --lease 2s, kill -9" baton_elect 9
else
    say "elect.sh: this baton has no 'elect' command yet: the baton elect rows are skipped"
    echo "| baton elect | skipped: not in this build | | |"
fi
