/*
 * The multi-lock and its quorum mode (Redlock). A multi-lock is a baton_lock whose members
 * are other baton_locks (plain or fair, on one client or on several clients talking to
 * different servers); it drives them only through the public baton_lock_* verbs, never
 * through their internals, and keeps no hold bookkeeping of the base (its handle's client
 * is NULL when the members span clients).
 *
 * All or nothing. The members are sorted once, at open, into one canonical order: by name,
 * then by server endpoint (path or host, port, database). An acquire walks them in that
 * order, each member try_acquire'd with what is left of the caller's wait, so the wait
 * inside a member is the member's own event-driven wait (pub/sub, bounded by the holder's
 * lease) and the budget is shared by the whole group. Every contender walks the same order,
 * so two groups that share members can never wait on each other in a cycle: no deadlock,
 * and no rollback-and-retry livelock. When a member cannot be taken (timed out, error,
 * server unreachable) every member taken in this attempt is released before the call
 * returns, so no partial hold is left behind.
 *
 * With an explicit lease every member is taken with that lease. The group is valid from the
 * moment the last member is taken until the first member expires, so while gathering, the
 * wait on a later member is also bounded by what is left of the first member's lease; if it
 * runs out, the attempt is rolled back and, after a short random back-off (a bounded
 * condition-variable wait), retried within the caller's wait.
 *
 * Quorum mode (Redlock). Each member gets max(wait / n, 1) ms of the wait (a fixed slice
 * when the wait is unbounded, zero for one attempt); once a majority is taken, the others
 * get one attempt each. The group is taken when at least n / 2 + 1 members are and the
 * validity left (lease - elapsed - clock drift) is positive; otherwise every member taken
 * is released and, within the wait, the attempt is retried after a random back-off. A
 * member that fails with an error (BATON_ECONN: its server is down) simply counts as not
 * taken; when errors alone leave no majority, the call returns the first such error. The
 * members each hold taken are remembered per handle, so a release releases exactly those.
 */
#define _GNU_SOURCE
#include "../core/prim.h"
#include "../lockbase/lockbase.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Redlock, unbounded wait: each member's slice of one attempt (Redisson's per-lock base). */
#define REDLOCK_SLICE_MS 1500
/* Back-off after a rolled-back attempt: uniform in [BACKOFF_MIN_MS, BACKOFF_MAX_MS]. */
#define BACKOFF_MIN_MS 5
#define BACKOFF_MAX_MS 50
#define DETAIL_LEN 512

typedef struct multi {
    bool quorum;        /* Redlock mode */
    size_t n;           /* members */
    size_t need;        /* members that make the group taken: n, or n / 2 + 1 */
    baton_lock **m;     /* the members, in canonical order (borrowed, unless owned) */
    bool owned;         /* opened by baton_multilock_open_names: closed with the group */
    pthread_mutex_t mu; /* guards the hold records; the back-off waits on it */
    pthread_cond_t cv;  /* never signalled: the back-off is a bounded wait on it */
    /* Redlock: the holds of the holding thread, outermost first, each n flags saying which
     * members that hold took (a hold may take any majority). */
    uint64_t holder; /* thread id, 0 = none */
    unsigned char **holds;
    size_t nholds, capholds;
} multi;

static const baton__lock_ops multi_ops, redlock_ops;

/* ------------------------------- helpers ---------------------------------------------- */

/* What is left of the caller's wait, in ms: BATON_WAIT_FOREVER, or 0.. */
static int64_t budget_ms(int64_t wait_ms, int64_t deadline)
{
    if (wait_ms == BATON_WAIT_FOREVER)
        return BATON_WAIT_FOREVER;
    int64_t left = deadline - baton__now_us();
    return left <= 0 ? 0 : left / 1000;
}

static int64_t min_budget(int64_t a, int64_t b)
{
    if (a == BATON_WAIT_FOREVER)
        return b;
    if (b == BATON_WAIT_FOREVER)
        return a;
    return a < b ? a : b;
}

/* Records a failure detail on the client of the member concerned (the one whose
 * baton_client_errmsg the caller will read) and on the group's client, if it has one. The
 * rollback's own calls clear the member's detail, hence the copy taken before them. */
