/*
 * The client's counters and wait-time histograms, their snapshot and text formats
 * (Prometheus, JSON), and the log hook.
 *
 * Counting sits on the hot path (an uncontended lock+unlock pair counts an attempt, an
 * acquisition, its wait and two round trips), so every counter is a relaxed atomic add on
 * memory embedded in the client: no mutex, no allocation, no ordering with anything else.
 * Readers sum what they see; a snapshot is exact per counter, not across counters.
 *
 * Wait times go into a log-linear histogram (HdrHistogram's idea at its smallest): exact
 * below 16 µs, then eight linear buckets per power of two, so a percentile read from it is
 * at most 12.5 % above the truth, in 312 counters per kind and one clz per record. The
 * Prometheus histogram re-groups the buckets at powers of four microseconds, which are
 * bucket edges, so its cumulative counts are exact.
 */
#define _GNU_SOURCE
#include "client_fields.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOG_DEFAULT BATON_LOG_WARN

static const char *const kind_names[BATON__K_COUNT] = {
    "lock", "fairlock", "multilock", "semaphore", "latch", "rwlock", "election", "barrier"};
static const char *const lost_names[BATON__LOST_COUNT] = {"expired", "deleted", "server_restarted",
                                                          "master_changed"};
static const char *const redirect_names[BATON__REDIR_COUNT] = {"moved", "ask", "tryagain",
                                                               "clusterdown"};

/* ------------------------------- configuration and the log hook ----------------------- */

void baton__stats_configure(baton_client *c, const baton_options *o)
{
    baton__counters *s = &c->stats;
    if (!o)
        return;
    s->log_fn = o->log_fn;
    s->log_arg = o->log_arg;
    s->log_level = o->log_level <= 0                ? LOG_DEFAULT
                   : o->log_level > BATON_LOG_DEBUG ? BATON_LOG_DEBUG
                                                    : o->log_level;
    s->slow_acquire_us = o->slow_acquire_ms > 0 ? o->slow_acquire_ms * 1000 : 0;
}

void baton__stats_enable(baton_client *c, bool on)
{
    atomic_store_explicit(&c->stats.off, !on, memory_order_relaxed);
}

void baton__log(baton_client *c, int level, const char *fmt, ...)
{
    if (!c || !c->stats.log_fn || level > c->stats.log_level)
        return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->stats.log_fn(c->stats.log_arg, level, msg);
}

/* ------------------------------- counting --------------------------------------------- */

static bool counting(baton_client *c)
{
    return c && !atomic_load_explicit(&c->stats.off, memory_order_relaxed);
}

static void add(baton_client *c, baton__stat_id id, uint64_t n)
{
    atomic_fetch_add_explicit(&c->stats.v[id], n, memory_order_relaxed);
}

void baton__stat_inc(baton_client *c, baton__stat_id id)
{
    if (counting(c) || (c && id == BATON__ST_ROUND_TRIPS))
        add(c, id, 1);
}

void baton__stat_add(baton_client *c, baton__stat_id id, uint64_t n)
{
    if (counting(c))
        add(c, id, n);
}

/* Bucket of a value in µs: exact below 16, then 8 per power of two. */
static size_t bucket_of(uint64_t us)
{
    if (us < 16)
        return (size_t)us;
    int e = 63 - __builtin_clzll(us); /* 4.. */
    if (e > 40)
        return BATON__HIST_BUCKETS - 1;
    size_t sub = (size_t)(us >> (e - 3)) & 7;
    return 16 + (size_t)(e - 4) * 8 + sub;
}

/* The largest value a bucket holds (its percentiles are reported as this). */
static uint64_t bucket_top(size_t i)
{
    if (i < 16)
        return i;
    int e = 4 + (int)((i - 16) / 8);
    uint64_t sub = (i - 16) % 8;
    return ((8 + sub + 1) << (e - 3)) - 1;
}

static void hist_record(baton__hist *h, uint64_t us)
{
    atomic_fetch_add_explicit(&h->bucket[bucket_of(us)], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_us, us, memory_order_relaxed);
    uint64_t max = atomic_load_explicit(&h->max_us, memory_order_relaxed);
    while (us > max && !atomic_compare_exchange_weak_explicit(
                           &h->max_us, &max, us, memory_order_relaxed, memory_order_relaxed)) {
    }
}

