/*
 * Private to baton: what the core needs from the event-loop machinery (async.c): counting
 * and cancelling waits, and sleeping either as a thread or as an asynchronous operation.
 */
#ifndef BATON_CORE_EVLOOP_H
#define BATON_CORE_EVLOOP_H

#include "internal.h"

#include <stdatomic.h>

typedef struct baton__evloop baton__evloop;

/* One wait in progress (wait.c), as the cancellation machinery knows it. */
typedef struct baton__waiting {
    uint64_t gen;        /* the client's cancellation generation when the wait began */
    struct baton_op *op; /* the asynchronous operation it runs for, or NULL (a thread) */
    /* A thread's wait: the handle it waits through (baton__wait_handle), whether that
     * handle's waits were cancelled since, and its place in the client's list of them. */
    const void *handle;
    atomic_bool cancelled;
    struct baton__evloop *ev; /* set by baton__wait_sleep for baton__sub_wait's question */
    struct baton__waiting *prev, *next;
} baton__waiting;

/* The public verbs that may wait name their handle for the waits they run on the calling
 * thread (per-handle cancellation); an outer verb's handle wins (a multi-lock's members
 * wait for it). Returns what to give back to baton__wait_handle_restore. */
const void *baton__wait_handle(const void *handle);
void baton__wait_handle_restore(const void *saved);
/* Cancels the waits through handle: threads' waits and asynchronous operations started on
 * it (a release excepted). Never blocks for long. */
void baton__evloop_cancel_handle(baton_client *c, const void *handle);

/* Made at open, before anything can wait; NULL when out of memory. */
baton__evloop *baton__evloop_new(baton_client *c);
/* baton_client_close's first step: cancels every wait, waits for blocking waiters to leave,
 * completes every asynchronous operation and runs the callbacks still pending. The memory
 * stays until baton__evloop_free (after the client's threads have ended: a connection they
 * give back still looks for fibers waiting for one). forked: a copy in a fork child, which
 * has none of those threads: nothing runs. */
void baton__evloop_shut(baton__evloop *ev, bool forked);
/* Shuts it if that has not been done, and frees it. */
void baton__evloop_free(baton__evloop *ev, bool forked);

/* A handle is being closed: its asynchronous operations still live are cancelled (a lock
 * release still runs: it is not a wait) and, unless the caller is one of the client's
 * engine threads, waited for, so that none runs on the freed handle. Their callbacks may
 * still be pending (baton_client_process). */
void baton__evloop_drop_handle(baton_client *c, void *handle);

/* A wait begins: BATON_ECANCELED (recorded) if the client is closing. */
int baton__wait_enter(baton_client *c, baton__waiting *wt);
void baton__wait_leave(baton_client *c, baton__waiting *wt);
/* Whether the wait was cancelled since it began. */
bool baton__wait_cancelled(baton_client *c, const baton__waiting *wt);
/* Sleeps on sub until a wake-up (BATON_OK), until_us (BATON_ETIMEDOUT) or a cancellation
 * (BATON_ECANCELED, recorded). A thread blocks; an asynchronous operation yields its baton
 * thread to the others meanwhile. */
int baton__wait_sleep(baton_client *c, baton__waiting *wt, baton__sub *sub, int64_t until_us);

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

/* An asynchronous operation's fiber waits for its socket: it yields its engine to the
 * other fibers until fd allows `events` (1) or deadline_us passes (0). -1: the caller is
 * not on a fiber (or memory ran out) and polls on its own. */
int baton__fiber_wait_fd(int fd, short events, int64_t deadline_us);
/* On a fiber: yields until until_us (or a cancellation), 0. Elsewhere -1: the caller sleeps
 * as a thread. */
int baton__fiber_sleep_until(int64_t until_us);
/* Whether the caller runs on an asynchronous operation's fiber. */
bool baton__on_fiber(void);
/* Connections handed back to c's pools so far: a fiber that found every connection busy
 * waits for this count to move (baton__fiber_wait_pool) instead of blocking its engine,
 * whose other fibers may hold them. */
uint64_t baton__evloop_freed(baton_client *c);
/* Yields until a connection of `pool` came back after `seen` (1; perhaps taken again
 * since), or deadline_us (0). On a fiber. */
int baton__fiber_wait_pool(baton_client *c, const void *pool, uint64_t seen, int64_t deadline_us);
/* A connection went back to `pool` (or closed, freeing its place): the first fiber waiting
 * for one of it runs again; all of them when `all` (the pool was emptied). */
void baton__evloop_conn_freed(baton_client *c, const void *pool, bool all);

/* owner.c */
struct baton_owner;
uint64_t baton__owner_of(const struct baton_owner *o);
baton_client *baton__owner_client(const struct baton_owner *o);

/* The client of a handle, for the asynchronous forms (each in its module). */
baton_client *baton__semaphore_client(const baton_semaphore *s);
baton_client *baton__latch_client(const baton_latch *l);
baton_client *baton__permits_client(const baton_permits *p);

#endif /* BATON_CORE_EVLOOP_H */
