/*
 * A client of the checked histories: one process that drives one primitive through the
 * public API for a while and appends every operation to its history file (hist.h).
 *
 *   hist_client URL RESOURCE_PORT WORKLOAD PROC INC SEED DURATION_MS OUT
 *
 * WORKLOAD: mutex, fair, rw, rwshared (rw in two threads sharing one client and handle),
 * mutexshared and semshared (mutex and sem in two threads sharing one client: a release
 * hands over to the other thread within the client, issue 49's cohorting), sem, permits, latch,
 * elect (leader election), barrier, cli (the mutex through `baton lock`); final:sem and
 * final:permits read the free permits once the run is over (the runner's last step). The process
 * keeps its client and its handles across many operations (a process looping on one handle through
 * faults is what found issue 27), and now and then opens fresh ones; it mixes the thread's owner
 * and baton_owner owners, re-entry, and the asynchronous acquire. Every hold writes the fenced
 * store (a key on the resource server updated by a script only if the token is at least
 * the stored one) at its start and again just before its release.
 *
 * Environment: HIST_SYNC_REPLICAS (sync_replicas), HIST_WATCHDOG_MS (default 3000),
 * HIST_CMD_TIMEOUT_MS (default 1000).
 */
#define _GNU_SOURCE
#include "hist.h"

#include <baton/baton.h>
#include <hiredis/hiredis.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static FILE *hf;
static _Thread_local redisContext *res; /* each thread its own (rwshared's two) */
static int res_port;
static bool g_pair; /* mutexshared, semshared: two threads on one client (open_client) */
static _Thread_local int g_proc; /* rwshared: its second thread's is + HIST_THREAD_PROC */
static int g_inc;
static const char *g_obj;
static _Thread_local unsigned long long rng;

static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static int64_t rnd_in(int64_t lo, int64_t hi)
{
    return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1));
}

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void res_connect(void)
{
    for (;;) {
        struct timeval tv = {2, 0};
        const char *host = getenv("HIST_RESOURCE_HOST");
        res = redisConnectWithTimeout(host && *host ? host : "127.0.0.1", res_port, tv);
        if (res && !res->err) {
            redisSetTimeout(res, tv);
            return;
        }
        if (res)
            redisFree(res);
        res = NULL;
        usleep(10000);
    }
}

static redisReply *res_cmd(const char *fmt, ...)
{
    for (int attempt = 0;; attempt++) {
        if (!res)
            res_connect();
        va_list ap;
        va_start(ap, fmt);
        redisReply *r = redisvCommand(res, fmt, ap);
        va_end(ap);
        if (r)
            return r;
        redisFree(res);
        res = NULL;
        if (attempt > 50) {
            fprintf(stderr, "hist_client: the resource server does not answer\n");
            exit(3);
        }
    }
}

/* The resource server's TIME in microseconds: the one clock of the history. */
static int64_t srv_us(void)
{
    redisReply *r = res_cmd("TIME");
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
        fprintf(stderr, "hist_client: TIME: %s\n", r->type == REDIS_REPLY_ERROR ? r->str : "?");
        exit(3);
    }
    int64_t t =
        strtoll(r->element[0]->str, NULL, 10) * 1000000 + strtoll(r->element[1]->str, NULL, 10);
    freeReplyObject(r);
    return t;
}

static void emit(const char *op, const char *type, int64_t token, int rc, int64_t value)
{
    int64_t t = srv_us();
    fprintf(hf, "%" PRId64 " %" PRId64 " %d %d %s %s %s %" PRId64 " %d %" PRId64 "\n", t, mono_ns(),
            g_proc, g_inc, g_obj, op, type, token, rc, value);
    fflush(hf);
}

/* A completion: ok, fail (it did not happen) or info (unknown). */
static void done(const char *op, int rc, int64_t token, int64_t value)
{
    const char *type = rc == BATON_OK ? "ok"
                       : rc == BATON_ETIMEDOUT || rc == BATON_ENOTHELD || rc == BATON_ENOTSYNCED ||
                               rc == BATON_EINVAL || rc == BATON_ENOTSUP || rc == BATON_ECANCELED
                           ? "fail"
                           : "info";
    emit(op, type, token, rc, value);
}

/* The fenced store: accepts a write whose token is at least the highest it accepted. */
static const char *STORE_LUA =
    "local top = tonumber(redis.call('GET', KEYS[1]) or '0') "
    "local t = tonumber(ARGV[1]) "
    "if t >= top then redis.call('SET', KEYS[1], ARGV[1]); redis.call('INCR', KEYS[2]); "
    "return 1 end return 0";

static void fenced_write(int64_t token)
{
    emit("store", "invoke", token, 0, 0);
    redisReply *r = res_cmd("EVAL %s 2 hist:store:%s hist:writes:%s %lld", STORE_LUA, g_obj, g_obj,
                            (long long)token);
    bool accepted = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    emit("store", accepted ? "ok" : "fail", token, 0, 0);
}

/* The seed's own case: a stock table in a real SQL database (MariaDB, started by the
 * runner with --stock), updated by every mutex hold with its fencing token through the
 * mariadb client program: one row, sold one at a time, only by a token above the last one
 * that sold and only while some is left. Events under obj "stock": sql invoke, then ok (a
 * row sold), fail (refused: a stale token or nothing left) or info (an error). */
