/*
 * The fair lock: a reentrant lock whose waiters acquire in the order they first asked, with
 * Redisson's RFairLock layout. Beside the lock hash at the name, Redis keeps the queue of
 * waiting owners (redisson_lock_queue:{name}, a list) and each waiter's deadline
 * (redisson_lock_timeout:{name}, a zset); each waiter listens on a channel of its own,
 * redisson_lock__channel:{name}:<owner>, and a release publishes "0" on the head's channel
 * only, so one release wakes one thread in one process.
 *
 * Where it parts from Redisson: a waiter's deadline is the server's time plus fair_wait_ms,
 * and the waiting thread keeps it alive by running the acquire script again at least every
 * fair_wait_ms / 3 (the script returns how long it may sleep). That run is a renewal of its
 * place, as the watchdog renews a holder's lease, not a poll for the lock: the lock itself
 * arrives by message. A live waiter therefore never loses its place, however long the lock
 * is held, and a waiter whose process died stops renewing and is dropped by the next script
 * that finds it at the head, within fair_wait_ms. Every script reads the time from the
 * server (TIME), so clients with skewed clocks queue correctly: no client time is sent.
 *
 * A waiter that gives up (timeout, error) runs the cancel script, which takes it out of the
 * queue and the deadline set and, if it was the head of a free lock, wakes the next head.
 * The hold bookkeeping (depth, token, lease, watchdog) is the core's, as for the plain lock.
 */
#define _GNU_SOURCE
#include "../core/prim.h"
#include "../lockbase/lockbase.h"

#include <hiredis/hiredis.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct fair {
    char *queue_key;   /* redisson_lock_queue:{name} */
    char *timeout_key; /* redisson_lock_timeout:{name} */
    char *token_key;   /* redisson_lock_token:{name} */
    char *latch_pfx;   /* redisson_unlock_latch:{name}: */
    char *meta_key;    /* baton_lock_meta:{name}: the holders' "host:pid" of older versions,
                          deleted with the lock (the client's record has them now) */
} fair;

/* ------------------------------- acquire ---------------------------------------------- */

/* One run of the acquire script; queue: join the queue (or renew this owner's place) if
 * not acquired. *wait_ms on entry is 0 for the first run of a wait and the previous run's
 * bound (>= 1) for the later ones, which the script's mode "2" makes cheaper, and "3" when
 * told (a message woke it: its turn, most likely) cheaper still (hints only: the script
 * checks them). BATON_OK: acquired (hold recorded, watchdog registered); BATON_ETIMEDOUT:
 * not acquired, *wait_ms = how long to sleep at most before the next run. */
static int attempt(baton_lock *l, const char *owner, int64_t lease_ms, bool queue, bool told,
                   int64_t *wait_ms)
{
    baton_client *c = l->client;
    fair *f = l->impl;
    char lease[32], fair_wait[32];
    snprintf(lease, sizeof lease, "%lld",
             (long long)(lease_ms == BATON_LEASE_WATCHDOG ? l->cfg.watchdog_ms : lease_ms));
    snprintf(fair_wait, sizeof fair_wait, "%lld", (long long)l->cfg.fair_wait_ms);
    const char *keys[6] = {l->name,      f->queue_key, f->timeout_key,
                           f->token_key, l->channel,   f->meta_key};
    const char *mode = !queue ? "0" : *wait_ms == 0 ? "1" : told ? "3" : "2";
    const char *args[4] = {lease, owner, fair_wait, mode};
    baton__hold_script h = {
        &baton__script_fairlock_acquire, 6, 4, keys, args, owner, f->token_key, lease_ms};
    int64_t sent;
    baton__stat_inc(c, BATON__ST_ATTEMPTS + BATON_KIND_FAIRLOCK);
    baton__hold_reply hr;
    int rc = baton__hold_pair(l, &h, "fair lock", &sent, &hr);
    if (!hr.read)
        return rc;
    long long status = hr.status, value = hr.value;
    if (status == BATON__ACQ_NOT_NOW) {
        *wait_ms = value;
        if (queue) /* it waits in the queue: who waits, for an operator's status */
            baton__client_record_keep(c, BATON_LEASE_WATCHDOG);
        return BATON_ETIMEDOUT;
    }

    return baton__hold_taken(l, &h, &hr, sent);
}

