/*
 * The fair lock against a real redis-server: FIFO order across threads and processes, strict
 * turns under contention, a killed waiter skipped within fair_wait_ms, live waiters kept
 * behind a long holder, timed-out waiters that leave the queue as it was, the plain lock's
 * verbs (reentrancy, TTL, foreign release, bad input, wrong types), and clients whose wall
 * clocks disagree by hours.
 *
 * The skewed clocks come from this file's own clock_gettime(), gettimeofday() and time(),
 * which take precedence over the C library's for the whole program (the library is linked
 * in statically): they shift the wall clock by wall_skew_s, which only the child processes
 * of that test set. The monotonic clock, which baton uses for its local waits and which is
 * never compared across machines, is left alone.
 */
#define _GNU_SOURCE
#include "helper.h"
#include "internal.h"
#include "lockbase.h" /* the lock handle's base */

#include "new_assert.h"
#include <ctype.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

TestSuite(fairlock, .timeout = 60);

/* ---------------------------------------------------------------- skewed wall clock -- */

static volatile long wall_skew_s; /* set in a child process only, before any thread */

int clock_gettime(clockid_t id, struct timespec *ts)
{
    if (syscall(SYS_clock_gettime, id, ts) != 0)
        return -1;
    if (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)
        ts->tv_sec += wall_skew_s;
    return 0;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
    (void)tz;
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
        return -1;
    tv->tv_sec = ts.tv_sec; /* declared nonnull by the C library */
    tv->tv_usec = ts.tv_nsec / 1000;
    return 0;
}

time_t time(time_t *out)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out)
        *out = ts.tv_sec;
    return ts.tv_sec;
}

/* ---------------------------------------------------------------- helpers ------------ */

static baton_client *fair_client(int64_t fair_wait_ms, int64_t watchdog_ms)
{
    baton_options o;
    baton_options_init(&o);
    o.fair_wait_ms = fair_wait_ms;
    o.watchdog_ms = watchdog_ms;
    return th_client(&o);
}

/* For child processes: no Criterion assertions there. */
static baton_client *child_client(int64_t fair_wait_ms, int64_t watchdog_ms)
{
    baton_options o;
    baton_options_init(&o);
    o.url = th_url();
    o.fair_wait_ms = fair_wait_ms;
    o.watchdog_ms = watchdog_ms;
    baton_client *c = NULL;
    return baton_client_open(&o, &c) == BATON_OK ? c : NULL;
}

static baton_lock *fair_open(baton_client *c, const char *name)
{
    baton_lock *l = NULL;
    cr_assert(eq(int, baton_fairlock_open(c, name, &l), BATON_OK));
    return l;
}

static long long queue_len(redisContext *r, const char *name)
{
    return th_cmd_int(r, "LLEN redisson_lock_queue:{%s}", name);
}

static long long timeout_card(redisContext *r, const char *name)
{
    return th_cmd_int(r, "ZCARD redisson_lock_timeout:{%s}", name);
}

/* Waits (polling, it is a test) until the queue holds n owners. */
static void await_queue_len(redisContext *r, const char *name, long long n)
{
    int64_t until = th_ms() + 10000;
    while (queue_len(r, name) != n) {
        cr_assert(lt(i64, th_ms(), until), "queue of %s never reached %lld (now %lld)", name, n,
                  queue_len(r, name));
        th_sleep_ms(5);
    }
}

/* Asserts the queue holds exactly these owners, head first, joined by spaces. */
static void assert_queue(redisContext *r, const char *name, const char *expect)
{
    redisReply *rep = th_cmd(r, "LRANGE redisson_lock_queue:{%s} 0 -1", name);
    cr_assert(eq(int, rep->type, REDIS_REPLY_ARRAY));
    size_t len = 1;
    for (size_t i = 0; i < rep->elements; i++)
        len += rep->element[i]->len + 1;
    char *got = calloc(1, len);
    for (size_t i = 0; i < rep->elements; i++) {
        if (i)
            strcat(got, " ");
        strcat(got, rep->element[i]->str);
    }
    freeReplyObject(rep);
    cr_assert(eq(str, got, (char *)expect));
    free(got);
}

/* Asserts the list at key is "0", "1", ... "n-1": the order in which owners acquired. */
static void assert_order(redisContext *r, const char *key, int n)
{
    redisReply *rep = th_cmd(r, "LRANGE %s 0 -1", key);
    cr_assert(eq(int, rep->type, REDIS_REPLY_ARRAY));
    char got[256] = "", want[256] = "";
    for (size_t i = 0; i < rep->elements && strlen(got) < sizeof got - 16; i++)
        snprintf(got + strlen(got), sizeof got - strlen(got), i ? " %s" : "%s",
                 rep->element[i]->str);
    for (int i = 0; i < n; i++)
        snprintf(want + strlen(want), sizeof want - strlen(want), i ? " %d" : "%d", i);
    freeReplyObject(rep);
    cr_assert(eq(str, got, want));
}

static void assert_queue_keys_gone(redisContext *r, const char *name)
{
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS redisson_lock_queue:{%s}", name), 0));
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS redisson_lock_timeout:{%s}", name), 0));
}

static int64_t server_ms(redisContext *r)
{
    redisReply *rep = th_cmd(r, "TIME");
    int64_t ms = atoll(rep->element[0]->str) * 1000 + atoll(rep->element[1]->str) / 1000;
    freeReplyObject(rep);
    return ms;
}

/* ---------------------------------------------------------------- FIFO order --------- */

typedef struct orderer {
    baton_lock *lock;
    int64_t wait_ms, lease_ms;
    atomic_int *next; /* acquisition counter shared by the test's threads */
    int rank;         /* this thread's place in the order of acquisition */
    int rc;
    int64_t at_ms; /* when it acquired */
} orderer;

static void *order_thread(void *arg)
{
    orderer *o = arg;
    o->rc = baton_lock_try_acquire(o->lock, o->wait_ms, o->lease_ms);
    o->at_ms = th_ms();
    if (o->rc == BATON_OK)
        o->rank = atomic_fetch_add(o->next, 1);
    return NULL;
}

Test(fairlock, eight_threads_acquire_in_the_order_they_asked)
{
    baton_client *c = th_client(NULL);
    char *name = th_name("fl-threads");
    baton_lock *l = fair_open(c, name);
    atomic_int next = 0;
    orderer o[8];
    pthread_t t[8];
    for (int i = 0; i < 8; i++) {
        o[i] = (orderer){l, 10000, 1000, &next, -1, -100, 0};
        pthread_create(&t[i], NULL, order_thread, &o[i]);
        th_sleep_ms(100);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
        cr_assert(eq(int, o[i].rc, BATON_OK), "thread %d: %s", i, baton_err_name(o[i].rc));
        cr_assert(eq(int, o[i].rank, i), "thread %d acquired as number %d", i, o[i].rank);
        /* each took over when its predecessor's 1 s lease ran out, told by no message. The
         * stamps are taken when try_acquire returns, so a predecessor seen late (a slow
         * wake-up, a sanitizer build) shortens the measured gap by that much: 900, not 1000 */
        int64_t gap = i ? o[i].at_ms - o[i - 1].at_ms : 0;
        if (i) {
            cr_assert(ge(i64, gap, 900), "thread %d took over after %lld ms", i, (long long)gap);
            cr_assert(le(i64, gap, 1300), "thread %d took over after %lld ms", i, (long long)gap);
        }
    }
    redisContext *r = th_redis();
    assert_queue_keys_gone(r, name);
    redisFree(r);
    baton_lock_close(l);
    baton_client_close(c);
    free(name);
}

typedef struct proc_arg {
    const char *name;
    const char *order_key;
    int index;
} proc_arg;

