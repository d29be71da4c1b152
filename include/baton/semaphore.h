/*
 * The counting semaphore: caps how many holders, across every process and machine, do
 * something at once. Semantics and layout are Redisson's RSemaphore (the permit count is a
 * string at NAME; the new count is published on redisson_sc:{NAME} when permits are
 * returned or added), with lost wake-ups designed out: a release wakes as many waiters as
 * the new permits can serve, and a waiter re-reads at least every recheck_ms (a client
 * option), so a lost message never strands it. Like Redisson's, the semaphore has no
 * owners: any caller may release. Within one client, an acquire of 1 permit queues behind
 * the client's threads already waiting for 1 permit instead of racing them for the permit
 * just freed (a thread that releases and acquires again waits with them rather than
 * taking its permit straight back). A waiter that has waited 4 x the client's starve_ms
 * (20 ms by default; BATON_STARVE_NEVER: never) takes a place in the semaphore's line,
 * first come first served, beside Redisson's keys: a release reserves what it frees for
 * the line's first waiter, if it wants no more than that, and tells that waiter alone, and
 * baton's newcomers queue behind the line while it is not empty, so that waiters of many
 * processes no longer race for each permit. Redisson's own clients do not see the line:
 * they take free permits as before (docs/semaphore.md).
 *
 * Threads: a baton_semaphore handle may be used from any thread, concurrently;
 * baton_semaphore_close() must not run concurrently with other calls on the same handle.
 */
#ifndef BATON_SEMAPHORE_H
#define BATON_SEMAPHORE_H

#include <baton/client.h>
#include <baton/handle.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct baton_semaphore baton_semaphore;

/*
 * Every function below that takes a handle returns BATON_EINVAL for a NULL handle or an
 * invalid argument, before anything is sent. A key at NAME that is not a semaphore (another
 * type, or a string that is not an integer) makes every call that reaches the server fail
 * with BATON_EPROTO ("WRONGTYPE ..." or "... not an integer" in baton_client_errmsg()) and
 * leaves the key untouched. BATON_ECONN: the server could not be reached or did not answer
 * within the command timeout; BATON_EAUTH / BATON_ENOMEM as for any command.
 */

/* Opens a handle on the semaphore NAME; sends nothing. Returns BATON_OK, BATON_EINVAL (NULL
 * argument, name empty or over BATON_MAX_NAME_LEN bytes), BATON_ENOMEM. */
BATON_API int baton_semaphore_open(baton_client *c, const char *name, baton_semaphore **out);
/* As baton_semaphore_open with options of its own (handle.h; NULL: as the plain open): the
 * semaphore reads recheck_ms (how often a waiter re-reads the count whatever it hears);
 * watchdog_ms or fair_wait_ms set is BATON_EINVAL. */
BATON_API int baton_semaphore_open_opts(baton_client *c, const char *name,
                                        const baton_handle_options *opts, baton_semaphore **out);

/* Closes the handle (permits taken through it stay taken). NULL is a no-op. */
BATON_API void baton_semaphore_close(baton_semaphore *s);

/* Sets the permit count to `permits` (>= 0) only if none is set (the key is absent: never
 * set, or deleted); *was_set (may be NULL) tells which. Setting a positive count wakes
 * waiters. One round trip. Returns BATON_OK, BATON_EINVAL, BATON_ECONN, BATON_EPROTO. */
BATON_API int baton_semaphore_try_set_permits(baton_semaphore *s, int64_t permits, bool *was_set);

/* Takes `permits` (>= 1) at once, all or none, waiting as long as it takes. Blocks; the wait
 * is woken by releases and re-reads the count at least every recheck_ms (client option).
 * Taken exactly once: each try carries a request id (baton_request:{NAME}:<id>), so when its
 * reply is lost (a timeout, a cut connection, a server paused past the command timeout) it
 * is sent again, up to 3 attempts in all (3 x (connect + command timeout) at most), and a
 * try that took the permits answers "taken" instead of taking more. Returns BATON_OK,
 * BATON_EINVAL, BATON_ECONN (no attempt of a try was answered: its permits may or may not
 * have been taken, and nobody gives them back), BATON_EPROTO. */
BATON_API int baton_semaphore_acquire(baton_semaphore *s, int64_t permits);

/* As acquire, giving up after wait_ms (0: one try, no subscription; BATON_WAIT_FOREVER:
 * no limit) with BATON_ETIMEDOUT, holding nothing and leaving no subscription behind. A
 * missing semaphore has 0 permits. Each try counts once, as for acquire. Returns BATON_OK,
 * BATON_ETIMEDOUT, BATON_EINVAL (permits < 1, wait_ms not BATON_WAIT_FOREVER or
 * 0..BATON_MAX_DURATION_MS), BATON_ECONN (as for acquire), BATON_EPROTO. */
BATON_API int baton_semaphore_try_acquire(baton_semaphore *s, int64_t permits, int64_t wait_ms);

/* Returns `permits` (>= 1), publishes the new count and so wakes as many waiters as it can
 * serve. There is no ownership check: any caller may release, also permits it never took.
 * An absent semaphore is created with that many permits (Redisson's behaviour). Counted
 * exactly once: each call carries a request id (baton_request:{NAME}:<id>), so when its
 * reply is lost (a timeout, a cut connection, a server paused past the command timeout) it
 * is sent again, up to 3 attempts in all, and a run that already happened is not repeated.
 * Blocks at most 3 × (connect + command timeout). Returns BATON_OK, BATON_EINVAL,
 * BATON_ECONN (no attempt was answered: the permits may or may not have been returned),
 * BATON_EPROTO (also when the count would overflow), BATON_ENOTSUP (a client copied by
 * fork(), as for every call). */
BATON_API int baton_semaphore_release(baton_semaphore *s, int64_t permits);

/* *out = the available permits (0 if absent). A count below zero can only have been written
 * by another program (Redisson's addPermits with a negative delta); it is returned as is.
 * Returns BATON_OK, BATON_EINVAL (out NULL), BATON_ECONN, BATON_EPROTO. */
BATON_API int baton_semaphore_available(baton_semaphore *s, int64_t *out);

/* Takes every available permit; *drained (may be NULL) = how many (0 if absent or none).
 * Leaves 0; an absent semaphore stays absent. Wakes nobody. Returns BATON_OK, BATON_EINVAL,
 * BATON_ECONN, BATON_EPROTO. */
BATON_API int baton_semaphore_drain(baton_semaphore *s, int64_t *drained);

/* Adds delta permits. delta > 0: adds (creating the semaphore if absent), publishes the new
 * count and wakes waiters. delta < 0: removes up to -delta permits, stopping at 0 (the
 * count never goes below zero; Redisson would let it); an absent semaphore stays absent.
 * delta == 0 changes nothing. Counted exactly once, re-sent after a lost reply, as
 * baton_semaphore_release. Returns BATON_OK, BATON_EINVAL (delta == INT64_MIN),
 * BATON_ECONN, BATON_EPROTO (also when the count would overflow). */
BATON_API int baton_semaphore_add_permits(baton_semaphore *s, int64_t delta);

/* Deletes the semaphore; *existed (may be NULL) tells whether it existed. Permits held are
 * forgotten; waiters keep waiting (an absent semaphore has 0 permits). Returns BATON_OK,
 * BATON_EINVAL, BATON_ECONN, BATON_EPROTO. */
BATON_API int baton_semaphore_delete(baton_semaphore *s, bool *existed);

#ifdef __cplusplus
}
#endif

#endif /* BATON_SEMAPHORE_H */
