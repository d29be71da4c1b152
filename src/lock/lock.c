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
 * A waiter that has waited past the client's starve_ms reserves the lock (baton_lock_next:{name}):
 * the next time it is free it goes to that waiter, and newcomers (the releasing thread
 * first among them) are refused until it came or its reservation ran out, as Go's
 * sync.Mutex hands itself to a waiter starved for 1 ms. One waiter holds the reservation at
 * a time; it renews it by trying again every RESERVE_MS / 2 while the lock stays held.
 * Redisson's own clients do not know the reservation: they take a free lock as before.
 *
 * The handle remembers the calling thread's current hold (depth, fencing token, lease,
 * watchdog registration) so a re-entrant release can re-apply the lease the lock was taken
 * with, and the watchdog is cancelled before the last release is sent.
 */
#define _GNU_SOURCE
#include "../core/prim.h"

#include <hiredis/hiredis.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How long a reservation lasts unless its waiter renews it: what a waiter that died or
 * stalled costs a free lock. */
#define RESERVE_MS 50

typedef struct plain {
    char *token_key; /* redisson_lock_token:{name} */
    char *latch_pfx; /* redisson_unlock_latch:{name}: */
    char *next_key;  /* baton_lock_next:{name}: the waiter the lock is reserved for */
} plain;

static const baton__lock_ops plain_ops;

/* ------------------------------- acquire ---------------------------------------------- */

/* The state of one acquisition, for the core's wait routine. */
typedef struct acquiring {
    baton_lock *l;
    const char *owner;
    int64_t lease_ms;
    int64_t ttl;      /* how long to sleep at most after the last attempt; -1: no bound */
    int64_t since_us; /* the first attempt */
    baton__sub *sub;  /* where this waiter is favoured, while it holds the reservation */
} acquiring;

static void unfavour(acquiring *a)
{
    baton__sub_favour(a->sub, -1);
    a->sub = NULL;
}

/* One run of the acquire script. BATON_OK: acquired (hold recorded, watchdog registered);
 * BATON_ETIMEDOUT: another owner holds it or it is reserved for another waiter, a->ttl =
 * how long to sleep at most. */
static int attempt(acquiring *a, baton__sub *sub)
{
    baton_lock *l = a->l;
    const char *owner = a->owner;
    int64_t lease_ms = a->lease_ms;
    baton_client *c = l->client;
    plain *p = l->impl;
    char lease[32];
    snprintf(lease, sizeof lease, "%lld",
             (long long)(lease_ms == BATON_LEASE_WATCHDOG ? baton__watchdog_lease(c) : lease_ms));
    char reserve[16];
    snprintf(reserve, sizeof reserve, "%d", RESERVE_MS);
    int64_t sent = baton__now_us(); /* when the attempt began (its waiter starves after) */
    int64_t starve_ms = baton__client_config(c)->starve_ms;
    bool starving =
        sub && starve_ms != BATON_STARVE_NEVER && sent - a->since_us >= starve_ms * 1000;
    if (starving && !a->sub) {
        /* Favoured before the script reserves: an unlock published between the reservation
         * and its reply must wake this waiter too (else the lock sits reserved until the
         * reservation's renewal, RESERVE_MS / 2). Undone below if it reserves nothing. */
        a->sub = sub;
        baton__sub_favour(sub, 1);
    }
    const char *keys[3] = {l->name, p->token_key, p->next_key};
    const char *args[4] = {lease, owner, starving ? "1" : "0", reserve};
    baton__hold_script h = {
        &baton__script_lock_acquire, 3, 4, keys, args, owner, p->token_key, lease_ms};
    baton__stat_inc(c, BATON__ST_ATTEMPTS + BATON__K_LOCK);
    baton__hold_reply hr;
    int rc = baton__hold_pair(l, &h, "lock", &sent, &hr);
    if (!hr.read)
        return rc;
    long long status = hr.status, value = hr.value;
    if (status != 4 && a->sub) /* 4: reserved for this waiter: woken by the next unlock */
        unfavour(a);
    if (status == 0 || status == 3 || status == 4) {
        if (status == 4 && (value < 0 || value > RESERVE_MS / 2))
            value = RESERVE_MS / 2; /* renew the reservation while the lock stays held */
        else if (status == 3 && value <= 0)
            value = 1; /* the reservation ran out as it was read: the lock is free now */
        a->ttl = value;
        return BATON_ETIMEDOUT;
    }

    return baton__hold_taken(l, &h, &hr, sent);
}

static int try_once(void *arg, baton__sub *sub)
{
    return attempt(arg, sub);
}

static void give_up(void *arg, int rc)
{
    acquiring *a = arg;
    bool reserved = a->sub != NULL;
    unfavour(a);
    if (reserved && !baton__client_forked(a->l->client)) {
        /* it may hold the reservation: drop it, or the lock stays refused to others for
         * up to RESERVE_MS (best effort: it ends by itself otherwise) */
        plain *p = a->l->impl;
        const char *keys[1] = {p->next_key}, *args[1] = {a->owner};
        redisReply *r = NULL;
        char *detail = baton__strdup(baton_client_errmsg(a->l->client)); /* the wait's */
        if (baton__script_run(a->l->client, &baton__script_lock_unreserve, 1, keys, 1, args, &r) ==
            BATON_OK)
            freeReplyObject(r);
        else if (detail)
            baton__fail(a->l->client, rc, "%s", detail);
        free(detail);
    }
}

/* Sleep until the unlock message or the holder's lease runs out. */
static int64_t holder_ttl(void *arg)
{
    return ((acquiring *)arg)->ttl;
}

/* kind, counted as, join a live subscription, attempt, sleep bound, give up */
static const baton__wait_ops lock_wait = {BATON__SUB_LOCK, BATON__K_LOCK, true,
                                          try_once,        holder_ttl,    give_up};

static int plain_acquire(baton_lock *l, int64_t wait_ms, int64_t lease_ms)
{
    baton_client *c = l->client;
    char owner[BATON__OWNER_LEN];
    baton__owner(c, owner, sizeof owner);
    acquiring a = {
        .l = l, .owner = owner, .lease_ms = lease_ms, .ttl = -1, .since_us = baton__now_us()};
    int rc = baton__wait_for(c, &lock_wait, l->channel, wait_ms, &a);
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
    const char *keys[2] = {l->name, l->channel};
    return baton__hold_release_hash_only(l, &baton__script_lock_release, p->latch_pfx, 2, keys);
}

static int plain_force_release(baton_lock *l, bool *was_locked)
{
    plain *p = l->impl;
    const char *keys[3] = {l->name, l->channel, p->next_key};
    return baton__hold_force_release(l, &baton__script_lock_force_release, 3, keys, was_locked);
}

/* ------------------------------- open and close --------------------------------------- */

/* The keys of a plain lock, into k[]; how many. */
static size_t plain_keys(void *impl, baton__key_spec *k)
{
    plain *p = impl;
    k[0] = (baton__key_spec){&p->token_key, BATON__KEY_LOCK_TOKEN, NULL};
    k[1] = (baton__key_spec){&p->latch_pfx, BATON__KEY_UNLOCK_LATCH, ":"};
    k[2] = (baton__key_spec){&p->next_key, BATON__KEY_LOCK_NEXT, NULL};
    return 3;
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
    return baton__lock_open(c, name, "lock", &plain_ops, BATON__KEY_LOCK_CHANNEL, out);
}
