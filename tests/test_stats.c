/*
 * The client's statistics and log hook against a real redis-server: exact acquisition
 * counts under contention, wake-ups, a hold lost to a force release and to a server
 * restart (one each, with its cause), the Prometheus and JSON texts parsed back, and the
 * log hook's events and levels.
 */
#define _GNU_SOURCE
#include "helper.h"
#include "internal.h"

#include "new_assert.h"
#include <ctype.h>
#include <poll.h>
#include <pthread.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

TestSuite(stats, .timeout = 60);

/* ---------------------------------------------------------------- the log hook ------- */

#define MAX_LOGS 64

typedef struct log_book {
    pthread_mutex_t mu;
    int n;
    int level[MAX_LOGS];
    char msg[MAX_LOGS][512];
} log_book;

static void record(void *arg, int level, const char *msg)
{
    log_book *b = arg;
    pthread_mutex_lock(&b->mu);
    if (b->n < MAX_LOGS) {
        b->level[b->n] = level;
        snprintf(b->msg[b->n], sizeof b->msg[0], "%s", msg);
        b->n++;
    }
    pthread_mutex_unlock(&b->mu);
}

/* How many messages at `level` contain `text`. */
static int logged(log_book *b, int level, const char *text)
{
    int n = 0;
    pthread_mutex_lock(&b->mu);
    for (int i = 0; i < b->n; i++)
        if (b->level[i] == level && strstr(b->msg[i], text))
            n++;
    pthread_mutex_unlock(&b->mu);
    return n;
}

/* A client whose log hook records into b (url NULL: the shared server). */
static baton_client *logged_client(log_book *b, int level, const char *url, int64_t watchdog_ms,
                                   int64_t slow_acquire_ms)
{
    pthread_mutex_init(&b->mu, NULL);
    b->n = 0;
    baton_options o;
    baton_options_init(&o);
    o.url = url;
    o.log_fn = record;
    o.log_arg = b;
    o.log_level = level;
    o.watchdog_ms = watchdog_ms;
    o.slow_acquire_ms = slow_acquire_ms;
    return th_client(&o);
}

/* Waits until the lock's lost fd is readable, at most ms. */
static bool lost_within(baton_lock *l, int ms)
{
    int fd;
    cr_assert(eq(int, baton_lock_lost_fd(l, &fd), BATON_OK));
    struct pollfd p = {fd, POLLIN, 0};
    return poll(&p, 1, ms) == 1;
}

/* ---------------------------------------------------------------- counts ------------- */

#define WAITERS 4
#define ROUNDS 5

typedef struct waiter {
    baton_client *c;
    const char *name;
    int errors;
} waiter;

static void *wait_and_take(void *arg)
{
    waiter *w = arg;
    baton_lock *l;
    if (baton_lock_open(w->c, w->name, &l) != BATON_OK) {
        w->errors++;
        return NULL;
    }
    for (int i = 0; i < ROUNDS; i++) {
        if (baton_lock_acquire(l, BATON_LEASE_WATCHDOG) != BATON_OK) {
            w->errors++;
            continue;
        }
        th_sleep_ms(5);
        if (baton_lock_release(l) != BATON_OK)
            w->errors++;
    }
    baton_lock_close(l);
    return NULL;
}

