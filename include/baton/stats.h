/*
 * What a running client is doing, in numbers: counters and wait-time summaries since the
 * client was opened, read as a struct or formatted for Prometheus or as JSON, so a service
 * can expose them on its own /metrics endpoint. Metric names and meanings:
 * docs/observability.md. The log hook (events a human wants to see) is in baton_options.
 *
 * Threads: both functions may be called from any thread at any time while the client is
 * open. Counters are read one by one without stopping the client, so a snapshot taken
 * while other threads work is not atomic as a whole (each counter is exact on its own).
 */
#ifndef BATON_STATS_H
#define BATON_STATS_H

#include <baton/client.h>

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The primitives counted apart, the index of baton_stats.kind[]. */
#define BATON_KIND_LOCK 0      /* reentrant lock (baton_lock_open) */
#define BATON_KIND_FAIRLOCK 1  /* fair lock (baton_fairlock_open) */
#define BATON_KIND_MULTILOCK 2 /* multi-lock and Redlock groups (members count too) */
#define BATON_KIND_SEMAPHORE 3 /* counting semaphore */
#define BATON_KIND_LATCH 4     /* count-down latch (an acquisition is an await that opened) */
#define BATON_KIND_RWLOCK 5    /* read-write lock, read and write handles alike */
#define BATON_KIND_ELECTION 6  /* leader election: observations woken by a change */
#define BATON_KIND_BARRIER 7   /* barriers: awaits (an acquisition is an await that tripped) */
/* The number of kinds. It grew from 5 to 6 with the read-write lock and to 8 in 0.2 with
 * election and barriers (counted as latch waits before): before 1.0 a minor release has its
 * own SONAME, and programs built against an older header must be rebuilt. */
#define BATON_STATS_KINDS 8

/* Time spent in successful acquisitions (from the call to its return), in microseconds. */
typedef struct baton_wait_stats {
    uint64_t count;  /* successful acquisitions measured */
    uint64_t sum_us; /* their total time */
    uint64_t p50_us; /* median, from a log-linear histogram: within 12.5 % above the truth */
    uint64_t p99_us; /* 99th percentile, likewise */
    uint64_t max_us; /* the longest, exact */
} baton_wait_stats;

typedef struct baton_kind_stats {
    uint64_t acquisitions; /* calls that acquired (lock, permits) or found a latch open */
    uint64_t attempts;     /* runs of the acquire script (a latch: reads of its count) */
    uint64_t wakeups;      /* waits ended by a message or a reconnection, not a timeout */
    baton_wait_stats wait;
} baton_kind_stats;

/* A snapshot of one client's counters since it was opened. Fields are only ever appended. */
typedef struct baton_stats {
    baton_kind_stats kind[BATON_STATS_KINDS]; /* indexed by BATON_KIND_* */
    uint64_t holds_lost_expired;              /* lease ran out while renewals failed or were late */
    uint64_t holds_lost_deleted;  /* a renewal found the hold gone: deleted or taken over */
    uint64_t holds_lost_restart;  /* the server restarted (new epoch): every hold reported */
    uint64_t holds_lost_failover; /* the master changed (Sentinel) and the new one lacks it */
    uint64_t renewals_sent;       /* hold renewals sent by the watchdog (one per hold) */
    uint64_t renewals_failed;     /* of those, renewals that got no answer */
    uint64_t renewals_late;       /* watchdog rounds that started over a third late */
    uint64_t connections_opened;  /* command connections opened (first and replacements) */
    uint64_t pubsub_reconnects;   /* subscriber connection re-established after a loss */
    uint64_t subscribes;          /* SUBSCRIBE commands sent */
    uint64_t unsubscribes;        /* UNSUBSCRIBE commands sent */
    uint64_t messages;            /* pub/sub messages received */
    uint64_t noscript_reloads;    /* NOSCRIPT answers: the script body was sent again */
    uint64_t round_trips;         /* request/reply round trips on command connections */
    uint64_t redirects_moved;     /* Cluster redirections followed */
    uint64_t redirects_ask;
    uint64_t redirects_tryagain;
    uint64_t redirects_clusterdown;
    uint64_t slow_acquires; /* acquisitions longer than slow_acquire_ms */
    uint64_t epoch;         /* baton_client_epoch() at the snapshot */
} baton_stats;

/*
 * Fills *out with the client's counters. Never blocks on the server (reads memory only).
 * Returns BATON_OK, or BATON_EINVAL if c or out is NULL.
 */
BATON_API int baton_client_stats(baton_client *c, baton_stats *out);

/* Output formats of baton_client_stats_format(); give exactly one. */
#define BATON_STATS_PROMETHEUS 1 /* Prometheus text exposition format 0.0.4 */
#define BATON_STATS_JSON 2       /* one JSON object, no trailing newline */

/*
 * Formats the client's counters as text into buf (len bytes, always NUL-terminated when
 * len > 0), like snprintf: returns the length of the whole text (without the NUL), so a
 * return >= len means it was cut short and tells the size needed. buf may be NULL when len
 * is 0. Never blocks on the server.
 *
 * Returns that length (>= 0), or BATON_EINVAL (c NULL, buf NULL with len > 0, format not
 * exactly one of BATON_STATS_PROMETHEUS and BATON_STATS_JSON).
 */
BATON_API int baton_client_stats_format(baton_client *c, int format, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* BATON_STATS_H */
