/*
 * Private to baton: the core's internal interface (src/core), for the core and the floors
 * above it; it includes the ground's (util.h) and the transport's (net.h). Nothing here is
 * API; nothing here may appear in a public header.
 */
#ifndef BATON_CORE_INTERNAL_H
#define BATON_CORE_INTERNAL_H

#include <baton/baton.h>

#include <pthread.h>
#include <stdarg.h>

#include "net.h"
#include "ops.h"
#include "util.h"

struct redisReply;

/* ------------------------------------------------------------------------------------------
 * Names
 * ---------------------------------------------------------------------------------------- */

/* The prologue of every object's open: baton__client_enter (the error cleared; a forked
 * copy of the client is BATON_ENOTSUP), then the name: baton__check_name, and on a Cluster,
 * a name whose keys all share one slot (baton__check_cluster_name: "a{b" would spread them
 * over several, Redisson #1098). BATON_EINVAL with the detail recorded on c ("<what> name
 * must be ..."). */
int baton__check_open_name(baton_client *c, const char *name, const char *what);

/* ------------------------------------------------------------------------------------------
 * Client, connections, commands and scripts
 * ---------------------------------------------------------------------------------------- */

const baton__config *baton__client_config(const baton_client *c);

/* Runs a command that is safe to run twice (a read, or an idempotent write) on a pooled
 * connection, once more on a fresh one after BATON_ECONN (a stale connection). *reply is
 * set on BATON_OK and must be freed with freeReplyObject; a server error reply is mapped to
 * a code (detail recorded) and freed. Scripts that change state go through
 * baton__script_run instead, which never retries. */
int baton__query_argv(baton_client *c, int argc, const char **argv, struct redisReply **reply);
/* A command sent once (never again after a lost reply: it may not be safe to run twice),
 * on the connection to the server holding key (NULL: any; on a Cluster the slot's master,
 * redirections followed). As baton__query_argv otherwise. */
int baton__command_once(baton_client *c, const char *key, int argc, const char **argv,
                        struct redisReply **reply);

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

/* What an acquire script answers first ({status, value}): one list for every script that
 * takes something, each naming it in its header (lua/lock_acquire.lua, fairlock_acquire,
 * rwlock_read_acquire, rwlock_write_acquire, semaphore_acquire, permits_acquire). */
typedef enum baton__acquire_status {
    BATON__ACQ_NOT_NOW = 0,    /* not taken: value says how long to sleep at most (the
                                  semaphore's: the permits available) */
    BATON__ACQ_TAKEN = 1,      /* taken: a new hold (value: its new fencing token), or the
                                  permits (value: those left, or the lease) */
    BATON__ACQ_REENTERED = 2,  /* re-entered by the owner (value: the token, unchanged) */
    BATON__ACQ_RESERVED = 3,   /* free, but reserved for another waiter, value ms more */
    BATON__ACQ_NO_UPGRADE = 3, /* rwlock_write_acquire's 3: refused, the caller holds the
                                  read lock */
    BATON__ACQ_IN_LINE = 5,    /* not taken; the caller is in the line, value waiters before
                                  it (wait.c's lines) */
} baton__acquire_status;

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
 * At most 7 keys and 9 arguments. Returns as baton__script_run. */
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

/* "<host>:<pid>" of the process that opened the client (gethostname, getpid; made once at
 * open: a client serves only that process). The lock kinds record it beside each hold. */
const char *baton__client_origin(const baton_client *c);

/* ------------------------------------------------------------------------------------------
 * Scripts on a connection (run.c): pipelining over src/net's connections
 * ---------------------------------------------------------------------------------------- */

/* Appends an EVALSHA to a connection's output (pipelining: conn.h's flush and read). */
int baton__script_append(baton__conn *k, const baton__script *s, int nkeys, const char **keys,
                         int nargs, const char **args);
/* WAIT and its reply after a pipeline: baton__append_wait and baton__read_wait (net/send.h). */

