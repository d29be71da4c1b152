/*
 * Private to baton: the base of every handle that is not a lock (latch, semaphore,
 * permits, election, barrier), as the lock kinds share struct baton_lock (lockbase.c). A
 * handle's struct starts with a baton__object; its address is the handle's, so the
 * cancellation of waits and the asynchronous operations started on it know it by either.
 */
#ifndef BATON_CORE_OBJECT_H
#define BATON_CORE_OBJECT_H

#include "internal.h"

typedef struct baton__object {
    baton_client *client;
    char *name;           /* the user's name, also the key of the object's main state */
    char *channel;        /* <channel prefix>{name}: where its changes are published */
    char *request_prefix; /* baton_request:{name}: (once.c) */
    /* The kind's other keys (NULL: none): fills k[] (at most BATON__MAX_KEYS) with where
     * they go in the handle and how they are derived from the name; how many. The base
     * derives them at open and frees them at close. */
    size_t (*keys)(struct baton__object *o, baton__key_spec *k);
    /* The kind's waits of its own, not the core's (a queue's condition variable), ended by
     * baton__object_cancel_waits after the core's; NULL: none. */
    void (*cancel)(struct baton__object *o);
} baton__object;

/* The open of such a handle: c, out and the name checked (baton__check_open_name, `what`
 * names the kind in the detail), then `size` zeroed bytes whose start is the base, filled
 * in (channel_prefix gives the channel). *obj is NULL unless BATON_OK. Returns BATON_OK,
 * BATON_EINVAL (c NULL, has_out false, or the name), BATON_ENOTSUP (a forked client) or
 * BATON_ENOMEM; the detail is recorded on c. */
int baton__object_open(baton_client *c, const char *name, const char *what,
                       const char *channel_prefix, size_t size, bool has_out, baton__object **obj);
/* A kind with more than the base (the election, the barrier), in one static const table. */
typedef struct baton__object_kind {
    const char *what;           /* names the kind in the open's detail */
    const char *channel_prefix; /* gives the base's channel */
    size_t size;                /* of the handle's struct, which starts with the base */
    /* its other keys (the base's `keys`, above), or NULL */
    size_t (*keys)(baton__object *o, baton__key_spec *k);
    /* after the keys: the rest of the handle from the open's argument, or NULL; an error
     * (recorded) closes the handle with fini */
    int (*init)(baton__object *o, void *arg);
    void (*fini)(baton__object *o);   /* as baton__object_close's, or NULL */
    void (*cancel)(baton__object *o); /* the base's `cancel`, or NULL */
} baton__object_kind;
/* baton__object_open for such a kind, whose public open is then this one call: out is the
 * caller's `kind **` (every pointer to a struct has one representation, C11 6.2.5), set to
 * the handle or NULL; init gets arg. Returns as baton__object_open, or init's error. */
int baton__object_new(baton_client *c, const char *name, const baton__object_kind *kind, void *arg,
                      void *out);

/* What every verb does first: BATON_EINVAL for NULL, else baton__client_enter. */
int baton__object_enter(baton__object *o);
/* baton__object_enter, then BATON_EINVAL ("<what> is NULL", recorded) if out is NULL. */
int baton__object_enter_out(baton__object *o, const void *out, const char *what);
/* The name of a handle (NULL: ""), for the kinds' baton_x_name. */
const char *baton__object_name(const baton__object *o);
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

/* The public close, cancel_waits and name of a kind with a table (baton_<kind>_close(h),
 * baton_<kind>_cancel_waits(h), baton_<kind>_name(h)), written once; fini as
 * baton__object_close's. */
#define BATON__OBJECT_COMMON_VERBS(kind, fini)                                                     \
    void kind##_close(kind *h)                                                                     \
    {                                                                                              \
        baton__object_close((baton__object *)h, fini);                                             \
    }                                                                                              \
    int kind##_cancel_waits(kind *h)                                                               \
    {                                                                                              \
        return baton__object_cancel_waits((baton__object *)h);                                     \
    }                                                                                              \
    const char *kind##_name(const kind *h)                                                         \
    {                                                                                              \
        return baton__object_name((const baton__object *)h);                                       \
    }

#endif /* BATON_CORE_OBJECT_H */
