/*
 * Distributed locks: the reentrant lock (this header's baton_lock_open), and through the
 * same handle type and verbs the fair lock and the multi-lock.
 *
 * Semantics are Redisson's RLock, and so is the layout in Redis: the lock is a hash at the
 * key NAME whose one field "<client-uuid>:<thread-id>" holds the hold count, with a PEXPIRE
 * lease; waiters listen on "redisson_lock__channel:{NAME}" for the message "0". A C process
 * using baton and a Java process using Redisson can guard one resource with one lock.
 * Each baton client records "host:pid" of its process once, in "baton_client:{<client
 * id>}", for operators (baton_inspect(), `baton status`).
 *
 * Ownership is per thread: the thread that acquired is the one that must release, and a
 * thread that acquires again while holding re-enters (the hold count rises).
 *
 * Two handles of one name in one thread: a hold is released through the handle that took
 * it. A release through another handle of the same client, name and kind that took no hold
 * of the calling thread is refused (BATON_ENOTHELD, "lock x: the calling thread holds it
 * through another handle of this name: release it through that handle"), so the first
 * handle never finds its hold deleted under it (before 0.2.0 the second release deleted it
 * and the first handle's lost handler fired). A thread that acquires through both handles
 * re-enters, and each release counts its own handle's holds. For holders
 * that are not threads, the _as forms take an explicit owner (baton_owner, async.h); the
 * thread forms below mean "the calling thread's owner". A wait in progress can be
 * cancelled from another thread (baton_client_cancel_waits: BATON_ECANCELED).
 *
 * Threads: a baton_lock handle may be used from any thread of the process, concurrently.
 * baton_lock_close() must not run concurrently with other calls on the same handle.
 *
 * Waiting never polls: a waiter subscribes to the lock's channel (one subscription per
 * channel per client, however many threads wait) and sleeps until the unlock message or
 * the holder's remaining lease, whichever comes first, then tries again. The plain lock
 * is unfair like Redisson's (a newcomer may take a free lock before a waiter), within a
 * bound: a waiter that has waited the client's starve_ms (5 ms by default) queues in the
 * lock's line ("baton_lock_line:{NAME}", first come first served) and listens on a
 * channel of its own; while the line is not empty newcomers queue behind it, and each
 * release reserves the lock for the line's first ("baton_lock_next:{NAME}", 50 ms) and
 * tells it alone, once that waiter has waited starve_ms (a newcomer queued first is not
 * handed the lock before: the releasing thread may take it back meanwhile). A waiter in the line
 * also looks by itself every 50 ms × (its rank + 1), at most every second. Redisson's clients do
 * not see the line.
 */
#ifndef BATON_LOCK_H
#define BATON_LOCK_H

#include <baton/client.h>
#include <baton/handle.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct baton_lock baton_lock;

/*
 * Opens a handle on the reentrant lock NAME (1 to BATON_MAX_NAME_LEN bytes, any bytes but
 * NUL). Sends nothing to the server. The handle belongs to client c and must be closed
 * before it.
 *
 * Returns BATON_OK; BATON_EINVAL (c, name or out NULL, name empty or too long);
 * BATON_ENOMEM.
 */
BATON_API int baton_lock_open(baton_client *c, const char *name, baton_lock **out);

/*
 * As baton_lock_open(), with options of this handle's own (handle.h; NULL: as
 * baton_lock_open): watchdog_ms, the lease of a hold taken without one (BATON_LEASE_WATCHDOG
 * or 0), renewed every watchdog_ms / 3 by the client's watchdog, where the client's
 * watchdog_ms would apply. A 1 s leadership lock and 30 s locks share one client:
 *
 *     baton_handle_options o;
 *     baton_handle_options_init(&o);
 *     o.watchdog_ms = 1000;
 *     baton_lock_open_opts(c, "leader", &o, &l);
 *
 * Returns as baton_lock_open(); BATON_EINVAL also for options refused (handle.h: a size it
 * does not know, watchdog_ms out of 30..BATON_MAX_DURATION_MS, fair_wait_ms or recheck_ms
 * set: a plain lock reads neither), the detail naming the field.
 */
BATON_API int baton_lock_open_opts(baton_client *c, const char *name,
                                   const baton_handle_options *opts, baton_lock **out);

