/*
 * Private to baton: the lock family's base (src/lockbase), for the lock kinds (src/lock,
 * src/fairlock, src/multilock, src/rwlock) and the primitives that keep holds renewed by the
 * watchdog (src/permits, src/election): the watchdog's registry, the lock handle's base and
 * its hold records, the release protocol. A primitive includes it beside ../core/prim.h.
 */
#ifndef BATON_LOCKBASE_H
#define BATON_LOCKBASE_H

#include "../core/internal.h"

/* ------------------------------------------------------------------------------------------
 * Watchdog (lease renewal)
 * ---------------------------------------------------------------------------------------- */

/* Registers a hold (name, owner) in the client's registry; renew = renew its lease every
 * lease_ms / 3 (a hold without an explicit lease), lease_ms its handle's watchdog lease (0:
 * the client's watchdog_ms; a second registration of the same hold with a shorter one
 * shortens it). Reference-counted. The lost callback
 * (may be NULL) runs on the watchdog thread when a renewal finds the owner gone, when the
 * lease ran out while the server could not be reached, or when the server restarted; the
 * registration is gone by then. */
int baton__watchdog_add(baton_client *c, const char *name, const char *owner, bool renew,
                        int64_t lease_ms, void (*lost)(void *arg), void *arg, int64_t since_us);
/* As baton__watchdog_add for a hold of another kind, renewed by `script` and checked by
 * `check` (the locks use lock_renew and hold_check): `script` gets KEYS = up to 100 of its
 * holds' names, ARGV = {lease ms, owner per key}, `check` (run for holds with a lease of
 * their own when the master moved) KEYS = names, ARGV = owners; both answer 1 (held; renewed)
 * or 0 (gone) per key, in order. */
int baton__watchdog_add_kind(baton_client *c, const baton__script *script,
                             const baton__script *check, const char *name, const char *owner,
                             bool renew, int64_t lease_ms, void (*lost)(void *arg), void *arg,
                             int64_t since_us);
/* Starts renewing an existing registration (a re-entrant hold without a lease). */
void baton__watchdog_renew(baton_client *c, const char *name, const char *owner);
/* How many handles of this client have (name, owner) registered (0: none). */
int baton__watchdog_refs(baton_client *c, const char *name, const char *owner);
/* Drops the registration made with arg (the lost callback's argument); the last one stops
 * renewal. Never blocks on the server. */
void baton__watchdog_remove(baton_client *c, const char *name, const char *owner, const void *arg);
/* Drops every reference of (name, owner) (force release). */
void baton__watchdog_forget(baton_client *c, const char *name, const char *owner);
/* Renewal commands sent so far (EVALSHA round trips), for tests and the benchmark. */
uint64_t baton__watchdog_rounds(baton_client *c);

/* ------------------------------------------------------------------------------------------
 * Lock handles: one type and one set of verbs for the plain, fair and multi-lock
 * ---------------------------------------------------------------------------------------- */

typedef struct baton__lock_ops {
    /* deadline_us: BATON__NO_DEADLINE or a monotonic deadline; wait_ms == 0 means one try */
    int (*acquire)(baton_lock *l, int64_t wait_ms, int64_t lease_ms);
    int (*release)(baton_lock *l);
    int (*force_release)(baton_lock *l, bool *was_locked);
    int (*is_locked)(baton_lock *l, bool *out);
    int (*is_held)(baton_lock *l, bool *out);
    int (*hold_count)(baton_lock *l, int64_t *out);
    int (*remaining_ttl)(baton_lock *l, int64_t *out);
    void (*close)(baton_lock *l); /* frees what the kind added; not the base (NULL: keys) */
    /* optional: a kind whose state is only keys derived from the name (impl_size bytes,
     * keys(impl, k) names them): baton__lock_open makes it, close frees it */
    baton__keys_fn keys;
    size_t impl_size;
    /* optional: kinds without a single hold record (the multi-lock) answer themselves */
    int (*fencing_token)(baton_lock *l, int64_t *out);
    baton__kind kind; /* what the client's statistics count it as */
} baton__lock_ops;

