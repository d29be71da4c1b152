/*
 * The count-down latch against a real redis-server: barriers across processes and threads,
 * one subscription for a thousand waiters, timeouts, a killed subscriber connection, delete
 * releasing untimed waiters, a lost message, counting down past zero, reuse, bad input and
 * keys of another type.
 */
#define _GNU_SOURCE
#include "helper.h"
#include "internal.h"

#include <criterion/logging.h>
#include "new_assert.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

TestSuite(latch, .timeout = 60);

/* ---------------------------------------------------------------- helpers ------------ */

static long long numsub(redisContext *r, const char *name)
{
    return th_numsub(r, "redisson_countdownlatch__channel__{%s}", name);
}

/* Waits (at most 5 s) until the channel has `want` subscribers; returns the last count. */
static long long await_numsub(redisContext *r, const char *name, long long want)
{
    long long n = -1;
    for (int i = 0; i < 500 && (n = numsub(r, name)) != want; i++)
        th_sleep_ms(10);
    return n;
}

/* How many GETs the server has run: every waiter reads the count once before subscribing
 * and once after, so this tells when they all sleep. */
static long long get_calls(redisContext *r)
{
    return th_cmdstat(r, "get");
}

/* Waits (at most 20 s) until the server has run `n` GETs since `base`. */
static void await_gets(redisContext *r, long long base, long long n)
{
    for (int i = 0; i < 2000 && get_calls(r) - base < n; i++)
        th_sleep_ms(10);
    cr_assert(ge(i64, get_calls(r) - base, n), "the waiters never all read the count");
}

static baton_client *client_with_recheck(int64_t recheck_ms)
{
    baton_options o;
    baton_options_init(&o);
    o.recheck_ms = recheck_ms;
    return th_client(&o);
}

static baton_latch *open_latch(baton_client *c, const char *name)
{
    baton_latch *l = NULL;
    cr_assert(eq(int, baton_latch_open(c, name, &l), BATON_OK));
    return l;
}

static int64_t count_of(baton_latch *l)
{
    int64_t n = -1;
    cr_assert(eq(int, baton_latch_count(l, &n), BATON_OK));
    return n;
}

typedef struct waiter {
    baton_latch *latch;
    int64_t timeout_ms;
    int rc;
    atomic_llong done_ms; /* 0 until await returned */
} waiter;

static void *await_thread(void *arg)
{
    waiter *w = arg;
    w->rc = baton_latch_await(w->latch, w->timeout_ms);
    atomic_store(&w->done_ms, th_ms());
    return NULL;
}

static void start_waiters(waiter *w, pthread_t *t, int n, baton_latch *l, int64_t timeout_ms)
{
    for (int i = 0; i < n; i++) {
        w[i].latch = l;
        w[i].timeout_ms = timeout_ms;
        w[i].rc = -100;
        atomic_store(&w[i].done_ms, 0);
        cr_assert(eq(int, pthread_create(&t[i], NULL, await_thread, &w[i]), 0));
    }
}

/* What a waiting process or thread reports through a pipe. */
typedef struct report {
    int who;
    int rc;
    int64_t ms;
} report;

static void send_report(int fd, int who, int rc, int64_t ms)
{
    report rp = {who, rc, ms};
    if (write(fd, &rp, sizeof rp) != (ssize_t)sizeof rp)
        _exit(3);
}

static report read_report(int fd)
{
    report rp;
    cr_assert(eq(sz, (size_t)read(fd, &rp, sizeof rp), sizeof rp));
    return rp;
}

/* A client and a latch in a forked child, without Criterion's asserts. */
static baton_latch *child_latch(const char *name, int64_t recheck_ms, baton_client **cp)
{
    baton_options o;
    baton_options_init(&o);
    o.url = th_url();
    o.recheck_ms = recheck_ms;
    baton_client *c;
    baton_latch *l;
    if (baton_client_open(&o, &c) != BATON_OK)
        _exit(100);
    if (baton_latch_open(c, name, &l) != BATON_OK)
        _exit(101);
    *cp = c;
    return l;
}