/*
 * Closes the handle. A hold still kept through it is not released; its watchdog renewal
 * stops, so it expires after its lease. Asynchronous operations still running on it
 * (baton/async.h) end first: an acquisition completes with BATON_ECANCELED, a release is
 * sent and completes with its result; close waits for them (one round trip for a
 * release), except in a callback run by baton's thread, where it must not be called. Their
 * callbacks may still be pending for baton_client_process() or the client's close, with
 * the (freed) handle as their first argument. NULL is a no-op.
 *
 * Every verb checks on entry that its handle is open (each handle is registered with its
 * kind's magic number; the registry, not the freed memory, is read): a call on a closed
 * handle returns BATON_ECLOSED, and so does a call on a handle whose client was closed
 * (which must still be closed, to free it). Closing a handle twice aborts the program with
 * a message on stderr naming the misuse ("baton_lock_close(0x...): not an open lock: closed
 * twice, or never opened"), in every build. The same holds for every kind of handle.
 */
BATON_API void baton_lock_close(baton_lock *l);

/*
 * Acquires the lock for the calling thread, waiting as long as it takes.
 * lease_ms: BATON_LEASE_WATCHDOG (or 0, the default) to hold until released (the client's
 * watchdog renews the lease every watchdog_ms / 3: the handle's own, baton_lock_open_opts,
 * or the client's), or a lease in milliseconds (1 to
 * BATON_MAX_DURATION_MS)
 * after which the server frees the lock even if it was not released. Re-entering keeps the
 * outer hold's fencing token.
 *
 * Blocks until acquired or a server error. Returns BATON_OK; BATON_EINVAL (NULL handle, bad
 * lease; nothing sent); BATON_ECONN; BATON_EPROTO (the key holds another type: the
 * server's WRONGTYPE text is in baton_client_errmsg(), the key is untouched); BATON_EAUTH.
 */
BATON_API int baton_lock_acquire(baton_lock *l, int64_t lease_ms);

/*
 * As baton_lock_acquire(), but gives up after wait_ms: 0 makes exactly one attempt,
 * BATON_WAIT_FOREVER waits without limit. Blocks for at most about wait_ms (plus one
 * command timeout if the server stops answering). The order is (wait_ms, lease_ms), as in
 * every acquire (common.h): a wait_ms of BATON_LEASE_WATCHDOG is refused (BATON_EINVAL,
 * "lock x: wait_ms is BATON_LEASE_WATCHDOG and lease_ms is ...: swapped?"), and so is a
 * lease_ms of -1, BATON_WAIT_FOREVER ("lock x: lease_ms is -1 (BATON_WAIT_FOREVER) and
 * wait_ms is 30000: swapped?"); nothing is sent.
 *
 * Returns BATON_OK; BATON_ETIMEDOUT (not acquired in time; nothing is left behind in
 * Redis, no subscription kept; also when the server granted a fixed lease_ms but the reply
 * came after that lease, less 1 % + 2 ms, had run out: not held, and released at once if
 * the server still has it); and the errors of baton_lock_acquire().
 */
BATON_API int baton_lock_try_acquire(baton_lock *l, int64_t wait_ms, int64_t lease_ms);

/*
 * Releases one hold of the calling thread. At hold count 0 the key is deleted and one
 * waiter is woken; above 0 the lease is renewed with the lease the lock was taken with.
 * The watchdog renewal, if any, is cancelled before the release is sent.
 *
 * Returns BATON_OK; BATON_ENOTHELD (the calling thread holds no hold: never held, already
 * released, or the lease ran out and perhaps another owner holds it now, which the call
 * never touches); BATON_EINVAL; BATON_ECONN; BATON_EPROTO; BATON_EPERM (the ACL refused
 * the script). BATON_OK with a warning in baton_client_errmsg(): released, but the ACL
 * refused the wake-up's PUBLISH (waiters see it at their next recheck; baton/error.h).
 */
BATON_API int baton_lock_release(baton_lock *l);

/*
 * Deletes the lock whoever holds it and wakes a waiter. *was_locked (may be NULL) is set
 * to whether it was held. A fair lock's queue and deadlines are deleted too (every waiter
 * is woken and joins a new queue: the way out of a poisoned queue). Returns BATON_OK (with
 * a warning when the ACL refused the wake-up, as for release), BATON_EINVAL, BATON_ECONN,
 * BATON_EPROTO (a key holds another type; nothing is changed), BATON_EPERM.
 */
