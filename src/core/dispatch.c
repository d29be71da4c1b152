/*
 * The pub/sub dispatcher: one subscriber connection and one thread per client, through
 * which every waiting thread of the process learns that something it waits for changed.
 *
 * Channels are reference-counted: however many threads wait on one lock, the client holds
 * one subscription to its channel. SUBSCRIBE and UNSUBSCRIBE of one channel never
 * interleave: each channel has an async semaphore (a FIFO of pending callbacks with one
 * permit) and its "reconcile" callback, which makes the server's state match the reference
 * count, holds the permit until the server confirms. Callbacks run under the dispatcher's
 * mutex, never block, and only append commands to the connection's output buffer.
 *
 * A waiter's wake-ups are counted (a semaphore, not an edge), capped at the number of
 * references, so a message that arrives between a waiter's failed attempt and its sleep is
 * kept and costs at most one extra attempt. When the connection drops, every waiter is woken
 * to re-check, the thread reconnects with a growing pause, resubscribes every live channel
 * and, on each confirmation, wakes that channel's waiters once more (a message may have been
 * published while nobody listened).
 *
 * A subscription whose last waiter leaves with what it waited for (not one that gave up)
 * lingers, still subscribed, for LINGER_MS: under contention the same process usually waits
 * on the same channel again within milliseconds, and re-joining a live subscription costs no
 * SUBSCRIBE, no UNSUBSCRIBE and no extra attempt. Latches, waited on once, do not linger;
 * a waiter that gives up unsubscribes at once and waits for the confirmation.
 *
 * The thread is a poll() loop over the subscriber socket and a wake-up pipe; replies are
 * parsed with hiredis's reply reader. It starts with the first subscription.
 */
#define _GNU_SOURCE
#include "client.h"
#include "conn.h"

#include <hiredis/hiredis.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* How long a subscription outlives its last waiter (see above). */
#define LINGER_MS 100

/* The longest pause between two attempts to reconnect the subscriber connection. It bounds
 * how late, after a restarted server is back, its waiters are woken and its holders told
 * their holds are gone (the reconnection reads the new run_id): at most this much. Four
 * connection attempts a second cost a dead server nothing. */
#define MAX_BACKOFF_MS 250

/* ------------------------------- async semaphore -------------------------------------- */

typedef struct asem_item {
    void (*fn)(void *arg);
    void *arg;
    struct asem_item *next;
} asem_item;

typedef struct asem {
    int permits; /* 1 when idle */
    asem_item *head, *tail;
} asem;

/* Runs fn now if the permit is free, else queues it (FIFO). Returns BATON_ENOMEM if it
 * could not be queued. */
static int asem_acquire(asem *a, void (*fn)(void *), void *arg)
{
    if (a->permits > 0) {
        a->permits--;
        fn(arg);
        return BATON_OK;
    }
    asem_item *it = malloc(sizeof *it);
    if (!it)
        return BATON_ENOMEM;
    it->fn = fn;
    it->arg = arg;
    it->next = NULL;
    if (a->tail)
        a->tail->next = it;
    else
        a->head = it;
    a->tail = it;
    return BATON_OK;
}

/* Hands the permit to the next queued callback, or frees it. */
static void asem_release(asem *a)
{
    asem_item *it = a->head;
    if (!it) {
        a->permits++;
        return;
    }
    a->head = it->next;
    if (!a->head)
        a->tail = NULL;
    void (*fn)(void *) = it->fn;
    void *arg = it->arg;
    free(it);
    fn(arg);
}

/* ------------------------------- state ------------------------------------------------ */

typedef enum sub_state { S_UNSUB, S_SUBSCRIBING, S_SUBSCRIBED, S_UNSUBSCRIBING } sub_state;

struct baton__sub {
    baton__dispatcher *d;
    char *channel;
    baton__sub_kind kind;
    int refs;             /* threads holding a reference */
    sub_state state;      /* as the server sees it (or will, once confirmed) */
    bool queued;          /* a reconcile waits in the async semaphore */
    bool inflight;        /* a (UN)SUBSCRIBE awaits confirmation, holding the permit */
    bool wake_on_confirm; /* resubscribed after a reconnect: wake waiters when confirmed */
    bool lingering;       /* refs == 0 but kept subscribed until linger_until */
    int64_t linger_until; /* monotonic µs */
    int64_t permits;      /* wake-ups not yet consumed, at most refs */
    uint64_t messages;    /* messages that woke waiters, since the entry was made */
    asem sem;
    pthread_cond_t wake;  /* permits became positive */
    pthread_cond_t ready; /* state changed */
};

