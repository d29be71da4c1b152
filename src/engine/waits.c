/*
 * Waits and their cancellation: every wait of a blocking verb is counted here, from
 * baton__wait_enter to baton__wait_leave, so that close waits for the last to leave, and a
 * wait is cancelled by a generation counter per client (baton_client_cancel_waits, close)
 * or by its handle (baton_x_cancel_waits). A thread sleeps on its subscription
 * (baton__sub_wait); an asynchronous operation's fiber sleeps in the engine
 * (baton__fiber_sleep, async.c), which shares its mutex with these counts (engine.h).
 */
#define _GNU_SOURCE
#include "engine.h"

#include <stdio.h>
#include <string.h>

static _Thread_local const void *wait_handle; /* the verb's handle (baton__wait_handle) */

const void *baton__wait_handle(const void *handle)
{
    const void *saved = wait_handle;
    if (!baton__op_current() && !saved) /* a fiber's handle is its operation's */
        wait_handle = handle;
    return saved;
}

void baton__wait_handle_restore(const void *saved)
{
    if (!baton__op_current())
        wait_handle = saved;
}

void baton__waiter_owner(const baton_client *c, char *buf, size_t len)
{
    static atomic_uint_fast64_t fibers;
    baton__owner(c, buf, len);
    if (baton__op_current()) {
        size_t n = strlen(buf);
        snprintf(buf + n, len - n, ":f%llu",
                 (unsigned long long)atomic_fetch_add_explicit(&fibers, 1, memory_order_relaxed));
    }
}

int baton__wait_enter(baton_client *c, baton__waiting *wt)
{
    baton__evloop *ev = c->ev;
    wt->op = baton__op_current();
    wt->handle = wt->op ? NULL : wait_handle;
    atomic_init(&wt->cancelled, false);
    wt->prev = wt->next = NULL;
    baton__mutex_lock(&ev->mu);
    bool closing = ev->closing && !wt->op;
    if (!closing && !wt->op) {
        ev->waits++;
        wt->next = ev->waiting;
        if (ev->waiting)
            ev->waiting->prev = wt;
        ev->waiting = wt;
    }
    wt->gen = atomic_load(&ev->gen);
    baton__mutex_unlock(&ev->mu);
    if (closing)
        return baton__fail(c, BATON_ECANCELED, "the client is closing");
    return BATON_OK;
}

void baton__wait_leave(baton_client *c, baton__waiting *wt)
{
    if (wt->op)
        return;
    baton__evloop *ev = c->ev;
    baton__mutex_lock(&ev->mu);
    BATON__UNLINK(wt, prev, next, ev->waiting);
    if (--ev->waits == 0)
        baton__cond_broadcast(&ev->idle);
    baton__mutex_unlock(&ev->mu);
}

static bool call_counted(const baton_client *c)
{
    return c && c->ev && !baton__op_current() && !baton__client_forked(c);
}

int baton__call_begin(baton_client *c)
{
    if (!call_counted(c))
        return BATON_OK;
    baton__evloop *ev = c->ev;
    baton__mutex_lock(&ev->mu);
    bool closing = ev->closing;
    if (!closing)
        ev->waits++;
    baton__mutex_unlock(&ev->mu);
    return closing ? baton__fail(c, BATON_ECANCELED, "the client is closing") : BATON_OK;
}

void baton__call_end(baton_client *c)
{
    if (!call_counted(c))
        return;
    baton__evloop *ev = c->ev;
    baton__mutex_lock(&ev->mu);
    if (--ev->waits == 0)
        baton__cond_broadcast(&ev->idle);
    baton__mutex_unlock(&ev->mu);
}

/* A thread's wait: the client's generation moved, or its handle's waits were cancelled. */
static bool thread_cancelled(baton__evloop *ev, baton__waiting *wt)
{
    return atomic_load(&ev->gen) != wt->gen || atomic_load(&wt->cancelled);
}

bool baton__wait_cancelled(baton_client *c, const baton__waiting *wt)
{
    baton__evloop *ev = c->ev;
    if (!wt->op)
        return thread_cancelled(ev, (baton__waiting *)wt);
    baton__mutex_lock(&ev->mu);
    bool r = baton__wait_cancelled_locked(ev, wt);
    baton__mutex_unlock(&ev->mu);
    return r;
}

/* baton__sub_wait's question for a thread's wait wt (no lock taken: atomics only). */
static bool thread_wait_cancelled(void *arg)
{
    baton__waiting *wt = arg;
    return thread_cancelled(wt->ev, wt);
}

int baton__wait_sleep(baton_client *c, baton__waiting *wt, baton__sub *sub, int64_t until_us)
{
    if (wt->op)
        return baton__fiber_sleep(c, wt, sub, until_us);
    bool drive = baton__ops_start_deferred(c);
    baton__evloop *ev = c->ev;
    if (thread_cancelled(ev, wt))
        return baton__wait_cancelled_error(c);
    /* Asked again before each sleep: a cancellation's broadcast hands out one wake-up per
     * waiter, and another waiter of the channel may take them all first. */
    wt->ev = ev;
    int rc;
    for (;;) {
        int64_t until = until_us, now = baton__now_us();
        if (drive && until - now > BATON__DRIVE_SLICE_US)
            until = now + BATON__DRIVE_SLICE_US;
        rc = ev->subs->wait(c, sub, until, thread_wait_cancelled, wt);
        if (rc != BATON_ETIMEDOUT || until == until_us)
            break;
        drive = baton__ops_start_deferred(c); /* the loop thread's operations, meanwhile */
    }
    if (thread_cancelled(ev, wt)) {
        if (rc == BATON_OK)
            ev->subs->pass_on(c, sub); /* it took a wake-up meant for a waiter that tries */
        return baton__wait_cancelled_error(c);
    }
    return rc;
}

/* ------------------------------- cancellation ----------------------------------------- */

void baton__evloop_cancel_handle(baton_client *c, const void *handle)
{
    if (!c || !c->ev || baton__client_forked(c))
        return;
    baton__evloop *ev = c->ev;
    bool threads = false;
    baton__mutex_lock(&ev->mu);
    for (baton__waiting *wt = ev->waiting; wt; wt = wt->next)
        if (wt->handle == handle) {
            atomic_store(&wt->cancelled, true);
            threads = true;
        }
    baton__ops_cancel_locked(ev, handle);
    baton__mutex_unlock(&ev->mu);
    /* A thread asleep on a subscription wakes, sees its flag and leaves; the other waiters
     * woken with it find nothing changed and try once more. */
    if (threads)
        ev->subs->wake_all(c);
}

int baton_client_cancel_waits(baton_client *c)
{
    if (!c)
        return BATON_EINVAL;
    int rc = baton__client_enter(c);
    if (rc != BATON_OK)
        return rc;
    baton__evloop *ev = c->ev;
    baton__mutex_lock(&ev->mu);
    baton__waits_cancel_all_locked(ev);
    baton__mutex_unlock(&ev->mu);
    ev->subs->wake_all(c);
    return BATON_OK;
}
