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

typedef struct plain {
    char *token_key; /* redisson_lock_token:{name} */
    char *latch_pfx; /* redisson_unlock_latch:{name}: */
    char *meta_key;  /* baton_lock_meta:{name}: the holder's "host:pid" */
} plain;

static const baton__lock_ops plain_ops;

/* ------------------------------- acquire ---------------------------------------------- */

/* One run of the acquire script. BATON_OK: acquired (hold recorded, watchdog registered);
 * BATON_ETIMEDOUT: another owner holds it, *ttl_ms = its remaining lease. */
static int attempt(baton_lock *l, const char *owner, int64_t lease_ms, int64_t *ttl_ms)
{
    baton_client *c = l->client;
    plain *p = l->impl;
    char lease[32];
    snprintf(lease, sizeof lease, "%lld",
             (long long)(lease_ms == BATON_LEASE_WATCHDOG ? baton__watchdog_lease(c) : lease_ms));
    const char *keys[3] = {l->name, p->token_key, p->meta_key};
    const char *args[3] = {lease, owner, baton__client_origin(c)};
    redisReply *r;
    bool maybe_ran;
    baton__stat_inc(c, BATON__ST_ATTEMPTS + BATON__K_LOCK);
    int64_t sent = baton__now_us(); /* the lease runs from no earlier than this */
    int rc =
        baton__script_call_synced(c, &baton__script_lock_acquire, 3, keys, 3, args, &r, &maybe_ran);
    if (rc == BATON_ECONN && maybe_ran)
        return baton__hold_resolve_lost(l, owner, p->token_key, lease_ms, sent);
    bool unsynced = rc == BATON_ENOTSYNCED; /* it ran; the replicas did not confirm it */
    if (rc != BATON_OK && !unsynced)
        return rc;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_INTEGER || r->element[1]->type != REDIS_REPLY_INTEGER) {
        freeReplyObject(r);
        return baton__fail(c, BATON_EPROTO, "lock %s: unexpected reply to lock_acquire", l->name);
    }
    long long status = r->element[0]->integer, value = r->element[1]->integer;
    freeReplyObject(r);
    if (status == 0) {
        *ttl_ms = value;
        return BATON_ETIMEDOUT;
    }

    if (unsynced)
        return baton__hold_unsynced(l, owner, status == 1, value, lease_ms, sent);
    return baton__hold_acquired(l, owner, status == 1, value, lease_ms, sent);
}

/* The state of one acquisition, for the core's wait routine. */
typedef struct acquiring {
    baton_lock *l;
    const char *owner;
    int64_t lease_ms;
    int64_t ttl; /* the holder's remaining lease after the last attempt; -1: none */
} acquiring;

static int try_once(void *arg, baton__sub *sub)
{
    (void)sub;
    acquiring *a = arg;
    return attempt(a->l, a->owner, a->lease_ms, &a->ttl);
}

/* Sleep until the unlock message or the holder's lease runs out. */
static int64_t holder_ttl(void *arg)
{
    return ((acquiring *)arg)->ttl;
}

static int plain_acquire(baton_lock *l, int64_t wait_ms, int64_t lease_ms)
{
    baton_client *c = l->client;
    char owner[BATON__OWNER_LEN];
    baton__owner(c, owner, sizeof owner);
    acquiring a = {.l = l, .owner = owner, .lease_ms = lease_ms, .ttl = -1};
    baton__wait w = {.channel = l->channel,
                     .kind = BATON__SUB_LOCK,
                     .stat = BATON__K_LOCK,
                     .wait_ms = wait_ms,
                     .join_live = true,
                     .attempt = try_once,
                     .bound_ms = holder_ttl,
                     .arg = &a};
    int rc = baton__wait_for(c, &w);
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
    const char *keys[3] = {l->name, l->channel, p->meta_key};
    return baton__hold_release_hash_only(l, &baton__script_lock_release, p->latch_pfx, 3, keys);
}

static int plain_force_release(baton_lock *l, bool *was_locked)
{
    plain *p = l->impl;
    const char *keys[3] = {l->name, l->channel, p->meta_key};
    return baton__hold_force_release(l, &baton__script_lock_force_release, 3, keys, was_locked);
}

/* ------------------------------- open and close --------------------------------------- */

/* The keys of a plain lock, into k[]; how many. */
static size_t plain_keys(void *impl, baton__key_spec *k)
{
    plain *p = impl;
    k[0] = (baton__key_spec){&p->token_key, BATON__KEY_LOCK_TOKEN, NULL};
    k[1] = (baton__key_spec){&p->latch_pfx, BATON__KEY_UNLOCK_LATCH, ":"};
    k[2] = (baton__key_spec){&p->meta_key, BATON__KEY_LOCK_META, NULL};
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
