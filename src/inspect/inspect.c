/*
 * baton_inspect(): what lives at a name, for operators (`baton status`) and their tools.
 * One read-only script (lua/inspect.lua) takes the whole snapshot at once: the name's type,
 * TTL and value, the fair lock's queue and deadlines, the fencing-token counter, the
 * server's clock and the subscriber counts of the three channels. A script rather than a
 * MULTI pipeline because the core routes a script by its keys like every other operation
 * (all of them share the name's {hash tag}), and this file needs no connection of its own.
 *
 * The decoding trusts nothing: every element is checked, and a reply that is not a
 * snapshot is BATON_EPROTO, never a crash.
 */
#define _GNU_SOURCE
#include "../core/prim.h"
#include "decode.h"

#include <hiredis/hiredis.h>

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Baton's side hash of holders' origins: BATON__KEY_LOCK_META (keys.h). */

/* The script's reply: an array of this many elements, in this order. */
enum {
    R_TYPE,
    R_PTTL,
    R_FIELDS,
    R_VALUE,
    R_QUEUE,
    R_DEADLINES,
    R_TOKEN,
    R_TIME,
    R_NUMSUB,
    R_ORIGINS,
    R_LEASES,
    R_LINE,
    R_RESERVED,
    R_SEMLINE,
    R_N
};

/* ------------------------------- reply readers ---------------------------------------- */

/* An integer from an integer reply or a string of decimal digits (a sign allowed). */
static bool reply_int(const redisReply *r, int64_t *out)
{
    if (r && r->type == REDIS_REPLY_INTEGER) {
        *out = r->integer;
        return true;
    }
    if (!r || r->type != REDIS_REPLY_STRING || r->len == 0)
        return false;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(r->str, &end, 10);
    if (errno != 0 || end != r->str + r->len)
        return false;
    *out = v;
    return true;
}

static bool is_array(const redisReply *r)
{
    return r && r->type == REDIS_REPLY_ARRAY;
}

static bool is_str(const redisReply *r)
{
    return r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) && r->str;
}

/* ------------------------------- decoding --------------------------------------------- */

/* The value beside key in a flat [field, value, ...] reply, or NULL. */
static const redisReply *flat_get(const redisReply *map, const char *key)
{
    for (size_t j = 0; is_array(map) && j + 1 < map->elements; j += 2)
        if (is_str(map->element[j]) && strcmp(map->element[j]->str, key) == 0)
            return map->element[j + 1];
    return NULL;
}

/* A process's host and pid from its "host:pid" (its client's record, or the side hash
 * older versions wrote); none if absent or not of that form (the host may hold no ':', the
 * pid is a positive number). */
static int parse_origin(const char **host, int64_t *pid_out, const redisReply *origin)
{
    if (!is_str(origin))
        return BATON_OK;
    const char *colon = strrchr(origin->str, ':');
    if (!colon || colon == origin->str)
        return BATON_OK;
    char *end = NULL;
    errno = 0;
    long long pid = strtoll(colon + 1, &end, 10);
    if (errno != 0 || end == colon + 1 || *end != '\0' || pid <= 0)
        return BATON_OK;
    *host = baton__strndup(origin->str, (size_t)(colon - origin->str));
    if (!*host)
        return BATON_ENOMEM;
    *pid_out = pid;
    return BATON_OK;
}

static int decode_origin(baton_inspect_holder *h, const redisReply *origin)
{
    return parse_origin(&h->host, &h->pid, origin);
}

/* The host and pid of the process whose owner field this is, from its client's record
 * (a read of baton_client:{<client id>}, on whichever node has it). Best effort: a record
 * that is absent or unreadable leaves them unknown. */
static int record_origin(baton_client *c, const char *owner, const char **host, int64_t *pid)
{
    char *key = baton__client_record_key(owner);
    if (!key)
        return BATON_OK;
    const char *argv[2] = {"GET", key};
    redisReply *r = NULL;
    int rc = baton__query_argv(c, 2, argv, &r);
    free(key);
    if (rc != BATON_OK) {
        baton__clear_error(c);
        return BATON_OK;
    }
    rc = parse_origin(host, pid, r);
    freeReplyObject(r);
    return rc;
}

