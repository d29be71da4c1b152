/*
 * Leader election against a real redis-server: campaign, proclaim, resign, the leader's
 * record, observation in order, an expiry found by an observer, a Redisson-visible lock
 * hash, and the chaos run: five processes campaigning in a loop while the leader is killed
 * with kill -9 every few seconds and the server is paused once (terms rise, the leaders'
 * intervals from the server's point of view never overlap, takeover times are bounded,
 * the observer's log is the server's).
 */
#define _GNU_SOURCE
#include "helper.h"
#include "internal.h"

#include <criterion/logging.h>
#include "new_assert.h"
#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

TestSuite(election, .timeout = 60);

static baton_client *client_wd(int64_t watchdog_ms)
{
    baton_options o;
    baton_options_init(&o);
    o.watchdog_ms = watchdog_ms;
    o.recheck_ms = 200;
    return th_client(&o);
}

static baton_election *open_e(baton_client *c, const char *name)
{
    baton_election *e = NULL;
    cr_assert(eq(int, baton_election_open(c, name, &e), BATON_OK));
    return e;
}

/* A handle of c on name that leads, with value. */
static baton_election *leader(baton_client *c, const char *name, const char *value)
{
    baton_election *e = open_e(c, name);
    cr_assert(eq(int, baton_election_campaign(e, value, 0, BATON_LEASE_WATCHDOG), BATON_OK));
    return e;
}

/* Closes the handles, then the clients (each list NULL-terminated). */
static void close_all(baton_election *const *es, baton_client *const *cs)
{
    for (; *es; es++)
        baton_election_close(*es);
    for (; *cs; cs++)
        baton_client_close(*cs);
}

/* ---------------------------------------------------------------- basics ------------- */

