/*
 * Connections: the shared (multiplexed) connection of a pool. Every thread of a client
 * (its baton_owners included) sends its requests on one connection per node, as Lettuce, ioredis
 * and Redisson's Netty connections do, instead of taking a connection of its own from the pool for
 * each round trip: the server then reads several commands per wake-up and writes several replies
 * per write(), and a client with sixteen threads at work holds one data connection per node, not
 * sixteen.
 *
 * How a request goes (baton__conn_get_shared, then append, flush, read, put as on a pooled
 * connection): its commands are encoded into its own buffer; the flush moves them to the
 * link's output and puts the request at the end of the link's line of requests whose
 * replies are due, in the order their bytes go out. If no write is under way, the caller
 * writes the output, and again whatever other callers added meanwhile (those go out
 * together in the next write: one write for the batch); if one is, it leaves its bytes to
 * that writer and returns. Replies come back in the order the commands went: whoever waits
 * for a reply and finds nobody reading reads (one chunk at a time, the mutex let go), and
 * hands each complete reply to the first request of the line that is due one; a request
 * whose replies are all in leaves the line and its thread is woken (its own condition
 * variable). The reader goes on until its own replies are in, then wakes a waiter to read
 * in its place. No thread is made, nothing spins.
 *
 * The event loop's fibers send on it too, by other rules, since a fiber must never block
 * its engine nor hold a turn while it yields: a thread waiting behind that turn (the loop
 * thread itself in a blocking call in BATON_CALLBACKS_LOOP mode, or a callback that blocks
 * on the engine's thread) would wait for a fiber that cannot run until that thread returns
 * (test_async's loop-mode cases hung so when fibers first used the connection). So a
 * fiber's flush only adds its bytes; its read first lets the fibers ready now add theirs
 * (yield_turn), then writes them all in one write, and reads what the socket has (never
 * waiting in the read); when it has nothing to do it parks (hooks.h: park, wake): one
 * fiber on the socket for the others (L->watcher: readable, or writable when the socket
 * took only part of the output), the others on nothing but their wake-up, which whoever
 * hands them their reply gives. A thread never waits for a fiber: it writes what a fiber
 * left, and reads on its own when no thread reads; a fiber that ends a turn of reading
 * wakes a thread that sleeps on its reply. A fiber waiting for a reply keeps its stack
 * (async.c: a stack lent would tie its return to whatever fiber took the stack). A fiber
 * waiting for another caller's connect parks on the pool (wait_pool, conn_freed).
 *
 * Bounds: a request's round trip has its own deadline (the command timeout from its
 * flush). A request still without its reply at its deadline, a reply the guard refuses (too
 * long, malformed), a write that fails, or a connection closed under it: the link is
 * broken, every request in line fails (BATON_ECONN; the one whose reply was refused
 * BATON_EPROTO, the one that timed out "no reply within the timeout"), and the next request
 * connects afresh. Each caller then does what it does after a lost connection (a query goes
 * once more, a script resolves what it may have done by its latch): the same as on the
 * pool, whose connection would have broken the same way. The idle check (a connection
 * unused 1 s or more is looked at before it takes a request), the topology's generation
 * (Sentinel: a new master retires the link; requests in flight on it finish there) and
 * the fork rule (pool.c, process.c) apply to the link as to a pooled connection.
 */
#define _GNU_SOURCE
#include "conn_impl.h"

#include "client_fields.h"
#include "hooks.h"
#include "topology.h"

#include <hiredis/hiredis.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* One connection of a pool, shared by the requests bound to it. Everything but the
 * socket's reads and writes is under the pool's mux_mu. */
