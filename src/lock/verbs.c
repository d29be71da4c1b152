/*
 * The public verbs of every kind of lock (baton_lock_*, include/baton/lock.h): the plain
 * lock (lock.c), the fair lock (src/fairlock), the multi-lock (src/multilock) and the
 * read-write lock's halves (src/rwlock) are one handle type. The verbs validate their
 * arguments, so no kind sees a NULL handle or an absurd time, then dispatch to the kind's
 * table (baton__lock_ops); the _as forms act for a baton_owner, the _async forms hand the
 * engine the blocking verb. The hold records they read are the lock base's
 * (src/lockbase/lockbase.c).
 */
#include "../core/prim.h"
#include "../lockbase/lockbase.h"

#include <stdlib.h>

/* ------------------------------- verbs ------------------------------------------------ */

void baton_lock_close(baton_lock *l)
{
    if (!l)
        return;
    if (baton__live_closing(l, BATON__MAGIC_LOCK)) {
        /* closing (its verbs still run for the operations it waits for), then unregistered
         * before its memory goes, which another open may take at once */
        baton__lock_dispose(l);
        baton__live_remove(l, BATON__MAGIC_LOCK);
        free(l);
        return;
    }
    switch (baton__live_state(l, BATON__MAGIC_LOCK)) {
    case BATON__LIVE_ORPHAN: /* its client's close let go of the rest */
        baton__live_remove(l, BATON__MAGIC_LOCK);
        free(l);
        break;
    default:
        baton__misuse_abort("baton_lock_close", l, "lock");
    }
}

int baton_lock_cancel_waits(baton_lock *l)
{
    int rc = baton__handle_enter(l, BATON__MAGIC_LOCK, "lock");
    if (rc != BATON_OK)
        return rc;
    if (!l->client) /* a multi-lock over several clients: its members' clients know */
        return BATON_ENOTSUP;
    rc = baton__client_enter(l->client);
    if (rc == BATON_OK)
        baton__evloop_cancel_handle(l->client, l);
    return rc;
}

const char *baton_lock_name(const baton_lock *l)
{
    int st = l ? baton__live_state(l, BATON__MAGIC_LOCK) : BATON__LIVE_NONE;
    return st == BATON__LIVE_OPEN || st == BATON__LIVE_CLOSING ? l->name : "";
}

/* The kind of l, as its messages name it ("lock", "fair lock", ...). */
static const char *kind_of(const baton_lock *l)
{
    switch (l->ops->kind) {
    case BATON_KIND_FAIRLOCK:
        return "fair lock";
    case BATON_KIND_MULTILOCK:
        return "multi-lock";
    case BATON_KIND_RWLOCK:
        return "read-write lock";
    default:
        return "lock";
    }
}

/* Validation shared by every verb: an open handle (its magic, util.h), then its client. */
static int enter(baton_lock *l)
{
    int rc = baton__handle_enter(l, BATON__MAGIC_LOCK, "lock");
    return rc != BATON_OK ? rc : baton__client_enter(l->client);
}

/* enter, and an output pointer `what` that must not be NULL. */
static int enter_out(baton_lock *l, const void *out, const char *what)
{
    int rc = enter(l);
    if (rc == BATON_OK && !out)
        rc = baton__fail(l->client, BATON_EINVAL, "%s %s: %s is NULL", kind_of(l), l->name, what);
    return rc;
}

int baton_lock_acquire(baton_lock *l, int64_t lease_ms)
{
    return baton_lock_try_acquire(l, BATON_WAIT_FOREVER, lease_ms);
}

static int try_acquire(baton_lock *l, int64_t wait_ms, int64_t lease_ms);

/* Counted for close from start to end (evloop.h): a cancelled waiter still counts its
 * statistics on the way out. */
int baton_lock_try_acquire(baton_lock *l, int64_t wait_ms, int64_t lease_ms)
{
    int rc = enter(l); /* before l->client is read */
    if (rc != BATON_OK)
        return rc;
    BATON__COUNTED_CALL(l ? l->client : NULL, l, try_acquire(l, wait_ms, lease_ms));
}

