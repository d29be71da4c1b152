/*
 * The base every kind of lock shares. A baton_lock is a base (client, name, channel, the
 * holds taken through it) plus a table of operations filled in by its kind: the plain lock
 * (src/lock), the fair lock (src/fairlock), the multi-lock (src/multilock). Here: the base's
 * open and close, the hold records, the release protocol, the lost-reply resolution of an
 * acquisition and the queries on Redisson's lock hash. The public verbs that validate and
 * dispatch to a kind are in src/lock/verbs.c.
 */
#define _GNU_SOURCE
#include "evloop.h"
#include "lockbase.h"

#include <hiredis/hiredis.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int baton__lock_base_init(baton_lock *l, const baton__lock_ops *ops, baton_client *c,
                          const char *name, const char *channel_prefix)
{
    memset(l, 0, sizeof *l);
    l->ops = ops;
    l->client = c;
    l->name = baton__strdup(name);
    l->channel = channel_prefix ? baton__derive_key(channel_prefix, name, NULL) : NULL;
    if (!l->name || (channel_prefix && !l->channel)) {
        free(l->name);
        free(l->channel);
        return BATON_ENOMEM;
    }
    baton__mutex_init(&l->mu);
    l->lost_pipe[0] = l->lost_pipe[1] = -1;
    if (c) {
        const baton__config *cfg = baton__client_config(c);
        l->cfg = (baton__handle_cfg){cfg->watchdog_ms, cfg->fair_wait_ms, cfg->recheck_ms};
    }
    return BATON_OK;
}

/* The state of a kind with ops->keys: impl_size zeroed bytes, every key derived; NULL
 * when out of memory. */
static void *keys_make(const char *name, const baton__lock_ops *ops)
{
    void *impl = calloc(1, ops->impl_size);
    baton__key_spec k[BATON__MAX_KEYS];
    if (impl && baton__derive_keys(name, k, ops->keys(impl, k)))
        return impl;
    free(impl);
    return NULL;
}

/* Frees what keys_make made (or what the kind's close frees). */
static void impl_close(baton_lock *l)
{
    if (l->ops->close) {
        l->ops->close(l);
        return;
    }
    baton__key_spec k[BATON__MAX_KEYS];
    baton__free_keys(k, l->ops->keys(l->impl, k));
    free(l->impl);
}

int baton__lock_open(baton_client *c, const char *name, const char *what,
                     const baton__lock_ops *ops, const char *channel_prefix,
                     const baton_handle_options *opts, unsigned reads, baton_lock **out)
{
    if (out)
        *out = NULL;
    if (!c)
        return baton__misuse(BATON_EINVAL, "%s %s: client is NULL", what, name ? name : "(NULL)");
    int rc = baton__check_open_name(c, name, what);
    if (rc == BATON_OK && !out)
        rc = baton__fail(c, BATON_EINVAL, "%s %s: out is NULL", what, name);
    baton__handle_cfg cfg;
    if (rc == BATON_OK)
        rc = baton__handle_cfg_read(c, what, name, opts, reads, &cfg);
    if (rc != BATON_OK)
        return rc;
    baton_lock *l = calloc(1, sizeof *l);
    void *impl = l ? keys_make(name, ops) : NULL;
    if (!impl || baton__lock_base_init(l, ops, c, name, channel_prefix) != BATON_OK) {
        if (impl) {
            l->impl = impl;
            impl_close(l);
        }
        free(l);
        return baton__fail(c, BATON_ENOMEM, "out of memory");
    }
    l->impl = impl;
    l->cfg = cfg;
    if (baton__lock_register(l, what) != BATON_OK) {
        baton__lock_free(l);
        return baton__fail(c, BATON_ENOMEM, "out of memory");
    }
    *out = l;
    return BATON_OK;
}

void baton__lock_owner(const baton_lock *l, char *buf, size_t len)
{
    baton__owner(l->client, buf, len);
    if (l->owner_suffix) {
        size_t n = strlen(buf);
        snprintf(buf + n, len - n, "%s", l->owner_suffix);
    }
}

/* One owner's holds through a handle (l->recs): what the server answered for it. The
 * watchdog's registration points at the record, so a loss marks the owner's own record;
 * a record is freed only after baton__watchdog_remove() with it, which waits out a lost
 * callback that may be running for it. */
