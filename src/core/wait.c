/*
 * The try–subscribe–retry–wait loop of every blocking primitive (lock, fair lock,
 * semaphore, latch, read-write lock), once. What makes it correct lives here and nowhere
 * else: listen before the attempt whose failure sends the caller to sleep (a joined live
 * subscription, or a fresh one followed by a second attempt), sleep no longer than the
 * primitive's bound (a lease, a recheck interval) so that a lost message costs at most
 * that, and leave no subscription behind on failure. The wake-up policy per channel (one
 * waiter, every waiter, n waiters) is the dispatcher's, chosen by the kind.
 */
#include "wait.h"
#include "evloop.h"
#include "topology.h"

#include <hiredis/hiredis.h>

#include <stdlib.h>

/* One wait: the primitive's table and the call's own part. */
typedef struct baton__wait {
    const baton__wait_ops *ops;
    const char *channel;
    int64_t wait_ms;
    void *arg;
} baton__wait;

static void drop(baton_client *c, baton__sub *sub, bool done, int64_t deadline)
{
    if (!sub)
        return;
    if (done)
        baton__sub_release(c, sub); /* unsubscribe in the background */
    else
        baton__sub_release_sync(c, sub, deadline); /* gave up: leave nothing behind, within
                                                      the wait's bound */
}

/* An attempt that did not run because a Cluster slot is in flux (held migrating past the
 * call's redirections, a failover): for a wait, as good as "not yet". */
static bool not_yet(baton_client *c, int rc)
{
    return rc == BATON_ETIMEDOUT || (rc == BATON_ECONN && baton__in_flux(c));
}

/* Listens on the wait's channel, or (own) the waiter's own after a BATON__RELISTEN, from now
 * on and attempts again, since a release published before the subscription was confirmed
 * went unheard; no attempt when its own channel's subscription still lingered from its
 * last wait (baton__sub_own keeps a message that came meanwhile). The subscription held so
 * far, if any, is kept in *left until the wait ends (then dropped as the other: a wait that
 * gave up leaves nothing behind), or kept as *sub if its own channel could not be had.
 * *sub is NULL afterwards if subscribing failed with nothing to fall back on (its error). */
static int listen(baton_client *c, const baton__wait *w, bool own, int64_t deadline,
                  baton__waiting *wt, baton__sub **sub, baton__sub **left, bool *on_own)
{
    const char *channel = own ? w->ops->relisten(w->arg) : w->channel;
    if (*sub && *left)
        drop(c, *left, true, deadline);
    if (*sub)
        *left = *sub;
    *sub = NULL;
    if (own && (*sub = baton__sub_try_acquire(c, channel)) != NULL) {
        *on_own = true;
        return BATON_ETIMEDOUT;
    } /* live (lingering) since before the attempt that moved it
                                   here, and a message meanwhile was kept: none went unheard */
    int rc = baton__sub_acquire(c, channel, own ? &baton__sub_own : w->ops->sub, deadline, wt, sub);
    if (rc != BATON_OK && own && *left && rc != BATON_ECANCELED) {
        /* Its own channel could not be had (no confirmation in time, a refusal): it waits
         * on where it listened, which its bound_ms covers (the plain lock's line looks by
         * itself), rather than failing a wait that was going well. */
        *sub = *left;
        *left = NULL;
        return BATON_ETIMEDOUT;
    }
    if (rc != BATON_OK)
        return rc;
    *on_own = own;
    return baton__wait_cancelled(c, wt) ? baton__fail(c, BATON_ECANCELED, "wait cancelled")
                                        : w->ops->attempt(w->arg, *sub);
}

/* A wait that takes turns (ops->turn) counts itself among its client's waiters on sub once
 * an attempt there said "not yet" (*in: where it did; it counts itself out with
 * turn_leave before the wait drops sub, or moves: a wait on a channel of its own takes no
 * turns). */
static void turn_take(baton__sub *sub, int rc, int turn, baton__sub **in)
{
    if (turn && sub && !*in && rc == BATON_ETIMEDOUT) {
        (void)baton__sub_queue(sub, turn == BATON__TURN_LEAST, turn == BATON__TURN_MORE);
        *in = sub;
    }
}