struct baton_lock {
    const baton__lock_ops *ops;
    baton_client *client; /* NULL for a multi-lock spanning clients */
    char *name;           /* the user's name, also the hash's key */
    char *channel;        /* where unlock messages arrive */
    pthread_mutex_t mu;   /* guards the hold records below */
    /* The holds taken through this handle: one record per owner (a thread or a
     * baton_owner), made by its first hold and gone with its last release. A lock has one
     * holder at a time, a read lock as many as read; and a release's reply read after
     * another thread of the handle took the lock meets its own record, never the new
     * holder's. Private to lockbase.c. */
    struct baton__hold_rec *recs;
    bool lost; /* a loss was told, and no hold was taken since (the lost fd is readable) */
    void (*lost_fn)(baton_lock *, void *);
    void *lost_arg;
    int lost_pipe[2]; /* readable once lost; -1 until baton_lock_lost_fd */
    void *impl;       /* kind-specific state */
    /* Its times (watchdog lease, fair wait, recheck): its options at open (handle.h), else
     * its client's; a multi-lock spanning clients: zeros (its members have theirs). */
    baton__handle_cfg cfg;

    /* Appended to "<uuid>:<thread-id>" in the hash's owner field (the write lock's
     * ":write"); NULL: nothing. */
    const char *owner_suffix;
};

/* The calling thread's owner field in this lock's hash: baton__owner plus owner_suffix. */
void baton__lock_owner(const baton_lock *l, char *buf, size_t len);

/* The open of a lock kind with one handle whose state is keys (plain, fair: ops->keys):
 * c, out, the name and the options (opts may be NULL; `reads`: the BATON__OPT_* the kind
 * reads) checked (`what` names the kind in the detail), then the handle with its base,
 * its times and its keys. Returns BATON_OK, BATON_EINVAL, BATON_ENOTSUP (a forked
 * client) or BATON_ENOMEM; *out NULL unless OK. */
int baton__lock_open(baton_client *c, const char *name, const char *what,
                     const baton__lock_ops *ops, const char *channel_prefix,
                     const baton_handle_options *opts, unsigned reads, baton_lock **out);

/* Frees a handle: its hold records, its kind's state, its base (baton_lock_close, after
 * the handle's operations were dropped). */
void baton__lock_free(baton_lock *l);
/* baton__lock_free but the memory: what a handle holds on its client, let go of when the
 * client is closed before the handle (the registry's dispose, util.h). */
void baton__lock_dispose(void *p);
/* Registers an opened handle as open (util.h's registry; `what` names its kind in
 * messages): BATON_OK or BATON_ENOMEM. Every kind's open does it last. */
int baton__lock_register(baton_lock *l, const char *what);
/* The fencing token of the calling owner's hold through l: true and *token, or false
 * (no hold; *token 0). */
bool baton__hold_token(baton_lock *l, int64_t *token);

/* Initializes the base of a lock handle (its times: c's, or zeros without a client; the
 * caller may set its own after); frees with baton__lock_base_free. */
int baton__lock_base_init(baton_lock *l, const baton__lock_ops *ops, baton_client *c,
                          const char *name, const char *channel_prefix);
void baton__lock_base_free(baton_lock *l);

/* Hold bookkeeping shared by the plain and the fair lock.
 *
 * After an acquire script succeeded for `owner` (the calling thread): fresh = a new hold
 * (token is its new fencing token), else a re-entry (token is the current counter, used
 * only if this handle did not know the hold). Registers the watchdog for a
 * BATON_LEASE_WATCHDOG hold before returning; on failure the hold is released again. */
int baton__hold_acquired(baton_lock *l, const char *owner, bool fresh, int64_t token,
                         int64_t lease_ms, int64_t sent_us);
/* An acquisition that ran but that fewer than sync_replicas replicas acknowledged: it is
 * recorded and at once released again (a failover could erase it), and BATON_ENOTSYNCED
 * returned with the detail of the WAIT. */
int baton__hold_unsynced(baton_lock *l, const char *owner, bool fresh, int64_t token,
                         int64_t lease_ms, int64_t sent_us);
/* One release of the calling thread's hold, the protocol every hash lock shares: cancels
 * the watchdog first if this is the last hold, then runs `script` through
 * baton__script_run_once with KEYS = keys[0..nkeys) followed by the unlock latch
 * <latch_prefix><client-id>:<n>, and ARGV = {"0", lease to re-apply, owner, latch lifetime}. The
 * script answers nil (not held), 0 (holds remain) or 1 (released). The handle's record
 * follows the answer: holds the server still counts after the handle's last one are
 * released too unless another handle of this client registered them (leftovers of lost
 * releases); a last release while the handle counted more holds tells the loss. A failed
 * last release drops the record (its registration went before it was sent). Returns
 * BATON_OK, BATON_ENOTHELD, or the script's error. */
int baton__hold_release(baton_lock *l, const baton__script *script, const char *latch_prefix,
                        int nkeys, const char **keys);