typedef struct baton__hold_rec {
    baton_lock *l;
    uint64_t holder;  /* the owner id (a thread or a baton_owner) */
    int64_t depth;    /* re-entrant holds */
    int64_t token;    /* fencing token of the outer hold */
    int64_t lease_ms; /* lease of the current hold, re-applied by a re-entrant release
                         (Redisson's internalLockLeaseTime); BATON_LEASE_WATCHDOG */
    bool registered;  /* in the client's hold registry (watchdog) */
    bool renewing;    /* ... and renewed by it (no explicit lease) */
    bool lost;        /* the hold was found lost (see baton_lock_set_lost_handler) */
    int pins;         /* calls using it outside l->mu: it is freed by the last of them */
    bool unlinked;    /* out of l->recs: freed once no call pins it */
    struct baton__hold_rec *next;
} hold_rec;

void baton__lock_base_free(baton_lock *l)
{
    while (l->recs) { /* forgotten already but in a forked child: memory only */
        hold_rec *next = l->recs->next;
        free(l->recs);
        l->recs = next;
    }
    if (l->lost_pipe[0] >= 0) {
        close(l->lost_pipe[0]);
        close(l->lost_pipe[1]);
    }
    if (!baton__client_forked(l->client)) /* a fork may have copied it locked */
        baton__mutex_destroy(&l->mu);
    free(l->name);
    free(l->channel);
    l->name = l->channel = NULL; /* an orphaned handle's memory stays (live.c) */
}

/* ------------------------------- holds ------------------------------------------------ */

/* The record of owner `holder`, or NULL. Called with l->mu held. */
static hold_rec *rec_find(const baton_lock *l, uint64_t holder)
{
    for (hold_rec *r = l->recs; r; r = r->next)
        if (r->holder == holder)
            return r;
    return NULL;
}

/* Takes r out of the handle's list; whether it may be freed now (rec_free), else the last
 * call that pins it frees it (rec_unpin). Called with l->mu held. */
static bool rec_unlink(baton_lock *l, hold_rec *r)
{
    for (hold_rec **p = &l->recs; *p; p = &(*p)->next)
        if (*p == r) {
            *p = r->next;
            break;
        }
    r->unlinked = true;
    return r->pins == 0;
}

/* The owner field of holder (a thread or baton_owner id) in this lock. */
static void owner_of(const baton_lock *l, uint64_t holder, char *buf, size_t len)
{
    snprintf(buf, len, "%s:%llu%s", baton_client_id(l->client), (unsigned long long)holder,
             l->owner_suffix ? l->owner_suffix : "");
}

/* Frees an unlinked record. `registered`: it may still be registered, or a lost callback
 * may be running for it (read under l->mu, or true when unknown): the registration goes
 * first, which waits that callback out. A record whose registration its release removed
 * already, or whose loss was told (on_lost touches it only under l->mu), needs nothing. */
static void rec_free(baton_lock *l, hold_rec *r, bool registered)
{
    if (!r)
        return;
    if (registered && l->client && !baton__client_forked(l->client)) {
        char owner[BATON__OWNER_LEN];
        owner_of(l, r->holder, owner, sizeof owner);
        baton__watchdog_remove(l->client, l->name, owner, r);
    }
    free(r);
}

/* Ends a pin of r (taken under l->mu); frees r if it was unlinked meanwhile and this was
 * its last pin. */
static void rec_unpin(baton_lock *l, hold_rec *r)
{
    baton__mutex_lock(&l->mu);
    bool free_now = --r->pins == 0 && r->unlinked;
    bool registered = r->registered;
    baton__mutex_unlock(&l->mu);
    if (free_now)
        rec_free(l, r, registered);
}

/* Tells the handle's holder of a loss (descriptor, then callback). */
static void signal_lost(baton_lock *l)
{
    baton__mutex_lock(&l->mu);
    l->lost = true;
    void (*fn)(baton_lock *, void *) = l->lost_fn;
    void *fn_arg = l->lost_arg;
    if (l->lost_pipe[1] >= 0) {
        char b = 1;
        ssize_t n = write(l->lost_pipe[1], &b, 1);
        (void)n; /* a full pipe is readable already */
    }
    baton__mutex_unlock(&l->mu);
    if (fn)
        fn(l, fn_arg);
}

