/*
 * The command runner: the two ways to talk to the server that everything else uses, a
 * plain command and a script run by SHA1, with the retries the architecture's retry table
 * allows, and the WAIT that confirms an acquisition on replicas. The client's open and
 * close are in client.c.
 *
 * Connections come from the pool (src/net/pool.c). A connection that fails in any way
 * (timeout, reset, protocol error) is closed and never reused; the next command connects a
 * fresh one, which is the whole of "reconnect" for commands. Scripts that change state are
 * not re-sent once they may have run: the callers that can retry safely do so themselves.
 */
#define _GNU_SOURCE
#include "internal.h"

#include "client_fields.h"
#include "conn.h"
#include "redirect.h"
#include "slots.h"
#include "topology.h"

#include "evloop.h"

#include <hiredis/hiredis.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* ------------------------------- commands --------------------------------------------- */

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

/* Runs a command on a borrowed connection; maps a broken connection. *sent (may be NULL)
 * tells whether every byte of the command was written: a command that failed before that
 * never reached the server whole, so it never ran, whatever it was. synced (may be NULL):
 * WAIT follows in the same round trip when sync_replicas is set, and *synced says whether
 * enough replicas acknowledged (BATON_OK or BATON_ENOTSYNCED). asking: ASKING goes first
 * in the same round trip (a Cluster's ASK redirection). */
static int run_on(baton_client *c, baton__conn *conn, int argc, const char **argv,
                  const size_t *lens, redisReply **reply, bool *sent, int *synced, bool asking)
{
    if (sent)
        *sent = false;
    baton__count_round_trip(c);
    const char *ask[1] = {"ASKING"};
    if ((asking && baton__conn_append(conn, 1, ask, NULL) != BATON_OK) ||
        baton__conn_append(conn, argc, argv, lens) != BATON_OK)
        return baton__fail(c, BATON_ENOMEM, "%s: out of memory", argv[0]);
    bool waited = synced && baton__append_wait(c, conn);
    int rc = baton__conn_flush(c, conn, argv[0]);
    if (rc != BATON_OK)
        return rc;
    if (sent)
        *sent = true;
    if (asking) {
        redisReply *ok = NULL;
        if ((rc = baton__conn_read(c, conn, "ASKING", &ok)) != BATON_OK)
            return rc;
        freeReplyObject(ok);
    }
    rc = baton__conn_read(c, conn, argv[0], reply);
    if (rc == BATON_OK && waited)
        *synced = baton__read_wait(c, conn) == BATON_OK ? BATON_OK : BATON_ENOTSYNCED;
    return rc;
}

/* One command on a pooled connection (on a Cluster: the connection of the slot's master,
 * redirections followed); error replies become codes (detail recorded). */
static int command_at(baton_client *c, int slot, int argc, const char **argv, redisReply **reply,
                      bool *connect_failed)
{
    *reply = NULL;
    *connect_failed = false;
    baton__route rt;
    baton__route_init(c, &rt, slot);
    redisReply *r = NULL;
    int rc;
    for (;;) {
        baton__conn *conn;
        if ((rc = baton__route_get(c, &rt, &conn)) != BATON_OK) {
            *connect_failed = true;
            return rc;
        }
        bool asking = rt.ask != NULL;
        rc = run_on(c, conn, argc, argv, NULL, &r, NULL, NULL, asking);
        bool again = rc == BATON_OK && baton__route_redirected(c, &rt, conn, r);
        baton__conn_put(c, conn, rc != BATON_OK);
        if (rc != BATON_OK)
            return rc;
        if (!again)
            break;
        freeReplyObject(r);
        r = NULL;
    }
    rc = baton__reply_error(c, r);
    if (rc != BATON_OK) {
        freeReplyObject(r);
        return rc;
    }
    *reply = r;
    return BATON_OK;
}

/* command_at the slot of the key every command baton sends names first */
static int command(baton_client *c, int argc, const char **argv, redisReply **reply,
                   bool *connect_failed)
{
    return command_at(c, argc > 1 ? baton__key_slot(argv[1], strlen(argv[1])) : -1, argc, argv,
                      reply, connect_failed);
}