struct baton__dispatcher {
    baton_client *c;
    pthread_t thread;
    pthread_mutex_t mu;
    baton__conn *conn; /* NULL while disconnected */
    int64_t ping_at;   /* monotonic µs a keepalive PING was sent and not yet answered; 0 */
    bool moved;        /* the master moved (Sentinel): drop the connection, reconnect */
    int pipe[2];       /* wakes the thread: new output, closing */
    bool closing;
    baton__map subs;             /* channel -> baton__sub */
    int wanted;                  /* subs with refs > 0 */
    int pinned;                  /* baton__sub_pin() calls not yet undone */
    int lingering;               /* subs lingering (refs == 0, still subscribed) */
    pthread_cond_t unsubscribed; /* an UNSUBSCRIBE was confirmed, or the connection broke */
};

/* Whether the subscriber connection must be kept up: somebody waits, or the client holds
 * something whose loss a server restart would cause (the watchdog pins it). */
static bool needed(const baton__dispatcher *d)
{
    return d->wanted > 0 || d->pinned > 0;
}

static void wake_thread(baton__dispatcher *d)
{
    char b = 1;
    ssize_t n = write(d->pipe[1], &b, 1);
    (void)n; /* full pipe: the thread is already due to wake */
}

static void free_sub(baton__sub *s, bool forked)
{
    while (s->sem.head) {
        asem_item *it = s->sem.head;
        s->sem.head = it->next;
        free(it);
    }
    if (!forked) {
        baton__cond_destroy(&s->wake);
        baton__cond_destroy(&s->ready);
    }
    free(s->channel);
    free(s);
}

/* Frees s if nothing refers to it any more. Called only at the end of top-level paths. */
static void maybe_free(baton__dispatcher *d, baton__sub *s)
{
    if (s->refs == 0 && s->state == S_UNSUB && !s->inflight && !s->queued && s->sem.permits == 1 &&
        !s->sem.head) {
        baton__map_remove(&d->subs, s->channel);
        free_sub(s, false);
    }
}

static void stop_lingering(baton__dispatcher *d, baton__sub *s)
{
    if (s->lingering) {
        s->lingering = false;
        d->lingering--;
    }
}

static void add_permits(baton__sub *s, int64_t n)
{
    if (n <= 0 || s->refs == 0)
        return;
    int64_t before = s->permits;
    s->permits += n;
    if (s->permits > s->refs)
        s->permits = s->refs;
    int64_t added = s->permits - before;
    if (added >= s->refs)
        baton__cond_broadcast(&s->wake);
    else
        for (int64_t i = 0; i < added; i++)
            baton__cond_signal(&s->wake);
}

/* The async semaphore's one callback: make the server's subscription match refs. */
static void reconcile(void *arg)
{
    baton__sub *s = arg;
    baton__dispatcher *d = s->d;
    s->queued = false;
    if (d->conn) {
        const char *verb = NULL;
        if (s->refs > 0 && s->state == S_UNSUB) {
            verb = "SUBSCRIBE";
            s->state = S_SUBSCRIBING;
        } else if (s->refs == 0 && s->state == S_SUBSCRIBED) {
            verb = "UNSUBSCRIBE";
            s->state = S_UNSUBSCRIBING;
        }
        if (verb) {
            const char *argv[2] = {verb, s->channel};
            if (baton__conn_append(d->conn, 2, argv, NULL) == BATON_OK) {
                baton__stat_inc(d->c, s->refs > 0 ? BATON__ST_SUBSCRIBES : BATON__ST_UNSUBSCRIBES);
                s->inflight = true; /* the permit stays taken until the confirmation */
                wake_thread(d);
                return;
            }
            /* out of memory appending: leave the state as it was */
            s->state = s->refs > 0 ? S_UNSUB : S_SUBSCRIBED;
        }
    }
    /* Disconnected, or nothing to do: the reconnect pass reconciles again. */
    asem_release(&s->sem);
}

static void request_reconcile(baton__dispatcher *d, baton__sub *s)
{
    (void)d;
    if (s->queued)
        return;
    s->queued = true;
    if (asem_acquire(&s->sem, reconcile, s) != BATON_OK)
        s->queued = false;
}

