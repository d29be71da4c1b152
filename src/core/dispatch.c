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
 * A release may hand what it releases to a waiter of its own client (cohorting): waits
 * register as candidates on their channel (baton__sub_cand_add), a release picks one that
 * sleeps and marks it offered (baton__sub_offer), then handed (baton__sub_settle), under
 * the mutex; a candidate thread sleeps on a condition of its own and a candidate fiber's
 * waker is known, so the hand-over wakes that waiter alone. Plain wake-ups reach
 * candidate threads through their conditions, one per wake-up, as before.
 *
 * The thread is a poll() loop over the subscriber sockets and a wake-up pipe; replies are
 * parsed with hiredis's reply reader. It starts with the first subscription.
 *
 * On one server (or Sentinel's master) there is one subscriber connection, a "link". On a
 * Cluster there is one link per master that serves a subscribed channel's slot; on Redis 7
 * the subscriptions are sharded (SSUBSCRIBE on the slot's master, and the scripts publish
 * with SPUBLISH, as Redisson does there). A change of the slot map disconnects the links
 * whose channels moved, which wakes their waiters and resubscribes them where they live
 * now; so does a node's unsolicited "sunsubscribe" (its slot moved away) and an error reply
 * (MOVED) to a subscribe.
 */
#define _GNU_SOURCE
#include "internal.h"

#include "client_fields.h"
#include "evloop.h"
#include "conn.h"
#include "slots.h"
#include "topology.h"

#include <hiredis/hiredis.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
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

/* A server that accepts the connection and then refuses what the dispatcher asks (an ACL
 * that denies SUBSCRIBE or the channel, a proxy that drops it) is different: connecting
 * succeeds every time, so the pause above would start over at each attempt, a reconnect
 * storm. A connection dropped after it was asked something (SUBSCRIBE, PING) and before
 * it gave one healthy reply (a confirmation, a message, a PONG) pauses the next attempt
 * REFUSED_MIN_MS, doubling to REFUSED_MAX_MS, each pause drawn between half and all of it
 * (jitter: many clients refused at once do not come back in step); only a healthy reply
 * starts the count over. */
#define REFUSED_MIN_MS 50
#define REFUSED_MAX_MS 2000

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

typedef struct sub_link sub_link;

/* Laid out for size (no holes): 100,000 waiters on 100,000 names are 100,000 of these. */
struct baton__sub {
    baton__dispatcher *d;
    char *channel;
    const baton__sub_type *type; /* how its messages wake its waiters */

    sub_link *link;       /* where it is (un)subscribing or subscribed; NULL when S_UNSUB */
    int refs;             /* threads holding a reference */
    sub_state state;      /* as the server sees it (or will, once confirmed) */
    bool queued;          /* a reconcile waits in the async semaphore */
    bool inflight;        /* a (UN)SUBSCRIBE awaits confirmation, holding the permit */
    bool wake_on_confirm; /* resubscribed after a reconnect: wake waiters when confirmed */
    bool refused;         /* the server refused its SUBSCRIBE (NOPERM): waiters give up */
    bool denied;          /* ... and, until a SUBSCRIBE of it is confirmed again, its
                             sleeping waiters end with that refusal (a permission revoked
                             while they waited): sticky across the resubscriptions */
    bool lingering;       /* refs == 0 but kept subscribed until linger_until */
    bool kept;            /* type->keep: a message came while it lingered */
    int fed;              /* asynchronous waiters fired and not yet running again (disarm) */
    uint64_t sent_seq;    /* order of its last (UN)SUBSCRIBE on the link (refusals) */
    int64_t linger_until; /* monotonic µs */
    int64_t permits;      /* wake-ups not yet consumed, at most refs */
    uint64_t messages;    /* messages that woke waiters, since the entry was made */
    int queued_small;     /* waiters that said they want the least there is (baton__sub_queue) */
    int queued_large;     /* ... and that want more */
    int sleeping;         /* threads in baton__sub_wait (with a wake-up in permits or not) */
    int armed;            /* asynchronous waiters armed (none has a wake-up: they take it) */
    asem sem;
    baton__sub_waker *wakers, *wakers_tail; /* armed asynchronous waiters, FIFO */
    baton__cand *cands, *cands_tail;        /* its client's waiters a release may hand over to
                                               (cohorting: baton__sub_cand_add), first come first */
    int cand_threads;                       /* of them, threads asleep on their own condition */
    int passes;                             /* hand-overs in a row within the client (the bound) */
    baton__sub **followers; /* channels of one waiter that its messages wake too (the
                               line's first waiter hears the shared channel:
                               baton__sub_follow) */
    size_t nfollowers, capfollowers;
    /* permits became positive: the threads asleep in baton__sub_wait without a candidate
     * of their own sleep on it; made by the first of them (a fiber never needs it; its
     * state changing: d->ready) */
    pthread_cond_t *wake;
    baton__sub *linger_prev, *linger_next; /* on the dispatcher's list while it lingers */
};

/* One subscriber connection: to the client's target, or to one master of a Cluster. */
struct sub_link {
    baton__pool *pool;  /* the node (its address; the connection is not pooled) */
    baton__conn *conn;  /* NULL while disconnected */
    int64_t ping_at;    /* monotonic µs a keepalive PING was sent and not yet answered; 0 */
    int64_t backoff_ms; /* pause before the next connection attempt; 0: none */
    int64_t refused_ms; /* pause after a connection dropped before a healthy reply; 0: none */
    bool healthy;       /* the connection gave a healthy reply (refused_ms starts over) */
    bool asked;         /* the connection was sent (UN)SUBSCRIBE or PING */
    int64_t retry_at;   /* monotonic µs: no connection attempt before */
    int subs;           /* subscriptions (being made, live or being undone) on it */
    bool want;          /* a subscription waits for it to connect */
    bool master;        /* Cluster: its node serves slots now (the pin keeps it up) */
};

#define MAX_LINKS 64 /* masters of a Cluster with subscribed channels: far above real ones */

struct baton__dispatcher {
    baton_client *c;
    pthread_t thread;
    pthread_mutex_t mu;
    sub_link *links[MAX_LINKS]; /* links[0]: the client's target; a Cluster's masters after */
    int nlinks;
    bool moved;  /* the master moved (Sentinel) or the slot map changed (Cluster) */
    int pipe[2]; /* wakes the thread: new output, closing */
    bool closing;
    baton__map subs;             /* channel -> baton__sub */
    int wanted;                  /* subs with refs > 0 */
    int pinned;                  /* baton__sub_pin() calls not yet undone */
    int lingering;               /* subs lingering (refs == 0, still subscribed) */
    pthread_cond_t unsubscribed; /* an UNSUBSCRIBE was confirmed, or the connection broke */
    pthread_cond_t ready;        /* a subscription's state changed (one for all: 100,000 waiters'
                                  * subscriptions would carry one each, and few wait on it) */
    uint64_t seq;                /* (UN)SUBSCRIBE commands appended, for sent_seq */
    uint64_t rng;                /* the jitter's xorshift state */
    uint64_t refusals;           /* refusals so far (a SUBSCRIBE waiting for its confirmation
                                    ends with the refusal of another on its link, which
                                    drops the link with it) */
    char refusal[160];           /* the server's last refusal of a SUBSCRIBE ("NOPERM ...") */
    /* The lingering subs in the order their lingers end (each lasts LINGER_MS from its last
     * release): the thread looks at those due only, not at every sub (100,000 waiters'
     * channels made each look a scan of them all). */
    baton__sub *linger_head, *linger_tail;
    /* When the thread's poll() returns at the latest (INT64_MAX: only for I/O or the pipe),
     * while it sleeps there; 0 while it is awake (it looks at the deadlines again before it
     * sleeps). A linger that ends later needs no wake-up. */
    int64_t poll_until;
};

/* The link of a node, made on first use; NULL when MAX_LINKS are in use or no memory. */
static sub_link *link_for(baton__dispatcher *d, baton__pool *p)
{
    for (int i = 0; i < d->nlinks; i++)
        if (d->links[i]->pool == p)
            return d->links[i];
    if (d->nlinks == MAX_LINKS)
        return NULL;
    sub_link *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->pool = p;
    d->links[d->nlinks++] = l;
    return l;
}

/* Where a channel's subscription goes: the one link, or on a Cluster the link of the master
 * of the channel's slot (NULL: no node serves it as far as the client knows). */
static sub_link *route(baton__dispatcher *d, const char *channel)
{
    if (!baton__topology_cluster(d->c))
        return d->links[0];
    baton__pool *p = baton__topology_slot_pool(d->c, baton__key_slot(channel, strlen(channel)));
    return p ? link_for(d, p) : NULL;
}

static bool any_link_up(const baton__dispatcher *d)
{
    for (int i = 0; i < d->nlinks; i++)
        if (d->links[i]->conn)
            return true;
    return false;
}

static void set_link(baton__sub *s, sub_link *l)
{
    if (s->link)
        s->link->subs--;
    s->link = l;
    if (l)
        l->subs++;
}

/* Whether a link must be kept up: somebody waits on a channel it serves, or the client
 * holds something whose loss a server restart would cause (the watchdog pins it: the one
 * link, or every master's on a Cluster). */
static bool needed(const baton__dispatcher *d, const sub_link *l)
{
    if (!baton__topology_cluster(d->c))
        return l->want || l->subs > 0 || d->pinned > 0;
    if (!l->pool->host[0])
        return false; /* the client's own target: no channel of a Cluster lives there */
    return l->want || l->subs > 0 || (d->pinned > 0 && l->master);
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
    if (!forked && s->wake)
        baton__cond_destroy(s->wake);
    free(s->wake);
    free(s->followers);
    free(s->channel);
    free(s);
}

static void stop_lingering(baton__dispatcher *d, baton__sub *s)
{
    if (s->lingering) {
        s->lingering = false;
        d->lingering--;
        BATON__UNLINK_TAILED(s, linger_prev, linger_next, d->linger_head, d->linger_tail);
    }
}

/* Frees s if nothing refers to it any more. Called only at the end of top-level paths. */
static void maybe_free(baton__dispatcher *d, baton__sub *s)
{
    if (s->refs == 0 && s->state == S_UNSUB && !s->inflight && !s->queued && s->sem.permits == 1 &&
        !s->sem.head) {
        stop_lingering(d, s);
        baton__map_remove(&d->subs, s->channel);
        free_sub(s, false);
    }
}

static void unlink_waker(baton__sub *s, baton__sub_waker *w)
{
    BATON__UNLINK_TAILED(w, prev, next, s->wakers, s->wakers_tail);
    w->armed = false;
    s->armed--;
}

/* Hands kept wake-ups to armed asynchronous waiters, first armed first. */
static void feed_wakers(baton__sub *s)
{
    while (s->permits > 0 && s->wakers) {
        baton__sub_waker *w = s->wakers;
        unlink_waker(s, w);
        s->permits--;
        s->fed++;
        w->fed = true;
        w->fn(w->arg);
    }
}

/* The waiters a hand-over may go to sleep on a condition of their own (a thread) or have
 * their waker armed (a fiber), so that a hand-over wakes that one only. A wake-up for
 * whoever tries next goes to one of them or to a thread asleep on s->wake. */
static void wake_one(baton__sub *s)
{
    if (s->cand_threads > 0)
        for (baton__cand *k = s->cands; k; k = k->next)
            if (k->asleep && !k->waker && !k->signalled && k->state == BATON__CAND_IDLE) {
                k->signalled = true;
                baton__cond_signal(k->cond);
                return;
            }
    if (s->wake)
        baton__cond_signal(s->wake);
}

static void wake_every(baton__sub *s)
{
    if (s->wake)
        baton__cond_broadcast(s->wake);
    if (s->cand_threads > 0)
        for (baton__cand *k = s->cands; k; k = k->next)
            if (k->asleep && !k->waker) {
                k->signalled = true;
                baton__cond_signal(k->cond);
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
        wake_every(s);
    else
        for (int64_t i = 0; i < added; i++)
            wake_one(s);
    feed_wakers(s);
}

/* The (un)subscribe verbs: sharded on a Redis 7 Cluster. */
static const char *verb(const baton__dispatcher *d, bool subscribe)
{
    if (baton__sharded_pubsub(d->c))
        return subscribe ? "SSUBSCRIBE" : "SUNSUBSCRIBE";
    return subscribe ? "SUBSCRIBE" : "UNSUBSCRIBE";
}

/* The async semaphore's one callback: make the server's subscription match refs. */
static void reconcile(void *arg)
{
    baton__sub *s = arg;
    baton__dispatcher *d = s->d;
    s->queued = false;
    sub_link *l = NULL;
    const char *v = NULL;
    if (s->refs > 0 && s->state == S_UNSUB) {
        l = route(d, s->channel);
        if (!l)
            baton__topology_kick(d->c); /* nobody serves its slot: a new map is asked for;
                                           its waiters sleep to their bound meanwhile */
        else if (!l->conn) {
            l->want = true; /* the thread connects it, then reconciles again */
            wake_thread(d);
            l = NULL;
        } else {
            v = verb(d, true);
            s->state = S_SUBSCRIBING;
            set_link(s, l);
        }
    } else if (s->refs == 0 && s->state == S_SUBSCRIBED && s->link && s->link->conn) {
        l = s->link;
        v = verb(d, false);
        s->state = S_UNSUBSCRIBING;
    }
    if (v) {
        const char *argv[2] = {v, s->channel};
        if (baton__conn_append(l->conn, 2, argv, NULL) == BATON_OK) {
            baton__stat_inc(d->c, s->refs > 0 ? BATON__ST_SUBSCRIBES : BATON__ST_UNSUBSCRIBES);
            s->sent_seq = ++d->seq;
            s->refused = false;
            l->asked = true;
            s->inflight = true; /* the permit stays taken until the confirmation */
            wake_thread(d);
            return;
        }
        /* out of memory appending: leave the state as it was */
        if (s->refs > 0) {
            s->state = S_UNSUB;
            set_link(s, NULL);
        } else
            s->state = S_SUBSCRIBED;
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

static void on_confirm(baton__dispatcher *d, sub_link *l, bool subscribed, const char *channel)
{
    baton__sub *s = baton__map_get(&d->subs, channel);
    if (s && !s->inflight && !subscribed && s->state == S_SUBSCRIBED && s->link == l) {
        /* Unasked: the node dropped the subscription (a Cluster's slot moved away). Its
         * waiters re-check now, and it is made again where the slot lives. */
        stop_lingering(d, s);
        s->state = S_UNSUB;
        set_link(s, NULL);
        s->wake_on_confirm = true;
        add_permits(s, s->refs);
        baton__topology_kick(d->c);
        if (s->refs > 0)
            request_reconcile(d, s);
        maybe_free(d, s);
        return;
    }
    if (!s || !s->inflight || s->link != l)
        return;
    if (subscribed && s->state != S_SUBSCRIBING)
        return;
    if (!subscribed && s->state != S_UNSUBSCRIBING)
        return;
    s->state = subscribed ? S_SUBSCRIBED : S_UNSUB;
    s->inflight = false;
    if (subscribed)
        s->denied = false;
    if (!subscribed) {
        set_link(s, NULL);
        baton__cond_broadcast(&d->unsubscribed);
    }
    if (subscribed && s->wake_on_confirm) {
        s->wake_on_confirm = false;
        add_permits(s, s->refs);
    }
    baton__cond_broadcast(&d->ready);
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

int64_t baton__sub_payload_int(const char *payload, size_t len, bool *ok)
{
    return parse_int(payload, len, ok);
}

static void on_message(baton__dispatcher *d, const redisReply *ch, const redisReply *payload)
{
    if (ch->type != REDIS_REPLY_STRING || payload->type != REDIS_REPLY_STRING)
        return;
    baton__stat_inc(d->c, BATON__ST_MESSAGES);
    baton__sub *s = baton__map_get(&d->subs, ch->str);
    if (s && s->refs == 0 && s->lingering && s->type->keep)
        s->kept = true; /* for the next wait on it: it may have queued already */
    if (!s || s->refs == 0)
        return;
    int64_t n = s->type->wakeups(payload->str, payload->len, s->refs, s->permits + s->fed);
    if (n > 0)
        s->messages++;
    add_permits(s, n);
    /* its followers: one waiter each, woken by a message that would wake a lone waiter */
    if (s->nfollowers > 0 && s->type->wakeups(payload->str, payload->len, 1, 0) > 0)
        for (size_t i = 0; i < s->nfollowers; i++)
            add_permits(s->followers[i], 1);
}

typedef struct sub_list {
    baton__sub **items;
    size_t n, cap;
} sub_list;

static void collect(const char *key, void *val, void *arg)
{
    (void)key;
    sub_list *l = arg;
    if (!baton__grow(&l->items, &l->cap, l->n, sizeof *l->items, 16))
        return;
    l->items[l->n++] = val;
}

/* The server refused an (UN)SUBSCRIBE on link l (an ACL without the channel, or without
 * the command): replies come in the order of the commands, so it is the oldest one still
 * awaiting its confirmation there. Its waiters give up with the server's words rather than
 * wait for a subscription that will not come; the link is dropped (the caller) and made
 * again for the others, after a pause that grows (REFUSED_MIN_MS). */
static void refused(baton__dispatcher *d, sub_link *l, const char *why)
{
    sub_list all = {0};
    baton__map_each(&d->subs, collect, &all);
    baton__sub *oldest = NULL;
    for (size_t i = 0; i < all.n; i++) {
        baton__sub *s = all.items[i];
        if (s->link == l && s->inflight && (!oldest || s->sent_seq < oldest->sent_seq))
            oldest = s;
    }
    free(all.items);
    snprintf(d->refusal, sizeof d->refusal, "%s", why);
    d->refusals++;
    baton__log(d->c, BATON_LOG_WARN, "pub/sub connection: the server replied %s", why);
    if (oldest && oldest->state == S_SUBSCRIBING) {
        oldest->refused = true;
        oldest->denied = true;
        baton__cond_broadcast(&d->ready);
        /* a resubscription (after a reconnection) refused: the channel's permission was
         * revoked while its waiters slept; they end with the refusal (baton__sub_wait)
         * rather than sleep to their deadlines while the link reconnects in vain */
        wake_every(oldest);
    }
}

/* Decodes one reply read from a subscriber connection. Anything not understood is ignored:
 * a pushed message can never crash or confuse the dispatcher. An error reply (a Cluster's
 * MOVED to a subscribe, say) returns false: the link is dropped and made again, which
 * resubscribes every channel where it lives now. */
static bool dispatch_on(baton__dispatcher *d, sub_link *l, const redisReply *r)
{
    if (r && r->type == REDIS_REPLY_ERROR && r->str && strncmp(r->str, "NOPERM", 6) == 0) {
        refused(d, l, r->str);
        return false;
    }
    if (r && r->type != REDIS_REPLY_ERROR) {
        l->healthy = true; /* a confirmation, a message, a PONG: reconnections start over */
        l->refused_ms = 0;
    }
    if (r && r->type == REDIS_REPLY_ERROR) {
        bool ask;
        int slot, port;
        char host[BATON__HOST_LEN];
        if (baton__topology_cluster(d->c) && r->str &&
            baton__parse_redirect(r->str, &ask, &slot, host, sizeof host, &port) == BATON_OK &&
            !ask && host[0]) {
            baton__pool *to = baton__topology_node_pool(d->c, host, port);
            if (to)
                baton__topology_moved(d->c, slot, to);
        } else
            baton__topology_kick(d->c);
        baton__log(d->c, BATON_LOG_WARN, "pub/sub connection: the server replied %s",
                   r->str ? r->str : "an error");
        return false;
    }
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 3)
        return true;
    const redisReply *kind = r->element[0];
    if (!kind || kind->type != REDIS_REPLY_STRING || !r->element[1] || !r->element[2])
        return true;
    const char *k = kind->str;
    if (strcmp(k, "message") == 0 || strcmp(k, "smessage") == 0)
        on_message(d, r->element[1], r->element[2]);
    else if (r->element[1]->type == REDIS_REPLY_STRING) {
        if (strcmp(k, "ssubscribe") == 0 || strcmp(k, "sunsubscribe") == 0)
            k++; /* sharded: the same confirmations */
        if (strcmp(k, "subscribe") == 0 || strcmp(k, "unsubscribe") == 0)
            on_confirm(d, l, k[0] == 's', r->element[1]->str);
    }
    return true;
}

void baton__dispatch_reply(baton__dispatcher *d, const redisReply *r)
{
    (void)dispatch_on(d, d->links[0], r);
}

/* A link's connection broke (or is dropped): forget the server's state of its channels and
 * wake their waiters to re-check. */
static void on_disconnect(baton__dispatcher *d, sub_link *lk)
{
    baton__conn_close(lk->conn);
    lk->conn = NULL;
    lk->ping_at = 0;
    sub_list l = {0};
    baton__map_each(&d->subs, collect, &l);
    for (size_t i = 0; i < l.n; i++) {
        baton__sub *s = l.items[i];
        if (s->link != lk)
            continue;
        stop_lingering(d, s);
        s->state = S_UNSUB;
        set_link(s, NULL);
        s->wake_on_confirm = true;
        if (s->inflight) {
            s->inflight = false;
            asem_release(&s->sem);
        }
        add_permits(s, s->refs);
        if (s->refs > 0)
            request_reconcile(d, s); /* where it lives now (the same link, reconnected) */
    }
    baton__cond_broadcast(&d->ready); /* once for all: one condition for every channel */
    for (size_t i = 0; i < l.n; i++)
        maybe_free(d, l.items[i]);
    free(l.items);
    baton__cond_broadcast(&d->unsubscribed);
}

/* Every subscription that has waiters and no server state asks to be made (where its
 * channel lives now). */
static void reconcile_waiting(baton__dispatcher *d)
{
    sub_list l = {0};
    baton__map_each(&d->subs, collect, &l);
    for (size_t i = 0; i < l.n; i++)
        if (l.items[i]->refs > 0 && l.items[i]->state == S_UNSUB)
            request_reconcile(d, l.items[i]);
    free(l.items);
}

static void on_connect(baton__dispatcher *d, sub_link *lk, baton__conn *conn)
{
    lk->conn = conn;
    lk->ping_at = 0;
    lk->want = false;
    lk->backoff_ms = 0; /* the server is there; refused_ms waits for a healthy reply */
    lk->healthy = lk->asked = false;
    reconcile_waiting(d);
}

/* A pause drawn between half and all of ms. */
static int64_t jitter(baton__dispatcher *d, int64_t ms)
{
    if (d->rng == 0)
        d->rng = (uint64_t)baton__now_us() * 0x9e3779b97f4a7c15ULL | 1;
    d->rng ^= d->rng << 13;
    d->rng ^= d->rng >> 7;
    d->rng ^= d->rng << 17;
    return ms / 2 + (int64_t)(d->rng % (uint64_t)(ms / 2 + 1));
}

/* The link's connection was dropped (broken, silent, refused): when to connect again. One
 * that had been healthy, or had not been asked anything yet (the watchdog's pin), is made
 * again at once (10 ms: a restart, a cut); one dropped after it was asked something and
 * before its first healthy reply waits a pause that grows (REFUSED_MIN_MS). */
static void schedule_reconnect(baton__dispatcher *d, sub_link *l)
{
    int64_t ms = 10;
    if (!l->healthy && l->asked) {
        l->refused_ms = l->refused_ms ? (l->refused_ms * 2 > REFUSED_MAX_MS ? REFUSED_MAX_MS
                                                                            : l->refused_ms * 2)
                                      : REFUSED_MIN_MS;
        ms = jitter(d, l->refused_ms);
    }
    l->healthy = l->asked = false;
    l->retry_at = baton__now_us() + ms * 1000;
}

/* The slot map changed or the master moved: every link whose channels live elsewhere now
 * is dropped (its waiters wake and re-check; their subscriptions are made where the slots
 * live). Under Sentinel the one link goes (it talks to the old master). With the watchdog's
 * pin on a Cluster, every master gets a link, so that its restart is seen. */
static void on_moved(baton__dispatcher *d)
{
    if (!baton__topology_cluster(d->c)) {
        if (d->links[0]->conn)
            on_disconnect(d, d->links[0]);
        return;
    }
    sub_list l = {0};
    baton__map_each(&d->subs, collect, &l);
    bool drop[MAX_LINKS] = {false};
    for (size_t i = 0; i < l.n; i++) {
        baton__sub *s = l.items[i];
        if (s->link && route(d, s->channel) != s->link)
            for (int j = 0; j < d->nlinks; j++)
                drop[j] |= d->links[j] == s->link;
    }
    free(l.items);
    for (int j = 0; j < d->nlinks; j++)
        if (drop[j] && d->links[j]->conn)
            on_disconnect(d, d->links[j]); /* may free subscriptions: listed again below */
    /* Subscriptions waiting for a link (to a node that may be gone) are routed again: each
     * link is wanted again only by those whose slot it still serves. */
    for (int j = 0; j < d->nlinks; j++)
        d->links[j]->want = false;
    reconcile_waiting(d);
}

/* Pinned on a Cluster: a link to every master (made, not yet connected: the loop does). */
static void pin_masters(baton__dispatcher *d)
{
    if (d->pinned == 0 || !baton__topology_cluster(d->c))
        return;
    baton__pool *m[MAX_LINKS];
    size_t n = baton__topology_masters(d->c, m, MAX_LINKS);
    for (int j = 0; j < d->nlinks; j++)
        d->links[j]->master = false;
    for (size_t i = 0; i < n; i++) {
        sub_link *l = link_for(d, m[i]);
        if (l)
            l->master = true;
    }
}

/* Unsubscribes lingering subscriptions whose time is up; returns the poll timeout (ms) until
 * the next one, or -1 if none lingers. */
static int expire_lingering(baton__dispatcher *d)
{
    if (d->lingering == 0)
        return -1;
    int64_t now = baton__now_us();
    baton__sub *s;
    while ((s = d->linger_head) && s->linger_until <= now) {
        stop_lingering(d, s);
        if (s->refs == 0)
            request_reconcile(d, s);
    }
    if (!d->linger_head)
        return -1;
    int64_t ms = (d->linger_head->linger_until - baton__now_us() + 999) / 1000;
    return ms < 0 ? 0 : (int)ms;
}

static void drain_pipe(int fd)
{
    char buf[64];
    while (read(fd, buf, sizeof buf) > 0) {
    }
}

/* How many replies one turn of the loop takes from one link: a flood of messages is
 * taken in batches, and between two the thread lets go of its mutex (waiters whose
 * deadline came can return) and looks at its other links, its pipe and its timers. */
#define REPLIES_PER_TURN 4096

/* Does the I/O poll() allowed and dispatches the complete replies, a batch at most (the
 * link's conn then has more: the loop comes back at once). false: broken. */
static bool do_io(baton__dispatcher *d, sub_link *l, short revents)
{
    int taken = 0;
    for (;;) {
        if (!baton__conn_io(l->conn, revents))
            return false;
        for (;;) {
            redisReply *reply = NULL;
            if (baton__conn_next(l->conn, &reply) != BATON_OK)
                return false;
            if (!reply)
                break;
            bool ok = dispatch_on(d, l, reply);
            freeReplyObject(reply);
            if (!ok || !l->conn)
                return false;
            taken++;
        }
        if (!baton__conn_more(l->conn) || taken >= REPLIES_PER_TURN)
            return true;
        revents = POLLIN; /* more may be there: read on without asking poll() */
    }
}

/* Keepalive: a server that went silent (stopped, partitioned, its host gone) never closes
 * the connection, and TCP's own keepalive cannot tell a stopped process from an idle one.
 * After half of keepalive_ms without a byte the dispatcher sends PING (allowed while
 * subscribed); without a byte for another half the connection is given up, which wakes
 * every waiter to re-check and reconnects. Returns false when it must be given up, and
 * lowers *timeout_ms (-1: none) to the next moment this needs to run. */
static bool keepalive(baton__dispatcher *d, sub_link *l, int *timeout_ms)
{
    int64_t half = d->c->cfg.keepalive_ms * 500, now = baton__now_us();
    int64_t heard = baton__conn_last_read(l->conn);
    if (l->ping_at && heard >= l->ping_at)
        l->ping_at = 0; /* answered, or something else arrived: alive */
    if (l->ping_at && now - l->ping_at >= half)
        return false;
    if (!l->ping_at && now - heard >= half) {
        const char *argv[1] = {"PING"};
        if (baton__conn_append(l->conn, 1, argv, NULL) == BATON_OK) {
            l->ping_at = now;
            l->asked = true;
        }
    }
    int64_t next = (l->ping_at ? l->ping_at : heard) + half;
    int ms = next <= now ? 0 : (int)((next - now + 999) / 1000);
    if (*timeout_ms < 0 || ms < *timeout_ms)
        *timeout_ms = ms;
    return true;
}

static void lower(int *timeout_ms, int64_t at_us)
{
    int64_t now = baton__now_us();
    int ms = at_us <= now ? 0 : (int)((at_us - now + 999) / 1000);
    if (*timeout_ms < 0 || ms < *timeout_ms)
        *timeout_ms = ms;
}

/* Connects the links that are needed and due (with d->mu released while connecting); a
 * failed attempt pauses that link 10 ms, doubling up to MAX_BACKOFF_MS, so a restarted
 * server is found quickly without hammering a dead one. Lowers *timeout_ms to the next
 * retry. */
static void connect_links(baton__dispatcher *d, int *timeout_ms)
{
    for (int i = 0; i < d->nlinks && !d->closing; i++) {
        sub_link *l = d->links[i];
        if (l->conn || !needed(d, l))
            continue;
        if (baton__now_us() < l->retry_at) {
            lower(timeout_ms, l->retry_at);
            continue;
        }
        baton__mutex_unlock(&d->mu);
        baton__conn *conn = NULL;
        int rc = l->pool->host[0] ? baton__conn_open_node(d->c, l->pool, &conn)
                                  : baton__conn_open(d->c, &conn);
        baton__stat_sub_connect(d->c, rc);
        baton__mutex_lock(&d->mu);
        if (rc == BATON_OK) {
            on_connect(d, l, conn);
            continue;
        }
        l->backoff_ms = l->backoff_ms ? (l->backoff_ms * 2 > MAX_BACKOFF_MS ? MAX_BACKOFF_MS
                                                                            : l->backoff_ms * 2)
                                      : 10;
        l->retry_at = baton__now_us() + l->backoff_ms * 1000;
        lower(timeout_ms, l->retry_at);
    }
}

static void *dispatcher_main(void *arg)
{
    baton__dispatcher *d = arg;
    struct pollfd p[MAX_LINKS + 1];
    sub_link *polled[MAX_LINKS + 1];
    baton__mutex_lock(&d->mu);
    while (!d->closing) {
        if (d->moved) {
            d->moved = false;
            on_moved(d); /* waiters wake and re-check where their channels live now */
        }
        pin_masters(d);
        int timeout = expire_lingering(d);
        connect_links(d, &timeout);
        if (d->closing)
            break;
        int n = 1;
        p[0] = (struct pollfd){d->pipe[0], POLLIN, 0};
        for (int i = 0; i < d->nlinks; i++) {
            sub_link *l = d->links[i];
            if (!l->conn)
                continue;
            if (!keepalive(d, l, &timeout)) {
                baton__log(d->c, BATON_LOG_WARN,
                           "pub/sub connection: no answer to PING within %lld ms",
                           (long long)d->c->cfg.keepalive_ms);
                on_disconnect(d, l);
                schedule_reconnect(d, l);
                continue;
            }
            polled[n] = l;
            p[n++] = (struct pollfd){baton__conn_fd(l->conn), baton__conn_events(l->conn), 0};
            if (baton__conn_more(l->conn))
                timeout = 0; /* a batch was left to take (do_io) */
        }
        d->poll_until = timeout < 0 ? INT64_MAX : baton__now_us() + (int64_t)timeout * 1000;
        baton__mutex_unlock(&d->mu);
        int got = poll(p, (nfds_t)n, timeout);
        baton__mutex_lock(&d->mu);
        d->poll_until = 0;
        if (got < 0)
            continue; /* EINTR */
        if (p[0].revents)
            drain_pipe(d->pipe[0]);
        /* New output (a SUBSCRIBE appended while this thread slept) goes out even when
         * only the pipe woke it. */
        for (int i = 1; i < n; i++) {
            sub_link *l = polled[i];
            if (l->conn && baton__conn_more(l->conn))
                p[i].revents |= POLLIN;
            if (l->conn && baton__conn_fd(l->conn) == p[i].fd && !do_io(d, l, p[i].revents)) {
                if (l->conn)
                    on_disconnect(d, l);
                schedule_reconnect(d, l); /* an error reply, a refusal: not in a loop */
            }
        }
    }
    baton__mutex_unlock(&d->mu);
    return NULL;
}

/* ------------------------------- the waiters' side ------------------------------------ */

/* The client's dispatcher if one was made (the first wait makes it), else NULL. */
static baton__dispatcher *dispatcher_if_any(baton_client *c)
{
    baton__mutex_lock(&c->lazy_mu);
    baton__dispatcher *d = c->disp;
    baton__mutex_unlock(&c->lazy_mu);
    return d;
}

/* The topology's events (conn.h): when another node is master, the subscriber connection
 * moves to it (on a demoted master it would still hear the replicated messages, but a dead
 * one would cost the keepalive bound); on a Cluster, the links whose channels moved. */
static void on_event(baton_client *c, int event, void *arg)
{
    (void)arg;
    if (event != BATON__EV_MASTER)
        return;
    baton__dispatcher *d = dispatcher_if_any(c);
    if (!d)
        return;
    baton__mutex_lock(&d->mu);
    d->moved = true;
    wake_thread(d);
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
        if (!link_for(d, c->pool)) {
            free(d);
            baton__mutex_unlock(&c->lazy_mu);
            return baton__fail(c, BATON_ENOMEM, "out of memory");
        }
        baton__mutex_init(&d->mu);
        baton__cond_init(&d->unsubscribed);
        baton__cond_init(&d->ready);
        baton__map_init_borrowing(&d->subs);
        const char *what = "pipe";
        int err = pipe2(d->pipe, O_NONBLOCK | O_CLOEXEC) != 0 ? errno : 0;
        if (err == 0) {
            what = "pthread_create";
            err = pthread_create(&d->thread, NULL, dispatcher_main, d);
            if (err != 0) {
                close(d->pipe[0]);
                close(d->pipe[1]);
            }
        }
        if (err != 0) {
            free(d->links[0]);
            baton__mutex_destroy(&d->mu);
            baton__cond_destroy(&d->unsubscribed);
            baton__cond_destroy(&d->ready);
            free(d);
            baton__mutex_unlock(&c->lazy_mu);
            return baton__fail(c, BATON_ENOMEM, "%s: %s", what, strerror(err));
        }
        c->disp = d;
        baton__epoch_hook_add(c, on_event, NULL);
    }
    *out = c->disp;
    baton__mutex_unlock(&c->lazy_mu);
    return BATON_OK;
}

/* The first reference on s (refs was 0): wanted again, no longer lingering; a message kept
 * while it lingered is its waiter's wake-up. */
static void first_ref(baton__dispatcher *d, baton__sub *s)
{
    d->wanted++;
    stop_lingering(d, s);
    if (s->kept) {
        s->kept = false;
        s->permits = 1;
    }
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
    s->kept = false;
    if (linger && s->type->linger && s->state == S_SUBSCRIBED && s->link && s->link->conn &&
        !s->queued && !s->inflight) {
        stop_lingering(d, s); /* to the end of the list: its linger ends last */
        s->lingering = true;
        d->lingering++;
        s->linger_until = baton__now_us() + LINGER_MS * 1000;
        BATON__APPEND(s, linger_prev, linger_next, d->linger_head, d->linger_tail);
        if (s->linger_until < d->poll_until)
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
        if (!cur || cur->refs > 0 || !cur->link || !cur->link->conn ||
            (cur->state != S_UNSUBSCRIBING && cur->state != S_SUBSCRIBED))
            break;
        if (baton__cond_wait_until(&d->unsubscribed, &d->mu, limit) == ETIMEDOUT)
            break;
    }
    free(channel);
}

int baton__sub_acquire(baton_client *c, const char *channel, const baton__sub_type *type,
                       int64_t deadline_us, const baton__waiting *wt, baton__sub **out)
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
            baton__map_put(&d->subs, s->channel, s) != BATON_OK) { /* the key: its channel */
            if (s)
                free(s->channel);
            free(s);
            baton__mutex_unlock(&d->mu);
            return baton__fail(c, BATON_ENOMEM, "out of memory");
        }
        s->d = d;
        s->type = type;
        s->sem.permits = 1;
    }
    if (s->refs++ == 0)
        first_ref(d, s);
    s->refused = false; /* this waiter hears the answer to the next SUBSCRIBE */
    if (s->state != S_SUBSCRIBED)
        request_reconcile(d, s);
    int64_t timeout_us = c->cfg.command_timeout_ms * 1000;
    int64_t limit = baton__now_us() + timeout_us;
    if (deadline_us < limit)
        limit = deadline_us;
    /* A cancellation (baton__sub_wake_all broadcasts `ready`) ends the wait for the
     * confirmation too: it may be slow to come (the first link still connecting). */
    bool cancelled = false, refused = false;
    uint64_t refusals = d->refusals;
    while (s->state != S_SUBSCRIBED && !d->closing) {
        if (wt && (cancelled = baton__wait_cancelled(c, wt)))
            break;
        if ((refused = s->refused || s->denied || d->refusals != refusals))
            break;
        if (baton__cond_wait_until(&d->ready, &d->mu, limit) == ETIMEDOUT)
            break;
    }
    if (s->state == S_SUBSCRIBED) {
        baton__mutex_unlock(&d->mu);
        *out = s;
        return BATON_OK;
    }
    char why[sizeof d->refusal];
    snprintf(why, sizeof why, "%s", d->refusal);
    /* Gave up: a SUBSCRIBE still unconfirmed is undone before returning, so nothing is
     * left behind (bounded by one command timeout, and by the call's deadline). */
    int64_t undo = baton__now_us() + timeout_us;
    if (deadline_us != BATON__NO_DEADLINE) {
        int64_t bound = (deadline_us > baton__now_us() ? deadline_us : baton__now_us()) +
                        BATON__UNSUB_GRACE_MS * 1000;
        if (bound < undo)
            undo = bound;
    }
    release_locked_sync(d, s, undo);
    baton__mutex_unlock(&d->mu);
    if (cancelled)
        return baton__fail(c, BATON_ECANCELED, "wait cancelled while subscribing to %s", channel);
    if (refused) {
        /* the code the same words would have as a command's reply (NOPERM), and which
         * subscription they refused */
        redisReply r = {.type = REDIS_REPLY_ERROR, .str = why, .len = strlen(why)};
        return baton__fail(c, baton__reply_error(c, &r), "SUBSCRIBE %s refused: %s", channel, why);
    }
    if (baton__now_us() >= deadline_us)
        return baton__fail(c, BATON_ETIMEDOUT, "timed out subscribing to %s", channel);
    return baton__fail(c, BATON_ECONN, "no confirmation of SUBSCRIBE %s within %lld ms", channel,
                       (long long)c->cfg.command_timeout_ms);
}

