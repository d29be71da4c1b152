/*
 * Connections the server closed while they were idle (issue 12): against a redis-server
 * started with `--timeout 1` (the server's own idle timeout; managed services and load
 * balancers do the same after minutes), every call after 2.5 s of idleness succeeds at the
 * first try and leaves the right state, with a pool of 1 and of 16 connections; and the
 * same after CLIENT KILL of every idle connection.
 */
#define _GNU_SOURCE
#include "helper.h"
#include "internal.h"
#include "lockbase.h" /* the watchdog's rounds */
#include "conn.h"

#include "new_assert.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(idle, .timeout = 120);

typedef enum idle_kind { BY_TIMEOUT, BY_KILL } idle_kind;

typedef struct rig {
    th_server server;
    baton_client *c;
    idle_kind kind;
} rig;

/* One integer (or integer string; nil: 0; a pair such as PUBSUB NUMSUB's: its second) reply
 * to a command of space-separated words, on a connection of its own
 * (the server's timeout closes idle ones). */
static long long q(rig *g, const char *cmd)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", cmd);
    const char *argv[8];
    int argc = 0;
    for (char *t = strtok(buf, " "); t && argc < 8; t = strtok(NULL, " "))
        argv[argc++] = t;
    redisContext *r = th_redis_port(g->server.port);
    redisReply *rep = redisCommandArgv(r, argc, argv, NULL);
    cr_assert(rep && (rep->type == REDIS_REPLY_INTEGER || rep->type == REDIS_REPLY_STRING ||
                      rep->type == REDIS_REPLY_NIL ||
                      (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2)),
              "%s: %s", cmd, rep && rep->str ? rep->str : "no reply");
    const redisReply *e = rep->type == REDIS_REPLY_ARRAY ? rep->element[1] : rep;
    long long v = e->type == REDIS_REPLY_STRING ? atoll(e->str) : e->integer;
    freeReplyObject(rep);
    redisFree(r);
    return v;
}

static void rig_up(rig *g, int pool, idle_kind kind)
{
    th_server_start(&g->server, "--timeout 1");
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", g->server.port);
    baton_options o;
    baton_options_init(&o);
    o.url = url;
    o.pool_size = pool;
    o.watchdog_ms = 6000; /* renewals every 2 s: the connection idles past the timeout */
    o.command_timeout_ms = 2000;
    cr_assert(eq(int, baton_client_open(&o, &g->c), BATON_OK), "%s", baton_open_errmsg());
    /* fill the pool: every one of its connections is then idle at once */
    baton__conn *conns[16];
    for (int i = 0; i < pool; i++)
        cr_assert(eq(int, baton__conn_get(g->c, &conns[i]), BATON_OK));
    for (int i = 0; i < pool; i++)
        baton__conn_put(g->c, conns[i], false);
    g->kind = kind;
}

/* Lets every pooled connection go stale: the server's timeout closes them, or they are
 * killed (the test's own raw connections come and go in between). */
static void go_idle(rig *g)
{
    if (g->kind == BY_TIMEOUT) {
        th_sleep_ms(2500);
    } else {
        cr_assert(ge(i64, q(g, "CLIENT KILL TYPE normal SKIPME yes"), 1), "nothing was killed");
        th_sleep_ms(50); /* the closes reach the client's sockets */
    }
}

static void rig_down(rig *g)
{
    baton_client_close(g->c);
    th_server_stop(&g->server);
}