BATON_API int baton_lock_force_release(baton_lock *l, bool *was_locked);

/* *out = whether any owner holds the lock. Returns BATON_OK, BATON_EINVAL, BATON_ECONN. */
BATON_API int baton_lock_is_locked(baton_lock *l, bool *out);

/*
 * *out = whether the calling thread holds the lock (asked of the server, so a hold whose
 * lease ran out reads false). Returns BATON_OK, BATON_EINVAL, BATON_ECONN, BATON_EPROTO.
 */
BATON_API int baton_lock_is_held_by_current_thread(baton_lock *l, bool *out);

/*
 * *out = the calling thread's hold count (0 if it holds none), read from the server.
 * Returns BATON_OK, BATON_EINVAL, BATON_ECONN, BATON_EPROTO.
 */
BATON_API int baton_lock_hold_count(baton_lock *l, int64_t *out);

/*
 * *ms_out = the lock's remaining lease in milliseconds, -2 if it is not held, -1 if the key
 * has no expiry. Returns BATON_OK, BATON_EINVAL, BATON_ECONN.
 */
BATON_API int baton_lock_remaining_ttl(baton_lock *l, int64_t *ms_out);

/*
 * Opens a handle on the fair lock NAME: a reentrant lock whose waiters acquire in the order
 * they first asked (strict FIFO), with Redisson's RFairLock layout (the lock hash at NAME,
 * the queue redisson_lock_queue:{NAME}, the deadlines redisson_lock_timeout:{NAME}, one
 * channel per waiter redisson_lock__channel:{NAME}:<owner>). Every baton_lock_* verb works
 * on it. A waiting client keeps its waiters' places alive (it renews them at least every
 * fair_wait_ms / 3); a waiter whose process died is skipped within the client option
 * fair_wait_ms. A release wakes the head of the queue only. baton_lock_try_acquire() with
 * wait_ms 0 never joins the queue: it fails (BATON_ETIMEDOUT) while the lock is held or
 * other owners are queued. A waiter that times out leaves the queue before returning.
 * Times are the server's (TIME), so client clocks need not agree. Sends nothing; returns as
 * baton_lock_open().
 */
BATON_API int baton_fairlock_open(baton_client *c, const char *name, baton_lock **out);
/* As baton_fairlock_open with options of its own (handle.h; NULL: as the plain open):
 * watchdog_ms as a lock's, and fair_wait_ms (how long a silent waiter of this handle keeps
 * its place; its waits renew their place every third of it); recheck_ms set is
 * BATON_EINVAL. */
BATON_API int baton_fairlock_open_opts(baton_client *c, const char *name,
                                       const baton_handle_options *opts, baton_lock **out);

/*
 * Opens a multi-lock over n member locks (plain or fair, on one or several clients): one
 * handle whose acquire takes every member or none, whose release releases them all. The
 * members stay owned by the caller and must outlive the multi-lock; closing the multi-lock
 * does not close them. Sends nothing to the server.
 *
 * The members are taken in one canonical order (by name, then by server) whatever order
 * they are passed in, so groups that share members never deadlock. An acquire gives each
 * member what is left of the caller's wait (the budget is shared by the whole group); when
 * a member cannot be taken, every member taken in this attempt is released before the call
 * returns. A lease applies to every member; without one each member's client watchdog
 * renews it. Release releases every member and returns the first error after trying all.
 * For the group, is_locked = every member locked, is_held_by_current_thread = every member
 * held by the calling thread, hold_count = the smallest member hold count, remaining_ttl =
 * the shortest member lease (-2 if a member is not locked). Failure details are on the
 * failing member's client (baton_client_errmsg). See docs/multilock.md.
 *
 * Returns BATON_OK; BATON_EINVAL (locks or out NULL, n == 0, a NULL member, a multi-lock as
 * member, the same name twice on one server); BATON_ENOMEM.
 */
BATON_API int baton_multilock_open(baton_lock *const *locks, size_t n, baton_lock **out);

