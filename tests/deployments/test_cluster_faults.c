/*
 * The fault matrix on a Redis Cluster (issue 14's Cluster rows): the fault proxy sits in
 * front of one master. That master announces the proxy's port to clients (CONFIG SET
 * cluster-announce-port), so every client that reads the slot map reaches it through the
 * proxy, while the cluster's own bus and replication go direct: the cluster stays healthy
 * and only the client's path breaks, which is what a partition between an application
 * host and one shard looks like.
 *
 * What must hold: a fault on one master's path costs the names it serves their calls'
 * deadlines, never a hang and never the other masters' names; a hold there whose lease ends
 * unrenewed is reported lost; an acquire whose reply is cut is resolved (hold count right,
 * one release frees it, no orphan renewal); everything resumes when the path heals.
 */
#include "faultproxy.h"
#include "ha_helper.h"
#include "slots.h"

#include "new_assert.h"
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TIMEOUT_MS 1000 /* connect and command timeouts of the clients here */
#define LEASE_MS 1500   /* watchdog lease */

static th_cluster cluster;
static th_proxy *proxy;
static int proxied; /* the port of the master behind the proxy */

/* Whether the proxied master serves name's slot: asked directly (not through the proxy,
 * whose port CLUSTER SLOTS names while the test runs), it answers MOVED for any other. */
static bool on_proxied(const char *name)
{
    redisContext *r = th_redis_port(proxied);
    redisReply *rep = th_cmd(r, "EXISTS %s", name);
    bool mine = rep->type != REDIS_REPLY_ERROR;
    freeReplyObject(rep);
    redisFree(r);
    return mine;
}

/* A name that the proxied master serves (want_on) or another master serves. */
static void name_for(const char *base, bool want_on, char *out, size_t len)
{
    for (int i = 0; i < 100000; i++) {
        snprintf(out, len, "%s-%d-%d", base, (int)getpid(), i);
        if (on_proxied(out) == want_on)
            return;
    }
    cr_assert(false, "no name found");
}

/* Whether every node's CLUSTER SHARDS shows the proxied master at the proxy's port. */
static bool announced_everywhere(int port)
{
    for (int i = 0; i < cluster.n; i++) {
        redisContext *r = th_redis_port(cluster.ports[i]);
        redisReply *rep = th_cmd(r, "CLUSTER SLOTS");
        bool seen = false;
        for (size_t s = 0; rep->type == REDIS_REPLY_ARRAY && s < rep->elements; s++) {
            redisReply *range = rep->element[s];
            if (range->elements >= 3 && range->element[2]->elements >= 2 &&
                range->element[2]->element[1]->integer == port)
                seen = true;
        }
        freeReplyObject(rep);
        redisFree(r);
        if (!seen)
            return false;
    }
    return true;
}

static void setup(void)
{
    th_cluster_attach(&cluster);
    /* the first node of the fixture that is a master: the same one in every case */
    proxied = 0;
    for (int i = 0; i < cluster.n && !proxied; i++) {
        redisContext *r = th_redis_port(cluster.ports[i]);
        redisReply *role = th_cmd(r, "ROLE");
        if (role->type == REDIS_REPLY_ARRAY && role->elements > 0 &&
            strcmp(role->element[0]->str, "master") == 0)
            proxied = cluster.ports[i];
        freeReplyObject(role);
        redisFree(r);
    }
    cr_assert(gt(int, proxied, 0), "no master in the fixture");
    proxy = th_proxy_start(proxied);
    redisContext *r = th_redis_port(proxied);
    freeReplyObject(th_cmd(r, "CONFIG SET cluster-announce-port %d", th_proxy_port(proxy)));
    redisFree(r);
    /* gossip carries the new port to the other nodes within a few pings */
    int64_t until = th_ms() + 10000;
    while (!announced_everywhere(th_proxy_port(proxy)) && th_ms() < until)
        th_sleep_ms(50);
    cr_assert(announced_everywhere(th_proxy_port(proxy)), "the proxy's port was not announced");
}