Test(stats, contended_lock_counts_exactly)
{
    baton_client *c = th_client(NULL);
    const char *name = th_tmpname("st-contended");
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(c, name, &l), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(l, BATON_LEASE_WATCHDOG), BATON_OK));

    waiter w[WAITERS];
    pthread_t t[WAITERS];
    for (int i = 0; i < WAITERS; i++) {
        w[i] = (waiter){c, name, 0};
        pthread_create(&t[i], NULL, wait_and_take, &w[i]);
    }
    /* every waiter subscribes and sleeps while this thread holds the lock */
    redisContext *r = th_redis();
    int64_t until = th_ms() + 5000;
    while (th_numsub(r, "redisson_lock__channel:{%s}", name) < 1 && th_ms() < until)
        th_sleep_ms(5);
    th_sleep_ms(250);
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    for (int i = 0; i < WAITERS; i++) {
        pthread_join(t[i], NULL);
        cr_assert(eq(int, w[i].errors, 0), "waiter %d", i);
    }

    baton_stats s;
    cr_assert(eq(int, baton_client_stats(c, &s), BATON_OK));
    const baton_kind_stats *k = &s.kind[BATON_KIND_LOCK];
    cr_assert(eq(u64, k->acquisitions, 1 + WAITERS * ROUNDS));
    cr_assert(ge(u64, k->attempts, k->acquisitions));
    /* The first release found WAITERS threads asleep; each of them needed at least one
     * wake-up to take the lock it was sleeping on. */
    cr_assert(ge(u64, k->wakeups, WAITERS), "wakeups %llu", (unsigned long long)k->wakeups);
    cr_assert(le(u64, k->wakeups, k->attempts));
    cr_assert(eq(u64, k->wait.count, k->acquisitions));
    cr_assert(ge(u64, k->wait.max_us, 200000), "max %llu", (unsigned long long)k->wait.max_us);
    cr_assert(le(u64, k->wait.p50_us, k->wait.p99_us));
    cr_assert(le(u64, k->wait.p99_us, k->wait.max_us));
    cr_assert(ge(u64, k->wait.sum_us, k->wait.max_us));
    for (int kind = 1; kind < BATON_STATS_KINDS; kind++)
        cr_assert(eq(u64, s.kind[kind].acquisitions, 0), "kind %d", kind);
    cr_assert(ge(u64, s.subscribes, 1));
    cr_assert(ge(u64, s.messages, WAITERS));
    cr_assert(eq(u64, s.holds_lost_deleted + s.holds_lost_expired + s.holds_lost_restart, 0));
    cr_assert(eq(
        u64, s.redirects_moved + s.redirects_ask + s.redirects_tryagain + s.redirects_clusterdown,
        0));
    cr_assert(ge(u64, s.connections_opened, 1));
    cr_assert(eq(u64, s.epoch, 1));

    /* the old internal accessor reads the same counters */
    baton__stats old;
    baton__client_stats(c, &old);
    baton_client_stats(c, &s);
    cr_assert(eq(u64, old.commands, s.round_trips));
    cr_assert(le(u64, old.pubsub, s.subscribes + s.unsubscribes));
    redisFree(r);
    baton_lock_close(l);
    baton_client_close(c);
}

Test(stats, semaphore_fairlock_and_latch_count_as_their_kind)
{
    baton_client *c = th_client(NULL);
    baton_semaphore *sem;
    cr_assert(eq(int, baton_semaphore_open(c, th_tmpname("st-sem"), &sem), BATON_OK));
    cr_assert(eq(int, baton_semaphore_try_set_permits(sem, 2, NULL), BATON_OK));
    for (int i = 0; i < 3; i++) {
        cr_assert(eq(int, baton_semaphore_acquire(sem, 2), BATON_OK));
        cr_assert(eq(int, baton_semaphore_release(sem, 2), BATON_OK));
    }
    cr_assert(eq(int, baton_semaphore_try_acquire(sem, 3, 0), BATON_ETIMEDOUT));
    baton_lock *fl;
    cr_assert(eq(int, baton_fairlock_open(c, th_tmpname("st-fair"), &fl), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(fl, 5000), BATON_OK));
    cr_assert(eq(int, baton_lock_release(fl), BATON_OK));
    baton_latch *la;
    cr_assert(eq(int, baton_latch_open(c, th_tmpname("st-latch"), &la), BATON_OK));
    cr_assert(eq(int, baton_latch_try_set_count(la, 1, NULL), BATON_OK));
    cr_assert(eq(int, baton_latch_await(la, 0), BATON_ETIMEDOUT));
    cr_assert(eq(int, baton_latch_count_down(la), BATON_OK));
    cr_assert(eq(int, baton_latch_await(la, 1000), BATON_OK));

    baton_stats s;
    cr_assert(eq(int, baton_client_stats(c, &s), BATON_OK));
    cr_assert(eq(u64, s.kind[BATON_KIND_SEMAPHORE].acquisitions, 3));
    cr_assert(eq(u64, s.kind[BATON_KIND_SEMAPHORE].attempts, 4));
    cr_assert(eq(u64, s.kind[BATON_KIND_FAIRLOCK].acquisitions, 1));
    cr_assert(eq(u64, s.kind[BATON_KIND_FAIRLOCK].attempts, 1));
    cr_assert(eq(u64, s.kind[BATON_KIND_LATCH].acquisitions, 1));
    cr_assert(eq(u64, s.kind[BATON_KIND_LATCH].attempts, 2));
    cr_assert(eq(u64, s.kind[BATON_KIND_LOCK].acquisitions, 0));
    baton_latch_close(la);
    baton_lock_close(fl);
    baton_semaphore_close(sem);
    baton_client_close(c);
}

