/*
 * Private to baton: the client's counters, wait-time histograms and log hook (stats.c).
 * Every file of the library may count: the calls are one line at the point that counts,
 * cost one relaxed atomic add (no mutex), and do nothing for a NULL client.
 */
#ifndef BATON_CORE_STATS_H
#define BATON_CORE_STATS_H

#include <baton/baton.h>

#include <stdatomic.h>
#include <stddef.h>

/* What a primitive's calls are counted as: one of the public header's BATON_KIND_*
 * (baton_stats.kind[]), which each primitive names itself; the counters only index by it. */
typedef int baton__kind;
#define BATON__K_COUNT BATON_STATS_KINDS

/* Why a hold was reported lost. */
typedef enum baton__lost_cause {
    BATON__LOST_EXPIRED,        /* its lease ran out (renewals failed, or came too late) */
    BATON__LOST_DELETED,        /* a renewal found the owner gone: deleted or taken over */
    BATON__LOST_RESTARTED,      /* the server's run_id changed (epoch) */
    BATON__LOST_MASTER_CHANGED, /* reserved for Sentinel/Cluster failover */
    BATON__LOST_COUNT
} baton__lost_cause;

/* Redirections by kind (Cluster). */
typedef enum baton__redirect {
    BATON__REDIR_MOVED,
    BATON__REDIR_ASK,
    BATON__REDIR_TRYAGAIN,
    BATON__REDIR_CLUSTERDOWN,
    BATON__REDIR_COUNT
} baton__redirect;

/* The counters. The per-kind ones are a base plus a baton__kind, the lost holds a base plus
 * a cause, the redirections a base plus a baton__redirect. */
typedef enum baton__stat_id {
    BATON__ST_ACQUIRED = 0,                                             /* + kind: acquisitions */
    BATON__ST_ATTEMPTS = BATON__ST_ACQUIRED + BATON__K_COUNT,           /* + kind: server tries */
    BATON__ST_WAKEUPS = BATON__ST_ATTEMPTS + BATON__K_COUNT,            /* + kind: waits woken */
    BATON__ST_LOST = BATON__ST_WAKEUPS + BATON__K_COUNT,                /* + cause */
    BATON__ST_REDIRECTS = BATON__ST_LOST + BATON__LOST_COUNT,           /* + baton__redirect */
    BATON__ST_RENEWALS_SENT = BATON__ST_REDIRECTS + BATON__REDIR_COUNT, /* holds renewed */
    BATON__ST_RENEWALS_FAILED, /* holds whose renewal got no answer */
    BATON__ST_RENEWALS_LATE,   /* renewal rounds started late */
    BATON__ST_CONNECTS,        /* command connections opened */
    BATON__ST_SUB_CONNECTS,    /* subscriber connections opened (the first is no reconnect) */
    BATON__ST_SUBSCRIBES,      /* SUBSCRIBE sent */
    BATON__ST_UNSUBSCRIBES,    /* UNSUBSCRIBE sent */
    BATON__ST_MESSAGES,        /* pub/sub messages received */
    BATON__ST_NOSCRIPT,        /* NOSCRIPT answered: the script was sent again */
    BATON__ST_ROUND_TRIPS,     /* see baton__stats.commands */
    BATON__ST_EPOCHS,          /* server restarts seen */
    BATON__ST_SLOW_ACQUIRES,   /* acquisitions over slow_acquire_ms */
    BATON__ST_COUNT
} baton__stat_id;

/* Wait times in µs, log-linear: exact below 16 µs, then 8 buckets per power of two (at
 * most 12.5 % wide), up to 2^40 µs; larger values land in the last bucket. */
#define BATON__HIST_BUCKETS (16 + 37 * 8)

typedef struct baton__hist {
    atomic_uint_fast64_t bucket[BATON__HIST_BUCKETS];
    atomic_uint_fast64_t count, sum_us, max_us;
} baton__hist;

/* Embedded in the client (zeroed with it); baton__stats_configure fills the options. */
typedef struct baton__counters {
    atomic_uint_fast64_t v[BATON__ST_COUNT];
    baton__hist wait[BATON__K_COUNT];
    atomic_bool off;  /* counting paused (the benchmark's A/B); round trips always count */
    atomic_bool down; /* the subscriber connection failed and is not back yet (logging) */
    void (*log_fn)(void *arg, int level, const char *msg);
    void *log_arg;
    int log_level;
    int64_t slow_acquire_us; /* 0: no slow-acquire event */
} baton__counters;

/* Copies the log hook and the slow-acquire threshold from the options (NULL: defaults). */
void baton__stats_configure(baton_client *c, const baton_options *o);
/* Pauses (on = false) or resumes counting, for the benchmark's A/B runs. */
void baton__stats_enable(baton_client *c, bool on);

void baton__stat_inc(baton_client *c, baton__stat_id id);
void baton__stat_add(baton_client *c, baton__stat_id id, uint64_t n);
/* The start of an acquisition: the monotonic clock, or 0 while counting is paused. */
int64_t baton__stat_start(baton_client *c);
/* An acquisition of kind k that began at start_us (baton__stat_start) ended with rc: a
 * success counts, its wait goes into the histogram, a slow one is logged (name: what). */
void baton__stat_acquire(baton_client *c, baton__kind k, int rc, int64_t start_us,
                         const char *name);
/* A wait of kind k ended with rc (baton__sub_wait's): BATON_OK counts a wake-up. Returns rc. */
int baton__stat_woken(baton_client *c, baton__kind k, int rc);
/* A hold of the named lock was reported lost; counted and logged (BATON_LOG_ERROR). */
void baton__stat_lost(baton_client *c, baton__lost_cause cause, const char *name);
/* One renewal round: result[i] 1 renewed, 0 gone, -1 no answer (logged when any). */
void baton__stat_renewals(baton_client *c, const signed char *result, size_t n);
/* A renewal round started late_us after it was due; logged when over a third of it. */
void baton__stat_renewal_late(baton_client *c, int64_t late_us, int64_t period_us);
/* The dispatcher's connection attempt ended with rc: counts reconnects, logs loss/return. */
void baton__stat_sub_connect(baton_client *c, int rc);
/* The server's run_id changed: counted and logged (BATON_LOG_WARN). */
void baton__stat_epoch_changed(baton_client *c);

/* Formats a message for the log hook if one is set and level is within its log_level. The
 * hook runs on the calling thread, which may be a library thread holding internal locks. */
void baton__log(baton_client *c, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Client-side counters, for tests and the benchmark (BENCH.md's "client round trips"):
 * commands: request/reply round trips on command connections (a retry or a NOSCRIPT
 * fallback counts again; a pipelined batch counts once; connection handshakes do not);
 * pubsub: SUBSCRIBE and UNSUBSCRIBE commands sent. */
typedef struct baton__stats {
    uint64_t commands;
    uint64_t pubsub;
} baton__stats;
void baton__client_stats(baton_client *c, baton__stats *out);
void baton__count_round_trip(baton_client *c);

#endif /* BATON_CORE_STATS_H */