static void stock_write(int64_t token)
{
    const char *sock = getenv("HIST_MARIADB_SOCKET");
    if (!sock || !*sock)
        return;
    char sql[300];
    snprintf(sql, sizeof sql,
             "UPDATE h.stock SET qty = qty - 1, fence = %" PRId64
             " WHERE id = 1 AND fence < %" PRId64 " AND qty > 0; SELECT ROW_COUNT();",
             token, token);
    const char *obj = g_obj;
    g_obj = "stock";
    emit("sql", "invoke", token, 0, 0);
    int pp[2];
    int rc = -1;
    if (pipe(pp) == 0) {
        pid_t pid = fork();
        if (pid == 0) {
            dup2(pp[1], 1);
            close(pp[0]);
            close(pp[1]);
            execlp("mariadb", "mariadb", "--no-defaults", "-S", sock, "-u", "root", "-N", "-B",
                   "--connect-timeout=5", "-e", sql, (char *)NULL);
            _exit(127);
        }
        close(pp[1]);
        char out[64] = "";
        size_t got = 0;
        ssize_t n;
        while (got < sizeof out - 1 && (n = read(pp[0], out + got, sizeof out - 1 - got)) != 0) {
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                break;
            got += (size_t)n;
        }
        out[got] = 0;
        close(pp[0]);
        int st = 0;
        while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        }
        if (pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 && got > 0)
            rc = atoi(out);
    }
    emit("sql", rc == 1 ? "ok" : rc == 0 ? "fail" : "info", token, rc, 0);
    g_obj = obj;
}

static int64_t env_int(const char *name, int64_t def)
{
    const char *s = getenv(name);
    return s && *s ? strtoll(s, NULL, 10) : def;
}

static const char *url;
static int64_t watchdog_ms;

static baton_client *open_client(int64_t until_us)
{
    baton_options o;
    baton_options_init(&o);
    o.url = url;
    o.command_timeout_ms = env_int("HIST_CMD_TIMEOUT_MS", 1000);
    o.connect_timeout_ms = 1000;
    o.watchdog_ms = watchdog_ms;
    o.fair_wait_ms = 2000;
    o.recheck_ms = 200;
    o.keepalive_ms = 2000;
    o.sync_replicas = (int)env_int("HIST_SYNC_REPLICAS", 0);
    o.sync_timeout_ms = 500;
    o.multiplex = (int)env_int("HIST_MULTIPLEX", 0); /* -1: pooled connections */
    /* mutexshared, semshared: no starvation bound, so that a waiter slowed past 5 ms does
     * not join the line, which stops hand-overs within the client while it lasts */
    if (g_pair)
        o.starve_ms = BATON_STARVE_NEVER;
    for (;;) {
        baton_client *c = NULL;
        if (baton_client_open(&o, &c) == BATON_OK)
            return c;
        if (srv_us() > until_us)
            return NULL;
        usleep(50000);
    }
}

/* ------------------------------------------------------------- async --------------- */

static _Thread_local int async_pipe[2] = {-1, -1}; /* the calling thread's completions */

static void async_done(void *handle, baton_owner *owner, int rc, void *arg)
{
    (void)handle;
    (void)owner;
    ssize_t w = write(((int *)arg)[1], &rc, sizeof rc);
    (void)w;
}

static int async_acquire(baton_client *c, baton_lock *l, baton_owner *o, int64_t wait_ms,
                         int64_t lease)
{
    if (async_pipe[0] < 0 && pipe(async_pipe) != 0)
        abort();
    baton_client_set_callbacks(c, BATON_CALLBACKS_BATON);
    int rc = baton_lock_acquire_async(l, o, wait_ms, lease, async_done, async_pipe, NULL);
    if (rc != BATON_OK)
        return rc;
    int got;
    while (read(async_pipe[0], &got, sizeof got) != sizeof got)
        if (errno != EINTR)
            return BATON_ECONN;
    return got;
}

/* ------------------------------------------------------------- lock workloads ------ */

/* Holds for hold_ms, watching the lost fd; returns true if the hold was found lost. */
static bool hold_for(int lost_fd, int64_t hold_ms)
{
    struct pollfd pfd = {lost_fd, POLLIN, 0};
    int64_t end = mono_ns() + hold_ms * 1000000;
    for (;;) {
        int64_t left = (end - mono_ns()) / 1000000;
        if (left < 0)
            left = 0;
        int n = poll(&pfd, 1, (int)left);
        if (n > 0 && (pfd.revents & POLLIN)) {
            emit("lost", "ok", 0, 0, 0);
            return true;
        }
        if (n == 0 || left == 0)
            return false;
    }
}

typedef enum { W_MUTEX, W_FAIR, W_RW } lock_kind;

/* shared_c, shared_rw: rwshared's client and read-write lock, which its two threads use
 * at once and never close here; NULL: the workload's own, renewed now and then. */