typedef struct baton__link {
    baton__conn *k;
    baton__pool *pool;
    int refs;     /* requests bound to it (given out, not given back; or abandoned in line) */
    int sleepers; /* of them, threads asleep on their vcond */
    bool broken;  /* failed: it takes no request; freed when refs is 0 */
    bool writing; /* a caller is writing its output */
    bool reading; /* a caller is reading its replies */
    bool gather;  /* a fiber lets the others ready now add theirs before it writes */
    char *buf[2]; /* output: buf[cur] takes new requests, buf[wi] is being written */
    size_t cap[2];
    size_t len; /* of buf[cur] */
    int cur;
    int wi; /* the buffer being written: [woff, wend) still to go */
    size_t woff, wend;
    uint64_t appended, sent;  /* bytes of output so far, and written so far */
    baton__conn *head, *tail; /* requests whose replies are due, in the order they went */
    baton__conn *watcher;     /* a fiber parked on the socket for the others (fibers) */
    short watch;              /* the events it watches */
    pthread_mutex_t io;       /* TLS: one SSL call at a time (OpenSSL's rule) */
    char why[200];            /* why it broke */
} baton__link;

static uint64_t pool_gen(baton_client *c, const baton__pool *p)
{
    return p->host[0] ? 0 : baton__topology_gen(c);
}

bool baton__shared_on(baton_client *c)
{
    /* WAIT after an acquisition blocks its connection on the server for up to
     * sync_timeout_ms: the requests behind it would wait as long (a pooled one then) */
    return c->cfg.mux && c->cfg.sync_replicas <= 0 && !c->cfg.sync_aof;
}

static void link_free(baton__link *L, bool forked)
{
    baton__conn_close(L->k);
    free(L->buf[0]);
    free(L->buf[1]);
    if (!forked)
        baton__mutex_destroy(&L->io);
    free(L);
}

/* Frees L when nothing refers to it any more (mux_mu held). */
static void maybe_free(baton__pool *p, baton__link *L)
{
    if (L->refs == 0 && L != p->link)
        link_free(L, false);
}

static void req_free(baton__conn *v)
{
    for (int i = 0; i < v->rqn; i++)
        freeReplyObject(v->rq[(v->rqh + i) % BATON__MUX_REPLIES]);
    baton__cond_destroy(&v->vcond);
    free(v->out);
    free(v);
}

/* x's caller runs again: its thread is signalled, its fiber woken (mux_mu held). */
static void req_wake(baton__conn *x)
{
    if (x->waiting)
        baton__cond_signal(&x->vcond);
    else if (x->fiber)
        baton__net_waits()->wake(x->fiber);
}

static bool unsent(const baton__link *L)
{
    return L->sent < L->appended;
}

/* Fails every request in L's line and takes L out of use (mux_mu held). cause: the
 * request the failure is about (its reply refused, its timeout), or NULL; rc for it. */
static void link_fail(baton__pool *p, baton__link *L, baton__conn *cause, int rc, const char *why)
{
    if (L->broken)
        return;
    L->broken = true;
    snprintf(L->why, sizeof L->why, "%s", why);
    if (p->link == L)
        p->link = NULL;
    shutdown(L->k->fd, SHUT_RDWR); /* a reader in recv() returns at once */
    baton__conn *x = L->head;
    L->head = L->tail = NULL;
    bool first = true;
    while (x) {
        baton__conn *next = x->vnext;
        x->vnext = NULL;
        x->due = 0;
        if (x == cause || (first && !cause && rc == BATON_EPROTO)) {
            x->vrc = rc;
            snprintf(x->errstr, sizeof x->errstr, "%s", why);
        } else {
            x->vrc = BATON_ECONN;
            snprintf(x->errstr, sizeof x->errstr,
                     "connection closed under the request (the shared connection failed: %.80s)",
                     why);
        }
        first = false;
        if (x->abandoned) {
            L->refs--;
            req_free(x);
        } else {
            req_wake(x);
        }
        x = next;
    }
    if (L->watcher && L->watcher->fiber) /* out of line already: its reply came */
        baton__net_waits()->wake(L->watcher->fiber);
}

/* ------------------------------- a request's start ------------------------------------ */

