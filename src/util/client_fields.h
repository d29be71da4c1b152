/*
 * Private to baton: the client structure, shared by the core's files (client, dispatcher,
 * watchdog, errors). Modules see only internal.h.
 */
#ifndef BATON_CORE_CLIENT_H
#define BATON_CORE_CLIENT_H

#include "util.h"

#include <stdatomic.h>

typedef struct baton__dispatcher baton__dispatcher;
typedef struct baton__watchdog baton__watchdog;

struct baton_client {
    uint64_t serial;     /* unique per client in this process: keys the error details */
    char id[40];         /* random UUID, the owner prefix */
    unsigned generation; /* baton__process_generation() at open: see process.c */
    long pid;            /* the process that opened it, for messages */
    /* "host:pid" of that process, recorded beside each hold (baton__client_origin) */
    char origin[BATON__ORIGIN_LEN];
    baton__config cfg;

    struct baton__pool *pool; /* command connections to the target (conn.h) */

    baton__counters stats; /* counters, wait histograms, log hook (stats.c) */

    struct ssl_ctx_st *tls; /* rediss://: the TLS context every connection uses; or NULL */
    char *tls_name;         /* tls_sni, or NULL: the URL's host */
    bool tls_insecure;      /* tls_insecure_skip_verify */

    pthread_mutex_t run_mu;  /* guards the fields below */
    char run_id[48];         /* the server's run_id as last seen; "" before the first */
    char run_where[280];     /* the address it was seen at */
    uint64_t epoch;          /* distinct server runs seen: 1 after open */
    char warning[320];       /* the server's configuration endangers baton (eviction); "" */
    atomic_int server_major; /* the server's major version (INFO redis_version); 0 unknown */
    struct {
        void (*fn)(baton_client *c, int event, void *arg);
        void *arg;
    } epoch_hooks[4];             /* BATON__EPOCH_HOOKS (conn.h) */
    struct baton__topology *topo; /* Sentinel: who is master (topology.c); NULL otherwise */

    pthread_mutex_t lazy_mu; /* guards creation of the two threads below */
    baton__dispatcher *disp; /* created on the first subscription */
    baton__watchdog *wd;     /* created on the first watchdog hold */
    /* how wd goes at close, set with it by its maker (src/lockbase: the client calls no
     * floor above it) */
    void (*wd_free)(baton__watchdog *w, bool forked);

    struct baton__evloop *ev; /* waits in progress, cancellation, async operations */

    _Atomic int64_t record_until_us; /* the client's record outlives this (record.c) */
    atomic_bool record_hooked;       /* record.c's epoch hook is added */
};

/* Stop the thread and free; forked: c was copied into a child by fork(), whose copy has no
 * thread to stop and mutexes that may be copied locked: only descriptors and memory go. */
void baton__dispatcher_free(baton__dispatcher *d, bool forked);
void baton__watchdog_free(baton__watchdog *w, bool forked);
/* fork()s this process came out of (see process.c); installs the fork handler. */
unsigned baton__process_generation(void);
void baton__forget_errors(baton_client *c);
/* The calling thread's detail on c, registered or not (an open that fails). */
const char *baton__errmsg_of(const baton_client *c);
void baton__set_open_errmsg(const char *msg);

#endif /* BATON_CORE_CLIENT_H */
