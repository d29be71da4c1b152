/*
 * Inspection: what lives at one name, for operators and their tools (`baton status` is
 * one). The verbs of lock.h, latch.h and semaphore.h answer a holder's questions ("do I
 * hold it?"); baton_inspect() answers an operator's: who holds it and how often, who waits
 * in a fair lock's queue and until when, how many permits or what count is left, the last
 * fencing token, and how many clients listen for each kind of wake-up.
 *
 * One call reads everything in one server-side script, so the answer is one atomic
 * snapshot, taken through the client's own connections (its URL, credentials and routing).
 * It reads Redisson's layout and changes nothing; a Redisson process's objects are seen the
 * same way as baton's.
 *
 * What a name holds is told apart by its Redis type and its neighbours: a hash is a lock
 * (a fair lock when the fair lock's queue or deadline keys exist beside it); a string is a
 * semaphore's permits or a latch's count, told apart by who listens on which channel when
 * it cannot be told by its value. See baton_object_kind.
 *
 * Threads: baton_inspect() may be called from any thread while the client is open. A
 * baton_inspection belongs to the caller; it does not refer to the client and may outlive it.
 */
#ifndef BATON_INSPECT_H
#define BATON_INSPECT_H

#include <baton/client.h>

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a name holds. Values are only ever appended. */
typedef enum baton_object_kind {
    BATON_OBJECT_ABSENT = 0,             /* no key: a free lock, an open or unset latch, an unset
                                            semaphore */
    BATON_OBJECT_LOCK = 1,               /* a held lock (a fair lock with nobody queued too:
                                            its hash is the same) */
    BATON_OBJECT_FAIRLOCK = 2,           /* a fair lock with waiters queued, held or free */
    BATON_OBJECT_SEMAPHORE = 3,          /* a semaphore's available permits */
    BATON_OBJECT_LATCH = 4,              /* a latch's count (above zero) */
    BATON_OBJECT_SEMAPHORE_OR_LATCH = 5, /* a count above zero that nobody waits on: either */
    BATON_OBJECT_OTHER = 6,              /* a key of another type: not a baton object */
    BATON_OBJECT_RWLOCK = 7,             /* a held read-write lock (its hash has a 'mode') */
    BATON_OBJECT_PERMITS = 8,            /* a semaphore with permit leases held now
                                            (baton_permits, RPermitExpirableSemaphore) */
} baton_object_kind;

/* One holder of a lock: one field of Redisson's hash. */
typedef struct baton_inspect_holder {
    size_t size;       /* sizeof this struct in the library that filled it (see below) */
    const char *owner; /* "<client-id>:<thread-id>", the hash's field */
    int64_t holds;     /* re-entrant hold count; -1 if the field's value is not a number */
    const char *host;  /* host name of the holding process, as its client recorded it
                          (gethostname; baton_client:{<client id>}); NULL when none is
                          recorded: a holder that is not baton (Redisson) */
    int64_t pid;       /* process id of the holding process on that host; 0 when none */
} baton_inspect_holder;

/* One permit lease of a semaphore's permit leases (baton_permits, Redisson's
 * RPermitExpirableSemaphore). */
typedef struct baton_inspect_permit {
    size_t size;          /* sizeof this struct in the library that filled it */
    char id[33];          /* the permit id: 32 lowercase hex digits */
    int64_t lease_end_ms; /* when the lease ends: server time (ms since the epoch) */
} baton_inspect_permit;

/* One waiter in a fair lock's queue. */
typedef struct baton_inspect_waiter {
    size_t size;         /* sizeof this struct in the library that filled it */
    const char *owner;   /* "<client-id>:<thread-id>" */
    bool has_deadline;   /* false if the waiter has no entry in the deadline set */
    int64_t deadline_ms; /* when the waiter loses its place unless it renews it: server
                            time (ms since the epoch), comparable with server_time_ms */
    const char *host;    /* host name of the waiting process (its client's record); NULL
                            when none is recorded (appended in 0.4) */
    int64_t pid;         /* process id of the waiting process; 0 when none */
    int64_t permits;     /* the permits it waits for: a semaphore's line and reservation
                            (-1: the entry does not say); 0 for a lock's waiters */
} baton_inspect_waiter;