/* ---------------------------------------------------------------- lost holds --------- */

static void *await_barrier(void *b)
{
    return (void *)(intptr_t)baton_barrier_await(b, 10000, NULL, NULL);
}

/* Barriers and elections are counted under their own kinds, not the latch's (issue 44). */
Test(stats, barrier_awaits_count_as_barrier_not_latch)
{
    baton_client *c = th_client(NULL);
    baton_barrier *b1, *b2;
    const char *name = th_tmpname("st-barrier");
    cr_assert(eq(int, baton_barrier_open(c, name, 2, &b1), BATON_OK));
    cr_assert(eq(int, baton_barrier_open(c, name, 2, &b2), BATON_OK));
    pthread_t t;
    pthread_create(&t, NULL, await_barrier, b1);
    th_sleep_ms(100); /* the first party waits: the trip's message wakes it */
    cr_assert(eq(int, baton_barrier_await(b2, 10000, NULL, NULL), BATON_OK));
    void *rc;
    pthread_join(t, &rc);
    cr_assert(eq(int, (int)(intptr_t)rc, BATON_OK));
    baton_stats s;
    cr_assert(eq(int, baton_client_stats(c, &s), BATON_OK));
    cr_assert(eq(u64, s.kind[BATON_KIND_BARRIER].acquisitions, 2));
    cr_assert(ge(u64, s.kind[BATON_KIND_BARRIER].wakeups, 1));
    cr_assert(eq(u64, s.kind[BATON_KIND_LATCH].acquisitions, 0));
    cr_assert(eq(u64, s.kind[BATON_KIND_LATCH].wakeups, 0));
    char buf[16384];
    cr_assert(gt(int, baton_client_stats_format(c, BATON_STATS_PROMETHEUS, buf, sizeof buf), 0));
    cr_assert(strstr(buf, "baton_acquisitions_total{kind=\"barrier\"} 2") != NULL, "%s", buf);
    baton_barrier_close(b1);
    baton_barrier_close(b2);
    baton_client_close(c);
}

Test(stats, force_release_while_watched_is_one_deleted_hold)
{
    log_book b;
    baton_client *c = logged_client(&b, BATON_LOG_WARN, NULL, 300, 0);
    baton_client *other = th_client(NULL);
    const char *name = th_tmpname("st-lost");
    baton_lock *l, *ol;
    cr_assert(eq(int, baton_lock_open(c, name, &l), BATON_OK));
    cr_assert(eq(int, baton_lock_open(other, name, &ol), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(l, BATON_LEASE_WATCHDOG), BATON_OK));
    bool was;
    cr_assert(eq(int, baton_lock_force_release(ol, &was), BATON_OK));
    cr_assert(was);
    cr_assert(lost_within(l, 2000)); /* the next renewal (every 100 ms) finds it gone */
    th_sleep_ms(350);                /* three more periods: still one */

    baton_stats s;
    cr_assert(eq(int, baton_client_stats(c, &s), BATON_OK));
    cr_assert(eq(u64, s.holds_lost_deleted, 1));
    cr_assert(eq(u64, s.holds_lost_expired + s.holds_lost_restart + s.holds_lost_failover, 0));
    cr_assert(ge(u64, s.renewals_sent, 1));
    cr_assert(eq(int, logged(&b, BATON_LOG_ERROR, "hold lost"), 1));
    cr_assert(eq(int, logged(&b, BATON_LOG_ERROR, name), 1));
    cr_assert(eq(int, logged(&b, BATON_LOG_ERROR, "deleted"), 1));
    cr_assert(eq(int, logged(&b, BATON_LOG_DEBUG, "renewal"), 0)); /* below WARN */
    baton_lock_close(ol);
    baton_lock_close(l);
    baton_client_close(other);
    baton_client_close(c);
}