/* Child: take the lock (lease 1 s, never released), then append its index to the order. */
static int order_process(void *arg)
{
    proc_arg *a = arg;
    baton_client *c = child_client(0, 0);
    baton_lock *l;
    if (!c || baton_fairlock_open(c, a->name, &l) != BATON_OK)
        return 100;
    int rc = baton_lock_try_acquire(l, 10000, 1000);
    if (rc != BATON_OK)
        return 101;
    struct timeval tv = {5, 0};
    redisContext *r = redisConnectWithTimeout("127.0.0.1", th_port(), tv);
    redisReply *rep = r ? redisCommand(r, "RPUSH %s %d", a->order_key, a->index) : NULL;
    if (!rep)
        return 102;
    freeReplyObject(rep);
    redisFree(r);
    baton_lock_close(l);
    baton_client_close(c);
    return 0;
}

Test(fairlock, eight_processes_acquire_in_the_order_they_asked)
{
    char *name = th_name("fl-procs"), *order = th_name("fl-procs-order");
    proc_arg a[8];
    pid_t pids[8];
    for (int i = 0; i < 8; i++) {
        a[i] = (proc_arg){name, order, i};
        pids[i] = th_fork(order_process, &a[i]);
        th_sleep_ms(100);
    }
    for (int i = 0; i < 8; i++)
        cr_assert(eq(int, th_wait(pids[i]), 0), "process %d", i);
    redisContext *r = th_redis();
    assert_order(r, order, 8);
    assert_queue_keys_gone(r, name);
    redisFree(r);
    free(name);
    free(order);
}

/* ---------------------------------------------------------------- contention --------- */

#define ROUNDS 200
#define CONTENDERS 8

typedef struct arena {
    baton_lock *locks[2]; /* two clients, four threads on each */
    atomic_int inside;    /* holders right now: more than 1 is a broken lock */
    atomic_int overlaps;
    /* the records below are written by the holder; the mutex is for the memory model
     * only (the lock's exclusion is checked by `inside`) */
    pthread_mutex_t mu;
    int total;
    int seq[CONTENDERS * ROUNDS];
    int64_t handoff_us[CONTENDERS * ROUNDS];
    int64_t released_us; /* when the last holder started its release */
    int count[CONTENDERS];
    int errors[CONTENDERS];
    int stalls; /* releases made before every other thread was queued again */
} arena;

typedef struct contender {
    arena *a;
    int id;
} contender;

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Constant contention, literally: the holder releases once every other thread is queued
 * (a thread that released a moment ago may not have asked again yet: one that a busy machine
 * descheduled between its release and its next request would rightly lose its turn to one
 * that asked first). Gives up waiting after a second, counted as a stall. */
static void await_others(redisContext *r, const char *name, int *stalls)
{
    int64_t until = th_ms() + 1000;
    for (;;) {
        redisReply *rep = redisCommand(r, "LLEN redisson_lock_queue:{%s}", name);
        long long n = rep && rep->type == REDIS_REPLY_INTEGER ? rep->integer : -1;
        if (rep)
            freeReplyObject(rep);
        if (n >= CONTENDERS - 1)
            return;
        if (th_ms() > until) {
            (*stalls)++;
            return;
        }
    }
}

static void *contend_thread(void *arg)
{
    contender *ct = arg;
    arena *a = ct->a;
    baton_lock *l = a->locks[ct->id % 2];
    redisContext *r = th_redis();
    for (;;) {
        int rc = baton_lock_try_acquire(l, 30000, BATON_LEASE_WATCHDOG);
        int64_t got = now_us();
        pthread_mutex_lock(&a->mu);
        if (rc != BATON_OK) {
            a->errors[ct->id]++;
            pthread_mutex_unlock(&a->mu);
            break;
        }
        if (atomic_fetch_add(&a->inside, 1) != 0)
            atomic_fetch_add(&a->overlaps, 1);
        bool done = a->total >= CONTENDERS * ROUNDS;
        if (!done) {
            int n = a->total++;
            a->seq[n] = ct->id;
            a->handoff_us[n] = got - a->released_us;
            a->count[ct->id]++;
            await_others(r, baton_lock_name(l), &a->stalls);
        }
        atomic_fetch_sub(&a->inside, 1);
        a->released_us = now_us();
        pthread_mutex_unlock(&a->mu);
        /* release and immediately ask again */
        rc = baton_lock_release(l);
        if (rc != BATON_OK) {
            pthread_mutex_lock(&a->mu);
            a->errors[ct->id]++;
            pthread_mutex_unlock(&a->mu);
        }
        if (done)
            break;
    }
    redisFree(r);
    return NULL;
}

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return a < b ? -1 : a > b;
}

/* Sum of the calls of commands in INFO commandstats: those clients sent (script runs,
 * subscriptions, pings) if sent_only, else every command executed, including those the
 * scripts ran inside the server; the test's own LLEN and INFO are left out. */
static long long command_calls(redisContext *r, bool sent_only)
{
    static const char *const sent[] = {"evalsha", "eval", "subscribe", "unsubscribe", "ping"};
    redisReply *rep = th_cmd(r, "INFO commandstats");
    long long sum = 0;
    for (const char *p = strstr(rep->str, "cmdstat_"); p; p = strstr(p + 1, "cmdstat_")) {
        const char *name = p + strlen("cmdstat_"), *colon = strchr(name, ':');
        const char *calls = strstr(name, "calls=");
        if (!colon || !calls)
            break;
        size_t len = (size_t)(colon - name);
        bool count = !sent_only;
        for (size_t i = 0; i < sizeof sent / sizeof *sent; i++)
            if (strlen(sent[i]) == len && strncmp(name, sent[i], len) == 0)
                count = true;
        if ((len == 4 && strncmp(name, "llen", 4) == 0) ||
            (len == 4 && strncmp(name, "info", 4) == 0))
            count = false;
        if (count)
            sum += atoll(calls + strlen("calls="));
    }
    freeReplyObject(rep);
    return sum;
}

Test(fairlock, constant_contention_takes_strict_turns, .timeout = 180)
{
    baton_client *c[2] = {th_client(NULL), th_client(NULL)}, *gate = th_client(NULL);
    char *name = th_name("fl-contend");
    static arena a; /* big: not on the stack */
    memset(&a, 0, sizeof a);
    pthread_mutex_init(&a.mu, NULL);
    a.locks[0] = fair_open(c[0], name);
    a.locks[1] = fair_open(c[1], name);
    baton_lock *g = fair_open(gate, name);
    redisContext *r = th_redis();
    /* Everyone queues behind the gate first, so every acquisition below has 7 waiters. */
    cr_assert(eq(int, baton_lock_acquire(g, BATON_LEASE_WATCHDOG), BATON_OK));
    contender ct[CONTENDERS];
    pthread_t t[CONTENDERS];
    for (int i = 0; i < CONTENDERS; i++) {
        ct[i] = (contender){&a, i};
        pthread_create(&t[i], NULL, contend_thread, &ct[i]);
        await_queue_len(r, name, i + 1);
    }
    long long cmds0 = command_calls(r, false), sent0 = command_calls(r, true);
    int64_t t0 = th_ms();
    pthread_mutex_lock(&a.mu);
    a.released_us = now_us();
    pthread_mutex_unlock(&a.mu);
    cr_assert(eq(int, baton_lock_release(g), BATON_OK));
    for (int i = 0; i < CONTENDERS; i++)
        pthread_join(t[i], NULL);
    int64_t took = th_ms() - t0;
    long long cmds = command_calls(r, false) - cmds0, sent = command_calls(r, true) - sent0;

    cr_assert(eq(int, atomic_load(&a.overlaps), 0), "two holders at once");
    cr_assert(eq(int, a.stalls, 0), "a thread took over a second to ask again");
    int min = a.count[0], max = a.count[0];
    for (int i = 0; i < CONTENDERS; i++) {
        cr_assert(eq(int, a.errors[i], 0), "thread %d", i);
        if (a.count[i] < min)
            min = a.count[i];
        if (a.count[i] > max)
            max = a.count[i];
    }
    cr_assert(eq(int, a.total, CONTENDERS *ROUNDS));
    cr_assert(le(int, max - min, 1), "per-thread counts from %d to %d", min, max);
    for (int n = 1; n < a.total; n++)
        cr_assert(ne(int, a.seq[n], a.seq[n - 1]), "thread %d acquired twice in a row at %d",
                  a.seq[n], n);

    /* Handoff latency: a release started -> the next holder's acquire returned. */
    int64_t *h = a.handoff_us;
    qsort(h, (size_t)a.total, sizeof *h, cmp_i64);
    fprintf(stderr,
            "fairlock contention: %d acquisitions by %d threads in %lld ms; handoff p50 %.2f ms, "
            "p99 %.2f ms, max %.2f ms; per acquisition %.2f commands sent, %.1f executed "
            "(with those inside scripts)\n",
            a.total, CONTENDERS, (long long)took, h[a.total / 2] / 1000.0,
            h[a.total * 99 / 100] / 1000.0, h[a.total - 1] / 1000.0, (double)sent / a.total,
            (double)cmds / a.total);
    /* bench/RESULTS.md: 54 before the fast paths, 24 after; 26 with the holder's host:pid
     * in its side hash (HSET and PEXPIRE at each acquisition); issue 49: 20 at most, with
     * that hash gone (the client's record has the host) and no second run of a wait whose
     * own channel's subscription still lingers from its last wait; the plain lock takes 18 */
    cr_assert(le(i64, cmds, 20LL * a.total), "%.1f commands executed per acquisition",
              (double)cmds / a.total);
    assert_queue_keys_gone(r, name);
    redisFree(r);
    baton_lock_close(a.locks[0]);
    baton_lock_close(a.locks[1]);
    baton_lock_close(g);
    for (int i = 0; i < 2; i++)
        baton_client_close(c[i]);
    baton_client_close(gate);
    free(name);
}

