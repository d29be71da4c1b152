/*
 * Permit leases against a real redis-server: a pool of 4 used by 16 processes whose holders
 * are killed with -9 at random (never more than 4 holders, every killed holder's permit back
 * within its lease + 1 s, nothing leaked), Redisson's layout and id format, the release that
 * counts once when its reply is cut, unknown and expired ids, leases the watchdog renews,
 * the lost report, lease updates, waits, and bad input.
 */
#define _GNU_SOURCE
#include "faultproxy.h"
#include "helper.h"
#include "internal.h"
#include "lockbase.h" /* the watchdog's rounds */

#include "new_assert.h"
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

TestSuite(permits, .timeout = 60);

static baton_permits *open_permits(baton_client *c, const char *name, int64_t count)
{
    baton_permits *p = NULL;
    cr_assert(eq(int, baton_permits_open(c, name, &p), BATON_OK));
    if (count >= 0) {
        bool set = false;
        cr_assert(eq(int, baton_permits_try_set_permits(p, count, &set), BATON_OK));
        cr_assert(set);
    }
    return p;
}

static int64_t available(baton_permits *p, int64_t *held)
{
    int64_t n = -100;
    cr_assert(eq(int, baton_permits_available(p, &n, held), BATON_OK));
    return n;
}

static baton_client *client_with_watchdog(int64_t watchdog_ms)
{
    baton_options o;
    baton_options_init(&o);
    o.watchdog_ms = watchdog_ms;
    return th_client(&o);
}

/* The 16 raw bytes a permit id names, as Redisson stores them. */
static void id_bytes(const char *id, char out[16])
{
    for (int i = 0; i < 16; i++) {
        unsigned v = 0;
        sscanf(id + 2 * i, "%2x", &v);
        out[i] = (char)v;
    }
}

/* The end of a permit's lease (server ms), or -1 if it is not in the zset. */
static long long lease_end(redisContext *r, const char *name, const char *id)
{
    char b[16];
    id_bytes(id, b);
    redisReply *rep = redisCommand(r, "ZSCORE {%s}:timeout %b", name, b, (size_t)16);
    cr_assert(rep && rep->type != REDIS_REPLY_ERROR);
    long long v = rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : -1;
    freeReplyObject(rep);
    return v;
}

static long long server_ms(redisContext *r)
{
    redisReply *rep = th_cmd(r, "TIME");
    long long v = atoll(rep->element[0]->str) * 1000 + atoll(rep->element[1]->str) / 1000;
    freeReplyObject(rep);
    return v;
}

/* ---------------------------------------------------------------- layout and verbs ---- */

Test(permits, acquire_gives_redisson_ids_in_redissons_layout)
{
    baton_client *c = th_client(NULL);
    char *name = th_name("pl-layout");
    baton_permits *p = open_permits(c, name, 2);
    redisContext *r = th_redis();
    char a[BATON_PERMIT_ID_SIZE], b[BATON_PERMIT_ID_SIZE], x[BATON_PERMIT_ID_SIZE] = "x";
    long long t0 = server_ms(r);
    cr_assert(eq(int, baton_permits_try_acquire(p, 0, 5000, a), BATON_OK));
    cr_assert(eq(int, baton_permits_acquire(p, 8000, b), BATON_OK));
    /* 32 lowercase hex digits, 16 random bytes (Redisson's generateId) */
    cr_assert(eq(sz, strlen(a), (size_t)32));
    cr_assert(eq(sz, strspn(a, "0123456789abcdef"), (size_t)32));
    cr_assert(ne(str, a, b));
    cr_assert(eq(int, baton_permits_try_acquire(p, 0, 5000, x), BATON_ETIMEDOUT));
    cr_assert(eq(str, x, ""), "no id on failure");

    /* NAME: the available count; {NAME}:timeout: raw id -> end of lease (server ms) */
    redisReply *rep = th_cmd(r, "GET %s", name);
    cr_assert(eq(str, rep->str, "0"));
    freeReplyObject(rep);
    cr_assert(eq(i64, th_cmd_int(r, "ZCARD {%s}:timeout", name), 2));
    long long ea = lease_end(r, name, a), eb = lease_end(r, name, b);
    long long t1 = server_ms(r) + 1; /* + 1: an end is rounded up to the next ms, TIME down */
    cr_assert(ge(i64, ea, t0 + 5000), "lease end %lld", ea);
    cr_assert(le(i64, ea, t1 + 5000));
    cr_assert(ge(i64, eb, t0 + 8000));
    cr_assert(le(i64, eb, t1 + 8000));
    int64_t held = -1;
    cr_assert(eq(i64, available(p, &held), 0));
    cr_assert(eq(i64, held, 2));

    /* a release publishes the new count on redisson_sc:{NAME} */
    redisContext *sub = th_redis();
    freeReplyObject(th_cmd(sub, "SUBSCRIBE redisson_sc:{%s}", name));
    cr_assert(eq(int, baton_permits_release(p, a), BATON_OK));
    void *msg = NULL;
    cr_assert(eq(int, redisGetReply(sub, &msg), REDIS_OK));
    rep = msg;
    cr_assert(eq(str, rep->element[2]->str, "1"));
    freeReplyObject(rep);
    redisFree(sub);
    cr_assert(eq(i64, lease_end(r, name, a), -1));
    cr_assert(eq(i64, available(p, &held), 1));
    cr_assert(eq(i64, held, 1));

    bool existed = false;
    cr_assert(eq(int, baton_permits_try_set_permits(p, 9, &existed), BATON_OK));
    cr_assert(not(existed), "a count is set already");
    cr_assert(eq(int, baton_permits_delete(p, &existed), BATON_OK));
    cr_assert(existed);
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s {%s}:timeout", name, name), 0));
    cr_assert(eq(int, baton_permits_release(p, b), BATON_ENOTHELD), "deleted: forgotten");
    redisFree(r);
    baton_permits_close(p);
    baton_client_close(c);
    free(name);
}

