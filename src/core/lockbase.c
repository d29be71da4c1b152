/*
 * The verbs every kind of lock shares. A baton_lock is a base (client, name, channel, the
 * current hold's lease) plus a table of operations filled in by its kind: the plain lock
 * (src/lock), the fair lock (src/fairlock), the multi-lock (src/multilock). The public
 * functions here validate their arguments, so no kind sees a NULL handle or an absurd time,
 * then dispatch.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int baton__lock_base_init(baton_lock *l, const baton__lock_ops *ops, baton_client *c,
                          const char *name, const char *channel_prefix)
{
    memset(l, 0, sizeof *l);
    l->ops = ops;
    l->client = c;
    l->lease_ms = BATON_LEASE_WATCHDOG;
    l->name = baton__strdup(name);
    l->channel = channel_prefix ? baton__derive_key(channel_prefix, name, NULL) : NULL;
    if (!l->name || (channel_prefix && !l->channel)) {
        free(l->name);
        free(l->channel);
        return BATON_ENOMEM;
    }
    baton__mutex_init(&l->mu);
    return BATON_OK;
}

void baton__lock_base_free(baton_lock *l)
{
    baton__mutex_destroy(&l->mu);
    free(l->name);
    free(l->channel);
}

/* ------------------------------- holds ------------------------------------------------ */

int baton__hold_acquired(baton_lock *l, const char *owner, bool fresh, int64_t token,
                         int64_t lease_ms)
{
    baton_client *c = l->client;
    uint64_t tid = baton__thread_id();
    bool stale_watchdog = false;
    baton__mutex_lock(&l->mu);
    if (fresh || l->holder != tid) {
        /* A new hold (or one re-entered through another handle of this owner). A
         * registration left from an earlier hold that was lost is dropped below. */
        stale_watchdog = fresh && l->watchdog;
        l->watchdog = false;
        l->holder = tid;
        l->depth = 1;
        l->token = token;
    } else {
        l->depth++;
    }
    l->lease_ms = lease_ms;
    bool register_wd = lease_ms == BATON_LEASE_WATCHDOG && !l->watchdog;
    if (register_wd)
        l->watchdog = true;
    baton__mutex_unlock(&l->mu);
    if (stale_watchdog)
        baton__watchdog_forget(c, l->name, owner);
    if (register_wd) {
        int rc = baton__watchdog_add(c, l->name, owner, NULL, NULL);
        if (rc != BATON_OK) {
            baton__mutex_lock(&l->mu);
            l->watchdog = false;
            baton__mutex_unlock(&l->mu);
            l->ops->release(l); /* don't leave a hold nobody renews */
            return rc;
        }
    }
    return BATON_OK;
}

void baton__hold_release_begin(baton_lock *l, const char *owner, int64_t *lease_ms)
{
    baton_client *c = l->client;
    baton__mutex_lock(&l->mu);
    bool mine = l->holder == baton__thread_id();
    *lease_ms = l->lease_ms == BATON_LEASE_WATCHDOG ? baton__watchdog_lease(c) : l->lease_ms;
    /* The watchdog goes before the last release is sent, never after (Redisson #7272). */
    bool cancel = mine && l->depth <= 1 && l->watchdog;
    if (cancel)
        l->watchdog = false;
    baton__mutex_unlock(&l->mu);
    if (cancel)
        baton__watchdog_remove(c, l->name, owner);
}

void baton__hold_release_end(baton_lock *l, const char *owner, int outcome)
{
    bool forget = false;
    baton__mutex_lock(&l->mu);
    if (l->holder == baton__thread_id()) {
        if (outcome == 0 && l->depth > 1) {
            l->depth--;
        } else if (outcome != 0) {
            forget = l->watchdog;
            l->watchdog = false;
            l->holder = 0;
            l->depth = 0;
            l->token = 0;
            l->lease_ms = BATON_LEASE_WATCHDOG;
        }
    }
    baton__mutex_unlock(&l->mu);
    if (forget)
        baton__watchdog_forget(l->client, l->name, owner);
}

