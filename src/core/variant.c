/*
 * The scripts as a Redis 7 Cluster must run them: publishing with SPUBLISH (sharded pub/sub)
 * instead of PUBLISH. On a Cluster, a classic PUBLISH reaches every node's subscribers but
 * SSUBSCRIBE never hears it, and Redisson 3.29+ (shardedSubscriptionMode AUTO) both
 * subscribes with SSUBSCRIBE and publishes with SPUBLISH there; baton does the same, so that
 * a release by either wakes the waiters of both. Redisson passes the publish command to its
 * scripts as an argument; baton keeps one script source per operation and derives the
 * sharded body (every "redis.call('publish'" becomes "redis.call('spublish'", and the
 * inspection's PUBSUB NUMSUB becomes SHARDNUMSUB) and its SHA1 once per process, at the
 * first call that needs it.
 *
 * And the scripts as a full server must run them: a script that only shrinks or extends
 * (baton__script.oom, made by the build) runs as "#!lua flags=allow-oom" on Redis >= 7, so
 * that releases work at maxmemory under noeviction. On a Cluster that is the sharded form
 * of the allow-oom script.
 */
#include "internal.h"

#include "client_fields.h"
#include "topology.h"

#include <openssl/evp.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static baton__script *sharded;     /* parallel to baton__scripts(); NULL entries: unchanged */
static baton__script *sharded_oom; /* the sharded forms of the allow-oom variants */
static size_t nscripts;
static pthread_once_t made = PTHREAD_ONCE_INIT;

/* What changes, in this order: publishing, and the count of a channel's subscribers that
 * the inspection script reads. */
static const char *const EDITS[][2] = {
    {"redis.call('publish'", "redis.call('spublish'"},
    {"redis.pcall('publish'", "redis.pcall('spublish'"},
    {"redis.call('pubsub', 'numsub'", "redis.call('pubsub', 'shardnumsub'"},
};

/* body with every `from` replaced by `to`; NULL when from does not occur (or no memory). */
static char *replace_all(const char *body, const char *from, const char *to)
{
    size_t flen = strlen(from), tlen = strlen(to), n = 0;
    for (const char *p = body; (p = strstr(p, from)) != NULL; p += flen)
        n++;
    if (n == 0)
        return NULL;
    char *out = malloc(strlen(body) + n * (tlen - flen) + 1), *w = out;
    if (!out)
        return NULL;
    const char *p = body;
    for (const char *q; (q = strstr(p, from)) != NULL; p = q + flen) {
        memcpy(w, p, (size_t)(q - p));
        w += q - p;
        memcpy(w, to, tlen);
        w += tlen;
    }
    strcpy(w, p);
    return out;
}

/* The sharded body of a script, or NULL when nothing in it changes. */
static char *sharded_body(const char *body)
{
    char *cur = NULL;
    for (size_t i = 0; i < sizeof EDITS / sizeof EDITS[0]; i++) {
        char *next = replace_all(cur ? cur : body, EDITS[i][0], EDITS[i][1]);
        if (next) {
            free(cur);
            cur = next;
        }
    }
    return cur;
}

static bool sha1_hex(const char *buf, size_t len, char out[41])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (EVP_Digest(buf, len, md, &mdlen, EVP_sha1(), NULL) != 1 || mdlen != 20)
        return false;
    for (unsigned i = 0; i < 20; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
    return true;
}

/* *out = the sharded form of s; false when nothing in s changes (or no memory). */
static bool shard(const baton__script *s, baton__script *out)
{
    char *body = sharded_body(s->body);
    size_t len = body ? strlen(body) : 0;
    char *sha = body ? malloc(41) : NULL;
    if (!body || !sha || !sha1_hex(body, len, sha)) {
        free(body);
        free(sha);
        return false;
    }
    *out = (baton__script){s->name, body, len, sha, NULL};
    return true;
}

static void make(void)
{
    const baton__script *all = baton__scripts();
    size_t n = 0;
    while (all[n].name)
        n++;
    sharded = calloc(n, sizeof *sharded);
    sharded_oom = calloc(n, sizeof *sharded_oom);
    if (!sharded || !sharded_oom) {
        free(sharded);
        free(sharded_oom);
        sharded = sharded_oom = NULL;
        return; /* out of memory: the classic scripts run, waiters fall back to their bounds */
    }
    nscripts = n;
    for (size_t i = 0; i < n; i++) {
        if (!shard(&all[i], &sharded[i]))
            continue;
        if (all[i].oom && shard(all[i].oom, &sharded_oom[i]))
            sharded[i].oom = &sharded_oom[i];
    }
}

bool baton__sharded_pubsub(const baton_client *c)
{
    return baton__topology_cluster(c) && atomic_load(&c->server_major) >= 7;
}

const baton__script *baton__script_variant(const baton_client *c, const baton__script *s)
{
    /* the client's server takes "#!lua flags=" (Redis >= 7; 0: unknown, classic scripts) */
    const baton__script *full = s->oom && atomic_load(&c->server_major) >= 7 ? s->oom : s;
    if (!baton__sharded_pubsub(c))
        return full;
    pthread_once(&made, make);
    const baton__script *all = baton__scripts();
    size_t i = (size_t)(s - all);
    if (!sharded || i >= nscripts || !sharded[i].body)
        return full;
    return sharded[i].oom ? sharded[i].oom : &sharded[i];
}