static int report(baton_lock *l, baton_lock *member, int rc, const char *detail)
{
    multi *g = l->impl;
    /* a member whose client was closed has none: the first member that has one */
    baton_client *c = member ? member->client : NULL;
    for (size_t i = 0; !c && i < g->n; i++)
        c = g->m[i]->client;
    baton__fail(c, rc, "%s", detail);
    if (l->client && l->client != c)
        baton__fail(l->client, rc, "%s", detail);
    return rc;
}

static void keep_detail(char *detail, baton_lock *member, int rc)
{
    if (!member->client) { /* its client was closed (BATON_ECLOSED): name and client gone */
        snprintf(detail, DETAIL_LEN, "multi-lock member: %s", baton_strerror(rc));
        return;
    }
    const char *msg = baton_client_errmsg(member->client);
    snprintf(detail, DETAIL_LEN, "multi-lock member %s: %s", member->name,
             *msg ? msg : baton_strerror(rc));
}

/* Sleeps a small random time (never past the deadline), so two contenders that rolled
 * back at once do not collide again in step. */
static void backoff(multi *g, int64_t deadline, uint64_t *seed)
{
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    int64_t ms = BACKOFF_MIN_MS + (int64_t)(*seed % (BACKOFF_MAX_MS - BACKOFF_MIN_MS + 1));
    int64_t until = baton__now_us() + ms * 1000;
    if (until > deadline)
        until = deadline;
    if (baton__fiber_sleep_until(until) == 0) /* an operation's fiber: the engine runs others */
        return;
    baton__mutex_lock(&g->mu);
    while (baton__cond_wait_until(&g->cv, &g->mu, until) == 0)
        ; /* nobody signals: a wake-up before the deadline is spurious */
    baton__mutex_unlock(&g->mu);
}

static uint64_t seed_for_thread(void)
{
    uint64_t s = (uint64_t)baton__now_us() ^ (baton__thread_id() * 0x9E3779B97F4A7C15ull);
    return s ? s : 1;
}

/* Releases the members flagged in took (all of the first `upto` when took is NULL), last
 * first. Errors are ignored: the release cancels a member's watchdog before it is sent, so
 * a member whose server cannot be reached expires after its lease. */
static void rollback(multi *g, const unsigned char *took, size_t upto)
{
    for (size_t i = upto; i-- > 0;)
        if (!took || took[i])
            baton_lock_release(g->m[i]);
}

/* ------------------------------- all or nothing --------------------------------------- */

/* Before anything is taken: each member after the first can be read as a lock (its key is
 * absent or a hash: HGET, through baton_lock_hold_count). A member's own acquire refuses a
 * key of another type before it writes, but the members before it would already have been
 * taken, their fencing counters advanced and their releases' latches written: a wrong type
 * found here writes nothing. */
static int members_readable(baton_lock *l, multi *g, char *detail)
{
    for (size_t i = 1; i < g->n; i++) {
        int64_t count;
        int rc = baton_lock_hold_count(g->m[i], &count);
        if (rc != BATON_OK && rc != BATON_ECONN) {
            keep_detail(detail, g->m[i], rc);
            return report(l, g->m[i], rc, detail);
        }
    }
    return BATON_OK;
}