/* ---------------------------------------------------------------- barriers ----------- */

typedef struct job {
    const char *name;
    int index;
    int fd;
} job;

/* A worker: works (index-dependent), counts down, reports when it started counting down. */
static int barrier_worker(void *arg)
{
    job *j = arg;
    baton_client *c;
    baton_latch *l = child_latch(j->name, 0, &c);
    th_sleep_ms(150 + 80 * j->index); /* the work */
    int64_t before = th_ms();
    int rc = baton_latch_count_down(l);
    send_report(j->fd, j->index, rc, before);
    baton_latch_close(l);
    baton_client_close(c);
    return rc == BATON_OK ? 0 : 1;
}

/* A first count-down reads no request latch (its id is new): TYPE, GET of the count,
 * DECR, SET of the latch. Before: a GET of the latch first as well. */
Test(latch, a_count_down_reads_no_request_latch)
{
    baton_client *c = th_client(NULL);
    char *name = th_name("latch-cost");
    baton_latch *l = open_latch(c, name);
    cr_assert(eq(int, baton_latch_try_set_count(l, 20, NULL), BATON_OK));
    cr_assert(eq(int, baton_latch_count_down(l), BATON_OK)); /* the script loaded */
    redisContext *r = th_redis();
    freeReplyObject(th_cmd(r, "CONFIG RESETSTAT"));
    enum { DOWNS = 10 };
    for (int i = 0; i < DOWNS; i++)
        cr_assert(eq(int, baton_latch_count_down(l), BATON_OK));
    cr_assert(eq(i64, th_cmdstat(r, "get"), DOWNS), "one GET each: the count's");
    cr_assert(eq(i64, th_cmdstat(r, "decr"), DOWNS));
    cr_assert(eq(i64, th_cmd_int(r, "GET %s", name), 9));
    redisFree(r);
    baton_latch_close(l);
    baton_client_close(c);
    free(name);
}

Test(latch, barrier_across_five_processes)
{
    baton_client *c = th_client(NULL);
    char *name = th_name("la-barrier");
    baton_latch *l = open_latch(c, name);
    bool set = false;
    cr_assert(eq(int, baton_latch_try_set_count(l, 5, &set), BATON_OK));
    cr_assert(set);
    int fds[2];
    cr_assert(eq(int, pipe(fds), 0));
    job jobs[5];
    pid_t pids[5];
    for (int i = 0; i < 5; i++) {
        jobs[i] = (job){name, i, fds[1]};
        pids[i] = th_fork(barrier_worker, &jobs[i]);
    }
    int rc = baton_latch_await(l, 20000);
    int64_t returned = th_ms();
    cr_assert(eq(int, rc, BATON_OK), "%s", baton_client_errmsg(c));
    int64_t fifth = 0;
    for (int i = 0; i < 5; i++) {
        report rp = read_report(fds[0]);
        cr_assert(eq(int, rp.rc, BATON_OK), "worker %d", rp.who);
        if (rp.ms > fifth)
            fifth = rp.ms;
    }
    for (int i = 0; i < 5; i++)
        cr_assert(eq(int, th_wait(pids[i]), 0), "worker %d", i);
    cr_assert(ge(i64, returned, fifth), "await returned before the fifth count_down");
    cr_assert(le(i64, returned - fifth, 50), "await returned %lld ms after the fifth count_down",
              (long long)(returned - fifth));
    cr_log_info("barrier: await returned %lld ms after the fifth count_down began",
                (long long)(returned - fifth));
    cr_assert(eq(i64, count_of(l), 0));
    redisContext *r = th_redis();
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s", name), 0));
    redisFree(r);
    close(fds[0]);
    close(fds[1]);
    baton_latch_close(l);
    free(name);
    baton_client_close(c);
}