static void turn_leave(int turn, baton__sub **in)
{
    if (*in)
        (void)baton__sub_queue(*in, -(turn == BATON__TURN_LEAST), -(turn == BATON__TURN_MORE));
    *in = NULL;
}

/* A waiter on a channel of its own (on_own) that its last attempt found first in its line
 * hears the shared channel too (ops->first): where it listened before it moved (*left), or
 * a subscription made now (*tried: once a wait). Returns BATON_OK when it follows the
 * shared channel as it should (*following), BATON__RELISTEN when it has just subscribed to
 * it (a release published before the confirmation went unheard: attempt again), or
 * BATON_ECANCELED (recorded). Anything else leaves it to its looks. */
static int hear_shared(baton_client *c, const baton__wait *w, int64_t deadline, baton__waiting *wt,
                       baton__sub *sub, baton__sub **left, bool *following, bool *tried)
{
    bool want = w->ops->first(w->arg);
    int rc = BATON_OK;
    if (want && !*left && !*tried) {
        *tried = true;
        /* Live already (it lingers from a wait before): joined, and no attempt again (a
         * Redisson release in between costs at most the next look, as before). Else
         * subscribed, then an attempt, as any new subscription. */
        *left = baton__sub_try_acquire(c, w->channel);
        if (!*left) {
            int sr = baton__sub_acquire(c, w->channel, w->ops->sub, deadline, wt, left);
            if (sr == BATON_ECANCELED)
                return sr;
            if (sr == BATON_OK)
                rc = BATON__RELISTEN;
        }
    }
    if (*left && want != *following && baton__sub_follow(*left, sub, want) == BATON_OK)
        *following = want;
    return rc;
}

/* A wait that takes hand-overs (ops->cohort) registers as a candidate on the shared
 * channel once an attempt there said "not yet" (*cand: its registration; never on a
 * channel of its own: a waiter in a line is served through it). The candidate is not on
 * the waiter's stack: a fiber asleep on a subscription lends its stack to others, and the
 * dispatcher reaches the candidate meanwhile. Out of memory: it waits without. */
static void cand_take(const baton__wait *w, baton__sub *sub, int rc, bool on_own, bool cohort,
                      baton__cand **cand)
{
    if (!cohort || !sub || on_own || *cand || rc != BATON_ETIMEDOUT)
        return;
    baton__cand *k = calloc(1, sizeof *k);
    if (!k)
        return;
    if (!w->ops->cohort(w->arg, k)) {
        free(k);
        return;
    }
    baton__sub_cand_add(sub, k);
    *cand = k;
}

/* Leaves the candidates; a hand-over that came before it left is taken (rc then is the
 * hand-over's outcome, whatever ended the wait: a waiter that gave up while a release was
 * handing it the lock takes it rather than leave it to nobody). */
static int cand_end(const baton__wait *w, baton__cand **cand, int rc)
{
    if (!*cand)
        return rc;
    int64_t value = 0;
    int st = baton__sub_cand_remove(*cand, &value);
    free(*cand);
    *cand = NULL;
    if (st == BATON__CAND_HANDED)
        return w->ops->handed(w->arg, value);
    return rc; /* an offer still pending is abandoned: the releaser undoes it */
}

static void unfollow(baton__sub *sub, baton__sub *left, bool *following)
{
    if (*following)
        (void)baton__sub_follow(left, sub, false);
    *following = false;
}

