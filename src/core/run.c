/*
 * The command runner: the two ways to talk to the server that everything else uses, a
 * plain command and a script run by SHA1, with the retries the architecture's retry table
 * allows, and what their replies mean (error replies as codes, an ACL refusal inside a
 * script named by its line and keys, an unpublished outcome). The client's open and close
 * are in client.c; where a command goes, the redirections it follows and the WAIT after an
 * acquisition are the transport's (src/net/send.c).
 *
 * A connection that fails in any way (timeout, reset, protocol error) is closed and never
 * reused; the next command connects a fresh one, which is the whole of "reconnect" for
 * commands. Scripts that change state are not re-sent once they may have run: the callers
 * that can retry safely do so themselves.
 */
#define _GNU_SOURCE
#include "internal.h"

#include "send.h"
#include "slots.h"

#include <hiredis/hiredis.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------- commands --------------------------------------------- */

/* One command where its slot is served (baton__net_send: redirections followed); error
 * replies become codes (detail recorded). */
static int command_at(baton_client *c, int slot, int argc, const char **argv, redisReply **reply,
                      bool *connect_failed)
{
    *reply = NULL;
    baton__send s = {.slot = slot, .argc = argc, .argv = argv};
    redisReply *r = NULL;
    int rc = baton__net_send(c, &s, &r);
    *connect_failed = s.connect_failed;
    if (rc != BATON_OK)
        return rc;
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
    /* EVALSHA, and EVAL with the body on the same connection after NOSCRIPT (send.c) */
    baton__send snd = {.slot = nkeys > 0 ? baton__key_slot(keys[0], strlen(keys[0])) : -1,
                       .argc = a.argc,
                       .argv = a.argv,
                       .sha1 = s->sha1,
                       .body = s->body,
                       .body_len = s->len,
                       .sync = synced != NULL};
    redisReply *r = NULL;
    int rc = baton__net_send(c, &snd, &r);
    if (rc == BATON_ECONN && !snd.sent && snd.reused)
        /* A pooled connection failed before the script was written whole: it never ran,
         * so it goes again, whatever it does, on a new connection (the broken one took the
         * idle ones with it). */
        rc = baton__net_send(c, &snd, &r);
    bool sent = snd.sent;
    if (synced)
        *synced = snd.synced;
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
