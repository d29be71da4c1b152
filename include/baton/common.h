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

/* Pass as a wait or timeout argument to wait without a time limit. */
#define BATON_WAIT_FOREVER (-1)

/* Pass as a lease to hold a lock until it is released, renewed by the client's watchdog. */
#define BATON_LEASE_WATCHDOG (-1)

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