/* ------------------------------------------------------------------------------------------
 * Pub/sub dispatcher
 * ---------------------------------------------------------------------------------------- */

/* How a channel's messages release its waiters: what differs from one primitive's channel
 * to another's, in a table each primitive hands the dispatcher with its waits
 * (baton__wait_ops.sub), as Redis's pubsubtype does for its kinds of channel. The
 * dispatcher names no primitive. */
typedef struct baton__sub_type {
    /* How many of the channel's waiters a message wakes: payload (len bytes), refs (the
     * waiters holding the channel), pending (wake-ups handed out by earlier messages and not
     * yet taken, by a sleeping thread or an asynchronous waiter that has not run since). */
    int64_t (*wakeups)(const char *payload, size_t len, int refs, int64_t pending);
    bool linger; /* the subscription may outlive its last waiter a moment (a channel that a
                    process waits on again soon) */
    bool keep;   /* a message that comes while it lingers is kept for the next wait on it (a
                    channel of one waiter, which may have queued already) */
} baton__sub_type;
/* A channel of one waiter (baton__wait_ops.relisten): any message wakes it, and one that
 * comes while the subscription lingers is kept for the next wait on it. */
extern const baton__sub_type baton__sub_own;
/* A message's payload as a decimal integer: *ok false when it is not one. */
int64_t baton__sub_payload_int(const char *payload, size_t len, bool *ok);

typedef struct baton__sub baton__sub;

struct baton__waiting;
/* Takes a reference on channel's subscription, subscribing if this is the first, and waits
 * until the server confirmed it, or until deadline_us or one command timeout, whichever
 * comes first, or until the wait wt (if not NULL) is cancelled. Returns BATON_OK,
 * BATON_ETIMEDOUT (deadline passed), BATON_ECANCELED, BATON_ECONN; on failure nothing is
 * left subscribed for this caller. */
