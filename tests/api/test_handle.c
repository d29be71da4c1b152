/*
 * Options per handle (include/baton/handle.h) against a real redis-server: on one client, a
 * handle's own watchdog lease beside the client's (the renewed hold's PTTL, its renewal, a
 * killed holder's lock free within its own lease), a fair lock's own fair wait (its
 * waiter's deadline in the queue), a latch's and a semaphore's own recheck (a change made
 * without a message seen within the handle's recheck, not the client's), permits and the
 * election on their handle's watchdog, and the options refused.
 */
#define _GNU_SOURCE
#include "helper.h"
#include "lockbase.h" /* baton__watchdog_rounds */

#include "new_assert.h"
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

TestSuite(handle, .timeout = 60);

/* ---------------------------------------------------------------- helpers ------------ */

static baton_handle_options opts_watchdog(int64_t ms)
{
    baton_handle_options o;
    baton_handle_options_init(&o);
    o.watchdog_ms = ms;
    return o;
}

static long long pttl(redisContext *r, const char *key)
{
    return th_cmd_int(r, "PTTL %s", key);
}

/* The server's time in ms. */
static long long server_ms(redisContext *r)
{
    redisReply *t = th_cmd(r, "TIME");
    long long ms = atoll(t->element[0]->str) * 1000 + atoll(t->element[1]->str) / 1000;
    freeReplyObject(t);
    return ms;
}

/* ---------------------------------------------------------------- watchdog ----------- */

/* One client (watchdog 30 s): a lock opened with watchdog_ms 1000 beside one with the
 * client's, and a read lock of a read-write lock with 1000 too. The short ones' PTTL stays
 * within 1 s and they are still held after 3 s (renewed every ~333 ms); the long one's PTTL
 * is the client's 30 s; the renewals of those 3 s are the short group's (about 9), not one
 * per hold per tick of every lease. */
