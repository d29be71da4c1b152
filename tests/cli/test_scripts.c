/*
 * The Lua scripts against a real redis-server, each run directly (EVAL of the bytes the build
 * embeds): every script fails before it writes. For each script, each of its keys is given
 * the wrong type (a string where a hash, list or zset is expected, a hash or a non-integer
 * string where a count is), in each of a few states of its object (free, held by the caller,
 * held by another, waiters queued...); a run that fails must leave every key of the server
 * as it was (DUMP and PTTL of each), and a run that succeeds must leave the wrong-typed key
 * alone. And the server's ACL: NOPERM is BATON_EPERM with a message naming what was refused;
 * a refused PUBLISH after a release is reported as such (released; waiters not told); the
 * single-server rule of docs/security.md lets every verb run, and each command taken out of
 * it fails the verbs that need it with BATON_EPERM.
 */
#define _GNU_SOURCE
#include "acl_helper.h"
#include "cli_helper.h"
#include "helper.h"
#include "internal.h"

#include <criterion/logging.h>
#include "new_assert.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

TestSuite(scripts, .timeout = 120);

/* ------------------------------- the table of scripts ---------------------------------- */

/* What a key of a script holds:
 *   'h' a hash, 'l' a list, 'z' a zset, 'i' a string holding an integer, 's' a string (a
 *   request or unlock latch), 'x' a stream, 'a' an advisory hash the script writes with pcall (a
 * wrong type there is left alone and the script goes on), 'n' the plain lock's reservation (a
 * string read with pcall: a hash there is none; it is left alone, deleted, or replaced by a
 * reservation when the lock is handed on), 'c' a channel or 'p' a key prefix (not
 * keys: never corrupted), 'r' a key a read-only script reads whatever its type. */
typedef struct kspec {
    const char *tmpl; /* '$' stands for the object's name */
    char kind;
} kspec;

typedef enum family {
    F_LOCK,
    F_FAIR,
    F_RW,
    F_SEM,
    F_PERMITS,
    F_LATCH,
    F_INSPECT,
    F_ELECT,
    F_BARRIER
} family;

typedef struct spec {
    const char *script;
    family fam;
    kspec keys[8];
    const char *args[12]; /* NULL-terminated; '$' as in keys */
} spec;

#define ID1 "00112233445566778899aabbccddeeff"
#define ID2 "ffeeddccbbaa99887766554433221100"

#define K_LOCK                                                                                     \
    {                                                                                              \
        "$", 'h'                                                                                   \
    }
#define K_TOKEN                                                                                    \
    {                                                                                              \
        "redisson_lock_token:{$}", 'i'                                                             \
    }
#define K_META                                                                                     \
    {                                                                                              \
        "baton_lock_meta:{$}", 'a'                                                                 \
    }
#define K_NEXT                                                                                     \
    {                                                                                              \
        "baton_lock_next:{$}", 'n'                                                                 \
    }
#define K_LINE                                                                                     \
    {                                                                                              \
        "baton_lock_line:{$}", 'a'                                                                 \
    }
#define K_SNEXT                                                                                    \
    {                                                                                              \
        "baton_semaphore_next:{$}", 'n'                                                            \
    }
#define K_SLINE                                                                                    \
    {                                                                                              \
        "baton_semaphore_line:{$}", 'a'                                                            \
    }
#define K_UNLOCK                                                                                   \
    {                                                                                              \
        "redisson_unlock_latch:{$}:r1", 's'                                                        \
    }
#define K_QUEUE                                                                                    \
    {                                                                                              \
        "redisson_lock_queue:{$}", 'l'                                                             \
    }
#define K_DEADLINES                                                                                \
    {                                                                                              \
        "redisson_lock_timeout:{$}", 'z'                                                           \
    }
#define K_FAIRCH                                                                                   \
    {                                                                                              \
        "redisson_lock__channel:{$}", 'c'                                                          \
    }
#define K_WRITERS                                                                                  \
    {                                                                                              \
        "baton_rwlock_writers:{$}", 'z'                                                            \
    }
#define K_RWCH                                                                                     \
    {                                                                                              \
        "redisson_rwlock:{$}", 'c'                                                                 \
    }
#define K_COUNT                                                                                    \
    {                                                                                              \
        "$", 'i'                                                                                   \
    }
#define K_REQUEST                                                                                  \
    {                                                                                              \
        "baton_request:{$}:r1", 's'                                                                \
    }
#define K_SEMCH                                                                                    \
    {                                                                                              \
        "redisson_sc:{$}", 'c'                                                                     \
    }
#define K_LEASES                                                                                   \
    {                                                                                              \
        "{$}:timeout", 'z'                                                                         \
    }
#define K_LATCHCH                                                                                  \
    {                                                                                              \
        "redisson_countdownlatch__channel__{$}", 'c'                                               \
    }

#define SEM_CH "redisson_sc:{$}"
/* the semaphore's reservation and line, passed as arguments */
#define SEM_NL "baton_semaphore_next:{$}", "baton_semaphore_line:{$}"

static const spec SPECS[] = {
    {"lock_acquire",
     F_LOCK,
     {K_LOCK, K_TOKEN, K_NEXT, K_LINE},
     {"30000", "A:1", "0", "redisson_lock__channel:{$}", "10000", "0"}},
    {"lock_acquire",
     F_LOCK,
     {K_LOCK, K_TOKEN, K_NEXT, K_LINE},
     {"30000", "A:1", "1", "redisson_lock__channel:{$}", "10000", "0"}},
    {"lock_acquire",
     F_LOCK,
     {K_LOCK, K_TOKEN, K_NEXT, K_LINE},
     {"30000", "A:1", "2", "redisson_lock__channel:{$}", "10000", "0"}},
    {"lock_release",
     F_LOCK,
     {K_LOCK},
     {"0", "30000", "A:1", "redisson_lock__channel:{$}", "baton_lock_next:{$}",
      "baton_lock_line:{$}", "60000", "redisson_unlock_latch:{$}:r1", "1"}},
    {"lock_force_release", F_LOCK, {K_LOCK, K_FAIRCH, K_NEXT, K_LINE}, {"0"}},
    {"lock_unreserve", F_LOCK, {K_LOCK, K_NEXT, K_LINE}, {"A:1", "redisson_lock__channel:{$}"}},
    {"lock_renew", F_LOCK, {{"$", 'a'}}, {"30000", "A:1"}},
    {"hold_check", F_LOCK, {{"$", 'r'}}, {"A:1"}},
    {"fairlock_acquire",
     F_FAIR,
     {K_LOCK, K_QUEUE, K_DEADLINES, K_TOKEN, K_FAIRCH, K_META},
     {"30000", "A:1", "5000", "0", "h:1"}},
    {"fairlock_acquire",
     F_FAIR,
     {K_LOCK, K_QUEUE, K_DEADLINES, K_TOKEN, K_FAIRCH, K_META},
     {"30000", "A:1", "5000", "1", "h:1"}},
    {"fairlock_acquire",
     F_FAIR,
     {K_LOCK, K_QUEUE, K_DEADLINES, K_TOKEN, K_FAIRCH, K_META},
     {"30000", "A:1", "5000", "2", "h:1"}},
    {"fairlock_acquire",
     F_FAIR,
     {K_LOCK, K_QUEUE, K_DEADLINES, K_TOKEN, K_FAIRCH, K_META},
     {"30000", "A:1", "5000", "3", "h:1"}},
    {"fairlock_cancel", F_FAIR, {K_LOCK, K_QUEUE, K_DEADLINES, K_FAIRCH}, {"A:1"}},
    {"fairlock_force_release", F_FAIR, {K_LOCK, K_QUEUE, K_DEADLINES, K_FAIRCH, K_META}, {"0"}},
    {"fairlock_release",
     F_FAIR,
     {K_LOCK, K_QUEUE, K_DEADLINES, K_FAIRCH, K_META, K_UNLOCK},
     {"0", "30000", "A:1", "60000"}},
    {"rwlock_read_acquire",
     F_RW,
     {K_LOCK, K_TOKEN, K_WRITERS, {"{$}", 'p'}},
     {"30000", "A:1", "A:1:write"}},
    {"rwlock_write_acquire",
     F_RW,
     {K_LOCK, K_TOKEN, K_WRITERS},
     {"30000", "A:1:write", "A:1", "5000", "1"}},
    {"rwlock_write_acquire",
     F_RW,
     {K_LOCK, K_TOKEN, K_WRITERS},
     {"30000", "A:1:write", "A:1", "5000", "0"}},
    {"rwlock_write_cancel", F_RW, {K_LOCK, K_WRITERS, K_RWCH}, {"A:1:write"}},
    {"rwlock_read_release",
     F_RW,
     {K_LOCK, K_RWCH, {"{$}", 'p'}, K_UNLOCK},
     {"0", "30000", "A:1", "60000"}},
    {"rwlock_write_release",
     F_RW,
     {K_LOCK, K_RWCH, K_UNLOCK},
     {"0", "30000", "A:1:write", "60000"}},
    {"rwlock_read_force_release", F_RW, {K_LOCK, K_RWCH}, {"0"}},
    {"rwlock_write_force_release", F_RW, {K_LOCK, K_RWCH}, {"0"}},
    {"semaphore_acquire",
     F_SEM,
     {K_COUNT, K_SNEXT, K_SLINE, K_REQUEST},
     {"1", "1:A:1", "0", SEM_CH, "10000", "60000"}},
    {"semaphore_acquire",
     F_SEM,
     {K_COUNT, K_SNEXT, K_SLINE, K_REQUEST},
     {"1", "1:A:1", "1", SEM_CH, "10000", "60000"}},
    {"semaphore_acquire",
     F_SEM,
     {K_COUNT, K_SNEXT, K_SLINE, K_REQUEST},
     {"2", "2:A:1", "2", SEM_CH, "10000", "60000"}},
    {"semaphore_add_permits", F_SEM, {K_COUNT, K_SEMCH, K_REQUEST}, {"2", SEM_NL, "60000"}},
    {"semaphore_add_permits", F_SEM, {K_COUNT, K_SEMCH, K_REQUEST}, {"-2", SEM_NL, "60000"}},
    {"semaphore_delete", F_SEM, {K_COUNT}, {NULL}},
    {"semaphore_drain", F_SEM, {K_COUNT}, {NULL}},
    {"semaphore_release", F_SEM, {K_COUNT, K_SEMCH, K_REQUEST}, {"1", SEM_NL, "60000"}},
    {"semaphore_try_set_permits", F_SEM, {K_COUNT, K_SEMCH}, {"3", SEM_NL}},
    {"semaphore_unreserve", F_SEM, {K_COUNT, K_SNEXT, K_SLINE}, {"1:A:1", SEM_CH}},
    {"permits_acquire",
     F_PERMITS,
     {K_COUNT, K_LEASES, K_SEMCH, K_SNEXT, K_SLINE},
     {"30000", "1:A:1", "0", "10000", ID2}},
    {"permits_acquire",
     F_PERMITS,
     {K_COUNT, K_LEASES, K_SEMCH, K_SNEXT, K_SLINE},
     {"30000", "1:A:1", "2", "10000", ID2}},
    {"permits_available", F_PERMITS, {K_COUNT, K_LEASES, K_SEMCH}, {NULL}},
    {"permits_check", F_PERMITS, {{"{$}:timeout", 'r'}}, {ID1}},
    {"permits_release", F_PERMITS, {K_COUNT, K_LEASES, K_SEMCH, K_REQUEST}, {ID1, SEM_NL, "60000"}},
    {"permits_renew", F_PERMITS, {{"{$}:timeout", 'a'}}, {"30000", ID1}},
    {"permits_try_set_permits", F_PERMITS, {K_COUNT, K_LEASES, K_SEMCH}, {"3", SEM_NL}},
    {"permits_update_lease", F_PERMITS, {K_LEASES}, {ID1, "30000"}},
    {"latch_count_down", F_LATCH, {K_COUNT, K_LATCHCH, K_REQUEST}, {"0", "60000"}},
    {"fenced_set", F_LATCH, {{"$", 's'}, {"baton_fence:{$}", 'i'}}, {"5", "v"}},
    {"latch_delete", F_LATCH, {K_COUNT, K_LATCHCH}, {"0"}},
    {"latch_try_set_count", F_LATCH, {K_COUNT, K_LATCHCH}, {"1", "3"}},
    {"election_proclaim",
     F_ELECT,
     {K_LOCK,
      {"baton_election:{$}", 'h'},
      {"baton_election_log:{$}", 'x'},
      {"baton_election__channel:{$}", 'c'}},
     {"A:1", "v", "proclaim", "1", "h:1", "1000"}},
    {"election_resign",
     F_ELECT,
     {K_LOCK,
      K_FAIRCH,
      K_META,
      {"baton_election:{$}", 'h'},
      {"baton_election_log:{$}", 'x'},
      {"baton_election__channel:{$}", 'c'},
      K_UNLOCK},
     {"0", "30000", "A:1", "60000"}},
    {"election_observe",
     F_ELECT,
     {K_LOCK,
      {"baton_election:{$}", 'h'},
      {"baton_election_log:{$}", 'x'},
      {"baton_election__channel:{$}", 'c'}},
     {"-", "10", "1000"}},
    {"barrier_arrive",
     F_BARRIER,
     {{"baton_barrier:{$}", 'h'},
      {"baton_barrier_parties:{$}", 'h'},
      {"baton_barrier__channel:{$}", 'c'}},
     {"3", "p1", "30000", "86400000"}},
    {"barrier_check", /* p0 of generation 0 looks (renews, or breaks it for a dead party) */
     F_BARRIER,
     {{"baton_barrier:{$}", 'h'},
      {"baton_barrier_parties:{$}", 'h'},
      {"baton_barrier__channel:{$}", 'c'}},
     {"0", "p0", "30000", "wait", "86400000"}},
    {"barrier_check", /* p0 gives up: breaks generation 0 */
     F_BARRIER,
     {{"baton_barrier:{$}", 'h'},
      {"baton_barrier_parties:{$}", 'h'},
      {"baton_barrier__channel:{$}", 'c'}},
     {"0", "p0", "30000", "leave", "86400000"}},
    {"inspect",
     F_INSPECT,
     {{"$", 'r'},
      {"redisson_lock_queue:{$}", 'r'},
      {"redisson_lock_timeout:{$}", 'r'},
      {"redisson_lock_token:{$}", 'r'},
      {"baton_lock_meta:{$}", 'r'},
      {"{$}:timeout", 'r'},
      {"baton_lock_line:{$}", 'r'}},
     {"redisson_lock__channel:{$}", "redisson_sc:{$}", "redisson_countdownlatch__channel__{$}"}},
};
#define NSPECS (sizeof SPECS / sizeof SPECS[0])

