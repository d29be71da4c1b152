/*
 * Private to baton: the one wait routine every blocking primitive uses (wait.c). A module
 * says how to try once, where releases are announced and how long a sleep may last; the
 * routine keeps the rules that make waiting correct in one place.
 */
#ifndef BATON_CORE_WAIT_H
#define BATON_CORE_WAIT_H

#include "internal.h"

/* How a primitive waits, the same for every wait of its kind: one static const table per
 * primitive (channel, wait and argument are the call's). */
typedef struct baton__wait_ops {
    const baton__sub_type *sub; /* how the dispatcher wakes this channel's waiters */
    baton__kind stat;           /* what the wake-up counters count it as */
    bool join_live;             /* take a live subscription before the first attempt (shared
                                   channels); false for channels of one waiter or that do not
                                   linger */
    /* One try. sub is NULL until subscribed (or joined). Returns BATON_OK (done),
     * BATON_ETIMEDOUT quietly for "not yet" (nothing recorded), BATON__RELISTEN (not yet,
     * and from now on releases for this waiter are published on relisten(arg)), or an
     * error (recorded). */
    int (*attempt)(void *arg, baton__sub *sub);
    /* How long (ms) to sleep at most before the next attempt, asked after a "not yet":
     * the holder's remaining lease, a recheck interval. Negative: until woken or the
     * deadline. NULL: always negative. */
    int64_t (*bound_ms)(void *arg);
    /* Optional: runs when a wait (wait_ms != 0) fails, before its subscription is dropped
     * (leave a queue, say). rc is the failure; the callback keeps the error detail. */
    void (*give_up)(void *arg, int rc);
    /* Where to listen after an attempt returned BATON__RELISTEN (the plain lock's or the
     * semaphore's waiter that took a place in its line hears its turn on a channel of its
     * own). A channel of
     * this waiter alone (baton__sub_own): its subscription lingers after the wait, and the
     * next wait that moves there takes it without another attempt. NULL if the attempt
     * never returns it. */
    const char *(*relisten)(void *arg);
    /* Optional, for waits that take turns within a client (a semaphore's): what this wait
     * wants, BATON__TURN_LEAST (1 permit) or BATON__TURN_MORE. NULL: it does not. A wait
     * that moves to a channel of its own stops taking turns. */
    int (*turn)(void *arg);
    /* Optional, for waits that move to a channel of their own (relisten): whether the
     * last attempt found the waiter first in its line. The first hears the shared channel
     * too (baton__sub_follow): a release by a client that does not know the line
     * (Redisson's unlock, its semaphore's release) publishes only there, and would reach
     * the waiter only at its next look. NULL: never. */
    bool (*first)(void *arg);
    /* Optional, for waits that a release by the same client may hand what they wait for
     * (cohorting, baton__sub_offer): fills cand->want and cand->info (what the releaser
     * needs: the lock's owner field and lease); false: this wait takes no hand-over. A
     * wait on the shared channel registers after its first "not yet" and, asleep, may be
     * handed it; it then makes no attempt. NULL: never. */
    bool (*cohort)(void *arg, baton__cand *cand);
    /* ... and what it does when handed it, instead of a successful attempt (value: the
     * releaser's word, the lock's new fencing token): records the hold. BATON_OK or an
     * error (recorded). Runs whatever ended the wait once it was handed. */
    int (*handed)(void *arg, int64_t value);
} baton__wait_ops;

/* baton__wait_ops.turn's answers */
#define BATON__TURN_LEAST 1
#define BATON__TURN_MORE 2

/* An attempt's "not yet, listen elsewhere" (baton__wait_ops.relisten); never returned by
 * baton__wait_for. */
#define BATON__RELISTEN 1

/* Waits for ops->attempt(arg) to succeed, listening on channel (where releases are
 * published; NULL only if wait_ms == 0) for at most wait_ms (0 = one attempt,
 * BATON_WAIT_FOREVER, or ms):
 *  - joins the channel's subscription first if it is live already (join_live), so that a
 *    release after the first attempt cannot go unheard;
 *  - attempts once; wait_ms == 0 stops there; a wait that takes turns (ops->turn) and
 *    wants the least does not attempt first when it joined and its client's waiters there
 *    all want the least too, one of them asleep without a wake-up: it queues behind them
 *    (baton__sub_queue), since the release that freed what it wants (its own thread's,
 *    typically) woke one of them;
 *  - otherwise subscribes (if it did not join) and attempts again, since a release
 *    published before the subscription was confirmed went unheard;
 *  - then sleeps until a wake-up, bound_ms or the deadline and attempts again, until done,
 *    an error or the deadline; an attempt that says BATON__RELISTEN moves the wait to the
 *    relisten channel (subscribed, then an attempt again, as above);
 *  - done: drops the subscription in the background; failed: runs give_up, then drops it
 *    synchronously, leaving nothing behind.
 * Returns BATON_OK, BATON_ETIMEDOUT (not done within wait_ms; no detail recorded: the
 * caller words it), or the error of an attempt or of subscribing (recorded). */
int baton__wait_for(baton_client *c, const baton__wait_ops *ops, const char *channel,
                    int64_t wait_ms, void *arg);

/* The lines of starved waiters (the plain lock's, lua/lib/line.lua; the semaphore's and
 * the permits', lua/lib/semline.lua), what their waits share. A waiter in a line, rank
 * waiters before it, looks by itself every BATON__LINE_POLL_MS x (rank + 1), at most every
 * BATON__LINE_POLL_MAX_MS (its first look after a reservation that ran out comes within
 * BATON__LINE_POLL_MS of it: the scripts' RESERVE_MS is 50 ms); a line lasts
 * BATON__LINE_LIFE_MS after its last join or look (waiters look at least every second,
 * so it goes only when they all died). The semaphore's and the permits' waiters join
 * after BATON__SEM_STARVE_FACTOR x starve_ms (docs/ARCHITECTURE.md says why). */
#define BATON__LINE_POLL_MS 50
#define BATON__LINE_POLL_MAX_MS 1000
#define BATON__LINE_LIFE_MS 10000
#define BATON__SEM_STARVE_FACTOR 4
/* What a line's acquire script is told (ARGV "mode"): "0" never join the line (a try,
 * waits false, or a client without the bound, bound_ms BATON_STARVE_NEVER); "2" join it
 * (queued already, or waited_us past bound_ms); "1" join it if it is not empty. */
const char *baton__line_mode(bool waits, bool queued, int64_t waited_us, int64_t bound_ms);
/* How long a waiter of rank `rank` in a line sleeps at most before it looks. */
int64_t baton__line_look_ms(long long rank);
/* An attempt answered "in the line": the first time, *own = "<channel>:<who>" (the
 * channel its turn is told on) and BATON__RELISTEN; afterwards BATON_ETIMEDOUT. Keeps the
 * client's record (host and pid) alive, so that a status shows whose process waits.
 * BATON_ENOMEM recorded. */
int baton__line_in(baton_client *c, const char *channel, const char *who, char **own);
/* A wait in a line that failed (rc) leaves it: runs `unreserve` (KEYS: the object, its
 * reservation, its line; ARGV: the member, the channel), best effort, keeping the wait's
 * detail unless the script failed. Nothing when the client is a forked copy. */
void baton__line_leave(baton_client *c, const baton__script *unreserve, const char *const keys[3],
                       const char *const args[2], int rc);

#endif /* BATON_CORE_WAIT_H */