/* Waiters (a fair lock's queue, a line, a reservation) without a host get their client's
 * record. */
static int resolve_waiters(baton_client *c, baton_inspect_waiter **list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!list[i]->host &&
            record_origin(c, list[i]->owner, &list[i]->host, &list[i]->pid) != BATON_OK)
            return BATON_ENOMEM;
    return BATON_OK;
}

/* Holders and waiters without a host from the snapshot get their client's record. */
static int resolve_origins(baton_client *c, baton_inspection *ins)
{
    for (size_t i = 0; i < ins->n_holders; i++) {
        baton_inspect_holder *h = ins->holders[i];
        if (!h->host && record_origin(c, h->owner, &h->host, &h->pid) != BATON_OK)
            return BATON_ENOMEM;
    }
    if (resolve_waiters(c, ins->queue, ins->n_queue) != BATON_OK ||
        resolve_waiters(c, ins->semaphore_line, ins->n_semaphore_line) != BATON_OK ||
        (ins->reserved && resolve_waiters(c, &ins->reserved, 1) != BATON_OK))
        return BATON_ENOMEM;
    return resolve_waiters(c, ins->line, ins->n_line);
}

/* What a holder and a waiter begin with. */
typedef struct entry_head {
    size_t size;
    const char *owner;
} entry_head;
_Static_assert(offsetof(baton_inspect_holder, owner) == offsetof(entry_head, owner) &&
                   offsetof(baton_inspect_waiter, owner) == offsetof(entry_head, owner),
               "a holder and a waiter begin with size and owner");

/* A new holder or waiter of `size` bytes, zeroed, with its size and a copy of owner; NULL
 * when out of memory. */
static void *new_entry(size_t size, const redisReply *owner)
{
    entry_head *e = calloc(1, size);
    if (!e)
        return NULL;
    e->size = size;
    e->owner = baton__strndup(owner->str, owner->len);
    if (!e->owner) {
        free(e);
        return NULL;
    }
    return e;
}

/* A lock's holders from HGETALL's flat [owner, holds, ...], with their origins. */
static int decode_holders(baton_inspection *ins, const redisReply *fields,
                          const redisReply *origins)
{
    if (!is_array(fields))
        return BATON_OK; /* not a hash */
    size_t n = fields->elements / 2;
    if (n == 0)
        return BATON_OK;
    ins->holders = calloc(n, sizeof *ins->holders);
    if (!ins->holders)
        return BATON_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const redisReply *owner = fields->element[2 * i];
        if (!is_str(owner))
            return BATON_EPROTO;
        const redisReply *value = fields->element[2 * i + 1];
        if (strcmp(owner->str, "mode") == 0 && is_str(value)) { /* a read-write lock's */
            ins->rwlock_mode = strcmp(value->str, "write") == 0 ? "write" : "read";
            continue;
        }
        baton_inspect_holder *h = new_entry(sizeof *h, owner);
        if (!h)
            return BATON_ENOMEM;
        ins->holders[ins->n_holders++] = h;
        if (!reply_int(fields->element[2 * i + 1], &h->holds))
            h->holds = -1;
        if (decode_origin(h, flat_get(origins, h->owner)) != BATON_OK)
            return BATON_ENOMEM;
    }
    return BATON_OK;
}

/* A zset score that is a time in ms. */
static bool reply_score(const redisReply *score, int64_t *out)
{
    if (!is_str(score))
        return false;
    char *end = NULL;
    double d = strtod(score->str, &end);
    /* a time in ms (2^53 at most), never NaN or out of int64_t's range */
    if (end == score->str || !(d >= -9007199254740992.0 && d <= 9007199254740992.0))
        return false;
    *out = (int64_t)d;
    return true;
}

/* The score beside owner in ZRANGE WITHSCORES's flat [member, score, ...]. */
static bool deadline_of(const redisReply *deadlines, const char *owner, int64_t *out)
{
    return reply_score(flat_get(deadlines, owner), out);
}

/* A semaphore's waiter from its member "<permits>:<owner>" (its line's, its reservation's):
 * the owner and what it wants; a member of another form is shown whole, permits -1. */
