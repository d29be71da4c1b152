/*
 * baton-bench: runs one scenario of the benchmark (shared/BENCH.md) against a Redis server,
 * prints a human-readable summary and appends one JSON line to the file named by
 * $RESULTS_JSONL. bench/run drives it against a private server, beside the limit that
 * redis-benchmark measures on the same server.
 *
 *   baton-bench --port P --scenario ID [--n N] [--workers W] [--k K] [--permits P]
 *               [--think-ms T] [--processes] [--max-seconds S] [--lease-ms L]
 *               [--watchdog-ms W] [--duration S] [--periods N] [--groups G]
 *               [--multiplex 1|-1] (the client option: one shared connection, the default;
 *               or pooled)
 *   baton-bench --cluster P1,P2,... --scenario s1m|s2|s2f|s3 ...   (a Redis Cluster: the
 *               objects spread over the masters, server figures summed over them)
 *
 * Scenarios: s1 (one thread, one lock, N acquire+release pairs), s1m (8 threads, 8 locks,
 * one client), s2 (W workers contend for one lock; critical section GET + SET of a counter
 * on a separate connection; think_ms pause after each release), s2f (s2 with the fair lock),
 * s3 (semaphore, P permits, W workers; critical section INCR), s4 (W threads of one client
 * await one latch; one count_down opens it), s5 (one client holds N locks with the watchdog
 * for a few renewal periods), s6 (50 processes, 20 rounds, 1 ms holds on one plain lock,
 * fair lock or 1-permit semaphore: s2, s2f or s3 with --primitive).
 *
 * Workers are threads of one client, or with --processes one process (and one client)
 * each. Counting follows BENCH.md: client round trips are the library's own counters
 * (baton_client_stats(): round trips on command connections plus SUBSCRIBE/UNSUBSCRIBE),
 * the critical section runs on a raw hiredis connection and is not counted; server
 * commands are INFO commandstats after CONFIG RESETSTAT (a script's own redis.call()s
 * included, as Redis counts them), less the critical section's commands and the
 * benchmark's INFO/CONFIG; socket system calls are counted by syscount.c (linked in) on the
 * client's sockets only. Every wait is bounded, so the program stops by itself within
 * --max-seconds. Only the public headers (include/baton/) are used.
 */
#define _GNU_SOURCE
#include "syscount.h"

#include <baton/baton.h>

#include <hiredis/hiredis.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_WORKERS 4096
#define MAX_SAMPLES_PER_WORKER 200000
#define MAX_SECONDS 600 /* of the per-second timeline */

enum scenario { S1, S1M, S2, S2F, S3, S4, S5 };
static const char *const scenario_ids[] = {"s1", "s1m", "s2", "s2f", "s3", "s4", "s5"};

/* Command-line options; -1 = not given (the scenario's default applies). */
static struct {
    int port;
    enum scenario sc;
    long n, k;
    int workers, permits, think_ms, max_seconds, periods;
    bool processes;
    bool leases; /* --leases: s3 takes permit leases (baton_permits), not counts */
    bool async;  /* --async: s2, s2f, s3 from one thread's event loop (run_async) */
    bool loop;   /* --loop: --async with BATON_CALLBACKS_LOOP (no engine thread) */
    int64_t lease_ms, watchdog_ms;
    int64_t starve_ms;       /* the client's starve_ms (0: the library's default) */
    int multiplex;           /* the client's multiplex (0: the library's default) */
    double duration;         /* > 0: run until this many seconds passed instead of K each */
    char prefix[64];         /* every key of this run starts with it */
    int sync_replicas;       /* --sync-replicas N: baton_options.sync_replicas */
    int sync_aof;            /* --sync-aof: baton_options.sync_aof */
    int64_t sync_timeout_ms; /* --sync-timeout-ms: baton_options.sync_timeout_ms */
    int tls_port;            /* > 0: baton connects over TLS to this port (rediss://) ... */
    const char *tls_ca;      /* ... trusting this CA; --port stays the plain port for INFO */
    int groups;              /* --groups G: s2/s2f/s3 workers split into G objects (w % G) */
    double hold_ms;          /* --hold-ms H: the critical section also sleeps H ms */
    const char *s6;          /* s6: the primitive ("lock", "fairlock", "semaphore"), else NULL */
    int nmasters;            /* --cluster P1,P2,...: a Redis Cluster with these masters */
    int masters[16];
} opt = {.port = 0,
         .groups = 1,
         .n = -1,
         .k = -1,
         .workers = -1,
         .permits = -1,
         .think_ms = -1,
         .max_seconds = 60,
         .periods = 3,
         .lease_ms = BATON_LEASE_WATCHDOG,
         .watchdog_ms = -1};

/* The scenario as printed: its id, or "s6-<primitive>" (s6 runs as s2, s2f or s3). */
static const char *label(void)
{
    static char buf[32];
    if (!opt.s6)
        return scenario_ids[opt.sc];
    snprintf(buf, sizeof buf, "s6-%s", opt.s6);
    return buf;
}

/* ------------------------------------------------------------------------------------------
 * Shared state: in a MAP_SHARED mapping, so threads and forked workers use it alike
 * ---------------------------------------------------------------------------------------- */

typedef struct worker_out {
    uint64_t ops;        /* completed acquisitions (pairs for s1/s1m, waiters for s4) */
    uint64_t errors;     /* failed calls, including waits cut by --max-seconds */
    uint64_t self_reacq; /* acquired right after its own release while others waited */
    uint64_t cs_cmds;    /* critical-section commands sent on the raw connection */
    uint64_t cmds;       /* --processes: this worker's client commands (round trips) */
    uint64_t pubsub;     /* --processes: ... and its SUBSCRIBE/UNSUBSCRIBE */
    double cpu_us;       /* --processes: this worker's CPU time in the measured phase */
    syscount sys;        /* --processes: this worker's socket system calls in it */
    int64_t end_ns;      /* when the worker finished */
    uint64_t nwait;      /* latency samples recorded */
    uint64_t nhand;      /* handoff samples recorded */
    uint64_t nrel;       /* release samples recorded */
    char errmsg[200];    /* the first error */
} worker_out;

typedef struct shared {
    pthread_barrier_t barrier;        /* workers + main: ready, then go */
    int64_t start_ns;                 /* measured phase began (set before "go") */
    int64_t stop_ns;                  /* --max-seconds: nothing waits past this */
    int64_t until_ns;                 /* --duration: no new acquisition after this */
    _Atomic int64_t release_start_ns; /* when the last holder started its release */
    _Atomic int last_holder;          /* worker id of the last acquirer, -1: none */
    _Atomic int waiters_at_release;   /* workers inside acquire when it started */
    _Atomic int waiting;              /* workers inside acquire now */
    _Atomic int holders;              /* workers between acquire and release now */
    _Atomic int max_holders;
    _Atomic int entered;                     /* s4: waiters that called await */
    _Atomic int64_t sec_max_ns[MAX_SECONDS]; /* longest wait that ended in second i */
    _Atomic uint64_t sec_ops[MAX_SECONDS];   /* acquisitions in second i */
    worker_out w[];
} shared;

static shared *sh;
static int64_t *wait_samples; /* [worker][cap] nanoseconds */
static int64_t *hand_samples; /* handoffs; for s1/s1m, the acquire alone */
static int64_t *rel_samples;  /* the release call alone */
static size_t sample_cap;

/* The client's counters the figures use, from the public baton_client_stats(). */
typedef struct bstats {
    uint64_t commands; /* round trips on command connections (a pipelined batch once) */
    uint64_t pubsub;   /* SUBSCRIBE + UNSUBSCRIBE sent */
    int subs;          /* subscriptions held now: SUBSCRIBEs less UNSUBSCRIBEs */
    uint64_t renewals; /* hold renewals the watchdog sent */
} bstats;

typedef struct worker {
    int id;
    baton_client *c;
    redisContext *raw; /* critical section, not counted */
    worker_out *out;
    bstats st0;   /* --processes: client counters at the start line */
    syscount sc0; /* --processes: socket system calls at the start line */
    struct rusage ru0;
    pthread_t thread;
} worker;