static void lock_workload(lock_kind kind, int64_t until_us, baton_client *shared_c,
                          baton_rwlock *shared_rw)
{
    baton_client *c = shared_c;
    baton_rwlock *rw = shared_rw;
    baton_lock *l = NULL;
    baton_owner *owner = NULL;
    const char *name = kind == W_MUTEX ? "h:mutex" : kind == W_FAIR ? "h:fair" : "h:rw";
    while (srv_us() < until_us) {
        /* fresh client now and then; a fresh handle more often */
        if (shared_c) {
            /* shared with the other thread: kept */
        } else if (c && rnd() % 50 == 0) {
            baton_owner_free(owner);
            owner = NULL;
            if (rw)
                baton_rwlock_close(rw);
            else
                baton_lock_close(l);
            rw = NULL;
            l = NULL;
            baton_client_close(c);
            c = NULL;
        } else if (c && rnd() % 20 == 0) {
            if (rw)
                baton_rwlock_close(rw);
            else
                baton_lock_close(l);
            rw = NULL;
            l = NULL;
        }
        if (!c) {
            c = open_client(until_us);
            if (!c)
                break;
        }
        bool write_side = true;
        baton_lock *h;
        if (kind == W_RW) {
            if (!rw && baton_rwlock_open(c, name, &rw) != BATON_OK)
                abort();
            write_side = rnd() % 3 == 0;
            h = write_side ? baton_rwlock_write(rw) : baton_rwlock_read(rw);
        } else {
            if (!l && (kind == W_FAIR ? baton_fairlock_open(c, name, &l)
                                      : baton_lock_open(c, name, &l)) != BATON_OK)
                abort();
            h = l;
        }
        /* the owner: the thread's, or an explicit one kept across holds (sometimes new) */
        baton_owner *o = NULL;
        if (kind != W_RW && rnd() % 5 < 2) {
            if (owner && rnd() % 10 == 0) {
                baton_owner_free(owner);
                owner = NULL;
            }
            if (!owner && baton_owner_new(c, &owner) != BATON_OK)
                abort();
            o = owner;
        }
        int64_t lease = rnd() % 4 == 0 ? 2000 : BATON_LEASE_WATCHDOG;
        /* a mutex hold now and then outlives its fixed lease (300 ms, held 350 to 700 ms, no
         * re-entry): the lock is gone when its release is sent, and another client is likely
         * to hold it by then, so a release that ignores its owner shows in every run (issue
         * 43). The checkers end such a hold at its lease's end. */
        bool overstay = kind == W_MUTEX && rnd() % 10 == 0;
        if (overstay)
            lease = 300;
        /* an overstaying hold waits longer: under contention (6 mutex clients, 1 in 8
         * holds up to twice the watchdog's lease) most 2 s waits time out */
        int64_t wait_ms = kind == W_FAIR || overstay ? 5000 : 2000;
        const char *acq = kind != W_RW ? "acquire" : write_side ? "wacquire" : "racquire";
        int64_t lease_v = lease == BATON_LEASE_WATCHDOG ? 0 : lease;
        emit(acq, "invoke", 0, 0, lease_v);
        int rc;
        if (rnd() % 5 == 0)
            rc = async_acquire(c, h, o, wait_ms, lease);
        else
            rc = o ? baton_lock_try_acquire_as(h, o, wait_ms, lease)
                   : baton_lock_try_acquire(h, wait_ms, lease);
        if (rc != BATON_OK) {
            done(acq, rc, 0, lease_v);
            usleep((useconds_t)rnd_in(rc == BATON_ETIMEDOUT ? 0 : 20000, 50000));
            continue;
        }
        int64_t token = 0;
        if (o)
            baton_lock_fencing_token_as(h, o, &token);
        else
            baton_lock_fencing_token(h, &token);
        done(acq, BATON_OK, token, lease_v);
        int lost_fd = -1;
        baton_lock_lost_fd(h, &lost_fd);
        bool lost = false;
        if (write_side)
            fenced_write(token);
        if (kind == W_MUTEX)
            stock_write(token);
        /* re-entry, with the server's hold count read at each depth */
        int depth = 1;
        int re = kind == W_RW || overstay ? 0 : (int)(rnd() % 3);
        for (int k = 0; k < re && !lost; k++) {
            emit("reenter", "invoke", token, 0, 0);
            rc =
                o ? baton_lock_try_acquire_as(h, o, 0, lease) : baton_lock_try_acquire(h, 0, lease);
            done("reenter", rc, token, 0);
            if (rc != BATON_OK)
                break;
            depth++;
            int64_t cnt = -1;
            emit("count", "invoke", token, 0, 0);
            rc = o ? baton_lock_hold_count_as(h, o, &cnt) : baton_lock_hold_count(h, &cnt);
            done("count", rc, token, depth * 1000 + (cnt < 0 ? 0 : cnt % 1000));
        }
        /* the hold: mostly short, sometimes past a third of the watchdog, sometimes past
         * the watchdog's lease itself (only renewals keep it then) */
        int64_t hold_ms = rnd() % 8 == 0    ? rnd_in(500, watchdog_ms * 2)
                          : rnd() % 16 == 0 ? rnd_in(100, 500)
                                            : rnd_in(1, 40);
        if (lease != BATON_LEASE_WATCHDOG && hold_ms > lease / 2)
            hold_ms = lease / 2; /* a fixed lease is the holder's own bound: it keeps it */
        if (overstay)
            hold_ms = rnd_in(lease + 50, lease + 400); /* ...except here, on purpose */
        lost = hold_for(lost_fd, hold_ms);
        if (!lost && write_side)
            fenced_write(token);
        if (!lost) {
            int64_t cnt = -1;
            emit("count", "invoke", token, 0, 0);
            rc = o ? baton_lock_hold_count_as(h, o, &cnt) : baton_lock_hold_count(h, &cnt);
            done("count", rc, token, depth * 1000 + (cnt < 0 ? 0 : cnt % 1000));
        }
        for (; depth > 1; depth--) {
            emit("exit", "invoke", token, 0, 0);
            rc = o ? baton_lock_release_as(h, o) : baton_lock_release(h);
            done("exit", rc, token, 0);
        }
        emit("release", "invoke", token, 0, 0);
        rc = o ? baton_lock_release_as(h, o) : baton_lock_release(h);
        done("release", rc, token, 0);
        usleep((useconds_t)rnd_in(0, 20000));
    }
    baton_owner_free(owner);
    if (shared_c) {
        if (!shared_rw && l)
            baton_lock_close(l); /* mutexshared: each thread its own handle */
        return;
    }
    if (rw)
        baton_rwlock_close(rw);
    else
        baton_lock_close(l);
    baton_client_close(c);
}

/* rwshared: the rw workload in two threads of one process that share its client and its
 * read-write lock (the handles may be used from any thread, concurrently): two readers of
 * one handle at once, a reader and a writer, a release whose reply comes after the other
 * thread took the lock. The second thread records as process g_proc + HIST_THREAD_PROC;
 * the checkers count both as one process for the faults that hit it (hist.h). */

typedef struct shared_arg {
    baton_client *c;
    baton_rwlock *rw;
    int proc;
    unsigned long long seed;
    int64_t until_us;
} shared_arg;

