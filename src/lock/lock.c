/*
 * The reentrant lock, with Redisson's semantics and layout: a hash at the lock's name whose
 * one field, the owner "<client-uuid>:<thread-id>", counts the holds; a PEXPIRE lease;
 * "0" published on redisson_lock__channel:{name} when the last hold goes.
 *
 * An acquire (the core's wait routine, wait.c) runs lock_acquire.lua once; if another owner
 * holds the lock it subscribes to the channel, runs the script again (an unlock published before
 * the subscription was confirmed would otherwise be missed), then sleeps until a wake-up or the
 * holder's remaining lease, whichever comes first, and tries again. A holder that died without
 * releasing costs its waiters at most its lease, with no message at all.
 *
 * A waiter that has waited past the client's starve_ms takes a place in the lock's line
 * (baton_lock_line:{name}, lua/lib/line.lua), first come first served, and from then on
 * listens on a channel of its own (the fair lock's form, redisson_lock__channel:{name}:
 * <owner>), no longer on the shared one. While the line is not empty, newcomers (the
 * releasing thread first among them) queue behind it instead of trying, as Go's sync.Mutex
 * hands itself to a waiter starved for 1 ms and newcomers queue behind it in its
 * starvation mode. The release that frees the lock reserves it for the line's first
 * waiter (baton_lock_next:{name}, RESERVE_MS) and tells that waiter alone: a free lock is
 * not raced for by every waiter of every process, each refused but one. Only a first
 * waiter that is due (its wait has passed starve_ms: its score in the line) is handed
 * the lock; until then whoever asks first takes a free lock (the releasing thread,
 * typically), and the waiter looks by itself when it is due. A waiter in the
 * line looks at the lock by itself every BATON__LINE_POLL_MS times its rank + 1 (at most
 * BATON__LINE_POLL_MAX_MS), for what no release tells: a holder whose lease ran out, a reservation
 * whose waiter died; its first, behind a holder's lease, only when that lease runs out (it
 * hears the rest, and the script keeps the line alive that long: 100,000 waiters, each first
 * in its own line, would otherwise look 2,000,000 times a second). Redisson's own clients do not
 * know the line: they take a free lock as before, and their unlock publishes "0" on the lock's
 * channel only; the line's first waiter hears that channel too (first_in_line, wait.c), so a
 * Redisson unlock wakes it at once.
 *
 * A release of the last hold that finds a thread or fiber of its own client asleep on the
 * lock hands it the lock in the release's own script (cohorting, docs/ARCHITECTURE.md,
 * "Hand-overs within a client"): the hash's field becomes the waiter's, the token rises,
 * nothing is published, and the waiter, woken alone, records the hold as if its attempt
 * had said "taken". At most BATON__COHORT_PASSES in a row, and none while the line or a
 * reservation exists. Waiters of one client take turns: one that finds its client's
 * waiters asleep on the live subscription queues behind them without an attempt.
 *
 * The handle remembers each owner's current hold (depth, fencing token, lease, watchdog
 * registration; lockbase.c, a record per owner) so a re-entrant release can re-apply the
 * lease the lock was taken with, and the watchdog is cancelled before the last release is
 * sent.
 */
#define _GNU_SOURCE
#include "../core/prim.h"
#include "../lockbase/lockbase.h"

#include <hiredis/hiredis.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct plain {
    char *token_key; /* redisson_lock_token:{name} */
    char *latch_pfx; /* redisson_unlock_latch:{name}: */
    char *next_key;  /* baton_lock_next:{name}: the waiter the lock is reserved for */
    char *line_key;  /* baton_lock_line:{name}: the starved waiters, first due first */
} plain;

static const baton__lock_ops plain_ops;

/* ------------------------------- acquire ---------------------------------------------- */

