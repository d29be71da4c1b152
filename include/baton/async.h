/*
 * Event-loop programs: owners that are not threads, asynchronous acquisition, cancellation.
 *
 * Owners. By default a hold belongs to the calling thread (the owner field in Redis is
 * "<client-uuid>:<thread-id>"). A baton_owner is an explicit identity for holders that are
 * not threads: a request served by an event loop, a task that moves between threads. Its
 * field is "<client-uuid>:<owner-id>", a number like a thread id (Redisson's layout holds),
 * taken from 2^62 upwards so that it never equals a thread id. Reentrancy is per owner: an
 * owner that acquires a lock it holds re-enters; two owners in one thread exclude each
 * other; any thread may release for an owner it has. The thread forms of the verbs keep
 * meaning "the calling thread's owner".
 *
 * Asynchronous operations. baton_*_async() starts an acquisition (or a lock release) and
 * returns at once, without a round trip: the work runs on a baton thread of the client
 * (the engine, started with the first operation or baton_client_async_fd), which waits on
 * sockets, pub/sub and timers for every operation at once. The operation later completes exactly
 * once, calling fn(handle, owner, rc, arg) with rc = BATON_OK, BATON_ETIMEDOUT (wait_ms passed;
 * nothing left in Redis, no subscription), BATON_ECANCELED (baton_op_cancel,
 * baton_client_cancel_waits or baton_client_close; nothing left in Redis) or the errors of the
 * blocking form. In the callback, baton_client_errmsg(c) gives the detail.
 *
 * Where callbacks run. By default (BATON_CALLBACKS_PROCESS) never on a baton thread: a
 * completed operation makes the descriptor of baton_client_async_fd() readable, and the
 * program's loop calls baton_client_process(c), which runs the ready callbacks on its own
 * thread. With baton_client_set_callbacks(c, BATON_CALLBACKS_BATON) they run on baton's
 * thread as soon as the operation completes; such a callback may call baton (start
 * operations, release) but must not block for long (every other operation of the client
 * waits behind it) and must not close the client.
 *
 * With baton_client_set_callbacks(c, BATON_CALLBACKS_LOOP), chosen before the first
 * operation and baton_client_async_fd(), the client has no engine thread: the operations
 * themselves run on the program's loop thread, inside baton_client_process(), and nothing
 * passes between threads on their way (a lock hand-over costs no thread switch). Then:
 *   - baton_client_async_fd() gives an epoll descriptor, readable whenever process() has
 *     something to do: a reply on one of the operations' sockets, a pub/sub wake-up, a
 *     timer due, a completion. An operation advances only when process() runs: its bound
 *     (wait_ms) is kept as long as the loop calls process() when the descriptor is readable.
 *   - The first thread that calls process() is the loop thread; process() from another
 *     thread returns BATON_EINVAL. Operations may be started from any thread; started on
 *     the loop thread outside process(), an operation sends its first request before the
 *     start returns (its callback still runs in process()).
 *   - The loop thread blocked in a wait (a blocking acquire in a callback, or on one of
 *     this client's handles outside process()) drives the client's operations meanwhile,
 *     between 1 ms slices of its sleep, so a release it started still reaches the server;
 *     their callbacks wait for process().
 *   - A fiber that subscribes to a channel no other waiter of the process listens on waits
 *     for the server's confirmation (one round trip on the subscriber connection) in
 *     process(), as it holds up the engine thread in the other modes.
 *   - Close handles and the client on the loop thread (or after it stopped calling
 *     process()): close runs the operations still in flight to their end on the closing
 *     thread.
 *
 * Threads. Every function here may be called from any thread (but baton_client_process() of
 * a BATON_CALLBACKS_LOOP client only from its loop thread). A baton_op is valid from its
 * start until its callback returns; it is freed by the library after that.
 */
#ifndef BATON_ASYNC_H
#define BATON_ASYNC_H

#include <baton/client.h>
#include <baton/latch.h>
#include <baton/lock.h>
#include <baton/permits.h>
#include <baton/semaphore.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct baton_owner baton_owner;
typedef struct baton_op baton_op;

/* ------------------------------- owners ---------------------------------------------- */

/*
 * Makes a new owner for holds taken through client c. Sends nothing. Returns BATON_OK;
 * BATON_EINVAL (c or out NULL); BATON_ENOTSUP (c was copied into this process by fork());
 * BATON_ENOMEM. Free with baton_owner_free() after its holds are released and its
 * operations have completed.
 */
BATON_API int baton_owner_new(baton_client *c, baton_owner **out);