Test(stats, renewals_are_counted_and_logged_at_debug)
{
    log_book b;
    baton_client *c = logged_client(&b, BATON_LOG_DEBUG, NULL, 300, 0);
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(c, th_tmpname("st-renew"), &l), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(l, BATON_LEASE_WATCHDOG), BATON_OK));
    th_sleep_ms(450); /* renewals every 100 ms */
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    baton_stats s;
    cr_assert(eq(int, baton_client_stats(c, &s), BATON_OK));
    cr_assert(ge(u64, s.renewals_sent, 2));
    cr_assert(le(u64, s.renewals_sent, 5));
    cr_assert(eq(u64, s.renewals_failed, 0));
    cr_assert(
        eq(int, logged(&b, BATON_LOG_DEBUG, "renewal: 1 hold renewed"), (int)s.renewals_sent));
    cr_assert(eq(u64, s.holds_lost_deleted + s.holds_lost_expired, 0));
    baton_lock_close(l);
    baton_client_close(c);
}

Test(stats, server_restart_is_one_restart_loss_and_a_new_epoch)
{
    th_server srv;
    th_server_start(&srv, NULL);
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", srv.port);
    log_book b;
    baton_client *c = logged_client(&b, BATON_LOG_INFO, url, 0, 0);
    baton_lock *l;
    const char *name = th_tmpname("st-restart");
    cr_assert(eq(int, baton_lock_open(c, name, &l), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(l, 20000), BATON_OK));
    th_server_stop(&srv);
    th_server_start_on(&srv, srv.port, NULL);
    bool locked = true;
    cr_assert(eq(int, baton_lock_is_locked(l, &locked), BATON_OK)); /* reconnects */
    cr_assert(not(locked));
    cr_assert(lost_within(l, 2000));

    baton_stats s;
    cr_assert(eq(int, baton_client_stats(c, &s), BATON_OK));
    cr_assert(eq(u64, s.holds_lost_restart, 1));
    cr_assert(eq(u64, s.holds_lost_deleted + s.holds_lost_expired, 0));
    cr_assert(eq(u64, s.epoch, 2));
    cr_assert(ge(u64, s.connections_opened, 2));
    cr_assert(eq(int, logged(&b, BATON_LOG_WARN, "server restarted"), 1));
    cr_assert(eq(int, logged(&b, BATON_LOG_ERROR, "server_restarted"), 1));
    baton_lock_close(l);
    baton_client_close(c);
    th_server_stop(&srv);
}

/* A waiter on c takes the lock of w->name (held elsewhere) within 10 s. */
static void *take_within_10s(void *arg)
{
    waiter *w = arg;
    baton_lock *l;
    if (baton_lock_open(w->c, w->name, &l) != BATON_OK ||
        baton_lock_try_acquire(l, 10000, 5000) != BATON_OK || baton_lock_release(l) != BATON_OK)
        w->errors++;
    baton_lock_close(l);
    return NULL;
}

Test(stats, killed_subscriber_connection_is_one_reconnect)
{
    log_book b;
    baton_client *c = logged_client(&b, BATON_LOG_INFO, NULL, 0, 0);
    baton_client *holder = th_client(NULL);
    const char *name = th_tmpname("st-reconnect");
    baton_lock *hl;
    cr_assert(eq(int, baton_lock_open(holder, name, &hl), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(hl, 30000), BATON_OK));
    waiter w = {c, name, 0};
    pthread_t t;
    pthread_create(&t, NULL, take_within_10s, &w);
    redisContext *r = th_redis();
    int64_t until = th_ms() + 5000;
    while (th_numsub(r, "redisson_lock__channel:{%s}", name) < 1 && th_ms() < until)
        th_sleep_ms(5);
    cr_assert(ge(i64, th_cmd_int(r, "CLIENT KILL TYPE pubsub"), 1));
    baton_stats s;
    until = th_ms() + 5000;
    do {
        th_sleep_ms(10);
        baton_client_stats(c, &s);
    } while (s.pubsub_reconnects == 0 && th_ms() < until);
    cr_assert(eq(int, baton_lock_release(hl), BATON_OK));
    pthread_join(t, NULL);
    cr_assert(eq(int, w.errors, 0));
    baton_client_stats(c, &s);
    cr_assert(eq(u64, s.pubsub_reconnects, 1));
    cr_assert(ge(u64, s.subscribes, 2)); /* the first, and the one after reconnecting */
    cr_assert(eq(int, logged(&b, BATON_LOG_INFO, "pub/sub connection re-established"), 1));
    redisFree(r);
    baton_lock_close(hl);
    baton_client_close(holder);
    baton_client_close(c);
}

