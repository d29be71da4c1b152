/*
 * The count-down latch, with Redisson's layout: the count is a string at the latch's name;
 * "0" (reached zero) and "1" (new count) are published on
 * redisson_countdownlatch__channel__{name}. A latch that reached zero has no key, so an
 * absent key reads as a count of 0 and try_set_count can arm it again.
 *
 * Two of Redisson's hangs are fixed here. Delete publishes "0", not "new count": the key is
 * gone, the count is 0, so waiters return instead of waiting for a message that never
 * comes. And a waiter never depends on a message alone: it re-reads the count at least every
 * recheck_ms (a client option), so a "0" lost with a dropped connection costs at most that.
 *
 * await reads the count; if it is not 0 it takes a reference on the channel's subscription
 * (one per client, however many threads wait), reads again (a "0" published before the
 * subscription was confirmed would otherwise be missed), then sleeps until a wake-up, the
 * re-check interval or the deadline, and reads again. The dispatcher wakes every waiter of
 * a latch channel on "0" and on a reconnection. A waiter that gives up (timeout, error)
 * drops its reference synchronously, so it leaves no subscription behind.
 */
#define _GNU_SOURCE
#include "../core/prim.h"

#include <hiredis/hiredis.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ZERO_COUNT_MESSAGE "0"
#define NEW_COUNT_MESSAGE "1"

/* The base's name is the key holding the count; its channel
 * redisson_countdownlatch__channel__{name}. */
struct baton_latch {
    baton__object base;
};

/* ------------------------------- open and close --------------------------------------- */

/* A latch is the base alone. */
static const baton__object_kind latch_kind = {.what = "latch",
                                              .channel_prefix = BATON__KEY_LATCH_CHANNEL,
                                              .size = sizeof(baton_latch),
                                              .reads = BATON__OPT_RECHECK};

int baton_latch_open(baton_client *c, const char *name, baton_latch **out)
{
    return baton__object_new(c, name, &latch_kind, NULL, NULL, out);
}

int baton_latch_open_opts(baton_client *c, const char *name, const baton_handle_options *opts,
                          baton_latch **out)
{
    return baton__object_new(c, name, &latch_kind, opts, NULL, out);
}

/* baton_latch_cancel_waits, baton_latch_close */
BATON__OBJECT_VERBS(baton_latch, latch_kind)

/* Validation shared by every verb. */
static int enter(baton_latch *l)
{
    return baton__object_enter((baton__object *)l);
}

/* ------------------------------- scripts ---------------------------------------------- */

/* Runs one of the latch's scripts (KEYS: name, channel; ARGV: message [, arg]) and stores
 * its integer reply in *out. */
static int run(baton_latch *l, const baton__script *script, const char *message, const char *arg,
               long long *out)
{
    baton_client *c = l->base.client;
    const char *keys[2] = {l->base.name, l->base.channel};
    const char *args[2] = {message, arg};
    redisReply *r;
    int rc = baton__script_run(c, script, 2, keys, arg ? 2 : 1, args, &r);
    if (rc != BATON_OK)
        return rc;
    int type = r->type;
    *out = r->integer;
    freeReplyObject(r);
    if (type != REDIS_REPLY_INTEGER)
        return baton__fail(c, BATON_EPROTO, "latch %s: unexpected reply to %s", l->base.name,
                           script->name);
    return BATON_OK;
}

int baton_latch_try_set_count(baton_latch *l, int64_t count, bool *was_set)
{
    int rc = enter(l);
    if (rc != BATON_OK)
        return rc;
    if (count < 1)
        return baton__fail(l->base.client, BATON_EINVAL, "latch %s: count %lld: must be >= 1",
                           l->base.name, (long long)count);
    char n[32];
    snprintf(n, sizeof n, "%lld", (long long)count);
    long long set = 0;
    rc = run(l, &baton__script_latch_try_set_count, NEW_COUNT_MESSAGE, n, &set);
    if (rc == BATON_OK && was_set)
        *was_set = set == 1;
    return rc;
}

int baton_latch_count_down(baton_latch *l)
{
    int rc = enter(l);
    if (rc != BATON_OK)
        return rc;
    baton_client *c = l->base.client;
    /* A decrement is not idempotent: a request latch makes the re-send after a lost reply
     * count once (once.c). */
    const char *keys[2] = {l->base.name, l->base.channel};
    const char *args[1] = {ZERO_COUNT_MESSAGE};
    redisReply *r;
    rc = baton__script_run_once(c, &baton__script_latch_count_down, l->base.request_prefix, 2, keys,
                                1, args, &r);
    if (rc != BATON_OK)
        return rc;
    int type = r->type;
    freeReplyObject(r);
    if (type != REDIS_REPLY_INTEGER)
        return baton__fail(c, BATON_EPROTO, "latch %s: unexpected reply to count_down",
                           l->base.name);
    return BATON_OK;
}

int baton_latch_delete(baton_latch *l, bool *existed)
{
    int rc = enter(l);
    if (rc != BATON_OK)
        return rc;
    long long was = 0;
    rc = run(l, &baton__script_latch_delete, ZERO_COUNT_MESSAGE, NULL, &was);
    if (rc == BATON_OK && existed)
        *existed = was == 1;
    return rc;
}

/* ------------------------------- count ------------------------------------------------ */

/* GET, not a script: waiters read the count on every wake-up, and a key of another type
 * already fails with WRONGTYPE. */