/* A wrong value that a script takes for a legitimate state, in which it writes nothing: no
 * failure is owed ("*": any wrong value). */
typedef struct unread {
    const char *script, *key, *how;
} unread;
static const unread UNREAD[] = {
    /* a count that exists is "already set": EXISTS only, nothing written */
    {"permits_try_set_permits", "$", "*"},
    /* a string that exists is a count "already set" (nothing written) */
    {"semaphore_try_set_permits", "$", "text"},
    {"latch_try_set_count", "$", "text"},
    /* the lock is only asked whether it exists (is the line served now): a key of any type
     * is a lock that is not free */
    {"lock_unreserve", "$", "*"},
    /* the count is only read (with pcall) for what the line's next may get: a key of
     * another type is no permit free, and the waiter leaves the line all the same */
    {"semaphore_unreserve", "$", "*"},
};

/* ------------------------------- running scripts -------------------------------------- */

static char *expand(const char *tmpl, const char *name)
{
    size_t n = strlen(tmpl) + 1;
    for (const char *p = tmpl; *p; p++)
        if (*p == '$')
            n += strlen(name);
    char *out = malloc(n), *w = out;
    cr_assert(out != NULL);
    for (const char *p = tmpl; *p; p++) {
        if (*p == '$') {
            strcpy(w, name);
            w += strlen(name);
        } else {
            *w++ = *p;
        }
    }
    *w = '\0';
    return out;
}

static int spec_nkeys(const spec *s)
{
    int n = 0;
    while (n < 8 && s->keys[n].tmpl)
        n++;
    return n;
}

static int spec_nargs(const spec *s)
{
    int n = 0;
    while (n < 12 && s->args[n])
        n++;
    return n;
}

/* EVAL of the embedded script with the keys and args given as templates; caller frees. */
static redisReply *eval_t(redisContext *r, const char *script, const char *name, int nkeys,
                          const char *const *keys, int nargs, const char *const *args)
{
    const baton__script *s = baton__script_find(script);
    cr_assert(s != NULL, "no script %s", script);
    int argc = 3 + nkeys + nargs;
    const char **argv = calloc((size_t)argc, sizeof *argv);
    size_t *lens = calloc((size_t)argc, sizeof *lens);
    char nk[16];
    snprintf(nk, sizeof nk, "%d", nkeys);
    argv[0] = "EVAL";
    argv[1] = s->body;
    argv[2] = nk;
    for (int i = 0; i < nkeys; i++)
        argv[3 + i] = expand(keys[i], name);
    for (int i = 0; i < nargs; i++)
        argv[3 + nkeys + i] = expand(args[i], name);
    for (int i = 0; i < argc; i++)
        lens[i] = i == 1 ? s->len : strlen(argv[i]);
    redisReply *rep = redisCommandArgv(r, argc, argv, lens);
    cr_assert(rep != NULL, "EVAL %s: %s", script, r->errstr);
    for (int i = 3; i < argc; i++)
        free((char *)argv[i]);
    free(argv);
    free(lens);
    return rep;
}

/* Runs a script of the table with other args (a state's preparation); asserts success. */
static void prep_run(redisContext *r, const char *script, const char *name, const char *const *args)
{
    const spec *s = NULL;
    for (size_t i = 0; i < NSPECS && !s; i++)
        if (strcmp(SPECS[i].script, script) == 0)
            s = &SPECS[i];
    cr_assert(s != NULL);
    const char *keys[8];
    int nkeys = spec_nkeys(s), nargs = 0;
    for (int i = 0; i < nkeys; i++)
        keys[i] = s->keys[i].tmpl;
    while (args[nargs])
        nargs++;
    redisReply *rep = eval_t(r, script, name, nkeys, keys, nargs, args);
    cr_assert(rep->type != REDIS_REPLY_ERROR, "prep %s: %s", script, rep->str);
    freeReplyObject(rep);
}

#define LOCK_CH "redisson_lock__channel:{$}"
#define PREP(script, ...) prep_run(r, script, name, (const char *const[]){__VA_ARGS__, NULL})

/* The election's states: free; A:1 leads (holds the lock, has proclaimed); B:1 holds the
 * lock; A:1's record outlived its lock (expired: an observer logs it). */
static bool prepare_elect(redisContext *r, int st, const char *name)
{
    if (st == 0)
        return true;
    if (st < 1 || st > 3)
        return false;
    PREP("lock_acquire", "100000", st == 2 ? "B:1" : "A:1", "0", LOCK_CH, "10000");
    if (st != 2)
        PREP("election_proclaim", "A:1", "v", "elect", "1", "h:1", "1000");
    if (st == 3)
        freeReplyObject(th_cmd(r, "DEL %s", name));
    return true;
}

/* The barrier's states: fresh; p0 of 3 arrived; p0 and p9, whose lease ran out, arrived. */
static bool prepare_barrier(redisContext *r, int st, const char *name)
{
    if (st == 0)
        return true;
    if (st != 1 && st != 2)
        return false;
    PREP("barrier_arrive", "3", "p0", "100000", "86400000");
    if (st == 2) {
        PREP("barrier_arrive", "3", "p9", "1", "86400000");
        th_sleep_ms(3);
    }
    return true;
}