static int try_acquire(baton_lock *l, int64_t wait_ms, int64_t lease_ms)
{
    int rc = enter(l);
    if (rc != BATON_OK)
        return rc;
    if ((rc = baton__check_wait_lease(l->client, kind_of(l), l->name, wait_ms, &lease_ms)) !=
        BATON_OK)
        return rc;
    int64_t start = baton__stat_start(l->client);
    rc = l->ops->acquire(l, wait_ms, lease_ms);
    baton__stat_acquire(l->client, l->ops->kind, rc, start, l->name);
    return rc;
}

/* Whether `other`, a handle of l's client and name, is of l's kind and has a hold of the
 * acting owner (the registry's match: it runs under the registry's lock). */
static bool holds_it(const void *other, const void *l)
{
    const baton_lock *o = other;
    int64_t token;
    return o->ops == ((const baton_lock *)l)->ops && baton__hold_token((baton_lock *)o, &token);
}

int baton_lock_release(baton_lock *l)
{
    int rc = enter(l);
    if (rc != BATON_OK)
        return rc;
    /* Ownership is per handle: a hold taken through another handle of this name is released
     * through that one (docs: "Two handles of one name"), not deleted under it. */
    int64_t token;
    if (!baton__hold_token(l, &token) && baton__live_find(l, BATON__MAGIC_LOCK, holds_it))
        return baton__fail(l->client, BATON_ENOTHELD,
                           "%s %s: the calling thread holds it through another handle of this "
                           "name: release it through that handle",
                           kind_of(l), l->name);
    return l->ops->release(l);
}

int baton_lock_force_release(baton_lock *l, bool *was_locked)
{
    int rc = enter(l);
    return rc != BATON_OK ? rc : l->ops->force_release(l, was_locked);
}

int baton_lock_is_locked(baton_lock *l, bool *out)
{
    int rc = enter_out(l, out, "out");
    return rc != BATON_OK ? rc : l->ops->is_locked(l, out);
}

int baton_lock_is_held_by_current_thread(baton_lock *l, bool *out)
{
    int rc = enter_out(l, out, "out");
    return rc != BATON_OK ? rc : l->ops->is_held(l, out);
}

int baton_lock_hold_count(baton_lock *l, int64_t *out)
{
    int rc = enter_out(l, out, "out");
    return rc != BATON_OK ? rc : l->ops->hold_count(l, out);
}

int baton_lock_remaining_ttl(baton_lock *l, int64_t *ms_out)
{
    int rc = enter_out(l, ms_out, "ms_out");
    return rc != BATON_OK ? rc : l->ops->remaining_ttl(l, ms_out);
}

int baton_lock_fencing_token(baton_lock *l, int64_t *token)
{
    int rc = enter_out(l, token, "token");
    if (rc != BATON_OK)
        return rc;
    if (l->ops->fencing_token)
        return l->ops->fencing_token(l, token);
    if (!baton__hold_token(l, token))
        return baton__fail(l->client, BATON_ENOTHELD,
                           "lock %s: the calling thread holds no hold through this handle",
                           l->name);
    return BATON_OK;
}

int baton_lock_set_lost_handler(baton_lock *l, void (*fn)(baton_lock *, void *), void *arg)
{
    int rc = enter(l);
    if (rc != BATON_OK)
        return rc;
    baton__mutex_lock(&l->mu);
    l->lost_fn = fn;
    l->lost_arg = fn ? arg : NULL;
    baton__mutex_unlock(&l->mu);
    return BATON_OK;
}

int baton_lock_lost_fd(baton_lock *l, int *fd)
{
    int rc = enter_out(l, fd, "fd");
    if (rc != BATON_OK)
        return rc;
    baton__mutex_lock(&l->mu);
    rc = baton__lost_pipe_fd(l->client, l->lost_pipe, l->lost, fd);
    baton__mutex_unlock(&l->mu);
    return rc;
}

/* ------------------------------- asynchronous forms ----------------------------------- */

/* What an asynchronous operation's fiber runs (async.c): the blocking verbs. */
static int async_acquire(void *h, const baton__op_args *a)
{
    return baton_lock_try_acquire(h, a->wait_ms, a->lease_ms);
}

static int async_release(void *h, const baton__op_args *a)
{
    (void)a;
    return baton_lock_release(h);
}