/* ------------------------------------------------------------------------------------------
 * Small helpers
 * ---------------------------------------------------------------------------------------- */

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_ms(double ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = {(time_t)(ms / 1000), (long)(fmod(ms, 1000) * 1e6)};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "baton-bench: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

static double cpu_us(const struct rusage *a, const struct rusage *b)
{
    return (double)(b->ru_utime.tv_sec - a->ru_utime.tv_sec) * 1e6 +
           (double)(b->ru_utime.tv_usec - a->ru_utime.tv_usec) +
           (double)(b->ru_stime.tv_sec - a->ru_stime.tv_sec) * 1e6 +
           (double)(b->ru_stime.tv_usec - a->ru_stime.tv_usec);
}

static redisContext *raw_connect_port(int port)
{
    struct timeval tv = {10, 0};
    redisContext *r = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (!r || r->err)
        die("cannot reach redis on 127.0.0.1:%d%s%s", port, r ? ": " : "", r ? r->errstr : "");
    redisSetTimeout(r, tv);
    syscount_ignore_fd(r->fd); /* the bench's own connection: its calls are not baton's */
    return r;
}

static redisContext *raw_connect(void)
{
    return raw_connect_port(opt.port);
}

/* Runs a command on a raw connection; a failure ends the program (the server is gone). */
static redisReply *raw_cmd(redisContext *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(r, fmt, ap);
    va_end(ap);
    if (!rep)
        die("raw command '%s' failed: %s", fmt, r->errstr);
    if (rep->type == REDIS_REPLY_ERROR)
        die("raw command '%s': %s", fmt, rep->str);
    return rep;
}

static void raw_do(redisContext *r, const char *fmt, const char *arg)
{
    freeReplyObject(raw_cmd(r, fmt, arg));
}

static long long raw_get_int(redisContext *r, const char *key)
{
    redisReply *rep = raw_cmd(r, "GET %s", key);
    long long v = rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : 0;
    freeReplyObject(rep);
    return v;
}

static void client_counts(baton_client *c, bstats *out)
{
    baton_stats st;
    if (baton_client_stats(c, &st) != BATON_OK)
        die("baton_client_stats failed");
    out->commands = st.round_trips;
    out->pubsub = st.subscribes + st.unsubscribes;
    out->subs = (int)(st.subscribes - st.unsubscribes);
    out->renewals = st.renewals_sent;
}

static baton_client *client_open(void)
{
    char url[64 + 16 * 24];
    if (opt.nmasters > 0) {
        size_t off = (size_t)snprintf(url, sizeof url, "redis+cluster://");
        for (int i = 0; i < opt.nmasters; i++)
            off += (size_t)snprintf(url + off, sizeof url - off, "%s127.0.0.1:%d", i ? "," : "",
                                    opt.masters[i]);
    } else if (opt.tls_port)
        snprintf(url, sizeof url, "rediss://127.0.0.1:%d", opt.tls_port);
    else
        snprintf(url, sizeof url, "redis://127.0.0.1:%d", opt.port);
    baton_options o;
    baton_options_init(&o);
    o.url = url;
    o.tls_ca = opt.tls_ca;
    o.sync_replicas = opt.sync_replicas;
    o.sync_aof = opt.sync_aof;
    o.sync_timeout_ms = opt.sync_timeout_ms;
    if (opt.watchdog_ms > 0)
        o.watchdog_ms = opt.watchdog_ms;
    o.starve_ms = opt.starve_ms;
    o.multiplex = opt.multiplex;
    baton_client *c;
    int rc = baton_client_open(&o, &c);
    if (rc != BATON_OK)
        die("baton_client_open: %s: %s", baton_err_name(rc), baton_open_errmsg());
    return c;
}

static void key(char *buf, size_t len, const char *what, int id)
{
    if (id >= 0)
        snprintf(buf, len, "%s:%s:%d", opt.prefix, what, id);
    else
        snprintf(buf, len, "%s:%s", opt.prefix, what);
}

/* Redis Cluster's hash slot of a key: CRC16 (XMODEM) of the key, or of its hash tag (the
 * text between the first '{' and the next '}', when not empty), modulo 16384. */
#define SLOTS 16384

static unsigned crc16(const char *p, size_t n)
{
    unsigned crc = 0;
    for (size_t i = 0; i < n; i++) {
        crc ^= (unsigned)(unsigned char)p[i] << 8;
        for (int b = 0; b < 8; b++)
            crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    }
    return crc;
}

static int key_slot(const char *k)
{
    size_t n = strlen(k);
    const char *open = memchr(k, '{', n);
    if (open) {
        const char *close = memchr(open + 1, '}', n - (size_t)(open + 1 - k));
        if (close && close > open + 1)
            return (int)(crc16(open + 1, (size_t)(close - open - 1)) % SLOTS);
    }
    return (int)(crc16(k, n) % SLOTS);
}

/* --cluster: the index in opt.masters of each slot's master (CLUSTER SLOTS). */
static signed char slot_master[SLOTS];

static void load_slots(void)
{
    redisContext *r = redisConnect("127.0.0.1", opt.masters[0]);
    if (!r || r->err)
        die("cannot reach the cluster node 127.0.0.1:%d", opt.masters[0]);
    redisReply *rep = redisCommand(r, "CLUSTER SLOTS");
    if (!rep || rep->type != REDIS_REPLY_ARRAY)
        die("CLUSTER SLOTS failed on %d", opt.masters[0]);
    memset(slot_master, -1, sizeof slot_master);
    for (size_t k = 0; k < rep->elements; k++) {
        redisReply *e = rep->element[k];
        int port = (int)e->element[2]->element[1]->integer, m = -1;
        for (int i = 0; i < opt.nmasters; i++)
            if (opt.masters[i] == port)
                m = i;
        if (m < 0)
            die("master %d of CLUSTER SLOTS is not in --cluster", port);
        for (long long s = e->element[0]->integer; s <= e->element[1]->integer; s++)
            slot_master[s] = (signed char)m;
    }
    freeReplyObject(rep);
    redisFree(r);
}

/* The name of object `what` number id (-1: the one object): key()'s, and on a cluster with
 * a suffix that puts it on master id % masters, so that the objects spread evenly. */
static void obj_name(char *buf, size_t len, const char *what, int id)
{
    key(buf, len, what, id);
    if (opt.nmasters == 0)
        return;
    size_t base = strlen(buf);
    int want = (id < 0 ? 0 : id) % opt.nmasters;
    for (int i = 0; i < 1000000; i++) {
        snprintf(buf + base, len - base, "~%d", i);
        if (slot_master[key_slot(buf)] == want)
            return;
    }
    die("no name for master %d", want);
}

/* The counter of an object: in its slot ("{name}:counter"). */
static void counter_of(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "{%s}:counter", name);
}

/* The port of the node that serves key (the single server without --cluster). */
static int port_of(const char *k)
{
    if (opt.nmasters == 0)
        return opt.port;
    return opt.masters[slot_master[key_slot(k)]];
}

/* The object a worker uses: its own (s1m), or its group's (s2, s2f, s3). */
static void worker_object(int id, char *name, size_t len)
{
    bool shared_obj = opt.sc == S2 || opt.sc == S2F || opt.sc == S3;
    int g = opt.groups > 1 ? id % opt.groups : -1;
    obj_name(name, len, opt.sc == S3 ? "sem" : "lock", shared_obj ? g : id);
}

static void note_error(worker *w, const char *what, int rc)
{
    worker_out *o = w->out;
    if (o->errors++ == 0)
        snprintf(o->errmsg, sizeof o->errmsg, "%s: %s: %s", what, baton_err_name(rc),
                 w->c ? baton_client_errmsg(w->c) : "");
}

/* Milliseconds a wait may still take; 0 when --max-seconds is used up. */
static int64_t remaining_ms(void)
{
    int64_t left = (sh->stop_ns - now_ns()) / 1000000;
    return left > 0 ? left : 0;
}

static void record(int64_t *base, worker *w, uint64_t *n, int64_t v)
{
    if (*n < sample_cap)
        base[(size_t)w->id * sample_cap + (*n)++] = v;
}

static void update_max(_Atomic int *m, int v)
{
    int cur = atomic_load(m);
    while (v > cur && !atomic_compare_exchange_weak(m, &cur, v))
        ;
}

/* Files a wait that ended at `end` in the per-second timeline. */
static void timeline(int64_t end, int64_t wait)
{
    int64_t sec = (end - sh->start_ns) / 1000000000;
    if (sec < 0 || sec >= MAX_SECONDS)
        return;
    atomic_fetch_add(&sh->sec_ops[sec], 1);
    int64_t cur = atomic_load(&sh->sec_max_ns[sec]);
    while (wait > cur && !atomic_compare_exchange_weak(&sh->sec_max_ns[sec], &cur, wait))
        ;
}

/* Waits (at most 1 s) until the client's background UNSUBSCRIBEs went out, so that they
 * are counted with the run that caused them. */
static void settle(baton_client *c)
{
    int64_t until = now_ns() + 1000000000;
    bstats st;
    for (client_counts(c, &st); st.subs > 0 && now_ns() < until; client_counts(c, &st))
        sleep_ms(1);
    sleep_ms(5);
}

/* The start line of the measured phase, for one worker. */
static void start_line(worker *w)
{
    if (opt.processes) {
        client_counts(w->c, &w->st0);
        syscount_read(&w->sc0);
        getrusage(RUSAGE_SELF, &w->ru0);
    }
    pthread_barrier_wait(&sh->barrier); /* everyone ready: main resets the counters */
    pthread_barrier_wait(&sh->barrier); /* go */
}

static void finish_line(worker *w)
{
    w->out->end_ns = now_ns();
    if (opt.processes) {
        settle(w->c);
        bstats st;
        struct rusage ru;
        syscount sc;
        client_counts(w->c, &st);
        syscount_read(&sc);
        getrusage(RUSAGE_SELF, &ru);
        syscount_diff(&w->sc0, &sc, &w->out->sys);
        w->out->cmds = st.commands - w->st0.commands;
        w->out->pubsub = st.pubsub - w->st0.pubsub;
        w->out->cpu_us = cpu_us(&w->ru0, &ru);
    }
}

/* Whether the worker should start another round: K not reached, time left. A worker cut
 * short by --max-seconds counts an error. */
static bool more(worker *w, long k)
{
    int64_t t = now_ns();
    bool want = opt.duration > 0 ? t < sh->until_ns : (long)w->out->ops < k;
    if (want && t >= sh->stop_ns) {
        if (w->out->errors++ == 0)
            snprintf(w->out->errmsg, sizeof w->out->errmsg,
                     "stopped by --max-seconds after %llu of %ld", (unsigned long long)w->out->ops,
                     k);
        return false;
    }
    return want;
}

/* ------------------------------------------------------------------------------------------
 * s1, s1m, s2, s2f: locks
 * ---------------------------------------------------------------------------------------- */

static int lock_open(baton_client *c, const char *name, baton_lock **out)
{
    if (opt.sc == S2F) {
#ifdef BATON_BENCH_HAVE_FAIRLOCK
        return baton_fairlock_open(c, name, out);
#else
        (void)c, (void)name, (void)out;
        return BATON_ENOTSUP;
#endif
    }
    return baton_lock_open(c, name, out);
}

static void lock_worker(worker *w)
{
    bool contended = opt.sc == S2 || opt.sc == S2F;
    char name[128], counter[160];
    worker_object(w->id, name, sizeof name);
    counter_of(counter, sizeof counter, name);
    baton_lock *l = NULL, *warm = NULL;
    int rc = lock_open(w->c, name, &l);
    if (rc != BATON_OK) {
        note_error(w, "open", rc);
        start_line(w);
        finish_line(w);
        return;
    }
    /* Warm-up on a lock of its own: scripts loaded, the pool grown, nothing counted. */
    char wname[128];
    obj_name(wname, sizeof wname, "warm", w->id);
    if (lock_open(w->c, wname, &warm) == BATON_OK &&
        baton_lock_try_acquire(warm, 10000, opt.lease_ms) == BATON_OK)
        baton_lock_release(warm);
    baton_lock_close(warm);

    start_line(w);
    worker_out *o = w->out;
    while (more(w, opt.k)) {
        int64_t wait = remaining_ms();
        atomic_fetch_add(&sh->waiting, 1);
        int64_t t0 = now_ns();
        rc = baton_lock_try_acquire(l, wait, opt.lease_ms);
        int64_t t1 = now_ns();
        atomic_fetch_sub(&sh->waiting, 1);
        if (rc != BATON_OK) {
            note_error(w, "acquire", rc);
            if (rc == BATON_ETIMEDOUT || o->errors > 100)
                break;
            continue;
        }
        if (contended) {
            update_max(&sh->max_holders, atomic_fetch_add(&sh->holders, 1) + 1);
            int prev = atomic_load(&sh->last_holder);
            int64_t rs = atomic_load(&sh->release_start_ns);
            if (prev >= 0 && rs > 0 && t0 < rs) /* it waited for that release */
                record(hand_samples, w, &o->nhand, t1 - rs);
            if (prev == w->id && atomic_load(&sh->waiters_at_release) > 0)
                o->self_reacq++;
            atomic_store(&sh->last_holder, w->id);

            /* The critical section: a non-atomic increment, on the raw connection. */
            long long v = raw_get_int(w->raw, counter);
            redisReply *rep = raw_cmd(w->raw, "SET %s %lld", counter, v + 1);
            freeReplyObject(rep);
            o->cs_cmds += 2;
            sleep_ms(opt.hold_ms);

            atomic_fetch_sub(&sh->holders, 1);
            atomic_store(&sh->waiters_at_release, atomic_load(&sh->waiting));
        }
        int64_t tr = now_ns();
        if (contended)
            atomic_store(&sh->release_start_ns, tr);
        rc = baton_lock_release(l);
        int64_t t2 = now_ns();
        record(rel_samples, w, &o->nrel, t2 - tr);
        if (rc != BATON_OK)
            note_error(w, "release", rc);
        o->ops++;
        record(wait_samples, w, &o->nwait, contended ? t1 - t0 : t2 - t0);
        if (!contended) /* s1, s1m: the acquire's half of the pair */
            record(hand_samples, w, &o->nhand, t1 - t0);
        timeline(t1, t1 - t0);
        if (opt.think_ms > 0)
            sleep_ms(opt.think_ms);
    }
    finish_line(w);
    baton_lock_close(l);
}

