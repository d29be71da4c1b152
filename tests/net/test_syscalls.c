/*
 * The cost of a blocking lock+unlock pair in socket system calls (issue 30): at most 4,
 * one write and one read for each of its two round trips, as hiredis's blocking context
 * made. Counted by bench/syscount.c, linked into this program: it interposes libc's send,
 * recv, read, write, poll and their kin and counts the calls on sockets connected to the
 * test server's port (Criterion's own sockets are not counted).
 *
 * Before issue 30 the transport made about 4.8 calls per round trip (send; recv that
 * fails EAGAIN; poll; recv; a liveness poll when a pooled connection is lent): 9.5 per pair.
 */
#include "helper.h"
#include "../bench/syscount.h"

#include <baton/async.h>

#include <pthread.h>
#include <stdio.h>

#define WARM 50
#define PAIRS 500
#define BOUND_PER_PAIR 4.0

/* Waits (at most 10 s) until the process has connected at least `connects` sockets and no
 * counted call happened for 200 ms. */
static void wait_for_quiet_sockets(uint64_t connects)
{
    syscount prev, now;
    syscount_read(&prev);
    int quiet_ms = 0;
    for (int waited = 0; waited < 10000; waited += 20) {
        th_sleep_ms(20);
        syscount_read(&now);
        int same = now.total == prev.total && now.n[SC_CONNECT] == prev.n[SC_CONNECT];
        quiet_ms = same ? quiet_ms + 20 : 0;
        prev = now;
        if (now.n[SC_CONNECT] >= connects && quiet_ms >= 200)
            return;
    }
    char what[200];
    syscount_format(&now, what, sizeof what);
    cr_assert_fail("the client's sockets did not settle in 10 s: %s", what);
}

/* ------------------------------------------------------------ the event loop's path --- */

typedef struct one_op {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int rc; /* -100 until the callback */
} one_op;

static void op_done(void *handle, baton_owner *owner, int rc, void *arg)
{
    (void)handle;
    (void)owner;
    one_op *o = arg;
    pthread_mutex_lock(&o->mu);
    o->rc = rc;
    pthread_cond_signal(&o->cond);
    pthread_mutex_unlock(&o->mu);
}

/* Starts one asynchronous acquire (release: false) or release and waits for its callback,
 * which runs on baton's thread. */
static int one_async(baton_lock *l, baton_owner *ow, bool release)
{
    one_op o = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, -100};
    int rc = release ? baton_lock_release_async(l, ow, op_done, &o, NULL)
                     : baton_lock_acquire_async(l, ow, 1000, 10000, op_done, &o, NULL);
    if (rc != BATON_OK)
        return rc;
    pthread_mutex_lock(&o.mu);
    while (o.rc == -100)
        pthread_cond_wait(&o.cond, &o.mu);
    pthread_mutex_unlock(&o.mu);
    return o.rc;
}

/* One step of a pair: the acquire (release false) or the release, blocking or through the
 * event loop (ow not NULL); BATON_OK or the error. */
typedef struct pairing {
    baton_lock *l;
    baton_owner *ow; /* NULL: the blocking verbs */
} pairing;

static int step(const pairing *p, bool release)
{
    if (p->ow)
        return one_async(p->l, p->ow, release);
    return release ? baton_lock_release(p->l) : baton_lock_try_acquire(p->l, 1000, 10000);
}

/* Socket calls and round trips of PAIRS uncontended lock+unlock pairs on one lock, after
 * WARM pairs that load the scripts and fill the pool; through the event loop if async
 * (its callbacks on baton's thread). */
static void measure(bool async, syscount *d, uint64_t *rtts)
{
    syscount_only_port(th_port()); /* before the client connects */
    syscount base;
    syscount_read(&base); /* Criterion's own connect came before: not the client's */
    baton_client *c = th_client(NULL);
    pairing p = {NULL, NULL};
    if (async) {
        cr_assert_eq(baton_client_set_callbacks(c, BATON_CALLBACKS_BATON), BATON_OK);
        cr_assert_eq(baton_owner_new(c, &p.ow), BATON_OK);
    }
    cr_assert_eq(baton_lock_open(c, th_tmpname("syscalls"), &p.l), BATON_OK);
    for (int i = 0; i < WARM; i++) {
        cr_assert_eq(step(&p, false), BATON_OK);
        cr_assert_eq(step(&p, true), BATON_OK);
    }
    /* A hold with a lease pins the dispatcher's connection (it hears a restart): it is not
     * the pair's, so it is made before the count begins. Its thread connects only if it sees
     * a hold when it runs: after 50 short pairs it may see none (CI once counted its connect,
     * send, recv and poll inside the window), so a hold stays taken until it has connected
     * and finished its handshake; once up, the connection stays up. */
    cr_assert_eq(step(&p, false), BATON_OK);
    wait_for_quiet_sockets(base.n[SC_CONNECT] + 2);
    cr_assert_eq(step(&p, true), BATON_OK);
    baton_stats st0, st1;
    syscount s0, s1;
    int bad = 0;
    baton_client_stats(c, &st0);
    syscount_read(&s0);
    for (int i = 0; i < PAIRS; i++) { /* no assertion inside: nothing else on the sockets */
        bad += step(&p, false) != BATON_OK;
        bad += step(&p, true) != BATON_OK;
    }
    syscount_read(&s1);
    baton_client_stats(c, &st1);
    cr_assert_eq(bad, 0, "%d calls failed", bad);
    syscount_diff(&s0, &s1, d);
    *rtts = st1.round_trips - st0.round_trips;
    cr_assert_eq(*rtts, 2 * PAIRS, "round trips: %llu", (unsigned long long)*rtts);
    baton_lock_close(p.l);
    baton_owner_free(p.ow);
    baton_client_close(c);
}

