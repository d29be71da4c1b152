#!/usr/bin/python3
"""peers.py: runs one scenario of the benchmark (shared/BENCH.md) with redis-py's lock
(redis.lock.Lock, Debian's python3-redis) against a Redis server, and prints one JSON
result line (BENCH.md's format, "lang":"python", "peer":"redis-py"; also appended to
$RESULTS_JSONL when that is set) on stdout and a key=value summary on stderr.
bench/peers.sh (bench/run --peers) runs it beside baton-bench and bench/peers/peers.js.

    /usr/bin/python3 peers.py --scenario s1|s2 --port P [--n N] [--k K] [--workers W]
                              [--think-ms T] [--max-seconds S] [--sleep SECONDS]

The lock: Lock(client, name, timeout=30, sleep=0.01, blocking=True), a 30 s lease as
baton's watchdog lease; its acquire is SET NX PX, then a sleep of `sleep` seconds between
attempts (redis-py's default is 0.1; 0.01 here, --sleep changes it); its release is one
EVALSHA. redis-py has no semaphore: s3 is not run.

The workers are W threads of this process, each with its own client (its own connection)
for the lock and its own connection for the critical section. What is timed follows
bench/baton-bench.c: a wait is the acquire call (s2) or the whole acquire+release pair
(s1); a handoff runs from the previous holder starting its release to the next acquire
returning, for an acquirer that was already waiting when that release started;
max_holders counts workers between acquire and release; lost_updates is the
acquisitions less the counter the critical sections incremented (GET then SET). Server
commands come from INFO commandstats after CONFIG RESETSTAT, less the critical section's
commands and INFO/CONFIG; client round trips are the commands the lock's clients sent.
Every wait is bounded by --max-seconds (default 60): a wait cut there counts an error.
Exits 0 when it printed a result (errors are in it), 1 when it could not run.
"""

import argparse
import json
import math
import os
import resource
import sys
import threading
import time

import redis

LEASE_S = 30