Test(handle, a_handles_watchdog_lease_beside_the_clients_on_one_client)
{
    baton_client *c = th_client(NULL); /* watchdog_ms 0: 30000 */
    redisContext *r = th_redis();
    char *base = th_name("ho-wd");
    char n_short[200], n_long[200], n_rw[200];
    snprintf(n_short, sizeof n_short, "%s-short", base);
    snprintf(n_long, sizeof n_long, "%s-long", base);
    snprintf(n_rw, sizeof n_rw, "%s-rw", base);
    baton_handle_options o = opts_watchdog(1000);
    baton_lock *s, *l;
    baton_rwlock *rw;
    cr_assert(eq(int, baton_lock_open_opts(c, n_short, &o, &s), BATON_OK), "%s",
              baton_client_errmsg(c));
    cr_assert(eq(int, baton_lock_open_opts(c, n_long, NULL, &l), BATON_OK)); /* NULL: plain */
    cr_assert(eq(int, baton_rwlock_open_opts(c, n_rw, &o, &rw), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(s, 0, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(l, 0, 0), BATON_OK));
    cr_assert(
        eq(int, baton_lock_try_acquire(baton_rwlock_read(rw), 0, BATON_LEASE_WATCHDOG), BATON_OK));
    uint64_t rounds0 = baton__watchdog_rounds(c);
    long long p = pttl(r, n_short);
    cr_assert(p > 0 && p <= 1000, "the 1 s handle's hold: PTTL %lld", p);
    p = pttl(r, n_rw);
    cr_assert(p > 0 && p <= 1000, "the 1 s read lock: PTTL %lld", p);
    p = pttl(r, n_long);
    cr_assert(p > 20000, "the client's 30 s: PTTL %lld", p);

    int64_t t0 = th_ms();
    th_sleep_ms(3000); /* three leases of the short handle: held only if renewed */
    for (int i = 0; i < 2; i++) {
        const char *name = i ? n_rw : n_short;
        p = pttl(r, name);
        cr_assert(p > 0 && p <= 1000, "%s after %lld ms: PTTL %lld", name,
                  (long long)(th_ms() - t0), p);
    }
    bool held = false;
    cr_assert(eq(int, baton_lock_is_held_by_current_thread(s, &held), BATON_OK));
    cr_assert(held);
    p = pttl(r, n_long);
    cr_assert(p > 20000, "the client's 30 s after 3 s: PTTL %lld", p);
    /* the short group renewed every ~333 ms (about 9 batches of its two holds); the client's
     * group (10 s period) not yet once */
    uint64_t rounds = baton__watchdog_rounds(c) - rounds0;
    fprintf(stderr, "handle: %llu renewal batches in %lld ms (1 s and 30 s handles)\n",
            (unsigned long long)rounds, (long long)(th_ms() - t0));
    cr_assert(rounds >= 6 && rounds <= 13, "%llu renewal batches in 3 s",
              (unsigned long long)rounds);

    cr_assert(eq(int, baton_lock_release(s), BATON_OK));
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    cr_assert(eq(int, baton_lock_release(baton_rwlock_read(rw)), BATON_OK));
    baton_rwlock_close(rw);
    baton_lock_close(l);
    baton_lock_close(s);
    redisFree(r);
    baton_client_close(c);
    free(base);
}

/* Two handles of one client on one name, one with watchdog_ms 1000, the other the
 * client's 30 s, both holding for the same thread: one renewal, at the shorter lease (the
 * re-entry through the 30 s handle set a 30 s PTTL; the renewals bring it back within 1 s)
 * until both holds are released. */
Test(handle, two_handles_of_one_hold_renew_it_at_the_shorter_lease)
{
    baton_client *c = th_client(NULL);
    redisContext *r = th_redis();
    char *name = th_name("ho-two");
    baton_handle_options o = opts_watchdog(1000);
    baton_lock *s, *l;
    cr_assert(eq(int, baton_lock_open_opts(c, name, &o, &s), BATON_OK));
    cr_assert(eq(int, baton_lock_open(c, name, &l), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(s, 0, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(l, 0, BATON_LEASE_WATCHDOG), BATON_OK));
    long long p = pttl(r, name);
    cr_assert(p > 20000, "the re-entry through the 30 s handle: PTTL %lld", p);
    th_sleep_ms(1500);
    p = pttl(r, name);
    cr_assert(p > 0 && p <= 1000, "renewed at the shorter lease: PTTL %lld", p);
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    th_sleep_ms(1500); /* the remaining hold (the 1 s handle's) still renewed */
    p = pttl(r, name);
    cr_assert(p > 0 && p <= 1000, "after one release: PTTL %lld", p);
    cr_assert(eq(int, baton_lock_release(s), BATON_OK));
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s", name), 0));
    baton_lock_close(l);
    baton_lock_close(s);
    redisFree(r);
    baton_client_close(c);
    free(name);
}

/* The child: a client of its own (watchdog 30 s), the lock with watchdog_ms 1000 held for
 * 1.5 s (longer than its lease: renewed), then killed with -9, never released. */
static int hold_then_die(void *arg)
{
    const char *name = arg;
    baton_options o;
    baton_options_init(&o);
    o.url = th_url();
    baton_client *c;
    baton_lock *l;
    baton_handle_options ho = opts_watchdog(1000);
    if (baton_client_open(&o, &c) != BATON_OK || baton_lock_open_opts(c, name, &ho, &l) != BATON_OK)
        return 100;
    if (baton_lock_try_acquire(l, 0, BATON_LEASE_WATCHDOG) != BATON_OK)
        return 101;
    th_sleep_ms(1500);
    raise(SIGKILL);
    return 102;
}

/* A holder killed with -9 while its 1 s handle's watchdog renewed it: the lock is free for
 * another client within about that lease (not the client's 30 s). */
Test(handle, a_killed_holders_lock_is_free_within_its_handles_watchdog_lease)
{
    /* forked before this process has any baton thread (ThreadSanitizer's rule) */
    char *name = th_name("ho-dead");
    pid_t pid = th_fork(hold_then_die, name);
    int st = th_wait(pid);
    int64_t died = th_ms();
    cr_assert(eq(int, st, 128 + SIGKILL), "the child: %d", st);
    redisContext *r = th_redis();
    long long p = pttl(r, name);
    cr_assert(p > 0 && p <= 1000, "held (renewed) 1.5 s into a 1 s lease: PTTL %lld", p);
    baton_client *c = th_client(NULL);
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(c, name, &l), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(l, 0, 5000), BATON_ETIMEDOUT)); /* not free yet */
    cr_assert(eq(int, baton_lock_try_acquire(l, 5000, 5000), BATON_OK), "%s",
              baton_client_errmsg(c));
    int64_t took = th_ms() - died;
    fprintf(stderr, "handle: a killed holder's 1 s-watchdog lock free %lld ms after its death\n",
            (long long)took);
    cr_assert(took > 0 && took < 2500, "free %lld ms after the holder died", (long long)took);
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    baton_lock_close(l);
    baton_client_close(c);
    redisFree(r);
    free(name);
}

