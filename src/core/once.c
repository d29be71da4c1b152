/*
 * Writes that count once: the request-id protocol shared by every script whose effect must
 * not be applied twice (a lock's release, a semaphore's acquire, release and add_permits, a
 * latch's count_down), so that the library may send it again when its reply was lost.
 *
 * The caller's script gets one more key, a request latch <prefix><client-id>:<n> unique to
 * this logical call, and one more argument, how long the latch lives. The script returns the
 * latch's value if it exists (the first attempt ran: its outcome is repeated), and otherwise
 * does its work and stores its outcome there. A lost reply (timeout, connection cut, server
 * paused past the command timeout) is therefore followed by a re-send with the same request
 * id, on a fresh connection, up to ATTEMPTS times in all: whichever attempt the server ran
 * first decides, and every later one only reads the latch. The latch outlives every attempt
 * that can still arrive (LATCH_LIFE below), so a late attempt can never apply the work twice.
 * A BUSY server (a script running past its busy-reply-threshold) refuses the write without
 * running it: the write goes again after a pause, within the same bound as the attempts
 * (ATTEMPTS x (connect + command timeout)), and only then does the BUSY stand.
 */
#include "internal.h"

#include <hiredis/hiredis.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Three attempts, as Redisson's retryAttempts of 3 after its first try would allow four: a
 * pause of the server up to about two command timeouts is absorbed. */
#define ATTEMPTS 3

/* How many attempts' worth of time (connect + command timeout each) the request latch
 * lives: every attempt, and one more as a margin. */
#define LATCH_LIFE_ATTEMPTS (ATTEMPTS + 1)

/* The most keys and arguments a caller passes (the request latch and its lifetime are
 * added to them). */
#define MAX_KEYS 8
#define MAX_ARGS 12

/* Whether the call's failure was the server's BUSY (a script or function running past
 * busy-reply-threshold): the server refused the command, which did not run, whether it came
 * as the reply ("server replied: BUSY ...") or to a new connection's PING ("PING refused:
 * BUSY ..."). Redis 8 and Valkey 8 answer it sooner than one might think: TIME inside a
 * script stands still there until the threshold, so a script timed by TIME runs until it. */
static bool server_busy(baton_client *c)
{
    return strstr(baton_client_errmsg(c), ": BUSY ") != NULL;
}

/* Waits a little before a write the server refused as BUSY goes again: a quarter of the
 * command timeout, never past bound_us (the attempts' own bound, which the request latch
 * outlives). False when the bound is reached: the BUSY stands. */
static bool busy_pause(const baton__config *cfg, int64_t bound_us)
{
    int64_t now = baton__now_us();
    int64_t until = now + cfg->command_timeout_ms * 250;
    if (until > bound_us)
        until = bound_us;
    if (now >= until)
        return false;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    baton__mutex_init(&mu);
    baton__cond_init(&cv);
    baton__mutex_lock(&mu);
    while (baton__cond_wait_until(&cv, &mu, until) != ETIMEDOUT)
        ; /* nobody signals it: the wait ends at until */
    baton__mutex_unlock(&mu);
    baton__cond_destroy(&cv);
    baton__mutex_destroy(&mu);
    return true;
}

static int run_once(baton_client *c, const baton__script *s, const char *latch_prefix, int nkeys,
                    const char **keys, int nargs, const char **args, bool latch_as_arg,
                    struct redisReply **reply)
{
    static atomic_uint_fast64_t requests;
    *reply = NULL;
    if (nkeys < 0 || nkeys >= MAX_KEYS || nargs < 0 || nargs + 3 > MAX_ARGS)
        return baton__fail(c, BATON_EINVAL, "%s: too many keys or arguments", s->name);
    const baton__config *cfg = baton__client_config(c);
    char *latch = baton__asprintf(
        "%s%s:%llu", latch_prefix, baton_client_id(c),
        (unsigned long long)atomic_fetch_add_explicit(&requests, 1, memory_order_relaxed));
    if (!latch)
        return baton__fail(c, BATON_ENOMEM, "out of memory");
    char life[32];
    snprintf(
        life, sizeof life, "%lld",
        (long long)(LATCH_LIFE_ATTEMPTS * (cfg->connect_timeout_ms + cfg->command_timeout_ms)));
    const char *k[MAX_KEYS], *a[MAX_ARGS];
    for (int i = 0; i < nkeys; i++)
        k[i] = keys[i];
    for (int i = 0; i < nargs; i++)
        a[i] = args[i];
    a[nargs] = life;
    if (latch_as_arg)
        a[nargs + 1] = latch;
    else
        k[nkeys] = latch;
    /* Both forms also say which attempt this is, last: "0", the first, which need not read
     * a latch that cannot exist yet; "1", a retry. */
    int xk = latch_as_arg ? 0 : 1, xa = latch_as_arg ? 3 : 2;
    int rc = BATON_ECONN;
    int64_t bound_us = baton__now_us() + (int64_t)ATTEMPTS *
                                             (cfg->connect_timeout_ms + cfg->command_timeout_ms) *
                                             1000;
    for (int i = 0, sent = 0; i < ATTEMPTS && rc == BATON_ECONN; sent++) {
        a[nargs + xa - 1] = sent == 0 ? "0" : "1";
        rc = baton__script_run(c, s, nkeys + xk, k, nargs + xa, a, reply);
        if (rc != BATON_OK && rc != BATON_ECONN && server_busy(c) && busy_pause(cfg, bound_us))
            rc = BATON_ECONN; /* it did not run: again, not counted as an attempt */
        else
            i++;
    }
    free(latch);
    return rc;
}

int baton__script_run_once(baton_client *c, const baton__script *s, const char *latch_prefix,
                           int nkeys, const char **keys, int nargs, const char **args,
                           struct redisReply **reply)
{
    return run_once(c, s, latch_prefix, nkeys, keys, nargs, args, false, reply);
}

int baton__script_run_once_arg(baton_client *c, const baton__script *s, const char *latch_prefix,
                               int nkeys, const char **keys, int nargs, const char **args,
                               struct redisReply **reply)
{
    return run_once(c, s, latch_prefix, nkeys, keys, nargs, args, true, reply);
}