/* ------------------------------------------------------------------------------------------
 * s3: semaphore
 * ---------------------------------------------------------------------------------------- */

/* The counting semaphore, or permit leases (--leases: baton_permits, lease --lease-ms or
 * the watchdog's), behind one acquire and one release. */
typedef struct sem_handle {
    baton_semaphore *s;
    baton_permits *p;
    char id[BATON_PERMIT_ID_SIZE]; /* the permit held (leases) */
} sem_handle;

static int sem_open(baton_client *c, const char *name, sem_handle *h)
{
    memset(h, 0, sizeof *h);
    if (opt.leases)
        return baton_permits_open(c, name, &h->p);
#ifdef BATON_BENCH_HAVE_SEMAPHORE
    return baton_semaphore_open(c, name, &h->s);
#else
    return BATON_ENOTSUP;
#endif
}

static int sem_acquire(sem_handle *h, int64_t wait_ms)
{
    if (h->p)
        return baton_permits_try_acquire(h->p, wait_ms, opt.lease_ms, h->id);
#ifdef BATON_BENCH_HAVE_SEMAPHORE
    return baton_semaphore_try_acquire(h->s, 1, wait_ms);
#else
    return BATON_ENOTSUP;
#endif
}

static int sem_release(sem_handle *h)
{
    if (h->p)
        return baton_permits_release(h->p, h->id);
#ifdef BATON_BENCH_HAVE_SEMAPHORE
    return baton_semaphore_release(h->s, 1);
#else
    return BATON_ENOTSUP;
#endif
}

static int sem_try_set(sem_handle *h, int64_t permits)
{
    bool was_set;
    if (h->p)
        return baton_permits_try_set_permits(h->p, permits, &was_set);
#ifdef BATON_BENCH_HAVE_SEMAPHORE
    return baton_semaphore_try_set_permits(h->s, permits, &was_set);
#else
    return BATON_ENOTSUP;
#endif
}

static int64_t sem_available(sem_handle *h)
{
    int64_t n = -1;
    if (h->p)
        baton_permits_available(h->p, &n, NULL);
#ifdef BATON_BENCH_HAVE_SEMAPHORE
    else
        baton_semaphore_available(h->s, &n);
#endif
    return n;
}

static void sem_close(sem_handle *h)
{
    baton_permits_close(h->p);
#ifdef BATON_BENCH_HAVE_SEMAPHORE
    baton_semaphore_close(h->s);
#endif
}

static void semaphore_worker(worker *w)
{
    char name[128], counter[160];
    worker_object(w->id, name, sizeof name);
    counter_of(counter, sizeof counter, name);
    sem_handle h;
    int rc = sem_open(w->c, name, &h);
    if (rc != BATON_OK) {
        note_error(w, "open", rc);
        start_line(w);
        finish_line(w);
        return;
    }
    /* Warm-up: one acquire+release (scripts loaded); permits end as they were. */
    if (sem_acquire(&h, 10000) == BATON_OK)
        sem_release(&h);

    start_line(w);
    worker_out *o = w->out;
    while (more(w, opt.k)) {
        int64_t wait = remaining_ms();
        atomic_fetch_add(&sh->waiting, 1);
        int64_t t0 = now_ns();
        rc = sem_acquire(&h, wait);
        int64_t t1 = now_ns();
        atomic_fetch_sub(&sh->waiting, 1);
        if (rc != BATON_OK) {
            note_error(w, "acquire", rc);
            if (rc == BATON_ETIMEDOUT || o->errors > 100)
                break;
            continue;
        }
        update_max(&sh->max_holders, atomic_fetch_add(&sh->holders, 1) + 1);
        freeReplyObject(raw_cmd(w->raw, "INCR %s", counter));
        o->cs_cmds++;
        sleep_ms(opt.hold_ms);
        atomic_fetch_sub(&sh->holders, 1);
        rc = sem_release(&h);
        if (rc != BATON_OK)
            note_error(w, "release", rc);
        o->ops++;
        record(wait_samples, w, &o->nwait, t1 - t0);
        timeline(t1, t1 - t0);
        if (opt.think_ms > 0)
            sleep_ms(opt.think_ms);
    }
    finish_line(w);
    sem_close(&h);
}

/* ------------------------------------------------------------------------------------------
 * Running workers as threads of one client, or as processes with a client each
 * ---------------------------------------------------------------------------------------- */

static void run_worker(worker *w)
{
    char name[128];
    worker_object(w->id, name, sizeof name);
    w->raw = raw_connect_port(port_of(name)); /* the counter shares the object's slot */
    if (opt.sc == S3)
        semaphore_worker(w);
    else
        lock_worker(w);
    redisFree(w->raw);
}

static void *thread_main(void *arg)
{
    run_worker(arg);
    return NULL;
}

/* Server-side counters. */
typedef struct server_snap {
    double cpu_s;        /* used_cpu_sys + used_cpu_user */
    uint64_t cmds;       /* every command but INFO and CONFIG */
    uint64_t scripts;    /* EVALSHA + EVAL calls */
    char breakdown[600]; /* "evalsha 1600, hincrby 1600, ..." */
} server_snap;

static double info_field(const char *info, const char *field)
{
    const char *p = strstr(info, field);
    return p ? atof(p + strlen(field)) : 0;
}

static void server_reset(redisContext *r)
{
    freeReplyObject(raw_cmd(r, "CONFIG RESETSTAT"));
}

static void server_read(redisContext *r, server_snap *s)
{
    memset(s, 0, sizeof *s);
    redisReply *rep = raw_cmd(r, "INFO commandstats");
    /* lines: cmdstat_<name>:calls=<n>,usec=... */
    char *save = NULL, *text = rep->str;
    struct cmdstat {
        char name[48];
        uint64_t calls;
    } top[64];
    int ntop = 0;
    for (char *line = strtok_r(text, "\r\n", &save); line; line = strtok_r(NULL, "\r\n", &save)) {
        if (strncmp(line, "cmdstat_", 8) != 0)
            continue;
        char *name = line + 8, *colon = strchr(name, ':');
        char *calls = strstr(line, "calls=");
        if (!colon || !calls)
            continue;
        *colon = '\0';
        uint64_t n = strtoull(calls + 6, NULL, 10);
        if (strncmp(name, "info", 4) == 0 || strncmp(name, "config", 6) == 0)
            continue;
        s->cmds += n;
        if (strcmp(name, "evalsha") == 0 || strcmp(name, "eval") == 0)
            s->scripts += n;
        if (ntop < 64) {
            snprintf(top[ntop].name, sizeof top[ntop].name, "%s", name);
            top[ntop++].calls = n;
        }
    }
    freeReplyObject(rep);
    /* breakdown, biggest first */
    for (int i = 0; i < ntop; i++)
        for (int j = i + 1; j < ntop; j++)
            if (top[j].calls > top[i].calls) {
                struct cmdstat t = top[i];
                top[i] = top[j];
                top[j] = t;
            }
    size_t off = 0;
    for (int i = 0; i < ntop && off < sizeof s->breakdown - 64; i++)
        off += (size_t)snprintf(s->breakdown + off, sizeof s->breakdown - off, "%s%s=%llu",
                                i ? " " : "", top[i].name, (unsigned long long)top[i].calls);

    rep = raw_cmd(r, "INFO cpu");
    s->cpu_s = info_field(rep->str, "used_cpu_sys:") + info_field(rep->str, "used_cpu_user:");
    freeReplyObject(rep);
}

/* The counters of several masters as one server's (the breakdown is the first master's). */
static void server_sum(server_snap *sum, const server_snap *m, int n)
{
    *sum = m[0];
    for (int i = 1; i < n; i++) {
        sum->cpu_s += m[i].cpu_s;
        sum->cmds += m[i].cmds;
        sum->scripts += m[i].scripts;
    }
}

/* ------------------------------------------------------------------------------------------
 * Results: the JSON line and the human-readable one
 * ---------------------------------------------------------------------------------------- */

typedef struct result {
    int workers;
    double permits, think_ms, target_ops; /* NAN: null */
    uint64_t ops;
    double seconds, ops_per_s;
    const char *lat_kind;
    double lat_p50, lat_p99, lat_p999, lat_max, hand_p50, hand_p99, self_pct;
    double counter, expected, lost, max_holders;
    uint64_t errors;
    double server_cmds, client_rtts, server_cpu, client_cpu; /* per op */
    double server_scripts;                                   /* EVALSHA + EVAL per op */
    double sys_per_rt; /* socket system calls per client round trip (syscount.h) */
} result;

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted nanosecond samples, in ms; NAN when there are none. */
static double pct_ms(const int64_t *v, size_t n, double p)
{
    if (n == 0)
        return NAN;
    size_t i = (size_t)ceil(p / 100.0 * (double)n);
    i = i == 0 ? 0 : i - 1;
    if (i >= n)
        i = n - 1;
    return (double)v[i] / 1e6;
}

static uint64_t count_of(const int64_t *base, int i)
{
    return base == hand_samples  ? sh->w[i].nhand
           : base == rel_samples ? sh->w[i].nrel
                                 : sh->w[i].nwait;
}

/* Gathers every worker's samples of one kind, sorted. */
static int64_t *gather(const int64_t *base, int nworkers, size_t *n)
{
    size_t total = 0;
    for (int i = 0; i < nworkers; i++)
        total += count_of(base, i);
    int64_t *all = malloc((total ? total : 1) * sizeof *all);
    if (!all)
        die("out of memory");
    size_t off = 0;
    for (int i = 0; i < nworkers; i++) {
        size_t m = count_of(base, i);
        memcpy(all + off, base + (size_t)i * sample_cap, m * sizeof *all);
        off += m;
    }
    qsort(all, total, sizeof *all, cmp_i64);
    *n = total;
    return all;
}

static void jnum(FILE *f, const char *name, double v, int prec, bool last)
{
    if (isnan(v))
        fprintf(f, "\"%s\":null", name);
    else
        fprintf(f, "\"%s\":%.*f", name, prec, v);
    if (!last)
        fputc(',', f);
}

