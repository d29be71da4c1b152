/*
 * Against a real Redis Cluster (3 masters, 3 replicas, started once for the program by
 * with-cluster.sh): the
 * client's slot arithmetic and topology decoding agree with what the cluster itself says.
 * The cluster client (routing every primitive by slot) builds on exactly these pieces.
 */
#define _GNU_SOURCE
#include "acl_helper.h"
#include "checkers.h"
#include "cli_helper.h"
#include "ha_helper.h"
#include "internal.h"
#include "slots.h"

#include "new_assert.h"
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static th_cluster cluster;

static void setup(void)
{
    th_cluster_attach(&cluster);
}

TestSuite(cluster, .init = setup, .timeout = 60);

Test(cluster, the_fixture_serves_every_slot)
{
    redisContext *r = th_redis_port(cluster.ports[0]);
    redisReply *info = th_cmd(r, "CLUSTER INFO");
    cr_assert(not(eq(ptr, strstr(info->str, "cluster_slots_ok:16384"), NULL)));
    cr_assert(not(eq(ptr, strstr(info->str, "cluster_known_nodes:6"), NULL)));
    freeReplyObject(info);
    redisFree(r);
}

Test(cluster, key_slots_agree_with_the_server)
{
    redisContext *r = th_redis_port(cluster.ports[1]);
    const char *shapes[] = {"k%d", "{tag%d}.x", "a{b%d", "{}x%d", "x{%d}y{z}", "lock:%d:é"};
    for (int i = 0; i < 600; i++) {
        char key[64];
        snprintf(key, sizeof key, shapes[i % 6], i);
        long long server = th_cmd_int(r, "CLUSTER KEYSLOT %s", key);
        cr_assert(eq(int, baton__key_slot(key, strlen(key)), (int)server), "%s", key);
    }
    redisFree(r);
}

Test(cluster, slots_and_shards_decode_to_the_same_map)
{
    redisContext *r = th_redis_port(cluster.ports[2]);
    redisReply *slots = th_cmd(r, "CLUSTER SLOTS");
    redisReply *shards = th_cmd(r, "CLUSTER SHARDS");
    baton__slot_map a, b;
    char err[128] = "";
    cr_assert(
        eq(int, baton__slot_map_from_slots(slots, "127.0.0.1", &a, err, sizeof err), BATON_OK),
        "%s", err);
    cr_assert(eq(int, baton__slot_map_from_shards(shards, "127.0.0.1", false, &b, err, sizeof err),
                 BATON_OK),
              "%s", err);
    /* CLUSTER SHARDS lists every node; CLUSTER SLOTS (cached by Redis 7.0) may list a
     * replica only once its slot table changes after it joined: the masters are what
     * routing needs from both */
    cr_assert(ge(sz, a.nnodes, 3));
    cr_assert(eq(sz, b.nnodes, 6));
    int masters = 0;
    for (size_t i = 0; i < a.nnodes; i++)
        masters += a.nodes[i].master;
    cr_assert(eq(int, masters, 3));
    for (int s = 0; s < BATON__SLOTS; s++) {
        cr_assert(not(eq(u16, a.owner[s], BATON__NO_NODE)), "slot %d uncovered", s);
        const baton__cluster_node *x = &a.nodes[a.owner[s]], *y = &b.nodes[b.owner[s]];
        cr_assert(eq(int, x->port, y->port), "slot %d", s);
        cr_assert(eq(str, x->host, y->host));
        if (s % 1000 == 0) /* what the cluster itself says, now and then */
            cr_assert(eq(int, th_cluster_master_of(&cluster, s), x->port), "slot %d", s);
    }
    baton__slot_map_free(&a);
    baton__slot_map_free(&b);
    freeReplyObject(slots);
    freeReplyObject(shards);
    redisFree(r);
}

Test(cluster, a_real_moved_reply_names_the_owner)
{
    redisContext *r0 = th_redis_port(cluster.ports[0]);
    redisReply *slots = th_cmd(r0, "CLUSTER SLOTS");
    baton__slot_map m;
    char err[128] = "";
    cr_assert(
        eq(int, baton__slot_map_from_slots(slots, "127.0.0.1", &m, err, sizeof err), BATON_OK));
    int moved = 0;
    for (int i = 0; i < 30; i++) {
        char key[32];
        snprintf(key, sizeof key, "mv-%d", i);
        int slot = baton__key_slot(key, strlen(key));
        redisReply *rep = redisCommand(r0, "GET %s", key);
        cr_assert(rep != NULL);
        if (rep->type == REDIS_REPLY_ERROR) {
            bool ask = true;
            int s = -1, port = -1;
            char host[64];
            cr_assert(eq(int, baton__parse_redirect(rep->str, &ask, &s, host, sizeof host, &port),
                         BATON_OK),
                      "%s", rep->str);
            cr_assert(not(ask));
            cr_assert(eq(int, s, slot));
            cr_assert(eq(int, port, m.nodes[m.owner[slot]].port));
            moved++;
        } else {
            cr_assert(eq(int, m.nodes[m.owner[slot]].port, cluster.ports[0]));
        }
        freeReplyObject(rep);
    }
    cr_assert(gt(int, moved, 10), "two thirds of the keys live elsewhere");
    baton__slot_map_free(&m);
    freeReplyObject(slots);
    redisFree(r0);
}

/* The fair lock's side hash of holders' origins (baton_lock_meta:{name}, an older baton's) and the
 * plain lock's line and reservation (baton_lock_line:{name}, baton_lock_next:{name}; the
 * semaphore's, baton_semaphore_line:{name} and baton_semaphore_next:{name}) share the
 * lock's slot, so a Cluster node runs the scripts that touch them: the acquires name them
 * as keys, the watchdog's renewal derives the side hash from the lock's name (undeclared,
 * same slot). */
Test(cluster, scripts_reach_the_side_keys_in_the_locks_slot)
{
    const char *names[] = {"origin-plain", "{origin-tag}:job"};
    for (size_t i = 0; i < 2; i++) {
        const char *name = names[i];
        char meta[64], token[64], next[64], line[64], queue[64], timeout[64], channel[80];
        bool tagged = strchr(name, '{') != NULL;
        const char *fmt = tagged ? "%s%s" : "%s{%s}";
        snprintf(meta, sizeof meta, fmt, "baton_lock_meta:", name);
        snprintf(token, sizeof token, fmt, "redisson_lock_token:", name);
        snprintf(next, sizeof next, fmt, "baton_lock_next:", name);
        snprintf(line, sizeof line, fmt, "baton_lock_line:", name);
        snprintf(queue, sizeof queue, fmt, "redisson_lock_queue:", name);
        snprintf(timeout, sizeof timeout, fmt, "redisson_lock_timeout:", name);
        snprintf(channel, sizeof channel, fmt, "redisson_lock__channel:", name);
        int slot = baton__key_slot(name, strlen(name));
        cr_assert(eq(int, baton__key_slot(meta, strlen(meta)), slot), "%s", meta);
        cr_assert(eq(int, baton__key_slot(next, strlen(next)), slot), "%s", next);
        cr_assert(eq(int, baton__key_slot(line, strlen(line)), slot), "%s", line);
        /* and the semaphore's line and reservation, which its acquire names as keys */
        char snext[64], sline[64];
        snprintf(snext, sizeof snext, fmt, "baton_semaphore_next:", name);
        snprintf(sline, sizeof sline, fmt, "baton_semaphore_line:", name);
        cr_assert(eq(int, baton__key_slot(snext, strlen(snext)), slot), "%s", snext);
        cr_assert(eq(int, baton__key_slot(sline, strlen(sline)), slot), "%s", sline);
        int port = th_cluster_master_of(&cluster, slot);
        cr_assert(gt(int, port, 0));
        redisContext *r = th_redis_port(port);
        const baton__script *acq = baton__script_find("lock_acquire");
        const baton__script *fair = baton__script_find("fairlock_acquire");
        const baton__script *renew = baton__script_find("lock_renew");
        /* the plain lock: held by owner:1; owner:2, starving, queues; a force release
         * reserves the lock for it */
        const baton__script *force = baton__script_find("lock_force_release");
        redisReply *rep = th_cmd(r, "EVAL %b 4 %s %s %s %s 1000 owner:1 0 %s 10000", acq->body,
                                 acq->len, name, token, next, line, channel);
        cr_assert(eq(int, rep->type, REDIS_REPLY_ARRAY), "%s", rep->str);
        freeReplyObject(rep);
        rep = th_cmd(r, "EVAL %b 4 %s %s %s %s 1000 owner:2 2 %s 10000", acq->body, acq->len, name,
                     token, next, line, channel);
        cr_assert(eq(int, rep->type, REDIS_REPLY_ARRAY), "%s", rep->str);
        cr_assert(eq(i64, rep->element[0]->integer, 5), "owner:2 in the line");
        freeReplyObject(rep);
        cr_assert(eq(i64, th_cmd_int(r, "ZCARD %s", line), 1));
        rep = th_cmd(r, "EVAL %b 4 %s %s %s %s 0", force->body, force->len, name, channel, next,
                     line);
        cr_assert(eq(int, rep->type, REDIS_REPLY_INTEGER), "%s", rep->str);
        freeReplyObject(rep);
        rep = th_cmd(r, "GET %s", next);
        cr_assert(eq(str, rep->str, "owner:2"));
        freeReplyObject(rep);
        freeReplyObject(th_cmd(r, "DEL %s %s %s %s", name, next, line, token));
        /* the fair lock no longer writes its side hash (issue 49); one an older baton left
         * is still renewed with the lock, in the lock's slot */
        rep = th_cmd(r, "EVAL %b 6 %s %s %s %s %s %s 1000 owner:1 5000 0", fair->body, fair->len,
                     name, queue, timeout, token, channel, meta);
        cr_assert(eq(int, rep->type, REDIS_REPLY_ARRAY), "%s", rep->str);
        freeReplyObject(rep);
        cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s", meta), 0), "the side hash is not written");
        freeReplyObject(th_cmd(r, "HSET %s owner:1 host-a:42", meta));
        freeReplyObject(th_cmd(r, "PEXPIRE %s 1000", meta));
        rep = th_cmd(r, "EVAL %b 1 %s 60000 owner:1", renew->body, renew->len, name);
        cr_assert(eq(int, rep->type, REDIS_REPLY_ARRAY));
        cr_assert(eq(i64, rep->element[0]->integer, 1));
        freeReplyObject(rep);
        cr_assert(gt(i64, th_cmd_int(r, "PTTL %s", meta), 50000), "renewed with the lock");
        rep = th_cmd(r, "HGET %s owner:1", meta);
        cr_assert(eq(str, rep->str, "host-a:42"));
        freeReplyObject(rep);
        freeReplyObject(th_cmd(r, "DEL %s %s %s %s %s", name, meta, token, queue, timeout));
        redisFree(r);
    }
}

/* The form each script runs in on this Cluster (Redis 7: sharded publishing, and the
 * allow-oom variant of the scripts that only shrink or extend) loads on a node under the
 * SHA1 the client sends it by. */
Test(cluster, every_script_variant_loads_under_its_sha1)
{
    baton_client *c = NULL;
    cr_assert(eq(int, baton_client_open_url(cluster.url, &c), BATON_OK), "%s", baton_open_errmsg());
    redisContext *r = th_redis_port(cluster.ports[0]);
    int flagged = 0, sharded = 0;
    for (const baton__script *s = baton__scripts(); s->name; s++) {
        const baton__script *v = baton__script_variant(c, s);
        redisReply *rep = th_cmd(r, "SCRIPT LOAD %b", v->body, v->len);
        cr_assert(eq(int, rep->type, REDIS_REPLY_STRING), "%s: %s", s->name,
                  rep->type == REDIS_REPLY_ERROR ? rep->str : "");
        cr_assert(eq(str, rep->str, (char *)v->sha1), "%s", s->name);
        freeReplyObject(rep);
        flagged += strncmp(v->body, "#!lua flags=allow-oom\n", 22) == 0;
        sharded += strstr(v->body, "call('spublish'") != NULL; /* redis.call or redis.pcall */
        cr_assert(eq(int, s->oom != NULL, strncmp(v->body, "#!lua", 5) == 0), "%s", s->name);
    }
    cr_assert(eq(int, flagged, 10));
    cr_assert(gt(int, sharded, 0));
    redisFree(r);
    baton_client_close(c);
}