/* ------------------------------- the thread ------------------------------------------- */

static void on_confirm(baton__dispatcher *d, const char *kind, const char *channel)
{
    baton__sub *s = baton__map_get(&d->subs, channel);
    if (!s || !s->inflight)
        return;
    bool subscribed = strcmp(kind, "subscribe") == 0;
    if (subscribed && s->state != S_SUBSCRIBING)
        return;
    if (!subscribed && s->state != S_UNSUBSCRIBING)
        return;
    s->state = subscribed ? S_SUBSCRIBED : S_UNSUB;
    s->inflight = false;
    if (!subscribed)
        baton__cond_broadcast(&d->unsubscribed);
    if (subscribed && s->wake_on_confirm) {
        s->wake_on_confirm = false;
        add_permits(s, s->refs);
    }
    baton__cond_broadcast(&s->ready);
    asem_release(&s->sem);
    maybe_free(d, s);
}

static int64_t parse_int(const char *s, size_t len, bool *ok)
{
    int64_t v = 0;
    bool neg = false;
    size_t i = 0;
    *ok = false;
    if (len > 0 && s[0] == '-') {
        neg = true;
        i = 1;
    }
    if (i >= len || len > 20)
        return 0;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        v = v * 10 + (s[i] - '0');
    }
    *ok = true;
    return neg ? -v : v;
}

/* How many waiters a message on a channel of this kind wakes (refs: all of them). */
static int64_t wakeups_for(baton__sub_kind kind, const char *payload, size_t len, int refs)
{
    bool ok;
    int64_t v = parse_int(payload, len, &ok);
    switch (kind) {
    case BATON__SUB_LOCK:
        return (ok && v == 1) ? refs : 1; /* "0" unlock: one; "1": everyone re-checks */
    case BATON__SUB_LATCH:
        return (ok && v == 0) ? refs : 0; /* "0" reached zero; "1" new count: nothing */
    case BATON__SUB_SEMAPHORE:
        return ok ? (v < 0 ? 0 : v) : 1; /* new permit count */
    case BATON__SUB_RWLOCK:
        return refs; /* "0" last reader gone, "1" writer gone: whoever may enter now */
    }
    return 1;
}

static void on_message(baton__dispatcher *d, const redisReply *ch, const redisReply *payload)
{
    if (ch->type != REDIS_REPLY_STRING || payload->type != REDIS_REPLY_STRING)
        return;
    baton__stat_inc(d->c, BATON__ST_MESSAGES);
    baton__sub *s = baton__map_get(&d->subs, ch->str);
    if (!s || s->refs == 0)
        return;
    int64_t n = wakeups_for(s->kind, payload->str, payload->len, s->refs);
    if (n > 0)
        s->messages++;
    add_permits(s, n);
}

/* Decodes one reply read from the subscriber connection. Anything not understood is
 * ignored: a pushed message can never crash or confuse the dispatcher. */
void baton__dispatch_reply(baton__dispatcher *d, const redisReply *r)
{
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 3)
        return;
    const redisReply *kind = r->element[0];
    if (!kind || kind->type != REDIS_REPLY_STRING || !r->element[1] || !r->element[2])
        return;
    if (strcmp(kind->str, "message") == 0)
        on_message(d, r->element[1], r->element[2]);
    else if ((strcmp(kind->str, "subscribe") == 0 || strcmp(kind->str, "unsubscribe") == 0) &&
             r->element[1]->type == REDIS_REPLY_STRING)
        on_confirm(d, kind->str, r->element[1]->str);
}

typedef struct sub_list {
    baton__sub **items;
    size_t n, cap;
} sub_list;

static void collect(const char *key, void *val, void *arg)
{
    (void)key;
    sub_list *l = arg;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        baton__sub **items = realloc(l->items, cap * sizeof *items);
        if (!items)
            return;
        l->items = items;
        l->cap = cap;
    }
    l->items[l->n++] = val;
}

