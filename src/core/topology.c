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

#include "client.h"
#include "conn.h"
#include "sentinel.h"

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
    uint64_t gen;       /* rises with every change of master */
    int next_sentinel;  /* the one to ask first: the last that answered */
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
        rc = baton__fail(c, BATON_EPROTO, "sentinel %s:%d refused: %s", s->host, s->port, r->str);
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
        baton__addr a;
        if (resolve(t, &a) == BATON_OK)
            adopt(t, &a);
        baton__mutex_lock(&t->mu);
    }
    baton__mutex_unlock(&t->mu);
    return NULL;
}

int baton__topology_start(baton_client *c)
{
    if (c->cfg.ep.kind != BATON__EP_SENTINEL)
        return BATON_OK;
    baton__topology *t = calloc(1, sizeof *t);
    if (!t)
        return baton__fail(c, BATON_ENOMEM, "out of memory");
    t->c = c;
    baton__mutex_init(&t->mu);
    baton__cond_init(&t->cond);
    c->topo = t;
    baton__addr a;
    int rc = resolve(t, &a);
    if (rc != BATON_OK) {
        char why[256];
        snprintf(why, sizeof why, "%s", baton_client_errmsg(c));
        return baton__fail(c, rc, "no sentinel named the master %s (the last: %s)",
                           c->cfg.ep.master, why);
    }
    adopt(t, &a);
    int e = pthread_create(&t->thread, NULL, topology_main, t);
    if (e != 0)
        return baton__fail(c, BATON_ENOMEM, "pthread_create: %s", strerror(e));
    t->started = true;
    return BATON_OK;
}

void baton__topology_stop(baton_client *c, bool forked)
{
    baton__topology *t = c->topo;
    if (!t)
        return;
    if (!forked && t->started) {
        baton__mutex_lock(&t->mu);
        t->closing = true;
        baton__cond_signal(&t->cond);
        baton__mutex_unlock(&t->mu);
        pthread_join(t->thread, NULL);
    }
    if (!forked) {
        baton__mutex_destroy(&t->mu);
        baton__cond_destroy(&t->cond);
    }
    free(t);
    c->topo = NULL;
}

void baton__topology_target(baton_client *c, char *host, size_t hostlen, int *port, uint64_t *gen)
{
    baton__topology *t = c->topo;
    if (!t) {
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
    if (!t)
        return 0;
    baton__mutex_lock(&t->mu);
    uint64_t g = t->gen;
    baton__mutex_unlock(&t->mu);
    return g;
}

void baton__topology_kick(baton_client *c)
{
    baton__topology *t = c->topo;
    if (!t)
        return;
    baton__mutex_lock(&t->mu);
    t->kicked = true;
    baton__cond_signal(&t->cond);
    baton__mutex_unlock(&t->mu);
}
