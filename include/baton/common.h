/*
 * What every public baton header shares: the export macro, the standard types the API uses,
 * and the two special time values.
 */
#ifndef BATON_COMMON_H
#define BATON_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(BATON_STATIC)
#define BATON_API
#elif defined(BATON_BUILDING)
#define BATON_API __attribute__((visibility("default")))
#else
#define BATON_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Times, one order and one meaning everywhere. Every call that waits and leases takes
 * (..., wait_ms, lease_ms), in that order, after its count if it has one
 * (baton_lock_try_acquire(l, wait_ms, lease_ms), baton_permits_try_acquire_many(p, n,
 * wait_ms, lease_ms, ids), baton_election_campaign(e, value, wait_ms, lease_ms)).
 *
 * A wait of 0 is one attempt, no waiting; BATON_WAIT_FOREVER waits without a limit. A
 * lease of 0 is the default, the watchdog's, as BATON_LEASE_WATCHDOG is, for every kind
 * (a lease of 0 was BATON_EINVAL for the locks and the election before 0.2.0).
 *
 * The two constants differ, so that arguments swapped are told: a wait of
 * BATON_LEASE_WATCHDOG, or a lease of -1 (BATON_WAIT_FOREVER), is refused with BATON_EINVAL
 * naming both arguments ("lock x: lease_ms is -1 (BATON_WAIT_FOREVER) and wait_ms is 30000:
 * swapped? ..."), before anything is sent. -1 was BATON_LEASE_WATCHDOG's value before 0.2.0,
 * and 0.2 still read a lease of -1 as the watchdog's (deprecated); from 0.3.0 it is refused,
 * in every call that takes a lease (hence 0.3's own SONAME, libbaton.so.0.3).
 */
/* Pass as a wait or timeout argument to wait without a time limit. */
#define BATON_WAIT_FOREVER (-1)

/* Pass as a lease to hold until released, renewed by the client's watchdog (or pass 0). */
#define BATON_LEASE_WATCHDOG (-2)

/*
 * The longest wait, lease or timeout any call accepts, in milliseconds (365 days). Longer
 * values are almost always a unit mistake (seconds passed as milliseconds times 1000, a
 * timestamp passed as a duration) and are rejected with BATON_EINVAL.
 */
#define BATON_MAX_DURATION_MS (365LL * 24 * 3600 * 1000)

/* The longest object name accepted, in bytes. */
#define BATON_MAX_NAME_LEN 1024

/* Returns the library's version as "MAJOR.MINOR.PATCH"; a static string. */
BATON_API const char *baton_version(void);

#ifdef __cplusplus
}
#endif

#endif /* BATON_COMMON_H */
