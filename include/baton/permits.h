/*
 * Permit leases: a semaphore whose permits are leases with ids, so that a holder that dies
 * gives its permits back when their lease ends (Redisson's RPermitExpirableSemaphore, same
 * keys). Use it where a worker may crash while holding a permit: with the counting semaphore
 * (baton_semaphore) such a permit is lost for good and a pool of 4 quietly becomes 3.
 *
 * Each acquisition takes one permit and returns its id, 32 lowercase hex digits (16 random
 * bytes; Redisson's format). The permit is held until release(id), or until its lease ends:
 * a fixed lease in ms, or BATON_LEASE_WATCHDOG (or 0), where this client's watchdog renews
 * it every watchdog_ms / 3 while the permit is held through this handle, so a process that
 * dies gives it back within watchdog_ms. Lease ends are the server's time (TIME), never a
 * client's clock. A permit whose lease ended is given back by the next call that looks
 * (acquire, available): waiters sleep at most until the nearest lease ends, so they take it.
 *
 * Why a handle of its own and not a mode of baton_semaphore: the two have different verbs
 * (release by id vs. by count) and different invariants. On a baton_permits, available +
 * held never exceeds the count set with baton_permits_try_set_permits(), because only a
 * permit that was taken can come back, and it comes back once; a baton_semaphore's release(n)
 * adds permits that nobody took. Do not use both kinds of handle on one name.
 *
 * Layout (see docs/permits.md): NAME is a string with the available count, as for
 * RSemaphore; {NAME}:timeout is a zset of permit id (16 raw bytes) -> end of lease (server ms);
 * new counts are published on redisson_sc:{NAME}. Waiters that waited 4 x the client's
 * starve_ms queue in the counting semaphore's line (baton_semaphore.h), first come first
 * served.
 *
 * Threads: a baton_permits handle may be used from any thread, concurrently; permits are not
 * tied to threads (the id is the permit). baton_permits_close() must not run concurrently with
 * other calls on the same handle.
 *
 * Every function below that takes a handle returns BATON_EINVAL for a NULL handle or an
 * invalid argument, before anything is sent. Keys at NAME or {NAME}:timeout of another type
 * (or a count that is not an integer) make every call that reaches the server fail with
 * BATON_EPROTO and leave them untouched. BATON_ECONN: the server could not be reached or did
 * not answer within the command timeout; BATON_EAUTH / BATON_ENOMEM as for any command;
 * BATON_ENOTSUP for a client copied by fork().
 */
#ifndef BATON_PERMITS_H
#define BATON_PERMITS_H

#include <baton/client.h>
#include <baton/handle.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct baton_permits baton_permits;

/* A permit id: 32 hex digits; a buffer for one, with its terminating NUL. */
#define BATON_PERMIT_ID_LEN 32
#define BATON_PERMIT_ID_SIZE (BATON_PERMIT_ID_LEN + 1)

/* Opens a handle on the permit semaphore NAME; sends nothing. Returns BATON_OK, BATON_EINVAL
 * (NULL argument, name empty or over BATON_MAX_NAME_LEN bytes), BATON_ENOMEM. */
BATON_API int baton_permits_open(baton_client *c, const char *name, baton_permits **out);
/* As baton_permits_open with options of its own (handle.h; NULL: as the plain open): the
 * permits read watchdog_ms (the lease of a permit taken with BATON_LEASE_WATCHDOG or 0,
 * renewed every third of it) and recheck_ms; fair_wait_ms set is BATON_EINVAL. */
BATON_API int baton_permits_open_opts(baton_client *c, const char *name,
                                      const baton_handle_options *opts, baton_permits **out);

/* Closes the handle. Permits taken through it stay taken until released (by id, through any
 * handle) or until their lease ends; the watchdog stops renewing those it renewed, so they
 * come back within watchdog_ms. NULL is a no-op. */
BATON_API void baton_permits_close(baton_permits *p);

/* Sets the number of permits to `permits` (>= 0) only if no count is set; *was_set (may be
 * NULL) tells which. Leases still recorded (the count was deleted while they ran) are
 * subtracted, so available + held never exceeds `permits`. Setting a positive count wakes
 * waiters. One round trip. Returns BATON_OK, BATON_EINVAL, BATON_ECONN, BATON_EPROTO. */
BATON_API int baton_permits_try_set_permits(baton_permits *p, int64_t permits, bool *was_set);

/* Takes one permit with a lease of lease_ms (1..BATON_MAX_DURATION_MS) or, for
 * BATON_LEASE_WATCHDOG or 0, a lease the watchdog renews until release; writes its id
 * (BATON_PERMIT_ID_LEN hex digits and a NUL) to id. Waits as long as it takes: woken by
 * releases (pub/sub), and in any case when the nearest lease ends or after recheck_ms
 * (client option), whichever is first. Within one client it queues behind the client's
 * threads already waiting, rather than racing them for a permit just freed (as the
 * semaphore's acquire of 1 permit). Blocks. Returns BATON_OK, BATON_EINVAL (NULL id,
 * lease out of range; a lease of -1, BATON_WAIT_FOREVER, is refused as a swapped argument:
 * common.h), BATON_ECONN, BATON_EPROTO; on failure id is the empty string. */
