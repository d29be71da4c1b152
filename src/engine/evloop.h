/*
 * Private to baton, core-only: what the core needs from the event-loop machinery (async.c,
 * waits.c): the engine's life, counting waits, sleeping either as a thread or as an
 * asynchronous operation, fibers waiting for sockets and connections, and the dispatcher's
 * wakers. What the primitives may use of it is in ops.h.
 */
#ifndef BATON_CORE_EVLOOP_H
#define BATON_CORE_EVLOOP_H

#include "ops.h"

#include <stdatomic.h>

typedef struct baton__evloop baton__evloop;

/* One wait in progress (wait.c), as the cancellation machinery knows it. */
typedef struct baton__waiting {
    uint64_t gen;        /* the client's cancellation generation when the wait began */
    struct baton_op *op; /* the asynchronous operation it runs for, or NULL (a thread) */
    /* A thread's wait: the handle it waits through (baton__wait_handle), whether that
     * handle's waits were cancelled since, and its place in the client's list of them. */
    const void *handle;
    atomic_bool cancelled;
    struct baton__evloop *ev; /* set by baton__wait_sleep for baton__sub_wait's question */
    struct baton__waiting *prev, *next;
} baton__waiting;

struct baton__sub_waker;
/* A subscription (src/core/dispatch.c), which the engine only hands back to the
 * dispatcher's methods. */
typedef struct baton__sub baton__sub;

/* How a wait sleeps on a subscription: the dispatcher's methods (src/core), which the
 * client hands the engine at open, so that the engine calls no floor above it. */
typedef struct baton__sub_methods {
    /* Sleeps as a thread until a wake-up (BATON_OK), the deadline (BATON_ETIMEDOUT) or
     * cancelled(arg) (BATON_ECANCELED): baton__sub_wait. */
    int (*wait)(baton_client *c, baton__sub *s, int64_t deadline_us, bool (*cancelled)(void *),
                void *arg);
    /* A fiber's waker armed on s, disarmed (whether it fired), a wake-up handed on, every
     * waiter of every channel woken once: baton__sub_arm, _disarm, _pass_on, _wake_all. */
    void (*arm)(baton_client *c, baton__sub *s, struct baton__sub_waker *w);
    bool (*disarm)(baton_client *c, baton__sub *s, struct baton__sub_waker *w);
    void (*pass_on)(baton_client *c, baton__sub *s);
    void (*wake_all)(baton_client *c);
} baton__sub_methods;

/* Made at open, before anything can wait; NULL when out of memory. subs: how its waits
 * sleep on a subscription (static storage). */
baton__evloop *baton__evloop_new(baton_client *c, const baton__sub_methods *subs);
/* baton_client_close's first step: cancels every wait, waits for blocking waiters to leave,
 * completes every asynchronous operation and runs the callbacks still pending. The memory
 * stays until baton__evloop_free (after the client's threads have ended: a connection they
 * give back still looks for fibers waiting for one). forked: a copy in a fork child, which
 * has none of those threads: nothing runs. */
void baton__evloop_shut(baton__evloop *ev, bool forked);
/* Shuts it if that has not been done, and frees it. */
void baton__evloop_free(baton__evloop *ev, bool forked);

/* A wait begins: BATON_ECANCELED (recorded) if the client is closing. */
int baton__wait_enter(baton_client *c, baton__waiting *wt);
void baton__wait_leave(baton_client *c, baton__waiting *wt);
/* Whether the wait was cancelled since it began. */
bool baton__wait_cancelled(baton_client *c, const baton__waiting *wt);
/* Sleeps on sub until a wake-up (BATON_OK), until_us (BATON_ETIMEDOUT) or a cancellation
 * (BATON_ECANCELED, recorded). A thread blocks; an asynchronous operation yields its baton
 * thread to the others meanwhile. */
int baton__wait_sleep(baton_client *c, baton__waiting *wt, baton__sub *sub, int64_t until_us);

/* An asynchronous operation's fiber waits for its socket: it yields its engine to the
 * other fibers until fd allows `events` (1) or deadline_us passes (0). -1: the caller is
 * not on a fiber (or memory ran out) and polls on its own. key: the connection's serial
 * (0: a socket still connecting), which lets BATON_CALLBACKS_LOOP keep the descriptor in
 * its epoll set between waits. The caller waits only after a read or write found nothing
 * to do (EAGAIN), or for the reply to what it has just sent. */
int baton__fiber_wait_fd(int fd, short events, int64_t deadline_us, uint64_t key);
/* Connections handed back to c's pools so far: a fiber that found every connection busy
 * waits for this count to move (baton__fiber_wait_pool) instead of blocking its engine,
 * whose other fibers may hold them. */
uint64_t baton__evloop_freed(baton_client *c);
/* Yields until a connection of `pool` came back after `seen` (1; perhaps taken again
 * since), or deadline_us (0). On a fiber. */
int baton__fiber_wait_pool(baton_client *c, const void *pool, uint64_t seen, int64_t deadline_us);
/* A connection went back to `pool` (or closed, freeing its place): the first fiber waiting
 * for one of it runs again; all of them when `all` (the pool was emptied). */
void baton__evloop_conn_freed(baton_client *c, const void *pool, bool all);

/* ------------------------------- the dispatcher's side (src/core/dispatch.c) --------- */

/* Defined by the dispatcher; the engine reaches them only through baton__sub_methods. */

/* A waiter that is not a sleeping thread (an asynchronous operation): armed on a
 * subscription, it takes the next wake-up the channel's policy hands out, as a thread in
 * baton__sub_wait would, and fn(arg) runs then, on the dispatcher's thread under its mutex
 * (it must only queue work). Owned by the caller; armed at most once at a time. */
typedef struct baton__sub_waker {
    void (*fn)(void *arg);
    void *arg;
    struct baton__sub_waker *prev, *next;
    bool armed;
    bool fed; /* fired, and not disarmed since */
} baton__sub_waker;
/* The dispatcher's methods, for baton__evloop_new. */
extern const baton__sub_methods baton__dispatcher_subs;
/* Arms w on s (s is held by w's owner): a wake-up kept for s already fires it at once. */
void baton__sub_arm(baton_client *c, baton__sub *s, baton__sub_waker *w);
/* Disarms w if it is still armed (it did not fire); whether it fired since it was armed
 * (then it took a wake-up, and until this call a message counts it as a waiter about to
 * try). */
bool baton__sub_disarm(baton_client *c, baton__sub *s, baton__sub_waker *w);
/* Hands a wake-up on (a waiter that took one leaves without trying: cancelled). */
void baton__sub_pass_on(baton_client *c, baton__sub *s);
/* Wakes every waiter of every channel once (cancellation: they re-check and leave). */
void baton__sub_wake_all(baton_client *c);

#endif /* BATON_CORE_EVLOOP_H */