/* Runs on the watchdog thread when a hold of this handle was found lost: its record's. */
static void on_lost(void *arg)
{
    hold_rec *r = arg;
    baton_lock *l = r->l;
    baton__mutex_lock(&l->mu);
    r->registered = false; /* the registry dropped it before calling */
    r->renewing = false;
    r->lost = true;
    baton__mutex_unlock(&l->mu);
    signal_lost(l);
}

static void drain_lost_pipe(baton_lock *l)
{
    char buf[16];
    if (l->lost_pipe[0] >= 0)
        while (read(l->lost_pipe[0], buf, sizeof buf) > 0) {
        }
}

/* Whether a record of the handle is marked lost (its holder not yet past it). Called with
 * l->mu held. */
static bool any_lost(const baton_lock *l)
{
    for (const hold_rec *r = l->recs; r; r = r->next)
        if (r->lost)
            return true;
    return false;
}

/*
 * The handle's record of a hold (holder, depth, registration) follows what the server
 * answered, never the other way round:
 *  - a new hold (fresh), or a re-entry of a hold this handle did not know of (a leftover of
 *    the same owner, or one taken through another handle), is registered with the watchdog
 *    before the acquire returns, whatever the handle believed before;
 *  - a fresh hold where the handle believed it held one means the server lost the earlier
 *    hold: its loss is told (descriptor and callback) before the new hold is recorded.
 * Each owner has its record: another owner's (a second reader's, say) is never touched.
 */
int baton__hold_acquired(baton_lock *l, const char *owner, bool fresh, int64_t token,
                         int64_t lease_ms, int64_t sent_us)
{
    baton_client *c = l->client;
    uint64_t tid = baton__owner_id();
    bool stale = false, do_register = false, do_renew = false, was_lost = false;
    bool renew = lease_ms == BATON_LEASE_WATCHDOG;
    baton__mutex_lock(&l->mu);
    hold_rec *r = rec_find(l, tid);
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r) {
            baton__mutex_unlock(&l->mu);
            l->ops->release(l); /* the server's hold would have no record: undone */
            return baton__fail(c, BATON_ENOMEM, "out of memory");
        }
        r->l = l;
        r->holder = tid;
        r->next = l->recs;
        l->recs = r;
    }
    r->pins++; /* used below, outside the mutex: a force release's forget must not free it */
    bool believed = !r->lost && r->depth > 0;
    if (fresh || !believed) {
        /* A registration left from an earlier hold of this owner that was lost is
         * dropped below. */
        was_lost = fresh && believed;
        stale = r->registered;
        r->registered = true;
        r->renewing = renew;
        r->depth = 1;
        r->token = token;
        r->lost = false;
        if (!was_lost && !any_lost(l)) {
            l->lost = false;
            drain_lost_pipe(l); /* else it stays readable: a hold was lost */
        }
        do_register = true;
    } else {
        r->depth++;
        if (renew && !r->renewing)
            r->renewing = do_renew = true;
    }
    r->lease_ms = lease_ms;
    baton__mutex_unlock(&l->mu);
    if (stale) /* the earlier hold's registration */
        baton__watchdog_remove(c, l->name, owner, r);
    if (was_lost) {
        signal_lost(l);
        baton__mutex_lock(&l->mu);
        l->lost = any_lost(l); /* the new hold is not lost; the descriptor stays readable */
        baton__mutex_unlock(&l->mu);
    }
    if (do_renew)
        baton__watchdog_renew(c, l->name, owner);
    if (do_register) {
        baton__client_record_keep(c, lease_ms); /* who holds it, for an operator's status */
        int rc =
            baton__watchdog_add(c, l->name, owner, renew, l->cfg.watchdog_ms, on_lost, r, sent_us);
        if (rc != BATON_OK) {
            baton__mutex_lock(&l->mu);
            r->registered = r->renewing = false;
            baton__mutex_unlock(&l->mu);
            l->ops->release(l); /* don't leave a hold nobody renews */
            rec_unpin(l, r);
            return rc;
        }
    }
    rec_unpin(l, r);
    return BATON_OK;
}

