/*
 * The registry of what the library handed out and has not freed: every open client and
 * handle, by address, with its kind's magic number. A public function looks its argument
 * up here before it reads a byte of it, as libuv and SQLite check a magic number on entry;
 * kept outside the objects, the magic can also be read for a pointer already freed, so a
 * double close or a call on a closed handle is reported (an error, or an abort naming the
 * misuse) in every build instead of touching freed memory.
 *
 * A handle whose client is closed first is "orphaned": the client's close releases what
 * the handle held on the client (its dispose function, given at registration), keeps the
 * handle's memory, and marks it; every later call on it returns BATON_ECLOSED and its own
 * close frees the memory. The memory is kept so that its address cannot be reused by
 * another handle while the program still holds the old one.
 */
#define _GNU_SOURCE
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 40 bytes, at most half the table in use: 100,000 handles are 262,144 of these. */
typedef struct entry {
    const void *p;      /* the object; NULL: free slot; TOMB: a removed one */
    const void *client; /* whose it is (NULL: none, or a client itself) */
    char *name;         /* its name, for messages (a copy: the object's own may be gone) */
    uint64_t seq;       /* registration order: a client's close disposes the newest first */
    uint32_t magic;     /* the kind (BATON__MAGIC_*) */
    uint8_t state;      /* BATON__LIVE_OPEN or BATON__LIVE_ORPHAN */
    uint8_t kind;       /* its what and dispose: kinds[kind] */
} entry;

/* The kinds registered so far (mu held): each what ("lock"; static) with its dispose. */
typedef struct kind {
    const char *what;
    void (*dispose)(void *p);
} kind;
#define MAX_KINDS 64 /* the library has about fifteen */
static kind kinds[MAX_KINDS];
static int nkinds;

/* The index of (what, dispose) in kinds[], added if new; -1 when the table is full. */
static int kind_index(const char *what, void (*dispose)(void *p))
{
    for (int i = 0; i < nkinds; i++)
        if (kinds[i].what == what && kinds[i].dispose == dispose)
            return i;
    if (nkinds == MAX_KINDS)
        return -1;
    kinds[nkinds] = (kind){what, dispose};
    return nkinds++;
}

static const char tomb_byte;
#define TOMB ((const void *)&tomb_byte)

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static entry *tab;       /* open addressing, linear probing; cap a power of two */
static size_t cap, used; /* used: live entries and tombstones */
static uint64_t seq;

static size_t hash(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x;
}

/* The slot of p, or NULL (mu held). */
static entry *find(const void *p)
{
    if (!cap || !p)
        return NULL;
    for (size_t i = hash(p) & (cap - 1);; i = (i + 1) & (cap - 1)) {
        if (tab[i].p == p)
            return &tab[i];
        if (!tab[i].p)
            return NULL;
    }
}

/* Room for one more (mu held): false when out of memory. */
static bool grow(void)
{
    if ((used + 1) * 2 <= cap)
        return true;
    size_t ncap = cap ? cap * 2 : 64;
    while ((used + 1) * 4 > ncap * 3) /* mostly tombstones: the same size is enough */
        ncap *= 2;
    entry *n = calloc(ncap, sizeof *n);
    if (!n)
        return false;
    size_t live = 0;
    for (size_t j = 0; j < cap; j++) {
        if (!tab[j].p || tab[j].p == TOMB)
            continue;
        size_t i = hash(tab[j].p) & (ncap - 1);
        while (n[i].p)
            i = (i + 1) & (ncap - 1);
        n[i] = tab[j];
        live++;
    }
    free(tab);
    tab = n;
    cap = ncap;
    used = live;
    return true;
}

/* fork() while another thread holds mu would leave it locked in the child forever. */
static void fork_prepare(void)
{
    baton__mutex_lock(&mu);
}

static void fork_done(void)
{
    baton__mutex_unlock(&mu);
}

static void install(void)
{
    pthread_atfork(fork_prepare, fork_done, fork_done);
}

int baton__live_add(const void *p, uint32_t magic, const void *client, void (*dispose)(void *p),
                    const char *what, const char *name)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, install);
    char *copy = baton__strdup(name ? name : "");
    if (!copy)
        return BATON_ENOMEM;
    baton__mutex_lock(&mu);
    int k = kind_index(what, dispose);
    entry *e = find(p);
    if (k < 0) {
        baton__mutex_unlock(&mu);
        free(copy);
        return BATON_ENOMEM;
    }
    if (!e) {
        if (!grow()) {
            baton__mutex_unlock(&mu);
            free(copy);
            return BATON_ENOMEM;
        }
        size_t i = hash(p) & (cap - 1);
        while (tab[i].p && tab[i].p != TOMB)
            i = (i + 1) & (cap - 1);
        if (!tab[i].p)
            used++;
        e = &tab[i];
    } else {
        free(e->name); /* re-registered (never two opens of one address) */
    }
    *e = (entry){p, client, copy, ++seq, magic, BATON__LIVE_OPEN, (uint8_t)k};
    baton__mutex_unlock(&mu);
    return BATON_OK;
}

