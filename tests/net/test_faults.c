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

#include "new_assert.h"
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(faults, .timeout = 90);

typedef struct rig {
    th_server server;
    th_proxy *proxy;
    baton_client *c;
    redisContext *direct; /* to the server, around the proxy */
} rig;

/* starve_ms: the client's (0: the default) */
static void rig_up_starving(rig *r, int64_t command_timeout_ms, int64_t starve_ms)
{
    th_server_start(&r->server, NULL);
    r->proxy = th_proxy_start(r->server.port);
    baton_options o;
    baton_options_init(&o);
    o.url = th_proxy_url(r->proxy);
    o.connect_timeout_ms = 1000;
    o.command_timeout_ms = command_timeout_ms;
    o.starve_ms = starve_ms;
    cr_assert(eq(int, baton_client_open(&o, &r->c), BATON_OK), "%s", baton_open_errmsg());
    r->direct = th_redis_port(r->server.port);
}

static void rig_up(rig *r, int64_t command_timeout_ms)
{
    rig_up_starving(r, command_timeout_ms, 0);
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

typedef struct handed_waiter {
    baton_client *c;
    const char *name;
    atomic_bool got, let_go;
    int rc, release_rc;
    int64_t token;
    char owner[BATON__OWNER_LEN];
} handed_waiter;

/* Waits for the lock through a handle of its own, says what it got, releases when told. */
static void *wait_then_hold(void *arg)
{
    handed_waiter *w = arg;
    baton_lock *l;
    w->rc = baton_lock_open(w->c, w->name, &l);
    if (w->rc != BATON_OK)
        return NULL;
    baton__owner(w->c, w->owner, sizeof w->owner);
    w->rc = baton_lock_try_acquire(l, 20000, 30000);
    if (w->rc == BATON_OK)
        baton_lock_fencing_token(l, &w->token);
    atomic_store(&w->got, true);
    while (w->rc == BATON_OK && !atomic_load(&w->let_go))
        th_sleep_ms(1);
    w->release_rc = w->rc == BATON_OK ? baton_lock_release(l) : w->rc;
    baton_lock_close(l);
    return NULL;
}

/* A release that hands the lock to a waiting thread of its client (cohorting) whose reply
 * is cut at every byte (":-<token>\r\n"): the re-send reads the unlock latch, which
 * answers the hand-over's token, so the waiter is handed exactly the hold the server made
 * (its field, count 1, that token), and its one release frees the lock. */
Test(faults, a_hand_over_whose_reply_is_cut_is_handed_once)
{
    rig r;
    rig_up(&r, 1000);
    /* a client whose waiter never joins the line (it would, after starve_ms, and be served
     * through it instead) */
    baton_options o;
    baton_options_init(&o);
    o.url = th_proxy_url(r.proxy);
    o.connect_timeout_ms = 1000;
    o.command_timeout_ms = 1000;
    o.starve_ms = BATON_STARVE_NEVER;
    baton_client *c;
    cr_assert(eq(int, baton_client_open(&o, &c), BATON_OK), "%s", baton_open_errmsg());
    const char *name = "fl-handed";
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(c, name, &l), BATON_OK));
    for (long n = 0; n < 5; n++) {
        cr_assert(eq(int, baton_lock_acquire(l, 30000), BATON_OK));
        handed_waiter w = {.c = c, .name = name};
        pthread_t t;
        cr_assert(eq(int, pthread_create(&t, NULL, wait_then_hold, &w), 0));
        th_sleep_ms(300); /* asleep on the lock */
        cr_assert(not(atomic_load(&w.got)));
        long long published = th_cmdstat(r.direct, "publish");
        th_proxy_cut_after(r.proxy, TH_DOWN, n);
        cr_assert(eq(int, baton_lock_release(l), BATON_OK), "cut after %ld: %s", n,
                  baton_client_errmsg(c));
        int64_t end = th_ms() + 5000;
        while (!atomic_load(&w.got) && th_ms() < end)
            th_sleep_ms(1);
        cr_assert(atomic_load(&w.got), "cut after %ld: the waiter was not handed the lock", n);
        cr_assert(eq(int, w.rc, BATON_OK), "cut after %ld", n);
        cr_assert(eq(i64, th_cmdstat(r.direct, "publish"), published), "handed, not published");
        cr_assert(eq(i64, th_cmd_int(r.direct, "HLEN %s", name), 1));
        redisReply *rep = th_cmd(r.direct, "HGET %s %s", name, w.owner);
        cr_assert(eq(int, rep->type, REDIS_REPLY_STRING), "cut after %ld: not the waiter's", n);
        cr_assert(eq(str, rep->str, "1"), "cut after %ld: counted once", n);
        freeReplyObject(rep);
        cr_assert(eq(i64, th_cmd_int(r.direct, "GET redisson_lock_token:{%s}", name), w.token),
                  "the waiter's token is the one the hand-over raised");
        atomic_store(&w.let_go, true);
        pthread_join(t, NULL);
        cr_assert(eq(int, w.release_rc, BATON_OK));
        cr_assert(eq(i64, th_cmd_int(r.direct, "EXISTS %s", name), 0), "one release frees it");
    }
    /* the command connection and the subscriber's, and one more per cut */
    cr_assert(ge(i64, th_proxy_accepted(r.proxy), 2 + 5), "every cut cost a connection");
    baton_lock_close(l);
    baton_client_close(c);
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