int baton__conn_get_shared(baton_client *c, baton__pool *p, int64_t deadline_us, baton__conn **out)
{
    if (!baton__shared_on(c))
        return baton__conn_get_node(c, p, deadline_us, out);
    baton__conn *v = calloc(1, sizeof *v);
    if (!v)
        return baton__fail(c, BATON_ENOMEM, "out of memory");
    v->fd = -1;
    v->pool = p;
    baton__cond_init(&v->vcond);
    bool fresh = false;
    baton__mutex_lock(&p->mux_mu);
    for (;;) {
        baton__link *L = p->link;
        if (L && !L->broken && L->k->gen == pool_gen(c, p) &&
            (L->refs > 0 || baton__conn_idle_usable(L->k)))
            break;
        if (L) { /* closed by the server while idle, or of an older master: retired (the
                  * requests in flight on it finish there) */
            p->link = NULL;
            maybe_free(p, L);
            continue;
        }
        if (p->connecting) {
            /* another caller connects: its outcome is this caller's too (one connect
             * timeout for all of them, as each made its own on the pool; were each to try
             * in turn after a failure, the last would wait for all of them) */
            uint64_t seen = p->connects;
            int64_t until = baton__deadline_after_ms(c->cfg.connect_timeout_ms + 100);
            if (deadline_us < until)
                until = deadline_us;
            const baton__wait_hooks *h = baton__net_waits();
            if (h->on_fiber()) {
                /* a fiber parks (the connecting caller may be a fiber of its engine): the
                 * connect's end wakes the fibers waiting for pool p (conn_freed) */
                while (p->connecting && p->connects == seen && baton__now_us() < until) {
                    uint64_t freed = h->freed(c);
                    baton__mutex_unlock(&p->mux_mu);
                    h->wait_pool(c, p, freed, until);
                    baton__mutex_lock(&p->mux_mu);
                }
            } else {
                while (p->connecting && p->connects == seen &&
                       baton__cond_wait_until(&p->mux_cond, &p->mux_mu, until) != ETIMEDOUT) {
                }
            }
            if (p->connects == seen || p->connect_failed) {
                char why[200];
                snprintf(why, sizeof why, "%s",
                         p->connects == seen ? "no connection before the deadline"
                                             : p->connect_err);
                baton__mutex_unlock(&p->mux_mu);
                req_free(v);
                return baton__fail(c, BATON_ECONN, "%s", why);
            }
            continue;
        }
        p->connecting = true;
        baton__mutex_unlock(&p->mux_mu);
        baton__conn *k = baton__pool_adopt(c, p); /* open's, left idle: no new connect */
        bool adopted = k != NULL;
        baton__link *nl = calloc(1, sizeof *nl);
        int rc = !nl ? baton__fail(c, BATON_ENOMEM, "out of memory")
                 : k ? BATON_OK
                     : baton__conn_open_by(c, p, deadline_us, &k);
        baton__mutex_lock(&p->mux_mu);
        p->connecting = false;
        p->connects++;
        p->connect_failed = rc != BATON_OK;
        if (rc != BATON_OK)
            snprintf(p->connect_err, sizeof p->connect_err, "%s", baton_client_errmsg(c));
        baton__cond_broadcast(&p->mux_cond);
        baton__net_waits()->conn_freed(c, p, true); /* the fibers waiting for it */
        if (rc != BATON_OK) {
            baton__mutex_unlock(&p->mux_mu);
            baton__conn_close(k);
            free(nl);
            req_free(v);
            return rc;
        }
        if (!adopted)
            baton__stat_inc(c, BATON__ST_CONNECTS);
        nl->k = k;
        nl->pool = p;
        baton__mutex_init(&nl->io);
        p->link = nl;
        fresh = !adopted;
    }
    v->link = p->link;
    v->link->refs++;
    v->reused = !fresh;
    baton__mutex_unlock(&p->mux_mu);
    *out = v;
    return BATON_OK;
}

int baton__conn_get_shared_slot(baton_client *c, int slot, int64_t deadline_us, baton__conn **out)
{
    if (!baton__topology_cluster(c))
        return baton__conn_get_shared(c, c->pool, deadline_us, out);
    baton__pool *p = baton__topology_slot_pool(c, slot);
    if (!p) {
        baton__topology_kick(c);
        return baton__fail(c, BATON_ECONN, "no node of the cluster serves slot %d now", slot);
    }
    return baton__conn_get_shared(c, p, deadline_us, out);
}

