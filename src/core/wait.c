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

static void drop(baton_client *c, baton__sub *sub, bool done)
{
    if (!sub)
        return;
    if (done)
        baton__sub_release(c, sub); /* unsubscribe in the background */
    else
        baton__sub_release_sync(c, sub); /* gave up: leave nothing behind */
}

int baton__wait_for(baton_client *c, const baton__wait *w)
{
    int64_t deadline = baton__deadline_after_ms(w->wait_ms);
    /* Others already wait on this channel: listen from before the first attempt on. */
    baton__sub *sub =
        (w->wait_ms != 0 && w->join_live) ? baton__sub_try_acquire(c, w->channel) : NULL;
    int rc = w->attempt(w->arg, sub);
    if (rc != BATON_ETIMEDOUT || w->wait_ms == 0) {
        if (sub)
            baton__sub_release(c, sub);
        if (rc != BATON_OK && w->wait_ms != 0 && w->give_up)
            w->give_up(w->arg, rc);
        return rc;
    }
    if (!sub) {
        rc = baton__sub_acquire(c, w->channel, w->kind, deadline, &sub);
        if (rc != BATON_OK) {
            if (w->give_up)
                w->give_up(w->arg, rc);
            return rc;
        }
        /* A release published before the subscription was confirmed went unheard. */
        rc = w->attempt(w->arg, sub);
    }
    while (rc == BATON_ETIMEDOUT) {
        int64_t now = baton__now_us();
        if (now >= deadline)
            break;
        int64_t until = deadline;
        int64_t bound = w->bound_ms ? w->bound_ms(w->arg) : -1;
        if (bound >= 0 && bound < (until - now) / 1000)
            until = now + bound * 1000;
        baton__stat_woken(c, w->stat, baton__sub_wait(c, sub, until));
        rc = w->attempt(w->arg, sub);
    }
    if (rc != BATON_OK && w->give_up)
        w->give_up(w->arg, rc);
    drop(c, sub, rc == BATON_OK);
    return rc;
}
