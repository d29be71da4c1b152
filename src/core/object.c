/*
 * The base of the handles that are not locks (object.h): open, cancel and close, once for
 * the latch, the semaphore, the permits, the election and the barrier.
 */
#include "object.h"

#include "evloop.h"
#include "keys.h"

#include <stdlib.h>
#include <string.h>

/* The kind's own keys of o (none without a keys function); how many. */
static size_t own_keys(baton__object *o, baton__key_spec *k)
{
    return o->keys ? o->keys(o, k) : 0;
}

/* The handle made by baton__object_new (o may be NULL) into the caller's pointer. */
static int set_out(void *out, baton__object *o, int rc)
{
    memcpy(out, &o, sizeof o);
    return rc;
}

/* What the handle holds on its client: its operations, and what its kind added (the
 * registry's dispose, at the close of a client before its handles). */
static void dispose(void *p)
{
    baton__object *o = p;
    baton__evloop_drop_handle(o->client, o); /* none runs on it once freed */
    if (o->fini)
        o->fini(o);
}

/* The base's memory, the last of a handle. */
static void free_memory(baton__object *o)
{
    free(o->name);
    free(o->channel);
    free(o->request_prefix);
    baton__key_spec k[BATON__MAX_KEYS];
    baton__free_keys(k, own_keys(o, k));
    free(o);
}

int baton__object_new(baton_client *c, const char *name, const baton__object_kind *kind,
                      const baton_handle_options *opts, void *arg, void *out)
{
    if (out)
        set_out(out, NULL, BATON_OK);
    if (!c)
        return baton__misuse(BATON_EINVAL, "%s %s: client is NULL", kind->what,
                             name ? name : "(NULL)");
    int rc = baton__check_open_name(c, name, kind->what);
    if (rc == BATON_OK && !out)
        rc = baton__fail(c, BATON_EINVAL, "%s %s: out is NULL", kind->what, name);
    baton__handle_cfg cfg;
    if (rc == BATON_OK)
        rc = baton__handle_cfg_read(c, kind->what, name, opts, kind->reads, &cfg);
    if (rc != BATON_OK)
        return rc;
    baton__object *o = calloc(1, kind->size);
    if (!o)
        return baton__fail(c, BATON_ENOMEM, "out of memory");
    o->client = c;
    o->name = baton__strdup(name);
    o->channel = baton__derive_key(kind->channel_prefix, name, NULL);
    o->request_prefix = baton__derive_key(BATON__KEY_REQUEST, name, ":");
    o->keys = kind->keys;
    o->cancel = kind->cancel;
    o->fini = kind->fini;
    o->what = kind->what;
    o->cfg = cfg;
    baton__key_spec k[BATON__MAX_KEYS];
    bool own = baton__derive_keys(name, k, own_keys(o, k));
    if (!o->name || !o->channel || !o->request_prefix || !own) {
        baton__object_close(o, NULL);
        return baton__fail(c, BATON_ENOMEM, "out of memory");
    }
    rc = kind->init ? kind->init(o, arg) : BATON_OK;
    if (rc != BATON_OK) {
        baton__object_close(o, kind->fini);
        return rc;
    }
    if (baton__live_add(o, BATON__MAGIC_OBJECT, c, dispose, kind->what, name) != BATON_OK) {
        baton__object_close(o, kind->fini);
        return baton__fail(c, BATON_ENOMEM, "out of memory");
    }
    return set_out(out, o, BATON_OK);
}

int baton__object_enter(baton__object *o)
{
    int rc = baton__handle_enter(o, BATON__MAGIC_OBJECT, "handle");
    return rc != BATON_OK ? rc : baton__client_enter(o->client);
}

int baton__object_enter_out(baton__object *o, const void *out, const char *what)
{
    int rc = baton__object_enter(o);
    if (rc == BATON_OK && !out)
        rc = baton__fail(o->client, BATON_EINVAL, "%s %s: %s is NULL", o->what, o->name, what);
    return rc;
}

