/*
 * Where a command goes, and its round trip there: the one way the floors above send a
 * command or a script (pub/sub and the watchdog's batches aside). It goes to the connection
 * the topology gives for its slot (redirect.c: the slot's master, or the node of an ASK; the
 * shared connection or a pooled one, pool.c and mux.c), ASKING first after an ASK, WAIT or
 * WAITAOF after it in the same round trip when asked, and again where a redirection says
 * (it did not run). A script goes by SHA1, and by its body (EVAL) on the same connection
 * when the server answers NOSCRIPT: each node of a Cluster has its own cache, and a flushed
 * one is filled again in the same round trip as the retry. What a reply means, and whether
 * a call may go again after a lost reply, is the caller's (src/core/run.c).
 */
#define _GNU_SOURCE
#include "send.h"

#include "client_fields.h"
#include "slots.h"
#include "stats.h"
#include "topology.h"

#include <hiredis/hiredis.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void baton__node_of_key(baton_client *c, const char *key, char *buf, size_t len, int *slot)
{
    int s = baton__topology_cluster(c) ? baton__key_slot(key, strlen(key)) : -1;
    if (slot)
        *slot = s;
    baton__pool *p = s >= 0 ? baton__topology_slot_pool(c, s) : NULL;
    if (p)
        snprintf(buf, len, "%s:%d", p->host, p->port);
    else if (c->cfg.ep.path && c->cfg.ep.kind == BATON__EP_SINGLE)
        snprintf(buf, len, "unix:%s", c->cfg.ep.path);
    else
        baton__conn_where(c, NULL, buf, len);
}

bool baton__append_wait(baton_client *c, baton__conn *k)
{
    if (c->cfg.sync_replicas <= 0 && !c->cfg.sync_aof)
        return false;
    char n[16], ms[24];
    snprintf(n, sizeof n, "%d", c->cfg.sync_replicas);
    snprintf(ms, sizeof ms, "%lld", (long long)c->cfg.sync_timeout_ms);
    if (c->cfg.sync_aof) { /* the master's fsync, and the replicas' when sync_replicas */
        const char *argv[4] = {"WAITAOF", "1", n, ms};
        return baton__conn_append(k, 4, argv, NULL) == BATON_OK;
    }
    const char *argv[3] = {"WAIT", n, ms};
    return baton__conn_append(k, 3, argv, NULL) == BATON_OK;
}

/* WAITAOF's reply: [local fsyncs, replicas' fsyncs]; "ERR unknown command" before Redis
 * 7.2, an error with appendonly no. */
static int read_waitaof(baton_client *c, redisReply *r)
{
    if (r->type == REDIS_REPLY_ERROR) {
        bool unknown = r->str && strstr(r->str, "unknown command") != NULL;
        return baton__fail(c, BATON_ENOTSYNCED, "sync_aof: %s: %s",
                           unknown ? "the server has no WAITAOF (Redis 7.2+ or Valkey 8+ needed)"
                                   : "not on disk",
                           r->str);
    }
    long long local = -1, replicas = -1;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[0]->type == REDIS_REPLY_INTEGER && r->element[1]->type == REDIS_REPLY_INTEGER) {
        local = r->element[0]->integer;
        replicas = r->element[1]->integer;
    }
    if (local >= 1 && replicas >= c->cfg.sync_replicas)
        return BATON_OK;
    return baton__fail(c, BATON_ENOTSYNCED,
                       "sync_aof: the master's append-only file %s and %lld of %d replicas' had "
                       "it within %lld ms",
                       local >= 1 ? "had it" : "did not have it", replicas < 0 ? 0 : replicas,
                       c->cfg.sync_replicas, (long long)c->cfg.sync_timeout_ms);
}

int baton__read_wait(baton_client *c, baton__conn *k)
{
    redisReply *r = NULL;
    /* the server answers WAIT sync_timeout_ms after it got it at most: the round trip's
     * deadline has that besides the command timeout (conn.c, round_deadline) */
    int rc = baton__conn_read(c, k, c->cfg.sync_aof ? "WAITAOF" : "WAIT", &r);
    if (rc != BATON_OK)
        return rc;
    if (c->cfg.sync_aof) {
        rc = read_waitaof(c, r);
        freeReplyObject(r);
        return rc;
    }
    long long acks = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    rc = acks >= c->cfg.sync_replicas
             ? BATON_OK
             : baton__fail(
                   c, BATON_ENOTSYNCED, "%lld of %d replicas acknowledged within %lld ms%s%s",
                   acks < 0 ? 0 : acks, c->cfg.sync_replicas, (long long)c->cfg.sync_timeout_ms,
                   r->type == REDIS_REPLY_ERROR ? ": " : "",
                   r->type == REDIS_REPLY_ERROR ? r->str : "");
    freeReplyObject(r);
    return rc;
}