/* Frees the owner. Holds it still has are not released (they expire after their lease once
 * their watchdog stops with the lock handle). NULL is a no-op. */
BATON_API void baton_owner_free(baton_owner *o);

/* The owner's number, the part after the colon in its Redis owner field; 0 for NULL. */
BATON_API uint64_t baton_owner_id(const baton_owner *o);

/*
 * The owner forms of the lock verbs: as baton_lock_acquire(), baton_lock_try_acquire(),
 * baton_lock_release(), baton_lock_is_held_by_current_thread(), baton_lock_hold_count() and
 * baton_lock_fencing_token(), for owner o instead of the calling thread. The calling thread
 * is blocked exactly as by the thread form. The owner must belong to the lock's client.
 * Returns as the thread form; BATON_EINVAL also for a NULL owner or one of another client.
 * A handle keeps a hold record per owner: several owners may hold a read lock through
 * one handle, each renewed and released as its own.
 */
BATON_API int baton_lock_acquire_as(baton_lock *l, baton_owner *o, int64_t lease_ms);
BATON_API int baton_lock_try_acquire_as(baton_lock *l, baton_owner *o, int64_t wait_ms,
                                        int64_t lease_ms);
BATON_API int baton_lock_release_as(baton_lock *l, baton_owner *o);
BATON_API int baton_lock_is_held_as(baton_lock *l, baton_owner *o, bool *out);
BATON_API int baton_lock_hold_count_as(baton_lock *l, baton_owner *o, int64_t *out);
BATON_API int baton_lock_fencing_token_as(baton_lock *l, baton_owner *o, int64_t *token);

/* ------------------------------- asynchronous operations ----------------------------- */

/* The completion callback: handle is the object the operation was started on (baton_lock *,
 * baton_semaphore *, baton_latch *, baton_permits *, baton_election *: election.h's
 * _async verbs), owner the owner passed (or NULL). */
typedef void (*baton_async_fn)(void *handle, baton_owner *owner, int rc, void *arg);

/*
 * Starts acquiring lock l (plain, fair, multi-lock, or a read-write lock's read or write
 * side) for owner o (NULL: the calling thread, as if it had called baton_lock_try_acquire),
 * waiting at most wait_ms (0: one attempt; BATON_WAIT_FOREVER), with lease_ms as in
 * baton_lock_try_acquire(). Returns at once: BATON_OK (started; *op, if op is not NULL, is
 * the operation; fn will be called once), or, with nothing started and fn never called,
 * BATON_EINVAL (NULL handle or fn, bad wait or lease, owner of another client),
 * BATON_ENOTSUP (forked copy of the client), BATON_ECANCELED (the client is closing),
 * BATON_ENOMEM.
 */
BATON_API int baton_lock_acquire_async(baton_lock *l, baton_owner *o, int64_t wait_ms,
                                       int64_t lease_ms, baton_async_fn fn, void *arg,
                                       baton_op **op);

/* Starts releasing one hold of owner o (NULL: the calling thread) on l; completes with the
 * results of baton_lock_release(). Returns as baton_lock_acquire_async(). */
BATON_API int baton_lock_release_async(baton_lock *l, baton_owner *o, baton_async_fn fn, void *arg,
                                       baton_op **op);

/* Starts baton_semaphore_try_acquire(s, permits, wait_ms). Returns as above; BATON_EINVAL
 * also for permits < 1. */
BATON_API int baton_semaphore_acquire_async(baton_semaphore *s, int64_t permits, int64_t wait_ms,
                                            baton_async_fn fn, void *arg, baton_op **op);

/* Starts baton_semaphore_release(s, permits); completes with its results. Like a lock's,
 * a release started is not cancelled (baton_op_cancel, cancel_waits and close let it run).
 * Returns as above; BATON_EINVAL also for permits < 1. */
BATON_API int baton_semaphore_release_async(baton_semaphore *s, int64_t permits, baton_async_fn fn,
                                            void *arg, baton_op **op);

/* Starts baton_latch_await(l, timeout_ms). Returns as above. */
BATON_API int baton_latch_await_async(baton_latch *l, int64_t timeout_ms, baton_async_fn fn,
                                      void *arg, baton_op **op);

/* Starts baton_permits_try_acquire(p, wait_ms, lease_ms, id): id must stay valid until the
 * callback, which finds the permit's id there on BATON_OK. Returns as above; BATON_EINVAL
 * also for a NULL id. */
BATON_API int baton_permits_acquire_async(baton_permits *p, int64_t wait_ms, int64_t lease_ms,
                                          char id[BATON_PERMIT_ID_SIZE], baton_async_fn fn,
                                          void *arg, baton_op **op);