/* The connection broke: forget the server's state and wake everyone to re-check. */
static void on_disconnect(baton__dispatcher *d)
{
    baton__conn_close(d->conn);
    d->conn = NULL;
    sub_list l = {0};
    baton__map_each(&d->subs, collect, &l);
    for (size_t i = 0; i < l.n; i++) {
        baton__sub *s = l.items[i];
        stop_lingering(d, s);
        s->state = S_UNSUB;
        s->wake_on_confirm = true;
        if (s->inflight) {
            s->inflight = false;
            asem_release(&s->sem);
        }
        add_permits(s, s->refs);
        baton__cond_broadcast(&s->ready);
    }
    for (size_t i = 0; i < l.n; i++)
        maybe_free(d, l.items[i]);
    free(l.items);
    baton__cond_broadcast(&d->unsubscribed);
}

static void on_connect(baton__dispatcher *d, baton__conn *conn)
{
    d->conn = conn;
    d->ping_at = 0;
    sub_list l = {0};
    baton__map_each(&d->subs, collect, &l);
    for (size_t i = 0; i < l.n; i++)
        if (l.items[i]->refs > 0)
            request_reconcile(d, l.items[i]);
    free(l.items);
}

typedef struct linger_scan {
    baton__dispatcher *d;
    int64_t now, earliest;
    sub_list due;
} linger_scan;

static void scan_linger(const char *key, void *val, void *arg)
{
    (void)key;
    baton__sub *s = val;
    linger_scan *ls = arg;
    if (!s->lingering)
        return;
    if (s->linger_until <= ls->now)
        collect(key, s, &ls->due);
    else if (s->linger_until < ls->earliest)
        ls->earliest = s->linger_until;
}

/* Unsubscribes lingering subscriptions whose time is up; returns the poll timeout (ms) until
 * the next one, or -1 if none lingers. */
static int expire_lingering(baton__dispatcher *d)
{
    if (d->lingering == 0)
        return -1;
    linger_scan ls = {d, baton__now_us(), INT64_MAX, {0}};
    baton__map_each(&d->subs, scan_linger, &ls);
    for (size_t i = 0; i < ls.due.n; i++) {
        baton__sub *s = ls.due.items[i];
        stop_lingering(d, s);
        if (s->refs == 0)
            request_reconcile(d, s);
    }
    free(ls.due.items);
    if (ls.earliest == INT64_MAX)
        return -1;
    int64_t ms = (ls.earliest - baton__now_us() + 999) / 1000;
    return ms < 0 ? 0 : (int)ms;
}

static void drain_pipe(int fd)
{
    char buf[64];
    while (read(fd, buf, sizeof buf) > 0) {
    }
}

/* Does the I/O poll() allowed and dispatches every complete reply. false: broken. */
static bool do_io(baton__dispatcher *d, short revents)
{
    if (!baton__conn_io(d->conn, revents))
        return false;
    for (;;) {
        redisReply *reply = NULL;
        if (baton__conn_next(d->conn, &reply) != BATON_OK)
            return false;
        if (!reply)
            return true;
        baton__dispatch_reply(d, reply);
        freeReplyObject(reply);
    }
}

/* Keepalive: a server that went silent (stopped, partitioned, its host gone) never closes
 * the connection, and TCP's own keepalive cannot tell a stopped process from an idle one.
 * After half of keepalive_ms without a byte the dispatcher sends PING (allowed while
 * subscribed); without a byte for another half the connection is given up, which wakes
 * every waiter to re-check and reconnects. Returns false when it must be given up, and
 * lowers *timeout_ms (-1: none) to the next moment this needs to run. */
static bool keepalive(baton__dispatcher *d, int *timeout_ms)
{
    int64_t half = d->c->cfg.keepalive_ms * 500, now = baton__now_us();
    int64_t heard = baton__conn_last_read(d->conn);
    if (d->ping_at && heard >= d->ping_at)
        d->ping_at = 0; /* answered, or something else arrived: alive */
    if (d->ping_at && now - d->ping_at >= half)
        return false;
    if (!d->ping_at && now - heard >= half) {
        const char *argv[1] = {"PING"};
        if (baton__conn_append(d->conn, 1, argv, NULL) == BATON_OK)
            d->ping_at = now;
    }
    int64_t next = (d->ping_at ? d->ping_at : heard) + half;
    int ms = next <= now ? 0 : (int)((next - now + 999) / 1000);
    if (*timeout_ms < 0 || ms < *timeout_ms)
        *timeout_ms = ms;
    return true;
}

