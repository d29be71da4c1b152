/*
 * Private to baton: the core's internal interface, shared by every module. Nothing here is
 * API; nothing here may appear in a public header.
 */
#ifndef BATON_CORE_INTERNAL_H
#define BATON_CORE_INTERNAL_H

#include <baton/baton.h>

#include <pthread.h>
#include <stdarg.h>

#include "stats.h"

struct redisReply;

/* ------------------------------------------------------------------------------------------
 * Threads and time
 * ---------------------------------------------------------------------------------------- */

/* pthread wrappers: a failing mutex or condition call is a bug in baton, so they abort. */
void baton__mutex_init(pthread_mutex_t *m);
void baton__mutex_destroy(pthread_mutex_t *m);
void baton__mutex_lock(pthread_mutex_t *m);
void baton__mutex_unlock(pthread_mutex_t *m);
void baton__cond_init(pthread_cond_t *c); /* waits on CLOCK_MONOTONIC */
void baton__cond_destroy(pthread_cond_t *c);
void baton__cond_signal(pthread_cond_t *c);
void baton__cond_broadcast(pthread_cond_t *c);
/* Waits until signalled or until the monotonic deadline (µs; BATON__NO_DEADLINE: none).
 * Returns 0, or ETIMEDOUT once the deadline has passed. */
int baton__cond_wait_until(pthread_cond_t *c, pthread_mutex_t *m, int64_t deadline_us);

#define BATON__NO_DEADLINE INT64_MAX

/* Takes node off a doubly linked list whose links are its fields PREV and NEXT and whose
 * first node is the lvalue head; BATON__UNLINK_TAILED also keeps the lvalue tail (its last
 * node). The node's own links are left as they were. */
#define BATON__UNLINK(node, PREV, NEXT, head)                                                      \
    do {                                                                                           \
        if ((node)->PREV)                                                                          \
            (node)->PREV->NEXT = (node)->NEXT;                                                     \
        else                                                                                       \
            (head) = (node)->NEXT;                                                                 \
        if ((node)->NEXT)                                                                          \
            (node)->NEXT->PREV = (node)->PREV;                                                     \
    } while (0)
#define BATON__UNLINK_TAILED(node, PREV, NEXT, head, tail)                                         \
    do {                                                                                           \
        if (!(node)->NEXT)                                                                         \
            (tail) = (node)->PREV;                                                                 \
        BATON__UNLINK(node, PREV, NEXT, head);                                                     \
    } while (0)
/* Puts node last on such a list (head and tail lvalues). */
#define BATON__APPEND(node, PREV, NEXT, head, tail)                                                \
    do {                                                                                           \
        (node)->NEXT = NULL;                                                                       \
        (node)->PREV = (tail);                                                                     \
        if (tail)                                                                                  \
            (tail)->NEXT = (node);                                                                 \
        else                                                                                       \
            (head) = (node);                                                                       \
        (tail) = (node);                                                                           \
    } while (0)

/* Monotonic clock in microseconds. */
int64_t baton__now_us(void);
/* now + ms as a deadline; BATON_WAIT_FOREVER (negative) gives BATON__NO_DEADLINE. */
int64_t baton__deadline_after_ms(int64_t ms);

/* A small integer naming the calling thread, unique in the process, never reused. */
uint64_t baton__thread_id(void);
/* The owner the calling thread acts for (owner.c): the baton_owner of an _as verb or of an
 * asynchronous operation running on this thread, else baton__thread_id(). Every hold
 * record and owner field uses this, never the thread id itself. */
uint64_t baton__owner_id(void);
/* Makes the calling thread act for owner id (0: itself) until the next call; returns the
 * previous value, for the caller to restore. */
uint64_t baton__owner_act(uint64_t id);

/* ------------------------------------------------------------------------------------------
 * Memory and strings
 * ---------------------------------------------------------------------------------------- */

/* Fills buf with n bytes from getrandom(); how many it got (n unless the kernel has no
 * entropy source, which Linux >= 3.17 always has). */
size_t baton__random_bytes(void *buf, size_t n);
/* Room for one more element in the array at arrp (a T ** for an array of T, elem = sizeof
 * (T)) of *cap elements, n of them in use: when full, its capacity doubles (the first:
 * first). false: out of memory (the array as it was). */