/* Permits taken with the watchdog on a permits handle of 1 s: the lease's end (the zset's
 * score) within 1 s of the server's time, and still there after 2.5 s. An election opened
 * with 1 s: its leader's lock has a PTTL within 1 s and it still leads after 2.5 s. */
Test(handle, permits_and_the_election_renew_with_their_handles_watchdog)
{
    baton_client *c = th_client(NULL);
    redisContext *r = th_redis();
    char *base = th_name("ho-pe");
    char n_p[200], n_e[200];
    snprintf(n_p, sizeof n_p, "%s-p", base);
    snprintf(n_e, sizeof n_e, "%s-e", base);
    baton_handle_options o = opts_watchdog(1000);
    baton_permits *p;
    baton_election *e;
    cr_assert(eq(int, baton_permits_open_opts(c, n_p, &o, &p), BATON_OK), "%s",
              baton_client_errmsg(c));
    cr_assert(eq(int, baton_election_open_opts(c, n_e, &o, &e), BATON_OK), "%s",
              baton_client_errmsg(c));
    cr_assert(eq(int, baton_permits_try_set_permits(p, 1, NULL), BATON_OK));
    char id[BATON_PERMIT_ID_SIZE];
    cr_assert(eq(int, baton_permits_try_acquire(p, 0, BATON_LEASE_WATCHDOG, id), BATON_OK));
    cr_assert(eq(int, baton_election_campaign(e, "v", 0, BATON_LEASE_WATCHDOG), BATON_OK), "%s",
              baton_client_errmsg(c));
    int64_t t0 = th_ms();
    for (int round = 0; round < 2; round++) {
        if (round)
            th_sleep_ms(2500);
        redisReply *z = th_cmd(r, "ZRANGE {%s}:timeout 0 -1 WITHSCORES", n_p);
        cr_assert(eq(sz, z->elements, 2), "round %d: the permit's lease is gone", round);
        long long left = atoll(z->element[1]->str) - server_ms(r);
        freeReplyObject(z);
        /* (+10: the script's and this TIME's milliseconds are rounded apart) */
        cr_assert(left > 0 && left <= 1010, "after %lld ms: the permit's lease ends in %lld ms",
                  (long long)(th_ms() - t0), left);
        long long ep = pttl(r, n_e);
        cr_assert(ep > 0 && ep <= 1000, "after %lld ms: the leader's PTTL %lld",
                  (long long)(th_ms() - t0), ep);
    }
    /* still held and still leading: a release and a resign find them (ENOTHELD if lost) */
    cr_assert(eq(int, baton_permits_release(p, id), BATON_OK), "%s", baton_client_errmsg(c));
    cr_assert(eq(int, baton_election_resign(e), BATON_OK), "%s", baton_client_errmsg(c));
    baton_election_close(e);
    baton_permits_close(p);
    redisFree(r);
    baton_client_close(c);
    free(base);
}

/* ---------------------------------------------------------------- fair wait ---------- */

typedef struct fair_waiter {
    baton_lock *l;
    int rc;
} fair_waiter;

static void *fair_wait_thread(void *arg)
{
    fair_waiter *w = arg;
    w->rc = baton_lock_try_acquire(w->l, 20000, 1000);
    if (w->rc == BATON_OK)
        baton_lock_release(w->l);
    return NULL;
}

/* Two waiters of one client queued on a fair lock: the one whose handle has fair_wait_ms
 * 60000 keeps its place until the server's time + 60 s, the other (the client's 5 s) + 5 s:
 * the queue's deadlines (redisson_lock_timeout:{name}) tell them apart. */