static void *dispatcher_main(void *arg)
{
    baton__dispatcher *d = arg;
    int64_t backoff_ms = 0; /* pause before the next connection attempt; 0: none */
    bool pausing = false;
    baton__mutex_lock(&d->mu);
    while (!d->closing) {
        if (!d->conn) {
            if (needed(d) && !pausing) {
                baton__mutex_unlock(&d->mu);
                baton__conn *conn = NULL;
                int rc = baton__conn_open(d->c, &conn);
                baton__stat_sub_connect(d->c, rc);
                baton__mutex_lock(&d->mu);
                if (rc == BATON_OK) {
                    on_connect(d, conn);
                    continue;
                }
                /* The server is away: pause 10 ms, doubling up to MAX_BACKOFF_MS, so a
                 * restarted server is found quickly without hammering a dead one. */
                backoff_ms =
                    backoff_ms ? (backoff_ms * 2 > MAX_BACKOFF_MS ? MAX_BACKOFF_MS : backoff_ms * 2)
                               : 10;
                pausing = true;
            }
            /* Sleep until somebody needs the connection, or the pause ends. */
            struct pollfd p = {d->pipe[0], POLLIN, 0};
            int timeout = needed(d) ? (int)backoff_ms : -1;
            baton__mutex_unlock(&d->mu);
            int n = poll(&p, 1, timeout);
            baton__mutex_lock(&d->mu);
            if (n > 0)
                drain_pipe(d->pipe[0]);
            if (n == 0)
                pausing = false;
            if (!needed(d)) {
                pausing = false;
                backoff_ms = 0;
            }
            continue;
        }
        backoff_ms = 0;
        int timeout = expire_lingering(d);
        if (d->moved) {
            d->moved = false;
            on_disconnect(d); /* waiters wake and re-check on the new master */
            continue;
        }
        if (!keepalive(d, &timeout)) {
            baton__log(d->c, BATON_LOG_WARN, "pub/sub connection: no answer to PING within %lld ms",
                       (long long)d->c->cfg.keepalive_ms);
            on_disconnect(d);
            continue;
        }
        struct pollfd p[2] = {{d->pipe[0], POLLIN, 0},
                              {baton__conn_fd(d->conn), baton__conn_events(d->conn), 0}};
        baton__mutex_unlock(&d->mu);
        int n = poll(p, 2, timeout);
        baton__mutex_lock(&d->mu);
        if (n < 0)
            continue; /* EINTR */
        if (p[0].revents)
            drain_pipe(d->pipe[0]);
        if (!d->conn)
            continue;
        /* New output (a SUBSCRIBE appended while this thread slept) goes out even when
         * only the pipe woke it. */
        if (!do_io(d, p[1].revents))
            on_disconnect(d);
    }
    baton__mutex_unlock(&d->mu);
    return NULL;
}

/* ------------------------------- the waiters' side ------------------------------------ */

/* The topology's events (conn.h): when another node is master, the subscriber connection
 * moves to it (on a demoted master it would still hear the replicated messages, but a dead
 * one would cost the keepalive bound). */
static void on_event(baton_client *c, int event, void *arg)
{
    (void)arg;
    if (event != BATON__EV_MASTER)
        return;
    baton__mutex_lock(&c->lazy_mu);
    baton__dispatcher *d = c->disp;
    baton__mutex_unlock(&c->lazy_mu);
    if (!d)
        return;
    baton__mutex_lock(&d->mu);
    if (d->conn) {
        d->moved = true;
        wake_thread(d);
    }
    baton__mutex_unlock(&d->mu);
}

static int get_dispatcher(baton_client *c, baton__dispatcher **out)
{
    baton__mutex_lock(&c->lazy_mu);
    if (!c->disp) {
        baton__dispatcher *d = calloc(1, sizeof *d);
        if (!d) {
            baton__mutex_unlock(&c->lazy_mu);
            return baton__fail(c, BATON_ENOMEM, "out of memory");
        }
        d->c = c;
        baton__mutex_init(&d->mu);
        baton__cond_init(&d->unsubscribed);
        baton__map_init(&d->subs);
        if (pipe2(d->pipe, O_NONBLOCK | O_CLOEXEC) != 0) {
            baton__mutex_destroy(&d->mu);
            baton__cond_destroy(&d->unsubscribed);
            free(d);
            baton__mutex_unlock(&c->lazy_mu);
            return baton__fail(c, BATON_ENOMEM, "pipe: %s", strerror(errno));
        }
        int rc = pthread_create(&d->thread, NULL, dispatcher_main, d);
        if (rc != 0) {
            close(d->pipe[0]);
            close(d->pipe[1]);
            baton__mutex_destroy(&d->mu);
            baton__cond_destroy(&d->unsubscribed);
            free(d);
            baton__mutex_unlock(&c->lazy_mu);
            return baton__fail(c, BATON_ENOMEM, "pthread_create: %s", strerror(rc));
        }
        c->disp = d;
        baton__epoch_hook_add(c, on_event, NULL);
    }
    *out = c->disp;
    baton__mutex_unlock(&c->lazy_mu);
    return BATON_OK;
}