int baton__hold_unsynced(baton_lock *l, const char *owner, bool fresh, int64_t token,
                         int64_t lease_ms, int64_t sent_us)
{
    baton_client *c = l->client;
    char *detail = baton__strdup(baton_client_errmsg(c));
    if (baton__hold_acquired(l, owner, fresh, token, lease_ms, sent_us) == BATON_OK)
        l->ops->release(l); /* undone: a holder must not run on a lock a failover can erase */
    /* the server's ACL refused the WAIT itself: no acquisition can ever be confirmed; nor
     * can one with sync_aof on a server without WAITAOF */
    int code = detail && strstr(detail, "NOPERM")           ? BATON_EPERM
               : detail && strstr(detail, "has no WAITAOF") ? BATON_ENOTSUP
                                                            : BATON_ENOTSYNCED;
    int rc = baton__fail(c, code, "lock %s: not acquired: %s", l->name,
                         detail ? detail : "not acknowledged by enough replicas");
    free(detail);
    return rc;
}

/* Before a release is sent: the lease to re-apply, and whether this is the owner's last
 * hold (then the watchdog goes first, never after: Redisson #7272). */
static bool hold_release_begin(baton_lock *l, const char *owner, int64_t *lease_ms, bool *mine)
{
    baton_client *c = l->client;
    baton__mutex_lock(&l->mu);
    hold_rec *r = rec_find(l, baton__owner_id());
    *mine = r && r->depth > 0;
    int64_t lease = r ? r->lease_ms : BATON_LEASE_WATCHDOG;
    *lease_ms = lease == BATON_LEASE_WATCHDOG ? l->cfg.watchdog_ms : lease;
    bool last = *mine && r->depth <= 1;
    bool cancel = last && r->registered;
    if (cancel)
        r->registered = r->renewing = false;
    baton__mutex_unlock(&l->mu);
    if (cancel)
        baton__watchdog_remove(c, l->name, owner, r);
    return last;
}

/* How a release script takes its keys: all declared (KEYS = keys, then the latch), or only
 * the lock hash (KEYS = {keys[0]}; ARGV = the common three, keys[1..], the latch's life,
 * the latch), so that it runs while the slot migrates. */
typedef struct release_form {
    const baton__script *script;
    const char *latch_prefix;
    int nkeys;
    const char **keys;
    bool hash_only;
    const char *token_key; /* hash-only form: the hand-over's (cohorting); NULL: none */
} release_form;

/* A hand-over to a waiter of the client (cohorting): the waiter's owner field and lease,
 * from its candidacy's info ("<lease ms> <owner>"). */
typedef struct handover {
    char lease[24];
    const char *owner;
} handover;

/* One run of a release script; *outcome = -1 (not held), 0 (holds remain), 1 (released),
 * 2 (handed to ho's waiter: *token its new fencing token). */
static int release_once(baton_lock *l, const release_form *f, const char *owner, int64_t lease,
                        const handover *ho, int *outcome, int64_t *token)
{
    baton_client *c = l->client;
    char lease_s[32];
    snprintf(lease_s, sizeof lease_s, "%lld", (long long)lease);
    const char *args[10] = {"0", lease_s, owner};
    int nargs = 3;
    struct redisReply *r;
    /* A lost reply is followed by the same request again: the unlock latch makes the
     * retry return the first outcome (Redisson's unlockLatch), a hand-over's included. */
    int rc;
    const baton__script *s = f->script;
    if (f->hash_only) {
        for (int i = 1; i < f->nkeys && nargs < 6; i++)
            args[nargs++] = f->keys[i];
        if (ho && f->token_key && nargs == 6) {
            args[nargs++] = f->token_key;
            args[nargs++] = ho->owner;
            args[nargs++] = ho->lease;
        }
        rc = baton__script_run_once_arg(c, s, f->latch_prefix, 1, f->keys, nargs, args, &r);
    } else {
        rc = baton__script_run_once(c, s, f->latch_prefix, f->nkeys, f->keys, nargs, args, &r);
    }
    if (rc != BATON_OK)
        return rc;
    int type = r->type;
    long long v = r->integer;
    freeReplyObject(r);
    if (type != REDIS_REPLY_NIL && type != REDIS_REPLY_INTEGER)
        return baton__fail(c, BATON_EPROTO, "lock %s: unexpected reply to %s", l->name,
                           f->script->name);
    *outcome = type == REDIS_REPLY_NIL ? -1 : v == 0 ? 0 : v < 0 ? 2 : 1;
    if (v < 0 && token)
        *token = -v;
    return BATON_OK;
}