static int read_count(baton_latch *l, int64_t *out)
{
    baton_client *c = l->base.client;
    const char *argv[2] = {"GET", l->base.name};
    redisReply *r;
    int rc = baton__query_argv(c, 2, argv, &r);
    if (rc != BATON_OK)
        return rc;
    if (r->type == REDIS_REPLY_NIL) {
        freeReplyObject(r);
        *out = 0;
        return BATON_OK;
    }
    if (r->type != REDIS_REPLY_STRING) {
        freeReplyObject(r);
        return baton__fail(c, BATON_EPROTO, "latch %s: unexpected reply to GET", l->base.name);
    }
    char *end = NULL;
    errno = 0;
    long long v = strtoll(r->str, &end, 10);
    bool ok = r->len > 0 && end == r->str + r->len && errno == 0;
    freeReplyObject(r);
    if (!ok)
        return baton__fail(c, BATON_EPROTO, "latch %s holds a value that is not a count",
                           l->base.name);
    *out = v;
    return BATON_OK;
}

int baton_latch_count(baton_latch *l, int64_t *out)
{
    int rc = enter(l);
    if (rc != BATON_OK)
        return rc;
    if (!out)
        return baton__fail(l->base.client, BATON_EINVAL, "latch %s: out is NULL", l->base.name);
    int64_t v = 0;
    rc = read_count(l, &v);
    if (rc == BATON_OK)
        *out = v > 0 ? v : 0; /* a count written below 1 by someone else is an open latch */
    return rc;
}

/* ------------------------------- await ------------------------------------------------ */

/* Reads the count: BATON_OK when the latch is open, BATON_ETIMEDOUT (quietly: the caller
 * decides whether that is a failure) while it is closed, or an error. */
static int is_open(baton_latch *l)
{
    int64_t n = 0;
    baton__stat_inc(l->base.client, BATON__ST_ATTEMPTS + BATON_KIND_LATCH);
    int rc = read_count(l, &n);
    if (rc != BATON_OK)
        return rc;
    return n <= 0 ? BATON_OK : BATON_ETIMEDOUT;
}

typedef struct awaiting {
    baton_latch *l;
    baton__sub *sub; /* the subscription seen first, and its message count then */
    uint64_t seen;
    int64_t recheck_ms;
} awaiting;

static int try_once(void *arg, baton__sub *sub)
{
    awaiting *a = arg;
    if (sub && !a->sub) {
        a->sub = sub;
        a->seen = baton__sub_messages(a->l->base.client, sub);
    } else if (sub && baton__sub_messages(a->l->base.client, sub) != a->seen) {
        /* A "0" that arrived after this waiter saw the latch closed means it opened: no
         * need to ask the server (with a thousand waiters, a thousand GETs saved). */
        return BATON_OK;
    }
    return is_open(a->l);
}

/* Re-read after recheck_ms: a "0" lost with a dropped connection costs at most that. */
static int64_t recheck(void *arg)
{
    return ((awaiting *)arg)->recheck_ms;
}

static int await(baton_latch *l, int64_t timeout_ms);

/* Counted for close from start to end (core/evloop.h). */
int baton_latch_await(baton_latch *l, int64_t timeout_ms)
{
    int entered_ = baton__object_enter((baton__object *)l); /* before its client is read */
    if (entered_ != BATON_OK)
        return entered_;
    BATON__COUNTED_CALL(l ? l->base.client : NULL, l, await(l, timeout_ms));
}

/* How a message wakes the waiters on a latch's channel: "0" (it reached zero) all of them;
 * any other (a new count) none. The subscription does not linger. */
static int64_t zero_wakeups(const char *payload, size_t len, int refs, int64_t pending)
{
    (void)pending;
    bool ok;
    int64_t v = baton__sub_payload_int(payload, len, &ok);
    return (ok && v == 0) ? refs : 0;
}

const baton__sub_type baton__latch_sub = {zero_wakeups, false, false};

/* channel, counted as, join a live subscription, attempt, sleep bound, give up */
static const baton__wait_ops latch_wait = {&baton__latch_sub, BATON_KIND_LATCH, false, try_once,
                                           recheck};

static int await(baton_latch *l, int64_t timeout_ms)
{
    int rc = enter(l);
    if (rc != BATON_OK)
        return rc;
    baton_client *c = l->base.client;
    if (baton__check_wait(timeout_ms) != BATON_OK)
        return baton__fail(c, BATON_EINVAL,
                           "latch %s: timeout_ms %lld: use BATON_WAIT_FOREVER or 0..%lld ms",
                           l->base.name, (long long)timeout_ms, (long long)BATON_MAX_DURATION_MS);
    int64_t start = baton__stat_start(c);
    awaiting a = {.l = l, .recheck_ms = l->base.cfg.recheck_ms};
    /* A latch channel does not linger after its last waiter (dispatch.c): nothing to join. */
    rc = baton__wait_for(c, &latch_wait, l->base.channel, timeout_ms, &a);
    baton__stat_acquire(c, BATON_KIND_LATCH, rc, start, l->base.name);
    if (rc == BATON_ETIMEDOUT && timeout_ms == 0)
        return baton__fail(c, rc, "latch %s is closed", l->base.name);
    if (rc == BATON_ETIMEDOUT)
        return baton__fail(c, rc, "latch %s: still closed after %lld ms", l->base.name,
                           (long long)timeout_ms);
    return rc;
}

/* ------------------------------- asynchronous forms ----------------------------------- */

/* What an asynchronous operation's fiber runs (async.c): the blocking verb. */
static int async_await(void *h, const baton__op_args *a)
{
    return baton_latch_await(h, a->wait_ms);
}

int baton_latch_await_async(baton_latch *l, int64_t timeout_ms, baton_async_fn fn, void *arg,
                            baton_op **op)
{
    if (op)
        *op = NULL;
    int rc = enter(l);
    if (rc != BATON_OK)
        return rc;
    baton__op_args a = {.wait_ms = timeout_ms};
    return baton__op_start(l->base.client, l, async_await, false, &a, fn, arg, op);
}
