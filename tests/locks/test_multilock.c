/*
 * The multi-lock and its quorum mode (Redlock) against real redis-servers: all or nothing
 * with rollback, the canonical order (two processes locking in opposite orders), a single
 * winner among racing threads, leases, the shared wait budget, members on two servers and
 * a server going down, the quorum over three servers, group queries, and bad input.
 */
#define _GNU_SOURCE
#include "helper.h"
#include "internal.h"
#include "lockbase.h" /* the lock handle's base */

#include "new_assert.h"
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------- helpers ------------ */

/* a unique name, in storage the helper owns */
static char *nm(const char *base)
{
    return (char *)th_tmpname(base);
}

TestSuite(multilock, .timeout = 60);

static void open_locks(baton_client *c, char **names, size_t n, baton_lock **out)
{
    for (size_t i = 0; i < n; i++)
        cr_assert(eq(int, baton_lock_open(c, names[i], &out[i]), BATON_OK));
}

static void close_locks(baton_lock **l, size_t n)
{
    for (size_t i = 0; i < n; i++)
        baton_lock_close(l[i]);
}

static long long exists(redisContext *r, const char *key)
{
    return th_cmd_int(r, "EXISTS %s", key);
}

static baton_client *client_on(int port)
{
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    baton_options o;
    baton_options_init(&o);
    o.url = url;
    o.connect_timeout_ms = 1000;
    o.command_timeout_ms = 1000;
    return th_client(&o);
}

/* ---------------------------------------------------------------- all or nothing ----- */

Test(multilock, all_or_nothing_leaves_no_partial_hold)
{
    baton_client *c = th_client(NULL), *other = th_client(NULL);
    char *names[4] = {nm("ml-a"), nm("ml-b"), nm("ml-c"), nm("ml-d")};
    baton_lock *m[4], *held;
    open_locks(c, names, 4, m);
    cr_assert(eq(int, baton_lock_open(other, names[2], &held), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(held, BATON_LEASE_WATCHDOG), BATON_OK));

    /* passed in a scrambled order: the group takes them as A, B, C, D */
    baton_lock *members[4] = {m[3], m[0], m[2], m[1]};
    baton_lock *g;
    cr_assert(eq(int, baton_multilock_open(members, 4, &g), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(g, 0, BATON_LEASE_WATCHDOG), BATON_ETIMEDOUT));
    cr_assert(ne(str, (char *)baton_client_errmsg(c), ""));
    redisContext *r = th_redis();
    cr_assert(eq(i64, exists(r, names[0]), 0));
    cr_assert(eq(i64, exists(r, names[1]), 0));
    cr_assert(eq(i64, exists(r, names[3]), 0));
    cr_assert(eq(i64, exists(r, names[2]), 1)); /* the other client's hold is untouched */
    /* the same with a wait and an explicit lease */
    cr_assert(eq(int, baton_lock_try_acquire(g, 300, 5000), BATON_ETIMEDOUT));
    cr_assert(eq(i64, exists(r, names[0]), 0));
    cr_assert(eq(i64, exists(r, names[1]), 0));
    cr_assert(eq(i64, exists(r, names[3]), 0));
    cr_assert(eq(int, baton__sub_count(c), 0));

    cr_assert(eq(int, baton_lock_release(held), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(g, 0, BATON_LEASE_WATCHDOG), BATON_OK));
    for (int i = 0; i < 4; i++)
        cr_assert(eq(i64, exists(r, names[i]), 1), "member %d", i);
    cr_assert(eq(int, baton_lock_try_acquire(held, 0, 1000), BATON_ETIMEDOUT));
    cr_assert(eq(int, baton_lock_release(g), BATON_OK));
    for (int i = 0; i < 4; i++)
        cr_assert(eq(i64, exists(r, names[i]), 0), "member %d", i);
    cr_assert(eq(int, baton_lock_release(g), BATON_ENOTHELD));

    redisFree(r);
    baton_lock_close(g);
    baton_lock_close(held);
    close_locks(m, 4);
    baton_client_close(c);
    baton_client_close(other);
}

Test(multilock, a_failing_member_rolls_back_the_others)
{
    baton_client *c = th_client(NULL);
    char *names[3] = {nm("ml-a"), nm("ml-b"), nm("ml-c")};
    redisContext *r = th_redis();
    freeReplyObject(th_cmd(r, "SET %s not-a-lock", names[1])); /* B: wrong type */
    baton_lock *m[3], *g;
    open_locks(c, names, 3, m);
    cr_assert(eq(int, baton_multilock_open(m, 3, &g), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(g, 1000, BATON_LEASE_WATCHDOG), BATON_EPROTO));
    cr_assert(ne(ptr, strstr(baton_client_errmsg(c), "WRONGTYPE"), NULL), "%s",
              baton_client_errmsg(c));
    cr_assert(eq(i64, exists(r, names[0]), 0));
    cr_assert(eq(i64, exists(r, names[2]), 0));
    redisReply *rep = th_cmd(r, "GET %s", names[1]);
    cr_assert(eq(str, rep->str, "not-a-lock"));
    freeReplyObject(rep);
    redisFree(r);
    baton_lock_close(g);
    close_locks(m, 3);
    baton_client_close(c);
}

