/*
 * Permit leases, with Redisson's RPermitExpirableSemaphore layout: the available count is a
 * string at NAME (as RSemaphore's), the leases a zset {NAME}:timeout of permit id (16 raw
 * bytes) -> end of lease in the server's ms, and new counts are published on
 * redisson_sc:{NAME}. Every operation is one Lua script that reads the server's clock
 * (TIME), so no client clock decides when a lease ends.
 *
 * A lease that ended is not given back by a timer: the next script that looks (acquire,
 * available) moves it from the zset to the count. Waiters therefore sleep at most until the
 * nearest lease ends (the acquire script tells them when), so a dead holder's permit is taken
 * by a waiter at the end of its lease, not at the next release.
 *
 * Permits without a fixed lease are renewed by the client's watchdog (permits_renew.lua,
 * batched with the locks' renewals): each is registered as the hold ({NAME}:timeout, id).
 * Permits with a fixed lease are registered without renewal, so that a server restart
 * reports them lost too. Each held permit has a record on the handle (for release, close and
 * the lost report); a record lives until its release, the handle's close, or its lost report.
 *
 * Waiters share the counting semaphore's line of starved waiters (src/semaphore/semaphore.c,
 * lua/lib/semline.lua: baton_semaphore_line:{NAME}, baton_semaphore_next:{NAME}), joined
 * after BATON__SEM_STARVE_FACTOR times the client's starve_ms: a release, a lease given back or a
 * count set reserves what is free for the line's first waiter and tells it alone, on
 * redisson_sc:{NAME}:<owner>.
 */
#define _GNU_SOURCE
#include "../core/prim.h"
#include "../lockbase/lockbase.h"

#include <hiredis/hiredis.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

typedef struct permit_rec {
    baton_permits *p;
    char id[BATON_PERMIT_ID_SIZE];
    bool renew; /* the watchdog renews it */
    struct permit_rec *next;
} permit_rec;

/* The base's name is the key holding the available count; its channel redisson_sc:{name}. */
struct baton_permits {
    baton__object base;
    char *timeouts;     /* {name}:timeout: id -> end of lease */
    char *next_key;     /* baton_semaphore_next:{name}: the waiter what is free goes to */
    char *line_key;     /* baton_semaphore_line:{name}: the starved waiters */
    pthread_mutex_t mu; /* guards what follows */
    permit_rec *held;   /* permits held through this handle and registered */
    bool lost;          /* a permit was found lost */
    void (*lost_fn)(baton_permits *, const char *, void *);
    void *lost_arg;
    int lost_pipe[2]; /* readable once lost; -1 until baton_permits_lost_fd */
};

/* ------------------------------- helpers ---------------------------------------------- */

static int enter(baton_permits *p)
{
    return baton__object_enter((baton__object *)p);
}

static int check_id(baton_permits *p, const char *id)
{
    size_t n = 0;
    if (id)
        while (n <= BATON_PERMIT_ID_LEN && id[n] && strchr("0123456789abcdefABCDEF", id[n]))
            n++;
    if (!id || n != BATON_PERMIT_ID_LEN || id[n] != '\0')
        return baton__fail(p->base.client, BATON_EINVAL, "permits %s: a permit id is %d hex digits",
                           p->base.name, BATON_PERMIT_ID_LEN);
    return BATON_OK;
}

/* lease_ms as sent: BATON_LEASE_WATCHDOG and 0 mean the watchdog's lease. */
static int check_lease(baton_permits *p, int64_t lease_ms, bool watchdog_ok)
{
    if ((watchdog_ok && (lease_ms == 0 || lease_ms == BATON_LEASE_WATCHDOG)) ||
        (lease_ms >= 1 && lease_ms <= BATON_MAX_DURATION_MS))
        return BATON_OK;
    return baton__fail(p->base.client, BATON_EINVAL, "permits %s: lease_ms %lld: use %s1..%lld ms",
                       p->base.name, (long long)lease_ms,
                       watchdog_ok ? "BATON_LEASE_WATCHDOG, 0 or " : "",
                       (long long)BATON_MAX_DURATION_MS);
}