bool baton__grow(void *arrp, size_t *cap, size_t n, size_t elem, size_t first);
char *baton__strdup(const char *s);
char *baton__strndup(const char *s, size_t n);
/* printf into a new string; NULL when out of memory. */
char *baton__asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A string-keyed hash map of void *; keys are copied. Not thread-safe. */
typedef struct baton__map_entry {
    char *key;
    void *val;
    struct baton__map_entry *next;
} baton__map_entry;

typedef struct baton__map {
    baton__map_entry **buckets;
    size_t nbuckets;
    size_t count;
} baton__map;

void baton__map_init(baton__map *m);
void baton__map_free(baton__map *m); /* frees entries and keys, not values */
void *baton__map_get(const baton__map *m, const char *key);
int baton__map_put(baton__map *m, const char *key, void *val); /* BATON_OK / BATON_ENOMEM */
void *baton__map_remove(baton__map *m, const char *key);       /* the value, or NULL */
/* Calls fn for each entry; fn must not change the map. */
void baton__map_each(const baton__map *m, void (*fn)(const char *key, void *val, void *arg),
                     void *arg);

/* ------------------------------------------------------------------------------------------
 * Names (Redisson's rules)
 * ---------------------------------------------------------------------------------------- */

/* BATON_OK if name is non-NULL, non-empty and at most BATON_MAX_NAME_LEN bytes. */
int baton__check_name(const char *name);
/* The prologue of every object's open: baton__client_enter (the error cleared; a forked
 * copy of the client is BATON_ENOTSUP), then the name: baton__check_name, and on a Cluster,
 * a name whose keys all share one slot (baton__check_cluster_name: "a{b" would spread them
 * over several, Redisson #1098). BATON_EINVAL with the detail recorded on c ("<what> name
 * must be ..."). */
int baton__check_open_name(baton_client *c, const char *name, const char *what);
/* BATON_OK if ms is a valid wait (BATON_WAIT_FOREVER or 0..BATON_MAX_DURATION_MS). */
int baton__check_wait(int64_t ms);
/* BATON_OK if ms is a valid lease (BATON_LEASE_WATCHDOG or 1..BATON_MAX_DURATION_MS). */
int baton__check_lease(int64_t ms);
/* "{name}", or name itself if it already contains '{'. New string; NULL when out of memory. */
char *baton__hash_tag(const char *name);
/* prefix + hash_tag(name) + suffix (suffix may be NULL). New string or NULL. */
char *baton__derive_key(const char *prefix, const char *name, const char *suffix);
/* One key of an object, derived from its name: *out = prefix + hash_tag(name) + suffix. */
typedef struct baton__key_spec {
    char **out;
    const char *prefix;
    const char *suffix; /* may be NULL */
} baton__key_spec;
/* Derives every key of specs[0..n); false when memory ran out (then every *out is freed
 * and NULL). */
bool baton__derive_keys(const char *name, const baton__key_spec *specs, size_t n);
/* Frees every key of specs[0..n) (NULL ones too) and sets it NULL. */
void baton__free_keys(const baton__key_spec *specs, size_t n);
/* Fills k[] (at most BATON__MAX_KEYS) with the keys of an object's state impl; how many. */
#define BATON__MAX_KEYS 8
typedef size_t (*baton__keys_fn)(void *impl, baton__key_spec *k);

/* The lost descriptor of a handle (baton_lock_lost_fd, baton_permits_lost_fd): under the
 * handle's mutex, makes its pipe (pipe[0] < 0: none yet; written at once when the hold is
 * lost already) and sets *fd to its read end. BATON_OK, or BATON_ENOMEM with pipe2's
 * reason recorded on c (pipe[] stays -1). */
int baton__lost_pipe_fd(baton_client *c, int pipe[2], bool lost, int *fd);

/* ------------------------------------------------------------------------------------------
 * URL
 * ---------------------------------------------------------------------------------------- */

/* What kind of deployment a URL names. */
typedef enum baton__ep_kind {
    BATON__EP_SINGLE,   /* redis://, rediss://, unix:// */
    BATON__EP_SENTINEL, /* redis+sentinel://, rediss+sentinel://: seeds are sentinels */
    BATON__EP_CLUSTER,  /* redis+cluster://, rediss+cluster://: seeds are cluster nodes */
} baton__ep_kind;

#define BATON__MAX_SEEDS 16

typedef struct baton__seed {
    char *host;
    int port;
} baton__seed;