/* ---------------------------------------------------------------- dead and live waiters */

typedef struct timed {
    baton_lock *lock;
    int64_t wait_ms;
    int64_t hold_ms;       /* hold this long after acquiring, then release */
    const char *order_key; /* if set: RPUSH index there once acquired */
    int index;
    char owner[BATON__OWNER_LEN];
    atomic_bool started; /* owner is known */
    int rc;
    int64_t at_ms; /* when acquired */
} timed;

static void *timed_thread(void *arg)
{
    timed *w = arg;
    baton__owner(w->lock->client, w->owner, sizeof w->owner);
    atomic_store(&w->started, true);
    w->rc = baton_lock_try_acquire(w->lock, w->wait_ms, BATON_LEASE_WATCHDOG);
    w->at_ms = th_ms();
    if (w->rc != BATON_OK)
        return NULL;
    if (w->order_key) {
        redisContext *r = th_redis();
        freeReplyObject(th_cmd(r, "RPUSH %s %d", w->order_key, w->index));
        redisFree(r);
    }
    th_sleep_ms(w->hold_ms);
    w->rc = baton_lock_release(w->lock);
    return NULL;
}

typedef struct queued_child {
    const char *name;
    const char *order_key; /* RPUSH index there once acquired, then release */
    int index;
    int64_t fair_wait_ms;
    long skew_s; /* wall clock skew of this process */
    int go[2];   /* the child waits for a byte here before it starts */
    int out[2];  /* the child writes its owner here before it queues */
    pid_t pid;
} queued_child;

static int queue_process(void *arg)
{
    queued_child *q = arg;
    char go;
    close(q->go[1]);
    close(q->out[0]);
    if (read(q->go[0], &go, 1) != 1)
        return 98;
    wall_skew_s = q->skew_s;
    if (q->skew_s) {
        /* the hook is active: this process's wall clock disagrees with the real one */
        struct timespec real;
        syscall(SYS_clock_gettime, CLOCK_REALTIME, &real);
        long diff = (long)time(NULL) - (long)real.tv_sec - q->skew_s;
        if (diff < -1 || diff > 1)
            return 99;
    }
    baton_client *c = child_client(q->fair_wait_ms, 0);
    baton_lock *l;
    if (!c || baton_fairlock_open(c, q->name, &l) != BATON_OK)
        return 100;
    char owner[BATON__OWNER_LEN] = {0};
    baton__owner(c, owner, sizeof owner);
    if (write(q->out[1], owner, sizeof owner) != (ssize_t)sizeof owner)
        return 101;
    if (baton_lock_try_acquire(l, 60000, BATON_LEASE_WATCHDOG) != BATON_OK)
        return 102;
    if (q->order_key) {
        struct timeval tv = {5, 0};
        redisContext *r = redisConnectWithTimeout("127.0.0.1", th_port(), tv);
        redisReply *rep = r ? redisCommand(r, "RPUSH %s %d", q->order_key, q->index) : NULL;
        if (!rep)
            return 103;
        freeReplyObject(rep);
        redisFree(r);
    }
    th_sleep_ms(50);
    if (baton_lock_release(l) != BATON_OK)
        return 104;
    baton_lock_close(l);
    baton_client_close(c);
    return 0;
}

/* Forks a queued_child, waiting for its start. Children are forked before the test starts
 * any thread (ThreadSanitizer cannot follow a child that starts threads after a fork of a
 * multi-threaded process). */
static void fork_queued_child(queued_child *q)
{
    cr_assert(eq(int, pipe(q->go), 0));
    cr_assert(eq(int, pipe(q->out), 0));
    q->pid = th_fork(queue_process, q);
    close(q->go[0]);
    close(q->out[1]);
}

/* Lets the child go and reads its owner: it queues next. */
static void start_queued_child(queued_child *q, char owner[BATON__OWNER_LEN])
{
    char go = 1;
    cr_assert(eq(sz, (size_t)write(q->go[1], &go, 1), 1));
    close(q->go[1]);
    cr_assert(eq(sz, (size_t)read(q->out[0], owner, BATON__OWNER_LEN), BATON__OWNER_LEN));
    close(q->out[0]);
}

#define FAIR_WAIT 1500

Test(fairlock, killed_waiter_is_skipped_within_fair_wait)
{
    char *name = th_name("fl-kill9");
    queued_child q = {.name = name, .fair_wait_ms = FAIR_WAIT};
    fork_queued_child(&q);
    baton_client *hc = fair_client(FAIR_WAIT, 0), *wc = fair_client(FAIR_WAIT, 0);
    baton_lock *holder = fair_open(hc, name), *l = fair_open(wc, name);
    redisContext *r = th_redis();
    cr_assert(eq(int, baton_lock_acquire(holder, BATON_LEASE_WATCHDOG), BATON_OK));

    char child_owner[BATON__OWNER_LEN];
    start_queued_child(&q, child_owner);
    pid_t pid = q.pid;
    await_queue_len(r, name, 1);
    timed w = {.lock = l, .wait_ms = 30000, .hold_ms = 0, .rc = -100};
    pthread_t t;
    pthread_create(&t, NULL, timed_thread, &w);
    await_queue_len(r, name, 2);
    char *expect = NULL;
    cr_assert(asprintf(&expect, "%s %s", child_owner, w.owner) > 0);
    assert_queue(r, name, expect);

    th_sleep_ms(FAIR_WAIT); /* the child renewed its place meanwhile */
    assert_queue(r, name, expect);
    kill(pid, SIGKILL);
    cr_assert(eq(int, th_wait(pid), 128 + SIGKILL));
    int64_t released = th_ms();
    cr_assert(eq(int, baton_lock_release(holder), BATON_OK));
    pthread_join(t, NULL);
    cr_assert(eq(int, w.rc, BATON_OK));
    int64_t took = w.at_ms - released;
    fprintf(stderr,
            "fairlock: killed waiter skipped, next waiter held the lock %lld ms after "
            "the release (fair_wait_ms %d)\n",
            (long long)took, FAIR_WAIT);
    cr_assert(le(i64, took, FAIR_WAIT + 1000), "next waiter got the lock %lld ms after release",
              (long long)took);
    assert_queue_keys_gone(r, name);
    redisFree(r);
    baton_lock_close(holder);
    baton_lock_close(l);
    baton_client_close(hc);
    baton_client_close(wc);
    free(name);
    free(expect);
}