/* The id as generated and registered: lower case (Redisson's hexDump). */
static void lower_id(const char *id, char out[BATON_PERMIT_ID_SIZE])
{
    for (size_t i = 0; i < BATON_PERMIT_ID_SIZE; i++)
        out[i] = (char)(id[i] >= 'A' && id[i] <= 'F' ? id[i] - 'A' + 'a' : id[i]);
}

static void new_id(char out[BATON_PERMIT_ID_SIZE])
{
    unsigned char b[BATON_PERMIT_ID_LEN / 2];
    size_t got = baton__random_bytes(b, sizeof b);
    for (; got < sizeof b; got++) /* getrandom cannot fail on Linux >= 3.17; never reached */
        b[got] = (unsigned char)random();
    for (size_t i = 0; i < sizeof b; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
}

/* Runs a script whose reply is an integer or an array of integers: out[0..n) (missing
 * elements are left alone). */
static int run_ints(baton_permits *p, const baton__script *sc, int nkeys, const char **keys,
                    int nargs, const char **args, bool once, int64_t *out, size_t n)
{
    baton_client *c = p->base.client;
    redisReply *r;
    int rc =
        once ? baton__script_run_once(c, sc, p->base.request_prefix, nkeys, keys, nargs, args, &r)
             : baton__script_run(c, sc, nkeys, keys, nargs, args, &r);
    if (rc != BATON_OK)
        return rc;
    bool ok = false;
    if (r->type == REDIS_REPLY_INTEGER && n >= 1) {
        out[0] = r->integer;
        ok = true;
    } else if (r->type == REDIS_REPLY_ARRAY && r->elements == n) {
        ok = true;
        for (size_t i = 0; i < n; i++) {
            if (r->element[i]->type == REDIS_REPLY_INTEGER)
                out[i] = r->element[i]->integer;
            else
                ok = false;
        }
    }
    freeReplyObject(r);
    if (!ok)
        return baton__fail(c, BATON_EPROTO, "permits %s: unexpected reply to %s", p->base.name,
                           sc->name);
    return BATON_OK;
}

/* ------------------------------- open and close --------------------------------------- */

/* What the permits add to the base: the held permits' registrations, the lost pipe. */
static void permits_fini(baton__object *o)
{
    baton_permits *p = (baton_permits *)o;
    bool forked = baton__client_forked(p->base.client);
    baton__mutex_lock(&p->mu);
    permit_rec *r = p->held;
    p->held = NULL;
    baton__mutex_unlock(&p->mu);
    while (r) {
        permit_rec *next = r->next;
        if (!forked) /* waits out a lost report running for it */
            baton__watchdog_forget(p->base.client, p->timeouts, r->id);
        free(r);
        r = next;
    }
    if (p->lost_pipe[0] >= 0) {
        close(p->lost_pipe[0]);
        close(p->lost_pipe[1]);
    }
    if (!forked)
        baton__mutex_destroy(&p->mu);
}

/* The leases' key and the line's, derived and freed by the base. */
static size_t permits_keys(baton__object *o, baton__key_spec *k)
{
    baton_permits *p = (baton_permits *)o;
    k[0] = (baton__key_spec){&p->timeouts, "", BATON__KEY_PERMITS_TIMEOUT_SUFFIX};
    k[1] = (baton__key_spec){&p->next_key, BATON__KEY_SEMAPHORE_NEXT, NULL};
    k[2] = (baton__key_spec){&p->line_key, BATON__KEY_SEMAPHORE_LINE, NULL};
    return 3;
}

/* No lost pipe yet; the mutex of the held permits. */
static int permits_init(baton__object *o, void *arg)
{
    (void)arg;
    baton_permits *p = (baton_permits *)o;
    p->lost_pipe[0] = p->lost_pipe[1] = -1;
    baton__mutex_init(&p->mu);
    return BATON_OK;
}

static const baton__object_kind permits_kind = {"permits",
                                                BATON__KEY_SEMAPHORE_CHANNEL,
                                                sizeof(baton_permits),
                                                permits_keys,
                                                permits_init,
                                                permits_fini,
                                                NULL,
                                                BATON__OPT_WATCHDOG | BATON__OPT_RECHECK};

int baton_permits_open(baton_client *c, const char *name, baton_permits **out)
{
    return baton__object_new(c, name, &permits_kind, NULL, NULL, out);
}

int baton_permits_open_opts(baton_client *c, const char *name, const baton_handle_options *opts,
                            baton_permits **out)
{
    return baton__object_new(c, name, &permits_kind, opts, NULL, out);
}

/* baton_permits_cancel_waits, baton_permits_close */
BATON__OBJECT_VERBS(baton_permits, permits_kind)

/* ------------------------------- held permits and their loss -------------------------- */

/* Unlinks id's record; NULL if the handle holds no such permit (any more). */
static permit_rec *unlink_rec(baton_permits *p, const char *id)
{
    baton__mutex_lock(&p->mu);
    permit_rec **pp = &p->held;
    while (*pp && strcmp((*pp)->id, id) != 0)
        pp = &(*pp)->next;
    permit_rec *r = *pp;
    if (r)
        *pp = r->next;
    baton__mutex_unlock(&p->mu);
    return r;
}

/* On the watchdog thread: the registry dropped the permit before calling. The record is
 * alive: release and close unlink it first and free it only after the registry's removal,
 * which waits out a running report. */
static void on_lost(void *arg)
{
    permit_rec *rec = arg;
    baton_permits *p = rec->p;
    baton__mutex_lock(&p->mu);
    permit_rec **pp = &p->held;
    while (*pp && *pp != rec)
        pp = &(*pp)->next;
    bool mine = *pp != NULL; /* else a release or close owns it now */
    if (mine) {
        *pp = rec->next;
        p->lost = true;
        if (p->lost_pipe[1] >= 0) {
            char b = 1;
            ssize_t n = write(p->lost_pipe[1], &b, 1);
            (void)n; /* a full pipe is readable already */
        }
    }
    void (*fn)(baton_permits *, const char *, void *) = p->lost_fn;
    void *fn_arg = p->lost_arg;
    baton__mutex_unlock(&p->mu);
    if (!mine)
        return;
    if (fn)
        fn(p, rec->id, fn_arg);
    free(rec);
}

/* Records a permit just taken and registers it with the watchdog (renewed or not), before
 * the acquire returns. On failure the permit is released again. */
static int record_held(baton_permits *p, const char *id, bool renew, int64_t sent_us)
{
    baton_client *c = p->base.client;
    permit_rec *rec = calloc(1, sizeof *rec);
    if (rec) {
        rec->p = p;
        rec->renew = renew;
        memcpy(rec->id, id, BATON_PERMIT_ID_SIZE);
        baton__mutex_lock(&p->mu);
        rec->next = p->held;
        p->held = rec;
        baton__mutex_unlock(&p->mu);
    }
    int rc = rec ? baton__watchdog_add_kind(c, &baton__script_permits_renew,
                                            &baton__script_permits_check, p->timeouts, id, renew,
                                            p->base.cfg.watchdog_ms, on_lost, rec, sent_us)
                 : baton__fail(c, BATON_ENOMEM, "out of memory");
    if (rc == BATON_OK)
        return BATON_OK;
    free(unlink_rec(p, id));
    const char *keys[3] = {p->base.name, p->timeouts, p->base.channel};
    const char *args[3] = {id, p->next_key, p->line_key};
    int64_t ignored;
    run_ints(p, &baton__script_permits_release, 3, keys, 3, args, true, &ignored, 1);
    return baton__fail(c, rc, "permits %s: could not record the permit taken (%s); released",
                       p->base.name, baton_strerror(rc));
}

/* ------------------------------- acquire ---------------------------------------------- */

/* The acquire script was sent and its reply lost: the server is asked whether the permits
 * exist. The ids are this call's own and were taken all or none, so asking about the first
 * is enough; renewing it with the lease just asked for is the question (it answers 1 only
 * for a lease still running, and changes nothing else); asked twice (a stale connection
 * first), as it is idempotent. BATON_OK (taken after all) or BATON_ECONN. */
static int resolve_lost_reply(baton_permits *p, const char *id, const char *lease)
{
    const char *keys[1] = {p->timeouts};
    const char *args[2] = {lease, id};
    int64_t held = 0;
    int rc = BATON_ECONN;
    for (int i = 0; i < 2 && rc == BATON_ECONN; i++)
        rc = run_ints(p, &baton__script_permits_renew, 1, keys, 2, args, false, &held, 1);
    if (rc == BATON_OK && held == 1)
        return BATON_OK;
    return baton__fail(p->base.client, BATON_ECONN,
                       "permits %s: the reply to an acquire was lost and the permit is %s",
                       p->base.name,
                       rc == BATON_OK ? "not held" : "unknown (it ends with its lease)");
}

/* The acquire script's arguments before the ids: lease, member, mode, line life. */
#define ARGS_BEFORE_IDS 4

typedef struct acquiring {
    baton_permits *p;
    const char **args;  /* {lease, member, mode, line life, id, ...}: the script's ARGV */
    int nargs;          /* ARGS_BEFORE_IDS + the number of permits */
    int64_t nearest_ms; /* from the last attempt: ms until the nearest lease ends, or -1 */
    int64_t recheck_ms;
    int64_t sent_us;  /* when the last attempt was sent: the leases run from no earlier */
    int64_t since_us; /* the first attempt */
    int64_t ttl;      /* in the line, or reserved for another: how long to sleep at most */
    bool waits;       /* wait_ms != 0: it may join the line */
    char member[32 + 1 + BATON__OWNER_LEN + 24]; /* "<n>:<owner>" */
    char *own;      /* its own channel once in the line (<channel>:<owner>); else NULL */
    long long rank; /* waiters before it in the line at its last attempt; -1: not in it */
} acquiring;

/* One run of the acquire script: BATON_OK (every id taken), BATON_ETIMEDOUT (none, with
 * a->nearest_ms = ms until the nearest lease ends, -1: unknown; or a->ttl >= 0 when queued
 * or reserved for another), or BATON__RELISTEN (it took a place in the line, and hears its
 * turn on a->own from now on). */
static int try_once(void *arg, baton__sub *sub)
{
    (void)sub;
    acquiring *a = arg;
    baton_permits *p = a->p;
    baton_client *c = p->base.client;
    int64_t starve_ms = baton__client_config(c)->starve_ms;
    if (starve_ms != BATON_STARVE_NEVER)
        starve_ms *= BATON__SEM_STARVE_FACTOR;
    const char *mode = baton__line_mode(a->waits, a->own, baton__now_us() - a->since_us, starve_ms);
    a->args[2] = mode;
    const char *keys[5] = {p->base.name, p->timeouts, p->base.channel, p->next_key, p->line_key};
    redisReply *r;
    bool maybe_ran = false;
    baton__stat_inc(c, BATON__ST_ATTEMPTS + BATON_KIND_SEMAPHORE);
    a->sent_us = baton__now_us();
    int rc = baton__script_call(c, &baton__script_permits_acquire, 5, keys, a->nargs, a->args, &r,
                                &maybe_ran);
    if (rc == BATON_ECONN && maybe_ran)
        return resolve_lost_reply(p, a->args[ARGS_BEFORE_IDS], a->args[0]);
    if (rc != BATON_OK)
        return rc;
    bool ok = r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
              r->element[0]->type == REDIS_REPLY_INTEGER &&
              r->element[1]->type == REDIS_REPLY_INTEGER;
    long long status = ok ? r->element[0]->integer : -1, value = ok ? r->element[1]->integer : 0;
    freeReplyObject(r);
    if (!ok)
        return baton__fail(c, BATON_EPROTO, "permits %s: unexpected reply to permits_acquire",
                           p->base.name);
    a->ttl = -1;
    a->rank = status == BATON__ACQ_IN_LINE ? value : -1;
    if (status == BATON__ACQ_TAKEN)
        return BATON_OK;
    if (status == BATON__ACQ_IN_LINE) { /* in the line, value waiters before it */
        a->ttl = baton__line_look_ms(value);
        return baton__line_in(c, p->base.channel, strchr(a->member, ':') + 1, &a->own);
    }
    if (status == BATON__ACQ_RESERVED) { /* reserved for another, value ms more */
        a->ttl = value > 0 ? value : 1;
        return BATON_ETIMEDOUT;
    }
    a->nearest_ms = value;
    if (mode[0] == '1') {
        /* look again when it starves, to queue without waiting for a release */
        int64_t left = starve_ms - (baton__now_us() - a->since_us) / 1000;
        a->ttl = left < 1 ? 1 : left;
    }
    return BATON_ETIMEDOUT;
}

/* Sleep until a release wakes us, and at most until the nearest lease ends (+1 ms: the
 * server's clock then reads it as ended, and the next attempt gives it back) or recheck_ms;
 * in the line, until its turn is told or its next look. */
static int64_t bound(void *arg)
{
    acquiring *a = arg;
    int64_t to_end = a->nearest_ms < 0 ? -1 : a->nearest_ms + 1;
    int64_t b = to_end >= 0 && to_end < a->recheck_ms ? to_end : a->recheck_ms;
    return a->ttl >= 0 && a->ttl < b ? a->ttl : b;
}

static const char *own_channel(void *arg)
{
    return ((acquiring *)arg)->own;
}

/* The line's first hears the shared channel too: a Redisson client's release publishes the
 * new count only there, and then wakes this waiter within a round trip rather than at its
 * next look (the line has no due time: a baton release serves its first on its own
 * channel, as the semaphore's). */
static bool first_in_line(void *arg)
{
    acquiring *a = arg;
    return a->own && a->rank == 0;
}

/* A wait that failed leaves the line, and drops the reservation if it holds one (the
 * semaphore's script: the keys are the same). */
static void give_up(void *arg, int rc)
{
    acquiring *a = arg;
    baton_permits *p = a->p;
    baton_client *c = p->base.client;
    if (!a->own)
        return;
    const char *const keys[3] = {p->base.name, p->next_key, p->line_key};
    const char *const args[2] = {a->member, p->base.channel};
    baton__line_leave(c, &baton__script_semaphore_unreserve, keys, args, rc);
}

static int give_back(baton_permits *p, const char *lower, int64_t *outcome);

static int try_acquire_many(baton_permits *p, int64_t n, int64_t wait_ms, int64_t lease_ms,
                            char (*ids)[BATON_PERMIT_ID_SIZE]);

/* Counted for close from start to end (core/evloop.h). */
int baton_permits_try_acquire_many(baton_permits *p, int64_t n, int64_t wait_ms, int64_t lease_ms,
                                   char (*ids)[BATON_PERMIT_ID_SIZE])
{
    int entered_ = baton__object_enter((baton__object *)p); /* before its client is read */
    if (entered_ != BATON_OK)
        return entered_;
    BATON__COUNTED_CALL(p ? p->base.client : NULL, p,
                        try_acquire_many(p, n, wait_ms, lease_ms, ids));
}

/* Waiters of one client take turns (wait.c), as the semaphore's: one for 1 permit queues
 * behind the client's others for 1 permit rather than racing them for the permit just
 * freed. */
static int turn(void *arg)
{
    return ((acquiring *)arg)->nargs == ARGS_BEFORE_IDS + 1 ? BATON__TURN_LEAST : BATON__TURN_MORE;
}

/* How a message wakes the waiters on the permits' channel (as the semaphore's): it carries the new
 * permit count, and that many waiters try, counting those an earlier message woke that have not
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

static const baton__sub_type permits_sub = {permit_wakeups, true, false};

static const baton__wait_ops permits_wait = {.sub = &permits_sub,
                                             .stat = BATON_KIND_SEMAPHORE,
                                             .join_live = true,
                                             .attempt = try_once,
                                             .bound_ms = bound,
                                             .give_up = give_up,
                                             .relisten = own_channel,
                                             .turn = turn,
                                             .first = first_in_line};

static int try_acquire_many(baton_permits *p, int64_t n, int64_t wait_ms, int64_t lease_ms,
                            char (*ids)[BATON_PERMIT_ID_SIZE])
{
    if (ids && n >= 1 && n <= BATON_PERMITS_MAX_MANY)
        for (int64_t i = 0; i < n; i++)
            ids[i][0] = '\0';
    int rc = enter(p);
    if (rc != BATON_OK)
        return rc;
    baton_client *c = p->base.client;
    if (!ids)
        return baton__fail(c, BATON_EINVAL, "permits %s: ids is NULL", p->base.name);
    if (n < 1 || n > BATON_PERMITS_MAX_MANY)
        return baton__fail(c, BATON_EINVAL, "permits %s: %lld permits: take 1 to %d at once",
                           p->base.name, (long long)n, BATON_PERMITS_MAX_MANY);
    if ((rc = baton__check_wait_lease(c, "permits", p->base.name, wait_ms, &lease_ms)) != BATON_OK)
        return rc;
    bool renew = lease_ms == 0 || lease_ms == BATON_LEASE_WATCHDOG;
    char lease[32];
    snprintf(lease, sizeof lease, "%lld", (long long)(renew ? p->base.cfg.watchdog_ms : lease_ms));
    char(*fresh)[BATON_PERMIT_ID_SIZE] = calloc((size_t)n, sizeof *fresh);
    const char **args = calloc((size_t)n + ARGS_BEFORE_IDS, sizeof *args);
    if (!fresh || !args) {
        free(fresh);
        free(args);
        return baton__fail(c, BATON_ENOMEM, "out of memory");
    }
    acquiring a = {.p = p,
                   .args = args,
                   .nargs = (int)n + ARGS_BEFORE_IDS,
                   .nearest_ms = -1,
                   .recheck_ms = p->base.cfg.recheck_ms,
                   .since_us = baton__now_us(),
                   .ttl = -1,
                   .rank = -1,
                   .waits = wait_ms != 0};
    char owner[BATON__OWNER_LEN + 24], life[16];
    baton__waiter_owner(c, owner, sizeof owner);
    snprintf(a.member, sizeof a.member, "%lld:%s", (long long)n, owner);
    snprintf(life, sizeof life, "%d", BATON__LINE_LIFE_MS);
    args[0] = lease;
    args[1] = a.member;
    args[2] = "0"; /* the mode: each attempt's */
    args[3] = life;
    for (int64_t i = 0; i < n; i++) {
        new_id(fresh[i]);
        args[ARGS_BEFORE_IDS + i] = fresh[i];
    }

    int64_t start = baton__stat_start(c);
    rc = baton__wait_for(c, &permits_wait, p->base.channel, wait_ms, &a);
    free(a.own);
    baton__stat_acquire(c, BATON_KIND_SEMAPHORE, rc, start, p->base.name);
    if (rc == BATON_ETIMEDOUT)
        rc = baton__fail(c, BATON_ETIMEDOUT, "permits %s: %lld permit%s not free within %lld ms",
                         p->base.name, (long long)n, n == 1 ? "" : "s", (long long)wait_ms);
    /* Permits taken with a lease of their own whose reply came later than that lease, less
     * Redlock's drift allowance (1 % + 2 ms), may be another's already: they are given back
     * (by id: one already gone is left alone), and the caller is told (the lock's rule,
     * baton__hold_taken). */
    int64_t took_us = baton__now_us() - a.sent_us, lease_us = lease_ms * 1000;
    if (rc == BATON_OK && !renew && took_us >= lease_us - lease_us / 100 - 2000) {
        int64_t ignored;
        for (int64_t i = 0; i < n; i++)
            give_back(p, fresh[i], &ignored);
        rc = baton__fail(c, BATON_ETIMEDOUT,
                         "permits %s: taken, but their lease of %lld ms ran out before the reply "
                         "came (%lld ms after the attempt was sent): not held",
                         p->base.name, (long long)lease_ms, (long long)(took_us / 1000));
        free(fresh);
        free(args);
        return rc;
    }
    /* Every permit is recorded (and registered) before the call returns; if one cannot be,
     * all of them are given back. */
    bool taken = rc == BATON_OK;
    int64_t recorded = 0;
    while (rc == BATON_OK && recorded < n &&
           (rc = record_held(p, fresh[recorded], renew, a.sent_us)) == 0)
        recorded++;
    if (taken && rc != BATON_OK) {
        int64_t ignored;
        for (int64_t i = 0; i < n; i++)
            if (i != recorded) /* record_held gave that one back */
                give_back(p, fresh[i], &ignored);
    }
    if (rc == BATON_OK)
        memcpy(ids, fresh, (size_t)n * sizeof *fresh);
    free(fresh);
    free(args);
    return rc;
}

