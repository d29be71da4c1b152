/*
 * Where commands go (see topology.h). One server: the URL's address, nothing to do. Under
 * Sentinel (redis+sentinel://): the sentinels are asked in turn, starting with the last one
 * that answered, with SENTINEL GET-MASTER-ADDR-BY-NAME; a sentinel that does not answer
 * costs at most the connect timeout (connect) plus the command timeout (its reply), and the
 * next one is asked. A thread asks again every second (Redisson's scanInterval; Redisson
 * dropped its +switch-master subscription as unreliable, and so does baton) and at once
 * when kicked. When the answer changes, the generation rises, idle connections to the old
 * master close, and BATON__EV_MASTER tells the dispatcher and the watchdog.
 *
 * The sentinels' answer is only a candidate: every data connection checks with ROLE that
 * the node is master (conn.c), so an old master that restarted empty, or one the sentinels
 * have not demoted yet, never takes a lock.
 */
#include "topology.h"
#include "hooks.h"

#include "client_fields.h"
#include "conn.h"
#include "sentinel.h"
#include "slots.h"

#include <hiredis/hiredis.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCAN_INTERVAL_MS 1000 /* Redisson's scanInterval */

typedef struct baton__topology baton__topology;

struct baton__topology {
    baton_client *c;
    pthread_t thread;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool closing;
    bool kicked;
    baton__addr master; /* the master as last named; host "" before the first answer */
    uint64_t gen;       /* rises with every change of master (Cluster: of the slot map) */
    int next_sentinel;  /* the one to ask first: the last that answered */

    /* Cluster */
    bool cluster;
    baton__pool **pools; /* every node seen (seeds included), never freed before close */
    size_t npools, cap;
    uint16_t owner[BATON__SLOTS]; /* index in pools of each slot's master; BATON__NO_NODE */
    bool changed;                 /* the map changed outside a refresh (MOVED): tell all */
    pthread_cond_t moved;         /* the map changed (TRYAGAIN / CLUSTERDOWN wait on it) */
};