/* Puts the object in state `st` of its family; false when the family has no such state. */
static bool prepare(redisContext *r, family fam, int st, const char *name)
{
    freeReplyObject(th_cmd(r, "FLUSHALL"));
    switch (fam) {
    case F_LOCK:
        switch (st) {
        case 0:
            return true;
        case 1: /* A holds, twice */
            PREP("lock_acquire", "100000", "A:1", "0", LOCK_CH, "10000");
            PREP("lock_acquire", "100000", "A:1", "0", LOCK_CH, "10000");
            return true;
        case 2: /* A holds once */
            PREP("lock_acquire", "100000", "A:1", "0", LOCK_CH, "10000");
            return true;
        case 3: /* B holds */
            PREP("lock_acquire", "100000", "B:1", "0", LOCK_CH, "10000");
            return true;
        case 4: /* B holds; A and C wait in the line */
        case 5: /* free, reserved for A; C waits in the line */
            PREP("lock_acquire", "100000", "B:1", "0", LOCK_CH, "10000");
            PREP("lock_acquire", "100000", "A:1", "2", LOCK_CH, "10000");
            PREP("lock_acquire", "100000", "C:1", "2", LOCK_CH, "10000");
            if (st == 5)
                PREP("lock_force_release", "0");
            return true;
        }
        return false;
    case F_FAIR:
        switch (st) {
        case 0:
            return true;
        case 1: /* A holds */
            PREP("fairlock_acquire", "100000", "A:1", "100000", "0", "h:1");
            return true;
        case 2: /* A holds twice, B waits */
            PREP("fairlock_acquire", "100000", "A:1", "100000", "0", "h:1");
            PREP("fairlock_acquire", "100000", "A:1", "100000", "0", "h:1");
            PREP("fairlock_acquire", "100000", "B:1", "100000", "1", "h:2");
            return true;
        case 3: /* B holds, A waits at the head */
            PREP("fairlock_acquire", "100000", "B:1", "100000", "0", "h:2");
            PREP("fairlock_acquire", "100000", "A:1", "100000", "1", "h:1");
            return true;
        case 4: /* B holds, C waits, A waits behind */
            PREP("fairlock_acquire", "100000", "B:1", "100000", "0", "h:2");
            PREP("fairlock_acquire", "100000", "C:1", "100000", "1", "h:3");
            PREP("fairlock_acquire", "100000", "A:1", "100000", "1", "h:1");
            return true;
        case 5: /* free, A at the head (its holder's lease ran out) */
            PREP("fairlock_acquire", "100000", "B:1", "100000", "0", "h:2");
            PREP("fairlock_acquire", "100000", "A:1", "100000", "1", "h:1");
            freeReplyObject(th_cmd(r, "DEL %s", name));
            return true;
        case 6: /* free, C at the head with a lapsed place, A behind */
            PREP("fairlock_acquire", "100000", "B:1", "100000", "0", "h:2");
            PREP("fairlock_acquire", "100000", "C:1", "100000", "1", "h:3");
            PREP("fairlock_acquire", "100000", "A:1", "100000", "1", "h:1");
            freeReplyObject(th_cmd(r, "DEL %s", name));
            freeReplyObject(th_cmd(r, "ZADD redisson_lock_timeout:{%s} 1 C:1", name));
            return true;
        }
        return false;
    case F_RW:
        switch (st) {
        case 0:
            return true;
        case 1: /* A writes */
            PREP("rwlock_write_acquire", "100000", "A:1:write", "A:1", "100000", "0");
            return true;
        case 2: /* A reads, twice */
            PREP("rwlock_read_acquire", "100000", "A:1", "A:1:write");
            PREP("rwlock_read_acquire", "100000", "A:1", "A:1:write");
            return true;
        case 3: /* B writes */
            PREP("rwlock_write_acquire", "100000", "B:1:write", "B:1", "100000", "0");
            return true;
        case 4: /* B reads, A claims the write lock (waits) */
            PREP("rwlock_read_acquire", "100000", "B:1", "B:1:write");
            PREP("rwlock_write_acquire", "100000", "A:1:write", "A:1", "100000", "1");
            return true;
        case 5: /* A writes and reads */
            PREP("rwlock_write_acquire", "100000", "A:1:write", "A:1", "100000", "0");
            PREP("rwlock_read_acquire", "100000", "A:1", "A:1:write");
            return true;
        case 6: /* B reads, C claims the write lock */
            PREP("rwlock_read_acquire", "100000", "B:1", "B:1:write");
            PREP("rwlock_write_acquire", "100000", "C:1:write", "C:1", "100000", "1");
            return true;
        }
        return false;
    case F_SEM:
    case F_LATCH:
        switch (st) {
        case 0:
            return true;
        case 1:
            freeReplyObject(th_cmd(r, "SET %s 5 PX 100000", name));
            return true;
        case 2:
            freeReplyObject(th_cmd(r, "SET %s 1 PX 100000", name));
            return true;
        }
        if (fam == F_LATCH)
            return false;
        switch (st) {
        case 3: /* none free, B and A (for 1) in the line */
            freeReplyObject(th_cmd(r, "SET %s 0 PX 100000", name));
            PREP("semaphore_acquire", "1", "1:B:1", "2", SEM_CH, "100000", "100000");
            PREP("semaphore_acquire", "1", "1:A:1", "2", SEM_CH, "100000", "100000");
            return true;
        case 4: /* 1 free, reserved for A, C (for 2) in the line */
            freeReplyObject(th_cmd(r, "SET %s 0 PX 100000", name));
            PREP("semaphore_acquire", "1", "1:A:1", "2", SEM_CH, "100000", "100000");
            PREP("semaphore_acquire", "2", "2:C:1", "2", SEM_CH, "100000", "100000");
            PREP("semaphore_release", "1", SEM_NL, "100000");
            freeReplyObject(th_cmd(r, "DEL baton_request:{%s}:r1", name)); /* its latch */
            return true;
        }
        return false;
    case F_PERMITS:
        switch (st) {
        case 0:
            return true;
        case 1: /* 3 available */
            freeReplyObject(th_cmd(r, "SET %s 3 PX 100000", name));
            return true;
        case 2: /* 3 available, ID1 taken */
            freeReplyObject(th_cmd(r, "SET %s 4 PX 100000", name));
            PREP("permits_acquire", "100000", "1:B:1", "0", "10000", ID1);
            return true;
        case 3: /* none available, ID1's lease ended */
            freeReplyObject(th_cmd(r, "SET %s 1 PX 100000", name));
            PREP("permits_acquire", "1", "1:B:1", "0", "10000", ID1);
            th_sleep_ms(3);
            return true;
        case 4: /* none available, B in the line, then ID1's lease ended (reclaimed, the
                   permit goes to B first) */
            freeReplyObject(th_cmd(r, "SET %s 1 PX 100000", name));
            PREP("permits_acquire", "1", "1:C:1", "0", "10000", ID1);
            PREP("permits_acquire", "100000", "1:B:1", "2", "100000", ID2);
            th_sleep_ms(3);
            return true;
        }
        return false;
    case F_ELECT:
        return prepare_elect(r, st, name);
    case F_BARRIER:
        return prepare_barrier(r, st, name);
    case F_INSPECT:
        if (st == 0)
            return true;
        if (st == 1) {
            PREP("fairlock_acquire", "100000", "B:1", "100000", "0", "h:2");
            PREP("fairlock_acquire", "100000", "A:1", "100000", "1", "h:1");
            return true;
        }
        return false;
    }
    return false;
}

/* ------------------------------- snapshots ------------------------------------------- */

typedef struct snap {
    size_t n;
    char **keys;
    char **dumps;
    size_t *dumplen;
    long long *pttl;
} snap;

static int cmpstr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void snap_take(redisContext *r, snap *s)
{
    redisReply *k = th_cmd(r, "KEYS *");
    s->n = k->elements;
    s->keys = calloc(s->n + 1, sizeof *s->keys);
    s->dumps = calloc(s->n + 1, sizeof *s->dumps);
    s->dumplen = calloc(s->n + 1, sizeof *s->dumplen);
    s->pttl = calloc(s->n + 1, sizeof *s->pttl);
    for (size_t i = 0; i < s->n; i++)
        s->keys[i] = strndup(k->element[i]->str, k->element[i]->len);
    freeReplyObject(k);
    qsort(s->keys, s->n, sizeof *s->keys, cmpstr);
    for (size_t i = 0; i < s->n; i++) {
        redisReply *d = th_cmd(r, "DUMP %s", s->keys[i]);
        cr_assert(d->type == REDIS_REPLY_STRING);
        s->dumps[i] = malloc(d->len + 1);
        memcpy(s->dumps[i], d->str, d->len);
        s->dumplen[i] = d->len;
        freeReplyObject(d);
        s->pttl[i] = th_cmd_int(r, "PTTL %s", s->keys[i]);
    }
}

static void snap_free(snap *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->keys[i]);
        free(s->dumps[i]);
    }
    free(s->keys);
    free(s->dumps);
    free(s->dumplen);
    free(s->pttl);
}

/* Whether after is before: the same keys, values and expiries (a TTL only ran down, by no
 * more than the time that passed). *why says what differs. */
static bool snap_same(const snap *a, const snap *b, int64_t elapsed_ms, char *why, size_t len)
{
    if (a->n != b->n) {
        snprintf(why, len, "%zu keys before, %zu after", a->n, b->n);
        return false;
    }
    for (size_t i = 0; i < a->n; i++) {
        if (strcmp(a->keys[i], b->keys[i]) != 0) {
            snprintf(why, len, "key %s before, %s after", a->keys[i], b->keys[i]);
            return false;
        }
        if (a->dumplen[i] != b->dumplen[i] ||
            memcmp(a->dumps[i], b->dumps[i], a->dumplen[i]) != 0) {
            snprintf(why, len, "%s changed", a->keys[i]);
            return false;
        }
        bool ttl_ok = a->pttl[i] < 0
                          ? b->pttl[i] == a->pttl[i]
                          : b->pttl[i] <= a->pttl[i] && b->pttl[i] >= a->pttl[i] - elapsed_ms - 50;
        if (!ttl_ok) {
            snprintf(why, len, "%s's PTTL %lld became %lld", a->keys[i], a->pttl[i], b->pttl[i]);
            return false;
        }
    }
    return true;
}

/* ------------------------------- the wrong-type cases ---------------------------------- */

/* The wrong values for a key kind: a NULL-terminated list of "hash" / "string" / "text". */
static const char *const *wrong_values(char kind)
{
    static const char *const for_hash[] = {"string", NULL};
    static const char *const for_other[] = {"string", "hash", NULL};
    static const char *const for_int[] = {"hash", "text", NULL};
    static const char *const for_string[] = {"hash", NULL};
    switch (kind) {
    case 'h':
    case 'a':
        return for_hash;
    case 'n':
        return for_string;
    case 'l':
    case 'z':
    case 'x':
    case 'r':
        return for_other;
    case 'i':
        return for_int;
    case 's':
        return for_string;
    }
    return NULL;
}

static void corrupt(redisContext *r, const char *key, const char *how)
{
    freeReplyObject(th_cmd(r, "DEL %s", key));
    if (strcmp(how, "string") == 0)
        freeReplyObject(th_cmd(r, "SET %s x", key));
    else if (strcmp(how, "text") == 0)
        freeReplyObject(th_cmd(r, "SET %s abc", key));
    else
        freeReplyObject(th_cmd(r, "HSET %s f 1", key));
    freeReplyObject(th_cmd(r, "PEXPIRE %s 200000", key));
}

static bool is_unread(const char *script, const char *key, const char *how)
{
    for (size_t i = 0; i < sizeof UNREAD / sizeof UNREAD[0]; i++)
        if (strcmp(UNREAD[i].script, script) == 0 && strcmp(UNREAD[i].key, key) == 0 &&
            (strcmp(UNREAD[i].how, "*") == 0 || strcmp(UNREAD[i].how, how) == 0))
            return true;
    return false;
}