Test(handle, a_fair_locks_own_fair_wait_sets_its_waiters_deadline)
{
    baton_client *c = th_client(NULL); /* fair_wait_ms 0: 5000 */
    baton_client *holder = th_client(NULL);
    redisContext *r = th_redis();
    char *name = th_name("ho-fair");
    baton_handle_options o;
    baton_handle_options_init(&o);
    o.fair_wait_ms = 60000;
    baton_lock *h, *mine, *plain;
    cr_assert(eq(int, baton_fairlock_open(holder, name, &h), BATON_OK));
    cr_assert(eq(int, baton_fairlock_open_opts(c, name, &o, &mine), BATON_OK), "%s",
              baton_client_errmsg(c));
    cr_assert(eq(int, baton_fairlock_open(c, name, &plain), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(h, 0, 30000), BATON_OK));
    fair_waiter w[2] = {{mine, -100}, {plain, -100}};
    pthread_t t[2];
    cr_assert(eq(int, pthread_create(&t[0], NULL, fair_wait_thread, &w[0]), 0));
    for (int i = 0; i < 500 && th_cmd_int(r, "LLEN redisson_lock_queue:{%s}", name) < 1; i++)
        th_sleep_ms(10);
    cr_assert(eq(int, pthread_create(&t[1], NULL, fair_wait_thread, &w[1]), 0));
    for (int i = 0; i < 500 && th_cmd_int(r, "LLEN redisson_lock_queue:{%s}", name) < 2; i++)
        th_sleep_ms(10);
    cr_assert(eq(i64, th_cmd_int(r, "LLEN redisson_lock_queue:{%s}", name), 2));
    /* queued in that order: the first is the 60 s handle's */
    redisReply *q = th_cmd(r, "LRANGE redisson_lock_queue:{%s} 0 -1", name);
    long long now = server_ms(r);
    long long left[2];
    for (size_t i = 0; i < 2; i++) {
        redisReply *s = th_cmd(r, "ZSCORE redisson_lock_timeout:{%s} %s", name, q->element[i]->str);
        cr_assert(s->type == REDIS_REPLY_STRING, "waiter %zu has no deadline", i);
        left[i] = atoll(s->str) - now;
        freeReplyObject(s);
    }
    freeReplyObject(q);
    /* (+10: the script's and this TIME's milliseconds are rounded apart) */
    cr_assert(left[0] > 40000 && left[0] <= 60010, "the 60 s handle's waiter: %lld ms", left[0]);
    cr_assert(left[1] > 0 && left[1] <= 5010, "the client's 5 s: %lld ms", left[1]);
    cr_assert(eq(int, baton_lock_release(h), BATON_OK));
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        cr_assert(eq(int, w[i].rc, BATON_OK), "waiter %d", i);
    }
    baton_lock_close(plain);
    baton_lock_close(mine);
    baton_lock_close(h);
    redisFree(r);
    baton_client_close(holder);
    baton_client_close(c);
    free(name);
}

/* ---------------------------------------------------------------- recheck ------------ */

typedef struct latch_waiter {
    baton_latch *l;
    int rc;
    atomic_llong done_ms;
} latch_waiter;

static void *latch_wait_thread(void *arg)
{
    latch_waiter *w = arg;
    w->rc = baton_latch_await(w->l, BATON_WAIT_FOREVER);
    atomic_store(&w->done_ms, th_ms());
    return NULL;
}

/* A client whose recheck is 30 s; two latches on it, one opened with recheck_ms 300. Both
 * are opened behind baton's back (DEL, no message: the wake-up is lost): the 300 ms
 * handle's waiter returns within its recheck, the other is still waiting 1.5 s later
 * (its 30 s), until its waits are cancelled. */