int64_t baton__stat_start(baton_client *c)
{
    return counting(c) ? baton__now_us() : 0;
}

void baton__stat_acquire(baton_client *c, baton__kind k, int rc, int64_t start_us, const char *name)
{
    if (rc != BATON_OK || !counting(c))
        return;
    add(c, BATON__ST_ACQUIRED + k, 1);
    if (start_us == 0)
        return; /* counting resumed during the call */
    int64_t us = baton__now_us() - start_us;
    hist_record(&c->stats.wait[k], (uint64_t)(us < 0 ? 0 : us));
    if (c->stats.slow_acquire_us && us > c->stats.slow_acquire_us) {
        add(c, BATON__ST_SLOW_ACQUIRES, 1);
        baton__log(c, BATON_LOG_WARN, "slow acquire: %s %s took %lld ms", kind_names[k],
                   name ? name : "", (long long)(us / 1000));
    }
}

int baton__stat_woken(baton_client *c, baton__kind k, int rc)
{
    if (rc == BATON_OK)
        baton__stat_inc(c, BATON__ST_WAKEUPS + k);
    return rc;
}

void baton__stat_lost(baton_client *c, baton__lost_cause cause, const char *name)
{
    baton__stat_inc(c, BATON__ST_LOST + cause);
    baton__log(c, BATON_LOG_ERROR, "hold lost: lock %s (%s)", name ? name : "?", lost_names[cause]);
}

void baton__stat_renewals(baton_client *c, const signed char *result, size_t n)
{
    size_t failed = 0;
    for (size_t i = 0; i < n; i++)
        failed += result[i] < 0;
    baton__stat_add(c, BATON__ST_RENEWALS_SENT, n);
    baton__stat_add(c, BATON__ST_RENEWALS_FAILED, failed);
    if (failed)
        baton__log(c, BATON_LOG_WARN, "renewal failed: %zu of %zu holds got no answer", failed, n);
    else if (n)
        baton__log(c, BATON_LOG_DEBUG, "renewal: %zu hold%s renewed", n, n == 1 ? "" : "s");
}

void baton__stat_renewal_late(baton_client *c, int64_t late_us, int64_t period_us)
{
    if (late_us <= period_us / 3)
        return;
    baton__stat_inc(c, BATON__ST_RENEWALS_LATE);
    baton__log(c, BATON_LOG_WARN, "renewal late: the watchdog ran %lld ms after it was due",
               (long long)(late_us / 1000));
}

void baton__stat_sub_connect(baton_client *c, int rc)
{
    if (rc != BATON_OK) {
        if (!atomic_exchange(&c->stats.down, true))
            baton__log(c, BATON_LOG_WARN, "pub/sub connection lost: reconnecting (%s)",
                       baton_err_name(rc));
        return;
    }
    bool was_down = atomic_exchange(&c->stats.down, false);
    /* The dispatcher connects once at its start; every later connection is a reconnect. */
    if (atomic_fetch_add_explicit(&c->stats.v[BATON__ST_SUB_CONNECTS], 1, memory_order_relaxed) ||
        was_down)
        baton__log(c, BATON_LOG_INFO, "pub/sub connection re-established");
}

void baton__stat_epoch_changed(baton_client *c)
{
    baton__stat_inc(c, BATON__ST_EPOCHS);
    baton__log(c, BATON_LOG_WARN,
               "server restarted (new run_id, epoch %llu): every hold is reported lost",
               (unsigned long long)baton_client_epoch(c));
}

/* The counters the tests and the benchmark have always read (internal.h). */
void baton__client_stats(baton_client *c, baton__stats *out)
{
    const atomic_uint_fast64_t *v = c->stats.v;
    out->commands = atomic_load(&v[BATON__ST_ROUND_TRIPS]);
    out->pubsub = atomic_load(&v[BATON__ST_SUBSCRIBES]) + atomic_load(&v[BATON__ST_UNSUBSCRIBES]);
}

void baton__count_round_trip(baton_client *c)
{
    baton__stat_inc(c, BATON__ST_ROUND_TRIPS);
}

/* ------------------------------- snapshot --------------------------------------------- */

typedef struct hist_snap {
    uint64_t bucket[BATON__HIST_BUCKETS];
    uint64_t count, sum_us, max_us;
} hist_snap;