void baton__hold_forget(baton_lock *l)
{
    baton__mutex_lock(&l->mu);
    uint64_t holder = l->holder;
    bool wd = l->watchdog;
    l->holder = 0;
    l->depth = 0;
    l->token = 0;
    l->watchdog = false;
    l->lease_ms = BATON_LEASE_WATCHDOG;
    baton__mutex_unlock(&l->mu);
    if (wd && l->client) {
        char owner[BATON__OWNER_LEN];
        snprintf(owner, sizeof owner, "%s:%llu", baton_client_id(l->client),
                 (unsigned long long)holder);
        baton__watchdog_forget(l->client, l->name, owner);
    }
}

/* ------------------------------- verbs ------------------------------------------------ */

void baton_lock_close(baton_lock *l)
{
    if (!l)
        return;
    baton__hold_forget(l);
    l->ops->close(l);
    baton__lock_base_free(l);
    free(l);
}

const char *baton_lock_name(const baton_lock *l)
{
    return l ? l->name : "";
}

/* Validation shared by every verb. */
static int enter(baton_lock *l)
{
    if (!l)
        return BATON_EINVAL;
    baton__clear_error(l->client);
    return BATON_OK;
}

int baton_lock_acquire(baton_lock *l, int64_t lease_ms)
{
    return baton_lock_try_acquire(l, BATON_WAIT_FOREVER, lease_ms);
}

int baton_lock_try_acquire(baton_lock *l, int64_t wait_ms, int64_t lease_ms)
{
    int rc = enter(l);
    if (rc != BATON_OK)
        return rc;
    if (baton__check_wait(wait_ms) != BATON_OK)
        return baton__fail(l->client, BATON_EINVAL,
                           "wait_ms %lld: use BATON_WAIT_FOREVER or 0..%lld ms",
                           (long long)wait_ms, (long long)BATON_MAX_DURATION_MS);
    if (baton__check_lease(lease_ms) != BATON_OK)
        return baton__fail(l->client, BATON_EINVAL,
                           "lease_ms %lld: use BATON_LEASE_WATCHDOG or 1..%lld ms",
                           (long long)lease_ms, (long long)BATON_MAX_DURATION_MS);
    return l->ops->acquire(l, wait_ms, lease_ms);
}

int baton_lock_release(baton_lock *l)
{
    int rc = enter(l);
    return rc != BATON_OK ? rc : l->ops->release(l);
}

int baton_lock_force_release(baton_lock *l, bool *was_locked)
{
    int rc = enter(l);
    return rc != BATON_OK ? rc : l->ops->force_release(l, was_locked);
}

int baton_lock_is_locked(baton_lock *l, bool *out)
{
    int rc = enter(l);
    if (rc == BATON_OK && !out)
        rc = baton__fail(l->client, BATON_EINVAL, "out is NULL");
    return rc != BATON_OK ? rc : l->ops->is_locked(l, out);
}

int baton_lock_is_held_by_current_thread(baton_lock *l, bool *out)
{
    int rc = enter(l);
    if (rc == BATON_OK && !out)
        rc = baton__fail(l->client, BATON_EINVAL, "out is NULL");
    return rc != BATON_OK ? rc : l->ops->is_held(l, out);
}

int baton_lock_hold_count(baton_lock *l, int64_t *out)
{
    int rc = enter(l);
    if (rc == BATON_OK && !out)
        rc = baton__fail(l->client, BATON_EINVAL, "out is NULL");
    return rc != BATON_OK ? rc : l->ops->hold_count(l, out);
}

int baton_lock_remaining_ttl(baton_lock *l, int64_t *ms_out)
{
    int rc = enter(l);
    if (rc == BATON_OK && !ms_out)
        rc = baton__fail(l->client, BATON_EINVAL, "ms_out is NULL");
    return rc != BATON_OK ? rc : l->ops->remaining_ttl(l, ms_out);
}
