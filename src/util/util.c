/*
 * The small things every part of baton leans on: pthread wrappers that abort on misuse
 * (libuv's rule: a failing mutex call is a bug, not an error to return), the monotonic
 * clock, per-thread ids, string helpers, a string-keyed hash map, and the name rules
 * (validation, Redisson's hash-tag derivation).
 */
#define _GNU_SOURCE
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/random.h>
#include <unistd.h>

/* ---------------------------------- threads ------------------------------------------ */

static void check(int rc, const char *what)
{
    if (rc != 0) {
        fprintf(stderr, "baton: %s failed: %s\n", what, strerror(rc));
        abort();
    }
}

void baton__mutex_init(pthread_mutex_t *m)
{
    check(pthread_mutex_init(m, NULL), "pthread_mutex_init");
}

/* void NAME(TYPE *x): CALL(x), aborting with its error if it fails. */
#define CHECKED(NAME, TYPE, CALL)                                                                  \
    void NAME(TYPE *x)                                                                             \
    {                                                                                              \
        check(CALL(x), #CALL);                                                                     \
    }

CHECKED(baton__mutex_destroy, pthread_mutex_t, pthread_mutex_destroy)
CHECKED(baton__mutex_lock, pthread_mutex_t, pthread_mutex_lock)
CHECKED(baton__mutex_unlock, pthread_mutex_t, pthread_mutex_unlock)

void baton__cond_init(pthread_cond_t *c)
{
    pthread_condattr_t attr;
    check(pthread_condattr_init(&attr), "pthread_condattr_init");
    check(pthread_condattr_setclock(&attr, CLOCK_MONOTONIC), "pthread_condattr_setclock");
    check(pthread_cond_init(c, &attr), "pthread_cond_init");
    pthread_condattr_destroy(&attr);
}

CHECKED(baton__cond_destroy, pthread_cond_t, pthread_cond_destroy)
CHECKED(baton__cond_signal, pthread_cond_t, pthread_cond_signal)
CHECKED(baton__cond_broadcast, pthread_cond_t, pthread_cond_broadcast)

int baton__cond_wait_until(pthread_cond_t *c, pthread_mutex_t *m, int64_t deadline_us)
{
    if (deadline_us == BATON__NO_DEADLINE) {
        check(pthread_cond_wait(c, m), "pthread_cond_wait");
        return 0;
    }
    if (baton__now_us() >= deadline_us)
        return ETIMEDOUT;
    struct timespec ts;
    ts.tv_sec = (time_t)(deadline_us / 1000000);
    ts.tv_nsec = (long)(deadline_us % 1000000) * 1000;
    int rc = pthread_cond_timedwait(c, m, &ts);
    if (rc == ETIMEDOUT)
        return ETIMEDOUT;
    check(rc, "pthread_cond_timedwait");
    return 0;
}

int64_t baton__now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t baton__boot_us(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_BOOTTIME, &ts) != 0)
        clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t baton__deadline_after_ms(int64_t ms)
{
    if (ms < 0)
        return BATON__NO_DEADLINE;
    return baton__now_us() + ms * 1000;
}

uint64_t baton__thread_id(void)
{
    static atomic_uint_fast64_t next = 1;
    static _Thread_local uint64_t id;
    if (id == 0)
        id = atomic_fetch_add(&next, 1);
    return id;
}

/* ---------------------------------- strings ------------------------------------------ */

char *baton__strdup(const char *s)
{
    return s ? baton__strndup(s, strlen(s)) : NULL;
}

char *baton__strndup(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

char *baton__asprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *out = NULL;
    if (vasprintf(&out, fmt, ap) < 0)
        out = NULL;
    va_end(ap);
    return out;
}

/* ---------------------------------- hash map ----------------------------------------- */