static void hist_read(const baton__hist *h, hist_snap *out)
{
    out->count = 0;
    for (size_t i = 0; i < BATON__HIST_BUCKETS; i++) {
        out->bucket[i] = atomic_load_explicit(&h->bucket[i], memory_order_relaxed);
        out->count += out->bucket[i]; /* consistent with the buckets read */
    }
    out->sum_us = atomic_load_explicit(&h->sum_us, memory_order_relaxed);
    out->max_us = atomic_load_explicit(&h->max_us, memory_order_relaxed);
}

static uint64_t percentile(const hist_snap *h, unsigned permille)
{
    if (h->count == 0)
        return 0;
    uint64_t rank = (h->count * permille + 999) / 1000, seen = 0;
    for (size_t i = 0; i < BATON__HIST_BUCKETS; i++) {
        seen += h->bucket[i];
        if (seen >= rank) {
            uint64_t top = bucket_top(i);
            return top < h->max_us ? top : h->max_us;
        }
    }
    return h->max_us;
}

static uint64_t load(baton_client *c, int id)
{
    return atomic_load_explicit(&c->stats.v[id], memory_order_relaxed);
}

int baton_client_stats(baton_client *c, baton_stats *out)
{
    if (!c || !out)
        return BATON_EINVAL;
    memset(out, 0, sizeof *out);
    hist_snap h; /* 2.5 KiB */
    for (int k = 0; k < BATON__K_COUNT; k++) {
        baton_kind_stats *ks = &out->kind[k];
        ks->acquisitions = load(c, BATON__ST_ACQUIRED + k);
        ks->attempts = load(c, BATON__ST_ATTEMPTS + k);
        ks->wakeups = load(c, BATON__ST_WAKEUPS + k);
        hist_read(&c->stats.wait[k], &h);
        ks->wait = (baton_wait_stats){h.count, h.sum_us, percentile(&h, 500), percentile(&h, 990),
                                      h.max_us};
    }
    out->holds_lost_expired = load(c, BATON__ST_LOST + BATON__LOST_EXPIRED);
    out->holds_lost_deleted = load(c, BATON__ST_LOST + BATON__LOST_DELETED);
    out->holds_lost_restart = load(c, BATON__ST_LOST + BATON__LOST_RESTARTED);
    out->holds_lost_failover = load(c, BATON__ST_LOST + BATON__LOST_MASTER_CHANGED);
    out->renewals_sent = load(c, BATON__ST_RENEWALS_SENT);
    out->renewals_failed = load(c, BATON__ST_RENEWALS_FAILED);
    out->renewals_late = load(c, BATON__ST_RENEWALS_LATE);
    out->connections_opened = load(c, BATON__ST_CONNECTS);
    uint64_t sub = load(c, BATON__ST_SUB_CONNECTS);
    out->pubsub_reconnects = sub ? sub - 1 : 0;
    out->subscribes = load(c, BATON__ST_SUBSCRIBES);
    out->unsubscribes = load(c, BATON__ST_UNSUBSCRIBES);
    out->messages = load(c, BATON__ST_MESSAGES);
    out->noscript_reloads = load(c, BATON__ST_NOSCRIPT);
    out->round_trips = load(c, BATON__ST_ROUND_TRIPS);
    out->redirects_moved = load(c, BATON__ST_REDIRECTS + BATON__REDIR_MOVED);
    out->redirects_ask = load(c, BATON__ST_REDIRECTS + BATON__REDIR_ASK);
    out->redirects_tryagain = load(c, BATON__ST_REDIRECTS + BATON__REDIR_TRYAGAIN);
    out->redirects_clusterdown = load(c, BATON__ST_REDIRECTS + BATON__REDIR_CLUSTERDOWN);
    out->slow_acquires = load(c, BATON__ST_SLOW_ACQUIRES);
    out->epoch = baton_client_epoch(c);
    return BATON_OK;
}

/* ------------------------------- text formats ----------------------------------------- */

/* An snprintf-style writer: keeps counting past the end of the buffer. */
typedef struct out {
    char *buf;
    size_t len, used;
} out;