int baton__check_wait_lease(baton_client *c, const char *what, const char *name, int64_t wait_ms,
                            int64_t *lease_ms)
{
    int64_t lease = *lease_ms;
    if (wait_ms == BATON_LEASE_WATCHDOG)
        return baton__fail(
            c, BATON_EINVAL,
            "%s %s: wait_ms is BATON_LEASE_WATCHDOG and lease_ms is %s%lld: swapped? "
            "the order is (wait_ms, lease_ms)",
            what, name, lease == BATON_WAIT_FOREVER ? "BATON_WAIT_FOREVER, " : "",
            (long long)lease);
    /* -1 was BATON_LEASE_WATCHDOG's value before 0.2.0 and is BATON_WAIT_FOREVER's: a lease
     * of -1 is a wait written where the lease goes, refused from 0.3.0 (it was read as the
     * watchdog's in 0.2, deprecated). Nothing is sent. */
    if (lease == BATON_WAIT_FOREVER)
        return baton__fail(c, BATON_EINVAL,
                           "%s %s: lease_ms is -1 (BATON_WAIT_FOREVER) and wait_ms is %s%lld: "
                           "swapped? the order is (wait_ms, lease_ms); the watchdog's lease is "
                           "BATON_LEASE_WATCHDOG (-2) or 0",
                           what, name, wait_ms == BATON_WAIT_FOREVER ? "BATON_WAIT_FOREVER, " : "",
                           (long long)wait_ms);
    if (baton__check_wait(wait_ms) != BATON_OK)
        return baton__fail(c, BATON_EINVAL,
                           "%s %s: wait_ms %lld: use BATON_WAIT_FOREVER or 0..%lld ms", what, name,
                           (long long)wait_ms, (long long)BATON_MAX_DURATION_MS);
    lease = baton__lease_in(lease);
    if (baton__check_lease(lease) != BATON_OK)
        return baton__fail(c, BATON_EINVAL,
                           "%s %s: lease_ms %lld: use BATON_LEASE_WATCHDOG (or 0) or 1..%lld ms",
                           what, name, (long long)lease, (long long)BATON_MAX_DURATION_MS);
    *lease_ms = lease;
    return BATON_OK;
}

const char *baton__object_name(const baton__object *o)
{
    return o && baton__live_state(o, BATON__MAGIC_OBJECT) != BATON__LIVE_NONE ? o->name : "";
}

int baton__object_cancel_waits(baton__object *o)
{
    int rc = baton__object_enter(o);
    if (rc != BATON_OK)
        return rc;
    /* A waiter woken here may close the handle at once (a thread whose wait this ends):
     * nothing of o is read once one may be awake. The kind's hook first (it wakes the
     * waiters of its own queue last, under its lock), then the engine's waits, which take o
     * as an identity only (TSan: the hook read after the engine had woken a latch waiter that
     * closed its handle). */
    baton_client *c = o->client;
    if (o->cancel)
        o->cancel(o);
    baton__evloop_cancel_handle(c, o);
    return BATON_OK;
}

void baton__object_close(baton__object *o, void (*fini)(baton__object *o))
{
    if (!o)
        return;
    baton__evloop_drop_handle(o->client, o); /* none runs on it once freed */
    if (fini)
        fini(o);
    free_memory(o);
}

void baton__object_close_verb(baton__object *o, void (*fini)(baton__object *o), const char *fn)
{
    (void)fini; /* the table's, as o->fini, which dispose runs */
    if (!o)
        return;
    switch (baton__live_state(o, BATON__MAGIC_OBJECT)) {
    case BATON__LIVE_OPEN:
        /* open while its operations end (a release in flight still runs its verb), then
         * unregistered before its memory goes, which another open may take at once */
        dispose(o);
        baton__live_remove(o, BATON__MAGIC_OBJECT);
        free_memory(o);
        break;
    case BATON__LIVE_ORPHAN: /* its client's close ran the rest (dispose) */
        baton__live_remove(o, BATON__MAGIC_OBJECT);
        free_memory(o);
        break;
    default:
        baton__misuse_abort(fn, o, "handle");
    }
}