void baton__mux_put(baton_client *c, baton__conn *v)
{
    (void)c;
    baton__pool *p = v->pool;
    baton__link *L = v->link;
    baton__mutex_lock(&p->mux_mu);
    if (v->due > 0) { /* its replies are still to come: dropped as they do */
        v->abandoned = true;
        baton__mutex_unlock(&p->mux_mu);
        return;
    }
    L->refs--;
    maybe_free(p, L);
    baton__mutex_unlock(&p->mux_mu);
    req_free(v);
}

/* ------------------------------- writing ---------------------------------------------- */

/* The end of a flush or a read (p->mux_mu held, released here): a link that failed has its
 * pool's idle connections dropped; rc is the caller's outcome, its detail in v->errstr. */
static int leave(baton_client *c, baton__pool *p, baton__conn *v, bool failed, int rc,
                 const char *what)
{
    baton__mutex_unlock(&p->mux_mu);
    if (failed)
        baton__pool_drop_idle(c, p);
    if (rc != BATON_OK)
        return baton__fail(c, rc, "%s: %s", what, v->errstr);
    return BATON_OK;
}

/* Writes n bytes of b on L's socket by the deadline (no mutex held): true, or false with
 * the reason in L->k->errstr. */
static bool write_all(baton__link *L, const char *b, size_t n, int64_t deadline_us)
{
    baton__conn *k = L->k;
    size_t off = 0;
    while (off < n) {
        if (baton__now_us() >= deadline_us) {
            baton__conn_set_err(k, "could not send within the timeout");
            return false;
        }
        short want;
        if (k->ssl)
            baton__mutex_lock(&L->io);
        ssize_t w = baton__conn_io_write(k, b + off, n - off, &want);
        if (k->ssl)
            baton__mutex_unlock(&L->io);
        if (w > 0)
            off += (size_t)w;
        else if (w == IO_BROKEN)
            return false;
        else if (!baton__conn_wait_fd(k->fd, want, deadline_us, k->serial)) {
            baton__conn_set_err(k, "could not send within the timeout");
            return false;
        }
    }
    return true;
}

/* An output buffer larger than this is freed once written. */
#define OUT_KEEP (64 * 1024)

static bool out_append(baton__link *L, const char *b, size_t n)
{
    int i = L->cur;
    if (L->len + n > L->cap[i]) {
        size_t cap = L->cap[i] ? L->cap[i] : 1024;
        while (cap < L->len + n)
            cap *= 2;
        char *nb = realloc(L->buf[i], cap);
        if (!nb)
            return false;
        L->buf[i] = nb;
        L->cap[i] = cap;
    }
    memcpy(L->buf[i] + L->len, b, n);
    L->len += n;
    return true;
}

/* The writer's turn (mux_mu held on entry and on return; L->writing is the caller's while
 * it runs): the output goes out, what others add meanwhile with it. A thread writes it all
 * (waiting for the socket as it must, by its deadline); a fiber writes what the socket takes
 * and, when it takes no more, gives the turn up with the rest left (true, *want: the events
 * to wait for): a fiber never keeps the turn while it yields, since a thread waiting for
 * the bytes may be the one that would run it. false: all written, or the link failed. */
static bool write_turn(baton__pool *p, baton__link *L, int64_t deadline_us, bool fiber, short *want)
{
    baton__conn *k = L->k;
    bool blocked = false;
    L->writing = true;
    while (!L->broken) {
        if (L->woff == L->wend) {
            if (L->len == 0)
                break;
            L->wi = L->cur;
            L->wend = L->len;
            L->woff = 0;
            L->cur ^= 1;
            L->len = 0;
            p->mux_writes++;
        }
        const char *b = L->buf[L->wi] + L->woff;
        size_t n = L->wend - L->woff;
        baton__mutex_unlock(&p->mux_mu);
        ssize_t w;
        if (!fiber) {
            w = write_all(L, b, n, deadline_us) ? (ssize_t)n : IO_BROKEN;
        } else {
            if (k->ssl)
                baton__mutex_lock(&L->io);
            w = baton__conn_io_write(k, b, n, want);
            if (k->ssl)
                baton__mutex_unlock(&L->io);
        }
        baton__mutex_lock(&p->mux_mu);
        if (w == IO_BROKEN) {
            link_fail(p, L, NULL, BATON_ECONN, baton__conn_errstr(k));
            break;
        }
        if (w == IO_AGAIN) {
            blocked = true;
            break;
        }
        L->woff += (size_t)w;
        L->sent += (uint64_t)w;
        if (L->woff == L->wend && L->cap[L->wi] > OUT_KEEP) {
            /* a burst's buffer (100,000 waiters' attempts: megabytes) is not kept */
            free(L->buf[L->wi]);
            L->buf[L->wi] = NULL;
            L->cap[L->wi] = 0;
        }
    }
    L->writing = false;
    return blocked && !L->broken;
}