/* Drops a reference; the last one unsubscribes, or (linger) keeps a live subscription for
 * LINGER_MS in case this process waits on the channel again soon. */
static void release_locked(baton__dispatcher *d, baton__sub *s, bool linger)
{
    s->refs--;
    if (s->refs > 0)
        return;
    d->wanted--;
    s->permits = 0;
    if (linger && s->kind != BATON__SUB_LATCH && s->state == S_SUBSCRIBED && d->conn &&
        !s->queued && !s->inflight) {
        if (!s->lingering) {
            s->lingering = true;
            d->lingering++;
        }
        s->linger_until = baton__now_us() + LINGER_MS * 1000;
        wake_thread(d); /* its poll timeout must cover the new deadline */
        return;
    }
    stop_lingering(d, s);
    if (s->state == S_SUBSCRIBED || s->state == S_SUBSCRIBING)
        request_reconcile(d, s);
    maybe_free(d, s);
}

/* Drops a reference (under d->mu) and, if it was the last, waits until the server has
 * confirmed the UNSUBSCRIBE, at most until limit. */
static void release_locked_sync(baton__dispatcher *d, baton__sub *s, int64_t limit)
{
    char *channel = baton__strdup(s->channel);
    release_locked(d, s, false); /* s may be gone from here on: look it up by name */
    while (channel && !d->closing) {
        baton__sub *cur = baton__map_get(&d->subs, channel);
        if (!cur || cur->refs > 0 || !d->conn ||
            (cur->state != S_UNSUBSCRIBING && cur->state != S_SUBSCRIBED))
            break;
        if (baton__cond_wait_until(&d->unsubscribed, &d->mu, limit) == ETIMEDOUT)
            break;
    }
    free(channel);
}

int baton__sub_acquire(baton_client *c, const char *channel, baton__sub_kind kind,
                       int64_t deadline_us, baton__sub **out)
{
    baton__dispatcher *d = NULL;
    int rc = get_dispatcher(c, &d);
    if (rc != BATON_OK)
        return rc;
    baton__mutex_lock(&d->mu);
    baton__sub *s = baton__map_get(&d->subs, channel);
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s || !(s->channel = baton__strdup(channel)) ||
            baton__map_put(&d->subs, channel, s) != BATON_OK) {
            if (s)
                free(s->channel);
            free(s);
            baton__mutex_unlock(&d->mu);
            return baton__fail(c, BATON_ENOMEM, "out of memory");
        }
        s->d = d;
        s->kind = kind;
        s->sem.permits = 1;
        baton__cond_init(&s->wake);
        baton__cond_init(&s->ready);
    }
    if (s->refs++ == 0) {
        d->wanted++;
        stop_lingering(d, s);
        if (!d->conn)
            wake_thread(d); /* it may be idle, disconnected: connect now */
    }
    if (s->state != S_SUBSCRIBED)
        request_reconcile(d, s);
    int64_t timeout_us = c->cfg.command_timeout_ms * 1000;
    int64_t limit = baton__now_us() + timeout_us;
    if (deadline_us < limit)
        limit = deadline_us;
    while (s->state != S_SUBSCRIBED && !d->closing)
        if (baton__cond_wait_until(&s->ready, &d->mu, limit) == ETIMEDOUT)
            break;
    if (s->state == S_SUBSCRIBED) {
        baton__mutex_unlock(&d->mu);
        *out = s;
        return BATON_OK;
    }
    /* Gave up: a SUBSCRIBE still unconfirmed is undone before returning, so nothing is
     * left behind (bounded by one command timeout). */
    release_locked_sync(d, s, baton__now_us() + timeout_us);
    baton__mutex_unlock(&d->mu);
    if (baton__now_us() >= deadline_us)
        return baton__fail(c, BATON_ETIMEDOUT, "timed out subscribing to %s", channel);
    return baton__fail(c, BATON_ECONN, "no confirmation of SUBSCRIBE %s within %lld ms", channel,
                       (long long)c->cfg.command_timeout_ms);
}

