/*
 * The read-write lock, with Redisson's RReadWriteLock semantics and layout (docs/rwlock.md):
 * a hash at the lock's name with a 'mode' field, reader fields "<owner>" with per-hold
 * timeout keys {name}:<owner>:rwlock_timeout:<n>, the writer's field "<owner>:write", and
 * the channel redisson_rwlock:{name} ("0": the last reader left, "1": the writer left).
 *
 * A baton_rwlock is two baton_lock handles of two kinds that share its keys; the lock
 * verbs, hold bookkeeping, watchdog and lost reports are the core's (lockbase.c), the
 * waiting the core's wait routine (wait.c), so this file holds what differs: the scripts
 * each kind runs and the answers to is_locked. Readers and writers wait on the one
 * channel with rw_sub (every message wakes every local waiter, who re-runs its
 * script: the dispatcher cannot tell readers from writers).
 *
 * Writers go first: a waiting writer claims the lock in baton_rwlock_writers:{name} (a zset
 * of claims ending at server time + fair_wait_ms, renewed by each run of its acquire script,
 * at least every third of that), and the read script refuses new readers while a live
 * claim stands. A writer that gives up withdraws its claim (rwlock_write_cancel.lua).
 * Redisson's scripts ignore the claims: its readers on the same lock are not held back.
 */
#define _GNU_SOURCE
#include "../core/prim.h"
#include "../lockbase/lockbase.h"

#include <hiredis/hiredis.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct baton_rwlock {
    baton_lock *read;
    baton_lock *write;
    char *token_key;   /* redisson_lock_token:{name} */
    char *writers_key; /* baton_rwlock_writers:{name}: the waiting writers' claims */
    char *key_prefix;  /* {name}: the readers' timeout keys start with it */
    char *latch_pfx;   /* redisson_unlock_latch:{name}: */
};

/* ------------------------------- acquire ---------------------------------------------- */

typedef struct acquiring {
    baton_lock *l;
    bool write;
    char owner[BATON__OWNER_LEN + 8]; /* this kind's field of the calling thread */
    char other[BATON__OWNER_LEN + 8]; /* the thread's field of the other kind */
    int64_t wait_ms;                  /* the caller's wait: 0 = one try (no claim) */
    int64_t lease_ms;
    int64_t bound; /* the last run's sleep bound, ms (-1: none) */
    bool claimed;  /* a writer's run left a claim that giving up must withdraw */
} acquiring;

static int try_once(void *arg, baton__sub *sub)
{
    (void)sub;
    acquiring *a = arg;
    baton_lock *l = a->l;
    baton_client *c = l->client;
    baton_rwlock *rw = l->impl;
    char lease[32], claim[32], recheck[32];
    snprintf(lease, sizeof lease, "%lld",
             (long long)(a->lease_ms == BATON_LEASE_WATCHDOG ? l->cfg.watchdog_ms : a->lease_ms));
    snprintf(claim, sizeof claim, "%lld", (long long)l->cfg.fair_wait_ms);
    /* a plain lock on the name: its release is not heard here, so recheck_ms bounds the sleep */
    snprintf(recheck, sizeof recheck, "%lld", (long long)l->cfg.recheck_ms);
    const char *keys[4] = {l->name, rw->token_key, rw->writers_key, rw->key_prefix};
    const char *args[6] = {lease, a->owner, a->other, claim, a->wait_ms != 0 ? "1" : "0", recheck};
    if (!a->write)
        args[3] = recheck; /* the read script's ARGV[4] */
    const baton__script *script =
        a->write ? &baton__script_rwlock_write_acquire : &baton__script_rwlock_read_acquire;
    baton__hold_script h = {script, a->write ? 3 : 4, a->write ? 6 : 4, keys,
                            args,   a->owner,         rw->token_key,    a->lease_ms};
    int64_t sent;
    baton__stat_inc(c, BATON__ST_ATTEMPTS + BATON_KIND_RWLOCK);
    baton__hold_reply hr;
    int rc = baton__hold_pair(l, &h, "read-write lock", &sent, &hr);
    if (!hr.read)
        return rc;
    long long status = hr.status, value = hr.value;
    if (status == BATON__ACQ_NOT_NOW) {
        a->bound = value;
        a->claimed = a->write && a->wait_ms != 0;
        return BATON_ETIMEDOUT;
    }
    if (status == BATON__ACQ_NO_UPGRADE)
        return baton__fail(c, BATON_ENOTSUP,
                           "read-write lock %s: the calling thread holds the read lock; "
                           "release it before taking the write lock (no upgrade)",
                           l->name);
    return baton__hold_taken(l, &h, &hr, sent);
}

