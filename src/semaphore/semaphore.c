/*
 * The counting semaphore, with Redisson's RSemaphore semantics and layout: the permit count
 * is a string at the semaphore's name; returning or adding permits publishes the new count
 * on redisson_sc:{name}. Every operation that writes is one Lua script, so a count read and
 * the write that depends on it are atomic, and every script checks the key's type first, so
 * a key that is not a semaphore is reported and left untouched.
 *
 * An acquire (the core's wait routine, wait.c) runs semaphore_acquire.lua once; if too few permits
 * are free it subscribes to the channel (one subscription per client, shared by every waiting
 * thread), runs the script again (a release published before the subscription was confirmed would
 * otherwise be missed), then sleeps until a wake-up, at most recheck_ms, and tries again. The
 * dispatcher wakes min(new count, local waiters) threads per message, less those an earlier
 * message woke that have not tried yet, and every waiter when the subscriber connection
 * comes back; a wake-up is only a hint: the woken thread re-runs the script and may go back
 * to sleep. An acquire of 1 permit that finds its client's waiters, each for 1 permit,
 * already asleep on a live subscription queues behind them without a first try (turn;
 * the core's wait routine does it). A semaphore has no lease that could bound
 * the sleep the way a lock's TTL does, so the recheck interval is what bounds the cost of a
 * message lost in any way the dispatcher cannot see (a count written by something that
 * does not publish, a woken waiter that needed more permits than the message offered).
 *
 * A waiter that has waited BATON__SEM_STARVE_FACTOR times the client's starve_ms takes a place in
 * the semaphore's line (baton_semaphore_line:{name}, lua/lib/semline.lua), first come first served
 * whatever each wants, and from then on listens on a channel of its own
 * (redisson_sc:{name}:<owner>). While the line is not empty, newcomers queue behind it. A
 * release reserves what it frees for the line's first waiter if it wants no more
 * (baton_semaphore_next:{name}) and tells that waiter alone: a free permit is not raced
 * for by a waiter of every process, each refused but one. A waiter in the line looks by
 * itself every BATON__LINE_POLL_MS times its rank + 1 (at most BATON__LINE_POLL_MAX_MS), for what
 * no release tells: a reservation whose waiter died. Redisson's clients do not know the line
 * (they take free permits as before) and publish their release's count on the shared channel
 * only: the line's first hears it too (first_in_line, wait.c).
 *
 * The semaphore has no owners: releasing permits never taken is allowed (Redisson's rule),
 * and no permit count written by baton goes below zero.
 */
#define _GNU_SOURCE
#include "../core/prim.h"