/* The most leftover holds one release clears (each costs a round trip); more are left to
 * their lease, unrenewed. */
#define MAX_LEFTOVERS 64

/*
 * The last hold this handle knew of was released but the server still counts holds of
 * this owner. If another handle of this client holds them (it registered them), they are
 * its business. Otherwise no handle knows them: leftovers of releases the server lost (a
 * failover promoted a replica that had not seen them) or of undone acquisitions. Nobody
 * would renew them, and an acquire on top of them would be taken for a re-entry; so they
 * are released now, as the caller's releases once asked.
 */
static void release_leftovers(baton_lock *l, const release_form *f, const char *owner,
                              int64_t lease)
{
    if (baton__watchdog_refs(l->client, l->name, owner) > 0)
        return;
    int outcome = 0;
    for (int i = 0; i < MAX_LEFTOVERS && outcome == 0; i++)
        if (release_once(l, f, owner, lease, NULL, &outcome, NULL) != BATON_OK)
            return;
}

static int hold_release(baton_lock *l, const release_form *f)
{
    baton_client *c = l->client;
    char owner[BATON__OWNER_LEN];
    baton__lock_owner(l, owner, sizeof owner);
    int64_t lease;
    bool mine;
    bool last = hold_release_begin(l, owner, &lease, &mine);

    /* The last hold, and a waiter of this client asleep on the lock: handed to it in the
     * release's own script (cohorting), at most BATON__COHORT_PASSES in a row. */
    baton__ticket t;
    handover ho;
    bool offered = f->token_key && last && mine && baton__client_config(c)->sync_replicas == 0 &&
                   baton__sub_offer(c, l->channel, 1, BATON__COHORT_PASSES, &t) == BATON_OK;
    if (offered) {
        char *sp = strchr(t.info, ' ');
        ho.owner = sp ? sp + 1 : "";
        snprintf(ho.lease, sizeof ho.lease, "%.*s", sp ? (int)(sp - t.info) : 0, t.info);
        if (!sp || strcmp(ho.owner, owner) == 0) { /* not a hand-over: released */
            baton__sub_settle(c, &t, false, 0);
            offered = false;
        }
    }
    int outcome = -1;
    int64_t token = 0;
    int rc = release_once(l, f, owner, lease, offered ? &ho : NULL, &outcome, &token);
    if (offered) {
        bool handed = rc == BATON_OK && outcome == 2;
        /* Unknown (its reply lost past the latch's re-sends): the waiter attempts again; a
         * hand-over that did happen is then its own hold, taken as a re-entry of a hold it
         * did not know, whose last release clears the count (release_leftovers). */
        if (!baton__sub_settle(c, &t, handed, token) && handed) {
            /* The waiter gave up meanwhile: released as its owner, so that the lock is not
             * left to its lease (nobody renews it) */
            int undone = -1;
            int64_t ms = strtoll(ho.lease, NULL, 10);
            if (release_once(l, f, ho.owner, ms, NULL, &undone, NULL) != BATON_OK)
                baton__log(c, BATON_LOG_WARN,
                           "lock %s: a hand-over to a waiter that gave up could not be undone; "
                           "it ends with its lease (%s ms)",
                           l->name, ho.lease);
        }
        if (outcome == 2)
            outcome = 1; /* released, as far as this owner's hold goes */
    }
    bool lost = false;
    hold_rec *gone = NULL; /* the record this release ended, freed below */
    baton__mutex_lock(&l->mu);
    /* The owner's own record, looked up again: another thread of the handle may have
     * taken the lock meanwhile (woken by this release's message) and made its own; a
     * force release may have dropped this one. */
    hold_rec *r = rec_find(l, baton__owner_id());
    mine = mine && r;
    if (rc != BATON_OK) {
        /* Unknown whether it ran. The last hold's registration is gone already: the
         * record goes too, so no later acquire is taken for a re-entry of a hold nobody
         * renews (the server's hold, if the release did not run, ends by its lease). */
        if (last && mine)
            gone = r;
    } else if (mine && outcome == 0 && !last) {
        r->depth--;
    } else if (mine) {
        /* The hold's end: released, held by nobody, or (outcome 0 at the last hold) holds
         * the handle did not know of remain. Held by nobody, or released while the handle
         * counted more holds: the server had lost them (expired, deleted, a failover or a
         * demoted old master took them) and nothing told the holder yet: it is told now. */
        lost = !r->lost && (outcome == -1 || (outcome == 1 && r->depth > 1));
        gone = r;
    }
    bool free_now = gone && rec_unlink(l, gone);
    bool registered = gone && gone->registered; /* removed by hold_release_begin, or lost */
    baton__mutex_unlock(&l->mu);
    if (free_now)
        rec_free(l, gone, registered);
    if (rc != BATON_OK)
        return rc;
    if (lost)
        signal_lost(l);
    if (mine && last && outcome == 0)
        release_leftovers(l, f, owner, lease);
    if (outcome == -1)
        return baton__fail(c, BATON_ENOTHELD,
                           "lock %s is not held by this thread (never taken, released, or "
                           "its lease ran out)",
                           l->name);
    return BATON_OK;
}