/* The state of one acquisition, for the core's wait routine. */
typedef struct acquiring {
    baton_lock *l;
    const char *owner;
    int64_t lease_ms;
    bool waits;       /* wait_ms != 0: it may join the line */
    int64_t ttl;      /* how long to sleep at most after the last attempt; -1: no bound */
    int64_t ttl_us;   /* when ttl was set: its reply came (a sleep begun later is shorter) */
    int64_t since_us; /* the first attempt */
    char *own;        /* its own channel once in the line (<channel>:<owner>); else NULL */
    long long rank;   /* waiters before it in the line at its last attempt; -1: not in it */
    int64_t sent_us;  /* when its last attempt was sent (a hand-over comes after it) */
} acquiring;

/* One run of the acquire script. BATON_OK: acquired (hold recorded, watchdog registered);
 * BATON_ETIMEDOUT: another owner holds it or it is reserved for another waiter, a->ttl =
 * how long to sleep at most; BATON__RELISTEN: it took a place in the line, and hears its
 * turn on a->own from now on. */
static int attempt(acquiring *a)
{
    baton_lock *l = a->l;
    const char *owner = a->owner;
    int64_t lease_ms = a->lease_ms;
    baton_client *c = l->client;
    plain *p = l->impl;
    char lease[32];
    snprintf(lease, sizeof lease, "%lld",
             (long long)(lease_ms == BATON_LEASE_WATCHDOG ? l->cfg.watchdog_ms : lease_ms));
    char life[16];
    snprintf(life, sizeof life, "%d", BATON__LINE_LIFE_MS);
    int64_t sent = baton__now_us(); /* when the attempt began (its waiter starves after) */
    int64_t starve_ms = baton__client_config(c)->starve_ms;
    /* "0": never join the line; "1": join it if it is not empty; "2": join it */
    const char *mode = baton__line_mode(a->waits, a->own, sent - a->since_us, starve_ms);
    /* when its wait passes the bound, from now: its score in the line (first due, first
     * served; a first waiter not due yet is not handed the lock) */
    int64_t due_us = starve_ms == BATON_STARVE_NEVER ? 0 : starve_ms * 1000 - (sent - a->since_us);
    char due[32];
    snprintf(due, sizeof due, "%lld", (long long)due_us);
    const char *keys[4] = {l->name, p->token_key, p->next_key, p->line_key};
    const char *args[6] = {lease, owner, mode, l->channel, life, due};
    baton__hold_script h = {
        &baton__script_lock_acquire, 4, 6, keys, args, owner, p->token_key, lease_ms};
    baton__stat_inc(c, BATON__ST_ATTEMPTS + BATON_KIND_LOCK);
    a->sent_us = sent;
    baton__hold_reply hr;
    int rc = baton__hold_pair(l, &h, "lock", &sent, &hr);
    a->ttl_us = baton__now_us(); /* unread: the last bound again, from now */
    if (!hr.read)
        return rc;
    long long status = hr.status, value = hr.value;
    a->rank = status == BATON__ACQ_IN_LINE ? value : -1;
    if (status == BATON__ACQ_IN_LINE) { /* in the line, value waiters before it */
        a->ttl = baton__line_look_ms(value);
        /* its first, behind a lease of hr.extra ms more: it hears every other way the lock
         * comes free, and the script kept the line alive past that (lock_acquire.lua) */
        if (value == 0 && hr.extra > 0)
            a->ttl = hr.extra;
        /* not due yet: look when it is, as a release then would hand it the lock */
        int64_t due_ms = due_us / 1000 + 1;
        if (due_us > 0 && due_ms < a->ttl)
            a->ttl = due_ms;
        return baton__line_in(c, l->channel, owner, &a->own);
    }
    if (status == BATON__ACQ_NOT_NOW || status == BATON__ACQ_RESERVED) {
        if (status == BATON__ACQ_RESERVED && value <= 0)
            value = 1; /* the reservation ran out as it was read: the lock is free now */
        a->ttl = value;
        if (mode[0] == '1') {
            /* look again when it starves, to queue without waiting for a release (a long
             * hold's waiters then get the lock in the order they came, not by a race) */
            int64_t left = starve_ms - (baton__now_us() - a->since_us) / 1000;
            if (left < 1)
                left = 1;
            if (a->ttl < 0 || left < a->ttl)
                a->ttl = left;
        }
        return BATON_ETIMEDOUT;
    }

    return baton__hold_taken(l, &h, &hr, sent);
}