/* ------------------------------------------------ the subscriber connection --------- */

typedef struct waiter {
    baton_client *c; /* l's */
    baton_lock *l;
    int64_t wait_ms;
    int rc;         /* of the acquire */
    int release_rc; /* of the release that follows it, on the same thread (the owner) */
    _Atomic int64_t done_ms;
    char why[256]; /* the waiter's thread's error message, when rc is not BATON_OK */
} waiter;

static void *wait_for_lock(void *arg)
{
    waiter *w = arg;
    w->rc = baton_lock_try_acquire(w->l, w->wait_ms, 30000);
    atomic_store(&w->done_ms, th_ms());
    if (w->rc != BATON_OK) /* the message is the thread's own: keep it for the assertion */
        snprintf(w->why, sizeof w->why, "%s", baton_client_errmsg(w->c));
    w->release_rc = w->rc == BATON_OK ? baton_lock_release(w->l) : w->rc;
    return NULL;
}

/* Waits until the channel has a subscriber (the waiter is asleep on it). */
static void until_subscribed(redisContext *direct, const char *channel)
{
    for (int i = 0; th_numsub(direct, "%s", channel) == 0; i++) {
        cr_assert(lt(int, i, 500), "the waiter never subscribed");
        th_sleep_ms(5);
    }
}

/* A lock held by a client that talks to the server directly, and a waiter of the rig's
 * client (through the proxy) asleep on it in a thread of its own. */
typedef struct contest {
    baton_client *holder_c;
    baton_lock *held, *wanted;
    waiter w;
    pthread_t t;
    long sub_conn; /* the proxy's number of the waiter's subscriber connection */
} contest;

static void contest_start(contest *k, rig *r, const char *name, int64_t lease_ms)
{
    char direct_url[64];
    snprintf(direct_url, sizeof direct_url, "redis://127.0.0.1:%d", r->server.port);
    cr_assert(eq(int, baton_client_open_url(direct_url, &k->holder_c), BATON_OK));
    cr_assert(eq(int, baton_lock_open(k->holder_c, name, &k->held), BATON_OK));
    cr_assert(eq(int, baton_lock_open(r->c, name, &k->wanted), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(k->held, lease_ms), BATON_OK));
    long before = th_proxy_accepted(r->proxy);
    k->w = (waiter){r->c, k->wanted, 8000, -1, -1, 0, ""};
    pthread_create(&k->t, NULL, wait_for_lock, &k->w);
    char channel[160];
    snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);
    until_subscribed(r->direct, channel);
    cr_assert(eq(i64, th_proxy_accepted(r->proxy), before + 1), "one subscriber connection");
    k->sub_conn = before + 1;
}

/* Joins the waiter, which must have acquired and released; closes the rest. */
static void contest_end(contest *k)
{
    pthread_join(k->t, NULL);
    cr_assert(eq(int, k->w.rc, BATON_OK), "the waiter: %s", k->w.why);
    cr_assert(eq(int, k->w.release_rc, BATON_OK));
    baton_lock_close(k->held);
    baton_lock_close(k->wanted);
    baton_client_close(k->holder_c);
}

/* A waiter whose subscriber connection is held (no message, no confirmation) from after its
 * first subscription on; starve_ms 0 (the default) or, with `line`, long enough that it
 * joins the line after the hold. The release's "0" is held back: it acquires within
 * slack_ms of the lease's end. */