#include <hiredis/hiredis.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A waiter joins the line after BATON__SEM_STARVE_FACTOR times the client's starve_ms (20 ms by
 * default), where the plain lock's joins after starve_ms: a client's own waiters already
 * take turns (wait.c), and an acquisition through the line is a hand-over (the release
 * tells the line's first, whose dispatcher wakes it) that costs a client's threads their
 * rate once the line forms (s3, 16 threads: 0.69x at 5 ms, 1.05x at 20 ms; 50 processes,
 * s6: 3.1-3.4 scripts per acquisition at either; docs/ARCHITECTURE.md). The figures
 * shared with the lock's line are wait.h's (BATON__LINE_*). */

/* Hand-overs of released permits within the client in a row, per semaphore, before a
 * release goes through the server (docs/ARCHITECTURE.md, "Cohorting"). */
#define BATON__SEM_COHORT_PASSES 8

/* The base's name is the key holding the count; new counts are published on its channel,
 * redisson_sc:{name}. */
struct baton_semaphore {
    baton__object base;
    char *next_key; /* baton_semaphore_next:{name}: the waiter the permits freed go to */
    char *line_key; /* baton_semaphore_line:{name}: the starved waiters, first come first */
};

/* ------------------------------- helpers ---------------------------------------------- */

/* Validation shared by every verb: a handle, and a clean error slot. */
static int enter(baton_semaphore *s)
{
    return baton__object_enter((baton__object *)s);
}

/* An integer from an integer reply or from a bulk string holding one (GET). */
static bool reply_int(const redisReply *r, int64_t *out)
{
    if (r->type == REDIS_REPLY_INTEGER) {
        *out = r->integer;
        return true;
    }
    if (r->type != REDIS_REPLY_STRING || r->len == 0)
        return false;
    errno = 0;
    char *end;
    long long v = strtoll(r->str, &end, 10);
    if (errno != 0 || *end != '\0')
        return false;
    *out = v;
    return true;
}

/* How a script that writes is sent. */
typedef enum run_mode {
    RUN_PLAIN,   /* KEYS = {name} */
    RUN_CHANNEL, /* KEYS = {name, channel} */
    RUN_ONCE     /* KEYS = {name, channel, request latch}: counted once however often it is sent
                    (once.c), for the writes that are not idempotent */
} run_mode;

/* Runs a script whose reply is one integer. A script that adds permits (mode RUN_CHANNEL
 * or RUN_ONCE) also gets the line's keys, after arg, to serve the line's first. */
static int run_int(baton_semaphore *s, const baton__script *sc, run_mode mode, int64_t arg,
                   bool has_arg, int64_t *out)
{
    baton_client *c = s->base.client;
    char arg_s[32];
    snprintf(arg_s, sizeof arg_s, "%lld", (long long)arg);
    const char *keys[2] = {s->base.name, s->base.channel};
    const char *args[3] = {arg_s, s->next_key, s->line_key};
    int nargs = !has_arg ? 0 : mode == RUN_PLAIN ? 1 : 3;
    redisReply *r;
    int rc;
    if (mode == RUN_ONCE) {
        rc = baton__script_run_once(c, sc, s->base.request_prefix, 2, keys, nargs, args, &r);
    } else {
        rc = baton__script_run(c, sc, mode == RUN_CHANNEL ? 2 : 1, keys, nargs, args, &r);
    }
    if (rc != BATON_OK)
        return rc;
    int64_t v;
    bool ok = reply_int(r, &v);
    freeReplyObject(r);
    if (!ok)
        return baton__fail(c, BATON_EPROTO, "semaphore %s: unexpected reply to %s", s->base.name,
                           sc->name);
    if (out)
        *out = v;
    return BATON_OK;
}

static int check_permits(baton_semaphore *s, int64_t permits, const char *what)
{
    if (permits < 1)
        return baton__fail(s->base.client, BATON_EINVAL,
                           "semaphore %s: %s %lld permits: must be >= 1", s->base.name, what,
                           (long long)permits);
    return BATON_OK;
}

/* ------------------------------- open and close --------------------------------------- */

/* The line's keys, derived and freed by the base. */
static size_t semaphore_keys(baton__object *o, baton__key_spec *k)
{
    baton_semaphore *s = (baton_semaphore *)o;
    k[0] = (baton__key_spec){&s->next_key, BATON__KEY_SEMAPHORE_NEXT, NULL};
    k[1] = (baton__key_spec){&s->line_key, BATON__KEY_SEMAPHORE_LINE, NULL};
    return 2;
}

static const baton__object_kind semaphore_kind = {.what = "semaphore",
                                                  .channel_prefix = BATON__KEY_SEMAPHORE_CHANNEL,
                                                  .size = sizeof(baton_semaphore),
                                                  .keys = semaphore_keys,
                                                  .reads = BATON__OPT_RECHECK};

int baton_semaphore_open(baton_client *c, const char *name, baton_semaphore **out)
{
    return baton__object_new(c, name, &semaphore_kind, NULL, NULL, out);
}

int baton_semaphore_open_opts(baton_client *c, const char *name, const baton_handle_options *opts,
                              baton_semaphore **out)
{
    return baton__object_new(c, name, &semaphore_kind, opts, NULL, out);
}

/* baton_semaphore_cancel_waits, baton_semaphore_close */
BATON__OBJECT_VERBS(baton_semaphore, semaphore_kind)

/* ------------------------------- acquire ---------------------------------------------- */

/* The state of one acquisition, for the core's wait routine. */
typedef struct acquiring {
    baton_semaphore *s;
    const char *permits;
    bool one;         /* for 1 permit */
    bool waits;       /* wait_ms != 0: it may join the line */
    int64_t since_us; /* the first attempt */
    int64_t ttl;      /* how long to sleep at most after the last attempt */
    /* "<permits>:<owner>" (baton__waiter_owner): its place in the line */
    char member[32 + 1 + BATON__OWNER_LEN + 24];
    char *own;      /* its own channel once in the line (<channel>:<owner>); else NULL */
    long long rank; /* waiters before it in the line at its last attempt; -1: not in it */
} acquiring;

/* One run of the acquire script: BATON_OK (taken), BATON_ETIMEDOUT (too few free, or
 * reserved for another waiter; a->ttl = how long to sleep at most) or BATON__RELISTEN (it
 * took a place in the line, and hears its turn on a->own from now on). It counts once
 * (once.c): a reply lost after the permits were taken is resolved by sending the same
 * request again, which answers "taken" rather than taking more. */
static int attempt(acquiring *a)
{
    baton_semaphore *s = a->s;
    baton_client *c = s->base.client;
    int64_t starve_ms = baton__client_config(c)->starve_ms;
    if (starve_ms != BATON_STARVE_NEVER)
        starve_ms *= BATON__SEM_STARVE_FACTOR;
    int64_t recheck_ms = s->base.cfg.recheck_ms;
    /* "0": never join the line; "1": join it if it is not empty; "2": join it */
    const char *mode = baton__line_mode(a->waits, a->own, baton__now_us() - a->since_us, starve_ms);
    char life[16];
    snprintf(life, sizeof life, "%d", BATON__LINE_LIFE_MS);
    const char *keys[3] = {s->base.name, s->next_key, s->line_key};
    const char *args[5] = {a->permits, a->member, mode, s->base.channel, life};
    redisReply *r;
    baton__stat_inc(c, BATON__ST_ATTEMPTS + BATON_KIND_SEMAPHORE);
    int rc = baton__script_run_once(c, &baton__script_semaphore_acquire, s->base.request_prefix, 3,
                                    keys, 5, args, &r);
    if (rc != BATON_OK)
        return rc;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_INTEGER || r->element[1]->type != REDIS_REPLY_INTEGER) {
        freeReplyObject(r);
        return baton__fail(c, BATON_EPROTO, "semaphore %s: unexpected reply to semaphore_acquire",
                           s->base.name);
    }
    long long status = r->element[0]->integer, value = r->element[1]->integer;
    freeReplyObject(r);
    a->rank = status == BATON__ACQ_IN_LINE ? value : -1;
    if (status == BATON__ACQ_TAKEN)
        return BATON_OK;
    if (status == BATON__ACQ_IN_LINE) { /* in the line, value waiters before it */
        a->ttl = baton__line_look_ms(value);
        return baton__line_in(c, s->base.channel, strchr(a->member, ':') + 1, &a->own);
    }
    /* too few free (0), or reserved for another (3, value = its ms left) */
    a->ttl = status == BATON__ACQ_RESERVED ? (value > 0 ? value : 1) : recheck_ms;
    if (mode[0] == '1') {
        /* look again when it starves, to queue without waiting for a release */
        int64_t left = starve_ms - (baton__now_us() - a->since_us) / 1000;
        if (left < 1)
            left = 1;
        if (left < a->ttl)
            a->ttl = left;
    }
    return BATON_ETIMEDOUT;
}