typedef struct proc_arg {
    const char *name;
    int index;
    int fd;
} proc_arg;

static int waiting_process(void *arg)
{
    proc_arg *a = arg;
    baton_client *c;
    baton_latch *l = child_latch(a->name, 30000, &c);
    int rc = baton_latch_await(l, 20000);
    send_report(a->fd, a->index, rc, th_ms());
    baton_latch_close(l);
    baton_client_close(c);
    return 0;
}

typedef struct proc_thread {
    baton_latch *latch;
    int index;
    int fd;
} proc_thread;

static void *waiting_process_thread(void *arg)
{
    proc_thread *p = arg;
    int rc = baton_latch_await(p->latch, 20000);
    send_report(p->fd, p->index, rc, th_ms());
    return NULL;
}

static int threaded_process(void *arg)
{
    proc_arg *a = arg;
    baton_client *c;
    baton_latch *l = child_latch(a->name, 30000, &c);
    proc_thread pt[5];
    pthread_t t[5];
    for (int i = 0; i < 5; i++) {
        pt[i] = (proc_thread){l, a->index + i, a->fd};
        if (pthread_create(&t[i], NULL, waiting_process_thread, &pt[i]) != 0)
            _exit(102);
    }
    for (int i = 0; i < 5; i++)
        pthread_join(t[i], NULL);
    baton_latch_close(l);
    baton_client_close(c);
    return 0;
}

Test(latch, five_processes_and_five_threads_released_by_the_last_count_down)
{
    baton_client *c = th_client(NULL);
    char *name = th_name("la-procs");
    baton_latch *l = open_latch(c, name);
    cr_assert(eq(int, baton_latch_try_set_count(l, 2, NULL), BATON_OK));
    int fds[2];
    cr_assert(eq(int, pipe(fds), 0));
    proc_arg args[6];
    pid_t pids[6];
    for (int i = 0; i < 5; i++) {
        args[i] = (proc_arg){name, i, fds[1]};
        pids[i] = th_fork(waiting_process, &args[i]);
    }
    args[5] = (proc_arg){name, 5, fds[1]}; /* threads 5..9 */
    pids[5] = th_fork(threaded_process, &args[5]);

    redisContext *r = th_redis();
    /* six clients wait: one subscription each, the five threads of one process share one */
    cr_assert(eq(i64, await_numsub(r, name, 6), 6));
    th_sleep_ms(200);
    cr_assert(eq(int, baton_latch_count_down(l), BATON_OK));
    th_sleep_ms(200);
    cr_assert(eq(i64, count_of(l), 1));
    cr_assert(eq(i64, numsub(r, name), 6), "a waiter left before the last count_down");
    int64_t t0 = th_ms();
    cr_assert(eq(int, baton_latch_count_down(l), BATON_OK));
    bool seen[10] = {false};
    for (int i = 0; i < 10; i++) {
        report rp = read_report(fds[0]);
        cr_assert(ge(int, rp.who, 0));
        cr_assert(lt(int, rp.who, 10));
        cr_assert(not(seen[rp.who]), "waiter %d reported twice", rp.who);
        seen[rp.who] = true;
        cr_assert(eq(int, rp.rc, BATON_OK), "waiter %d", rp.who);
        cr_assert(ge(i64, rp.ms, t0), "waiter %d returned before the last count_down", rp.who);
        /* each client re-checks every 30 s: only the "0" message can release them this fast */
        cr_assert(le(i64, rp.ms - t0, 1000), "waiter %d: %lld ms", rp.who, (long long)(rp.ms - t0));
    }
    for (int i = 0; i < 6; i++)
        cr_assert(eq(int, th_wait(pids[i]), 0), "process %d", i);
    cr_assert(eq(i64, numsub(r, name), 0));
    redisFree(r);
    close(fds[0]);
    close(fds[1]);
    baton_latch_close(l);
    free(name);
    baton_client_close(c);
}

