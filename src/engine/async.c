/*
 * Waits that do not block the caller: cancellation of waits, and asynchronous operations.
 *
 * Every blocking primitive waits in one routine (wait.c): attempt, subscribe, sleep until a
 * wake-up or a bound, attempt again. An asynchronous operation runs that same routine, the
 * primitive's own code unchanged, on a fiber (fiber.h; on one of the engine's stacks, which
 * it lends while it sleeps: "stacks" below) driven by one baton thread per client, the
 * engine. Where a thread would sleep, the fiber arms a waker on
 * its subscription (dispatch.c hands it the channel's wake-ups by the same policies as
 * sleeping threads), puts its bound in the engine's timer heap and yields; the engine then
 * runs the next fiber that has something to do. So 100,000 operations wait at once on
 * one thread, each costs the round trips its blocking form costs, and what makes waiting
 * correct (listen before the attempt that sends it to sleep, give up leaving nothing behind)
 * stays in wait.c. A fiber yields only there, never while holding a mutex; it runs on the
 * engine thread only, so thread-locals (error details) stay coherent, and it acts for its
 * owner (owner.c) while it runs.
 *
 * A finished operation is queued for the program with its result and error detail, and an
 * eventfd becomes readable; baton_client_process() runs the callbacks on the caller's
 * thread. Or, when the program asked, the engine runs the callback itself.
 *
 * Or the engine has no thread (BATON_CALLBACKS_LOOP): the program's loop thread runs it
 * inside baton_client_process(), over an epoll descriptor that holds the engine's wake-up
 * eventfd, the completion eventfd, a timerfd for the timer heap and the sockets its fibers
 * wait for. The fibers then all run on that one thread (bound to it when it first drives
 * the engine), and nothing passes between threads but the dispatcher's wake-ups.
 *
 * Cancellation: a generation counter per client. A wait remembers it when it begins;
 * baton_client_cancel_waits() raises it and wakes every subscription's waiters, threads and
 * fibers alike, which see the change and leave through the primitive's give-up path
 * (fair-lock queue entry, write claim, subscription: nothing stays in Redis). Close does
 * that, then waits for the waits to end and the operations to complete.
 */
#define _GNU_SOURCE
#include "engine.h"
#include "hooks.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/timerfd.h>
#include <unistd.h>

/* A fiber's stack: the primitives' code, hiredis and OpenSSL with room to spare. Stacks are
 * mapped with a guard page below and kept for reuse (up to SPARE_STACKS). */
#define STACK_SIZE (256 * 1024)
/* One engine thread per client: a fiber waiting for its socket yields (baton__fiber_wait_fd),
 * so it overlaps the round trips of every operation in flight, up to the pool's
 * connections; more threads would only add hand-offs between them. */
#define POLL_EVERY_US 1000

/* ST_SLEEPING: in a wait (woken by its subscription, a cancellation or its timer), or
 * waiting for a free connection (pool_wait). ST_IO: waiting for its socket (or its timer). */
typedef enum op_state { ST_NEW, ST_RUNNING, ST_SLEEPING, ST_IO, ST_DONE } op_state;

/* Laid out for size: 100,000 waiting operations are 100,000 of these. */
struct baton_op {
    baton__evloop *ev;    /* its fiber runs on ev->eng */
    baton__op_run_fn run; /* what its fiber runs: the primitive's blocking verb */
    void *handle;
    baton__op_args args; /* args.owner: the owner it acts for, or NULL */
    uint64_t owner_id;   /* what its fiber acts for: the owner's id, or the starting thread's;
                          * kept across each yield (fiber_yield) */
    baton_async_fn fn;
    void *arg;
    /* While it runs: the client's error detail on this thread, kept across a yield (the
     * fibers that run meanwhile on the same thread write theirs in the same place); when
     * done, its result's detail. NULL: none (or no memory for it). On the heap, and only
     * when there is one. */
    char *detail;
    int64_t wake_at; /* timer, monotonic µs */
    baton__sub_waker waker;
    union {
        struct { /* ST_IO: the socket and the events it waits for */
            int io_fd;
            short io_events;
            uint32_t ioidx; /* index in the engine's I/O list */
        };
        struct { /* pool_wait: in ev->pool_head..pool_tail, waiting for pool_for */
            const void *pool_for;
            baton_op *pool_prev, *pool_next;
        };
    };
    baton__fctx ctx;
    /* Its stack: the engine's stack `slot` (-1: none yet), which holds its frames while it
     * runs; while it sleeps on a subscription (parked) another fiber may take the stack,
     * its frames copied out to `saved` (saved_len bytes from the top of the stack, the
     * words that are not zero) and back before it runs again, at the same addresses. */
    char *saved;
    uint32_t saved_len;
    int slot;
    int rc;
    uint32_t hidx;       /* index in the timer heap, NO_HEAP when not in it */
    unsigned char state; /* op_state */
    /* A release is not a wait: cancelled or not, it runs (one round trip), or what it was
     * asked to give back would stay taken in Redis. */
    bool release;
    bool queued;       /* in the run queue (or its stack's list) */
    bool cancelled;    /* baton_op_cancel, cancel_waits, close */
    bool woken;        /* the waker fired while it slept */
    bool pending_wake; /* ... or while it was not asleep: the next sleep returns at once */
    bool io_ready;     /* the socket was ready (else the timer ran out) */
    bool pool_wait;    /* in the pool's waiters (pool_for) */
    bool parked;       /* asleep on a subscription: its stack may be lent */
    bool in_park;      /* in baton__fiber_park (the transport's wait for a reply) */
    bool kicked;       /* baton__fiber_wake came: the park returns (at once if not in it) */
#ifndef BATON__FIBER_ASM
    char *low; /* below its frames when it yielded (ucontext: no saved stack pointer) */
#endif
#ifdef BATON_ASAN
    void *asan_fake;
#endif
#ifdef BATON_TSAN
    void *tsan_fiber;
#endif
    baton_op *next;                /* run queue, done queue or its stack's list */
    baton_op *all_prev, *all_next; /* live operations */
};

#define NO_HEAP UINT32_MAX

static _Thread_local baton_op *current; /* the fiber running on this thread */
static _Thread_local bool on_engine;    /* this thread is a client's engine */
/* Operations that the callbacks run by baton_client_process() start wake the engine once,
 * when those callbacks are over, or WAKE_DEFER_US after the first start if they go on: a
 * wake-up costs the engine a system call and a thread switch, and the callbacks of an
 * event-loop program usually start several. processing: the client whose callbacks this
 * thread runs; deferred_since: when the first start was deferred (0: none). */
static _Thread_local baton__evloop *processing;
static _Thread_local int64_t deferred_since;
#define WAKE_DEFER_US 200

/* ------------------------------- timer heap (ev->mu) ---------------------------------- */

static void heap_set(engine *ev, size_t i, baton_op *op)
{
    ev->heap[i] = op;
    op->hidx = i;
}

static void heap_up(engine *ev, size_t i)
{
    baton_op *op = ev->heap[i];
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (ev->heap[p]->wake_at <= op->wake_at)
            break;
        heap_set(ev, i, ev->heap[p]);
        i = p;
    }
    heap_set(ev, i, op);
}

static void heap_down(engine *ev, size_t i)
{
    baton_op *op = ev->heap[i];
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        const baton_op *best = op;
        if (l < ev->nheap && ev->heap[l]->wake_at < best->wake_at)
            best = ev->heap[m = l];
        if (l + 1 < ev->nheap && ev->heap[l + 1]->wake_at < best->wake_at)
            m = l + 1;
        if (m == i)
            break;
        heap_set(ev, i, ev->heap[m]);
        i = m;
    }
    heap_set(ev, i, op);
}

static int heap_push(engine *ev, baton_op *op)
{
    if (!baton__grow(&ev->heap, &ev->capheap, ev->nheap, sizeof *ev->heap, 64))
        return BATON_ENOMEM;
    ev->heap[ev->nheap++] = op;
    heap_up(ev, ev->nheap - 1);
    return BATON_OK;
}

/* An op that sleeps until deadline_us at the latest (BATON__NO_DEADLINE: no bound) is in
 * the heap of timers; false when it could not be put there (out of memory). */
static bool wake_by(engine *e, baton_op *op, int64_t deadline_us)
{
    if (deadline_us == BATON__NO_DEADLINE)
        return true;
    op->wake_at = deadline_us;
    return heap_push(e, op) == BATON_OK;
}

static void heap_remove(engine *ev, baton_op *op)
{
    size_t i = op->hidx;
    if (i == NO_HEAP)
        return;
    op->hidx = NO_HEAP;
    baton_op *last = ev->heap[--ev->nheap];
    if (i == ev->nheap)
        return;
    heap_set(ev, i, last);
    heap_up(ev, i);
    heap_down(ev, last->hidx);
}

