/*
 * Private to baton: the ground floor (src/util), which every floor uses and which uses none:
 * threads and time, memory and strings, names and the keys derived from them, errors with
 * their detail, the fork guard, the client's configuration as data, and the counters
 * (stats.h). Nothing here is API.
 */
#ifndef BATON_UTIL_H
#define BATON_UTIL_H

#include <baton/baton.h>

#include <pthread.h>
#include <stdarg.h>

#include "stats.h"

/* ------------------------------------------------------------------------------------------
 * Threads and time
 * ---------------------------------------------------------------------------------------- */

/* pthread wrappers: a failing mutex or condition call is a bug in baton, so they abort. */
void baton__mutex_init(pthread_mutex_t *m);
void baton__mutex_destroy(pthread_mutex_t *m);
void baton__mutex_lock(pthread_mutex_t *m);
void baton__mutex_unlock(pthread_mutex_t *m);
void baton__cond_init(pthread_cond_t *c); /* waits on CLOCK_MONOTONIC */
void baton__cond_destroy(pthread_cond_t *c);
void baton__cond_signal(pthread_cond_t *c);
void baton__cond_broadcast(pthread_cond_t *c);
/* Waits until signalled or until the monotonic deadline (µs; BATON__NO_DEADLINE: none).
 * Returns 0, or ETIMEDOUT once the deadline has passed. */
int baton__cond_wait_until(pthread_cond_t *c, pthread_mutex_t *m, int64_t deadline_us);

#define BATON__NO_DEADLINE INT64_MAX

/* Takes node off a doubly linked list whose links are its fields PREV and NEXT and whose
 * first node is the lvalue head; BATON__UNLINK_TAILED also keeps the lvalue tail (its last
 * node). The node's own links are left as they were. */
#define BATON__UNLINK(node, PREV, NEXT, head)                                                      \
    do {                                                                                           \
        if ((node)->PREV)                                                                          \
            (node)->PREV->NEXT = (node)->NEXT;                                                     \
        else                                                                                       \
            (head) = (node)->NEXT;                                                                 \
        if ((node)->NEXT)                                                                          \
            (node)->NEXT->PREV = (node)->PREV;                                                     \
    } while (0)
#define BATON__UNLINK_TAILED(node, PREV, NEXT, head, tail)                                         \
    do {                                                                                           \
        if (!(node)->NEXT)                                                                         \
            (tail) = (node)->PREV;                                                                 \
        BATON__UNLINK(node, PREV, NEXT, head);                                                     \
    } while (0)
/* Puts node last on such a list (head and tail lvalues). */
#define BATON__APPEND(node, PREV, NEXT, head, tail)                                                \
    do {                                                                                           \
        (node)->NEXT = NULL;                                                                       \
        (node)->PREV = (tail);                                                                     \
        if (tail)                                                                                  \
            (tail)->NEXT = (node);                                                                 \
        else                                                                                       \
            (head) = (node);                                                                       \
        (tail) = (node);                                                                           \
    } while (0)

/* Monotonic clock in microseconds. */
int64_t baton__now_us(void);
/* CLOCK_BOOTTIME in microseconds: unlike baton__now_us it counts a suspend of the machine.
 * For certainty about leases (the watchdog), never for waits (pthread waits take only the
 * monotonic and real-time clocks). */
int64_t baton__boot_us(void);
/* now + ms as a deadline; BATON_WAIT_FOREVER (negative) gives BATON__NO_DEADLINE. */
int64_t baton__deadline_after_ms(int64_t ms);

/* A small integer naming the calling thread, unique in the process, never reused. */
uint64_t baton__thread_id(void);
/* ------------------------------------------------------------------------------------------
 * Memory and strings
 * ---------------------------------------------------------------------------------------- */

/* Fills buf with n bytes from getrandom(); how many it got (n unless the kernel has no
 * entropy source, which Linux >= 3.17 always has). */
size_t baton__random_bytes(void *buf, size_t n);
/* Room for one more element in the array at arrp (a T ** for an array of T, elem = sizeof
 * (T)) of *cap elements, n of them in use: when full, its capacity doubles (the first:
 * first). false: out of memory (the array as it was). */
bool baton__grow(void *arrp, size_t *cap, size_t n, size_t elem, size_t first);
char *baton__strdup(const char *s);
char *baton__strndup(const char *s, size_t n);
/* printf into a new string; NULL when out of memory. */
char *baton__asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A string-keyed hash map of void *; keys are copied, or borrowed (baton__map_init_borrowing:
 * each key is the caller's and lives as long as its entry, as a value's own name does).
 * Not thread-safe. */