/* Asks one sentinel for the master: BATON_OK with *out, or a code (detail on c). */
static int ask(baton_client *c, const baton__seed *s, baton__addr *out)
{
    baton__conn *k = NULL;
    int rc = baton__conn_open_sentinel(c, s->host, s->port, &k);
    if (rc != BATON_OK)
        return rc;
    const char *argv[3] = {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", c->cfg.ep.master};
    redisReply *r = NULL;
    rc = baton__conn_append(k, 3, argv, NULL);
    if (rc == BATON_OK)
        rc = baton__conn_flush(c, k, "SENTINEL GET-MASTER-ADDR-BY-NAME");
    if (rc == BATON_OK)
        rc = baton__conn_read(c, k, "SENTINEL GET-MASTER-ADDR-BY-NAME", &r);
    baton__conn_close(k);
    if (rc != BATON_OK)
        return rc;
    if (r->type == REDIS_REPLY_ERROR)
        rc = baton__fail(c, strncmp(r->str, "NOPERM", 6) == 0 ? BATON_EPERM : BATON_EPROTO,
                         "sentinel %s:%d refused: %s", s->host, s->port, r->str);
    else {
        rc = baton__sentinel_master_addr(r, out);
        if (rc == BATON_ENOTHELD)
            rc = baton__fail(c, BATON_ECONN, "sentinel %s:%d does not know a master of that name",
                             s->host, s->port);
        else if (rc != BATON_OK)
            rc = baton__fail(c, BATON_EPROTO, "sentinel %s:%d: malformed answer", s->host, s->port);
    }
    freeReplyObject(r);
    return rc;
}

/* Asks the sentinels in turn until one names the master. */
static int resolve(baton__topology *t, baton__addr *out)
{
    baton_client *c = t->c;
    const baton__endpoint *ep = &c->cfg.ep;
    baton__mutex_lock(&t->mu);
    int first = t->next_sentinel;
    baton__mutex_unlock(&t->mu);
    int rc = BATON_ECONN;
    for (int i = 0; i < ep->nseeds; i++) {
        int ix = (first + i) % ep->nseeds;
        rc = ask(c, &ep->seeds[ix], out);
        if (rc == BATON_OK) {
            baton__mutex_lock(&t->mu);
            t->next_sentinel = ix;
            baton__mutex_unlock(&t->mu);
            return BATON_OK;
        }
    }
    return rc;
}

/* Records the answer; on a change of master, says so to everyone. */
static void adopt(baton__topology *t, const baton__addr *a)
{
    baton_client *c = t->c;
    baton__mutex_lock(&t->mu);
    bool changed = strcmp(t->master.host, a->host) != 0 || t->master.port != a->port;
    bool first = t->master.host[0] == '\0';
    if (changed) {
        t->master = *a;
        t->gen++;
    }
    baton__mutex_unlock(&t->mu);
    if (!changed || first)
        return;
    baton__log(c, BATON_LOG_WARN, "the sentinels name a new master: %s:%d", a->host, a->port);
    baton__pool_drop(c);
    baton__event_fire(c, BATON__EV_MASTER);
}

/* ------------------------------- Cluster ---------------------------------------------- */

/* The pool of host:port, made on first sight; NULL only without memory. With t->mu held. */
static baton__pool *node_pool(baton__topology *t, const char *host, int port)
{
    for (size_t i = 0; i < t->npools; i++)
        if (t->pools[i]->port == port && strcmp(t->pools[i]->host, host) == 0)
            return t->pools[i];
    if (!baton__grow(&t->pools, &t->cap, t->npools, sizeof *t->pools, 8))
        return NULL;
    baton__pool *p = malloc(sizeof *p);
    if (!p)
        return NULL;
    baton__pool_init(p, host, port);
    t->pools[t->npools++] = p;
    return p;
}

static size_t pool_index(baton__topology *t, const baton__pool *p)
{
    for (size_t i = 0; i < t->npools; i++)
        if (t->pools[i] == p)
            return i;
    return BATON__NO_NODE;
}

/* Asks one node for the slot map: CLUSTER SHARDS on 7.0+ (it names every node with its
 * health), CLUSTER SLOTS before. */
static int ask_node(baton_client *c, baton__pool *p, baton__slot_map *m)
{
    int64_t deadline =
        baton__deadline_after_ms(c->cfg.connect_timeout_ms + c->cfg.command_timeout_ms);
    baton__conn *k = NULL;
    int rc = baton__conn_get_node(c, p, deadline, &k);
    if (rc != BATON_OK)
        return rc;
    bool shards = atomic_load(&c->server_major) >= 7;
    const char *argv[2] = {"CLUSTER", shards ? "SHARDS" : "SLOTS"};
    redisReply *r = NULL;
    rc = baton__conn_append(k, 2, argv, NULL);
    if (rc == BATON_OK)
        rc = baton__conn_flush_by(c, k, "CLUSTER SHARDS", deadline);
    if (rc == BATON_OK)
        rc = baton__conn_read_by(c, k, "CLUSTER SHARDS", deadline, &r);
    baton__conn_put(c, k, rc != BATON_OK);
    if (rc != BATON_OK)
        return rc;
    char err[160] = "";
    if (r->type == REDIS_REPLY_ERROR)
        rc = baton__fail(c,
                         strncmp(r->str, "NOPERM", 6) == 0 ? BATON_EPERM
                         : strncmp(r->str, "ERR This instance has cluster support disabled", 46)
                             ? BATON_EPROTO
                             : BATON_EINVAL,
                         "%s:%d refused CLUSTER %s: %s", p->host, p->port, argv[1], r->str);
    else if ((shards ? baton__slot_map_from_shards(r, p->host, c->cfg.ep.tls, m, err, sizeof err)
                     : baton__slot_map_from_slots(r, p->host, m, err, sizeof err)) != BATON_OK)
        rc = baton__fail(c, BATON_EPROTO, "%s:%d: malformed CLUSTER %s reply: %s", p->host, p->port,
                         argv[1], err);
    freeReplyObject(r);
    return rc;
}

/* Takes a slot map: the masters get pools, each slot its master's. Returns whether any
 * slot changed hands. */
static bool adopt_map(baton__topology *t, const baton__slot_map *m)
{
    uint16_t *idx = malloc(m->nnodes * sizeof *idx + 1);
    if (!idx)
        return false;
    bool changed = false;
    baton__mutex_lock(&t->mu);
    for (size_t i = 0; i < m->nnodes; i++) {
        baton__pool *p =
            m->nodes[i].master ? node_pool(t, m->nodes[i].host, m->nodes[i].port) : NULL;
        idx[i] = p ? (uint16_t)pool_index(t, p) : BATON__NO_NODE;
    }
    for (int s = 0; s < BATON__SLOTS; s++) {
        uint16_t o = m->owner[s] == BATON__NO_NODE ? BATON__NO_NODE : idx[m->owner[s]];
        if (o != t->owner[s]) {
            t->owner[s] = o;
            changed = true;
        }
    }
    if (changed || t->changed) {
        changed = true;
        t->changed = false;
        t->gen++;
        baton__cond_broadcast(&t->moved);
    }
    baton__mutex_unlock(&t->mu);
    free(idx);
    return changed;
}

/* Reads the slot map from the first node that answers: the masters known, then the seeds. */
static int cluster_refresh(baton__topology *t, bool *changed)
{
    baton_client *c = t->c;
    *changed = false;
    baton__mutex_lock(&t->mu);
    size_t n = t->npools;
    baton__pool **order = malloc((n + 1) * sizeof *order);
    if (!order) {
        baton__mutex_unlock(&t->mu);
        return baton__fail(c, BATON_ENOMEM, "out of memory");
    }
    /* the masters first (they own slots), in pool order, then every other node */
    size_t k = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < n; i++) {
            bool owns = false;
            for (int s = 0; s < BATON__SLOTS && !owns; s += 1)
                owns = t->owner[s] == i;
            if (owns == (pass == 0))
                order[k++] = t->pools[i];
        }
    baton__mutex_unlock(&t->mu);
    int rc = BATON_ECONN;
    for (size_t i = 0; i < k; i++) {
        baton__slot_map m;
        memset(&m, 0, sizeof m);
        rc = ask_node(c, order[i], &m);
        if (rc == BATON_OK) {
            *changed = adopt_map(t, &m);
            baton__slot_map_free(&m);
            break;
        }
        if (rc == BATON_EINVAL)
            break; /* not a cluster node: no other seed will make it one */
    }
    free(order);
    return rc;
}