/* The same for a script that declares only the lock hash (keys[0]) and takes keys[1..] as
 * ARGV after the owner, then the latch's life and the latch (baton__script_run_once_arg):
 * it runs while a Cluster slot migrates, where a script declaring keys that do not exist
 * is refused (TRYAGAIN) until the migration ends. */
int baton__hold_release_hash_only(baton_lock *l, const baton__script *script,
                                  const char *latch_prefix, int nkeys, const char **keys);
/* baton__hold_release_hash_only with hand-overs within the client (cohorting, the plain
 * lock): a last hold released while a thread or fiber of the client waits for the lock
 * (baton__sub_offer on its channel) goes to that waiter in the same script, which also
 * gets token_key (the fencing-token counter), the waiter's owner field and lease
 * (lua/lock_release.lua's 12-argument form). At most BATON__COHORT_PASSES in a row per
 * lock and client; then one release goes through the server (published) for everyone.
 * Not with sync_replicas (a hand-over would not be confirmed by the replicas). */
#define BATON__COHORT_PASSES 8
int baton__hold_release_cohort(baton_lock *l, const baton__script *script, const char *latch_prefix,
                               int nkeys, const char **keys, const char *token_key);
/* An acquire script of a lock kept in Redisson's hash, and what resolves its lost reply. */
/* baton__hold_taken's "taken, but its own lease ran out before the reply came" (detail
 * recorded): it ends the wait, and the acquire returns BATON_ETIMEDOUT keeping that detail. */
#define BATON__LEASE_RAN_OUT 2

typedef struct baton__hold_script {
    const baton__script *script;
    int nkeys, nargs;
    const char **keys, **args;
    const char *owner, *token_key; /* the owner field, and the fencing-token counter */
    int64_t lease_ms;
} baton__hold_script;
/* Runs h's script (baton__script_call_synced). A reply lost after the script was sent is
 * resolved by asking the server, as the same owner, how many holds it has: one more than
 * the handle knows of means the acquire went through, and it is recorded (watchdog
 * included, token read from token_key) rather than left behind unknown; none means it did
 * not run, and it is sent once more. *reply is set (BATON_OK or BATON_ENOTSYNCED: the
 * caller reads it) or NULL (the outcome is rc: acquired after all, or an error);
 * *sent_us is when the last attempt was sent. */
int baton__hold_call(baton_lock *l, const baton__hold_script *h, struct redisReply **reply,
                     int64_t *sent_us);
/* An acquire script's reply {status, value}, as baton__hold_pair reads it. */
typedef struct baton__hold_reply {
    bool read;     /* status and value are the script's (rc BATON_OK or BATON_ENOTSYNCED) */
    bool unsynced; /* it ran; the replicas did not confirm it (BATON_ENOTSYNCED) */
    long long status, value;
    long long extra; /* a third element, where the script gives one (lock_acquire.lua's
                      * first in the line: the holder's lease); else -1 */
} baton__hold_reply;
/* baton__hold_call for a script that replies {status, value} or {status, value, extra}:
 * out->read set when it was read; else the outcome is rc (acquired after all, or an error:
 * BATON_EPROTO for another reply, `what` naming the kind in the detail, e.g. "fair lock"). */
int baton__hold_pair(baton_lock *l, const baton__hold_script *h, const char *what, int64_t *sent_us,
                     baton__hold_reply *out);
/* The hold a read reply took (status 1: a fresh hold, value its fencing token; else a
 * re-entry): baton__hold_unsynced when unsynced, else baton__hold_acquired. */
int baton__hold_taken(baton_lock *l, const baton__hold_script *h, const baton__hold_reply *hr,
                      int64_t sent_us);
/* The queries of a lock kept in Redisson's hash (plain and fair lock alike): EXISTS,
 * HEXISTS/HGET of the calling thread's owner field, PTTL. */
int baton__hash_is_locked(baton_lock *l, bool *out);
int baton__hash_is_held(baton_lock *l, bool *out);
int baton__hash_hold_count(baton_lock *l, int64_t *out);
int baton__hash_remaining_ttl(baton_lock *l, int64_t *out);
/* Deletes the lock whoever holds it: runs `script` (KEYS = keys, ARGV = {"0"}; it answers 1
 * if the lock was held), retried once (deleting twice is harmless), then forgets the
 * handle's hold. *was_locked may be NULL. */
int baton__hold_force_release(baton_lock *l, const baton__script *script, int nkeys,
                              const char **keys, bool *was_locked);
/* Forgets whatever hold the handle knew of (force release, close). */
void baton__hold_forget(baton_lock *l);

#endif /* BATON_LOCKBASE_H */
