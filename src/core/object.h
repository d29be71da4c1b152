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
    void (*fini)(struct baton__object *o); /* the kind's (its table's), run once */
    const char *what;                      /* the kind, as messages name it ("semaphore") */
    baton__handle_cfg cfg; /* its times: its options at open (handle.h), else the client's */
} baton__object;

/* What a kind of handle is, in one static const table that every kind fills (the latch,
 * the semaphore, the permits, the election, the barrier): one way to open, cancel and close
 * them all. */
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
    unsigned reads; /* the options per handle it reads (BATON__OPT_*); the others must be 0 */
} baton__object_kind;
/* The open of a kind, whose public open is then this one call: c, out and the name checked
 * (baton__check_open_name, kind->what names the kind in the detail), then kind->size zeroed
 * bytes whose start is the base, filled in (kind->channel_prefix gives the channel), its
 * keys derived, and init(arg). out is the caller's `kind **` (every pointer to a struct has
 * one representation, C11 6.2.5), set to the handle or NULL. Returns BATON_OK, BATON_EINVAL
 * (c or out NULL, or the name), BATON_ENOTSUP (a forked client), BATON_ENOMEM, or init's
 * error; the detail is recorded on c. */
int baton__object_new(baton_client *c, const char *name, const baton__object_kind *kind,
                      const baton_handle_options *opts, void *arg, void *out);

/* The times of an acquire, checked together (common.h): a wait of BATON_LEASE_WATCHDOG or a
 * lease of -1 (BATON_WAIT_FOREVER) is refused naming both arguments (swapped), then the
 * wait, then the lease, which is read
 * (baton__lease_in) into *lease_ms. BATON_OK or BATON_EINVAL, recorded on c as "<what>
 * <name>: ...". */
int baton__check_wait_lease(baton_client *c, const char *what, const char *name, int64_t wait_ms,
                            int64_t *lease_ms);

/* What every verb does first: BATON_EINVAL for NULL, BATON_ECLOSED for a handle that is not
 * open (closed, or its client closed: the registry, util.h), else baton__client_enter. */
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
/* The public close: baton__object_close of an open handle; of one whose client was closed,
 * the memory; of anything else, an abort naming fn (a double close). */
void baton__object_close_verb(baton__object *o, void (*fini)(baton__object *o), const char *fn);

/* The public cancel_waits and close of a kind (baton_<kind>_cancel_waits(h),
 * baton_<kind>_close(h)), written once from its table: the close runs table.fini. */
#define BATON__OBJECT_VERBS(kind, table)                                                           \
    int kind##_cancel_waits(kind *h)                                                               \
    {                                                                                              \
        return baton__object_cancel_waits((baton__object *)h);                                     \
    }                                                                                              \
    void kind##_close(kind *h)                                                                     \
    {                                                                                              \
        baton__object_close_verb((baton__object *)h, (table).fini, #kind "_close");                \
    }

/* baton_<kind>_name(h), for the kinds whose contract has it. */
#define BATON__OBJECT_NAME_VERB(kind)                                                              \
    const char *kind##_name(const kind *h)                                                         \
    {                                                                                              \
        return baton__object_name((const baton__object *)h);                                       \
    }

#endif /* BATON_CORE_OBJECT_H */