baton__sub *baton__sub_try_acquire(baton_client *c, const char *channel)
{
    baton__dispatcher *d = dispatcher_if_any(c);
    if (!d)
        return NULL;
    baton__sub *s = NULL;
    baton__mutex_lock(&d->mu);
    baton__sub *cur = baton__map_get(&d->subs, channel);
    if (cur && cur->state == S_SUBSCRIBED && cur->link && cur->link->conn && !cur->queued &&
        !cur->inflight) {
        s = cur;
        if (s->refs++ == 0)
            first_ref(d, s);
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

void baton__sub_release_sync(baton_client *c, baton__sub *s, int64_t deadline_us)
{
    baton__dispatcher *d = s->d;
    int64_t now = baton__now_us();
    int64_t limit = now + c->cfg.command_timeout_ms * 1000;
    /* no deadline: the command timeout alone (NO_DEADLINE + the grace would overflow) */
    if (deadline_us != BATON__NO_DEADLINE) {
        int64_t bound = (deadline_us > now ? deadline_us : now) + BATON__UNSUB_GRACE_MS * 1000;
        if (bound < limit)
            limit = bound;
    }
    baton__mutex_lock(&d->mu);
    release_locked_sync(d, s, limit);
    baton__mutex_unlock(&d->mu);
}

bool baton__sub_queue(baton__sub *s, int small, int large)
{
    baton__mutex_lock(&s->d->mu);
    s->queued_small += small;
    s->queued_large += large;
    /* Behind waiters that sleep and were not woken: those woken already try for what the
     * message that woke them announced, and may leave some of it free (a count of 5 woke
     * 2); one that asks now must try for that. */
    bool behind =
        s->queued_small > 0 && s->queued_large == 0 && s->sleeping + s->armed - s->permits > 0;
    baton__mutex_unlock(&s->d->mu);
    return behind;
}

int baton__sub_follow(baton__sub *from, baton__sub *to, bool on)
{
    baton__dispatcher *d = from->d;
    int rc = BATON_OK;
    baton__mutex_lock(&d->mu);
    size_t i = 0;
    while (i < from->nfollowers && from->followers[i] != to)
        i++;
    if (!on && i < from->nfollowers)
        from->followers[i] = from->followers[--from->nfollowers];
    else if (on && i == from->nfollowers) {
        if (baton__grow(&from->followers, &from->capfollowers, from->nfollowers,
                        sizeof *from->followers, 4)) {
            from->followers[from->nfollowers++] = to;
            /* a message that came before it followed (after the attempt that found it
             * first, before that attempt's reply) left its wake-up on `from`, where this
             * waiter no longer sleeps: it wakes for it now (at worst an attempt more),
             * and takes it from `from` when nobody else waits there */
            if (from->permits > 0) {
                if (from->refs == 1)
                    from->permits--;
                add_permits(to, 1);
            }
        } else
            rc = BATON_ENOMEM;
    }
    baton__mutex_unlock(&d->mu);
    return rc;
}

uint64_t baton__sub_messages(baton_client *c, baton__sub *s)
{
    (void)c;
    baton__mutex_lock(&s->d->mu);
    uint64_t n = s->messages;
    baton__mutex_unlock(&s->d->mu);
    return n;
}

int baton__sub_denied(baton_client *c, baton__sub *s)
{
    baton__dispatcher *d = s->d;
    baton__mutex_lock(&d->mu);
    bool denied = s->denied;
    char why[sizeof d->refusal];
    snprintf(why, sizeof why, "%s", d->refusal);
    baton__mutex_unlock(&d->mu);
    if (!denied)
        return BATON_OK;
    /* the code the same words would have as a command's reply (NOPERM) */
    redisReply r = {.type = REDIS_REPLY_ERROR, .str = why, .len = strlen(why)};
    return baton__fail(c, baton__reply_error(c, &r), "SUBSCRIBE %s refused: %s", s->channel, why);
}

/* The hand-over candidate of the wait that is about to sleep on this thread (wait.c sets
 * it around baton__wait_sleep): a thread then sleeps on the candidate's own condition, a
 * fiber's waker is remembered in it (baton__sub_arm), so that a hand-over wakes that
 * waiter alone. Two slots: a thread that waits may run the loop's fibers meanwhile
 * (waits.c drives them), whose sleeps must not see the thread's candidate, nor the thread
 * theirs; a fiber's is taken by its arm, which comes before it yields. */
static _Thread_local baton__cand *sleeping_cand, *arming_cand;

void baton__sub_cand_sleeping(baton__cand *cand, bool fiber)
{
    if (fiber)
        arming_cand = cand;
    else
        sleeping_cand = cand;
}

int baton__sub_wait(baton_client *c, baton__sub *s, int64_t deadline_us, bool (*cancelled)(void *),
                    void *arg)
{
    baton__dispatcher *d = s->d;
    baton__cand *k = sleeping_cand && sleeping_cand->sub == s ? sleeping_cand : NULL;
    /* a candidate thread's own condition lives here while it sleeps (asleep: whoever
     * signals it checks that under the mutex), not in the candidate: 100,000 fibers'
     * candidates would carry one each for nothing */
    pthread_cond_t own;
    if (k)
        baton__cond_init(&own);
    baton__mutex_lock(&d->mu);
    if (!k && !s->wake) {
        pthread_cond_t *cv = malloc(sizeof *cv);
        if (!cv) {
            baton__mutex_unlock(&d->mu);
            return baton__fail(c, BATON_ENOMEM, "out of memory: waiting on %s", s->channel);
        }
        baton__cond_init(cv);
        s->wake = cv;
    }
    s->sleeping++;
    if (k) {
        k->asleep = true;
        k->signalled = false;
        k->cond = &own;
        s->cand_threads++;
    }
    bool handed = false;
    for (;;) {
        if (cancelled && cancelled(arg)) { /* asked first: a cancelled wait takes no wake-up */
            s->sleeping--;
            if (k) {
                k->asleep = false;
                k->cond = NULL;
                s->cand_threads--;
            }
            baton__mutex_unlock(&d->mu);
            if (k)
                baton__cond_destroy(&own);
            return BATON_ECANCELED;
        }
        if (k && k->state == BATON__CAND_HANDED) {
            handed = true; /* it was handed what it waits for: no wake-up taken */
            break;
        }
        /* offered: it sleeps until the offer is settled, taking no wake-up meanwhile */
        bool offered = k && k->state == BATON__CAND_OFFERED;
        if ((s->permits > 0 && !offered) || d->closing || s->denied ||
            baton__cond_wait_until(k ? &own : s->wake, &d->mu, deadline_us) == ETIMEDOUT)
            break;
        if (k)
            k->signalled = false;
    }
    s->sleeping--;
    if (k) {
        k->asleep = false;
        k->cond = NULL;
        s->cand_threads--;
        if (k->signalled && handed && s->permits > 0)
            wake_one(s); /* woken for a wake-up it leaves: the next sleeper takes it */
        k->signalled = false;
    }
    int rc = BATON_ETIMEDOUT;
    bool denied = false;
    if (handed) {
        rc = BATON_OK;
    } else if (s->denied) { /* first: each reconnection hands out wake-ups too */
        denied = true;
    } else if (s->permits > 0) {
        s->permits--;
        rc = BATON_OK;
    }
    baton__mutex_unlock(&d->mu);
    if (k)
        baton__cond_destroy(&own); /* no longer asleep: nobody signals it now */
    return denied ? baton__sub_denied(c, s) : rc;
}

/* ------------------------------- hand-overs within a client ---------------------------- */

void baton__sub_cand_add(baton__sub *s, baton__cand *cand)
{
    cand->sub = s;
    cand->state = BATON__CAND_IDLE;
    cand->asleep = cand->signalled = cand->parked = false;
    cand->waker = NULL;
    cand->ticket = NULL;
    cand->value = 0;
    cand->cond = NULL;
    baton__mutex_lock(&s->d->mu);
    BATON__APPEND(cand, prev, next, s->cands, s->cands_tail);
    baton__mutex_unlock(&s->d->mu);
}

int baton__sub_cand_state(baton__cand *cand, int64_t *value)
{
    baton__sub *s = cand->sub;
    baton__mutex_lock(&s->d->mu);
    int st = cand->state;
    *value = cand->value;
    baton__mutex_unlock(&s->d->mu);
    return st;
}

int baton__sub_cand_remove(baton__cand *cand, int64_t *value)
{
    baton__sub *s = cand->sub;
    baton__mutex_lock(&s->d->mu);
    int st = cand->state;
    *value = cand->value;
    if (st == BATON__CAND_OFFERED && cand->ticket)
        cand->ticket->cand = NULL; /* gave up while offered: the releaser undoes it */
    BATON__UNLINK_TAILED(cand, prev, next, s->cands, s->cands_tail);
    baton__mutex_unlock(&s->d->mu);
    cand->sub = NULL;
    return st;
}

int baton__sub_offer(baton_client *c, const char *channel, int64_t have, int max_passes,
                     baton__ticket *t)
{
    t->d = NULL;
    t->cand = NULL;
    baton__dispatcher *d = dispatcher_if_any(c);
    if (!d)
        return BATON_ETIMEDOUT;
    baton__mutex_lock(&d->mu);
    baton__sub *s = baton__map_get(&d->subs, channel);
    baton__cand *k = NULL;
    if (s && s->cands) {
        if (s->passes >= max_passes)
            s->passes = 0; /* the bound: this one goes through the server, for everyone */
        else
            for (k = s->cands; k; k = k->next)
                if (k->asleep && k->state == BATON__CAND_IDLE && k->want <= have)
                    break;
    }
    if (!k) {
        if (s)
            s->passes = 0;
        baton__mutex_unlock(&d->mu);
        return BATON_ETIMEDOUT;
    }
    k->state = BATON__CAND_OFFERED;
    k->ticket = t;
    t->d = d;
    t->cand = k;
    t->want = k->want;
    memcpy(t->info, k->info, sizeof t->info);
    baton__mutex_unlock(&d->mu);
    return BATON_OK;
}

bool baton__sub_settle(baton_client *c, baton__ticket *t, bool handed, int64_t value)
{
    (void)c;
    baton__dispatcher *d = t->d;
    if (!d)
        return false;
    baton__mutex_lock(&d->mu);
    baton__cand *k = t->cand;
    if (k) {
        baton__sub *s = k->sub;
        k->ticket = NULL;
        s->passes = handed ? s->passes + 1 : 0;
        if (handed) {
            k->state = BATON__CAND_HANDED;
            k->value = value;
            baton__sub_waker *w = k->waker;
            if (w && (w->armed || k->parked)) { /* a fiber: its waker alone */
                if (w->armed)
                    unlink_waker(s, w);
                k->parked = false;
                w->fn(w->arg);
            } else if (!w && k->asleep) {
                baton__cond_signal(k->cond); /* a thread: its own condition */
            }
        } else {
            /* asleep again, as before the offer, and one that took no wake-up meanwhile
             * looks at those kept for the channel */
            k->state = BATON__CAND_IDLE;
            if (k->waker && k->parked) {
                k->parked = false;
                k->waker->armed = true;
                s->armed++;
                BATON__APPEND(k->waker, prev, next, s->wakers, s->wakers_tail);
                feed_wakers(s);
            } else if (!k->waker && k->asleep) {
                k->signalled = true;
                baton__cond_signal(k->cond);
            }
        }
    }
    t->cand = NULL;
    baton__mutex_unlock(&d->mu);
    return k != NULL;
}

void baton__sub_pin(baton_client *c, bool pin)
{
    baton__dispatcher *d = NULL;
    if (get_dispatcher(c, &d) != BATON_OK)
        return; /* out of memory or threads: restarts are then noticed at the next command */
    baton__mutex_lock(&d->mu);
    d->pinned += pin ? 1 : -1;
    if (pin && !any_link_up(d))
        wake_thread(d); /* connect now, so that the server's run is known */
    baton__mutex_unlock(&d->mu);
}

void baton__sub_arm(baton_client *c, baton__sub *s, baton__sub_waker *w)
{
    (void)c;
    baton__cand *k = arming_cand && arming_cand->sub == s ? arming_cand : NULL;
    arming_cand = NULL;
    baton__mutex_lock(&s->d->mu);
    if (k) {
        k->waker = w;
        k->asleep = true;
        if (k->state == BATON__CAND_HANDED) {
            w->fn(w->arg); /* handed before it slept: it runs at once */
            baton__mutex_unlock(&s->d->mu);
            return;
        }
        if (k->state == BATON__CAND_OFFERED) {
            k->parked = true; /* no wake-up meanwhile: the settling fires or arms it */
            baton__mutex_unlock(&s->d->mu);
            return;
        }
    }
    w->armed = true;
    s->armed++;
    BATON__APPEND(w, prev, next, s->wakers, s->wakers_tail);
    feed_wakers(s);
    baton__mutex_unlock(&s->d->mu);
}

bool baton__sub_disarm(baton_client *c, baton__sub *s, baton__sub_waker *w)
{
    (void)c;
    baton__mutex_lock(&s->d->mu);
    if (s->cands)
        for (baton__cand *k = s->cands; k; k = k->next)
            if (k->waker == w) {
                k->waker = NULL;
                k->asleep = k->parked = false;
            }
    if (w->armed)
        unlink_waker(s, w);
    bool fed = w->fed;
    if (fed) {
        w->fed = false;
        s->fed--;
    }
    baton__mutex_unlock(&s->d->mu);
    return fed;
}

void baton__sub_pass_on(baton_client *c, baton__sub *s)
{
    (void)c;
    baton__mutex_lock(&s->d->mu);
    add_permits(s, 1);
    baton__mutex_unlock(&s->d->mu);
}

void baton__sub_wake_all(baton_client *c)
{
    baton__dispatcher *d = dispatcher_if_any(c);
    if (!d)
        return;
    baton__mutex_lock(&d->mu);
    sub_list l = {0};
    baton__map_each(&d->subs, collect, &l);
    for (size_t i = 0; i < l.n; i++)
        add_permits(l.items[i], l.items[i]->refs);
    baton__cond_broadcast(&d->ready);
    free(l.items);
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
    baton__dispatcher *d = dispatcher_if_any(c);
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
    for (int i = 0; i < d->nlinks; i++) {
        baton__conn_close(d->links[i]->conn);
        free(d->links[i]);
    }
    close(d->pipe[0]);
    close(d->pipe[1]);
    if (!forked) {
        baton__mutex_destroy(&d->mu);
        baton__cond_destroy(&d->unsubscribed);
        baton__cond_destroy(&d->ready);
    }
    free(d);
}

const baton__sub_methods baton__dispatcher_subs = {
    baton__sub_wait, baton__sub_arm, baton__sub_disarm, baton__sub_pass_on, baton__sub_wake_all,
};