Test(handle, a_latchs_own_recheck_bounds_a_lost_wake_up)
{
    baton_options co;
    baton_options_init(&co);
    co.recheck_ms = 30000;
    baton_client *c = th_client(&co);
    redisContext *r = th_redis();
    char *base = th_name("ho-latch");
    char n_fast[200], n_slow[200];
    snprintf(n_fast, sizeof n_fast, "%s-fast", base);
    snprintf(n_slow, sizeof n_slow, "%s-slow", base);
    baton_handle_options o;
    baton_handle_options_init(&o);
    o.recheck_ms = 300;
    baton_latch *fast, *slow;
    cr_assert(eq(int, baton_latch_open_opts(c, n_fast, &o, &fast), BATON_OK), "%s",
              baton_client_errmsg(c));
    cr_assert(eq(int, baton_latch_open(c, n_slow, &slow), BATON_OK));
    cr_assert(eq(int, baton_latch_try_set_count(fast, 1, NULL), BATON_OK));
    cr_assert(eq(int, baton_latch_try_set_count(slow, 1, NULL), BATON_OK));
    latch_waiter w[2] = {{fast, -100, 0}, {slow, -100, 0}};
    pthread_t t[2];
    /* each waiter reads the count before and after it subscribes, then sleeps: the slow
     * one first (the fast one's rechecks would count too), then the fast one */
    for (int k = 1; k >= 0; k--) {
        long long gets0 = th_cmdstat(r, "get");
        cr_assert(eq(int, pthread_create(&t[k], NULL, latch_wait_thread, &w[k]), 0));
        for (int i = 0; i < 2000 && th_cmdstat(r, "get") - gets0 < 2; i++)
            th_sleep_ms(10);
        cr_assert(ge(i64, th_cmdstat(r, "get") - gets0, 2), "waiter %d never read twice", k);
    }
    th_sleep_ms(50);
    cr_assert(eq(i64, atomic_load(&w[0].done_ms), 0));
    cr_assert(eq(i64, th_cmd_int(r, "DEL %s %s", n_fast, n_slow), 2)); /* no message */
    int64_t t0 = th_ms();
    pthread_join(t[0], NULL);
    cr_assert(eq(int, w[0].rc, BATON_OK));
    int64_t took = atomic_load(&w[0].done_ms) - t0;
    cr_assert(le(i64, took, 300 + 250), "the 300 ms handle's waiter: %lld ms", (long long)took);
    while (th_ms() - t0 < 1500)
        th_sleep_ms(50);
    cr_assert(eq(i64, atomic_load(&w[1].done_ms), 0), "the client's 30 s recheck woke it");
    cr_assert(eq(int, baton_latch_cancel_waits(slow), BATON_OK));
    pthread_join(t[1], NULL);
    cr_assert(eq(int, w[1].rc, BATON_ECANCELED));
    baton_latch_close(slow);
    baton_latch_close(fast);
    redisFree(r);
    baton_client_close(c);
    free(base);
}

typedef struct sem_waiter {
    baton_semaphore *s;
    int rc;
    atomic_llong done_ms;
} sem_waiter;

static void *sem_wait_thread(void *arg)
{
    sem_waiter *w = arg;
    w->rc = baton_semaphore_try_acquire(w->s, 1, 10000);
    atomic_store(&w->done_ms, th_ms());
    return NULL;
}

/* A client whose recheck is 60 s; a semaphore opened with recheck_ms 200: a permit written
 * without a message (SET) is taken within that recheck. */
Test(handle, a_semaphores_own_recheck_sees_a_silent_permit)
{
    baton_options co;
    baton_options_init(&co);
    co.recheck_ms = 60000;
    co.starve_ms = BATON_STARVE_NEVER; /* no line: the recheck alone bounds the sleep */
    baton_client *c = th_client(&co);
    char *name = th_name("ho-sem");
    baton_handle_options o;
    baton_handle_options_init(&o);
    o.recheck_ms = 200;
    baton_semaphore *s;
    cr_assert(eq(int, baton_semaphore_open_opts(c, name, &o, &s), BATON_OK), "%s",
              baton_client_errmsg(c));
    cr_assert(eq(int, baton_semaphore_try_set_permits(s, 0, NULL), BATON_OK));
    sem_waiter w = {s, -100, 0};
    pthread_t t;
    cr_assert(eq(int, pthread_create(&t, NULL, sem_wait_thread, &w), 0));
    th_sleep_ms(500);
    cr_assert(eq(i64, atomic_load(&w.done_ms), 0));
    redisContext *r = th_redis();
    freeReplyObject(th_cmd(r, "SET %s 1", name)); /* no PUBLISH: no wake-up */
    int64_t t0 = th_ms();
    pthread_join(t, NULL);
    cr_assert(eq(int, w.rc, BATON_OK), "%s", baton_client_errmsg(c));
    int64_t took = atomic_load(&w.done_ms) - t0;
    cr_assert(le(i64, took, 200 + 250), "taken %lld ms after the silent SET (recheck 200 ms)",
              (long long)took);
    cr_assert(eq(int, baton_semaphore_release(s, 1), BATON_OK));
    redisFree(r);
    baton_semaphore_close(s);
    baton_client_close(c);
    free(name);
}

/* ---------------------------------------------------------------- refused ------------ */

/* The open refused (BATON_EINVAL, *out NULL, the detail naming the object and the field);
 * nothing opened. */
