/*
 * Faults between baton and the server, through the fault proxy (faultproxy.h): a command
 * connection cut at every byte of an acquire's or a release's reply (the ambiguous
 * outcome), and a server that falls silent. What must hold: the hold count is right, one
 * release frees the lock, a release or a semaphore release is counted exactly once, and
 * every call returns within its timeout and recovers once the network heals.
 */
#define _GNU_SOURCE
#include "faultproxy.h"
#include "helper.h"
#include "internal.h"

#include <criterion/new/assert.h>
#include <stdio.h>
#include <string.h>

TestSuite(faults, .timeout = 90);

typedef struct rig {
    th_server server;
    th_proxy *proxy;
    baton_client *c;
    redisContext *direct; /* to the server, around the proxy */
} rig;

static void rig_up(rig *r, int64_t command_timeout_ms)
{
    th_server_start(&r->server, NULL);
    r->proxy = th_proxy_start(r->server.port);
    baton_options o;
    baton_options_init(&o);
    o.url = th_proxy_url(r->proxy);
    o.connect_timeout_ms = 1000;
    o.command_timeout_ms = command_timeout_ms;
    cr_assert(eq(int, baton_client_open(&o, &r->c), BATON_OK), "%s", baton_open_errmsg());
    r->direct = th_redis_port(r->server.port);
}

static void rig_down(rig *r)
{
    baton_client_close(r->c);
    th_proxy_stop(r->proxy);
    redisFree(r->direct);
    th_server_stop(&r->server);
}

/* The hold count of c's calling thread on lock `name`, read around the proxy. */
static long long holds(rig *r, const char *name)
{
    char owner[BATON__OWNER_LEN];
    baton__owner(r->c, owner, sizeof owner);
    redisReply *rep = th_cmd(r->direct, "HGET %s %s", name, owner);
    long long n = rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : 0;
    freeReplyObject(rep);
    return n;
}

Test(faults, a_release_cut_at_every_byte_of_its_reply_counts_once)
{
    rig r;
    rig_up(&r, 1000);
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(r.c, "fl-rel", &l), BATON_OK));
    /* the reply to a release that leaves a hold is ":0\r\n": cut after 0..3 of its bytes */
    for (long n = 0; n < 4; n++) {
        cr_assert(eq(int, baton_lock_acquire(l, 30000), BATON_OK));
        cr_assert(eq(int, baton_lock_acquire(l, 30000), BATON_OK));
        cr_assert(eq(i64, holds(&r, "fl-rel"), 2));
        th_proxy_cut_after(r.proxy, TH_DOWN, n);
        cr_assert(eq(int, baton_lock_release(l), BATON_OK), "cut after %ld: %s", n,
                  baton_client_errmsg(r.c));
        cr_assert(eq(i64, holds(&r, "fl-rel"), 1), "cut after %ld: counted once", n);
        cr_assert(eq(int, baton_lock_release(l), BATON_OK));
        cr_assert(eq(i64, th_cmd_int(r.direct, "EXISTS fl-rel"), 0), "one release frees it");
    }
    cr_assert(ge(i64, th_proxy_accepted(r.proxy), 4), "every cut cost a connection");
    baton_lock_close(l);
    rig_down(&r);
}

Test(faults, an_acquire_cut_at_every_byte_of_its_reply_is_resolved)
{
    rig r;
    rig_up(&r, 1000);
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(r.c, "fl-acq", &l), BATON_OK));
    /* once, so that the server has the script: a first EVALSHA's answer is NOSCRIPT, and
     * cutting that is a script that surely did not run */
    cr_assert(eq(int, baton_lock_try_acquire(l, 0, 30000), BATON_OK));
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    /* an acquire that takes the lock answers nil, "$-1\r\n": cut after 0..4 bytes */
    for (long n = 0; n < 5; n++) {
        th_proxy_cut_after(r.proxy, TH_DOWN, n);
        int rc = baton_lock_try_acquire(l, 0, 30000);
        /* the script ran; its reply was lost: the client asks, as the same owner, and
         * records the hold it finds */
        cr_assert(eq(int, rc, BATON_OK), "cut after %ld: %s", n, baton_client_errmsg(r.c));
        int64_t count = 0;
        cr_assert(eq(int, baton_lock_hold_count(l, &count), BATON_OK));
        cr_assert(eq(i64, count, 1), "cut after %ld", n);
        cr_assert(eq(i64, holds(&r, "fl-acq"), 1));
        cr_assert(eq(int, baton_lock_release(l), BATON_OK));
        cr_assert(eq(i64, th_cmd_int(r.direct, "EXISTS fl-acq"), 0), "one release frees it");
    }
    baton_lock_close(l);
    rig_down(&r);
}

Test(faults, a_semaphore_release_cut_at_every_byte_counts_once)
{
    rig r;
    rig_up(&r, 1000);
    baton_semaphore *s;
    cr_assert(eq(int, baton_semaphore_open(r.c, "fl-sem", &s), BATON_OK));
    bool set = false;
    cr_assert(eq(int, baton_semaphore_try_set_permits(s, 1, &set), BATON_OK));
    /* the reply is ":1\r\n" */
    for (long n = 0; n < 4; n++) {
        cr_assert(eq(int, baton_semaphore_try_acquire(s, 1, 1000), BATON_OK));
        th_proxy_cut_after(r.proxy, TH_DOWN, n);
        cr_assert(eq(int, baton_semaphore_release(s, 1), BATON_OK), "cut after %ld: %s", n,
                  baton_client_errmsg(r.c));
        cr_assert(eq(i64, th_cmd_int(r.direct, "GET fl-sem"), 1), "cut after %ld", n);
    }
    baton_semaphore_close(s);
    rig_down(&r);
}

Test(faults, a_silent_server_costs_each_call_its_timeout_then_recovers)
{
    rig r;
    rig_up(&r, 500);
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(r.c, "fl-silent", &l), BATON_OK));
    th_proxy_hold(r.proxy, true);
    for (int i = 0; i < 3; i++) {
        int64_t t0 = th_ms();
        int rc = baton_lock_try_acquire(l, 0, 5000);
        int64_t took = th_ms() - t0;
        cr_assert(eq(int, rc, BATON_ECONN), "%s", baton_client_errmsg(r.c));
        /* one command timeout, a resolution attempt on a new connection (connect timeout) */
        cr_assert(le(i64, took, 500 + 1000 + 500 + 1000), "took %lld ms", (long long)took);
        bool locked = true;
        t0 = th_ms();
        cr_assert(eq(int, baton_lock_is_locked(l, &locked), BATON_ECONN));
        cr_assert(le(i64, th_ms() - t0, 2 * (500 + 1000) + 1000));
    }
    th_proxy_heal(r.proxy);
    /* whatever the held acquires did once released, the client recovers and the lock
     * works: held ones expire within their 5 s lease, or were never taken */
    cr_assert(eq(int, baton_lock_try_acquire(l, 8000, 5000), BATON_OK), "%s",
              baton_client_errmsg(r.c));
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    baton_lock_close(l);
    rig_down(&r);
}