static baton_inspect_waiter *semaphore_waiter(const redisReply *member)
{
    size_t digits = 0;
    while (digits < member->len && digits < 18 && member->str[digits] >= '0' &&
           member->str[digits] <= '9')
        digits++;
    bool counted = digits > 0 && digits + 1 < member->len && member->str[digits] == ':';
    redisReply owner = *member;
    if (counted) {
        owner.str += digits + 1;
        owner.len -= digits + 1;
    }
    baton_inspect_waiter *w = new_entry(sizeof *w, &owner);
    if (w)
        w->permits = counted ? strtoll(member->str, NULL, 10) : -1;
    return w;
}

/* Waiters in order: a fair lock's queue, each with its deadline from the timeout set
 * (deadlines not NULL), a plain lock's line (no deadlines), or a semaphore's line (counted:
 * members "<permits>:<owner>"). */
static int decode_waiters(const redisReply *list, const redisReply *deadlines, bool counted,
                          baton_inspect_waiter ***out, size_t *n)
{
    if (!is_array(list) || list->elements == 0)
        return BATON_OK;
    *out = calloc(list->elements, sizeof **out);
    if (!*out)
        return BATON_ENOMEM;
    for (size_t i = 0; i < list->elements; i++) {
        const redisReply *owner = list->element[i];
        if (!is_str(owner))
            return BATON_EPROTO;
        baton_inspect_waiter *w = counted ? semaphore_waiter(owner) : new_entry(sizeof *w, owner);
        if (!w)
            return BATON_ENOMEM;
        (*out)[(*n)++] = w;
        if (deadlines)
            w->has_deadline = deadline_of(deadlines, w->owner, &w->deadline_ms);
    }
    return BATON_OK;
}

/* The reservation: {} (none) or {"lock", owner, pttl} or {"semaphore", member, pttl}; its
 * deadline from the server's clock (decoded first); *lock: it is the lock's. */
static int decode_reserved(baton_inspection *ins, const redisReply *r, bool *lock_out)
{
    if (!is_array(r) || r->elements == 0)
        return BATON_OK;
    int64_t pttl = 0;
    if (r->elements != 3 || !is_str(r->element[0]) || !is_str(r->element[1]) ||
        !reply_int(r->element[2], &pttl))
        return BATON_EPROTO;
    bool lock = strcmp(r->element[0]->str, "lock") == 0;
    if (!lock && strcmp(r->element[0]->str, "semaphore") != 0)
        return BATON_EPROTO;
    *lock_out = lock;
    ins->reserved =
        lock ? new_entry(sizeof *ins->reserved, r->element[1]) : semaphore_waiter(r->element[1]);
    if (!ins->reserved)
        return BATON_ENOMEM;
    /* a reservation always has a TTL (PX); one that ran out as it was read has none */
    ins->reserved->has_deadline = pttl >= 0 && pttl < INT64_MAX / 2;
    if (ins->reserved->has_deadline)
        ins->reserved->deadline_ms = ins->server_time_ms + pttl;
    return BATON_OK;
}

/* The permit leases: {id (16 raw bytes), end, ...}; ids shown as hex. */
static int decode_leases(baton_inspection *ins, const redisReply *leases)
{
    if (!is_array(leases) || leases->elements < 2)
        return BATON_OK;
    if (leases->elements % 2)
        return BATON_EPROTO;
    ins->permits = calloc(leases->elements / 2, sizeof *ins->permits);
    if (!ins->permits)
        return BATON_ENOMEM;
    for (size_t i = 0; i + 1 < leases->elements; i += 2) {
        const redisReply *id = leases->element[i];
        int64_t end = 0;
        if (!is_str(id) || id->len != 16 || !reply_score(leases->element[i + 1], &end))
            return BATON_EPROTO;
        baton_inspect_permit *p = calloc(1, sizeof *p);
        if (!p)
            return BATON_ENOMEM;
        ins->permits[ins->n_permits++] = p;
        p->size = sizeof *p;
        for (size_t k = 0; k < 16; k++)
            snprintf(p->id + 2 * k, 3, "%02x", (unsigned char)id->str[k]);
        p->lease_end_ms = end;
    }
    return BATON_OK;
}