static int multi_acquire(baton_lock *l, int64_t wait_ms, int64_t lease_ms)
{
    multi *g = l->impl;
    int64_t deadline = baton__deadline_after_ms(wait_ms);
    uint64_t seed = seed_for_thread();
    char detail[DETAIL_LEN];
    int checked = members_readable(l, g, detail);
    if (checked != BATON_OK)
        return checked;
    for (;;) {
        baton__stat_inc(l->client, BATON__ST_ATTEMPTS + BATON_KIND_MULTILOCK);
        size_t taken = 0;
        int64_t first_us = 0; /* when the first member was taken (its lease started) */
        bool capped = false;  /* the failing wait was cut short by the first lease */
        baton_lock *failed = NULL;
        int rc = BATON_OK;
        for (; taken < g->n; taken++) {
            baton_lock *m = g->m[taken];
            int64_t budget = budget_ms(wait_ms, deadline);
            capped = false;
            if (lease_ms != BATON_LEASE_WATCHDOG && taken > 0) {
                int64_t valid = lease_ms - (baton__now_us() - first_us) / 1000;
                if (valid <= 0) {
                    rc = BATON_ETIMEDOUT;
                    capped = true;
                    snprintf(detail, DETAIL_LEN,
                             "multi-lock: the first member's lease (%lld ms) ran out before "
                             "the last was taken",
                             (long long)lease_ms);
                    break;
                }
                if (budget == BATON_WAIT_FOREVER || budget > valid) {
                    budget = valid;
                    capped = true;
                }
            }
            rc = baton_lock_try_acquire(m, budget, lease_ms);
            if (rc != BATON_OK) {
                failed = m;
                keep_detail(detail, m, rc);
                break;
            }
            if (taken == 0)
                first_us = baton__now_us();
        }
        if (rc == BATON_OK) {
            if (lease_ms == BATON_LEASE_WATCHDOG || g->n == 1 ||
                baton__now_us() - first_us < lease_ms * 1000)
                return BATON_OK;
            rc = BATON_ETIMEDOUT; /* every member taken, but the first has expired */
            capped = true;
            snprintf(detail, DETAIL_LEN,
                     "multi-lock: the first member's lease (%lld ms) ran out before the last "
                     "was taken",
                     (long long)lease_ms);
        }
        rollback(g, NULL, taken);
        if (rc != BATON_ETIMEDOUT)
            return report(l, failed, rc, detail);
        if (!capped || wait_ms == 0 || baton__now_us() >= deadline) {
            if (capped || !failed)
                return report(l, failed, rc, detail);
            char why[DETAIL_LEN + 160];
            snprintf(why, sizeof why, "multi-lock: not every member taken within %lld ms (%s)",
                     (long long)wait_ms, detail);
            return report(l, failed, rc, why);
        }
        backoff(g, deadline, &seed);
    }
}

/* Releases every member, last first, and reports the first error after trying them all. */
static int multi_release(baton_lock *l)
{
    multi *g = l->impl;
    int first = BATON_OK;
    baton_lock *failed = NULL;
    char detail[DETAIL_LEN];
    for (size_t i = g->n; i-- > 0;) {
        int rc = baton_lock_release(g->m[i]);
        if (rc != BATON_OK && first == BATON_OK) {
            first = rc;
            failed = g->m[i];
            keep_detail(detail, failed, rc);
        }
    }
    return first == BATON_OK ? BATON_OK : report(l, failed, first, detail);
}

/* ------------------------------- quorum (Redlock) ------------------------------------- */

static int remember_hold(multi *g, unsigned char *took)
{
    uint64_t tid = baton__owner_id();
    baton__mutex_lock(&g->mu);
    if (g->holder != tid) {
        /* Another thread's records can only be stale (its hold lapsed, or the group was
         * force-released): a majority is held by one owner at a time. */
        for (size_t i = 0; i < g->nholds; i++)
            free(g->holds[i]);
        g->nholds = 0;
        g->holder = tid;
    }
    if (g->nholds == g->capholds) {
        size_t cap = g->capholds ? 2 * g->capholds : 4;
        unsigned char **h = realloc(g->holds, cap * sizeof *h);
        if (!h) {
            baton__mutex_unlock(&g->mu);
            return BATON_ENOMEM;
        }
        g->holds = h;
        g->capholds = cap;
    }
    g->holds[g->nholds++] = took;
    baton__mutex_unlock(&g->mu);
    return BATON_OK;
}

/* The calling thread's innermost hold through this handle (taken off the records), or
 * NULL if it has none. */
static unsigned char *pop_hold(multi *g)
{
    unsigned char *took = NULL;
    baton__mutex_lock(&g->mu);
    if (g->holder == baton__owner_id() && g->nholds > 0) {
        took = g->holds[--g->nholds];
        if (g->nholds == 0)
            g->holder = 0;
    }
    baton__mutex_unlock(&g->mu);
    return took;
}

static void forget_holds(multi *g)
{
    baton__mutex_lock(&g->mu);
    for (size_t i = 0; i < g->nholds; i++)
        free(g->holds[i]);
    g->nholds = 0;
    g->holder = 0;
    baton__mutex_unlock(&g->mu);
}

/* The lease that bounds a Redlock hold's validity: the explicit one, or the shortest
 * watchdog lease of the members (each its own, or its client's; the watchdogs then renew
 * them). */