/* Sleep until a release, or the script's bound: the holder's lease running out, a claim
 * lapsing, or this writer's claim needing renewal. */
static int64_t script_bound(void *arg)
{
    return ((acquiring *)arg)->bound;
}

/* A writer that gives up withdraws its claim (best effort: unrenewed, it lapses within
 * fair_wait_ms anyway). Keeps the calling thread's error detail. */
static void give_up(void *arg, int rc)
{
    acquiring *a = arg;
    if (!a->claimed)
        return;
    baton_lock *l = a->l;
    baton_client *c = l->client;
    baton_rwlock *rw = l->impl;
    char *detail = baton__strdup(baton_client_errmsg(c));
    const char *keys[3] = {l->name, rw->writers_key, l->channel};
    const char *args[1] = {a->owner};
    const baton__script *s = &baton__script_rwlock_write_cancel;
    redisReply *r;
    int crc = baton__script_run(c, s, 3, keys, 1, args, &r);
    if (crc == BATON_ECONN) /* withdrawing twice is harmless */
        crc = baton__script_run(c, s, 3, keys, 1, args, &r);
    if (crc == BATON_OK)
        freeReplyObject(r);
    if (detail)
        baton__fail(c, rc, "%s", detail);
    free(detail);
}

/* How a message wakes the waiters on a read-write lock's channel: "0" (the last reader
 * left) or "1" (the writer left) alike, every waiter, whoever may enter now (readers and
 * writers share the channel and a wake-up cannot tell them apart). */
static int64_t rw_wakeups(const char *payload, size_t len, int refs, int64_t pending)
{
    (void)payload, (void)len, (void)pending;
    return refs;
}

static const baton__sub_type rw_sub = {rw_wakeups, true, false};

/* channel, counted as, join a live subscription, attempt, sleep bound, give up */
static const baton__wait_ops rwlock_wait = {&rw_sub,  BATON_KIND_RWLOCK, true,
                                            try_once, script_bound,      give_up};

static int rw_acquire(baton_lock *l, bool write, int64_t wait_ms, int64_t lease_ms)
{
    baton_client *c = l->client;
    acquiring a = {.l = l, .write = write, .wait_ms = wait_ms, .lease_ms = lease_ms, .bound = -1};
    char thread[BATON__OWNER_LEN];
    baton__owner(c, thread, sizeof thread);
    snprintf(a.owner, sizeof a.owner, "%s%s", thread, write ? BATON__KEY_WRITE_SUFFIX : "");
    snprintf(a.other, sizeof a.other, "%s%s", thread, write ? "" : BATON__KEY_WRITE_SUFFIX);
    int rc = baton__wait_for(c, &rwlock_wait, l->channel, wait_ms, &a);
    const char *what = write ? "write" : "read";
    if (rc == BATON__LEASE_RAN_OUT)
        return BATON_ETIMEDOUT; /* the detail is baton__hold_taken's */
    if (rc == BATON_ETIMEDOUT && wait_ms == 0)
        return baton__fail(c, rc, "read-write lock %s: the %s lock is not free", l->name, what);
    if (rc == BATON_ETIMEDOUT)
        return baton__fail(c, rc, "read-write lock %s: %s lock not acquired within %lld ms",
                           l->name, what, (long long)wait_ms);
    return rc;
}

static int read_acquire(baton_lock *l, int64_t wait_ms, int64_t lease_ms)
{
    return rw_acquire(l, false, wait_ms, lease_ms);
}

