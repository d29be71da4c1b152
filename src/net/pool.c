/*
 * Connections: the pool of command connections, one per node (most recently used first,
 * at most pool_size, created on demand). A connection that errs is closed with every idle
 * one; an idle one is looked at before it is lent.
 */
#define _GNU_SOURCE
#include "conn_impl.h"

#include "client_fields.h"
#include "hooks.h"
#include "sentinel.h"
#include "topology.h"

#include <hiredis/hiredis.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* ------------------------------- the pool --------------------------------------------- */

/* Whether an idle command connection can still be used. Nothing arrives on one unasked,
 * so a readable socket means the server closed it (its idle timeout, CLIENT KILL, a
 * restart, a load balancer) or it broke: it would fail the next command, or worse, take the
 * command and lose its reply. Over TLS the server may also send session tickets after the
 * handshake: a read that yields no application data leaves the connection usable. */
bool baton__conn_idle_usable(baton__conn *k)
{
    if (baton__now_us() - k->last_read_us < BATON__IDLE_CHECK_US)
        return true; /* see BATON__IDLE_CHECK_US */
    struct pollfd p = {k->fd, POLLIN, 0};
    int n;
    while ((n = poll(&p, 1, 0)) < 0 && errno == EINTR) {
    }
    if (n == 0)
        return true;
    if (!k->ssl || (p.revents & (POLLHUP | POLLERR)))
        return false;
    char b;
    short want;
    /* a byte of a reply nobody asked for: no */
    return baton__conn_io_read(k, &b, 1, &want, false) == IO_AGAIN;
}

void baton__pool_init(baton__pool *p, const char *host, int port)
{
    memset(p, 0, sizeof *p);
    baton__mutex_init(&p->mu);
    baton__cond_init(&p->cond);
    snprintf(p->host, sizeof p->host, "%s", host ? host : "");
    p->port = port;
    baton__mutex_init(&p->mux_mu);
    baton__cond_init(&p->mux_cond);
}

static baton__conn *take_idle(baton__pool *p)
{
    baton__conn *all = p->idle;
    p->idle = NULL;
    for (baton__conn *s = all; s; s = s->next)
        p->open--;
    return all;
}

static void close_list(baton__conn *k)
{
    while (k) {
        baton__conn *next = k->next;
        baton__conn_close(k);
        k = next;
    }
}

void baton__pool_destroy(baton__pool *p, bool forked)
{
    if (!p)
        return;
    close_list(take_idle(p));
    baton__mux_destroy(p, forked);
    if (!forked) {
        baton__mutex_destroy(&p->mu);
        baton__cond_destroy(&p->cond);
    }
}

/* The generation a connection of this pool must have to be reused: the topology's for the
 * client's own pool (Sentinel: a new master makes the old connections stale), 0 for a
 * Cluster node's (its address is the node). */
static uint64_t pool_gen(baton_client *c, const baton__pool *p)
{
    return p->host[0] ? 0 : baton__topology_gen(c);
}

int baton__conn_get(baton_client *c, baton__conn **out)
{
    return baton__conn_get_by(c, BATON__NO_DEADLINE, out);
}