/* ---------------------------------------------------------------- canonical order ---- */

typedef struct order_job {
    char *names[3];
    bool reversed;
    const char *counter;
    int loops;
} order_job;

/* One process: loops times, lock the three items (in its own order), GET, pause, SET + 1. */
static int order_process(void *arg)
{
    order_job *j = arg;
    baton_options o;
    baton_options_init(&o);
    o.url = th_url();
    baton_client *c;
    if (baton_client_open(&o, &c) != BATON_OK)
        return 100;
    baton_lock *m[3], *g;
    for (int i = 0; i < 3; i++)
        if (baton_lock_open(c, j->names[j->reversed ? 2 - i : i], &m[i]) != BATON_OK)
            return 101;
    if (baton_multilock_open(m, 3, &g) != BATON_OK)
        return 102;
    struct timeval tv = {5, 0};
    redisContext *r = redisConnectWithTimeout("127.0.0.1", th_port(), tv);
    if (!r || r->err)
        return 103;
    int errors = 0;
    for (int i = 0; i < j->loops; i++) {
        if (baton_lock_acquire(g, BATON_LEASE_WATCHDOG) != BATON_OK) {
            errors++;
            continue;
        }
        redisReply *rep = redisCommand(r, "GET %s", j->counter);
        long long v = rep && rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : 0;
        if (rep)
            freeReplyObject(rep);
        usleep(200);
        rep = redisCommand(r, "SET %s %lld", j->counter, v + 1);
        if (rep)
            freeReplyObject(rep);
        if (baton_lock_release(g) != BATON_OK)
            errors++;
    }
    redisFree(r);
    baton_lock_close(g);
    for (int i = 0; i < 3; i++)
        baton_lock_close(m[i]);
    baton_client_close(c);
    return errors > 99 ? 99 : errors;
}

Test(multilock, opposite_orders_in_two_processes_never_deadlock)
{
    char *counter = nm("ml-counter");
    order_job a = {{nm("ml-a"), nm("ml-b"), nm("ml-c")}, false, counter, 200};
    order_job b = a;
    b.reversed = true; /* {C, B, A} */
    int64_t t0 = th_ms();
    pid_t pa = th_fork(order_process, &a), pb = th_fork(order_process, &b);
    cr_assert(eq(int, th_wait(pa), 0));
    cr_assert(eq(int, th_wait(pb), 0));
    int64_t took = th_ms() - t0;
    cr_log_info("opposite orders: 2 x 200 loops in %lld ms", (long long)took);
    cr_assert(lt(i64, took, 30000), "%lld ms", (long long)took);
    redisContext *r = th_redis();
    cr_assert(eq(i64, th_cmd_int(r, "GET %s", counter), 400));
    for (int i = 0; i < 3; i++)
        cr_assert(eq(i64, exists(r, a.names[i]), 0));
    redisFree(r);
}

/* ---------------------------------------------------------------- one winner ---------- */

typedef struct racer {
    baton_lock *group;
    pthread_barrier_t *start, *done;
    int rc;
} racer;

static void *race_thread(void *arg)
{
    racer *t = arg;
    pthread_barrier_wait(t->start);
    t->rc = baton_lock_try_acquire(t->group, 0, 10000);
    pthread_barrier_wait(t->done); /* the winner keeps the group until everyone tried */
    if (t->rc == BATON_OK)
        t->rc = baton_lock_release(t->group) == BATON_OK ? BATON_OK : -1000;
    return NULL;
}

static void race(bool quorum)
{
    baton_client *c = th_client(NULL);
    char *names[3] = {nm("ml-a"), nm("ml-b"), nm("ml-c")};
    baton_lock *m[3], *g;
    open_locks(c, names, 3, m);
    cr_assert(eq(int, (quorum ? baton_redlock_open : baton_multilock_open)(m, 3, &g), BATON_OK));
    pthread_barrier_t start, done;
    pthread_barrier_init(&start, NULL, 10);
    pthread_barrier_init(&done, NULL, 10);
    racer t[10];
    pthread_t tid[10];
    for (int i = 0; i < 10; i++) {
        t[i] = (racer){g, &start, &done, -999};
        pthread_create(&tid[i], NULL, race_thread, &t[i]);
    }
    int winners = 0;
    for (int i = 0; i < 10; i++) {
        pthread_join(tid[i], NULL);
        if (t[i].rc == BATON_OK)
            winners++;
        else
            cr_assert(eq(int, t[i].rc, BATON_ETIMEDOUT), "thread %d", i);
    }
    cr_assert(eq(int, winners, 1));
    redisContext *r = th_redis();
    for (int i = 0; i < 3; i++)
        cr_assert(eq(i64, exists(r, names[i]), 0));
    redisFree(r);
    pthread_barrier_destroy(&start);
    pthread_barrier_destroy(&done);
    baton_lock_close(g);
    close_locks(m, 3);
    baton_client_close(c);
}

