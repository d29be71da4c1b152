#!/usr/bin/env node
/*
 * peers.js: runs one scenario of the benchmark (shared/BENCH.md) with one of baton's Node
 * peers, on ioredis, against a Redis server, and prints one JSON result line (BENCH.md's
 * format, "lang":"js", "peer":"<name>"; also appended to $RESULTS_JSONL when that is set)
 * on stdout and a key=value summary on stderr. bench/peers.sh (bench/run --peers) runs it
 * beside baton-bench and bench/peers/peers.py.
 *
 *   node peers.js --peer redlock|semaphore|redisson --scenario s1|s2|s3 --port P
 *                 [--n N] [--k K] [--workers W] [--permits P] [--think-ms T]
 *                 [--max-seconds S]
 *
 * Peers: redlock (node-redlock 4: Redlock over one server, retryCount -1 = unlimited, its
 * default retryDelay 200 ms and retryJitter 100 ms), semaphore (redis-semaphore: Mutex for
 * s1/s2, Semaphore for s3; its default retryInterval 10 ms), redisson (node-redisson:
 * RLock.lock(), the watchdog and the unlock message on pub/sub). Every lease is 30 s, as
 * baton's watchdog lease. s3 runs with redis-semaphore only (the others have no semaphore).
 *
 * The workers are W concurrent async loops in this one Node process (one thread), each
 * with its own ioredis connection(s) for the library (node-redisson opens two per client:
 * commands and pub/sub) and its own raw connection for the critical section. What is
 * timed follows bench/baton-bench.c: a wait is the acquire call (s2, s3) or the whole
 * acquire+release pair (s1); a handoff runs from the previous holder starting its release
 * to the next acquire returning, for an acquirer that was already waiting when that release
 * started; max_holders counts workers between acquire and release; lost_updates is the
 * operations less the counter the critical sections incremented (GET then SET, s2; INCR,
 * s3). Server commands come from INFO commandstats after CONFIG RESETSTAT, less the
 * critical section's commands and INFO/CONFIG; client round trips are the commands the
 * library's connections sent (ioredis's sendCommand, SUBSCRIBE/UNSUBSCRIBE included).
 * Every wait is bounded by --max-seconds (default 60): a wait cut there counts an error.
 * Exits 0 when it printed a result (errors are in it), 1 when it could not run.
 */
'use strict';

const fs = require('fs');
const path = require('path');
const Redis = require('ioredis');

const LEASE_MS = 30000;

function usage(msg) {
    if (msg) process.stderr.write(`peers.js: ${msg}\n`);
    process.stderr.write('usage: node peers.js --peer redlock|semaphore|redisson --scenario s1|s2|s3 ' +
        '--port P [--n N] [--k K] [--workers W] [--permits P] [--think-ms T] [--max-seconds S]\n');
    process.exit(2);
}

function parseArgs(argv) {
    const o = { peer: null, scenario: null, port: 0, n: -1, k: -1, workers: -1, permits: -1,
        thinkMs: 0, maxSeconds: 60 };
    const names = { '--peer': 'peer', '--scenario': 'scenario', '--port': 'port', '--n': 'n',
        '--k': 'k', '--workers': 'workers', '--permits': 'permits', '--think-ms': 'thinkMs',
        '--max-seconds': 'maxSeconds' };
    for (let i = 0; i < argv.length; i++) {
        const key = names[argv[i]];
        if (!key || i + 1 >= argv.length) usage(`bad argument ${argv[i]}`);
        const v = argv[++i];
        if (key === 'peer' || key === 'scenario') {
            o[key] = v;
        } else {
            o[key] = Number(v);
            if (!Number.isInteger(o[key]) || o[key] < 0) usage(`${argv[i - 1]} takes a whole number`);
        }
    }
    if (!['redlock', 'semaphore', 'redisson'].includes(o.peer)) usage('--peer redlock|semaphore|redisson');
    if (!['s1', 's2', 's3'].includes(o.scenario)) usage('--scenario s1|s2|s3');
    if (!o.port) usage('--port is needed');
    if (o.scenario === 's3' && o.peer !== 'semaphore') usage(`${o.peer} has no semaphore: s3 runs with --peer semaphore`);
    const defWorkers = { s1: 1, s2: 8, s3: 16 };
    if (o.workers < 0) o.workers = defWorkers[o.scenario];
    if (o.scenario === 's1' && o.workers !== 1) usage('s1 has one worker');
    if (o.workers < 1) usage('--workers must be at least 1');
    if (o.k < 0) o.k = o.n > 0 ? Math.ceil(o.n / o.workers) : (o.scenario === 's1' ? 5000 : 200);
    if (o.permits < 0) o.permits = o.scenario === 's3' ? 4 : 1;
    if (o.maxSeconds < 2) usage('--max-seconds must be at least 2');
    return o;
}