int baton__sub_acquire(baton_client *c, const char *channel, const baton__sub_type *type,
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
/* While on: every message on `from` that would wake a lone waiter there wakes the one
 * waiter of `to` (a channel of one waiter, baton__sub_own) too, as if published there: the
 * first waiter of a line, which listens on a channel of its own, hears the releases of
 * clients that publish only on the shared channel (Redisson's). Both references must be
 * held while on; turn it off before dropping either. Turned on while a wake-up waits on
 * `from` untaken (a message came after the attempt that made it follow, before it did), it
 * wakes `to`'s waiter at once. BATON_ENOMEM (nothing recorded) or BATON_OK. */
int baton__sub_follow(baton__sub *from, baton__sub *to, bool on);
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

/* Hand-overs within a client (cohorting): a release that finds a waiter of its own client
 * asleep on the channel it would publish on hands it what it releases (in the release's own
 * script, or without the server at all) and wakes it alone; the waiter then finishes as if
 * its attempt had succeeded, with no attempt of its own. The core keeps the waiters and
 * their marks; what is handed is the primitive's (docs/ARCHITECTURE.md, "Cohorting").
 * A candidate is offered only while it sleeps (an attempt of its own could race the
 * hand-over), is chosen and marked under the dispatcher's mutex, and sleeps on until the
 * offer is settled; one that gives up while offered leaves the releaser to undo the
 * hand-over (baton__sub_settle answers false). */
#define BATON__CAND_INFO (24 + BATON__OWNER_LEN) /* "<lease ms> <owner field>" */
#define BATON__CAND_IDLE 0                       /* waiting as any waiter */
#define BATON__CAND_OFFERED 1                    /* chosen by a release that has not settled yet */
#define BATON__CAND_HANDED 2                     /* handed what it waits for (value) */
struct baton__sub_waker;
struct baton__ticket;
typedef struct baton__cand {
    int64_t want;                /* how much it waits for (a semaphore's permits; 1) */
    char info[BATON__CAND_INFO]; /* what a releaser needs to hand it over (its owner) */
    /* the dispatcher's, under its mutex */
    baton__sub *sub;
    int state;
    int64_t value; /* the releaser's word to it (a lock's new fencing token) */
    bool asleep, signalled, parked;
    pthread_cond_t *cond;           /* a sleeping thread's own (on its stack, while asleep) */
    struct baton__sub_waker *waker; /* a sleeping fiber's */
    struct baton__ticket *ticket;   /* the offer made to it */
    struct baton__cand *prev, *next;
} baton__cand;
/* A release's offer (on the releaser's stack, until baton__sub_settle). */
typedef struct baton__ticket {
    char info[BATON__CAND_INFO]; /* the candidate's, copied */
    int64_t want;
    struct baton__dispatcher *d;
    baton__cand *cand; /* NULL once the candidate gave up */
} baton__ticket;
/* A wait registers itself on its subscription (held until baton__sub_cand_remove), with
 * want and info filled, once an attempt there failed. */
void baton__sub_cand_add(baton__sub *s, baton__cand *cand);
/* The candidate of the wait about to sleep on this thread, or this fiber (NULL: none),
 * set around baton__wait_sleep (wait.c). */
void baton__sub_cand_sleeping(baton__cand *cand, bool fiber);
/* Its state after a wake-up: BATON__CAND_IDLE (attempt as usual), _OFFERED (sleep again,
 * no attempt: a hand-over is being settled), _HANDED (*value the releaser's word). */
int baton__sub_cand_state(baton__cand *cand, int64_t *value);
/* Leaves; returns the state as above: _HANDED, it takes what it was handed whatever ended
 * its wait; _OFFERED, the offer is abandoned (the releaser undoes its hand-over). */
int baton__sub_cand_remove(baton__cand *cand, int64_t *value);
/* A release finds the first candidate asleep on channel that wants at most `have` and is
 * not offered yet, and marks it offered (t describes it). BATON_ETIMEDOUT when there is
 * none, or when the channel's last max_passes releases were all handed within the client:
 * this one goes through the server, for every client's waiters (the count starts over). */
int baton__sub_offer(baton_client *c, const char *channel, int64_t have, int max_passes,
                     baton__ticket *t);
/* Settles an offer: handed (value: the candidate's) wakes the candidate alone; not handed
 * leaves it waiting as before. false when the candidate gave up meanwhile (nothing was
 * woken: a hand-over made is the releaser's to undo). */
bool baton__sub_settle(baton_client *c, baton__ticket *t, bool handed, int64_t value);

/* ------------------------------------------------------------------------------------------
 * The client's record (record.c) and the watchdog's lease
 * ---------------------------------------------------------------------------------------- */

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
/* The watchdog lease of a client, in ms. */
int64_t baton__watchdog_lease(const baton_client *c);

/* ------------------------------------------------------------------------------------------
 * Options per handle (include/baton/handle.h), read at a handle's open (client.c)
 * ---------------------------------------------------------------------------------------- */

/* A handle's times, resolved: the handle's own where it gave one, else its client's. */
typedef struct baton__handle_cfg {
    int64_t watchdog_ms;  /* the lease of its holds without one, renewed every third */
    int64_t fair_wait_ms; /* a silent waiter's place in a fair queue, a writer's claim */
    int64_t recheck_ms;   /* a waiter re-reads the server at least this often */
} baton__handle_cfg;

/* The fields a kind reads (the others must be 0). */
#define BATON__OPT_WATCHDOG 1u
#define BATON__OPT_FAIR_WAIT 2u
#define BATON__OPT_RECHECK 4u

/* Checks o (NULL: none) for a handle of kind `what` named `name` that reads the fields in
 * `reads` (BATON__OPT_*), and resolves *out from it and c's configuration. BATON_OK, or
 * BATON_EINVAL recorded on c ("<what> <name>: watchdog_ms 10: ...", "... fair_wait_ms
 * 5000: means nothing to the semaphore kind", a size the library does not know). */
int baton__handle_cfg_read(baton_client *c, const char *what, const char *name,
                           const baton_handle_options *o, unsigned reads, baton__handle_cfg *out);

#endif /* BATON_CORE_INTERNAL_H */