int baton_semaphore_acquire(baton_semaphore *s, int64_t permits)
{
    return baton_semaphore_try_acquire(s, permits, BATON_WAIT_FOREVER);
}

static int try_once(void *arg, baton__sub *sub)
{
    (void)sub;
    return attempt(arg);
}

/* Waiters of one client take turns (wait.c): one for 1 permit queues behind the client's
 * others for 1 permit rather than racing them for the permit just freed. */
static int turn(void *arg)
{
    return ((acquiring *)arg)->one ? BATON__TURN_LEAST : BATON__TURN_MORE;
}

/* Sleep until a release wakes us, or re-read anyway after recheck_ms (in the line: until
 * its turn is told, or its next look). */
static int64_t bound(void *arg)
{
    return ((acquiring *)arg)->ttl;
}

static const char *own_channel(void *arg)
{
    return ((acquiring *)arg)->own;
}

/* The line's first hears the shared channel too: a Redisson client's release publishes the
 * new count only there, and then wakes this waiter within a round trip rather than at its
 * next look. */
static bool first_in_line(void *arg)
{
    acquiring *a = arg;
    /* the semaphore's line has no due time: a baton release serves its first (reserves
     * and tells it on its own channel), so the shared channel's message adds no wake-up */
    return a->own && a->rank == 0;
}