/* Runs s's command (with lens: EVAL's) on a borrowed connection; maps a broken connection.
 * s->sent tells whether every byte of the command was written: a command that failed before
 * that never reached the server whole, so it never ran, whatever it was. With s->sync, WAIT
 * follows in the same round trip when sync_replicas is set, and s->synced says whether
 * enough replicas acknowledged (BATON_OK or BATON_ENOTSYNCED). asking: ASKING goes first in
 * the same round trip (a Cluster's ASK redirection). */
static int round_trip(baton_client *c, baton__send *s, baton__conn *conn, const size_t *lens,
                      redisReply **reply, bool asking)
{
    int argc = s->argc;
    const char **argv = s->argv;
    s->sent = false;
    baton__count_round_trip(c);
    const char *ask[1] = {"ASKING"};
    if ((asking && baton__conn_append(conn, 1, ask, NULL) != BATON_OK) ||
        baton__conn_append(conn, argc, argv, lens) != BATON_OK)
        return baton__fail(c, BATON_ENOMEM, "%s: out of memory", argv[0]);
    bool waited = s->sync && baton__append_wait(c, conn);
    int rc = baton__conn_flush(c, conn, argv[0]);
    if (rc != BATON_OK)
        return rc;
    s->sent = true;
    if (asking) {
        redisReply *ok = NULL;
        if ((rc = baton__conn_read(c, conn, "ASKING", &ok)) != BATON_OK)
            return rc;
        freeReplyObject(ok);
    }
    rc = baton__conn_read(c, conn, argv[0], reply);
    if (rc == BATON_OK && waited)
        s->synced = baton__read_wait(c, conn) == BATON_OK ? BATON_OK : BATON_ENOTSYNCED;
    return rc;
}

int baton__net_send(baton_client *c, baton__send *s, redisReply **out)
{
    *out = NULL;
    s->sent = s->reused = s->connect_failed = false;
    s->synced = BATON_OK;
    if (!s->routed) {
        baton__route_init(c, &s->route, s->slot);
        s->routed = true;
    }
    redisReply *r = NULL;
    int rc;
    for (;;) {
        baton__conn *conn;
        if ((rc = baton__route_get(c, &s->route, &conn)) != BATON_OK) {
            s->connect_failed = true;
            return rc;
        }
        bool asking = s->route.ask != NULL;
        s->reused = baton__conn_reused(conn);
        if (s->body) {
            s->argv[0] = "EVALSHA";
            s->argv[1] = s->sha1;
        }
        rc = round_trip(c, s, conn, NULL, &r, asking);
        if (s->body && rc == BATON_OK && r->type == REDIS_REPLY_ERROR &&
            strncmp(r->str, "NOSCRIPT", 8) == 0) {
            /* The script cache was flushed (or this is a new server): EVAL sends the body
             * and caches it again, in the same round trip as the retry. */
            freeReplyObject(r);
            r = NULL;
            baton__stat_inc(c, BATON__ST_NOSCRIPT);
            s->sent = false; /* that one did not run */
            size_t *lens = malloc(sizeof(size_t) * (size_t)s->argc);
            if (!lens) {
                rc = baton__fail(c, BATON_ENOMEM, "out of memory");
            } else {
                s->argv[0] = "EVAL";
                s->argv[1] = s->body;
                for (int i = 0; i < s->argc; i++)
                    lens[i] = i == 1 ? s->body_len : strlen(s->argv[i]);
                rc = round_trip(c, s, conn, lens, &r, asking);
                free(lens);
            }
        }
        bool again = rc == BATON_OK && baton__route_redirected(c, &s->route, conn, r);
        /* a script's request that ran out of memory before it was written leaves the
         * connection as it was; a command's is closed */
        baton__conn_put(c, conn, rc != BATON_OK && !(s->body && rc == BATON_ENOMEM));
        if (!again) {
            if (rc == BATON_OK && baton__is_redirection(r))
                s->sent = false; /* refused where it was sent: it did not run */
            break;
        }
        s->sent = false; /* redirected: it did not run there */
        freeReplyObject(r);
        r = NULL;
    }
    if (rc != BATON_OK && r) {
        freeReplyObject(r);
        r = NULL;
    }
    *out = r;
    return rc;
}
