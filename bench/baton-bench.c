/*
 * baton-bench: runs one scenario of the benchmark (shared/BENCH.md) against a Redis server,
 * prints a human-readable summary and appends one JSON line to the file named by
 * $RESULTS_JSONL. bench/run drives it against a private server, beside the limit that
 * redis-benchmark measures on the same server.
 *
 *   baton-bench --port P --scenario ID [--n N] [--workers W] [--k K] [--permits P]
 *               [--think-ms T] [--processes] [--max-seconds S] [--lease-ms L]
 *               [--watchdog-ms W] [--duration S] [--periods N] [--groups G]
 *   baton-bench --cluster P1,P2,... --scenario s1m|s2|s2f|s3 ...   (a Redis Cluster: the
 *               objects spread over the masters, server figures summed over them)
 *
 * Scenarios: s1 (one thread, one lock, N acquire+release pairs), s1m (8 threads, 8 locks,
 * one client), s2 (W workers contend for one lock; critical section GET + SET of a counter
 * on a separate connection; think_ms pause after each release), s2f (s2 with the fair lock),
 * s3 (semaphore, P permits, W workers; critical section INCR), s4 (W threads of one client
 * await one latch; one count_down opens it), s5 (one client holds N locks with the watchdog
 * for a few renewal periods).
 *
 * Workers are threads of one client, or with --processes one process (and one client)
 * each. Counting follows BENCH.md: client round trips are the library's own counters
 * (commands on command connections plus SUBSCRIBE/UNSUBSCRIBE), the critical section runs
 * on a raw hiredis connection and is not counted; server commands are INFO commandstats
 * after CONFIG RESETSTAT (a script's own redis.call()s included, as Redis counts them),
 * less the critical section's commands and the benchmark's INFO/CONFIG. Every wait is
 * bounded, so the program stops by itself within --max-seconds.
 */
#define _GNU_SOURCE
#include "internal.h"
#include "slots.h"

#include <hiredis/hiredis.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
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
    bool stats_off; /* --stats off: the client's statistics paused (the A/B of s1) */
    bool leases;    /* --leases: s3 takes permit leases (baton_permits), not counts */
    bool async;     /* --async: s2, s2f, s3 from one thread's event loop (run_async) */
    int64_t lease_ms, watchdog_ms;
    double duration;    /* > 0: run until this many seconds passed instead of K each */
    char prefix[64];    /* every key of this run starts with it */
    int sync_replicas;  /* --sync-replicas N: baton_options.sync_replicas */
    int tls_port;       /* > 0: baton connects over TLS to this port (rediss://) ... */
    const char *tls_ca; /* ... trusting this CA; --port stays the plain port for INFO */
    int groups;         /* --groups G: s2/s2f/s3 workers split into G objects (w % G) */
    int nmasters;       /* --cluster P1,P2,...: a Redis Cluster with these masters */
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

typedef struct worker {
    int id;
    baton_client *c;
    redisContext *raw; /* critical section, not counted */
    worker_out *out;
    baton__stats st0; /* --processes: client counters at the start line */
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
    if (opt.watchdog_ms > 0)
        o.watchdog_ms = opt.watchdog_ms;
    baton_client *c;
    int rc = baton_client_open(&o, &c);
    if (rc != BATON_OK)
        die("baton_client_open: %s: %s", baton_err_name(rc), baton_open_errmsg());
    baton__stats_enable(c, !opt.stats_off);
    return c;
}

static void key(char *buf, size_t len, const char *what, int id)
{
    if (id >= 0)
        snprintf(buf, len, "%s:%s:%d", opt.prefix, what, id);
    else
        snprintf(buf, len, "%s:%s", opt.prefix, what);
}

/* --cluster: the index in opt.masters of each slot's master (CLUSTER SLOTS). */
static signed char slot_master[BATON__SLOTS];

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
        if (slot_master[baton__key_slot(buf, strlen(buf))] == want)
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
    return opt.masters[slot_master[baton__key_slot(k, strlen(k))]];
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
    while (baton__sub_count(c) > 0 && now_ns() < until)
        sleep_ms(1);
    sleep_ms(5);
}