/* Server time and subscriber counts. */
static void decode_clock_and_subscribers(baton_inspection *ins, const redisReply *time,
                                         const redisReply *numsub)
{
    int64_t sec = 0, usec = 0;
    if (is_array(time) && time->elements == 2 && reply_int(time->element[0], &sec) &&
        reply_int(time->element[1], &usec) && sec >= 0 && sec < INT64_MAX / 1000 - 1 && usec >= 0 &&
        usec < 1000000)
        ins->server_time_ms = sec * 1000 + usec / 1000;
    if (is_array(numsub) && numsub->elements == 6) {
        reply_int(numsub->element[1], &ins->subscribers_lock);
        reply_int(numsub->element[3], &ins->subscribers_semaphore);
        reply_int(numsub->element[5], &ins->subscribers_latch);
    }
}

/* What the name holds, from its type, its value, its neighbours and its listeners. A latch's
 * key is gone when its count reaches zero, so a string at 0 or below is a semaphore. */
static void classify(baton_inspection *ins, bool fair_keys, bool semaphore_side, bool lock_side)
{
    const char *t = ins->redis_type;
    baton_object_kind k;
    if (strcmp(t, "hash") == 0)
        k = ins->rwlock_mode ? BATON_OBJECT_RWLOCK
            : fair_keys      ? BATON_OBJECT_FAIRLOCK
                             : BATON_OBJECT_LOCK;
    else if (strcmp(t, "string") == 0 && ins->has_value && ins->n_permits > 0)
        k = BATON_OBJECT_PERMITS; /* leases held: not a latch, not a counting semaphore */
    else if (strcmp(t, "string") == 0 && ins->has_value && ins->value <= 0)
        k = BATON_OBJECT_SEMAPHORE;
    else if (strcmp(t, "string") == 0 && ins->has_value && semaphore_side)
        k = BATON_OBJECT_SEMAPHORE; /* waiters queue for permits: a latch has no line */
    else if (strcmp(t, "string") == 0 && ins->has_value)
        k = ins->subscribers_semaphore && !ins->subscribers_latch ? BATON_OBJECT_SEMAPHORE
            : ins->subscribers_latch && !ins->subscribers_semaphore
                ? BATON_OBJECT_LATCH
                : BATON_OBJECT_SEMAPHORE_OR_LATCH;
    else if ((strcmp(t, "string") == 0 || strcmp(t, "none") == 0) && ins->n_permits > 0)
        k = BATON_OBJECT_PERMITS; /* leases held: not a latch, not a counting semaphore */
    else if (strcmp(t, "none") == 0 && semaphore_side)
        k = BATON_OBJECT_SEMAPHORE; /* never set, and waited for */
    else if (strcmp(t, "none") == 0)
        k = fair_keys   ? BATON_OBJECT_FAIRLOCK
            : lock_side ? BATON_OBJECT_LOCK /* free, with a line or a reservation */
                        : BATON_OBJECT_ABSENT;
    else
        k = BATON_OBJECT_OTHER;
    static const char *const names[] = {
        [BATON_OBJECT_ABSENT] = "absent",
        [BATON_OBJECT_LOCK] = "lock",
        [BATON_OBJECT_FAIRLOCK] = "fairlock",
        [BATON_OBJECT_SEMAPHORE] = "semaphore",
        [BATON_OBJECT_LATCH] = "latch",
        [BATON_OBJECT_SEMAPHORE_OR_LATCH] = "semaphore-or-latch",
        [BATON_OBJECT_OTHER] = "other",
        [BATON_OBJECT_RWLOCK] = "rwlock",
        [BATON_OBJECT_PERMITS] = "permits",
    };
    ins->kind = k;
    ins->kind_name = names[k];
}