static void cluster_tick(baton__topology *t)
{
    bool changed = false;
    if (cluster_refresh(t, &changed) == BATON_OK && changed) {
        baton__log(t->c, BATON_LOG_INFO, "the cluster's slot map changed");
        baton__event_fire(t->c, BATON__EV_MASTER);
    }
}

bool baton__topology_cluster(const baton_client *c)
{
    return c && c->topo && c->topo->cluster;
}

baton__pool *baton__topology_slot_pool(baton_client *c, int slot)
{
    baton__topology *t = c->topo;
    baton__pool *p = NULL;
    baton__mutex_lock(&t->mu);
    if (slot >= 0 && slot < BATON__SLOTS) {
        if (t->owner[slot] != BATON__NO_NODE)
            p = t->pools[t->owner[slot]];
    } else {
        /* no key: any master (the owner of the first covered slot), else the first seed */
        for (int s = 0; s < BATON__SLOTS && !p; s += 128)
            if (t->owner[s] != BATON__NO_NODE)
                p = t->pools[t->owner[s]];
        if (!p && t->npools)
            p = t->pools[0];
    }
    baton__mutex_unlock(&t->mu);
    return p;
}

baton__pool *baton__topology_node_pool(baton_client *c, const char *host, int port)
{
    baton__topology *t = c->topo;
    baton__mutex_lock(&t->mu);
    baton__pool *p = node_pool(t, host, port);
    baton__mutex_unlock(&t->mu);
    return p;
}