/* ---------------------------------------------------------------- one subscription --- */

#define MANY 1000

Test(latch, thousand_threads_one_subscription)
{
    /* re-checks every 30 s: the release below can only come from the "0" message */
    baton_client *c = client_with_recheck(30000);
    char *name = th_name("la-thousand");
    baton_latch *l = open_latch(c, name);
    cr_assert(eq(int, baton_latch_try_set_count(l, 1, NULL), BATON_OK));
    redisContext *r = th_redis();
    long long gets0 = get_calls(r);

    static waiter w[MANY];
    static pthread_t t[MANY];
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    for (int i = 0; i < MANY; i++) {
        w[i] = (waiter){l, BATON_WAIT_FOREVER, -100, 0};
        cr_assert(eq(int, pthread_create(&t[i], &attr, await_thread, &w[i]), 0), "thread %d", i);
    }
    pthread_attr_destroy(&attr);
    /* every waiter read the count twice (before and after subscribing): all are asleep */
    await_gets(r, gets0, 2 * MANY);
    th_sleep_ms(100);
    cr_assert(eq(i64, numsub(r, name), 1), "one subscription for %d waiters", MANY);
    cr_assert(eq(int, baton__sub_count(c), 1));
    for (int i = 0; i < MANY; i++)
        cr_assert(eq(i64, atomic_load(&w[i].done_ms), 0), "waiter %d returned early", i);

    int64_t t0 = th_ms();
    cr_assert(eq(int, baton_latch_count_down(l), BATON_OK));
    int64_t last = 0;
    for (int i = 0; i < MANY; i++) {
        pthread_join(t[i], NULL);
        cr_assert(eq(int, w[i].rc, BATON_OK), "waiter %d", i);
        int64_t done = atomic_load(&w[i].done_ms);
        if (done > last)
            last = done;
    }
    fprintf(stderr, "latch: %d waiters released, the last %lld ms after the count_down\n", MANY,
            (long long)(last - t0));
    cr_assert(le(i64, last - t0, 5000), "%lld ms", (long long)(last - t0));
    /* the last waiter unsubscribes in the background */
    cr_assert(eq(i64, await_numsub(r, name, 0), 0));
    for (int i = 0; i < 100 && baton__sub_count(c) > 0; i++)
        th_sleep_ms(10);
    cr_assert(eq(int, baton__sub_count(c), 0));
    redisFree(r);
    baton_latch_close(l);
    free(name);
    baton_client_close(c);
}

/* ---------------------------------------------------------------- timeouts ----------- */

Test(latch, await_times_out_on_a_closed_latch_and_leaves_nothing)
{
    baton_client *c = th_client(NULL);
    char *name = th_name("la-timeout");
    baton_latch *l = open_latch(c, name);
    cr_assert(eq(int, baton_latch_try_set_count(l, 1, NULL), BATON_OK));
    int64_t t0 = th_ms();
    cr_assert(eq(int, baton_latch_await(l, 500), BATON_ETIMEDOUT));
    int64_t took = th_ms() - t0;
    cr_assert(ge(i64, took, 490), "%lld ms", (long long)took);
    cr_assert(le(i64, took, 700), "%lld ms", (long long)took);
    cr_assert(ne(str, (char *)baton_client_errmsg(c), ""));
    /* no subscription left, on either side, right after the return */
    cr_assert(eq(int, baton__sub_count(c), 0));
    redisContext *r = th_redis();
    cr_assert(eq(i64, numsub(r, name), 0));
    cr_assert(eq(i64, count_of(l), 1));
    /* timeout 0 only checks, and subscribes to nothing */
    t0 = th_ms();
    cr_assert(eq(int, baton_latch_await(l, 0), BATON_ETIMEDOUT));
    cr_assert(le(i64, th_ms() - t0, 100));
    cr_assert(eq(int, baton__sub_count(c), 0));
    cr_assert(eq(int, baton_latch_count_down(l), BATON_OK));
    cr_assert(eq(int, baton_latch_await(l, 0), BATON_OK));
    cr_assert(eq(int, baton_latch_await(l, BATON_WAIT_FOREVER), BATON_OK)); /* open: at once */
    redisFree(r);
    baton_latch_close(l);
    free(name);
    baton_client_close(c);
}

