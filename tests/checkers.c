/*
 * The fault matrix's checkers (see checkers.h). The interval log and the fenced store are
 * plain structures in an anonymous MAP_SHARED mapping, updated with C11 atomics only, so
 * that a process killed in the middle of an update (kill -9 is a scenario) leaves nothing
 * locked behind.
 */
#define _GNU_SOURCE
#include "checkers.h"

#include "helper.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

int64_t th_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void *shared_alloc(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(p != MAP_FAILED, "mmap of %zu bytes failed", len);
    memset(p, 0, len);
    return p;
}

/* ------------------------------------------------ the non-atomic counter ------------ */

long long th_counter_incr(redisContext *r, const char *key, int max_pause_us)
{
    redisReply *rep = redisCommand(r, "GET %s", key);
    if (!rep || rep->type == REDIS_REPLY_ERROR) {
        if (rep)
            freeReplyObject(rep);
        return -1;
    }
    long long v = rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : 0;
    freeReplyObject(rep);
    if (max_pause_us > 0) /* the window in which a second holder loses an increment */
        usleep((useconds_t)(rand() % (max_pause_us + 1)));
    rep = redisCommand(r, "SET %s %lld", key, v + 1);
    bool ok = rep && rep->type == REDIS_REPLY_STATUS;
    if (rep)
        freeReplyObject(rep);
    return ok ? v + 1 : -1;
}

long long th_counter_get(redisContext *r, const char *key)
{
    redisReply *rep = redisCommand(r, "GET %s", key);
    cr_assert(rep != NULL && rep->type != REDIS_REPLY_ERROR, "GET %s failed", key);
    long long v = rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : 0;
    freeReplyObject(rep);
    return v;
}

/* ------------------------------------------------ the interval log ------------------ */

typedef struct interval {
    _Atomic int64_t start_ns, end_ns; /* end 0: still open */
    int64_t token;
    int who;
} interval;

struct th_ilog {
    size_t capacity, map_len;
    atomic_long used;
    interval slots[];
};

th_ilog *th_ilog_new(size_t capacity)
{
    size_t len = sizeof(th_ilog) + capacity * sizeof(interval);
    th_ilog *g = shared_alloc(len);
    g->capacity = capacity;
    g->map_len = len;
    return g;
}

void th_ilog_free(th_ilog *g)
{
    if (g)
        munmap(g, g->map_len);
}

long th_ilog_begin(th_ilog *g, int who, int64_t token)
{
    long i = atomic_fetch_add(&g->used, 1);
    if ((size_t)i >= g->capacity)
        return -1;
    g->slots[i].who = who;
    g->slots[i].token = token;
    atomic_store(&g->slots[i].start_ns, th_mono_ns());
    return i;
}

void th_ilog_end(th_ilog *g, long slot)
{
    if (slot >= 0 && (size_t)slot < g->capacity)
        atomic_store(&g->slots[slot].end_ns, th_mono_ns());
}

void th_ilog_end_open(th_ilog *g, int who, int64_t at_ns)
{
    size_t n = th_ilog_count(g);
    for (size_t i = 0; i < n; i++)
        if (g->slots[i].who == who && atomic_load(&g->slots[i].start_ns) &&
            !atomic_load(&g->slots[i].end_ns))
            atomic_store(&g->slots[i].end_ns, at_ns);
}

size_t th_ilog_count(const th_ilog *g)
{
    long n = atomic_load(&((th_ilog *)g)->used);
    return (size_t)n < g->capacity ? (size_t)n : g->capacity;
}

typedef struct edge {
    int64_t ns;
    int delta; /* +1 opens, -1 closes */
} edge;

static int by_time(const void *a, const void *b)
{
    const edge *x = a, *y = b;
    if (x->ns != y->ns)
        return (x->ns > y->ns) - (x->ns < y->ns);
    return x->delta - y->delta; /* at one instant, a close before an open */
}

/* Sweeps the intervals in time order; returns the deepest overlap and, in *over, how many
 * intervals opened with `limit` or more already open. */
static int sweep(const th_ilog *g, int limit, int *over)
{
    size_t n = th_ilog_count(g);
    edge *e = calloc(2 * n + 1, sizeof *e);
    cr_assert(e != NULL);
    size_t k = 0;
    int64_t now = th_mono_ns();
    for (size_t i = 0; i < n; i++) {
        int64_t s = atomic_load(&((interval *)&g->slots[i])->start_ns);
        int64_t t = atomic_load(&((interval *)&g->slots[i])->end_ns);
        if (!s)
            continue;
        e[k++] = (edge){s, +1};
        e[k++] = (edge){t ? t : now, -1};
    }
    qsort(e, k, sizeof *e, by_time);
    int depth = 0, deepest = 0;
    *over = 0;
    for (size_t i = 0; i < k; i++) {
        if (e[i].delta > 0 && depth >= limit)
            (*over)++;
        depth += e[i].delta;
        if (depth > deepest)
            deepest = depth;
    }
    free(e);
    return deepest;
}

int th_ilog_max_depth(const th_ilog *g)
{
    int over;
    return sweep(g, 1, &over);
}

int th_ilog_violations(const th_ilog *g, int limit)
{
    int over = 0;
    sweep(g, limit, &over);
    return over;
}

int64_t th_ilog_next_start(const th_ilog *g, int64_t from_ns, int who)
{
    size_t n = th_ilog_count(g);
    int64_t best = -1;
    for (size_t i = 0; i < n; i++) {
        int64_t s = atomic_load(&((interval *)&g->slots[i])->start_ns);
        if (s && s >= from_ns && g->slots[i].who != who && (best < 0 || s < best))
            best = s;
    }
    return best;
}

/* ------------------------------------------------ the fenced store ------------------ */

struct th_fenced {
    _Atomic int64_t top;
    atomic_long accepted, refused;
};

th_fenced *th_fenced_new(void)
{
    return shared_alloc(sizeof(th_fenced));
}

void th_fenced_free(th_fenced *f)
{
    if (f)
        munmap(f, sizeof *f);
}

bool th_fenced_write(th_fenced *f, int64_t token)
{
    int64_t top = atomic_load(&f->top);
    for (;;) {
        if (token < top) {
            atomic_fetch_add(&f->refused, 1);
            return false;
        }
        if (atomic_compare_exchange_weak(&f->top, &top, token)) {
            atomic_fetch_add(&f->accepted, 1);
            return true;
        }
    }
}

long th_fenced_accepted(const th_fenced *f)
{
    return atomic_load(&((th_fenced *)f)->accepted);
}

long th_fenced_refused(const th_fenced *f)
{
    return atomic_load(&((th_fenced *)f)->refused);
}

int64_t th_fenced_top(const th_fenced *f)
{
    return atomic_load(&((th_fenced *)f)->top);
}

/* ------------------------------------------------ the lost signal ------------------ */

void th_lost_probe_fn(baton_lock *l, void *arg)
{
    (void)l;
    th_lost_probe *p = arg;
    atomic_store(&p->at_ms, th_ms());
    atomic_fetch_add(&p->calls, 1);
}