/* ---------------------------------------------------------------- log levels --------- */

/* Holds the lock 150 ms from another client while c acquires it. */
typedef struct holder {
    const char *name;
    int rc;
} holder;

static void *hold_150ms(void *arg)
{
    holder *h = arg;
    baton_client *c = th_client(NULL);
    baton_lock *l;
    baton_lock_open(c, h->name, &l);
    h->rc = baton_lock_acquire(l, 5000);
    th_sleep_ms(150);
    baton_lock_release(l);
    baton_lock_close(l);
    baton_client_close(c);
    return NULL;
}

/* One acquisition that waits ~150 ms, on a client with slow_acquire_ms = 50. */
static baton_stats slow_acquire(int level, log_book *b)
{
    baton_client *c = logged_client(b, level, NULL, 0, 50);
    holder h = {th_tmpname("st-slow"), -1};
    redisContext *r = th_redis();
    pthread_t t;
    pthread_create(&t, NULL, hold_150ms, &h);
    int64_t until = th_ms() + 2000;
    while (th_cmd_int(r, "EXISTS %s", h.name) == 0 && th_ms() < until)
        th_sleep_ms(1);
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(c, h.name, &l), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(l, 5000), BATON_OK));
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    pthread_join(t, NULL);
    cr_assert(eq(int, h.rc, BATON_OK));
    baton_stats s;
    baton_client_stats(c, &s);
    baton_lock_close(l);
    baton_client_close(c);
    redisFree(r);
    return s;
}

Test(stats, slow_acquire_is_logged_at_warn_and_filtered_by_level)
{
    log_book b;
    baton_stats s = slow_acquire(BATON_LOG_WARN, &b);
    cr_assert(eq(u64, s.slow_acquires, 1));
    cr_assert(eq(int, logged(&b, BATON_LOG_WARN, "slow acquire: lock"), 1));

    s = slow_acquire(BATON_LOG_ERROR, &b);
    cr_assert(eq(u64, s.slow_acquires, 1)); /* counted all the same */
    cr_assert(eq(int, b.n, 0));             /* but below the level: not passed on */
}

Test(stats, bad_arguments)
{
    baton_stats s;
    char buf[16];
    cr_assert(eq(int, baton_client_stats(NULL, &s), BATON_EINVAL));
    baton_client *c = th_client(NULL);
    cr_assert(eq(int, baton_client_stats(c, NULL), BATON_EINVAL));
    cr_assert(
        eq(int, baton_client_stats_format(NULL, BATON_STATS_JSON, buf, sizeof buf), BATON_EINVAL));
    cr_assert(eq(int, baton_client_stats_format(c, 0, buf, sizeof buf), BATON_EINVAL));
    cr_assert(
        eq(int,
           baton_client_stats_format(c, BATON_STATS_JSON | BATON_STATS_PROMETHEUS, buf, sizeof buf),
           BATON_EINVAL));
    cr_assert(eq(int, baton_client_stats_format(c, BATON_STATS_JSON, NULL, 4), BATON_EINVAL));
    baton_client_close(c);
    baton_options o;
    baton_options_init(&o);
    o.url = th_url();
    o.slow_acquire_ms = -1;
    cr_assert(eq(int, baton_client_open(&o, &c), BATON_EINVAL));
}

/* ---------------------------------------------------------------- text formats ------- */

/* Some of everything, so the texts have non-zero numbers to carry. */
static baton_client *busy_client(void)
{
    baton_client *c = th_client(NULL);
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(c, th_tmpname("st-fmt"), &l), BATON_OK));
    for (int i = 0; i < 20; i++) {
        cr_assert(eq(int, baton_lock_acquire(l, 5000), BATON_OK));
        cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    }
    baton_lock_close(l);
    return c;
}

static char *format(baton_client *c, int fmt)
{
    int n = baton_client_stats_format(c, fmt, NULL, 0);
    cr_assert(gt(int, n, 0));
    char *buf = malloc((size_t)n + 1);
    cr_assert(eq(int, baton_client_stats_format(c, fmt, buf, (size_t)n + 1), n));
    cr_assert(eq(sz, strlen(buf), (size_t)n));
    /* cut short: NUL-terminated, same length reported */
    char small[32];
    cr_assert(eq(int, baton_client_stats_format(c, fmt, small, sizeof small), n));
    cr_assert(eq(sz, strlen(small), sizeof small - 1));
    cr_assert(eq(int, strncmp(small, buf, sizeof small - 1), 0));
    return buf;
}