/* ------------------------------- queues (ev->mu) -------------------------------------- */

/* Reads an eventfd or timerfd back to zero: 8 bytes, or nothing (EAGAIN: the queues
 * decide, not the counter). */
static void drain(int fd)
{
    uint64_t v;
    ssize_t r = read(fd, &v, sizeof v);
    (void)r;
}

static void push(baton_op **head, baton_op **tail, baton_op *op)
{
    op->next = NULL;
    if (*tail)
        (*tail)->next = op;
    else
        *head = op;
    *tail = op;
}

static baton_op *pop(baton_op **head, baton_op **tail)
{
    baton_op *op = *head;
    if (op) {
        *head = op->next;
        if (!*head)
            *tail = NULL;
    }
    return op;
}

/* Queues a sleeping operation to run again. */
/* Wakes the engine from its poll() (ev->mu held). */
static void engine_wake(engine *e)
{
    if (!e->asleep)
        return;
    e->asleep = false; /* one write per sleep */
    uint64_t one = 1;
    ssize_t n = write(e->wfd, &one, sizeof one);
    (void)n; /* a counter at its maximum is readable already */
}

static void make_ready(baton__evloop *ev, baton_op *op)
{
    if (op->state != ST_SLEEPING || op->queued)
        return;
    op->queued = true;
    push(&op->ev->eng.run_head, &op->ev->eng.run_tail, op);
    engine_wake(&op->ev->eng);
    (void)ev;
}

/* The dispatcher's thread, under its mutex: this operation's channel woke it. */
static void on_wake(void *arg)
{
    baton_op *op = arg;
    baton__evloop *ev = op->ev;
    baton__mutex_lock(&ev->mu);
    if (op->state == ST_SLEEPING) {
        op->woken = true;
        make_ready(ev, op);
    } else {
        op->pending_wake = true;
    }
    baton__mutex_unlock(&ev->mu);
}

/* ------------------------------- fibers ----------------------------------------------- */

static void fiber_main(void);