static void held_subscriber(const char *name, int64_t starve_ms, bool line, int64_t slack_ms)
{
    rig r;
    rig_up_starving(&r, 1000, starve_ms);
    contest k;
    contest_start(&k, &r, name, line ? 2500 : 2000);
    th_proxy_hold_conn(r.proxy, k.sub_conn, true); /* its messages go nowhere */
    int64_t lease_end = th_ms() + th_cmd_int(r.direct, "PTTL %s", name);
    int64_t t0 = th_ms();
    while (line && th_cmd_int(r.direct, "ZCARD baton_lock_line:{%s}", name) < 1 &&
           th_ms() - t0 < 2000)
        th_sleep_ms(5);
    if (line)
        cr_assert(eq(i64, th_cmd_int(r.direct, "ZCARD baton_lock_line:{%s}", name), 1),
                  "the waiter joined the line");
    cr_assert(eq(int, baton_lock_release(k.held), BATON_OK)); /* the "0" is held back */
    contest_end(&k);
    /* the unheard release costs at most the rest of the lease the waiter was told */
    cr_assert(le(i64, atomic_load(&k.w.done_ms), lease_end + slack_ms),
              "acquired %lld ms after the lease's end",
              (long long)(atomic_load(&k.w.done_ms) - lease_end));
    th_proxy_heal(r.proxy);
    rig_down(&r);
}

Test(faults, a_held_subscriber_connection_costs_at_most_the_lease)
{
    held_subscriber("fl-sub", 0, false, 700);
}

/* The same, for a waiter of the line (issue 49): it joins while its subscriber connection
 * is held, so its own channel's subscription is never confirmed, and after the command
 * timeout (1 s) it waits where it listened. It slept the holder's remaining lease as its
 * attempt was told it, counted from then on: 1 s past the lease's end, since the first of
 * the line stopped looking every 50 ms. The lease is counted from the attempt's reply. */
Test(faults, a_waiter_of_the_line_whose_subscription_hangs_costs_at_most_the_lease)
{
    held_subscriber("fl-sub-line", 300, true, 300);
}

Test(faults, a_subscriber_connection_cut_while_waiting_is_resubscribed)
{
    rig r;
    rig_up(&r, 1000);
    contest k;
    contest_start(&k, &r, "fl-resub", 10000);
    th_proxy_cut_conn(r.proxy, k.sub_conn);
    /* the dispatcher reconnects and resubscribes on its own */
    th_sleep_ms(50);
    until_subscribed(r.direct, "redisson_lock__channel:{fl-resub}");
    int64_t released = th_ms();
    cr_assert(eq(int, baton_lock_release(k.held), BATON_OK));
    contest_end(&k);
    cr_assert(le(i64, atomic_load(&k.w.done_ms) - released, 500), "woken %lld ms after the release",
              (long long)(atomic_load(&k.w.done_ms) - released));
    rig_down(&r);
}

/* ------------------------------------------------ keys deleted while waited on ------ */

typedef struct latch_waiter {
    baton_latch *l;
    int rc;
} latch_waiter;

static void *await_latch(void *arg)
{
    latch_waiter *w = arg;
    w->rc = baton_latch_await(w->l, 8000);
    return NULL;
}

/* Blackholes (delay_ms < 0) or delays by delay_ms the replies of every connection of r's
 * client that is not a subscriber (CLIENT LIST, flags without P, seen through the proxy);
 * returns how many. */
static long slow_command_connections(rig *r, int delay_ms)
{
    redisReply *rep = th_cmd(r->direct, "CLIENT LIST");
    cr_assert(eq(int, rep->type, REDIS_REPLY_STRING));
    long n = 0;
    for (char *line = strtok(rep->str, "\n"); line; line = strtok(NULL, "\n")) {
        const char *addr = strstr(line, " addr=127.0.0.1:");
        const char *flags = strstr(line, " flags=");
        if (!addr || !flags)
            continue;
        long nth = th_proxy_conn_of(r->proxy, atoi(addr + strlen(" addr=127.0.0.1:")));
        flags += strlen(" flags=");
        size_t len = strcspn(flags, " ");
        if (nth > 0 && !memchr(flags, 'P', len)) {
            if (delay_ms < 0)
                th_proxy_blackhole_conn(r->proxy, nth, TH_DOWN, true);
            else
                th_proxy_delay_conn(r->proxy, nth, TH_DOWN, delay_ms);
            n++;
        }
    }
    freeReplyObject(rep);
    return n;
}