typedef struct baton__endpoint {
    baton__ep_kind kind;
    baton__seed seeds[BATON__MAX_SEEDS]; /* every host:port of the URL, in order */
    int nseeds;
    char *master;   /* Sentinel: the master's name */
    char *host;     /* TCP host (the first seed's), or NULL for a unix socket */
    int port;       /* TCP port */
    char *path;     /* unix socket path, or NULL */
    char *username; /* ACL user or NULL */
    char *password; /* or NULL */
    int db;         /* SELECT index, 0 by default */
    bool tls;       /* rediss:// */
} baton__endpoint;

/* Parses a URL (see baton_options.url). On BATON_EINVAL, errbuf says why (no password). */
int baton__url_parse(const char *url, baton__endpoint *ep, char *errbuf, size_t errlen);
void baton__endpoint_free(baton__endpoint *ep);

/* ------------------------------------------------------------------------------------------
 * Errors: codes with a detail recorded per calling thread and client
 * ---------------------------------------------------------------------------------------- */

/* Records a detail for the calling thread's next baton_client_errmsg(c); returns code. */
int baton__fail(baton_client *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* True when the calling thread's last failure on c was a Cluster slot in flux: TRYAGAIN,
 * ASK, MOVED or CLUSTERDOWN still answered when a call's redirections ran out (a slot held
 * migrating, a failover). The call did not run; a wait may try again within its bound. */
bool baton__in_flux(const baton_client *c);
/* Forgets the calling thread's detail for c (a call that succeeds starts clean). */
void baton__clear_error(baton_client *c);

/* What every verb on a client's objects does first: forgets the calling thread's detail,
 * and refuses (BATON_ENOTSUP) a client that a fork() copied into this process (process.c). */
int baton__client_enter(baton_client *c);
/* True when c was opened by an ancestor of this process (fork()); false for NULL. */
bool baton__client_forked(const baton_client *c);

/* ------------------------------------------------------------------------------------------
 * Client, connections, commands and scripts
 * ---------------------------------------------------------------------------------------- */

typedef struct baton__conn baton__conn;

/* The client's resolved configuration (defaults applied). */
typedef struct baton__config {
    baton__endpoint ep;
    int64_t connect_timeout_ms;
    int64_t command_timeout_ms;
    int64_t watchdog_ms;
    int64_t fair_wait_ms;
    int64_t recheck_ms;
    int64_t starve_ms; /* BATON_STARVE_NEVER: the plain lock reserves for nobody */
    int64_t keepalive_ms;
    int pool_size;
    int sync_replicas; /* WAIT after acquisitions and renewals; 0: off */
    bool sync_aof;     /* WAITAOF 1 sync_replicas instead of WAIT */
    int64_t sync_timeout_ms;
    char *sentinel_username; /* AUTH to sentinels, or NULL */
    char *sentinel_password;
    char client_name[132]; /* CLIENT SETNAME's name (options' client_name, sanitized) */
} baton__config;

const baton__config *baton__client_config(const baton_client *c);

/* Runs a command that is safe to run twice (a read, or an idempotent write) on a pooled
 * connection, once more on a fresh one after BATON_ECONN (a stale connection). *reply is
 * set on BATON_OK and must be freed with freeReplyObject; a server error reply is mapped to
 * a code (detail recorded) and freed. Scripts that change state go through
 * baton__script_run instead, which never retries. */
int baton__query_argv(baton_client *c, int argc, const char **argv, struct redisReply **reply);

/* Maps a reply that is an error to a code (recording the detail), BATON_OK otherwise. */
int baton__reply_error(baton_client *c, const struct redisReply *r);

/* The embedded Lua scripts: one per operation, generated from lua/ by the build. */
typedef struct baton__script {
    const char *name; /* file name without .lua */
    const char *body;
    size_t len;
    const char *sha1; /* 40 hex digits */
    /* The same script after "#!lua flags=allow-oom" (it runs at maxmemory under
     * noeviction), or NULL: sent instead to servers that take script flags (Redis >= 7). */
    const struct baton__script *oom;
} baton__script;

/* The script of that name, or NULL: for the tests, which name scripts in tables. baton's own
 * code names each script by its symbol (baton__script_<name>, generated baton_scripts.h),
 * so that a wrong name fails to compile. */
const baton__script *baton__script_find(const char *name);
/* All scripts, terminated by an entry whose name is NULL. */
const baton__script *baton__scripts(void);