static size_t hash_str(const char *s)
{
    size_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

void baton__map_init(baton__map *m)
{
    memset(m, 0, sizeof *m);
}

void baton__map_init_borrowing(baton__map *m)
{
    memset(m, 0, sizeof *m);
    m->borrowing = true; /* a put of a key already there keeps the key it has */
}

void baton__map_free(baton__map *m)
{
    for (size_t i = 0; i < m->nbuckets; i++) {
        baton__map_entry *e = m->buckets[i];
        while (e) {
            baton__map_entry *next = e->next;
            if (!m->borrowing)
                free(e->key);
            free(e);
            e = next;
        }
    }
    free(m->buckets);
    memset(m, 0, sizeof *m);
}

void *baton__map_get(const baton__map *m, const char *key)
{
    if (m->nbuckets == 0)
        return NULL;
    for (baton__map_entry *e = m->buckets[hash_str(key) % m->nbuckets]; e; e = e->next)
        if (strcmp(e->key, key) == 0)
            return e->val;
    return NULL;
}

static int grow(baton__map *m)
{
    size_t n = m->nbuckets ? m->nbuckets * 2 : 16;
    baton__map_entry **b = calloc(n, sizeof *b);
    if (!b)
        return BATON_ENOMEM;
    for (size_t i = 0; i < m->nbuckets; i++) {
        baton__map_entry *e = m->buckets[i];
        while (e) {
            baton__map_entry *next = e->next;
            size_t j = hash_str(e->key) % n;
            e->next = b[j];
            b[j] = e;
            e = next;
        }
    }
    free(m->buckets);
    m->buckets = b;
    m->nbuckets = n;
    return BATON_OK;
}

int baton__map_put(baton__map *m, const char *key, void *val)
{
    if (m->count + 1 > m->nbuckets * 3 / 4 && grow(m) != BATON_OK)
        return BATON_ENOMEM;
    size_t i = hash_str(key) % m->nbuckets;
    for (baton__map_entry *e = m->buckets[i]; e; e = e->next) {
        if (strcmp(e->key, key) == 0) {
            e->val = val;
            return BATON_OK;
        }
    }
    baton__map_entry *e = malloc(sizeof *e);
    char *k = m->borrowing ? (char *)key : baton__strdup(key);
    if (!e || !k) {
        free(e);
        if (!m->borrowing)
            free(k);
        return BATON_ENOMEM;
    }
    e->key = k;
    e->val = val;
    e->next = m->buckets[i];
    m->buckets[i] = e;
    m->count++;
    return BATON_OK;
}

void *baton__map_remove(baton__map *m, const char *key)
{
    if (m->nbuckets == 0)
        return NULL;
    baton__map_entry **pp = &m->buckets[hash_str(key) % m->nbuckets];
    for (; *pp; pp = &(*pp)->next) {
        baton__map_entry *e = *pp;
        if (strcmp(e->key, key) == 0) {
            void *val = e->val;
            *pp = e->next;
            if (!m->borrowing)
                free(e->key);
            free(e);
            m->count--;
            return val;
        }
    }
    return NULL;
}

void baton__map_each(const baton__map *m, void (*fn)(const char *key, void *val, void *arg),
                     void *arg)
{
    for (size_t i = 0; i < m->nbuckets; i++)
        for (baton__map_entry *e = m->buckets[i]; e; e = e->next)
            fn(e->key, e->val, arg);
}

/* ---------------------------------- names -------------------------------------------- */

int baton__check_name(const char *name)
{
    if (!name || name[0] == '\0')
        return BATON_EINVAL;
    if (strnlen(name, BATON_MAX_NAME_LEN + 1) > BATON_MAX_NAME_LEN)
        return BATON_EINVAL;
    return BATON_OK;
}

int baton__check_wait(int64_t ms)
{
    if (ms == BATON_WAIT_FOREVER)
        return BATON_OK;
    return (ms >= 0 && ms <= BATON_MAX_DURATION_MS) ? BATON_OK : BATON_EINVAL;
}

int baton__check_lease(int64_t ms)
{
    if (ms == BATON_LEASE_WATCHDOG)
        return BATON_OK;
    return (ms >= 1 && ms <= BATON_MAX_DURATION_MS) ? BATON_OK : BATON_EINVAL;
}

char *baton__hash_tag(const char *name)
{
    if (strchr(name, '{'))
        return baton__strdup(name);
    return baton__asprintf("{%s}", name);
}

char *baton__derive_key(const char *prefix, const char *name, const char *suffix)
{
    char *tag = baton__hash_tag(name);
    if (!tag)
        return NULL;
    char *out = baton__asprintf("%s%s%s", prefix, tag, suffix ? suffix : "");
    free(tag);
    return out;
}

bool baton__derive_keys(const char *name, const baton__key_spec *specs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        *specs[i].out = NULL;
    if (n == 0)
        return true;
    char *tag = baton__hash_tag(name);
    if (!tag)
        return false;
    size_t len = 0, tl = strlen(tag);
    for (size_t i = 0; i < n; i++)
        len += strlen(specs[i].prefix) + tl + (specs[i].suffix ? strlen(specs[i].suffix) : 0) + 1;
    /* one allocation for all (the first key's): a handle's four keys cost one malloc's
     * overhead, not four; 100,000 handles are 100,000 of them */
    char *at = malloc(len);
    if (!at) {
        free(tag);
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        *specs[i].out = at;
        at +=
            sprintf(at, "%s%s%s", specs[i].prefix, tag, specs[i].suffix ? specs[i].suffix : "") + 1;
    }
    free(tag);
    return true;
}

void baton__free_keys(const baton__key_spec *specs, size_t n)
{
    if (n > 0)
        free(*specs[0].out);
    for (size_t i = 0; i < n; i++)
        *specs[i].out = NULL;
}

int baton__lost_pipe_fd(baton_client *c, int pipe[2], bool lost, int *fd)
{
    if (pipe[0] < 0) {
        if (pipe2(pipe, O_NONBLOCK | O_CLOEXEC) != 0) {
            pipe[0] = pipe[1] = -1;
            return baton__fail(c, BATON_ENOMEM, "pipe: %s", strerror(errno));
        }
        if (lost) {
            char b = 1;
            ssize_t n = write(pipe[1], &b, 1);
            (void)n;
        }
    }
    *fd = pipe[0];
    return BATON_OK;
}

size_t baton__random_bytes(void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom((char *)buf + got, n - got, 0);
        if (r > 0)
            got += (size_t)r;
        else if (errno != EINTR)
            break;
    }
    return got;
}

const char *baton_version(void)
{
    return BATON_VERSION_STRING;
}

bool baton__grow(void *arrp, size_t *cap, size_t n, size_t elem, size_t first)
{
    if (n < *cap)
        return true;
    void *arr;
    memcpy(&arr, arrp, sizeof arr);
    size_t ncap = *cap ? *cap * 2 : first;
    void *grown = realloc(arr, ncap * elem);
    if (!grown)
        return false;
    memcpy(arrp, &grown, sizeof grown);
    *cap = ncap;
    return true;
}