/* A wait that failed leaves the line, and drops the reservation if it holds one, or the
 * permits stay refused to others for up to SEM_RESERVE_MS (best effort: both end by
 * themselves). */
static void give_up(void *arg, int rc)
{
    acquiring *a = arg;
    baton_semaphore *s = a->s;
    baton_client *c = s->base.client;
    if (!a->own)
        return;
    const char *const keys[3] = {s->base.name, s->next_key, s->line_key};
    const char *const args[2] = {a->member, s->base.channel};
    baton__line_leave(c, &baton__script_semaphore_unreserve, keys, args, rc);
}

static int try_acquire(baton_semaphore *s, int64_t permits, int64_t wait_ms);

/* Counted for close from start to end (core/evloop.h). */
int baton_semaphore_try_acquire(baton_semaphore *s, int64_t permits, int64_t wait_ms)
{
    int entered_ = baton__object_enter((baton__object *)s); /* before its client is read */
    if (entered_ != BATON_OK)
        return entered_;
    BATON__COUNTED_CALL(s ? s->base.client : NULL, s, try_acquire(s, permits, wait_ms));
}

/* How a message wakes the waiters on a semaphore's channel: it carries the new permit
 * count, and that many waiters try, counting those an earlier message woke that have not
 * taken their wake-up yet: they try after this message too, and so see the permits it
 * announces. (Adding the count to them woke a waiter per permit for every message that came
 * while a permit was free: in the benchmark's s3, 2.4 attempts per acquisition, 1.8
 * without.) */
static int64_t permit_wakeups(const char *payload, size_t len, int refs, int64_t pending)
{
    bool ok;
    int64_t v = baton__sub_payload_int(payload, len, &ok);
    if (!ok)
        return 1;
    return (v < refs ? v : refs) - pending;
}

const baton__sub_type baton__semaphore_sub = {permit_wakeups, true, false};

/* A release by a thread or fiber of this client may hand this waiter its permits with no
 * round trip (cohorting): a counting semaphore has no owner in Redis, so a release and an
 * acquisition by the same process leave the count as it was. */
static bool cohort(void *arg, baton__cand *cand)
{
    acquiring *a = arg;
    cand->want = strtoll(a->permits, NULL, 10);
    cand->info[0] = '\0';
    return cand->want >= 1;
}

static int handed(void *arg, int64_t value)
{
    (void)arg, (void)value;
    return BATON_OK; /* the permits are its own now */
}

