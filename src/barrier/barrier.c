/*
 * The cyclic barrier and the double barrier. A party's await is one wait of the core's wait
 * routine (wait.c): its first attempt arrives (barrier_arrive), every later attempt looks
 * at the generation (barrier_check: tripped, broken, or still waiting, which renews the
 * party's lease and breaks the generation if another party's lease ran out). A waiting
 * party sleeps until the channel's "0" (a trip or a break) or a third of its lease, or the
 * earliest end of another party's lease, whichever comes first: a dead party is found
 * within about one lease plus a third, by whichever waiter looks first, and every other
 * waiter is told by the message. A party that gives up (timeout, cancellation) breaks the
 * generation on its way out (give_up), as Java's CyclicBarrier does.
 *
 * The double barrier is two cyclic barriers on one name, "enter" and "leave" (the second
 * with ":leave" after the hash tag: same slot).
 *
 */
#define _GNU_SOURCE
#include "../core/prim.h"

#include <hiredis/hiredis.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------- keys, scripts, codes (one place) -------------------- */

#define STATE_PREFIX BATON__KEY_BARRIER
#define PARTIES_PREFIX BATON__KEY_BARRIER_PARTIES
#define CHANNEL_PREFIX BATON__KEY_BARRIER_CHANNEL
#define LEAVE_SUFFIX ":leave"
#define STATE_LIFE_MS "86400000" /* a barrier nobody arrives at for a day is forgotten */
#define MAX_PARTIES 100000

#define BROKEN BATON_EBROKEN

/* ------------------------------- the handle ------------------------------------------ */

typedef struct phase {
    char *state, *parties, *channel;
    /* the party id of this handle's last arrival whose outcome is unknown (its reply lost
     * twice, or its wait failed before the generation ended), sent again by the next await
     * so that one process is never two parties */
    char unresolved[96];
} phase;

/* The base's name is the user's; the keys are the phases' (the base's channel is the
 * cyclic barrier's, unused). */
struct baton_barrier {
    baton__object base;
    int64_t parties;
    phase ph[2]; /* 0: the cyclic barrier (and the double barrier's enter), 1: leave */
};

/* Each phase's keys, derived and freed by the base. */
static size_t barrier_keys(baton__object *o, baton__key_spec *k)
{
    baton_barrier *b = (baton_barrier *)o;
    for (int i = 0; i < 2; i++) {
        const char *suffix = i ? LEAVE_SUFFIX : NULL;
        k[3 * i] = (baton__key_spec){&b->ph[i].state, STATE_PREFIX, suffix};
        k[3 * i + 1] = (baton__key_spec){&b->ph[i].parties, PARTIES_PREFIX, suffix};
        k[3 * i + 2] = (baton__key_spec){&b->ph[i].channel, CHANNEL_PREFIX, suffix};
    }
    return 6;
}

static int barrier_init(baton__object *o, void *parties)
{
    ((baton_barrier *)o)->parties = *(int64_t *)parties;
    return BATON_OK;
}

static const baton__object_kind barrier_kind = {.what = "barrier",
                                                .channel_prefix = CHANNEL_PREFIX,
                                                .size = sizeof(baton_barrier),
                                                .keys = barrier_keys,
                                                .init = barrier_init,
                                                .reads = BATON__OPT_WATCHDOG};

int baton_barrier_open(baton_client *c, const char *name, int64_t parties, baton_barrier **out)
{
    return baton_barrier_open_opts(c, name, parties, NULL, out);
}

int baton_barrier_open_opts(baton_client *c, const char *name, int64_t parties,
                            const baton_handle_options *opts, baton_barrier **out)
{
    if (c && out && (parties < 2 || parties > MAX_PARTIES)) {
        *out = NULL;
        return baton__fail(c, BATON_EINVAL, "barrier %s: parties %lld: must be 2..%d",
                           name ? name : "", (long long)parties, MAX_PARTIES);
    }
    return baton__object_new(c, name, &barrier_kind, opts, &parties, out);
}

/* baton_barrier_cancel_waits, baton_barrier_close, baton_barrier_name */
BATON__OBJECT_VERBS(baton_barrier, barrier_kind)
BATON__OBJECT_NAME_VERB(baton_barrier)

/* ------------------------------- await ----------------------------------------------- */

typedef struct awaiting {
    baton_barrier *b;
    const phase *p;
    char id[96];    /* this arrival's party id */
    char lease[32]; /* its lease, ms */
    char gen_s[32]; /* its generation, once arrived */
    bool arrived;   /* barrier_arrive ran */
    bool ended;     /* tripped or broken: nothing to give up */
    bool reused;    /* id is the phase's unresolved arrival's */
    bool unknown;   /* barrier_arrive's outcome is unknown (its reply lost) */
    int64_t index, gen;
    int64_t lease_ms;
    int64_t bound_ms; /* how long to sleep before looking again */
} awaiting;