/*
 * What baton_inspect() found at a name. Every string and array is owned by the struct and
 * freed with it by baton_inspection_free().
 *
 * ABI: the library allocates this struct and the holder and waiter structs, and new fields
 * are only ever appended to each of them; existing fields never change order, type or
 * meaning. Each starts with `size`, the sizeof the library that filled it declares, so a
 * program built against a newer header can tell whether a field it knows is there:
 * `offsetof(baton_inspection, field) < ins->size`. Holders and waiters are arrays of
 * pointers, never of structs, so that a longer element struct does not move its neighbours.
 */
typedef struct baton_inspection {
    size_t size;                    /* sizeof this struct in the library that filled it */
    char *name;                     /* the name inspected */
    baton_object_kind kind;         /* what it holds */
    const char *kind_name;          /* the kind as `baton status --json` spells it: "absent",
                                       "lock", "fairlock", "semaphore", "latch",
                                       "semaphore-or-latch", "other", "rwlock",
                                       "permits"; static */
    char *redis_type;               /* the key's Redis TYPE: "none", "hash", "string", ... */
    int64_t ttl_ms;                 /* the key's PTTL: -2 absent, -1 no expiry */
    baton_inspect_holder **holders; /* a lock's holders (none when free) */
    size_t n_holders;
    baton_inspect_waiter **queue; /* a fair lock's queue, first in line first */
    size_t n_queue;
    bool has_value;                 /* the key is a string holding an integer: */
    int64_t value;                  /* a semaphore's available permits, a latch's count */
    bool has_token;                 /* a fencing token was ever handed out for the name: */
    int64_t token;                  /* the last one */
    int64_t server_time_ms;         /* the server's clock when the snapshot was taken */
    int64_t subscribers_lock;       /* clients subscribed for the lock's unlock message */
    int64_t subscribers_semaphore;  /* clients waiting for the semaphore's permits */
    int64_t subscribers_latch;      /* clients waiting for the latch to open */
    baton_inspect_permit **permits; /* the permit leases held now ({NAME}:timeout), soonest
                                       end first; leases already ended are not listed */
    size_t n_permits;
    const char *rwlock_mode;     /* a read-write lock's mode, "read" or "write" (its holders
                                    are its readers and, as "<owner>:write", its writer);
                                    NULL for anything else; static */
    int slot;                    /* a Redis Cluster's slot of the name's keys; -1 elsewhere */
    char *node;                  /* the node that serves the name: "host:port" (a Cluster: the
                                    slot's master), or "unix:<path>" */
    baton_inspect_waiter **line; /* a plain lock's line of starved waiters
                                    (baton_lock_line:{NAME}), first in line first; no
                                    deadlines (has_deadline false): a waiter in it looks at
                                    least every second, and a dead one's place is dropped
                                    when its turn comes */
    size_t n_line;
    baton_inspect_waiter **semaphore_line; /* a semaphore's line of starved waiters
                                              (baton_semaphore_line:{NAME}, which
                                              baton_semaphore and baton_permits share),
                                              first in line first, each with the permits
                                              it wants; no deadlines */
    size_t n_semaphore_line;
    baton_inspect_waiter *reserved; /* the waiter a free lock (baton_lock_next:{NAME}) or
                                       freed permits (baton_semaphore_next:{NAME}) are kept
                                       for: a line's former first, told its turn and not yet
                                       there. has_deadline and deadline_ms say when the
                                       reservation lapses (server time); permits is what
                                       is kept for it (0 for a lock). NULL when none */
} baton_inspection;

/*
 * Reads what lives at NAME (1 to BATON_MAX_NAME_LEN bytes) into a new *out, which the caller
 * frees with baton_inspection_free(). A name with nothing at it is not an error: *out says
 * BATON_OBJECT_ABSENT. Blocks for one round trip, at most the command timeout (twice: a read
 * whose connection broke is sent once more on a new one). *out is NULL on any failure.
 *
 * Returns BATON_OK; BATON_EINVAL (c, name or out NULL, name empty or too long); BATON_ECONN;
 * BATON_EAUTH; BATON_EPROTO (a server error, or a reply that is not a snapshot);
 * BATON_ENOMEM; BATON_ENOTSUP (a client copied into a forked child). Details:
 * baton_client_errmsg().
 */
BATON_API int baton_inspect(baton_client *c, const char *name, baton_inspection **out);

/* Frees an inspection and everything it owns. NULL is a no-op. */
BATON_API void baton_inspection_free(baton_inspection *ins);

