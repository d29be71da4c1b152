/*
 * Private to baton: the key prefixes and channel names of every object, in one place.
 *
 * An object named N keeps its state under keys <prefix>{N} (baton__derive_key: the hash
 * tag puts every key of one object in one Cluster slot). Redisson's prefixes are its wire
 * format, so that baton and Redisson clients share one object; baton's own ("baton_...")
 * sit beside them, where Redisson has nothing to say. Every primitive and the inspection
 * (src/inspect) take their names from here; the Lua scripts get them as KEYS.
 */
#ifndef BATON_CORE_KEYS_H
#define BATON_CORE_KEYS_H

/* ---------------------------------- Redisson's ------------------------------------------ */

/* The plain and the fair lock: unlock messages ("0": one waiter, "1": every waiter). */
#define BATON__KEY_LOCK_CHANNEL "redisson_lock__channel:"
/* The fair lock's queue (a list of owners) and its waiters' deadlines (a sorted set). */
#define BATON__KEY_LOCK_QUEUE "redisson_lock_queue:"
#define BATON__KEY_LOCK_TIMEOUT "redisson_lock_timeout:"
/* The fencing-token counter of every lock kind. */
#define BATON__KEY_LOCK_TOKEN "redisson_lock_token:"
/* The unlock latches: redisson_unlock_latch:{name}:<request id>, the outcome of a release
 * kept so that a retried release counts once. */
#define BATON__KEY_UNLOCK_LATCH "redisson_unlock_latch:"
/* The read-write lock's channel (readers and writers share it). */
#define BATON__KEY_RWLOCK_CHANNEL "redisson_rwlock:"
/* The count-down latch's channel (its count is the key named like the latch). */
#define BATON__KEY_LATCH_CHANNEL "redisson_countdownlatch__channel__"
/* The semaphore's and the permits' channel ("<n>": up to n waiters). */
#define BATON__KEY_SEMAPHORE_CHANNEL "redisson_sc:"

/* Suffixes after the hash-tagged name: the permits' lease deadlines, and the owner field
 * of a write lock's holder in the read-write lock's hash. */
#define BATON__KEY_PERMITS_TIMEOUT_SUFFIX ":timeout"
#define BATON__KEY_WRITE_SUFFIX ":write"

/* ---------------------------------- baton's own ------------------------------------------ */

/* The request latches of baton's own writes that must count once (semaphore acquire,
 * release and add_permits, latch count_down, permit release):
 * baton_request:{name}:<client-id>:<n>. The locks use BATON__KEY_UNLOCK_LATCH instead. */
#define BATON__KEY_REQUEST "baton_request:"
/* The side hash where the fair lock records each holder's origin: baton_lock_meta:{name},
 * field <owner> -> "host:pid", with the lock's lease (a Redisson holder has no entry). The
 * other kinds have their client's record instead (below). */
#define BATON__KEY_LOCK_META "baton_lock_meta:"
/* A read hold's timeout key of a read-write lock: {name}:<owner>:rwlock_timeout:<n>
 * (Redisson's layout), one per hold, made by the read scripts (lua/lib/keys.lua). */
#define BATON__KEY_RWLOCK_TIMEOUT ":rwlock_timeout:"
/* The plain lock's starvation bound (src/lock/lock.c, lua/lib/line.lua): the line of
 * starved waiters, baton_lock_line:{name} (a sorted set, owner field -> when it joined),
 * and the reservation of a free lock for the line's first, baton_lock_next:{name} = its
 * owner field, with a life of RESERVE_MS. */
#define BATON__KEY_LOCK_NEXT "baton_lock_next:"
#define BATON__KEY_LOCK_LINE "baton_lock_line:"
/* The semaphore's line of starved waiters, baton_semaphore_line:{name} (a sorted set:
 * "<permits>:<owner>" -> when it joined, server time in µs), and the reservation of the
 * permits freed for the line's first, baton_semaphore_next:{name} = its member, with a life
 * of SEM_RESERVE_MS (lua/lib/semline.lua). */
#define BATON__KEY_SEMAPHORE_NEXT "baton_semaphore_next:"
#define BATON__KEY_SEMAPHORE_LINE "baton_semaphore_line:"
/* The client's record: baton_client:{<client id>} = "host:pid" of its process, for every
 * holder and waiter whose owner field begins with that id (src/core/record.c). */
#define BATON__KEY_CLIENT_RECORD "baton_client:"
/* Leader election (src/election, docs/election.md): the leader's record (hash), the
 * change log (stream) and the observers' channel; the leadership itself is a plain lock at
 * the election's name. */
#define BATON__KEY_ELECTION "baton_election:"
#define BATON__KEY_ELECTION_LOG "baton_election_log:"
#define BATON__KEY_ELECTION_CHANNEL "baton_election__channel:"
/* The barriers (src/barrier, docs/barrier.md): state, the arrived parties' leases, and the
 * channel that wakes them. */
#define BATON__KEY_BARRIER "baton_barrier:"
#define BATON__KEY_BARRIER_PARTIES "baton_barrier_parties:"
#define BATON__KEY_BARRIER_CHANNEL "baton_barrier__channel:"
/* A waiting writer's claim on a read-write lock (server time + fair_wait_ms). */
#define BATON__KEY_RWLOCK_WRITERS "baton_rwlock_writers:"

#endif /* BATON_CORE_KEYS_H */