const opt = parseArgs(process.argv.slice(2));
const base = process.hrtime.bigint();
const nowNs = () => Number(process.hrtime.bigint() - base);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function pkgVersion(name) {
    try {
        const p = path.join(__dirname, 'node_modules', name, 'package.json');
        return JSON.parse(fs.readFileSync(p, 'utf8')).version;
    } catch (e) {
        return null;
    }
}

function connect() {
    /* A server that has gone ends the run (no reconnecting for ever). */
    return new Redis({ host: '127.0.0.1', port: opt.port, retryStrategy: () => null,
        maxRetriesPerRequest: 1, connectTimeout: 10000 });
}

/* Counts the commands a library connection sends while `counting.on`. */
const counting = { on: false, cmds: 0, pubsub: 0 };
function counted(client) {
    const send = client.sendCommand.bind(client);
    client.sendCommand = (command, stream) => {
        if (counting.on) {
            const name = String(command.name).toLowerCase();
            if (name === 'subscribe' || name === 'unsubscribe') counting.pubsub++;
            else counting.cmds++;
        }
        return send(command, stream);
    };
    return client;
}

/* Each peer: open(name) -> { acquire(signal), release(), clients, close() } for one worker,
 * its own connections. acquire() resolves when held; signal aborts at the deadline where the
 * library takes one (redis-semaphore), else the caller races it against the deadline. */
const peers = {
    redlock: {
        pkg: 'redlock',
        open(name) {
            const Redlock = require('redlock');
            const client = counted(connect());
            const redlock = new Redlock([client], { retryCount: -1 });
            redlock.on('clientError', (err) => note(`redlock clientError: ${err.message}`));
            let lock = null;
            return {
                clients: [client],
                acquire: async () => { lock = await redlock.lock(name, LEASE_MS); },
                release: async () => { const l = lock; lock = null; await l.unlock(); },
                close: () => client.disconnect(),
            };
        },
    },
    semaphore: {
        pkg: 'redis-semaphore',
        open(name) {
            const { Mutex, Semaphore } = require('redis-semaphore');
            const client = counted(connect());
            const o = { lockTimeout: LEASE_MS, acquireTimeout: opt.maxSeconds * 1000 };
            const m = opt.scenario === 's3'
                ? new Semaphore(client, name, opt.permits, o)
                : new Mutex(client, name, o);
            return {
                clients: [client],
                acquire: (signal) => m.acquire(signal),
                release: () => m.release(),
                close: () => client.disconnect(),
            };
        },
    },
    redisson: {
        pkg: 'node-redisson',
        open(name) {
            const { Redisson } = require('node-redisson');
            const r = new Redisson({ redis: { options: { host: '127.0.0.1', port: opt.port,
                retryStrategy: () => null, maxRetriesPerRequest: 1, connectTimeout: 10000 } } });
            counted(r.commandExecutor.redis);
            counted(r.commandExecutor.subscribeRedis);
            const lock = r.getLock(name);
            return {
                clients: [r.commandExecutor.redis, r.commandExecutor.subscribeRedis],
                acquire: () => lock.lock(),
                release: () => lock.unlock(),
                close: () => {
                    r.commandExecutor.redis.disconnect();
                    r.commandExecutor.subscribeRedis.disconnect();
                },
            };
        },
    },
};

let firstError = null;
let errors = 0;
function note(msg) {
    errors++;
    if (!firstError) firstError = msg;
}

/* The state baton-bench keeps in shared memory; here one thread reads and writes it. */
const sh = { waiting: 0, holders: 0, maxHolders: 0, lastHolder: -1, releaseStart: 0,
    waitersAtRelease: 0, startNs: 0, stopNs: 0 };

class Deadline extends Error {}

/* Resolves with the acquisition, or rejects with Deadline at the deadline. */
function bounded(p, ms) {
    let timer;
    const cut = new Promise((resolve, reject) => {
        timer = setTimeout(() => reject(new Deadline('deadline')), Math.max(ms, 0));
    });
    return Promise.race([p, cut]).finally(() => clearTimeout(timer));
}