Test(fairlock, live_waiters_keep_their_places_behind_a_long_holder)
{
    char *name = th_name("fl-longhold"), *order = th_name("fl-longhold-order");
    /* five waiters: threads (each on its own client) and processes, alternating */
    enum { N = 5 };
    queued_child q[N];
    for (int i = 1; i < N; i += 2) {
        q[i] =
            (queued_child){.name = name, .order_key = order, .index = i, .fair_wait_ms = FAIR_WAIT};
        fork_queued_child(&q[i]);
    }
    baton_client *hc = fair_client(FAIR_WAIT, 1500);
    baton_lock *holder = fair_open(hc, name);
    redisContext *r = th_redis();
    cr_assert(eq(int, baton_lock_acquire(holder, BATON_LEASE_WATCHDOG), BATON_OK));

    baton_client *wc[N] = {0};
    baton_lock *wl[N] = {0};
    timed w[N];
    pthread_t t[N];
    char owners[N][BATON__OWNER_LEN];
    for (int i = 0; i < N; i++) {
        if (i % 2 == 0) {
            wc[i] = fair_client(FAIR_WAIT, 0);
            wl[i] = fair_open(wc[i], name);
            w[i] = (timed){.lock = wl[i],
                           .wait_ms = 60000,
                           .hold_ms = 50,
                           .order_key = order,
                           .index = i,
                           .rc = -100};
            pthread_create(&t[i], NULL, timed_thread, &w[i]);
            while (!atomic_load(&w[i].started))
                th_sleep_ms(1);
            strcpy(owners[i], w[i].owner);
        } else {
            start_queued_child(&q[i], owners[i]);
        }
        await_queue_len(r, name, i + 1);
    }
    char expect[N * BATON__OWNER_LEN] = "";
    for (int i = 0; i < N; i++) {
        if (i)
            strcat(expect, " ");
        strcat(expect, owners[i]);
    }

    /* 4 x fair_wait_ms held (the watchdog renews a 1.5 s lease): nobody loses a place */
    int64_t until = th_ms() + 4 * FAIR_WAIT;
    while (th_ms() < until) {
        assert_queue(r, name, expect);
        cr_assert(eq(i64, timeout_card(r, name), N));
        th_sleep_ms(250);
    }
    for (int i = 0; i < N; i++) {
        /* the server's time on either side: a renewal may land between the two reads */
        int64_t before = server_ms(r);
        int64_t deadline = th_cmd_int(r, "ZSCORE redisson_lock_timeout:{%s} %s", name, owners[i]);
        int64_t after = server_ms(r);
        cr_assert(gt(i64, deadline, before), "waiter %d's place has lapsed", i);
        cr_assert(le(i64, deadline, after + FAIR_WAIT), "waiter %d", i);
    }
    bool held = false;
    cr_assert(eq(int, baton_lock_is_held_by_current_thread(holder, &held), BATON_OK));
    cr_assert(held);

    cr_assert(eq(int, baton_lock_release(holder), BATON_OK));
    for (int i = 0; i < N; i++) {
        if (i % 2 == 0) {
            pthread_join(t[i], NULL);
            cr_assert(eq(int, w[i].rc, BATON_OK), "waiter %d", i);
        } else {
            cr_assert(eq(int, th_wait(q[i].pid), 0), "waiter %d", i);
        }
    }
    assert_order(r, order, N);
    assert_queue_keys_gone(r, name);
    redisFree(r);
    for (int i = 0; i < N; i++) {
        baton_lock_close(wl[i]);
        baton_client_close(wc[i]);
    }
    baton_lock_close(holder);
    baton_client_close(hc);
    free(name);
    free(order);
}

/* ---------------------------------------------------------------- giving up ---------- */

Test(fairlock, timed_out_waiter_leaves_the_queue_as_it_was)
{
    baton_client *hc = fair_client(FAIR_WAIT, 0), *ac = fair_client(FAIR_WAIT, 0),
                 *mc = fair_client(FAIR_WAIT, 0), *cc = fair_client(FAIR_WAIT, 0);
    char *name = th_name("fl-giveup"), *order = th_name("fl-giveup-order");
    baton_lock *holder = fair_open(hc, name), *la = fair_open(ac, name), *lm = fair_open(mc, name),
               *lc = fair_open(cc, name);
    redisContext *r = th_redis();
    cr_assert(eq(int, baton_lock_acquire(holder, BATON_LEASE_WATCHDOG), BATON_OK));

    /* one try never queues */
    cr_assert(eq(int, baton_lock_try_acquire(lm, 0, 1000), BATON_ETIMEDOUT));
    cr_assert(eq(i64, queue_len(r, name), 0));
    cr_assert(eq(i64, timeout_card(r, name), 0));

    timed a = {
        .lock = la, .wait_ms = 30000, .hold_ms = 50, .order_key = order, .index = 0, .rc = -100};
    pthread_t ta, tc;
    pthread_create(&ta, NULL, timed_thread, &a);
    await_queue_len(r, name, 1);
    cr_assert(eq(i64, timeout_card(r, name), 1));

    /* a waiter at the tail times out */
    char mine[BATON__OWNER_LEN];
    baton__owner(mc, mine, sizeof mine);
    int64_t t0 = th_ms();
    cr_assert(eq(int, baton_lock_try_acquire(lm, 1000, BATON_LEASE_WATCHDOG), BATON_ETIMEDOUT));
    int64_t took = th_ms() - t0;
    cr_assert(ge(i64, took, 990), "%lld ms", (long long)took);
    cr_assert(le(i64, took, 1400), "%lld ms", (long long)took);
    cr_assert(ne(str, (char *)baton_client_errmsg(mc), ""));
    cr_assert(eq(i64, queue_len(r, name), 1));
    cr_assert(eq(i64, timeout_card(r, name), 1));
    cr_assert(eq(int, baton__sub_count(mc), 0));
    cr_assert(eq(i64, th_numsub(r, "redisson_lock__channel:{%s}:%s", name, mine), 0));

    /* a waiter in the middle times out: the one behind it keeps its place */
    timed m = {.lock = lm, .wait_ms = 1500, .rc = -100};
    pthread_t tm;
    pthread_create(&tm, NULL, timed_thread, &m);
    await_queue_len(r, name, 2);
    timed cw = {
        .lock = lc, .wait_ms = 30000, .hold_ms = 50, .order_key = order, .index = 1, .rc = -100};
    pthread_create(&tc, NULL, timed_thread, &cw);
    await_queue_len(r, name, 3);
    char *expect = NULL;
    cr_assert(asprintf(&expect, "%s %s %s", a.owner, m.owner, cw.owner) > 0);
    assert_queue(r, name, expect);
    pthread_join(tm, NULL);
    cr_assert(eq(int, m.rc, BATON_ETIMEDOUT));
    free(expect);
    cr_assert(asprintf(&expect, "%s %s", a.owner, cw.owner) > 0);
    assert_queue(r, name, expect);
    cr_assert(eq(i64, timeout_card(r, name), 2));

    cr_assert(eq(int, baton_lock_release(holder), BATON_OK));
    pthread_join(ta, NULL);
    pthread_join(tc, NULL);
    cr_assert(eq(int, a.rc, BATON_OK));
    cr_assert(eq(int, cw.rc, BATON_OK));
    assert_order(r, order, 2);
    assert_queue_keys_gone(r, name);
    cr_assert(eq(int, baton_lock_try_acquire(lm, 0, 1000), BATON_OK));
    cr_assert(eq(int, baton_lock_release(lm), BATON_OK));
    redisFree(r);
    baton_lock_close(holder);
    baton_lock_close(la);
    baton_lock_close(lm);
    baton_lock_close(lc);
    baton_client_close(hc);
    baton_client_close(ac);
    baton_client_close(mc);
    baton_client_close(cc);
    free(name);
    free(order);
    free(expect);
}

