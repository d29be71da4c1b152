/*
 * The count-down latch: a distributed barrier. A coordinator sets a count; workers count
 * it down; anyone may wait until it reaches zero. Semantics and layout are Redisson's
 * RCountDownLatch (the count is a string at NAME; messages on
 * redisson_countdownlatch__channel__{NAME}: "0" reached zero, "1" new count or deleted),
 * with its hangs fixed: delete wakes every waiter, and a waiter re-reads the count at least
 * every recheck_ms (a client option), so a lost message never strands it.
 *
 * Threads: a baton_latch handle may be used from any thread, concurrently;
 * baton_latch_close() must not run concurrently with other calls on the same handle.
 */
#ifndef BATON_LATCH_H
#define BATON_LATCH_H

#include <baton/client.h>
#include <baton/handle.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct baton_latch baton_latch;

/* Opens a handle on the latch NAME; sends nothing. Returns BATON_OK, BATON_EINVAL (NULL
 * argument, name empty or over BATON_MAX_NAME_LEN bytes), BATON_ENOMEM. */
BATON_API int baton_latch_open(baton_client *c, const char *name, baton_latch **out);
/* As baton_latch_open with options of its own (handle.h; NULL: as the plain open): the latch
 * reads recheck_ms (a waiter re-reads the count at least this often, so a lost "0" costs at
 * most that); watchdog_ms or fair_wait_ms set is BATON_EINVAL. */
BATON_API int baton_latch_open_opts(baton_client *c, const char *name,
                                    const baton_handle_options *opts, baton_latch **out);

/* Closes the handle. NULL is a no-op. */
BATON_API void baton_latch_close(baton_latch *l);

/* Sets the count to `count` (>= 1) only if no count is set (the key is absent: never set,
 * reached zero, or deleted), and publishes "new count". *was_set (may be NULL) tells which.
 * Returns BATON_OK, BATON_EINVAL, BATON_ECONN, BATON_EPROTO (the key holds another type;
 * left untouched). */
BATON_API int baton_latch_try_set_count(baton_latch *l, int64_t count, bool *was_set);

/* Decrements the count; at zero deletes the key and publishes "zero" once. Counting down
 * an absent latch does nothing; the count never goes negative. Counted exactly once: each
 * call carries a request id (baton_request:{NAME}:<id>), so when its reply is lost it is
 * sent again, up to 3 attempts in all, and a run that already happened is not repeated.
 * Blocks at most 3 × (connect + command timeout). Returns BATON_OK, BATON_EINVAL,
 * BATON_ECONN (no attempt was answered: the count may or may not have gone down),
 * BATON_EPROTO. */
BATON_API int baton_latch_count_down(baton_latch *l);

/* *out = the count (0 if absent). Returns BATON_OK, BATON_EINVAL, BATON_ECONN,
 * BATON_EPROTO. */
BATON_API int baton_latch_count(baton_latch *l, int64_t *out);

/* Blocks until the count is zero (returns at once if it is) or timeout_ms passes
 * (BATON_WAIT_FOREVER: no limit; 0: just check). Returns BATON_OK (open),
 * BATON_ETIMEDOUT (leaves no subscription behind), BATON_EINVAL, BATON_ECONN,
 * BATON_EPROTO. */
BATON_API int baton_latch_await(baton_latch *l, int64_t timeout_ms);

/* Deletes the latch and wakes every waiter (they see 0 and return BATON_OK). *existed
 * (may be NULL) tells whether it existed. Returns BATON_OK, BATON_EINVAL, BATON_ECONN,
 * BATON_EPROTO (the key holds another type; left untouched). */
BATON_API int baton_latch_delete(baton_latch *l, bool *existed);

/* Counts down once, then waits until the count is zero (Redisson #6060): a party of a
 * one-shot barrier in one call. As baton_latch_count_down() then baton_latch_await(l,
 * timeout_ms); returns the first failure of the two. */
BATON_API int baton_latch_count_down_and_await(baton_latch *l, int64_t timeout_ms);

#ifdef __cplusplus
}
#endif

#endif /* BATON_LATCH_H */