int baton__hold_release(baton_lock *l, const baton__script *script, const char *latch_prefix,
                        int nkeys, const char **keys)
{
    release_form f = {script, latch_prefix, nkeys, keys, false, NULL};
    return hold_release(l, &f);
}

int baton__hold_release_hash_only(baton_lock *l, const baton__script *script,
                                  const char *latch_prefix, int nkeys, const char **keys)
{
    release_form f = {script, latch_prefix, nkeys, keys, true, NULL};
    return hold_release(l, &f);
}

int baton__hold_release_cohort(baton_lock *l, const baton__script *script, const char *latch_prefix,
                               int nkeys, const char **keys, const char *token_key)
{
    release_form f = {script, latch_prefix, nkeys, keys, true, token_key};
    return hold_release(l, &f);
}

int baton__hold_force_release(baton_lock *l, const baton__script *s, int nkeys, const char **keys,
                              bool *was_locked)
{
    baton_client *c = l->client;
    const char *args[1] = {"0"};
    struct redisReply *r;
    int rc = baton__script_run(c, s, nkeys, keys, 1, args, &r);
    if (rc == BATON_ECONN) /* deleting twice is harmless */
        rc = baton__script_run(c, s, nkeys, keys, 1, args, &r);
    if (rc != BATON_OK)
        return rc;
    bool existed = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    if (was_locked)
        *was_locked = existed;
    baton__hold_forget(l);
    return BATON_OK;
}

void baton__hold_forget(baton_lock *l)
{
    /* A copy of the client in a forked child holds nothing and has no watchdog to tell;
     * the handle's mutex may even have been copied locked. */
    if (baton__client_forked(l->client))
        return;
    baton__mutex_lock(&l->mu);
    hold_rec *all = NULL;
    for (hold_rec **p = &l->recs; *p;) {
        hold_rec *r = *p;
        if (r->pins > 0) {
            /* an acquisition being recorded right now: it may have run after the force
             * release, and then holds; if not, its renewal finds it gone and tells */
            p = &r->next;
            continue;
        }
        *p = r->next;
        r->unlinked = true;
        r->next = all;
        all = r;
    }
    baton__mutex_unlock(&l->mu);
    while (all) { /* each record's registration goes (this handle's only), with the record */
        hold_rec *next = all->next;
        rec_free(l, all, true); /* a loss may be being told for it now */
        all = next;
    }
}

/* Whether the acquire resolved below did not run (BATON__NOT_TAKEN) */
#define BATON__NOT_TAKEN 1