static const baton__wait_ops semaphore_wait = {.sub = &baton__semaphore_sub,
                                               .stat = BATON_KIND_SEMAPHORE,
                                               .join_live = true,
                                               .attempt = try_once,
                                               .bound_ms = bound,
                                               .give_up = give_up,
                                               .relisten = own_channel,
                                               .turn = turn,
                                               .first = first_in_line,
                                               .cohort = cohort,
                                               .handed = handed};

static int try_acquire(baton_semaphore *s, int64_t permits, int64_t wait_ms)
{
    int rc = enter(s);
    if (rc != BATON_OK)
        return rc;
    baton_client *c = s->base.client;
    if ((rc = check_permits(s, permits, "acquiring")) != BATON_OK)
        return rc;
    if (baton__check_wait(wait_ms) != BATON_OK)
        return baton__fail(c, BATON_EINVAL,
                           "semaphore %s: wait_ms %lld: use BATON_WAIT_FOREVER or 0..%lld ms",
                           s->base.name, (long long)wait_ms, (long long)BATON_MAX_DURATION_MS);

    char permits_s[32];
    snprintf(permits_s, sizeof permits_s, "%lld", (long long)permits);
    int64_t start = baton__stat_start(c);
    acquiring a = {.s = s,
                   .permits = permits_s,
                   .one = permits == 1,
                   .waits = wait_ms != 0,
                   .since_us = baton__now_us(),
                   .ttl = s->base.cfg.recheck_ms,
                   .rank = -1};
    char owner[BATON__OWNER_LEN + 24];
    baton__waiter_owner(c, owner, sizeof owner);
    snprintf(a.member, sizeof a.member, "%s:%s", permits_s, owner);
    rc = baton__wait_for(c, &semaphore_wait, s->base.channel, wait_ms, &a);
    free(a.own);
    baton__stat_acquire(c, BATON_KIND_SEMAPHORE, rc, start, s->base.name);
    if (rc == BATON_ETIMEDOUT && wait_ms == 0)
        return baton__fail(c, rc, "semaphore %s: fewer than %lld permits free", s->base.name,
                           (long long)permits);
    if (rc == BATON_ETIMEDOUT)
        return baton__fail(c, rc, "semaphore %s: %lld permits not acquired within %lld ms",
                           s->base.name, (long long)permits, (long long)wait_ms);
    return rc;
}

/* ------------------------------- release and administration --------------------------- */

int baton_semaphore_release(baton_semaphore *s, int64_t permits)
{
    int rc = enter(s);
    if (rc != BATON_OK)
        return rc;
    if ((rc = check_permits(s, permits, "releasing")) != BATON_OK)
        return rc;
    /* Threads or fibers of this client asleep for at most what is released get it in the
     * process, no round trip (cohorting; BATON__SEM_COHORT_PASSES in a row at most, then a
     * release goes through the server for every client's waiters and the line). A waiter
     * is chosen and handed its permits under the dispatcher's mutex: one that gave up
     * meanwhile is not handed them (settle answers false) and the next is looked for. */
    baton_client *c = s->base.client;
    baton__ticket t;
    while (permits > 0 &&
           baton__sub_offer(c, s->base.channel, permits, BATON__SEM_COHORT_PASSES, &t) == BATON_OK)
        if (baton__sub_settle(c, &t, true, 0))
            permits -= t.want;
    if (permits == 0)
        return BATON_OK;
    /* INCRBY is not idempotent (a permit returned twice lets one holder too many in): the
     * request latch makes a re-send after a lost reply count once. */
    return run_int(s, &baton__script_semaphore_release, RUN_ONCE, permits, true, NULL);
}

int baton_semaphore_try_set_permits(baton_semaphore *s, int64_t permits, bool *was_set)
{
    int rc = enter(s);
    if (rc != BATON_OK)
        return rc;
    if (permits < 0)
        return baton__fail(s->base.client, BATON_EINVAL,
                           "semaphore %s: %lld permits: the count must be >= 0", s->base.name,
                           (long long)permits);
    int64_t set = 0;
    rc = run_int(s, &baton__script_semaphore_try_set_permits, RUN_CHANNEL, permits, true, &set);
    if (rc == BATON_OK && was_set)
        *was_set = set == 1;
    return rc;
}