static void *shared_thread(void *p)
{
    shared_arg *a = p;
    g_proc = a->proc;
    rng = a->seed; /* its resource connection is made by its first res_cmd */
    lock_workload(W_RW, a->until_us, a->c, a->rw);
    if (res)
        redisFree(res);
    return NULL;
}

static void rw_shared_workload(int64_t until_us)
{
    baton_client *c = open_client(until_us);
    if (!c)
        return;
    baton_rwlock *rw = NULL;
    if (baton_rwlock_open(c, "h:rw", &rw) != BATON_OK)
        abort();
    shared_arg a = {c, rw, g_proc + HIST_THREAD_PROC, rng * 0x9E3779B97F4A7C15ull + 1, until_us};
    pthread_t t;
    if (pthread_create(&t, NULL, shared_thread, &a) != 0)
        abort();
    lock_workload(W_RW, until_us, c, rw);
    pthread_join(t, NULL);
    baton_rwlock_close(rw);
    baton_client_close(c);
}

/* mutexshared, semshared: the mutex and the sem workloads in two threads of one process
 * that share its client (each thread its own handle). One thread's release finds the other
 * asleep on the name and hands it the lock or the permit within the client (cohorting):
 * a new hold whose token rose, which the checkers see as any other. The second thread
 * records as g_proc + HIST_THREAD_PROC, as rwshared's. */
typedef struct pair_arg {
    baton_client *c;
    bool sem;
    int proc;
    unsigned long long seed;
    int64_t until_us;
} pair_arg;

static void sem_workload(int64_t until_us, baton_client *shared_c);

static void *pair_thread(void *p)
{
    pair_arg *a = p;
    g_proc = a->proc;
    rng = a->seed;
    if (a->sem)
        sem_workload(a->until_us, a->c);
    else
        lock_workload(W_MUTEX, a->until_us, a->c, NULL);
    if (res)
        redisFree(res);
    return NULL;
}

static void pair_workload(int64_t until_us, bool sem)
{
    g_pair = true;
    baton_client *c = open_client(until_us);
    if (!c)
        return;
    pair_arg a = {c, sem, g_proc + HIST_THREAD_PROC, rng * 0x9E3779B97F4A7C15ull + 1, until_us};
    pthread_t t;
    if (pthread_create(&t, NULL, pair_thread, &a) != 0)
        abort();
    if (sem)
        sem_workload(until_us, c);
    else
        lock_workload(W_MUTEX, until_us, c, NULL);
    pthread_join(t, NULL);
    /* what the run's log shows of the hand-overs: acquisitions without an attempt of their
     * own (a release handed them over within the client) */
    baton_stats st;
    if (baton_client_stats(c, &st) == BATON_OK) {
        int k = sem ? BATON_KIND_SEMAPHORE : BATON_KIND_LOCK;
        fprintf(stderr, "hist_client %d: %s in two threads: %llu acquisitions, %llu attempts\n",
                g_proc, g_obj, (unsigned long long)st.kind[k].acquisitions,
                (unsigned long long)st.kind[k].attempts);
    }
    baton_client_close(c);
}

/* ------------------------------------------------------------- Redlock ----------- */

/* The quorum lock over three independent servers (URL: their three URLs, comma-separated):
 * one client and one member lock h:redlock per server, grouped by baton_redlock_open. The
 * group has no fencing token or lost signal of its own (docs/multilock.md): the hold's
 * members are those whose handle has a token after the acquire, and the hold counts as
 * lost (the "lost" event) once fewer than a majority of them are still held, that is once
 * the lost fds of enough of them became readable (a member's fd readable before the hold
 * began, from an earlier hold, is not counted). The client keeps its clients and handles
 * across holds, and reopens them now and then. */
#define RL_N 3