/* Every verb the issue names, each the first call after the connections went stale. */
static void every_call_succeeds_first_time(int pool, idle_kind kind)
{
    rig g;
    rig_up(&g, pool, kind);
    baton_lock *l, *fl, *m1, *m2, *group;
    baton_semaphore *s;
    baton_latch *latch;
    cr_assert(eq(int, baton_lock_open(g.c, "idle-lock", &l), BATON_OK));
    cr_assert(eq(int, baton_fairlock_open(g.c, "idle-fair", &fl), BATON_OK));
    cr_assert(eq(int, baton_lock_open(g.c, "idle-m1", &m1), BATON_OK));
    cr_assert(eq(int, baton_lock_open(g.c, "idle-m2", &m2), BATON_OK));
    baton_lock *members[2] = {m1, m2};
    cr_assert(eq(int, baton_multilock_open(members, 2, &group), BATON_OK));
    cr_assert(eq(int, baton_semaphore_open(g.c, "idle-sem", &s), BATON_OK));
    cr_assert(eq(int, baton_latch_open(g.c, "idle-latch", &latch), BATON_OK));
    bool set = false;
    cr_assert(eq(int, baton_semaphore_try_set_permits(s, 1, &set), BATON_OK));
    cr_assert(eq(int, baton_latch_try_set_count(latch, 2, &set), BATON_OK));

    go_idle(&g);
    cr_assert(eq(int, baton_lock_try_acquire(l, 0, 30000), BATON_OK), "lock acquire: %s",
              baton_client_errmsg(g.c));
    go_idle(&g);
    cr_assert(eq(int, baton_lock_release(l), BATON_OK), "lock release: %s",
              baton_client_errmsg(g.c));
    cr_assert(eq(i64, q(&g, "EXISTS idle-lock"), 0), "the lock is free");

    go_idle(&g);
    cr_assert(eq(int, baton_lock_try_acquire(fl, 0, 30000), BATON_OK), "fair acquire: %s",
              baton_client_errmsg(g.c));
    go_idle(&g);
    cr_assert(eq(int, baton_lock_release(fl), BATON_OK), "fair release: %s",
              baton_client_errmsg(g.c));
    cr_assert(eq(i64, q(&g, "EXISTS idle-fair"), 0));

    go_idle(&g);
    cr_assert(eq(int, baton_semaphore_try_acquire(s, 1, 0), BATON_OK), "semaphore acquire: %s",
              baton_client_errmsg(g.c));
    cr_assert(eq(i64, q(&g, "GET idle-sem"), 0));
    go_idle(&g);
    cr_assert(eq(int, baton_semaphore_release(s, 1), BATON_OK), "semaphore release: %s",
              baton_client_errmsg(g.c));
    cr_assert(eq(i64, q(&g, "GET idle-sem"), 1), "the permit is back, once");

    go_idle(&g);
    cr_assert(eq(int, baton_latch_count_down(latch), BATON_OK), "count_down: %s",
              baton_client_errmsg(g.c));
    cr_assert(eq(i64, q(&g, "GET idle-latch"), 1), "counted down once");

    cr_assert(eq(int, baton_lock_try_acquire(group, 0, 30000), BATON_OK));
    go_idle(&g);
    cr_assert(eq(int, baton_lock_release(group), BATON_OK), "multi-lock release: %s",
              baton_client_errmsg(g.c));
    cr_assert(eq(i64, q(&g, "EXISTS idle-m1") + q(&g, "EXISTS idle-m2"), 0));

    baton_lock_close(group);
    baton_lock_close(m1);
    baton_lock_close(m2);
    baton_lock_close(l);
    baton_lock_close(fl);
    baton_semaphore_close(s);
    baton_latch_close(latch);
    rig_down(&g);
}

Test(idle, after_the_servers_timeout_with_one_pooled_connection)
{
    every_call_succeeds_first_time(1, BY_TIMEOUT);
}

Test(idle, after_the_servers_timeout_with_sixteen_pooled_connections)
{
    every_call_succeeds_first_time(16, BY_TIMEOUT);
}

Test(idle, after_client_kill_with_one_pooled_connection)
{
    every_call_succeeds_first_time(1, BY_KILL);
}

Test(idle, after_client_kill_with_sixteen_pooled_connections)
{
    every_call_succeeds_first_time(16, BY_KILL);
}

static atomic_int lost_calls;

static void on_lost(baton_lock *l, void *arg)
{
    (void)l;
    (void)arg;
    atomic_fetch_add(&lost_calls, 1);
}

Test(idle, watchdog_renewals_outlive_the_servers_idle_timeout)
{
    rig g;
    rig_up(&g, 4, BY_TIMEOUT);
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(g.c, "idle-wd", &l), BATON_OK));
    cr_assert(eq(int, baton_lock_set_lost_handler(l, on_lost, NULL), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(l, BATON_LEASE_WATCHDOG), BATON_OK));
    uint64_t rounds0 = baton__watchdog_rounds(g.c);
    /* 7 s: three renewals, each on a connection the server closed a second after the last */
    th_sleep_ms(7000);
    cr_assert(ge(u64, baton__watchdog_rounds(g.c) - rounds0, 3));
    cr_assert(eq(int, atomic_load(&lost_calls), 0), "a renewal failed and the hold was lost");
    cr_assert(gt(i64, q(&g, "PTTL idle-wd"), 2000), "renewed, not expiring");
    cr_assert(eq(int, baton_lock_release(l), BATON_OK), "%s", baton_client_errmsg(g.c));
    cr_assert(eq(i64, q(&g, "EXISTS idle-wd"), 0));
    baton_lock_close(l);
    rig_down(&g);
}