void baton__topology_moved(baton_client *c, int slot, baton__pool *to)
{
    baton__topology *t = c->topo;
    if (slot < 0 || slot >= BATON__SLOTS)
        return;
    baton__mutex_lock(&t->mu);
    uint16_t ix = (uint16_t)pool_index(t, to);
    if (ix != BATON__NO_NODE && t->owner[slot] != ix) {
        t->owner[slot] = ix;
        t->changed = true; /* the next refresh tells everyone, whatever it reads */
        t->gen++;
        baton__cond_broadcast(&t->moved);
    }
    t->kicked = true;
    baton__cond_signal(&t->cond);
    baton__mutex_unlock(&t->mu);
}

bool baton__topology_wait_change(baton_client *c, uint64_t gen, int64_t deadline_us)
{
    baton__topology *t = c->topo;
    if (!t)
        return false;
    baton__mutex_lock(&t->mu);
    t->kicked = true;
    baton__cond_signal(&t->cond);
    if (baton__net_waits()->on_fiber()) {
        /* An asynchronous operation's fiber must not block its engine, whose other
         * operations go on meanwhile: it looks at the map every 10 ms (a failover takes
         * seconds; a TRYAGAIN pause 5 to 200 ms). */
        while (t->gen == gen && !t->closing && baton__now_us() < deadline_us) {
            int64_t until = baton__now_us() + 10000;
            baton__mutex_unlock(&t->mu);
            int slept = baton__net_waits()->sleep_until(until < deadline_us ? until : deadline_us);
            baton__mutex_lock(&t->mu);
            if (slept != 0)
                break; /* out of memory for its timer: waits as a thread below */
        }
    }
    while (t->gen == gen && !t->closing)
        if (baton__cond_wait_until(&t->moved, &t->mu, deadline_us) == ETIMEDOUT)
            break;
    bool open = !t->closing;
    baton__mutex_unlock(&t->mu);
    return open;
}

size_t baton__topology_masters(baton_client *c, baton__pool **out, size_t max)
{
    baton__topology *t = c->topo;
    size_t n = 0;
    if (!t || !t->cluster)
        return 0;
    baton__mutex_lock(&t->mu);
    for (size_t i = 0; i < t->npools && n < max; i++)
        for (int s = 0; s < BATON__SLOTS; s++)
            if (t->owner[s] == i) {
                out[n++] = t->pools[i];
                break;
            }
    baton__mutex_unlock(&t->mu);
    return n;
}

/* rc, its detail "<what><name> (the last: <the detail so far>)". */
static int fail_last(baton_client *c, int rc, const char *what, const char *name)
{
    char why[256];
    snprintf(why, sizeof why, "%s", baton_client_errmsg(c));
    return baton__fail(c, rc, "%s%s (the last: %s)", what, name, why);
}

static int cluster_start(baton__topology *t)
{
    baton_client *c = t->c;
    t->cluster = true;
    baton__cond_init(&t->moved);
    for (int s = 0; s < BATON__SLOTS; s++)
        t->owner[s] = BATON__NO_NODE;
    for (int i = 0; i < c->cfg.ep.nseeds; i++)
        if (!node_pool(t, c->cfg.ep.seeds[i].host, c->cfg.ep.seeds[i].port))
            return baton__fail(c, BATON_ENOMEM, "out of memory");
    bool changed;
    int rc = cluster_refresh(t, &changed);
    if (rc != BATON_OK)
        return fail_last(c, rc, "no seed node of the cluster told its slot map", "");
    return BATON_OK;
}

/* ------------------------------- the thread ------------------------------------------- */