Test(multilock, ten_threads_at_once_exactly_one_wins)
{
    race(false);
}

Test(multilock, ten_threads_at_once_exactly_one_wins_the_quorum)
{
    race(true);
}

/* ---------------------------------------------------------------- leases and waits ---- */

Test(multilock, lease_expires_every_member_on_time)
{
    baton_client *c = th_client(NULL);
    char *names[3] = {nm("ml-a"), nm("ml-b"), nm("ml-c")};
    baton_lock *m[3], *g;
    open_locks(c, names, 3, m);
    cr_assert(eq(int, baton_multilock_open(m, 3, &g), BATON_OK));
    int64_t t0 = th_ms();
    cr_assert(eq(int, baton_lock_acquire(g, 1000), BATON_OK));
    int64_t ttl;
    cr_assert(eq(int, baton_lock_remaining_ttl(g, &ttl), BATON_OK));
    cr_assert(le(i64, ttl, 1000));
    cr_assert(gt(i64, ttl, 900));
    redisContext *r = th_redis();
    int64_t gone[3] = {0, 0, 0};
    int left = 3;
    while (left > 0 && th_ms() - t0 < 3000) {
        for (int i = 0; i < 3; i++) {
            if (!gone[i] && exists(r, names[i]) == 0) { /* EXISTS expires lazily: exact */
                gone[i] = th_ms() - t0;
                left--;
            }
        }
        th_sleep_ms(5);
    }
    cr_log_info("lease 1000 ms: members expired after %lld, %lld, %lld ms", (long long)gone[0],
                (long long)gone[1], (long long)gone[2]);
    for (int i = 0; i < 3; i++) {
        cr_assert(ge(i64, gone[i], 980), "member %d expired after %lld ms", i, (long long)gone[i]);
        cr_assert(le(i64, gone[i], 1150), "member %d expired after %lld ms", i, (long long)gone[i]);
    }
    cr_assert(eq(int, baton_lock_remaining_ttl(g, &ttl), BATON_OK));
    cr_assert(eq(i64, ttl, -2));
    cr_assert(eq(int, baton_lock_release(g), BATON_ENOTHELD));
    redisFree(r);
    baton_lock_close(g);
    close_locks(m, 3);
    baton_client_close(c);
}