typedef struct acquiring {
    baton_lock *l;
    const char *owner;
    int64_t lease_ms;
    bool queue;           /* join the queue (a wait), or one try */
    int64_t wait;         /* the script's bound from the last run (0 before the first) */
    baton__sub *heard_on; /* where it listened at its last run, and ... */
    uint64_t heard;       /* ... how many messages had woken it there */
} acquiring;

/* Also renews this waiter's place; the first run after subscribing closes the window in
 * which a wake-up could have been published unheard. A run after a message on its channel
 * says so (the script's mode "3"). */
static int try_once(void *arg, baton__sub *sub)
{
    acquiring *a = arg;
    bool told = false;
    if (sub) {
        uint64_t m = baton__sub_messages(a->l->client, sub);
        told = sub == a->heard_on && m != a->heard;
        a->heard_on = sub;
        a->heard = m;
    }
    return attempt(a->l, a->owner, a->lease_ms, a->queue, told, &a->wait);
}

/* Sleep until the wake-up, or until the script's bound: the holder's lease running out,
 * the head's place lapsing, or this waiter's place needing renewal. */
static int64_t script_bound(void *arg)
{
    return ((acquiring *)arg)->wait;
}

/* Leaves the queue (best effort: if the server cannot be reached, the place lapses by
 * itself within fair_wait_ms since nobody renews it). Keeps the calling thread's error
 * detail of the failure that made it give up. */
static void give_up(void *arg, int rc)
{
    acquiring *a = arg;
    baton_lock *l = a->l;
    baton_client *c = l->client;
    fair *f = l->impl;
    char *detail = baton__strdup(baton_client_errmsg(c));
    const char *keys[4] = {l->name, f->queue_key, f->timeout_key, l->channel};
    const char *args[1] = {a->owner};
    const baton__script *s = &baton__script_fairlock_cancel;
    redisReply *r;
    int crc = baton__script_run(c, s, 4, keys, 1, args, &r);
    if (crc == BATON_ECONN) /* leaving the queue twice is harmless */
        crc = baton__script_run(c, s, 4, keys, 1, args, &r);
    if (crc == BATON_OK)
        freeReplyObject(r);
    if (detail)
        baton__fail(c, rc, "%s", detail);
    free(detail);
}

/* How an unlock message wakes the waiters on a fair lock's channel: "0" (an unlock) one of them,
 * "1" (every waiter re-checks: a read unlock, a force release) all of them. */
static int64_t unlock_wakeups(const char *payload, size_t len, int refs, int64_t pending)
{
    (void)pending;
    bool ok;
    int64_t v = baton__sub_payload_int(payload, len, &ok);
    return (ok && v == 1) ? refs : 1;
}

static const baton__sub_type fair_sub = {unlock_wakeups, true, false};

/* Joins a live subscription of this owner's channel: nobody else listens there, but its
 * subscription lingers a moment after its last wait (a thread that asks again at once,
 * under contention), and joining it before the first run spares the run after subscribing
 * (issue 49: 4 of the 24 commands an acquisition cost). A message that came while it
 * lingered is not kept (fair_sub): it was for the wait before, as no run of this wait had
 * queued the owner yet. */
static const baton__wait_ops fair_wait = {.sub = &fair_sub,
                                          .stat = BATON_KIND_FAIRLOCK,
                                          .join_live = true,
                                          .attempt = try_once,
                                          .bound_ms = script_bound,
                                          .give_up = give_up};