/* The form of a script this client runs: on Redis >= 7 its allow-oom variant if it has one
 * (s->oom), and on a Redis 7 Cluster the form that publishes with SPUBLISH (variant.c);
 * elsewhere s itself. The script runners apply it; the watchdog's pipeline too. */
const baton__script *baton__script_variant(const baton_client *c, const baton__script *s);
/* Whether the client's pub/sub is sharded (SSUBSCRIBE, SPUBLISH): a Cluster of Redis 7+. */
bool baton__sharded_pubsub(const baton_client *c);

/* EVALSHA with the given keys and arguments; on NOSCRIPT, sends EVAL with the body (which
 * also loads it) once. Server error replies become codes, as for baton__query_argv; never retried.
 */
int baton__script_run(baton_client *c, const baton__script *s, int nkeys, const char **keys,
                      int nargs, const char **args, struct redisReply **reply);
/* As baton__script_run; *maybe_ran (may be NULL) tells whether the script was sent, so
 * that a BATON_ECONN may have happened after it ran (its reply lost). */
int baton__script_call(baton_client *c, const baton__script *s, int nkeys, const char **keys,
                       int nargs, const char **args, struct redisReply **reply, bool *maybe_ran);
/* As baton__script_call for an acquisition: with sync_replicas set, WAIT follows the script
 * in the same round trip, and when fewer replicas acknowledged, BATON_ENOTSYNCED is
 * returned with *reply set (the script did run: the caller undoes what it did). */
int baton__script_call_synced(baton_client *c, const baton__script *s, int nkeys, const char **keys,
                              int nargs, const char **args, struct redisReply **reply,
                              bool *maybe_ran);

/* Runs a script whose effect must apply once per call although the call may send it more
 * than once (see once.c): KEYS = keys plus a request latch <latch_prefix><client-id>:<n>,
 * ARGV = args plus the latch's lifetime in ms, then "0" on the first attempt and "1" on a
 * retry (a first attempt need not read the latch). The script must return the latch's value
 * when the latch exists, and otherwise store its integer outcome there (SET key value PX
 * life).
 * After BATON_ECONN the same request is sent again on a fresh connection, up to 3 attempts.
 * At most 7 keys and 6 arguments. Returns as baton__script_run. */
int baton__script_run_once(baton_client *c, const baton__script *s, const char *latch_prefix,
                           int nkeys, const char **keys, int nargs, const char **args,
                           struct redisReply **reply);
/* The same with the latch as an argument (ARGV = args, lifetime, latch, then "0" on the
 * first attempt and "1" on a retry, so that a first attempt need not read it), not a key:
 * for a script that declares only keys that exist while it matters (a Cluster answers
 * TRYAGAIN to a script whose declared keys are partly missing while their slot migrates),
 * and reaches the latch with redis.pcall. */
int baton__script_run_once_arg(baton_client *c, const baton__script *s, const char *latch_prefix,
                               int nkeys, const char **keys, int nargs, const char **args,
                               struct redisReply **reply);

/* Client-side counters, for tests and the benchmark (BENCH.md's "client round trips"):
 * commands: request/reply round trips on command connections (a retry or a NOSCRIPT
 * fallback counts again; a pipelined batch counts once; connection handshakes do not);
 * pubsub: SUBSCRIBE and UNSUBSCRIBE commands sent. */
typedef struct baton__stats {
    uint64_t commands;
    uint64_t pubsub;
} baton__stats;
void baton__client_stats(baton_client *c, baton__stats *out);
void baton__count_round_trip(baton_client *c);

/* Where key lives: "host:port" of the node that serves it (a Cluster: its slot's master as
 * the client knows it now; otherwise the server, or "unix:<path>"), and its slot (-1 when
 * not a Cluster; slot may be NULL). */
void baton__node_of_key(baton_client *c, const char *key, char *buf, size_t len, int *slot);

/* "<host>:<pid>" of the process that opened the client (gethostname, getpid; made once at
 * open: a client serves only that process). The lock kinds record it beside each hold. */
#define BATON__ORIGIN_LEN 96
const char *baton__client_origin(const baton_client *c);

/* "<uuid>:<owner-id>" of the calling thread's owner (baton__owner_id) for this client, into buf (>=
 * 64 bytes). */
void baton__owner(const baton_client *c, char *buf, size_t len);
#define BATON__OWNER_LEN 64

/* ------------------------------------------------------------------------------------------
 * Pub/sub dispatcher
 * ---------------------------------------------------------------------------------------- */