/* Issue 49: the line's first hears the lock's channel from the moment its attempt finds it
 * first (baton__sub_follow). A Redisson unlock (DEL, PUBLISH "0" on the lock's channel
 * alone) that ran after that attempt, and whose message came before the attempt's reply,
 * found nobody following: the wake-up stayed on the lock's channel, which the waiter no
 * longer sleeps on, and the waiter slept to the holder's lease (30 s here; it had been its
 * next look, 50 ms, before the first stopped looking every 50 ms). 31 of 5,000 fibers hit
 * it so in a benchmark run. Made here by delaying the replies of the command connections
 * by 300 ms, not the messages: the unlock runs after the fourth attempt (first in the
 * line) ran and before its reply arrives. The waiter must take the lock within a second of
 * the unlock: a thread, then a fiber of the client's loop. */
static _Atomic int64_t follow_done_ms;
static atomic_int follow_rc = -1;

static void on_follow(void *handle, baton_owner *owner, int rc, void *arg)
{
    (void)handle, (void)owner, (void)arg;
    atomic_store(&follow_done_ms, th_ms());
    atomic_store(&follow_rc, rc);
}

/* Runs the client's callbacks (a fiber's; a thread's wait needs none) until the server has
 * run `scripts` more EVALSHA than `from`, within 5 s. */
static void follow_until(rig *r, int fd, long long from, long long scripts)
{
    int64_t t0 = th_ms();
    while (th_cmdstat(r->direct, "evalsha") - from < scripts) {
        struct pollfd p = {fd, POLLIN, 0};
        poll(&p, 1, 1);
        baton_client_process(r->c);
        cr_assert(lt(i64, th_ms() - t0, 5000), "%lld attempts in 5 s, not %lld",
                  th_cmdstat(r->direct, "evalsha") - from, scripts);
    }
}

static void unlock_before_follow(bool fiber)
{
    rig r;
    /* its second attempt sleeps that long: time to slow the replies */
    rig_up_starving(&r, 3000, 500);
    const char *name = fiber ? "fl-follow-fiber" : "fl-follow";
    int fd;
    cr_assert(eq(int, baton_client_async_fd(r.c, &fd), BATON_OK));
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(r.c, name, &l), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(l, 0, 1000), BATON_OK)); /* scripts loaded */
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    th_cmd_int(r.direct, "HSET %s java-uuid:1 1", name);
    th_cmd_int(r.direct, "PEXPIRE %s 30000", name);
    long long scripts0 = th_cmdstat(r.direct, "evalsha");
    waiter w = {r.c, l, 10000, -1, -1, 0, ""};
    pthread_t t;
    atomic_store(&follow_rc, -1);
    if (fiber)
        cr_assert(eq(int, baton_lock_acquire_async(l, NULL, 10000, 30000, on_follow, NULL, NULL),
                     BATON_OK));
    else
        pthread_create(&t, NULL, wait_for_lock, &w);
    /* refused; refused again after the subscription, then it sleeps to its bound */
    follow_until(&r, fd, scripts0, 2);
    cr_assert(eq(i64, th_numsub(r.direct, "redisson_lock__channel:{%s}", name), 1));
    cr_assert(ge(i64, slow_command_connections(&r, 300), 1)); /* messages on time */
    long accepted = th_proxy_accepted(r.proxy);
    /* starved, it joins the line; after its own channel's subscription: first in the line,
     * 30 s of lease left. The unlock comes right after that one ran. */
    follow_until(&r, fd, scripts0, 4);
    cr_assert(eq(i64, th_cmd_int(r.direct, "ZCARD baton_lock_line:{%s}", name), 1), "in the line");
    cr_assert(eq(i64, th_proxy_accepted(r.proxy), accepted), "no command connection not slowed");
    int64_t unlocked = th_ms();
    th_cmd_int(r.direct, "DEL %s", name);
    cr_assert(eq(i64, th_cmd_int(r.direct, "PUBLISH redisson_lock__channel:{%s} 0", name), 1),
              "the waiter's client hears the lock's channel");
    int64_t done;
    if (fiber) {
        while (atomic_load(&follow_rc) == -1 && th_ms() - unlocked < 12000) {
            struct pollfd p = {fd, POLLIN, 0};
            poll(&p, 1, 5);
            baton_client_process(r.c);
        }
        cr_assert(eq(int, atomic_load(&follow_rc), BATON_OK), "the fiber: %s",
                  baton_err_name(atomic_load(&follow_rc)));
        done = atomic_load(&follow_done_ms);
    } else {
        pthread_join(t, NULL);
        cr_assert(eq(int, w.rc, BATON_OK), "the waiter: %s", w.why);
        cr_assert(eq(int, w.release_rc, BATON_OK));
        done = atomic_load(&w.done_ms);
    }
    cr_assert(le(i64, done - unlocked, 1000), "it took the lock %lld ms after the unlock",
              (long long)(done - unlocked));
    /* four attempts, the one the unlock woke, and the thread's release */
    cr_assert(eq(i64, th_cmdstat(r.direct, "evalsha") - scripts0, fiber ? 5 : 6));
    th_proxy_heal(r.proxy);
    baton_lock_close(l);
    rig_down(&r);
}