int baton__conn_get_node(baton_client *c, baton__pool *p, int64_t deadline_us, baton__conn **out)
{
    baton__mutex_lock(&p->mu);
    for (;;) {
        uint64_t seen = baton__net_waits()->freed(c);
        while (p->idle) {
            baton__conn *k = p->idle;
            p->idle = k->next;
            k->next = NULL;
            if (k->gen == pool_gen(c, p) && baton__conn_idle_usable(k)) {
                baton__mutex_unlock(&p->mu);
                k->reused = true;
                *out = k;
                return BATON_OK;
            }
            p->open--; /* closed by the server while it waited: replaced below */
            baton__conn_close(k);
        }
        if (p->open < c->cfg.pool_size)
            break;
        /* Every connection is busy; each is bounded by the command timeout. A fiber yields
         * meanwhile: the fibers of its engine may hold them. */
        if (baton__net_waits()->on_fiber()) {
            baton__mutex_unlock(&p->mu);
            if (!baton__net_waits()->wait_pool(c, p, seen, deadline_us))
                return baton__fail(c, BATON_ECONN, "no connection free before the deadline");
            baton__mutex_lock(&p->mu);
            continue;
        }
        if (baton__cond_wait_until(&p->cond, &p->mu, deadline_us) == ETIMEDOUT) {
            baton__mutex_unlock(&p->mu);
            return baton__fail(c, BATON_ECONN, "no connection free before the deadline");
        }
    }
    p->open++;
    baton__mutex_unlock(&p->mu);

    baton__conn *k = NULL;
    int rc = baton__conn_open_by(c, p, deadline_us, &k);
    if (rc != BATON_OK) {
        baton__mutex_lock(&p->mu);
        p->open--;
        baton__cond_signal(&p->cond);
        baton__mutex_unlock(&p->mu);
        baton__net_waits()->conn_freed(c, p, false);
        return rc;
    }
    baton__stat_inc(c, BATON__ST_CONNECTS);
    *out = k;
    return BATON_OK;
}

baton__conn *baton__pool_adopt(baton_client *c, baton__pool *p)
{
    baton__conn *k = NULL, *stale = NULL;
    baton__mutex_lock(&p->mu);
    while (p->idle && !k) {
        k = p->idle;
        p->idle = k->next;
        k->next = NULL;
        p->open--;
        if (k->gen != pool_gen(c, p) || !baton__conn_idle_usable(k)) {
            k->next = stale;
            stale = k;
            k = NULL;
        }
    }
    baton__cond_broadcast(&p->cond);
    baton__mutex_unlock(&p->mu);
    close_list(stale);
    return k;
}

int baton__conn_get_slot(baton_client *c, int slot, int64_t deadline_us, baton__conn **out)
{
    if (!baton__topology_cluster(c))
        return baton__conn_get_node(c, c->pool, deadline_us, out);
    baton__pool *p = baton__topology_slot_pool(c, slot);
    if (!p) {
        baton__topology_kick(c);
        return baton__fail(c, BATON_ECONN, "no node of the cluster serves slot %d now", slot);
    }
    return baton__conn_get_node(c, p, deadline_us, out);
}

int baton__conn_get_by(baton_client *c, int64_t deadline_us, baton__conn **out)
{
    return baton__conn_get_slot(c, -1, deadline_us, out);
}

void baton__conn_put(baton_client *c, baton__conn *k, bool broken)
{
    if (k->link) { /* a request on the shared connection: its end says what broke */
        baton__mux_put(c, k);
        return;
    }
    baton__pool *p = k->pool;
    baton__conn *stale = NULL;
    baton__mutex_lock(&p->mu);
    if (broken || k->broken || k->off < k->len || k->pending != 0 || k->gen != pool_gen(c, p)) {
        /* Whatever broke this connection (a restart, a cut, a proxy that dropped its
         * connections) may have broken the idle ones too, in a way a look at their sockets
         * cannot see yet: they go as well, so that the retry that follows runs on a new
         * connection, never on one the same fault hit. */
        stale = take_idle(p);
        p->open--;
        baton__cond_broadcast(&p->cond);
    } else {
        k->next = p->idle;
        p->idle = k;
        baton__cond_signal(&p->cond);
        k = NULL;
    }
    baton__mutex_unlock(&p->mu);
    baton__net_waits()->conn_freed(c, p, false);
    baton__conn_close(k);
    close_list(stale);
}

void baton__pool_drop_idle(baton_client *c, baton__pool *p)
{
    baton__mutex_lock(&p->mu);
    baton__conn *stale = take_idle(p);
    baton__cond_broadcast(&p->cond);
    baton__mutex_unlock(&p->mu);
    baton__net_waits()->conn_freed(c, p, true);
    close_list(stale);
}

void baton__pool_drop_node(baton_client *c, baton__pool *p)
{
    baton__mux_retire(p);
    baton__pool_drop_idle(c, p);
}

void baton__pool_drop(baton_client *c)
{
    baton__pool_drop_node(c, c->pool);
}