static int wait_for(baton_client *c, const baton__wait *w, baton__waiting *wt)
{
    int64_t deadline = baton__deadline_after_ms(w->wait_ms);
    /* Others already wait on this channel: listen from before the first attempt on. */
    baton__sub *sub =
        (w->wait_ms != 0 && w->ops->join_live) ? baton__sub_try_acquire(c, w->channel) : NULL;
    baton__sub *left = NULL; /* where it listened before a BATON__RELISTEN */
    int turn = w->ops->turn && w->wait_ms != 0 ? w->ops->turn(w->arg) : 0;
    baton__sub *in_turn = NULL; /* where it counts itself among the waiters taking turns */
    bool on_own = false;        /* sub is its own channel (it is in a line) */
    bool following = false;     /* ... and left's messages wake it too (baton__sub_follow) */
    bool tried_shared = false;  /* it subscribed to the shared channel to follow it */
    /* a release of its client may hand it what it waits for: registered on sub */
    baton__cand *cand = NULL;
    bool cohort = w->ops->cohort && w->wait_ms != 0;
    int rc;
    /* Its client's waiters there all want the least, as it does, and one sleeps unwoken:
     * one of them was woken for what was freed (by its own thread, typically), and its
     * attempt would only race them.
     * Only a joined subscription: its own first one attempts after it is confirmed. */
    if (sub && turn == BATON__TURN_LEAST && baton__sub_queue(sub, 0, 0))
        rc = BATON_ETIMEDOUT;
    else
        rc = w->ops->attempt(w->arg, sub);
    if ((!not_yet(c, rc) && rc != BATON__RELISTEN) || w->wait_ms == 0) {
        if (sub)
            baton__sub_release(c, sub);
        if (rc != BATON_OK && w->wait_ms != 0 && w->ops->give_up)
            w->ops->give_up(w->arg, rc);
        return rc;
    }
    if (rc == BATON__RELISTEN)
        turn = 0; /* alone on its own channel */
    if (!sub || rc == BATON__RELISTEN) {
        rc = listen(c, w, rc == BATON__RELISTEN, deadline, wt, &sub, &left, &on_own);
        if (!sub) {
            if (w->ops->give_up)
                w->ops->give_up(w->arg, rc);
            drop(c, left, false, deadline);
            return rc;
        }
    }
    turn_take(sub, rc, turn, &in_turn);
    cand_take(w, sub, rc, on_own, cohort, &cand);
    while (not_yet(c, rc) || rc == BATON__RELISTEN) {
        if (rc == BATON__RELISTEN) {
            /* not asleep since its last look: no hand-over can have come */
            rc = cand_end(w, &cand, rc);
            if (rc != BATON__RELISTEN)
                break;
            turn_leave(turn, &in_turn);
            turn = 0; /* alone on its own channel */
            unfollow(sub, left, &following);
            rc = listen(c, w, true, deadline, wt, &sub, &left, &on_own);
            if (!sub)
                break;
            continue;
        }
        if (on_own && w->ops->first) {
            int hr = hear_shared(c, w, deadline, wt, sub, &left, &following, &tried_shared);
            if (hr == BATON_ECANCELED) {
                rc = hr;
                break;
            }
            if (hr == BATON__RELISTEN) {
                rc = w->ops->attempt(w->arg, sub);
                continue;
            }
        }
        int64_t now = baton__now_us();
        if (now >= deadline) {
            rc = BATON_ETIMEDOUT; /* the slot still in flux: not acquired within the wait */
            break;
        }
        int64_t until = deadline;
        int64_t bound = w->ops->bound_ms ? w->ops->bound_ms(w->arg) : -1;
        /* On a Cluster a release can go unheard however the waiter listens: while its
         * slot migrates, the script runs on the importing node (ASK) and publishes there,
         * and the subscription is on the migrating one. A lost message then costs at most
         * recheck_ms, not the holder's whole lease. */
        int64_t recheck = baton__client_config(c)->recheck_ms;
        if (baton__topology_cluster(c) && (bound < 0 || bound > recheck))
            bound = recheck;
        if (bound >= 0 && bound < (until - now) / 1000)
            until = now + bound * 1000;
        baton__sub_cand_sleeping(cand, wt->op != NULL);
        int woke = baton__wait_sleep(c, wt, sub, until);
        baton__sub_cand_sleeping(NULL, wt->op != NULL);
        if (cand && woke != BATON_ECANCELED) {
            int64_t value;
            int st = baton__sub_cand_state(cand, &value);
            if (st == BATON__CAND_HANDED) {
                rc = cand_end(w, &cand, BATON_OK);
                break;
            }
            if (st == BATON__CAND_OFFERED) {
                /* a release is handing it what it waits for: no attempt (it would race
                 * the hand-over); a wake-up taken meanwhile is another's */
                if (woke == BATON_OK)
                    baton__sub_pass_on(c, sub);
                continue;
            }
        }
        if (woke != BATON_OK && woke != BATON_ETIMEDOUT) {
            rc = woke; /* cancelled, or the channel's resubscription refused (NOPERM) */
            break;
        }
        /* its channel's resubscription refused (a fiber's sleep does not tell it), or where
         * it listened before (its own channel's wait keeps it) */
        int denied = baton__sub_denied(c, sub);
        if (denied == BATON_OK && left)
            denied = baton__sub_denied(c, left);
        if (denied != BATON_OK) {
            rc = denied;
            break;
        }
        baton__stat_woken(c, w->ops->stat, woke);
        rc = w->ops->attempt(w->arg, sub);
        turn_take(sub, rc, turn, &in_turn);
        cand_take(w, sub, rc, on_own, cohort, &cand);
    }
    rc = cand_end(w, &cand, rc);
    turn_leave(turn, &in_turn);
    unfollow(sub, left, &following);
    if (rc != BATON_OK && w->ops->give_up)
        w->ops->give_up(w->arg, rc);
    drop(c, sub, rc == BATON_OK, deadline);
    drop(c, left, rc == BATON_OK, deadline);
    return rc;
}

