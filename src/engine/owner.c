/*
 * Who a hold belongs to. By default the calling thread: the owner field in Redis is
 * "<client-uuid>:<thread-id>", as Redisson writes it. A baton_owner is an identity that is
 * not a thread (an event loop's request, a task that moves between threads): the verbs of
 * its _as forms, and asynchronous operations, make the thread that runs them act for the
 * owner while they run. Owner ids are numeric like thread ids (Redisson's field stays
 * "<uuid>:<long>") but drawn from 2^62 upwards, where thread ids (a per-process counter from 1)
 * never reach, so an owner can never be confused with a thread.
 */
#include "client.h"
#include "evloop.h"

#include <stdatomic.h>
#include <stdlib.h>

#define OWNER_ID_BASE (UINT64_C(1) << 62)

static _Thread_local uint64_t acting; /* 0: the thread acts for itself */

uint64_t baton__owner_id(void)
{
    return acting ? acting : baton__thread_id();
}

uint64_t baton__owner_act(uint64_t id)
{
    uint64_t before = acting;
    acting = id;
    return before;
}

struct baton_owner {
    baton_client *client;
    uint64_t id;
};

int baton_owner_new(baton_client *c, baton_owner **out)
{
    static atomic_uint_fast64_t next = 0;
    if (out)
        *out = NULL;
    if (!c)
        return BATON_EINVAL;
    int rc = baton__client_enter(c);
    if (rc != BATON_OK)
        return rc;
    if (!out)
        return baton__fail(c, BATON_EINVAL, "out is NULL");
    baton_owner *o = malloc(sizeof *o);
    if (!o)
        return baton__fail(c, BATON_ENOMEM, "out of memory");
    o->client = c;
    o->id = OWNER_ID_BASE + atomic_fetch_add(&next, 1);
    *out = o;
    return BATON_OK;
}

void baton_owner_free(baton_owner *o)
{
    free(o);
}

uint64_t baton_owner_id(const baton_owner *o)
{
    return o ? o->id : 0;
}

uint64_t baton__owner_of(const baton_owner *o)
{
    return o->id;
}

baton_client *baton__owner_client(const baton_owner *o)
{
    return o->client;
}

/* ------------------------------- the _as verbs ---------------------------------------- */

/* Checks (l, o) and makes the calling thread act for o; *saved restores it. */
static int act_for(baton_lock *l, baton_owner *o, uint64_t *saved)
{
    if (!l)
        return BATON_EINVAL;
    baton_client *c = l->client ? l->client : (o ? o->client : NULL);
    if (!o)
        return c ? baton__fail(c, BATON_EINVAL, "lock %s: owner is NULL", l->name) : BATON_EINVAL;
    if (l->client && o->client != l->client)
        return baton__fail(l->client, BATON_EINVAL,
                           "lock %s: the owner belongs to another client (baton_owner_new "
                           "names the client whose uuid prefixes its holds)",
                           l->name);
    *saved = baton__owner_act(o->id);
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