/* Every case of one script: returns how many runs were checked. */
static int check_script(const char *script)
{
    redisContext *r = th_redis();
    const char *name = th_tmpname("wt");
    int runs = 0, specs = 0;
    for (size_t si = 0; si < NSPECS; si++) {
        const spec *sp = &SPECS[si];
        if (strcmp(sp->script, script) != 0)
            continue;
        specs++;
        int nkeys = spec_nkeys(sp), nargs = spec_nargs(sp);
        const char *keys[8];
        for (int i = 0; i < nkeys; i++)
            keys[i] = sp->keys[i].tmpl;
        for (int k = 0; k < nkeys; k++) {
            const char *const *wrong = wrong_values(sp->keys[k].kind);
            if (!wrong)
                continue; /* a channel or a prefix */
            char *key = expand(sp->keys[k].tmpl, name);
            for (int w = 0; wrong[w]; w++) {
                bool failed_somewhere = false;
                for (int st = 0; prepare(r, sp->fam, st, name); st++) {
                    corrupt(r, key, wrong[w]);
                    snap before, after;
                    int64_t t0 = th_ms(); /* before the PTTLs are read: all of it passed */
                    snap_take(r, &before);
                    redisReply *rep = eval_t(r, script, name, nkeys, keys, nargs, sp->args);
                    snap_take(r, &after);
                    int64_t elapsed = th_ms() - t0;
                    char why[512] = "";
                    const char *what = rep->type == REDIS_REPLY_ERROR ? rep->str : "success";
                    if (rep->type == REDIS_REPLY_ERROR || sp->keys[k].kind == 'r') {
                        /* failed (or a read-only script): nothing written at all */
                        cr_expect(snap_same(&before, &after, elapsed, why, sizeof why),
                                  "%s (args[3]=%s) with %s a %s, state %d, %s: wrote: %s", script,
                                  nargs > 3 ? sp->args[3] : "-", key, wrong[w], st, what, why);
                        if (rep->type == REDIS_REPLY_ERROR) {
                            failed_somewhere = true;
                            cr_expect(strncmp(rep->str, "BATON_UNPUBLISHED", 17) != 0, "%s",
                                      rep->str);
                        }
                    } else {
                        /* succeeded without needing that key: it is left alone (baton's
                         * side hash of holders may also be deleted with the lock) */
                        size_t i = 0;
                        while (i < before.n && strcmp(before.keys[i], key) != 0)
                            i++;
                        size_t j = 0;
                        while (j < after.n && strcmp(after.keys[j], key) != 0)
                            j++;
                        bool deleted =
                            (sp->keys[k].kind == 'a' || sp->keys[k].kind == 'n') && j == after.n;
                        if (sp->keys[k].kind == 'n' && j < after.n) {
                            redisReply *ty = th_cmd(r, "TYPE %s", key);
                            deleted = strcmp(ty->str, "string") == 0; /* a reservation now */
                            freeReplyObject(ty);
                        }
                        cr_expect(deleted || (i < before.n && j < after.n &&
                                              before.dumplen[i] == after.dumplen[j] &&
                                              memcmp(before.dumps[i], after.dumps[j],
                                                     before.dumplen[i]) == 0),
                                  "%s succeeded with %s a %s (state %d) and changed it", script,
                                  key, wrong[w], st);
                    }
                    freeReplyObject(rep);
                    snap_free(&before);
                    snap_free(&after);
                    runs++;
                }
                char kind = sp->keys[k].kind;
                if (kind != 'a' && kind != 'n' && kind != 'r' &&
                    !is_unread(script, sp->keys[k].tmpl, wrong[w]))
                    cr_expect(failed_somewhere,
                              "%s (args[3]=%s): %s a %s never failed: the wrong type went unseen",
                              script, nargs > 3 ? sp->args[3] : "-", key, wrong[w]);
            }
            free(key);
        }
    }
    cr_assert(specs > 0, "no spec for %s", script);
    redisFree(r);
    return runs;
}