int baton__mux_flush(baton_client *c, baton__conn *v, const char *what, int64_t deadline_us)
{
    baton__pool *p = v->pool;
    baton__link *L = v->link;
    baton__mutex_lock(&p->mux_mu);
    if (L->broken) {
        snprintf(v->errstr, sizeof v->errstr, "connection closed (%.120s)", L->why);
        baton__mutex_unlock(&p->mux_mu);
        return baton__fail(c, BATON_ECONN, "%s: %s", what, v->errstr);
    }
    if (v->due > 0 || v->rqn > 0 || v->pending > BATON__MUX_REPLIES) {
        /* every reply is read before the next flush (run.c); a batch of more is a pooled
         * connection's (the watchdog's) */
        baton__mutex_unlock(&p->mux_mu);
        return baton__fail(c, BATON_ECONN,
                           "%s: a request on the shared connection flushed "
                           "before its replies were read",
                           what);
    }
    size_t n = v->len - v->off;
    if (!out_append(L, v->out + v->off, n)) {
        baton__mutex_unlock(&p->mux_mu);
        return baton__fail(c, BATON_ENOMEM, "%s: out of memory", what);
    }
    v->off = v->len = 0;
    v->due = (int)v->pending;
    v->vnext = NULL;
    L->appended += n;
    v->end = L->appended;
    if (L->tail)
        L->tail->vnext = v;
    else
        L->head = v;
    L->tail = v;
    p->mux_requests++;
    /* the writer under way takes it in its next write; a fiber's goes out from its read
     * (baton__mux_read), with those of the fibers that run before it */
    if (L->writing || baton__net_waits()->on_fiber()) {
        baton__mutex_unlock(&p->mux_mu);
        return BATON_OK;
    }
    short want = 0;
    write_turn(p, L, deadline_us, false, &want);
    return leave(c, p, v, L->broken, v->vrc, what);
}

/* ------------------------------- reading ---------------------------------------------- */

/* Replies one turn of reading hands out at most (the rest stay parsed-ready for the next). */
#define TURN_REPLIES 64

/* Hands replies to the requests in line, in order (mux_mu held). */
static void distribute(baton__pool *p, baton__link *L, redisReply **got, int n)
{
    for (int i = 0; i < n; i++) {
        redisReply *r = got[i];
        baton__conn *x = L->head;
        if (!x) {
            for (int j = i; j < n; j++)
                freeReplyObject(got[j]);
            link_fail(p, L, NULL, BATON_EPROTO, "protocol error: a reply nobody asked for");
            return;
        }
        if (x->abandoned) {
            freeReplyObject(r);
        } else {
            x->rq[(x->rqh + x->rqn) % BATON__MUX_REPLIES] = r;
            x->rqn++;
        }
        if (--x->due == 0) {
            L->head = x->vnext;
            if (!L->head)
                L->tail = NULL;
            x->vnext = NULL;
            if (x->abandoned) {
                L->refs--;
                req_free(x);
            } else {
                req_wake(x);
            }
        }
    }
}

/* One turn of reading L's socket (mux_mu held on entry and on return). The turn is the
 * reader's alone: the socket is read and what came parsed with the mutex let go; only the
 * handing out of the replies takes it. */