int baton__inspect_decode(baton_inspection *ins, const redisReply *r)
{
    if (!is_array(r) || r->elements != R_N || !is_str(r->element[R_TYPE]))
        return BATON_EPROTO;
    redisReply *const *el = r->element;
    ins->redis_type = baton__strdup(el[R_TYPE]->str);
    if (!ins->redis_type)
        return BATON_ENOMEM;
    if (!reply_int(el[R_PTTL], &ins->ttl_ms))
        ins->ttl_ms = -2;
    int rc = decode_holders(ins, el[R_FIELDS], el[R_ORIGINS]);
    if (rc == BATON_OK)
        rc = decode_waiters(el[R_QUEUE], el[R_DEADLINES], false, &ins->queue, &ins->n_queue);
    if (rc == BATON_OK)
        rc = decode_waiters(el[R_LINE], NULL, false, &ins->line, &ins->n_line);
    if (rc == BATON_OK)
        rc =
            decode_waiters(el[R_SEMLINE], NULL, true, &ins->semaphore_line, &ins->n_semaphore_line);
    if (rc == BATON_OK)
        rc = decode_leases(ins, el[R_LEASES]);
    if (rc != BATON_OK)
        return rc;
    ins->has_value = reply_int(el[R_VALUE], &ins->value);
    ins->has_token = reply_int(el[R_TOKEN], &ins->token);
    decode_clock_and_subscribers(ins, el[R_TIME], el[R_NUMSUB]);
    bool reserved_lock = false;
    rc = decode_reserved(ins, el[R_RESERVED], &reserved_lock);
    if (rc != BATON_OK)
        return rc;
    bool fair_keys =
        ins->n_queue > 0 || (is_array(el[R_DEADLINES]) && el[R_DEADLINES]->elements > 0);
    bool semaphore_side = ins->n_semaphore_line > 0 || (ins->reserved && !reserved_lock);
    classify(ins, fair_keys, semaphore_side, ins->n_line > 0 || reserved_lock);
    return BATON_OK;
}

/* ------------------------------- the call --------------------------------------------- */

/* The script's keys and channels of a name. */
enum { NKEYS = 10, NCHANNELS = 3 };
typedef struct names {
    char *keys[NKEYS]; /* name (borrowed), queue, timeout, token, origins, permit leases,
                          the plain lock's line and reservation, the semaphore's line and
                          reservation */
    char *channels[NCHANNELS];
} names;

static void names_free(names *n)
{
    for (int i = 1; i < NKEYS; i++)
        free(n->keys[i]);
    for (int i = 0; i < NCHANNELS; i++)
        free(n->channels[i]);
}

static bool names_make(names *n, const char *name)
{
    n->keys[0] = (char *)name; /* borrowed: never freed */
    n->keys[1] = baton__derive_key(BATON__KEY_LOCK_QUEUE, name, NULL);
    n->keys[2] = baton__derive_key(BATON__KEY_LOCK_TIMEOUT, name, NULL);
    n->keys[3] = baton__derive_key(BATON__KEY_LOCK_TOKEN, name, NULL);
    n->keys[4] = baton__derive_key(BATON__KEY_LOCK_META, name, NULL);
    n->keys[5] = baton__derive_key("", name, ":timeout"); /* permits.c's TIMEOUT_SUFFIX */
    n->keys[6] = baton__derive_key(BATON__KEY_LOCK_LINE, name, NULL);
    n->keys[7] = baton__derive_key(BATON__KEY_LOCK_NEXT, name, NULL);
    n->keys[8] = baton__derive_key(BATON__KEY_SEMAPHORE_LINE, name, NULL);
    n->keys[9] = baton__derive_key(BATON__KEY_SEMAPHORE_NEXT, name, NULL);
    n->channels[0] = baton__derive_key(BATON__KEY_LOCK_CHANNEL, name, NULL);
    n->channels[1] = baton__derive_key(BATON__KEY_SEMAPHORE_CHANNEL, name, NULL);
    n->channels[2] = baton__derive_key(BATON__KEY_LATCH_CHANNEL, name, NULL);
    for (int i = 1; i < NKEYS; i++)
        if (!n->keys[i])
            return false;
    for (int i = 0; i < NCHANNELS; i++)
        if (!n->channels[i])
            return false;
    return true;
}

/* Runs the script; a read, so a broken connection earns it one more try on a new one. */
static int snapshot(baton_client *c, const names *n, redisReply **reply)
{
    const baton__script *s = &baton__script_inspect;
    const char **keys = (const char **)n->keys, **channels = (const char **)n->channels;
    int rc = baton__script_run(c, s, NKEYS, keys, NCHANNELS, channels, reply);
    if (rc == BATON_ECONN)
        rc = baton__script_run(c, s, NKEYS, keys, NCHANNELS, channels, reply);
    return rc;
}