BATON_API int baton_permits_acquire(baton_permits *p, int64_t lease_ms,
                                    char id[BATON_PERMIT_ID_SIZE]);

/* As acquire, giving up after wait_ms (0: one attempt, no subscription; BATON_WAIT_FOREVER:
 * no limit) with BATON_ETIMEDOUT, holding nothing and leaving no subscription behind. An
 * absent semaphore has no permits. Returns BATON_OK, BATON_ETIMEDOUT (also when the server
 * granted a fixed lease_ms but the reply came after that lease, less 1 % + 2 ms, had run
 * out: not held, and given back if the server still has it), BATON_EINVAL (NULL id, lease or
 * wait out of range), BATON_ECONN, BATON_EPROTO. */
BATON_API int baton_permits_try_acquire(baton_permits *p, int64_t wait_ms, int64_t lease_ms,
                                        char id[BATON_PERMIT_ID_SIZE]);

/* The most permits one baton_permits_try_acquire_many() takes. */
#define BATON_PERMITS_MAX_MANY 1000

/* As try_acquire for n permits (1..BATON_PERMITS_MAX_MANY) at once, all or none, each with
 * its own id (written to ids[0..n)) and the same lease; each is released by its own id.
 * Returns as try_acquire; BATON_EINVAL also for n out of range or ids NULL. On failure every
 * ids[i] is the empty string and nothing is held. */
BATON_API int baton_permits_try_acquire_many(baton_permits *p, int64_t n, int64_t wait_ms,
                                             int64_t lease_ms, char (*ids)[BATON_PERMIT_ID_SIZE]);

/* Gives the permit `id` back (through any handle, any process: the id is the permit) and
 * wakes a waiter. Counted once: the request carries a request id (baton_request:{NAME}:<id>)
 * and is re-sent after a lost reply, up to 3 attempts; a run that already happened is not
 * repeated. Stops the watchdog's renewal of it before sending. Blocks at most
 * 3 x (connect + command timeout). Returns BATON_OK; BATON_ENOTHELD when there is no such
 * permit (never taken, released already, or its lease ended and it was given back) or when
 * its lease had ended before this release (it is given back now; the detail says which);
 * BATON_EINVAL (NULL, or not BATON_PERMIT_ID_LEN hex digits); BATON_ECONN (no attempt was
 * answered: the permit may or may not have been given back); BATON_EPROTO. */
BATON_API int baton_permits_release(baton_permits *p, const char *id);

/* Sets the lease of the held permit `id` to lease_ms (1..BATON_MAX_DURATION_MS) from the
 * server's now (Redisson's updateLeaseTime); if this handle's watchdog renewed it, renewal
 * stops: the lease is now fixed. A lease that ended is not brought back. One round trip.
 * Returns BATON_OK, BATON_ENOTHELD (no such permit, or its lease had ended), BATON_EINVAL,
 * BATON_ECONN, BATON_EPROTO. */
BATON_API int baton_permits_update_lease(baton_permits *p, const char *id, int64_t lease_ms);

/* Gives back the permits whose lease ended (waking waiters), then *available = the free
 * permits and *held (may be NULL) = the leases running. 0 and 0 if absent. One round trip.
 * Returns BATON_OK, BATON_EINVAL (available NULL), BATON_ECONN, BATON_EPROTO. */
BATON_API int baton_permits_available(baton_permits *p, int64_t *available, int64_t *held);

/* Deletes the count and the leases; *existed (may be NULL) tells whether either existed.
 * Permits held are forgotten (their release answers BATON_ENOTHELD); waiters keep waiting.
 * Returns BATON_OK, BATON_EINVAL, BATON_ECONN, BATON_EPROTO. */
BATON_API int baton_permits_delete(baton_permits *p, bool *existed);

/*
 * Registers fn(p, id, arg) to run when a permit held through this handle is found lost: a
 * watchdog renewal found it gone (deleted, or its lease ended while the holder lived: a
 * pause longer than the lease), its lease ran out while the server could not be reached, or
 * the server restarted (its run_id changed). fn runs on the watchdog thread, must not block
 * and must not call baton_client_close(); id is valid during the call. A lost permit's
 * release answers BATON_ENOTHELD. NULL fn removes the handler. Returns BATON_OK,
 * BATON_EINVAL.
 */
BATON_API int baton_permits_set_lost_handler(baton_permits *p,
                                             void (*fn)(baton_permits *, const char *id, void *),
                                             void *arg);

/* *fd = a descriptor that becomes readable (and stays so) once a permit held through this
 * handle was found lost (as for the lost handler), for programs built around poll(). Owned
 * by the handle: do not read or close it. Returns BATON_OK, BATON_EINVAL, BATON_ENOMEM. */
BATON_API int baton_permits_lost_fd(baton_permits *p, int *fd);

#ifdef __cplusplus
}
#endif

#endif /* BATON_PERMITS_H */