int baton_semaphore_add_permits(baton_semaphore *s, int64_t delta)
{
    int rc = enter(s);
    if (rc != BATON_OK)
        return rc;
    if (delta == INT64_MIN)
        return baton__fail(s->base.client, BATON_EINVAL, "semaphore %s: delta out of range",
                           s->base.name);
    return run_int(s, &baton__script_semaphore_add_permits, RUN_ONCE, delta, true, NULL);
}

int baton_semaphore_drain(baton_semaphore *s, int64_t *drained)
{
    int rc = enter(s);
    if (rc != BATON_OK)
        return rc;
    return run_int(s, &baton__script_semaphore_drain, RUN_PLAIN, 0, false, drained);
}

int baton_semaphore_delete(baton_semaphore *s, bool *existed)
{
    int rc = enter(s);
    if (rc != BATON_OK)
        return rc;
    int64_t v = 0;
    rc = run_int(s, &baton__script_semaphore_delete, RUN_PLAIN, 0, false, &v);
    if (rc == BATON_OK && existed)
        *existed = v == 1;
    return rc;
}

int baton_semaphore_available(baton_semaphore *s, int64_t *out)
{
    int rc = enter(s);
    if (rc != BATON_OK)
        return rc;
    baton_client *c = s->base.client;
    if (!out)
        return baton__fail(c, BATON_EINVAL, "semaphore %s: out is NULL", s->base.name);
    /* A plain GET: a key of another type makes the server reply WRONGTYPE by itself. */
    const char *argv[2] = {"GET", s->base.name};
    redisReply *r;
    if ((rc = baton__query_argv(c, 2, argv, &r)) != BATON_OK)
        return rc;
    int64_t v = 0;
    bool ok = r->type == REDIS_REPLY_NIL || reply_int(r, &v);
    freeReplyObject(r);
    if (!ok)
        return baton__fail(c, BATON_EPROTO, "semaphore %s: the key does not hold an integer",
                           s->base.name);
    *out = v;
    return BATON_OK;
}

/* ------------------------------- asynchronous forms ----------------------------------- */

/* What an asynchronous operation's fiber runs (async.c): the blocking verbs. */
static int async_acquire(void *h, const baton__op_args *a)
{
    return baton_semaphore_try_acquire(h, a->number, a->wait_ms);
}

static int async_release(void *h, const baton__op_args *a)
{
    return baton_semaphore_release(h, a->number);
}

/* A semaphore's operation: acquire (wait_ms) or release `permits`. */
static int async_start(baton_semaphore *s, baton__op_run_fn run, bool release, int64_t permits,
                       int64_t wait_ms, baton_async_fn fn, void *arg, baton_op **op)
{
    if (op)
        *op = NULL;
    int rc = enter(s);
    if (rc != BATON_OK)
        return rc;
    baton_client *c = s->base.client;
    if (permits < 1)
        return baton__fail(c, BATON_EINVAL, "semaphore %s: permits %lld: at least 1", s->base.name,
                           (long long)permits);
    baton__op_args a = {.number = permits, .wait_ms = wait_ms};
    return baton__op_start(c, s, run, release, &a, fn, arg, op);
}

int baton_semaphore_acquire_async(baton_semaphore *s, int64_t permits, int64_t wait_ms,
                                  baton_async_fn fn, void *arg, baton_op **op)
{
    return async_start(s, async_acquire, false, permits, wait_ms, fn, arg, op);
}

int baton_semaphore_release_async(baton_semaphore *s, int64_t permits, baton_async_fn fn, void *arg,
                                  baton_op **op)
{
    return async_start(s, async_release, true, permits, 0, fn, arg, op);
}