static int reply_ints(baton_barrier *b, redisReply *r, const char *script, long long *v, size_t n)
{
    bool ok = r->type == REDIS_REPLY_ARRAY && r->elements >= n;
    for (size_t i = 0; ok && i < n; i++) {
        ok = r->element[i]->type == REDIS_REPLY_INTEGER;
        if (ok)
            v[i] = r->element[i]->integer;
    }
    freeReplyObject(r);
    if (!ok)
        return baton__fail(b->base.client, BATON_EPROTO, "barrier %s: unexpected reply to %s",
                           b->base.name, script);
    return BATON_OK;
}

/* The generation a's arrival is in broke: nothing to give up. */
static int broken(awaiting *a)
{
    a->ended = true;
    return baton__fail(a->b->base.client, BROKEN,
                       "barrier %s: generation %lld broken: a party died, timed out or was "
                       "cancelled",
                       a->b->base.name, (long long)a->gen);
}

/* One look: BATON_OK tripped, BATON_ETIMEDOUT waiting, BROKEN, or an error. */
static int check(awaiting *a, const char *mode)
{
    baton_barrier *b = a->b;
    const char *keys[3] = {a->p->state, a->p->parties, a->p->channel};
    const char *args[5] = {a->gen_s, a->id, a->lease, mode, STATE_LIFE_MS};
    redisReply *r;
    int rc = baton__script_run(b->base.client, BATON__SCRIPT(barrier_check), 3, keys, 5, args, &r);
    if (rc == BATON_ECONN) /* a look, a renewal or a break: each safe to repeat */
        rc = baton__script_run(b->base.client, BATON__SCRIPT(barrier_check), 3, keys, 5, args, &r);
    if (rc != BATON_OK)
        return rc;
    long long v[2] = {0, 0};
    rc = reply_ints(b, r, "barrier_check", v, 2);
    if (rc != BATON_OK)
        return rc;
    if (v[0] == 1) {
        a->ended = true;
        return BATON_OK;
    }
    if (v[0] == 2)
        return broken(a);
    int64_t bound = a->lease_ms / 3;
    if (v[1] >= 0 && v[1] + 5 < bound)
        bound = v[1] + 5;
    a->bound_ms = bound;
    return BATON_ETIMEDOUT;
}

static void new_party_id(awaiting *a)
{
    static atomic_uint_fast64_t arrivals;
    snprintf(a->id, sizeof a->id, "%s:%llu", baton_client_id(a->b->base.client),
             (unsigned long long)atomic_fetch_add(&arrivals, 1));
}

static int attempt(void *arg, baton__sub *sub)
{
    (void)sub;
    awaiting *a = arg;
    if (a->arrived)
        return check(a, "wait");
    baton_barrier *b = a->b;
    char n[32];
    snprintf(n, sizeof n, "%lld", (long long)b->parties);
    const char *keys[3] = {a->p->state, a->p->parties, a->p->channel};
    const char *args[4] = {n, a->id, a->lease, STATE_LIFE_MS};
    redisReply *r;
    /* Sent again once after a lost reply, with the same party id: the script counts an
     * id once and answers what became of its first arrival. */
    int rc = baton__script_run(b->base.client, BATON__SCRIPT(barrier_arrive), 3, keys, 4, args, &r);
    if (rc == BATON_ECONN)
        rc = baton__script_run(b->base.client, BATON__SCRIPT(barrier_arrive), 3, keys, 4, args, &r);
    if (rc != BATON_OK) {
        a->ended = true; /* nothing to leave: the arrival's fate is unknown */
        a->unknown = rc == BATON_ECONN;
        return rc;
    }
    long long v[3] = {0, 0, 0};
    rc = reply_ints(b, r, "barrier_arrive", v, 3);
    if (rc != BATON_OK) {
        a->ended = true;
        return rc;
    }
    if (v[0] == -1) {
        a->ended = true;
        return baton__fail(b->base.client, BATON_EINVAL,
                           "barrier %s: a generation of %lld parties is in progress (asked %lld)",
                           b->base.name, v[1], (long long)b->parties);
    }
    a->arrived = true;
    a->index = v[1];
    a->gen = v[2];
    snprintf(a->gen_s, sizeof a->gen_s, "%lld", v[2]);
    a->bound_ms = a->lease_ms / 3;
    if (v[0] == 2 && a->reused) {
        /* the generation an earlier call arrived in unseen broke since (that call failed
         * already): this one arrives anew */
        a->reused = false;
        a->arrived = false;
        a->ended = false;
        new_party_id(a);
        return attempt(arg, sub);
    }
    if (v[0] == 2)
        return broken(a);
    if (v[0] == 1) {
        a->ended = true;
        return BATON_OK;
    }
    return BATON_ETIMEDOUT;
}

static int64_t bound(void *arg)
{
    return ((awaiting *)arg)->bound_ms;
}

/* Timed out, cancelled or failed while waiting: the generation breaks for the others. The
 * wait's own detail stays the caller's (the leave's answer, "broken", would replace it:
 * an await that ended BATON_EPERM read "generation 1 broken"). */
static void give_up(void *arg, int rc)
{
    awaiting *a = arg;
    if (!a->arrived || a->ended)
        return;
    baton_client *c = a->b->base.client;
    char *detail = baton__strdup(baton_client_errmsg(c));
    check(a, "leave");
    if (detail)
        baton__fail(c, rc, "%s", detail);
    free(detail);
}