static ssize_t read_turn(baton__pool *p, baton__link *L, int64_t deadline_us, bool fiber,
                         short *wantp)
{
    baton__conn *k = L->k;
    L->reading = true;
    bool ready = k->guard.ready > 0; /* parsed replies left by the last turn */
    baton__mutex_unlock(&p->mux_mu);
    char buf[READ_CHUNK];
    short want = POLLIN;
    ssize_t n = IO_AGAIN;
    int64_t left = deadline_us - baton__now_us();
    int64_t slice = BATON__READ_SLICE_MS * 1000;
    if (ready) {
        /* nothing to read before they are handed out */
    } else if (fiber) { /* what the socket has: a fiber never blocks its engine */
        if (k->ssl)
            baton__mutex_lock(&L->io);
        n = baton__conn_io_read(k, buf, sizeof buf, &want, false);
        if (k->ssl)
            baton__mutex_unlock(&L->io);
    } else if (k->ssl) { /* OpenSSL may hold decrypted bytes the socket does not show */
        baton__mutex_lock(&L->io);
        n = baton__conn_io_read(k, buf, sizeof buf, &want, false);
        baton__mutex_unlock(&L->io);
        if (n == IO_AGAIN)
            baton__conn_wait_fd(k->fd, want, left > slice ? baton__now_us() + slice : deadline_us,
                                k->serial);
    } else if (left >= slice) { /* one recv() that waits (SO_RCVTIMEO) */
        n = baton__conn_io_read(k, buf, sizeof buf, &want, true);
    } else if (baton__conn_wait_fd(k->fd, POLLIN, deadline_us, k->serial)) {
        n = baton__conn_io_read(k, buf, sizeof buf, &want, false);
    }
    bool refused = false, bad = false;
    size_t skip = 0;
    redisReply *got[TURN_REPLIES];
    int ngot = 0;
    if (n > 0 && !baton__conn_take(k, buf, (size_t)n)) {
        refused = true;
        skip = k->guard.ready; /* complete before the refused one: never parsed */
    } else if (n > 0 || ready) {
        while (ngot < TURN_REPLIES) {
            redisReply *r = NULL;
            if (baton__conn_next(k, &r) != BATON_OK) {
                bad = true;
                break;
            }
            if (!r)
                break;
            got[ngot++] = r;
        }
    }
    baton__mutex_lock(&p->mux_mu);
    L->reading = false;
    *wantp = want;
    if (ready && n == IO_AGAIN)
        n = 1; /* replies handed out: progress */
    if (L->broken) {
        for (int i = 0; i < ngot; i++)
            freeReplyObject(got[i]);
        return n;
    }
    if (refused) {
        /* the request the refused reply answers: the one past those completed before it
         * (they fail with it) */
        baton__conn *x = L->head;
        while (x && skip >= (size_t)x->due) {
            skip -= (size_t)x->due;
            x = x->vnext;
        }
        link_fail(p, L, k->proto ? x : NULL, k->proto ? BATON_EPROTO : BATON_ECONN,
                  baton__conn_errstr(k));
        return n;
    }
    distribute(p, L, got, ngot);
    if (bad && !L->broken)
        link_fail(p, L, L->head, BATON_EPROTO, baton__conn_errstr(k));
    else if (n == IO_BROKEN && !L->broken)
        link_fail(p, L, NULL, BATON_ECONN, baton__conn_errstr(k));
    return n;
}

/* A fiber's turn of reading ended (mux_mu held): a thread sleeping on its reply reads on
 * its own from now on, since the fiber may park without reading for it. */
static void hand_on_threads(baton__link *L)
{
    if (L->reading || L->sleepers == 0)
        return;
    for (baton__conn *x = L->head; x; x = x->vnext)
        if (x->waiting) {
            baton__cond_signal(&x->vcond);
            return;
        }
}

/* Nobody reads L now (mux_mu held): a request still in line reads next. A thread sleeping
 * on its reply first (a thread never waits for a fiber, which may need that very thread to
 * run); else, unless a fiber watches the socket for incoming replies, the first fiber
 * parked (any of them reads for all). */