/* A pool of one on a new server: the first renewal meets NOSCRIPT and loads the script
 * without waiting on the connection it holds itself; then renewals on connections the
 * server keeps closing, and (killed) ones killed every 700 ms, mid-pipeline included. */
static void watchdog_keeps_renewing(int pool, idle_kind kind)
{
    rig g;
    rig_up(&g, pool, kind);
    atomic_store(&lost_calls, 0);
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(g.c, "idle-wd1", &l), BATON_OK));
    cr_assert(eq(int, baton_lock_set_lost_handler(l, on_lost, NULL), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(l, BATON_LEASE_WATCHDOG), BATON_OK));
    int64_t start = th_ms();
    while (th_ms() - start < 7000) {
        if (kind == BY_KILL)
            q(&g, "CLIENT KILL TYPE normal SKIPME yes");
        th_sleep_ms(700);
        /* renewed every 2 s with a 6 s lease: never below 4 s, less slack */
        long long pttl = q(&g, "PTTL idle-wd1");
        cr_assert(gt(i64, pttl, 3000), "pttl %lld after %lld ms", pttl,
                  (long long)(th_ms() - start));
    }
    cr_assert(eq(int, atomic_load(&lost_calls), 0));
    cr_assert(eq(int, baton_lock_release(l), BATON_OK), "%s", baton_client_errmsg(g.c));
    cr_assert(eq(i64, q(&g, "EXISTS idle-wd1"), 0));
    baton_lock_close(l);
    rig_down(&g);
}

Test(idle, watchdog_renews_with_one_pooled_connection)
{
    watchdog_keeps_renewing(1, BY_TIMEOUT);
}

Test(idle, watchdog_renews_while_connections_are_killed)
{
    watchdog_keeps_renewing(16, BY_KILL);
}

typedef struct idle_waiter {
    baton_lock *l;
    int rc, release_rc;
    _Atomic int64_t done_ms;
} idle_waiter;

static void *wait_then_release(void *arg)
{
    idle_waiter *w = arg;
    w->rc = baton_lock_try_acquire(w->l, 5000, 30000);
    atomic_store(&w->done_ms, th_ms());
    w->release_rc = w->rc == BATON_OK ? baton_lock_release(w->l) : w->rc;
    return NULL;
}

/* Waits on the lock from a thread while another client holds it, and returns how long
 * after the holder's release the waiter had it. */
static int64_t wake_after_release(rig *g, baton_lock *holder, baton_lock *wanted)
{
    cr_assert(eq(int, baton_lock_acquire(holder, 30000), BATON_OK));
    idle_waiter w = {wanted, -1, -1, 0};
    pthread_t t;
    pthread_create(&t, NULL, wait_then_release, &w);
    for (int i = 0; q(g, "PUBSUB NUMSUB redisson_lock__channel:{idle-wake}") == 0; i++) {
        cr_assert(lt(int, i, 400), "the waiter never subscribed");
        th_sleep_ms(5);
    }
    int64_t released = th_ms();
    cr_assert(eq(int, baton_lock_release(holder), BATON_OK));
    pthread_join(t, NULL);
    cr_assert(eq(int, w.rc, BATON_OK), "%s", baton_client_errmsg(g->c));
    cr_assert(eq(int, w.release_rc, BATON_OK));
    return atomic_load(&w.done_ms) - released;
}

Test(idle, a_subscriber_connection_closed_while_idle_serves_the_next_waiter)
{
    rig g;
    rig_up(&g, 4, BY_TIMEOUT);
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", g.server.port);
    baton_client *other;
    cr_assert(eq(int, baton_client_open_url(url, &other), BATON_OK));
    baton_lock *holder, *wanted;
    cr_assert(eq(int, baton_lock_open(other, "idle-wake", &holder), BATON_OK));
    cr_assert(eq(int, baton_lock_open(g.c, "idle-wake", &wanted), BATON_OK));
    cr_assert(le(i64, wake_after_release(&g, holder, wanted), 500));
    /* the subscription is gone; the server closes the subscriber connection, now idle */
    go_idle(&g);
    int64_t late = wake_after_release(&g, holder, wanted);
    cr_assert(le(i64, late, 500), "woken %lld ms after the release", (long long)late);
    baton_lock_close(holder);
    baton_lock_close(wanted);
    baton_client_close(other);
    rig_down(&g);
}