static void write_json(const result *r)
{
    const char *path = getenv("RESULTS_JSONL");
    if (!path || !*path)
        return;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        die("out of memory");
    fprintf(f, "{\"suite\":\"baton\",\"lang\":\"c\",\"peer\":\"baton\",\"scenario\":\"%s\",",
            opt.s6 ? "s6" : scenario_ids[opt.sc]);
    if (opt.s6)
        fprintf(f, "\"primitive\":\"%s\",\"hold_ms\":%g,", opt.s6, opt.hold_ms);
    fprintf(f, "\"workers\":%d,", r->workers);
    if (opt.sc == S3)
        fprintf(f, "\"permit_leases\":%s,", opt.leases ? "true" : "false");
    jnum(f, "permits", r->permits, 0, false);
    jnum(f, "think_ms", r->think_ms, 0, false);
    jnum(f, "target_ops", r->target_ops, 0, false);
    fprintf(f, "\"ops\":%llu,", (unsigned long long)r->ops);
    jnum(f, "seconds", r->seconds, 3, false);
    jnum(f, "ops_per_s", r->ops_per_s, 1, false);
    if (r->lat_kind)
        fprintf(f, "\"lat_kind\":\"%s\",", r->lat_kind);
    else
        fprintf(f, "\"lat_kind\":null,");
    jnum(f, "lat_p50_ms", r->lat_p50, 3, false);
    jnum(f, "lat_p99_ms", r->lat_p99, 3, false);
    jnum(f, "lat_p999_ms", r->lat_p999, 3, false);
    jnum(f, "lat_max_ms", r->lat_max, 3, false);
    jnum(f, "handoff_p50_ms", r->hand_p50, 3, false);
    jnum(f, "handoff_p99_ms", r->hand_p99, 3, false);
    jnum(f, "self_reacquire_pct", r->self_pct, 2, false);
    jnum(f, "counter", r->counter, 0, false);
    jnum(f, "expected", r->expected, 0, false);
    jnum(f, "lost_updates", r->lost, 0, false);
    jnum(f, "max_holders", r->max_holders, 0, false);
    fprintf(f, "\"errors\":%llu,", (unsigned long long)r->errors);
    jnum(f, "server_cmds_per_op", r->server_cmds, 3, false);
    jnum(f, "client_rtts_per_op", r->client_rtts, 4, false);
    jnum(f, "server_scripts_per_op", r->server_scripts, 3, false);
    jnum(f, "syscalls_per_rt", r->sys_per_rt, 3, false);
    jnum(f, "server_cpu_us_per_op", r->server_cpu, 1, false);
    jnum(f, "client_cpu_us_per_op", r->client_cpu, 1, true);
    fputs("}\n", f);
    fclose(f);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0)
        die("cannot open %s: %s", path, strerror(errno));
    if (write(fd, buf, len) != (ssize_t)len)
        die("cannot write %s: %s", path, strerror(errno));
    close(fd);
    free(buf);
}

static void fmt(char *buf, size_t len, double v, int prec)
{
    if (isnan(v))
        snprintf(buf, len, "-");
    else
        snprintf(buf, len, "%.*f", prec, v);
}

/* The human-readable line: key=value pairs, so that bench/run can also read it. */
static void print_human(const result *r, const char *extra)
{
    char b[20][32];
    const double v[20] = {r->ops_per_s,      r->lat_p50,     r->lat_p99,     r->lat_max,
                          r->hand_p50,       r->hand_p99,    r->self_pct,    r->lost,
                          r->max_holders,    r->client_rtts, r->server_cmds, r->server_cpu,
                          r->client_cpu,     r->target_ops,  r->think_ms,    r->lat_p999,
                          r->server_scripts, r->sys_per_rt};
    const int prec[20] = {1, 3, 3, 3, 3, 3, 2, 0, 0, 4, 3, 1, 1, 0, 0, 3, 3, 2};
    for (int i = 0; i < 18; i++)
        fmt(b[i], 32, v[i], prec[i]);
    printf("%s workers=%d%s think_ms=%s ops=%llu/%s seconds=%.3f ops_per_s=%s lat(%s) "
           "p50=%s p99=%s p999=%s max=%s ms handoff_p50=%s handoff_p99=%s "
           "self_reacquire_pct=%s lost_updates=%s max_holders=%s errors=%llu "
           "client_rtts_per_op=%s server_cmds_per_op=%s server_scripts_per_op=%s "
           "syscalls_per_rt=%s server_cpu_us_per_op=%s client_cpu_us_per_op=%s%s%s\n",
           label(), r->workers,
           opt.loop        ? " async loop"
           : opt.async     ? " async"
           : opt.processes ? (opt.leases ? " processes leases" : " processes")
                           : (opt.leases ? " threads leases" : " threads"),
           b[14], (unsigned long long)r->ops, b[13], r->seconds, b[0],
           r->lat_kind ? r->lat_kind : "-", b[1], b[2], b[15], b[3], b[4], b[5], b[6], b[7], b[8],
           (unsigned long long)r->errors, b[9], b[10], b[16], b[17], b[11], b[12], extra ? " " : "",
           extra ? extra : "");
}

static void result_init(result *r)
{
    *r = (result){.permits = NAN,
                  .think_ms = NAN,
                  .target_ops = NAN,
                  .seconds = NAN,
                  .ops_per_s = NAN,
                  .lat_p50 = NAN,
                  .lat_p99 = NAN,
                  .lat_p999 = NAN,
                  .lat_max = NAN,
                  .hand_p50 = NAN,
                  .hand_p99 = NAN,
                  .self_pct = NAN,
                  .counter = NAN,
                  .expected = NAN,
                  .lost = NAN,
                  .max_holders = NAN,
                  .server_cmds = NAN,
                  .client_rtts = NAN,
                  .server_cpu = NAN,
                  .client_cpu = NAN,
                  .server_scripts = NAN,
                  .sys_per_rt = NAN};
}

static void print_errors(int nworkers)
{
    int shown = 0;
    for (int i = 0; i < nworkers && shown < 5; i++)
        if (sh->w[i].errors) {
            fprintf(stderr, "  worker %d: %llu error(s), first: %s\n", i,
                    (unsigned long long)sh->w[i].errors, sh->w[i].errmsg);
            shown++;
        }
}

/* ------------------------------------------------------------------------------------------
 * s1, s1m, s2, s2f, s3: workers, then the figures
 * ---------------------------------------------------------------------------------------- */