Test(faults, a_redisson_unlock_before_the_lines_first_follows_still_wakes_its_thread)
{
    unlock_before_follow(false);
}

Test(faults, a_redisson_unlock_before_the_lines_first_follows_still_wakes_its_fiber)
{
    unlock_before_follow(true);
}

Test(faults, a_latch_deleted_behind_its_waiters_back_releases_them_within_recheck)
{
    baton_options o;
    baton_options_init(&o);
    o.url = th_url();
    o.recheck_ms = 500;
    baton_client *c = th_client(&o);
    redisContext *r = th_redis();
    const char *name = th_tmpname("fl-latch");
    baton_latch *l;
    cr_assert(eq(int, baton_latch_open(c, name, &l), BATON_OK));
    bool set = false;
    cr_assert(eq(int, baton_latch_try_set_count(l, 3, &set), BATON_OK));
    latch_waiter w = {l, -1};
    pthread_t t;
    pthread_create(&t, NULL, await_latch, &w);
    char channel[160];
    snprintf(channel, sizeof channel, "redisson_countdownlatch__channel__{%s}", name);
    until_subscribed(r, channel);
    th_sleep_ms(20);
    int64_t t0 = th_ms();
    freeReplyObject(th_cmd(r, "DEL %s", name)); /* no message: only the recheck sees it */
    pthread_join(t, NULL);
    cr_assert(eq(int, w.rc, BATON_OK), "an absent latch is open");
    cr_assert(le(i64, th_ms() - t0, 500 + 400), "took %lld ms", (long long)(th_ms() - t0));
    baton_latch_close(l);
    baton_client_close(c);
    redisFree(r);
}

typedef struct sem_waiter {
    baton_semaphore *s;
    int64_t wait_ms;
    int rc;
} sem_waiter;

static void *wait_for_permit(void *arg)
{
    sem_waiter *w = arg;
    w->rc = baton_semaphore_try_acquire(w->s, 1, w->wait_ms);
    return NULL;
}

Test(faults, a_semaphore_deleted_while_waited_on_times_out_and_leaves_nothing)
{
    baton_client *c = th_client(NULL);
    redisContext *r = th_redis();
    const char *name = th_tmpname("fl-semdel");
    char channel[160];
    snprintf(channel, sizeof channel, "redisson_sc:{%s}", name);
    baton_semaphore *s;
    cr_assert(eq(int, baton_semaphore_open(c, name, &s), BATON_OK));
    freeReplyObject(th_cmd(r, "SET %s 0", name));
    sem_waiter w = {s, 1500, -1};
    int64_t t0 = th_ms();
    pthread_t t;
    pthread_create(&t, NULL, wait_for_permit, &w);
    until_subscribed(r, channel);
    /* absent is 0 permits: the waiter keeps waiting, bounded by its own deadline */
    freeReplyObject(th_cmd(r, "DEL %s", name));
    pthread_join(t, NULL);
    int64_t took = th_ms() - t0;
    cr_assert(eq(int, w.rc, BATON_ETIMEDOUT));
    cr_assert(ge(i64, took, 1400));
    cr_assert(le(i64, took, 2200), "took %lld ms", (long long)took);
    th_sleep_ms(150); /* past the subscription's linger */
    cr_assert(eq(i64, th_numsub(r, "%s", channel), 0), "no subscription left behind");
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s", name), 0), "nothing written");
    baton_semaphore_close(s);
    baton_client_close(c);
    redisFree(r);
}

