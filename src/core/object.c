/*
 * The base of the handles that are not locks (object.h): open, cancel and close, once for
 * the latch, the semaphore and the permits.
 */
#include "object.h"

#include "evloop.h"
#include "keys.h"

#include <stdlib.h>

int baton__object_open(baton_client *c, const char *name, const char *what,
                       const char *channel_prefix, size_t size, bool has_out, baton__object **obj)
{
    *obj = NULL;
    if (!c || !has_out)
        return BATON_EINVAL;
    int rc = baton__check_open_name(c, name, what);
    if (rc != BATON_OK)
        return rc;
    baton__object *o = calloc(1, size);
    if (!o)
        return baton__fail(c, BATON_ENOMEM, "out of memory");
    o->client = c;
    o->name = baton__strdup(name);
    o->channel = baton__derive_key(channel_prefix, name, NULL);
    o->request_prefix = baton__derive_key(BATON__KEY_REQUEST, name, ":");
    if (!o->name || !o->channel || !o->request_prefix) {
        baton__object_close(o, NULL);
        return baton__fail(c, BATON_ENOMEM, "out of memory");
    }
    *obj = o;
    return BATON_OK;
}

int baton__object_enter(baton__object *o)
{
    if (!o)
        return BATON_EINVAL;
    return baton__client_enter(o->client);
}

int baton__object_cancel_waits(baton__object *o)
{
    int rc = baton__object_enter(o);
    if (rc == BATON_OK)
        baton__evloop_cancel_handle(o->client, o);
    return rc;
}

void baton__object_close(baton__object *o, void (*fini)(baton__object *o))
{
    if (!o)
        return;
    baton__evloop_drop_handle(o->client, o); /* none runs on it once freed */
    if (fini)
        fini(o);
    free(o->name);
    free(o->channel);
    free(o->request_prefix);
    free(o);
}