/* ---------------------------------------------------------------- lost messages ------ */

Test(latch, killed_subscriber_connection_does_not_strand_waiters)
{
    /* re-checks every 5 s: returning within 1 s needs the dispatcher's reconnection */
    baton_client *c = client_with_recheck(5000);
    redisContext *r = th_redis();
    for (int round = 0; round < 3; round++) {
        char *name = th_name("la-pubsubkill");
        baton_latch *l = open_latch(c, name);
        cr_assert(eq(int, baton_latch_try_set_count(l, 1, NULL), BATON_OK));
        long long gets0 = get_calls(r);
        waiter w[4];
        pthread_t t[4];
        start_waiters(w, t, 4, l, 20000);
        await_gets(r, gets0, 2 * 4);
        cr_assert(eq(i64, await_numsub(r, name, 1), 1));
        cr_assert(ge(i64, th_cmd_int(r, "CLIENT KILL TYPE pubsub"), 1));
        int64_t t0 = th_ms();
        cr_assert(eq(int, baton_latch_count_down(l), BATON_OK));
        for (int i = 0; i < 4; i++) {
            pthread_join(t[i], NULL);
            cr_assert(eq(int, w[i].rc, BATON_OK), "round %d, waiter %d", round, i);
            int64_t took = atomic_load(&w[i].done_ms) - t0;
            cr_assert(le(i64, took, 1000), "round %d, waiter %d: %lld ms", round, i,
                      (long long)took);
        }
        baton_latch_close(l);
        free(name);
    }
    redisFree(r);
    baton_client_close(c);
}

Test(latch, a_lost_message_costs_at_most_the_recheck_interval)
{
    baton_client *c = client_with_recheck(300);
    char *name = th_name("la-lost");
    baton_latch *l = open_latch(c, name);
    cr_assert(eq(int, baton_latch_try_set_count(l, 3, NULL), BATON_OK));
    redisContext *r = th_redis();
    long long gets0 = get_calls(r);
    waiter w[2];
    pthread_t t[2];
    start_waiters(w, t, 2, l, BATON_WAIT_FOREVER);
    await_gets(r, gets0, 2 * 2);
    /* opened behind baton's back: no message at all */
    cr_assert(eq(i64, th_cmd_int(r, "DEL %s", name), 1));
    int64_t t0 = th_ms();
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        cr_assert(eq(int, w[i].rc, BATON_OK));
        int64_t took = atomic_load(&w[i].done_ms) - t0;
        cr_assert(le(i64, took, 300 + 200), "waiter %d: %lld ms", i, (long long)took);
    }
    redisFree(r);
    baton_latch_close(l);
    free(name);
    baton_client_close(c);
}

/* ---------------------------------------------------------------- delete ------------- */