static void hand_on(baton__link *L)
{
    if (L->reading || !L->head)
        return;
    for (baton__conn *x = L->head; x && L->sleepers > 0; x = x->vnext)
        if (x->waiting) {
            baton__cond_signal(&x->vcond);
            return;
        }
    if (L->watcher && (L->watch & POLLIN))
        return;
    for (baton__conn *x = L->head; x; x = x->vnext)
        if (x->fiber && x != L->watcher) {
            baton__net_waits()->wake(x->fiber);
            return;
        }
    if (L->watcher && L->watcher->fiber)
        baton__net_waits()->wake(L->watcher->fiber);
}

/* v's reply, taken if one is in (mux_mu held): true, or false with rc for an end without
 * one (the link failed, nothing due). */
static bool reply_or_end(baton__conn *v, redisReply **out, int *rc)
{
    if (v->rqn > 0) {
        *out = v->rq[v->rqh];
        v->rqh = (v->rqh + 1) % BATON__MUX_REPLIES;
        v->rqn--;
        if (v->pending > 0 && --v->pending == 0)
            v->round_us = v->round_wait_us = 0;
        return true;
    }
    if (v->vrc != BATON_OK) {
        *rc = v->vrc;
        return true;
    }
    if (v->due == 0) {
        snprintf(v->errstr, sizeof v->errstr, "no reply due (nothing was sent)");
        *rc = BATON_ECONN;
        return true;
    }
    return false;
}

/* Its deadline passed without its reply (mux_mu held): in order, every request ahead of it
 * is without its reply too (the reader's parser is its own while it reads). */
static void timed_out(baton__pool *p, baton__link *L, baton__conn *v)
{
    if (!L->reading)
        baton__conn_timed_out(L->k);
    link_fail(p, L, v, BATON_ECONN, L->reading ? "no reply within the timeout" : L->k->errstr);
}

/* A fiber's read (mux_mu held on entry and on return): it never blocks its engine and
 * never keeps the writer's or the reader's turn while it yields. Its request's bytes go
 * out first, after the fibers ready now have added theirs (one write for them all); then
 * it reads what the socket has, hands each reply to its request (waking its fiber or
 * thread), and when there is nothing to read parks: one fiber on the socket for the others
 * (L->watcher), the rest on nothing but their wake-up, their stacks lent meanwhile. */
static int fiber_read(baton__pool *p, baton__link *L, baton__conn *v, int64_t deadline_us,
                      redisReply **out, bool *failed)
{
    const baton__wait_hooks *h = baton__net_waits();
    int rc = BATON_OK;
    bool gathered = false, wrote = false;
    for (;;) {
        if (reply_or_end(v, out, &rc))
            return rc;
        if (baton__now_us() >= deadline_us) {
            timed_out(p, L, v);
            *failed = true;
            continue;
        }
        short wantw = 0, wantr = 0;
        bool mine_out = v->end <= L->sent;
        if (!mine_out && (L->writing || L->gather)) {
            /* another writes its bytes: no reply of its can come before; it is woken with
             * it (or to read in its turn) */
        } else if (unsent(L) && !L->writing && !L->gather) {
            if (!gathered) { /* the fibers ready now add theirs first */
                gathered = L->gather = true;
                baton__mutex_unlock(&p->mux_mu);
                h->yield_turn();
                baton__mutex_lock(&p->mux_mu);
                L->gather = false;
                continue;
            }
            bool blocked = write_turn(p, L, deadline_us, true, &wantw);
            wrote = true;
            if (L->broken) {
                *failed = true;
                continue;
            }
            if (!blocked)
                wantw = 0;
        }
        if (!mine_out && (L->writing || L->gather)) {
            /* nothing to read for it yet */
        } else if (!L->reading && (!wrote || L->k->ssl || L->k->guard.ready > 0)) {
            /* (over TLS OpenSSL may hold decrypted bytes the socket does not show; replies
             * parsed by the last turn are handed out before any wait) */
            ssize_t n = read_turn(p, L, deadline_us, true, &wantr);
            if (L->broken)
                *failed = true;
            hand_on_threads(L);
            if (n > 0 || L->broken)
                continue;
        } else if (!L->reading) {
            wantr = POLLIN; /* for the reply to what it has just sent: no read that finds
                             * nothing first */
        }
        wrote = false;
        /* parks: on the socket if nobody watches it (or the watcher lacks what it needs) */
        short ev = (short)(wantr | wantw);
        if (L->watcher && L->watcher != v) {
            if ((ev & ~L->watch) && L->watcher->fiber)
                h->wake(L->watcher->fiber); /* it looks again, for these too */
            ev = 0;
        }
        if (ev) {
            L->watcher = v;
            L->watch = ev;
        }
        v->fiber = h->fiber_self();
        baton__mutex_unlock(&p->mux_mu);
        int r = h->park(ev ? L->k->fd : -1, ev, deadline_us, L->k->serial);
        if (r < 0) /* the engine could not park it: a short look on its own */
            baton__conn_wait_fd(L->k->fd, ev ? ev : POLLIN, baton__now_us() + 1000, 0);
        baton__mutex_lock(&p->mux_mu);
        v->fiber = NULL;
        if (L->watcher == v) {
            L->watcher = NULL;
            L->watch = 0;
        }
    }
}