/* An acquisition whose reply comes after its own fixed lease ran out (seed 502's history:
 * two 300 ms leases that ran out inside sync_replicas' WAIT returned BATON_OK): the server
 * started the lease no earlier than the attempt was sent, so the lock may be another's by
 * then; it is not reported held (as Redlock's validity: lease - elapsed - drift > 0). */
Test(faults, an_acquisition_answered_after_its_lease_ran_out_is_not_held)
{
    rig r;
    rig_up(&r, 3000);
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(r.c, "fl-late-lease", &l), BATON_OK));
    /* warm: the connection and the script are loaded */
    cr_assert(eq(int, baton_lock_try_acquire(l, 0, 5000), BATON_OK));
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    th_proxy_delay(r.proxy, TH_DOWN, 400); /* every reply comes 400 ms late */
    int64_t t0 = th_ms();
    int rc = baton_lock_try_acquire(l, 0, 200);
    int64_t took = th_ms() - t0;
    th_proxy_heal(r.proxy);
    cr_assert(ge(i64, took, 390), "the reply was late (%lld ms)", (long long)took);
    cr_assert(eq(int, rc, BATON_ETIMEDOUT), "%d %s", rc, baton_client_errmsg(r.c));
    cr_assert(ne(ptr, strstr(baton_client_errmsg(r.c), "ran out"), NULL), "%s",
              baton_client_errmsg(r.c));
    bool held = true;
    cr_assert(eq(int, baton_lock_is_held_by_current_thread(l, &held), BATON_OK));
    cr_assert(not(held), "not believed held");
    /* and another client takes it at once */
    baton_client *d = th_client_on(r.server.port, 1000);
    baton_lock *o;
    cr_assert(eq(int, baton_lock_open(d, "fl-late-lease", &o), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(o, 0, 5000), BATON_OK));
    cr_assert(eq(int, baton_lock_release(o), BATON_OK));
    baton_lock_close(o);
    baton_client_close(d);
    baton_lock_close(l);
    rig_down(&r);
}

/* The same for permit leases: a permit taken with a lease of 200 ms whose reply comes
 * 400 ms late is gone on the server, and may be another's: not held, given back. */
Test(faults, a_permit_answered_after_its_lease_ran_out_is_not_held)
{
    rig r;
    rig_up(&r, 3000);
    baton_permits *p;
    char id[BATON_PERMIT_ID_SIZE];
    cr_assert(eq(int, baton_permits_open(r.c, "fl-late-permit", &p), BATON_OK));
    cr_assert(eq(int, baton_permits_try_set_permits(p, 1, NULL), BATON_OK));
    /* warm: the connection and the script are loaded */
    cr_assert(eq(int, baton_permits_try_acquire(p, 0, 5000, id), BATON_OK));
    cr_assert(eq(int, baton_permits_release(p, id), BATON_OK));
    th_proxy_delay(r.proxy, TH_DOWN, 400); /* every reply comes 400 ms late */
    int64_t t0 = th_ms();
    int rc = baton_permits_try_acquire(p, 0, 200, id);
    int64_t took = th_ms() - t0;
    th_proxy_heal(r.proxy);
    cr_assert(ge(i64, took, 390), "the reply was late (%lld ms)", (long long)took);
    cr_assert(eq(int, rc, BATON_ETIMEDOUT), "%d %s", rc, baton_client_errmsg(r.c));
    cr_assert(ne(ptr, strstr(baton_client_errmsg(r.c), "ran out"), NULL), "%s",
              baton_client_errmsg(r.c));
    cr_assert(eq(str, id, ""), "no id handed out");
    /* the permit is free again: another client takes it at once */
    baton_client *d = th_client_on(r.server.port, 1000);
    baton_permits *o;
    cr_assert(eq(int, baton_permits_open(d, "fl-late-permit", &o), BATON_OK));
    cr_assert(eq(int, baton_permits_try_acquire(o, 0, 5000, id), BATON_OK));
    cr_assert(eq(int, baton_permits_release(o, id), BATON_OK));
    baton_permits_close(o);
    baton_client_close(d);
    baton_permits_close(p);
    rig_down(&r);
}

/* A barrier party whose arrival's reply is lost (the checker's gap 6: the arrival counted
 * on the server, its await failed, and the generation tripped with a party short). */