Test(latch, delete_releases_untimed_waiters)
{
    baton_client *c = client_with_recheck(30000);
    char *name = th_name("la-delete");
    baton_latch *l = open_latch(c, name);
    cr_assert(eq(int, baton_latch_try_set_count(l, 5, NULL), BATON_OK));
    redisContext *r = th_redis();
    long long gets0 = get_calls(r);
    waiter w[3];
    pthread_t t[3];
    start_waiters(w, t, 3, l, BATON_WAIT_FOREVER);
    await_gets(r, gets0, 2 * 3);
    th_sleep_ms(50);
    for (int i = 0; i < 3; i++)
        cr_assert(eq(i64, atomic_load(&w[i].done_ms), 0));
    /* another client deletes it */
    baton_client *c2 = th_client(NULL);
    baton_latch *l2 = open_latch(c2, name);
    bool existed = false;
    int64_t t0 = th_ms();
    cr_assert(eq(int, baton_latch_delete(l2, &existed), BATON_OK));
    cr_assert(existed);
    for (int i = 0; i < 3; i++) {
        pthread_join(t[i], NULL);
        cr_assert(eq(int, w[i].rc, BATON_OK), "waiter %d", i);
        int64_t took = atomic_load(&w[i].done_ms) - t0;
        cr_assert(le(i64, took, 1000), "waiter %d: %lld ms", i, (long long)took);
    }
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s", name), 0));
    cr_assert(eq(i64, count_of(l), 0));
    cr_assert(eq(int, baton_latch_delete(l2, &existed), BATON_OK));
    cr_assert(not(existed));
    cr_assert(eq(i64, await_numsub(r, name, 0), 0));
    redisFree(r);
    baton_latch_close(l);
    baton_latch_close(l2);
    free(name);
    baton_client_close(c);
    baton_client_close(c2);
}

/* ---------------------------------------------------------------- counting ----------- */

/* Reads messages from a subscribed connection until `stop` arrives; counts "0" and "1". */
static void count_messages(redisContext *sub, const char *stop, int *zeros, int *ones)
{
    *zeros = *ones = 0;
    for (;;) {
        void *v = NULL;
        cr_assert(eq(int, redisGetReply(sub, &v), REDIS_OK), "%s", sub->errstr);
        redisReply *m = v;
        cr_assert(eq(int, m->type, REDIS_REPLY_ARRAY));
        cr_assert(eq(str, m->element[0]->str, "message"));
        const char *payload = m->element[2]->str;
        bool done = strcmp(payload, stop) == 0;
        if (strcmp(payload, "0") == 0)
            (*zeros)++;
        else if (strcmp(payload, "1") == 0)
            (*ones)++;
        else
            cr_assert(done, "unexpected message %s", payload);
        freeReplyObject(m);
        if (done)
            return;
    }
}

Test(latch, count_down_past_zero_never_goes_negative)
{
    baton_client *c = th_client(NULL);
    char *name = th_name("la-negative");
    baton_latch *l = open_latch(c, name);
    redisContext *r = th_redis(), *sub = th_redis();
    redisReply *rep = th_cmd(sub, "SUBSCRIBE redisson_countdownlatch__channel__{%s}", name);
    freeReplyObject(rep);

    cr_assert(eq(int, baton_latch_count_down(l), BATON_OK)); /* absent: nothing happens */
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s", name), 0));
    cr_assert(eq(int, baton_latch_try_set_count(l, 3, NULL), BATON_OK));
    /* Redisson's layout: a plain string count at the name */
    rep = th_cmd(r, "GET %s", name);
    cr_assert(eq(str, rep->str, "3"));
    freeReplyObject(rep);
    for (int i = 0; i < 10; i++) {
        cr_assert(eq(int, baton_latch_count_down(l), BATON_OK), "count_down %d", i + 1);
        int64_t n = count_of(l);
        cr_assert(eq(i64, n, i < 3 ? 2 - i : 0), "after count_down %d", i + 1);
        cr_assert(eq(i64, th_cmd_int(r, "GET %s", name), i < 2 ? 2 - i : 0));
        cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s", name), i < 2 ? 1 : 0));
    }
    cr_assert(eq(int, baton_latch_await(l, 0), BATON_OK));
    freeReplyObject(th_cmd(r, "PUBLISH redisson_countdownlatch__channel__{%s} stop", name));
    int zeros, ones;
    count_messages(sub, "stop", &zeros, &ones);
    cr_assert(eq(int, ones, 1), "one \"new count\" message");
    cr_assert(eq(int, zeros, 1), "one \"zero\" message for ten count_downs");
    redisFree(sub);
    redisFree(r);
    baton_latch_close(l);
    free(name);
    baton_client_close(c);
}