Test(syscalls, blocking_pair_makes_at_most_four, .timeout = 60)
{
    syscount d;
    uint64_t rtts;
    measure(false, &d, &rtts);
    char what[200];
    syscount_format(&d, what, sizeof what);
    double per_pair = (double)d.total / PAIRS, per_rt = (double)d.total / (double)rtts;
    fprintf(stderr,
            "syscalls: %.2f socket system calls per blocking lock+unlock pair, %.2f per round "
            "trip (%llu round trips for %d pairs; %s)\n",
            per_pair, per_rt, (unsigned long long)rtts, PAIRS, what);
    /* the counter works: every round trip wrote its request and read its reply */
    cr_assert_geq(d.n[SC_SEND] + d.n[SC_WRITE], rtts, "%s", what);
    cr_assert_geq(d.n[SC_RECV] + d.n[SC_READ], rtts, "%s", what);
    cr_assert_leq(per_pair, BOUND_PER_PAIR,
                  "a blocking lock+unlock pair made %.2f socket system calls (at most %.0f): %s",
                  per_pair, BOUND_PER_PAIR, what);
}

/* On the event loop's fiber a round trip is one send(), the engine's one poll() for every
 * fiber it runs, and one recv(): 3. Before, the fiber read first, found nothing (EAGAIN)
 * and then polled: 4 (issue 30, item 4: the event loop was slower than threads). */
Test(syscalls, an_async_round_trip_makes_at_most_three, .timeout = 60)
{
    syscount d;
    uint64_t rtts;
    measure(true, &d, &rtts);
    char what[200];
    syscount_format(&d, what, sizeof what);
    double per_rt = (double)d.total / (double)rtts;
    fprintf(stderr,
            "syscalls: %.2f socket system calls per asynchronous round trip (%llu round "
            "trips for %d pairs; %s)\n",
            per_rt, (unsigned long long)rtts, PAIRS, what);
    cr_assert_leq(per_rt, 3.05, "an asynchronous round trip made %.2f socket system calls: %s",
                  per_rt, what);
}

/* ------------------------------------------------------------ the subscriber's path --- */

typedef struct waiting_lock {
    baton_lock *l;
    int rc, released; /* the acquire's, the release's (a hold is its thread's) */
} waiting_lock;

static void *wait_for_lock(void *arg)
{
    waiting_lock *w = arg;
    w->rc = baton_lock_try_acquire(w->l, 20000, 10000);
    w->released = w->rc == BATON_OK ? baton_lock_release(w->l) : -100;
    return NULL;
}

#define MESSAGES 100

/* A message to a subscriber costs the dispatcher one poll() and one recv(): the recv that
 * the socket could not fill was its last. Before, it read on until recv() failed EAGAIN:
 * a third call for each message, for each process that listens on the channel (8 processes
 * contending for one lock: 8 of the 29 socket calls an acquisition made). */
Test(syscalls, a_message_to_a_subscriber_makes_no_read_that_finds_nothing, .timeout = 60)
{
    syscount_only_port(th_port());
    const char *name = th_tmpname("syscalls-sub");
    redisContext *r = th_redis();
    syscount_ignore_fd(r->fd);
    /* held by another owner (Redisson's layout) for a minute: the waiter sleeps on the
     * lock's channel and each message there wakes it to an attempt that fails */
    freeReplyObject(th_cmd(r, "HSET %s other:1 1", name));
    freeReplyObject(th_cmd(r, "PEXPIRE %s 60000", name));
    baton_client *c = th_client(NULL);
    waiting_lock w = {NULL, -100, -100};
    cr_assert_eq(baton_lock_open(c, name, &w.l), BATON_OK);
    pthread_t t;
    pthread_create(&t, NULL, wait_for_lock, &w);
    char channel[300];
    snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);
    for (int i = 0; i < 500 && th_numsub(r, "%s", channel) == 0; i++)
        th_sleep_ms(10);
    th_sleep_ms(100); /* its first attempts are over */
    syscount s0, s1, d;
    syscount_read(&s0);
    for (int i = 0; i < MESSAGES; i++) {
        freeReplyObject(th_cmd(r, "PUBLISH %s 0", channel));
        th_sleep_ms(3); /* each message its own wake-up of the dispatcher */
    }
    th_sleep_ms(100);
    syscount_read(&s1);
    syscount_diff(&s0, &s1, &d);
    char what[200];
    syscount_format(&d, what, sizeof what);
    fprintf(stderr, "syscalls: %d messages to a waiting subscriber: %s\n", MESSAGES, what);
    freeReplyObject(th_cmd(r, "DEL %s", name));
    freeReplyObject(th_cmd(r, "PUBLISH %s 0", channel));
    pthread_join(t, NULL);
    cr_assert_eq(w.rc, BATON_OK, "the waiter takes the lock once it is free: %s",
                 baton_client_errmsg(c));
    /* the counter works: the dispatcher read the messages */
    cr_assert_geq(d.n[SC_RECV] + d.n[SC_READ], MESSAGES, "%s", what);
    cr_assert_leq(d.n[SC_EAGAIN], MESSAGES / 10, "reads that found nothing: %s", what);
    cr_assert_eq(w.released, BATON_OK);
    baton_lock_close(w.l);
    baton_client_close(c);
    redisFree(r);
}
