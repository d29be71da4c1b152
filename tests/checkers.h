/*
 * Checkers for the fault matrix (test_matrix.c), the ways a test sees that exclusion broke:
 *
 * - a non-atomic counter in Redis (GET, a random pause, SET): two holders at once lose an
 *   increment, so increments done minus the final value = exclusion violations;
 * - an interval log on CLOCK_MONOTONIC, shared by the processes forked after it is made:
 *   each holder records when it entered and left; no two may overlap (a lock), or no more
 *   than N at one instant (a semaphore's permits);
 * - a fenced store, also shared across processes: it accepts a write only with a fencing
 *   token at least the highest it has seen, as a resource that follows the fencing rule
 *   would, so a stale holder's late write is refused;
 * - and a probe for a lock's lost handler (when it ran, how often).
 *
 * The log and the store live in anonymous shared memory: make them before fork().
 */
#ifndef BATON_TEST_CHECKERS_H
#define BATON_TEST_CHECKERS_H

#include <baton/baton.h>
#include <hiredis/hiredis.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------ the non-atomic counter ------------ */

/* GET key, sleeps a random 0..max_pause_us, SET key to what it read plus one. Returns the
 * value written, or -1 if a command failed (a paused or cut server). */
long long th_counter_incr(redisContext *r, const char *key, int max_pause_us);
/* The counter's value (0 if absent). */
long long th_counter_get(redisContext *r, const char *key);

/* ------------------------------------------------ the interval log ------------------ */

typedef struct th_ilog th_ilog;

/* A log of up to capacity intervals in shared memory (asserts success). */
th_ilog *th_ilog_new(size_t capacity);
void th_ilog_free(th_ilog *g);
/* Records an interval opening now, of holder `who` with fencing token `token` (0 if none).
 * Returns its slot for th_ilog_end(), or -1 when the log is full. */
long th_ilog_begin(th_ilog *g, int who, int64_t token);
/* Closes the interval in slot now. */
void th_ilog_end(th_ilog *g, long slot);
/* Closes every interval of `who` still open, at the monotonic time at_ns (a holder that was
 * killed inside its critical section: its interval ends when it died). */
void th_ilog_end_open(th_ilog *g, int who, int64_t at_ns);
/* Intervals recorded. */
size_t th_ilog_count(const th_ilog *g);
/* The most intervals open at one instant (an interval still open counts until now). */
int th_ilog_max_depth(const th_ilog *g);
/* Intervals that opened while `limit` others were already open: exclusion violations for a
 * lock (limit 1) or a semaphore of `limit` permits. */
int th_ilog_violations(const th_ilog *g, int limit);
/* The start of the first interval opened at or after from_ns by anyone but `who`, or -1. */
int64_t th_ilog_next_start(const th_ilog *g, int64_t from_ns, int who);

/* ------------------------------------------------ the fenced store ------------------ */

typedef struct th_fenced th_fenced;

th_fenced *th_fenced_new(void);
void th_fenced_free(th_fenced *f);
/* A write with this fencing token: accepted (true) if the token is at least the highest
 * the store has seen, which it then remembers; refused (false) otherwise. */
bool th_fenced_write(th_fenced *f, int64_t token);
long th_fenced_accepted(const th_fenced *f);
long th_fenced_refused(const th_fenced *f);
int64_t th_fenced_top(const th_fenced *f);

/* ------------------------------------------------ the lost signal ------------------ */

/* What a lock's lost handler saw: register th_lost_probe_fn with a zeroed probe as arg. */
typedef struct th_lost_probe {
    atomic_int calls;
    _Atomic int64_t at_ms; /* th_ms() of the last call */
} th_lost_probe;
void th_lost_probe_fn(baton_lock *l, void *arg);

/* CLOCK_MONOTONIC in nanoseconds: comparable across the processes of one machine. */
int64_t th_mono_ns(void);

#endif