async function worker(w) {
    const contended = opt.scenario === 's2';
    const out = w.out;
    while (out.ops < opt.k) {
        const left = (sh.stopNs - nowNs()) / 1e6;
        if (left <= 0) {
            note(`worker ${w.id}: stopped by --max-seconds after ${out.ops} of ${opt.k}`);
            return;
        }
        sh.waiting++;
        const t0 = nowNs();
        try {
            await bounded(w.h.acquire(AbortSignal.timeout(Math.max(1, Math.floor(left)))), left);
        } catch (e) {
            sh.waiting--;
            note(`worker ${w.id}: acquire: ${e instanceof Deadline ? 'cut by --max-seconds' : e.message}`);
            return;
        }
        const t1 = nowNs();
        sh.waiting--;
        sh.holders++;
        if (sh.holders > sh.maxHolders) sh.maxHolders = sh.holders;
        if (contended) {
            const prev = sh.lastHolder, rs = sh.releaseStart;
            if (prev >= 0 && rs > 0 && t0 < rs) out.hand.push(t1 - rs); /* it waited for that release */
            if (prev === w.id && sh.waitersAtRelease > 0) out.selfReacq++;
            sh.lastHolder = w.id;
            /* The critical section: a non-atomic increment, on the raw connection. */
            const v = Number(await w.raw.get(w.counter)) || 0;
            await w.raw.set(w.counter, v + 1);
            out.cs += 2;
        } else if (opt.scenario === 's3') {
            await w.raw.incr(w.counter);
            out.cs += 1;
        }
        sh.holders--;
        if (contended) sh.waitersAtRelease = sh.waiting;
        const tr = nowNs();
        if (contended) sh.releaseStart = tr;
        try {
            await w.h.release();
        } catch (e) {
            note(`worker ${w.id}: release: ${e.message}`);
        }
        const t2 = nowNs();
        out.rel.push(t2 - tr);
        out.ops++;
        out.wait.push(opt.scenario === 's1' ? t2 - t0 : t1 - t0);
        if (opt.scenario === 's1') out.acq.push(t1 - t0);
        if (opt.thinkMs > 0) await sleep(opt.thinkMs);
    }
}

/* Nearest-rank percentile of sorted nanosecond samples, in ms; NaN when there are none. */
function pct(v, p) {
    if (!v.length) return NaN;
    let i = Math.ceil((p / 100) * v.length);
    i = i === 0 ? 0 : i - 1;
    return v[Math.min(i, v.length - 1)] / 1e6;
}
const sorted = (a) => Float64Array.from(a).sort();

async function serverRead(ctl) {
    const stats = await ctl.info('commandstats');
    let cmds = 0, scripts = 0;
    const calls = [];
    for (const line of stats.split('\r\n')) {
        const m = /^cmdstat_([^:]+):calls=(\d+)/.exec(line);
        if (!m) continue;
        const name = m[1], n = Number(m[2]);
        if (name.startsWith('info') || name.startsWith('config')) continue;
        cmds += n;
        if (name === 'evalsha' || name === 'eval') scripts += n;
        calls.push([name, n]);
    }
    calls.sort((a, b) => b[1] - a[1]);
    const cpu = await ctl.info('cpu');
    const f = (k) => Number((new RegExp(`^${k}:([0-9.]+)`, 'm').exec(cpu) || [0, 0])[1]);
    return { cmds, scripts, cpu: f('used_cpu_sys') + f('used_cpu_user'),
        breakdown: calls.map(([n, c]) => `${n}=${c}`).join(' ') };
}

function num(v, prec) {
    return Number.isFinite(v) ? Number(v.toFixed(prec)) : null;
}