static void redlock_workload(int64_t until_us)
{
    char urls[512];
    snprintf(urls, sizeof urls, "%s", url);
    const char *u[RL_N];
    int nu = 0;
    for (char *tok = strtok(urls, ","); tok && nu < RL_N; tok = strtok(NULL, ","))
        u[nu++] = tok;
    if (nu != RL_N) {
        fprintf(stderr, "hist_client: redlock needs %d URLs\n", RL_N);
        exit(2);
    }
    baton_client *c[RL_N] = {0};
    baton_lock *m[RL_N] = {0}, *g = NULL;
    const char *saved = url;
    while (srv_us() < until_us) {
        if (g && rnd() % 30 == 0) {
            baton_lock_close(g);
            g = NULL;
            for (int k = 0; k < RL_N; k++) {
                baton_lock_close(m[k]);
                m[k] = NULL;
                if (rnd() % 2 == 0) {
                    baton_client_close(c[k]);
                    c[k] = NULL;
                }
            }
        }
        for (int k = 0; k < RL_N; k++)
            if (!c[k]) {
                url = u[k];
                c[k] = open_client(until_us);
                url = saved;
                if (!c[k])
                    goto out;
            }
        if (!g) {
            for (int k = 0; k < RL_N; k++)
                if (baton_lock_open(c[k], "h:redlock", &m[k]) != BATON_OK)
                    abort();
            if (baton_redlock_open(m, RL_N, &g) != BATON_OK)
                abort();
        }
        int fds[RL_N];
        for (int k = 0; k < RL_N; k++)
            baton_lock_lost_fd(m[k], &fds[k]);
        int64_t lease = rnd() % 4 == 0 ? 2000 : BATON_LEASE_WATCHDOG;
        int64_t lease_v = lease == BATON_LEASE_WATCHDOG ? 0 : lease;
        emit("acquire", "invoke", 0, 0, lease_v);
        int rc = baton_lock_try_acquire(g, 2000, lease);
        if (rc != BATON_OK) {
            done("acquire", rc, 0, lease_v);
            usleep((useconds_t)rnd_in(rc == BATON_ETIMEDOUT ? 0 : 20000, 50000));
            continue;
        }
        /* the members this hold took, and their lost fds not already readable */
        bool taken[RL_N];
        int ntaken = 0;
        int64_t tokens = 0;
        for (int k = 0; k < RL_N; k++) {
            int64_t t = 0;
            taken[k] = baton_lock_fencing_token(m[k], &t) == BATON_OK;
            if (taken[k]) {
                struct pollfd p = {fds[k], POLLIN, 0};
                if (poll(&p, 1, 0) > 0 && (p.revents & POLLIN))
                    taken[k] = false; /* cannot watch it: count it lost already */
                else
                    ntaken++;
                tokens += t; /* informative: the sum of the members' tokens */
            }
        }
        done("acquire", BATON_OK, tokens, lease_v);
        int64_t hold_ms = rnd() % 8 == 0    ? rnd_in(500, watchdog_ms * 2)
                          : rnd() % 16 == 0 ? rnd_in(100, 500)
                                            : rnd_in(1, 40);
        if (lease != BATON_LEASE_WATCHDOG && hold_ms > lease / 2)
            hold_ms = lease / 2;
        int64_t end = mono_ns() + hold_ms * 1000000;
        bool lost = ntaken < RL_N / 2 + 1;
        while (!lost) {
            int64_t left = (end - mono_ns()) / 1000000;
            if (left <= 0)
                break;
            struct pollfd p[RL_N];
            int np = 0, idx[RL_N];
            for (int k = 0; k < RL_N; k++)
                if (taken[k]) {
                    p[np] = (struct pollfd){fds[k], POLLIN, 0};
                    idx[np++] = k;
                }
            if (poll(p, (nfds_t)np, (int)left) <= 0)
                continue;
            for (int q = 0; q < np; q++)
                if (p[q].revents & POLLIN) {
                    taken[idx[q]] = false;
                    ntaken--;
                }
            lost = ntaken < RL_N / 2 + 1;
        }
        if (lost)
            emit("lost", "ok", 0, 0, 0);
        emit("release", "invoke", tokens, 0, 0);
        rc = baton_lock_release(g);
        done("release", rc, tokens, 0);
        usleep((useconds_t)rnd_in(0, 20000));
    }
out:
    baton_lock_close(g);
    for (int k = 0; k < RL_N; k++) {
        baton_lock_close(m[k]);
        baton_client_close(c[k]);
    }
}

/* ------------------------------------------------------------- semaphores ---------- */

/* try_set_permits(2), recorded as "set" (invoke VALUE 2; ok VALUE 1 if it was set: no
 * count was there, 0 if one was): the checker counts from 2 again after a set. A reset is
 * recorded as "delete" (ok VALUE 1 if a count was there), then "set". */
static int sem_set(baton_semaphore *s, bool *was_set)
{
    *was_set = false;
    emit("set", "invoke", 0, 0, 2);
    int rc = baton_semaphore_try_set_permits(s, 2, was_set);
    done("set", rc, 0, rc == BATON_OK && *was_set);
    return rc;
}

static void sem_workload(int64_t until_us, baton_client *shared_c)
{
    baton_client *c = shared_c ? shared_c : open_client(until_us);
    if (!c)
        return;
    baton_semaphore *s;
    if (baton_semaphore_open(c, "h:sem", &s) != BATON_OK)
        abort();
    bool was_set;
    int drained = 0; /* acquires in a row that timed out while a count was there */
    while (sem_set(s, &was_set) != BATON_OK && srv_us() < until_us)
        usleep(50000);
    while (srv_us() < until_us) {
        /* VALUE 0: a counting semaphore's permit has no lease (VALUE is an acquire's lease
         * in ms: the permit count, 1, recorded here once cut every hold to 1 ms) */
        emit("acquire", "invoke", 0, 0, 0);
        int rc = baton_semaphore_try_acquire(s, 1, 2000);
        done("acquire", rc, 0, 0);
        /* no permit for 2 s: the count may be gone with the data (a restart without it, a
         * master killed); set it again if there is none, as the first start did. A count
         * that is there but let nobody in for two such waits in a row has lost its
         * permits (releases of unknown outcome that never ran, a master killed before
         * they reached its replica; killed holders): reset it, deleted and set again.
         * The checker takes a delete for a loss of the count */
        if (rc == BATON_ETIMEDOUT && sem_set(s, &was_set) == BATON_OK && !was_set &&
            ++drained >= 2) {
            bool existed = false;
            emit("delete", "invoke", 0, 0, 0);
            int drc = baton_semaphore_delete(s, &existed);
            done("delete", drc, 0, existed);
            sem_set(s, &was_set);
            drained = 0;
        }
        if (rc == BATON_OK)
            drained = 0;
        if (rc == BATON_OK) {
            usleep((useconds_t)rnd_in(1000, 40000));
            emit("release", "invoke", 0, 0, 0);
            done("release", baton_semaphore_release(s, 1), 0, 0);
        }
        usleep((useconds_t)rnd_in(rc == BATON_OK || rc == BATON_ETIMEDOUT ? 0 : 20000, 50000));
    }
    baton_semaphore_close(s);
    if (!shared_c)
        baton_client_close(c);
}