static int write_acquire(baton_lock *l, int64_t wait_ms, int64_t lease_ms)
{
    return rw_acquire(l, true, wait_ms, lease_ms);
}

/* ------------------------------- release ---------------------------------------------- */

static int read_release(baton_lock *l)
{
    baton_rwlock *rw = l->impl;
    const char *keys[3] = {l->name, l->channel, rw->key_prefix};
    return baton__hold_release(l, &baton__script_rwlock_read_release, rw->latch_pfx, 3, keys);
}

static int write_release(baton_lock *l)
{
    baton_rwlock *rw = l->impl;
    const char *keys[2] = {l->name, l->channel};
    return baton__hold_release(l, &baton__script_rwlock_write_release, rw->latch_pfx, 2, keys);
}

static int read_force_release(baton_lock *l, bool *was_locked)
{
    const char *keys[2] = {l->name, l->channel};
    return baton__hold_force_release(l, &baton__script_rwlock_read_force_release, 2, keys,
                                     was_locked);
}

static int write_force_release(baton_lock *l, bool *was_locked)
{
    const char *keys[2] = {l->name, l->channel};
    return baton__hold_force_release(l, &baton__script_rwlock_write_force_release, 2, keys,
                                     was_locked);
}

/* ------------------------------- queries ---------------------------------------------- */

/* The hash's mode ("read", "write", or "" when free) and, if asked, its field count. */
static int read_mode(baton_lock *l, char mode[8], long long *fields)
{
    const char *hget[3] = {"HGET", l->name, "mode"};
    redisReply *r;
    int rc = baton__query_argv(l->client, 3, hget, &r);
    if (rc != BATON_OK)
        return rc;
    snprintf(mode, 8, "%s", r->type == REDIS_REPLY_STRING ? r->str : "");
    freeReplyObject(r);
    if (!fields || strcmp(mode, "write") != 0)
        return BATON_OK;
    const char *hlen[2] = {"HLEN", l->name};
    if ((rc = baton__query_argv(l->client, 2, hlen, &r)) != BATON_OK)
        return rc;
    *fields = r->type == REDIS_REPLY_INTEGER ? r->integer : 0;
    freeReplyObject(r);
    return BATON_OK;
}

/* Redisson's RedissonReadLock.isLocked: read mode, or write mode with more than the
 * writer's field (its own read holds). */
static int read_is_locked(baton_lock *l, bool *out)
{
    char mode[8];
    long long fields = 0;
    int rc = read_mode(l, mode, &fields);
    if (rc == BATON_OK)
        *out = strcmp(mode, "read") == 0 || (strcmp(mode, "write") == 0 && fields > 2);
    return rc;
}

static int write_is_locked(baton_lock *l, bool *out)
{
    char mode[8];
    int rc = read_mode(l, mode, NULL);
    if (rc == BATON_OK)
        *out = strcmp(mode, "write") == 0;
    return rc;
}

/* ------------------------------- open and close --------------------------------------- */

static void part_close(baton_lock *l)
{
    (void)l; /* the keys belong to the baton_rwlock */
}

static const baton__lock_ops read_ops = {
    .acquire = read_acquire,
    .release = read_release,
    .force_release = read_force_release,
    .is_locked = read_is_locked,
    .is_held = baton__hash_is_held,
    .hold_count = baton__hash_hold_count,
    .remaining_ttl = baton__hash_remaining_ttl,
    .close = part_close,
    .kind = BATON_KIND_RWLOCK,
};

static const baton__lock_ops write_ops = {
    .acquire = write_acquire,
    .release = write_release,
    .force_release = write_force_release,
    .is_locked = write_is_locked,
    .is_held = baton__hash_is_held,
    .hold_count = baton__hash_hold_count,
    .remaining_ttl = baton__hash_remaining_ttl,
    .close = part_close,
    .kind = BATON_KIND_RWLOCK,
};

/* One of the two handles, its base initialised; NULL when out of memory. */
static void rw_free(baton_rwlock *rw);

