/*
 * Options per handle: a handle's own watchdog lease, fair wait and recheck, given at its
 * open (baton_lock_open_opts() and the _opts open of every kind), where the client's
 * (baton_options: watchdog_ms, fair_wait_ms, recheck_ms) would otherwise apply. A 1 s
 * leadership lease can sit beside ordinary 30 s locks on one client, one set of
 * connections. See README.md, "Options per handle".
 */
#ifndef BATON_HANDLE_H
#define BATON_HANDLE_H

#include <baton/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The options of one handle, read at its open and not kept (the caller's struct may go
 * right after). 0 in a field means the client's value (baton_options). The struct may grow
 * at its end in a later release without a new SONAME: `size` says how much of it the caller
 * knows. baton_handle_options_init() sets size = sizeof(baton_handle_options) and every
 * field 0; always call it first, then set the fields wanted.
 *
 * An open refuses (BATON_EINVAL, naming the field) a size smaller than this first version's
 * (4 fields), a larger size whose bytes beyond what the library knows are not all 0 (options
 * this library does not have), a field out of bounds (as the client's: watchdog_ms 0 or
 * 30..BATON_MAX_DURATION_MS, the others 0..BATON_MAX_DURATION_MS), and a field set that
 * means nothing to the kind opened (the detail names it: "semaphore s: fair_wait_ms 5000:
 * means nothing to the semaphore kind; leave it 0").
 *
 * Which kind reads which field:
 *   watchdog_ms   the lock, fair lock, read-write lock, multi-lock (from names), permits
 *                 (leases without one of their own), election, barrier (a party's lease):
 *                 the lease of a hold taken without one (BATON_LEASE_WATCHDOG or 0), its
 *                 PTTL, renewed by the client's watchdog thread every watchdog_ms / 3 and
 *                 reported lost once a renewal older than the lease has not succeeded
 *   fair_wait_ms  the fair lock (how long a silent waiter keeps its place in the queue) and
 *                 the read-write lock (a waiting writer's claim)
 *   recheck_ms    the semaphore, latch, permits, read-write lock and election: how often a
 *                 waiter re-reads the server whatever it hears (a lost message costs at
 *                 most that)
 */
typedef struct baton_handle_options {
    size_t size;          /* sizeof(baton_handle_options), set by baton_handle_options_init */
    int64_t watchdog_ms;  /* the watchdog's lease for holds of this handle; 0: the client's */
    int64_t fair_wait_ms; /* fair lock, read-write lock: 0: the client's */
    int64_t recheck_ms;   /* waits that re-read the server: 0: the client's */
} baton_handle_options;

/* Sets o->size to sizeof *o and every field to 0 (the client's). NULL is a no-op. */
BATON_API void baton_handle_options_init(baton_handle_options *o);

#ifdef __cplusplus
}
#endif

#endif /* BATON_HANDLE_H */