static void permits_workload(int64_t until_us)
{
    baton_client *c = open_client(until_us);
    if (!c)
        return;
    baton_permits *p;
    if (baton_permits_open(c, "h:permits", &p) != BATON_OK)
        abort();
    while (baton_permits_try_set_permits(p, 3, NULL) != BATON_OK && srv_us() < until_us)
        usleep(50000);
    int lost_fd = -1;
    baton_permits_lost_fd(p, &lost_fd);
    while (srv_us() < until_us) {
        char id[BATON_PERMIT_ID_SIZE];
        int64_t lease = rnd() % 2 ? 2000 : BATON_LEASE_WATCHDOG;
        int64_t lease_v = lease == BATON_LEASE_WATCHDOG ? 0 : lease;
        emit("acquire", "invoke", 0, 0, lease_v);
        int rc = baton_permits_try_acquire(p, 2000, lease, id);
        done("acquire", rc, 0, lease_v);
        if (rc == BATON_OK) {
            int64_t hold_ms = rnd() % 8 == 0 ? rnd_in(500, 2500) : rnd_in(1, 40);
            if (lease != BATON_LEASE_WATCHDOG && hold_ms > lease / 2)
                hold_ms = lease / 2;
            hold_for(lost_fd, hold_ms);
            emit("release", "invoke", 0, 0, 0);
            done("release", baton_permits_release(p, id), 0, 0);
        }
        usleep((useconds_t)rnd_in(rc == BATON_OK || rc == BATON_ETIMEDOUT ? 0 : 20000, 50000));
    }
    baton_permits_close(p);
    baton_client_close(c);
}

/* ------------------------------------------------------------- election ---------- */

/* Leader election on h:elect (events under obj "elect", recorded as a lock's: acquire =
 * campaign, ok with TOKEN = the term; release = resign; lost = the lost fd). Mostly the
 * watchdog's lease; 1 in 4 a fixed lease of 2 s (led at most half of it); 1 in 10 a fixed
 * lease of 300 ms led 350 to 700 ms: the term is over when the leader resigns, which must
 * then not end the next leader's term. The handle is kept across terms, reopened now and
 * then. */
static void election_workload(int64_t until_us)
{
    baton_client *c = NULL;
    baton_election *e = NULL;
    while (srv_us() < until_us) {
        if (c && rnd() % 30 == 0) {
            baton_election_close(e);
            e = NULL;
            if (rnd() % 2 == 0) {
                baton_client_close(c);
                c = NULL;
            }
        }
        if (!c && !(c = open_client(until_us)))
            break;
        if (!e && baton_election_open(c, "h:elect", &e) != BATON_OK)
            abort();
        bool overstay = rnd() % 10 == 0;
        int64_t lease = overstay ? 300 : rnd() % 4 == 0 ? 2000 : BATON_LEASE_WATCHDOG;
        int64_t lease_v = lease == BATON_LEASE_WATCHDOG ? 0 : lease;
        char value[32];
        snprintf(value, sizeof value, "p%d.%d", g_proc, g_inc);
        emit("acquire", "invoke", 0, 0, lease_v);
        int rc = baton_election_campaign(e, value, 2000, lease);
        if (rc != BATON_OK) {
            done("acquire", rc, 0, lease_v);
            usleep((useconds_t)rnd_in(rc == BATON_ETIMEDOUT ? 0 : 20000, 50000));
            continue;
        }
        int64_t term = 0;
        baton_election_term(e, &term);
        done("acquire", BATON_OK, term, lease_v);
        int lost_fd = -1;
        baton_election_lost_fd(e, &lost_fd);
        fenced_write(term);
        int64_t hold_ms = rnd() % 8 == 0 ? rnd_in(500, watchdog_ms * 2) : rnd_in(1, 60);
        if (lease != BATON_LEASE_WATCHDOG && hold_ms > lease / 2)
            hold_ms = lease / 2;
        if (overstay)
            hold_ms = rnd_in(lease + 50, lease + 400);
        bool lost = hold_for(lost_fd, hold_ms);
        if (!lost)
            fenced_write(term);
        emit("release", "invoke", term, 0, 0);
        done("release", baton_election_resign(e), term, 0);
        usleep((useconds_t)rnd_in(0, 30000));
    }
    baton_election_close(e);
    baton_client_close(c);
}

/* ------------------------------------------------------------- barrier ----------- */

/* A cyclic barrier h:barrier of HIST_BARRIER_PARTIES parties (the runner sets it to the
 * number of barrier clients): each client arrives again and again ("await" invoke, then ok
 * with VALUE = the generation that tripped, fail when it broke or timed out, info when
 * unknown), after a pause of 0 to 50 ms, now and then 0.3 to 1 s. */
static void barrier_workload(int64_t until_us)
{
    int64_t parties = env_int("HIST_BARRIER_PARTIES", 3);
    baton_client *c = open_client(until_us);
    if (!c)
        return;
    baton_barrier *b;
    if (baton_barrier_open(c, "h:barrier", parties, &b) != BATON_OK)
        abort();
    while (srv_us() < until_us) {
        emit("await", "invoke", 0, 0, 0);
        int64_t idx = -1, gen = -1;
        int rc = baton_barrier_await(b, 3000, &idx, &gen);
        const char *type = rc == BATON_OK ? "ok"
                           : rc == BATON_ETIMEDOUT || rc == BATON_EBROKEN || rc == BATON_EINVAL
                               ? "fail"
                               : "info";
        emit("await", type, idx, rc, rc == BATON_OK ? gen : 0);
        usleep((useconds_t)(rnd() % 12 == 0 ? rnd_in(300000, 1000000) : rnd_in(0, 50000)));
    }
    baton_barrier_close(b);
    baton_client_close(c);
}

/* ------------------------------------------------------------- latch --------------- */

/* Rounds of LATCH_ROUND_MS by the resource server's clock: in each round the clients
 * 0..LATCH_K-1 count down once (at a random moment of its first 40%), the others await;
 * everyone sets the count first if it is not set (the first one does). */
#define LATCH_ROUND_MS 1000
#define LATCH_K 2