static void setup_shared(int nworkers, size_t cap)
{
    size_t sz = sizeof(shared) + (size_t)nworkers * sizeof(worker_out);
    sh = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    sample_cap = cap ? cap : 1;
    size_t ssz = (size_t)nworkers * sample_cap * sizeof(int64_t);
    wait_samples =
        mmap(NULL, ssz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    hand_samples =
        mmap(NULL, ssz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    rel_samples =
        mmap(NULL, ssz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (sh == MAP_FAILED || wait_samples == MAP_FAILED || hand_samples == MAP_FAILED ||
        rel_samples == MAP_FAILED)
        die("mmap: %s", strerror(errno));
    memset(sh, 0, sz);
    pthread_barrierattr_t ba;
    pthread_barrierattr_init(&ba);
    pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
    if (pthread_barrier_init(&sh->barrier, &ba, (unsigned)nworkers + 1) != 0)
        die("pthread_barrier_init failed");
    atomic_store(&sh->last_holder, -1);
}

/* One run of s1, s1m, s2, s2f, s3 (and s6): the servers, the objects, the workers, and the
 * counters read around the measured phase. */
typedef struct run {
    int nw, nctl, nobj;
    redisContext *ctls[16]; /* the server, or every master of the cluster (summed) */
    char names[64][128], counters[64][160];
    baton_client *setup; /* s3: the client that set the permits and checks them at the end */
    baton_client *c;     /* threads: the client they share */
    worker *ws;
    pid_t *pids;
    bstats st0, st1;
    syscount sc0, sc1;
    struct rusage ru0, ru1;
    server_snap s0, s1, m0[16], m1[16];
} run;

/* What the workers counted, summed. */
typedef struct totals {
    uint64_t cs, cmds, pubsub, self;
    double ccpu;
    int64_t end;
    syscount sys;
} totals;

static bool shared_object(void)
{
    return opt.sc == S2 || opt.sc == S2F || opt.sc == S3;
}

/* The shared objects (s2, s2f, s3: one per group) start from nothing; s3 gets its permits. */
static void run_objects(run *R)
{
    R->nobj = shared_object() ? opt.groups : 0;
    for (int g = 0; g < R->nobj; g++) {
        worker_object(g, R->names[g], sizeof R->names[g]);
        counter_of(R->counters[g], sizeof R->counters[g], R->names[g]);
        redisContext *r = raw_connect_port(port_of(R->names[g]));
        raw_do(r, "DEL %s", R->counters[g]);
        raw_do(r, "DEL %s", R->names[g]);
        redisFree(r);
    }
    if (opt.sc != S3)
        return;
    R->setup = client_open();
    for (int g = 0; g < R->nobj; g++) {
        sem_handle h;
        int rc = sem_open(R->setup, R->names[g], &h);
        if (rc == BATON_OK)
            rc = sem_try_set(&h, opt.permits);
        if (rc != BATON_OK)
            die("semaphore setup: %s: %s", baton_err_name(rc), baton_client_errmsg(R->setup));
        sem_close(&h);
    }
}

static void run_prepare(run *R, int64_t prog_start)
{
    R->nw = opt.workers;
    R->nctl = opt.nmasters ? opt.nmasters : 1;
    for (int i = 0; i < R->nctl; i++)
        R->ctls[i] = raw_connect_port(opt.nmasters ? opt.masters[i] : opt.port);
    run_objects(R);
#ifndef BATON_BENCH_HAVE_FAIRLOCK
    if (opt.sc == S2F)
        die("s2f: this libbaton has no fair lock (src/fairlock is not in BATON_SOURCES)");
#endif
    size_t cap = opt.duration > 0 ? MAX_SAMPLES_PER_WORKER : (size_t)opt.k;
    if (cap > MAX_SAMPLES_PER_WORKER)
        cap = MAX_SAMPLES_PER_WORKER;
    setup_shared(R->nw, cap);
    /* Nothing waits past this: leave a second for the wind-down. */
    sh->stop_ns = prog_start + ((int64_t)opt.max_seconds - 1) * 1000000000;
    R->ws = calloc((size_t)R->nw, sizeof *R->ws);
    R->pids = calloc((size_t)R->nw, sizeof *R->pids);
    if (!R->ws || !R->pids)
        die("out of memory");
}

/* The workers: threads of one client, or processes with a client each. */
static void run_spawn(run *R)
{
    R->c = opt.processes ? NULL : client_open();
    for (int i = 0; i < R->nw; i++) {
        worker *w = &R->ws[i];
        w->id = i;
        w->out = &sh->w[i];
        if (!opt.processes) {
            w->c = R->c;
            if (pthread_create(&w->thread, NULL, thread_main, w) != 0)
                die("pthread_create failed");
            continue;
        }
        fflush(NULL);
        pid_t p = fork();
        if (p < 0)
            die("fork: %s", strerror(errno));
        if (p == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            for (int k = 0; k < R->nctl; k++)
                redisFree(R->ctls[k]);
            w->c = client_open();
            run_worker(w);
            baton_client_close(w->c);
            _exit(0);
        }
        R->pids[i] = p;
    }
}

static void run_join(run *R)
{
    for (int i = 0; i < R->nw; i++) {
        if (!opt.processes) {
            pthread_join(R->ws[i].thread, NULL);
            continue;
        }
        int st;
        while (waitpid(R->pids[i], &st, 0) < 0 && errno == EINTR)
            ;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            sh->w[i].errors++;
            snprintf(sh->w[i].errmsg, sizeof sh->w[i].errmsg, "worker process failed");
        }
    }
}

/* The measured phase: everyone ready, counters reset and read, go; then the workers'
 * end and the counters read again. */
static void run_measure(run *R)
{
    pthread_barrier_wait(&sh->barrier);
    if (R->c)
        client_counts(R->c, &R->st0);
    syscount_read(&R->sc0);
    getrusage(RUSAGE_SELF, &R->ru0);
    for (int i = 0; i < R->nctl; i++)
        server_reset(R->ctls[i]);
    for (int i = 0; i < R->nctl; i++)
        server_read(R->ctls[i], &R->m0[i]);
    server_sum(&R->s0, R->m0, R->nctl);
    sh->start_ns = now_ns();
    if (opt.duration > 0)
        sh->until_ns = sh->start_ns + (int64_t)(opt.duration * 1e9);
    pthread_barrier_wait(&sh->barrier);

    run_join(R);
    if (R->c) {
        settle(R->c);
        client_counts(R->c, &R->st1);
    }
    syscount_read(&R->sc1);
    getrusage(RUSAGE_SELF, &R->ru1);
    for (int i = 0; i < R->nctl; i++)
        server_read(R->ctls[i], &R->m1[i]);
    server_sum(&R->s1, R->m1, R->nctl);
}

/* The workers' counts summed into t, and the operations and errors into r. With threads,
 * the client's and the process's counters replace the per-worker ones. */
static void run_totals(const run *R, result *r, totals *t)
{
    memset(t, 0, sizeof *t);
    t->end = sh->start_ns;
    for (int i = 0; i < R->nw; i++) {
        const worker_out *o = &sh->w[i];
        r->ops += o->ops;
        r->errors += o->errors;
        t->cs += o->cs_cmds;
        t->cmds += o->cmds;
        t->pubsub += o->pubsub;
        t->ccpu += o->cpu_us;
        t->self += o->self_reacq;
        for (int k = 0; k < SC_KINDS; k++)
            t->sys.n[k] += o->sys.n[k];
        t->sys.total += o->sys.total;
        if (o->end_ns > t->end)
            t->end = o->end_ns;
    }
    if (R->c) {
        t->cmds = R->st1.commands - R->st0.commands;
        t->pubsub = R->st1.pubsub - R->st0.pubsub;
        t->ccpu = cpu_us(&R->ru0, &R->ru1);
        syscount_diff(&R->sc0, &R->sc1, &t->sys);
    }
}

/* Waits (and handoffs, self-reacquisitions) of a run; the acquire's and the release's own
 * p50 where they apply (NAN otherwise). */
static void run_latency(const run *R, result *r, const totals *t, double *acq_p50, double *rel_p50)
{
    bool contended = opt.sc == S2 || opt.sc == S2F;
    size_t n;
    int64_t *all = gather(wait_samples, R->nw, &n);
    r->lat_p50 = pct_ms(all, n, 50);
    r->lat_p99 = pct_ms(all, n, 99);
    r->lat_p999 = pct_ms(all, n, 99.9);
    r->lat_max = n ? (double)all[n - 1] / 1e6 : NAN;
    free(all);
    if (contended) {
        all = gather(hand_samples, R->nw, &n);
        r->hand_p50 = pct_ms(all, n, 50);
        r->hand_p99 = pct_ms(all, n, 99);
        free(all);
        r->self_pct = 100.0 * (double)t->self / (r->ops ? (double)r->ops : NAN);
    }
    *acq_p50 = *rel_p50 = NAN;
    if (!contended && opt.sc != S3) {
        all = gather(hand_samples, R->nw, &n);
        *acq_p50 = pct_ms(all, n, 50);
        free(all);
    }
    if (opt.sc != S3) {
        all = gather(rel_samples, R->nw, &n);
        *rel_p50 = pct_ms(all, n, 50);
        free(all);
    }
}

/* The shared counters (lost updates) and, for s3, every permit back at the end. */
static void run_check(const run *R, result *r)
{
    if (!shared_object())
        return;
    r->counter = 0;
    for (int g = 0; g < R->nobj; g++) {
        redisContext *cr = raw_connect_port(port_of(R->names[g]));
        r->counter += (double)raw_get_int(cr, R->counters[g]);
        redisFree(cr);
    }
    r->expected = (double)r->ops;
    r->lost = r->expected - r->counter;
    r->max_holders = atomic_load(&sh->max_holders);
    for (int g = 0; opt.sc == S3 && g < R->nobj; g++) {
        sem_handle h;
        int64_t avail = -1;
        if (sem_open(R->setup, R->names[g], &h) == BATON_OK) {
            avail = sem_available(&h);
            sem_close(&h);
        }
        if (avail != opt.permits) {
            fprintf(stderr, "s3: %lld permits available at the end, expected %d\n",
                    (long long)avail, opt.permits);
            r->errors++;
        }
    }
}

/* The per-second timeline: the count of seconds whose longest wait reached 50 ms, and in
 * a --duration run the whole of it as "ops:max_ms,..." into tl. */
static int run_timeline(double seconds, char *tl, size_t len)
{
    int nsec = (int)ceil(seconds);
    if (nsec > MAX_SECONDS)
        nsec = MAX_SECONDS;
    if (opt.duration > 0 && nsec > (int)opt.duration) /* the last, partial second */
        nsec = (int)opt.duration;
    while (nsec > 0 && atomic_load(&sh->sec_ops[nsec - 1]) == 0)
        nsec--;
    int slow = 0;
    size_t off = 0;
    tl[0] = '\0';
    for (int i = 0; i < nsec; i++) {
        double m = (double)atomic_load(&sh->sec_max_ns[i]) / 1e6;
        slow += m >= 50;
        if (opt.duration > 0 && off < len)
            off += (size_t)snprintf(tl + off, len - off, "%s%llu:%.0f", i ? "," : "",
                                    (unsigned long long)atomic_load(&sh->sec_ops[i]), m);
    }
    return slow;
}

/* --cluster: the share of the scripts each master ran and its CPU, into buf. */
static size_t run_masters(const run *R, double ops, char *buf, size_t len)
{
    double all_scripts = (double)(R->s1.scripts - R->s0.scripts), dev = 0;
    size_t off = 0;
    for (int i = 0; i < R->nctl && off < len; i++) {
        double share = 100.0 * (double)(R->m1[i].scripts - R->m0[i].scripts) / all_scripts;
        double even = 100.0 / R->nctl;
        if (fabs(share - even) / even * 100 > dev)
            dev = fabs(share - even) / even * 100;
        off += (size_t)snprintf(buf + off, len - off,
                                " master%d_share_pct=%.1f master%d_cpu_us_per_op=%.1f", i + 1,
                                share, i + 1, (R->m1[i].cpu_s - R->m0[i].cpu_s) * 1e6 / ops);
    }
    if (off < len)
        off += (size_t)snprintf(buf + off, len - off, " share_max_dev_pct=%.1f", dev);
    return off;
}

/* The figures of a run: the result, and the extra words of the human-readable line. */
static void run_figures(const run *R, result *r, char *extra, size_t len)
{
    result_init(r);
    r->workers = R->nw;
    bool contended = opt.sc == S2 || opt.sc == S2F;
    r->permits = opt.sc == S3 ? opt.permits * opt.groups : 1;
    if (contended || opt.sc == S3)
        r->think_ms = opt.think_ms;
    if (opt.duration <= 0)
        r->target_ops = (double)R->nw * (double)opt.k;
    totals t;
    run_totals(R, r, &t);
    r->seconds = (double)(t.end - sh->start_ns) / 1e9;
    double ops = r->ops ? (double)r->ops : NAN;
    r->ops_per_s = (double)r->ops / r->seconds;
    r->lat_kind = (opt.sc == S1 || opt.sc == S1M) ? "lock+unlock" : "acquire-wait";
    double acq_p50, rel_p50;
    run_latency(R, r, &t, &acq_p50, &rel_p50);
    run_check(R, r);
    uint64_t scmds = R->s1.cmds - R->s0.cmds;
    r->server_cmds = ((double)scmds - (double)t.cs) / ops;
    r->client_rtts = (double)(t.cmds + t.pubsub) / ops;
    r->server_scripts = (double)(R->s1.scripts - R->s0.scripts) / ops;
    r->server_cpu = (R->s1.cpu_s - R->s0.cpu_s) * 1e6 / ops;
    r->client_cpu = t.ccpu / ops;
    r->sys_per_rt = (double)t.sys.total / (double)(t.cmds + t.pubsub);

    char tl[MAX_SECONDS * 16], sys[200];
    int slow = run_timeline(r->seconds, tl, sizeof tl);
    int eo = snprintf(extra, len, "seconds_with_wait_over_50ms=%d", slow);
    if (!isnan(acq_p50))
        eo += snprintf(extra + eo, len - (size_t)eo, " acquire_p50_ms=%.3f", acq_p50);
    if (!isnan(rel_p50))
        eo += snprintf(extra + eo, len - (size_t)eo, " release_p50_ms=%.3f", rel_p50);
    if (opt.duration > 0)
        eo += snprintf(extra + eo, len - (size_t)eo, " per_second_ops:max_wait_ms=[%s]", tl);
    if (opt.nmasters > 0)
        eo += (int)run_masters(R, ops, extra + eo, len - (size_t)eo);
    syscount_format(&t.sys, sys, sizeof sys);
    snprintf(extra + eo, len - (size_t)eo,
             " client_cmds=%llu client_pubsub=%llu cs_cmds=%llu syscalls_per_op=%.2f "
             "syscalls=[%s] server_calls=[%s]",
             (unsigned long long)t.cmds, (unsigned long long)t.pubsub, (unsigned long long)t.cs,
             (double)t.sys.total / ops, sys, R->s1.breakdown);
}

static void run_workers(void)
{
    static run R; /* zeroed; large */
    run_prepare(&R, now_ns());
    run_spawn(&R);
    run_measure(&R);
    result r;
    char extra[1200 + MAX_SECONDS * 16];
    run_figures(&R, &r, extra, sizeof extra);
    print_human(&r, extra);
    print_errors(R.nw);
    write_json(&r);
    if (R.c)
        baton_client_close(R.c);
    if (R.setup)
        baton_client_close(R.setup);
    for (int i = 0; i < R.nctl; i++)
        redisFree(R.ctls[i]);
    free(R.ws);
    free(R.pids);
}

/* ------------------------------------------------------------------------------------------
 * s4: latch fan-out
 * ---------------------------------------------------------------------------------------- */

typedef struct waiter {
    int id;
    baton_latch *latch;
    baton_client *c;
    int64_t returned_ns;
    int rc;
    pthread_t thread;
} waiter;

static void *waiter_main(void *arg)
{
    waiter *w = arg;
    atomic_fetch_add(&sh->entered, 1);
    w->rc = baton_latch_await(w->latch, remaining_ms() ? remaining_ms() : 1);
    w->returned_ns = now_ns();
    return NULL;
}

/* nw threads of client c, each awaiting the latch. */
static waiter *latch_waiters(baton_client *c, baton_latch *latch, int nw)
{
    waiter *ws = calloc((size_t)nw, sizeof *ws);
    if (!ws)
        die("out of memory");
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    for (int i = 0; i < nw; i++) {
        ws[i].id = i;
        ws[i].latch = latch;
        ws[i].c = c;
        if (pthread_create(&ws[i].thread, &attr, waiter_main, &ws[i]) != 0)
            die("pthread_create failed (waiter %d)", i);
    }
    pthread_attr_destroy(&attr);
    return ws;
}

/* Waits until every waiter is blocked: all entered, and the client's commands have stopped
 * moving for 100 ms (each waiter reads the count before and after it joins the
 * subscription, then sleeps). */
static void latch_blocked(baton_client *c, int nw)
{
    uint64_t last = 0;
    int64_t still_since = now_ns();
    for (;;) {
        bstats st;
        client_counts(c, &st);
        int64_t t = now_ns();
        if (st.commands != last) {
            last = st.commands;
            still_since = t;
        }
        if (atomic_load(&sh->entered) == nw && t - still_since > 100000000)
            break;
        if (t > sh->stop_ns - 2000000000LL)
            break;
        sleep_ms(2);
    }
}

/* The waiters' times from the count_down at t0 to their return, into r. */
static void latch_waits(const waiter *ws, int nw, int64_t t0, result *r)
{
    int64_t *lat = malloc((size_t)nw * sizeof *lat);
    if (!lat)
        die("out of memory");
    size_t n = 0;
    int64_t lastret = t0;
    for (int i = 0; i < nw; i++) {
        if (ws[i].rc != BATON_OK || ws[i].returned_ns < t0) {
            if (r->errors++ == 0)
                fprintf(stderr, "s4: waiter %d: %s%s\n", i, baton_err_name(ws[i].rc),
                        ws[i].returned_ns < t0 ? " (returned before the count_down)" : "");
            continue;
        }
        r->ops++;
        lat[n++] = ws[i].returned_ns - t0;
        if (ws[i].returned_ns > lastret)
            lastret = ws[i].returned_ns;
    }
    qsort(lat, n, sizeof *lat, cmp_i64);
    r->seconds = (double)(lastret - t0) / 1e9;
    r->lat_kind = "acquire-wait";
    r->lat_p50 = pct_ms(lat, n, 50);
    r->lat_p99 = pct_ms(lat, n, 99);
    r->lat_p999 = pct_ms(lat, n, 99.9);
    r->lat_max = n ? (double)lat[n - 1] / 1e6 : NAN;
    free(lat);
}

static void run_latch(void)
{
    int nw = opt.workers;
    int64_t prog_start = now_ns();
    redisContext *ctl = raw_connect();
    char name[128];
    key(name, sizeof name, "latch", -1);
    raw_do(ctl, "DEL %s", name);
    setup_shared(1, 1);
    sh->stop_ns = prog_start + ((int64_t)opt.max_seconds - 1) * 1000000000;

    baton_client *c = client_open();
    baton_latch *latch;
    bool was_set;
    int rc = baton_latch_open(c, name, &latch);
    if (rc == BATON_OK)
        rc = baton_latch_try_set_count(latch, 1, &was_set);
    if (rc != BATON_OK)
        die("latch setup: %s: %s", baton_err_name(rc), baton_client_errmsg(c));

    bstats st0, st1, st2;
    struct rusage ru0, ru1;
    client_counts(c, &st0);
    waiter *ws = latch_waiters(c, latch, nw);
    latch_blocked(c, nw);
    client_counts(c, &st1);
    int subs = st1.subs;
    server_snap s0, s1;
    server_reset(ctl);
    server_read(ctl, &s0);
    getrusage(RUSAGE_SELF, &ru0);

    int64_t t0 = now_ns();
    rc = baton_latch_count_down(latch);
    if (rc != BATON_OK)
        die("count_down: %s: %s", baton_err_name(rc), baton_client_errmsg(c));
    for (int i = 0; i < nw; i++)
        pthread_join(ws[i].thread, NULL);
    settle(c);
    client_counts(c, &st2);
    getrusage(RUSAGE_SELF, &ru1);
    server_read(ctl, &s1);

    result r;
    result_init(&r);
    r.workers = nw;
    r.target_ops = nw;
    latch_waits(ws, nw, t0, &r);
    double ops = r.ops ? (double)r.ops : NAN;
    r.server_cmds = (double)(s1.cmds - s0.cmds) / ops;
    r.client_rtts = (double)((st2.commands - st1.commands) + (st2.pubsub - st1.pubsub)) / ops;
    r.server_cpu = (s1.cpu_s - s0.cpu_s) * 1e6 / ops;
    r.client_cpu = cpu_us(&ru0, &ru1) / ops;

    char extra[900];
    snprintf(extra, sizeof extra,
             "last_waiter_ms=%.3f subscriptions=%d setup_rtts_per_waiter=%.3f "
             "fanout_cmds=%llu fanout_pubsub=%llu server_calls=[%s]",
             r.seconds * 1e3, subs,
             (double)((st1.commands - st0.commands) + (st1.pubsub - st0.pubsub)) / nw,
             (unsigned long long)(st2.commands - st1.commands),
             (unsigned long long)(st2.pubsub - st1.pubsub), s1.breakdown);
    print_human(&r, extra);
    write_json(&r);
    free(ws);
    baton_latch_close(latch);
    baton_client_close(c);
    redisFree(ctl);
}

/* ------------------------------------------------------------------------------------------
 * s5: renewal at scale
 * ---------------------------------------------------------------------------------------- */

/* s5: takes nlocks locks with the watchdog's lease; returns how many it holds. */
static long renew_take(baton_client *c, baton_lock **locks, bool *got, long nlocks,
                       uint64_t *errors, char first_err[256])
{
    long held = 0;
    char name[128];
    for (long i = 0; i < nlocks && now_ns() < sh->stop_ns; i++) {
        key(name, sizeof name, "held", (int)i);
        int rc = baton_lock_open(c, name, &locks[i]);
        if (rc == BATON_OK)
            rc = baton_lock_try_acquire(locks[i], 0, BATON_LEASE_WATCHDOG);
        if (rc != BATON_OK) {
            if ((*errors)++ == 0)
                snprintf(first_err, 256, "acquire %s: %s: %s", name, baton_err_name(rc),
                         baton_client_errmsg(c));
            continue;
        }
        got[i] = true;
        held++;
    }
    return held;
}

/* Every hold must still be there: a lease that ran out shows as BATON_ENOTHELD. Releases
 * and closes them all, and frees the arrays. */
static void renew_release(baton_client *c, baton_lock **locks, bool *got, long nlocks,
                          uint64_t *errors, char first_err[256])
{
    for (long i = 0; i < nlocks; i++) {
        if (got[i]) {
            int rc = baton_lock_release(locks[i]);
            if (rc != BATON_OK && (*errors)++ == 0)
                snprintf(first_err, 256, "release %ld: %s: %s", i, baton_err_name(rc),
                         baton_client_errmsg(c));
        }
        baton_lock_close(locks[i]);
    }
    free(locks);
    free(got);
}

/* Returns 0.3 period after a round of renewals began (the round is over by then: the
 * watchdog sends ceil(held / 100) pipelined EVALSHAs at once). A round shows as the
 * client's renewals_sent moving; polling every 10 ms costs next to no CPU. */
static void renew_round(baton_client *c, int64_t period_ms)
{
    int64_t limit = now_ns() + 2 * period_ms * 1000000 + 1000000000;
    bstats sw;
    client_counts(c, &sw);
    uint64_t r0 = sw.renewals;
    for (; sw.renewals == r0 && now_ns() < limit; client_counts(c, &sw))
        sleep_ms(10);
    sleep_ms(0.3 * (double)period_ms);
}

static void run_renewal(void)
{
    long nlocks = opt.n;
    int64_t prog_start = now_ns();
    redisContext *ctl = raw_connect();
    setup_shared(1, 1);
    sh->stop_ns = prog_start + ((int64_t)opt.max_seconds - 1) * 1000000000;
    baton_client *c = client_open();
    int64_t period_ms = (opt.watchdog_ms > 0 ? opt.watchdog_ms : 30000) / 3; /* client.h */

    baton_lock **locks = calloc((size_t)nlocks, sizeof *locks);
    bool *got = calloc((size_t)nlocks, sizeof *got);
    if (!locks || !got)
        die("out of memory");
    uint64_t errors = 0;
    char first_err[256] = "";
    long held = renew_take(c, locks, got, nlocks, &errors, first_err);

    /* Hold them for exactly `periods` renewal periods, counting what renewal costs. The
     * window starts 0.3 period after a round of renewals began and lasts `periods` periods,
     * so it holds exactly that many whole rounds. Its renewal commands are the server's
     * EVALSHAs in the window (nothing else runs a script then). */
    if (held > 0)
        renew_round(c, period_ms);
    bstats st0, st1;
    struct rusage ru0, ru1;
    server_snap s0, s1;
    server_reset(ctl);
    server_read(ctl, &s0);
    client_counts(c, &st0);
    getrusage(RUSAGE_SELF, &ru0);
    int64_t t0 = now_ns();
    double hold_ms = (double)period_ms * opt.periods;
    double left_ms = (double)(sh->stop_ns - t0) / 1e6 - 5000; /* room for the releases */
    if (hold_ms > left_ms)
        hold_ms = left_ms > 0 ? left_ms : 0;
    sleep_ms(hold_ms);
    int64_t t1 = now_ns();
    getrusage(RUSAGE_SELF, &ru1);
    client_counts(c, &st1);
    server_read(ctl, &s1);

    renew_release(c, locks, got, nlocks, &errors, first_err);

    double secs = (double)(t1 - t0) / 1e9;
    double periods = secs * 1000 / (double)period_ms; /* about opt.periods */
    double lock_periods = (double)held * periods;
    double renew_cmds = (double)(s1.scripts - s0.scripts);
    double rtts = (double)((st1.commands - st0.commands) + (st1.pubsub - st0.pubsub));
    double cpu = cpu_us(&ru0, &ru1);

    result r;
    result_init(&r);
    r.workers = 1;
    r.target_ops = (double)nlocks * opt.periods;
    r.ops = (uint64_t)llround(lock_periods);
    r.seconds = secs;
    r.errors = errors;
    double ops = lock_periods > 0 ? lock_periods : NAN;
    r.server_cmds = (double)(s1.cmds - s0.cmds) / ops;
    r.client_rtts = rtts / ops;
    r.server_cpu = (s1.cpu_s - s0.cpu_s) * 1e6 / ops;
    r.client_cpu = cpu / ops;

    char extra[900];
    snprintf(extra, sizeof extra,
             "held=%ld period_ms=%lld periods=%.2f renew_cmds_per_period=%.1f "
             "renew_cmds_per_100_locks_per_period=%.3f client_rtts_per_period=%.2f "
             "client_cpu_pct=%.2f server_cpu_pct=%.2f server_calls=[%s]",
             held, (long long)period_ms, periods, renew_cmds / periods,
             renew_cmds / periods * 100 / (double)(held ? held : 1), rtts / periods,
             cpu / 1e6 / secs * 100, (s1.cpu_s - s0.cpu_s) / secs * 100, s1.breakdown);
    print_human(&r, extra);
    if (errors)
        fprintf(stderr, "  %llu error(s), first: %s\n", (unsigned long long)errors, first_err);
    write_json(&r);
    baton_client_close(c);
    redisFree(ctl);
}

/* ------------------------------------------------------------------------------------------
 * main
 * ---------------------------------------------------------------------------------------- */

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "baton-bench: --max-seconds reached; stopped without a result\n";
    if (write(2, msg, sizeof msg - 1) < 0) {
    }
    _exit(3);
}

/* ------------------------------------------------------------------------------------------
 * --async (s2, s2f, s3): one thread, one event loop. W logical workers, each an owner
 * (include/baton/async.h): acquire asynchronously; run the critical section from the loop
 * as an event-loop program runs its own I/O, without blocking it (the counter's commands go
 * out on a non-blocking connection whose replies come back through the same poll()); then
 * release asynchronously too and start the next acquisition when the release completes
 * (a blocking release would stall every other worker of the loop for its round trip). The
 * threads of the threaded run block in their critical sections instead: each model as its
 * programs use it.
 * ---------------------------------------------------------------------------------------- */

typedef struct aworker {
    baton_owner *o;
    long left;
    int64_t t0;
} aworker;

static struct {
    baton_client *c;
    redisContext *raw;
    baton_lock *l;
    baton_semaphore *s;
    char counter[128];
    uint64_t ops, errors, cs;
    int done, holders, max_holders;
    int64_t end_ns;
    int64_t *waits;
    size_t nwaits;
    char errmsg[200];
} A;

static void a_start(aworker *w);

static void a_error(const char *what, int rc)
{
    if (A.errors++ == 0)
        snprintf(A.errmsg, sizeof A.errmsg, "%s: %s: %s", what, baton_err_name(rc),
                 baton_client_errmsg(A.c));
}

/* The critical section's commands in flight on A.raw (non-blocking), oldest first: the
 * worker each reply belongs to, and what the reply is (stage). */
enum { CS_GET = 1, CS_SET, CS_INCR };
static struct {
    aworker **w;
    int *stage;
    size_t cap, head, n;
} Q;

static void cs_send(aworker *w, int stage, const char *fmt, long long v)
{
    if (Q.n == Q.cap)
        die("more critical-section commands in flight than workers");
    if (stage == CS_SET)
        redisAppendCommand(A.raw, fmt, A.counter, v);
    else
        redisAppendCommand(A.raw, fmt, A.counter);
    size_t at = (Q.head + Q.n++) % Q.cap;
    Q.w[at] = w;
    Q.stage[at] = stage;
    A.cs++;
}

/* The release completed: the next acquisition. */
static void a_released(void *h, baton_owner *o, int rc, void *arg)
{
    (void)h, (void)o;
    if (rc != BATON_OK)
        a_error("release", rc);
    a_start(arg);
}

/* The critical section is over: release without blocking the loop; the next acquisition
 * starts when the release completes. */
static void cs_done(aworker *w)
{
    A.holders--;
    A.ops++;
    w->left--;
    int rc;
#ifdef BATON_BENCH_HAVE_SEMAPHORE
    if (opt.sc == S3)
        rc = baton_semaphore_release_async(A.s, 1, a_released, w, NULL);
    else
#endif
        rc = baton_lock_release_async(A.l, w->o, a_released, w, NULL);
    if (rc != BATON_OK) {
        a_error("release", rc);
        a_start(w);
    }
}

/* Replies that arrived on A.raw, each moving its worker's critical section on. */
static void cs_replies(void)
{
    if (redisBufferRead(A.raw) != REDIS_OK)
        die("critical section: %s", A.raw->errstr);
    for (;;) {
        void *got = NULL;
        if (redisGetReplyFromReader(A.raw, &got) != REDIS_OK)
            die("critical section: %s", A.raw->errstr);
        if (!got)
            return;
        redisReply *rep = got;
        if (Q.n == 0 || rep->type == REDIS_REPLY_ERROR)
            die("critical section: unexpected reply");
        aworker *w = Q.w[Q.head];
        int stage = Q.stage[Q.head];
        Q.head = (Q.head + 1) % Q.cap;
        Q.n--;
        if (stage == CS_GET) {
            long long v = rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : 0;
            cs_send(w, CS_SET, "SET %s %lld", v + 1);
        } else {
            cs_done(w);
        }
        freeReplyObject(rep);
    }
}

static void a_acquired(void *h, baton_owner *o, int rc, void *arg)
{
    (void)h, (void)o;
    aworker *w = arg;
    if (rc != BATON_OK) {
        a_error("acquire", rc);
        w->left = 0;
        a_start(w);
        return;
    }
    A.waits[A.nwaits++] = now_ns() - w->t0;
    if (++A.holders > A.max_holders)
        A.max_holders = A.holders;
    if (opt.sc == S3)
        cs_send(w, CS_INCR, "INCR %s", 0);
    else
        cs_send(w, CS_GET, "GET %s", 0);
}

static void a_start(aworker *w)
{
    if (w->left <= 0) {
        A.done++;
        A.end_ns = now_ns();
        return;
    }
    w->t0 = now_ns();
    int rc;
#ifdef BATON_BENCH_HAVE_SEMAPHORE
    if (opt.sc == S3)
        rc = baton_semaphore_acquire_async(A.s, 1, BATON_WAIT_FOREVER, a_acquired, w, NULL);
    else
#endif
        rc = baton_lock_acquire_async(A.l, w->o, BATON_WAIT_FOREVER, opt.lease_ms, a_acquired, w,
                                      NULL);
    if (rc != BATON_OK) {
        a_error("start", rc);
        w->left = 0;
        a_start(w);
    }
}

/* --async: the counter, the client, the non-blocking critical-section connection, the
 * object and the logical workers. */
static aworker *async_setup(redisContext *ctl, int nw)
{
    char name[128];
    key(A.counter, sizeof A.counter, "counter", -1);
    raw_do(ctl, "DEL %s", A.counter);
    key(name, sizeof name, opt.sc == S3 ? "sem" : "lock", -1);
    raw_do(ctl, "DEL %s", name);
    A.c = client_open();
    if (opt.loop && baton_client_set_callbacks(A.c, BATON_CALLBACKS_LOOP) != BATON_OK)
        die("BATON_CALLBACKS_LOOP: %s", baton_client_errmsg(A.c));
    A.raw = raw_connect();
    /* non-blocking from here on (hiredis reads and writes what the socket allows) */
    A.raw->flags &= ~REDIS_BLOCK;
    if (fcntl(A.raw->fd, F_SETFL, fcntl(A.raw->fd, F_GETFL) | O_NONBLOCK) != 0)
        die("fcntl: %s", strerror(errno));
    Q.cap = (size_t)nw;
    Q.w = calloc(Q.cap, sizeof *Q.w);
    Q.stage = calloc(Q.cap, sizeof *Q.stage);
    int rc;
    if (opt.sc == S3) {
#ifdef BATON_BENCH_HAVE_SEMAPHORE
        rc = baton_semaphore_open(A.c, name, &A.s);
        if (rc == BATON_OK)
            rc = baton_semaphore_try_set_permits(A.s, opt.permits, NULL);
#else
        rc = BATON_ENOTSUP;
#endif
    } else {
        rc = lock_open(A.c, name, &A.l);
    }
    if (rc != BATON_OK)
        die("setup: %s: %s", baton_err_name(rc), baton_client_errmsg(A.c));
    A.waits = calloc((size_t)nw * (size_t)opt.k + 1, sizeof *A.waits);
    aworker *ws = calloc((size_t)nw, sizeof *ws);
    if (!A.waits || !ws || !Q.w || !Q.stage)
        die("out of memory");
    for (int i = 0; i < nw; i++) {
        if (baton_owner_new(A.c, &ws[i].o) != BATON_OK)
            die("baton_owner_new failed");
        ws[i].left = opt.k;
    }
    return ws;
}

/* --async: the loop, until every logical worker is done. */
static void async_loop(aworker *ws, int nw)
{
    int fd;
    baton_client_async_fd(A.c, &fd);
    for (int i = 0; i < nw; i++)
        a_start(&ws[i]);
    while (A.done < nw) {
        int wdone = 0;
        if (A.raw->obuf[0] && redisBufferWrite(A.raw, &wdone) != REDIS_OK)
            die("critical section: %s", A.raw->errstr);
        struct pollfd p[2] = {{fd, POLLIN, 0},
                              {A.raw->fd, (short)(POLLIN | (A.raw->obuf[0] ? POLLOUT : 0)), 0}};
        poll(p, 2, 100);
        if (p[1].revents & (POLLIN | POLLERR | POLLHUP))
            cs_replies();
        if (p[0].revents & POLLIN)
            baton_client_process(A.c);
    }
}

/* --async: the figures of the run that started at start. */
static void async_figures(result *r, redisContext *ctl, int64_t start, double client_cpu_us)
{
    int nw = opt.workers;
    result_init(r);
    r->workers = nw;
    r->permits = opt.sc == S3 ? opt.permits : 1;
    r->think_ms = 0;
    r->target_ops = (double)nw * (double)opt.k;
    r->ops = A.ops;
    r->errors = A.errors;
    r->seconds = (double)(A.end_ns - start) / 1e9;
    r->ops_per_s = (double)r->ops / r->seconds;
    r->lat_kind = "acquire-wait";
    qsort(A.waits, A.nwaits, sizeof *A.waits, cmp_i64);
    r->lat_p50 = pct_ms(A.waits, A.nwaits, 50);
    r->lat_p99 = pct_ms(A.waits, A.nwaits, 99);
    r->lat_p999 = pct_ms(A.waits, A.nwaits, 99.9);
    r->lat_max = A.nwaits ? (double)A.waits[A.nwaits - 1] / 1e6 : NAN;
    r->counter = (double)raw_get_int(ctl, A.counter);
    r->expected = (double)r->ops;
    r->lost = r->expected - r->counter;
    r->max_holders = A.max_holders;
    r->client_cpu = client_cpu_us / (r->ops ? (double)r->ops : NAN);
}

static void run_async(void)
{
    int nw = opt.workers;
    if (opt.sc != S2 && opt.sc != S2F && opt.sc != S3)
        die("--async applies to s2, s2f and s3");
    if (opt.processes || opt.think_ms > 0 || opt.leases || opt.duration > 0)
        die("--async runs one process, think_ms 0, counted permits, --k acquisitions each");
    redisContext *ctl = raw_connect();
    aworker *ws = async_setup(ctl, nw);

    bstats st0, st1;
    syscount sc0, sc1, d;
    struct rusage ru0, ru1;
    server_snap s0, s1;
    client_counts(A.c, &st0);
    syscount_read(&sc0);
    getrusage(RUSAGE_SELF, &ru0);
    server_reset(ctl);
    server_read(ctl, &s0);
    int64_t start = now_ns();
    async_loop(ws, nw);
    getrusage(RUSAGE_SELF, &ru1);
    syscount_read(&sc1);
    client_counts(A.c, &st1);
    server_read(ctl, &s1);

    result r;
    async_figures(&r, ctl, start, cpu_us(&ru0, &ru1));
    double ops = r.ops ? (double)r.ops : NAN;
    double rtts = (double)(st1.commands - st0.commands + st1.pubsub - st0.pubsub);
    r.server_cmds = ((double)(s1.cmds - s0.cmds) - (double)A.cs) / ops;
    r.server_scripts = (double)(s1.scripts - s0.scripts) / ops;
    r.client_rtts = rtts / ops;
    r.server_cpu = (s1.cpu_s - s0.cpu_s) * 1e6 / ops;
    syscount_diff(&sc0, &sc1, &d);
    r.sys_per_rt = (double)d.total / rtts;
    char extra[900], sys[200];
    syscount_format(&d, sys, sizeof sys);
    snprintf(extra, sizeof extra, "async=1%s syscalls=[%s] server_calls=[%s]",
             opt.loop ? " loop=1" : "", sys, s1.breakdown);
    print_human(&r, extra);
    if (A.errors)
        fprintf(stderr, "  %llu error(s), first: %s\n", (unsigned long long)A.errors, A.errmsg);
    write_json(&r);
    for (int i = 0; i < nw; i++)
        baton_owner_free(ws[i].o);
    free(ws);
    free(A.waits);
    free(Q.w);
    free(Q.stage);
    baton_lock_close(A.l);
#ifdef BATON_BENCH_HAVE_SEMAPHORE
    baton_semaphore_close(A.s);
#endif
    redisFree(A.raw);
    redisFree(ctl);
    baton_client_close(A.c);
}

static void usage(void)
{
    fprintf(stderr, "usage: baton-bench --port P --scenario s1|s1m|s2|s2f|s3|s4|s5|s6 [--n N]\n"
                    "       [--workers W] [--k K] [--permits P] [--think-ms T] [--processes]\n"
                    "       [--max-seconds S] [--lease-ms L] [--watchdog-ms W] [--duration S]\n"
                    "       [--starve-ms MS (the plain lock's starvation bound)]\n"
                    "       [--periods N] [--tls-port P --tls-ca FILE]\n"
                    "       [--sync-replicas N] [--sync-aof] [--sync-timeout-ms MS]\n"
                    "       [--leases] [--async|--loop]\n"
                    "       [--groups G]\n"
                    "       [--hold-ms H] [--primitive lock|fairlock|semaphore (s6)]\n"
                    "       baton-bench --cluster P1,P2,... (the masters) --scenario ...\n"
                    "       baton-bench --list   (the scenarios this build can run)\n"
                    "Appends one JSON line to $RESULTS_JSONL (if set) and prints a summary.\n");
    exit(2);
}

/* --list: the scenarios this build can run (s2f and s3 need their modules). */
static void list_scenarios(void)
{
    printf("s1\ns1m\ns2\n");
#ifdef BATON_BENCH_HAVE_FAIRLOCK
    printf("s2f\n");
#endif
#ifdef BATON_BENCH_HAVE_SEMAPHORE
    printf("s3\n");
#endif
    printf("s4\ns5\ns6\n");
}

static long arg_long(const char *s, const char *what, long min)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < min)
        die("bad %s: %s", what, s);
    return v;
}