int baton_inspect(baton_client *c, const char *name, baton_inspection **out)
{
    if (out)
        *out = NULL;
    if (!c || !out)
        return BATON_EINVAL;
    int rc = baton__check_open_name(c, name, "");
    if (rc != BATON_OK)
        return rc;
    names n = {{NULL}, {NULL}};
    baton_inspection *ins = calloc(1, sizeof *ins);
    if (!ins || !names_make(&n, name) || !(ins->name = baton__strdup(name))) {
        names_free(&n);
        baton_inspection_free(ins);
        return baton__fail(c, BATON_ENOMEM, "out of memory");
    }
    ins->size = sizeof *ins;
    redisReply *r = NULL;
    rc = snapshot(c, &n, &r);
    names_free(&n);
    if (rc == BATON_OK) {
        rc = baton__inspect_decode(ins, r);
        freeReplyObject(r);
        if (rc == BATON_OK)
            rc = resolve_origins(c, ins);
        if (rc == BATON_EPROTO)
            rc = baton__fail(c, rc, "inspect %s: the reply is not a snapshot", name);
        else if (rc == BATON_ENOMEM)
            rc = baton__fail(c, rc, "out of memory");
    }
    char node[300];
    if (rc == BATON_OK) {
        char *key = baton__hash_tag(name);
        if (key) {
            baton__node_of_key(c, key, node, sizeof node, &ins->slot);
            free(key);
        }
        if (!key || !(ins->node = baton__strdup(node)))
            rc = baton__fail(c, BATON_ENOMEM, "out of memory");
    }
    if (rc != BATON_OK) {
        baton_inspection_free(ins);
        return rc;
    }
    *out = ins;
    return BATON_OK;
}

static void free_waiter(baton_inspect_waiter *w)
{
    if (!w)
        return;
    free((char *)w->owner);
    free((char *)w->host);
    free(w);
}

static void free_waiters(baton_inspect_waiter **list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free_waiter(list[i]);
    free(list);
}

void baton_inspection_free(baton_inspection *ins)
{
    if (!ins)
        return;
    for (size_t i = 0; i < ins->n_holders; i++) {
        free((char *)ins->holders[i]->owner);
        free((char *)ins->holders[i]->host);
        free(ins->holders[i]);
    }
    free_waiters(ins->queue, ins->n_queue);
    free_waiters(ins->line, ins->n_line);
    free_waiters(ins->semaphore_line, ins->n_semaphore_line);
    free_waiter(ins->reserved);
    for (size_t i = 0; i < ins->n_permits; i++)
        free(ins->permits[i]);
    free(ins->holders);
    free(ins->permits);
    free(ins->name);
    free(ins->redis_type);
    free(ins->node);
    free(ins);
}

/* ------------------------------- keys to objects -------------------------------------- */

/* The prefixes of keys.h and what a key under each is to a tool that lists objects. */
static const struct {
    const char *prefix;
    baton_key_role role;
} key_prefixes[] = {
    {BATON__KEY_LOCK_QUEUE, BATON_KEY_NAMES},     {BATON__KEY_LOCK_CHANNEL, BATON_KEY_SIDE},
    {BATON__KEY_LOCK_TIMEOUT, BATON_KEY_SIDE},    {BATON__KEY_LOCK_TOKEN, BATON_KEY_SIDE},
    {BATON__KEY_UNLOCK_LATCH, BATON_KEY_SIDE},    {BATON__KEY_RWLOCK_CHANNEL, BATON_KEY_SIDE},
    {BATON__KEY_LATCH_CHANNEL, BATON_KEY_SIDE},   {BATON__KEY_SEMAPHORE_CHANNEL, BATON_KEY_SIDE},
    {BATON__KEY_REQUEST, BATON_KEY_SIDE},         {BATON__KEY_LOCK_META, BATON_KEY_SIDE},
    {BATON__KEY_LOCK_NEXT, BATON_KEY_SIDE},       {BATON__KEY_LOCK_LINE, BATON_KEY_SIDE},
    {BATON__KEY_CLIENT_RECORD, BATON_KEY_SIDE},   {BATON__KEY_ELECTION, BATON_KEY_SIDE},
    {BATON__KEY_ELECTION_LOG, BATON_KEY_SIDE},    {BATON__KEY_ELECTION_CHANNEL, BATON_KEY_SIDE},
    {BATON__KEY_BARRIER, BATON_KEY_SIDE},         {BATON__KEY_BARRIER_PARTIES, BATON_KEY_SIDE},
    {BATON__KEY_BARRIER_CHANNEL, BATON_KEY_SIDE}, {BATON__KEY_RWLOCK_WRITERS, BATON_KEY_SIDE},
    {BATON__KEY_SEMAPHORE_NEXT, BATON_KEY_SIDE},  {BATON__KEY_SEMAPHORE_LINE, BATON_KEY_SIDE},
};