static int64_t redlock_lease(const multi *g, int64_t lease_ms)
{
    int64_t lease = lease_ms;
    if (lease == BATON_LEASE_WATCHDOG) {
        for (size_t i = 0; i < g->n; i++) {
            int64_t w = g->m[i]->cfg.watchdog_ms;
            if (lease == BATON_LEASE_WATCHDOG || w < lease)
                lease = w;
        }
    }
    return lease;
}

/* One round of a Redlock acquisition: what it took, and why the others failed. */
typedef struct redlock_round {
    size_t ok, fails, errors;
    int first_err;
    baton_lock *err_member, *timeout_member;
    char detail[DETAIL_LEN], err_detail[DETAIL_LEN];
} redlock_round;

/* Tries each member in turn (took[i] = 1 for those taken) until a majority is out of
 * reach; once a majority is taken the rest get one try each. */
static void redlock_round_run(multi *g, unsigned char *took, int64_t slice, int64_t wait_ms,
                              int64_t deadline, int64_t lease_ms, redlock_round *r)
{
    size_t n = g->n, need = g->need;
    r->ok = r->fails = r->errors = 0;
    r->first_err = BATON_OK;
    r->err_member = r->timeout_member = NULL;
    for (size_t i = 0; i < n && r->fails <= n - need; i++) {
        int64_t budget = r->ok >= need ? 0 : min_budget(slice, budget_ms(wait_ms, deadline));
        int rc = baton_lock_try_acquire(g->m[i], budget, lease_ms);
        if (rc == BATON_OK) {
            took[i] = 1;
            r->ok++;
            continue;
        }
        r->fails++;
        if (rc == BATON_ETIMEDOUT) {
            if (!r->timeout_member) {
                r->timeout_member = g->m[i];
                keep_detail(r->detail, g->m[i], rc);
            }
        } else {
            r->errors++;
            if (r->first_err == BATON_OK) {
                r->first_err = rc;
                r->err_member = g->m[i];
                keep_detail(r->err_detail, g->m[i], rc);
            }
        }
    }
}

/* The wait ran out: BATON_ETIMEDOUT, with what the last round saw. */
static int redlock_timed_out(baton_lock *l, const redlock_round *r, int64_t wait_ms, int64_t lease)
{
    multi *g = l->impl;
    char why[DETAIL_LEN + 160];
    if (r->ok >= g->need)
        snprintf(why, sizeof why,
                 "redlock: a majority was taken but too late for the lease (%lld ms)",
                 (long long)lease);
    else
        snprintf(why, sizeof why,
                 "redlock: %zu of %zu members taken, %zu needed, within %lld ms (%s)", r->ok, g->n,
                 g->need, (long long)wait_ms,
                 r->timeout_member ? r->detail
                 : r->err_member   ? r->err_detail
                                   : "");
    return report(l, r->timeout_member ? r->timeout_member : r->err_member, BATON_ETIMEDOUT, why);
}

static int redlock_acquire(baton_lock *l, int64_t wait_ms, int64_t lease_ms)
{
    multi *g = l->impl;
    size_t n = g->n, need = g->need;
    int64_t deadline = baton__deadline_after_ms(wait_ms);
    uint64_t seed = seed_for_thread();
    int64_t lease = redlock_lease(g, lease_ms);
    int64_t drift_ms = lease / 100 + 2; /* Redlock's allowance for clock drift */
    int64_t slice = wait_ms == 0                    ? 0
                    : wait_ms == BATON_WAIT_FOREVER ? REDLOCK_SLICE_MS
                                                    : wait_ms / (int64_t)n;
    if (wait_ms != 0 && slice < 1)
        slice = 1;
    redlock_round r;
    for (;;) {
        unsigned char *took = calloc(n, 1);
        if (!took)
            return report(l, NULL, BATON_ENOMEM, "out of memory");
        int64_t start = baton__now_us();
        redlock_round_run(g, took, slice, wait_ms, deadline, lease_ms, &r);
        int64_t validity = lease - (baton__now_us() - start) / 1000 - drift_ms;
        if (r.ok >= need && validity > 0) {
            int rc = remember_hold(g, took);
            if (rc == BATON_OK)
                return BATON_OK;
            rollback(g, took, n);
            free(took);
            return report(l, NULL, rc, "out of memory");
        }
        rollback(g, took, n);
        free(took);
        if (r.errors > n - need)
            return report(l, r.err_member, r.first_err, r.err_detail);
        if (wait_ms == 0 || baton__now_us() >= deadline)
            return redlock_timed_out(l, &r, wait_ms, lease);
        backoff(g, deadline, &seed);
    }
}