static void *topology_main(void *arg)
{
    baton__topology *t = arg;
    baton__mutex_lock(&t->mu);
    while (!t->closing) {
        if (!t->kicked)
            baton__cond_wait_until(&t->cond, &t->mu, baton__deadline_after_ms(SCAN_INTERVAL_MS));
        if (t->closing)
            break;
        t->kicked = false;
        baton__mutex_unlock(&t->mu);
        if (t->cluster) {
            cluster_tick(t);
        } else {
            baton__addr a;
            if (resolve(t, &a) == BATON_OK)
                adopt(t, &a);
        }
        baton__mutex_lock(&t->mu);
    }
    baton__mutex_unlock(&t->mu);
    return NULL;
}

int baton__topology_start(baton_client *c)
{
    if (c->cfg.ep.kind == BATON__EP_SINGLE)
        return BATON_OK;
    baton__topology *t = calloc(1, sizeof *t);
    if (!t)
        return baton__fail(c, BATON_ENOMEM, "out of memory");
    t->c = c;
    baton__mutex_init(&t->mu);
    baton__cond_init(&t->cond);
    c->topo = t;
    if (c->cfg.ep.kind == BATON__EP_CLUSTER) {
        int rc = cluster_start(t);
        if (rc != BATON_OK)
            return rc;
    } else {
        baton__addr a;
        int rc = resolve(t, &a);
        if (rc != BATON_OK)
            return fail_last(c, rc, "no sentinel named the master ", c->cfg.ep.master);
        adopt(t, &a);
    }
    int e = pthread_create(&t->thread, NULL, topology_main, t);
    if (e != 0)
        return baton__fail(c, BATON_ENOMEM, "pthread_create: %s", strerror(e));
    t->started = true;
    return BATON_OK;
}

void baton__topology_stop(baton_client *c, bool forked)
{
    baton__topology *t = c->topo;
    if (!t || forked || !t->started)
        return;
    baton__mutex_lock(&t->mu);
    t->closing = true;
    baton__cond_signal(&t->cond);
    if (t->cluster)
        baton__cond_broadcast(&t->moved); /* a redirection's pause ends now */
    baton__mutex_unlock(&t->mu);
    pthread_join(t->thread, NULL);
    t->started = false;
}

void baton__topology_free(baton_client *c, bool forked)
{
    baton__topology *t = c->topo;
    if (!t)
        return;
    baton__topology_stop(c, forked);
    for (size_t i = 0; i < t->npools; i++) {
        baton__pool_destroy(t->pools[i], forked);
        free(t->pools[i]);
    }
    free(t->pools);
    if (!forked) {
        baton__mutex_destroy(&t->mu);
        baton__cond_destroy(&t->cond);
        if (t->cluster)
            baton__cond_destroy(&t->moved);
    }
    free(t);
    c->topo = NULL;
}

void baton__topology_target(baton_client *c, char *host, size_t hostlen, int *port, uint64_t *gen)
{
    baton__topology *t = c->topo;
    if (!t || t->cluster) {
        snprintf(host, hostlen, "%s", c->cfg.ep.host ? c->cfg.ep.host : "");
        *port = c->cfg.ep.port;
        *gen = 0;
        return;
    }
    baton__mutex_lock(&t->mu);
    snprintf(host, hostlen, "%s", t->master.host);
    *port = t->master.port;
    *gen = t->gen;
    baton__mutex_unlock(&t->mu);
}

uint64_t baton__topology_gen(baton_client *c)
{
    baton__topology *t = c->topo;
    if (!t || t->cluster)
        return 0;
    baton__mutex_lock(&t->mu);
    uint64_t g = t->gen;
    baton__mutex_unlock(&t->mu);
    return g;
}

void baton__topology_kick(baton_client *c)
{
    baton__topology *t = c ? c->topo : NULL;
    if (!t)
        return;
    baton__mutex_lock(&t->mu);
    t->kicked = true;
    baton__cond_signal(&t->cond);
    baton__mutex_unlock(&t->mu);
}

uint64_t baton__topology_cluster_gen(baton_client *c)
{
    baton__topology *t = c->topo;
    if (!t)
        return 0;
    baton__mutex_lock(&t->mu);
    uint64_t g = t->gen;
    baton__mutex_unlock(&t->mu);
    return g;
}