/* Copies n bytes of s as a NUL-terminated name; false (name "") if it does not fit. */
static bool name_copy(char *name, size_t len, const char *s, size_t n)
{
    if (n >= len) {
        name[0] = '\0';
        return false;
    }
    memcpy(name, s, n);
    name[n] = '\0';
    return true;
}

/* The NAME in the first n bytes of tag, as baton__hash_tag made it: "{NAME}" for a NAME
 * without '{', the NAME itself otherwise. With suffixed (more follows the tag, as in a
 * request latch's {NAME}:<id>), the tag ends at the last '}'. */
static bool tag_name(const char *tag, size_t n, bool suffixed, char *name, size_t len)
{
    const char *end = tag + n;
    if (suffixed && n > 0 && tag[0] == '{')
        for (const char *p = tag + n - 1; p > tag; p--)
            if (*p == '}') {
                end = p + 1;
                break;
            }
    size_t m = (size_t)(end - tag);
    if (m >= 3 && tag[0] == '{' && tag[m - 1] == '}' && !memchr(tag + 1, '{', m - 2))
        return name_copy(name, len, tag + 1, m - 2);
    return name_copy(name, len, tag, n);
}

/* A key under no prefix: the permits' leases ({NAME}:timeout), a reader's timeout, or an
 * object's own key. */
static int unprefixed_key(const char *key, char *name, size_t len)
{
    size_t n = strlen(key), sn = strlen(BATON__KEY_PERMITS_TIMEOUT_SUFFIX);
    const char *infix = strstr(key, BATON__KEY_RWLOCK_TIMEOUT);
    bool ok = true;
    if (infix)
        ok = tag_name(key, (size_t)(infix - key), true, name, len);
    else if (n > sn && strchr(key, '{') &&
             strcmp(key + n - sn, BATON__KEY_PERMITS_TIMEOUT_SUFFIX) == 0)
        ok = tag_name(key, n - sn, false, name, len);
    else
        return name_copy(name, len, key, n) ? BATON_KEY_OBJECT : BATON_EINVAL;
    return ok ? BATON_KEY_SIDE : BATON_EINVAL;
}

int baton_key_object(const char *key, char *name, size_t len)
{
    if (!key || !name || len == 0)
        return BATON_EINVAL;
    for (size_t i = 0; i < sizeof key_prefixes / sizeof key_prefixes[0]; i++) {
        size_t n = strlen(key_prefixes[i].prefix);
        if (strncmp(key, key_prefixes[i].prefix, n) != 0)
            continue;
        baton_key_role role = key_prefixes[i].role;
        if (strcmp(key_prefixes[i].prefix, BATON__KEY_CLIENT_RECORD) == 0) {
            name[0] = '\0'; /* a client's record: of no object */
            return role;
        }
        const char *tag = key + n;
        return tag_name(tag, strlen(tag), role == BATON_KEY_SIDE, name, len) ? (int)role
                                                                             : BATON_EINVAL;
    }
    return unprefixed_key(key, name, len);
}

const char *baton_key_side_pattern(size_t i)
{
    static const char *const patterns[] = {BATON__KEY_LOCK_QUEUE "*"};
    return i < sizeof patterns / sizeof patterns[0] ? patterns[i] : NULL;
}
