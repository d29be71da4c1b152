/*
 * Private to baton: what a primitive may use of the event-loop machinery (async.c,
 * waits.c): naming and cancelling the waits of its handles, counting its blocking verbs,
 * the fiber-aware sleep, and starting asynchronous operations that run its own verbs.
 */
#ifndef BATON_CORE_OPS_H
#define BATON_CORE_OPS_H

#include "net.h"

/* The public verbs that may wait name their handle for the waits they run on the calling
 * thread (per-handle cancellation); an outer verb's handle wins (a multi-lock's members
 * wait for it). Returns what to give back to baton__wait_handle_restore. */
const void *baton__wait_handle(const void *handle);
void baton__wait_handle_restore(const void *saved);
/* Cancels the waits through handle: threads' waits and asynchronous operations started on
 * it (a release excepted). Never blocks for long. */
void baton__evloop_cancel_handle(baton_client *c, const void *handle);

/* Who waits, for a line of waiters (the semaphore's): the calling thread's owner field
 * (baton__owner), which a thread's waits share one after another, so the subscription of
 * its own channel lingers from one wait to the next; on an asynchronous operation's fiber,
 * that owner and ":f<n>", n unique in the process, since the operations a thread started
 * act for it and may wait at once. */
void baton__waiter_owner(const baton_client *c, char *buf, size_t len);

/* A handle is being closed: its asynchronous operations still live are cancelled (a lock
 * release still runs: it is not a wait) and, unless the caller is one of the client's
 * engine threads, waited for, so that none runs on the freed handle. Their callbacks may
 * still be pending (baton_client_process). */
void baton__evloop_drop_handle(baton_client *c, void *handle);

/* A blocking verb that may wait, counted from its start to its very end (its statistics
 * and error detail included), so that close, which waits for the count to drop to 0, never
 * frees the client under a thread that is still returning. BATON_ECANCELED (recorded) when
 * the client is closing: the verb returns it at once. NULL, a forked copy and a call on an
 * asynchronous operation's fiber are not counted. Every begin that returned BATON_OK has
 * its end. */
int baton__call_begin(baton_client *c);
void baton__call_end(baton_client *c);
/* The body of such a verb: returns `call`'s result, counted for client c, its waits
 * cancellable through handle h (baton__evloop_cancel_handle). */
#define BATON__COUNTED_CALL(c, h, call)                                                            \
    do {                                                                                           \
        int counted_rc_ = baton__call_begin(c);                                                    \
        if (counted_rc_ != BATON_OK)                                                               \
            return counted_rc_;                                                                    \
        const void *counted_h_ = baton__wait_handle(h);                                            \
        counted_rc_ = (call);                                                                      \
        baton__wait_handle_restore(counted_h_);                                                    \
        baton__call_end(c);                                                                        \
        return counted_rc_;                                                                        \
    } while (0)

/* On a fiber: yields until until_us (or a cancellation), 0. Elsewhere -1: the caller sleeps
 * as a thread. */
int baton__fiber_sleep_until(int64_t until_us);
/* Whether the caller runs on an asynchronous operation's fiber. */
bool baton__on_fiber(void);

/* owner.c */
/* The owner the calling thread acts for (owner.c): the baton_owner of an _as verb or of an
 * asynchronous operation running on this thread, else baton__thread_id(). Every hold
 * record and owner field uses this, never the thread id itself. */
uint64_t baton__owner_id(void);
/* Makes the calling thread act for owner id (0: itself) until the next call; returns the
 * previous value, for the caller to restore. */
uint64_t baton__owner_act(uint64_t id);
/* "<uuid>:<owner-id>" of the calling thread's owner (baton__owner_id) for this client, into buf (>=
 * 64 bytes). */
void baton__owner(const baton_client *c, char *buf, size_t len);
#define BATON__OWNER_LEN 64
struct baton_owner;
uint64_t baton__owner_of(const struct baton_owner *o);
baton_client *baton__owner_client(const struct baton_owner *o);

/* ------------------------------- asynchronous operations ------------------------------ */

/* What an asynchronous operation's fiber runs, with what: each primitive implements its
 * _async verbs with its blocking verb as the run function (libuv's uv__work_submit(loop, w,
 * work, done): the engine takes callbacks, the objects own their verbs). */
typedef struct baton__op_args {
    baton_owner *owner; /* the owner the operation acts for, or NULL: the starting thread */
    int64_t wait_ms;    /* checked by baton__op_start */
    int64_t lease_ms;
    /* The rest means what the primitive's run function says it means; the engine only
     * carries it (a semaphore's permits, an election's value, where a permit's id goes). */
    int64_t number;
    const void *in; /* the caller's, borrowed until the callback */
    void *out;      /* the caller's, written by the run function before the callback */
} baton__op_args;
typedef int (*baton__op_run_fn)(void *handle, const baton__op_args *args);

/* Starts an asynchronous operation on c's engine (async.c): run(handle, args) runs on a
 * fiber, then fn(handle, args->owner, rc, arg) as baton_async_fn says. is_release: it runs
 * even when cancelled (a release is not a wait; what it gives back would stay taken). The
 * caller did baton__client_enter(c) and checked its own arguments; this checks fn,
 * wait_ms and the owner's client. *op (may be NULL) is set on BATON_OK, NULL otherwise.
 * Returns BATON_OK, BATON_EINVAL, BATON_ENOMEM or BATON_ECANCELED (the client closing). */
int baton__op_start(baton_client *c, void *handle, baton__op_run_fn run, bool is_release,
                    const baton__op_args *args, baton_async_fn fn, void *arg, baton_op **op);

/* An operation of the library's own on c's engine: run(handle, args) on a fiber, and no
 * completion (nothing is queued for baton_client_process; the engine frees it when run
 * returns). A work that lasts, such as an election's observation: N of them cost fibers,
 * not threads. Cancelled as any operation (its handle's drop, the client's cancel_waits
 * and close); handle is only its name there. Returns as baton__op_start. */
int baton__op_spawn(baton_client *c, void *handle, baton__op_run_fn run,
                    const baton__op_args *args);

#endif /* BATON_CORE_OPS_H */