/* ------------------------------- the cluster client ------------------------------------ */
/*
 * Every primitive through a redis+cluster:// client, on names chosen so that each case
 * reaches all three masters; the keys are then looked at on the master that serves them.
 * Timing bounds are for a loaded 2-core machine.
 */

#define MASTERS 3

static baton_client *client_url(const char *url)
{
    baton_options o;
    baton_options_init(&o);
    o.url = url;
    o.connect_timeout_ms = 1000;
    o.command_timeout_ms = 2000;
    baton_client *c = NULL;
    cr_assert(eq(int, baton_client_open(&o, &c), BATON_OK), "%s: %s", url, baton_open_errmsg());
    return c;
}

static baton_client *client(void)
{
    return client_url(cluster.url);
}

/* The masters now (ascending ports) and one name on each. */
typedef struct spread {
    int masters[MASTERS];
    char names[MASTERS][96];
} spread;

static void spread_names(spread *s, const char *base)
{
    cr_assert(eq(int, th_cluster_masters(&cluster, s->masters, MASTERS), MASTERS));
    for (int i = 0; i < MASTERS; i++)
        th_cluster_name_on(&cluster, base, s->masters[i], s->names[i], sizeof s->names[i]);
}

/* EXISTS key on the master of the key's slot (the key given printf-style). */
static long long exists_on_master(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static long long exists_on_master(const char *fmt, ...)
{
    char key[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(key, sizeof key, fmt, ap);
    va_end(ap);
    redisContext *r = th_redis_port(th_cluster_master_of(&cluster, th_cluster_slot(key)));
    long long n = th_cmd_int(r, "EXISTS %s", key);
    redisFree(r);
    return n;
}

/* A raw connection to the master of name's slot. */
static redisContext *master_conn(const char *name)
{
    return th_redis_port(th_cluster_master_of(&cluster, th_cluster_slot(name)));
}

/* Subscribers of a channel on one node, sharded (SSUBSCRIBE) and classic together. */
static long long subscribers(redisContext *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static long long subscribers(redisContext *r, const char *fmt, ...)
{
    char channel[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(channel, sizeof channel, fmt, ap);
    va_end(ap);
    long long n = 0;
    for (int sharded = 0; sharded < 2; sharded++) {
        redisReply *rep =
            th_cmd(r, sharded ? "PUBSUB SHARDNUMSUB %s" : "PUBSUB NUMSUB %s", channel);
        cr_assert(eq(int, rep->type, REDIS_REPLY_ARRAY));
        n += rep->element[1]->integer;
        freeReplyObject(rep);
    }
    return n;
}

/* A thread that takes a lock, notes when, and releases it. */
typedef struct waiter {
    baton_lock *l;
    int64_t wait_ms;
    int rc;
    _Atomic int64_t at_ms; /* th_ms() when the acquire returned (read while it runs) */
    int64_t token;
    atomic_int *order; /* optional: the rank it acquired in */
    int rank;
    int hold_ms;
} waiter;

static void *waiter_main(void *arg)
{
    waiter *w = arg;
    w->rc = baton_lock_try_acquire(w->l, w->wait_ms, 30000);
    w->at_ms = th_ms();
    if (w->rc == BATON_OK) {
        if (w->order)
            w->rank = atomic_fetch_add(w->order, 1);
        baton_lock_fencing_token(w->l, &w->token);
        if (w->hold_ms)
            th_sleep_ms(w->hold_ms);
        baton_lock_release(w->l);
    }
    return NULL;
}

Test(cluster, lock_acquire_reenter_time_out_and_release_on_every_master)
{
    spread s;
    spread_names(&s, "cl-lock");
    baton_client *a = client(), *b = client();
    for (int i = 0; i < MASTERS; i++) {
        const char *name = s.names[i];
        baton_lock *la, *lb;
        cr_assert(eq(int, baton_lock_open(a, name, &la), BATON_OK));
        cr_assert(eq(int, baton_lock_open(b, name, &lb), BATON_OK));
        cr_assert(eq(int, baton_lock_try_acquire(la, 0, BATON_LEASE_WATCHDOG), BATON_OK), "%s: %s",
                  name, baton_client_errmsg(a));
        cr_assert(eq(int, baton_lock_acquire(la, BATON_LEASE_WATCHDOG), BATON_OK), "reentry");
        int64_t holds = 0, ttl = 0;
        cr_assert(eq(int, baton_lock_hold_count(la, &holds), BATON_OK));
        cr_assert(eq(i64, holds, 2));
        cr_assert(eq(int, baton_lock_remaining_ttl(la, &ttl), BATON_OK));
        cr_assert(gt(i64, ttl, 20000));
        cr_assert(le(i64, ttl, 30000));
        /* on the master that serves the name, nowhere else */
        redisContext *m = th_redis_port(s.masters[i]);
        cr_assert(eq(i64, th_cmd_int(m, "HLEN %s", name), 1));
        bool locked = false, mine = true;
        cr_assert(eq(int, baton_lock_is_locked(lb, &locked), BATON_OK));
        cr_assert(locked);
        cr_assert(eq(int, baton_lock_is_held_by_current_thread(lb, &mine), BATON_OK));
        cr_assert(not(mine));
        /* another client times out, leaving no subscription behind */
        int64_t t0 = th_ms();
        cr_assert(eq(int, baton_lock_try_acquire(lb, 300, 5000), BATON_ETIMEDOUT));
        int64_t took = th_ms() - t0;
        cr_assert(ge(i64, took, 290));
        cr_assert(le(i64, took, 1300), "%lld ms", (long long)took);
        cr_assert(eq(int, baton_lock_release(lb), BATON_ENOTHELD));
        cr_assert(eq(int, baton_lock_release(la), BATON_OK));
        cr_assert(eq(int, baton_lock_hold_count(la, &holds), BATON_OK));
        cr_assert(eq(i64, holds, 1));
        cr_assert(eq(int, baton_lock_release(la), BATON_OK));
        cr_assert(eq(i64, th_cmd_int(m, "EXISTS %s", name), 0));
        cr_assert(eq(i64, subscribers(m, "redisson_lock__channel:{%s}", name), 0),
                  "no subscription left");
        /* the other client takes it at once now */
        cr_assert(eq(int, baton_lock_try_acquire(lb, 0, 5000), BATON_OK));
        cr_assert(eq(int, baton_lock_force_release(la, &locked), BATON_OK));
        cr_assert(locked);
        cr_assert(eq(i64, th_cmd_int(m, "EXISTS %s", name), 0));
        redisFree(m);
        baton_lock_close(la);
        baton_lock_close(lb);
    }
    baton_client_close(a);
    baton_client_close(b);
}

/* One loop thread, asynchronous acquisitions on every master: the fibers wait for their
 * sockets and, with two connections per node, for a connection of the right node's pool. */
#define ASYNC_PER_NAME 20

typedef struct async_run {
    baton_lock *locks[MASTERS];
    redisContext *raw[MASTERS]; /* each name's master: the non-atomic counter */
    const char *names[MASTERS];
    int done, failed;
    char first_error[200];
    baton_client *c;
} async_run;

typedef struct async_req {
    async_run *run;
    int i; /* the name */
    baton_owner *o;
} async_req;

static void async_failed(async_run *run, const char *what, int rc)
{
    if (run->failed++ == 0)
        snprintf(run->first_error, sizeof run->first_error, "%s: %s: %s", what, baton_err_name(rc),
                 baton_client_errmsg(run->c));
}

static void async_released(void *h, baton_owner *o, int rc, void *arg)
{
    (void)h, (void)o;
    async_req *q = arg;
    if (rc != BATON_OK)
        async_failed(q->run, "release", rc);
    q->run->done++;
}

static void async_acquired(void *h, baton_owner *o, int rc, void *arg)
{
    (void)h;
    async_req *q = arg;
    async_run *run = q->run;
    if (rc != BATON_OK) {
        async_failed(run, "acquire", rc);
        run->done++;
        return;
    }
    char key[160];
    snprintf(key, sizeof key, "{%s}:count", run->names[q->i]);
    long long v = th_cmd_int(run->raw[q->i], "GET %s", key);
    freeReplyObject(th_cmd(run->raw[q->i], "SET %s %lld", key, v + 1));
    rc = baton_lock_release_async(run->locks[q->i], o, async_released, q, NULL);
    if (rc != BATON_OK) {
        async_failed(run, "release start", rc);
        run->done++;
    }
}

Test(cluster, async_acquisitions_from_one_loop_on_every_master, .timeout = 60)
{
    spread s;
    spread_names(&s, "cl-async");
    baton_options o;
    baton_options_init(&o);
    o.url = cluster.url;
    o.connect_timeout_ms = 1000;
    o.command_timeout_ms = 2000;
    o.pool_size = 2; /* most of the operations wait for a connection of their node */
    static async_run run;
    memset(&run, 0, sizeof run);
    cr_assert(eq(int, baton_client_open(&o, &run.c), BATON_OK), "%s", baton_open_errmsg());
    for (int i = 0; i < MASTERS; i++) {
        run.names[i] = s.names[i];
        run.raw[i] = th_redis_port(s.masters[i]);
        cr_assert(eq(int, baton_lock_open(run.c, s.names[i], &run.locks[i]), BATON_OK));
    }
    static async_req reqs[MASTERS * ASYNC_PER_NAME];
    for (int k = 0; k < MASTERS * ASYNC_PER_NAME; k++) {
        reqs[k] = (async_req){&run, k % MASTERS, NULL};
        cr_assert(eq(int, baton_owner_new(run.c, &reqs[k].o), BATON_OK));
        cr_assert(eq(int,
                     baton_lock_acquire_async(run.locks[k % MASTERS], reqs[k].o, 20000,
                                              BATON_LEASE_WATCHDOG, async_acquired, &reqs[k], NULL),
                     BATON_OK));
    }
    int fd;
    cr_assert(eq(int, baton_client_async_fd(run.c, &fd), BATON_OK));
    int64_t t0 = th_ms();
    while (run.done < MASTERS * ASYNC_PER_NAME) {
        cr_assert(lt(i64, th_ms() - t0, 40000), "%d of %d done, %d failed: %s", run.done,
                  MASTERS * ASYNC_PER_NAME, run.failed, run.first_error);
        struct pollfd p = {fd, POLLIN, 0};
        poll(&p, 1, 50);
        baton_client_process(run.c);
    }
    cr_assert(eq(int, run.failed, 0), "%s", run.first_error);
    for (int i = 0; i < MASTERS; i++) {
        cr_assert(eq(i64, th_cmd_int(run.raw[i], "GET {%s}:count", s.names[i]), ASYNC_PER_NAME),
                  "%s: the counter is exact", s.names[i]);
        cr_assert(eq(i64, th_cmd_int(run.raw[i], "EXISTS %s", s.names[i]), 0), "released");
        freeReplyObject(th_cmd(run.raw[i], "DEL {%s}:count", s.names[i]));
        baton_lock_close(run.locks[i]);
        redisFree(run.raw[i]);
    }
    fprintf(stderr,
            "cluster: %d async acquisitions over %d masters from one loop, pool of 2: %lld ms\n",
            MASTERS * ASYNC_PER_NAME, MASTERS, (long long)(th_ms() - t0));
    for (int k = 0; k < MASTERS * ASYNC_PER_NAME; k++)
        baton_owner_free(reqs[k].o);
    baton_client_close(run.c);
}

Test(cluster, fencing_tokens_rise_on_every_master)
{
    spread s;
    spread_names(&s, "cl-fence");
    baton_client *c = client();
    for (int i = 0; i < MASTERS; i++) {
        baton_lock *l;
        cr_assert(eq(int, baton_lock_open(c, s.names[i], &l), BATON_OK));
        int64_t prev = 0;
        for (int k = 0; k < 5; k++) {
            int64_t t = 0, again = 0;
            cr_assert(eq(int, baton_lock_acquire(l, 10000), BATON_OK));
            cr_assert(eq(int, baton_lock_fencing_token(l, &t), BATON_OK));
            cr_assert(gt(i64, t, prev), "tokens rise");
            cr_assert(eq(int, baton_lock_acquire(l, 10000), BATON_OK));
            cr_assert(eq(int, baton_lock_fencing_token(l, &again), BATON_OK));
            cr_assert(eq(i64, again, t), "re-entry keeps the token");
            redisContext *m = th_redis_port(s.masters[i]);
            cr_assert(eq(i64, th_cmd_int(m, "GET redisson_lock_token:{%s}", s.names[i]), t),
                      "the counter lives on the name's master");
            redisFree(m);
            cr_assert(eq(int, baton_lock_release(l), BATON_OK));
            cr_assert(eq(int, baton_lock_release(l), BATON_OK));
            prev = t;
        }
        baton_lock_close(l);
    }
    baton_client_close(c);
}

/* A client seeded with one node only (not the name's master): what it knows of the rest it
 * learns from that node. */
static baton_client *client_seeded_off(int master)
{
    int seed = -1;
    for (int i = 0; i < cluster.n && seed < 0; i++)
        if (cluster.ports[i] != master)
            seed = cluster.ports[i];
    char url[64];
    snprintf(url, sizeof url, "redis+cluster://127.0.0.1:%d", seed);
    return client_url(url);
}

Test(cluster, a_release_through_another_node_wakes_a_waiter_within_100ms)
{
    spread s;
    spread_names(&s, "cl-wake");
    for (int i = 0; i < MASTERS; i++) {
        /* the holder seeded with the first node that is not the name's master, the waiter
         * with the last one */
        baton_client *h = client_seeded_off(s.masters[i]);
        char url[64];
        int seed = -1;
        for (int k = cluster.n - 1; k >= 0 && seed < 0; k--)
            if (cluster.ports[k] != s.masters[i])
                seed = cluster.ports[k];
        snprintf(url, sizeof url, "redis+cluster://127.0.0.1:%d", seed);
        baton_client *wc = client_url(url);
        baton_lock *hl, *wl;
        cr_assert(eq(int, baton_lock_open(h, s.names[i], &hl), BATON_OK));
        cr_assert(eq(int, baton_lock_open(wc, s.names[i], &wl), BATON_OK));
        cr_assert(eq(int, baton_lock_acquire(hl, 30000), BATON_OK), "%s", baton_client_errmsg(h));
        waiter w = {.l = wl, .wait_ms = 10000};
        pthread_t t;
        pthread_create(&t, NULL, waiter_main, &w);
        th_sleep_ms(400); /* waiting, subscribed */
        redisContext *m = th_redis_port(s.masters[i]);
        cr_assert(eq(i64, subscribers(m, "redisson_lock__channel:{%s}", s.names[i]), 1),
                  "the waiter listens on the name's master");
        redisFree(m);
        int64_t t0 = th_ms();
        cr_assert(eq(int, baton_lock_release(hl), BATON_OK));
        pthread_join(t, NULL);
        cr_assert(eq(int, w.rc, BATON_OK), "%s", baton_client_errmsg(wc));
        cr_assert(le(i64, w.at_ms - t0, 100), "master %d: woken %lld ms after the release",
                  s.masters[i], (long long)(w.at_ms - t0));
        baton_lock_close(hl);
        baton_lock_close(wl);
        baton_client_close(h);
        baton_client_close(wc);
    }
}

Test(cluster, redissons_spublish_after_a_delete_by_hand_wakes_a_waiter)
{
    spread s;
    spread_names(&s, "cl-spub");
    baton_client *c = client();
    for (int i = 0; i < MASTERS; i++) {
        const char *name = s.names[i];
        /* a holder of another client (a Java one, say), with a long lease */
        redisContext *m = th_redis_port(s.masters[i]);
        freeReplyObject(th_cmd(m, "HSET %s 00000000-0000-0000-0000-000000000000:1 1", name));
        freeReplyObject(th_cmd(m, "PEXPIRE %s 30000", name));
        baton_lock *l;
        cr_assert(eq(int, baton_lock_open(c, name, &l), BATON_OK));
        waiter w = {.l = l, .wait_ms = 20000};
        pthread_t t;
        pthread_create(&t, NULL, waiter_main, &w);
        th_sleep_ms(400);
        cr_assert(eq(int, w.at_ms, 0), "still waiting");
        /* what Redisson 3.29+ sends on a Redis 7 cluster when it unlocks */
        freeReplyObject(th_cmd(m, "DEL %s", name));
        int64_t t0 = th_ms();
        freeReplyObject(th_cmd(m, "SPUBLISH redisson_lock__channel:{%s} 0", name));
        pthread_join(t, NULL);
        cr_assert(eq(int, w.rc, BATON_OK), "%s", baton_client_errmsg(c));
        cr_assert(le(i64, w.at_ms - t0, 100), "woken %lld ms after SPUBLISH",
                  (long long)(w.at_ms - t0));
        redisFree(m);
        baton_lock_close(l);
    }
    baton_client_close(c);
}

Test(cluster, fair_lock_serves_its_queue_in_order_on_every_master)
{
    spread s;
    spread_names(&s, "cl-fair");
    baton_client *c = client(), *h = client();
    for (int i = 0; i < MASTERS; i++) {
        baton_lock *hl, *wl;
        cr_assert(eq(int, baton_fairlock_open(h, s.names[i], &hl), BATON_OK));
        cr_assert(eq(int, baton_fairlock_open(c, s.names[i], &wl), BATON_OK));
        cr_assert(eq(int, baton_lock_acquire(hl, 30000), BATON_OK), "%s", baton_client_errmsg(h));
        atomic_int order = 0;
        waiter w[4];
        pthread_t t[4];
        for (int k = 0; k < 4; k++) {
            w[k] = (waiter){.l = wl, .wait_ms = 20000, .order = &order, .hold_ms = 20};
            pthread_create(&t[k], NULL, waiter_main, &w[k]);
            th_sleep_ms(150); /* queued one after another */
        }
        redisContext *m = th_redis_port(s.masters[i]);
        cr_assert(eq(i64, th_cmd_int(m, "LLEN redisson_lock_queue:{%s}", s.names[i]), 4),
                  "the queue lives on the name's master");
        redisFree(m);
        /* wait 0 never joins a queue */
        baton_lock *other;
        cr_assert(eq(int, baton_fairlock_open(h, s.names[i], &other), BATON_OK));
        int64_t t0 = th_ms();
        cr_assert(eq(int, baton_lock_release(hl), BATON_OK));
        int64_t last = 0;
        for (int k = 0; k < 4; k++) {
            pthread_join(t[k], NULL);
            cr_assert(eq(int, w[k].rc, BATON_OK));
            cr_assert(eq(int, w[k].rank, k), "master %d: waiter %d came %d", s.masters[i], k,
                      w[k].rank);
            if (k > 0)
                cr_assert(gt(i64, w[k].token, w[k - 1].token));
            if (w[k].at_ms > last)
                last = w[k].at_ms;
        }
        cr_assert(le(i64, last - t0, 4 * 20 + 4 * 100 + 500), "the queue took %lld ms",
                  (long long)(last - t0));
        baton_lock_close(other);
        baton_lock_close(hl);
        baton_lock_close(wl);
    }
    baton_client_close(c);
    baton_client_close(h);
}

Test(cluster, a_multi_lock_across_three_masters_is_all_or_none)
{
    spread s;
    spread_names(&s, "cl-multi");
    baton_client *c = client(), *o = client();
    baton_lock *m[MASTERS], *group;
    for (int i = 0; i < MASTERS; i++)
        cr_assert(eq(int, baton_lock_open(c, s.names[i], &m[i]), BATON_OK));
    /* members given in reverse: the canonical order does not care */
    baton_lock *rev[MASTERS] = {m[2], m[1], m[0]};
    cr_assert(eq(int, baton_multilock_open(rev, MASTERS, &group), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(group, BATON_LEASE_WATCHDOG), BATON_OK), "%s",
              baton_client_errmsg(c));
    for (int i = 0; i < MASTERS; i++) {
        redisContext *r = th_redis_port(s.masters[i]);
        cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s", s.names[i]), 1), "member %d", i);
        redisFree(r);
    }
    bool all = false;
    cr_assert(eq(int, baton_lock_is_held_by_current_thread(group, &all), BATON_OK));
    cr_assert(all);
    cr_assert(eq(int, baton_lock_release(group), BATON_OK));
    for (int i = 0; i < MASTERS; i++)
        cr_assert(eq(i64, exists_on_master("%s", s.names[i]), 0), "member %d released", i);

    /* one member held elsewhere: the group times out and leaves no member behind */
    baton_lock *blocker;
    cr_assert(eq(int, baton_lock_open(o, s.names[1], &blocker), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(blocker, 30000), BATON_OK));
    int64_t t0 = th_ms();
    cr_assert(eq(int, baton_lock_try_acquire(group, 400, 10000), BATON_ETIMEDOUT));
    cr_assert(le(i64, th_ms() - t0, 1500));
    cr_assert(eq(i64, exists_on_master("%s", s.names[0]), 0), "rolled back");
    cr_assert(eq(i64, exists_on_master("%s", s.names[2]), 0), "rolled back");
    /* and a group waiting on it is woken by its release on the other master */
    waiter w = {.l = group, .wait_ms = 10000};
    pthread_t t;
    pthread_create(&t, NULL, waiter_main, &w);
    th_sleep_ms(300);
    t0 = th_ms();
    cr_assert(eq(int, baton_lock_release(blocker), BATON_OK));
    pthread_join(t, NULL);
    cr_assert(eq(int, w.rc, BATON_OK), "%s", baton_client_errmsg(c));
    cr_assert(le(i64, w.at_ms - t0, 300), "woken %lld ms after", (long long)(w.at_ms - t0));
    for (int i = 0; i < MASTERS; i++)
        cr_assert(eq(i64, exists_on_master("%s", s.names[i]), 0));
    baton_lock_close(blocker);
    baton_lock_close(group);
    for (int i = 0; i < MASTERS; i++)
        baton_lock_close(m[i]);
    baton_client_close(c);
    baton_client_close(o);
}

/* A call on its own thread that notes when it returned (a latch, semaphore or permit
 * waiter; a lock's is waiter above, which also releases). */
typedef struct timed {
    int (*fn)(struct timed *);
    void *h; /* the handle */
    int rc;
    int64_t at_ms;
    char id[BATON_PERMIT_ID_SIZE];
} timed;

static void *timed_main(void *arg)
{
    timed *t = arg;
    t->rc = t->fn(t);
    t->at_ms = th_ms();
    return NULL;
}

static int latch_await_20s(timed *t)
{
    return baton_latch_await(t->h, 20000);
}

static int semaphore_take_20s(timed *t)
{
    return baton_semaphore_try_acquire(t->h, 1, 20000);
}

static int permit_take_20s(timed *t)
{
    return baton_permits_try_acquire(t->h, 20000, 10000, t->id);
}

Test(cluster, latch_counts_down_and_wakes_waiters_on_every_master)
{
    spread s;
    spread_names(&s, "cl-latch");
    baton_client *c = client(), *o = client();
    for (int i = 0; i < MASTERS; i++) {
        baton_latch *l, *lo;
        cr_assert(eq(int, baton_latch_open(c, s.names[i], &l), BATON_OK));
        cr_assert(eq(int, baton_latch_open(o, s.names[i], &lo), BATON_OK));
        bool set = false;
        cr_assert(eq(int, baton_latch_try_set_count(l, 2, &set), BATON_OK), "%s",
                  baton_client_errmsg(c));
        cr_assert(set);
        cr_assert(eq(int, baton_latch_try_set_count(lo, 5, &set), BATON_OK));
        cr_assert(not(set));
        redisContext *m = th_redis_port(s.masters[i]);
        cr_assert(eq(i64, th_cmd_int(m, "GET %s", s.names[i]), 2));
        int64_t t0 = th_ms();
        cr_assert(eq(int, baton_latch_await(lo, 300), BATON_ETIMEDOUT));
        cr_assert(ge(i64, th_ms() - t0, 290));
        timed w[3];
        pthread_t t[3];
        for (int k = 0; k < 3; k++) {
            w[k] = (timed){.fn = latch_await_20s, .h = k % 2 ? l : lo};
            pthread_create(&t[k], NULL, timed_main, &w[k]);
        }
        th_sleep_ms(300);
        cr_assert(eq(int, baton_latch_count_down(l), BATON_OK));
        int64_t count = -1;
        cr_assert(eq(int, baton_latch_count(lo, &count), BATON_OK));
        cr_assert(eq(i64, count, 1));
        t0 = th_ms();
        cr_assert(eq(int, baton_latch_count_down(lo), BATON_OK));
        for (int k = 0; k < 3; k++) {
            pthread_join(t[k], NULL);
            cr_assert(eq(int, w[k].rc, BATON_OK));
            cr_assert(le(i64, w[k].at_ms - t0, 100), "waiter %d: %lld ms", k,
                      (long long)(w[k].at_ms - t0));
        }
        cr_assert(eq(i64, th_cmd_int(m, "EXISTS %s", s.names[i]), 0));
        cr_assert(eq(int, baton_latch_count_down(l), BATON_OK), "an open latch stays open");
        bool existed = true;
        cr_assert(eq(int, baton_latch_delete(l, &existed), BATON_OK));
        cr_assert(not(existed));
        redisFree(m);
        baton_latch_close(l);
        baton_latch_close(lo);
    }
    baton_client_close(c);
    baton_client_close(o);
}

Test(cluster, semaphore_caps_and_wakes_on_every_master)
{
    spread s;
    spread_names(&s, "cl-sem");
    baton_client *c = client(), *o = client();
    for (int i = 0; i < MASTERS; i++) {
        baton_semaphore *a, *b;
        cr_assert(eq(int, baton_semaphore_open(c, s.names[i], &a), BATON_OK));
        cr_assert(eq(int, baton_semaphore_open(o, s.names[i], &b), BATON_OK));
        bool set = false;
        cr_assert(eq(int, baton_semaphore_try_set_permits(a, 2, &set), BATON_OK), "%s",
                  baton_client_errmsg(c));
        cr_assert(set);
        cr_assert(eq(int, baton_semaphore_acquire(a, 2), BATON_OK));
        int64_t t0 = th_ms();
        cr_assert(eq(int, baton_semaphore_try_acquire(b, 1, 300), BATON_ETIMEDOUT));
        cr_assert(ge(i64, th_ms() - t0, 290));
        cr_assert(le(i64, th_ms() - t0, 1300));
        timed w = {.fn = semaphore_take_20s, .h = b};
        pthread_t t;
        pthread_create(&t, NULL, timed_main, &w);
        th_sleep_ms(300);
        t0 = th_ms();
        cr_assert(eq(int, baton_semaphore_release(a, 1), BATON_OK));
        pthread_join(t, NULL);
        cr_assert(eq(int, w.rc, BATON_OK));
        cr_assert(le(i64, w.at_ms - t0, 100), "woken %lld ms after", (long long)(w.at_ms - t0));
        int64_t avail = -1;
        cr_assert(eq(int, baton_semaphore_available(b, &avail), BATON_OK));
        cr_assert(eq(i64, avail, 0));
        cr_assert(eq(int, baton_semaphore_release(b, 2), BATON_OK));
        redisContext *m = th_redis_port(s.masters[i]);
        cr_assert(eq(i64, th_cmd_int(m, "GET %s", s.names[i]), 2), "on the name's master");
        redisFree(m);
        int64_t drained = 0;
        cr_assert(eq(int, baton_semaphore_drain(a, &drained), BATON_OK));
        cr_assert(eq(i64, drained, 2));
        bool existed = false;
        cr_assert(eq(int, baton_semaphore_delete(a, &existed), BATON_OK));
        cr_assert(existed);
        baton_semaphore_close(a);
        baton_semaphore_close(b);
    }
    baton_client_close(c);
    baton_client_close(o);
}

Test(cluster, permit_leases_on_every_master)
{
    spread s;
    spread_names(&s, "cl-permits");
    baton_client *c = client(), *o = client();
    for (int i = 0; i < MASTERS; i++) {
        baton_permits *a, *b;
        cr_assert(eq(int, baton_permits_open(c, s.names[i], &a), BATON_OK));
        cr_assert(eq(int, baton_permits_open(o, s.names[i], &b), BATON_OK));
        bool set = false;
        cr_assert(eq(int, baton_permits_try_set_permits(a, 1, &set), BATON_OK), "%s",
                  baton_client_errmsg(c));
        cr_assert(set);
        char id[BATON_PERMIT_ID_SIZE], none[BATON_PERMIT_ID_SIZE];
        cr_assert(eq(int, baton_permits_acquire(a, BATON_LEASE_WATCHDOG, id), BATON_OK));
        cr_assert(eq(sz, strlen(id), BATON_PERMIT_ID_LEN));
        redisContext *m = th_redis_port(s.masters[i]);
        cr_assert(eq(i64, th_cmd_int(m, "ZCARD {%s}:timeout", s.names[i]), 1),
                  "the lease lives on the name's master");
        int64_t t0 = th_ms();
        cr_assert(eq(int, baton_permits_try_acquire(b, 300, 10000, none), BATON_ETIMEDOUT));
        cr_assert(ge(i64, th_ms() - t0, 290));
        timed w = {.fn = permit_take_20s, .h = b};
        pthread_t t;
        pthread_create(&t, NULL, timed_main, &w);
        th_sleep_ms(300);
        t0 = th_ms();
        cr_assert(eq(int, baton_permits_release(a, id), BATON_OK));
        pthread_join(t, NULL);
        cr_assert(eq(int, w.rc, BATON_OK), "%s", baton_client_errmsg(o));
        cr_assert(le(i64, w.at_ms - t0, 100), "woken %lld ms after", (long long)(w.at_ms - t0));
        int64_t avail = -1, held = -1;
        cr_assert(eq(int, baton_permits_available(a, &avail, &held), BATON_OK));
        cr_assert(eq(i64, avail, 0));
        cr_assert(eq(i64, held, 1));
        cr_assert(eq(int, baton_permits_release(a, id), BATON_ENOTHELD), "released once");
        cr_assert(eq(int, baton_permits_release(a, w.id), BATON_OK), "any handle, by id");
        cr_assert(eq(int, baton_permits_available(b, &avail, &held), BATON_OK));
        cr_assert(eq(i64, avail, 1));
        cr_assert(eq(i64, held, 0));
        bool existed = false;
        cr_assert(eq(int, baton_permits_delete(a, &existed), BATON_OK));
        cr_assert(existed);
        redisFree(m);
        baton_permits_close(a);
        baton_permits_close(b);
    }
    baton_client_close(c);
    baton_client_close(o);
}

Test(cluster, rwlock_readers_share_and_a_writer_waits_on_every_master)
{
    spread s;
    spread_names(&s, "cl-rw");
    baton_client *c = client(), *o = client();
    for (int i = 0; i < MASTERS; i++) {
        baton_rwlock *a, *b;
        cr_assert(eq(int, baton_rwlock_open(c, s.names[i], &a), BATON_OK));
        cr_assert(eq(int, baton_rwlock_open(o, s.names[i], &b), BATON_OK));
        cr_assert(eq(int, baton_lock_acquire(baton_rwlock_read(a), 30000), BATON_OK), "%s",
                  baton_client_errmsg(c));
        cr_assert(eq(int, baton_lock_try_acquire(baton_rwlock_read(b), 0, 30000), BATON_OK),
                  "readers share");
        redisContext *m = th_redis_port(s.masters[i]);
        redisReply *mode = th_cmd(m, "HGET %s mode", s.names[i]);
        cr_assert(eq(str, mode->str, "read"));
        freeReplyObject(mode);
        cr_assert(eq(int, baton_lock_try_acquire(baton_rwlock_write(b), 0, 30000), BATON_ENOTSUP),
                  "no upgrade");
        cr_assert(eq(int, baton_lock_release(baton_rwlock_read(b)), BATON_OK));
        /* a writer waits for the reader and is woken by its release */
        waiter w = {.l = baton_rwlock_write(b), .wait_ms = 10000, .hold_ms = 300};
        pthread_t t;
        pthread_create(&t, NULL, waiter_main, &w);
        th_sleep_ms(300);
        int64_t t0 = th_ms();
        cr_assert(eq(int, baton_lock_release(baton_rwlock_read(a)), BATON_OK));
        th_sleep_ms(50);
        cr_assert(gt(i64, w.at_ms, 0), "the writer has it");
        cr_assert(le(i64, w.at_ms - t0, 100), "woken %lld ms after", (long long)(w.at_ms - t0));
        mode = th_cmd(m, "HGET %s mode", s.names[i]);
        cr_assert(eq(str, mode->str, "write"));
        freeReplyObject(mode);
        cr_assert(eq(int, baton_lock_try_acquire(baton_rwlock_read(a), 0, 30000), BATON_ETIMEDOUT),
                  "the writer excludes readers");
        pthread_join(t, NULL);
        cr_assert(eq(int, w.rc, BATON_OK));
        cr_assert(eq(i64, th_cmd_int(m, "EXISTS %s", s.names[i]), 0));
        redisFree(m);
        baton_rwlock_close(a);
        baton_rwlock_close(b);
    }
    baton_client_close(c);
    baton_client_close(o);
}

static baton_client *client_watchdog(int64_t watchdog_ms)
{
    baton_options o;
    baton_options_init(&o);
    o.url = cluster.url;
    o.connect_timeout_ms = 1000;
    o.command_timeout_ms = 2000;
    o.watchdog_ms = watchdog_ms;
    baton_client *c = NULL;
    cr_assert(eq(int, baton_client_open(&o, &c), BATON_OK), "%s", baton_open_errmsg());
    return c;
}

Test(cluster, a_hold_deleted_on_its_master_is_reported_lost)
{
    spread s;
    spread_names(&s, "cl-lost");
    baton_client *c = client_watchdog(1500); /* renewed every 500 ms */
    baton_lock *l[MASTERS];
    th_lost_probe probe[MASTERS];
    int fd[MASTERS];
    for (int i = 0; i < MASTERS; i++) {
        memset(&probe[i], 0, sizeof probe[i]);
        cr_assert(eq(int, baton_lock_open(c, s.names[i], &l[i]), BATON_OK));
        cr_assert(
            eq(int, baton_lock_set_lost_handler(l[i], th_lost_probe_fn, &probe[i]), BATON_OK));
        cr_assert(eq(int, baton_lock_acquire(l[i], BATON_LEASE_WATCHDOG), BATON_OK));
        cr_assert(eq(int, baton_lock_lost_fd(l[i], &fd[i]), BATON_OK));
    }
    /* the middle one is deleted by hand on its master; the others stay */
    redisContext *m = th_redis_port(s.masters[1]);
    int64_t t0 = th_ms();
    freeReplyObject(th_cmd(m, "DEL %s", s.names[1]));
    redisFree(m);
    struct pollfd p = {fd[1], POLLIN, 0};
    cr_assert(eq(int, poll(&p, 1, 3000), 1), "no loss reported");
    int64_t took = th_ms() - t0;
    cr_assert(le(i64, took, 500 + 500), "reported after %lld ms (a renewal period)",
              (long long)took);
    for (int64_t w = th_ms(); atomic_load(&probe[1].calls) == 0 && th_ms() - w < 1000;)
        th_sleep_ms(10);
    cr_assert(eq(int, atomic_load(&probe[1].calls), 1));
    struct pollfd others[2] = {{fd[0], POLLIN, 0}, {fd[2], POLLIN, 0}};
    cr_assert(eq(int, poll(others, 2, 1000), 0), "the other holds are kept");
    cr_assert(eq(int, atomic_load(&probe[0].calls) + atomic_load(&probe[2].calls), 0));
    cr_assert(eq(int, baton_lock_release(l[1]), BATON_ENOTHELD));
    baton_stats st;
    baton_client_stats(c, &st);
    cr_assert(eq(u64, st.holds_lost_deleted, 1));
    for (int i = 0; i < MASTERS; i++) {
        if (i != 1)
            cr_assert(eq(int, baton_lock_release(l[i]), BATON_OK));
        baton_lock_close(l[i]);
    }
    baton_client_close(c);
}

Test(cluster, watchdog_holds_on_every_master_last_three_leases, .timeout = 60)
{
    /* two holds per master, in different slots, plus a fair lock, a read lock and a permit
     * lease: renewed per slot on each master */
    int masters[MASTERS];
    cr_assert(eq(int, th_cluster_masters(&cluster, masters, MASTERS), MASTERS));
    baton_client *c = client_watchdog(1500);
    enum { N = 2 * MASTERS };
    char names[N][96];
    baton_lock *l[N];
    int fd[N];
    for (int i = 0; i < N; i++) {
        th_cluster_name_on(&cluster, "cl-wd", masters[i % MASTERS], names[i], sizeof names[i]);
        cr_assert(eq(int,
                     i < MASTERS ? baton_lock_open(c, names[i], &l[i])
                                 : baton_fairlock_open(c, names[i], &l[i]),
                     BATON_OK));
        cr_assert(eq(int, baton_lock_acquire(l[i], BATON_LEASE_WATCHDOG), BATON_OK), "%s: %s",
                  names[i], baton_client_errmsg(c));
        cr_assert(eq(int, baton_lock_lost_fd(l[i], &fd[i]), BATON_OK));
    }
    for (int i = 0; i < N; i++)
        for (int k = i + 1; k < N; k++)
            cr_assert(ne(int, th_cluster_slot(names[i]), th_cluster_slot(names[k])));
    char pname[96], rname[96];
    th_cluster_name_on(&cluster, "cl-wd-permits", masters[0], pname, sizeof pname);
    th_cluster_name_on(&cluster, "cl-wd-rw", masters[2], rname, sizeof rname);
    baton_permits *p;
    baton_rwlock *rw;
    char id[BATON_PERMIT_ID_SIZE];
    cr_assert(eq(int, baton_permits_open(c, pname, &p), BATON_OK));
    cr_assert(eq(int, baton_permits_try_set_permits(p, 1, NULL), BATON_OK));
    cr_assert(eq(int, baton_permits_acquire(p, BATON_LEASE_WATCHDOG, id), BATON_OK));
    cr_assert(eq(int, baton_rwlock_open(c, rname, &rw), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(baton_rwlock_read(rw), BATON_LEASE_WATCHDOG), BATON_OK));
    int pfd;
    cr_assert(eq(int, baton_permits_lost_fd(p, &pfd), BATON_OK));

    struct pollfd all[N + 1];
    for (int i = 0; i < N; i++)
        all[i] = (struct pollfd){fd[i], POLLIN, 0};
    all[N] = (struct pollfd){pfd, POLLIN, 0};
    cr_assert(eq(int, poll(all, N + 1, 3 * 1500 + 500), 0), "a hold was reported lost");
    for (int i = 0; i < N; i++) {
        redisContext *m = master_conn(names[i]);
        long long ttl = th_cmd_int(m, "PTTL %s", names[i]);
        cr_assert(gt(i64, ttl, 500), "%s renewed: %lld ms left", names[i], ttl);
        redisFree(m);
        bool mine = false;
        cr_assert(eq(int, baton_lock_is_held_by_current_thread(l[i], &mine), BATON_OK));
        cr_assert(mine);
    }
    redisContext *m = master_conn(rname);
    cr_assert(gt(i64, th_cmd_int(m, "PTTL %s", rname), 500));
    redisFree(m);
    baton_stats st;
    baton_client_stats(c, &st);
    cr_assert(eq(u64, st.holds_lost_expired + st.holds_lost_deleted, 0));
    cr_assert(eq(u64, st.renewals_failed, 0));
    cr_assert(ge(u64, st.renewals_sent, (uint64_t)(N + 2) * 4), "renewals: %llu",
              (unsigned long long)st.renewals_sent);
    for (int i = 0; i < N; i++) {
        cr_assert(eq(int, baton_lock_release(l[i]), BATON_OK), "%s", names[i]);
        baton_lock_close(l[i]);
    }
    cr_assert(eq(int, baton_permits_release(p, id), BATON_OK));
    cr_assert(eq(int, baton_lock_release(baton_rwlock_read(rw)), BATON_OK));
    baton_permits_close(p);
    baton_rwlock_close(rw);
    baton_client_close(c);
}

typedef struct churn {
    baton_client *c;
    const char (*names)[96];
    const char (*sem_names)[96];
    int n;
    atomic_bool stop;
    atomic_int ok, errors;
    char last_error[256];
} churn;

static void *churn_main(void *arg)
{
    churn *k = arg;
    baton_lock *l[MASTERS];
    baton_semaphore *sem[MASTERS];
    for (int i = 0; i < k->n; i++) {
        baton_lock_open(k->c, k->names[i], &l[i]);
        baton_semaphore_open(k->c, k->sem_names[i], &sem[i]);
    }
    for (int round = 0; !k->stop; round++) {
        int i = round % k->n;
        int rc = baton_lock_try_acquire(l[i], 1000, 10000);
        if (rc == BATON_OK)
            rc = baton_lock_release(l[i]);
        if (rc == BATON_OK)
            rc = baton_semaphore_release(sem[i], 1);
        if (rc == BATON_OK)
            rc = baton_semaphore_try_acquire(sem[i], 1, 1000);
        if (rc == BATON_OK)
            k->ok++;
        else {
            k->errors++;
            snprintf(k->last_error, sizeof k->last_error, "%s: %s", baton_err_name(rc),
                     baton_client_errmsg(k->c));
        }
    }
    for (int i = 0; i < k->n; i++) {
        baton_lock_close(l[i]);
        baton_semaphore_close(sem[i]);
    }
    return NULL;
}

Test(cluster, script_flush_on_one_node_mid_run_costs_nothing)
{
    spread s;
    spread_names(&s, "cl-flush");
    baton_client *c = client_watchdog(1500);
    /* a watchdog hold on the master whose scripts go */
    char held[96];
    th_cluster_name_on(&cluster, "cl-flush-held", s.masters[1], held, sizeof held);
    baton_lock *h;
    cr_assert(eq(int, baton_lock_open(c, held, &h), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(h, BATON_LEASE_WATCHDOG), BATON_OK));
    int fd;
    baton_lock_lost_fd(h, &fd);
    spread sems;
    spread_names(&sems, "cl-flush-sem");
    churn k = {.c = c,
               .names = (const char(*)[96])s.names,
               .sem_names = (const char(*)[96])sems.names,
               .n = MASTERS};
    pthread_t t;
    pthread_create(&t, NULL, churn_main, &k);
    th_sleep_ms(500);
    int before = k.ok;
    if (before <= 10) {
        k.stop = true;
        pthread_join(t, NULL);
    }
    cr_assert(gt(int, before, 10), "the run goes (%d errors: %s)", (int)k.errors, k.last_error);
    redisContext *m = th_redis_port(s.masters[1]);
    freeReplyObject(th_cmd(m, "SCRIPT FLUSH"));
    th_sleep_ms(1500); /* the run and three renewals of the hold */
    int after = k.ok;
    k.stop = true;
    pthread_join(t, NULL);
    cr_assert(eq(int, k.errors, 0), "%d errors, last %s", (int)k.errors, k.last_error);
    cr_assert(gt(int, after, before + 30), "the run went on: %d then %d", before, after);
    struct pollfd p = {fd, POLLIN, 0};
    cr_assert(eq(int, poll(&p, 1, 0), 0), "the renewal was reloaded, the hold kept");
    cr_assert(gt(i64, th_cmd_int(m, "PTTL %s", held), 500));
    redisFree(m);
    baton_stats st;
    baton_client_stats(c, &st);
    cr_assert(ge(u64, st.noscript_reloads, 1), "the node said NOSCRIPT and was answered");
    cr_assert(eq(int, baton_lock_release(h), BATON_OK));
    baton_lock_close(h);
    baton_client_close(c);
}

Test(cluster, names_without_a_usable_hash_tag_are_refused)
{
    baton_client *c = client();
    const char *bad[] = {"a{b", "{}x", "}", "ab}", "x}"};
    for (int i = 0; i < 5; i++) {
        const char *name = bad[i];
        baton_lock *l = NULL;
        int rc = baton_lock_open(c, name, &l);
        if (rc == BATON_OK) /* refused at the first call, before anything is sent */
            rc = baton_lock_try_acquire(l, 0, 1000);
        cr_assert(eq(int, rc, BATON_EINVAL), "%s: %s: %s", name, baton_err_name(rc),
                  baton_client_errmsg(c));
        const char *why = baton_client_errmsg(c);
        cr_assert(strstr(why, "slot") || strstr(why, "tag") || strstr(why, "brace"),
                  "the message says why: \"%s\"", why);
        baton_lock_close(l);
        baton_semaphore *s = NULL;
        rc = baton_semaphore_open(c, name, &s);
        if (rc == BATON_OK)
            rc = baton_semaphore_try_set_permits(s, 1, NULL);
        cr_assert(eq(int, rc, BATON_EINVAL), "semaphore %s", name);
        baton_semaphore_close(s);
        baton_latch *la = NULL;
        rc = baton_latch_open(c, name, &la);
        if (rc == BATON_OK)
            rc = baton_latch_try_set_count(la, 1, NULL);
        cr_assert(eq(int, rc, BATON_EINVAL), "latch %s", name);
        baton_latch_close(la);
        cr_assert(eq(i64, exists_on_master("%s", name), 0), "nothing was written");
    }
    /* a real tag is fine, and keeps every key of the object in the tag's slot */
    const char *tagged = th_tmpname("{cl-tag}.job");
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(c, tagged, &l), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(l, 0, 5000), BATON_OK), "%s", baton_client_errmsg(c));
    cr_assert(eq(i64, exists_on_master("%s", tagged), 1));
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    baton_lock_close(l);
    baton_client_close(c);
}

Test(cluster, a_plain_client_on_a_cluster_node_says_to_use_redis_cluster)
{
    spread s;
    spread_names(&s, "cl-plain");
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", s.masters[0]);
    baton_client *c = client_url(url);
    baton_lock *l;
    /* the name on the node itself works; the name on another master is MOVED */
    cr_assert(eq(int, baton_lock_open(c, s.names[0], &l), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(l, 0, 5000), BATON_OK), "%s", baton_client_errmsg(c));
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    baton_lock_close(l);
    cr_assert(eq(int, baton_lock_open(c, s.names[1], &l), BATON_OK));
    int rc = baton_lock_try_acquire(l, 0, 5000);
    cr_assert(ne(int, rc, BATON_OK));
    const char *msg = baton_client_errmsg(c);
    cr_assert(strstr(msg, "redis+cluster://") != NULL, "%s: %s", baton_err_name(rc), msg);
    baton_lock_close(l);
    baton_client_close(c);
}

/* ------------------------------- contention while the cluster changes ----------------- */

/* Shared by the contending processes (MAP_SHARED). */
typedef struct arena {
    atomic_int inside;   /* processes in the critical section now */
    atomic_int overlaps; /* times one entered while another was inside */
    atomic_int counted;  /* increments confirmed */
    atomic_int unknown;  /* increments sent whose reply was lost */
    atomic_int acquired; /* acquisitions */
    atomic_int timeouts; /* try_acquire gave up (its wait ran out) */
    atomic_int errors;   /* any other failure of a call */
    atomic_int finished; /* processes done with their acquisitions */
    atomic_llong max_call_ms;
    atomic_llong redirects; /* MOVED + ASK + TRYAGAIN + CLUSTERDOWN the clients absorbed */
    atomic_bool stop;
    atomic_int next_id;              /* each process takes an index */
    _Atomic(const char *) where[16]; /* what each process is doing ... */
    atomic_llong since_ms[16];       /* ... since when (th_ms()) */
    int per_process;                 /* 0: until stop */
    int64_t wait_ms;
    char lock[96];
    char counter[128];
    char last_error[256];
} arena;

static arena *arena_new(const char *lock, int per_process, int64_t wait_ms)
{
    arena *a = mmap(NULL, sizeof *a, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(a != MAP_FAILED);
    memset(a, 0, sizeof *a);
    snprintf(a->lock, sizeof a->lock, "%s", lock);
    snprintf(a->counter, sizeof a->counter, "{%s}:counter", lock); /* the lock's slot */
    a->per_process = per_process;
    a->wait_ms = wait_ms;
    return a;
}

static void note_call(arena *a, int64_t t0)
{
    int64_t took = th_ms() - t0;
    long long seen = a->max_call_ms;
    while (took > seen && !atomic_compare_exchange_weak(&a->max_call_ms, &seen, took))
        ;
}

/* One worker process: its own cluster client; acquire, GET + pause + SET the counter on
 * whichever master serves its slot, release. No Criterion assertions here (a child). */
static int contend_body(arena *a, int me);

static int contend(void *arg)
{
    arena *a = arg;
    /* the test's own hiredis connection (th_slot_cmd) writes with write(2): a master killed
     * under it would end this process with SIGPIPE (the library's writes never raise it) */
    signal(SIGPIPE, SIG_IGN);
    int me = atomic_fetch_add(&a->next_id, 1) % 16;
    int rc = contend_body(a, me);
    a->where[me] = "done";
    a->finished++;
    return rc;
}

/* What process me is doing now (for the report of a hang). */
static void doing(arena *a, int me, const char *what)
{
    a->where[me] = what;
    a->since_ms[me] = th_ms();
}

static int contend_body(arena *a, int me)
{
    baton_options o;
    baton_options_init(&o);
    o.url = cluster.url;
    o.connect_timeout_ms = 1000;
    o.command_timeout_ms = 2000;
    baton_client *c = NULL;
    doing(a, me, "baton_client_open");
    if (baton_client_open(&o, &c) != BATON_OK) {
        a->errors++;
        snprintf(a->last_error, sizeof a->last_error, "open: %s", baton_open_errmsg());
        return 1;
    }
    baton_lock *l;
    if (baton_lock_open(c, a->lock, &l) != BATON_OK) {
        baton_client_close(c);
        return 1;
    }
    th_slot_conn sc;
    th_slot_conn_init(&sc, &cluster, th_cluster_slot(a->lock));
    unsigned seed = (unsigned)getpid();
    int64_t give_up = th_ms() + 100000; /* a parent that failed never says stop */
    int done = 0;
    while (!a->stop && th_ms() < give_up && (a->per_process == 0 || done < a->per_process)) {
        int64_t t0 = th_ms();
        doing(a, me, "baton_lock_try_acquire");
        int rc = baton_lock_try_acquire(l, a->wait_ms, BATON_LEASE_WATCHDOG);
        note_call(a, t0);
        if (rc != BATON_OK) {
            if (rc == BATON_ETIMEDOUT)
                a->timeouts++;
            else {
                a->errors++;
                snprintf(a->last_error, sizeof a->last_error, "acquire %s: %s", baton_err_name(rc),
                         baton_client_errmsg(c));
                th_sleep_ms(10);
            }
            continue;
        }
        a->acquired++;
        if (atomic_fetch_add(&a->inside, 1) != 0)
            a->overlaps++;
        redisReply *g = NULL;
        doing(a, me, "the counter's GET and SET");
        for (int tries = 0; !g && tries < 5; tries++)
            g = th_slot_cmd(&sc, "GET %s", a->counter);
        if (g && (g->type == REDIS_REPLY_STRING || g->type == REDIS_REPLY_NIL)) {
            long long v = g->type == REDIS_REPLY_STRING ? atoll(g->str) : 0;
            usleep(rand_r(&seed) % 1000);
            redisReply *w = th_slot_cmd(&sc, "SET %s %lld", a->counter, v + 1);
            if (w && w->type == REDIS_REPLY_STATUS)
                a->counted++;
            else if (!w)
                a->unknown++;
            else
                a->errors++;
            if (w)
                freeReplyObject(w);
        } else
            a->errors++;
        if (g)
            freeReplyObject(g);
        atomic_fetch_sub(&a->inside, 1);
        t0 = th_ms();
        doing(a, me, "baton_lock_release");
        rc = baton_lock_release(l);
        note_call(a, t0);
        if (rc != BATON_OK) {
            a->errors++;
            snprintf(a->last_error, sizeof a->last_error, "release %s: %s", baton_err_name(rc),
                     baton_client_errmsg(c));
        }
        done++;
    }
    baton_stats st;
    baton_client_stats(c, &st);
    a->redirects += (long long)(st.redirects_moved + st.redirects_ask + st.redirects_tryagain +
                                st.redirects_clusterdown);
    th_slot_conn_close(&sc);
    doing(a, me, "baton_lock_close and baton_client_close");
    baton_lock_close(l);
    baton_client_close(c);
    return 0;
}

/* Waits for the contending processes (told to stop first if stop): each must end within
 * ms (a hang is killed, so that it leaves nothing running, and reported). */
static void join_all(arena *a, pid_t *kids, int n, int64_t ms, bool stop)
{
    if (stop)
        a->stop = true;
    int64_t t0 = th_ms();
    int hung = 0, failed = 0;
    char what[512] = "";
    size_t off = 0;
    for (int i = 0; i < n && i < 16; i++) /* before any is killed */
        if (a->where[i] && strcmp(a->where[i], "done") != 0)
            off += (size_t)snprintf(what + off, off < sizeof what ? sizeof what - off : 0,
                                    " [%d: %s for %lld ms]", i, a->where[i],
                                    (long long)(th_ms() - a->since_ms[i]));
    for (int i = 0; i < n; i++) {
        int st = 0;
        pid_t got;
        while ((got = waitpid(kids[i], &st, WNOHANG)) == 0 && th_ms() - t0 < ms)
            th_sleep_ms(20);
        if (got == 0) {
            kill(kids[i], SIGKILL);
            waitpid(kids[i], &st, 0);
            hung++;
        } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            failed++;
            off += (size_t)snprintf(what + off, off < sizeof what ? sizeof what - off : 0,
                                    " (process %d: %s %d)", i, WIFEXITED(st) ? "exit" : "signal",
                                    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        }
    }
    if (hung) /* where they were at the kill */
        for (int i = 0; i < n && i < 16; i++)
            if (a->where[i] && strcmp(a->where[i], "done") != 0)
                off += (size_t)snprintf(what + off, off < sizeof what ? sizeof what - off : 0,
                                        " (killed: %d: %s for %lld ms)", i, a->where[i],
                                        (long long)(th_ms() - a->since_ms[i]));
    cr_assert(eq(int, hung, 0), "%d of %d processes hung (killed after %lld ms); %d counted;%s",
              hung, n, (long long)ms, (int)a->counted, what);
    cr_assert(eq(int, failed, 0), "%d processes crashed or failed:%s; the last error: %s", failed,
              what, a->last_error);
}

/* The counter's value now, asked wherever its slot is served. */
static long long counter_value(const arena *a)
{
    th_slot_conn sc;
    th_slot_conn_init(&sc, &cluster, th_cluster_slot(a->lock));
    redisReply *v = th_slot_cmd(&sc, "GET %s", a->counter);
    cr_assert(v != NULL, "the counter cannot be read");
    long long value = v->type == REDIS_REPLY_STRING ? atoll(v->str) : 0;
    freeReplyObject(v);
    th_slot_conn_close(&sc);
    return value;
}

Test(cluster, live_resharding_under_contention_loses_no_update, .timeout = 180)
{
    int masters[MASTERS];
    cr_assert(eq(int, th_cluster_masters(&cluster, masters, MASTERS), MASTERS));
    char name[96];
    th_cluster_name_on(&cluster, "cl-reshard", masters[0], name, sizeof name);
    int slot = th_cluster_slot(name);
    enum { PROCS = 8, EACH = 200 };
    arena *a = arena_new(name, EACH, 30000);
    pid_t kids[PROCS];
    int64_t started = th_ms();
    for (int i = 0; i < PROCS; i++)
        kids[i] = th_fork(contend, a);
    for (int64_t t0 = th_ms(); a->counted < 100 && a->finished < PROCS && th_ms() - t0 < 20000;)
        th_sleep_ms(10);
    if (a->counted < 100)
        join_all(a, kids, PROCS, 35000, true);
    cr_assert(ge(int, a->counted, 100), "counting before the move (%d errors: %s)", (int)a->errors,
              a->last_error);
    int at_first_move = a->counted;
    fprintf(stderr, "resharding: %d counted before the first move, %lld ms\n", at_first_move,
            (long long)(th_ms() - started));
    int moves = 0, keys = 0;
    int64_t run_start = th_ms();
    /* to the second master and back, then again (a stable spell of 300 ms between moves)
     * while the processes run, up to 5 round trips */
    while (moves < 2 || (moves % 2) || (a->finished < PROCS && moves < 10)) {
        int to = moves % 2 == 0 ? masters[1] : masters[0];
        keys += th_cluster_move_slot(&cluster, slot, to, 4, 20);
        moves++;
        cr_assert(th_cluster_wait_ok(&cluster, slot, 10000), "the cluster never agreed");
        th_sleep_ms(300);
        cr_assert(lt(i64, th_ms() - run_start, 120000), "the run never ended: %d counted",
                  (int)a->counted);
    }
    fprintf(stderr, "resharding: %d moves (%d keys) in %lld ms, %d counted\n", moves, keys,
            (long long)(th_ms() - run_start), (int)a->counted);
    join_all(a, kids, PROCS, 100000, false); /* they end by themselves, within 100 s */
    fprintf(stderr, "resharding: all done after %lld ms, %d counted, %lld redirects\n",
            (long long)(th_ms() - started), (int)a->counted, (long long)a->redirects);
    cr_assert(eq(int, th_cluster_master_of(&cluster, slot), masters[0]), "moved back");
    long long value = counter_value(a);
    cr_assert(lt(int, at_first_move, PROCS *EACH), "the moves began during the run");
    cr_assert(ge(int, moves, 2));
    cr_assert(gt(int, keys, 0));
    cr_assert(eq(int, a->overlaps, 0), "two holders at once");
    cr_assert(eq(int, a->unknown, 0));
    cr_assert(eq(i64, value, a->counted), "lost updates: %lld", a->counted - value);
    /* Reported, not asserted: waits that ran out (30 s). The lock is unfair (as Redisson's
     * RLock): under this contention a waiter can be woken and lose the race until its wait
     * ends (0 to 7 of 1600 in runs on a loaded 2-core machine; docs/guarantees.md, "Still
     * open"). None of them is a hang or an error. */
    fprintf(stderr, "resharding: %d waits of %lld ms ran out; longest call %lld ms\n",
            (int)a->timeouts, (long long)a->wait_ms, (long long)a->max_call_ms);
    cr_assert(eq(int, a->errors, 0), "%d errors, last: %s", (int)a->errors, a->last_error);
    cr_assert(eq(int, a->acquired, PROCS *EACH));
    cr_assert(eq(int, a->counted, PROCS *EACH));
    cr_assert(gt(i64, a->redirects, 0), "the clients were redirected (and absorbed it)");
    /* no hang: every call returns within its wait, plus one command timeout */
    cr_assert(le(i64, a->max_call_ms, a->wait_ms + 2000), "a call took %lld ms",
              (long long)a->max_call_ms);
    munmap(a, sizeof *a);
}

/* ------------------------------- the command ------------------------------------------ */

Test(cluster, the_command_holds_names_in_different_slots_past_the_lease, .timeout = 40)
{
    spread s;
    spread_names(&s, "cl-cli");
    setenv("BATON_URL", cluster.url, 1);
    cli_result r;
    /* the batched renewal of two slots once failed with CROSSSLOT: exit 122 after 3 s */
    cli_exec(&r, ARGS("lock", s.names[0], s.names[2], "--watchdog", "3s", "--", "sleep", "8"));
    cr_assert(eq(int, r.status, 0), "exit %d: %s", r.status, r.err);
    cr_assert(ge(i64, r.ms, 8000));
    cr_assert(le(i64, r.ms, 11000), "%lld ms", (long long)r.ms);
    cli_result_free(&r);
    cr_assert(eq(i64, exists_on_master("%s", s.names[0]), 0), "released");
    cr_assert(eq(i64, exists_on_master("%s", s.names[2]), 0), "released");
}

Test(cluster, the_command_runs_semaphore_latch_and_status)
{
    spread s;
    spread_names(&s, "cl-cli2");
    setenv("BATON_URL", cluster.url, 1);
    cli_result r;
    /* a semaphore on the first master: two runs at once, the permits come back */
    char *dir = cli_path("inside");
    char *log = cli_path("log");
    cr_assert(mkdir(dir, 0700) == 0);
    const char *script = "touch \"$1/$$\"; ls \"$1\" | wc -l >> \"$2\"; sleep 0.3; rm \"$1/$$\"";
    pid_t pids[4];
    for (int i = 0; i < 4; i++)
        pids[i] = cli_spawn(ARGS("semaphore", s.names[0], "--permits", "2", "--", "sh", "-c",
                                 script, "sh", dir, log));
    for (int i = 0; i < 4; i++) {
        int st = th_wait(pids[i]);
        char *err = cli_bg_err(pids[i]);
        cr_assert(eq(int, st, 0), "run %d: %s", i, err);
        free(err);
    }
    char *seen = cli_read_file(log);
    int peak = 0, runs = 0;
    for (char *line = strtok(seen, "\n"); line; line = strtok(NULL, "\n"), runs++)
        if (atoi(line) > peak)
            peak = atoi(line);
    free(seen);
    cr_assert(eq(int, runs, 4));
    cr_assert(eq(int, peak, 2), "peak concurrency %d", peak);
    redisContext *m = th_redis_port(s.masters[0]);
    cr_assert(eq(i64, th_cmd_int(m, "GET %s", s.names[0]), 2), "permits returned");
    redisFree(m);

    /* a latch on the second master */
    cli_exec(&r, ARGS("latch", s.names[1], "set", "2"));
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cli_result_free(&r);
    pid_t awaiting = cli_spawn(ARGS("latch", s.names[1], "await", "--timeout", "20s"));
    th_sleep_ms(300);
    for (int i = 0; i < 2; i++) {
        cli_exec(&r, ARGS("latch", s.names[1], "count-down"));
        cr_assert(eq(int, r.status, 0), "%s", r.err);
        cli_result_free(&r);
    }
    int64_t t0 = th_ms();
    cr_assert(eq(int, th_wait(awaiting), 0));
    cr_assert(le(i64, th_ms() - t0, 500));
    cli_exec(&r, ARGS("latch", s.names[1], "count"));
    cr_assert(eq(str, r.out, "0\n"), "%s", r.err);
    cli_result_free(&r);

    /* status of a held lock on the third master, the latch and the semaphore */
    baton_client *c = client();
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(c, s.names[2], &l), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(l, 30000), BATON_OK));
    cli_exec(&r, ARGS("status", "--json", s.names[2], s.names[1], s.names[0]));
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    json *j = json_parse(r.out);
    cr_assert(j != NULL, "not JSON: %s", r.out);
    cr_assert(eq(sz, j->n, 3));
    json *lk = json_at(j, 0);
    cr_assert(eq(str, json_get(lk, "kind")->string, "lock"));
    cr_assert(eq(sz, json_get(lk, "holders")->n, 1));
    double ttl = json_get(lk, "ttl_ms")->number;
    cr_assert(ttl > 20000 && ttl <= 30000, "ttl %f", ttl);
    cr_assert(eq(str, json_get(json_at(j, 1), "kind")->string, "absent"), "the latch opened");
    cr_assert(eq(int, (int)json_get(json_at(j, 2), "value")->number, 2));
    json_free(j);
    cli_result_free(&r);
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    baton_lock_close(l);
    baton_client_close(c);
    free(dir);
    free(log);
}

/* ------------------------------- failover (last: they change the fixture) ------------- */

/* Waits until the replica on port follows a master and is in sync. */
static void wait_synced(int replica)
{
    redisContext *r = th_redis_port(replica);
    for (int tries = 0;; tries++) {
        redisReply *rep = th_cmd(r, "INFO replication");
        bool up = strstr(rep->str, "master_link_status:up") != NULL;
        freeReplyObject(rep);
        if (up)
            break;
        cr_assert(lt(int, tries, 1000), "replica %d never synced", replica);
        th_sleep_ms(20);
    }
    redisFree(r);
}

/* Waits until the lost fd is readable (true) or ms passed (false). */
static bool lost_within(int fd, int ms)
{
    struct pollfd p = {fd, POLLIN, 0};
    return poll(&p, 1, ms) == 1;
}

Test(cluster, z1_a_cluster_failover_loses_no_hold_and_no_update, .timeout = 120)
{
    int masters[MASTERS];
    cr_assert(eq(int, th_cluster_masters(&cluster, masters, MASTERS), MASTERS));
    int master = masters[0];
    int replica = th_cluster_replica_of(&cluster, master);
    cr_assert(gt(int, replica, 0), "no replica of %d", master);
    wait_synced(replica);
    char name[96], held_name[96];
    th_cluster_name_on(&cluster, "cl-fo", master, name, sizeof name);
    th_cluster_name_on(&cluster, "cl-fo-held", master, held_name, sizeof held_name);
    /* the contenders are forked before this process has a client: a fork while baton's
     * threads run could copy a lock of the allocator held (AddressSanitizer's is one) */
    enum { PROCS = 4 };
    arena *a = arena_new(name, 0, 2000);
    pid_t kids[PROCS];
    for (int i = 0; i < PROCS; i++)
        kids[i] = th_fork(contend, a);
    baton_client *c = client_watchdog(3000);
    baton_lock *held;
    cr_assert(eq(int, baton_lock_open(c, held_name, &held), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(held, BATON_LEASE_WATCHDOG), BATON_OK));
    int fd;
    cr_assert(eq(int, baton_lock_lost_fd(held, &fd), BATON_OK));
    for (int64_t t0 = th_ms(); a->counted < 20 && th_ms() - t0 < 15000;)
        th_sleep_ms(20);
    if (a->counted < 20)
        join_all(a, kids, PROCS, 5000, true);
    cr_assert(ge(int, a->counted, 20), "counting before the failover (%d errors: %s)",
              (int)a->errors, a->last_error);
    int64_t t0 = th_ms();
    th_cluster_failover(&cluster, replica, 15000);
    int64_t switched = th_ms() - t0;
    int at_switch = a->counted;
    while (a->counted < at_switch + 30 && th_ms() - t0 < switched + 15000)
        th_sleep_ms(20);
    th_sleep_ms(3000); /* and a watchdog lease on the new master */
    join_all(a, kids, PROCS, 2000 + 3000, true);
    fprintf(stderr, "failover: switched in %lld ms, %d counted at the switch, %d in all\n",
            (long long)switched, at_switch, (int)a->counted);
    cr_assert(ge(int, a->counted, at_switch + 30), "counting never resumed (%d errors: %s)",
              (int)a->errors, a->last_error);
    long long value = counter_value(a);
    cr_assert(eq(int, a->overlaps, 0), "two holders at once");
    cr_assert(eq(int, a->errors, 0), "%d errors, last: %s", (int)a->errors, a->last_error);
    cr_assert(ge(i64, value, a->counted), "lost increments");
    cr_assert(le(i64, value, a->counted + a->unknown), "extra increments");
    cr_assert(le(i64, a->max_call_ms, 2000 + 3000),
              "a call took %lld ms (wait 2000 + a topology refresh; the switch took %lld)",
              (long long)a->max_call_ms, (long long)switched);
    /* the hold replicated: kept, renewed on the new master, released there */
    cr_assert(not(lost_within(fd, 0)), "a false loss");
    bool mine = false;
    cr_assert(eq(int, baton_lock_is_held_by_current_thread(held, &mine), BATON_OK));
    cr_assert(mine);
    redisContext *r = th_redis_port(replica);
    cr_assert(gt(i64, th_cmd_int(r, "PTTL %s", held_name), 0), "held on the new master");
    redisFree(r);
    cr_assert(eq(int, baton_lock_release(held), BATON_OK), "%s", baton_client_errmsg(c));
    baton_stats st;
    baton_client_stats(c, &st);
    cr_assert(eq(u64, st.holds_lost_failover + st.holds_lost_expired + st.holds_lost_deleted, 0));
    baton_lock_close(held);
    baton_client_close(c);
    munmap(a, sizeof *a);
    /* the fixture as it was: the old master takes over again */
    wait_synced(master);
    th_cluster_failover(&cluster, master, 15000);
    cr_assert(th_cluster_wait_ok(&cluster, -1, 10000));
}

Test(cluster, z2_a_master_killed_reports_the_holds_it_took_and_work_resumes, .timeout = 120)
{
    int masters[MASTERS];
    cr_assert(eq(int, th_cluster_masters(&cluster, masters, MASTERS), MASTERS));
    int master = masters[1];
    int replica = th_cluster_replica_of(&cluster, master);
    cr_assert(gt(int, replica, 0), "no replica of %d", master);
    wait_synced(replica);
    char name[96], kept_name[96], gone_name[96], other_name[96];
    th_cluster_name_on(&cluster, "cl-kill", master, name, sizeof name);
    th_cluster_name_on(&cluster, "cl-kill-kept", master, kept_name, sizeof kept_name);
    th_cluster_name_on(&cluster, "cl-kill-gone", master, gone_name, sizeof gone_name);
    th_cluster_name_on(&cluster, "cl-kill-other", masters[2], other_name, sizeof other_name);
    /* the contenders first, before this process has a client's threads (see z1) */
    enum { PROCS = 4 };
    arena *a = arena_new(name, 0, 2000);
    pid_t kids[PROCS];
    for (int i = 0; i < PROCS; i++)
        kids[i] = th_fork(contend, a);
    baton_client *c = client_watchdog(10000);
    baton_lock *kept, *gone, *other;
    cr_assert(eq(int, baton_lock_open(c, kept_name, &kept), BATON_OK));
    cr_assert(eq(int, baton_lock_open(c, gone_name, &gone), BATON_OK));
    cr_assert(eq(int, baton_lock_open(c, other_name, &other), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(kept, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(other, BATON_LEASE_WATCHDOG), BATON_OK));
    int fd_kept, fd_gone, fd_other;
    baton_lock_lost_fd(kept, &fd_kept);
    baton_lock_lost_fd(gone, &fd_gone);
    baton_lock_lost_fd(other, &fd_other);
    redisContext *r = th_redis_port(replica);
    freeReplyObject(th_cmd(r, "READONLY")); /* a replica of a cluster answers reads so */
    for (int i = 0; th_cmd_int(r, "EXISTS %s", kept_name) == 0; i++) {
        cr_assert(lt(int, i, 250), "never replicated");
        th_sleep_ms(20);
    }

    for (int64_t t0 = th_ms(); a->counted < 20 && th_ms() - t0 < 15000;)
        th_sleep_ms(20);
    if (a->counted < 20)
        join_all(a, kids, PROCS, 5000, true);
    cr_assert(ge(int, a->counted, 20), "counting before the kill (%d errors: %s)", (int)a->errors,
              a->last_error);
    /* an acquisition the replica never gets: its link to the master is cut just before,
     * and it cannot come back for the rest (the master, which has no password, refuses
     * the replica's AUTH) before the master dies */
    pid_t master_pid = th_node_pid(master);
    freeReplyObject(th_cmd(r, "CONFIG SET masterauth not-the-password")); /* no way back */
    redisContext *mc = th_redis_port(master);
    freeReplyObject(th_cmd(mc, "CLIENT KILL TYPE replica"));
    redisFree(mc);
    int rc_gone = baton_lock_acquire(gone, BATON_LEASE_WATCHDOG);
    int64_t t0 = th_ms();
    kill(master_pid, SIGKILL);
    int at_kill = a->counted;
    cr_assert(eq(int, rc_gone, BATON_OK));
    /* the cluster promotes the replica (node timeout 1 s: about 4 s here) */
    for (;;) {
        int now = th_cluster_master_of(&cluster, th_cluster_slot(name));
        if (now == replica)
            break;
        cr_assert(lt(i64, th_ms() - t0, 20000), "no failover after kill -9");
        th_sleep_ms(50);
    }
    int64_t promoted = th_ms() - t0;
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s", gone_name), 0),
              "premise: the last acquisition did not reach the replica");
    freeReplyObject(th_cmd(r, "CONFIG SET masterauth \"\""));
    redisFree(r);
    while (a->counted < at_kill + 30 && th_ms() - t0 < promoted + 15000)
        th_sleep_ms(20);
    int64_t resumed = th_ms() - t0;
    join_all(a, kids, PROCS, 2000 + 3000, true);
    fprintf(stderr, "kill -9: promoted after %lld ms, resumed after %lld ms, %d counted\n",
            (long long)promoted, (long long)resumed, (int)a->counted);
    cr_assert(ge(int, a->counted, at_kill + 30), "work never resumed (%d errors: %s)",
              (int)a->errors, a->last_error);
    cr_assert(le(i64, resumed, promoted + 5000), "resumed %lld ms after the kill (promoted %lld)",
              (long long)resumed, (long long)promoted);
    cr_assert(le(i64, a->max_call_ms, 2000 + promoted + 3000),
              "a call took %lld ms (wait 2000 + the promotion %lld + a refresh)",
              (long long)a->max_call_ms, (long long)promoted);
    /* the hold the new master lacks is reported, the one it has kept, the other master's
     * untouched */
    cr_assert(lost_within(fd_gone, 10000), "the hold that did not survive is not reported");
    cr_assert(not(lost_within(fd_kept, 0)), "the hold that replicated is reported lost");
    cr_assert(not(lost_within(fd_other, 0)), "a hold on another master is reported lost");
    bool mine = false;
    cr_assert(eq(int, baton_lock_is_held_by_current_thread(kept, &mine), BATON_OK));
    cr_assert(mine);
    cr_assert(eq(int, baton_lock_release(kept), BATON_OK), "%s", baton_client_errmsg(c));
    cr_assert(eq(int, baton_lock_release(gone), BATON_ENOTHELD));
    cr_assert(eq(int, baton_lock_release(other), BATON_OK));
    baton_stats st;
    baton_client_stats(c, &st);
    cr_assert(eq(u64, st.holds_lost_failover, 1), "one hold lost to the failover");
    baton_lock_close(kept);
    baton_lock_close(gone);
    baton_lock_close(other);
    baton_client_close(c);
    munmap(a, sizeof *a);
}

/* ------------------------------- a slot held migrating (issue 27.3) ------------------- */

typedef struct mig_waiter {
    const char *name;
    int rc;
    int64_t took_ms;
} mig_waiter;

static void *mig_wait(void *arg)
{
    mig_waiter *w = arg;
    baton_options o;
    baton_options_init(&o);
    o.url = cluster.url;
    o.command_timeout_ms = 500;
    baton_client *c = NULL;
    if (baton_client_open(&o, &c) != BATON_OK) {
        w->rc = -1000;
        return NULL;
    }
    baton_lock *l;
    baton_lock_open(c, w->name, &l);
    int64_t t0 = th_ms();
    w->rc = baton_lock_try_acquire(l, 12000, 5000);
    w->took_ms = th_ms() - t0;
    if (w->rc == BATON_OK)
        baton_lock_release(l);
    baton_lock_close(l);
    baton_client_close(c);
    return NULL;
}

/*
 * The lock's slot is held MIGRATING on its master and IMPORTING on another, its keys not
 * moved, for twice the lease (Redis answers TRYAGAIN to a script whose declared keys are
 * split or partly missing meanwhile). The holder keeps its hold by renewals, its release
 * works at once (not ENOTHELD after its lease), and a waiter with a long enough wait gets
 * the lock within it; every call ends within its bound.
 */
Test(cluster, a_slot_held_migrating_past_the_lease_lets_releases_and_waits_through, .timeout = 90)
{
    char name[96];
    snprintf(name, sizeof name, "%s", th_tmpname("migrating"));
    int slot = th_cluster_slot(name);
    int src = th_cluster_master_of(&cluster, slot);
    int masters[8], nm = th_cluster_masters(&cluster, masters, 8), dst = 0;
    for (int i = 0; i < nm && !dst; i++)
        if (masters[i] != src)
            dst = masters[i];
    cr_assert(gt(int, dst, 0));
    baton_options o;
    baton_options_init(&o);
    o.url = cluster.url;
    o.command_timeout_ms = 500;
    o.watchdog_ms = 1500;
    baton_client *a = NULL;
    cr_assert(eq(int, baton_client_open(&o, &a), BATON_OK), "%s", baton_open_errmsg());
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(a, name, &l), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(l, BATON_LEASE_WATCHDOG), BATON_OK));

    char src_id[41], dst_id[41];
    th_cluster_node_id(src, src_id);
    th_cluster_node_id(dst, dst_id);
    redisContext *rs = th_redis_port(src), *rd = th_redis_port(dst);
    freeReplyObject(th_cmd(rd, "CLUSTER SETSLOT %d IMPORTING %s", slot, src_id));
    freeReplyObject(th_cmd(rs, "CLUSTER SETSLOT %d MIGRATING %s", slot, dst_id));

    th_sleep_ms(2000); /* past the lease: only renewals keep the hold */
    cr_assert(eq(i64, th_cmd_int(rs, "EXISTS %s", name), 1), "the hold ran out while migrating");
    mig_waiter w = {name, 0, 0};
    pthread_t t;
    pthread_create(&t, NULL, mig_wait, &w);
    th_sleep_ms(300);
    int64_t t0 = th_ms();
    int rc = baton_lock_release(l);
    int64_t took = th_ms() - t0;
    cr_assert(eq(int, rc, BATON_OK), "release while migrating: %s: %s", baton_err_name(rc),
              baton_client_errmsg(a));
    cr_assert(lt(i64, took, 1500), "the release took %lld ms", (long long)took);
    th_sleep_ms(700); /* the slot stays migrating for twice the lease in all */

    freeReplyObject(th_cmd(rs, "CLUSTER SETSLOT %d STABLE", slot));
    freeReplyObject(th_cmd(rd, "CLUSTER SETSLOT %d STABLE", slot));
    pthread_join(t, NULL);
    cr_assert(eq(int, w.rc, BATON_OK), "the waiter: %s", baton_err_name(w.rc));
    cr_assert(lt(i64, w.took_ms, 12000));
    redisFree(rs);
    redisFree(rd);
    baton_lock_close(l);
    baton_client_close(a);
}