static void latch_workload(int64_t until_us, int nprocs_counting)
{
    baton_client *c = open_client(until_us);
    if (!c)
        return;
    for (;;) {
        int64_t now = srv_us();
        if (now >= until_us)
            break;
        int64_t round = now / (LATCH_ROUND_MS * 1000) + 1;
        int64_t start = round * LATCH_ROUND_MS * 1000;
        if (start + LATCH_ROUND_MS * 1000 > until_us)
            break;
        /* wait for the round to begin */
        usleep((useconds_t)(start - now));
        char name[64];
        snprintf(name, sizeof name, "h:latch:%" PRId64, round);
        baton_latch *l;
        if (baton_latch_open(c, name, &l) != BATON_OK)
            abort();
        if (g_proc - (int)env_int("HIST_LATCH_BASE", 0) < nprocs_counting) {
            usleep((useconds_t)rnd_in(0, LATCH_ROUND_MS * 400));
            if (srv_us() < start + LATCH_ROUND_MS * 400) {
                baton_latch_try_set_count(l, LATCH_K, NULL);
                emit("cd", "invoke", 0, 0, round);
                done("cd", baton_latch_count_down(l), 0, round);
            }
        } else {
            usleep((useconds_t)rnd_in(0, LATCH_ROUND_MS * 50));
            if (srv_us() < start + LATCH_ROUND_MS * 100) {
                /* an absent latch reads as open: await only one known to be set */
                int rc = baton_latch_try_set_count(l, LATCH_K, NULL);
                if (rc != BATON_OK) {
                    baton_latch_close(l);
                    continue;
                }
                emit("await", "invoke", 0, 0, round);
                int64_t left = (start + LATCH_ROUND_MS * 900 - srv_us()) / 1000;
                done("await", baton_latch_await(l, left > 0 ? left : 0), 0, round);
            }
        }
        baton_latch_close(l);
    }
    baton_client_close(c);
}

/* ------------------------------------------------------------- the CLI ----------- */

/* A client that takes the mutex through the command line, mixed with the library's mutex
 * clients on the same lock (h:mutex, its events under obj "mutex"): in a loop it runs
 *   baton --url URL lock h:mutex --wait 2s (--lease 2s | --watchdog W) -q -- \
 *       sh -c 'exec "$0" "$@"' hist_client ... cli-hold ...
 * The acquire's invoke is written here; COMMAND (cli_hold below, this program again)
 * writes the acquire's ok with $BATON_FENCING_TOKEN, the fenced writes with that token,
 * and the release's invoke; this loop writes the release's completion from baton's exit
 * status (0 released, 122 lost, else unknown), or, when COMMAND never ran, the acquire's
 * (124 fail, else unknown). baton is this process's child with PR_SET_PDEATHSIG: a kill -9
 * of this client kills baton too (whose helper then stops COMMAND); a pause stops this
 * client's process group, baton with it (not COMMAND, which runs in a group of its own
 * and goes on acting as holder: a pause past the lease is the unfenced case). */
static volatile sig_atomic_t cli_term;

static void on_term(int sig)
{
    (void)sig;
    cli_term = 1;
}

static int cli_hold(int argc, char **argv)
{
    /* argv: ... cli-hold PROC INC SEED HOLD_MS OUT LEASE_V RAN_FILE */
    struct sigaction sa = {0};
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    if (argc != 11)
        return 2;
    int64_t hold_ms = strtoll(argv[7], NULL, 10), lease_v = strtoll(argv[9], NULL, 10);
    FILE *ran = fopen(argv[10], "w");
    if (ran)
        fclose(ran);
    const char *tok = getenv("BATON_FENCING_TOKEN");
    int64_t token = tok ? strtoll(tok, NULL, 10) : -1;
    emit("acquire", "ok", token, 0, lease_v);
    fenced_write(token);
    stock_write(token);
    int64_t end = mono_ns() + hold_ms * 1000000;
    while (!cli_term && mono_ns() < end)
        usleep(2000);
    if (cli_term) {
        emit("lost", "ok", 0, 0, 0);
        return 0;
    }
    fenced_write(token);
    emit("release", "invoke", token, 0, 0);
    return 0;
}

static void cli_workload(int64_t until_us, const char *self, const char *resport, const char *seed,
                         const char *out)
{
    const char *baton = getenv("HIST_BATON");
    if (!baton || !*baton)
        baton = "baton";
    char ran[600], proc[16], inc[16];
    snprintf(ran, sizeof ran, "%s.ran", out);
    snprintf(proc, sizeof proc, "%d", g_proc);
    snprintf(inc, sizeof inc, "%d", g_inc);
    char watchdog[32], sync[32];
    snprintf(watchdog, sizeof watchdog, "%" PRId64 "ms", watchdog_ms);
    snprintf(sync, sizeof sync, "%" PRId64, env_int("HIST_SYNC_REPLICAS", 0));
    while (srv_us() < until_us) {
        bool fixed = rnd() % 4 == 0;
        int64_t lease_v = fixed ? 2000 : 0;
        int64_t hold_ms = rnd() % 8 == 0    ? rnd_in(500, watchdog_ms * 2)
                          : rnd() % 16 == 0 ? rnd_in(100, 500)
                                            : rnd_in(1, 40);
        if (fixed && hold_ms > lease_v / 2)
            hold_ms = lease_v / 2;
        char hold[32], lv[32];
        snprintf(hold, sizeof hold, "%" PRId64, hold_ms);
        snprintf(lv, sizeof lv, "%" PRId64, lease_v);
        unlink(ran);
        emit("acquire", "invoke", 0, 0, lease_v);
        pid_t pid = fork();
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            const char *av[40];
            int n = 0;
            av[n++] = baton;
            av[n++] = "--url";
            av[n++] = url;
            if (env_int("HIST_SYNC_REPLICAS", 0) > 0) {
                av[n++] = "--sync-replicas";
                av[n++] = sync;
            }
            av[n++] = "lock";
            av[n++] = "h:mutex";
            av[n++] = "--wait";
            av[n++] = "2s";
            av[n++] = fixed ? "--lease" : "--watchdog";
            av[n++] = fixed ? "2s" : watchdog;
            av[n++] = "-q";
            av[n++] = "--";
            av[n++] = "sh";
            av[n++] = "-c";
            av[n++] = "exec \"$0\" \"$@\"";
            av[n++] = self;
            av[n++] = url;
            av[n++] = resport;
            av[n++] = "cli-hold";
            av[n++] = proc;
            av[n++] = inc;
            av[n++] = seed;
            av[n++] = hold;
            av[n++] = out;
            av[n++] = lv;
            av[n++] = ran;
            av[n] = NULL;
            int devnull = open("/dev/null", O_WRONLY);
            if (devnull >= 0 && !getenv("HIST_CLI_STDERR"))
                dup2(devnull, 2);
            execvp(baton, (char *const *)av);
            _exit(127);
        }
        int st = 0;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        }
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (access(ran, F_OK) == 0)
            emit("release", code == 0 ? "ok" : code == 122 ? "fail" : "info", 0, code, 0);
        else
            emit("acquire", code == 124 ? "fail" : "info", 0, code, lease_v);
        usleep((useconds_t)rnd_in(code == 124 || code == 0 ? 0 : 20000, 50000));
    }
    unlink(ran);
}

