/*
 * Barriers: the cyclic barrier (Java's CyclicBarrier) and the double barrier (Curator's
 * DistributedDoubleBarrier), for parties in any processes on any hosts.
 *
 * Cyclic barrier. N parties call baton_barrier_await(); all return together when the N-th
 * arrives, each with its arrival index, and the barrier resets for the next generation. Each
 * waiting party's arrival is a lease (the client's watchdog_ms, renewed every
 * watchdog_ms / 3 while it waits): a party that dies, or whose wait times out or is
 * cancelled, breaks its generation, and every other party of it returns BATON_EBROKEN (see
 * below) within about one lease, never hangs. The next arrivals start a new generation.
 *
 * Double barrier. baton_barrier_enter() returns when N parties have entered,
 * baton_barrier_leave() when all N have left: the work between them starts together and
 * ends together. Each is a cyclic barrier of its own (same rules, same breaking).
 *
 * Layout (docs/barrier.md): baton_barrier:{NAME} (a hash: parties, generation, count,
 * broken generations), baton_barrier_parties:{NAME} (a hash: party -> lease end, server
 * time), channel baton_barrier__channel:{NAME}; the double barrier's leave phase the same
 * with ":leave" after the tag. Times are the server's.
 *
 * "Broken" is BATON_EBROKEN, with "barrier NAME: generation G broken: ..." in
 * baton_client_errmsg().
 *
 * Threads: a handle may be used from any thread; one call at a time per handle (a handle is
 * one party). baton_barrier_close() must not run concurrently with other calls on it.
 */
#ifndef BATON_BARRIER_H
#define BATON_BARRIER_H

#include <baton/client.h>
#include <baton/handle.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct baton_barrier baton_barrier;

/*
 * Opens a handle (one party) on the barrier NAME for `parties` parties (2 to 100000; every
 * party must pass the same number). Sends nothing. Returns BATON_OK; BATON_EINVAL (NULL
 * argument, bad name, parties out of range); BATON_ENOTSUP (forked copy); BATON_ENOMEM.
 */
BATON_API int baton_barrier_open(baton_client *c, const char *name, int64_t parties,
                                 baton_barrier **out);
/* As baton_barrier_open with options of its own (handle.h; NULL: as the plain open): the
 * barrier reads watchdog_ms (a waiting party's lease: a dead party breaks the generation
 * within about one lease and a third); fair_wait_ms or recheck_ms set is BATON_EINVAL. */
BATON_API int baton_barrier_open_opts(baton_client *c, const char *name, int64_t parties,
                                      const baton_handle_options *opts, baton_barrier **out);

/* Closes the handle. NULL is a no-op. */
BATON_API void baton_barrier_close(baton_barrier *b);

/*
 * Arrives at the barrier and waits for the other parties of this generation.
 * *index (may be NULL) = the arrival index, 0 for the first to arrive .. parties - 1 for
 * the last (whose arrival trips the barrier); *generation (may be NULL) = the generation.
 *
 * Blocks until the generation trips, timeout_ms (BATON_WAIT_FOREVER: no limit) or the
 * generation breaks. Returns BATON_OK; BATON_ETIMEDOUT (this party gave up: it broke the
 * generation for the others); BATON_EBROKEN (broken: another party died, timed out or
 * was cancelled); BATON_ECANCELED (baton_barrier_cancel_waits, baton_client_cancel_waits
 * or close: this party left, which broke the generation for the others); BATON_EINVAL (another
 * party count is in use by a generation in progress); BATON_ECONN; BATON_EPROTO; BATON_EPERM.
 */
BATON_API int baton_barrier_await(baton_barrier *b, int64_t timeout_ms, int64_t *index,
                                  int64_t *generation);

/* The double barrier: as baton_barrier_await() on its enter phase and its leave phase. */
BATON_API int baton_barrier_enter(baton_barrier *b, int64_t timeout_ms);
BATON_API int baton_barrier_leave(baton_barrier *b, int64_t timeout_ms);

/*
 * *waiting = the parties waiting in the current generation, *generation = its number.
 * Either may be NULL. Returns BATON_OK, BATON_EINVAL, BATON_ECONN, BATON_EPROTO.
 */
BATON_API int baton_barrier_state(baton_barrier *b, int64_t *waiting, int64_t *generation);

/*
 * Cancels the waits through this handle (a thread in baton_barrier_await, _enter or
 * _leave returns BATON_ECANCELED, and its arrival breaks the generation for the others, as
 * a timeout does); waits through other handles go on. Waits that start after the call are
 * not affected. Never blocks. Returns BATON_OK; BATON_EINVAL (NULL); BATON_ENOTSUP (a
 * forked copy of the client).
 */
BATON_API int baton_barrier_cancel_waits(baton_barrier *b);

/* Returns the barrier's name (borrowed; valid until close), or "" for NULL. */
BATON_API const char *baton_barrier_name(const baton_barrier *b);

#ifdef __cplusplus
}
#endif

#endif /* BATON_BARRIER_H */
