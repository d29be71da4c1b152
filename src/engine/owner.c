/*
 * Who a hold belongs to. By default the calling thread: the owner field in Redis is
 * "<client-uuid>:<thread-id>", as Redisson writes it. A baton_owner is an identity that is
 * not a thread (an event loop's request, a task that moves between threads): the verbs of
 * its _as forms (src/lock/verbs.c), and asynchronous operations, make the thread that runs
 * them act for the owner while they run. Owner ids are numeric like thread ids (Redisson's field
 * stays
 * "<uuid>:<long>") but drawn from 2^62 upwards, where thread ids (a per-process counter from 1)
 * never reach, so an owner can never be confused with a thread.
 */
#include "client_fields.h"
#include "evloop.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#define OWNER_ID_BASE (UINT64_C(1) << 62)

static _Thread_local uint64_t acting; /* 0: the thread acts for itself */

uint64_t baton__owner_id(void)
{
    return acting ? acting : baton__thread_id();
}

/* "<client id>:<owner id>": the owner field the calling thread writes. */
void baton__owner(const baton_client *c, char *buf, size_t len)
{
    snprintf(buf, len, "%s:%llu", c->id, (unsigned long long)baton__owner_id());
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