static void put(out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = o->used < o->len ? o->len - o->used : 0;
    int n = vsnprintf(room ? o->buf + o->used : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        o->used += (size_t)n;
}

/* A Prometheus metric's header: "# HELP" and "# TYPE". */
static void head(out *o, const char *name, const char *type, const char *help)
{
    put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One counter family with a label taking each of names[0..n) over v[base..base+n). */
static void family(out *o, const baton_client *c, const char *name, const char *help,
                   const char *label, const char *const *names, int base, int n)
{
    head(o, name, "counter", help);
    for (int i = 0; i < n; i++)
        put(o, "%s{%s=\"%s\"} %llu\n", name, label, names[i],
            (unsigned long long)atomic_load(&c->stats.v[base + i]));
}

static void counter(out *o, const char *name, const char *help, uint64_t v)
{
    head(o, name, "counter", help);
    put(o, "%s %llu\n", name, (unsigned long long)v);
}

/* Wait histograms, re-grouped at powers of four µs (bucket edges: exact counts). */
static void prom_wait(out *o, baton_client *c, hist_snap *h)
{
    static const char name[] = "baton_acquire_wait_seconds";
    head(o, name, "histogram", "Time from an acquire call to its success.");
    for (int k = 0; k < BATON__K_COUNT; k++) {
        hist_read(&c->stats.wait[k], h);
        uint64_t below = 0;
        size_t i = 0;
        for (int e = 4; e <= 26; e += 2) { /* 16 µs .. 67 s */
            uint64_t edge = (uint64_t)1 << e;
            for (; i < BATON__HIST_BUCKETS && bucket_top(i) < edge; i++)
                below += h->bucket[i];
            put(o, "%s_bucket{kind=\"%s\",le=\"%.6f\"} %llu\n", name, kind_names[k], edge / 1e6,
                (unsigned long long)below);
        }
        put(o, "%s_bucket{kind=\"%s\",le=\"+Inf\"} %llu\n", name, kind_names[k],
            (unsigned long long)h->count);
        put(o, "%s_sum{kind=\"%s\"} %.6f\n", name, kind_names[k], h->sum_us / 1e6);
        put(o, "%s_count{kind=\"%s\"} %llu\n", name, kind_names[k], (unsigned long long)h->count);
    }
    static const char max[] = "baton_acquire_wait_max_seconds";
    head(o, max, "gauge", "The longest time from an acquire call to its success.");
    for (int k = 0; k < BATON__K_COUNT; k++)
        put(o, "%s{kind=\"%s\"} %.6f\n", max, kind_names[k],
            atomic_load(&c->stats.wait[k].max_us) / 1e6);
}

static void prometheus(out *o, baton_client *c, const baton_stats *s, hist_snap *h)
{
    family(o, c, "baton_acquisitions_total", "Successful acquisitions.", "kind", kind_names,
           BATON__ST_ACQUIRED, BATON__K_COUNT);
    family(o, c, "baton_acquire_attempts_total", "Acquire scripts run (latch: count reads).",
           "kind", kind_names, BATON__ST_ATTEMPTS, BATON__K_COUNT);
    family(o, c, "baton_wakeups_total", "Waits ended by a message or a reconnection.", "kind",
           kind_names, BATON__ST_WAKEUPS, BATON__K_COUNT);
    prom_wait(o, c, h);
    family(o, c, "baton_holds_lost_total", "Holds reported lost, by cause.", "cause", lost_names,
           BATON__ST_LOST, BATON__LOST_COUNT);
    counter(o, "baton_renewals_total", "Hold renewals sent by the watchdog.", s->renewals_sent);
    counter(o, "baton_renewal_failures_total", "Hold renewals that got no answer.",
            s->renewals_failed);
    counter(o, "baton_renewals_late_total", "Watchdog rounds that started over a third late.",
            s->renewals_late);
    counter(o, "baton_connections_opened_total", "Command connections opened.",
            s->connections_opened);
    counter(o, "baton_pubsub_reconnects_total", "Subscriber connection re-established.",
            s->pubsub_reconnects);
    counter(o, "baton_pubsub_subscribes_total", "SUBSCRIBE commands sent.", s->subscribes);
    counter(o, "baton_pubsub_unsubscribes_total", "UNSUBSCRIBE commands sent.", s->unsubscribes);
    counter(o, "baton_pubsub_messages_total", "Pub/sub messages received.", s->messages);
    counter(o, "baton_noscript_reloads_total", "Scripts sent again after NOSCRIPT.",
            s->noscript_reloads);
    counter(o, "baton_round_trips_total", "Round trips on command connections.", s->round_trips);
    family(o, c, "baton_redirections_total", "Cluster redirections followed.", "kind",
           redirect_names, BATON__ST_REDIRECTS, BATON__REDIR_COUNT);
    counter(o, "baton_slow_acquires_total", "Acquisitions longer than slow_acquire_ms.",
            s->slow_acquires);
    head(o, "baton_server_epoch", "gauge", "Distinct server runs seen (restarts + 1).");
    put(o, "baton_server_epoch %llu\n", (unsigned long long)s->epoch);
}

static void json(out *o, const baton_stats *s)
{
    put(o, "{\"kinds\":{");
    for (int k = 0; k < BATON__K_COUNT; k++) {
        const baton_kind_stats *ks = &s->kind[k];
        put(o,
            "%s\"%s\":{\"acquisitions\":%llu,\"attempts\":%llu,\"wakeups\":%llu,"
            "\"wait_us\":{\"count\":%llu,\"sum\":%llu,\"p50\":%llu,\"p99\":%llu,\"max\":%llu}}",
            k ? "," : "", kind_names[k], (unsigned long long)ks->acquisitions,
            (unsigned long long)ks->attempts, (unsigned long long)ks->wakeups,
            (unsigned long long)ks->wait.count, (unsigned long long)ks->wait.sum_us,
            (unsigned long long)ks->wait.p50_us, (unsigned long long)ks->wait.p99_us,
            (unsigned long long)ks->wait.max_us);
    }
    put(o,
        "},\"holds_lost\":{\"expired\":%llu,\"deleted\":%llu,\"server_restarted\":%llu,"
        "\"master_changed\":%llu},\"renewals\":{\"sent\":%llu,\"failed\":%llu,\"late\":%llu},"
        "\"connections_opened\":%llu,\"pubsub\":{\"reconnects\":%llu,\"subscribes\":%llu,"
        "\"unsubscribes\":%llu,\"messages\":%llu},\"noscript_reloads\":%llu,"
        "\"round_trips\":%llu,\"redirections\":{\"moved\":%llu,\"ask\":%llu,\"tryagain\":%llu,"
        "\"clusterdown\":%llu},\"slow_acquires\":%llu,\"epoch\":%llu}",
        (unsigned long long)s->holds_lost_expired, (unsigned long long)s->holds_lost_deleted,
        (unsigned long long)s->holds_lost_restart, (unsigned long long)s->holds_lost_failover,
        (unsigned long long)s->renewals_sent, (unsigned long long)s->renewals_failed,
        (unsigned long long)s->renewals_late, (unsigned long long)s->connections_opened,
        (unsigned long long)s->pubsub_reconnects, (unsigned long long)s->subscribes,
        (unsigned long long)s->unsubscribes, (unsigned long long)s->messages,
        (unsigned long long)s->noscript_reloads, (unsigned long long)s->round_trips,
        (unsigned long long)s->redirects_moved, (unsigned long long)s->redirects_ask,
        (unsigned long long)s->redirects_tryagain, (unsigned long long)s->redirects_clusterdown,
        (unsigned long long)s->slow_acquires, (unsigned long long)s->epoch);
}

int baton_client_stats_format(baton_client *c, int format, char *buf, size_t len)
{
    if (!c || (!buf && len > 0) || (format != BATON_STATS_PROMETHEUS && format != BATON_STATS_JSON))
        return BATON_EINVAL;
    baton_stats s;
    baton_client_stats(c, &s);
    out o = {buf, len, 0};
    if (len > 0)
        buf[0] = '\0';
    if (format == BATON_STATS_JSON) {
        json(&o, &s);
    } else {
        hist_snap h;
        prometheus(&o, c, &s, &h);
    }
    return o.used > INT32_MAX ? INT32_MAX : (int)o.used;
}

uint64_t baton_client_epoch(const baton_client *c)
{
    if (!c)
        return 0;
    baton__mutex_lock((pthread_mutex_t *)&c->run_mu);
    uint64_t e = c->epoch;
    baton__mutex_unlock((pthread_mutex_t *)&c->run_mu);
    return e;
}