int baton__wait_for(baton_client *c, const baton__wait_ops *ops, const char *channel,
                    int64_t wait_ms, void *arg)
{
    const baton__wait one = {ops, channel, wait_ms, arg}, *w = &one;
    baton__waiting wt = {0};
    if (w->wait_ms == 0)
        return wait_for(c, w, &wt); /* one attempt: not a wait, nothing to cancel */
    int rc = baton__wait_enter(c, &wt);
    if (rc != BATON_OK)
        return rc;
    rc = wait_for(c, w, &wt);
    baton__wait_leave(c, &wt);
    return rc;
}

/* ------------------------------- lines of starved waiters ----------------------------- */

const char *baton__line_mode(bool waits, bool queued, int64_t waited_us, int64_t bound_ms)
{
    if (!waits || bound_ms == BATON_STARVE_NEVER)
        return "0";
    return queued || waited_us >= bound_ms * 1000 ? "2" : "1";
}

int64_t baton__line_look_ms(long long rank)
{
    return rank >= BATON__LINE_POLL_MAX_MS / BATON__LINE_POLL_MS ? BATON__LINE_POLL_MAX_MS
                                                                 : (rank + 1) * BATON__LINE_POLL_MS;
}

int baton__line_in(baton_client *c, const char *channel, const char *who, char **own)
{
    baton__client_record_keep(c, BATON_LEASE_WATCHDOG); /* who waits, for a status */
    if (*own)
        return BATON_ETIMEDOUT;
    *own = baton__asprintf("%s:%s", channel, who);
    return *own ? BATON__RELISTEN : baton__fail(c, BATON_ENOMEM, "out of memory");
}

void baton__line_leave(baton_client *c, const baton__script *unreserve, const char *const keys[3],
                       const char *const args[2], int rc)
{
    if (baton__client_forked(c))
        return;
    redisReply *r = NULL;
    char *detail = baton__strdup(baton_client_errmsg(c)); /* the wait's */
    if (baton__script_run(c, unreserve, 3, (const char **)keys, 2, (const char **)args, &r) ==
        BATON_OK)
        freeReplyObject(r);
    else if (detail)
        baton__fail(c, rc, "%s", detail);
    free(detail);
}

/* ------------------------------- a channel of one waiter ----------------------------- */

/* A channel of one waiter: every message is for it. */
static int64_t own_wakeups(const char *payload, size_t len, int refs, int64_t pending)
{
    (void)payload, (void)len, (void)pending;
    return refs; /* its one waiter */
}

const baton__sub_type baton__sub_own = {own_wakeups, true, true};
