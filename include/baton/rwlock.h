/*
 * The read-write lock: many readers or one writer, with Redisson's RReadWriteLock
 * semantics and layout (docs/rwlock.md). The lock is a hash at the key NAME whose field
 * "mode" is "read" or "write"; each reading thread has a field "<client-uuid>:<thread-id>"
 * counting its holds, and one timeout key per hold, {NAME}:<client-uuid>:<thread-id>:
 * rwlock_timeout:<n>, carrying that hold's lease; the writer has the field
 * "<client-uuid>:<thread-id>:write". Releases are announced on "redisson_rwlock:{NAME}":
 * "0" when the last reader leaves, "1" when the writer leaves. A C process using baton and
 * a Java process using Redisson can share one read-write lock.
 *
 * A baton_rwlock hands out two baton_lock handles, its read lock and its write lock, and
 * every baton_lock_* verb of <baton/lock.h> works on them: acquire and try_acquire (with a
 * lease or the watchdog), release, force_release, the queries, fencing tokens, the lost
 * handler and lost fd, and membership of a multi-lock. Ownership is per thread, as for the
 * reentrant lock.
 *
 * Reentrancy (Redisson's): a thread may take the read lock, or the write lock, again while
 * it holds it; a thread holding the write lock may also take the read lock (and keeps it
 * after releasing the write lock: a downgrade). A thread holding the read lock may not take
 * the write lock (no upgrade): baton_lock_acquire/try_acquire on the write handle then
 * return BATON_ENOTSUP at once, where Redisson's writer would wait for itself until its
 * wait ran out.
 *
 * Writers go first (baton's, not Redisson's): a writer that waits claims the lock, and new
 * readers (threads that hold no part of it) then wait behind it, so a steady stream of
 * overlapping readers cannot keep a writer out. A writer waits at most for the read holds
 * in progress when it arrived, plus the write holds of writers ahead of it. A claim lapses
 * fair_wait_ms (baton_options) after the writer last renewed it, which a waiting writer
 * does every third of that, so a writer that died waiting delays readers by at most
 * fair_wait_ms. Readers can wait as long as writers keep arriving.
 *
 * Tokens: each first hold of a thread, read or write, takes a new fencing token from the
 * counter redisson_lock_token:{NAME}; a writer's token is larger than those of every hold
 * taken before it.
 *
 * Threads: the handles may be used from any thread, concurrently. baton_rwlock_close()
 * must not run concurrently with other calls on the lock or its two handles.
 */
#ifndef BATON_RWLOCK_H
#define BATON_RWLOCK_H

#include <baton/client.h>
#include <baton/handle.h>
#include <baton/lock.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct baton_rwlock baton_rwlock;

/*
 * Opens the read-write lock NAME (1 to BATON_MAX_NAME_LEN bytes, any bytes but NUL). Sends
 * nothing to the server. The lock belongs to client c and must be closed before it.
 *
 * Returns BATON_OK; BATON_EINVAL (c, name or out NULL, name empty or too long; *out is
 * set to NULL); BATON_ENOMEM.
 */
BATON_API int baton_rwlock_open(baton_client *c, const char *name, baton_rwlock **out);
/* As baton_rwlock_open with options of its own for both sides (handle.h; NULL: as the plain
 * open): watchdog_ms (the lease of a hold without one), fair_wait_ms (a waiting writer's
 * claim) and recheck_ms (how often a waiter re-reads the lock whatever it hears). */
BATON_API int baton_rwlock_open_opts(baton_client *c, const char *name,
                                     const baton_handle_options *opts, baton_rwlock **out);

/*
 * Closes the lock and its two handles. Holds still kept through them are not released:
 * their watchdog renewal stops, so they expire after their lease. NULL is a no-op.
 */
BATON_API void baton_rwlock_close(baton_rwlock *rw);

/*
 * The read lock: a baton_lock owned by rw (valid until baton_rwlock_close(); never pass
 * it to baton_lock_close()). Many threads, in any processes, may hold it at once while no
 * other thread holds the write lock. baton_lock_is_locked() on it tells whether anyone
 * reads (Redisson's rule: read mode, or write mode with the writer's own read holds).
 * Returns NULL for a NULL rw.
 */
BATON_API baton_lock *baton_rwlock_read(baton_rwlock *rw);

/*
 * The write lock: a baton_lock owned by rw (as above). One thread holds it, and then no
 * other thread reads. baton_lock_acquire() and baton_lock_try_acquire() on it return, in
 * addition to their usual codes, BATON_ENOTSUP when the calling thread holds the read lock
 * (no upgrade: release the read lock first); a wait that gives up (BATON_ETIMEDOUT or an
 * error) withdraws its claim, waking the readers it held back. baton_lock_is_locked() on
 * it tells whether someone writes. Returns NULL for a NULL rw.
 */
BATON_API baton_lock *baton_rwlock_write(baton_rwlock *rw);

#ifdef __cplusplus
}
#endif

#endif /* BATON_RWLOCK_H */