int baton_permits_try_acquire(baton_permits *p, int64_t wait_ms, int64_t lease_ms,
                              char id[BATON_PERMIT_ID_SIZE])
{
    if (!id) { /* named as the caller named it, not as _many's ids */
        int rc = enter(p);
        return rc != BATON_OK ? rc
                              : baton__fail(p->base.client, BATON_EINVAL, "permits %s: id is NULL",
                                            p->base.name);
    }
    return baton_permits_try_acquire_many(p, 1, wait_ms, lease_ms,
                                          (char(*)[BATON_PERMIT_ID_SIZE])id);
}

int baton_permits_acquire(baton_permits *p, int64_t lease_ms, char id[BATON_PERMIT_ID_SIZE])
{
    return baton_permits_try_acquire(p, BATON_WAIT_FOREVER, lease_ms, id);
}

/* ------------------------------- release and lease ------------------------------------ */

/* The release of one permit (lower-case id): stops its renewal, runs the release script
 * once however often it is sent; *outcome = the script's answer (1, 2 or 0). */
static int give_back(baton_permits *p, const char *lower, int64_t *outcome)
{
    /* Renewal stops before the release is sent, never after (Redisson #7272); also when
     * another handle of this client took the permit (the registry is the client's). The
     * record is freed after the registry let go: a lost report may be running with it. */
    permit_rec *rec = unlink_rec(p, lower);
    baton__watchdog_forget(p->base.client, p->timeouts, lower);
    free(rec);
    const char *keys[3] = {p->base.name, p->timeouts, p->base.channel};
    const char *args[3] = {lower, p->next_key, p->line_key};
    return run_ints(p, &baton__script_permits_release, 3, keys, 3, args, true, outcome, 1);
}