/* `baton list` scans every master (issue 33): an object on each is listed, each with the
 * node and slot that serve it. */
Test(cluster, the_command_lists_objects_on_every_master)
{
    spread s;
    spread_names(&s, "cl-listops");
    setenv("BATON_URL", cluster.url, 1);
    cli_result r;
    for (int i = 0; i < MASTERS; i++) {
        cli_exec(&r, ARGS("semaphore", s.names[i], "--counting", "set", "3"));
        cr_assert(eq(int, r.status, 0), "%s", r.err);
        cli_result_free(&r);
    }
    cli_exec(&r, ARGS("list", "cl-listops*", "--json"));
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    json *j = json_parse(r.out);
    cr_assert(j != NULL, "not JSON: %s", r.out);
    const json *objs = json_get(j, "objects");
    cr_assert(eq(sz, objs->n, MASTERS), "%s", r.out);
    for (int i = 0; i < MASTERS; i++) {
        const json *o = NULL;
        for (size_t k = 0; k < objs->n; k++)
            if (strcmp(json_get(objs->items[k], "name")->string, s.names[i]) == 0)
                o = objs->items[k];
        cr_assert(o != NULL, "%s not listed: %s", s.names[i], r.out);
        char node[32];
        snprintf(node, sizeof node, "127.0.0.1:%d", s.masters[i]);
        cr_assert(eq(str, json_get(o, "node")->string, node), "%s", r.out);
        cr_assert(eq(int, (int)json_get(o, "slot")->number, th_cluster_slot(s.names[i])));
        cr_assert(eq(int, (int)json_get(o, "value")->number, 3));
    }
    json_free(j);
    cli_result_free(&r);
}