static int try_once(void *arg, baton__sub *sub)
{
    (void)sub; /* where it listens does not change what it asks */
    return attempt(arg);
}

static const char *own_channel(void *arg)
{
    return ((acquiring *)arg)->own;
}

/* The line's first, once due, hears the lock's channel too: a Redisson client's unlock
 * publishes only there (it does not know the line), and its "0" then wakes this waiter
 * within a round trip rather than at its next look. */
static bool first_in_line(void *arg)
{
    acquiring *a = arg;
    if (!a->own || a->rank != 0)
        return false;
    /* Only once due: a baton release then reserves the lock for it (and tells it on its
     * own channel as well), where before that it lets the releasing thread take the lock
     * back, and every "0" of baton's releases would wake it for nothing. */
    int64_t starve_ms = baton__client_config(a->l->client)->starve_ms;
    return starve_ms == BATON_STARVE_NEVER || baton__now_us() - a->since_us >= starve_ms * 1000;
}

static void give_up(void *arg, int rc)
{
    acquiring *a = arg;
    if (!a->own)
        return;
    /* it leaves the line, and drops the reservation if it holds one, or the lock stays
     * refused to others for up to RESERVE_MS (best effort: both end by themselves) */
    plain *p = a->l->impl;
    const char *const keys[3] = {a->l->name, p->next_key, p->line_key};
    const char *const args[2] = {a->owner, a->l->channel};
    baton__line_leave(a->l->client, &baton__script_lock_unreserve, keys, args, rc);
}

/* A release by a thread or fiber of this client may hand this waiter the lock in its own
 * script (cohorting): it needs the waiter's owner field and lease. Not with sync_replicas
 * (the release's script is not followed by WAIT). */
static bool cohort(void *arg, baton__cand *cand)
{
    acquiring *a = arg;
    baton_lock *l = a->l;
    if (baton__client_config(l->client)->sync_replicas > 0)
        return false;
    int64_t lease = a->lease_ms == BATON_LEASE_WATCHDOG ? l->cfg.watchdog_ms : a->lease_ms;
    cand->want = 1;
    int n = snprintf(cand->info, sizeof cand->info, "%lld %s", (long long)lease, a->owner);
    return n > 0 && (size_t)n < sizeof cand->info;
}

/* Handed the lock (value: its new fencing token): the hold is recorded and registered as
 * an attempt's "taken" would be. Its lease began after the waiter's last attempt. */
static int handed(void *arg, int64_t token)
{
    acquiring *a = arg;
    return baton__hold_acquired(a->l, a->owner, true, token, a->lease_ms, a->sent_us);
}

/* Waiters of one client take turns (wait.c): one that finds its client's waiters asleep on
 * the live subscription, none woken, queues behind them rather than trying: the lock is
 * held, by a thread of its client typically (the one that released it and asks again),
 * whose release hands it to the first of them (cohorting), or publishes and wakes one. */
static int turn(void *arg)
{
    (void)arg;
    return BATON__TURN_LEAST;
}

/* Sleep until the unlock message or the holder's lease runs out (in the line: until its
 * turn is told, or its next look). */
static int64_t holder_ttl(void *arg)
{
    /* counted from the reply, not from the sleep: a wait for its own channel's
     * confirmation in between (up to the command timeout) is no reason to sleep longer */
    acquiring *a = arg;
    if (a->ttl < 0)
        return a->ttl;
    int64_t left = a->ttl - (baton__now_us() - a->ttl_us) / 1000;
    return left > 0 ? left : 0;
}

/* How an unlock message wakes the waiters on a lock's channel: "0" (an unlock) one of them,
 * "1" (every waiter re-checks: a read unlock, a force release) all of them. */
static int64_t unlock_wakeups(const char *payload, size_t len, int refs, int64_t pending)
{
    (void)pending;
    bool ok;
    int64_t v = baton__sub_payload_int(payload, len, &ok);
    return (ok && v == 1) ? refs : 1;
}