/* Releases the members the calling thread's innermost hold through this handle took;
 * BATON_OK when a majority of them was released. Which members a hold took only this
 * handle knows, so without a hold recorded here nothing is sent. */
static int redlock_release(baton_lock *l)
{
    multi *g = l->impl;
    unsigned char *took = pop_hold(g);
    if (!took)
        return report(l, NULL, BATON_ENOTHELD,
                      "redlock: the calling thread holds nothing through this handle");
    size_t released = 0;
    int first = BATON_OK;
    baton_lock *failed = NULL;
    char detail[DETAIL_LEN];
    for (size_t i = g->n; i-- > 0;) {
        if (!took[i])
            continue;
        int rc = baton_lock_release(g->m[i]);
        if (rc == BATON_OK) {
            released++;
        } else if (first == BATON_OK) {
            first = rc;
            failed = g->m[i];
            keep_detail(detail, failed, rc);
        }
    }
    free(took);
    return released >= g->need ? BATON_OK : report(l, failed, first, detail);
}

/* ------------------------------- the rest of the verbs -------------------------------- */

/* Force-releases every member; *was_locked = whether any was locked. Succeeds when every
 * member answered (a majority in quorum mode), else the first error. */
static int group_force_release(baton_lock *l, bool *was_locked)
{
    multi *g = l->impl;
    size_t answered = 0;
    bool any = false;
    int first = BATON_OK;
    baton_lock *failed = NULL;
    char detail[DETAIL_LEN];
    for (size_t i = g->n; i-- > 0;) {
        bool was = false;
        int rc = baton_lock_force_release(g->m[i], &was);
        if (rc == BATON_OK) {
            answered++;
            any = any || was;
        } else if (first == BATON_OK) {
            first = rc;
            failed = g->m[i];
            keep_detail(detail, failed, rc);
        }
    }
    if (g->quorum)
        forget_holds(g);
    if (was_locked)
        *was_locked = any;
    return answered >= g->need ? BATON_OK : report(l, failed, first, detail);
}

typedef enum query { Q_LOCKED, Q_HELD, Q_COUNT, Q_TTL } query;

static int cmp_desc(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x > y ? -1 : x < y;
}

/* Asks every member and answers for the group: the need-th largest of the members'
 * answers, which is the smallest for the all-or-nothing group (every member locked, the
 * fewest holds, the shortest lease) and what a majority reaches in quorum mode. A member
 * that cannot answer counts as the worst answer in quorum mode; fewer answers than `need`
 * (any failure for the all-or-nothing group) return the first error. */
static int group_query(baton_lock *l, query q, int64_t *out)
{
    multi *g = l->impl;
    int64_t *v = malloc(g->n * sizeof *v);
    if (!v)
        return report(l, NULL, BATON_ENOMEM, "out of memory");
    size_t answered = 0;
    int first = BATON_OK;
    baton_lock *failed = NULL;
    char detail[DETAIL_LEN];
    for (size_t i = 0; i < g->n; i++) {
        baton_lock *m = g->m[i];
        bool b = false;
        int64_t x = 0;
        int rc = BATON_EINVAL;
        switch (q) {
        case Q_LOCKED:
            rc = baton_lock_is_locked(m, &b);
            x = b;
            break;
        case Q_HELD:
            rc = baton_lock_is_held_by_current_thread(m, &b);
            x = b;
            break;
        case Q_COUNT:
            rc = baton_lock_hold_count(m, &x);
            break;
        case Q_TTL:
            rc = baton_lock_remaining_ttl(m, &x);
            if (x == -1)
                x = INT64_MAX; /* no expiry: the longest */
            break;
        }
        if (rc == BATON_OK) {
            answered++;
        } else {
            x = q == Q_TTL ? -2 : 0;
            if (first == BATON_OK) {
                first = rc;
                failed = m;
                keep_detail(detail, m, rc);
            }
        }
        v[i] = x;
    }
    if (answered < g->need) {
        free(v);
        return report(l, failed, first, detail);
    }
    qsort(v, g->n, sizeof *v, cmp_desc);
    int64_t r = v[g->need - 1];
    free(v);
    *out = q == Q_TTL && r == INT64_MAX ? -1 : r;
    return BATON_OK;
}