/* The client an operation on l runs on: the handle's, or for a multi-lock spanning clients
 * the owner's (without one, BATON_EINVAL). */
static int async_enter(baton_lock *l, baton_owner *o, baton_op **op, baton_client **c)
{
    if (op)
        *op = NULL;
    int rc = baton__handle_enter(l, BATON__MAGIC_LOCK, "lock");
    if (rc != BATON_OK)
        return rc;
    *c = l->client ? l->client : (o ? baton__owner_client(o) : NULL);
    if (!*c)
        return BATON_EINVAL;
    return baton__client_enter(*c);
}

int baton_lock_acquire_async(baton_lock *l, baton_owner *o, int64_t wait_ms, int64_t lease_ms,
                             baton_async_fn fn, void *arg, baton_op **op)
{
    baton_client *c;
    int rc = async_enter(l, o, op, &c);
    if (rc != BATON_OK)
        return rc;
    if ((rc = baton__check_wait_lease(c, kind_of(l), l->name, wait_ms, &lease_ms)) != BATON_OK)
        return rc;
    baton__op_args a = {.owner = o, .wait_ms = wait_ms, .lease_ms = lease_ms};
    return baton__op_start(c, l, async_acquire, false, &a, fn, arg, op);
}

int baton_lock_release_async(baton_lock *l, baton_owner *o, baton_async_fn fn, void *arg,
                             baton_op **op)
{
    baton_client *c;
    int rc = async_enter(l, o, op, &c);
    if (rc != BATON_OK)
        return rc;
    baton__op_args a = {.owner = o};
    return baton__op_start(c, l, async_release, true, &a, fn, arg, op);
}

/* ------------------------------- the _as verbs ---------------------------------------- */

/* Checks (l, o) and makes the calling thread act for o; *saved restores it. */
static int act_for(baton_lock *l, baton_owner *o, uint64_t *saved)
{
    if (!l)
        return BATON_EINVAL;
    baton_client *c = l->client ? l->client : (o ? baton__owner_client(o) : NULL);
    if (!o)
        return c ? baton__fail(c, BATON_EINVAL, "lock %s: owner is NULL", l->name) : BATON_EINVAL;
    if (l->client && baton__owner_client(o) != l->client)
        return baton__fail(l->client, BATON_EINVAL,
                           "lock %s: the owner belongs to another client (baton_owner_new "
                           "names the client whose uuid prefixes its holds)",
                           l->name);
    *saved = baton__owner_act(baton__owner_of(o));
    return BATON_OK;
}

/* Runs `call` with the calling thread acting for o, then as itself again. */
#define AS_OWNER(l, o, call)                                                                       \
    do {                                                                                           \
        uint64_t saved = 0;                                                                        \
        int rc = act_for(l, o, &saved);                                                            \
        if (rc != BATON_OK)                                                                        \
            return rc;                                                                             \
        rc = (call);                                                                               \
        baton__owner_act(saved);                                                                   \
        return rc;                                                                                 \
    } while (0)

int baton_lock_acquire_as(baton_lock *l, baton_owner *o, int64_t lease_ms)
{
    return baton_lock_try_acquire_as(l, o, BATON_WAIT_FOREVER, lease_ms);
}

int baton_lock_try_acquire_as(baton_lock *l, baton_owner *o, int64_t wait_ms, int64_t lease_ms)
{
    AS_OWNER(l, o, baton_lock_try_acquire(l, wait_ms, lease_ms));
}

int baton_lock_release_as(baton_lock *l, baton_owner *o)
{
    AS_OWNER(l, o, baton_lock_release(l));
}

int baton_lock_is_held_as(baton_lock *l, baton_owner *o, bool *out)
{
    AS_OWNER(l, o, baton_lock_is_held_by_current_thread(l, out));
}

int baton_lock_hold_count_as(baton_lock *l, baton_owner *o, int64_t *out)
{
    AS_OWNER(l, o, baton_lock_hold_count(l, out));
}

int baton_lock_fencing_token_as(baton_lock *l, baton_owner *o, int64_t *token)
{
    AS_OWNER(l, o, baton_lock_fencing_token(l, token));
}