/* How a message wakes the waiters on a barrier's channel: "0" (a phase ended: the last
 * party arrived, or the barrier broke) all of them; any other none. The subscription does
 * not linger. */
static int64_t zero_wakeups(const char *payload, size_t len, int refs, int64_t pending)
{
    (void)pending;
    bool ok;
    int64_t v = baton__sub_payload_int(payload, len, &ok);
    return (ok && v == 0) ? refs : 0;
}

static const baton__sub_type barrier_sub = {zero_wakeups, false, false};

/* channel, counted as, join a live subscription, attempt, sleep bound, give up */
static const baton__wait_ops barrier_wait = {&barrier_sub, BATON_KIND_BARRIER, true, attempt, bound,
                                             give_up};

static int await_phase(baton_barrier *b, int which, int64_t timeout_ms, int64_t *index,
                       int64_t *generation);

/* Counted for close from start to end; its wait is cancelled through b (core/ops.h). */
static int counted_phase(baton_barrier *b, int which, int64_t timeout_ms, int64_t *index,
                         int64_t *generation)
{
    int entered_ = baton__object_enter((baton__object *)b); /* before its client is read */
    if (entered_ != BATON_OK)
        return entered_;
    BATON__COUNTED_CALL(b ? b->base.client : NULL, b,
                        await_phase(b, which, timeout_ms, index, generation));
}

static int await_phase(baton_barrier *b, int which, int64_t timeout_ms, int64_t *index,
                       int64_t *generation)
{
    int rc = baton__object_enter((baton__object *)b);
    if (rc != BATON_OK)
        return rc;
    if (baton__check_wait(timeout_ms) != BATON_OK)
        return baton__fail(b->base.client, BATON_EINVAL, "timeout_ms %lld", (long long)timeout_ms);
    int64_t start = baton__stat_start(b->base.client);
    phase *ph = &b->ph[which];
    awaiting a = {.b = b, .p = ph, .lease_ms = b->base.cfg.watchdog_ms};
    if (ph->unresolved[0]) {
        snprintf(a.id, sizeof a.id, "%s", ph->unresolved);
        a.reused = true;
    } else {
        new_party_id(&a);
    }
    snprintf(a.lease, sizeof a.lease, "%lld", (long long)a.lease_ms);
    rc = baton__wait_for(b->base.client, &barrier_wait, a.p->channel, timeout_ms, &a);
    /* An arrival whose fate is unknown (its reply lost), or one that arrived and then failed
     * before its generation ended (the server lost while it waited, its give-up's leave
     * lost too): it may still count, so the next await is that arrival again (the script
     * answers what became of it) rather than a second party of this process. */
    if (a.unknown || (a.arrived && !a.ended && rc != BATON_OK))
        snprintf(ph->unresolved, sizeof ph->unresolved, "%s", a.id);
    else if (a.arrived || !a.reused)
        ph->unresolved[0] = '\0';
    baton__stat_acquire(b->base.client, BATON_KIND_BARRIER, rc, start, b->base.name);
    if (rc == BATON_ETIMEDOUT)
        return baton__fail(b->base.client, rc,
                           "barrier %s: generation %lld did not trip within %lld ms (it is "
                           "broken for the others)",
                           b->base.name, (long long)a.gen, (long long)timeout_ms);
    if (rc == BATON_OK) {
        if (index)
            *index = a.index;
        if (generation)
            *generation = a.gen;
    }
    return rc;
}

int baton_barrier_await(baton_barrier *b, int64_t timeout_ms, int64_t *index, int64_t *generation)
{
    return counted_phase(b, 0, timeout_ms, index, generation);
}

int baton_barrier_enter(baton_barrier *b, int64_t timeout_ms)
{
    return counted_phase(b, 0, timeout_ms, NULL, NULL);
}

int baton_barrier_leave(baton_barrier *b, int64_t timeout_ms)
{
    return counted_phase(b, 1, timeout_ms, NULL, NULL);
}

int baton_barrier_state(baton_barrier *b, int64_t *waiting, int64_t *generation)
{
    int rc = baton__object_enter((baton__object *)b);
    if (rc != BATON_OK)
        return rc;
    const char *argv[5] = {"HMGET", b->ph[0].state, "count", "gen", NULL};
    redisReply *r;
    rc = baton__query_argv(b->base.client, 4, argv, &r);
    if (rc != BATON_OK)
        return rc;
    bool ok = r->type == REDIS_REPLY_ARRAY && r->elements == 2;
    if (ok) {
        if (waiting)
            *waiting = r->element[0]->type == REDIS_REPLY_STRING
                           ? strtoll(r->element[0]->str, NULL, 10)
                           : 0;
        if (generation)
            *generation = r->element[1]->type == REDIS_REPLY_STRING
                              ? strtoll(r->element[1]->str, NULL, 10)
                              : 0;
    }
    freeReplyObject(r);
    return ok ? BATON_OK
              : baton__fail(b->base.client, BATON_EPROTO, "barrier %s: unexpected reply to HMGET",
                            b->base.name);
}
