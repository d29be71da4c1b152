/*
 * The counting semaphore: caps how many holders, across every process and machine, do
 * something at once. Semantics and layout are Redisson's RSemaphore (the permit count is a
 * string at NAME; the new count is published on redisson_sc:{NAME} when permits are
 * returned or added), with lost wake-ups designed out: a release wakes as many waiters as
 * the new permits can serve, and a waiter re-reads at least every recheck_ms (a client
 * option), so a lost message never strands it. Like Redisson's, the semaphore has no
 * owners: any caller may release.
 *
 * Threads: a baton_semaphore handle may be used from any thread, concurrently;
 * baton_semaphore_close() must not run concurrently with other calls on the same handle.
 */
#ifndef BATON_SEMAPHORE_H
#define BATON_SEMAPHORE_H

#include <baton/client.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct baton_semaphore baton_semaphore;

/* Opens a handle on the semaphore NAME; sends nothing. Returns BATON_OK, BATON_EINVAL,
 * BATON_ENOMEM. */
BATON_API int baton_semaphore_open(baton_client *c, const char *name, baton_semaphore **out);

/* Closes the handle (permits taken through it stay taken). NULL is a no-op. */
BATON_API void baton_semaphore_close(baton_semaphore *s);

/* Sets the permit count to `permits` (>= 0) only if none is set; *was_set (may be NULL)
 * tells which. Returns BATON_OK, BATON_EINVAL, BATON_ECONN, BATON_EPROTO. */
BATON_API int baton_semaphore_try_set_permits(baton_semaphore *s, int64_t permits,
                                              bool *was_set);

/* Takes `permits` (>= 1) at once, waiting as long as it takes. Returns BATON_OK,
 * BATON_EINVAL, BATON_ECONN, BATON_EPROTO. */
BATON_API int baton_semaphore_acquire(baton_semaphore *s, int64_t permits);

/* As acquire, giving up after wait_ms (0: one attempt; BATON_WAIT_FOREVER: no limit) with
 * BATON_ETIMEDOUT, holding nothing. */
BATON_API int baton_semaphore_try_acquire(baton_semaphore *s, int64_t permits,
                                          int64_t wait_ms);

/* Returns `permits` (>= 1) and wakes waiters. An absent semaphore is created with that many
 * permits (Redisson's behaviour). Returns BATON_OK, BATON_EINVAL, BATON_ECONN,
 * BATON_EPROTO. */
BATON_API int baton_semaphore_release(baton_semaphore *s, int64_t permits);

/* *out = the available permits (0 if absent). */
BATON_API int baton_semaphore_available(baton_semaphore *s, int64_t *out);

/* Takes every available permit; *drained (may be NULL) = how many. Leaves 0. */
BATON_API int baton_semaphore_drain(baton_semaphore *s, int64_t *drained);

/* Adds delta permits (negative: removes, never below zero), waking waiters when it adds. */
BATON_API int baton_semaphore_add_permits(baton_semaphore *s, int64_t delta);

/* Deletes the semaphore; *existed (may be NULL) tells whether it existed. */
BATON_API int baton_semaphore_delete(baton_semaphore *s, bool *existed);

#ifdef __cplusplus
}
#endif

#endif /* BATON_SEMAPHORE_H */