static int group_is_locked(baton_lock *l, bool *out)
{
    int64_t v;
    int rc = group_query(l, Q_LOCKED, &v);
    if (rc == BATON_OK)
        *out = v != 0;
    return rc;
}

static int group_is_held(baton_lock *l, bool *out)
{
    int64_t v;
    int rc = group_query(l, Q_HELD, &v);
    if (rc == BATON_OK)
        *out = v != 0;
    return rc;
}

static int group_hold_count(baton_lock *l, int64_t *out)
{
    return group_query(l, Q_COUNT, out);
}

static int group_remaining_ttl(baton_lock *l, int64_t *out)
{
    return group_query(l, Q_TTL, out);
}

/* ------------------------------- open and close --------------------------------------- */

static void group_close(baton_lock *l)
{
    multi *g = l->impl;
    forget_holds(g);
    for (size_t i = 0; g->owned && i < g->n; i++)
        baton_lock_close(g->m[i]);
    free(g->holds);
    free(g->m);
    baton__cond_destroy(&g->cv);
    baton__mutex_destroy(&g->mu);
    free(g);
}

/* Each member has its own token (its own counter, perhaps on its own server): a group has
 * no single one. Ask the members. */
static int group_fencing_token(baton_lock *l, int64_t *out)
{
    *out = 0;
    return baton__fail(l->client, BATON_ENOTSUP,
                       "a multi-lock has no single fencing token: ask each member");
}

/* What a multi-lock and a Redlock share: all but acquire and release. */
#define GROUP_OPS(acquire_fn, release_fn)                                                          \
    {                                                                                              \
        .acquire = acquire_fn, .release = release_fn, .force_release = group_force_release,        \
        .is_locked = group_is_locked, .is_held = group_is_held, .hold_count = group_hold_count,    \
        .remaining_ttl = group_remaining_ttl, .close = group_close,                                \
        .fencing_token = group_fencing_token, .kind = BATON_KIND_MULTILOCK,                        \
    }

static const baton__lock_ops multi_ops = GROUP_OPS(multi_acquire, multi_release);
static const baton__lock_ops redlock_ops = GROUP_OPS(redlock_acquire, redlock_release);

static int cmp_str(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "");
}

/* Server endpoints in one fixed order: unix path, host, port, database. */
static int cmp_endpoint(const baton_lock *a, const baton_lock *b)
{
    const baton__endpoint *x = &baton__client_config(a->client)->ep;
    const baton__endpoint *y = &baton__client_config(b->client)->ep;
    int c = cmp_str(x->path, y->path);
    if (c == 0)
        c = cmp_str(x->host, y->host);
    if (c == 0 && x->port != y->port)
        c = x->port < y->port ? -1 : 1;
    if (c == 0 && x->db != y->db)
        c = x->db < y->db ? -1 : 1;
    return c;
}

/* The canonical order: by name, then by server. Names first, so processes that spell a
 * server's address differently (localhost, 127.0.0.1) still agree, except between members
 * of one name on several servers. */
static int cmp_member(const void *a, const void *b)
{
    const baton_lock *x = *(baton_lock *const *)a, *y = *(baton_lock *const *)b;
    int c = strcmp(x->name, y->name);
    return c != 0 ? c : cmp_endpoint(x, y);
}

