#!/bin/sh
# The example units of examples/systemd/ (docs/systemd.md), without a running systemd (the
# test machines have none: `systemctl is-system-running` says offline): systemd-analyze
# verify accepts them, and their ExecStart= and ExecStartPost= command lines run as systemd
# would run them (a session of their own, /dev/null as stdin, the unit's environment with
# $CREDENTIALS_DIRECTORY holding the password of a server that requires one) and are stopped
# as their KillMode=mixed stops them: SIGTERM to the main process (baton) alone, SIGKILL to
# all that is left of the unit once baton has exited or TimeoutStopSec= has passed (with the
# default KillMode=control-group, SIGTERM to every process: the worker would get two).
#  - baton-worker.service, twice (two machines): the first runs its COMMAND under the lock
#    while the second waits; stopped, the first's COMMAND gets exactly one SIGTERM, the lock
#    passes to the second, and baton's status is one SuccessExitStatus= lists (143: SIGTERM
#    ended COMMAND); stopped too, the second leaves the lock free.
#  - baton-hold@.service, three instances of one name: ExecStartPost= returns (the unit is
#    started) once its baton holds the lock, and not before; stopped, the holder releases it
#    and exits 0, the standby's ExecStartPost then returns; a unit stopped while still
#    waiting exits with a status SuccessExitStatus= lists.
#   tests/with-redis.sh tests/packaging/systemd.sh BATON SOURCE_DIR
set -eu
baton=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
src=$2
port=${BATON_TEST_PORT:?run under tests/with-redis.sh}
units="$src/examples/systemd"
work=$(mktemp -d /tmp/baton-systemd.XXXXXX)
pids=
cleanup() {
    for p in $pids; do
        for q in $(session_pids "$p"); do kill -KILL "$q" 2>/dev/null || true; done
    done
    rm -rf "$work"
}
trap cleanup EXIT
fail() {
    echo "systemd: $*" >&2
    for f in "$work"/*.log; do
        [ -s "$f" ] && sed "s|^|systemd: $(basename "$f"): |" "$f" >&2
    done
    exit 1
}

# ---- the unit files ------------------------------------------------------------------------
# systemd-analyze verify: no complaint but the example application's missing executable
cp "$units"/*.service "$work/"
cp "$units/baton-hold@.service" "$work/baton-hold@primary.service"
(cd "$work" && systemd-analyze verify --man=no ./baton-hold@primary.service \
    ./baton-worker.service ./primary-app.service ./baton-notify.service) >"$work/verify" 2>&1 || true
if grep -v 'primary-app is not executable' "$work/verify" | grep -q .; then
    fail "systemd-analyze verify: $(cat "$work/verify")"
fi
rm -f "$work"/*.service

# key UNIT KEY: the value of KEY= in UNIT (one line each: no continuation lines)
key() {
    grep -q '\\$' "$units/$1" && fail "$1 has a continuation line"
    sed -n "s/^$2=//p" "$units/$1" | head -n 1
}
for u in baton-worker.service baton-hold@.service; do
    [ -n "$(key $u SuccessExitStatus)" ] || fail "$u: no SuccessExitStatus"
done

# ---- the server and the credential -----------------------------------------------------------
password="pw-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')"
"${BATON_CLI:-redis-cli}" -p "$port" CONFIG SET requirepass "$password" >/dev/null
rcli() { "${BATON_CLI:-redis-cli}" -p "$port" --no-auth-warning -a "$password" "$@"; }
# subscribers NAME: how many connections listen on the lock NAME's channel (its waiters)
subscribers() { rcli PUBSUB NUMSUB "redisson_lock__channel:{$1}" | tail -n 1; }
more_subscribers() { [ "$(subscribers "$1")" -gt "$2" ]; }
no_subscribers() { [ "$(subscribers "$1")" -eq 0 ]; }
[ "$(rcli PING)" = PONG ] || fail "the server does not take the password"
mkdir -m 700 "$work/credentials"
echo "$password" >"$work/credentials/redis-password"
host=$(uname -n)

# The COMMAND the worker unit runs (in place of /usr/local/bin/worker): writes a line for
# each SIGTERM with its sender's pid to $COUNT_DIR/terms, lingers half a second after the
# first for a second one, then dies of SIGTERM as a program without a handler would. (Two
# SIGTERMs that arrive before the first is handled make one: the sender tells them apart.)
cat >"$work/worker" <<'EOF'
#!/usr/bin/perl
use strict;
use warnings;
use POSIX ();
my $dir = $ENV{COUNT_DIR};
my $n = 0;
my $on_term = sub {
    my (undef, $info) = @_;
    $n++;
    open my $f, '>>', "$dir/terms" or die;
    print $f "TERM from $info->{pid}\n";
    close $f;
};
POSIX::sigaction(POSIX::SIGTERM, POSIX::SigAction->new($on_term, POSIX::SigSet->new,
    POSIX::SA_SIGINFO)) or die;
open my $f, '>', "$dir/terms" or die;
close $f;
open $f, '>', "$dir/started" or die;
print $f "$$\n";
close $f;
select(undef, undef, undef, 0.05) until $n;
select(undef, undef, undef, 0.05) for 1 .. 10;
POSIX::sigaction(POSIX::SIGTERM, POSIX::SigAction->new('DEFAULT'));
kill 'TERM', $$;
sleep 1;
EOF
chmod +x "$work/worker"

# unit_cmd UNIT KEY INSTANCE: the unit's command line with systemd's specifiers replaced and
# the installed paths pointing at this build and this test
unit_cmd() {
    line=$(key "$1" "$2")
    line=$(printf '%s\n' "$line" | sed -e "s|%I|$3|g" -e "s|%H|$host|g" \
        -e "s|/usr/bin/baton|$baton|g" -e "s|/usr/local/bin/worker|$work/worker|g")
    case "$line" in *%*) fail "$1: $2 has a specifier this test does not know: $line" ;; esac
    printf '%s\n' "$line"
}

# pstat PID: sets $p_state and $p_sid from /proc/PID/stat (both empty once PID is gone),
# with shell builtins only: it runs in polling loops
pstat() {
    p_state='' p_sid=''
    [ -r "/proc/$1/stat" ] && read -r p_line 2>/dev/null <"/proc/$1/stat" || return 0
    # shellcheck disable=SC2086
    set -- ${p_line##*) }
    p_state=$1 p_sid=$4
}
# session_pids PID: the processes of the session PID leads (the unit's control group here)
session_pids() {
    for d in /proc/[0-9]*; do
        pstat "${d#/proc/}"
        [ "$p_sid" = "$1" ] && echo "${d#/proc/}"
    done
    return 0
}
leads_session() {
    pstat "$1"
    [ "$p_sid" = "$1" ]
}
exited() { # true once PID (a child of this shell) has exited, zombie or reaped
    pstat "$1"
    case "$p_state" in Z | "") return 0 ;; *) return 1 ;; esac
}
# wait_for SECONDS COMMAND...: polls COMMAND every 50 ms until it succeeds; false after SECONDS
wait_for() {
    n=$(($1 * 20))
    shift
    while ! "$@"; do
        n=$((n - 1))
        [ $n -gt 0 ] || return 1
        sleep 0.05
    done
}

# start UNIT INSTANCE TAG: runs the unit's ExecStart= as systemd does; sets $main (its pid)
start() {
    cmd=$(unit_cmd "$1" ExecStart "$2")
    tag=$3
    mkdir -p "$work/$tag"
    eval "set -- $cmd"
    env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin BATON_URL="redis://127.0.0.1:$port" \
        CREDENTIALS_DIRECTORY="$work/credentials" COUNT_DIR="$work/$tag" \
        setsid "$@" </dev/null >"$work/$tag.log" 2>&1 &
    main=$!
    pids="$pids $main"
    wait_for 5 leads_session "$main" ||
        fail "$tag: the unit's main process does not lead a session of its own"
}

# start_post UNIT INSTANCE MAINPID TAG: runs the unit's ExecStartPost= in the background
start_post() {
    cmd=$(unit_cmd "$1" ExecStartPost "$2")
    mainpid=$3 tag=$4
    eval "set -- $cmd"
    env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin BATON_URL="redis://127.0.0.1:$port" \
        CREDENTIALS_DIRECTORY="$work/credentials" MAINPID="$mainpid" \
        setsid "$@" </dev/null >"$work/$tag-post.log" 2>&1 &
    post=$!
    pids="$pids $post"
}

# stop UNIT PID: as the unit's KillMode= says (mixed: SIGTERM to the main process alone;
# control-group, the default: to every process of the unit); SIGKILL to what is left once
# the main process has exited or after TimeoutStopSec=. Sets $status, baton's exit status.
stop() {
    timeout=$(key "$1" TimeoutStopSec)
    timeout=${timeout%s}
    case "$(key "$1" KillMode)" in
        mixed) kill -TERM "$2" ;;
        control-group | "") for q in $(session_pids "$2"); do kill -TERM "$q" 2>/dev/null || true; done ;;
        *) fail "$1: KillMode=$(key "$1" KillMode) is not simulated here" ;;
    esac
    if ! wait_for "$timeout" exited "$2"; then
        echo "systemd: $1: still running after TimeoutStopSec=${timeout}s: SIGKILL" >&2
    fi
    for q in $(session_pids "$2"); do kill -KILL "$q" 2>/dev/null || true; done
    status=0
    wait "$2" || status=$?
}

# success UNIT STATUS: systemd counts STATUS as a clean exit of UNIT
success() {
    [ "$2" -eq 0 ] && return 0
    for s in $(key "$1" SuccessExitStatus); do [ "$s" = "$2" ] && return 0; done
    return 1
}

# ---- baton-worker.service: a service run under `baton lock worker -- COMMAND` ------------------
unit="baton-worker.service"
start $unit - a
a=$main
wait_for 10 test -s "$work/a/started" || fail "$unit: the first worker did not start"
[ "$(rcli EXISTS worker)" = 1 ] || fail "$unit: the lock is not held while the worker runs"
before=$(subscribers worker)
start $unit - b
b=$main
# the second machine's baton waits: it has subscribed to the lock's channel
wait_for 10 more_subscribers worker "$before" ||
    fail "$unit: the second worker's baton is not waiting for the lock"
[ ! -e "$work/b/started" ] || fail "$unit: the second worker started while the first held the lock"

# one_sigterm TAG: the worker got one SIGTERM, and from baton's side, not from systemd
# (this shell)
one_sigterm() {
    [ "$(grep -c TERM "$work/$1/terms")" -eq 1 ] ||
        fail "$unit: the worker got $(grep -c TERM "$work/$1/terms") SIGTERMs, not one"
    ! grep -qx "TERM from $$" "$work/$1/terms" ||
        fail "$unit: the worker got its SIGTERM from systemd itself, not through baton"
}
stop $unit "$a"
one_sigterm a
[ "$status" -eq 143 ] || fail "$unit: baton exited $status, not 143 (the worker's SIGTERM)"
success $unit "$status" || fail "$unit: exit $status is not in SuccessExitStatus=$(key $unit SuccessExitStatus)"
wait_for 10 test -s "$work/b/started" || fail "$unit: the lock did not pass to the second worker"

stop $unit "$b"
one_sigterm b
success $unit "$status" || fail "$unit: exit $status is not in SuccessExitStatus=$(key $unit SuccessExitStatus)"
[ "$(rcli EXISTS worker)" = 0 ] || fail "$unit: the lock is still there after both units stopped"
echo "systemd: $unit: stopped with KillMode=mixed, the worker got one SIGTERM, baton exited $status, the lock passed on and was released"

# ---- baton-hold@.service: a lock held while the unit runs ---------------------------------------
unit="baton-hold@.service"
start $unit primary p1
p1=$main
start_post $unit primary "$p1" p1
wait_for 15 exited "$post" || fail "$unit: ExecStartPost did not see its baton hold the lock"
wait "$post" || fail "$unit: ExecStartPost failed"
[ "$(rcli EXISTS primary)" = 1 ] || fail "$unit: the lock is not held"

before=$(subscribers primary)
start $unit primary p2
p2=$main
start_post $unit primary "$p2" p2
p2post=$post
wait_for 10 more_subscribers primary "$before" ||
    fail "$unit: the standby's baton is not waiting for the lock"
# the standby's ExecStartPost has checked at least twice (it checks every second) by now
! wait_for 2 exited "$p2post" || fail "$unit: the standby's ExecStartPost returned before it held the lock"

stop $unit "$p1"
[ "$status" -eq 0 ] || fail "$unit: the holder exited $status, not 0"
wait_for 15 exited "$p2post" || fail "$unit: the standby did not take the lock over"
wait "$p2post" || fail "$unit: the standby's ExecStartPost failed"

# a third one waits for the lock; stopped while it waits, it exits cleanly for systemd.
# The standby's subscription lingers a moment (100 ms) after it took the lock over: counted
# in, it hid the third one's (most runs under ThreadSanitizer, which slows the standby).
wait_for 5 no_subscribers primary || fail "$unit: the standby's subscription outlived its wait"
before=0
start $unit primary p3
p3=$main
wait_for 10 more_subscribers primary "$before" ||
    fail "$unit: the third baton is not waiting for the lock"
stop $unit "$p3"
success $unit "$status" || fail "$unit: stopped while waiting, exit $status is not in SuccessExitStatus"
waiting=$status

stop $unit "$p2"
[ "$status" -eq 0 ] || fail "$unit: the standby exited $status, not 0"
[ "$(rcli EXISTS primary)" = 0 ] || fail "$unit: the lock is still there after the units stopped"
echo "systemd: $unit: started once held (ExecStartPost), released on stop (exit 0), a waiting unit stopped with $waiting"