static baton_lock *part_open(baton_rwlock *rw, baton_client *c, const char *name,
                             const baton__lock_ops *ops, const baton__handle_cfg *cfg)
{
    baton_lock *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    if (baton__lock_base_init(l, ops, c, name, BATON__KEY_RWLOCK_CHANNEL) != BATON_OK) {
        free(l);
        return NULL;
    }
    l->cfg = *cfg;
    l->impl = rw;
    l->owner_suffix = ops == &write_ops ? BATON__KEY_WRITE_SUFFIX : NULL;
    if (baton__lock_register(l, ops == &write_ops ? "write lock" : "read lock") != BATON_OK) {
        baton__lock_free(l);
        return NULL;
    }
    return l;
}

/* The keys of a read-write lock, into k[]; how many. key_prefix is "{name}" alone. */
static size_t rw_keys(baton_rwlock *rw, baton__key_spec *k)
{
    k[0] = (baton__key_spec){&rw->token_key, BATON__KEY_LOCK_TOKEN, NULL};
    k[1] = (baton__key_spec){&rw->writers_key, BATON__KEY_RWLOCK_WRITERS, NULL};
    k[2] = (baton__key_spec){&rw->key_prefix, "", NULL};
    k[3] = (baton__key_spec){&rw->latch_pfx, BATON__KEY_UNLOCK_LATCH, ":"};
    return 4;
}

int baton_rwlock_open(baton_client *c, const char *name, baton_rwlock **out)
{
    return baton_rwlock_open_opts(c, name, NULL, out);
}

int baton_rwlock_open_opts(baton_client *c, const char *name, const baton_handle_options *opts,
                           baton_rwlock **out)
{
    if (out)
        *out = NULL;
    if (!c)
        return baton__misuse(BATON_EINVAL, "read-write lock %s: client is NULL",
                             name ? name : "(NULL)");
    int rc = baton__check_open_name(c, name, "read-write lock");
    if (rc == BATON_OK && !out)
        rc = baton__fail(c, BATON_EINVAL, "read-write lock %s: out is NULL", name);
    baton__handle_cfg cfg;
    if (rc == BATON_OK)
        rc = baton__handle_cfg_read(c, "read-write lock", name, opts,
                                    BATON__OPT_WATCHDOG | BATON__OPT_FAIR_WAIT | BATON__OPT_RECHECK,
                                    &cfg);
    if (rc != BATON_OK)
        return rc;
    baton_rwlock *rw = calloc(1, sizeof *rw);
    if (!rw)
        return baton__fail(c, BATON_ENOMEM, "out of memory");
    baton__key_spec k[4];
    if (baton__derive_keys(name, k, rw_keys(rw, k))) {
        rw->read = part_open(rw, c, name, &read_ops, &cfg);
        rw->write = part_open(rw, c, name, &write_ops, &cfg);
    }
    if (!rw->read || !rw->write ||
        baton__live_add(rw, BATON__MAGIC_RWLOCK, c, NULL, "read-write lock", name) != BATON_OK) {
        rw_free(rw);
        return baton__fail(c, BATON_ENOMEM, "out of memory");
    }
    *out = rw;
    return BATON_OK;
}

void baton_rwlock_close(baton_rwlock *rw)
{
    if (!rw)
        return;
    if (baton__live_remove(rw, BATON__MAGIC_RWLOCK) == BATON__LIVE_NONE)
        baton__misuse_abort("baton_rwlock_close", rw, "read-write lock");
    rw_free(rw);
}

/* The halves (each closed as its state says: an orphan's client let go of it), then rw. */
static void rw_free(baton_rwlock *rw)
{
    baton_lock_close(rw->read);
    baton_lock_close(rw->write);
    baton__key_spec k[4];
    baton__free_keys(k, rw_keys(rw, k));
    free(rw);
}

baton_lock *baton_rwlock_read(baton_rwlock *rw)
{
    return rw && baton__live_state(rw, BATON__MAGIC_RWLOCK) != BATON__LIVE_NONE ? rw->read : NULL;
}

baton_lock *baton_rwlock_write(baton_rwlock *rw)
{
    return rw && baton__live_state(rw, BATON__MAGIC_RWLOCK) != BATON__LIVE_NONE ? rw->write : NULL;
}