int baton__mux_read(baton_client *c, baton__conn *v, const char *what, int64_t deadline_us,
                    redisReply **out)
{
    baton__pool *p = v->pool;
    baton__link *L = v->link;
    bool failed = false;
    int rc = BATON_OK;
    *out = NULL;
    baton__mutex_lock(&p->mux_mu);
    if (baton__net_waits()->on_fiber()) {
        rc = fiber_read(p, L, v, deadline_us, out, &failed);
        hand_on(L);
        return leave(c, p, v, failed, rc, what);
    }
    for (;;) {
        if (reply_or_end(v, out, &rc))
            break;
        if (baton__now_us() >= deadline_us) {
            timed_out(p, L, v);
            failed = true;
            continue;
        }
        if (unsent(L) && !L->writing) { /* bytes a fiber left: a thread writes them all */
            short want = 0;
            write_turn(p, L, deadline_us, false, &want);
            failed = failed || L->broken;
            continue;
        }
        if (!L->reading) {
            short want = 0;
            read_turn(p, L, deadline_us, false, &want);
            failed = failed || L->broken;
            continue;
        }
        v->waiting = true;
        L->sleepers++;
        baton__cond_wait_until(&v->vcond, &p->mux_mu, deadline_us);
        L->sleepers--;
        v->waiting = false;
    }
    /* whoever reads next: a request still in line, woken if it sleeps */
    hand_on(L);
    return leave(c, p, v, failed, rc, what);
}

/* ------------------------------- the pool's end --------------------------------------- */

void baton__mux_retire(baton__pool *p)
{
    baton__mutex_lock(&p->mux_mu);
    baton__link *L = p->link;
    p->link = NULL;
    if (L)
        maybe_free(p, L); /* in use: freed by its last request */
    baton__mutex_unlock(&p->mux_mu);
}

void baton__mux_destroy(baton__pool *p, bool forked)
{
    /* every request was given back (close runs after the last call) */
    if (p->link)
        link_free(p->link, forked);
    p->link = NULL;
    if (!forked) {
        baton__mutex_destroy(&p->mux_mu);
        baton__cond_destroy(&p->mux_cond);
    }
}

static void add_counts(baton__pool *p, uint64_t *requests, uint64_t *writes)
{
    baton__mutex_lock(&p->mux_mu);
    *requests += p->mux_requests;
    *writes += p->mux_writes;
    baton__mutex_unlock(&p->mux_mu);
}

void baton__mux_counts(baton_client *c, uint64_t *requests, uint64_t *writes)
{
    *requests = *writes = 0;
    if (!baton__topology_cluster(c)) {
        add_counts(c->pool, requests, writes);
        return;
    }
    baton__pool *ps[64];
    size_t n = baton__topology_masters(c, ps, sizeof ps / sizeof *ps);
    for (size_t i = 0; i < n; i++)
        add_counts(ps[i], requests, writes);
}