def parse_args():
    p = argparse.ArgumentParser(description="redis-py's lock in the benchmark's s1/s2")
    p.add_argument("--scenario", required=True, choices=["s1", "s2"])
    p.add_argument("--port", required=True, type=int)
    p.add_argument("--n", type=int, default=-1)
    p.add_argument("--k", type=int, default=-1)
    p.add_argument("--workers", type=int, default=-1)
    p.add_argument("--think-ms", type=int, default=0)
    p.add_argument("--max-seconds", type=int, default=60)
    p.add_argument("--sleep", type=float, default=0.01)
    o = p.parse_args()
    if o.workers < 0:
        o.workers = 1 if o.scenario == "s1" else 8
    if o.scenario == "s1" and o.workers != 1:
        p.error("s1 has one worker")
    if o.workers < 1:
        p.error("--workers must be at least 1")
    if o.k < 0:
        o.k = -(-o.n // o.workers) if o.n > 0 else (5000 if o.scenario == "s1" else 200)
    if o.max_seconds < 2:
        p.error("--max-seconds must be at least 2")
    return o


opt = parse_args()
now_ns = time.monotonic_ns


class CountingRedis(redis.Redis):
    """A client that counts the commands it sends while `counting` is set."""

    counting = False

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.sent = 0

    def execute_command(self, *args, **options):
        if CountingRedis.counting:
            self.sent += 1
        return super().execute_command(*args, **options)


def connect(cls=redis.Redis):
    return cls(host="127.0.0.1", port=opt.port, socket_timeout=10, socket_connect_timeout=10)


class State:
    """What baton-bench keeps in shared memory, behind one mutex here."""

    def __init__(self):
        self.mu = threading.Lock()
        self.waiting = 0
        self.holders = 0
        self.max_holders = 0
        self.last_holder = -1
        self.release_start = 0
        self.waiters_at_release = 0
        self.start_ns = 0
        self.stop_ns = 0
        self.errors = 0
        self.first_error = None

    def note(self, msg):
        with self.mu:
            self.errors += 1
            if self.first_error is None:
                self.first_error = msg


sh = State()


class Worker(threading.Thread):
    def __init__(self, wid, name, counter, prefix, barrier):
        super().__init__(daemon=True)
        self.id = wid
        self.name_ = name
        self.counter = counter
        self.prefix = prefix
        self.barrier = barrier
        self.client = connect(CountingRedis)
        self.raw = connect()
        self.ops = self.cs = self.self_reacq = 0
        self.wait, self.hand, self.rel, self.acq = [], [], [], []
        self.end_ns = 0

    def lock(self, name):
        return self.client.lock(name, timeout=LEASE_S, sleep=opt.sleep, blocking=True)

    def run(self):
        try:
            # Warm-up on a lock of its own: connections up, the release script loaded.
            warm = self.lock("%s:warm:%d" % (self.prefix, self.id))
            if warm.acquire(blocking_timeout=10):
                warm.release()
            self.raw.ping()
            lk = self.lock(self.name_)
        except Exception as e:  # the start line must be reached all the same
            sh.note("worker %d: warm-up: %s" % (self.id, e))
            lk = None
        self.barrier.wait()  # everyone ready: main resets the counters
        self.barrier.wait()  # go
        if lk is not None:
            try:
                self.loop(lk)
            except Exception as e:
                sh.note("worker %d: %s" % (self.id, e))
        self.end_ns = now_ns()

    def loop(self, lk):
        contended = opt.scenario == "s2"
        while self.ops < opt.k:
            left = (sh.stop_ns - now_ns()) / 1e9
            if left <= 0:
                sh.note("worker %d: stopped by --max-seconds after %d of %d" % (self.id, self.ops, opt.k))
                return
            with sh.mu:
                sh.waiting += 1
            t0 = now_ns()
            ok = lk.acquire(blocking_timeout=left)
            t1 = now_ns()
            with sh.mu:
                sh.waiting -= 1
            if not ok:
                sh.note("worker %d: acquire: cut by --max-seconds" % self.id)
                return
            with sh.mu:
                sh.holders += 1
                sh.max_holders = max(sh.max_holders, sh.holders)
                if contended:
                    prev, rs = sh.last_holder, sh.release_start
                    if prev >= 0 and rs > 0 and t0 < rs:  # it waited for that release
                        self.hand.append(t1 - rs)
                    if prev == self.id and sh.waiters_at_release > 0:
                        self.self_reacq += 1
                    sh.last_holder = self.id
            if contended:
                # The critical section: a non-atomic increment, on the raw connection.
                v = int(self.raw.get(self.counter) or 0)
                self.raw.set(self.counter, v + 1)
                self.cs += 2
            tr = now_ns()
            with sh.mu:
                sh.holders -= 1
                if contended:
                    sh.waiters_at_release = sh.waiting
                    sh.release_start = tr
            try:
                lk.release()
            except Exception as e:
                sh.note("worker %d: release: %s" % (self.id, e))
            t2 = now_ns()
            self.rel.append(t2 - tr)
            self.ops += 1
            self.wait.append(t1 - t0 if contended else t2 - t0)
            if not contended:
                self.acq.append(t1 - t0)
            if opt.think_ms > 0:
                time.sleep(opt.think_ms / 1000)


def pct(v, p):
    """Nearest-rank percentile of sorted nanosecond samples, in ms; None when there are none."""
    if not v:
        return None
    i = math.ceil(p / 100 * len(v))
    i = 0 if i == 0 else i - 1
    return v[min(i, len(v) - 1)] / 1e6


def server_read(ctl):
    cmds = scripts = 0
    calls = []
    for name, st in ctl.info("commandstats").items():
        name = name[len("cmdstat_"):] if name.startswith("cmdstat_") else name
        if name.startswith("info") or name.startswith("config"):
            continue
        cmds += st["calls"]
        if name in ("evalsha", "eval"):
            scripts += st["calls"]
        calls.append((name, st["calls"]))
    calls.sort(key=lambda c: -c[1])
    cpu = ctl.info("cpu")
    return {"cmds": cmds, "scripts": scripts,
            "cpu": float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"]),
            "breakdown": " ".join("%s=%d" % c for c in calls)}


def rnd(v, prec):
    return None if v is None or (isinstance(v, float) and not math.isfinite(v)) else round(v, prec)


def cpu_us():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return (ru.ru_utime + ru.ru_stime) * 1e6


def main():
    prefix = "bench:peers:%d:redis-py:%s" % (os.getpid(), opt.scenario)
    name = prefix + ":lock"
    counter = "{%s}:counter" % name
    ctl = connect()
    ctl.delete(name, counter)
    barrier = threading.Barrier(opt.workers + 1, timeout=opt.max_seconds)
    ws = [Worker(i, name, counter, prefix, barrier) for i in range(opt.workers)]
    for w in ws:
        w.start()
    barrier.wait()
    ctl.config_resetstat()
    s0 = server_read(ctl)
    c0 = cpu_us()
    CountingRedis.counting = True
    sh.start_ns = now_ns()
    sh.stop_ns = sh.start_ns + (opt.max_seconds - 1) * 10**9
    barrier.wait()
    for w in ws:
        w.join(max(0.0, (sh.stop_ns - now_ns()) / 1e9) + 5)
    if any(w.is_alive() for w in ws):
        sh.note("a worker did not finish by --max-seconds")
    CountingRedis.counting = False
    c1 = cpu_us()
    s1 = server_read(ctl)

    ops = sum(w.ops for w in ws)
    cs = sum(w.cs for w in ws)
    self_r = sum(w.self_reacq for w in ws)
    sent = sum(w.client.sent for w in ws)
    wait = sorted(x for w in ws for x in w.wait)
    hand = sorted(x for w in ws for x in w.hand)
    rel = sorted(x for w in ws for x in w.rel)
    acq = sorted(x for w in ws for x in w.acq)
    end = max([w.end_ns for w in ws if w.end_ns] or [now_ns()])
    seconds = (end - sh.start_ns) / 1e9
    contended = opt.scenario == "s2"
    counter_val = int(ctl.get(counter) or 0) if contended else None

    def per_op(x):
        return x / ops if ops else None

    r = {
        "suite": "baton", "lang": "python", "peer": "redis-py", "peer_version": redis.__version__,
        "python_version": "%d.%d.%d" % sys.version_info[:3], "scenario": opt.scenario,
        "workers": opt.workers, "permits": 1, "think_ms": opt.think_ms if contended else None,
        "sleep_s": opt.sleep, "target_ops": opt.workers * opt.k, "ops": ops,
        "seconds": rnd(seconds, 3), "ops_per_s": rnd(ops / seconds if seconds > 0 else None, 1),
        "lat_kind": "acquire-wait" if contended else "lock+unlock",
        "lat_p50_ms": rnd(pct(wait, 50), 3), "lat_p99_ms": rnd(pct(wait, 99), 3),
        "lat_p999_ms": rnd(pct(wait, 99.9), 3),
        "lat_max_ms": rnd(wait[-1] / 1e6 if wait else None, 3),
        "handoff_p50_ms": rnd(pct(hand, 50), 3) if contended else None,
        "handoff_p99_ms": rnd(pct(hand, 99), 3) if contended else None,
        "self_reacquire_pct": rnd(100 * per_op(self_r), 2) if contended and ops else None,
        "counter": counter_val, "expected": ops if contended else None,
        "lost_updates": ops - counter_val if contended else None,
        "max_holders": sh.max_holders if contended else None,
        "errors": sh.errors,
        "server_cmds_per_op": rnd(per_op(s1["cmds"] - s0["cmds"] - cs), 3),
        "client_rtts_per_op": rnd(per_op(sent), 4),
        "server_scripts_per_op": rnd(per_op(s1["scripts"] - s0["scripts"]), 3),
        "syscalls_per_rt": None,
        "server_cpu_us_per_op": rnd(per_op((s1["cpu"] - s0["cpu"]) * 1e6), 1),
        "client_cpu_us_per_op": rnd(per_op(c1 - c0), 1),
    }
    line = json.dumps(r, separators=(",", ":"))
    print(line, flush=True)
    if os.environ.get("RESULTS_JSONL"):
        with open(os.environ["RESULTS_JSONL"], "a") as f:
            f.write(line + "\n")
    words = " ".join("%s=%s" % (k, "-" if v is None else v) for k, v in r.items()
                     if k not in ("suite", "lang"))
    a50, r50 = pct(acq, 50), pct(rel, 50)
    print("%s acquire_p50_ms=%s release_p50_ms=%s client_cmds=%d cs_cmds=%d server_calls=[%s]"
          % (words, "-" if a50 is None else round(a50, 3), "-" if r50 is None else round(r50, 3),
             sent, cs, s1["breakdown"]), file=sys.stderr)
    if sh.first_error:
        print("peers.py: %d error(s), first: %s" % (sh.errors, sh.first_error), file=sys.stderr)
    sys.stdout.flush()
    os._exit(0)  # a worker cut short may still sleep in its acquire


if __name__ == "__main__":
    try:
        main()
    except Exception as e:
        print("peers.py: redis-py %s: %s: %s" % (opt.scenario, type(e).__name__, e), file=sys.stderr)
        sys.stderr.flush()
        os._exit(1)