int baton_permits_release(baton_permits *p, const char *id)
{
    int rc = enter(p);
    if (rc != BATON_OK || (rc = check_id(p, id)) != BATON_OK)
        return rc;
    baton_client *c = p->base.client;
    char lower[BATON_PERMIT_ID_SIZE];
    lower_id(id, lower);
    int64_t out = 0;
    if ((rc = give_back(p, lower, &out)) != BATON_OK)
        return rc;
    if (out == 0)
        return baton__fail(c, BATON_ENOTHELD,
                           "permits %s: no permit %s (never taken, released already, or its "
                           "lease ended and it was given back)",
                           p->base.name, lower);
    if (out == 2)
        return baton__fail(c, BATON_ENOTHELD,
                           "permits %s: the lease of permit %s had ended; given back now",
                           p->base.name, lower);
    return BATON_OK;
}

int baton_permits_update_lease(baton_permits *p, const char *id, int64_t lease_ms)
{
    int rc = enter(p);
    if (rc != BATON_OK || (rc = check_id(p, id)) != BATON_OK ||
        (rc = check_lease(p, lease_ms, false)) != BATON_OK)
        return rc;
    baton_client *c = p->base.client;
    char lower[BATON_PERMIT_ID_SIZE];
    lower_id(id, lower);
    char lease[32];
    snprintf(lease, sizeof lease, "%lld", (long long)lease_ms);
    /* A renewed permit gets a fixed lease: its renewal stops first, else the next renewal
     * would override the lease set here. It stays registered (a restart reports it). */
    baton__mutex_lock(&p->mu);
    permit_rec *r = p->held;
    while (r && strcmp(r->id, lower) != 0)
        r = r->next;
    bool was_renewed = r && r->renew;
    if (r)
        r->renew = false;
    baton__mutex_unlock(&p->mu);
    if (was_renewed) {
        permit_rec *rec = unlink_rec(p, lower);
        if (rec) {
            baton__watchdog_forget(c, p->timeouts, lower);
            free(rec);
            rc = record_held(p, lower, false, 0); /* leased: no expiry by time */
            if (rc != BATON_OK)
                return rc;
        }
    }
    const char *keys[1] = {p->timeouts};
    const char *args[2] = {lower, lease};
    int64_t out = 0;
    if ((rc = run_ints(p, &baton__script_permits_update_lease, 1, keys, 2, args, false, &out, 1)) !=
        BATON_OK)
        return rc;
    if (out != 1)
        return baton__fail(c, BATON_ENOTHELD, "permits %s: no permit %s held (or its lease ended)",
                           p->base.name, lower);
    return BATON_OK;
}