/* One test per script: every script of lua/ has a row in the table. */
#define SCRIPT_TEST(s)                                                                             \
    Test(scripts, s##_fails_before_it_writes)                                                      \
    {                                                                                              \
        int runs = check_script(#s);                                                               \
        cr_log_info("%s: %d runs", #s, runs);                                                      \
        cr_assert(runs > 0);                                                                       \
    }

SCRIPT_TEST(barrier_arrive)
SCRIPT_TEST(barrier_check)
SCRIPT_TEST(election_observe)
SCRIPT_TEST(election_proclaim)
SCRIPT_TEST(lock_unreserve)
SCRIPT_TEST(election_resign)
SCRIPT_TEST(fairlock_acquire)
SCRIPT_TEST(fairlock_cancel)
SCRIPT_TEST(fairlock_force_release)
SCRIPT_TEST(fairlock_release)
SCRIPT_TEST(hold_check)
SCRIPT_TEST(inspect)
SCRIPT_TEST(latch_count_down)
SCRIPT_TEST(fenced_set)
SCRIPT_TEST(latch_delete)
SCRIPT_TEST(latch_try_set_count)
SCRIPT_TEST(lock_acquire)
SCRIPT_TEST(lock_force_release)
SCRIPT_TEST(lock_release)
SCRIPT_TEST(lock_renew)
SCRIPT_TEST(permits_acquire)
SCRIPT_TEST(permits_available)
SCRIPT_TEST(permits_check)
SCRIPT_TEST(permits_release)
SCRIPT_TEST(permits_renew)
SCRIPT_TEST(permits_try_set_permits)
SCRIPT_TEST(permits_update_lease)
SCRIPT_TEST(rwlock_read_acquire)
SCRIPT_TEST(rwlock_read_force_release)
SCRIPT_TEST(rwlock_read_release)
SCRIPT_TEST(rwlock_write_acquire)
SCRIPT_TEST(rwlock_write_cancel)
SCRIPT_TEST(rwlock_write_force_release)
SCRIPT_TEST(rwlock_write_release)
SCRIPT_TEST(semaphore_acquire)
SCRIPT_TEST(semaphore_add_permits)
SCRIPT_TEST(semaphore_delete)
SCRIPT_TEST(semaphore_drain)
SCRIPT_TEST(semaphore_release)
SCRIPT_TEST(semaphore_try_set_permits)
SCRIPT_TEST(semaphore_unreserve)

/* The table covers every embedded script. */
Test(scripts, every_script_has_a_row)
{
    for (const baton__script *s = baton__scripts(); s->name; s++) {
        bool found = false;
        for (size_t i = 0; i < NSPECS && !found; i++)
            found = strcmp(SPECS[i].script, s->name) == 0;
        cr_expect(found, "script %s has no row in the table", s->name);
    }
}

/* ------------------------------- the ACL ---------------------------------------------- */

/* Commands of the rule that no verb needs to succeed: INFO (the server's version and
 * maxmemory policy, read at connect: without it, no warning and no allow-oom scripts),
 * UNSUBSCRIBE (the end of a wait: a refusal closes the subscription connection instead),
 * LREM (a fair-lock waiter that gives up leaves the queue: refused, the call still ends
 * BATON_ETIMEDOUT and its place lapses after fair_wait_ms), PUBLISH (refused: a warning,
 * see a_release_whose_publish_is_refused_*), SCAN (baton list only), CLIENT SETNAME (refused:
 * the connections stay unnamed). */
/* lpop: a fair-lock head told its turn takes the lock with LREM (issue 49); LPOP serves a
 * head that finds the lock free by itself (its holder's lease ran out, or LREM refused) and
 * the purge of lapsed heads, which the verbs below do not meet. */
/* zrank and zpopmin: the plain lock's line (lua/lib/line.lua) reads them with pcall, so
 * that a refusal never fails a script after its writes: without them a queued waiter looks
 * every 50 ms, and a free lock goes to whoever asks first rather than to the line's first. */
static const char *const OPTIONAL[] = {"info",   "unsubscribe", "lrem",    "publish", "scan",
                                       "client", "zrank",       "zpopmin", "lpop"};

/* Creates (or resets) ACL user `user` with the rule, plus `extra` (e.g. "-hincrby"). */
static void acl_user(redisContext *admin, const char *user, const char *extra)
{
    (void)admin; /* the program's own server: acl_helper.c's application of the rule */
    acl_setuser(th_port(), user, extra);
}

static int open_rc; /* the last user_client's open's code */

static baton_client *user_client(const char *user)
{
    baton_options o;
    baton_options_init(&o);
    o.username = user;
    o.password = "pw";
    o.recheck_ms = 100;
    o.fair_wait_ms = 300;
    o.command_timeout_ms = 2000;
    o.url = th_url();
    baton_client *c = NULL;
    open_rc = baton_client_open(&o, &c);
    return open_rc == BATON_OK ? c : NULL;
}

/* What a run of every verb found: the first failure (op, code, message), and the first
 * warning a success left. */
typedef struct outcome {
    const char *op;
    int rc;
    char msg[768];
    char warning[768];
} outcome;

/* One call on client cl (its message is the calling thread's). */
#define STEPC(what, cl, call)                                                                      \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ != BATON_OK) {                                                                     \
            o->op = (what);                                                                        \
            o->rc = rc_;                                                                           \
            snprintf(o->msg, sizeof o->msg, "%s", baton_client_errmsg(cl));                        \
            goto out;                                                                              \
        }                                                                                          \
        if (!o->warning[0] && baton_client_errmsg(cl)[0])                                          \
            snprintf(o->warning, sizeof o->warning, "%s", baton_client_errmsg(cl));                \
    } while (0)
#define STEP(what, call) STEPC(what, c, call)
/* A waiter thread's outcome. */
#define STEPW(what, wt)                                                                            \
    do {                                                                                           \
        if ((wt).rc != BATON_OK) {                                                                 \
            o->op = (what);                                                                        \
            o->rc = (wt).rc;                                                                       \
            snprintf(o->msg, sizeof o->msg, "%s", (wt).msg);                                       \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

typedef struct waiter {
    baton_lock *l;
    baton_client *c;
    int64_t wait_ms;
    int rc;
    char msg[768];
} waiter;

static void *wait_thread(void *arg)
{
    waiter *w = arg;
    w->rc = baton_lock_try_acquire(w->l, w->wait_ms, 5000);
    if (w->rc == BATON_OK)
        w->rc = baton_lock_release(w->l);
    snprintf(w->msg, sizeof w->msg, "%s", baton_client_errmsg(w->c));
    return NULL;
}

typedef struct barrier_waiter {
    baton_barrier *b;
    baton_client *c;
    int rc;
    char msg[768];
} barrier_waiter;

static void *barrier_thread(void *arg)
{
    barrier_waiter *w = arg;
    w->rc = baton_barrier_await(w->b, 5000, NULL, NULL);
    snprintf(w->msg, sizeof w->msg, "%s", baton_client_errmsg(w->c));
    return NULL;
}

/* Polls (at most 3 s) until the list key has n entries. */
static void await_llen(redisContext *admin, const char *key, long long n)
{
    for (int i = 0; i < 300 && th_cmd_int(admin, "LLEN %s", key) != n; i++)
        th_sleep_ms(10);
}

static void await_zcard(redisContext *admin, const char *key, long long n)
{
    for (int i = 0; i < 300 && th_cmd_int(admin, "ZCARD %s", key) != n; i++)
        th_sleep_ms(10);
}

/* Runs every verb of every primitive as `user` on names that begin with P; every path that
 * uses a command of the rule is taken at least once. */
static void run_verbs(redisContext *admin, const char *user, outcome *o)
{
    memset(o, 0, sizeof *o);
    o->rc = BATON_OK;
    baton_client *c = user_client(user), *c2 = user_client(user);
    if (!c || !c2) {
        o->op = "open";
        o->rc = open_rc;
        snprintf(o->msg, sizeof o->msg, "%s", baton_open_errmsg());
        if (c)
            baton_client_close(c);
        if (c2)
            baton_client_close(c2);
        return;
    }
    char *lname = th_name("Plock"), *fname = th_name("Pfair"), *rname = th_name("Prw");
    char *sname = th_name("Psem"), *pname = th_name("Pperm"), *cname = th_name("Platch");
    char *ename = th_name("Pelect"), *bname = th_name("Pbarrier");
    baton_election *el = NULL;
    baton_barrier *ba = NULL, *ba2 = NULL;
    baton_leader *ld = calloc(1, sizeof *ld);
    baton_election_event *ev = calloc(1, sizeof *ev);
    cr_assert(ld && ev);
    baton_lock *l = NULL, *l2 = NULL, *f = NULL, *f2 = NULL, *f3 = NULL;
    baton_client *c3 = NULL;
    baton_rwlock *rw = NULL, *rw2 = NULL;
    baton_semaphore *s = NULL;
    baton_permits *p = NULL;
    baton_latch *la = NULL;
    pthread_t t;
    bool joined = true;
    char *q = NULL;

    /* lock: take, query, re-enter, release, a waiter woken by the release, force */
    STEP("lock open", baton_lock_open(c, lname, &l));
    STEPC("lock open", c2, baton_lock_open(c2, lname, &l2));
    STEP("lock acquire", baton_lock_acquire(l, 10000));
    bool yes = false;
    int64_t n = 0;
    STEP("lock is_locked", baton_lock_is_locked(l, &yes));
    STEP("lock is_held", baton_lock_is_held_by_current_thread(l, &yes));
    STEP("lock hold_count", baton_lock_hold_count(l, &n));
    STEP("lock remaining_ttl", baton_lock_remaining_ttl(l, &n));
    STEP("lock fencing_token", baton_lock_fencing_token(l, &n));
    STEP("lock re-enter", baton_lock_acquire(l, 10000));
    STEP("lock release", baton_lock_release(l));
    waiter w = {l2, c2, 3000, -100, ""};
    pthread_create(&t, NULL, wait_thread, &w);
    joined = false;
    for (int i = 0; i < 300 && th_numsub(admin, "redisson_lock__channel:{%s}", lname) < 1; i++)
        th_sleep_ms(10);
    STEP("lock release", baton_lock_release(l));
    pthread_join(t, NULL);
    joined = true;
    STEPW("lock waiter", w);
    STEP("lock acquire", baton_lock_acquire(l, 10000));
    STEPC("lock force_release", c2, baton_lock_force_release(l2, &yes));

    /* fair lock: a holder, a waiter at the head, one behind that gives up (its later
     * rounds read the head's deadline; its cancel leaves the queue), the head's turn */
    STEP("fairlock open", baton_fairlock_open(c, fname, &f));
    STEPC("fairlock open", c2, baton_fairlock_open(c2, fname, &f2));
    c3 = user_client(user);
    if (!c3) {
        o->op = "open";
        o->rc = open_rc;
        snprintf(o->msg, sizeof o->msg, "%s", baton_open_errmsg());
        goto out;
    }
    int rc3 = baton_fairlock_open(c3, fname, &f3);
    if (rc3 != BATON_OK) {
        o->op = "fairlock open";
        o->rc = rc3;
        snprintf(o->msg, sizeof o->msg, "%s", baton_client_errmsg(c3));
        goto out;
    }
    STEP("fairlock acquire", baton_lock_acquire(f, 10000));
    cr_assert(asprintf(&q, "redisson_lock_queue:{%s}", fname) > 0);
    waiter fw = {f2, c2, 3000, -100, ""};
    pthread_create(&t, NULL, wait_thread, &fw);
    joined = false;
    await_llen(admin, q, 1);
    int rc_behind = baton_lock_try_acquire(f3, 400, 5000);
    if (rc_behind != BATON_ETIMEDOUT) {
        o->op = "fairlock waiter behind";
        o->rc = rc_behind == BATON_OK ? BATON_EPROTO : rc_behind;
        snprintf(o->msg, sizeof o->msg, "%s", baton_client_errmsg(c3));
        goto out;
    }
    STEP("fairlock release", baton_lock_release(f));
    pthread_join(t, NULL);
    joined = true;
    STEPW("fairlock head", fw);
    baton_lock_close(f3);
    baton_client_close(c3);
    f3 = NULL;
    c3 = NULL;
    STEP("fairlock re-enter", baton_lock_acquire(f, 10000));
    STEP("fairlock re-enter", baton_lock_acquire(f, 10000));
    STEP("fairlock release", baton_lock_release(f));
    STEP("fairlock release", baton_lock_release(f));
    STEP("fairlock acquire", baton_lock_acquire(f, 10000));
    STEPC("fairlock force_release", c2, baton_lock_force_release(f2, &yes));

    /* read-write lock: two readers (a release then looks at the others' leases), a writer
     * that claims its place and gives up, a reader refused for the claim, write, release */
    STEP("rwlock open", baton_rwlock_open(c, rname, &rw));
    STEPC("rwlock open", c2, baton_rwlock_open(c2, rname, &rw2));
    STEP("rwlock read", baton_lock_acquire(baton_rwlock_read(rw), 10000));
    STEP("rwlock read re-enter", baton_lock_acquire(baton_rwlock_read(rw), 10000));
    waiter ww = {baton_rwlock_write(rw2), c2, 600, -100, ""};
    pthread_create(&t, NULL, wait_thread, &ww);
    joined = false;
    char *wkey = NULL;
    cr_assert(asprintf(&wkey, "baton_rwlock_writers:{%s}", rname) > 0);
    await_zcard(admin, wkey, 1);
    free(wkey);
    int rrc = baton_lock_try_acquire(baton_rwlock_read(rw2), 0, 10000);
    if (rrc != BATON_ETIMEDOUT)
        STEPC("rwlock read behind a writer's claim", c2, rrc == BATON_OK ? BATON_EPROTO : rrc);
    pthread_join(t, NULL);
    joined = true;
    if (ww.rc != BATON_ETIMEDOUT) {
        ww.rc = ww.rc == BATON_OK ? BATON_EPROTO : ww.rc;
        STEPW("rwlock writer", ww);
    }
    STEPC("rwlock read (second reader)", c2, baton_lock_acquire(baton_rwlock_read(rw2), 10000));
    STEP("rwlock read release", baton_lock_release(baton_rwlock_read(rw)));
    STEP("rwlock read release", baton_lock_release(baton_rwlock_read(rw)));
    STEPC("rwlock read release", c2, baton_lock_release(baton_rwlock_read(rw2)));
    STEP("rwlock write", baton_lock_acquire(baton_rwlock_write(rw), 10000));
    STEP("rwlock write re-enter", baton_lock_acquire(baton_rwlock_write(rw), 10000));
    STEP("rwlock write release", baton_lock_release(baton_rwlock_write(rw)));
    STEP("rwlock write release", baton_lock_release(baton_rwlock_write(rw)));
    STEP("rwlock write", baton_lock_acquire(baton_rwlock_write(rw), 10000));
    STEPC("rwlock write force_release", c2,
          baton_lock_force_release(baton_rwlock_write(rw2), &yes));
    STEP("rwlock read", baton_lock_acquire(baton_rwlock_read(rw), 10000));
    STEPC("rwlock read force_release", c2, baton_lock_force_release(baton_rwlock_read(rw2), &yes));

    /* semaphore */
    STEP("semaphore open", baton_semaphore_open(c, sname, &s));
    STEP("semaphore set", baton_semaphore_try_set_permits(s, 2, &yes));
    STEP("semaphore acquire", baton_semaphore_acquire(s, 1));
    STEP("semaphore available", baton_semaphore_available(s, &n));
    STEP("semaphore add", baton_semaphore_add_permits(s, 2));
    STEP("semaphore remove", baton_semaphore_add_permits(s, -1));
    STEP("semaphore release", baton_semaphore_release(s, 1));
    STEP("semaphore drain", baton_semaphore_drain(s, &n));
    STEP("semaphore delete", baton_semaphore_delete(s, &yes));

    /* permits: a lease that ends and is given back, renewed, updated, released */
    STEP("permits open", baton_permits_open(c, pname, &p));
    STEP("permits set", baton_permits_try_set_permits(p, 2, &yes));
    char id[BATON_PERMIT_ID_SIZE], id2[BATON_PERMIT_ID_SIZE];
    STEP("permits acquire", baton_permits_try_acquire(p, 0, 30, id));
    th_sleep_ms(50);
    int64_t held = 0;
    STEP("permits available", baton_permits_available(p, &n, &held));
    STEP("permits acquire", baton_permits_try_acquire(p, 0, 10000, id2));
    STEP("permits update_lease", baton_permits_update_lease(p, id2, 20000));
    STEP("permits release", baton_permits_release(p, id2));
    STEP("permits delete", baton_permits_delete(p, &yes));

    /* latch: set, a waiter woken by the last count-down, delete */
    STEP("latch open", baton_latch_open(c, cname, &la));
    STEP("latch set", baton_latch_try_set_count(la, 2, &yes));
    STEP("latch count_down", baton_latch_count_down(la));
    STEP("latch count", baton_latch_count(la, &n));
    int arc = baton_latch_await(la, 50);
    if (arc != BATON_ETIMEDOUT)
        STEP("latch await (not open)", arc == BATON_OK ? BATON_EPROTO : arc);
    STEP("latch count_down", baton_latch_count_down(la));
    STEP("latch await", baton_latch_await(la, 0));
    STEP("latch set", baton_latch_try_set_count(la, 1, &yes));
    STEP("latch delete", baton_latch_delete(la, &yes));

    /* election: campaign, leader, proclaim, observe, resign (issue 46.3) */
    STEP("election open", baton_election_open(c, ename, &el));
    STEP("election campaign", baton_election_campaign(el, "v1", 0, BATON_LEASE_WATCHDOG));
    STEP("election leader", baton_election_leader(el, ld));
    STEP("election proclaim", baton_election_proclaim(el, "v2"));
    int orc = baton_election_observe_next(el, 0, ev);
    if (orc != BATON_ETIMEDOUT)
        STEP("election observe", orc);
    orc = baton_election_observe_next(el, 0, ev);
    if (orc != BATON_ETIMEDOUT)
        STEP("election observe", orc);
    STEP("election resign", baton_election_resign(el));

    /* barrier: two parties trip it */
    STEP("barrier open", baton_barrier_open(c, bname, 2, &ba));
    STEPC("barrier open", c2, baton_barrier_open(c2, bname, 2, &ba2));
    barrier_waiter bw = {ba2, c2, -100, ""};
    pthread_create(&t, NULL, barrier_thread, &bw);
    joined = false;
    int barc = baton_barrier_await(ba, 5000, NULL, NULL);
    pthread_join(t, NULL);
    joined = true;
    /* the party whose script the ACL refused ends EPERM; the other then times out */
    if (bw.rc != BATON_EPERM)
        STEP("barrier await", barc);
    if (bw.rc != BATON_OK) {
        o->op = "barrier await (the other party)";
        o->rc = bw.rc;
        snprintf(o->msg, sizeof o->msg, "%s", bw.msg);
        goto out;
    }

    /* inspect, of a lock held */
    baton_inspection *ins = NULL;
    STEP("lock acquire", baton_lock_acquire(l, 10000));
    STEP("inspect", baton_inspect(c, lname, &ins));
    baton_inspection_free(ins);
    STEP("lock release", baton_lock_release(l));
out:
    if (!joined)
        pthread_join(t, NULL);
    free(q);
    baton_lock_close(l);
    baton_lock_close(l2);
    baton_lock_close(f);
    baton_lock_close(f2);
    baton_lock_close(f3);
    baton_client_close(c3);
    baton_rwlock_close(rw);
    baton_rwlock_close(rw2);
    baton_semaphore_close(s);
    baton_permits_close(p);
    baton_latch_close(la);
    baton_election_close(el);
    baton_barrier_close(ba);
    baton_barrier_close(ba2);
    free(ld);
    free(ev);
    free(ename);
    free(bname);
    baton_client_close(c);
    baton_client_close(c2);
    free(lname);
    free(fname);
    free(rname);
    free(sname);
    free(pname);
    free(cname);
}

Test(scripts, the_single_server_rule_runs_every_verb, .timeout = 60)
{
    redisContext *admin = th_redis();
    acl_user(admin, "tenant", NULL);
    for (int round = 0; round < 2; round++) {
        /* the second round starts with an empty script cache: EVAL loads each script */
        if (round == 1)
            freeReplyObject(th_cmd(admin, "SCRIPT FLUSH"));
        outcome o;
        run_verbs(admin, "tenant", &o);
        cr_assert(eq(int, o.rc, BATON_OK), "round %d, %s: %s (%s)", round, o.op,
                  baton_err_name(o.rc), o.msg);
        cr_assert(eq(str, o.warning, ""), "round %d: a warning: %s", round, o.warning);
    }
    /* a name outside the tenant's prefix is refused, the key named */
    baton_client *c = user_client("tenant");
    cr_assert(c != NULL);
    baton_lock *l = NULL;
    cr_assert(eq(int, baton_lock_open(c, "Qother", &l), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(l, 1000), BATON_EPERM));
    cr_assert(strstr(baton_client_errmsg(c), "NOPERM") != NULL, "%s", baton_client_errmsg(c));
    cr_assert(eq(i64, th_cmd_int(admin, "EXISTS Qother"), 0));
    baton_lock_close(l);
    baton_client_close(c);
    redisFree(admin);
}

/* The command's name as the server's message (or the script line) spells it. */
static void command_name(const char *tok, char *out, size_t len)
{
    snprintf(out, len, "%s", tok + 1);
    char *bar = strchr(out, '|');
    if (bar)
        *bar = '\0';
}

Test(scripts, each_command_taken_out_of_the_rule_is_eperm_naming_it, .timeout = 600)
{
    redisContext *admin = th_redis();
    char *rule = strdup(ACL_RULE_COMMANDS);
    int checked = 0;
    for (char *save = NULL, *tok = strtok_r(rule, " ", &save); tok;
         tok = strtok_r(NULL, " ", &save)) {
        if (tok[0] != '+')
            continue;
        char name[64], minus[80];
        command_name(tok, name, sizeof name);
        snprintf(minus, sizeof minus, "-%s", tok + 1);
        acl_user(admin, "partial", minus);
        freeReplyObject(th_cmd(admin, "SCRIPT FLUSH"));
        outcome o;
        run_verbs(admin, "partial", &o);
        bool optional = false;
        for (size_t i = 0; i < sizeof OPTIONAL / sizeof OPTIONAL[0]; i++)
            optional = optional || strcmp(OPTIONAL[i], name) == 0;
        cr_log_info("without %s: %s %s (%s)%s%s", name, o.op ? o.op : "all ran",
                    baton_err_name(o.rc), o.msg, o.warning[0] ? "; warning: " : "", o.warning);
        if (strcmp(name, "subscribe") == 0) {
            /* the pub/sub connection's refusal is not told apart yet (issue 28.7): the
             * wait ends BATON_ECONN, naming SUBSCRIBE */
            cr_expect(o.rc != BATON_OK, "without subscribe every verb ran");
            cr_expect(strstr(o.msg, "SUBSCRIBE") != NULL, "%s", o.msg);
        } else if (strcmp(name, "publish") == 0) {
            cr_expect(eq(int, o.rc, BATON_OK), "without publish: %s: %s", o.op, o.msg);
            cr_expect(strstr(o.warning, "waiters not told: PUBLISH to") != NULL,
                      "without publish, no warning: %s", o.warning);
        } else if (!optional) {
            cr_expect(eq(int, o.rc, BATON_EPERM), "without %s: %s ended %s (%s)", name,
                      o.op ? o.op : "nothing", baton_err_name(o.rc), o.msg);
            cr_expect(strcasestr(o.msg, name) != NULL,
                      "without %s, the message does not name it: %s", name, o.msg);
        }
        checked++;
    }
    cr_assert(gt(int, checked, 30));
    free(rule);
    redisFree(admin);
}

/* A user whose channels are all refused (Redis 7's default for a new user, resetchannels). */
static baton_client *no_channels(redisContext *admin)
{
    acl_user(admin, "quiet", "resetchannels");
    baton_client *c = user_client("quiet");
    cr_assert(c != NULL, "open: %s", baton_open_errmsg());
    return c;
}

Test(scripts, a_release_whose_publish_is_refused_is_released_and_says_so)
{
    redisContext *admin = th_redis();
    baton_client *c = no_channels(admin);
    char *name = th_name("Prel");
    baton_lock *l = NULL;
    cr_assert(eq(int, baton_lock_open(c, name, &l), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(l, 10000), BATON_OK));
    cr_assert(eq(str, (char *)baton_client_errmsg(c), ""));
    cr_assert(eq(int, baton_lock_acquire(l, 10000), BATON_OK));
    /* an inner release publishes nothing: no warning */
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    cr_assert(eq(str, (char *)baton_client_errmsg(c), ""));
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    char *expect = NULL;
    cr_assert(asprintf(&expect,
                       "released; waiters not told: PUBLISH to redisson_lock__channel:{%s} refused "
                       "by the server's ACL (",
                       name) > 0);
    cr_assert(strncmp(baton_client_errmsg(c), expect, strlen(expect)) == 0, "%s",
              baton_client_errmsg(c));
    cr_assert(strstr(baton_client_errmsg(c), "they see it at their next recheck") != NULL);
    cr_assert(eq(i64, th_cmd_int(admin, "EXISTS %s", name), 0));
    bool held = true;
    cr_assert(eq(int, baton_lock_is_held_by_current_thread(l, &held), BATON_OK));
    cr_assert(not(held));
    cr_assert(eq(str, (char *)baton_client_errmsg(c), ""), "the warning outlived the next call");
    /* released once: a second release is ENOTHELD, as always */
    cr_assert(eq(int, baton_lock_release(l), BATON_ENOTHELD));
    free(expect);

    /* force release and the other releases */
    cr_assert(eq(int, baton_lock_acquire(l, 10000), BATON_OK));
    bool was = false;
    cr_assert(eq(int, baton_lock_force_release(l, &was), BATON_OK));
    cr_assert(was);
    cr_assert(strstr(baton_client_errmsg(c), "force released; waiters not told") != NULL, "%s",
              baton_client_errmsg(c));
    baton_semaphore *s = NULL;
    cr_assert(eq(int, baton_semaphore_open(c, name, &s), BATON_OK));
    cr_assert(eq(int, baton_semaphore_release(s, 2), BATON_OK));
    cr_assert(strstr(baton_client_errmsg(c),
                     "released; waiters not told: PUBLISH to redisson_sc:{") != NULL,
              "%s", baton_client_errmsg(c));
    cr_assert(eq(i64, th_cmd_int(admin, "GET %s", name), 2));
    baton_semaphore_close(s);
    baton_lock_close(l);
    baton_client_close(c);
    free(name);
    redisFree(admin);
}

Test(scripts, latch_set_and_count_down_under_resetchannels_apply_and_warn)
{
    redisContext *admin = th_redis();
    baton_client *c = no_channels(admin);
    char *name = th_name("Platch");
    baton_latch *l = NULL;
    cr_assert(eq(int, baton_latch_open(c, name, &l), BATON_OK));
    bool was = false;
    cr_assert(eq(int, baton_latch_try_set_count(l, 2, &was), BATON_OK));
    cr_assert(was);
    cr_assert(strstr(baton_client_errmsg(c), "set; waiters not told") != NULL, "%s",
              baton_client_errmsg(c));
    cr_assert(eq(int, baton_latch_count_down(l), BATON_OK));
    cr_assert(eq(str, (char *)baton_client_errmsg(c), ""), "1 left: nothing published");
    cr_assert(eq(i64, th_cmd_int(admin, "GET %s", name), 1));
    cr_assert(eq(int, baton_latch_count_down(l), BATON_OK));
    cr_assert(strstr(baton_client_errmsg(c), "counted down; waiters not told") != NULL, "%s",
              baton_client_errmsg(c));
    cr_assert(eq(i64, th_cmd_int(admin, "EXISTS %s", name), 0));
    baton_latch_close(l);
    baton_client_close(c);
    free(name);
    redisFree(admin);
}

Test(scripts, noperm_is_eperm_naming_the_command_and_the_keys)
{
    redisContext *admin = th_redis();
    acl_user(admin, "nohincr", "-hincrby");
    baton_client *c = user_client("nohincr");
    cr_assert(c != NULL);
    char *name = th_name("Pnoperm");
    baton_lock *l = NULL;
    cr_assert(eq(int, baton_lock_open(c, name, &l), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(l, 1000), BATON_EPERM));
    const char *m = baton_client_errmsg(c);
    cr_assert(strstr(m, "script lock_acquire, line") != NULL, "%s", m);
    cr_assert(strstr(m, "redis.call('hincrby', KEYS[1]") != NULL, "%s", m);
    char *key = NULL;
    cr_assert(asprintf(&key, "KEYS[1] = %s", name) > 0);
    cr_assert(strstr(m, key) != NULL, "%s", m);
    cr_assert(eq(str, (char *)baton_strerror(BATON_EPERM), "refused by the server's ACL (NOPERM)"));
    cr_assert(eq(str, (char *)baton_err_name(BATON_EPERM), "BATON_EPERM"));
    baton_lock_close(l);
    baton_client_close(c);

    /* a command refused outside a script: the server names it */
    acl_user(admin, "noevalsha", "-evalsha");
    c = user_client("noevalsha");
    cr_assert(c != NULL);
    cr_assert(eq(int, baton_lock_open(c, name, &l), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(l, 1000), BATON_EPERM));
    cr_assert(strstr(baton_client_errmsg(c), "'evalsha'") != NULL, "%s", baton_client_errmsg(c));
    baton_lock_close(l);
    baton_client_close(c);

    /* at connect: PING refused is EPERM, not "authentication failed" */
    acl_user(admin, "noping", "-ping");
    cr_assert(user_client("noping") == NULL);
    cr_assert(eq(int, open_rc, BATON_EPERM), "%s: %s", baton_err_name(open_rc),
              baton_open_errmsg());
    free(key);
    free(name);
    redisFree(admin);
}

/* Each server's wording of a command refused inside a script, as its bytes come on the wire:
 * Redis 7.0's, then Redis 7.2+, 8 and Valkey 8's ("ERR ACL failure in script"), then a
 * refusal outside a script; every one is BATON_EPERM and the message keeps the command's
 * name. A script error that is no refusal stays BATON_EPROTO. */
Test(scripts, every_servers_wording_of_a_refusal_in_a_script_is_eperm)
{
    static const struct {
        const char *wire;
        int code;
        const char *names;
    } cases[] = {
        {"-ERR The user executing the script can't run this command or subcommand script: "
         "abc, on @user_script:95.\r\n",
         BATON_EPERM, "can't run this command"},
        {"-ERR ACL failure in script: User clinoperm has no permissions to run the 'hincrby' "
         "command script: abc, on @user_script:95.\r\n",
         BATON_EPERM, "'hincrby'"},
        {"-NOPERM User u has no permissions to run the 'evalsha' command\r\n", BATON_EPERM,
         "'evalsha'"},
        {"-ERR user_script:1: Script attempted to access nonexistent global variable 'x' "
         "script: abc, on @user_script:1.\r\n",
         BATON_EPROTO, "nonexistent global"},
    };
    baton_client *c = th_client(NULL);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        redisReader *rd = redisReaderCreate();
        cr_assert(eq(int, redisReaderFeed(rd, cases[i].wire, strlen(cases[i].wire)), REDIS_OK));
        void *r = NULL;
        cr_assert(eq(int, redisReaderGetReply(rd, &r), REDIS_OK));
        cr_assert(r != NULL);
        int rc = baton__reply_error(c, r);
        cr_assert(eq(int, rc, cases[i].code), "%s: %s", cases[i].wire, baton_err_name(rc));
        cr_assert(strstr(baton_client_errmsg(c), cases[i].names) != NULL, "%s",
                  baton_client_errmsg(c));
        freeReplyObject(r);
        redisReaderFree(rd);
    }
    baton_client_close(c);
}

/* ------------------------------- the command ------------------------------------------ */

static char *user_url(const char *user)
{
    char *u = NULL;
    cr_assert(asprintf(&u, "redis://%s:pw@127.0.0.1:%d", user, th_port()) > 0);
    return u;
}

Test(scripts, cli_exits_119_for_noperm_and_warns_for_a_refused_publish)
{
    redisContext *admin = th_redis();
    acl_user(admin, "clinoperm", "-hincrby");
    char *url = user_url("clinoperm");
    char *name = th_name("Pcli");
    cli_result r;
    cli_exec(&r, ARGS("--url", url, "lock", name, "-n", "--", "true"));
    cr_assert(eq(int, r.status, 119), "exit %d: %s", r.status, r.err);
    cr_assert(strstr(r.err, "hincrby") != NULL, "%s", r.err);
    cli_result_free(&r);
    free(url);

    acl_user(admin, "cliquiet", "resetchannels");
    url = user_url("cliquiet");
    cli_exec(&r, ARGS("--url", url, "latch", name, "set", "1"));
    cr_assert(eq(int, r.status, 0), "exit %d: %s", r.status, r.err);
    cr_assert(strstr(r.err, "baton: warning: ") != NULL, "%s", r.err);
    cr_assert(strstr(r.err, "set; waiters not told: PUBLISH to") != NULL, "%s", r.err);
    cli_result_free(&r);
    cli_exec(&r, ARGS("--url", url, "latch", name, "count-down"));
    cr_assert(eq(int, r.status, 0), "exit %d: %s", r.status, r.err);
    cr_assert(strstr(r.err, "counted down; waiters not told: PUBLISH to") != NULL, "%s", r.err);
    cr_assert(eq(i64, th_cmd_int(admin, "EXISTS %s", name), 0));
    cli_result_free(&r);
    cli_exec(&r, ARGS("--url", url, "lock", name, "-n", "--", "true"));
    cr_assert(eq(int, r.status, 0), "exit %d: %s", r.status, r.err);
    cr_assert(strstr(r.err, "released; waiters not told") != NULL, "%s", r.err);
    cr_assert(strstr(r.err, "expires by its lease") == NULL, "%s", r.err);
    cr_assert(eq(i64, th_cmd_int(admin, "EXISTS %s", name), 0));
    cli_result_free(&r);
    free(url);
    free(name);
    redisFree(admin);
}

Test(scripts, a_poisoned_fair_queue_shows_in_status_and_unlock_force_clears_it)
{
    redisContext *admin = th_redis();
    char *name = th_name("poison");
    /* a queue entry whose deadline never comes, and one far ahead */
    freeReplyObject(th_cmd(admin, "RPUSH redisson_lock_queue:{%s} evil:1 evil:2", name));
    freeReplyObject(th_cmd(admin, "ZADD redisson_lock_timeout:{%s} inf evil:1", name));
    freeReplyObject(th_cmd(admin, "ZADD redisson_lock_timeout:{%s} 99999999999999 evil:2", name));
    baton_client *c = th_client(NULL);
    baton_lock *f = NULL;
    cr_assert(eq(int, baton_fairlock_open(c, name, &f), BATON_OK));
    /* poisoned: nobody gets it, however long it is free */
    cr_assert(eq(int, baton_lock_try_acquire(f, 300, 5000), BATON_ETIMEDOUT));

    cli_result r;
    cli_exec(&r, ARGS("status", name));
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cr_assert(strstr(r.out, "evil:1  no valid deadline (none, inf or nan)  IMPOSSIBLE") != NULL,
              "%s", r.out);
    cr_assert(strstr(r.out, "evil:2  deadline 99999999999999") != NULL, "%s", r.out);
    const char *second = strstr(r.out, "evil:2");
    cr_assert(second && strstr(second, "IMPOSSIBLE") != NULL, "%s", r.out);
    cli_result_free(&r);
    cli_exec(&r, ARGS("status", "--json", name));
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    json *j = json_parse(r.out);
    cr_assert(j != NULL, "%s", r.out);
    json *obj = j->type == JSON_ARRAY ? json_at(j, 0) : j;
    json *queue = json_get(obj, "queue");
    cr_assert(queue && queue->n == 2, "%s", r.out);
    for (size_t i = 0; i < 2; i++) {
        json *imp = json_get(json_at(queue, i), "impossible");
        cr_assert(imp && imp->type == JSON_BOOL && imp->boolean, "%s", r.out);
    }
    json_free(j);
    cli_result_free(&r);

    cli_exec(&r, ARGS("unlock", "--force", name));
    cr_assert(eq(int, r.status, 1), "exit %d: %s", r.status, r.err);
    cr_assert(strstr(r.err, "was not locked (its queue is cleared)") != NULL, "%s", r.err);
    cli_result_free(&r);
    cr_assert(eq(i64, th_cmd_int(admin, "EXISTS redisson_lock_queue:{%s}", name), 0));
    cr_assert(eq(i64, th_cmd_int(admin, "EXISTS redisson_lock_timeout:{%s}", name), 0));
    cr_assert(eq(int, baton_lock_try_acquire(f, 0, 5000), BATON_OK));
    cr_assert(eq(int, baton_lock_release(f), BATON_OK));
    baton_lock_close(f);
    baton_client_close(c);
    free(name);
    redisFree(admin);
}

Test(scripts, unlock_force_of_a_held_fair_lock_clears_the_queue_and_the_waiters_requeue)
{
    redisContext *admin = th_redis();
    char *name = th_name("Pforce");
    baton_options o;
    baton_options_init(&o);
    o.fair_wait_ms = 3000;
    baton_client *hc = th_client(&o), *wc = th_client(&o);
    baton_lock *h = NULL, *w = NULL;
    cr_assert(eq(int, baton_fairlock_open(hc, name, &h), BATON_OK));
    cr_assert(eq(int, baton_fairlock_open(wc, name, &w), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(h, 20000), BATON_OK));
    waiter wt = {w, wc, 10000, -100, ""};
    pthread_t t;
    pthread_create(&t, NULL, wait_thread, &wt);
    char *q = NULL;
    cr_assert(asprintf(&q, "redisson_lock_queue:{%s}", name) > 0);
    await_llen(admin, q, 1);
    freeReplyObject(th_cmd(admin, "ZADD redisson_lock_timeout:{%s} inf evil:1", name));
    freeReplyObject(th_cmd(admin, "RPUSH %s evil:1", q));
    int64_t t0 = th_ms();
    cli_result r;
    cli_exec(&r, ARGS("unlock", "--force", name));
    cr_assert(eq(int, r.status, 0), "exit %d: %s", r.status, r.err);
    cr_assert(strstr(r.err, "released, its queue cleared") != NULL, "%s", r.err);
    cli_result_free(&r);
    pthread_join(t, NULL);
    /* the waiter, woken, took the lock at once (and released it) */
    cr_assert(eq(int, wt.rc, BATON_OK), "%s", wt.msg);
    cr_assert(lt(i64, th_ms() - t0, 1000));
    redisReply *z = th_cmd(admin, "ZSCORE redisson_lock_timeout:{%s} evil:1", name);
    cr_assert(eq(int, z->type, REDIS_REPLY_NIL), "the poisoned entry is still there");
    freeReplyObject(z);
    free(q);
    baton_lock_close(h);
    baton_lock_close(w);
    baton_client_close(hc);
    baton_client_close(wc);
    free(name);
    redisFree(admin);
}

Test(scripts, the_cli_runs_every_verb_as_a_tenant_with_the_rule)
{
    redisContext *admin = th_redis();
    acl_user(admin, "clitenant", NULL);
    char *url = user_url("clitenant");
    char *name = th_name("Pclit");
    acl_run_cli_verbs(url, name, "single server");
    free(name);
    free(url);
    redisFree(admin);
}

/* Issue 46.3: elect, leader and barrier name the command the ACL refused (elect's message
 * named none: the release after the failed record replaced it). */
Test(scripts, cli_elect_leader_and_barrier_name_the_refused_command)
{
    redisContext *admin = th_redis();
    struct {
        const char *minus, *cmd;
    } cases[] = {
        {"-xlen", "elect"}, {"-xadd", "elect"}, {"-xrevrange", "leader"}, {"-hmget", "barrier"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        acl_user(admin, "cliel", cases[i].minus);
        char *url = user_url("cliel");
        char *name = th_name("Pclel");
        cli_result r;
        if (strcmp(cases[i].cmd, "elect") == 0)
            cli_exec(&r, ARGS("--url", url, "elect", name, "-n", "--", "true"));
        else if (strcmp(cases[i].cmd, "leader") == 0)
            cli_exec(&r, ARGS("--url", url, "leader", name, "--watch"));
        else
            cli_exec(&r, ARGS("--url", url, "barrier", name, "--parties", "2", "--timeout", "1s"));
        cr_expect(eq(int, r.status, 119), "%s without %s: exit %d: %s", cases[i].cmd,
                  cases[i].minus + 1, r.status, r.err);
        cr_expect(strstr(r.err, cases[i].minus + 1) != NULL, "%s: the message names no %s: %s",
                  cases[i].cmd, cases[i].minus + 1, r.err);
        cli_result_free(&r);
        free(name);
        free(url);
    }
    redisFree(admin);
}

/* Issue 46.11: latch delete and semaphore set, add and delete tell the warning the library
 * leaves when the ACL refuses their PUBLISH (done, waiters not told), as count-down does. */
Test(scripts, cli_admin_verbs_warn_when_waiters_are_not_told)
{
    redisContext *admin = th_redis();
    acl_user(admin, "cliadmq", "resetchannels");
    char *url = user_url("cliadmq");
    char *name = th_name("Padm"), *sem = th_name("Padmsem");
    struct {
        const char *const *args;
    } runs[] = {
        {ARGS("--url", url, "latch", name, "set", "2")},
        {ARGS("--url", url, "latch", name, "delete")},
        {ARGS("--url", url, "semaphore", sem, "set", "2")},
        {ARGS("--url", url, "semaphore", sem, "add", "2")},
        {ARGS("--url", url, "semaphore", sem, "--counting", "add", "1")},
        /* (semaphore delete publishes nothing, as Redisson's RSemaphore.delete: no warning
         * to tell) */
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        cli_result r;
        cli_exec(&r, runs[i].args);
        cr_expect(eq(int, r.status, 0), "run %zu (%s %s): exit %d: %s", i, runs[i].args[2],
                  runs[i].args[4], r.status, r.err);
        cr_expect(strstr(r.err, "waiters not told") != NULL, "run %zu (%s %s): no warning: %s", i,
                  runs[i].args[2], runs[i].args[4], r.err);
        cli_result_free(&r);
    }
    free(url);
    free(name);
    free(sem);
    redisFree(admin);
}

/* Issue 46.10: with per-tenant scoping, `list` skips what the user may not read, says how
 * many, and names none of them (another tenant's key never appears in its output). */
Test(scripts, cli_list_skips_other_tenants_objects_and_names_none)
{
    redisContext *admin = th_redis();
    acl_user(admin, "clilist", NULL);
    char *url = user_url("clilist");
    char *mine = th_name("Plistmine"), *theirs = th_name("Qlisttheirs");
    /* another tenant's lock and semaphore, and one of this tenant's */
    freeReplyObject(th_cmd(admin, "HSET %s 1b2c:1 1", theirs));
    freeReplyObject(th_cmd(admin, "PEXPIRE %s 60000", theirs));
    freeReplyObject(th_cmd(admin, "SET %s-sem 3", theirs));
    cli_result r;
    cli_exec(&r, ARGS("--url", url, "semaphore", mine, "set", "2"));
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cli_result_free(&r);
    for (int as_json = 0; as_json < 2; as_json++) {
        cli_exec(&r, as_json ? ARGS("--url", url, "list", "--json", "*list*")
                             : ARGS("--url", url, "list", "*list*"));
        cr_assert(eq(int, r.status, 0), "exit %d: %s", r.status, r.err);
        cr_assert(strstr(r.out, mine) != NULL, "%s", r.out);
        cr_assert(strstr(r.out, "Qlist") == NULL && strstr(r.err, "Qlist") == NULL,
                  "another tenant's name shown: %s %s", r.out, r.err);
        cr_assert(strstr(r.err, "list: 2 objects skipped: the server's ACL refuses") != NULL, "%s",
                  r.err);
        if (as_json)
            cr_assert(strstr(r.out, "\"refused\": 2") != NULL, "%s", r.out);
        cli_result_free(&r);
    }
    free(url);
    free(mine);
    free(theirs);
    redisFree(admin);
}

/* INFO stats' total_connections_received. */
static long long connections_received(redisContext *admin)
{
    redisReply *r = th_cmd(admin, "INFO stats");
    const char *p = strstr(r->str, "total_connections_received:");
    long long n = p ? atoll(p + strlen("total_connections_received:")) : -1;
    freeReplyObject(r);
    return n;
}

/* Issue 46.6: the channel permission revoked while a waiter waits (Redis drops its pub/sub
 * connection; the resubscription is refused): the wait ends with the refusal, exit 119,
 * at once, not after reconnecting in a loop until --wait ran out (exit 124). */
Test(scripts, cli_a_channel_permission_revoked_during_a_wait_exits_119, .timeout = 60)
{
    redisContext *admin = th_redis();
    acl_user(admin, "clirevoke", NULL);
    char *url = user_url("clirevoke");
    char *name = th_name("Prevoke");
    baton_client *hc = th_client(NULL);
    baton_lock *h = NULL;
    cr_assert(eq(int, baton_lock_open(hc, name, &h), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(h, BATON_LEASE_WATCHDOG), BATON_OK));
    int64_t t0 = th_ms();
    pid_t pid = cli_spawn(ARGS("--url", url, "lock", name, "-w", "10s", "--", "true"));
    for (int i = 0; i < 300 && th_numsub(admin, "redisson_lock__channel:{%s}", name) < 1; i++)
        th_sleep_ms(10);
    cr_assert(eq(i64, th_numsub(admin, "redisson_lock__channel:{%s}", name), 1));
    long long before = connections_received(admin);
    int64_t t_revoke = th_ms();
    freeReplyObject(th_cmd(admin, "ACL SETUSER clirevoke resetchannels"));
    int status = acl_wait_exit(pid);
    int64_t ended = th_ms();
    long long reconnects = connections_received(admin) - before;
    char *err = cli_bg_err(pid);
    cr_expect(eq(int, status, 119), "%s", err);
    cr_log_info("revoked: %s", err);
    cr_expect(strstr(err, "NOPERM") != NULL && strstr(err, "SUBSCRIBE") != NULL, "%s", err);
    cr_expect(lt(i64, ended - t_revoke, 3000), "ended %lld ms after the revocation (%lld in all)",
              (long long)(ended - t_revoke), (long long)(ended - t0));
    cr_expect(le(i64, reconnects, 3), "%lld connections after the revocation", reconnects);
    free(err);
    baton_lock_close(h);
    baton_client_close(hc);
    free(url);
    free(name);
    redisFree(admin);
}

typedef struct async_done {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    int rc;
} async_done;

static void on_async_done(void *handle, baton_owner *owner, int rc, void *arg)
{
    (void)handle;
    (void)owner;
    async_done *d = arg;
    pthread_mutex_lock(&d->mu);
    d->rc = rc;
    d->done = true;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

/* Issue 46.6, the asynchronous form (a fiber's sleep): an acquire started with
 * baton_lock_acquire_async ends with BATON_EPERM when its channel's permission is revoked
 * while it waits, not at its wait's end. */
Test(scripts, an_async_wait_ends_eperm_when_its_channel_is_revoked, .timeout = 60)
{
    redisContext *admin = th_redis();
    acl_user(admin, "asyncrevoke", NULL);
    char *name = th_name("Parevoke");
    baton_client *hc = th_client(NULL), *wc = user_client("asyncrevoke");
    cr_assert(wc != NULL);
    baton_lock *h = NULL, *w = NULL;
    cr_assert(eq(int, baton_lock_open(hc, name, &h), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(h, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(int, baton_lock_open(wc, name, &w), BATON_OK));
    cr_assert(eq(int, baton_client_set_callbacks(wc, BATON_CALLBACKS_BATON), BATON_OK));
    async_done d = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, -100};
    cr_assert(
        eq(int, baton_lock_acquire_async(w, NULL, 10000, 5000, on_async_done, &d, NULL), BATON_OK));
    for (int i = 0; i < 300 && th_numsub(admin, "redisson_lock__channel:{%s}", name) < 1; i++)
        th_sleep_ms(10);
    cr_assert(eq(i64, th_numsub(admin, "redisson_lock__channel:{%s}", name), 1));
    int64_t t0 = th_ms();
    freeReplyObject(th_cmd(admin, "ACL SETUSER asyncrevoke resetchannels"));
    pthread_mutex_lock(&d.mu);
    while (!d.done && th_ms() - t0 < 15000) {
        pthread_mutex_unlock(&d.mu);
        th_sleep_ms(10);
        pthread_mutex_lock(&d.mu);
    }
    pthread_mutex_unlock(&d.mu);
    int64_t took = th_ms() - t0;
    cr_assert(d.done, "the acquire never completed");
    cr_expect(eq(int, d.rc, BATON_EPERM), "%s", baton_err_name(d.rc));
    cr_expect(lt(i64, took, 3000), "completed %lld ms after the revocation", (long long)took);
    baton_lock_close(w);
    baton_lock_close(h);
    baton_client_close(wc);
    baton_client_close(hc);
    free(name);
    redisFree(admin);
}