typedef struct party {
    baton_barrier *b;
    baton_client *c;
    int rc;
    int64_t index, gen;
    char err[256];
} party;

static void *party_await(void *arg)
{
    party *p = arg;
    p->rc = baton_barrier_await(p->b, 20000, &p->index, &p->gen);
    snprintf(p->err, sizeof p->err, "%s", p->rc ? baton_client_errmsg(p->c) : "");
    return NULL;
}

static long long barrier_count(rig *r, const char *key)
{
    redisReply *rep = th_cmd(r->direct, "HGET %s count", key);
    long long n = rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : 0;
    freeReplyObject(rep);
    return n;
}

/* a and b await together (a on a thread of its own): both must pass. */
static void await_together(party *a, party *b)
{
    pthread_t t;
    pthread_create(&t, NULL, party_await, a);
    party_await(b);
    pthread_join(t, NULL);
    cr_assert(eq(int, a->rc, BATON_OK), "%s", a->err);
    cr_assert(eq(int, b->rc, BATON_OK), "%s", b->err);
}

/* a arrives alone, on a thread (*t), and the server has counted it. */
static void arrive_alone(rig *r, party *a, const char *state, pthread_t *t)
{
    pthread_create(t, NULL, party_await, a);
    for (int i = 0; i < 200 && barrier_count(r, state) == 0; i++)
        th_sleep_ms(10);
    cr_assert(eq(i64, barrier_count(r, state), 1), "the arrival ran on the server");
}

/* first: the party behind the proxy arrives first (its reply lost, another arrives later)
 * or last (its lost reply was the trip's) */
static void an_arrival_whose_reply_is_lost(bool first)
{
    rig r;
    rig_up(&r, 1000);
    baton_client *d = th_client_on(r.server.port, 1000); /* the other party, around the proxy */
    const char *name = first ? "fl-bar-first" : "fl-bar-last";
    char state[64];
    snprintf(state, sizeof state, "baton_barrier:{%s}", name);
    party a = {.c = r.c}, b = {.c = d};
    cr_assert(eq(int, baton_barrier_open(r.c, name, 2, &a.b), BATON_OK));
    cr_assert(eq(int, baton_barrier_open(d, name, 2, &b.b), BATON_OK));
    /* a generation as usual: the scripts are loaded, the connections open */
    pthread_t t;
    pthread_create(&t, NULL, party_await, &a);
    party_await(&b);
    pthread_join(t, NULL);
    cr_assert(eq(int, a.rc, BATON_OK));
    cr_assert(eq(int, b.rc, BATON_OK));
    cr_assert(eq(i64, a.gen, 0));
    /* every reply on the client's command connections is thrown away from now on (not on
     * its subscriber connection, whose stream a dropped confirmation would confuse): the
     * next arrival runs on the server and its caller never hears of it */
    cr_assert(ge(i64, slow_command_connections(&r, -1), 1));
    if (first) {
        pthread_create(&t, NULL, party_await, &a);
        for (int i = 0; i < 200 && barrier_count(&r, state) == 0; i++)
            th_sleep_ms(10);
        cr_assert(eq(i64, barrier_count(&r, state), 1), "the arrival ran on the server");
        /* the other party arrives while the first does not know it has */
        party_await(&b);
        pthread_join(t, NULL);
    } else {
        pthread_create(&t, NULL, party_await, &b);
        for (int i = 0; i < 200 && barrier_count(&r, state) == 0; i++)
            th_sleep_ms(10);
        cr_assert(eq(i64, barrier_count(&r, state), 1));
        party_await(&a); /* trips the generation; the reply that says so is lost */
        pthread_join(t, NULL);
    }
    /* both parties of generation 1 are told it tripped, or neither is */
    cr_assert(eq(int, b.rc, BATON_OK), "%s", b.err);
    cr_assert(eq(int, a.rc, BATON_OK), "the lost arrival: %s", a.err);
    cr_assert(eq(i64, a.gen, 1));
    cr_assert(eq(i64, b.gen, 1));
    cr_assert(ne(i64, a.index, b.index));
    /* and the next generation counts each party once */
    th_proxy_heal(r.proxy);
    await_together(&a, &b);
    cr_assert(eq(i64, a.gen, 2));
    cr_assert(eq(i64, b.gen, 2));
    baton_barrier_close(a.b);
    baton_barrier_close(b.b);
    baton_client_close(d);
    rig_down(&r);
}