static int fair_acquire(baton_lock *l, int64_t wait_ms, int64_t lease_ms)
{
    baton_client *c = l->client;
    char owner[BATON__OWNER_LEN];
    baton__owner(c, owner, sizeof owner);
    /* One try never joins the queue; a wait takes its place with the first try. */
    acquiring a = {.l = l, .owner = owner, .lease_ms = lease_ms, .queue = wait_ms != 0};
    /* This waiter's own channel: a release wakes the head of the queue only. */
    char *channel = NULL;
    if (wait_ms != 0 && !(channel = baton__asprintf("%s:%s", l->channel, owner)))
        return baton__fail(c, BATON_ENOMEM, "out of memory");
    int rc = baton__wait_for(c, &fair_wait, channel, wait_ms, &a);
    free(channel);
    if (rc == BATON__LEASE_RAN_OUT)
        return BATON_ETIMEDOUT; /* the detail is baton__hold_taken's */
    if (rc == BATON_ETIMEDOUT && wait_ms == 0)
        return baton__fail(c, rc, "fair lock %s is held, or other owners are queued first",
                           l->name);
    if (rc == BATON_ETIMEDOUT)
        return baton__fail(c, rc, "fair lock %s: not acquired within %lld ms", l->name,
                           (long long)wait_ms);
    return rc;
}

/* ------------------------------- release ---------------------------------------------- */

static int fair_release(baton_lock *l)
{
    fair *f = l->impl;
    const char *keys[5] = {l->name, f->queue_key, f->timeout_key, l->channel, f->meta_key};
    return baton__hold_release(l, &baton__script_fairlock_release, f->latch_pfx, 5, keys);
}

static int fair_force_release(baton_lock *l, bool *was_locked)
{
    fair *f = l->impl;
    const char *keys[5] = {l->name, f->queue_key, f->timeout_key, l->channel, f->meta_key};
    return baton__hold_force_release(l, &baton__script_fairlock_force_release, 5, keys, was_locked);
}

/* ------------------------------- open and close --------------------------------------- */

/* The keys of a fair lock, into k[]; how many. */
static size_t fair_keys(void *impl, baton__key_spec *k)
{
    fair *f = impl;
    k[0] = (baton__key_spec){&f->queue_key, BATON__KEY_LOCK_QUEUE, NULL};
    k[1] = (baton__key_spec){&f->timeout_key, BATON__KEY_LOCK_TIMEOUT, NULL};
    k[2] = (baton__key_spec){&f->token_key, BATON__KEY_LOCK_TOKEN, NULL};
    k[3] = (baton__key_spec){&f->latch_pfx, BATON__KEY_UNLOCK_LATCH, ":"};
    k[4] = (baton__key_spec){&f->meta_key, BATON__KEY_LOCK_META, NULL};
    return 5;
}

static const baton__lock_ops fair_ops = {
    .acquire = fair_acquire,
    .release = fair_release,
    .force_release = fair_force_release,
    .is_locked = baton__hash_is_locked,
    .is_held = baton__hash_is_held,
    .hold_count = baton__hash_hold_count,
    .remaining_ttl = baton__hash_remaining_ttl,
    .keys = fair_keys,
    .impl_size = sizeof(fair),
    .kind = BATON_KIND_FAIRLOCK,
};

int baton_fairlock_open(baton_client *c, const char *name, baton_lock **out)
{
    return baton_fairlock_open_opts(c, name, NULL, out);
}

int baton_fairlock_open_opts(baton_client *c, const char *name, const baton_handle_options *opts,
                             baton_lock **out)
{
    /* l->channel is the waiters' channel prefix; each waiter appends ":<owner>". */
    return baton__lock_open(c, name, "fair lock", &fair_ops, BATON__KEY_LOCK_CHANNEL, opts,
                            BATON__OPT_WATCHDOG | BATON__OPT_FAIR_WAIT, out);
}