/* The start line of the measured phase, for one worker. */
static void start_line(worker *w)
{
    if (opt.processes) {
        baton__client_stats(w->c, &w->st0);
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
        baton__stats st;
        struct rusage ru;
        baton__client_stats(w->c, &st);
        getrusage(RUSAGE_SELF, &ru);
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
    double lat_p50, lat_p99, lat_max, hand_p50, hand_p99, self_pct;
    double counter, expected, lost, max_holders;
    uint64_t errors;
    double server_cmds, client_rtts, server_cpu, client_cpu; /* per op */
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
            scenario_ids[opt.sc]);
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
    char b[16][32];
    fmt(b[0], 32, r->ops_per_s, 1);
    fmt(b[1], 32, r->lat_p50, 3);
    fmt(b[2], 32, r->lat_p99, 3);
    fmt(b[3], 32, r->lat_max, 3);
    fmt(b[4], 32, r->hand_p50, 3);
    fmt(b[5], 32, r->hand_p99, 3);
    fmt(b[6], 32, r->self_pct, 2);
    fmt(b[7], 32, r->lost, 0);
    fmt(b[8], 32, r->max_holders, 0);
    fmt(b[9], 32, r->client_rtts, 4);
    fmt(b[10], 32, r->server_cmds, 3);
    fmt(b[11], 32, r->server_cpu, 1);
    fmt(b[12], 32, r->client_cpu, 1);
    fmt(b[13], 32, r->target_ops, 0);
    fmt(b[14], 32, r->think_ms, 0);
    printf("%s workers=%d%s think_ms=%s ops=%llu/%s seconds=%.3f ops_per_s=%s lat(%s) "
           "p50=%s p99=%s max=%s ms handoff_p50=%s handoff_p99=%s self_reacquire_pct=%s "
           "lost_updates=%s max_holders=%s errors=%llu client_rtts_per_op=%s "
           "server_cmds_per_op=%s server_cpu_us_per_op=%s client_cpu_us_per_op=%s%s%s\n",
           scenario_ids[opt.sc], r->workers,
           opt.async       ? " async"
           : opt.processes ? (opt.leases ? " processes leases" : " processes")
                           : (opt.leases ? " threads leases" : " threads"),
           b[14], (unsigned long long)r->ops, b[13], r->seconds, b[0],
           r->lat_kind ? r->lat_kind : "-", b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8],
           (unsigned long long)r->errors, b[9], b[10], b[11], b[12], extra ? " " : "",
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
                  .client_cpu = NAN};
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