int baton__command_once(baton_client *c, const char *key, int argc, const char **argv,
                        redisReply **reply)
{
    bool connect_failed;
    return command_at(c, key ? baton__key_slot(key, strlen(key)) : -1, argc, argv, reply,
                      &connect_failed);
}

int baton__query_argv(baton_client *c, int argc, const char **argv, redisReply **reply)
{
    bool connect_failed;
    int rc = command(c, argc, argv, reply, &connect_failed);
    if (rc == BATON_ECONN && !connect_failed) /* once more: the broken connection took the
                                                 idle ones with it, so this runs on a new
                                                 connection (a connection that could not
                                                 be made just now is not tried again) */
        rc = command(c, argc, argv, reply, &connect_failed);
    return rc;
}

/* ------------------------------- scripts ---------------------------------------------- */

#define SMALL_ARGV 32

typedef struct script_argv {
    const char **argv;
    const char *small[SMALL_ARGV];
    char nkeys[16];
    int argc;
} script_argv;

/* Builds "<verb> <sha|body> nkeys keys... args..."; argv[1] is filled by the caller. */
static int build_argv(script_argv *a, const char *verb, int nkeys, const char **keys, int nargs,
                      const char **args)
{
    a->argc = 3 + nkeys + nargs;
    a->argv = a->argc <= SMALL_ARGV ? a->small : malloc(sizeof(char *) * (size_t)a->argc);
    if (!a->argv)
        return BATON_ENOMEM;
    snprintf(a->nkeys, sizeof a->nkeys, "%d", nkeys);
    a->argv[0] = verb;
    a->argv[2] = a->nkeys;
    for (int i = 0; i < nkeys; i++)
        a->argv[3 + i] = keys[i];
    for (int i = 0; i < nargs; i++)
        a->argv[3 + nkeys + i] = args[i];
    return BATON_OK;
}

static void free_argv(script_argv *a)
{
    if (a->argv != a->small)
        free(a->argv);
}

int baton__script_append(baton__conn *k, const baton__script *s, int nkeys, const char **keys,
                         int nargs, const char **args)
{
    script_argv a;
    if (build_argv(&a, "EVALSHA", nkeys, keys, nargs, args) != BATON_OK)
        return BATON_ENOMEM;
    a.argv[1] = s->sha1;
    int rc = baton__conn_append(k, a.argc, a.argv, NULL);
    free_argv(&a);
    return rc;
}

int baton__script_run(baton_client *c, const baton__script *s, int nkeys, const char **keys,
                      int nargs, const char **args, redisReply **reply)
{
    return baton__script_call(c, s, nkeys, keys, nargs, args, reply, NULL);
}

/* One attempt at a script: EVALSHA on a pooled connection, and EVAL with the body on the
 * same connection if the server answers NOSCRIPT (each node of a Cluster has its own
 * cache). *sent: a command that could run the script was written whole (its reply may then
 * be lost after it ran); *reused: the connection came from the pool rather than a new
 * connect. A redirection (Cluster) is followed here: it did not run. */
static int script_attempt(baton_client *c, const baton__script *s, script_argv *a, baton__route *rt,
                          redisReply **out, bool *sent, bool *reused, int *synced)
{
    *sent = *reused = false;
    redisReply *r = NULL;
    int rc;
    for (;;) {
        baton__conn *conn;
        if ((rc = baton__route_get(c, rt, &conn)) != BATON_OK)
            return rc;
        bool asking = rt->ask != NULL;
        *reused = baton__conn_reused(conn);
        a->argv[0] = "EVALSHA";
        a->argv[1] = s->sha1;
        rc = run_on(c, conn, a->argc, a->argv, NULL, &r, sent, synced, asking);
        if (rc == BATON_OK && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0) {
            /* The script cache was flushed (or this is a new server): EVAL sends the body
             * and caches it again, in the same round trip as the retry. */
            freeReplyObject(r);
            r = NULL;
            baton__stat_inc(c, BATON__ST_NOSCRIPT);
            *sent = false; /* that one did not run */
            size_t *lens = malloc(sizeof(size_t) * (size_t)a->argc);
            if (!lens) {
                rc = baton__fail(c, BATON_ENOMEM, "out of memory");
            } else {
                a->argv[0] = "EVAL";
                a->argv[1] = s->body;
                for (int i = 0; i < a->argc; i++)
                    lens[i] = i == 1 ? s->len : strlen(a->argv[i]);
                rc = run_on(c, conn, a->argc, a->argv, lens, &r, sent, synced, asking);
                free(lens);
            }
        }
        bool again = rc == BATON_OK && baton__route_redirected(c, rt, conn, r);
        baton__conn_put(c, conn, rc != BATON_OK && rc != BATON_ENOMEM);
        if (!again) {
            if (rc == BATON_OK && baton__is_redirection(r))
                *sent = false; /* refused where it was sent: it did not run */
            break;
        }
        *sent = false; /* redirected: it did not run there */
        freeReplyObject(r);
        r = NULL;
    }
    *out = r;
    return rc;
}