int baton__live_state(const void *p, uint32_t magic)
{
    baton__mutex_lock(&mu);
    const entry *e = find(p);
    int st = e && e->magic == magic ? e->state : BATON__LIVE_NONE;
    baton__mutex_unlock(&mu);
    return st;
}

int baton__live_remove(const void *p, uint32_t magic)
{
    baton__mutex_lock(&mu);
    entry *e = find(p);
    int st = BATON__LIVE_NONE;
    if (e && e->magic == magic) {
        st = e->state;
        free(e->name);
        memset(e, 0, sizeof *e);
        e->p = TOMB;
    }
    baton__mutex_unlock(&mu);
    return st;
}

bool baton__live_closing(const void *p, uint32_t magic)
{
    baton__mutex_lock(&mu);
    entry *e = find(p);
    bool open = e && e->magic == magic && e->state == BATON__LIVE_OPEN;
    if (open)
        e->state = BATON__LIVE_CLOSING;
    baton__mutex_unlock(&mu);
    return open;
}

const void *baton__live_find(const void *p, uint32_t magic,
                             bool (*match)(const void *other, const void *p))
{
    baton__mutex_lock(&mu);
    const entry *self = find(p);
    const void *found = NULL;
    for (size_t i = 0; self && !found && i < cap; i++) {
        const entry *e = &tab[i];
        if (e->p && e->p != TOMB && e->p != p && e->magic == magic &&
            e->state == BATON__LIVE_OPEN && e->client == self->client &&
            strcmp(e->name, self->name) == 0 && match(e->p, p))
            found = e->p;
    }
    baton__mutex_unlock(&mu);
    return found;
}

typedef struct victim {
    void *p;
    uint32_t magic;
    uint64_t seq;
    void (*dispose)(void *p);
} victim;

static int newest_first(const void *a, const void *b)
{
    uint64_t x = ((const victim *)a)->seq, y = ((const victim *)b)->seq;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* The entry of v if it is still open (mu held). */
static entry *still_open(const victim *v)
{
    entry *e = find(v->p);
    return e && e->magic == v->magic && e->seq == v->seq && e->state == BATON__LIVE_OPEN ? e : NULL;
}

void baton__live_orphan_all(const void *client)
{
    baton__mutex_lock(&mu);
    size_t n = 0;
    for (size_t i = 0; i < cap; i++)
        n += tab[i].p && tab[i].p != TOMB && tab[i].client == client && tab[i].p != client &&
             tab[i].state == BATON__LIVE_OPEN;
    victim *v = n ? calloc(n, sizeof *v) : NULL;
    size_t k = 0;
    for (size_t i = 0; v && i < cap; i++)
        if (tab[i].p && tab[i].p != TOMB && tab[i].client == client && tab[i].p != client &&
            tab[i].state == BATON__LIVE_OPEN)
            v[k++] =
                (victim){(void *)tab[i].p, tab[i].magic, tab[i].seq, kinds[tab[i].kind].dispose};
    baton__mutex_unlock(&mu);
    if (n && !v)
        return; /* out of memory: the handles stay as they were (their close still works
                   until the client's memory is reused, as before the registry) */
    if (k > 1)
        qsort(v, k, sizeof *v, newest_first);
    /* One at a time, newest first: an election's close closes its own lock, made before it;
     * a handle closed by another's dispose is no longer open when its turn comes. */
    for (size_t i = 0; i < k; i++) {
        baton__mutex_lock(&mu);
        bool open = still_open(&v[i]) != NULL;
        baton__mutex_unlock(&mu);
        if (!open)
            continue;
        if (v[i].dispose)
            v[i].dispose(v[i].p);
        baton__mutex_lock(&mu);
        entry *e = still_open(&v[i]);
        if (e)
            e->state = BATON__LIVE_ORPHAN;
        baton__mutex_unlock(&mu);
    }
    free(v);
}

/* ------------------------------- misuse ----------------------------------------------- */

_Noreturn void baton__misuse_abort(const char *fn, const void *p, const char *what)
{
    fprintf(stderr,
            "baton: %s(%p): not an open %s: closed twice, or never opened (a misuse of the "
            "API; aborting)\n",
            fn, p, what);
    fflush(stderr);
    abort();
}

int baton__handle_enter(const void *p, uint32_t magic, const char *what)
{
    if (!p)
        return baton__misuse(BATON_EINVAL, "%s is NULL", what);
    baton__mutex_lock(&mu);
    const entry *e = find(p);
    int st = e && e->magic == magic ? e->state : BATON__LIVE_NONE;
    if (st == BATON__LIVE_CLOSING) /* its close waits for the operations still on it */
        st = BATON__LIVE_OPEN;
    int rc = BATON_OK;
    if (st == BATON__LIVE_ORPHAN)
        rc = baton__misuse(BATON_ECLOSED, "%s %s: its client was closed: close the handle",
                           kinds[e->kind].what, e->name);
    else if (st != BATON__LIVE_OPEN)
        rc = baton__misuse(BATON_ECLOSED,
                           "%s %p: not an open handle (used after its close, or never opened)",
                           what, p);
    baton__mutex_unlock(&mu);
    return rc;
}