/* Both replies of an arrival lost (sent, and sent again): the await fails with ECONN, and
 * the handle's next await is the same party, not a second one. */
Test(faults, a_barrier_arrival_lost_twice_is_the_same_party_at_the_next_await)
{
    rig r;
    rig_up(&r, 1000);
    baton_client *d = th_client_on(r.server.port, 1000);
    const char *state = "baton_barrier:{fl-bar-twice}";
    party a = {.c = r.c}, b = {.c = d};
    cr_assert(eq(int, baton_barrier_open(r.c, "fl-bar-twice", 2, &a.b), BATON_OK));
    cr_assert(eq(int, baton_barrier_open(d, "fl-bar-twice", 2, &b.b), BATON_OK));
    pthread_t t;
    await_together(&a, &b);
    cr_assert(ge(i64, slow_command_connections(&r, -1), 1));
    arrive_alone(&r, &a, state, &t);
    th_proxy_hold(r.proxy, true); /* and the one sent again never gets there */
    pthread_join(t, NULL);
    cr_assert(eq(int, a.rc, BATON_ECONN), "%d %s", a.rc, a.err);
    th_proxy_heal(r.proxy);
    cr_assert(eq(i64, barrier_count(&r, state), 1), "one arrival, its lease still running");
    /* the handle's next await is that arrival: with the other party's, generation 1 trips */
    await_together(&a, &b);
    cr_assert(eq(i64, a.gen, 1));
    cr_assert(eq(i64, b.gen, 1));
    cr_assert(ne(i64, a.index, b.index));
    baton_barrier_close(a.b);
    baton_barrier_close(b.b);
    baton_client_close(d);
    rig_down(&r);
}

/* A party that arrived and then lost the server while it waited (a 30-minute history's
 * barrier violations: a server killed under three parties): its await fails (ECONN, its
 * give-up's leave lost too), so its arrival still counts, and the handle's next await must
 * be that arrival, not a second party that trips the generation a party short. */
Test(faults, a_party_whose_wait_lost_the_server_is_the_same_party_at_the_next_await)
{
    rig r;
    rig_up(&r, 500);
    baton_client *d = th_client_on(r.server.port, 1000);
    const char *state = "baton_barrier:{fl-bar-wait}";
    party a = {.c = r.c}, b = {.c = d};
    cr_assert(eq(int, baton_barrier_open(r.c, "fl-bar-wait", 2, &a.b), BATON_OK));
    cr_assert(eq(int, baton_barrier_open(d, "fl-bar-wait", 2, &b.b), BATON_OK));
    pthread_t t;
    await_together(&a, &b);
    /* A arrives in generation 1 and waits */
    arrive_alone(&r, &a, state, &t);
    /* the server is lost to A while it waits: every connection reset, new ones held */
    th_proxy_hold(r.proxy, true);
    th_proxy_cut(r.proxy);
    pthread_join(t, NULL);
    cr_assert(eq(int, a.rc, BATON_ECONN), "%d %s", a.rc, a.err);
    th_proxy_heal(r.proxy);
    cr_assert(eq(i64, barrier_count(&r, state), 1), "A's arrival, its lease still running");
    /* A's next await is that arrival: it waits for B, it does not trip generation 1 alone */
    pthread_create(&t, NULL, party_await, &a);
    th_sleep_ms(400);
    cr_assert(eq(i64, barrier_count(&r, state), 1), "A counted once");
    party_await(&b);
    pthread_join(t, NULL);
    cr_assert(eq(int, a.rc, BATON_OK), "%s", a.err);
    cr_assert(eq(int, b.rc, BATON_OK), "%s", b.err);
    cr_assert(eq(i64, a.gen, 1));
    cr_assert(eq(i64, b.gen, 1), "B's arrival tripped the generation A waited in");
    cr_assert(ne(i64, a.index, b.index));
    baton_barrier_close(a.b);
    baton_barrier_close(b.b);
    baton_client_close(d);
    rig_down(&r);
}

Test(faults, a_barrier_arrival_whose_reply_is_lost_waits_for_the_others)
{
    an_arrival_whose_reply_is_lost(true);
}

Test(faults, a_barrier_arrival_that_tripped_but_was_not_told_returns_ok)
{
    an_arrival_whose_reply_is_lost(false);
}