/* A script whose writes are done but whose PUBLISH the server's ACL refused (its pcall)
 * returns, after its writes, the error reply
 *   BATON_UNPUBLISHED <outcome|nil> <what> <channel length> <channel> <server's error>
 * (the publish() and reply() helpers the scripts share). The caller gets the outcome as if
 * published, and the calling thread's message says what happened: a warning with BATON_OK. */
#define UNPUBLISHED "BATON_UNPUBLISHED "

/* A reply made by hiredis's own reader (its allocator), from protocol text. */
static redisReply *make_reply(const char *proto)
{
    redisReader *rd = redisReaderCreate();
    void *out = NULL;
    if (rd && (redisReaderFeed(rd, proto, strlen(proto)) != REDIS_OK ||
               redisReaderGetReply(rd, &out) != REDIS_OK))
        out = NULL;
    if (rd)
        redisReaderFree(rd);
    return out;
}

/* The outcome of a BATON_UNPUBLISHED reply (freed) as an integer or nil reply, the warning
 * recorded; NULL when out of memory. A malformed one is returned as it is (EPROTO). */
static redisReply *unpublished(baton_client *c, redisReply *r)
{
    const char *p = r->str + strlen(UNPUBLISHED);
    char outcome[32], what[32];
    int used = 0;
    unsigned long chlen = 0;
    if (sscanf(p, "%31s %31s %lu %n", outcome, what, &chlen, &used) != 3 || used == 0 ||
        strlen(p + used) < chlen)
        return r;
    const char *channel = p + used, *err = channel + chlen;
    while (*err == ' ')
        err++;
    for (char *w = what; *w; w++)
        if (*w == '_')
            *w = ' ';
    char proto[48];
    if (strcmp(outcome, "nil") == 0)
        snprintf(proto, sizeof proto, "$-1\r\n");
    else
        snprintf(proto, sizeof proto, ":%lld\r\n", strtoll(outcome, NULL, 10));
    redisReply *out = make_reply(proto);
    if (out)
        baton__fail(c, BATON_OK,
                    "%s; waiters not told: PUBLISH to %.*s refused by the server's ACL (%s); "
                    "they see it at their next recheck",
                    what, (int)chlen, channel, err);
    freeReplyObject(r);
    return out;
}

/* An ACL refusal inside a script: the message names the script, the line the server gives
 * ("on @user_script:N") and the keys that line names, so that the refused command, key or
 * channel can be told from the rule (Redis 7.0 names none of them inside a script). */