/*
 * Asks the operation to stop. One that is still waiting completes with BATON_ECANCELED
 * within about one round trip (it leaves the fair-lock queue or withdraws its write claim
 * and unsubscribes first: nothing stays in Redis); one that has already succeeded or is
 * completing keeps its result (the callback tells which). A release
 * (baton_lock_release_async) is not a wait and is never cancelled, by this call,
 * baton_client_cancel_waits() or a close: it is sent and completes with its result.
 * Never blocks. Must not be called after op's callback returned. Returns BATON_OK or
 * BATON_EINVAL (NULL).
 */
BATON_API int baton_op_cancel(baton_op *op);

/* ------------------------------- the event loop's side ------------------------------- */

/*
 * *fd = a descriptor that becomes readable when completed operations wait for
 * baton_client_process(); poll it for POLLIN (level-triggered; process() drains it). Owned
 * by the client, valid until baton_client_close(). Starts the client's engine thread, so that
 * the first operation's start costs no thread creation. Returns BATON_OK, BATON_EINVAL,
 * BATON_ENOTSUP (forked), BATON_ENOMEM.
 */
BATON_API int baton_client_async_fd(baton_client *c, int *fd);

/*
 * Runs the callbacks of the operations completed so far, on the calling thread, in
 * completion order, and returns how many ran (>= 0). Never waits for the server. Returns
 * BATON_EINVAL (NULL) or BATON_ENOTSUP (forked) instead of a count. Operations that these
 * callbacks start begin when the callbacks are over (or 200 µs after the first start, at
 * the end of the callback that is running then), all with one wake-up of the engine; a
 * callback that blocks in a wait (a blocking acquire) lets them begin first.
 */
BATON_API int baton_client_process(baton_client *c);

/* Where completion callbacks run (see the top of this header). */
#define BATON_CALLBACKS_PROCESS 0 /* on the thread that calls baton_client_process() */
#define BATON_CALLBACKS_BATON 1   /* on baton's thread, as soon as complete */
#define BATON_CALLBACKS_LOOP 2    /* no baton thread: the operations run in process() too */
/* Returns BATON_OK, or BATON_EINVAL (NULL, unknown mode; BATON_CALLBACKS_LOOP chosen or left
 * after the first operation or baton_client_async_fd). Applies to completions after it. */
BATON_API int baton_client_set_callbacks(baton_client *c, int mode);

/*
 * Cancels every wait in progress on the client: threads blocked in baton_lock_acquire(),
 * baton_lock_try_acquire(), baton_semaphore_acquire(), baton_latch_await(),
 * baton_permits_acquire() and their timed forms return BATON_ECANCELED, and asynchronous
 * acquisitions complete with it (a release is not cancelled: it is sent and completes with
 * its result), each after leaving nothing behind in Redis (within about one
 * round trip; a thread in the middle of a round trip finishes it first). Waits that start
 * after the call are not affected. Never blocks. Returns BATON_OK, BATON_EINVAL.
 *
 * baton_client_close() does the same first, then waits for the cancelled threads to return
 * from their calls and runs the callbacks of the operations still pending, on the closing
 * thread (rc BATON_ECANCELED unless they completed before; a release's own result), so
 * that closing with waiters in
 * progress is defined. The threads must still not use the client after their wait returns.
 */
BATON_API int baton_client_cancel_waits(baton_client *c);

/*
 * Cancels the waits through one handle only, as baton_client_cancel_waits() does for the
 * whole client: threads blocked in an acquire or await on that handle (a lock handle's
 * plain, fair, read or write acquire, or a multi-lock's, which its members' waits belong
 * to) return BATON_ECANCELED, leaving nothing behind in Redis, and the asynchronous
 * acquisitions started on it complete with BATON_ECANCELED (a release is not cancelled).
 * Waits through other handles go on (those asleep on a subscription may make one more
 * attempt). Waits that start after the call are not affected. Never blocks. Returns
 * BATON_OK; BATON_EINVAL (NULL); BATON_ENOTSUP (a forked copy of the client; a multi-lock
 * spanning clients: use baton_client_cancel_waits on its members' clients). The election's
 * and the barrier's are declared in election.h and barrier.h.
 */
BATON_API int baton_lock_cancel_waits(baton_lock *l);
BATON_API int baton_semaphore_cancel_waits(baton_semaphore *s);
BATON_API int baton_latch_cancel_waits(baton_latch *l);
BATON_API int baton_permits_cancel_waits(baton_permits *p);

#ifdef __cplusplus
}
#endif

#endif /* BATON_ASYNC_H */