Test(permits, acquire_many_takes_all_or_none)
{
    baton_client *c = th_client(NULL);
    char *name = th_name("pl-many");
    baton_permits *p = open_permits(c, name, 4);
    redisContext *r = th_redis();
    char ids[4][BATON_PERMIT_ID_SIZE];
    cr_assert(eq(int, baton_permits_try_acquire_many(p, 3, 0, 5000, ids), BATON_OK));
    for (int i = 0; i < 3; i++) {
        cr_assert(eq(sz, strlen(ids[i]), (size_t)32));
        cr_assert(gt(i64, lease_end(r, name, ids[i]), 0), "id %d is a lease", i);
    }
    cr_assert(ne(str, ids[0], ids[1]));
    cr_assert(ne(str, ids[1], ids[2]));
    char more[2][BATON_PERMIT_ID_SIZE];
    cr_assert(eq(int, baton_permits_try_acquire_many(p, 2, 200, 5000, more), BATON_ETIMEDOUT));
    cr_assert(eq(str, more[0], ""));
    int64_t held = 0;
    cr_assert(eq(i64, available(p, &held), 1), "none of the two taken");
    cr_assert(eq(i64, held, 3));
    for (int i = 0; i < 3; i++)
        cr_assert(eq(int, baton_permits_release(p, ids[i]), BATON_OK));
    cr_assert(
        eq(int, baton_permits_try_acquire_many(p, 4, 0, BATON_LEASE_WATCHDOG, ids), BATON_OK));
    cr_assert(eq(i64, available(p, &held), 0));
    cr_assert(eq(i64, held, 4));
    for (int i = 0; i < 4; i++)
        cr_assert(eq(int, baton_permits_release(p, ids[i]), BATON_OK));
    cr_assert(eq(i64, available(p, NULL), 4));
    cr_assert(eq(int, baton_permits_try_acquire_many(p, 0, 0, 5000, ids), BATON_EINVAL));
    cr_assert(eq(int, baton_permits_try_acquire_many(p, BATON_PERMITS_MAX_MANY + 1, 0, 5000, ids),
                 BATON_EINVAL));
    cr_assert(eq(int, baton_permits_try_acquire_many(p, 2, 0, 5000, NULL), BATON_EINVAL));
    redisFree(r);
    baton_permits_close(p);
    baton_client_close(c);
    free(name);
}

Test(permits, try_set_permits_counts_leases_still_running)
{
    baton_client *c = th_client(NULL);
    char *name = th_name("pl-set");
    baton_permits *p = open_permits(c, name, 3);
    char a[BATON_PERMIT_ID_SIZE];
    cr_assert(eq(int, baton_permits_acquire(p, 10000, a), BATON_OK));
    redisContext *r = th_redis();
    freeReplyObject(th_cmd(r, "DEL %s", name)); /* the count goes, the lease stays */
    bool set = false;
    cr_assert(eq(int, baton_permits_try_set_permits(p, 3, &set), BATON_OK));
    cr_assert(set);
    int64_t held = 0;
    cr_assert(eq(i64, available(p, &held), 2), "3 minus the lease running");
    cr_assert(eq(i64, held, 1));
    cr_assert(eq(int, baton_permits_release(p, a), BATON_OK));
    cr_assert(eq(i64, available(p, NULL), 3), "never more than the count set");
    redisFree(r);
    baton_permits_close(p);
    baton_client_close(c);
    free(name);
}

/* ---------------------------------------------------------------- release ------------- */

Test(permits, unknown_released_and_expired_ids_are_enotheld)
{
    baton_client *c = th_client(NULL);
    char *name = th_name("pl-ids");
    baton_permits *p = open_permits(c, name, 2);
    cr_assert(
        eq(int, baton_permits_release(p, "00112233445566778899aabbccddeeff"), BATON_ENOTHELD));
    cr_assert(not(eq(ptr, strstr(baton_client_errmsg(c), "no permit"), NULL)), "%s",
              baton_client_errmsg(c));
    char a[BATON_PERMIT_ID_SIZE], b[BATON_PERMIT_ID_SIZE];
    cr_assert(eq(int, baton_permits_acquire(p, 5000, a), BATON_OK));
    cr_assert(eq(int, baton_permits_release(p, a), BATON_OK));
    cr_assert(eq(int, baton_permits_release(p, a), BATON_ENOTHELD), "released already");
    cr_assert(eq(i64, available(p, NULL), 2), "and counted once");

    /* a lease that ended, not yet given back: the release gives it back and says so */
    cr_assert(eq(int, baton_permits_acquire(p, 150, a), BATON_OK));
    /* a lease that ended and was given back by someone who looked */
    cr_assert(eq(int, baton_permits_acquire(p, 150, b), BATON_OK));
    th_sleep_ms(300);
    cr_assert(eq(int, baton_permits_release(p, a), BATON_ENOTHELD));
    cr_assert(not(eq(ptr, strstr(baton_client_errmsg(c), "had ended"), NULL)), "%s",
              baton_client_errmsg(c));
    cr_assert(eq(i64, available(p, NULL), 2), "both back: one released, one reclaimed");
    cr_assert(eq(int, baton_permits_release(p, b), BATON_ENOTHELD));
    cr_assert(eq(i64, available(p, NULL), 2), "never above the count");
    /* an upper-case id names the same permit */
    cr_assert(eq(int, baton_permits_acquire(p, 5000, a), BATON_OK));
    for (char *q = a; *q; q++)
        if (*q >= 'a' && *q <= 'f')
            *q = (char)(*q - 'a' + 'A');
    cr_assert(eq(int, baton_permits_release(p, a), BATON_OK));
    cr_assert(eq(i64, available(p, NULL), 2));
    baton_permits_close(p);
    baton_client_close(c);
    free(name);
}

typedef struct rig {
    th_server server;
    th_proxy *proxy;
    baton_client *c;
    redisContext *direct;
} rig;