Test(multilock, the_wait_budget_is_shared_by_the_members)
{
    baton_client *c = th_client(NULL), *other = th_client(NULL);
    char *names[3] = {nm("ml-a"), nm("ml-b"), nm("ml-c")};
    baton_lock *m[3], *hb, *hc, *g;
    open_locks(c, names, 3, m);
    cr_assert(eq(int, baton_lock_open(other, names[1], &hb), BATON_OK));
    cr_assert(eq(int, baton_lock_open(other, names[2], &hc), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(hb, 1500), BATON_OK)); /* B frees itself at 1.5 s */
    cr_assert(eq(int, baton_lock_acquire(hc, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(int, baton_multilock_open(m, 3, &g), BATON_OK));
    int64_t t0 = th_ms();
    cr_assert(eq(int, baton_lock_try_acquire(g, 2000, BATON_LEASE_WATCHDOG), BATON_ETIMEDOUT));
    int64_t took = th_ms() - t0;
    cr_log_info("try_acquire(wait 2000) of a group: ETIMEDOUT after %lld ms", (long long)took);
    cr_assert(ge(i64, took, 1990), "%lld ms", (long long)took);
    cr_assert(le(i64, took, 2300), "%lld ms", (long long)took); /* not 1.5 s + 2 s */
    redisContext *r = th_redis();
    cr_assert(eq(i64, exists(r, names[0]), 0));
    cr_assert(eq(i64, exists(r, names[1]), 0));
    cr_assert(eq(int, baton__sub_count(c), 0));
    cr_assert(eq(i64, th_numsub(r, "redisson_lock__channel:{%s}", names[2]), 0));
    redisFree(r);
    baton_lock_close(g);
    baton_lock_close(hb);
    baton_lock_close(hc);
    close_locks(m, 3);
    baton_client_close(c);
    baton_client_close(other);
}

Test(multilock, a_lease_shorter_than_the_wait_never_yields_an_expired_member)
{
    baton_client *c = th_client(NULL), *other = th_client(NULL);
    char *names[2] = {nm("ml-a"), nm("ml-b")};
    baton_lock *m[2], *hb, *g;
    open_locks(c, names, 2, m);
    cr_assert(eq(int, baton_lock_open(other, names[1], &hb), BATON_OK));
    int64_t b_taken = th_ms();                                  /* B's lease starts after this */
    cr_assert(eq(int, baton_lock_acquire(hb, 1200), BATON_OK)); /* B frees itself at 1.2 s */
    cr_assert(eq(int, baton_multilock_open(m, 2, &g), BATON_OK));
    /* A taken with a 500 ms lease cannot wait 1.2 s for B: the attempt is rolled back
     * before A expires and retried until B is free, and the group is then whole */
    int64_t t0 = th_ms();
    cr_assert(eq(int, baton_lock_try_acquire(g, 3000, 500), BATON_OK));
    int64_t took = th_ms() - t0;
    /* not before B's lease ran out (measured from before B was taken: under a sanitizer the
     * steps between B's acquire and t0 took over 50 ms) */
    cr_assert(ge(i64, th_ms() - b_taken, 1195), "%lld ms after B was taken",
              (long long)(th_ms() - b_taken));
    cr_assert(le(i64, took, 1600), "%lld ms", (long long)took);
    redisContext *r = th_redis();
    cr_assert(eq(i64, exists(r, names[0]), 1));
    cr_assert(eq(i64, exists(r, names[1]), 1));
    int64_t ttl;
    cr_assert(eq(int, baton_lock_remaining_ttl(g, &ttl), BATON_OK));
    cr_assert(gt(i64, ttl, 0));
    cr_assert(le(i64, ttl, 500));
    cr_assert(eq(int, baton_lock_release(g), BATON_OK));
    redisFree(r);
    baton_lock_close(g);
    baton_lock_close(hb);
    close_locks(m, 2);
    baton_client_close(c);
    baton_client_close(other);
}

typedef struct waiter {
    baton_lock *g;
    int64_t wait_ms, lease_ms;
    int rc;
    int64_t done_ms;
    bool release;
} waiter;

static void *wait_thread(void *arg)
{
    waiter *w = arg;
    w->rc = baton_lock_try_acquire(w->g, w->wait_ms, w->lease_ms);
    w->done_ms = th_ms();
    if (w->rc == BATON_OK && w->release)
        w->rc = baton_lock_release(w->g);
    return NULL;
}

Test(multilock, a_waiting_group_is_woken_by_the_release)
{
    baton_client *c = th_client(NULL), *other = th_client(NULL);
    char *names[3] = {nm("ml-a"), nm("ml-b"), nm("ml-c")};
    baton_lock *m[3], *hc, *g;
    open_locks(c, names, 3, m);
    cr_assert(eq(int, baton_lock_open(other, names[2], &hc), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(hc, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(int, baton_multilock_open(m, 3, &g), BATON_OK));
    waiter w = {g, BATON_WAIT_FOREVER, BATON_LEASE_WATCHDOG, -999, 0, true};
    pthread_t t;
    pthread_create(&t, NULL, wait_thread, &w);
    th_sleep_ms(300);
    int64_t released = th_ms();
    cr_assert(eq(int, baton_lock_release(hc), BATON_OK));
    pthread_join(t, NULL);
    cr_assert(eq(int, w.rc, BATON_OK));
    cr_assert(le(i64, w.done_ms - released, 200), "woken %lld ms after the release",
              (long long)(w.done_ms - released));
    redisContext *r = th_redis();
    for (int i = 0; i < 3; i++)
        cr_assert(eq(i64, exists(r, names[i]), 0));
    redisFree(r);
    baton_lock_close(g);
    baton_lock_close(hc);
    close_locks(m, 3);
    baton_client_close(c);
    baton_client_close(other);
}

/* ---------------------------------------------------------------- queries ------------- */

static void *is_held_thread(void *arg)
{
    bool held = true;
    int rc = baton_lock_is_held_by_current_thread(arg, &held);
    return (void *)(intptr_t)(rc == BATON_OK && !held);
}

Test(multilock, queries_answer_for_the_group)
{
    baton_client *c = th_client(NULL), *other = th_client(NULL);
    char *names[3] = {nm("ml-a"), nm("ml-b"), nm("ml-c")};
    baton_lock *m[3], *g, *hb;
    open_locks(c, names, 3, m);
    cr_assert(eq(int, baton_lock_open(other, names[1], &hb), BATON_OK));
    cr_assert(eq(int, baton_multilock_open(m, 3, &g), BATON_OK));
    cr_assert(eq(ptr, (void *)g->client, (void *)c)); /* one client: the group's */
    bool b = true;
    int64_t v = 99;
    cr_assert(eq(int, baton_lock_is_locked(g, &b), BATON_OK));
    cr_assert(not(b));
    cr_assert(eq(int, baton_lock_hold_count(g, &v), BATON_OK));
    cr_assert(eq(i64, v, 0));
    cr_assert(eq(int, baton_lock_remaining_ttl(g, &v), BATON_OK));
    cr_assert(eq(i64, v, -2));

    /* one member locked elsewhere: the group is not locked */
    cr_assert(eq(int, baton_lock_acquire(hb, 5000), BATON_OK));
    cr_assert(eq(int, baton_lock_is_locked(g, &b), BATON_OK));
    cr_assert(not(b));
    cr_assert(eq(int, baton_lock_release(hb), BATON_OK));

    cr_assert(eq(int, baton_lock_acquire(g, 5000), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(g, 8000), BATON_OK)); /* re-entered */
    cr_assert(eq(int, baton_lock_is_locked(g, &b), BATON_OK));
    cr_assert(b);
    cr_assert(eq(int, baton_lock_is_held_by_current_thread(g, &b), BATON_OK));
    cr_assert(b);
    pthread_t t;
    void *not_held;
    pthread_create(&t, NULL, is_held_thread, g);
    pthread_join(t, &not_held);
    cr_assert(eq(int, (int)(intptr_t)not_held, 1));
    cr_assert(eq(int, baton_lock_hold_count(g, &v), BATON_OK));
    cr_assert(eq(i64, v, 2));
    /* the group's TTL is its shortest member's */
    redisContext *r = th_redis();
    freeReplyObject(th_cmd(r, "PEXPIRE %s 3000", names[2]));
    cr_assert(eq(int, baton_lock_remaining_ttl(g, &v), BATON_OK));
    cr_assert(le(i64, v, 3000));
    cr_assert(gt(i64, v, 2500));
    /* one member's holds fewer: the group's count is the smallest */
    freeReplyObject(th_cmd(r, "HINCRBY %s %s:%llu -1", names[0], baton_client_id(c),
                           (unsigned long long)baton__thread_id()));
    cr_assert(eq(int, baton_lock_hold_count(g, &v), BATON_OK));
    cr_assert(eq(i64, v, 1));
    freeReplyObject(th_cmd(r, "HINCRBY %s %s:%llu 1", names[0], baton_client_id(c),
                           (unsigned long long)baton__thread_id()));
    cr_assert(eq(int, baton_lock_release(g), BATON_OK));
    cr_assert(eq(int, baton_lock_hold_count(g, &v), BATON_OK));
    cr_assert(eq(i64, v, 1));
    cr_assert(eq(int, baton_lock_release(g), BATON_OK));
    cr_assert(eq(int, baton_lock_is_locked(g, &b), BATON_OK));
    cr_assert(not(b));
    for (int i = 0; i < 3; i++)
        cr_assert(eq(i64, exists(r, names[i]), 0));
    redisFree(r);
    baton_lock_close(g);
    baton_lock_close(hb);
    close_locks(m, 3);
    baton_client_close(c);
    baton_client_close(other);
}

Test(multilock, force_release_frees_every_member)
{
    baton_client *c = th_client(NULL), *other = th_client(NULL);
    char *names[2] = {nm("ml-a"), nm("ml-b")};
    baton_lock *m[2], *mo[2], *g, *go;
    open_locks(c, names, 2, m);
    open_locks(other, names, 2, mo);
    cr_assert(eq(int, baton_multilock_open(m, 2, &g), BATON_OK));
    cr_assert(eq(int, baton_multilock_open(mo, 2, &go), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(g, BATON_LEASE_WATCHDOG), BATON_OK));
    bool was = false;
    cr_assert(eq(int, baton_lock_force_release(go, &was), BATON_OK));
    cr_assert(was);
    redisContext *r = th_redis();
    for (int i = 0; i < 2; i++)
        cr_assert(eq(i64, exists(r, names[i]), 0));
    cr_assert(eq(int, baton_lock_force_release(go, &was), BATON_OK));
    cr_assert(not(was));
    cr_assert(eq(int, baton_lock_release(g), BATON_ENOTHELD));
    cr_assert(eq(int, baton_lock_try_acquire(go, 0, 2000), BATON_OK));
    cr_assert(eq(int, baton_lock_release(go), BATON_OK));
    redisFree(r);
    baton_lock_close(g);
    baton_lock_close(go);
    close_locks(m, 2);
    close_locks(mo, 2);
    baton_client_close(c);
    baton_client_close(other);
}

/* ---------------------------------------------------------------- several servers ----- */

Test(multilock, members_on_two_servers_and_one_going_down)
{
    th_server s2;
    th_server_start(&s2, NULL);
    baton_client *c1 = client_on(th_port()), *c2 = client_on(s2.port);
    /* group g: its first member (canonical order: by name) on the server that stays, so
     * the failure comes after a member was taken; group h: the other way round */
    char *n1 = nm("ml-a"), *n2 = nm("ml-b"), *n3 = nm("ml-c"), *n4 = nm("ml-d");
    baton_lock *a1, *b2, *c2l, *d1, *g, *h;
    cr_assert(eq(int, baton_lock_open(c1, n1, &a1), BATON_OK));
    cr_assert(eq(int, baton_lock_open(c2, n2, &b2), BATON_OK));
    cr_assert(eq(int, baton_lock_open(c2, n3, &c2l), BATON_OK));
    cr_assert(eq(int, baton_lock_open(c1, n4, &d1), BATON_OK));
    baton_lock *gm[2] = {b2, a1}, *hm[2] = {d1, c2l};
    cr_assert(eq(int, baton_multilock_open(gm, 2, &g), BATON_OK));
    cr_assert(eq(int, baton_multilock_open(hm, 2, &h), BATON_OK));
    cr_assert(eq(ptr, (void *)g->client, NULL)); /* members on two clients */
    redisContext *r1 = th_redis(), *r2 = th_redis_port(s2.port);

    cr_assert(eq(int, baton_lock_acquire(g, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(h, 10000), BATON_OK));
    cr_assert(eq(i64, exists(r1, n1), 1));
    cr_assert(eq(i64, exists(r2, n2), 1));
    cr_assert(eq(i64, exists(r2, n3), 1));
    cr_assert(eq(i64, exists(r1, n4), 1));
    bool b = false;
    cr_assert(eq(int, baton_lock_is_held_by_current_thread(g, &b), BATON_OK));
    cr_assert(b);
    cr_assert(eq(int, baton_lock_release(g), BATON_OK));
    cr_assert(eq(int, baton_lock_release(h), BATON_OK));
    cr_assert(eq(i64, exists(r1, n1), 0));
    cr_assert(eq(i64, exists(r2, n2), 0));
    cr_assert(eq(i64, exists(r2, n3), 0));
    cr_assert(eq(i64, exists(r1, n4), 0));
    redisFree(r2);

    th_server_stop(&s2);
    int64_t t0 = th_ms();
    cr_assert(eq(int, baton_lock_try_acquire(g, 1000, BATON_LEASE_WATCHDOG), BATON_ECONN));
    cr_assert(ne(str, (char *)baton_client_errmsg(c2), ""));
    cr_assert(eq(i64, exists(r1, n1), 0)); /* taken, then rolled back */
    cr_assert(eq(int, baton_lock_try_acquire(h, 1000, 10000), BATON_ECONN));
    cr_assert(eq(i64, exists(r1, n4), 0)); /* never taken */
    int64_t took = th_ms() - t0;
    cr_log_info("one of two servers down: two try_acquire ECONN in %lld ms", (long long)took);
    cr_assert(le(i64, took, 4500), "%lld ms", (long long)took);
    bool held = true;
    cr_assert(eq(int, baton_lock_is_held_by_current_thread(a1, &held), BATON_OK));
    cr_assert(not(held));
    cr_assert(eq(int, baton_lock_is_locked(g, &b), BATON_ECONN));
    cr_assert(eq(int, baton_lock_release(g), BATON_ECONN));

    redisFree(r1);
    baton_lock_close(g);
    baton_lock_close(h);
    baton_lock_close(a1);
    baton_lock_close(b2);
    baton_lock_close(c2l);
    baton_lock_close(d1);
    baton_client_close(c1);
    baton_client_close(c2);
}

/* ---------------------------------------------------------------- quorum (Redlock) ---- */

Test(multilock, quorum_over_three_servers)
{
    th_server s[2];
    th_server_start(&s[0], NULL);
    th_server_start(&s[1], NULL);
    /* The shared server's port range lies below the private servers': with one name on
     * all three, the canonical order is shared, s[0], s[1] (or s[1], s[0]), so the shared
     * server's member is taken first and must be rolled back at the end. */
    cr_assert(lt(int, th_port(), s[0].port));
    cr_assert(lt(int, th_port(), s[1].port));
    baton_client *c[3] = {client_on(th_port()), client_on(s[0].port), client_on(s[1].port)};
    char *name = nm("rl");
    baton_lock *m[3], *g;
    for (int i = 0; i < 3; i++)
        cr_assert(eq(int, baton_lock_open(c[i], name, &m[i]), BATON_OK));
    baton_lock *members[3] = {m[2], m[0], m[1]};
    cr_assert(eq(int, baton_redlock_open(members, 3, &g), BATON_OK));
    redisContext *r0 = th_redis(), *r[2] = {th_redis_port(s[0].port), th_redis_port(s[1].port)};

    cr_assert(eq(int, baton_lock_try_acquire(g, 1000, 10000), BATON_OK));
    cr_assert(eq(i64, exists(r0, name), 1));
    cr_assert(eq(i64, exists(r[0], name), 1));
    cr_assert(eq(i64, exists(r[1], name), 1));
    cr_assert(eq(int, baton_lock_release(g), BATON_OK));
    cr_assert(eq(i64, exists(r0, name), 0));
    cr_assert(eq(i64, exists(r[0], name), 0));
    cr_assert(eq(i64, exists(r[1], name), 0));

    /* one server down: a majority is still there */
    redisFree(r[0]);
    th_server_stop(&s[0]);
    cr_assert(eq(int, baton_lock_try_acquire(g, 1000, 10000), BATON_OK));
    cr_assert(eq(i64, exists(r0, name), 1));
    cr_assert(eq(i64, exists(r[1], name), 1));
    bool b = false;
    int64_t v = 0;
    cr_assert(eq(int, baton_lock_is_locked(g, &b), BATON_OK));
    cr_assert(b);
    cr_assert(eq(int, baton_lock_is_held_by_current_thread(g, &b), BATON_OK));
    cr_assert(b);
    cr_assert(eq(int, baton_lock_hold_count(g, &v), BATON_OK));
    cr_assert(eq(i64, v, 1));
    cr_assert(eq(int, baton_lock_remaining_ttl(g, &v), BATON_OK));
    cr_assert(le(i64, v, 10000));
    cr_assert(gt(i64, v, 8000));
    cr_assert(eq(int, baton_lock_release(g), BATON_OK));
    cr_assert(eq(i64, exists(r0, name), 0));
    cr_assert(eq(i64, exists(r[1], name), 0));

    /* two down: no majority; the surviving member is rolled back */
    redisFree(r[1]);
    th_server_stop(&s[1]);
    int64_t t0 = th_ms();
    cr_assert(eq(int, baton_lock_try_acquire(g, 1000, 10000), BATON_ECONN));
    cr_assert(le(i64, th_ms() - t0, 4500));
    cr_assert(eq(i64, exists(r0, name), 0));
    cr_assert(eq(int, baton_lock_is_locked(g, &b), BATON_ECONN));
    cr_assert(eq(int, baton_lock_release(g), BATON_ENOTHELD));

    redisFree(r0);
    baton_lock_close(g);
    for (int i = 0; i < 3; i++) {
        baton_lock_close(m[i]);
        baton_client_close(c[i]);
    }
}

Test(multilock, quorum_needs_a_majority_and_releases_what_it_took)
{
    baton_client *c = th_client(NULL), *other = th_client(NULL);
    char *names[3] = {nm("rl-a"), nm("rl-b"), nm("rl-c")};
    baton_lock *m[3], *mo[3], *g;
    open_locks(c, names, 3, m);
    open_locks(other, names, 3, mo);
    cr_assert(eq(int, baton_redlock_open(m, 3, &g), BATON_OK));
    redisContext *r = th_redis();

    /* two of three held elsewhere: no majority, the free one is rolled back */
    cr_assert(eq(int, baton_lock_acquire(mo[0], BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(mo[2], BATON_LEASE_WATCHDOG), BATON_OK));
    int64_t t0 = th_ms();
    cr_assert(eq(int, baton_lock_try_acquire(g, 600, 5000), BATON_ETIMEDOUT));
    int64_t took = th_ms() - t0;
    cr_assert(ge(i64, took, 590), "%lld ms", (long long)took);
    cr_assert(le(i64, took, 900), "%lld ms", (long long)took);
    cr_assert(eq(i64, exists(r, names[1]), 0));
    cr_assert(eq(int, baton__sub_count(c), 0));

    /* one of three held elsewhere: two is a majority */
    cr_assert(eq(int, baton_lock_release(mo[2]), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(g, 0, 5000), BATON_OK));
    bool held = false;
    cr_assert(eq(int, baton_lock_is_held_by_current_thread(m[1], &held), BATON_OK));
    cr_assert(held);
    cr_assert(eq(int, baton_lock_is_held_by_current_thread(m[2], &held), BATON_OK));
    cr_assert(held);
    /* the release touches exactly the members this hold took */
    cr_assert(eq(int, baton_lock_release(mo[0]), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(mo[0], 5000), BATON_OK));
    cr_assert(eq(int, baton_lock_release(g), BATON_OK));
    cr_assert(eq(i64, exists(r, names[1]), 0));
    cr_assert(eq(i64, exists(r, names[2]), 0));
    cr_assert(eq(int, baton_lock_is_locked(mo[0], &held), BATON_OK));
    cr_assert(held);
    cr_assert(eq(int, baton_lock_release(mo[0]), BATON_OK));
    cr_assert(eq(int, baton_lock_release(g), BATON_ENOTHELD));

    /* a lease too short to leave any validity after the clock-drift allowance */
    cr_assert(eq(int, baton_lock_try_acquire(g, 0, 2), BATON_ETIMEDOUT));
    for (int i = 0; i < 3; i++)
        cr_assert(eq(i64, exists(r, names[i]), 0));

    redisFree(r);
    baton_lock_close(g);
    close_locks(m, 3);
    close_locks(mo, 3);
    baton_client_close(c);
    baton_client_close(other);
}

/* ---------------------------------------------------------------- bad input ----------- */

Test(multilock, bad_input_is_einval)
{
    baton_client *c = th_client(NULL), *c_same = th_client(NULL);
    char *na = nm("ml-a"), *nb = nm("ml-b");
    baton_lock *a, *a2, *a3, *b, *g = (baton_lock *)0x1;
    cr_assert(eq(int, baton_lock_open(c, na, &a), BATON_OK));
    cr_assert(eq(int, baton_lock_open(c, na, &a2), BATON_OK));
    cr_assert(eq(int, baton_lock_open(c_same, na, &a3), BATON_OK)); /* same server */
    cr_assert(eq(int, baton_lock_open(c, nb, &b), BATON_OK));

    int (*open[2])(baton_lock *const *, size_t, baton_lock **) = {baton_multilock_open,
                                                                  baton_redlock_open};
    for (int k = 0; k < 2; k++) {
        baton_lock *ab[2] = {a, b}, *aa[2] = {a, a}, *aa2[3] = {b, a, a2}, *aa3[2] = {a3, a};
        baton_lock *anull[2] = {a, NULL};
        cr_assert(eq(int, open[k](ab, 0, &g), BATON_EINVAL));
        cr_assert(eq(ptr, g, NULL));
        cr_assert(eq(int, open[k](NULL, 2, &g), BATON_EINVAL));
        cr_assert(eq(int, open[k](ab, 2, NULL), BATON_EINVAL));
        cr_assert(eq(int, open[k](anull, 2, &g), BATON_EINVAL));
        cr_assert(eq(int, open[k](aa, 2, &g), BATON_EINVAL));
        cr_assert(ne(str, (char *)baton_client_errmsg(c), ""));
        cr_assert(eq(int, open[k](aa2, 3, &g), BATON_EINVAL));
        cr_assert(eq(int, open[k](aa3, 2, &g), BATON_EINVAL));
        cr_assert(eq(ptr, g, NULL));
        /* a multi-lock cannot be a member */
        cr_assert(eq(int, open[k](ab, 2, &g), BATON_OK));
        baton_lock *nested[2] = {g, a2};
        baton_lock *g2 = NULL;
        cr_assert(eq(int, open[k](nested, 2, &g2), BATON_EINVAL));
        cr_assert(eq(ptr, g2, NULL));
        /* bad waits and leases are refused before anything is sent */
        cr_assert(eq(int, baton_lock_try_acquire(g, -5, 1000), BATON_EINVAL));
        cr_assert(eq(int, baton_lock_try_acquire(g, 0, -3), BATON_EINVAL));
        cr_assert(eq(int, baton_lock_acquire(g, -7), BATON_EINVAL));
        cr_assert(eq(int, baton_lock_is_locked(g, NULL), BATON_EINVAL));
        cr_assert(eq(int, baton_lock_hold_count(g, NULL), BATON_EINVAL));
        char expect[256];
        snprintf(expect, sizeof expect, "%s,%s", na, nb);
        cr_assert(eq(str, (char *)baton_lock_name(g), expect));
        baton_lock_close(g);
        g = NULL;
    }
    baton_lock_close(NULL);
    baton_lock_close(a);
    baton_lock_close(a2);
    baton_lock_close(a3);
    baton_lock_close(b);
    baton_client_close(c);
    baton_client_close(c_same);
}

Test(multilock, a_group_has_no_single_fencing_token)
{
    baton_client *c = th_client(NULL);
    char *names[2] = {nm("ml-tok-a"), nm("ml-tok-b")};
    baton_lock *m[2], *g;
    open_locks(c, names, 2, m);
    cr_assert(eq(int, baton_multilock_open(m, 2, &g), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(g, 5000), BATON_OK));
    int64_t t = -1, t0 = 0, t1 = 0;
    cr_assert(eq(int, baton_lock_fencing_token(g, &t), BATON_ENOTSUP));
    cr_assert(eq(int, baton_lock_fencing_token(m[0], &t0), BATON_OK), "members have theirs");
    cr_assert(eq(int, baton_lock_fencing_token(m[1], &t1), BATON_OK));
    cr_assert(gt(i64, t0, 0));
    cr_assert(gt(i64, t1, 0));
    cr_assert(eq(int, baton_lock_release(g), BATON_OK));
    baton_lock_close(g);
    baton_lock_close(m[0]);
    baton_lock_close(m[1]);
    baton_client_close(c);
}