/* ------------------------------------------------------------- final reads ------- */

/* After the run (every client stopped): waits until no permit lease runs (the killed
 * holders' leases end within the watchdog's lease), then records the free permits as
 * "final" ok, VALUE = available, TOKEN = leases still running (info: unreadable). */
static void final_workload(int64_t until_us)
{
    emit("final", "invoke", 0, 0, 0);
    baton_client *c = open_client(until_us);
    if (!c) {
        emit("final", "info", 0, BATON_ECONN, 0);
        return;
    }
    int rc = BATON_ECONN;
    int64_t avail = -1, held = -1;
    if (strcmp(g_obj, "permits") == 0) {
        baton_permits *p;
        if (baton_permits_open(c, "h:permits", &p) != BATON_OK)
            abort();
        while ((rc = baton_permits_available(p, &avail, &held)) != BATON_OK || held > 0) {
            if (srv_us() > until_us)
                break;
            usleep(200000);
        }
        baton_permits_close(p);
    } else {
        baton_semaphore *s;
        if (baton_semaphore_open(c, "h:sem", &s) != BATON_OK)
            abort();
        while ((rc = baton_semaphore_available(s, &avail)) != BATON_OK && srv_us() < until_us)
            usleep(200000);
        held = 0;
        baton_semaphore_close(s);
    }
    emit("final", rc == BATON_OK ? "ok" : "info", held, rc, avail);
    baton_client_close(c);
}

int main(int argc, char **argv)
{
    if (argc == 11 && strcmp(argv[3], "cli-hold") == 0) {
        /* COMMAND of a cli client's baton lock: its obj is the mutex's */
        res_port = atoi(argv[2]);
        g_obj = "mutex";
        g_proc = atoi(argv[4]);
        g_inc = atoi(argv[5]);
        hf = fopen(argv[8], "a");
        if (!hf)
            return 2;
        res_connect();
        return cli_hold(argc, argv);
    }
    if (argc != 9) {
        fprintf(stderr,
                "usage: hist_client URL RESOURCE_PORT WORKLOAD PROC INC SEED DURATION_MS OUT\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    url = argv[1];
    res_port = atoi(argv[2]);
    g_obj = argv[3];
    bool final = strncmp(g_obj, "final:", 6) == 0;
    if (final)
        g_obj += 6;
    g_proc = atoi(argv[4]);
    g_inc = atoi(argv[5]);
    rng = strtoull(argv[6], NULL, 10) * 0x9E3779B97F4A7C15ull + (unsigned)g_proc * 7919u +
          (unsigned)g_inc * 104729u + 1;
    int64_t duration_ms = strtoll(argv[7], NULL, 10);
    hf = fopen(argv[8], "a");
    if (!hf) {
        perror(argv[8]);
        return 2;
    }
    watchdog_ms = env_int("HIST_WATCHDOG_MS", 3000);
    res_connect();
    int64_t until = srv_us() + duration_ms * 1000;
    if (final)
        final_workload(until);
    else if (strcmp(g_obj, "cli") == 0) {
        g_obj = "mutex"; /* the same lock as the library's mutex clients */
        static char self[512];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n <= 0)
            return 2;
        self[n] = 0;
        cli_workload(until, self, argv[2], argv[6], argv[8]);
    } else if (strcmp(g_obj, "mutex") == 0)
        lock_workload(W_MUTEX, until, NULL, NULL);
    else if (strcmp(g_obj, "fair") == 0)
        lock_workload(W_FAIR, until, NULL, NULL);
    else if (strcmp(g_obj, "rw") == 0)
        lock_workload(W_RW, until, NULL, NULL);
    else if (strcmp(g_obj, "rwshared") == 0) {
        g_obj = "rw"; /* the rw clients' lock, its events under rw */
        rw_shared_workload(until);
    } else if (strcmp(g_obj, "redlock") == 0)
        redlock_workload(until);
    else if (strcmp(g_obj, "mutexshared") == 0) {
        g_obj = "mutex"; /* the mutex clients' lock, its events under mutex */
        pair_workload(until, false);
    } else if (strcmp(g_obj, "semshared") == 0) {
        g_obj = "sem";
        pair_workload(until, true);
    } else if (strcmp(g_obj, "sem") == 0)
        sem_workload(until, NULL);
    else if (strcmp(g_obj, "permits") == 0)
        permits_workload(until);
    else if (strcmp(g_obj, "latch") == 0)
        latch_workload(until, LATCH_K);
    else if (strcmp(g_obj, "elect") == 0)
        election_workload(until);
    else if (strcmp(g_obj, "barrier") == 0)
        barrier_workload(until);
    else {
        fprintf(stderr, "hist_client: unknown workload %s\n", g_obj);
        return 2;
    }
    fclose(hf);
    redisFree(res);
    return 0;
}