/* op's error detail, printf-style (none when memory runs out: its code's name is given). */
static void set_detail(baton_op *op, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_detail(baton_op *op, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *d = NULL;
    if (vasprintf(&d, fmt, ap) < 0)
        d = NULL;
    va_end(ap);
    free(op->detail);
    op->detail = d;
}

/* ------------------------------- stacks (the engine thread's alone) ------------------- */

/* A fiber that only waits needs no stack of its own: the engine maps at most MAX_STACKS
 * stacks, and a fiber sleeping on a subscription (parked) lends its stack to the next fiber
 * that needs one: its frames, the few hundred bytes to few kilobytes between its stack
 * pointer and the top, are copied out to the heap and back before it runs again, at the same
 * addresses (its frames point into themselves). So 100,000 waiters cost 100,000 copies of
 * their frames, not 100,000 stacks of 256 KiB and 200,000 mappings (vm.max_map_count is
 * 65,530). Only a parked fiber lends its stack: nothing but the fiber itself reaches into
 * its frames (its waker, its timer and its lists are in its baton_op). A fiber bound to a
 * stack that another fiber uses for I/O waits for it (in the stack's list) until that fiber
 * parks or ends. Frames are copied like the memory they are: the sanitizers are told
 * (ASan's poisoning of the stack is lifted where frames move), valgrind knows each stack
 * once. */

#ifdef BATON_ASAN
#include <sanitizer/asan_interface.h>
#define UNPOISON(p, n) __asan_unpoison_memory_region((p), (n))
#else
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

static char *slot_bottom(const engine *e, int i)
{
    return e->slots[i].map + e->page;
}

/* The lowest byte of a fiber's frames that it left when it yielded. */
static char *frames_low(const engine *e, const baton_op *op)
{
#ifdef BATON__FIBER_ASM
    (void)e;
    return op->ctx.sp;
#else
    char *low = op->low, *bottom = slot_bottom(e, op->slot);
    return low < bottom ? bottom : low;
#endif
}

/* Maps one more stack; its index, or -1 (errno: mmap's). */
static int slot_new(engine *e)
{
    if (!e->page)
        e->page = (size_t)sysconf(_SC_PAGESIZE);
    if (!e->slots) {
        e->slots = calloc(MAX_STACKS, sizeof *e->slots);
        if (!e->slots) {
            errno = ENOMEM;
            return -1;
        }
    }
    char *m = mmap(NULL, STACK_SIZE + e->page, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return -1;
    mprotect(m, e->page, PROT_NONE); /* a guard: an overflow faults, it never writes */
    int i = e->nslots++;
    e->slots[i] = (struct stack_slot){.map = m};
#ifdef BATON_VALGRIND
    e->slots[i].vg = VALGRIND_STACK_REGISTER(m + e->page, m + e->page + STACK_SIZE);
#endif
    return i;
}

/* Copies the frames of op (parked, not running) out of its stack, which is free after. A
 * quarter of a waiter's frames are zero words (padding, locals not set yet): the copy keeps
 * a bitmap of the 8-byte words that are not zero, then those words only. */
static int stack_save(engine *e, baton_op *op)
{
    char *low = (char *)((uintptr_t)frames_low(e, op) & ~(uintptr_t)7);
    char *top = slot_bottom(e, op->slot) + STACK_SIZE;
    size_t len = (size_t)(top - low), words = len / 8, map = (words + 7) / 8, nonzero = 0;
    UNPOISON(low, len);
    for (size_t w = 0; w < words; w++) {
        uint64_t v;
        memcpy(&v, low + 8 * w, 8);
        nonzero += v != 0;
    }
    unsigned char *buf = malloc(map + 8 * nonzero);
    if (!buf)
        return BATON_ENOMEM;
    memset(buf, 0, map);
    unsigned char *out = buf + map;
    for (size_t w = 0; w < words; w++) {
        uint64_t v;
        memcpy(&v, low + 8 * w, 8);
        if (v) {
            buf[w / 8] |= (unsigned char)(1u << (w % 8));
            memcpy(out, &v, 8);
            out += 8;
        }
    }
    op->saved = (char *)buf;
    op->saved_len = (uint32_t)len;
    e->slots[op->slot].occ = NULL;
    return BATON_OK;
}

/* Puts op's frames back where they were. */
static void stack_restore(engine *e, baton_op *op)
{
    char *top = slot_bottom(e, op->slot) + STACK_SIZE, *low = top - op->saved_len;
    size_t words = op->saved_len / 8, map = (words + 7) / 8;
    const unsigned char *buf = (const unsigned char *)op->saved, *in = buf + map;
    UNPOISON(low, op->saved_len);
    for (size_t w = 0; w < words; w++) {
        uint64_t v = 0;
        if (buf[w / 8] & (1u << (w % 8))) {
            memcpy(&v, in, 8);
            in += 8;
        }
        memcpy(low + 8 * w, &v, 8);
    }
    free(op->saved);
    op->saved = NULL;
    op->saved_len = 0;
    e->slots[op->slot].occ = op;
}

/* A stack for a fiber that has none yet: a free one, else one whose fiber is parked, else a
 * new one (up to MAX_STACKS); -1 when every stack is in use (errno 0) or none could be
 * mapped (errno set). Those with fibers waiting for them are left to those. */
static int slot_find(engine *e)
{
    int n = e->nslots, park = -1;
    for (int k = 0; k < n; k++) {
        int i = (int)((e->cursor + (unsigned)k) % (unsigned)n);
        const struct stack_slot *s = &e->slots[i];
        if (s->wait_head)
            continue;
        if (!s->occ) {
            e->cursor = (unsigned)i + 1;
            return i;
        }
        if (park < 0 && s->occ->parked)
            park = i;
    }
    if (park >= 0) {
        e->cursor = (unsigned)park + 1;
        return park;
    }
    errno = 0;
    return n < MAX_STACKS ? slot_new(e) : -1;
}

#define STACK_WAIT 1

/* Makes op's stack hold op's frames before it runs (ev->mu held): BATON_OK, STACK_WAIT
 * (listed on its stack, which another fiber uses: it runs when that fiber parks or ends),
 * or an error with op->detail written (a fiber not begun only). */
static int stack_take(engine *e, baton_op *op)
{
    if (op->slot < 0) {
        int i = slot_find(e);
        if (i < 0 && e->nslots == 0) {
            int err = errno;
            set_detail(op,
                       "out of memory for an operation's stack: mmap of %d KiB: %s (each stack "
                       "is two mappings, of vm.max_map_count)",
                       STACK_SIZE / 1024, strerror(err ? err : ENOMEM));
            return BATON_ENOMEM;
        }
        if (i < 0) /* every stack busy (or no more could be mapped): wait for one */
            i = (int)(e->cursor++ % (unsigned)e->nslots);
        op->slot = i;
    }
    struct stack_slot *s = &e->slots[op->slot];
    if (s->occ == op)
        return BATON_OK;
    if (s->occ && !s->occ->parked) {
        push(&s->wait_head, &s->wait_tail, op);
        return STACK_WAIT;
    }
    if (s->occ && stack_save(e, s->occ) != BATON_OK) {
        if (op->state == ST_NEW) {
            set_detail(op,
                       "out of memory: the frames of a waiting operation could not be saved "
                       "(malloc of %zu bytes) to lend its stack",
                       (size_t)(slot_bottom(e, op->slot) + STACK_SIZE - frames_low(e, s->occ)));
            return BATON_ENOMEM;
        }
        push(&s->wait_head, &s->wait_tail, op); /* tried again when the stack changes hands */
        return STACK_WAIT;
    }
    if (op->saved)
        stack_restore(e, op);
    else
        s->occ = op;
    return BATON_OK;
}

/* op ran and yielded or ended (ev->mu held): if it left its stack free or lendable, the
 * first fiber waiting for that stack goes to the run queue. */
static void stack_pass(engine *e, baton_op *op, int slot)
{
    struct stack_slot *s = &e->slots[slot];
    if (!s->wait_head || (s->occ && !s->occ->parked))
        return;
    baton_op *next = pop(&s->wait_head, &s->wait_tail);
    push(&e->run_head, &e->run_tail, next); /* still marked queued */
    (void)op;
}

static int fiber_make(engine *e, baton_op *op)
{
    UNPOISON(slot_bottom(e, op->slot), STACK_SIZE);
    if (baton__fctx_make(&op->ctx, slot_bottom(e, op->slot), STACK_SIZE, fiber_main) != 0)
        return BATON_ENOMEM;
#ifdef BATON_TSAN
    op->tsan_fiber = __tsan_create_fiber(0);
#endif
    return BATON_OK;
}

/* op's fiber ended: its stack is free. */
static void fiber_unmake(engine *e, baton_op *op)
{
#ifdef BATON_TSAN
    __tsan_destroy_fiber(op->tsan_fiber);
#endif
    if (op->slot >= 0 && e->slots[op->slot].occ == op)
        e->slots[op->slot].occ = NULL;
    free(op->saved);
    op->saved = NULL;
}

/* The engine thread switches to op's fiber until it yields or ends. */
static void fiber_enter(engine *ev, baton_op *op)
{
    current = op;
    uint64_t saved = baton__owner_act(op->owner_id);
#ifdef BATON_ASAN
    void *fake = NULL;
    __sanitizer_start_switch_fiber(&fake, slot_bottom(ev, op->slot), STACK_SIZE);
#endif
#ifdef BATON_TSAN
    __tsan_switch_to_fiber(op->tsan_fiber, 0);
#endif
    baton__fctx_switch(&ev->main_ctx, &op->ctx);
#ifdef BATON_ASAN
    __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
    baton__owner_act(saved);
    current = NULL;
}

/* On the fiber, after the engine switched to it. */
static void fiber_arrived(baton_op *op)
{
#ifdef BATON_ASAN
    __sanitizer_finish_switch_fiber(op->asan_fake, &op->ev->eng.main_bottom,
                                    &op->ev->eng.main_size);
#else
    (void)op;
#endif
}

/* On the fiber: back to the engine (for good when op is done). */
static void fiber_yield(baton_op *op)
{
    engine *ev = &op->ev->eng;
    bool back = op->state != ST_DONE;
#ifndef BATON__FIBER_ASM
    char probe = 0;
    /* swapcontext's frame, below this one, is small: 2 KiB covers it and the red zone */
    op->low = (char *)&probe - 2048;
    __asm__ volatile("" : : "r"(&probe) : "memory");
#endif
    if (back) {
        const char *m = baton_client_errmsg(op->ev->c);
        free(op->detail);
        op->detail = m[0] ? baton__strdup(m) : NULL;
        /* whom it acts for now (a verb "_as" an owner may yield inside): fiber_enter
         * gives it back, whatever the fibers that run meanwhile act for */
        op->owner_id = baton__owner_act(0);
    }
#ifdef BATON_ASAN
    __sanitizer_start_switch_fiber(op->state == ST_DONE ? NULL : &op->asan_fake, ev->main_bottom,
                                   ev->main_size);
#endif
#ifdef BATON_TSAN
    __tsan_switch_to_fiber(ev->tsan_main, 0);
#endif
    baton__fctx_switch(&op->ctx, &ev->main_ctx);
    fiber_arrived(op);
    if (back) {
        if (op->detail)
            baton__fail(op->ev->c, BATON_OK, "%s", op->detail);
        else
            baton__clear_error(op->ev->c);
    }
}

static void fiber_main(void)
{
    baton_op *op = current;
    fiber_arrived(op);
    baton__evloop *ev = op->ev;
    baton__mutex_lock(&ev->mu);
    /* A release is not a wait: cancelled or not, it runs (one round trip), or the hold it
     * was asked to give back would stay in Redis with nobody to renew or release it. */
    bool cancelled = op->cancelled && !op->release;
    baton__mutex_unlock(&ev->mu);
    if (cancelled) {
        op->rc = BATON_ECANCELED;
        set_detail(op, "operation cancelled before it started");
    } else {
        op->rc = op->run(op->handle, &op->args);
        if (op->rc != BATON_OK)
            set_detail(op, "%s", baton_client_errmsg(ev->c));
    }
    baton__mutex_lock(&ev->mu);
    op->state = ST_DONE;
    baton__mutex_unlock(&ev->mu);
    fiber_yield(op); /* never comes back */
}

/* ------------------------------- the engine ------------------------------------------- */

static void op_free(baton_op *op)
{
    free(op->detail);
    free(op);
}

static void deliver(baton__evloop *ev, baton_op *op)
{
    if (op->rc == BATON_OK)
        baton__clear_error(ev->c);
    else
        baton__fail(ev->c, op->rc, "%s", op->detail ? op->detail : baton_strerror(op->rc));
    op->fn(op->handle, op->args.owner, op->rc, op->arg);
    op_free(op);
}

/* The completion of an operation nobody waits for (baton__op_spawn): never called. */
static void no_completion(void *handle, baton_owner *owner, int rc, void *arg)
{
    (void)handle, (void)owner, (void)rc, (void)arg;
}

/* An operation's fiber ended (ev->mu held; may drop it to run the callback). */
static void finish(baton__evloop *ev, baton_op *op)
{
    op->ev->eng.live--; /* before the callback, which frees op */
    BATON__UNLINK(op, all_prev, all_next, ev->all);
    if (op->fn == no_completion) { /* nobody waits for it (baton__op_spawn) */
        op_free(op);
    } else if (ev->mode == BATON_CALLBACKS_BATON && !ev->stop) {
        baton__mutex_unlock(&ev->mu);
        deliver(ev, op);
        baton__mutex_lock(&ev->mu);
    } else {
        /* The descriptor is written when the queue stops being empty: baton_client_process
         * reads it before it takes the whole queue, so a queue with something in it always
         * has a write after the last take. */
        bool was_empty = !ev->done_head;
        push(&ev->done_head, &ev->done_tail, op);
        /* BATON_CALLBACKS_LOOP: baton_client_process, which drives, delivers it itself. On
         * the engine's thread the write waits for the end of its turn (notify_flush): the
         * program's thread is woken once for the completions of a turn, not once for each
         * (100,000 waiters released at once made as many wake-ups of it). */
        if (was_empty && !(ev->mode == BATON_CALLBACKS_LOOP && processing == ev)) {
            if (on_engine && ev->mode != BATON_CALLBACKS_LOOP) {
                if (!ev->eng.notify_since)
                    ev->eng.notify_since = baton__now_us() | 1;
            } else {
                uint64_t one = 1;
                ssize_t n = write(ev->efd, &one, sizeof one);
                (void)n; /* a counter at its maximum is readable already */
            }
        }
    }
    --ev->live;
    baton__cond_broadcast(&ev->idle); /* close, and baton__evloop_drop_handle */
}

/* The engine thread's completions of this turn are told to the program (ev->mu held). */
static void notify_flush(engine *e)
{
    if (!e->notify_since)
        return;
    e->notify_since = 0;
    uint64_t one = 1;
    ssize_t n = write(e->ev->efd, &one, sizeof one);
    (void)n; /* a counter at its maximum is readable already */
}

/* An operation waiting for its socket goes back to the run queue: ready, or its timer ran
 * out (ev->mu held, on the engine). */
static void io_done(engine *e, baton_op *op, bool ready)
{
    baton_op *last = e->io[--e->nio];
    e->io[op->ioidx] = last;
    last->ioidx = op->ioidx;
    op->io_ready = ready;
    op->state = ST_SLEEPING;
    op->queued = true;
    /* first: an operation in the middle of its round trip goes before those not begun */
    op->next = e->run_head;
    e->run_head = op;
    if (!e->run_tail)
        e->run_tail = op;
}

/* Nothing to run (block): sleeps in poll() on the wake-up descriptor and the sockets its
 * fibers wait for, until one is ready, a wake-up or `until` (ev->mu held; dropped
 * meanwhile). Else a look at the sockets only, between fibers: their fibers go first. */
static void engine_poll(engine *e, int64_t until, bool block)
{
    baton__evloop *ev = e->ev;
    if (e->cappfd < e->nio + 1) {
        size_t cap = 2 * (e->nio + 1);
        struct pollfd *p = realloc(e->pfd, cap * sizeof *p);
        if (!p) { /* wait for a wake-up or the timer only; the sockets are polled again */
            cap = e->cappfd;
            until = baton__now_us() + 1000;
        } else {
            e->pfd = p;
        }
        e->cappfd = cap;
    }
    size_t n = e->cappfd < e->nio + 1 ? 1 : e->nio + 1;
    e->pfd[0] = (struct pollfd){e->wfd, POLLIN, 0};
    for (size_t i = 1; i < n; i++)
        e->pfd[i] = (struct pollfd){e->io[i - 1]->io_fd, e->io[i - 1]->io_events, 0};
    e->last_poll_us = baton__now_us();
    if (!block) {
        int got = ppoll(e->pfd + 1, (nfds_t)(n - 1), &(struct timespec){0, 0}, NULL);
        for (size_t i = n; got > 0 && i-- > 1;)
            if (e->pfd[i].revents) {
                baton_op *op = e->io[i - 1];
                heap_remove(e, op);
                io_done(e, op, true);
            }
        return;
    }
    e->asleep = true;
    baton__mutex_unlock(&ev->mu);
    struct timespec ts, *tp = NULL;
    if (until != BATON__NO_DEADLINE) {
        int64_t left = until - baton__now_us();
        if (left < 0)
            left = 0;
        ts.tv_sec = (time_t)(left / 1000000);
        ts.tv_nsec = (long)(left % 1000000) * 1000;
        tp = &ts;
    }
    int got = ppoll(e->pfd, (nfds_t)n, tp, NULL);
    baton__mutex_lock(&ev->mu);
    e->asleep = false;
    if (got <= 0)
        return;
    if (e->pfd[0].revents)
        drain(e->wfd);
    /* backwards: io_done moves the last entry into the place it frees */
    for (size_t i = n; i-- > 1;)
        if (e->pfd[i].revents) {
            baton_op *op = e->io[i - 1];
            heap_remove(e, op);
            io_done(e, op, true);
        }
}

/* Runs op's fiber until it yields or ends (ev->mu held; dropped meanwhile), once its stack
 * holds its frames (else it waits for that stack). */
static void run_one(engine *e, baton_op *op)
{
    baton__evloop *ev = e->ev;
    bool fresh = op->state == ST_NEW;
    int taken = stack_take(e, op);
    if (taken == STACK_WAIT) {
        op->queued = true; /* on its stack's list: nothing else queues it meanwhile */
        return;
    }
    op->queued = false;
    op->state = ST_RUNNING;
    int slot = op->slot;
    baton__mutex_unlock(&ev->mu);
    if (taken == BATON_OK && fresh && fiber_make(e, op) != BATON_OK) {
        e->slots[slot].occ = NULL;
        set_detail(op, "out of memory for an operation's context");
        taken = BATON_ENOMEM;
    }
    if (taken != BATON_OK) {
        op->rc = BATON_ENOMEM;
        baton__mutex_lock(&ev->mu);
        op->state = ST_DONE;
    } else {
        fiber_enter(e, op);
        if (op->state == ST_DONE) /* written by its fiber, on this thread */
            fiber_unmake(e, op);
        baton__mutex_lock(&ev->mu);
    }
    if (slot >= 0)
        stack_pass(e, op, slot);
    if (op->state == ST_DONE)
        finish(ev, op);
}

/* Moves the operations whose timers ran out to the run queue (ev->mu held). */
static void fire_timers(engine *e)
{
    int64_t now = baton__now_us();
    while (e->nheap > 0 && e->heap[0]->wake_at <= now) {
        baton_op *due = e->heap[0];
        heap_remove(e, due);
        if (due->state == ST_IO)
            io_done(e, due, false);
        else
            make_ready(e->ev, due);
    }
}

static void loop_look(engine *e, int timeout_ms);

/* Fibers parked on a socket that baton__fiber_wake woke go to the run queue (ev->mu held,
 * on the engine): the I/O list is the engine's alone, so the waker only counts them. */
static void unkick(engine *e)
{
    e->kicks = 0;
    for (size_t j = e->nio; j-- > 0;) {
        baton_op *op = e->io[j];
        if (op->kicked && op->in_park) {
            heap_remove(e, op);
            io_done(e, op, false);
        }
    }
}

/* Runs what is ready, fibers and timers, until nothing is (ev->mu held). */
static void run_ready(engine *e)
{
    for (;;) {
        if (e->kicks > 0)
            unkick(e);
        /* With fibers to run, the sockets are looked at every millisecond all the same:
         * a round trip's reply waits no longer than that for the fibers started meanwhile. */
        /* A long turn tells the program of its completions every millisecond too. */
        if (e->notify_since && baton__now_us() - e->notify_since >= POLL_EVERY_US)
            notify_flush(e);
        if (e->nio > 0 && e->run_head && baton__now_us() - e->last_poll_us >= POLL_EVERY_US) {
            if (e->ev->mode == BATON_CALLBACKS_LOOP)
                loop_look(e, 0);
            else
                engine_poll(e, 0, false);
        }
        baton_op *op = pop(&e->run_head, &e->run_tail);
        if (op) {
            run_one(e, op);
            continue;
        }
        fire_timers(e);
        if (!e->run_head)
            return;
    }
}

static void *engine_main(void *arg)
{
    engine *e = arg;
    baton__evloop *ev = e->ev;
    on_engine = true;
#ifdef BATON_TSAN
    e->tsan_main = __tsan_get_current_fiber();
#endif
    baton__mutex_lock(&ev->mu);
    for (;;) {
        run_ready(e);
        notify_flush(e); /* before it sleeps */
        if (ev->stop && e->live == 0)
            break;
        engine_poll(e, e->nheap > 0 ? e->heap[0]->wake_at : BATON__NO_DEADLINE, true);
    }
    baton__mutex_unlock(&ev->mu);
    return NULL;
}

/* ------------------------------- the engine on the loop's thread ---------------------- */

/* BATON_CALLBACKS_LOOP. The program polls epfd; baton_client_process drives the engine:
 * the sockets that are ready, the fibers, the callbacks, the fibers these started, until
 * nothing is ready; then the timer is armed for the first deadline and the engine "sleeps"
 * (asleep: a wake-up from another thread writes wfd, which makes epfd readable). */

/* Descriptors from this number on are armed one-shot at each wait (no table entry). */
#define LOOP_REG_MAX (1 << 20)

/* What epoll is asked for, for poll() events. */
static uint32_t epoll_events(short events)
{
    return ((events & POLLIN) ? EPOLLIN : 0u) | ((events & POLLOUT) ? EPOLLOUT : 0u);
}

/* Registers fd for ee (ev->mu held): changed if it is in the set, added if not (never
 * added, or closed since: closing takes it out of the set). */
static bool loop_ctl(engine *e, int fd, struct epoll_event *ee)
{
    if (epoll_ctl(e->epfd, EPOLL_CTL_MOD, fd, ee) == 0)
        return true;
    return errno == ENOENT && epoll_ctl(e->epfd, EPOLL_CTL_ADD, fd, ee) == 0;
}

/* The socket fd is to wake the fiber that waits for `events` on it (ev->mu held). 1: it
 * has them already (reported while no fiber waited); 0: armed; -1: epoll refused (the
 * caller waits in poll() on its own).
 * A connection's socket (key: its serial) stays in the set, edge-triggered, from one wait
 * to the next: no system call per round trip. That is sound because a fiber waits only
 * after a read or write found nothing to do, or for the reply to what it has just sent
 * (evloop.h): an edge comes after the wait begins, or came before and is kept in
 * reg[fd].pending. A reused descriptor number has another key and is registered again.
 * A socket not yet a connection (key 0: connecting) is armed one-shot. */
static int loop_arm(engine *e, int fd, short events, uint64_t key)
{
    uint32_t want = epoll_events(events);
    if (key == 0 || fd < 0 || fd >= LOOP_REG_MAX) {
        struct epoll_event ee = {.events = EPOLLONESHOT | want, .data.fd = fd};
        if (fd >= 0 && (size_t)fd < e->nreg)
            e->reg[fd].key = 0; /* registered otherwise now */
        return loop_ctl(e, fd, &ee) ? 0 : -1;
    }
    if ((size_t)fd >= e->nreg) {
        size_t n = e->nreg ? e->nreg : 64;
        while (n <= (size_t)fd)
            n *= 2;
        struct loop_reg *r = realloc(e->reg, n * sizeof *r);
        if (!r)
            return -1;
        memset(r + e->nreg, 0, (n - e->nreg) * sizeof *r);
        e->reg = r;
        e->nreg = n;
    }
    struct loop_reg *r = &e->reg[fd];
    /* in for reading always (what comes while nobody waits is kept); for writing only while
     * a wait asks for it (a writable socket would report at every acknowledgement) */
    uint32_t reg = EPOLLET | EPOLLIN | want;
    if (r->key != key || r->events != reg) {
        struct epoll_event ee = {.events = reg, .data.fd = fd};
        if (!loop_ctl(e, fd, &ee)) {
            r->key = 0;
            return -1;
        }
        if (r->key != key)
            r->pending = 0;
        r->key = key;
        r->events = reg;
    }
    uint32_t got = r->pending & (want | EPOLLERR | EPOLLHUP | EPOLLRDHUP);
    if (got) {
        r->pending = 0;
        return 1;
    }
    return 0;
}

/* What epfd has ready, waiting up to timeout_ms for it (ev->mu held; dropped while it
 * waits): sockets move their fibers to the run queue; the wake-up and completion eventfds
 * and the timer are read (what they announce is in the queues and the heap). */
static void loop_look(engine *e, int timeout_ms)
{
    baton__evloop *ev = e->ev;
    struct epoll_event got[64];
    e->last_poll_us = baton__now_us();
    int n;
    if (timeout_ms != 0) {
        e->asleep = true; /* a wake-up from another thread ends the wait */
        baton__mutex_unlock(&ev->mu);
        n = epoll_wait(e->epfd, got, 64, timeout_ms);
        baton__mutex_lock(&ev->mu);
        e->asleep = false;
    } else {
        n = epoll_wait(e->epfd, got, 64, 0);
    }
    for (int i = 0; i < n; i++) {
        int fd = got[i].data.fd;
        if (fd == e->wfd || fd == ev->efd) {
            drain(fd);
        } else if (fd == e->tfd) {
            drain(fd);
            e->tfd_at = 0; /* expired: armed again by loop_rest if a deadline is left */
        } else {
            bool woke = false;
            for (size_t j = e->nio; j-- > 0 && !woke;)
                if (e->io[j]->io_fd == fd) {
                    baton_op *op = e->io[j];
                    heap_remove(e, op);
                    io_done(e, op, true);
                    woke = true;
                }
            /* nobody waits: an edge-triggered socket keeps what it said for the next wait */
            if (!woke && fd >= 0 && (size_t)fd < e->nreg && e->reg[fd].key != 0)
                e->reg[fd].pending |= got[i].events;
        }
    }
}

/* The loop thread stops driving (ev->mu held): the timer set for the first deadline, and
 * wake-ups from other threads write wfd from now on. */
static void loop_rest(engine *e)
{
    int64_t at = e->nheap > 0 ? e->heap[0]->wake_at : 0;
    /* Moved earlier, or nothing armed: set. Moved later or gone: left as it is; if it
     * fires first, the drive it causes finds nothing due and sets it then. Most deadlines
     * move later (a waiter woken before its bound), and setting costs a system call. */
    if (at > 0 && (e->tfd_at <= 0 || at < e->tfd_at)) {
        struct itimerspec its = {{0, 0}, {(time_t)(at / 1000000), (long)(at % 1000000) * 1000}};
        if (timerfd_settime(e->tfd, TFD_TIMER_ABSTIME, &its, NULL) == 0)
            e->tfd_at = at;
        else /* the deadline still matters: a wake-up now, and the next drive sets it again */
            e->tfd_at = -1;
    }
    e->asleep = true;
    if (e->run_head || e->ev->done_head || e->tfd_at < 0)
        engine_wake(e); /* more to do: epfd stays readable */
}

/* This thread may drive the engine: it is the bound thread, or none is bound yet, and no
 * other thread drives it now (ev->mu held). */
static bool may_drive(const engine *e)
{
    pthread_t self = pthread_self();
    if (e->driving > 0 && !pthread_equal(e->driver, self))
        return false;
    return !e->bound || pthread_equal(e->loop_thread, self);
}

static void drive_begin(engine *e)
{
    if (e->driving++ == 0) {
        e->driver = pthread_self();
        e->asleep = false;
        if (!e->bound) {
            e->bound = true;
            e->loop_thread = e->driver;
        }
    }
#ifdef BATON_TSAN
    e->tsan_main = __tsan_get_current_fiber();
#endif
}

static void drive_end(engine *e)
{
    if (--e->driving == 0)
        loop_rest(e);
}

/* Close, or a handle's close: drives the engine on this thread until busy(ev, arg) is
 * false (ev->mu held). Another thread that drives it meanwhile is waited for. */
static void loop_drive_while(baton__evloop *ev, bool (*busy)(const baton__evloop *, const void *),
                             const void *arg)
{
    engine *e = &ev->eng;
    while (busy(ev, arg)) {
        if (!ev->started || (e->driving > 0 && !pthread_equal(e->driver, pthread_self())) ||
            e->live == 0) {
            /* threads in blocking waits end on their own; another driver is at work */
            baton__cond_wait_until(&ev->idle, &ev->mu, baton__now_us() + 10000);
            continue;
        }
        drive_begin(e);
        run_ready(e);
        if (busy(ev, arg) && !e->run_head) {
            int ms = 10;
            if (e->nheap > 0) {
                int64_t left = (e->heap[0]->wake_at - baton__now_us() + 999) / 1000;
                ms = left < 0 ? 0 : left < ms ? (int)left : ms;
            }
            loop_look(e, ms);
        }
        drive_end(e);
    }
}

baton_op *baton__op_current(void)
{
    return current;
}

bool baton__op_cancelled_locked(const baton_op *op)
{
    return op->cancelled;
}

void baton__ops_cancel_locked(baton__evloop *ev, const void *handle)
{
    for (baton_op *op = ev->all; op; op = op->all_next)
        if (!handle || (op->handle == handle && !op->release)) {
            op->cancelled = true;
            make_ready(ev, op);
        }
}

/* A wait's cancellation as the engine and waits.c see it (ev->mu held for the _locked ones):
 * the client's generation moved, or its operation was cancelled. */
bool baton__wait_cancelled_locked(baton__evloop *ev, const baton__waiting *wt)
{
    return atomic_load(&ev->gen) != wt->gen || (wt->op && baton__op_cancelled_locked(wt->op));
}

void baton__waits_cancel_all_locked(baton__evloop *ev)
{
    atomic_fetch_add(&ev->gen, 1);
    baton__ops_cancel_locked(ev, NULL);
}

int baton__wait_cancelled_error(baton_client *c)
{
    return baton__fail(c, BATON_ECANCELED,
                       "wait cancelled (baton_op_cancel, baton_client_cancel_waits or "
                       "baton_client_close)");
}

int baton__fiber_sleep(baton_client *c, baton__waiting *wt, baton__sub *sub, int64_t until)
{
    baton_op *op = wt->op;
    baton__evloop *ev = c->ev;
    baton__mutex_lock(&ev->mu);
    if (baton__wait_cancelled_locked(ev, wt)) {
        baton__mutex_unlock(&ev->mu);
        return baton__wait_cancelled_error(c);
    }
    if (op->pending_wake) {
        op->pending_wake = false;
        baton__mutex_unlock(&ev->mu);
        return BATON_OK;
    }
    op->woken = false;
    op->state = ST_SLEEPING;
    op->wake_at = until;
    if (until != BATON__NO_DEADLINE && heap_push(&op->ev->eng, op) != BATON_OK) {
        op->state = ST_RUNNING;
        baton__mutex_unlock(&ev->mu);
        return baton__fail(c, BATON_ENOMEM, "out of memory");
    }
    engine_wake(&op->ev->eng); /* the engine's sleep must cover the new timer */
    baton__mutex_unlock(&ev->mu);
    op->waker.fn = on_wake;
    op->waker.arg = op;
    ev->subs->arm(c, sub, &op->waker);
    op->parked = true; /* its stack may be lent meanwhile ("stacks") */
    fiber_yield(op);
    op->parked = false;
    bool fed = ev->subs->disarm(c, sub, &op->waker);
    baton__mutex_lock(&ev->mu);
    heap_remove(&op->ev->eng, op);
    bool woken = op->woken, cancelled = baton__wait_cancelled_locked(ev, wt);
    op->woken = false;
    if (cancelled)
        op->pending_wake = false;
    baton__mutex_unlock(&ev->mu);
    if (cancelled) {
        if (fed)
            ev->subs->pass_on(c, sub); /* it was meant for a waiter that tries */
        return baton__wait_cancelled_error(c);
    }
    return woken ? BATON_OK : BATON_ETIMEDOUT;
}

/* ------------------------------- sockets and connections ----------------------------- */

/* Room for one more fiber waiting on a socket (ev->mu held), and in loop mode the socket
 * armed: 0, or 1 (ready already) or -1 (no room, or the caller polls on its own: only this
 * fiber's engine waits) for the caller to return. */
static int io_room(baton__evloop *ev, int fd, short events, uint64_t key)
{
    engine *e = &ev->eng;
    if (e->nio == e->capio) {
        size_t cap = e->capio ? 2 * e->capio : 16;
        baton_op **io = realloc(e->io, cap * sizeof *io);
        if (!io)
            return -1;
        e->io = io;
        e->capio = cap;
    }
    return ev->mode == BATON_CALLBACKS_LOOP ? loop_arm(e, fd, events, key) : 0;
}

/* op waits on fd from now on (ev->mu held, room made by io_room). */
static void io_add(engine *e, baton_op *op, int fd, short events)
{
    op->io_fd = fd;
    op->io_events = events;
    op->io_ready = false;
    op->ioidx = (uint32_t)e->nio;
    e->io[e->nio++] = op;
    op->state = ST_IO;
}

int baton__fiber_wait_fd(int fd, short events, int64_t deadline_us, uint64_t key)
{
    baton_op *op = current;
    if (!op)
        return -1;
    baton__evloop *ev = op->ev;
    engine *e = &op->ev->eng;
    baton__mutex_lock(&ev->mu);
    int armed = io_room(ev, fd, events, key);
    if (armed != 0) {
        baton__mutex_unlock(&ev->mu);
        return armed; /* ready already (1), or the caller polls (-1) */
    }
    if (!wake_by(e, op, deadline_us)) {
        baton__mutex_unlock(&ev->mu);
        return -1;
    }
    io_add(e, op, fd, events);
    baton__mutex_unlock(&ev->mu);
    fiber_yield(op); /* the engine takes it off its lists before it runs it again */
    if (op->io_ready)
        return 1;
    /* Its timer ran out first. A busy engine may come back to it late, the socket ready
     * by then: a look now decides, as a thread's poll() would have. */
    struct pollfd p = {fd, events, 0};
    return poll(&p, 1, 0) > 0 ? 1 : 0;
}

int baton__fiber_sleep_until(int64_t until_us)
{
    baton_op *op = current;
    if (!op)
        return -1;
    baton__evloop *ev = op->ev;
    baton__mutex_lock(&ev->mu);
    op->wake_at = until_us;
    if (heap_push(&op->ev->eng, op) != BATON_OK) {
        baton__mutex_unlock(&ev->mu);
        return -1;
    }
    op->state = ST_SLEEPING;
    baton__mutex_unlock(&ev->mu);
    fiber_yield(op); /* its timer, or a cancellation */
    baton__mutex_lock(&ev->mu);
    heap_remove(&op->ev->eng, op);
    baton__mutex_unlock(&ev->mu);
    return 0;
}

/* The transport's wait for a reply on a shared connection (hooks.h, park): on the socket
 * (the fiber that watches it for the others) or on nothing but its wake-up and timer. */
static int fiber_park(int fd, short events, int64_t deadline_us, uint64_t key)
{
    baton_op *op = current;
    if (!op)
        return -1;
    baton__evloop *ev = op->ev;
    engine *e = &ev->eng;
    baton__mutex_lock(&ev->mu);
    if (op->kicked) {
        op->kicked = false;
        baton__mutex_unlock(&ev->mu);
        return 1;
    }
    if (fd >= 0) {
        int armed = io_room(ev, fd, events, key);
        if (armed != 0) {
            baton__mutex_unlock(&ev->mu);
            return armed;
        }
    }
    if (!wake_by(e, op, deadline_us)) {
        baton__mutex_unlock(&ev->mu);
        return -1;
    }
    op->in_park = true;
    if (fd >= 0) {
        io_add(e, op, fd, events);
    } else {
        op->state = ST_SLEEPING;
        engine_wake(e); /* the engine's sleep must cover the new timer */
    }
    baton__mutex_unlock(&ev->mu);
    /* Its stack is not lent: a fiber whose frames went out must come back to the same
     * stack, and would wait there for whatever fiber took it to park or end (one that
     * connects, or watches the socket for the others, holds it until its own reply); a
     * reply is a round trip away, and MAX_STACKS of them in flight are a deep pipeline. */
    fiber_yield(op);
    baton__mutex_lock(&ev->mu);
    heap_remove(e, op);
    op->in_park = false;
    bool kicked = op->kicked, ready = fd >= 0 && op->io_ready;
    op->kicked = false;
    baton__mutex_unlock(&ev->mu);
    if (kicked || ready)
        return 1;
    return deadline_us == BATON__NO_DEADLINE || baton__now_us() < deadline_us;
}

/* Any thread: the parked fiber `token` runs again, or its next park returns at once. */
static void fiber_wake(void *token)
{
    baton_op *op = token;
    baton__evloop *ev = op->ev;
    engine *e = &ev->eng;
    baton__mutex_lock(&ev->mu);
    if (!op->kicked) {
        op->kicked = true;
        if (op->in_park && op->state == ST_IO) {
            e->kicks++;
            engine_wake(e);
        } else if (op->in_park) {
            make_ready(ev, op);
        }
    }
    baton__mutex_unlock(&ev->mu);
}

/* On a fiber: to the end of the run queue, behind the fibers ready now. */
static void fiber_yield_turn(void)
{
    baton_op *op = current;
    if (!op)
        return;
    baton__evloop *ev = op->ev;
    baton__mutex_lock(&ev->mu);
    if (!ev->eng.run_head) { /* nobody to let go first */
        baton__mutex_unlock(&ev->mu);
        return;
    }
    op->state = ST_SLEEPING;
    op->queued = true;
    push(&ev->eng.run_head, &ev->eng.run_tail, op);
    baton__mutex_unlock(&ev->mu);
    fiber_yield(op);
}

static void *fiber_self(void)
{
    return current;
}

uint64_t baton__evloop_freed(baton_client *c)
{
    return c && c->ev ? atomic_load(&c->ev->freed) : 0;
}

bool baton__on_fiber(void)
{
    return current != NULL;
}

/* Takes a fiber off the pool waiters (ev->mu held). */
static void pool_unlist(baton__evloop *ev, baton_op *op)
{
    BATON__UNLINK_TAILED(op, pool_prev, pool_next, ev->pool_head, ev->pool_tail);
    op->pool_prev = op->pool_next = NULL;
    op->pool_wait = false;
    atomic_fetch_sub(&ev->npool_waiters, 1);
}

int baton__fiber_wait_pool(baton_client *c, const void *pool, uint64_t seen, int64_t deadline_us)
{
    baton_op *op = current;
    baton__evloop *ev = c->ev;
    baton__mutex_lock(&ev->mu);
    /* counted before the look at `freed`: a connection given back after the look sees a
     * waiter, and wakes one under ev->mu (conn_freed) */
    atomic_fetch_add(&ev->npool_waiters, 1);
    if (atomic_load(&ev->freed) != seen) {
        atomic_fetch_sub(&ev->npool_waiters, 1);
        baton__mutex_unlock(&ev->mu);
        return 1;
    }
    if (deadline_us != BATON__NO_DEADLINE) {
        op->wake_at = deadline_us;
        if (heap_push(&op->ev->eng, op) != BATON_OK) {
            atomic_fetch_sub(&ev->npool_waiters, 1);
            baton__mutex_unlock(&ev->mu);
            return baton__fail(c, BATON_ENOMEM, "out of memory"), 0;
        }
    }
    op->pool_wait = true;
    op->pool_for = pool;
    BATON__APPEND(op, pool_prev, pool_next, ev->pool_head, ev->pool_tail);
    op->state = ST_SLEEPING;
    baton__mutex_unlock(&ev->mu);
    fiber_yield(op);
    baton__mutex_lock(&ev->mu);
    heap_remove(&op->ev->eng, op);
    if (op->pool_wait) /* its timer, or a cancellation: still listed */
        pool_unlist(ev, op);
    baton__mutex_unlock(&ev->mu);
    return deadline_us == BATON__NO_DEADLINE || baton__now_us() < deadline_us;
}

void baton__evloop_conn_freed(baton_client *c, const void *pool, bool all)
{
    baton__evloop *ev = c ? c->ev : NULL;
    if (!ev)
        return;
    atomic_fetch_add(&ev->freed, 1);
    if (atomic_load(&ev->npool_waiters) == 0)
        return;
    /* One connection, one waiter (waking them all would make every waiter run for each
     * connection given back); a waiter that finds it taken waits again. */
    baton__mutex_lock(&ev->mu);
    for (baton_op *op = ev->pool_head, *next; op; op = next) {
        next = op->pool_next;
        if (op->pool_for != pool)
            continue;
        pool_unlist(ev, op);
        make_ready(ev, op);
        if (!all)
            break;
    }
    baton__mutex_unlock(&ev->mu);
}

/* How the transport waits (src/net/hooks.h): through the engine, on a fiber. */
static const baton__wait_hooks transport_waits = {
    baton__on_fiber,
    baton__fiber_wait_fd,
    baton__fiber_sleep_until,
    baton__evloop_freed,
    baton__fiber_wait_pool,
    baton__evloop_conn_freed,
    fiber_self,
    fiber_park,
    fiber_wake,
    fiber_yield_turn,
};

/* ------------------------------- open and close --------------------------------------- */

baton__evloop *baton__evloop_new(baton_client *c, const baton__sub_methods *subs)
{
    baton__net_install(&transport_waits); /* the same table for every client */
    baton__evloop *ev = calloc(1, sizeof *ev);
    if (!ev)
        return NULL;
    ev->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (ev->efd < 0) {
        free(ev);
        return NULL;
    }
    ev->eng.ev = ev;
    ev->eng.epfd = ev->eng.tfd = -1;
    ev->eng.wfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (ev->eng.wfd < 0) {
        close(ev->efd);
        free(ev);
        return NULL;
    }
    ev->c = c;
    ev->subs = subs;
    baton__mutex_init(&ev->mu);
    baton__cond_init(&ev->idle);
    return ev;
}

/* Whether an operation on handle is still live (ev->mu held). */
static bool handle_busy(const baton__evloop *ev, const void *handle)
{
    for (const baton_op *op = ev->all; op; op = op->all_next)
        if (op->handle == handle)
            return true;
    return false;
}

void baton__evloop_drop_handle(baton_client *c, void *handle)
{
    if (!c || !c->ev || baton__client_forked(c))
        return;
    baton__evloop *ev = c->ev;
    baton__mutex_lock(&ev->mu);
    for (baton_op *op = ev->all; op; op = op->all_next)
        if (op->handle == handle) {
            op->cancelled = true; /* a wait stops; a release still runs (fiber_main) */
            make_ready(ev, op);
        }
    /* On an engine (a callback run by baton's thread) the operations may be this thread's
     * own: it cannot wait for them, and the program was told not to close there. Without
     * an engine thread (BATON_CALLBACKS_LOOP), the closing thread runs them to their end. */
    if (ev->mode == BATON_CALLBACKS_LOOP)
        loop_drive_while(ev, handle_busy, handle);
    while (!on_engine && handle_busy(ev, handle))
        baton__cond_wait_until(&ev->idle, &ev->mu, BATON__NO_DEADLINE);
    baton__mutex_unlock(&ev->mu);
}

/* Frees what the engine kept (its thread has ended, or never ran). */
static void free_engine(engine *e)
{
    for (int i = 0; i < e->nslots; i++) {
#ifdef BATON_VALGRIND
        VALGRIND_STACK_DEREGISTER(e->slots[i].vg);
#endif
        munmap(e->slots[i].map, STACK_SIZE + e->page);
    }
    free(e->slots);
    free(e->heap);
    free(e->io);
    free(e->pfd);
    free(e->reg);
    close(e->wfd);
    if (e->epfd >= 0)
        close(e->epfd);
    if (e->tfd >= 0)
        close(e->tfd);
}

/* Whether waits or operations are still live (ev->mu held). */
static bool still_live(const baton__evloop *ev, const void *unused)
{
    (void)unused;
    return ev->waits > 0 || ev->live > 0;
}

void baton__evloop_shut(baton__evloop *ev, bool forked)
{
    if (!ev || ev->shut)
        return;
    ev->shut = true;
    if (forked) /* the child has no engine thread and no waiters */
        return;
    baton__mutex_lock(&ev->mu);
    ev->closing = true;
    baton__waits_cancel_all_locked(ev);
    baton__mutex_unlock(&ev->mu);
    ev->subs->wake_all(ev->c);
    baton__mutex_lock(&ev->mu);
    if (ev->mode == BATON_CALLBACKS_LOOP)
        loop_drive_while(ev, still_live, NULL);
    while (ev->waits > 0 || ev->live > 0)
        baton__cond_wait_until(&ev->idle, &ev->mu, BATON__NO_DEADLINE);
    ev->stop = true;
    engine_wake(&ev->eng);
    bool joined = ev->started && ev->mode != BATON_CALLBACKS_LOOP; /* LOOP: no thread */
    baton__mutex_unlock(&ev->mu);
    if (joined)
        pthread_join(ev->eng.thread, NULL);
    baton_op *op;
    while ((op = pop(&ev->done_head, &ev->done_tail)))
        deliver(ev, op);
}

void baton__evloop_free(baton__evloop *ev, bool forked)
{
    if (!ev)
        return;
    baton__evloop_shut(ev, forked);
    /* In a fork child the operations' memory is the parent's copy: only the descriptors
     * and the memory go. */
    free_engine(&ev->eng);
    close(ev->efd);
    if (!forked) {
        baton__mutex_destroy(&ev->mu);
        baton__cond_destroy(&ev->idle);
    }
    free(ev);
}

/* ------------------------------- public: operations ----------------------------------- */

/* BATON_CALLBACKS_LOOP: the engine's epoll descriptor and timer, instead of its thread
 * (ev->mu held). */
static int loop_start(baton__evloop *ev)
{
    engine *e = &ev->eng;
    e->epfd = epoll_create1(EPOLL_CLOEXEC);
    e->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    bool ok = e->epfd >= 0 && e->tfd >= 0;
    int fds[3] = {e->wfd, ev->efd, e->tfd};
    for (int i = 0; ok && i < 3; i++) {
        struct epoll_event ee = {.events = EPOLLIN, .data.fd = fds[i]};
        ok = epoll_ctl(e->epfd, EPOLL_CTL_ADD, fds[i], &ee) == 0;
    }
    if (!ok) {
        int err = errno;
        if (e->epfd >= 0)
            close(e->epfd);
        if (e->tfd >= 0)
            close(e->tfd);
        e->epfd = e->tfd = -1;
        return baton__fail(ev->c, BATON_ENOMEM, "the loop's epoll descriptor: %s", strerror(err));
    }
    e->asleep = true; /* not driven: a wake-up writes wfd */
    ev->started = true;
    return BATON_OK;
}

/* Starts the engine thread if it does not run yet (ev->mu held). */
static int engine_start(baton__evloop *ev)
{
    if (ev->started)
        return BATON_OK;
    if (ev->mode == BATON_CALLBACKS_LOOP)
        return loop_start(ev);
    int rc = pthread_create(&ev->eng.thread, NULL, engine_main, &ev->eng);
    if (rc != 0)
        return baton__fail(ev->c, BATON_ENOMEM, "pthread_create: %s", strerror(rc));
    ev->started = true;
    return BATON_OK;
}

int baton__op_start(baton_client *c, void *handle, baton__op_run_fn run, bool is_release,
                    const baton__op_args *args, baton_async_fn fn, void *arg, baton_op **out)
{
    int rc;
    if (out)
        *out = NULL;
    if (!fn)
        return baton__fail(c, BATON_EINVAL, "fn is NULL");
    if (baton__check_wait(args->wait_ms) != BATON_OK)
        return baton__fail(c, BATON_EINVAL, "wait_ms %lld: use BATON_WAIT_FOREVER or 0..%lld ms",
                           (long long)args->wait_ms, (long long)BATON_MAX_DURATION_MS);
    if (args->owner && baton__owner_client(args->owner) != c)
        return baton__fail(c, BATON_EINVAL, "the owner belongs to another client");
    baton_op *op = malloc(sizeof *op);
    if (!op)
        return baton__fail(c, BATON_ENOMEM, "out of memory");
    *op = (baton_op){
        .run = run, .release = is_release, .handle = handle, .args = *args, .fn = fn, .arg = arg};
    baton__evloop *ev = c->ev;
    op->ev = ev;
    op->owner_id = args->owner ? baton__owner_of(args->owner) : baton__owner_id();
    op->state = ST_NEW;
    op->hidx = NO_HEAP;
    op->slot = -1;
    baton__mutex_lock(&ev->mu);
    if (ev->closing) {
        baton__mutex_unlock(&ev->mu);
        free(op);
        return baton__fail(c, BATON_ECANCELED, "the client is closing");
    }
    rc = engine_start(ev);
    if (rc != BATON_OK) {
        baton__mutex_unlock(&ev->mu);
        free(op);
        return rc;
    }
    ev->live++;
    op->ev->eng.live++;
    op->all_next = ev->all;
    if (ev->all)
        ev->all->all_prev = op;
    ev->all = op;
    engine *e = &op->ev->eng;
    if (ev->mode == BATON_CALLBACKS_LOOP && e->bound && e->driving == 0 && !current &&
        may_drive(e)) {
        /* On the loop's thread, outside baton_client_process, it begins now (and only it):
         * its request is on its way when this returns; its callback still runs in process.
         * While process drives, its loop runs it; from another thread, a wake-up. */
        drive_begin(e);
        run_one(e, op);
        drive_end(e);
        baton__mutex_unlock(&ev->mu);
        if (out)
            *out = op;
        return BATON_OK;
    }
    op->queued = true;
    push(&op->ev->eng.run_head, &op->ev->eng.run_tail, op);
    if (ev->mode == BATON_CALLBACKS_LOOP || processing != ev) {
        engine_wake(e);
    } else if (!deferred_since) {
        deferred_since = baton__now_us() | 1;
    }
    baton__mutex_unlock(&ev->mu);
    if (out)
        *out = op;
    return BATON_OK;
}

int baton__op_spawn(baton_client *c, void *handle, baton__op_run_fn run, const baton__op_args *args)
{
    return baton__op_start(c, handle, run, false, args, no_completion, NULL, NULL);
}

/* What every start does first: the handle's client usable from here. */
static int enter(baton_client *c)
{
    if (!c)
        return BATON_EINVAL;
    return baton__client_enter(c);
}

int baton_op_cancel(baton_op *op)
{
    if (!op)
        return BATON_EINVAL;
    baton__evloop *ev = op->ev;
    baton__mutex_lock(&ev->mu);
    if (op->state != ST_DONE && !op->release) { /* a release is not a wait */
        op->cancelled = true;
        make_ready(ev, op);
    }
    baton__mutex_unlock(&ev->mu);
    return BATON_OK;
}

/* ------------------------------- public: the loop's side ------------------------------ */

int baton_client_async_fd(baton_client *c, int *fd)
{
    int rc = enter(c);
    if (rc != BATON_OK)
        return rc;
    if (!fd)
        return baton__fail(c, BATON_EINVAL, "fd is NULL");
    /* A program that asks for the descriptor is about to start operations: the engine
     * starts now, in its set-up, rather than inside its first start. */
    baton__mutex_lock(&c->ev->mu);
    rc = c->ev->closing ? BATON_OK : engine_start(c->ev);
    int got = c->ev->mode == BATON_CALLBACKS_LOOP ? c->ev->eng.epfd : c->ev->efd;
    baton__mutex_unlock(&c->ev->mu);
    if (rc != BATON_OK)
        return rc;
    if (got < 0)
        return baton__fail(c, BATON_ECANCELED, "the client is closing");
    *fd = got;
    return BATON_OK;
}

/* Wakes ev's engine for the operations this thread's callbacks started, if they did. */
static void deferred_wake(baton__evloop *ev)
{
    if (!deferred_since)
        return;
    deferred_since = 0;
    baton__mutex_lock(&ev->mu);
    engine_wake(&ev->eng);
    baton__mutex_unlock(&ev->mu);
}

/* BATON_CALLBACKS_LOOP: runs what ev's engine has ready, if this thread is its loop thread
 * (bound, unless process() runs here: then it binds); whether operations are live. */
static bool drive_some(baton__evloop *ev, bool binds)
{
    bool live = false;
    baton__mutex_lock(&ev->mu);
    engine *e = &ev->eng;
    if (ev->started && !current && may_drive(e) &&
        (binds || (e->bound && pthread_equal(e->loop_thread, pthread_self())))) {
        drive_begin(e);
        loop_look(e, 0);
        run_ready(e);
        live = e->live > 0;
        drive_end(e);
    }
    baton__mutex_unlock(&ev->mu);
    return live;
}

bool baton__ops_start_deferred(baton_client *c)
{
    baton__evloop *ev = processing;
    if (ev && ev->mode != BATON_CALLBACKS_LOOP)
        deferred_wake(ev);
    /* The loop thread blocks (in a callback, or on its own): its loop client's operations
     * (a release it waits for) advance meanwhile, driven from here between slices of its
     * sleep: the client whose callbacks run, and the client it waits on. */
    bool live = false;
    if (ev && ev->mode == BATON_CALLBACKS_LOOP)
        live = drive_some(ev, true);
    if (c && c->ev && c->ev != ev && c->ev->mode == BATON_CALLBACKS_LOOP)
        live = drive_some(c->ev, false) || live;
    return live;
}

/* Takes the completed operations and runs their callbacks (ev->mu held; dropped while they
 * run). Returns how many ran. */
static int deliver_done(baton__evloop *ev)
{
    baton_op *list = ev->done_head;
    ev->done_head = ev->done_tail = NULL;
    baton__mutex_unlock(&ev->mu);
    int ran = 0;
    while (list) {
        baton_op *op = list;
        list = op->next;
        deliver(ev, op);
        ran++;
    }
    baton__mutex_lock(&ev->mu);
    return ran;
}

/* BATON_CALLBACKS_LOOP: drives the engine on this thread (the bound one) until nothing is
 * ready: what epfd has, the fibers, the callbacks, the fibers they started. A budget of
 * rounds keeps the program's other events from waiting behind a stream of completions. */
static int loop_process(baton_client *c, baton__evloop *ev)
{
    engine *e = &ev->eng;
    baton__mutex_lock(&ev->mu);
    if (!ev->started) {
        baton__mutex_unlock(&ev->mu);
        return 0;
    }
    if (!may_drive(e)) {
        baton__mutex_unlock(&ev->mu);
        return baton__fail(c, BATON_EINVAL,
                           "BATON_CALLBACKS_LOOP: call baton_client_process on one thread only");
    }
    baton__evloop *outer = processing;
    processing = ev;
    drive_begin(e);
    loop_look(e, 0);
    int ran = 0;
    for (int round = 0; round < 64; round++) {
        run_ready(e);
        if (!ev->done_head)
            break;
        ran += deliver_done(ev);
    }
    drive_end(e);
    processing = outer;
    baton__mutex_unlock(&ev->mu);
    return ran;
}

int baton_client_process(baton_client *c)
{
    int rc = enter(c);
    if (rc != BATON_OK)
        return rc;
    baton__evloop *ev = c->ev;
    if (ev->mode == BATON_CALLBACKS_LOOP)
        return loop_process(c, ev);
    drain(ev->efd);
    baton__mutex_lock(&ev->mu);
    baton_op *list = ev->done_head;
    ev->done_head = ev->done_tail = NULL;
    baton__mutex_unlock(&ev->mu);
    int ran = 0;
    /* A callback may process another client's (or its own) completions: what the outer
     * call deferred is woken first, since the deferral belongs to one client at a time. */
    baton__evloop *outer = processing;
    if (outer)
        deferred_wake(outer);
    processing = ev;
    while (list) {
        baton_op *op = list;
        list = op->next;
        deliver(ev, op);
        ran++;
        if (deferred_since && baton__now_us() - deferred_since >= WAKE_DEFER_US)
            deferred_wake(ev);
    }
    deferred_wake(ev);
    processing = outer;
    return ran;
}

int baton_client_set_callbacks(baton_client *c, int mode)
{
    int rc = enter(c);
    if (rc != BATON_OK)
        return rc;
    if (mode != BATON_CALLBACKS_PROCESS && mode != BATON_CALLBACKS_BATON &&
        mode != BATON_CALLBACKS_LOOP)
        return baton__fail(c, BATON_EINVAL, "mode %d: BATON_CALLBACKS_PROCESS, _BATON or _LOOP",
                           mode);
    baton__mutex_lock(&c->ev->mu);
    /* Whether the engine has a thread is decided when it starts, once. */
    bool fixed =
        c->ev->started && (mode == BATON_CALLBACKS_LOOP) != (c->ev->mode == BATON_CALLBACKS_LOOP);
    if (!fixed)
        c->ev->mode = mode;
    baton__mutex_unlock(&c->ev->mu);
    if (fixed)
        return baton__fail(c, BATON_EINVAL,
                           "BATON_CALLBACKS_LOOP is chosen before the first operation or "
                           "baton_client_async_fd, and kept");
    return BATON_OK;
}
