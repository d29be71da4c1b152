/*
 * The verbs every kind of lock shares. A baton_lock is a base (client, name, channel, the
 * current hold's lease) plus a table of operations filled in by its kind: the plain lock
 * (src/lock), the fair lock (src/fairlock), the multi-lock (src/multilock). The public
 * functions here validate their arguments, so no kind sees a NULL handle or an absurd time,
 * then dispatch.
 */
#include "internal.h"

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

void baton_lock_close(baton_lock *l)
{
    if (!l)
        return;
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