/* A private server behind the fault proxy, and a client through it. */
static void rig_up(rig *r)
{
    th_server_start(&r->server, NULL);
    r->proxy = th_proxy_start(r->server.port);
    baton_options o;
    baton_options_init(&o);
    o.url = th_proxy_url(r->proxy);
    o.connect_timeout_ms = 1000;
    o.command_timeout_ms = 1000;
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

Test(permits, a_release_cut_at_every_byte_of_its_reply_counts_once)
{
    rig r;
    rig_up(&r);
    baton_permits *p = open_permits(r.c, "pl-cut", 2);
    char a[BATON_PERMIT_ID_SIZE];
    /* the reply is ":1\r\n": cut after 0..3 of its bytes; a re-send that ran again would
     * find no permit (ENOTHELD) or, without the zset check, return two */
    for (long n = 0; n < 4; n++) {
        cr_assert(eq(int, baton_permits_try_acquire(p, 1000, 10000, a), BATON_OK));
        th_proxy_cut_after(r.proxy, TH_DOWN, n);
        cr_assert(eq(int, baton_permits_release(p, a), BATON_OK), "cut after %ld: %s", n,
                  baton_client_errmsg(r.c));
        redisReply *rep = th_cmd(r.direct, "GET pl-cut");
        cr_assert(eq(str, rep->str, "2"), "cut after %ld: counted once", n);
        freeReplyObject(rep);
    }
    cr_assert(ge(i64, th_proxy_accepted(r.proxy), 4), "every cut cost a connection");
    baton_permits_close(p);
    rig_down(&r);
}

Test(permits, an_acquire_cut_at_every_byte_of_its_reply_is_resolved)
{
    rig r;
    rig_up(&r);
    baton_permits *p = open_permits(r.c, "pl-acut", 1);
    char a[BATON_PERMIT_ID_SIZE];
    /* once, so that the server has the script (a cut NOSCRIPT is a script that did not run) */
    cr_assert(eq(int, baton_permits_try_acquire(p, 0, 10000, a), BATON_OK));
    cr_assert(eq(int, baton_permits_release(p, a), BATON_OK));
    /* the reply to a taken permit is "*2\r\n:1\r\n:10000\r\n": cut after 0..16 bytes */
    for (long n = 0; n < 17; n++) {
        th_proxy_cut_after(r.proxy, TH_DOWN, n);
        cr_assert(eq(int, baton_permits_try_acquire(p, 0, 10000, a), BATON_OK), "cut after %ld: %s",
                  n, baton_client_errmsg(r.c));
        cr_assert(eq(i64, lease_end(r.direct, "pl-acut", a) > 0, 1), "cut after %ld: its id", n);
        cr_assert(eq(int, baton_permits_release(p, a), BATON_OK));
        cr_assert(eq(i64, th_cmd_int(r.direct, "ZCARD {pl-acut}:timeout"), 0));
    }
    cr_assert(ge(i64, th_proxy_accepted(r.proxy), 17), "every cut cost a connection");
    baton_permits_close(p);
    rig_down(&r);
}

/* ---------------------------------------------------------------- leases -------------- */

typedef struct lost_seen {
    atomic_int count;
    char id[BATON_PERMIT_ID_SIZE];
    atomic_llong at_ms;
} lost_seen;

static void on_lost(baton_permits *p, const char *id, void *arg)
{
    (void)p;
    lost_seen *s = arg;
    snprintf(s->id, sizeof s->id, "%s", id);
    atomic_store(&s->at_ms, th_ms());
    atomic_fetch_add(&s->count, 1);
}

Test(permits, the_watchdog_keeps_a_permit_past_several_leases)
{
    baton_client *c = client_with_watchdog(600);
    char *name = th_name("pl-wd");
    baton_permits *p = open_permits(c, name, 1);
    lost_seen seen = {0};
    cr_assert(eq(int, baton_permits_set_lost_handler(p, on_lost, &seen), BATON_OK));
    redisContext *r = th_redis();
    char a[BATON_PERMIT_ID_SIZE], b[BATON_PERMIT_ID_SIZE];
    cr_assert(eq(int, baton_permits_acquire(p, BATON_LEASE_WATCHDOG, a), BATON_OK));
    long long first = lease_end(r, name, a);
    /* + 1: a lease's end is rounded up to the next ms (lua/permits_acquire.lua), TIME's
     * reading here down, and both may fall in the same ms */
    cr_assert(le(i64, first, server_ms(r) + 600 + 1));
    baton_permits *q = open_permits(c, name, -1);
    th_sleep_ms(2000); /* more than 3 leases */
    cr_assert(gt(i64, lease_end(r, name, a), server_ms(r)), "renewed: still running");
    cr_assert(gt(i64, lease_end(r, name, a), first + 1000));
    cr_assert(eq(int, baton_permits_try_acquire(q, 100, 1000, b), BATON_ETIMEDOUT));
    cr_assert(eq(int, baton_permits_release(q, a), BATON_OK), "any handle releases by id");
    cr_assert(eq(i64, available(q, NULL), 1));
    th_sleep_ms(400);
    cr_assert(eq(int, atomic_load(&seen.count), 0), "nothing lost, and no renewal reported");
    baton_permits_close(q);
    baton_permits_close(p);
    redisFree(r);
    baton_client_close(c);
    free(name);
}

typedef struct lease_holder {
    baton_permits *p;
    char id[BATON_PERMIT_ID_SIZE];
    int rc;
} lease_holder;

static void *take_lease(void *arg)
{
    lease_holder *h = arg;
    h->rc = baton_permits_acquire(h->p, BATON_LEASE_WATCHDOG, h->id);
    return NULL;
}

/* Two threads take a lease each through one handle at once (the handles may be used from
 * any thread): each lease is renewed as its own past three watchdog leases, and each
 * release ends its own renewal only. */
Test(permits, leases_taken_by_two_threads_of_one_handle_are_each_renewed)
{
    baton_client *c = client_with_watchdog(600);
    char *name = th_name("pl-shared");
    baton_permits *p = open_permits(c, name, 2);
    lost_seen seen = {0};
    cr_assert(eq(int, baton_permits_set_lost_handler(p, on_lost, &seen), BATON_OK));
    redisContext *r = th_redis();
    lease_holder h[2] = {{.p = p}, {.p = p}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        cr_assert(eq(int, pthread_create(&t[i], NULL, take_lease, &h[i]), 0));
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        cr_assert(eq(int, h[i].rc, BATON_OK), "%s", baton_client_errmsg(c));
    }
    cr_assert(strcmp(h[0].id, h[1].id) != 0);
    th_sleep_ms(2000); /* more than 3 leases */
    for (int i = 0; i < 2; i++)
        cr_assert(gt(i64, lease_end(r, name, h[i].id), server_ms(r)), "lease %d renewed", i);
    cr_assert(eq(int, baton_permits_release(p, h[0].id), BATON_OK));
    th_sleep_ms(1300); /* two leases: the other is still renewed, the released one is not */
    cr_assert(gt(i64, lease_end(r, name, h[1].id), server_ms(r)), "the other lease renewed");
    cr_assert(eq(i64, available(p, NULL), 1));
    cr_assert(eq(int, baton_permits_release(p, h[1].id), BATON_OK));
    th_sleep_ms(400);
    cr_assert(eq(int, atomic_load(&seen.count), 0), "nothing lost, and no renewal reported");
    baton_permits_close(p);
    redisFree(r);
    baton_client_close(c);
    free(name);
}

Test(permits, lease_zero_is_renewed_and_release_stops_the_renewal)
{
    baton_client *c = client_with_watchdog(600);
    char *name = th_name("pl-wd0");
    baton_permits *p = open_permits(c, name, 1);
    redisContext *r = th_redis();
    char a[BATON_PERMIT_ID_SIZE];
    cr_assert(eq(int, baton_permits_acquire(p, 0, a), BATON_OK));
    uint64_t rounds0 = baton__watchdog_rounds(c);
    th_sleep_ms(1300);
    cr_assert(gt(i64, lease_end(r, name, a), server_ms(r)), "renewed");
    cr_assert(ge(u64, baton__watchdog_rounds(c) - rounds0, 3));
    cr_assert(eq(int, baton_permits_release(p, a), BATON_OK));
    uint64_t rounds1 = baton__watchdog_rounds(c);
    th_sleep_ms(500);
    cr_assert(eq(u64, baton__watchdog_rounds(c), rounds1), "nothing left to renew");
    cr_assert(eq(i64, available(p, NULL), 1));
    redisFree(r);
    baton_permits_close(p);
    baton_client_close(c);
    free(name);
}

Test(permits, a_permit_removed_behind_its_back_is_reported_lost)
{
    baton_client *c = client_with_watchdog(600);
    char *name = th_name("pl-lost");
    baton_permits *p = open_permits(c, name, 2);
    lost_seen seen = {0};
    cr_assert(eq(int, baton_permits_set_lost_handler(p, on_lost, &seen), BATON_OK));
    int fd = -1;
    cr_assert(eq(int, baton_permits_lost_fd(p, &fd), BATON_OK));
    struct pollfd pfd = {fd, POLLIN, 0};
    cr_assert(eq(int, poll(&pfd, 1, 0), 0), "not readable before");
    char a[BATON_PERMIT_ID_SIZE], b[BATON_PERMIT_ID_SIZE];
    cr_assert(eq(int, baton_permits_acquire(p, BATON_LEASE_WATCHDOG, a), BATON_OK));
    cr_assert(eq(int, baton_permits_acquire(p, BATON_LEASE_WATCHDOG, b), BATON_OK));
    redisContext *r = th_redis();
    char raw[16];
    id_bytes(a, raw);
    int64_t t0 = th_ms();
    cr_assert(eq(i64, th_cmd_int(r, "ZREM {%s}:timeout %b", name, raw, (size_t)16), 1));
    cr_assert(eq(int, poll(&pfd, 1, 2000), 1), "the fd turns readable");
    int64_t took = th_ms() - t0;
    cr_assert(le(i64, took, 600), "within one renewal period (200 ms) and slack: %lld",
              (long long)took);
    /* the fd is written before the handler runs */
    for (int i = 0; i < 100 && atomic_load(&seen.count) == 0; i++)
        th_sleep_ms(5);
    cr_assert(eq(int, atomic_load(&seen.count), 1));
    cr_assert(eq(str, seen.id, a), "the handler names the permit");
    cr_assert(eq(int, baton_permits_release(p, a), BATON_ENOTHELD));
    th_sleep_ms(400);
    cr_assert(eq(int, atomic_load(&seen.count), 1), "the other permit is still renewed");
    cr_assert(gt(i64, lease_end(r, name, b), server_ms(r)));
    cr_assert(eq(int, baton_permits_release(p, b), BATON_OK));
    redisFree(r);
    baton_permits_close(p);
    baton_client_close(c);
    free(name);
}

Test(permits, update_lease_extends_and_fixes_a_lease)
{
    baton_client *c = client_with_watchdog(600);
    char *name = th_name("pl-upd");
    baton_permits *p = open_permits(c, name, 1);
    redisContext *r = th_redis();
    char a[BATON_PERMIT_ID_SIZE];
    cr_assert(eq(int, baton_permits_acquire(p, 300, a), BATON_OK));
    cr_assert(eq(int, baton_permits_update_lease(p, a, 5000), BATON_OK));
    th_sleep_ms(500);
    cr_assert(ge(i64, lease_end(r, name, a), server_ms(r) + 4000), "extended");
    cr_assert(eq(int, baton_permits_release(p, a), BATON_OK));
    cr_assert(eq(int, baton_permits_update_lease(p, a, 5000), BATON_ENOTHELD), "released");

    /* a renewed permit given a fixed lease is renewed no more */
    cr_assert(eq(int, baton_permits_acquire(p, BATON_LEASE_WATCHDOG, a), BATON_OK));
    cr_assert(eq(int, baton_permits_update_lease(p, a, 300), BATON_OK));
    th_sleep_ms(700);
    cr_assert(lt(i64, lease_end(r, name, a), server_ms(r)), "ended: not renewed");
    cr_assert(eq(int, baton_permits_update_lease(p, a, 5000), BATON_ENOTHELD),
              "an ended lease is not brought back");
    cr_assert(eq(i64, available(p, NULL), 1));
    redisFree(r);
    baton_permits_close(p);
    baton_client_close(c);
    free(name);
}

/* ---------------------------------------------------------------- waits --------------- */

static int die_holding(void *arg)
{
    const char **a = arg; /* name, lease */
    baton_options o;
    baton_options_init(&o);
    o.url = th_url();
    o.watchdog_ms = 800;
    baton_client *c;
    baton_permits *p;
    if (baton_client_open(&o, &c) != BATON_OK || baton_permits_open(c, a[0], &p) != BATON_OK)
        return 100;
    char id[BATON_PERMIT_ID_SIZE];
    if (baton_permits_try_set_permits(p, 1, NULL) != BATON_OK ||
        baton_permits_acquire(p, atoll(a[1]), id) != BATON_OK)
        return 101;
    raise(SIGKILL);
    return 102;
}

/* A holder killed with -9: a waiter takes its permit when its lease ends, without any
 * release or message, for a fixed lease and for the watchdog's. */
Test(permits, a_killed_holders_permit_goes_to_a_waiter_when_its_lease_ends)
{
    const char *leases[2] = {"700", "-2"}; /* -2, BATON_LEASE_WATCHDOG: the child's, 800 ms */
    for (int i = 0; i < 2; i++) {
        /* forked while this process has no baton thread (ThreadSanitizer requires it): the
         * client is opened after the fork and closed before the next one */
        char *name = th_name("pl-dead");
        const char *args[2] = {name, leases[i]};
        int64_t t0 = th_ms();
        pid_t pid = th_fork(die_holding, args);
        baton_client *c = th_client(NULL);
        baton_permits *p = open_permits(c, name, -1);
        int st = th_wait(pid);
        cr_assert(eq(int, st, 128 + SIGKILL));
        char id[BATON_PERMIT_ID_SIZE];
        cr_assert(eq(int, baton_permits_try_acquire(p, 0, 5000, id), BATON_ETIMEDOUT));
        cr_assert(eq(int, baton_permits_try_acquire(p, 5000, 5000, id), BATON_OK), "%s",
                  baton_client_errmsg(c));
        int64_t took = th_ms() - t0;
        cr_assert(le(i64, took, 800 + 1000), "lease %s: back after %lld ms", leases[i],
                  (long long)took);
        cr_assert(ge(i64, took, 600));
        cr_assert(eq(int, baton_permits_release(p, id), BATON_OK));
        cr_assert(eq(i64, available(p, NULL), 1));
        baton_permits_close(p);
        baton_client_close(c);
        free(name);
    }
}

typedef struct waiter {
    baton_permits *p;
    int64_t wait_ms;
    int rc;
    char id[BATON_PERMIT_ID_SIZE];
    int64_t done_ms;
} waiter;

static void *waiter_main(void *arg)
{
    waiter *w = arg;
    w->rc = baton_permits_try_acquire(w->p, w->wait_ms, 10000, w->id);
    w->done_ms = th_ms();
    return NULL;
}

Test(permits, a_release_wakes_a_waiter_and_a_timeout_leaves_nothing)
{
    baton_client *c = th_client(NULL);
    char *name = th_name("pl-wait");
    baton_permits *p = open_permits(c, name, 1);
    redisContext *r = th_redis();
    char a[BATON_PERMIT_ID_SIZE];
    cr_assert(eq(int, baton_permits_acquire(p, 10000, a), BATON_OK));
    waiter w = {p, 5000, -100, "", 0};
    pthread_t t;
    pthread_create(&t, NULL, waiter_main, &w);
    th_sleep_ms(200);
    int64_t t0 = th_ms();
    cr_assert(eq(int, baton_permits_release(p, a), BATON_OK));
    pthread_join(t, NULL);
    cr_assert(eq(int, w.rc, BATON_OK));
    cr_assert(le(i64, w.done_ms - t0, 300), "woken by the release, not a recheck");
    cr_assert(eq(int, baton_permits_release(p, w.id), BATON_OK));

    cr_assert(eq(int, baton_permits_acquire(p, 10000, a), BATON_OK));
    t0 = th_ms();
    char b[BATON_PERMIT_ID_SIZE];
    cr_assert(eq(int, baton_permits_try_acquire(p, 300, 10000, b), BATON_ETIMEDOUT));
    cr_assert(ge(i64, th_ms() - t0, 290));
    cr_assert(le(i64, th_ms() - t0, 800));
    cr_assert(eq(i64, th_numsub(r, "redisson_sc:{%s}", name), 0), "no subscription left");
    cr_assert(eq(i64, th_cmd_int(r, "ZCARD {%s}:timeout", name), 1), "no lease left");
    cr_assert(eq(int, baton_permits_release(p, a), BATON_OK));
    redisFree(r);
    baton_permits_close(p);
    baton_client_close(c);
    free(name);
}

typedef struct retaker {
    baton_permits *p;
    char id[BATON_PERMIT_ID_SIZE]; /* held, given back, then the one taken again */
    int rc;
    atomic_bool done;
} retaker;

static void *release_and_retake(void *arg)
{
    retaker *a = arg;
    a->rc = baton_permits_release(a->p, a->id);
    if (a->rc == BATON_OK)
        a->rc = baton_permits_try_acquire(a->p, 20000, 10000, a->id);
    atomic_store(&a->done, true);
    return NULL;
}

typedef struct await {
    waiter w;
    atomic_bool done;
} await;

static void *await_main(void *arg)
{
    await *a = arg;
    waiter_main(&a->w);
    atomic_store(&a->done, true);
    return NULL;
}

/* A thread that gives its permit back and asks again at once while threads of its client
 * wait for 1 permit queues behind them (as the semaphore's): the release and one attempt,
 * by the waiter woken. Before, the releaser took the permit back and the woken waiter lost:
 * three script runs. */
Test(permits, a_release_then_acquire_queues_behind_its_clients_waiters)
{
    baton_options o;
    baton_options_init(&o);
    o.recheck_ms = 60000;
    o.starve_ms = BATON_STARVE_NEVER; /* no line: the shared channel's wake-ups are counted */
    baton_client *c = th_client(&o);
    char *name = th_name("pl-behind");
    baton_permits *p = open_permits(c, name, 1);
    retaker a = {.p = p};
    cr_assert(eq(int, baton_permits_acquire(p, 30000, a.id), BATON_OK));
    await w[2];
    pthread_t t[2], ta;
    for (int i = 0; i < 2; i++) {
        w[i].w = (waiter){p, 20000, -100, "", 0};
        atomic_store(&w[i].done, false);
        pthread_create(&t[i], NULL, await_main, &w[i]);
    }
    th_sleep_ms(300); /* both asleep */
    redisContext *r = th_redis();
    freeReplyObject(th_cmd(r, "CONFIG RESETSTAT"));
    pthread_create(&ta, NULL, release_and_retake, &a);
    th_sleep_ms(300);
    cr_assert(eq(i64, th_cmdstat(r, "evalsha"), 2), "the release and one attempt");
    int done = atomic_load(&a.done) + atomic_load(&w[0].done) + atomic_load(&w[1].done);
    cr_assert(eq(int, done, 1), "one holder");
    /* the holder gives it back in turn until all three had it */
    for (int turn = 0; turn < 3; turn++) {
        const char *id = NULL;
        int64_t end = th_ms() + 5000;
        while (!id && th_ms() < end) {
            if (atomic_load(&a.done) && a.rc == BATON_OK && a.id[0])
                id = a.id;
            for (int i = 0; i < 2 && !id; i++)
                if (atomic_load(&w[i].done) && w[i].w.rc == BATON_OK && w[i].w.id[0])
                    id = w[i].w.id;
            if (!id)
                th_sleep_ms(5);
        }
        cr_assert(id != NULL, "turn %d: nobody holds the permit", turn);
        cr_assert(eq(int, baton_permits_release(p, id), BATON_OK));
        ((char *)id)[0] = '\0'; /* given back */
    }
    pthread_join(ta, NULL);
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        cr_assert(eq(int, w[i].w.rc, BATON_OK), "waiter %d", i);
    }
    cr_assert(eq(int, a.rc, BATON_OK));
    cr_assert(eq(i64, available(p, NULL), 1));
    redisFree(r);
    baton_permits_close(p);
    baton_client_close(c);
    free(name);
}