/* ------------------------------- administration --------------------------------------- */

int baton_permits_try_set_permits(baton_permits *p, int64_t permits, bool *was_set)
{
    int rc = enter(p);
    if (rc != BATON_OK)
        return rc;
    if (permits < 0)
        return baton__fail(p->base.client, BATON_EINVAL, "permits %s: %lld permits: must be >= 0",
                           p->base.name, (long long)permits);
    char n[32];
    snprintf(n, sizeof n, "%lld", (long long)permits);
    const char *keys[3] = {p->base.name, p->timeouts, p->base.channel};
    const char *args[3] = {n, p->next_key, p->line_key};
    int64_t set = 0;
    rc = run_ints(p, &baton__script_permits_try_set_permits, 3, keys, 3, args, false, &set, 1);
    if (rc == BATON_OK && was_set)
        *was_set = set == 1;
    return rc;
}

int baton_permits_available(baton_permits *p, int64_t *available, int64_t *held)
{
    int rc = enter(p);
    if (rc != BATON_OK)
        return rc;
    if (!available)
        return baton__fail(p->base.client, BATON_EINVAL, "permits %s: available is NULL",
                           p->base.name);
    const char *keys[3] = {p->base.name, p->timeouts, p->base.channel};
    int64_t v[2] = {0, 0};
    if ((rc = run_ints(p, &baton__script_permits_available, 3, keys, 0, NULL, false, v, 2)) !=
        BATON_OK)
        return rc;
    *available = v[0];
    if (held)
        *held = v[1];
    return BATON_OK;
}