/* How a channel's messages release its waiters. */
typedef enum baton__sub_kind {
    BATON__SUB_LOCK,      /* "0": one waiter; "1": every waiter */
    BATON__SUB_LATCH,     /* "0": every waiter */
    BATON__SUB_SEMAPHORE, /* "<n>": up to n waiters */
    BATON__SUB_RWLOCK,    /* any message: every waiter (readers and writers share the
                             channel and a wake-up cannot tell them apart; see rwlock.c) */
    BATON__SUB_OWN,       /* a channel of one waiter (baton__wait_ops.relisten): any message
                             wakes it, and one that comes while the subscription lingers is
                             kept for the next wait on it */
} baton__sub_kind;

typedef struct baton__sub baton__sub;

struct baton__waiting;
/* Takes a reference on channel's subscription, subscribing if this is the first, and waits
 * until the server confirmed it, or until deadline_us or one command timeout, whichever
 * comes first, or until the wait wt (if not NULL) is cancelled. Returns BATON_OK,
 * BATON_ETIMEDOUT (deadline passed), BATON_ECANCELED, BATON_ECONN; on failure nothing is
 * left subscribed for this caller. */
int baton__sub_acquire(baton_client *c, const char *channel, baton__sub_kind kind,
                       int64_t deadline_us, const struct baton__waiting *wt, baton__sub **out);
/* Takes a reference on channel's subscription only if it is live already (confirmed, other
 * waiters hold it); NULL otherwise, without subscribing. A waiter that takes it before its
 * first attempt misses no message after that attempt, so it need not try again after
 * subscribing: one round trip less per contended acquisition. Never blocks on the server. */
baton__sub *baton__sub_try_acquire(baton_client *c, const char *channel);
/* Drops the reference; the last one unsubscribes (after the confirmation of any pending
 * subscribe: subscribe and unsubscribe of one channel never interleave). */
void baton__sub_release(baton_client *c, baton__sub *s);
/* As baton__sub_release, and if that was the last reference, waits until the server
 * confirmed the UNSUBSCRIBE: for paths that give up (timeout, error), which promise to
 * leave no subscription behind. The wait ends at one command timeout, and never later than
 * BATON__UNSUB_GRACE_MS after deadline_us (the call's own deadline; BATON__NO_DEADLINE:
 * none): a server that never confirms cannot make the call overrun its bound (the
 * UNSUBSCRIBE is sent all the same, and the dispatcher forgets the channel when the
 * confirmation or a reconnection comes). */
void baton__sub_release_sync(baton_client *c, baton__sub *s, int64_t deadline_us);
#define BATON__UNSUB_GRACE_MS 50
/* Sleeps until a message (or a reconnection) hands this waiter a wake-up, until the
 * deadline, or until cancelled(arg) says the wait was cancelled (if cancelled is not NULL:
 * it is asked under the dispatcher's mutex before each sleep, and a cancellation sets its
 * flag before baton__sub_wake_all broadcasts, so none is missed even when another waiter
 * took the wake-ups that broadcast handed out). A wake-up that arrived before the call is
 * kept and returns at once. Returns BATON_OK (woken: it took a wake-up), BATON_ECANCELED
 * (cancelled(arg) said so: it took none), BATON_ETIMEDOUT, or the code of the server's
 * refusal of the channel's resubscription (BATON_EPERM for NOPERM: its permission was
 * revoked while the waiter slept; detail recorded). */
int baton__sub_wait(baton_client *c, baton__sub *s, int64_t deadline_us, bool (*cancelled)(void *),
                    void *arg);
/* BATON_OK, or (detail recorded) the code of the server's refusal of s's resubscription
 * after a reconnection, until a SUBSCRIBE of it is confirmed again: its permission was
 * revoked (BATON_EPERM for NOPERM). For a wait that listens on two channels. */
int baton__sub_denied(baton_client *c, baton__sub *s);
/* Waiters that wait on s in turns, each for the least there is (small) or for more
 * (large): adds the deltas (a waiter counts itself in after its first attempt failed, and
 * out before its wait ends, before it drops s). Returns whether a waiter that would want the
 * least must now queue behind them: waiters want the least, none wants more, and one of
 * them sleeps without a wake-up (one woken already may leave free some of what woke it).
 * (The semaphore: waiters for 1 permit; a waiter for more could sleep while one permit is
 * free.) */