baton__sub *baton__sub_try_acquire(baton_client *c, const char *channel)
{
    baton__mutex_lock(&c->lazy_mu);
    baton__dispatcher *d = c->disp;
    baton__mutex_unlock(&c->lazy_mu);
    if (!d)
        return NULL;
    baton__sub *s = NULL;
    baton__mutex_lock(&d->mu);
    baton__sub *cur = baton__map_get(&d->subs, channel);
    if (cur && cur->state == S_SUBSCRIBED && d->conn && !cur->queued && !cur->inflight) {
        s = cur;
        if (s->refs++ == 0) {
            d->wanted++;
            stop_lingering(d, s);
        }
    }
    baton__mutex_unlock(&d->mu);
    return s;
}

void baton__sub_release(baton_client *c, baton__sub *s)
{
    (void)c;
    baton__dispatcher *d = s->d;
    baton__mutex_lock(&d->mu);
    release_locked(d, s, true);
    baton__mutex_unlock(&d->mu);
}

void baton__sub_release_sync(baton_client *c, baton__sub *s)
{
    baton__dispatcher *d = s->d;
    int64_t limit = baton__now_us() + c->cfg.command_timeout_ms * 1000;
    baton__mutex_lock(&d->mu);
    release_locked_sync(d, s, limit);
    baton__mutex_unlock(&d->mu);
}

uint64_t baton__sub_messages(baton_client *c, baton__sub *s)
{
    (void)c;
    baton__mutex_lock(&s->d->mu);
    uint64_t n = s->messages;
    baton__mutex_unlock(&s->d->mu);
    return n;
}

int baton__sub_wait(baton_client *c, baton__sub *s, int64_t deadline_us)
{
    (void)c;
    baton__dispatcher *d = s->d;
    baton__mutex_lock(&d->mu);
    while (s->permits == 0 && !d->closing)
        if (baton__cond_wait_until(&s->wake, &d->mu, deadline_us) == ETIMEDOUT)
            break;
    int rc = BATON_ETIMEDOUT;
    if (s->permits > 0) {
        s->permits--;
        rc = BATON_OK;
    }
    baton__mutex_unlock(&d->mu);
    return rc;
}

void baton__sub_pin(baton_client *c, bool pin)
{
    baton__dispatcher *d = NULL;
    if (get_dispatcher(c, &d) != BATON_OK)
        return; /* out of memory or threads: restarts are then noticed at the next command */
    baton__mutex_lock(&d->mu);
    d->pinned += pin ? 1 : -1;
    if (pin && !d->conn)
        wake_thread(d); /* connect now, so that the server's run is known */
    baton__mutex_unlock(&d->mu);
}

static void count_subscribed(const char *key, void *val, void *arg)
{
    (void)key;
    if (((baton__sub *)val)->state == S_SUBSCRIBED)
        (*(int *)arg)++;
}

int baton__sub_count(baton_client *c)
{
    int n = 0;
    baton__mutex_lock(&c->lazy_mu);
    baton__dispatcher *d = c->disp;
    baton__mutex_unlock(&c->lazy_mu);
    if (!d)
        return 0;
    baton__mutex_lock(&d->mu);
    baton__map_each(&d->subs, count_subscribed, &n);
    baton__mutex_unlock(&d->mu);
    return n;
}

void baton__dispatcher_free(baton__dispatcher *d, bool forked)
{
    if (!forked) {
        baton__mutex_lock(&d->mu);
        d->closing = true;
        baton__mutex_unlock(&d->mu);
        wake_thread(d);
        pthread_join(d->thread, NULL);
    }
    sub_list l = {0};
    baton__map_each(&d->subs, collect, &l);
    for (size_t i = 0; i < l.n; i++)
        free_sub(l.items[i], forked);
    free(l.items);
    baton__map_free(&d->subs);
    baton__conn_close(d->conn);
    close(d->pipe[0]);
    close(d->pipe[1]);
    if (!forked) {
        baton__mutex_destroy(&d->mu);
        baton__cond_destroy(&d->unsubscribed);
    }
    free(d);
}