Test(latch, reuse_after_opening)
{
    baton_client *c = th_client(NULL);
    char *name = th_name("la-reuse");
    baton_latch *l = open_latch(c, name);
    bool set = false;
    cr_assert(eq(int, baton_latch_try_set_count(l, 2, &set), BATON_OK));
    cr_assert(set);
    cr_assert(eq(int, baton_latch_try_set_count(l, 7, &set), BATON_OK));
    cr_assert(not(set), "a count is set already");
    cr_assert(eq(i64, count_of(l), 2));
    cr_assert(eq(int, baton_latch_count_down(l), BATON_OK));
    cr_assert(eq(int, baton_latch_count_down(l), BATON_OK));
    int64_t t0 = th_ms();
    cr_assert(eq(int, baton_latch_await(l, 5000), BATON_OK));
    cr_assert(le(i64, th_ms() - t0, 100));

    /* armed again: a new await waits for three more */
    cr_assert(eq(int, baton_latch_try_set_count(l, 3, &set), BATON_OK));
    cr_assert(set);
    cr_assert(eq(i64, count_of(l), 3));
    waiter w[2];
    pthread_t t[2];
    start_waiters(w, t, 2, l, 10000);
    for (int i = 0; i < 2; i++) {
        th_sleep_ms(200);
        cr_assert(eq(i64, atomic_load(&w[0].done_ms), 0), "released after %d count_downs", i);
        cr_assert(eq(i64, atomic_load(&w[1].done_ms), 0), "released after %d count_downs", i);
        cr_assert(eq(int, baton_latch_count_down(l), BATON_OK));
    }
    th_sleep_ms(200);
    cr_assert(eq(i64, atomic_load(&w[0].done_ms), 0), "released after 2 count_downs");
    cr_assert(eq(i64, count_of(l), 1));
    t0 = th_ms();
    cr_assert(eq(int, baton_latch_count_down(l), BATON_OK));
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        cr_assert(eq(int, w[i].rc, BATON_OK));
        cr_assert(le(i64, atomic_load(&w[i].done_ms) - t0, 500));
    }
    baton_latch_close(l);
    free(name);
    baton_client_close(c);
}

/* ---------------------------------------------------------------- bad input ---------- */