/* A family declared by # TYPE: its name and type. */
typedef struct family {
    char name[128];
    char type[128];
    bool help;
} family;

static bool name_ok(const char *s, size_t n)
{
    static regex_t re;
    static bool compiled;
    if (!compiled) {
        cr_assert(eq(int, regcomp(&re, "^[a-zA-Z_:][a-zA-Z0-9_:]*$", REG_EXTENDED | REG_NOSUB), 0));
        compiled = true;
    }
    char buf[256];
    if (n == 0 || n >= sizeof buf)
        return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    return regexec(&re, buf, 0, NULL, 0) == 0;
}

/* Parses `{a="x",b="y"}` at *p; returns the value of label `want` (or "" if absent). */
static void parse_labels(const char **p, const char *want, char *val, size_t vlen)
{
    val[0] = '\0';
    if (**p != '{')
        return;
    (*p)++;
    while (**p != '}') {
        const char *ln = *p;
        while (**p == '_' || isalnum((unsigned char)**p) != 0)
            (*p)++;
        cr_assert(gt(sz, (size_t)(*p - ln), 0), "empty label name");
        bool digit_first = isdigit((unsigned char)*ln) != 0;
        cr_assert(not(digit_first));
        size_t lnlen = (size_t)(*p - ln);
        cr_assert(eq(int, **p, '='));
        (*p)++;
        cr_assert(eq(int, **p, '"'));
        (*p)++;
        const char *v = *p;
        while (**p && **p != '"')
            (*p)++;
        cr_assert(eq(int, **p, '"'));
        if (strlen(want) == lnlen && strncmp(ln, want, lnlen) == 0)
            snprintf(val, vlen, "%.*s", (int)(*p - v), v);
        (*p)++;
        if (**p == ',')
            (*p)++;
        else
            cr_assert(eq(int, **p, '}'));
    }
    (*p)++;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

Test(stats, prometheus_text_parses)
{
    baton_client *c = busy_client();
    char *text = format(c, BATON_STATS_PROMETHEUS);
    family fams[64];
    int nf = 0, samples = 0;
    double last_bucket = -1, inf_bucket = -1;
    char last_kind[32] = "";
    bool saw_lock_acq = false;
    char *save = NULL;
    cr_assert(eq(int, text[strlen(text) - 1], '\n'));
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#') {
            char what[8], name[128], rest[128];
            cr_assert(eq(int, sscanf(line, "# %7s %127s %127[^\n]", what, name, rest), 3), "%s",
                      line);
            cr_assert(name_ok(name, strlen(name)), "%s", line);
            if (strcmp(what, "HELP") == 0) {
                cr_assert(lt(int, nf, 64));
                fams[nf] = (family){"", "", true};
                snprintf(fams[nf].name, sizeof fams[nf].name, "%s", name);
                nf++;
                continue;
            }
            cr_assert(eq(str, what, "TYPE"), "%s", line);
            cr_assert(gt(int, nf, 0));
            cr_assert(eq(str, fams[nf - 1].name, name), "TYPE after its HELP: %s", line);
            cr_assert(strcmp(rest, "counter") == 0 || strcmp(rest, "gauge") == 0 ||
                          strcmp(rest, "histogram") == 0 || strcmp(rest, "summary") == 0,
                      "%s", line);
            snprintf(fams[nf - 1].type, sizeof fams[nf - 1].type, "%s", rest);
            if (strcmp(rest, "counter") == 0)
                cr_assert(ends_with(name, "_total"), "counter %s", name);
            continue;
        }
        /* a sample: name{labels} value */
        const char *p = line;
        while (*p && *p != '{' && *p != ' ')
            p++;
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)(p - line), line);
        cr_assert(name_ok(line, (size_t)(p - line)), "%s", line);
        char le[32], kind[32];
        const char *q = p;
        parse_labels(&p, "le", le, sizeof le);
        parse_labels(&q, "kind", kind, sizeof kind);
        cr_assert(eq(int, *p, ' '), "%s", line);
        char *end;
        double v = strtod(p + 1, &end);
        cr_assert(eq(int, *end, '\0'), "value of %s", line);
        cr_assert(ge(dbl, v, 0.0));
        /* its family is the last one declared, by the suffix rules of its type */
        cr_assert(gt(int, nf, 0));
        family *f = &fams[nf - 1];
        cr_assert(f->help && f->type[0], "%s has no HELP/TYPE", name);
        if (strcmp(f->type, "histogram") == 0) {
            size_t fl = strlen(f->name);
            cr_assert(eq(int, strncmp(name, f->name, fl), 0), "%s in %s", name, f->name);
            const char *sfx = name + fl;
            cr_assert(strcmp(sfx, "_bucket") == 0 || strcmp(sfx, "_sum") == 0 ||
                          strcmp(sfx, "_count") == 0,
                      "%s", name);
            if (strcmp(sfx, "_bucket") == 0) {
                cr_assert(ne(str, le, ""), "bucket without le: %s", line);
                if (strcmp(kind, last_kind) != 0) {
                    last_bucket = -1;
                    snprintf(last_kind, sizeof last_kind, "%s", kind);
                }
                cr_assert(ge(dbl, v, last_bucket), "buckets cumulative: %s", line);
                last_bucket = v;
                if (strcmp(le, "+Inf") == 0)
                    inf_bucket = v;
                else
                    cr_assert(gt(dbl, strtod(le, NULL), 0.0));
            } else if (strcmp(sfx, "_count") == 0) {
                cr_assert(eq(dbl, v, inf_bucket), "+Inf bucket equals _count: %s", line);
            }
        } else {
            cr_assert(eq(str, name, f->name), "sample of another family: %s", line);
            cr_assert(eq(str, le, ""));
        }
        if (strcmp(name, "baton_acquisitions_total") == 0 && strcmp(kind, "lock") == 0) {
            cr_assert(eq(dbl, v, 20.0));
            saw_lock_acq = true;
        }
        samples++;
    }
    cr_assert(saw_lock_acq);
    cr_assert(ge(int, nf, 15));
    cr_assert(ge(int, samples, 60));
    /* no family twice */
    for (int i = 0; i < nf; i++)
        for (int j = i + 1; j < nf; j++)
            cr_assert(ne(str, fams[i].name, fams[j].name));
    free(text);
    baton_client_close(c);
}