async function main() {
    const peer = peers[opt.peer];
    const prefix = `bench:peers:${process.pid}:${opt.peer}:${opt.scenario}`;
    const name = `${prefix}:${opt.scenario === 's3' ? 'sem' : 'lock'}`;
    const counter = `{${name}}:counter`;
    const ctl = connect();
    /* Every key a peer makes of the name: start from nothing. */
    await ctl.del(name, counter, `mutex:${name}`, `semaphore:${name}`);

    const ws = [];
    for (let i = 0; i < opt.workers; i++) {
        ws.push({ id: i, h: peer.open(name), raw: connect(), counter,
            out: { ops: 0, cs: 0, selfReacq: 0, wait: [], hand: [], rel: [], acq: [] } });
    }
    /* Warm-up on a lock of each worker's own: connections up, scripts loaded, not counted. */
    await Promise.all(ws.map(async (w) => {
        const warm = peer.open(`${prefix}:warm:${w.id}`);
        await bounded(warm.acquire(AbortSignal.timeout(10000)), 10000);
        await warm.release();
        warm.close();
        await w.raw.ping();
        await Promise.all(w.h.clients.map((c) => c.ping()));
    }));

    await ctl.config('RESETSTAT');
    const s0 = await serverRead(ctl);
    const cpu0 = process.cpuUsage();
    counting.on = true;
    sh.startNs = nowNs();
    sh.stopNs = sh.startNs + (opt.maxSeconds - 1) * 1e9;
    const ends = await Promise.all(ws.map(async (w) => { await worker(w); return nowNs(); }));
    const end = Math.max(...ends);
    counting.on = false;
    const cpu1 = process.cpuUsage(cpu0);
    const s1 = await serverRead(ctl);

    let ops = 0, cs = 0, self = 0;
    const all = { wait: [], hand: [], rel: [], acq: [] };
    for (const w of ws) {
        ops += w.out.ops;
        cs += w.out.cs;
        self += w.out.selfReacq;
        for (const k of Object.keys(all)) all[k].push(...w.out[k]);
    }
    for (const k of Object.keys(all)) all[k] = sorted(all[k]);
    const seconds = (end - sh.startNs) / 1e9;
    const shared = opt.scenario !== 's1';
    let counterVal = NaN;
    if (shared) counterVal = Number(await ctl.get(counter)) || 0;
    if (opt.scenario === 's3') {
        /* every permit back: the semaphore's set is empty */
        const held = await ctl.zcard(`semaphore:${name}`);
        if (held !== 0) note(`s3: ${held} permits still held at the end`);
    }
    const perOp = (x) => (ops ? x / ops : NaN);
    const contended = opt.scenario === 's2';
    const r = {
        suite: 'baton', lang: 'js', peer: opt.peer, peer_version: pkgVersion(peer.pkg),
        ioredis_version: pkgVersion('ioredis'), scenario: opt.scenario, workers: opt.workers,
        permits: opt.permits, think_ms: opt.scenario === 's1' ? null : opt.thinkMs,
        target_ops: opt.workers * opt.k, ops, seconds: num(seconds, 3),
        ops_per_s: num(ops / seconds, 1),
        lat_kind: opt.scenario === 's1' ? 'lock+unlock' : 'acquire-wait',
        lat_p50_ms: num(pct(all.wait, 50), 3), lat_p99_ms: num(pct(all.wait, 99), 3),
        lat_p999_ms: num(pct(all.wait, 99.9), 3),
        lat_max_ms: num(all.wait.length ? all.wait[all.wait.length - 1] / 1e6 : NaN, 3),
        handoff_p50_ms: contended ? num(pct(all.hand, 50), 3) : null,
        handoff_p99_ms: contended ? num(pct(all.hand, 99), 3) : null,
        self_reacquire_pct: contended ? num(100 * perOp(self), 2) : null,
        counter: shared ? counterVal : null, expected: shared ? ops : null,
        lost_updates: shared ? ops - counterVal : null, max_holders: shared ? sh.maxHolders : null,
        errors,
        server_cmds_per_op: num(perOp(s1.cmds - s0.cmds - cs), 3),
        client_rtts_per_op: num(perOp(counting.cmds + counting.pubsub), 4),
        server_scripts_per_op: num(perOp(s1.scripts - s0.scripts), 3),
        syscalls_per_rt: null,
        server_cpu_us_per_op: num(perOp((s1.cpu - s0.cpu) * 1e6), 1),
        client_cpu_us_per_op: num(perOp(cpu1.user + cpu1.system), 1),
    };
    const line = JSON.stringify(r);
    process.stdout.write(line + '\n');
    if (process.env.RESULTS_JSONL) fs.appendFileSync(process.env.RESULTS_JSONL, line + '\n');
    const words = Object.entries(r).filter(([k]) => !['suite', 'lang'].includes(k))
        .map(([k, v]) => `${k}=${v === null ? '-' : v}`).join(' ');
    process.stderr.write(`${words} acquire_p50_ms=${num(pct(all.acq, 50), 3) ?? '-'} ` +
        `release_p50_ms=${num(pct(all.rel, 50), 3) ?? '-'} client_cmds=${counting.cmds} ` +
        `client_pubsub=${counting.pubsub} cs_cmds=${cs} server_calls=[${s1.breakdown}]\n`);
    if (firstError) process.stderr.write(`peers.js: ${errors} error(s), first: ${firstError}\n`);
    /* Timers of the libraries (retries, watchdogs, waits) may still be pending. */
    process.exit(0);
}

/* A hard stop, should the server stop answering. */
setTimeout(() => {
    process.stderr.write(`peers.js: no result after --max-seconds ${opt.maxSeconds} + 30 s\n`);
    process.exit(1);
}, (opt.maxSeconds + 30) * 1000);

main().catch((e) => {
    process.stderr.write(`peers.js: ${opt.peer} ${opt.scenario}: ${e && e.stack ? e.stack : e}\n`);
    process.exit(1);
});