#define assert_refused(call, out, c, want)                                                         \
    do {                                                                                           \
        cr_assert(eq(int, (call), BATON_EINVAL), #call);                                           \
        cr_assert_null(out, #call);                                                                \
        const char *m_ = baton_client_errmsg(c);                                                   \
        cr_assert(strstr(m_, want) == m_, "want \"%s...\", got \"%s\"", want, m_);                 \
    } while (0)

Test(handle, options_refused_name_the_field)
{
    baton_client *c = th_client(NULL);
    baton_handle_options o;
    baton_lock *l = (baton_lock *)&l;
    baton_semaphore *s = (baton_semaphore *)&s;
    baton_latch *la = (baton_latch *)&la;
    baton_barrier *b = (baton_barrier *)&b;
    baton_rwlock *rw = (baton_rwlock *)&rw;

    baton_handle_options_init(&o);
    cr_assert(eq(sz, o.size, sizeof o));
    cr_assert(o.watchdog_ms == 0 && o.fair_wait_ms == 0 && o.recheck_ms == 0);
    baton_handle_options_init(NULL); /* a no-op */

    o.size = 0; /* not initialised */
    assert_refused(baton_lock_open_opts(c, "x", &o, &l), l, c, "lock x: options size 0: ");
    baton_handle_options_init(&o);
    o.watchdog_ms = 10; /* under the floor */
    assert_refused(baton_lock_open_opts(c, "x", &o, &l), l, c, "lock x: watchdog_ms 10: ");
    o.watchdog_ms = -5;
    assert_refused(baton_lock_open_opts(c, "x", &o, &l), l, c, "lock x: watchdog_ms -5: ");
    o.watchdog_ms = BATON_MAX_DURATION_MS + 1;
    assert_refused(baton_lock_open_opts(c, "x", &o, &l), l, c, "lock x: watchdog_ms ");
    baton_handle_options_init(&o);
    o.fair_wait_ms = 5000; /* a semaphore has no fair wait */
    assert_refused(baton_semaphore_open_opts(c, "s", &o, &s), s, c,
                   "semaphore s: fair_wait_ms 5000: means nothing to the semaphore kind");
    assert_refused(baton_lock_open_opts(c, "x", &o, &l), l, c,
                   "lock x: fair_wait_ms 5000: means nothing to the lock kind");
    baton_handle_options_init(&o);
    o.watchdog_ms = 1000; /* a latch holds nothing */
    assert_refused(baton_latch_open_opts(c, "la", &o, &la), la, c,
                   "latch la: watchdog_ms 1000: means nothing");
    baton_handle_options_init(&o);
    o.recheck_ms = 300;
    assert_refused(baton_barrier_open_opts(c, "b", 2, &o, &b), b, c,
                   "barrier b: recheck_ms 300: means nothing");
    o.recheck_ms = -1;
    assert_refused(baton_rwlock_open_opts(c, "rw", &o, &rw), rw, c, "read-write lock rw: ");

    /* a caller built against a longer struct: bytes the library does not know must be 0 */
    struct {
        baton_handle_options o;
        int64_t later;
    } big;
    memset(&big, 0, sizeof big);
    big.o.size = sizeof big;
    big.o.watchdog_ms = 1000;
    cr_assert(eq(int, baton_lock_open_opts(c, "x", &big.o, &l), BATON_OK), "%s",
              baton_client_errmsg(c));
    baton_lock_close(l);
    big.later = 7;
    assert_refused(baton_lock_open_opts(c, "x", &big.o, &l), l, c, "lock x: options size ");
    cr_assert(strstr(baton_client_errmsg(c), "later version") != NULL, "%s",
              baton_client_errmsg(c));

    /* the multi-lock from names: its members' options, the member named */
    baton_handle_options_init(&o);
    o.recheck_ms = 5;
    const char *names[2] = {"m0", "m1"};
    assert_refused(baton_multilock_open_names_opts(c, names, 2, &o, &l), l, c,
                   "multi-lock: name 0: lock m0: recheck_ms 5: ");
    /* and accepted: NULL is the plain open */
    o.recheck_ms = 0;
    o.watchdog_ms = 1000;
    cr_assert(eq(int, baton_multilock_open_names_opts(c, names, 2, &o, &l), BATON_OK));
    baton_lock_close(l);
    cr_assert(eq(int, baton_semaphore_open_opts(c, "s", NULL, &s), BATON_OK));
    baton_semaphore_close(s);
    baton_client_close(c);
}