/*
 * Key names matching a glob, found with SCAN (`baton list` finds its objects this way, then
 * inspects each). What baton_scan_keys() found: owned by the struct, freed with it by
 * baton_key_scan_free(). Fields are only ever appended (see baton_inspection's ABI).
 */
typedef struct baton_key_scan {
    size_t size; /* sizeof this struct in the library that filled it */
    char **keys; /* the keys found, in SCAN's order; a key may repeat when the server
                    rehashed or a slot moved during the scan */
    size_t n_keys;
    uint64_t examined; /* how many keys the servers were asked to examine: SCAN's COUNT
                          summed over the calls */
    bool cut;          /* the scan stopped at max_examined before every SCAN ended: keys
                          may be missing */
    size_t masters;    /* how many servers were scanned: 1, or a Cluster's masters */
} baton_key_scan;

/*
 * SCAN ... MATCH match COUNT n over the client's whole keyspace: one server (under Sentinel,
 * the master), or every master of a Cluster one after the other (the masters that serve
 * slots when the call starts). The work is bounded: once the COUNTs sent add up to
 * max_examined (at least 1), no more SCAN is sent and (*out)->cut is true. Each round trip
 * is bounded by the command timeout; a broken connection fails the call (no retry: the
 * cursor belongs to the connection's server). Read-only.
 *
 * Returns BATON_OK with *out for the caller to free; BATON_EINVAL (c, match or out NULL,
 * match empty, max_examined 0); BATON_ECONN; BATON_EAUTH; BATON_EPROTO (a server error, e.g.
 * an ACL without SCAN, or a reply that is not SCAN's); BATON_ENOMEM; BATON_ENOTSUP (a
 * client copied into a forked child). *out is NULL on failure. Details:
 * baton_client_errmsg().
 */
BATON_API int baton_scan_keys(baton_client *c, const char *match, uint64_t max_examined,
                              baton_key_scan **out);

/* Frees a scan's result. NULL is a no-op. */
BATON_API void baton_key_scan_free(baton_key_scan *s);

/*
 * Which object a Redis key belongs to, for tools that find objects by SCAN (`baton list`).
 * An object NAME keeps its own key at NAME (a lock's or read-write lock's hash, a
 * semaphore's or latch's count; an election's leadership is a lock hash at NAME) and, beside
 * it, side keys under the prefixes of Redisson's and baton's layout (<prefix>{NAME}: a fair
 * lock's queue and deadlines, fencing tokens, request latches, holders' origins, permit
 * leases {NAME}:timeout, read-write lock reader timeouts, an election's record and change
 * log, a barrier's state and parties, a client's record baton_client:{<client id>}).
 */
typedef enum baton_key_role {
    BATON_KEY_OBJECT = 1, /* the key is an object's own: NAME is the key itself */
    BATON_KEY_NAMES = 2,  /* a side key that stands for its object NAME, which may have no
                             key of its own (a fair lock's queue: waiters queued for a free
                             lock): list NAME */
    BATON_KEY_SIDE = 3,   /* a side key to leave out: its object, if any, is found by its
                             own key (or is not one baton_inspect() reads: a barrier);
                             NAME is that object's when the key tells it, else "" (a
                             client's record) */
} baton_key_role;

/*
 * Maps a key (as SCAN returns it) to the object it belongs to: copies the object's NAME
 * into name (NUL-terminated, at most len bytes with the NUL) and returns the key's role, a
 * baton_key_role (> 0). No server is asked: the key's prefix and {hash tag} tell it.
 * Returns BATON_EINVAL (key or name NULL, len 0, or NAME longer than len - 1 bytes: name
 * is then ""). BATON_MAX_NAME_LEN + 1 bytes is always enough for a key baton made.
 */
BATON_API int baton_key_object(const char *key, char *name, size_t len);

/*
 * The SCAN MATCH patterns of the side keys that stand for an object without a key of its own
 * (BATON_KEY_NAMES; today one: the fair lock's queue, "redisson_lock_queue:*"): the i-th
 * pattern (i from 0), static, or NULL past the last. A tool that scans for a glob other than
 * "*" scans these too and keeps the NAMEs baton_key_object() gives that match its glob.
 */
BATON_API const char *baton_key_side_pattern(size_t i);

#ifdef __cplusplus
}
#endif

#endif /* BATON_INSPECT_H */