typedef struct baton__map_entry {
    char *key;
    void *val;
    struct baton__map_entry *next;
} baton__map_entry;

typedef struct baton__map {
    baton__map_entry **buckets;
    size_t nbuckets;
    size_t count;
    bool borrowing;
} baton__map;

void baton__map_init(baton__map *m);
void baton__map_init_borrowing(baton__map *m);
void baton__map_free(baton__map *m); /* frees entries and keys it copied, not values */
void *baton__map_get(const baton__map *m, const char *key);
int baton__map_put(baton__map *m, const char *key, void *val); /* BATON_OK / BATON_ENOMEM */
void *baton__map_remove(baton__map *m, const char *key);       /* the value, or NULL */
/* Calls fn for each entry; fn must not change the map. */
void baton__map_each(const baton__map *m, void (*fn)(const char *key, void *val, void *arg),
                     void *arg);

/* ------------------------------------------------------------------------------------------
 * Names (Redisson's rules)
 * ---------------------------------------------------------------------------------------- */

/* BATON_OK if name is non-NULL, non-empty and at most BATON_MAX_NAME_LEN bytes. */
int baton__check_name(const char *name);
/* BATON_OK if ms is a valid wait (BATON_WAIT_FOREVER or 0..BATON_MAX_DURATION_MS). */
int baton__check_wait(int64_t ms);
/* BATON_OK if ms is a valid lease (BATON_LEASE_WATCHDOG or 1..BATON_MAX_DURATION_MS). */
int baton__check_lease(int64_t ms);
/* A lease as the caller gave it, as the library reads it: 0 (the default) is
 * BATON_LEASE_WATCHDOG; anything else is itself (-1, the watchdog's before 0.2.0, is refused
 * from 0.3.0 by baton__check_wait_lease: common.h). */
static inline int64_t baton__lease_in(int64_t ms)
{
    return ms == 0 ? BATON_LEASE_WATCHDOG : ms;
}
/* "{name}", or name itself if it already contains '{'. New string; NULL when out of memory. */
char *baton__hash_tag(const char *name);
/* prefix + hash_tag(name) + suffix (suffix may be NULL). New string or NULL. */
char *baton__derive_key(const char *prefix, const char *name, const char *suffix);
/* One key of an object, derived from its name: *out = prefix + hash_tag(name) + suffix. */
typedef struct baton__key_spec {
    char **out;
    const char *prefix;
    const char *suffix; /* may be NULL */
} baton__key_spec;
/* Derives every key of specs[0..n), all in one allocation (specs[0]'s: free them with
 * baton__free_keys, never one by one); false when memory ran out (then every *out is
 * NULL). */
bool baton__derive_keys(const char *name, const baton__key_spec *specs, size_t n);
/* Frees the keys of specs[0..n) that baton__derive_keys made (or none: all NULL) and sets
 * each NULL. */
void baton__free_keys(const baton__key_spec *specs, size_t n);
/* Fills k[] (at most BATON__MAX_KEYS) with the keys of an object's state impl; how many. */
#define BATON__MAX_KEYS 8
typedef size_t (*baton__keys_fn)(void *impl, baton__key_spec *k);

/* The lost descriptor of a handle (baton_lock_lost_fd, baton_permits_lost_fd): under the
 * handle's mutex, makes its pipe (pipe[0] < 0: none yet; written at once when the hold is
 * lost already) and sets *fd to its read end. BATON_OK, or BATON_ENOMEM with pipe2's
 * reason recorded on c (pipe[] stays -1). */
int baton__lost_pipe_fd(baton_client *c, int pipe[2], bool lost, int *fd);

/* ------------------------------------------------------------------------------------------
 * Errors: codes with a detail recorded per calling thread and client
 * ---------------------------------------------------------------------------------------- */