static int group_open(baton_lock *const *locks, size_t n, baton_lock **out, bool quorum)
{
    if (out)
        *out = NULL;
    if (!locks || !out || n == 0)
        return BATON_EINVAL;
    for (size_t i = 0; i < n; i++) { /* a closed member is not read */
        int rc = locks[i] ? baton__handle_enter(locks[i], BATON__MAGIC_LOCK, "multi-lock member")
                          : BATON_OK;
        if (rc != BATON_OK)
            return rc;
    }
    for (size_t i = 0; i < n; i++) {
        if (!locks[i]) {
            for (size_t j = 0; j < n; j++)
                if (locks[j])
                    return baton__fail(locks[j]->client, BATON_EINVAL,
                                       "multi-lock: member %zu is NULL", i);
            return BATON_EINVAL;
        }
    }
    for (size_t i = 0; i < n; i++) {
        const baton__lock_ops *ops = locks[i]->ops;
        if (ops == &multi_ops || ops == &redlock_ops || !locks[i]->client)
            return baton__fail(locks[i]->client, BATON_EINVAL,
                               "multi-lock: member %zu is itself a multi-lock", i);
    }
    baton_client *c0 = locks[0]->client;
    baton_lock **m = malloc(n * sizeof *m);
    if (!m)
        return baton__fail(c0, BATON_ENOMEM, "out of memory");
    memcpy(m, locks, n * sizeof *m);
    qsort(m, n, sizeof *m, cmp_member);
    bool one_client = true;
    size_t namelen = 0;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && cmp_member(&m[i - 1], &m[i]) == 0) {
            int rc = baton__fail(m[i]->client, BATON_EINVAL,
                                 "multi-lock: lock %s appears twice on one server", m[i]->name);
            free(m);
            return rc;
        }
        one_client = one_client && m[i]->client == c0;
        namelen += strlen(m[i]->name) + 1;
    }

    /* The group's name: its members' names in canonical order, comma-separated. */
    char *name = malloc(namelen);
    baton_lock *l = calloc(1, sizeof *l);
    multi *g = calloc(1, sizeof *g);
    if (!name || !l || !g)
        goto nomem;
    char *p = name;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(m[i]->name);
        if (i > 0)
            *p++ = ',';
        memcpy(p, m[i]->name, len);
        p += len;
    }
    *p = '\0';
    if (baton__lock_base_init(l, quorum ? &redlock_ops : &multi_ops, one_client ? c0 : NULL, name,
                              NULL) != BATON_OK)
        goto nomem;
    free(name);
    g->quorum = quorum;
    g->n = n;
    g->need = quorum ? n / 2 + 1 : n;
    g->m = m;
    baton__mutex_init(&g->mu);
    baton__cond_init(&g->cv);
    l->impl = g;
    if (baton__lock_register(l, quorum ? "redlock" : "multi-lock") != BATON_OK) {
        baton__lock_free(l);
        return baton__fail(c0, BATON_ENOMEM, "out of memory");
    }
    *out = l;
    return BATON_OK;
nomem:
    free(name);
    free(l);
    free(g);
    free(m);
    return baton__fail(c0, BATON_ENOMEM, "out of memory");
}

int baton_multilock_open(baton_lock *const *locks, size_t n, baton_lock **out)
{
    return group_open(locks, n, out, false);
}

int baton_redlock_open(baton_lock *const *locks, size_t n, baton_lock **out)
{
    return group_open(locks, n, out, true);
}

int baton_multilock_open_names(baton_client *c, const char *const *names, size_t n,
                               baton_lock **out)
{
    return baton_multilock_open_names_opts(c, names, n, NULL, out);
}

int baton_multilock_open_names_opts(baton_client *c, const char *const *names, size_t n,
                                    const baton_handle_options *opts, baton_lock **out)
{
    if (out)
        *out = NULL;
    int rc = baton__client_enter(c);
    if (rc != BATON_OK)
        return rc;
    if (!c)
        return baton__misuse(BATON_EINVAL, "multi-lock: client is NULL");
    if (!out || !names || n == 0)
        return baton__fail(c, BATON_EINVAL, "multi-lock: %s",
                           !out     ? "out is NULL"
                           : !names ? "names is NULL"
                                    : "n is 0");
    baton_lock **m = calloc(n, sizeof *m);
    if (!m)
        return baton__fail(c, BATON_ENOMEM, "out of memory");
    for (size_t i = 0; i < n && rc == BATON_OK; i++) {
        rc = baton_lock_open_opts(c, names[i], opts, &m[i]); /* the options are its members' */
        if (rc != BATON_OK) {
            char why[400];
            snprintf(why, sizeof why, "%s", baton_client_errmsg(c));
            baton__fail(c, rc, "multi-lock: name %zu: %s", i, why);
        }
    }
    if (rc == BATON_OK)
        rc = group_open(m, n, out, false);
    if (rc == BATON_OK) {
        ((multi *)(*out)->impl)->owned = true;
    } else {
        for (size_t i = 0; i < n; i++)
            baton_lock_close(m[i]);
    }
    free(m);
    return rc;
}