static void teardown(void)
{
    redisContext *r = th_redis_port(proxied);
    freeReplyObject(th_cmd(r, "CONFIG SET cluster-announce-port 0"));
    redisFree(r);
    th_proxy_stop(proxy);
    proxy = NULL;
}

TestSuite(cluster_faults, .init = setup, .fini = teardown, .timeout = 90);

static baton_client *client(void)
{
    baton_options o;
    baton_options_init(&o);
    o.url = cluster.url;
    o.connect_timeout_ms = TIMEOUT_MS;
    o.command_timeout_ms = TIMEOUT_MS;
    o.watchdog_ms = LEASE_MS;
    return th_client(&o);
}

/* A thread locking and unlocking a name of another master while the fault lasts. */
typedef struct bystander {
    baton_client *c;
    char name[64];
    atomic_bool stop;
    atomic_long done;   /* lock/unlock pairs completed */
    atomic_long failed; /* calls that returned an error */
    atomic_long worst_ms;
} bystander;

static void *bystander_main(void *arg)
{
    bystander *b = arg;
    baton_lock *l = NULL;
    cr_assert(eq(int, baton_lock_open(b->c, b->name, &l), BATON_OK));
    while (!atomic_load(&b->stop)) {
        int64_t t = th_ms();
        int rc = baton_lock_try_acquire(l, 1000, 5000);
        if (rc == BATON_OK)
            rc = baton_lock_release(l);
        int64_t took = th_ms() - t;
        if (took > atomic_load(&b->worst_ms))
            atomic_store(&b->worst_ms, took);
        if (rc == BATON_OK)
            atomic_fetch_add(&b->done, 1);
        else
            atomic_fetch_add(&b->failed, 1);
    }
    baton_lock_close(l);
    return NULL;
}

static atomic_llong lost_at; /* th_ms() when the lost handler ran */

static void on_lost(baton_lock *l, void *arg)
{
    (void)l;
    (void)arg;
    atomic_store(&lost_at, th_ms());
}

Test(cluster_faults, a_partitioned_master_costs_its_names_their_deadlines_and_no_other_name)
{
    baton_client *c = client();
    char held[64], other[64], probe[64];
    name_for("held", true, held, sizeof held);
    name_for("probe", true, probe, sizeof probe);
    bystander b = {.c = c};
    name_for("other", false, b.name, sizeof b.name);
    snprintf(other, sizeof other, "%s", b.name);

    /* a watchdog hold on the proxied master, and its lost fd */
    baton_lock *h = NULL, *p = NULL;
    cr_assert(eq(int, baton_lock_open(c, held, &h), BATON_OK));
    cr_assert(eq(int, baton_lock_open(c, probe, &p), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(h, BATON_LEASE_WATCHDOG), BATON_OK));
    int fd = -1;
    cr_assert(eq(int, baton_lock_lost_fd(h, &fd), BATON_OK));
    atomic_store(&lost_at, 0);
    cr_assert(eq(int, baton_lock_set_lost_handler(h, on_lost, NULL), BATON_OK));

    pthread_t t;
    cr_assert(eq(int, pthread_create(&t, NULL, bystander_main, &b), 0));
    th_sleep_ms(300);

    /* the partition: nothing passes between the clients and that master, for 3 s */
    int64_t t0 = th_ms();
    long before = atomic_load(&b.done);
    th_proxy_hold(proxy, true);

    int64_t s = th_ms();
    int rc = baton_lock_try_acquire(p, 0, 5000);
    int64_t call_ms = th_ms() - s;
    cr_assert(eq(int, rc, BATON_ECONN), "a call on the partitioned master: %s", baton_err_name(rc));
    /* one command timeout, and a reconnection's connect timeout, plus 1 s */
    cr_assert(lt(i64, call_ms, 2 * TIMEOUT_MS + 1000), "the call took %lld ms", (long long)call_ms);

    /* the hold is reported lost by the end of its lease (last renewal + lease) + 1 s */
    struct pollfd pf = {fd, POLLIN, 0};
    int64_t left = t0 + LEASE_MS + 1000 - th_ms();
    cr_assert(eq(int, poll(&pf, 1, left > 0 ? (int)left : 0), 1), "the lost hold was not told");
    int64_t told_ms = atomic_load(&lost_at) - t0;
    cr_assert(le(i64, told_ms, LEASE_MS + 500), "told %lld ms after the partition",
              (long long)told_ms);

    while (th_ms() < t0 + 3000)
        th_sleep_ms(20);
    long during = atomic_load(&b.done) - before;
    th_proxy_heal(proxy);

    /* healed: the master's names work again within 2 s */
    int64_t h0 = th_ms();
    while ((rc = baton_lock_try_acquire(p, 0, 5000)) != BATON_OK && th_ms() < h0 + 2000)
        th_sleep_ms(20);
    int64_t back_ms = th_ms() - h0;
    cr_assert(eq(int, rc, BATON_OK), "not back 2 s after the heal: %s", baton_client_errmsg(c));
    cr_assert(eq(int, baton_lock_release(p), BATON_OK));
    /* the lost hold's release never touches the lock (its key expired on the server) */
    cr_assert(eq(int, baton_lock_release(h), BATON_ENOTHELD));

    atomic_store(&b.stop, true);
    pthread_join(t, NULL);
    /* the other master's name never noticed: it kept working through the partition */
    cr_assert(gt(long, during, 20), "only %ld lock/unlock pairs on another master", during);
    cr_assert(eq(long, atomic_load(&b.failed), 0));
    cr_assert(lt(long, atomic_load(&b.worst_ms), 500), "a call on another master took %ld ms",
              atomic_load(&b.worst_ms));
    fprintf(stderr,
            "partition 3 s: call %lld ms (ECONN), hold told lost %lld ms after, %ld pairs on %s "
            "meanwhile (worst %ld ms), back %lld ms after the heal\n",
            (long long)call_ms, (long long)told_ms, during, other, atomic_load(&b.worst_ms),
            (long long)back_ms);
    baton_lock_close(h);
    baton_lock_close(p);
    baton_client_close(c);
}