static int resolve_lost(baton_lock *l, const char *owner, const char *token_key, int64_t lease_ms,
                        int64_t sent_us)
{
    baton_client *c = l->client;
    baton__mutex_lock(&l->mu);
    const hold_rec *mine = rec_find(l, baton__owner_id());
    int64_t known = (mine && !mine->lost) ? mine->depth : 0;
    baton__mutex_unlock(&l->mu);
    const char *hget[3] = {"HGET", l->name, owner};
    struct redisReply *r;
    int qrc = baton__query_argv(c, 3, hget, &r);
    if (qrc != BATON_OK && qrc != BATON_ECONN)
        return qrc; /* the server refuses the client now (EAUTH after a password change) */
    if (qrc != BATON_OK)
        return baton__fail(c, BATON_ECONN,
                           "lock %s: the acquire's reply was lost and the "
                           "server could not be asked whether it ran",
                           l->name);
    long long held = r->type == REDIS_REPLY_STRING ? strtoll(r->str, NULL, 10) : 0;
    freeReplyObject(r);
    if (held <= known)
        return BATON__NOT_TAKEN;
    const char *get[2] = {"GET", token_key};
    int64_t token = 0;
    if (baton__query_argv(c, 2, get, &r) == BATON_OK) {
        token = r->type == REDIS_REPLY_STRING ? strtoll(r->str, NULL, 10) : 0;
        freeReplyObject(r);
    }
    return baton__hold_acquired(l, owner, known == 0, token, lease_ms, sent_us);
}

int baton__hold_call(baton_lock *l, const baton__hold_script *h, struct redisReply **reply,
                     int64_t *sent_us)
{
    baton_client *c = l->client;
    for (int attempt = 0;; attempt++) {
        bool maybe_ran;
        *sent_us = baton__now_us(); /* the lease runs from no earlier than this */
        int rc = baton__script_call_synced(c, h->script, h->nkeys, h->keys, h->nargs, h->args,
                                           reply, &maybe_ran);
        if (rc != BATON_ECONN || !maybe_ran)
            return rc;
        /* A reply lost sooner than a command timeout is a connection the server closed or
         * reset, not a server too slow: only that is worth sending once more. */
        bool closed =
            baton__now_us() - *sent_us < baton__client_config(c)->command_timeout_ms * 1000 / 2;
        rc = resolve_lost(l, h->owner, h->token_key, h->lease_ms, *sent_us);
        if (rc != BATON__NOT_TAKEN)
            return rc;
        /* It did not run: a connection lent from the pool had been closed while idle (the
         * pool looks at an idle one only after BATON__IDLE_CHECK_US), or the server went
         * away before it read the script. Once more, on a fresh connection. */
        if (attempt == 1 || !closed)
            return baton__fail(c, BATON_ECONN,
                               "lock %s: the acquire's reply was lost; it did not take the lock",
                               l->name);
    }
}

int baton__hold_pair(baton_lock *l, const baton__hold_script *h, const char *what, int64_t *sent_us,
                     baton__hold_reply *out)
{
    out->read = false;
    struct redisReply *r;
    int rc = baton__hold_call(l, h, &r, sent_us);
    if (!r)
        return rc;
    out->unsynced = rc == BATON_ENOTSYNCED;
    if (rc != BATON_OK && !out->unsynced) {
        freeReplyObject(r);
        return rc;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 || r->elements > 3 ||
        r->element[0]->type != REDIS_REPLY_INTEGER || r->element[1]->type != REDIS_REPLY_INTEGER ||
        (r->elements == 3 && r->element[2]->type != REDIS_REPLY_INTEGER)) {
        freeReplyObject(r);
        return baton__fail(l->client, BATON_EPROTO, "%s %s: unexpected reply to %s", what, l->name,
                           h->script->name);
    }
    out->status = r->element[0]->integer;
    out->value = r->element[1]->integer;
    out->extra = r->elements == 3 ? r->element[2]->integer : -1;
    out->read = true;
    freeReplyObject(r);
    return rc;
}

/* Whether a fresh hold's own lease (not the watchdog's) has surely run out by now: the server
 * started it no earlier than the attempt was sent, so a reply later than the lease, less
 * Redlock's drift allowance (1 % + 2 ms), comes for a lock that may be another's already (a
 * reply held up by a pause or a slow network, a WAIT that waited for a resyncing replica). */