/*
 * Opens a multi-lock over n plain locks named names[0..n) on client c, which it opens and
 * owns: closing the multi-lock closes them (the caller sees and closes only the group).
 * Otherwise as baton_multilock_open(): one handle whose acquire takes every member or none,
 * in one canonical order. Sends nothing to the server.
 *
 * Example, an order over three items:
 *
 *     const char *items[] = {"stock:apple", "stock:pear", "stock:fig"};
 *     baton_lock *order;
 *     if (baton_multilock_open_names(c, items, 3, &order) == BATON_OK) {
 *         if (baton_lock_try_acquire(order, 5000, BATON_LEASE_WATCHDOG) == BATON_OK) {
 *             ...update the three items...
 *             baton_lock_release(order);
 *         }
 *         baton_lock_close(order);
 *     }
 *
 * Returns BATON_OK; BATON_EINVAL (c, names or out NULL, n == 0, a name refused by
 * baton_lock_open, the same name twice: the detail names which, "multi-lock: name 2: ...");
 * BATON_ECLOSED (c closed); BATON_ENOMEM. On failure nothing is left open and *out is NULL.
 */
BATON_API int baton_multilock_open_names(baton_client *c, const char *const *names, size_t n,
                                         baton_lock **out);
/* As baton_multilock_open_names, each member opened with baton_lock_open_opts(opts): the
 * members' watchdog_ms (NULL: the client's); a refused option is named as a member's
 * ("multi-lock: name 0: lock a: recheck_ms 5: ..."). */
BATON_API int baton_multilock_open_names_opts(baton_client *c, const char *const *names, size_t n,
                                              const baton_handle_options *opts, baton_lock **out);

/*
 * Opens a quorum multi-lock (the Redlock algorithm) over n member locks on independent
 * servers: acquired when a majority (n / 2 + 1) of members is taken within the wait and
 * the lease's validity left after the time spent (minus Redlock's clock-drift allowance,
 * lease / 100 + 2 ms) is positive; otherwise every member taken is released and, within
 * the wait, the attempt is retried after a short random back-off. A member whose server
 * is unreachable counts as not taken; when errors alone leave no majority the acquire
 * returns the first error (BATON_ECONN). Release releases the members the calling
 * thread's hold took through this handle (BATON_OK when a majority of them was released).
 * Queries answer with what a majority of members reaches. Arguments and returns as
 * baton_multilock_open().
 */
BATON_API int baton_redlock_open(baton_lock *const *locks, size_t n, baton_lock **out);

/*
 * *token = the fencing token of the calling thread's current hold: a number that rises with
 * every new acquisition of this name (redisson_lock_token:{NAME}, never expires), kept by a
 * re-entrant acquire. A resource that remembers the highest token it has seen can refuse a
 * stale holder. Asks nothing of the server. Returns BATON_OK; BATON_ENOTHELD (the calling
 * thread holds nothing through this handle); BATON_EINVAL.
 */
BATON_API int baton_lock_fencing_token(baton_lock *l, int64_t *token);

/*
 * Registers fn(l, arg) to run when a hold of this lock is found lost: a watchdog renewal
 * finds the owner gone (deleted, expired, taken over), the lease ran out while the server
 * could not be reached, or the server restarted (its run_id changed); and, if nothing told
 * it before, when a release or an acquisition of the calling thread finds that the server
 * lost a hold the handle counted (a release answered "not held", or "released" while the
 * handle counted more holds; an acquisition answered "new hold" where the handle believed
 * it held one). A restart reaches
 * every hold, with a fixed lease or the watchdog, within about a quarter of a second of the
 * server accepting connections again: while the client holds anything it keeps its
 * subscriber connection open, and the restart closes it. fn runs on a library thread (a
 * loss found by a release or an acquisition: on the calling thread, before it returns); it
 * must not block, must not call baton functions on this lock, and must not close the
 * client. NULL fn unregisters. Returns BATON_OK or BATON_EINVAL.
 */
BATON_API int baton_lock_set_lost_handler(baton_lock *l, void (*fn)(baton_lock *, void *),
                                          void *arg);

/*
 * *fd = a file descriptor, owned by the handle, that becomes readable when a hold of this
 * lock is found lost (as for the lost handler), for programs built around poll(). Reading
 * it is not needed; it stays readable until the next successful acquire. Returns BATON_OK,
 * BATON_EINVAL, BATON_ENOMEM.
 */
BATON_API int baton_lock_lost_fd(baton_lock *l, int *fd);

/* Returns the lock's name (borrowed; valid until the handle is closed), or "" for NULL. */
BATON_API const char *baton_lock_name(const baton_lock *l);

#ifdef __cplusplus
}
#endif

#endif /* BATON_LOCK_H */