Test(election, campaign_proclaim_resign_and_the_record)
{
    baton_client *c1 = th_client(NULL), *c2 = th_client(NULL);
    const char *name = th_tmpname("el");
    baton_election *a = open_e(c1, name), *b = open_e(c2, name);
    baton_leader ld;
    cr_assert(eq(int, baton_election_leader(a, &ld), BATON_OK));
    cr_assert(eq(i64, ld.term, 0));

    cr_assert(eq(int, baton_election_campaign(a, "alpha", 0, BATON_LEASE_WATCHDOG), BATON_OK));
    int64_t t1 = 0;
    cr_assert(eq(int, baton_election_term(a, &t1), BATON_OK));
    cr_assert(gt(i64, t1, 0));
    cr_assert(eq(int, baton_election_leader(b, &ld), BATON_OK));
    cr_assert(eq(i64, ld.term, t1));
    cr_assert(eq(str, ld.value, "alpha"));
    cr_assert(eq(i64, ld.pid, (int64_t)getpid()));
    cr_assert(gt(i64, ld.since_ms, 0));

    /* the standby cannot lead; the leader's lock is a Redisson lock hash at the name */
    cr_assert(
        eq(int, baton_election_campaign(b, "beta", 0, BATON_LEASE_WATCHDOG), BATON_ETIMEDOUT));
    redisContext *r = th_redis();
    cr_assert(eq(i64, th_cmd_int(r, "HLEN %s", name), 1));
    cr_assert(eq(int, baton_election_proclaim(b, "nope"), BATON_ENOTHELD));
    cr_assert(eq(int, baton_election_resign(b), BATON_ENOTHELD));

    cr_assert(eq(int, baton_election_proclaim(a, "alpha2"), BATON_OK));
    cr_assert(eq(int, baton_election_leader(b, &ld), BATON_OK));
    cr_assert(eq(str, ld.value, "alpha2"));
    cr_assert(eq(i64, ld.term, t1), "a proclaim keeps the term");
    /* campaigning again while leading only proclaims */
    cr_assert(eq(int, baton_election_campaign(a, "alpha3", 0, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(i64, th_cmd_int(r, "HGET %s %s:%llu", name, baton_client_id(c1), 0ULL), 0));

    /* a standby waiting forever takes over at once after the resign */
    cr_assert(eq(int, baton_election_resign(a), BATON_OK));
    cr_assert(eq(int, baton_election_term(a, &t1), BATON_ENOTHELD));
    int64_t t0 = th_ms();
    cr_assert(eq(int, baton_election_campaign(b, "beta", 2000, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(lt(i64, th_ms() - t0, 200));
    int64_t t2 = 0;
    cr_assert(eq(int, baton_election_term(b, &t2), BATON_OK));
    cr_assert(gt(i64, t2, t1), "the term rises with a new leader");
    cr_assert(eq(int, baton_election_resign(b), BATON_OK));
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s baton_election:{%s}", name, name), 0),
              "a resign leaves neither lock nor record");
    redisFree(r);
    baton_election_close(a);
    baton_election_close(b);
    baton_client_close(c1);
    baton_client_close(c2);
}

typedef struct waiter_arg {
    baton_election *e;
    int rc;
    int64_t at;
} waiter_arg;

static void *campaign_thread(void *p)
{
    waiter_arg *w = p;
    w->rc = baton_election_campaign(w->e, "standby", BATON_WAIT_FOREVER, BATON_LEASE_WATCHDOG);
    w->at = th_ms();
    return NULL;
}

typedef struct obs_arg {
    baton_election *e;
    int rc;
} obs_arg;

static void *observe_thread(void *p)
{
    obs_arg *o = p;
    baton_election_event ev;
    o->rc = baton_election_observe_next(o->e, BATON_WAIT_FOREVER, &ev);
    return NULL;
}

Test(election, a_waiting_standby_leads_at_once_after_a_resign)
{
    baton_client *c1 = th_client(NULL), *c2 = th_client(NULL);
    const char *name = th_tmpname("el");
    baton_election *a = open_e(c1, name), *b = open_e(c2, name);
    cr_assert(eq(int, baton_election_campaign(a, "a", 0, BATON_LEASE_WATCHDOG), BATON_OK));
    waiter_arg w = {.e = b};
    pthread_t t;
    pthread_create(&t, NULL, campaign_thread, &w);
    th_sleep_ms(300);
    int64_t t0 = th_ms();
    cr_assert(eq(int, baton_election_resign(a), BATON_OK));
    pthread_join(t, NULL);
    cr_assert(eq(int, w.rc, BATON_OK));
    cr_log_info("standby led %lld ms after the resign", (long long)(w.at - t0));
    cr_assert(lt(i64, w.at - t0, 100));
    baton_election_resign(b);
    baton_election_close(a);
    baton_election_close(b);
    baton_client_close(c1);
    baton_client_close(c2);
}

/* A campaign waiting to lead is cancelled through its handle (ECANCELED, nothing left:
 * no hold of its owner, no reservation), a campaign through another handle of the same
 * client goes on and leads after the resign; an observer's wait is cancelled the same way. */
Test(election, cancel_waits_ends_a_campaign_and_an_observation_of_that_handle_only)
{
    baton_client *c1 = th_client(NULL), *c2 = th_client(NULL);
    const char *name = th_tmpname("el");
    baton_election *a = leader(c1, name, "a"), *b = open_e(c2, name), *b2 = open_e(c2, name);
    waiter_arg w = {.e = b}, w2 = {.e = b2};
    pthread_t t, t2;
    pthread_create(&t, NULL, campaign_thread, &w);
    pthread_create(&t2, NULL, campaign_thread, &w2);
    th_sleep_ms(300); /* long enough to reserve the lock (starve_ms 100) */
    int64_t t0 = th_ms();
    cr_assert(eq(int, baton_election_cancel_waits(b), BATON_OK));
    pthread_join(t, NULL);
    cr_assert(eq(int, w.rc, BATON_ECANCELED));
    cr_assert(lt(i64, w.at - t0, 300));
    redisContext *r = th_redis();
    cr_assert(eq(i64, th_cmd_int(r, "HLEN %s", name), 1), "only the leader's hold");
    cr_assert(eq(int, baton_election_resign(a), BATON_OK));
    pthread_join(t2, NULL);
    cr_assert(eq(int, w2.rc, BATON_OK), "the other handle's campaign went on");
    int64_t term = 0;
    cr_assert(eq(int, baton_election_term(b2, &term), BATON_OK));
    cr_assert(eq(int, baton_election_term(b, &term), BATON_ENOTHELD));
    cr_assert(eq(int, baton_election_resign(b2), BATON_OK));
    cr_assert(
        eq(i64,
           th_cmd_int(r, "EXISTS %s baton_lock_next:{%s} baton_lock_line:{%s}", name, name, name),
           0),
        "no hold, no reservation and no place in the line left");

    /* an observer waiting for a change */
    baton_election_event ev;
    while (baton_election_observe_next(b, 0, &ev) == BATON_OK) {
    }
    obs_arg o = {.e = b};
    pthread_create(&t, NULL, observe_thread, &o);
    th_sleep_ms(200);
    t0 = th_ms();
    cr_assert(eq(int, baton_election_cancel_waits(b), BATON_OK));
    pthread_join(t, NULL);
    cr_assert(eq(int, o.rc, BATON_ECANCELED));
    cr_assert(lt(i64, th_ms() - t0, 300));
    cr_assert(eq(int, baton_election_cancel_waits(NULL), BATON_EINVAL));
    redisFree(r);
    close_all((baton_election *[]){a, b, b2, NULL}, (baton_client *[]){c1, c2, NULL});
}

/* ---------------------------------------------------------------- asynchronous ------- */

typedef struct done_t {
    int rc;     /* -100: not yet */
    int64_t at; /* th_ms() of the callback */
    void *handle;
} done_t;

static void on_done(void *handle, baton_owner *owner, int rc, void *arg)
{
    (void)owner;
    done_t *d = arg;
    d->rc = rc;
    d->at = th_ms();
    d->handle = handle;
}

/* The program's loop: polls the client's descriptor and runs the completions, until *rc
 * is no longer -100 (rc NULL: for ms) or ms pass. */
static void run_loop(baton_client *c, const int *rc, int64_t ms)
{
    int fd = -1;
    cr_assert(eq(int, baton_client_async_fd(c, &fd), BATON_OK));
    int64_t end = th_ms() + ms;
    while ((!rc || *rc == -100) && th_ms() < end) {
        struct pollfd p = {fd, POLLIN, 0};
        poll(&p, 1, 10);
        cr_assert(ge(int, baton_client_process(c), 0));
    }
}

/* Starts b's campaign_async behind another leader, and runs the loop of b's client c past
 * starve_ms (the waiter reserved the lock): it still waits. */
static baton_op *start_behind(baton_client *c, baton_election *b, done_t *d)
{
    baton_op *op = NULL;
    cr_assert(eq(int,
                 baton_election_campaign_async(b, "b", BATON_WAIT_FOREVER, BATON_LEASE_WATCHDOG,
                                               on_done, d, &op),
                 BATON_OK));
    cr_assert(not(eq(ptr, op, NULL)));
    run_loop(c, NULL, 300);
    cr_assert(eq(int, d->rc, -100), "waits while another leads");
    return op;
}

Test(election, campaign_async_completes_when_the_leader_resigns)
{
    baton_client *c1 = th_client(NULL), *c2 = th_client(NULL);
    const char *name = th_tmpname("el");
    baton_election *a = leader(c1, name, "a"), *b = open_e(c2, name);
    int64_t ta = 0, tb = 0;
    cr_assert(eq(int, baton_election_term(a, &ta), BATON_OK));
    done_t d = {.rc = -100};
    start_behind(c2, b, &d);
    /* one campaign at a time per handle: a second one does not wait its turn on a fiber */
    done_t d2 = {.rc = -100};
    cr_assert(eq(int,
                 baton_election_campaign_async(b, "b2", BATON_WAIT_FOREVER, BATON_LEASE_WATCHDOG,
                                               on_done, &d2, NULL),
                 BATON_OK));
    run_loop(c2, &d2.rc, 2000);
    cr_assert(eq(int, d2.rc, BATON_EINVAL));
    cr_assert(eq(int, d.rc, -100), "the first still waits");
    int64_t t0 = th_ms();
    cr_assert(eq(int, baton_election_resign(a), BATON_OK));
    run_loop(c2, &d.rc, 2000);
    cr_assert(eq(int, d.rc, BATON_OK));
    cr_assert(eq(ptr, d.handle, (void *)b));
    cr_log_info("campaign_async completed %lld ms after the resign", (long long)(d.at - t0));
    cr_assert(lt(i64, d.at - t0, 200));
    cr_assert(eq(int, baton_election_term(b, &tb), BATON_OK));
    cr_assert(gt(i64, tb, ta));
    baton_leader ld;
    cr_assert(eq(int, baton_election_leader(a, &ld), BATON_OK));
    cr_assert(eq(str, ld.value, "b"));
    /* the asynchronous proclaim: by the leader, and refused to another handle */
    done_t p = {.rc = -100}, q = {.rc = -100};
    cr_assert(eq(int, baton_election_proclaim_async(b, "b2", on_done, &p, NULL), BATON_OK));
    cr_assert(eq(int, baton_election_proclaim_async(a, "a2", on_done, &q, NULL), BATON_OK));
    run_loop(c2, &p.rc, 2000);
    run_loop(c1, &q.rc, 2000);
    cr_assert(eq(int, p.rc, BATON_OK));
    cr_assert(eq(int, q.rc, BATON_ENOTHELD));
    cr_assert(eq(int, baton_election_leader(a, &ld), BATON_OK));
    cr_assert(eq(str, ld.value, "b2"));
    cr_assert(eq(i64, ld.term, tb), "a proclaim keeps the term");
    /* the asynchronous resign */
    done_t r = {.rc = -100};
    cr_assert(eq(int, baton_election_resign_async(b, on_done, &r, NULL), BATON_OK));
    run_loop(c2, &r.rc, 2000);
    cr_assert(eq(int, r.rc, BATON_OK));
    cr_assert(eq(int, baton_election_term(b, &tb), BATON_ENOTHELD));
    redisContext *rc = th_redis();
    cr_assert(eq(i64, th_cmd_int(rc, "EXISTS %s baton_election:{%s}", name, name), 0));
    /* bad arguments start nothing */
    cr_assert(eq(int,
                 baton_election_campaign_async(b, "x", -5, BATON_LEASE_WATCHDOG, on_done, &d, NULL),
                 BATON_EINVAL));
    cr_assert(
        eq(int, baton_election_campaign_async(b, "x", 0, -3, on_done, &d, NULL), BATON_EINVAL));
    cr_assert(eq(int,
                 baton_election_campaign_async(b, "x", 0, BATON_LEASE_WATCHDOG, NULL, NULL, NULL),
                 BATON_EINVAL));
    cr_assert(eq(
        int, baton_election_campaign_async(NULL, "x", 0, BATON_LEASE_WATCHDOG, on_done, &d, NULL),
        BATON_EINVAL));
    redisFree(rc);
    close_all((baton_election *[]){a, b, NULL}, (baton_client *[]){c1, c2, NULL});
}

/* Three handles of one client take turns from one loop: each win's callback resigns
 * asynchronously, each resign's callback campaigns again. Never two leaders at once, by
 * the callbacks' count and by the lock hash. */
#define ROUNDS 12
typedef struct rotation {
    baton_election *h[3];
    int64_t last_term[3];
    int leading, max_leading, wins, resigns, errors;
    int outstanding; /* operations started whose callback has not run */
    bool stop;
    redisContext *r;
    const char *name;
} rotation;

static void rot_campaign(rotation *rt, int i);

static int rot_index(rotation *rt, void *handle)
{
    for (int i = 0; i < 3; i++)
        if (rt->h[i] == handle)
            return i;
    return -1;
}

static void rot_resigned(void *handle, baton_owner *owner, int rc, void *arg)
{
    (void)owner;
    rotation *rt = arg;
    rt->outstanding--;
    if (rc != BATON_OK)
        rt->errors++;
    rt->leading--;
    rt->resigns++;
    if (!rt->stop)
        rot_campaign(rt, rot_index(rt, handle));
}

static void rot_won(void *handle, baton_owner *owner, int rc, void *arg)
{
    (void)owner;
    rotation *rt = arg;
    int i = rot_index(rt, handle);
    rt->outstanding--;
    if (rc != BATON_OK) {
        if (!(rt->stop && rc == BATON_ECANCELED))
            rt->errors++;
        return;
    }
    rt->leading++;
    if (rt->leading > rt->max_leading)
        rt->max_leading = rt->leading;
    if (th_cmd_int(rt->r, "HLEN %s", rt->name) != 1)
        rt->errors++;
    int64_t term = 0;
    if (baton_election_term(rt->h[i], &term) != BATON_OK || term <= rt->last_term[i])
        rt->errors++;
    rt->last_term[i] = term;
    if (++rt->wins >= ROUNDS)
        rt->stop = true;
    if (baton_election_resign_async(rt->h[i], rot_resigned, rt, NULL) != BATON_OK)
        rt->errors++;
    else
        rt->outstanding++;
}

static void rot_campaign(rotation *rt, int i)
{
    if (baton_election_campaign_async(rt->h[i], "r", BATON_WAIT_FOREVER, BATON_LEASE_WATCHDOG,
                                      rot_won, rt, NULL) != BATON_OK)
        rt->errors++;
    else
        rt->outstanding++;
}

Test(election, async_campaigns_on_one_loop_never_both_win)
{
    baton_client *c = th_client(NULL);
    rotation rt = {.name = th_tmpname("el"), .r = th_redis()};
    for (int i = 0; i < 3; i++)
        rt.h[i] = open_e(c, rt.name);
    for (int i = 0; i < 3; i++)
        rot_campaign(&rt, i);
    int done = -100;
    int64_t end = th_ms() + 20000;
    while (th_ms() < end && !rt.stop)
        run_loop(c, &done, 20);
    /* the campaigns still waiting are cancelled; a win meanwhile resigns */
    for (int i = 0; i < 3; i++)
        cr_assert(eq(int, baton_election_cancel_waits(rt.h[i]), BATON_OK));
    while (th_ms() < end && rt.outstanding > 0)
        run_loop(c, &done, 20);
    cr_assert(eq(int, rt.outstanding, 0));
    cr_assert(eq(int, rt.errors, 0));
    cr_assert(eq(int, rt.max_leading, 1), "two leaders at once");
    cr_assert(ge(int, rt.wins, ROUNDS));
    for (int i = 0; i < 3; i++)
        cr_assert(gt(i64, rt.last_term[i], 0), "handle %d never led", i);
    for (int i = 0; i < 3; i++)
        baton_election_close(rt.h[i]);
    cr_assert(eq(i64, th_cmd_int(rt.r, "EXISTS %s", rt.name), 0), "nobody holds it");
    redisFree(rt.r);
    baton_client_close(c);
}

/* Cancelled three ways while waiting to lead: the callback gets BATON_ECANCELED, and no hold
 * nor reservation of the handle's is left. */
Test(election, cancel_or_close_while_campaigning_async_leaves_nothing)
{
    baton_client *c1 = th_client(NULL), *c2 = th_client(NULL);
    const char *name = th_tmpname("el");
    baton_election *a = leader(c1, name, "a");
    redisContext *r = th_redis();
    for (int how = 0; how < 3; how++) {
        baton_election *b = open_e(c2, name);
        done_t d = {.rc = -100};
        baton_op *op = start_behind(c2, b, &d);
        int64_t t0 = th_ms();
        if (how == 0)
            cr_assert(eq(int, baton_op_cancel(op), BATON_OK));
        else if (how == 1)
            cr_assert(eq(int, baton_election_cancel_waits(b), BATON_OK));
        else
            baton_election_close(b); /* waits for the operation to end */
        run_loop(c2, &d.rc, 2000);
        cr_assert(eq(int, d.rc, BATON_ECANCELED), "way %d", how);
        cr_assert(lt(i64, d.at - t0, 300), "way %d", how);
        cr_assert(eq(i64, th_cmd_int(r, "HLEN %s", name), 1), "way %d: only a's hold", how);
        cr_assert(eq(i64,
                     th_cmd_int(r, "EXISTS baton_lock_next:{%s} baton_lock_line:{%s}", name, name),
                     0),
                  "way %d: no reservation and no place in the line left", how);
        if (how < 2)
            baton_election_close(b);
    }
    cr_assert(eq(int, baton_election_resign(a), BATON_OK));
    th_sleep_ms(100);
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s", name), 0), "no cancelled campaign took it");
    redisFree(r);
    close_all((baton_election *[]){a, NULL}, (baton_client *[]){c1, c2, NULL});
}

Test(election, bad_arguments)
{
    baton_client *c = th_client(NULL);
    baton_election *e = NULL;
    cr_assert(eq(int, baton_election_open(NULL, "x", &e), BATON_EINVAL));
    cr_assert(eq(int, baton_election_open(c, "", &e), BATON_EINVAL));
    e = open_e(c, th_tmpname("el"));
    char *big = malloc(BATON_ELECTION_MAX_VALUE + 2);
    memset(big, 'v', BATON_ELECTION_MAX_VALUE + 1);
    big[BATON_ELECTION_MAX_VALUE + 1] = '\0';
    cr_assert(eq(int, baton_election_campaign(e, big, 0, BATON_LEASE_WATCHDOG), BATON_EINVAL));
    cr_assert(eq(int, baton_election_campaign(e, "v", -5, BATON_LEASE_WATCHDOG), BATON_EINVAL));
    cr_assert(eq(int, baton_election_campaign(e, "v", 0, -3), BATON_EINVAL));
    cr_assert(eq(int, baton_election_observe_next(e, 0, NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_election_term(NULL, NULL), BATON_EINVAL));
    cr_assert(eq(str, (char *)baton_election_name(NULL), ""));
    free(big);
    baton_election_close(e);
    baton_election_close(NULL);
    baton_client_close(c);
}

/* ---------------------------------------------------------------- observe ------------ */

Test(election, an_observer_sees_every_change_in_order)
{
    baton_client *c1 = th_client(NULL), *c2 = th_client(NULL), *co = th_client(NULL);
    const char *name = th_tmpname("el");
    baton_election *a = open_e(c1, name), *b = open_e(c2, name), *o = open_e(co, name);
    baton_election_event ev;
    cr_assert(eq(int, baton_election_observe_next(o, 0, &ev), BATON_ETIMEDOUT),
              "nothing logged yet");
    cr_assert(eq(int, baton_election_campaign(a, "a1", 0, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(int, baton_election_proclaim(a, "a2"), BATON_OK));
    cr_assert(eq(int, baton_election_resign(a), BATON_OK));
    cr_assert(eq(int, baton_election_campaign(b, "b1", 0, BATON_LEASE_WATCHDOG), BATON_OK));
    struct {
        baton_election_change change;
        const char *value;
    } want[] = {{BATON_ELECTION_ELECTED, "a1"},
                {BATON_ELECTION_PROCLAIMED, "a2"},
                {BATON_ELECTION_RESIGNED, "a2"},
                {BATON_ELECTION_ELECTED, "b1"}};
    int64_t last_time = 0, term_a = 0;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        cr_assert(eq(int, baton_election_observe_next(o, 1000, &ev), BATON_OK), "event %zu", i);
        cr_assert(eq(int, (int)ev.change, (int)want[i].change), "event %zu", i);
        cr_assert(eq(str, ev.leader.value, (char *)want[i].value), "event %zu", i);
        cr_assert(ge(i64, ev.time_ms, last_time));
        last_time = ev.time_ms;
        if (i == 0)
            term_a = ev.leader.term;
        if (i == 3)
            cr_assert(gt(i64, ev.leader.term, term_a));
        else
            cr_assert(eq(i64, ev.leader.term, term_a));
    }
    /* a waiting observer is woken by the change */
    int64_t t0 = th_ms();
    cr_assert(eq(int, baton_election_observe_next(o, 100, &ev), BATON_ETIMEDOUT));
    cr_assert(ge(i64, th_ms() - t0, 95));
    cr_assert(eq(int, baton_election_proclaim(b, "b2"), BATON_OK));
    cr_assert(eq(int, baton_election_observe_next(o, 1000, &ev), BATON_OK));
    cr_assert(eq(int, (int)ev.change, (int)BATON_ELECTION_PROCLAIMED));

    /* a new observer starts with the latest change: the current state */
    baton_election *o2 = open_e(co, name);
    cr_assert(eq(int, baton_election_observe_next(o2, 0, &ev), BATON_OK));
    cr_assert(eq(str, ev.leader.value, "b2"));
    baton_election_resign(b);
    baton_election_close(o2);
    baton_election_close(o);
    baton_election_close(a);
    baton_election_close(b);
    baton_client_close(c1);
    baton_client_close(c2);
    baton_client_close(co);
}

static int lead_and_sleep(void *arg)
{
    const char *name = arg;
    baton_client *c = client_wd(600);
    baton_election *e = NULL;
    if (baton_election_open(c, name, &e) != BATON_OK)
        return 1;
    if (baton_election_campaign(e, "doomed", BATON_WAIT_FOREVER, BATON_LEASE_WATCHDOG) != BATON_OK)
        return 2;
    for (;;)
        pause();
}

Test(election, a_killed_leaders_expiry_is_observed_and_a_standby_takes_over)
{
    const char *name = th_tmpname("el");
    pid_t kid = th_fork(lead_and_sleep, (void *)name);
    baton_client *c = client_wd(600), *co = th_client(NULL);
    baton_election *e = open_e(c, name), *o = open_e(co, name);
    baton_election_event ev;
    cr_assert(eq(int, baton_election_observe_next(o, 5000, &ev), BATON_OK));
    cr_assert(eq(int, (int)ev.change, (int)BATON_ELECTION_ELECTED));
    cr_assert(eq(i64, ev.leader.pid, (int64_t)kid));
    int64_t dead_term = ev.leader.term;
    kill(kid, SIGKILL);
    int64_t killed = th_ms();
    th_wait(kid);
    cr_assert(eq(int, baton_election_observe_next(o, 2000, &ev), BATON_OK));
    cr_assert(eq(int, (int)ev.change, (int)BATON_ELECTION_EXPIRED));
    cr_assert(eq(i64, ev.leader.term, dead_term));
    int64_t seen = th_ms() - killed;
    cr_log_info("expiry seen %lld ms after kill -9 (lease 600 ms)", (long long)seen);
    cr_assert(le(i64, seen, 600 + 300));
    cr_assert(eq(int, baton_election_campaign(e, "next", 0, BATON_LEASE_WATCHDOG), BATON_OK));
    int64_t t;
    cr_assert(eq(int, baton_election_term(e, &t), BATON_OK));
    cr_assert(gt(i64, t, dead_term));
    baton_election_resign(e);
    baton_election_close(e);
    baton_election_close(o);
    baton_client_close(c);
    baton_client_close(co);
}

static void on_lost(baton_election *e, void *arg)
{
    (void)e;
    atomic_int *n = arg;
    atomic_fetch_add(n, 1);
}

Test(election, a_deposed_leader_is_told_and_cannot_proclaim)
{
    baton_client *c = client_wd(600);
    const char *name = th_tmpname("el");
    baton_election *e = open_e(c, name);
    atomic_int lost = 0;
    cr_assert(eq(int, baton_election_set_lost_handler(e, on_lost, &lost), BATON_OK));
    int fd = -1;
    cr_assert(eq(int, baton_election_lost_fd(e, &fd), BATON_OK));
    cr_assert(eq(int, baton_election_campaign(e, "x", 0, BATON_LEASE_WATCHDOG), BATON_OK));
    redisContext *r = th_redis();
    th_cmd_int(r, "DEL %s", name); /* an operator's force release */
    for (int i = 0; i < 200 && atomic_load(&lost) == 0; i++)
        th_sleep_ms(10);
    cr_assert(eq(int, atomic_load(&lost), 1));
    char b;
    cr_assert(eq(int, (int)read(fd, &b, 1), 1), "the lost descriptor is readable");
    cr_assert(eq(int, baton_election_proclaim(e, "y"), BATON_ENOTHELD));
    int64_t t;
    cr_assert(eq(int, baton_election_term(e, &t), BATON_ENOTHELD));
    redisFree(r);
    baton_election_close(e);
    baton_client_close(c);
}

/* ---------------------------------------------------------------- chaos -------------- */

#define WORKERS 5
#define MAX_BELIEFS 4096
#define MAX_EVENTS 8192
#define MAX_KILLS 256
#define CHAOS_WD 900 /* the lease; renewed every 300 ms */

typedef struct belief {
    atomic_int pid;
    int64_t term;
    int64_t start_us, end_us; /* CLOCK_MONOTONIC; end 0: open */
} belief;

typedef struct chaos {
    char name[128];
    atomic_int stop;
    atomic_int nbeliefs;
    belief beliefs[MAX_BELIEFS];
    atomic_int nevents;
    baton_election_event events[MAX_EVENTS];
    int nkills;
    int64_t kill_term[MAX_KILLS], kill_time[MAX_KILLS]; /* server ms */
    int64_t pause_from, pause_to;                       /* server ms */
} chaos;

static int64_t mono_us(void)
{
    return baton__now_us();
}

static int worker(void *arg)
{
    chaos *ch = arg;
    srand((unsigned)getpid());
    baton_client *c = client_wd(CHAOS_WD);
    baton_election *e = NULL;
    if (baton_election_open(c, ch->name, &e) != BATON_OK)
        return 1;
    char value[64];
    snprintf(value, sizeof value, "pid %d", (int)getpid());
    while (!atomic_load(&ch->stop)) {
        int rc = baton_election_campaign(e, value, 500, BATON_LEASE_WATCHDOG);
        if (rc != BATON_OK) {
            if (rc != BATON_ETIMEDOUT)
                th_sleep_ms(20);
            continue;
        }
        int i = atomic_fetch_add(&ch->nbeliefs, 1);
        if (i >= MAX_BELIEFS)
            return 3;
        belief *b = &ch->beliefs[i];
        baton_election_term(e, &b->term);
        b->start_us = mono_us();
        atomic_store(&b->pid, getpid());
        int64_t hold_until = th_ms() + 300 + rand() % 1200;
        bool leading = true;
        while (leading && th_ms() < hold_until && !atomic_load(&ch->stop)) {
            th_sleep_ms(100);
            leading = baton_election_proclaim(e, value) == BATON_OK;
        }
        if (leading)
            baton_election_resign(e);
        b->end_us = mono_us();
    }
    baton_election_close(e);
    baton_client_close(c);
    return 0;
}

static int observer(void *arg)
{
    chaos *ch = arg;
    baton_options o;
    baton_options_init(&o);
    o.recheck_ms = 200;
    baton_client *c = NULL;
    if (baton_client_open(&o, &c) != BATON_OK && baton_client_open_url(th_url(), &c) != BATON_OK)
        return 1;
    baton_election *e = NULL;
    if (baton_election_open(c, ch->name, &e) != BATON_OK)
        return 1;
    int idle = 0;
    while (idle < 3) { /* after stop: until the log is drained (three quiet looks) */
        baton_election_event ev;
        int rc = baton_election_observe_next(e, 300, &ev);
        if (rc == BATON_OK) {
            int i = atomic_fetch_add(&ch->nevents, 1);
            if (i < MAX_EVENTS)
                ch->events[i] = ev;
            idle = 0;
        } else if (atomic_load(&ch->stop)) {
            idle++;
        }
    }
    baton_election_close(e);
    baton_client_close(c);
    return 0;
}

static int64_t server_ms(redisContext *r)
{
    redisReply *t = th_cmd(r, "TIME");
    int64_t ms =
        strtoll(t->element[0]->str, NULL, 10) * 1000 + strtoll(t->element[1]->str, NULL, 10) / 1000;
    freeReplyObject(t);
    return ms;
}

static const char *change_name(int c)
{
    static const char *const n[] = {"?", "elected", "proclaimed", "resigned", "expired"};
    return c >= 1 && c <= 4 ? n[c] : "?";
}

Test(election, chaos_kill_9_and_client_pause, .timeout = 180)
{
    chaos *ch = mmap(NULL, sizeof *ch, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(ch != MAP_FAILED);
    memset(ch, 0, sizeof *ch);
    snprintf(ch->name, sizeof ch->name, "%s", th_tmpname("chaos"));
    int64_t run_ms = getenv("BATON_LONG_RUNS") ? 60000 : 20000;
    redisContext *r = th_redis();
    baton_client *c = th_client(NULL);
    baton_election *look = open_e(c, ch->name);

    pid_t obs = th_fork(observer, ch);
    pid_t kids[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        kids[i] = th_fork(worker, ch);
    int64_t t0 = th_ms(), next_kill = t0 + 2500, pause_at = t0 + run_ms / 2;
    bool paused = false;
    while (th_ms() - t0 < run_ms) {
        th_sleep_ms(50);
        if (!paused && th_ms() >= pause_at) {
            ch->pause_from = server_ms(r);
            freeReplyObject(th_cmd(r, "CLIENT PAUSE 700 ALL"));
            ch->pause_to = ch->pause_from + 700;
            paused = true;
        }
        if (th_ms() < next_kill)
            continue;
        baton_leader ld;
        if (baton_election_leader(look, &ld) != BATON_OK || ld.term == 0)
            continue;
        for (int i = 0; i < WORKERS; i++) {
            if (kids[i] != (pid_t)ld.pid)
                continue;
            kill(kids[i], SIGKILL);
            int64_t now_us = mono_us();
            th_wait(kids[i]);
            if (ch->nkills < MAX_KILLS) {
                ch->kill_term[ch->nkills] = ld.term;
                ch->kill_time[ch->nkills++] = server_ms(r);
            }
            int nb = atomic_load(&ch->nbeliefs);
            for (int k = 0; k < nb && k < MAX_BELIEFS; k++)
                if (atomic_load(&ch->beliefs[k].pid) == kids[i] && ch->beliefs[k].end_us == 0)
                    ch->beliefs[k].end_us = now_us;
            kids[i] = th_fork(worker, ch);
            next_kill = th_ms() + 2000 + rand() % 2000;
        }
    }
    atomic_store(&ch->stop, 1);
    for (int i = 0; i < WORKERS; i++)
        cr_assert(eq(int, th_wait(kids[i]), 0), "worker %d", i);
    cr_assert(eq(int, th_wait(obs), 0));
    baton_leader ld;
    baton_election_leader(look, &ld); /* logs the expiry of a last leader, if any */

    /* The observer saw exactly the server's log, in order. */
    int nev = atomic_load(&ch->nevents);
    redisReply *log = th_cmd(r, "XRANGE baton_election_log:{%s} - +", ch->name);
    cr_log_info("%d changes observed, %zu logged, %d kills, %d leaderships", nev, log->elements,
                ch->nkills, atomic_load(&ch->nbeliefs));
    cr_assert(lt(int, nev, MAX_EVENTS));
    cr_assert(lt(sz, log->elements, (size_t)1000), "the log was capped: the run is too long");
    /* the last look above may have logged one more expiry, after the observer stopped */
    cr_assert(le(sz, (size_t)nev, log->elements));
    cr_assert(ge(sz, (size_t)nev + 1, log->elements), "the observer missed changes");
    for (int i = 0; i < nev; i++) {
        redisReply *f = log->element[i]->element[1];
        const char *change = "", *term_s = "0";
        for (size_t k = 0; k + 1 < f->elements; k += 2) {
            if (strcmp(f->element[k]->str, "change") == 0)
                change = f->element[k + 1]->str;
            if (strcmp(f->element[k]->str, "term") == 0)
                term_s = f->element[k + 1]->str;
        }
        cr_assert(eq(str, (char *)change_name(ch->events[i].change), (char *)change), "change %d",
                  i);
        cr_assert(eq(i64, ch->events[i].leader.term, strtoll(term_s, NULL, 10)), "change %d", i);
    }
    freeReplyObject(log);

    /* Terms strictly rise from one ELECTED to the next; each leadership's changes carry its
     * term and each one ends (RESIGNED or EXPIRED) before the next begins; from the server's
     * point of view the intervals [since, last change] never overlap. */
    int64_t term = 0, last_time = 0, end_of_prev = 0, open_term = 0;
    int elected = 0, resigned = 0, expired = 0;
    int64_t max_resign_gap = 0, max_takeover = 0;
    int64_t resigned_at = 0;
    for (int i = 0; i < nev; i++) {
        baton_election_event *ev = &ch->events[i];
        cr_assert(ge(i64, ev->time_ms, last_time), "event %d (%s) goes back in time", i,
                  change_name(ev->change));
        last_time = ev->time_ms;
        switch (ev->change) {
        case BATON_ELECTION_ELECTED:
            cr_assert(gt(i64, ev->leader.term, term), "terms rise (%lld after %lld)",
                      (long long)ev->leader.term, (long long)term);
            cr_assert(eq(i64, open_term, 0), "term %lld elected while %lld was open",
                      (long long)ev->leader.term, (long long)open_term);
            cr_assert(ge(i64, ev->leader.since_ms, end_of_prev), "intervals overlap");
            term = open_term = ev->leader.term;
            elected++;
            if (resigned_at &&
                !(resigned_at >= ch->pause_from - 100 && resigned_at <= ch->pause_to)) {
                int64_t gap = ev->time_ms - resigned_at;
                if (gap > max_resign_gap)
                    max_resign_gap = gap;
            }
            resigned_at = 0;
            break;
        case BATON_ELECTION_PROCLAIMED:
            cr_assert(eq(i64, ev->leader.term, open_term), "a proclaim outside its term");
            end_of_prev = ev->time_ms;
            break;
        case BATON_ELECTION_RESIGNED:
        case BATON_ELECTION_EXPIRED:
            cr_assert(eq(i64, ev->leader.term, open_term), "the end of term %lld while %lld open",
                      (long long)ev->leader.term, (long long)open_term);
            open_term = 0;
            if (ev->change == BATON_ELECTION_RESIGNED) {
                resigned++;
                resigned_at = ev->time_ms;
                end_of_prev = ev->time_ms;
            } else {
                expired++;
            }
            break;
        }
    }
    /* Takeover after each kill of a leader: the next ELECTED after the kill. */
    for (int k = 0; k < ch->nkills; k++) {
        int64_t after = -1;
        bool ended_by_expiry = false;
        for (int i = 0; i < nev; i++) {
            baton_election_event *ev = &ch->events[i];
            if (ev->change == BATON_ELECTION_EXPIRED && ev->leader.term == ch->kill_term[k])
                ended_by_expiry = true;
            if (ended_by_expiry && ev->change == BATON_ELECTION_ELECTED &&
                ev->leader.term > ch->kill_term[k]) {
                after = ev->time_ms - ch->kill_time[k];
                break;
            }
        }
        if (!ended_by_expiry || after < 0)
            continue; /* it had resigned just before, or the run ended */
        bool near_pause =
            ch->kill_time[k] + CHAOS_WD + 400 >= ch->pause_from && ch->kill_time[k] <= ch->pause_to;
        cr_log_info("kill %d (term %lld): next leader after %lld ms%s", k,
                    (long long)ch->kill_term[k], (long long)after, near_pause ? " (pause)" : "");
        if (!near_pause) {
            cr_assert(le(i64, after, CHAOS_WD + CHAOS_WD / 3 + 200),
                      "takeover %lld ms after a kill: over lease + renewal period",
                      (long long)after);
            if (after > max_takeover)
                max_takeover = after;
        }
    }
    cr_log_info("%d elected, %d resigned, %d expired; max takeover after kill %lld ms, after "
                "resign %lld ms",
                elected, resigned, expired, (long long)max_takeover, (long long)max_resign_gap);
    cr_assert(ge(int, elected, 5));
    cr_assert(ge(int, expired, 2), "the kills ended terms by expiry");
    cr_assert(le(i64, max_resign_gap, 250), "a standby leads at once after a resign");

    /* No two processes believed they led at once beyond the lease. */
    int nb = atomic_load(&ch->nbeliefs);
    for (int i = 0; i < nb; i++)
        for (int j = 0; j < nb; j++) {
            belief *a = &ch->beliefs[i], *b = &ch->beliefs[j];
            if (i == j || a->term >= b->term || a->end_us == 0 || b->start_us == 0)
                continue;
            int64_t overlap = a->end_us - b->start_us;
            cr_assert(le(i64, overlap / 1000, CHAOS_WD), "terms %lld and %lld overlapped %lld ms",
                      (long long)a->term, (long long)b->term, (long long)(overlap / 1000));
        }
    baton_election_close(look);
    baton_client_close(c);
    redisFree(r);
    munmap(ch, sizeof *ch);
}

Test(election, a_key_of_another_type_fails_before_any_write)
{
    baton_client *c = th_client(NULL);
    const char *name = th_tmpname("el");
    baton_election *e = open_e(c, name);
    redisContext *r = th_redis();
    freeReplyObject(th_cmd(r, "SET baton_election_log:{%s} x", name));
    cr_assert(eq(int, baton_election_campaign(e, "v", 0, BATON_LEASE_WATCHDOG), BATON_EPROTO));
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s baton_election:{%s}", name, name), 0),
              "neither the lock nor a record is left behind");
    baton_leader ld;
    cr_assert(eq(int, baton_election_leader(e, &ld), BATON_EPROTO));
    th_cmd_int(r, "DEL baton_election_log:{%s}", name);
    cr_assert(eq(int, baton_election_campaign(e, "v", 0, BATON_LEASE_WATCHDOG), BATON_OK));
    freeReplyObject(th_cmd(r, "SET baton_election_log:{%s} x", name));
    cr_assert(eq(int, baton_election_resign(e), BATON_EPROTO));
    cr_assert(eq(i64, th_cmd_int(r, "HLEN %s", name), 1), "the resign wrote nothing");
    th_cmd_int(r, "DEL baton_election_log:{%s}", name);
    cr_assert(eq(int, baton_election_resign(e), BATON_OK));
    redisFree(r);
    baton_election_close(e);
    baton_client_close(c);
}

/* ---------------------------------------------------------------- the CLI ------------ */

#ifdef BATON_CLI_PATH
#include "cli_helper.h"

/* Each elected COMMAND appends "start TERM NS" and, when stopped, "end TERM NS". */
static const char *const LEADER_SCRIPT =
    "trap 'echo end $BATON_FENCING_TOKEN $(date +%s%N) >> \"$0\"; exit 0' TERM; "
    "echo start $BATON_FENCING_TOKEN $(date +%s%N) >> \"$0\"; while :; do sleep 0.02; done";

typedef struct mark {
    bool start;
    long long term, ns;
} mark;

static int read_marks(const char *path, mark *m, int max)
{
    char *text = cli_read_file(path);
    int n = 0;
    for (char *line = text ? strtok(text, "\n") : NULL; line && n < max;
         line = strtok(NULL, "\n")) {
        char what[8];
        if (sscanf(line, "%7s %lld %lld", what, &m[n].term, &m[n].ns) == 3) {
            m[n].start = strcmp(what, "start") == 0;
            n++;
        }
    }
    free(text);
    return n;
}

Test(election, cli_elect_a_killed_leaders_command_ends_before_the_next_starts, .timeout = 90)
{
    const char *name = th_tmpname("cli-el");
    char *log = cli_path("marks");
    pid_t kids[3];
    for (int i = 0; i < 3; i++)
        kids[i] = cli_spawn(
            ARGS("elect", name, "--watchdog", "1s", "--", "sh", "-c", LEADER_SCRIPT, log));
    baton_client *c = th_client(NULL);
    baton_election *e = open_e(c, name);
    int64_t takeovers[2];
    for (int round = 0; round < 2; round++) {
        baton_leader ld = {0};
        int64_t seen_term = 0;
        for (int i = 0; i < 500; i++) { /* a leader that has started its COMMAND */
            mark m[64];
            int n = read_marks(log, m, 64);
            if (baton_election_leader(e, &ld) == BATON_OK && ld.term > 0 && n > 0 &&
                m[n - 1].start && m[n - 1].term == ld.term) {
                seen_term = ld.term;
                break;
            }
            th_sleep_ms(10);
        }
        cr_assert(gt(i64, seen_term, 0), "round %d: no leader ran COMMAND", round);
        int k = -1;
        for (int i = 0; i < 3; i++)
            if (kids[i] == (pid_t)ld.pid)
                k = i;
        cr_assert(ge(int, k, 0), "the leader is one of the three");
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long long killed_ns = ts.tv_sec * 1000000000LL + ts.tv_nsec;
        kill(kids[k], SIGKILL);
        th_wait(kids[k]);
        kids[k] = -1;
        /* the next leader's start */
        mark m[64];
        int n = 0;
        for (int i = 0; i < 400; i++) {
            n = read_marks(log, m, 64);
            if (n > 0 && m[n - 1].start && m[n - 1].term > seen_term)
                break;
            th_sleep_ms(10);
        }
        cr_assert(gt(int, n, 1));
        cr_assert(m[n - 1].start && m[n - 1].term > seen_term, "round %d: nobody took over", round);
        bool ended = false;
        for (int i = 0; i < n - 1; i++)
            if (!m[i].start && m[i].term == seen_term) {
                ended = true;
                cr_assert(lt(i64, m[i].ns, m[n - 1].ns),
                          "the deposed COMMAND ended after the next started");
            }
        cr_assert(ended, "the killed leader's COMMAND got SIGTERM");
        takeovers[round] = (m[n - 1].ns - killed_ns) / 1000000;
        cr_log_info("baton elect: next COMMAND started %lld ms after kill -9 (lease 1 s)",
                    (long long)takeovers[round]);
        cr_assert(le(i64, takeovers[round], 1000 + 333 + 300));
    }
    for (int i = 0; i < 3; i++)
        if (kids[i] > 0) {
            kill(kids[i], SIGTERM);
            th_wait(kids[i]);
        }
    baton_election_close(e);
    baton_client_close(c);
    free(log);
}

Test(election, cli_leader_prints_and_watches)
{
    const char *name = th_tmpname("cli-ld");
    cli_result r;
    cli_exec(&r, ARGS("leader", name));
    cr_assert(eq(int, r.status, 1));
    cr_assert(not(eq(ptr, strstr(r.out, "no leader"), NULL)));
    cli_result_free(&r);
    baton_client *c = th_client(NULL);
    baton_election *e = open_e(c, name);
    cr_assert(eq(int, baton_election_campaign(e, "v1", 0, BATON_LEASE_WATCHDOG), BATON_OK));
    cli_exec(&r, ARGS("leader", name, "--json"));
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    json *j = json_parse(r.out);
    cr_assert(not(eq(ptr, j, NULL)), "%s", r.out);
    cr_assert(eq(str, json_get(j, "value")->string, "v1"));
    cr_assert(eq(int, (int)json_get(j, "pid")->number, (int)getpid()));
    json_free(j);
    cli_result_free(&r);
    pid_t w = cli_spawn(ARGS("leader", name, "--watch"));
    char path[512];
    snprintf(path, sizeof path, "%s/bg-%d.out", cli_tmpdir(), (int)w);
    char *text = NULL;
    for (int i = 0; i < 300 && !(text && strstr(text, "term")); i++) {
        free(text);
        th_sleep_ms(10);
        text = cli_read_file(path);
    }
    cr_assert(eq(int, baton_election_proclaim(e, "v2"), BATON_OK));
    cr_assert(eq(int, baton_election_resign(e), BATON_OK));
    for (int i = 0; i < 300 && !(text && strstr(text, "resigned")); i++) {
        free(text);
        th_sleep_ms(10);
        text = cli_read_file(path);
    }
    kill(w, SIGTERM);
    th_wait(w);
    cr_assert(not(eq(ptr, text, NULL)));
    const char *p1 = strstr(text, "value v1"), *p2 = strstr(text, "proclaimed term"),
               *p3 = strstr(text, "resigned term");
    cr_assert(p1 && p2 && p3 && p1 < p2 && p2 < p3, "the watch printed, in order: %s", text);
    free(text);
    baton_election_close(e);
    baton_client_close(c);
}
#endif

/* ---------------------------------------------------------------- observe fd, callback */

#include <poll.h>

typedef struct seen {
    pthread_mutex_t mu;
    int n;
    baton_election_change changes[16];
} seen;

static void observed(baton_election *e, const baton_election_event *ev, void *arg)
{
    (void)e;
    seen *s = arg;
    pthread_mutex_lock(&s->mu);
    if (s->n < 16)
        s->changes[s->n++] = ev->change;
    pthread_mutex_unlock(&s->mu);
}

/* How many changes the observer callback has seen (it runs on baton's thread). */
static int seen_count(seen *s)
{
    pthread_mutex_lock(&s->mu);
    int n = s->n;
    pthread_mutex_unlock(&s->mu);
    return n;
}

Test(election, the_observe_descriptor_and_the_observer_callback)
{
    baton_client *c = th_client(NULL), *co = th_client(NULL);
    const char *name = th_tmpname("el");
    baton_election *a = open_e(c, name), *o = open_e(co, name), *o2 = open_e(co, name);
    int fd = -1;
    cr_assert(eq(int, baton_election_observe_fd(o, &fd), BATON_OK));
    seen s = {.mu = PTHREAD_MUTEX_INITIALIZER};
    cr_assert(eq(int, baton_election_set_observer(o2, observed, &s), BATON_OK));
    struct pollfd p = {fd, POLLIN, 0};
    cr_assert(eq(int, poll(&p, 1, 300), 0), "nothing yet");
    int64_t t0 = th_ms();
    cr_assert(eq(int, baton_election_campaign(a, "a", 0, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(int, poll(&p, 1, 2000), 1), "readable after a change");
    cr_log_info("observe fd readable %lld ms after the campaign began", (long long)(th_ms() - t0));
    cr_assert(lt(i64, th_ms() - t0, 200));
    baton_election_event ev;
    cr_assert(eq(int, baton_election_observe_next(o, 0, &ev), BATON_OK));
    cr_assert(eq(int, (int)ev.change, (int)BATON_ELECTION_ELECTED));
    cr_assert(eq(int, poll(&p, 1, 0), 0), "drained");
    cr_assert(eq(int, baton_election_proclaim(a, "b"), BATON_OK));
    cr_assert(eq(int, baton_election_resign(a), BATON_OK));
    cr_assert(eq(int, baton_election_observe_next(o, 2000, &ev), BATON_OK));
    cr_assert(eq(int, (int)ev.change, (int)BATON_ELECTION_PROCLAIMED));
    cr_assert(eq(int, baton_election_observe_next(o, 2000, &ev), BATON_OK));
    cr_assert(eq(int, (int)ev.change, (int)BATON_ELECTION_RESIGNED));
    for (int i = 0; i < 200 && seen_count(&s) < 3; i++)
        th_sleep_ms(10);
    pthread_mutex_lock(&s.mu);
    cr_assert(eq(int, s.n, 3));
    cr_assert(eq(int, (int)s.changes[0], (int)BATON_ELECTION_ELECTED));
    cr_assert(eq(int, (int)s.changes[1], (int)BATON_ELECTION_PROCLAIMED));
    cr_assert(eq(int, (int)s.changes[2], (int)BATON_ELECTION_RESIGNED));
    pthread_mutex_unlock(&s.mu);
    t0 = th_ms();
    baton_election_close(o);
    baton_election_close(o2);
    cr_assert(lt(i64, th_ms() - t0, 1000), "close ends the observing threads");
    baton_election_close(a);
    baton_client_close(c);
    baton_client_close(co);
}

/* A re-sent 'elect' (its first reply lost: the record() retry after BATON_ECONN) logs the
 * election once. The chaos run saw "term 11 elected while 11 was open" before the fix. */
Test(election, a_resent_elect_logs_once)
{
    baton_client *c = th_client(NULL);
    const char *name = th_tmpname("el");
    redisContext *r = th_redis();
    freeReplyObject(th_cmd(r, "HSET %s own:1 1", name));
    const char *keys[4] = {name, baton__derive_key("baton_election:", name, NULL),
                           baton__derive_key("baton_election_log:", name, NULL),
                           baton__derive_key("baton_election__channel:", name, NULL)};
    const char *args[6] = {"own:1", "v", "elect", "7", "h:1", "1000"};
    for (int i = 0; i < 2; i++) {
        redisReply *rep = NULL;
        cr_assert(eq(
            int,
            baton__script_run(c, baton__script_find("election_proclaim"), 4, keys, 6, args, &rep),
            BATON_OK));
        cr_assert(eq(i64, rep->element[0]->integer, 1));
        freeReplyObject(rep);
    }
    cr_assert(eq(i64, th_cmd_int(r, "XLEN %s", keys[2]), 1), "one ELECTED for term 7");
    for (int i = 1; i < 4; i++)
        free((char *)keys[i]);
    redisFree(r);
    baton_client_close(c);
}

/* ---------------------------------------------------------------- observers on the engine */

static int thread_count(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/task");
    cr_assert(not(eq(ptr, d, NULL)));
    for (struct dirent *de; (de = readdir(d));)
        if (de->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

#define OBSERVERS 20

/* Twenty observing handles cost the client's engine, not a thread each, and every one sees
 * every change in order. Before issue 31's move to the engine, each started a thread. */
Test(election, twenty_observing_handles_cost_no_thread_each_and_see_every_change)
{
    baton_client *c = th_client(NULL), *co = th_client(NULL);
    const char *name = th_tmpname("el");
    baton_election *a = leader(c, name, "v0");
    baton_election *o[OBSERVERS];
    int fds[OBSERVERS];
    baton_election_event ev;
    int before = thread_count();
    for (int i = 0; i < OBSERVERS; i++) {
        o[i] = open_e(co, name);
        cr_assert(eq(int, baton_election_observe_fd(o[i], &fds[i]), BATON_OK));
    }
    for (int i = 0; i < OBSERVERS; i++) { /* the first change: the last logged */
        cr_assert(eq(int, baton_election_observe_next(o[i], 2000, &ev), BATON_OK), "%d", i);
        cr_assert(eq(int, (int)ev.change, (int)BATON_ELECTION_ELECTED));
    }
    cr_assert(eq(int, baton_election_proclaim(a, "v1"), BATON_OK));
    for (int i = 0; i < OBSERVERS; i++) { /* all of them waited on the channel */
        cr_assert(eq(int, baton_election_observe_next(o[i], 2000, &ev), BATON_OK), "%d", i);
        cr_assert(eq(str, ev.leader.value, "v1"));
    }
    int after = thread_count();
    cr_log_info("threads: %d before, %d with %d observers", before, after, OBSERVERS);
    /* at most the client's engine and its dispatcher, started for the first of them */
    cr_assert(le(int, after - before, 2), "%d more threads for %d observers", after - before,
              OBSERVERS);
    cr_assert(eq(int, baton_election_proclaim(a, "v2"), BATON_OK));
    cr_assert(eq(int, baton_election_proclaim(a, "v3"), BATON_OK));
    cr_assert(eq(int, baton_election_resign(a), BATON_OK));
    static const char *const values[] = {"v2", "v3", "v3"};
    for (int i = 0; i < OBSERVERS; i++) {
        struct pollfd p = {fds[i], POLLIN, 0};
        cr_assert(eq(int, poll(&p, 1, 2000), 1), "observer %d: readable", i);
        for (int k = 0; k < 3; k++) {
            cr_assert(eq(int, baton_election_observe_next(o[i], 2000, &ev), BATON_OK));
            cr_assert(eq(int, (int)ev.change,
                         (int)(k < 2 ? BATON_ELECTION_PROCLAIMED : BATON_ELECTION_RESIGNED)),
                      "observer %d, change %d", i, k);
            cr_assert(eq(str, ev.leader.value, (char *)values[k]), "observer %d", i);
        }
        cr_assert(eq(int, baton_election_observe_next(o[i], 0, &ev), BATON_ETIMEDOUT));
    }
    int64_t t0 = th_ms();
    for (int i = 0; i < OBSERVERS; i++)
        baton_election_close(o[i]);
    cr_assert(lt(i64, th_ms() - t0, 1000), "close ends the observations");
    close_all((baton_election *[]){a, NULL}, (baton_client *[]){c, co, NULL});
}

/* More changes than the queue holds, while nobody reads, and the client's cancel_waits in
 * the middle: the watcher stops at a full queue and resumes where it stopped, and goes on
 * after the cancellation; nothing is skipped. cancel_waits through the handle ends a wait
 * on its queue. */
Test(election, a_full_queue_and_a_cancel_skip_nothing)
{
    baton_client *c = th_client(NULL), *co = th_client(NULL);
    const char *name = th_tmpname("el");
    baton_election *a = leader(c, name, "v0"), *o = open_e(co, name);
    int fd;
    baton_election_event ev;
    cr_assert(eq(int, baton_election_observe_fd(o, &fd), BATON_OK));
    cr_assert(eq(int, baton_election_observe_next(o, 2000, &ev), BATON_OK));
    cr_assert(eq(str, ev.leader.value, "v0"));
    char v[16];
    for (int i = 1; i <= 40; i++) {
        snprintf(v, sizeof v, "v%d", i);
        cr_assert(eq(int, baton_election_proclaim(a, v), BATON_OK));
        if (i == 20)
            cr_assert(eq(int, baton_client_cancel_waits(co), BATON_OK));
    }
    th_sleep_ms(300);
    for (int i = 1; i <= 40; i++) {
        snprintf(v, sizeof v, "v%d", i);
        cr_assert(eq(int, baton_election_observe_next(o, 2000, &ev), BATON_OK), "change %d", i);
        cr_assert(eq(str, ev.leader.value, v));
    }
    obs_arg w = {.e = o};
    pthread_t t;
    pthread_create(&t, NULL, observe_thread, &w);
    th_sleep_ms(100);
    cr_assert(eq(int, baton_election_cancel_waits(o), BATON_OK));
    pthread_join(t, NULL);
    cr_assert(eq(int, w.rc, BATON_ECANCELED));
    cr_assert(eq(int, baton_election_resign(a), BATON_OK));
    cr_assert(eq(int, baton_election_observe_next(o, 2000, &ev), BATON_OK));
    cr_assert(eq(int, (int)ev.change, (int)BATON_ELECTION_RESIGNED));
    close_all((baton_election *[]){o, a, NULL}, (baton_client *[]){c, co, NULL});
}