/* ------------------------------- the documented ACL rule (issue 28.6) ---------------- */

/* A tenant with docs/security.md's rule for a Cluster on every node runs every CLI verb,
 * on names served by each master; without the map's commands, the open fails BATON_EPERM. */
Test(cluster, a_tenant_with_the_documented_acl_rule_runs_every_verb, .timeout = 180)
{
    for (int i = 0; i < cluster.n; i++) {
        acl_setuser(cluster.ports[i], "tenant", ACL_RULE_CLUSTER);
        acl_setuser(cluster.ports[i], "nomap", "+asking +spublish +ssubscribe +sunsubscribe");
    }
    char url[sizeof cluster.url + 32];
    snprintf(url, sizeof url, "redis+cluster://tenant:pw@%s", strstr(cluster.url, "://") + 3);
    int masters[8], nm = th_cluster_masters(&cluster, masters, 8);
    for (int i = 0; i < nm; i++) {
        char name[96];
        th_cluster_name_on(&cluster, "Pcl-acl", masters[i], name, sizeof name);
        acl_run_cli_verbs(url, name, "cluster");
    }
    snprintf(url, sizeof url, "redis+cluster://nomap:pw@%s", strstr(cluster.url, "://") + 3);
    baton_options o;
    baton_options_init(&o);
    o.url = url;
    baton_client *c = NULL;
    int rc = baton_client_open(&o, &c);
    cr_assert(eq(int, rc, BATON_EPERM), "without the map's commands: %s: %s", baton_err_name(rc),
              baton_open_errmsg());
}