/* ---------------------------------------------------------------- bad input ----------- */

Test(permits, bad_input_is_einval_and_sends_nothing)
{
    baton_client *c = th_client(NULL);
    baton_permits *p = NULL;
    char id[BATON_PERMIT_ID_SIZE];
    cr_assert(eq(int, baton_permits_open(NULL, "x", &p), BATON_EINVAL));
    cr_assert(eq(int, baton_permits_open(c, NULL, &p), BATON_EINVAL));
    cr_assert(eq(int, baton_permits_open(c, "", &p), BATON_EINVAL));
    cr_assert(eq(ptr, p, NULL));
    cr_assert(eq(int, baton_permits_open(c, "x", NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_permits_try_acquire(NULL, 0, 1000, id), BATON_EINVAL));
    cr_assert(eq(int, baton_permits_release(NULL, "00"), BATON_EINVAL));
    cr_assert(eq(int, baton_permits_available(NULL, NULL, NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_permits_try_set_permits(NULL, 1, NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_permits_set_lost_handler(NULL, NULL, NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_permits_lost_fd(NULL, NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_permits_delete(NULL, NULL), BATON_EINVAL));
    baton_permits_close(NULL);

    char *name = th_name("pl-bad");
    p = open_permits(c, name, 1);
    redisContext *r = th_redis();
    long long before = th_commands_processed(r);
    cr_assert(eq(int, baton_permits_try_set_permits(p, -1, NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_permits_acquire(p, 1000, NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_permits_acquire(p, -3, id), BATON_EINVAL));
    cr_assert(eq(str, id, ""));
    cr_assert(eq(int, baton_permits_acquire(p, BATON_MAX_DURATION_MS + 1, id), BATON_EINVAL));
    cr_assert(eq(int, baton_permits_try_acquire(p, -2, 1000, id), BATON_EINVAL));
    const char *bad_ids[] = {NULL,
                             "",
                             "00112233",
                             "00112233445566778899aabbccddeefg",
                             "00112233445566778899aabbccddeeff0",
                             " 0112233445566778899aabbccddeeff"};
    for (size_t i = 0; i < sizeof bad_ids / sizeof *bad_ids; i++) {
        cr_assert(eq(int, baton_permits_release(p, bad_ids[i]), BATON_EINVAL), "id %zu", i);
        cr_assert(eq(int, baton_permits_update_lease(p, bad_ids[i], 1000), BATON_EINVAL));
    }
    cr_assert(
        eq(int, baton_permits_update_lease(p, "00112233445566778899aabbccddeeff", 0), BATON_EINVAL),
        "a lease update is a fixed lease");
    cr_assert(eq(int, baton_permits_update_lease(p, "00112233445566778899aabbccddeeff", -1),
                 BATON_EINVAL));
    cr_assert(eq(int, baton_permits_available(p, NULL, NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_permits_lost_fd(p, NULL), BATON_EINVAL));
    cr_assert(not(eq(str, (char *)baton_client_errmsg(c), "")));
    cr_assert(eq(i64, th_commands_processed(r) - before, 1), "only the second INFO");

    /* keys of another type: refused and left alone */
    freeReplyObject(th_cmd(r, "DEL %s", name));
    freeReplyObject(th_cmd(r, "HSET %s f v", name));
    cr_assert(eq(int, baton_permits_try_acquire(p, 0, 1000, id), BATON_EPROTO));
    freeReplyObject(th_cmd(r, "SET %s notanumber", name));
    cr_assert(eq(int, baton_permits_try_acquire(p, 0, 1000, id), BATON_EPROTO));
    int64_t avail = 0;
    cr_assert(eq(int, baton_permits_available(p, &avail, NULL), BATON_EPROTO));
    redisReply *rep = th_cmd(r, "GET %s", name);
    cr_assert(eq(str, rep->str, "notanumber"));
    freeReplyObject(rep);
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS {%s}:timeout", name), 0));
    redisFree(r);
    baton_permits_close(p);
    baton_client_close(c);
    free(name);
}

/* ---------------------------------------------------------------- the crash pool ------ */

/*
 * 16 processes take permits from a pool of 4, 200 acquisitions in all per slot, each hold
 * 5..15 ms with a 1500 ms lease. The parent stops a random worker (SIGSTOP), and if it is
 * holding a permit (not acquiring, not releasing), kills it with -9 and forks a new worker
 * for the slot's remaining acquisitions. Every hold is logged on CLOCK_MONOTONIC from after
 * its acquire returned to before its release was sent (inside the span the server counts it
 * held); a killed holder's span ends at the earliest moment the server could give its
 * permit back: the start of its acquire call + the lease.
 */
#define SLOTS 16
#define PER_SLOT 200
#define POOL 4
#define LEASE_MS 1500
#define KILLS 12
#define MAX_LOG (SLOTS * PER_SLOT + 64)

enum { ST_IDLE, ST_ACQUIRING, ST_HOLDING, ST_RELEASING, ST_DONE };

typedef struct span {
    int64_t call_us, start_us, end_us;
    int slot;
    bool killed;
} span;

typedef struct slot {
    atomic_int state;
    atomic_int remaining;
    int64_t call_us, start_us; /* of the current hold */
    char id[BATON_PERMIT_ID_SIZE];
    atomic_int errors;
    char errmsg[200];
} slot;

typedef struct shared {
    const char *name;
    slot slots[SLOTS];
    atomic_int nlog;
    span log[MAX_LOG];
} shared;

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static shared *g_sh;
static int g_slot;

static void worker_error(slot *s, const char *what, int rc, baton_client *c)
{
    if (atomic_fetch_add(&s->errors, 1) == 0)
        snprintf(s->errmsg, sizeof s->errmsg, "%s: %s: %s", what, baton_err_name(rc),
                 c ? baton_client_errmsg(c) : "");
}

static int pool_worker(void *arg)
{
    (void)arg;
    shared *sh = g_sh;
    slot *s = &sh->slots[g_slot];
    baton_options o;
    baton_options_init(&o);
    o.url = th_url();
    baton_client *c;
    baton_permits *p;
    if (baton_client_open(&o, &c) != BATON_OK || baton_permits_open(c, sh->name, &p) != BATON_OK) {
        worker_error(s, "open", BATON_ECONN, NULL);
        return 1;
    }
    unsigned seed = (unsigned)getpid();
    char id[BATON_PERMIT_ID_SIZE];
    while (atomic_load(&s->remaining) > 0) {
        atomic_store(&s->state, ST_ACQUIRING);
        int64_t call = mono_us();
        int rc = baton_permits_acquire(p, LEASE_MS, id);
        if (rc != BATON_OK) {
            worker_error(s, "acquire", rc, c);
            continue;
        }
        s->call_us = call;
        s->start_us = mono_us();
        memcpy(s->id, id, sizeof id);
        atomic_store(&s->state, ST_HOLDING);
        usleep(5000 + (useconds_t)(rand_r(&seed) % 10000)); /* the work */
        atomic_store(&s->state, ST_RELEASING);
        int64_t end = mono_us();
        rc = baton_permits_release(p, id);
        if (rc != BATON_OK)
            worker_error(s, "release", rc, c);
        int i = atomic_fetch_add(&sh->nlog, 1);
        if (i < MAX_LOG)
            sh->log[i] = (span){call, s->start_us, end, g_slot, false};
        atomic_fetch_sub(&s->remaining, 1);
    }
    atomic_store(&s->state, ST_DONE);
    baton_permits_close(p);
    baton_client_close(c);
    return 0;
}

static pid_t start_worker(shared *sh, int i)
{
    g_sh = sh;
    g_slot = i;
    return th_fork(pool_worker, NULL);
}

typedef struct pending {
    char id[BATON_PERMIT_ID_SIZE];
    int64_t killed_us;
    bool open;
} pending;

static int cmp_event(const void *a, const void *b)
{
    const int64_t *x = a, *y = b;
    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1;
    return (int)(x[1] - y[1]); /* at one instant, ends (-1) before starts (+1) */
}

Test(permits, sixteen_processes_killed_at_random_never_exceed_four_and_leak_nothing, .timeout = 120)
{
    baton_client *c = th_client(NULL);
    char *name = th_name("pl-crash");
    baton_permits *p = open_permits(c, name, POOL);
    shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(ne(ptr, sh, MAP_FAILED));
    sh->name = name;
    redisContext *r = th_redis();
    pid_t pids[SLOTS];
    for (int i = 0; i < SLOTS; i++) {
        atomic_store(&sh->slots[i].remaining, PER_SLOT);
        pids[i] = start_worker(sh, i);
    }
    pending pend[KILLS + 1] = {0};
    int kills = 0, attempts = 0, checked = 0;
    int64_t worst_back_ms = 0, next_kill = th_ms() + 150;
    unsigned seed = 7;
    for (;;) {
        int live = 0, open = 0;
        for (int i = 0; i < SLOTS; i++)
            live += atomic_load(&sh->slots[i].state) != ST_DONE;
        for (int k = 0; k < kills; k++)
            open += pend[k].open;
        if (live == 0 && open == 0)
            break;
        /* a killed holder's permit: back (gone from the leases) within its lease + 1 s */
        for (int k = 0; k < kills; k++) {
            if (!pend[k].open)
                continue;
            int64_t age_ms = (mono_us() - pend[k].killed_us) / 1000;
            if (lease_end(r, name, pend[k].id) < 0) {
                pend[k].open = false;
                checked++;
                if (age_ms > worst_back_ms)
                    worst_back_ms = age_ms;
            } else if (age_ms > LEASE_MS + 1000) {
                /* with fewer than 5 workers left nobody may be waiting to take it back:
                 * then looking (available) gives it back */
                cr_assert(live < POOL + 1, "killed holder %d's permit not back after %lld ms", k,
                          (long long)age_ms);
                available(p, NULL);
            }
        }
        if (kills < KILLS && th_ms() >= next_kill && open < 2) {
            next_kill = th_ms() + 100 + rand_r(&seed) % 150;
            /* a random slot among those holding now */
            int i = (int)(rand_r(&seed) % SLOTS);
            for (int k = 0; k < SLOTS && atomic_load(&sh->slots[i].state) != ST_HOLDING; k++)
                i = (i + 1) % SLOTS;
            slot *s = &sh->slots[i];
            attempts++;
            if (atomic_load(&s->state) == ST_HOLDING && kill(pids[i], SIGSTOP) == 0) {
                int st;
                cr_assert(eq(int, waitpid(pids[i], &st, WUNTRACED), pids[i]));
                int stopped = WIFSTOPPED(st);
                cr_assert(stopped);
                if (atomic_load(&s->state) == ST_HOLDING) {
                    cr_assert(eq(int, kill(pids[i], SIGKILL), 0));
                    cr_assert(eq(int, th_wait(pids[i]), 128 + SIGKILL));
                    int64_t now = mono_us();
                    int n = atomic_fetch_add(&sh->nlog, 1);
                    cr_assert(lt(int, n, MAX_LOG));
                    sh->log[n] =
                        (span){s->call_us, s->start_us, s->call_us + LEASE_MS * 1000, i, true};
                    memcpy(pend[kills].id, s->id, BATON_PERMIT_ID_SIZE);
                    pend[kills].killed_us = now;
                    pend[kills].open = true;
                    kills++;
                    atomic_fetch_sub(&s->remaining, 1);
                    atomic_store(&s->state, ST_IDLE);
                    pids[i] = start_worker(sh, i);
                } else {
                    kill(pids[i], SIGCONT);
                }
            }
        }
        th_sleep_ms(10);
    }
    for (int i = 0; i < SLOTS; i++) {
        cr_assert(eq(int, th_wait(pids[i]), 0), "worker %d", i);
        cr_assert(eq(int, atomic_load(&sh->slots[i].errors), 0), "worker %d: %s", i,
                  sh->slots[i].errmsg);
        cr_assert(eq(int, atomic_load(&sh->slots[i].remaining), 0));
    }
    cr_assert(ge(int, kills, 10), "%d kills in %d attempts", kills, attempts);
    cr_assert(eq(int, checked, kills));

    /* the interval log: never more than POOL holders at once */
    int n = atomic_load(&sh->nlog);
    cr_assert(eq(int, n, SLOTS *PER_SLOT), "every acquisition logged, killed ones included");
    int64_t(*ev)[2] = calloc((size_t)n * 2, sizeof *ev);
    for (int i = 0; i < n; i++) {
        ev[2 * i][0] = sh->log[i].start_us;
        ev[2 * i][1] = 1;
        ev[2 * i + 1][0] = sh->log[i].end_us;
        ev[2 * i + 1][1] = -1;
    }
    qsort(ev, (size_t)n * 2, sizeof *ev, cmp_event);
    int now_holding = 0, most = 0;
    for (int i = 0; i < 2 * n; i++) {
        now_holding += (int)ev[i][1];
        if (now_holding > most)
            most = now_holding;
    }
    free(ev);
    cr_assert(le(int, most, POOL), "at most %d holders at once, the log shows %d", POOL, most);
    cr_assert(ge(int, most, POOL - 1), "the pool was used in parallel");
    int64_t held = -1;
    cr_assert(eq(i64, available(p, &held), POOL), "no permit leaked");
    cr_assert(eq(i64, held, 0));
    fprintf(stderr,
            "permits crash pool: %d acquisitions by %d slots, %d kills -9 (%d tries), most "
            "holders at once %d, slowest killed permit back after %lld ms (lease %d ms)\n",
            n, SLOTS, kills, attempts, most, (long long)worst_back_ms, LEASE_MS);
    munmap(sh, sizeof *sh);
    redisFree(r);
    baton_permits_close(p);
    baton_client_close(c);
    free(name);
}

/* ------------------------------------------------------------------ the line -------- */

/* A client of its own (a process, as far as waking goes) taking the one permit LINE_ROUNDS
 * times, holding it 2 ms; holders counts who holds it now, most the most at once. */
enum { LINE_ROUNDS = 12 };
typedef struct lease_rounds {
    baton_client *c;
    baton_permits *p;
    atomic_int *holders, *most;
    int rc, done;
} lease_rounds;

static void *take_lease_rounds(void *arg)
{
    lease_rounds *w = arg;
    for (int i = 0; i < LINE_ROUNDS && w->rc == BATON_OK; i++) {
        char id[BATON_PERMIT_ID_SIZE];
        w->rc = baton_permits_try_acquire(w->p, 20000, 10000, id);
        if (w->rc != BATON_OK)
            break;
        int now = atomic_fetch_add(w->holders, 1) + 1, was = atomic_load(w->most);
        while (now > was && !atomic_compare_exchange_weak(w->most, &was, now))
            ;
        th_sleep_ms(2);
        atomic_fetch_sub(w->holders, 1);
        w->rc = baton_permits_release(w->p, id);
        w->done += w->rc == BATON_OK;
    }
    return NULL;
}

static uint64_t permit_attempts(baton_client *c)
{
    baton_stats st;
    baton_client_stats(c, &st);
    return st.kind[BATON_KIND_SEMAPHORE].attempts;
}

/* Permit leases share the semaphore's line (issue 30: 16 processes on 4 permits made 6.4
 * attempts per acquisition, wait p99 14 ms): eight clients, each its own dispatcher as a
 * process has, take the one permit 12 times each with no pause between rounds; a release
 * hands it to the line's first alone (4.6 attempts per acquisition here without the line). */
Test(permits, a_release_goes_to_the_first_of_the_line_alone, .timeout = 60)
{
    enum { N = 8 };
    baton_client *c0 = th_client(NULL);
    char *name = th_name("pl-line");
    baton_permits *p0 = open_permits(c0, name, 1);
    atomic_int holders = 0, most = 0;
    lease_rounds w[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        w[i] = (lease_rounds){.c = th_client(NULL), .holders = &holders, .most = &most};
        w[i].p = open_permits(w[i].c, name, -1);
    }
    for (int i = 0; i < N; i++)
        cr_assert(eq(int, pthread_create(&t[i], NULL, take_lease_rounds, &w[i]), 0));
    uint64_t tried = 0;
    int taken = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        cr_assert(eq(int, w[i].rc, BATON_OK), "client %d: %s", i, baton_err_name(w[i].rc));
        taken += w[i].done;
        tried += permit_attempts(w[i].c);
        baton_permits_close(w[i].p);
        baton_client_close(w[i].c);
    }
    cr_assert(eq(int, taken, N *LINE_ROUNDS));
    cr_assert(eq(int, atomic_load(&most), 1), "one holder at a time");
    int64_t held = -1;
    cr_assert(eq(i64, available(p0, &held), 1));
    double per = (double)tried / taken;
    fprintf(stderr, "permits line: %d acquisitions by %d clients, %.2f attempts each\n", taken, N,
            per);
    cr_assert(le(dbl, per, 3.5), "%.2f attempts per acquisition (%llu for %d)", per,
              (unsigned long long)tried, taken);
    redisContext *r = th_redis();
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS baton_semaphore_line:{%s}", name), 0),
              "the line is gone with its waiters");
    redisFree(r);
    baton_permits_close(p0);
    baton_client_close(c0);
    free(name);
}

/* Issue 49, mixed deployments: the line's first waiter hears the shared channel too, so a
 * Redisson client's release (ZREM of the lease, INCRBY and PUBLISH of the count on
 * redisson_sc:{name} only, RPermitExpirableSemaphore's) wakes it within a round trip, not at
 * its next look (50 ms after it joined; the release comes about 10 ms after). */
static const char REDISSON_PERMIT_RELEASE[] =
    "if redis.call('zrem', KEYS[3], ARGV[1]) ~= 1 then return 0 end; "
    "local v = redis.call('incrby', KEYS[1], 1); redis.call('publish', KEYS[2], v); return 1";

Test(permits, a_redisson_release_wakes_the_lines_first_at_once, .timeout = 60)
{
    baton_client *ch = th_client(NULL), *ca = th_client(NULL);
    char *name = th_name("pl-redisson-wake");
    baton_permits *h = open_permits(ch, name, 1), *pa = open_permits(ca, name, -1);
    redisContext *r = th_redis();
    for (int round = 0; round < 3; round++) {
        char held[BATON_PERMIT_ID_SIZE];
        cr_assert(eq(int, baton_permits_try_acquire(h, 0, 60000, held), BATON_OK));
        waiter wa = {pa, 20000, -100, "", 0};
        pthread_t ta;
        cr_assert(eq(int, pthread_create(&ta, NULL, waiter_main, &wa), 0));
        int64_t t0 = th_ms();
        while (th_cmd_int(r, "ZCARD baton_semaphore_line:{%s}", name) < 1 && th_ms() - t0 < 5000)
            th_sleep_ms(1);
        cr_assert(eq(i64, th_cmd_int(r, "ZCARD baton_semaphore_line:{%s}", name), 1),
                  "round %d: the baton waiter queued", round);
        th_sleep_ms(10);
        /* the holder's permit given back as a Redisson client gives one back */
        char b[16];
        id_bytes(held, b);
        char timeouts[256], channel[256];
        snprintf(timeouts, sizeof timeouts, "{%s}:timeout", name);
        snprintf(channel, sizeof channel, "redisson_sc:{%s}", name);
        int64_t released = th_ms();
        redisReply *rep = redisCommand(r, "EVAL %s 3 %s %s %s %b", REDISSON_PERMIT_RELEASE, name,
                                       channel, timeouts, b, (size_t)16);
        cr_assert(rep && rep->type == REDIS_REPLY_INTEGER && rep->integer == 1);
        freeReplyObject(rep);
        pthread_join(ta, NULL);
        cr_assert(eq(int, wa.rc, BATON_OK), "round %d: %s", round, baton_err_name(wa.rc));
        cr_assert(le(i64, wa.done_ms - released, 25),
                  "round %d: the permit came %lld ms after the release", round,
                  (long long)(wa.done_ms - released));
        cr_assert(eq(int, baton_permits_release(pa, wa.id), BATON_OK));
    }
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS baton_semaphore_line:{%s}", name), 0));
    redisFree(r);
    baton_permits_close(pa);
    baton_permits_close(h);
    baton_client_close(ca);
    baton_client_close(ch);
    free(name);
}

/* A permit whose holder died (its lease ran out) goes to the line's first: A waits in the
 * line; B, a newcomer, asks after the lease has ended and is refused, whether A's own look
 * gave the lease back and took it first or B's try gave it back and reserved it for A
 * (permits_acquire.lua serves the line from what it reclaims). */
Test(permits, a_lease_that_ran_out_goes_to_the_first_of_the_line, .timeout = 60)
{
    baton_client *ch = th_client(NULL), *ca = th_client(NULL), *cb = th_client(NULL);
    char *name = th_name("pl-ended");
    baton_permits *h = open_permits(ch, name, 1), *pa = open_permits(ca, name, -1),
                  *pb = open_permits(cb, name, -1);
    char dead[BATON_PERMIT_ID_SIZE];
    cr_assert(eq(int, baton_permits_try_acquire(h, 0, 600, dead), BATON_OK)); /* 600 ms lease */
    redisContext *r = th_redis();
    waiter wa = {pa, 20000, -100, "", 0};
    pthread_t ta;
    pthread_create(&ta, NULL, waiter_main, &wa);
    int64_t t0 = th_ms();
    while (th_cmd_int(r, "ZCARD baton_semaphore_line:{%s}", name) < 1 && th_ms() - t0 < 5000)
        th_sleep_ms(2);
    cr_assert(eq(i64, th_cmd_int(r, "ZCARD baton_semaphore_line:{%s}", name), 1), "A queued");
    th_sleep_ms(700); /* the lease has ended; A looks every 50 ms and takes it, or B comes */
    char idb[BATON_PERMIT_ID_SIZE];
    int rb = baton_permits_try_acquire(pb, 0, 10000, idb);
    pthread_join(ta, NULL);
    cr_assert(eq(int, wa.rc, BATON_OK), "%s", baton_err_name(wa.rc));
    cr_assert(eq(int, rb, BATON_ETIMEDOUT), "the newcomer does not pass the line's first");
    cr_assert(le(i64, wa.done_ms - t0, 2000));
    cr_assert(eq(int, baton_permits_release(pa, wa.id), BATON_OK));
    redisFree(r);
    baton_permits_close(pb);
    baton_permits_close(pa);
    baton_permits_close(h);
    baton_client_close(cb);
    baton_client_close(ca);
    baton_client_close(ch);
    free(name);
}