static void run_workers(void)
{
    int nw = opt.workers;
    int64_t prog_start = now_ns();
    /* the servers: the one, or every master of the cluster (counters summed) */
    int nctl = opt.nmasters ? opt.nmasters : 1;
    redisContext *ctls[16];
    for (int i = 0; i < nctl; i++)
        ctls[i] = raw_connect_port(opt.nmasters ? opt.masters[i] : opt.port);
    redisContext *ctl = ctls[0];
    /* the shared objects (s2, s2f, s3): one per group */
    int nobj = (opt.sc == S2 || opt.sc == S2F || opt.sc == S3) ? opt.groups : 0;
    char names[64][128], counters[64][160];
    for (int g = 0; g < nobj; g++) {
        worker_object(g, names[g], sizeof names[g]);
        counter_of(counters[g], sizeof counters[g], names[g]);
        redisContext *r = raw_connect_port(port_of(names[g]));
        raw_do(r, "DEL %s", counters[g]);
        raw_do(r, "DEL %s", names[g]);
        redisFree(r);
    }

    baton_client *setup = NULL;
    if (opt.sc == S3) {
        setup = client_open();
        for (int g = 0; g < nobj; g++) {
            sem_handle h;
            int rc = sem_open(setup, names[g], &h);
            if (rc == BATON_OK)
                rc = sem_try_set(&h, opt.permits);
            if (rc != BATON_OK)
                die("semaphore setup: %s: %s", baton_err_name(rc), baton_client_errmsg(setup));
            sem_close(&h);
        }
    }
#ifndef BATON_BENCH_HAVE_FAIRLOCK
    if (opt.sc == S2F)
        die("s2f: this libbaton has no fair lock (src/fairlock is not in BATON_SOURCES)");
#endif

    size_t cap = opt.duration > 0 ? MAX_SAMPLES_PER_WORKER : (size_t)opt.k;
    if (cap > MAX_SAMPLES_PER_WORKER)
        cap = MAX_SAMPLES_PER_WORKER;
    setup_shared(nw, cap);
    /* Nothing waits past this: leave a second for the wind-down. */
    sh->stop_ns = prog_start + ((int64_t)opt.max_seconds - 1) * 1000000000;

    worker *ws = calloc((size_t)nw, sizeof *ws);
    pid_t *pids = calloc((size_t)nw, sizeof *pids);
    if (!ws || !pids)
        die("out of memory");
    baton_client *c = opt.processes ? NULL : client_open();
    for (int i = 0; i < nw; i++) {
        ws[i].id = i;
        ws[i].out = &sh->w[i];
        if (opt.processes) {
            fflush(NULL);
            pid_t p = fork();
            if (p < 0)
                die("fork: %s", strerror(errno));
            if (p == 0) {
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                redisFree(ctl);
                ws[i].c = client_open();
                run_worker(&ws[i]);
                baton_client_close(ws[i].c);
                _exit(0);
            }
            pids[i] = p;
        } else {
            ws[i].c = c;
            if (pthread_create(&ws[i].thread, NULL, thread_main, &ws[i]) != 0)
                die("pthread_create failed");
        }
    }

    /* Everyone ready: reset the counters, then go. */
    pthread_barrier_wait(&sh->barrier);
    baton__stats st0 = {0}, st1 = {0};
    struct rusage ru0, ru1;
    server_snap s0, s1, m0[16], m1[16];
    if (c)
        baton__client_stats(c, &st0);
    getrusage(RUSAGE_SELF, &ru0);
    for (int i = 0; i < nctl; i++)
        server_reset(ctls[i]);
    for (int i = 0; i < nctl; i++)
        server_read(ctls[i], &m0[i]);
    server_sum(&s0, m0, nctl);
    sh->start_ns = now_ns();
    if (opt.duration > 0)
        sh->until_ns = sh->start_ns + (int64_t)(opt.duration * 1e9);
    pthread_barrier_wait(&sh->barrier);

    for (int i = 0; i < nw; i++) {
        if (opt.processes) {
            int st;
            while (waitpid(pids[i], &st, 0) < 0 && errno == EINTR)
                ;
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                sh->w[i].errors++;
                snprintf(sh->w[i].errmsg, sizeof sh->w[i].errmsg, "worker process failed");
            }
        } else {
            pthread_join(ws[i].thread, NULL);
        }
    }
    if (c) {
        settle(c);
        baton__client_stats(c, &st1);
    }
    getrusage(RUSAGE_SELF, &ru1);
    for (int i = 0; i < nctl; i++)
        server_read(ctls[i], &m1[i]);
    server_sum(&s1, m1, nctl);

    /* The figures. */
    result r;
    result_init(&r);
    r.workers = nw;
    bool contended = opt.sc == S2 || opt.sc == S2F;
    r.permits = opt.sc == S3 ? opt.permits * opt.groups : 1;
    if (contended || opt.sc == S3)
        r.think_ms = opt.think_ms;
    if (opt.duration <= 0)
        r.target_ops = (double)nw * (double)opt.k;
    uint64_t cs = 0, cmds = 0, pubsub = 0, self = 0;
    double ccpu = 0;
    int64_t end = sh->start_ns;
    for (int i = 0; i < nw; i++) {
        r.ops += sh->w[i].ops;
        r.errors += sh->w[i].errors;
        cs += sh->w[i].cs_cmds;
        cmds += sh->w[i].cmds;
        pubsub += sh->w[i].pubsub;
        ccpu += sh->w[i].cpu_us;
        self += sh->w[i].self_reacq;
        if (sh->w[i].end_ns > end)
            end = sh->w[i].end_ns;
    }
    if (c) {
        cmds = st1.commands - st0.commands;
        pubsub = st1.pubsub - st0.pubsub;
        ccpu = cpu_us(&ru0, &ru1);
    }
    r.seconds = (double)(end - sh->start_ns) / 1e9;
    double ops = r.ops ? (double)r.ops : NAN;
    r.ops_per_s = (double)r.ops / r.seconds;
    r.lat_kind = (opt.sc == S1 || opt.sc == S1M) ? "lock+unlock" : "acquire-wait";
    size_t n;
    int64_t *all = gather(wait_samples, nw, &n);
    r.lat_p50 = pct_ms(all, n, 50);
    r.lat_p99 = pct_ms(all, n, 99);
    r.lat_max = n ? (double)all[n - 1] / 1e6 : NAN;
    free(all);
    if (contended) {
        all = gather(hand_samples, nw, &n);
        r.hand_p50 = pct_ms(all, n, 50);
        r.hand_p99 = pct_ms(all, n, 99);
        free(all);
        r.self_pct = 100.0 * (double)self / ops;
    }
    double acq_p50 = NAN, rel_p50 = NAN;
    if (!contended && opt.sc != S3) {
        all = gather(hand_samples, nw, &n);
        acq_p50 = pct_ms(all, n, 50);
        free(all);
    }
    if (opt.sc != S3) {
        all = gather(rel_samples, nw, &n);
        rel_p50 = pct_ms(all, n, 50);
        free(all);
    }
    if (contended || opt.sc == S3) {
        r.counter = 0;
        for (int g = 0; g < nobj; g++) {
            redisContext *cr = raw_connect_port(port_of(names[g]));
            r.counter += (double)raw_get_int(cr, counters[g]);
            redisFree(cr);
        }
        r.expected = (double)r.ops;
        r.lost = r.expected - r.counter;
        r.max_holders = atomic_load(&sh->max_holders);
    }
    uint64_t scmds = s1.cmds - s0.cmds;
    r.server_cmds = ((double)scmds - (double)cs) / ops;
    r.client_rtts = (double)(cmds + pubsub) / ops;
    r.server_cpu = (s1.cpu_s - s0.cpu_s) * 1e6 / ops;
    r.client_cpu = ccpu / ops;

    for (int g = 0; opt.sc == S3 && g < nobj; g++) { /* every permit must be back */
        sem_handle h;
        int64_t avail = -1;
        if (sem_open(setup, names[g], &h) == BATON_OK) {
            avail = sem_available(&h);
            sem_close(&h);
        }
        if (avail != opt.permits) {
            fprintf(stderr, "s3: %lld permits available at the end, expected %d\n",
                    (long long)avail, opt.permits);
            r.errors++;
        }
    }

    /* The per-second timeline: seconds whose longest wait reached 50 ms, and in a
     * --duration run the whole of it. */
    int nsec = (int)ceil(r.seconds);
    if (nsec > MAX_SECONDS)
        nsec = MAX_SECONDS;
    if (opt.duration > 0 && nsec > (int)opt.duration) /* the last, partial second */
        nsec = (int)opt.duration;
    while (nsec > 0 && atomic_load(&sh->sec_ops[nsec - 1]) == 0)
        nsec--;
    int slow = 0;
    char tl[MAX_SECONDS * 16] = "";
    size_t tlo = 0;
    for (int i = 0; i < nsec; i++) {
        double m = (double)atomic_load(&sh->sec_max_ns[i]) / 1e6;
        slow += m >= 50;
        if (opt.duration > 0)
            tlo += (size_t)snprintf(tl + tlo, sizeof tl - tlo, "%s%llu:%.0f", i ? "," : "",
                                    (unsigned long long)atomic_load(&sh->sec_ops[i]), m);
    }

    char extra[900 + sizeof tl];
    int eo = snprintf(extra, sizeof extra, "seconds_with_wait_over_50ms=%d", slow);
    if (!isnan(acq_p50))
        eo += snprintf(extra + eo, sizeof extra - (size_t)eo, " acquire_p50_ms=%.3f", acq_p50);
    if (!isnan(rel_p50))
        eo += snprintf(extra + eo, sizeof extra - (size_t)eo, " release_p50_ms=%.3f", rel_p50);
    if (opt.duration > 0)
        eo +=
            snprintf(extra + eo, sizeof extra - (size_t)eo, " per_second_ops:max_wait_ms=[%s]", tl);
    if (opt.nmasters > 0) { /* the share of the scripts each master ran, and its CPU */
        double all_scripts = (double)(s1.scripts - s0.scripts), dev = 0;
        for (int i = 0; i < nctl; i++) {
            double share = 100.0 * (double)(m1[i].scripts - m0[i].scripts) / all_scripts;
            double even = 100.0 / nctl;
            if (fabs(share - even) / even * 100 > dev)
                dev = fabs(share - even) / even * 100;
            eo += snprintf(extra + eo, sizeof extra - (size_t)eo,
                           " master%d_share_pct=%.1f master%d_cpu_us_per_op=%.1f", i + 1, share,
                           i + 1, (m1[i].cpu_s - m0[i].cpu_s) * 1e6 / ops);
        }
        eo += snprintf(extra + eo, sizeof extra - (size_t)eo, " share_max_dev_pct=%.1f", dev);
    }
    snprintf(extra + eo, sizeof extra - (size_t)eo,
             " client_cmds=%llu client_pubsub=%llu cs_cmds=%llu server_scripts_per_op=%.3f "
             "server_calls=[%s]",
             (unsigned long long)cmds, (unsigned long long)pubsub, (unsigned long long)cs,
             (double)(s1.scripts - s0.scripts) / ops, s1.breakdown);
    print_human(&r, extra);
    print_errors(nw);
    write_json(&r);
    if (c)
        baton_client_close(c);
    if (setup)
        baton_client_close(setup);
    for (int i = 0; i < nctl; i++)
        redisFree(ctls[i]);
    free(ws);
    free(pids);
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

    baton__stats st0, st1, st2;
    struct rusage ru0, ru1;
    baton__client_stats(c, &st0);
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

    /* Wait until every waiter is blocked: all entered, and the client's commands have
     * stopped moving for 100 ms (each waiter reads the count before and after it joins the
     * subscription, then sleeps). */
    uint64_t last = 0;
    int64_t still_since = now_ns();
    for (;;) {
        baton__stats st;
        baton__client_stats(c, &st);
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
    int subs = baton__sub_count(c);
    baton__client_stats(c, &st1);
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
    baton__client_stats(c, &st2);
    getrusage(RUSAGE_SELF, &ru1);
    server_read(ctl, &s1);

    result r;
    result_init(&r);
    r.workers = nw;
    r.target_ops = nw;
    int64_t *lat = malloc((size_t)nw * sizeof *lat);
    size_t n = 0;
    int64_t lastret = t0;
    for (int i = 0; i < nw; i++) {
        if (ws[i].rc != BATON_OK || ws[i].returned_ns < t0) {
            if (r.errors++ == 0)
                fprintf(stderr, "s4: waiter %d: %s%s\n", i, baton_err_name(ws[i].rc),
                        ws[i].returned_ns < t0 ? " (returned before the count_down)" : "");
            continue;
        }
        r.ops++;
        lat[n++] = ws[i].returned_ns - t0;
        if (ws[i].returned_ns > lastret)
            lastret = ws[i].returned_ns;
    }
    qsort(lat, n, sizeof *lat, cmp_i64);
    r.seconds = (double)(lastret - t0) / 1e9;
    r.lat_kind = "acquire-wait";
    r.lat_p50 = pct_ms(lat, n, 50);
    r.lat_p99 = pct_ms(lat, n, 99);
    r.lat_max = n ? (double)lat[n - 1] / 1e6 : NAN;
    double ops = r.ops ? (double)r.ops : NAN;
    r.server_cmds = (double)(s1.cmds - s0.cmds) / ops;
    r.client_rtts = (double)((st2.commands - st1.commands) + (st2.pubsub - st1.pubsub)) / ops;
    r.server_cpu = (s1.cpu_s - s0.cpu_s) * 1e6 / ops;
    r.client_cpu = cpu_us(&ru0, &ru1) / ops;
    free(lat);

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

static void run_renewal(void)
{
    long nlocks = opt.n;
    int64_t prog_start = now_ns();
    redisContext *ctl = raw_connect();
    setup_shared(1, 1);
    sh->stop_ns = prog_start + ((int64_t)opt.max_seconds - 1) * 1000000000;
    baton_client *c = client_open();
    int64_t period_ms = baton__watchdog_lease(c) / 3;

    baton_lock **locks = calloc((size_t)nlocks, sizeof *locks);
    bool *got = calloc((size_t)nlocks, sizeof *got);
    if (!locks || !got)
        die("out of memory");
    uint64_t errors = 0;
    long held = 0;
    char name[128];
    char first_err[256] = "";
    for (long i = 0; i < nlocks && now_ns() < sh->stop_ns; i++) {
        key(name, sizeof name, "held", (int)i);
        int rc = baton_lock_open(c, name, &locks[i]);
        if (rc == BATON_OK)
            rc = baton_lock_try_acquire(locks[i], 0, BATON_LEASE_WATCHDOG);
        if (rc != BATON_OK) {
            if (errors++ == 0)
                snprintf(first_err, sizeof first_err, "acquire %s: %s: %s", name,
                         baton_err_name(rc), baton_client_errmsg(c));
            continue;
        }
        got[i] = true;
        held++;
    }

    /* Hold them for exactly `periods` renewal periods, counting what renewal costs. The
     * window starts 0.3 period after a round of renewals began (the round is over by then:
     * the watchdog sends ceil(held / 100) pipelined EVALSHAs at once) and lasts `periods`
     * periods, so it holds exactly that many whole rounds. Polling every 10 ms costs the
     * client next to no CPU. */
    int64_t limit = now_ns() + 2 * period_ms * 1000000 + 1000000000;
    uint64_t w0 = baton__watchdog_rounds(c);
    while (baton__watchdog_rounds(c) == w0 && now_ns() < limit && held > 0)
        sleep_ms(10);
    sleep_ms(0.3 * (double)period_ms);
    baton__stats st0, st1;
    struct rusage ru0, ru1;
    server_snap s0, s1;
    server_reset(ctl);
    server_read(ctl, &s0);
    baton__client_stats(c, &st0);
    w0 = baton__watchdog_rounds(c);
    getrusage(RUSAGE_SELF, &ru0);
    int64_t t0 = now_ns();
    double hold_ms = (double)period_ms * opt.periods;
    double left_ms = (double)(sh->stop_ns - t0) / 1e6 - 5000; /* room for the releases */
    if (hold_ms > left_ms)
        hold_ms = left_ms > 0 ? left_ms : 0;
    sleep_ms(hold_ms);
    int64_t t1 = now_ns();
    getrusage(RUSAGE_SELF, &ru1);
    uint64_t w1 = baton__watchdog_rounds(c);
    baton__client_stats(c, &st1);
    server_read(ctl, &s1);

    /* Every hold must still be there: a lease that ran out shows as BATON_ENOTHELD. */
    for (long i = 0; i < nlocks; i++) {
        if (got[i]) {
            int rc = baton_lock_release(locks[i]);
            if (rc != BATON_OK && errors++ == 0)
                snprintf(first_err, sizeof first_err, "release %ld: %s: %s", i, baton_err_name(rc),
                         baton_client_errmsg(c));
        }
        baton_lock_close(locks[i]);
    }
    free(locks);
    free(got);

    double secs = (double)(t1 - t0) / 1e9;
    double periods = secs * 1000 / (double)period_ms; /* about opt.periods */
    double lock_periods = (double)held * periods;
    double renew_cmds = (double)(w1 - w0);
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
 * release with the short blocking call (one round trip, as include/baton/async.h advises)
 * and start the next acquisition. The threads of the threaded run block in their critical
 * sections instead: each model as its programs use it.
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

/* The critical section is over: release (one blocking round trip), start the next one. */
static void cs_done(aworker *w)
{
    A.holders--;
    A.ops++;
    w->left--;
    int rc;
#ifdef BATON_BENCH_HAVE_SEMAPHORE
    if (opt.sc == S3)
        rc = baton_semaphore_release(A.s, 1);
    else
#endif
        rc = baton_lock_release_as(A.l, w->o);
    if (rc != BATON_OK)
        a_error("release", rc);
    a_start(w);
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

static void run_async(void)
{
    int nw = opt.workers;
    if (opt.sc != S2 && opt.sc != S2F && opt.sc != S3)
        die("--async applies to s2, s2f and s3");
    if (opt.processes || opt.think_ms > 0 || opt.leases || opt.duration > 0)
        die("--async runs one process, think_ms 0, counted permits, --k acquisitions each");
    redisContext *ctl = raw_connect();
    char name[128];
    key(A.counter, sizeof A.counter, "counter", -1);
    raw_do(ctl, "DEL %s", A.counter);
    key(name, sizeof name, opt.sc == S3 ? "sem" : "lock", -1);
    raw_do(ctl, "DEL %s", name);
    A.c = client_open();
    A.raw = raw_connect();
    /* non-blocking from here on (hiredis reads and writes what the socket allows) */
    A.raw->flags &= ~REDIS_BLOCK;
    if (fcntl(A.raw->fd, F_SETFL, fcntl(A.raw->fd, F_GETFL) | O_NONBLOCK) != 0)
        die("fcntl: %s", strerror(errno));
    Q.cap = (size_t)nw;
    Q.w = calloc(Q.cap, sizeof *Q.w);
    Q.stage = calloc(Q.cap, sizeof *Q.stage);
    if (!Q.w || !Q.stage)
        die("out of memory");
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
    if (!A.waits || !ws)
        die("out of memory");
    int fd;
    baton_client_async_fd(A.c, &fd);
    for (int i = 0; i < nw; i++) {
        if (baton_owner_new(A.c, &ws[i].o) != BATON_OK)
            die("baton_owner_new failed");
        ws[i].left = opt.k;
    }

    baton__stats st0, st1;
    struct rusage ru0, ru1;
    server_snap s0, s1;
    baton__client_stats(A.c, &st0);
    getrusage(RUSAGE_SELF, &ru0);
    server_reset(ctl);
    server_read(ctl, &s0);
    int64_t start = now_ns();
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
        baton_client_process(A.c);
    }
    getrusage(RUSAGE_SELF, &ru1);
    baton__client_stats(A.c, &st1);
    server_read(ctl, &s1);

    result r;
    result_init(&r);
    r.workers = nw;
    r.permits = opt.sc == S3 ? opt.permits : 1;
    r.think_ms = 0;
    r.target_ops = (double)nw * (double)opt.k;
    r.ops = A.ops;
    r.errors = A.errors;
    r.seconds = (double)(A.end_ns - start) / 1e9;
    r.ops_per_s = (double)r.ops / r.seconds;
    r.lat_kind = "acquire-wait";
    qsort(A.waits, A.nwaits, sizeof *A.waits, cmp_i64);
    r.lat_p50 = pct_ms(A.waits, A.nwaits, 50);
    r.lat_p99 = pct_ms(A.waits, A.nwaits, 99);
    r.lat_max = A.nwaits ? (double)A.waits[A.nwaits - 1] / 1e6 : NAN;
    r.counter = (double)raw_get_int(ctl, A.counter);
    r.expected = (double)r.ops;
    r.lost = r.expected - r.counter;
    r.max_holders = A.max_holders;
    double ops = r.ops ? (double)r.ops : NAN;
    r.server_cmds = ((double)(s1.cmds - s0.cmds) - (double)A.cs) / ops;
    r.client_rtts = (double)(st1.commands - st0.commands + st1.pubsub - st0.pubsub) / ops;
    r.server_cpu = (s1.cpu_s - s0.cpu_s) * 1e6 / ops;
    r.client_cpu = cpu_us(&ru0, &ru1) / ops;
    char extra[900];
    snprintf(extra, sizeof extra, "async=1 server_calls=[%s]", s1.breakdown);
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
    fprintf(stderr, "usage: baton-bench --port P --scenario s1|s1m|s2|s2f|s3|s4|s5 [--n N]\n"
                    "       [--workers W] [--k K] [--permits P] [--think-ms T] [--processes]\n"
                    "       [--max-seconds S] [--lease-ms L] [--watchdog-ms W] [--duration S]\n"
                    "       [--periods N] [--stats on|off] [--tls-port P --tls-ca FILE]\n"
                    "       [--sync-replicas N] [--leases] [--async] [--groups G]\n"
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
    printf("s4\ns5\n");
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

int main(int argc, char **argv)
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
                                          {"duration", required_argument, NULL, 'd'},
                                          {"periods", required_argument, NULL, 'r'},
                                          {"stats", required_argument, NULL, 'S'},
                                          {"leases", no_argument, NULL, 'E'},
                                          {"async", no_argument, NULL, 'A'},
                                          {"help", no_argument, NULL, 'h'},
                                          {"list", no_argument, NULL, 'L'},
                                          {"tls-port", required_argument, NULL, 'T'},
                                          {"tls-ca", required_argument, NULL, 'C'},
                                          {"sync-replicas", required_argument, NULL, 'R'},
                                          {"groups", required_argument, NULL, 'G'},
                                          {"cluster", required_argument, NULL, 'K'},
                                          {NULL, 0, NULL, 0}};
    const char *sc = NULL;
    int ch;
    while ((ch = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (ch) {
        case 'p':
            opt.port = (int)arg_long(optarg, "--port", 1);
            break;
        case 's':
            sc = optarg;
            break;
        case 'n':
            opt.n = arg_long(optarg, "--n", 1);
            break;
        case 'w':
            opt.workers = (int)arg_long(optarg, "--workers", 1);
            break;
        case 'k':
            opt.k = arg_long(optarg, "--k", 1);
            break;
        case 'P':
            opt.permits = (int)arg_long(optarg, "--permits", 1);
            break;
        case 't':
            opt.think_ms = (int)arg_long(optarg, "--think-ms", 0);
            break;
        case 'x':
            opt.processes = true;
            break;
        case 'm':
            opt.max_seconds = (int)arg_long(optarg, "--max-seconds", 2);
            break;
        case 'l':
            opt.lease_ms = arg_long(optarg, "--lease-ms", 1);
            break;
        case 'W':
            opt.watchdog_ms = arg_long(optarg, "--watchdog-ms", 3);
            break;
        case 'd':
            opt.duration = (double)arg_long(optarg, "--duration", 1);
            break;
        case 'r':
            opt.periods = (int)arg_long(optarg, "--periods", 1);
            break;
        case 'S':
            if (strcmp(optarg, "on") != 0 && strcmp(optarg, "off") != 0)
                die("--stats takes on or off");
            opt.stats_off = strcmp(optarg, "off") == 0;
            break;
        case 'E':
            opt.leases = true;
            break;
        case 'A':
            opt.async = true;
            break;
        case 'L':
            list_scenarios();
            return 0;
        case 'T':
            opt.tls_port = (int)arg_long(optarg, "--tls-port", 1);
            break;
        case 'C':
            opt.tls_ca = optarg;
            break;
        case 'R':
            opt.sync_replicas = (int)arg_long(optarg, "--sync-replicas", 0);
            break;
        case 'G':
            opt.groups = (int)arg_long(optarg, "--groups", 1);
            if (opt.groups > 64)
                die("at most 64 groups");
            break;
        case 'K':
            for (char *save = NULL, *p = strtok_r(optarg, ",", &save); p;
                 p = strtok_r(NULL, ",", &save)) {
                if (opt.nmasters == 16)
                    die("at most 16 masters");
                opt.masters[opt.nmasters++] = (int)arg_long(p, "--cluster port", 1);
            }
            opt.port = opt.masters[0];
            break;
        default:
            usage();
        }
    }
    if (!opt.port || !sc || optind != argc || (opt.tls_port > 0) != (opt.tls_ca != NULL))
        usage();
    size_t i;
    for (i = 0; i < sizeof scenario_ids / sizeof *scenario_ids; i++)
        if (strcmp(sc, scenario_ids[i]) == 0)
            break;
    if (i == sizeof scenario_ids / sizeof *scenario_ids)
        die("unknown scenario %s (s1, s1m, s2, s2f, s3, s4, s5)", sc);
    opt.sc = (enum scenario)i;

    /* Scenario defaults (BENCH.md). */
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
    if (opt.processes && (opt.sc == S4 || opt.sc == S5))
        die("--processes applies to s1, s1m, s2, s2f and s3");
    snprintf(opt.prefix, sizeof opt.prefix, "bench:%ld:%s", (long)getpid(), sc);
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