/* A minimal JSON checker: value := object | array | string | number | literal. */
static const char *json_value(const char *p);

static const char *json_ws(const char *p)
{
    while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
        p++;
    return p;
}

static const char *json_string(const char *p)
{
    if (*p != '"')
        return NULL;
    for (p++; *p && *p != '"'; p++)
        if (*p == '\\' && !*++p)
            return NULL;
    return *p == '"' ? p + 1 : NULL;
}

static const char *json_seq(const char *p, char close, bool keyed)
{
    p = json_ws(p + 1);
    if (*p == close)
        return p + 1;
    for (;;) {
        if (keyed) {
            if (!(p = json_string(json_ws(p))))
                return NULL;
            p = json_ws(p);
            if (*p++ != ':')
                return NULL;
        }
        if (!(p = json_value(p)))
            return NULL;
        p = json_ws(p);
        if (*p == close)
            return p + 1;
        if (*p++ != ',')
            return NULL;
    }
}

static const char *json_value(const char *p)
{
    p = json_ws(p);
    if (*p == '{')
        return json_seq(p, '}', true);
    if (*p == '[')
        return json_seq(p, ']', false);
    if (*p == '"')
        return json_string(p);
    if (*p == '-' || isdigit((unsigned char)*p)) {
        char *end;
        strtod(p, &end);
        return end;
    }
    for (const char *lit = "true\0false\0null\0"; *lit; lit += strlen(lit) + 1)
        if (strncmp(p, lit, strlen(lit)) == 0)
            return p + strlen(lit);
    return NULL;
}

Test(stats, json_text_parses)
{
    baton_client *c = busy_client();
    char *text = format(c, BATON_STATS_JSON);
    const char *end = json_value(text);
    cr_assert(end != NULL, "%s", text);
    cr_assert(eq(str, (char *)json_ws(end), ""), "trailing text: %s", end);
    cr_assert(eq(int, text[0], '{'));
    cr_assert(strstr(text, "\"lock\":{\"acquisitions\":20,") != NULL, "%s", text);
    cr_assert(strstr(text, "\"epoch\":1}") != NULL, "%s", text);
    free(text);
    baton_client_close(c);
}