int baton_permits_delete(baton_permits *p, bool *existed)
{
    int rc = enter(p);
    if (rc != BATON_OK)
        return rc;
    const char *argv[3] = {"DEL", p->base.name, p->timeouts};
    redisReply *r;
    if ((rc = baton__query_argv(p->base.client, 3, argv, &r)) != BATON_OK)
        return rc;
    if (existed)
        *existed = r->type == REDIS_REPLY_INTEGER && r->integer > 0;
    freeReplyObject(r);
    return BATON_OK;
}

int baton_permits_set_lost_handler(baton_permits *p,
                                   void (*fn)(baton_permits *, const char *, void *), void *arg)
{
    int rc = enter(p);
    if (rc != BATON_OK)
        return rc;
    baton__mutex_lock(&p->mu);
    p->lost_fn = fn;
    p->lost_arg = fn ? arg : NULL;
    baton__mutex_unlock(&p->mu);
    return BATON_OK;
}

int baton_permits_lost_fd(baton_permits *p, int *fd)
{
    int rc = enter(p);
    if (rc == BATON_OK && !fd)
        rc = baton__fail(p->base.client, BATON_EINVAL, "permits %s: fd is NULL", p->base.name);
    if (rc != BATON_OK)
        return rc;
    baton__mutex_lock(&p->mu);
    rc = baton__lost_pipe_fd(p->base.client, p->lost_pipe, p->lost, fd);
    baton__mutex_unlock(&p->mu);
    return rc;
}

/* ------------------------------- asynchronous forms ----------------------------------- */

/* What an asynchronous operation's fiber runs (async.c): the blocking verb. */
static int async_acquire(void *h, const baton__op_args *a)
{
    return baton_permits_try_acquire(h, a->wait_ms, a->lease_ms, a->out);
}

int baton_permits_acquire_async(baton_permits *p, int64_t wait_ms, int64_t lease_ms,
                                char id[BATON_PERMIT_ID_SIZE], baton_async_fn fn, void *arg,
                                baton_op **op)
{
    if (op)
        *op = NULL;
    int rc = enter(p);
    if (rc != BATON_OK)
        return rc;
    baton_client *c = p->base.client;
    if (!id)
        return baton__fail(c, BATON_EINVAL, "permits %s: id is NULL", p->base.name);
    if ((rc = baton__check_wait_lease(c, "permits", p->base.name, wait_ms, &lease_ms)) != BATON_OK)
        return rc;
    id[0] = '\0';
    baton__op_args a = {.wait_ms = wait_ms, .lease_ms = lease_ms, .out = id};
    return baton__op_start(c, p, async_acquire, false, &a, fn, arg, op);
}