/* --cluster P1,P2,...: the masters' ports. */
static void parse_masters(char *list)
{
    for (char *save = NULL, *p = strtok_r(list, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        if (opt.nmasters == 16)
            die("at most 16 masters");
        opt.masters[opt.nmasters++] = (int)arg_long(p, "--cluster port", 1);
    }
    opt.port = opt.masters[0];
}

/* The options that take a number; false for any other. */
static bool number_option(int ch, const char *arg)
{
    switch (ch) {
    case 'p':
        opt.port = (int)arg_long(arg, "--port", 1);
        break;
    case 'n':
        opt.n = arg_long(arg, "--n", 1);
        break;
    case 'w':
        opt.workers = (int)arg_long(arg, "--workers", 1);
        break;
    case 'k':
        opt.k = arg_long(arg, "--k", 1);
        break;
    case 'P':
        opt.permits = (int)arg_long(arg, "--permits", 1);
        break;
    case 't':
        opt.think_ms = (int)arg_long(arg, "--think-ms", 0);
        break;
    case 'm':
        opt.max_seconds = (int)arg_long(arg, "--max-seconds", 2);
        break;
    case 'l':
        opt.lease_ms = arg_long(arg, "--lease-ms", 1);
        break;
    case 'W':
        opt.watchdog_ms = arg_long(arg, "--watchdog-ms", 3);
        break;
    case 'S':
        opt.starve_ms = arg_long(arg, "--starve-ms", -1);
        break;
    case 'X':
        opt.multiplex = (int)arg_long(arg, "--multiplex", -1);
        break;
    case 'd':
        opt.duration = (double)arg_long(arg, "--duration", 1);
        break;
    case 'r':
        opt.periods = (int)arg_long(arg, "--periods", 1);
        break;
    case 'T':
        opt.tls_port = (int)arg_long(arg, "--tls-port", 1);
        break;
    case 'R':
        opt.sync_replicas = (int)arg_long(arg, "--sync-replicas", 0);
        break;
    case 'Y':
        opt.sync_timeout_ms = arg_long(arg, "--sync-timeout-ms", 0);
        break;
    case 'H':
        opt.hold_ms = (double)arg_long(arg, "--hold-ms", 0);
        break;
    case 'G':
        opt.groups = (int)arg_long(arg, "--groups", 1);
        if (opt.groups > 64)
            die("at most 64 groups");
        break;
    default:
        return false;
    }
    return true;
}

/* Parses the command line; returns the scenario's id. */
static const char *parse_args(int argc, char **argv)
{
    static const struct option longs[] = {{"port", required_argument, NULL, 'p'},
                                          {"scenario", required_argument, NULL, 's'},
                                          {"n", required_argument, NULL, 'n'},
                                          {"workers", required_argument, NULL, 'w'},
                                          {"k", required_argument, NULL, 'k'},
                                          {"permits", required_argument, NULL, 'P'},
                                          {"think-ms", required_argument, NULL, 't'},
                                          {"processes", no_argument, NULL, 'x'},
                                          {"max-seconds", required_argument, NULL, 'm'},
                                          {"lease-ms", required_argument, NULL, 'l'},
                                          {"watchdog-ms", required_argument, NULL, 'W'},
                                          {"starve-ms", required_argument, NULL, 'S'},
                                          {"multiplex", required_argument, NULL, 'X'},
                                          {"duration", required_argument, NULL, 'd'},
                                          {"periods", required_argument, NULL, 'r'},
                                          {"leases", no_argument, NULL, 'E'},
                                          {"async", no_argument, NULL, 'A'},
                                          {"loop", no_argument, NULL, 'O'},
                                          {"help", no_argument, NULL, 'h'},
                                          {"list", no_argument, NULL, 'L'},
                                          {"tls-port", required_argument, NULL, 'T'},
                                          {"tls-ca", required_argument, NULL, 'C'},
                                          {"sync-replicas", required_argument, NULL, 'R'},
                                          {"sync-aof", no_argument, NULL, 'F'},
                                          {"sync-timeout-ms", required_argument, NULL, 'Y'},
                                          {"groups", required_argument, NULL, 'G'},
                                          {"cluster", required_argument, NULL, 'K'},
                                          {"hold-ms", required_argument, NULL, 'H'},
                                          {"primitive", required_argument, NULL, 'I'},
                                          {NULL, 0, NULL, 0}};
    const char *sc = NULL;
    int ch;
    while ((ch = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        if (number_option(ch, optarg))
            continue;
        switch (ch) {
        case 's':
            sc = optarg;
            break;
        case 'x':
            opt.processes = true;
            break;
        case 'E':
            opt.leases = true;
            break;
        case 'F':
            opt.sync_aof = 1;
            break;
        case 'A':
            opt.async = true;
            break;
        case 'O':
            opt.async = opt.loop = true;
            break;
        case 'C':
            opt.tls_ca = optarg;
            break;
        case 'I':
            opt.s6 = optarg;
            break;
        case 'K':
            parse_masters(optarg);
            break;
        case 'L':
            list_scenarios();
            exit(0);
        default:
            usage();
        }
    }
    if (!opt.port || !sc || optind != argc || (opt.tls_port > 0) != (opt.tls_ca != NULL))
        usage();
    return sc;
}

/* s6 (issue 30): 50 processes, 20 rounds each, 1 ms holds, on one plain lock, fair lock or
 * 1-permit semaphore (--primitive), run as s2, s2f or s3. */
static void scenario_s6(void)
{
    const char *p = opt.s6 ? opt.s6 : "lock";
    if (strcmp(p, "lock") == 0)
        opt.sc = S2;
    else if (strcmp(p, "fairlock") == 0)
        opt.sc = S2F;
    else if (strcmp(p, "semaphore") == 0)
        opt.sc = S3;
    else
        die("--primitive takes lock, fairlock or semaphore");
    opt.s6 = p;
    opt.processes = true;
    if (opt.workers < 0)
        opt.workers = 50;
    if (opt.k < 0 && opt.n < 0)
        opt.k = 20;
    if (opt.hold_ms <= 0)
        opt.hold_ms = 1;
    if (opt.permits < 0)
        opt.permits = 1;
}

/* The scenario from its id, and its defaults (BENCH.md). */
static void scenario_defaults(const char *sc)
{
    size_t i, nsc = sizeof scenario_ids / sizeof *scenario_ids;
    for (i = 0; i < nsc && strcmp(sc, scenario_ids[i]) != 0; i++)
        ;
    if (strcmp(sc, "s6") == 0)
        scenario_s6();
    else if (i == nsc)
        die("unknown scenario %s (s1, s1m, s2, s2f, s3, s4, s5, s6)", sc);
    else if (opt.s6)
        die("--primitive applies to s6");
    else
        opt.sc = (enum scenario)i;
    int def_workers[] = {1, 8, 8, 8, 16, 1000, 1};
    long def_k[] = {5000, 1000, 200, 200, 200, 1, 1};
    if (opt.workers < 0)
        opt.workers = def_workers[opt.sc];
    if (opt.sc == S1 && opt.workers != 1)
        die("s1 has one worker");
    if (opt.workers > MAX_WORKERS)
        die("at most %d workers", MAX_WORKERS);
    if (opt.k < 0)
        opt.k = opt.n > 0 ? (opt.n + opt.workers - 1) / opt.workers : def_k[opt.sc];
    if (opt.sc == S5 && opt.n < 0)
        opt.n = 10000;
    if (opt.sc == S5 && opt.watchdog_ms < 0)
        opt.watchdog_ms = 3000;
    if (opt.permits < 0)
        opt.permits = opt.sc == S3 ? 4 : 1;
    if (opt.think_ms < 0)
        opt.think_ms = 0;
}

int main(int argc, char **argv)
{
    const char *sc = parse_args(argc, argv);
    scenario_defaults(sc);
    if (opt.processes && (opt.sc == S4 || opt.sc == S5))
        die("--processes applies to s1, s1m, s2, s2f and s3");
    snprintf(opt.prefix, sizeof opt.prefix, "bench:%ld:%s", (long)getpid(), label());
    if (opt.nmasters > 0) {
        if (opt.sc != S1M && opt.sc != S2 && opt.sc != S2F && opt.sc != S3)
            die("--cluster applies to s1m, s2, s2f and s3");
        load_slots();
    }

    signal(SIGALRM, on_alarm);
    alarm((unsigned)opt.max_seconds); /* a hard stop, should the server stop answering */
    setvbuf(stdout, NULL, _IOLBF, 0);

    if (opt.sc == S4)
        run_latch();
    else if (opt.sc == S5)
        run_renewal();
    else if (opt.async)
        run_async();
    else
        run_workers();
    return 0;
}
