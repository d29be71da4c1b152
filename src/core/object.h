/*
 * Private to baton: the base of every handle that is not a lock (latch, semaphore,
 * permits), as the lock kinds share struct baton_lock (lockbase.c). A handle's struct starts
 * with a baton__object; its address is the handle's, so the cancellation of waits and the
 * asynchronous operations started on it know it by either.
 */
#ifndef BATON_CORE_OBJECT_H
#define BATON_CORE_OBJECT_H

#include "internal.h"

typedef struct baton__object {
    baton_client *client;
    char *name;           /* the user's name, also the key of the object's main state */
    char *channel;        /* <channel prefix>{name}: where its changes are published */
    char *request_prefix; /* baton_request:{name}: (once.c) */
} baton__object;

/* The open of such a handle: c, out and the name checked (baton__check_open_name, `what`
 * names the kind in the detail), then `size` zeroed bytes whose start is the base, filled
 * in (channel_prefix gives the channel). *obj is NULL unless BATON_OK. Returns BATON_OK,
 * BATON_EINVAL (c NULL, has_out false, or the name), BATON_ENOTSUP (a forked client) or
 * BATON_ENOMEM; the detail is recorded on c. */
int baton__object_open(baton_client *c, const char *name, const char *what,
                       const char *channel_prefix, size_t size, bool has_out, baton__object **obj);
/* What every verb does first: BATON_EINVAL for NULL, else baton__client_enter. */
int baton__object_enter(baton__object *o);
/* The handle's baton_x_cancel_waits: its blocked waits and asynchronous operations end
 * with BATON_ECANCELED (baton__evloop_cancel_handle). */
int baton__object_cancel_waits(baton__object *o);
/* The handle's close (o may be NULL): its asynchronous operations are cancelled and waited
 * for (none runs on it once freed), then fini(o) frees what the kind added (fini may be
 * NULL), then the base and the memory. */
void baton__object_close(baton__object *o, void (*fini)(baton__object *o));

/* The public open, cancel_waits and close of a kind whose handle is the base alone (the
 * latch, the semaphore): baton_<kind>_open(c, name, out) and the others, written once.
 * `what` names the kind in the open's detail; channel_prefix gives its channel. */
#define BATON__OBJECT_VERBS(kind, what, channel_prefix)                                            \
    int kind##_open(baton_client *c, const char *name, kind **out)                                 \
    {                                                                                              \
        baton__object *o;                                                                          \
        int rc = baton__object_open(c, name, what, channel_prefix, sizeof **out, out != NULL, &o); \
        if (out)                                                                                   \
            *out = (kind *)o;                                                                      \
        return rc;                                                                                 \
    }                                                                                              \
    int kind##_cancel_waits(kind *h)                                                               \
    {                                                                                              \
        return baton__object_cancel_waits((baton__object *)h);                                     \
    }                                                                                              \
    void kind##_close(kind *h)                                                                     \
    {                                                                                              \
        baton__object_close((baton__object *)h, NULL);                                             \
    }

#endif /* BATON_CORE_OBJECT_H */