static bool lease_ran_out(int64_t lease_ms, int64_t sent_us, int64_t *took_ms)
{
    if (lease_ms <= 0)
        return false;
    int64_t lease_us = lease_ms * 1000, took_us = baton__now_us() - sent_us;
    *took_ms = took_us / 1000;
    return took_us >= lease_us - lease_us / 100 - 2000;
}

int baton__hold_taken(baton_lock *l, const baton__hold_script *h, const baton__hold_reply *hr,
                      int64_t sent_us)
{
    int64_t took_ms = 0;
    bool late = hr->status == BATON__ACQ_TAKEN && lease_ran_out(h->lease_ms, sent_us, &took_ms);
    int rc = hr->unsynced ? baton__hold_unsynced(l, h->owner, hr->status == BATON__ACQ_TAKEN,
                                                 hr->value, h->lease_ms, sent_us)
                          : baton__hold_acquired(l, h->owner, hr->status == BATON__ACQ_TAKEN,
                                                 hr->value, h->lease_ms, sent_us);
    if (!late || rc != BATON_OK)
        return rc;
    /* Recorded, then released at once, as any hold (the release script checks the owner: a
     * hold already another's is left alone), so that nothing is left behind. */
    (void)l->ops->release(l);
    return baton__fail(l->client, BATON__LEASE_RAN_OUT,
                       "lock %s: taken, but its lease of %lld ms ran out before the reply came "
                       "(%lld ms after the attempt was sent): not held",
                       l->name, (long long)h->lease_ms, (long long)took_ms);
}

/* ------------------------------- queries on Redisson's lock hash ---------------------- */

/* One read of the lock hash: cmd NAME [owner], its integer (an absent field: 0). */
static int hash_int(baton_lock *l, const char *cmd, bool with_owner, int64_t *out)
{
    char owner[BATON__OWNER_LEN];
    baton__lock_owner(l, owner, sizeof owner);
    const char *argv[3] = {cmd, l->name, owner};
    struct redisReply *r;
    int rc = baton__query_argv(l->client, with_owner ? 3 : 2, argv, &r);
    if (rc != BATON_OK)
        return rc;
    if (r->type == REDIS_REPLY_INTEGER)
        *out = r->integer;
    else if (r->type == REDIS_REPLY_STRING)
        *out = strtoll(r->str, NULL, 10);
    else
        *out = 0;
    freeReplyObject(r);
    return BATON_OK;
}

static int hash_bool(baton_lock *l, const char *cmd, bool with_owner, bool *out)
{
    int64_t v;
    int rc = hash_int(l, cmd, with_owner, &v);
    if (rc == BATON_OK)
        *out = v > 0;
    return rc;
}

int baton__hash_is_locked(baton_lock *l, bool *out)
{
    return hash_bool(l, "EXISTS", false, out);
}

int baton__hash_is_held(baton_lock *l, bool *out)
{
    return hash_bool(l, "HEXISTS", true, out);
}

int baton__hash_hold_count(baton_lock *l, int64_t *out)
{
    return hash_int(l, "HGET", true, out);
}

int baton__hash_remaining_ttl(baton_lock *l, int64_t *out)
{
    return hash_int(l, "PTTL", false, out);
}

/* ------------------------------- for the verbs (src/lock/verbs.c) -------------------- */

void baton__lock_dispose(void *p)
{
    baton_lock *l = p;
    baton__evloop_drop_handle(l->client, l); /* no operation may run on it once freed */
    baton__hold_forget(l);
    impl_close(l);
    baton__lock_base_free(l);
    l->client = NULL; /* orphaned (its client closed): a group holding it sees that */
}

void baton__lock_free(baton_lock *l)
{
    baton__lock_dispose(l);
    free(l);
}

int baton__lock_register(baton_lock *l, const char *what)
{
    return baton__live_add(l, BATON__MAGIC_LOCK, l->client, baton__lock_dispose, what, l->name);
}

bool baton__hold_token(baton_lock *l, int64_t *token)
{
    baton__mutex_lock(&l->mu);
    const hold_rec *r = rec_find(l, baton__owner_id());
    bool held = r && !r->lost && r->depth > 0;
    *token = held ? r->token : 0;
    baton__mutex_unlock(&l->mu);
    return held;
}