/* Records a detail for the calling thread's next baton_client_errmsg(c); returns code. */
int baton__fail(baton_client *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Forgets the calling thread's detail for c (a call that succeeds starts clean). */
void baton__clear_error(baton_client *c);

/* What every verb on a client's objects does first: forgets the calling thread's detail,
 * and refuses (BATON_ENOTSUP) a client that a fork() copied into this process (process.c). */
int baton__client_enter(baton_client *c);
/* True when c was opened by an ancestor of this process (fork()); false for NULL. */
bool baton__client_forked(const baton_client *c);

/* ------------------------------------------------------------------------------------------
 * The registry of live clients and handles (live.c): each kind's magic number, checked on
 * entry before the object is read
 * ---------------------------------------------------------------------------------------- */

#define BATON__MAGIC_CLIENT 0xBA70C11Eu
#define BATON__MAGIC_LOCK 0xBA7010C4u
#define BATON__MAGIC_RWLOCK 0xBA70A3D1u
#define BATON__MAGIC_OBJECT 0xBA70B1EC /* latch, semaphore, permits, election, barrier */

enum { BATON__LIVE_NONE, BATON__LIVE_OPEN, BATON__LIVE_ORPHAN, BATON__LIVE_CLOSING };

/* Registers p (open) with its magic, the client it lives on (NULL: none) and what a close
 * of that client releases of it, keeping its memory (dispose; NULL: nothing); what (static)
 * and a copy of name name it in messages. BATON_OK or BATON_ENOMEM. */
int baton__live_add(const void *p, uint32_t magic, const void *client, void (*dispose)(void *p),
                    const char *what, const char *name);
/* BATON__LIVE_OPEN, _ORPHAN (its client was closed), or _NONE (never registered, removed,
 * or of another magic). */
int baton__live_state(const void *p, uint32_t magic);
/* Another open handle of p's magic, client and name for which match(other, p) holds, or
 * NULL. match runs under the registry's lock: an open handle cannot start its close
 * meanwhile (it marks itself closing first, baton__live_closing). */
const void *baton__live_find(const void *p, uint32_t magic,
                             bool (*match)(const void *other, const void *p));
/* An open p marked closing (true), else false: the start of a close, which may run once. */
bool baton__live_closing(const void *p, uint32_t magic);
/* Unregisters p; its state before. */
int baton__live_remove(const void *p, uint32_t magic);
/* At a client's close, while it still works: every handle open on it is disposed, newest
 * first, and marked orphaned. */
void baton__live_orphan_all(const void *client);
/* BATON_OK for an open handle; else a misuse (NULL: BATON_EINVAL; orphaned or unknown:
 * BATON_ECLOSED), its message for the calling thread (baton__misuse_msg). */
int baton__handle_enter(const void *p, uint32_t magic, const char *what);
/* Records the calling thread's message of a call that has no live client; returns code. */
int baton__misuse(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *baton__misuse_msg(void);
/* A close of what is not open: prints "baton: fn(p): not an open what: ..." and aborts. */
_Noreturn void baton__misuse_abort(const char *fn, const void *p, const char *what);

/* ------------------------------------------------------------------------------------------
 * The client's configuration, as data (options resolved by client.c; the URL parsed by
 * src/net/url.c)
 * ---------------------------------------------------------------------------------------- */

/* What kind of deployment a URL names. */
typedef enum baton__ep_kind {
    BATON__EP_SINGLE,   /* redis://, rediss://, unix:// */
    BATON__EP_SENTINEL, /* redis+sentinel://, rediss+sentinel://: seeds are sentinels */
    BATON__EP_CLUSTER,  /* redis+cluster://, rediss+cluster://: seeds are cluster nodes */
} baton__ep_kind;

#define BATON__MAX_SEEDS 16

typedef struct baton__seed {
    char *host;
    int port;
} baton__seed;

typedef struct baton__endpoint {
    baton__ep_kind kind;
    baton__seed seeds[BATON__MAX_SEEDS]; /* every host:port of the URL, in order */
    int nseeds;
    char *master;   /* Sentinel: the master's name */
    char *host;     /* TCP host (the first seed's), or NULL for a unix socket */
    int port;       /* TCP port */
    char *path;     /* unix socket path, or NULL */
    char *username; /* ACL user or NULL */
    char *password; /* or NULL */
    int db;         /* SELECT index, 0 by default */
    bool tls;       /* rediss:// */
} baton__endpoint;

/* The client's resolved configuration (defaults applied). */
typedef struct baton__config {
    baton__endpoint ep;
    int64_t connect_timeout_ms;
    int64_t command_timeout_ms;
    int64_t watchdog_ms;
    int64_t fair_wait_ms;
    int64_t recheck_ms;
    int64_t starve_ms; /* BATON_STARVE_NEVER: the plain lock reserves for nobody */
    int64_t keepalive_ms;
    int pool_size;
    bool mux;          /* commands share one connection per node (src/net/mux.c) */
    int sync_replicas; /* WAIT after acquisitions and renewals; 0: off */
    bool sync_aof;     /* WAITAOF 1 sync_replicas instead of WAIT */
    int64_t sync_timeout_ms;
    char *sentinel_username; /* AUTH to sentinels, or NULL */
    char *sentinel_password;
    char client_name[132]; /* CLIENT SETNAME's name (options' client_name, sanitized) */
} baton__config;

/* "<host>:<pid>" of the process that opened the client: its length. */
#define BATON__ORIGIN_LEN 96

#endif /* BATON_UTIL_H */