Test(fairlock, force_release_wakes_the_head_and_keeps_the_queue)
{
    baton_client *hc = th_client(NULL), *wc = th_client(NULL), *fc = th_client(NULL);
    char *name = th_name("fl-force");
    baton_lock *holder = fair_open(hc, name), *l = fair_open(wc, name), *f = fair_open(fc, name);
    redisContext *r = th_redis();
    cr_assert(eq(int, baton_lock_acquire(holder, BATON_LEASE_WATCHDOG), BATON_OK));
    timed w = {.lock = l, .wait_ms = 20000, .hold_ms = 0, .rc = -100};
    pthread_t t;
    pthread_create(&t, NULL, timed_thread, &w);
    await_queue_len(r, name, 1);
    bool was = false;
    int64_t t0 = th_ms();
    cr_assert(eq(int, baton_lock_force_release(f, &was), BATON_OK));
    cr_assert(was);
    pthread_join(t, NULL);
    cr_assert(eq(int, w.rc, BATON_OK));
    cr_assert(le(i64, w.at_ms - t0, 500), "head woke %lld ms after", (long long)(w.at_ms - t0));
    cr_assert(eq(int, baton_lock_release(holder), BATON_ENOTHELD));
    cr_assert(eq(int, baton_lock_force_release(f, &was), BATON_OK));
    cr_assert(not(was));
    assert_queue_keys_gone(r, name);
    redisFree(r);
    baton_lock_close(holder);
    baton_lock_close(l);
    baton_lock_close(f);
    baton_client_close(hc);
    baton_client_close(wc);
    baton_client_close(fc);
    free(name);
}

/* ---------------------------------------------------------------- wake-ups ---------- */

Test(fairlock, each_release_wakes_the_head_only)
{
    baton_client *hc = th_client(NULL);
    char *name = th_name("fl-herd");
    baton_lock *holder = fair_open(hc, name);
    redisContext *r = th_redis(), *sub = th_redis();
    freeReplyObject(th_cmd(sub, "PSUBSCRIBE redisson_lock__channel:{%s}:*", name));
    cr_assert(eq(int, baton_lock_acquire(holder, BATON_LEASE_WATCHDOG), BATON_OK));
    enum { N = 3 };
    baton_client *wc[N];
    baton_lock *wl[N];
    timed w[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        wc[i] = th_client(NULL);
        wl[i] = fair_open(wc[i], name);
        w[i] = (timed){.lock = wl[i], .wait_ms = 20000, .hold_ms = 50, .rc = -100};
        pthread_create(&t[i], NULL, timed_thread, &w[i]);
        await_queue_len(r, name, i + 1);
    }
    cr_assert(eq(int, baton_lock_release(holder), BATON_OK));
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        cr_assert(eq(int, w[i].rc, BATON_OK));
    }
    /* one message per handoff, each on the channel of the waiter whose turn it was */
    for (int i = 0; i < N; i++) {
        void *v = NULL;
        cr_assert(eq(int, redisGetReply(sub, &v), REDIS_OK), "%s", sub->errstr);
        redisReply *m = v;
        cr_assert(eq(sz, m->elements, 4));
        char *want = NULL;
        cr_assert(asprintf(&want, "redisson_lock__channel:{%s}:%s", name, w[i].owner) > 0);
        cr_assert(eq(str, m->element[2]->str, want), "message %d", i);
        cr_assert(eq(str, m->element[3]->str, "0"));
        free(want);
        freeReplyObject(m);
    }
    struct timeval tv = {0, 300000};
    redisSetTimeout(sub, tv);
    void *v = NULL;
    cr_assert(eq(int, redisGetReply(sub, &v), REDIS_ERR), "a message beyond the handoffs");
    redisFree(sub);
    redisFree(r);
    for (int i = 0; i < N; i++) {
        baton_lock_close(wl[i]);
        baton_client_close(wc[i]);
    }
    baton_lock_close(holder);
    baton_client_close(hc);
    free(name);
}

Test(fairlock, a_head_that_gives_up_hands_over_at_once)
{
    baton_client *c = th_client(NULL); /* fair_wait 5 s: renewals every 1.67 s */
    char *name = th_name("fl-handover");
    baton_lock *l = fair_open(c, name);
    redisContext *r = th_redis();
    /* a head that holds its place but does not take the free lock (a slow client) */
    freeReplyObject(th_cmd(r, "RPUSH redisson_lock_queue:{%s} ghost", name));
    freeReplyObject(th_cmd(r, "ZADD redisson_lock_timeout:{%s} %lld ghost", name,
                           (long long)server_ms(r) + 60000));
    timed w = {.lock = l, .wait_ms = 10000, .hold_ms = 0, .rc = -100};
    pthread_t t;
    pthread_create(&t, NULL, timed_thread, &w);
    await_queue_len(r, name, 2);
    th_sleep_ms(100); /* the waiter is asleep: the lock is free, but it is not its turn */
    cr_assert(eq(int, w.rc, -100));

    /* the head gives up, as fairlock_cancel does for a timed-out waiter */
    const baton__script *s = baton__script_find("fairlock_cancel");
    char *queue = NULL, *timeouts = NULL, *channel = NULL;
    cr_assert(asprintf(&queue, "redisson_lock_queue:{%s}", name) > 0);
    cr_assert(asprintf(&timeouts, "redisson_lock_timeout:{%s}", name) > 0);
    cr_assert(asprintf(&channel, "redisson_lock__channel:{%s}", name) > 0);
    int64_t t0 = th_ms();
    cr_assert(eq(i64,
                 th_cmd_int(r, "EVAL %b 4 %s %s %s %s ghost", s->body, s->len, name, queue,
                            timeouts, channel),
                 1));
    pthread_join(t, NULL);
    cr_assert(eq(int, w.rc, BATON_OK));
    cr_assert(le(i64, w.at_ms - t0, 300), "the next waiter took %lld ms",
              (long long)(w.at_ms - t0));
    assert_queue_keys_gone(r, name);
    redisFree(r);
    baton_lock_close(l);
    baton_client_close(c);
    free(queue);
    free(timeouts);
    free(channel);
    free(name);
}