bool baton__sub_queue(baton__sub *s, int small, int large);
/* How many messages that woke waiters arrived on this channel since its entry was made: a
 * waiter that saw a change of this number knows a message came (a latch's "0", say), as
 * opposed to a timeout or a reconnection's wake-up. */
uint64_t baton__sub_messages(baton_client *c, baton__sub *s);
/* Keeps the subscriber connection up (pin) or stops requiring it (unpin), whether or not
 * anyone waits. A server restart closes it at once, and its reconnection reads the new
 * run_id: that is how a client that only holds (fixed-lease holds included, which send
 * nothing until their release) learns within a moment that its holds are gone. Calls nest.
 * Never blocks on the server. */
void baton__sub_pin(baton_client *c, bool pin);
/* Counts of the dispatcher's state, for tests and the benchmark. */
int baton__sub_count(baton_client *c);

/* ------------------------------------------------------------------------------------------
 * Watchdog (lease renewal)
 * ---------------------------------------------------------------------------------------- */

/* Registers a hold (name, owner) in the client's registry; renew = renew its lease every
 * watchdog_ms / 3 (a hold without an explicit lease). Reference-counted. The lost callback
 * (may be NULL) runs on the watchdog thread when a renewal finds the owner gone, when the
 * lease ran out while the server could not be reached, or when the server restarted; the
 * registration is gone by then. */
int baton__watchdog_add(baton_client *c, const char *name, const char *owner, bool renew,
                        void (*lost)(void *arg), void *arg, int64_t since_us);
/* As baton__watchdog_add for a hold of another kind, renewed by `script` and checked by
 * `check` (the locks use lock_renew and hold_check): `script` gets KEYS = up to 100 of its
 * holds' names, ARGV = {lease ms, owner per key}, `check` (run for holds with a lease of
 * their own when the master moved) KEYS = names, ARGV = owners; both answer 1 (held; renewed)
 * or 0 (gone) per key, in order. */
int baton__watchdog_add_kind(baton_client *c, const baton__script *script,
                             const baton__script *check, const char *name, const char *owner,
                             bool renew, void (*lost)(void *arg), void *arg, int64_t since_us);
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

    /* Appended to "<uuid>:<thread-id>" in the hash's owner field (the write lock's
     * ":write"); NULL: nothing. */
    const char *owner_suffix;
};

/* The calling thread's owner field in this lock's hash: baton__owner plus owner_suffix. */
void baton__lock_owner(const baton_lock *l, char *buf, size_t len);

/* The open of a lock kind with one handle whose state is keys (plain, fair: ops->keys):
 * c, out and the name checked (`what` names the kind in the detail), then the handle with
 * its base and its keys. Returns BATON_OK, BATON_EINVAL, BATON_ENOTSUP (a forked client)
 * or BATON_ENOMEM; *out NULL unless OK. */
int baton__lock_open(baton_client *c, const char *name, const char *what,
                     const baton__lock_ops *ops, const char *channel_prefix, baton_lock **out);

/* Initializes the base of a lock handle; frees with baton__lock_base_free. */
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
/* The client's record baton_client:{<client id>} = "host:pid" (record.c): kept alive for
 * at least lease_ms more (BATON_LEASE_WATCHDOG: the watchdog's lease), written only when it
 * would not be. Best effort: never fails, never changes the caller's error. */
void baton__client_record_keep(baton_client *c, int64_t lease_ms);
/* For a write of the record that is not a round trip of its own (the watchdog pipelines
 * it): true when it is due, with argv = SET key origin PX life (key and life are the
 * caller's buffers); the caller sends it, and a failure is tried again after one life. */
#define BATON__RECORD_KEY_LEN 64
bool baton__client_record_due(baton_client *c, int64_t lease_ms, const char *argv[5],
                              char key[BATON__RECORD_KEY_LEN], char life[24]);
/* The record's key for an owner field "<client id>:<thread id>[:write]" (malloc'd), or NULL. */
char *baton__client_record_key(const char *owner);
/* An acquire script of a lock kept in Redisson's hash, and what resolves its lost reply. */
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
} baton__hold_reply;
/* baton__hold_call for a script that replies {status, value}: out->read set when it was
 * read; else the outcome is rc (acquired after all, or an error: BATON_EPROTO for another
 * reply, `what` naming the kind in the detail, e.g. "fair lock"). */
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

/* The watchdog lease of a client, in ms. */
int64_t baton__watchdog_lease(const baton_client *c);

#endif /* BATON_CORE_INTERNAL_H */
