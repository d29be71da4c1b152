/*
 * Private to baton, core-only: the state the asynchronous engine (async.c) and the waits
 * and their cancellation (waits.c) share, under one mutex. Nothing outside those two files
 * includes it.
 */
#ifndef BATON_CORE_ENGINE_H
#define BATON_CORE_ENGINE_H

#include "client_fields.h"
#include "evloop.h"
#include "fiber.h"

#include <baton/async.h>

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>

/* The most stacks an engine maps (each a mapping and its guard page: two of
 * vm.max_map_count's 65,530). A fiber lends its stack out while it sleeps on a
 * subscription; beyond this many fibers running or waiting for I/O at once, the next waits
 * for a stack instead of mapping one. */
#define MAX_STACKS 256

#if defined(__SANITIZE_ADDRESS__)
#define BATON_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#define BATON_TSAN 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BATON_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define BATON_TSAN 1
#endif
#endif
#ifdef BATON_ASAN
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef BATON_TSAN
#include <sanitizer/tsan_interface.h>
#endif
/* Under valgrind the fibers' stacks are declared as stacks (its client requests cost
 * nothing elsewhere); built without its header, valgrind reports their frames as invalid
 * accesses. */
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define BATON_VALGRIND 1
#endif
#endif

/* One engine: its fibers stay on one thread from start to end (thread-locals stay theirs),
 * its own or, in BATON_CALLBACKS_LOOP, the program's loop thread. Its queues are guarded by
 * the evloop's mutex. */
typedef struct engine {
    baton__evloop *ev;
    pthread_t thread;
    int wfd;     /* eventfd: work queued, timer moved, stop (it sleeps in poll()) */
    bool asleep; /* in poll(): a wake-up must write wfd */
    int live;    /* its operations not yet done */
    baton_op *run_head, *run_tail;
    baton_op **heap;
    size_t nheap, capheap;
    baton_op **io; /* its operations waiting for their sockets (this thread's alone) */
    size_t nio, capio;
    struct pollfd *pfd;
    size_t cappfd;
    int64_t last_poll_us;
    int kicks; /* fibers parked on a socket woken by baton__fiber_wake since (async.c) */
    /* completions queued by this turn and not told yet (efd not written): since when */
    int64_t notify_since;
    /* BATON_CALLBACKS_LOOP: no thread of its own. The program's thread runs it inside
     * baton_client_process() (and the starts it makes outside one), over epfd: wfd, efd,
     * tfd (the timer heap's first deadline, armed at tfd_at; 0: disarmed) and the sockets
     * its fibers wait for (reg below). driving: how deep the driving
     * thread (driver) is in it; bound: the thread its fibers run on (the first to drive). */
    int epfd, tfd;
    int64_t tfd_at;
    /* by descriptor: a connection's socket stays in epfd between waits, edge-triggered
     * (reg[fd].key: its serial; events: what it is registered for), and what it reported
     * while no fiber waited (pending) is the next wait's at once */
    struct loop_reg {
        uint64_t key;
        uint32_t events, pending;
    } * reg;
    size_t nreg;
    int driving;
    pthread_t driver;
    bool bound;
    pthread_t loop_thread;
    /* The fibers' stacks (this thread's alone): each runs one fiber at a time, the one
     * whose frames are in it (occ); a fiber sleeping on a subscription lends its stack to
     * the next that needs it, its frames copied out (async.c, "stacks"). */
    struct stack_slot {
        char *map;                       /* a guard page, then STACK_SIZE */
        baton_op *occ;                   /* whose frames it holds, or NULL */
        baton_op *wait_head, *wait_tail; /* operations bound to it, waiting for it */
#ifdef BATON_VALGRIND
        unsigned vg; /* valgrind's id of the stack */
#endif
    } * slots;
    int nslots;
    unsigned cursor; /* where the next search for a stack begins */
    size_t page;
    baton__fctx main_ctx; /* the engine thread's own */
#ifdef BATON_ASAN
    const void *main_bottom;
    size_t main_size;
#endif
#ifdef BATON_TSAN
    void *tsan_main;
#endif
} engine;

struct baton__evloop {
    baton_client *c;
    const baton__sub_methods *subs; /* the dispatcher's, given at open */
    pthread_mutex_t mu;
    pthread_cond_t idle; /* waits or live operations reached 0 */
    atomic_uint_fast64_t gen;
    bool closing;
    int waits;               /* threads inside a wait */
    baton__waiting *waiting; /* the threads' waits (baton__wait_enter to _leave) */

    bool started, stop;
    bool shut; /* baton__evloop_shut ran (the closing thread's alone) */
    engine eng;
    int efd;
    /* BATON_CALLBACKS_*: atomic, since a thread about to sleep in a wait, and process(),
     * look at it without ev->mu while the program may switch PROCESS and BATON */
    _Atomic int mode;
    int live;      /* operations started, not yet done */
    baton_op *all; /* live operations */
    /* Connections given back to a pool (baton__evloop_conn_freed), and the fibers waiting
     * for one: a fiber must not block its engine in the pool's wait, since the
     * connections it waits for may be held by fibers of that engine. */
    atomic_uint_fast64_t freed;
    atomic_int npool_waiters;
    baton_op *pool_head, *pool_tail; /* first come, first woken */
    baton_op *done_head, *done_tail;
};

/* ------------------------------- async.c, for waits.c --------------------------------- */

/* The operation whose fiber runs on the calling thread, or NULL (a thread of its own). */
baton_op *baton__op_current(void);
/* Whether op was cancelled (ev->mu held). */
bool baton__op_cancelled_locked(const baton_op *op);
/* Marks cancelled and wakes every live operation (handle NULL), or those started on handle
 * that are not releases (ev->mu held). */
void baton__ops_cancel_locked(baton__evloop *ev, const void *handle);
/* The fiber's sleep (wt->op's): arms the waker and the timer, yields, disarms. Returns as
 * baton__wait_sleep. */
int baton__fiber_sleep(baton_client *c, baton__waiting *wt, baton__sub *sub, int64_t until);
/* A thread about to sleep in a wait (on client c) first wakes the engine for the
 * operations its callbacks started and baton_client_process() has not woken it for yet:
 * the wait may be for one of them (a release). In BATON_CALLBACKS_LOOP, on the loop thread
 * (of the client whose callbacks it runs, or of c), it drives them instead, and returns
 * true while operations are live: the thread then sleeps in slices of
 * BATON__DRIVE_SLICE_US and drives them again between slices. */
bool baton__ops_start_deferred(baton_client *c);
#define BATON__DRIVE_SLICE_US 1000

/* ------------------------------- a wait's cancellation (async.c, for waits.c too) --- */

/* Whether the wait wt was cancelled: the generation moved, or its operation was cancelled
 * (ev->mu held). */
bool baton__wait_cancelled_locked(baton__evloop *ev, const baton__waiting *wt);
/* Records and returns BATON_ECANCELED for a cancelled wait. */
int baton__wait_cancelled_error(baton_client *c);
/* Cancels every operation and wait: the generation moves (ev->mu held). */
void baton__waits_cancel_all_locked(baton__evloop *ev);

#endif /* BATON_CORE_ENGINE_H */