Test(fairlock, a_multilock_takes_fair_members)
{
    baton_client *c = th_client(NULL), *wc = th_client(NULL);
    char *na = th_name("fl-multi-a"), *nb = th_name("fl-multi-b");
    baton_lock *fa = fair_open(c, na), *fb = fair_open(c, nb), *wa = fair_open(wc, na);
    baton_lock *members[2] = {fa, fb}, *m = NULL;
    redisContext *r = th_redis();
    cr_assert(eq(int, baton_multilock_open(members, 2, &m), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(m, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s %s", na, nb), 2));
    timed w = {.lock = wa, .wait_ms = 10000, .hold_ms = 0, .rc = -100};
    pthread_t t;
    pthread_create(&t, NULL, timed_thread, &w);
    await_queue_len(r, na, 1);
    int64_t t0 = th_ms();
    cr_assert(eq(int, baton_lock_release(m), BATON_OK));
    pthread_join(t, NULL);
    cr_assert(eq(int, w.rc, BATON_OK));
    cr_assert(le(i64, w.at_ms - t0, 500), "the queued waiter took %lld ms",
              (long long)(w.at_ms - t0));
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s %s", na, nb), 0));
    assert_queue_keys_gone(r, na);
    redisFree(r);
    baton_lock_close(m);
    baton_lock_close(fa);
    baton_lock_close(fb);
    baton_lock_close(wa);
    baton_client_close(c);
    baton_client_close(wc);
    free(na);
    free(nb);
}

/* ---------------------------------------------------------------- the lock verbs ----- */

static void *try_once_thread(void *arg)
{
    timed *w = arg;
    w->rc = baton_lock_try_acquire(w->lock, 0, 5000);
    return NULL;
}

static int other_thread_try(baton_lock *l)
{
    timed w = {.lock = l, .rc = -100};
    pthread_t t;
    pthread_create(&t, NULL, try_once_thread, &w);
    pthread_join(t, NULL);
    return w.rc;
}

static int64_t holds(baton_lock *l)
{
    int64_t n = -1;
    cr_assert(eq(int, baton_lock_hold_count(l, &n), BATON_OK));
    return n;
}

Test(fairlock, reentrancy_counts_holds_and_keeps_the_token)
{
    baton_client *c = th_client(NULL);
    char *name = th_name("fl-reentry");
    baton_lock *l = fair_open(c, name);
    redisContext *r = th_redis();
    cr_assert(eq(i64, holds(l), 0));
    cr_assert(eq(int, baton_lock_acquire(l, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(i64, holds(l), 1));
    long long token = th_cmd_int(r, "GET redisson_lock_token:{%s}", name);
    cr_assert(eq(i64, token, 1));
    cr_assert(eq(int, other_thread_try(l), BATON_ETIMEDOUT));
    cr_assert(eq(int, baton_lock_acquire(l, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(i64, holds(l), 2));
    cr_assert(eq(i64, th_cmd_int(r, "GET redisson_lock_token:{%s}", name), token));
    bool held = false;
    cr_assert(eq(int, baton_lock_is_held_by_current_thread(l, &held), BATON_OK));
    cr_assert(held);
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    cr_assert(eq(i64, holds(l), 1));
    cr_assert(eq(int, other_thread_try(l), BATON_ETIMEDOUT));
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    cr_assert(eq(i64, holds(l), 0));
    cr_assert(eq(int, baton_lock_is_held_by_current_thread(l, &held), BATON_OK));
    cr_assert(not(held));
    cr_assert(eq(int, baton_lock_release(l), BATON_ENOTHELD));
    cr_assert(eq(int, other_thread_try(l), BATON_OK)); /* that thread ended holding it */
    cr_assert(eq(i64, th_cmd_int(r, "GET redisson_lock_token:{%s}", name), token + 1));
    bool locked = false;
    cr_assert(eq(int, baton_lock_is_locked(l, &locked), BATON_OK));
    cr_assert(locked);
    assert_queue_keys_gone(r, name);
    redisFree(r);
    baton_lock_close(l);
    baton_client_close(c);
    free(name);
}

Test(fairlock, remaining_ttl_follows_the_explicit_lease)
{
    baton_client *c = fair_client(0, 3000);
    char *name = th_name("fl-ttl");
    baton_lock *l = fair_open(c, name);
    int64_t ttl = 0;
    for (int i = 0; i < 3; i++)
        cr_assert(eq(int, baton_lock_acquire(l, 10000), BATON_OK));
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    cr_assert(eq(int, baton_lock_remaining_ttl(l, &ttl), BATON_OK));
    /* the re-entrant releases re-applied the 10 s lease, not the 3 s watchdog lease */
    cr_assert(ge(i64, ttl, 9000));
    cr_assert(le(i64, ttl, 10000));
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    cr_assert(eq(int, baton_lock_remaining_ttl(l, &ttl), BATON_OK));
    cr_assert(eq(i64, ttl, -2));
    cr_assert(eq(int, baton_lock_acquire(l, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(int, baton_lock_remaining_ttl(l, &ttl), BATON_OK));
    cr_assert(gt(i64, ttl, 0));
    cr_assert(le(i64, ttl, 3000));
    th_sleep_ms(4000); /* the watchdog renews it past its lease */
    cr_assert(eq(int, baton_lock_remaining_ttl(l, &ttl), BATON_OK));
    cr_assert(gt(i64, ttl, 0));
    cr_assert(le(i64, ttl, 3000));
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    cr_assert(eq(int, baton_lock_remaining_ttl(l, &ttl), BATON_OK));
    cr_assert(eq(i64, ttl, -2));
    baton_lock_close(l);
    baton_client_close(c);
    free(name);
}

typedef struct lost_probe {
    atomic_int calls;
    _Atomic int64_t at_ms;
} lost_probe;

static void on_lost(baton_lock *l, void *arg)
{
    (void)l;
    lost_probe *p = arg;
    atomic_store(&p->at_ms, th_ms());
    atomic_fetch_add(&p->calls, 1);
}

Test(fairlock, fencing_tokens_and_lost_signals_work_as_for_the_plain_lock)
{
    baton_client *c = fair_client(FAIR_WAIT, 1500), *other = th_client(NULL);
    char *name = th_name("fl-fencing");
    baton_lock *l = fair_open(c, name), *o = fair_open(other, name);
    redisContext *r = th_redis();
    int64_t t1 = 0, t2 = 0, t3 = 0;
    cr_assert(eq(int, baton_lock_fencing_token(l, &t1), BATON_ENOTHELD));
    cr_assert(eq(int, baton_lock_acquire(l, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(int, baton_lock_fencing_token(l, &t1), BATON_OK));
    cr_assert(eq(i64, th_cmd_int(r, "GET redisson_lock_token:{%s}", name), t1));
    cr_assert(eq(int, baton_lock_acquire(l, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(int, baton_lock_fencing_token(l, &t2), BATON_OK));
    cr_assert(eq(i64, t2, t1));

    /* a queued waiter takes over with a higher token */
    timed w = {.lock = o, .wait_ms = 10000, .hold_ms = 0, .rc = -100};
    pthread_t t;
    pthread_create(&t, NULL, timed_thread, &w);
    await_queue_len(r, name, 1);
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    pthread_join(t, NULL);
    cr_assert(eq(int, w.rc, BATON_OK));
    cr_assert(gt(i64, th_cmd_int(r, "GET redisson_lock_token:{%s}", name), t1));

    /* the hold is deleted behind the holder's back: reported lost within a renewal */
    lost_probe probe = {0};
    int fd = -1;
    cr_assert(eq(int, baton_lock_set_lost_handler(l, on_lost, &probe), BATON_OK));
    cr_assert(eq(int, baton_lock_lost_fd(l, &fd), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(l, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(int, baton_lock_fencing_token(l, &t3), BATON_OK));
    cr_assert(gt(i64, t3, t1 + 1));
    bool was = false;
    int64_t forced = th_ms();
    cr_assert(eq(int, baton_lock_force_release(o, &was), BATON_OK));
    cr_assert(was);
    struct pollfd pf = {fd, POLLIN, 0};
    cr_assert(eq(int, poll(&pf, 1, 2000), 1), "the lost fd never became readable");
    for (int i = 0; i < 100 && atomic_load(&probe.calls) == 0; i++)
        th_sleep_ms(5);
    cr_assert(eq(int, atomic_load(&probe.calls), 1));
    cr_assert(le(i64, atomic_load(&probe.at_ms) - forced, 650),
              "reported %lld ms after the force release (renewal every 500 ms)",
              (long long)(atomic_load(&probe.at_ms) - forced));
    cr_assert(eq(int, baton_lock_fencing_token(l, &t3), BATON_ENOTHELD));
    cr_assert(eq(int, baton_lock_release(l), BATON_ENOTHELD));
    assert_queue_keys_gone(r, name);
    redisFree(r);
    baton_lock_close(l);
    baton_lock_close(o);
    baton_client_close(c);
    baton_client_close(other);
    free(name);
}

static void *release_thread(void *arg)
{
    timed *w = arg;
    w->rc = baton_lock_release(w->lock);
    return NULL;
}

Test(fairlock, release_by_a_non_holder_is_refused)
{
    baton_client *c = th_client(NULL), *c2 = th_client(NULL);
    char *name = th_name("fl-notheld");
    baton_lock *l = fair_open(c, name), *l2 = fair_open(c2, name), *plain = NULL;
    cr_assert(eq(int, baton_lock_release(l), BATON_ENOTHELD)); /* never taken */
    cr_assert(ne(str, (char *)baton_client_errmsg(c), ""));
    cr_assert(eq(int, baton_lock_acquire(l, 10000), BATON_OK));
    cr_assert(eq(int, baton_lock_release(l2), BATON_ENOTHELD)); /* another client */
    timed w = {.lock = l, .rc = -100};
    pthread_t t;
    pthread_create(&t, NULL, release_thread, &w); /* another thread, same client and handle */
    pthread_join(t, NULL);
    cr_assert(eq(int, w.rc, BATON_ENOTHELD));
    /* a plain lock on the same name sees the same hash */
    cr_assert(eq(int, baton_lock_open(c2, name, &plain), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(plain, 0, 1000), BATON_ETIMEDOUT));
    int64_t n = 0;
    cr_assert(eq(int, baton_lock_hold_count(l, &n), BATON_OK));
    cr_assert(eq(i64, n, 1), "the holder keeps its hold");
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    baton_lock_close(plain);
    baton_lock_close(l);
    baton_lock_close(l2);
    baton_client_close(c);
    baton_client_close(c2);
    free(name);
}

Test(fairlock, bad_input_is_rejected_and_nothing_is_sent)
{
    baton_client *c = th_client(NULL);
    baton_lock *l = NULL, *bad = (baton_lock *)0x1;
    char *name = th_name("fl-bad");
    char big[BATON_MAX_NAME_LEN + 2];
    memset(big, 'n', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    redisContext *r = th_redis();
    long long before = th_commands_processed(r);

    cr_assert(eq(int, baton_fairlock_open(NULL, name, &l), BATON_EINVAL));
    cr_assert(eq(int, baton_fairlock_open(c, NULL, &l), BATON_EINVAL));
    cr_assert(eq(int, baton_fairlock_open(c, "", &l), BATON_EINVAL));
    cr_assert(ne(str, (char *)baton_client_errmsg(c), ""));
    cr_assert(eq(int, baton_fairlock_open(c, big, &bad), BATON_EINVAL));
    cr_assert(eq(ptr, bad, NULL));
    cr_assert(eq(int, baton_fairlock_open(c, name, NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_fairlock_open(c, name, &l), BATON_OK));

    cr_assert(eq(int, baton_lock_acquire(l, -3), BATON_EINVAL)); /* 0: the watchdog (test_api) */
    cr_assert(ne(str, (char *)baton_client_errmsg(c), ""));
    cr_assert(eq(int, baton_lock_acquire(l, -7), BATON_EINVAL));
    cr_assert(eq(int, baton_lock_acquire(l, BATON_MAX_DURATION_MS + 1), BATON_EINVAL));
    cr_assert(eq(int, baton_lock_try_acquire(l, -2, 1000), BATON_EINVAL));
    cr_assert(eq(int, baton_lock_try_acquire(l, INT64_MAX, 1000), BATON_EINVAL));
    cr_assert(eq(int, baton_lock_try_acquire(l, 10, INT64_MIN), BATON_EINVAL));
    cr_assert(eq(int, baton_lock_is_locked(l, NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_lock_is_held_by_current_thread(l, NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_lock_hold_count(l, NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_lock_remaining_ttl(l, NULL), BATON_EINVAL));
    cr_assert(eq(str, (char *)baton_lock_name(l), name));

    /* only the INFO of `before` itself was processed in between */
    cr_assert(eq(i64, th_commands_processed(r) - before, 1));
    redisFree(r);
    baton_lock_close(l);
    baton_client_close(c);
    free(name);
}

Test(fairlock, wrong_type_keys_are_an_error_and_left_alone)
{
    baton_client *c = th_client(NULL);
    char *name = th_name("fl-wrongtype"), *name2 = th_name("fl-wrongqueue");
    redisContext *r = th_redis();
    freeReplyObject(th_cmd(r, "SET %s precious", name));
    baton_lock *l = fair_open(c, name);
    cr_assert(eq(int, baton_lock_acquire(l, 1000), BATON_EPROTO));
    cr_assert(strstr(baton_client_errmsg(c), "WRONGTYPE") != NULL, "%s", baton_client_errmsg(c));
    cr_assert(eq(int, baton_lock_try_acquire(l, 0, BATON_LEASE_WATCHDOG), BATON_EPROTO));
    cr_assert(eq(int, baton_lock_try_acquire(l, 500, BATON_LEASE_WATCHDOG), BATON_EPROTO));
    cr_assert(strstr(baton_client_errmsg(c), "WRONGTYPE") != NULL, "%s", baton_client_errmsg(c));
    cr_assert(eq(int, baton_lock_release(l), BATON_EPROTO));
    bool was;
    cr_assert(eq(int, baton_lock_force_release(l, &was), BATON_EPROTO));
    int64_t n;
    cr_assert(eq(int, baton_lock_hold_count(l, &n), BATON_EPROTO));
    redisReply *rep = th_cmd(r, "GET %s", name);
    cr_assert(eq(str, rep->str, "precious"));
    freeReplyObject(rep);
    cr_assert(eq(i64, th_cmd_int(r, "PTTL %s", name), -1));
    assert_queue_keys_gone(r, name);

    /* the queue key of another type: nothing is written, not even the lock */
    freeReplyObject(th_cmd(r, "SET redisson_lock_queue:{%s} precious", name2));
    baton_lock *l2 = fair_open(c, name2);
    cr_assert(eq(int, baton_lock_acquire(l2, 1000), BATON_EPROTO));
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s", name2), 0));
    rep = th_cmd(r, "GET redisson_lock_queue:{%s}", name2);
    cr_assert(eq(str, rep->str, "precious"));
    freeReplyObject(rep);
    cr_assert(eq(int, baton__sub_count(c), 0));
    redisFree(r);
    baton_lock_close(l);
    baton_lock_close(l2);
    baton_client_close(c);
    free(name);
    free(name2);
}

/* The fast paths check no type ahead: the deadline set or the token counter of another
 * type still fails with WRONGTYPE, and whatever the script wrote before is undone. */
Test(fairlock, wrong_type_deadlines_or_token_are_an_error_and_undone)
{
    baton_client *c = th_client(NULL);
    char *name = th_name("fl-wrongzset"), *name2 = th_name("fl-wrongtoken");
    redisContext *r = th_redis();
    char mine[BATON__OWNER_LEN];
    baton__owner(c, mine, sizeof mine);

    /* this thread at the head of the queue, the deadline set a string */
    freeReplyObject(th_cmd(r, "RPUSH redisson_lock_queue:{%s} %s", name, mine));
    freeReplyObject(th_cmd(r, "SET redisson_lock_timeout:{%s} precious", name));
    baton_lock *l = fair_open(c, name);
    cr_assert(eq(int, baton_lock_try_acquire(l, 0, 1000), BATON_EPROTO));
    cr_assert(strstr(baton_client_errmsg(c), "WRONGTYPE") != NULL, "%s", baton_client_errmsg(c));
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s", name), 0));
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS redisson_lock_token:{%s}", name), 0));
    cr_assert(eq(i64, queue_len(r, name), 1));
    redisReply *rep = th_cmd(r, "GET redisson_lock_timeout:{%s}", name);
    cr_assert(eq(str, rep->str, "precious"));
    freeReplyObject(rep);

    /* the same with a token counter that exists: it keeps its value */
    freeReplyObject(th_cmd(r, "SET redisson_lock_token:{%s} 41", name));
    cr_assert(eq(int, baton_lock_try_acquire(l, 0, 1000), BATON_EPROTO));
    rep = th_cmd(r, "GET redisson_lock_token:{%s}", name);
    cr_assert(eq(str, rep->str, "41"));
    freeReplyObject(rep);
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s", name), 0));

    /* a free lock and an empty queue, the token counter a hash */
    freeReplyObject(th_cmd(r, "HSET redisson_lock_token:{%s} f precious", name2));
    baton_lock *l2 = fair_open(c, name2);
    cr_assert(eq(int, baton_lock_acquire(l2, 1000), BATON_EPROTO));
    cr_assert(strstr(baton_client_errmsg(c), "WRONGTYPE") != NULL, "%s", baton_client_errmsg(c));
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s", name2), 0));
    assert_queue_keys_gone(r, name2);
    cr_assert(eq(int, baton__sub_count(c), 0));
    redisFree(r);
    baton_lock_close(l);
    baton_lock_close(l2);
    baton_client_close(c);
    free(name);
    free(name2);
}

/* A release run twice with one request id (the retry after a lost reply) answers the first
 * outcome and releases once, for the last hold and for an inner one. */
Test(fairlock, a_retried_release_returns_the_first_outcome)
{
    baton_client *c = th_client(NULL);
    char *name = th_name("fl-retry");
    baton_lock *l = fair_open(c, name);
    redisContext *r = th_redis();
    char mine[BATON__OWNER_LEN];
    baton__owner(c, mine, sizeof mine);
    cr_assert(eq(int, baton_lock_acquire(l, 10000), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(l, 10000), BATON_OK));
    const baton__script *s = baton__script_find("fairlock_release");
    char *keys = NULL;
    cr_assert(asprintf(&keys,
                       "%s redisson_lock_queue:{%s} redisson_lock_timeout:{%s} "
                       "redisson_lock__channel:{%s} baton_lock_meta:{%s} "
                       "redisson_unlock_latch:{%s}:test-1",
                       name, name, name, name, name, name) > 0);
    char *k[6], *save = NULL;
    k[0] = strtok_r(keys, " ", &save);
    for (int i = 1; i < 6; i++)
        k[i] = strtok_r(NULL, " ", &save);
    for (int run = 0; run < 2; run++)
        cr_assert(eq(i64,
                     th_cmd_int(r, "EVAL %b 6 %s %s %s %s %s %s 0 10000 %s 60000", s->body, s->len,
                                k[0], k[1], k[2], k[3], k[4], k[5], mine),
                     0),
                  "run %d", run);
    cr_assert(eq(i64, th_cmd_int(r, "HGET %s %s", name, mine), 1));
    /* the last hold, under a second request id */
    k[5][strlen(k[5]) - 1] = '2';
    for (int run = 0; run < 2; run++)
        cr_assert(eq(i64,
                     th_cmd_int(r, "EVAL %b 6 %s %s %s %s %s %s 0 10000 %s 60000", s->body, s->len,
                                k[0], k[1], k[2], k[3], k[4], k[5], mine),
                     1),
                  "run %d", run);
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s", name), 0));
    /* a third request id: nothing held */
    k[5][strlen(k[5]) - 1] = '3';
    redisReply *rep = th_cmd(r, "EVAL %b 6 %s %s %s %s %s %s 0 10000 %s 60000", s->body, s->len,
                             k[0], k[1], k[2], k[3], k[4], k[5], mine);
    cr_assert(eq(int, rep->type, REDIS_REPLY_NIL));
    freeReplyObject(rep);
    redisFree(r);
    baton_lock_close(l);
    baton_client_close(c);
    free(keys);
    free(name);
}

/* ---------------------------------------------------------------- skewed clocks ------ */

/* One MONITOR line: the arguments of an EVALSHA/EVAL, if it is one; checks that none of
 * them is a point in time near the line's own server timestamp, in s, ms or µs. Returns
 * whether the line was a fair-lock script run. */
static bool check_monitor_line(const char *line, const char *const *shas)
{
    double stamp = atof(line);
    const char *p = strchr(line, ']');
    if (!p)
        return false;
    char args[16][256];
    int n = 0;
    while (n < 16 && (p = strchr(p, '"')) != NULL) {
        size_t k = 0;
        for (p++; *p && *p != '"'; p++) {
            if (*p == '\\' && p[1])
                p++;
            if (k < sizeof args[n] - 1)
                args[n][k++] = *p;
        }
        args[n++][k] = '\0';
        if (*p)
            p++;
    }
    if (n < 2 || (strcasecmp(args[0], "EVALSHA") != 0 && strcasecmp(args[0], "EVAL") != 0))
        return false;
    bool fair = false;
    for (const char *const *s = shas; *s; s++)
        fair = fair || strcmp(args[1], *s) == 0;
    for (int i = 2; i < n; i++) {
        char *end;
        double v = strtod(args[i], &end);
        if (*end || end == args[i] || !isdigit((unsigned char)args[i][0]))
            continue;
        /* three days either side covers the hour of skew */
        double day = 86400.0;
        cr_assert(v < stamp - 3 * day || v > stamp + 3 * day, "a time in s was sent: %s", line);
        cr_assert(v < (stamp - 3 * day) * 1e3 || v > (stamp + 3 * day) * 1e3,
                  "a time in ms was sent: %s", line);
        cr_assert(v < (stamp - 3 * day) * 1e6 || v > (stamp + 3 * day) * 1e6,
                  "a time in us was sent: %s", line);
    }
    return fair;
}

Test(fairlock, skewed_client_clocks_still_queue_in_order)
{
    const char *shas[] = {baton__script_find("fairlock_acquire")->sha1,
                          baton__script_find("fairlock_release")->sha1,
                          baton__script_find("fairlock_release")->oom->sha1,
                          baton__script_find("fairlock_cancel")->sha1, NULL};
    char *name = th_name("fl-skew"), *order = th_name("fl-skew-order");
    /* wall clocks one hour ahead, one hour behind, ahead, behind */
    enum { N = 4 };
    queued_child q[N];
    for (int i = 0; i < N; i++) {
        q[i] = (queued_child){.name = name,
                              .order_key = order,
                              .index = i,
                              .fair_wait_ms = FAIR_WAIT,
                              .skew_s = i % 2 ? -3600 : 3600};
        fork_queued_child(&q[i]);
    }
    redisContext *mon = th_redis();
    redisReply *rep = th_cmd(mon, "MONITOR");
    freeReplyObject(rep);

    baton_client *hc = fair_client(FAIR_WAIT, 0);
    baton_lock *holder = fair_open(hc, name);
    redisContext *r = th_redis();
    cr_assert(eq(int, baton_lock_acquire(holder, BATON_LEASE_WATCHDOG), BATON_OK));

    char owners[N][BATON__OWNER_LEN];
    for (int i = 0; i < N; i++) {
        start_queued_child(&q[i], owners[i]);
        await_queue_len(r, name, i + 1);
    }
    th_sleep_ms(2 * FAIR_WAIT); /* places are renewed by clients whose clocks disagree */
    cr_assert(eq(i64, queue_len(r, name), N));
    cr_assert(eq(int, baton_lock_release(holder), BATON_OK));
    for (int i = 0; i < N; i++)
        cr_assert(eq(int, th_wait(q[i].pid), 0), "process %d", i);
    assert_order(r, order, N);
    assert_queue_keys_gone(r, name);

    /* and the server never saw a client's time: read what MONITOR recorded */
    char marker[64];
    snprintf(marker, sizeof marker, "fairlock-monitor-end-%d", (int)getpid());
    freeReplyObject(th_cmd(r, "ECHO %s", marker));
    int fair_runs = 0;
    for (;;) {
        void *v = NULL;
        cr_assert(eq(int, redisGetReply(mon, &v), REDIS_OK), "monitor: %s", mon->errstr);
        rep = v;
        cr_assert(eq(int, rep->type, REDIS_REPLY_STATUS));
        bool end = strstr(rep->str, marker) != NULL;
        fair_runs += check_monitor_line(rep->str, shas);
        freeReplyObject(rep);
        if (end)
            break;
    }
    /* every waiter queued, renewed its place a few times, acquired and released */
    cr_assert(ge(int, fair_runs, 3 * N), "%d fair-lock script runs seen", fair_runs);
    redisFree(mon);
    redisFree(r);
    baton_lock_close(holder);
    baton_client_close(hc);
    free(name);
    free(order);
}