Test(cluster_faults, an_acquire_whose_reply_is_cut_at_every_byte_is_resolved)
{
    baton_client *c = client();
    char name[64];
    name_for("cut", true, name, sizeof name);
    redisContext *r = th_redis_port(proxied);
    baton_lock *l = NULL;
    cr_assert(eq(int, baton_lock_open(c, name, &l), BATON_OK));
    int ok = 0, failed = 0;
    for (long n = 0; n < 16; n++) {
        th_proxy_cut_after(proxy, TH_DOWN, n);
        int rc = baton_lock_try_acquire(l, 0, BATON_LEASE_WATCHDOG);
        th_proxy_heal(proxy);
        cr_assert(rc == BATON_OK || rc == BATON_ECONN, "byte %ld: %s", n, baton_err_name(rc));
        /* what the handle says is what the server has */
        long long fields = th_cmd_int(r, "HLEN %s", name);
        int64_t count = -1;
        cr_assert(eq(int, baton_lock_hold_count(l, &count), BATON_OK));
        cr_assert(eq(i64, count, rc == BATON_OK ? 1 : 0), "byte %ld", n);
        cr_assert(eq(int, (int)fields, rc == BATON_OK ? 1 : 0), "byte %ld: %lld fields", n, fields);
        if (rc == BATON_OK) {
            ok++;
            cr_assert(eq(int, baton_lock_release(l), BATON_OK), "byte %ld", n);
        } else {
            failed++;
        }
        cr_assert(eq(int, (int)th_cmd_int(r, "EXISTS %s", name), 0), "byte %ld: left held", n);
    }
    /* no orphan renewal brings it back (a renewal period is a third of the lease) */
    th_sleep_ms(LEASE_MS / 2);
    cr_assert(eq(int, (int)th_cmd_int(r, "EXISTS %s", name), 0));
    cr_assert(gt(int, ok, 0));
    fprintf(stderr, "acquire cut after 0..15 reply bytes: %d acquired (resolved), %d ECONN\n", ok,
            failed);
    redisFree(r);
    baton_lock_close(l);
    baton_client_close(c);
}