const baton__sub_type baton__lock_sub = {unlock_wakeups, true, false};

static const baton__wait_ops lock_wait = {.sub = &baton__lock_sub,
                                          .stat = BATON_KIND_LOCK,
                                          .join_live = true,
                                          .attempt = try_once,
                                          .bound_ms = holder_ttl,
                                          .give_up = give_up,
                                          .relisten = own_channel,
                                          .first = first_in_line,
                                          .turn = turn,
                                          .cohort = cohort,
                                          .handed = handed};

static int plain_acquire(baton_lock *l, int64_t wait_ms, int64_t lease_ms)
{
    baton_client *c = l->client;
    char owner[BATON__OWNER_LEN];
    baton__owner(c, owner, sizeof owner);
    acquiring a = {.l = l,
                   .owner = owner,
                   .lease_ms = lease_ms,
                   .waits = wait_ms != 0,
                   /* queued behind its client's waiters without an attempt: it does not
                    * know the holder's lease, and looks by itself after recheck_ms */
                   .ttl = baton__client_config(c)->recheck_ms,
                   .since_us = baton__now_us(),
                   .ttl_us = baton__now_us(),
                   .rank = -1};
    int rc = baton__wait_for(c, &lock_wait, l->channel, wait_ms, &a);
    free(a.own);
    if (rc == BATON__LEASE_RAN_OUT)
        return BATON_ETIMEDOUT; /* the detail is baton__hold_taken's */
    if (rc == BATON_ETIMEDOUT && wait_ms == 0)
        return baton__fail(c, rc, "lock %s is held by another owner", l->name);
    if (rc == BATON_ETIMEDOUT)
        return baton__fail(c, rc, "lock %s: not acquired within %lld ms", l->name,
                           (long long)wait_ms);
    return rc;
}

/* ------------------------------- release ---------------------------------------------- */

static int plain_release(baton_lock *l)
{
    plain *p = l->impl;
    const char *keys[4] = {l->name, l->channel, p->next_key, p->line_key};
    return baton__hold_release_cohort(l, &baton__script_lock_release, p->latch_pfx, 4, keys,
                                      p->token_key);
}

static int plain_force_release(baton_lock *l, bool *was_locked)
{
    plain *p = l->impl;
    const char *keys[4] = {l->name, l->channel, p->next_key, p->line_key};
    return baton__hold_force_release(l, &baton__script_lock_force_release, 4, keys, was_locked);
}

/* ------------------------------- open and close --------------------------------------- */

/* The keys of a plain lock, into k[]; how many. */
static size_t plain_keys(void *impl, baton__key_spec *k)
{
    plain *p = impl;
    k[0] = (baton__key_spec){&p->token_key, BATON__KEY_LOCK_TOKEN, NULL};
    k[1] = (baton__key_spec){&p->latch_pfx, BATON__KEY_UNLOCK_LATCH, ":"};
    k[2] = (baton__key_spec){&p->next_key, BATON__KEY_LOCK_NEXT, NULL};
    k[3] = (baton__key_spec){&p->line_key, BATON__KEY_LOCK_LINE, NULL};
    return 4;
}

static const baton__lock_ops plain_ops = {
    .acquire = plain_acquire,
    .release = plain_release,
    .force_release = plain_force_release,
    .is_locked = baton__hash_is_locked,
    .is_held = baton__hash_is_held,
    .hold_count = baton__hash_hold_count,
    .remaining_ttl = baton__hash_remaining_ttl,
    .keys = plain_keys,
    .impl_size = sizeof(plain),
};

int baton_lock_open(baton_client *c, const char *name, baton_lock **out)
{
    return baton_lock_open_opts(c, name, NULL, out);
}

int baton_lock_open_opts(baton_client *c, const char *name, const baton_handle_options *opts,
                         baton_lock **out)
{
    return baton__lock_open(c, name, "lock", &plain_ops, BATON__KEY_LOCK_CHANNEL, opts,
                            BATON__OPT_WATCHDOG, out);
}