static void refused_in_script(baton_client *c, int code, const baton__script *s, const char *raw,
                              int nkeys, const char **keys)
{
    const char *at = strstr(raw, "@user_script:");
    if (!at)
        return;
    /* The server's text without "script: <SHA1>, ", which names nothing the caller knows:
     * the script's name, its line and the keys it uses follow. */
    char text[512];
    snprintf(text, sizeof text, "%s", raw);
    char *sha = strstr(text, "script: ");
    if (sha && strspn(sha + 8, "0123456789abcdef") == 40 && strncmp(sha + 48, ", ", 2) == 0)
        memmove(sha, sha + 50, strlen(sha + 50) + 1);
    long line = strtol(at + 13, NULL, 10);
    const char *b = s->body, *e;
    for (long i = 1; i < line && b; i++) {
        b = strchr(b, '\n');
        b = b ? b + 1 : NULL;
    }
    if (!b || line < 1)
        return;
    while (*b == ' ')
        b++;
    e = strchr(b, '\n');
    int len = e ? (int)(e - b) : (int)strlen(b);
    char named[256] = "";
    size_t used = 0;
    for (int k = 0; k < nkeys && k < 9 && used < sizeof named; k++) {
        char ref[16];
        snprintf(ref, sizeof ref, "KEYS[%d]", k + 1);
        const char *hit = strstr(b, ref);
        if (hit && hit < b + len)
            used += (size_t)snprintf(named + used, sizeof named - used, "%s %s = %s",
                                     used ? "," : " with", ref, keys[k]);
    }
    if (!named[0]) /* the line names no key itself (a local holds it): every key */
        for (int k = 0; k < nkeys && k < 9 && used < sizeof named; k++)
            used += (size_t)snprintf(named + used, sizeof named - used, "%s %s", k ? "," : "; keys",
                                     keys[k]);
    baton__fail(c, code, "server replied: %s (script %s, line %ld: %.*s%s)", text, s->name, line,
                len > 160 ? 160 : len, b, named);
}

static int script_call(baton_client *c, const baton__script *s, int nkeys, const char **keys,
                       int nargs, const char **args, redisReply **reply, bool *maybe_ran,
                       int *synced)
{
    *reply = NULL;
    if (maybe_ran)
        *maybe_ran = false;
    s = baton__script_variant(c, s);
    script_argv a;
    if (build_argv(&a, "EVALSHA", nkeys, keys, nargs, args) != BATON_OK)
        return baton__fail(c, BATON_ENOMEM, "out of memory");
    baton__route rt;
    baton__route_init(c, &rt, nkeys > 0 ? baton__key_slot(keys[0], strlen(keys[0])) : -1);
    redisReply *r = NULL;
    bool sent, reused;
    int rc = script_attempt(c, s, &a, &rt, &r, &sent, &reused, synced);
    if (rc == BATON_ECONN && !sent && reused)
        /* A pooled connection failed before the script was written whole: it never ran,
         * so it goes again, whatever it does, on a new connection (the broken one took the
         * idle ones with it). */
        rc = script_attempt(c, s, &a, &rt, &r, &sent, &reused, synced);
    if (maybe_ran)
        *maybe_ran = sent; /* a lost reply after the script was sent leaves it unknown */
    free_argv(&a);
    if (rc != BATON_OK)
        return rc;
    if (r->type == REDIS_REPLY_ERROR && r->str &&
        strncmp(r->str, UNPUBLISHED, strlen(UNPUBLISHED)) == 0)
        r = unpublished(c, r);
    if (!r)
        return baton__fail(c, BATON_ENOMEM, "out of memory");
    rc = baton__reply_error(c, r);
    if ((rc == BATON_EPERM || (rc == BATON_EPROTO && strstr(r->str, "WRONGTYPE"))) && r->str)
        refused_in_script(c, rc, s, r->str, nkeys, keys); /* the key, not the SHA1 */
    if (rc != BATON_OK) {
        freeReplyObject(r);
        return rc;
    }
    *reply = r;
    return BATON_OK;
}

int baton__script_call(baton_client *c, const baton__script *s, int nkeys, const char **keys,
                       int nargs, const char **args, redisReply **reply, bool *maybe_ran)
{
    return script_call(c, s, nkeys, keys, nargs, args, reply, maybe_ran, NULL);
}

int baton__script_call_synced(baton_client *c, const baton__script *s, int nkeys, const char **keys,
                              int nargs, const char **args, redisReply **reply, bool *maybe_ran)
{
    int synced = BATON_OK;
    int rc = script_call(c, s, nkeys, keys, nargs, args, reply, maybe_ran, &synced);
    /* the detail ("0 of 1 replicas acknowledged within 1000 ms") is baton__read_wait's */
    return rc == BATON_OK && synced != BATON_OK ? BATON_ENOTSYNCED : rc;
}

const baton__script *baton__script_find(const char *name)
{
    for (const baton__script *s = baton__scripts(); s->name; s++)
        if (strcmp(s->name, name) == 0)
            return s;
    return NULL;
}