Test(latch, bad_input_is_rejected_and_nothing_is_sent)
{
    baton_client *c = th_client(NULL);
    baton_latch *l = NULL, *bad = (baton_latch *)0x1;
    char *name = th_name("la-bad");
    char big[BATON_MAX_NAME_LEN + 2];
    memset(big, 'n', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    redisContext *r = th_redis();
    long long before = th_commands_processed(r);

    cr_assert(eq(int, baton_latch_open(NULL, name, &l), BATON_EINVAL));
    cr_assert(eq(int, baton_latch_open(c, NULL, &l), BATON_EINVAL));
    cr_assert(eq(int, baton_latch_open(c, "", &l), BATON_EINVAL));
    cr_assert(eq(int, baton_latch_open(c, big, &bad), BATON_EINVAL));
    cr_assert(eq(ptr, bad, NULL));
    cr_assert(ne(str, (char *)baton_client_errmsg(c), ""));
    cr_assert(eq(int, baton_latch_open(c, name, NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_latch_open(c, name, &l), BATON_OK));

    bool set = true;
    cr_assert(eq(int, baton_latch_try_set_count(l, 0, &set), BATON_EINVAL));
    cr_assert(ne(str, (char *)baton_client_errmsg(c), ""));
    cr_assert(eq(int, baton_latch_try_set_count(l, -1, &set), BATON_EINVAL));
    cr_assert(eq(int, baton_latch_try_set_count(l, INT64_MIN, NULL), BATON_EINVAL));
    cr_assert(set, "*was_set untouched on EINVAL");
    cr_assert(eq(int, baton_latch_try_set_count(NULL, 3, &set), BATON_EINVAL));
    cr_assert(eq(int, baton_latch_count_down(NULL), BATON_EINVAL));
    int64_t n;
    cr_assert(eq(int, baton_latch_count(NULL, &n), BATON_EINVAL));
    cr_assert(eq(int, baton_latch_count(l, NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_latch_await(NULL, 100), BATON_EINVAL));
    cr_assert(eq(int, baton_latch_await(l, -2), BATON_EINVAL));
    cr_assert(eq(int, baton_latch_await(l, BATON_MAX_DURATION_MS + 1), BATON_EINVAL));
    cr_assert(eq(int, baton_latch_await(l, INT64_MIN), BATON_EINVAL));
    bool existed;
    cr_assert(eq(int, baton_latch_delete(NULL, &existed), BATON_EINVAL));
    baton_latch_close(NULL);

    /* only the INFO of `before` itself was processed in between */
    cr_assert(eq(i64, th_commands_processed(r) - before, 1));
    redisFree(r);
    baton_latch_close(l);
    free(name);
    baton_client_close(c);
}

Test(latch, wrong_type_key_is_an_error_and_left_alone)
{
    baton_client *c = th_client(NULL);
    char *name = th_name("la-wrongtype");
    redisContext *r = th_redis();
    freeReplyObject(th_cmd(r, "HSET %s field precious", name));
    baton_latch *l = open_latch(c, name);
    bool set = true, existed = true;
    int64_t n = 42;
    cr_assert(eq(int, baton_latch_try_set_count(l, 3, &set), BATON_EPROTO));
    cr_assert(strstr(baton_client_errmsg(c), "WRONGTYPE") != NULL, "%s", baton_client_errmsg(c));
    cr_assert(eq(int, baton_latch_count_down(l), BATON_EPROTO));
    cr_assert(strstr(baton_client_errmsg(c), "WRONGTYPE") != NULL, "%s", baton_client_errmsg(c));
    cr_assert(eq(int, baton_latch_count(l, &n), BATON_EPROTO));
    cr_assert(strstr(baton_client_errmsg(c), "WRONGTYPE") != NULL, "%s", baton_client_errmsg(c));
    cr_assert(eq(int, baton_latch_await(l, 1000), BATON_EPROTO));
    cr_assert(eq(int, baton_latch_delete(l, &existed), BATON_EPROTO));
    cr_assert(strstr(baton_client_errmsg(c), "WRONGTYPE") != NULL, "%s", baton_client_errmsg(c));
    cr_assert(set);
    cr_assert(existed);
    cr_assert(eq(i64, n, 42));
    redisReply *rep = th_cmd(r, "HGETALL %s", name);
    cr_assert(eq(sz, rep->elements, 2));
    cr_assert(eq(str, rep->element[1]->str, "precious"));
    freeReplyObject(rep);
    cr_assert(eq(i64, th_cmd_int(r, "PTTL %s", name), -1));

    /* a string that is no count: the count reads fail, nothing is written */
    char *name2 = th_name("la-notacount");
    freeReplyObject(th_cmd(r, "SET %s precious", name2));
    baton_latch *l2 = open_latch(c, name2);
    cr_assert(eq(int, baton_latch_count(l2, &n), BATON_EPROTO));
    cr_assert(ne(str, (char *)baton_client_errmsg(c), ""));
    cr_assert(eq(int, baton_latch_count_down(l2), BATON_EPROTO));
    cr_assert(eq(int, baton_latch_await(l2, 1000), BATON_EPROTO));
    cr_assert(eq(int, baton_latch_try_set_count(l2, 3, &set), BATON_OK));
    cr_assert(not(set));
    rep = th_cmd(r, "GET %s", name2);
    cr_assert(eq(str, rep->str, "precious"));
    freeReplyObject(rep);
    cr_assert(eq(int, baton__sub_count(c), 0));
    redisFree(r);
    baton_latch_close(l);
    baton_latch_close(l2);
    free(name);
    free(name2);
    baton_client_close(c);
}
