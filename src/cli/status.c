/*
 * `baton status`: what lives at each name, read straight from Redis, since the public API
 * answers questions of one holder ("do I hold it?") and status answers an operator's ("who
 * holds it, who waits, until when?"). For each name one MULTI/EXEC reads, as one atomic
 * snapshot, the key's TYPE and PTTL, its hash (lock holders and hold counts) or string
 * (permits or count), Redisson's auxiliary keys (the fair lock's queue and deadlines, the
 * fencing token counter), the server's clock, and who listens on the object's channels.
 *
 * Also here: the raw connection (URL parsing for hiredis; the library's parser is private
 * to it) and the hash-tag rule for auxiliary key names.
 */
#define _GNU_SOURCE
#include "cli.h"

#include <hiredis/hiredis.h>

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------- names ------------------------------------------------ */

char *cli_tagged(const char *prefix, const char *name)
{
    char *s = NULL;
    bool tagged = strchr(name, '{') != NULL;
    if (asprintf(&s, tagged ? "%s%s" : "%s{%s}", prefix, name) < 0)
        return NULL;
    return s;
}

/* ------------------------------- the raw connection ----------------------------------- */

typedef struct endpoint {
    char *host, *path, *user, *pass;
    int port, db;
} endpoint;

static void endpoint_free(endpoint *ep)
{
    free(ep->host);
    free(ep->path);
    free(ep->user);
    if (ep->pass) {
        memset(ep->pass, 0, strlen(ep->pass));
        free(ep->pass);
    }
}

/* Copies [s, s+n) decoding %XX escapes. */
static char *decode(const char *s, size_t n)
{
    char *out = malloc(n + 1), *o = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%' && i + 2 < n && isxdigit((unsigned char)s[i + 1]) &&
            isxdigit((unsigned char)s[i + 2])) {
            char hex[3] = {s[i + 1], s[i + 2], 0};
            *o++ = (char)strtol(hex, NULL, 16);
            i += 2;
        } else {
            *o++ = s[i];
        }
    }
    *o = '\0';
    return out;
}

/* The library has validated the URL already (the client opened): this only takes it apart,
 * with the library's rules (see include/baton/client.h). */
static bool parse_url(const char *url, endpoint *ep)
{
    memset(ep, 0, sizeof *ep);
    ep->port = 6379;
    if (strncmp(url, "unix://", 7) == 0) {
        const char *p = url + 7, *q = strchr(p, '?');
        ep->path = decode(p, q ? (size_t)(q - p) : strlen(p));
        if (q && strncmp(q, "?db=", 4) == 0)
            ep->db = atoi(q + 4);
        return ep->path != NULL;
    }
    if (strncmp(url, "redis://", 8) != 0)
        return false;
    const char *p = url + 8, *end = p + strlen(p);
    const char *slash = strchr(p, '/'), *auth_end = slash ? slash : end, *at = NULL;
    for (const char *s = p; s < auth_end; s++)
        if (*s == '@')
            at = s;
    if (at) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        if (colon) {
            if (colon > p)
                ep->user = decode(p, (size_t)(colon - p));
            if (at > colon + 1)
                ep->pass = decode(colon + 1, (size_t)(at - colon - 1));
        } else if (at > p) {
            ep->pass = decode(p, (size_t)(at - p));
        }
        p = at + 1;
    }
    const char *port_colon;
    if (*p == '[') {
        const char *close = memchr(p, ']', (size_t)(auth_end - p));
        if (!close)
            return false;
        ep->host = strndup(p + 1, (size_t)(close - p - 1));
        port_colon = close + 1 < auth_end && close[1] == ':' ? close + 1 : NULL;
    } else {
        port_colon = memchr(p, ':', (size_t)(auth_end - p));
        ep->host = strndup(p, (size_t)((port_colon ? port_colon : auth_end) - p));
    }
    if (port_colon)
        ep->port = atoi(port_colon + 1);
    if (slash && slash[1])
        ep->db = atoi(slash + 1);
    return ep->host != NULL;
}

void *cli_redis_connect(const cli_global *g)
{
    endpoint ep;
    if (!parse_url(cli_url(g), &ep)) {
        endpoint_free(&ep);
        cli_error("cannot read the URL");
        return NULL;
    }
    struct timeval tv = {5, 0};
    redisReply *rep = NULL;
    redisContext *r = ep.path ? redisConnectUnixWithTimeout(ep.path, tv)
                              : redisConnectWithTimeout(ep.host, ep.port, tv);
    if (!r || r->err) {
        cli_error("connect: %s", r ? r->errstr : "out of memory");
        goto fail;
    }
    redisSetTimeout(r, tv);
    if (g->user) {
        free(ep.user);
        ep.user = strdup(g->user);
    }
    if (g->password && *g->password) {
        free(ep.pass);
        ep.pass = strdup(g->password);
    }
    if (ep.pass) {
        rep = ep.user ? redisCommand(r, "AUTH %s %s", ep.user, ep.pass)
                      : redisCommand(r, "AUTH %s", ep.pass);
        if (!rep || rep->type == REDIS_REPLY_ERROR) {
            cli_error("AUTH refused: %s", rep ? rep->str : r->errstr);
            goto fail;
        }
        freeReplyObject(rep);
        rep = NULL;
    }
    if (ep.db) {
        rep = redisCommand(r, "SELECT %d", ep.db);
        if (!rep || rep->type == REDIS_REPLY_ERROR) {
            cli_error("SELECT refused: %s", rep ? rep->str : r->errstr);
            goto fail;
        }
        freeReplyObject(rep);
    }
    endpoint_free(&ep);
    return r;
fail:
    if (rep)
        freeReplyObject(rep);
    if (r)
        redisFree(r);
    endpoint_free(&ep);
    return NULL;
}

/* ------------------------------- reading one name ------------------------------------- */

typedef struct holder {
    const char *owner;
    long long holds;
    bool holds_ok;
} holder;

typedef struct waiter {
    const char *owner;
    long long deadline; /* the timeout set's score: server time in ms */
    bool has_deadline;
} waiter;

typedef struct snapshot {
    redisReply *exec; /* owns every string below */
    const char *type; /* "none", "hash", "string", ... */
    const char *kind; /* for people and for JSON: see docs/baton.1.md */
    long long ttl_ms; /* PTTL: -2 absent, -1 no expiry */
    holder *holders;
    size_t n_holders;
    waiter *queue;
    size_t n_queue;
    bool has_value;
    long long value;
    bool has_token;
    long long token;  /* the last fencing token handed out for the name */
    long long now_ms; /* server time */
    long long subs_lock, subs_semaphore, subs_latch;
} snapshot;

static bool reply_ll(const redisReply *r, long long *out)
{
    if (!r)
        return false;
    if (r->type == REDIS_REPLY_INTEGER) {
        *out = r->integer;
        return true;
    }
    if (r->type != REDIS_REPLY_STRING || r->len == 0)
        return false;
    char *end;
    *out = strtoll(r->str, &end, 10);
    return *end == '\0';
}

static void snapshot_free(snapshot *s)
{
    if (s->exec)
        freeReplyObject(s->exec);
    free(s->holders);
    free(s->queue);
    memset(s, 0, sizeof *s);
}

/* Reads NAME into *s. Returns an exit code (0, or EXIT_CONN / EXIT_FAILED after a message). */
static int read_name(redisContext *r, const char *name, snapshot *s)
{
    memset(s, 0, sizeof *s);
    char *queue = cli_tagged("redisson_lock_queue:", name);
    char *timeout = cli_tagged("redisson_lock_timeout:", name);
    char *token = cli_tagged("redisson_lock_token:", name);
    char *lock_ch = cli_tagged("redisson_lock__channel:", name);
    char *sem_ch = cli_tagged("redisson_sc:", name);
    char *latch_ch = cli_tagged("redisson_countdownlatch__channel__", name);
    int rc = EXIT_OK;
    if (!queue || !timeout || !token || !lock_ch || !sem_ch || !latch_ch) {
        rc = EXIT_FAILED;
        goto out;
    }
    redisAppendCommand(r, "MULTI");
    redisAppendCommand(r, "TYPE %s", name);
    redisAppendCommand(r, "PTTL %s", name);
    redisAppendCommand(r, "HGETALL %s", name);
    redisAppendCommand(r, "GET %s", name);
    redisAppendCommand(r, "LRANGE %s 0 -1", queue);
    redisAppendCommand(r, "ZRANGE %s 0 -1 WITHSCORES", timeout);
    redisAppendCommand(r, "GET %s", token);
    redisAppendCommand(r, "TIME");
    redisAppendCommand(r, "PUBSUB NUMSUB %s %s %s", lock_ch, sem_ch, latch_ch);
    redisAppendCommand(r, "EXEC");
    for (int i = 0; i < 11; i++) {
        redisReply *rep = NULL;
        if (redisGetReply(r, (void **)&rep) != REDIS_OK) {
            cli_error("status %s: %s", name, r->errstr[0] ? r->errstr : "connection lost");
            rc = EXIT_CONN;
            goto out;
        }
        if (i < 10) {
            /* MULTI, then QUEUED for each command */
            bool bad = rep->type == REDIS_REPLY_ERROR;
            if (bad)
                cli_error("status %s: server replied: %s", name, rep->str);
            freeReplyObject(rep);
            if (bad) {
                rc = EXIT_FAILED;
                goto out;
            }
        } else {
            s->exec = rep;
        }
    }
    redisReply *e = s->exec;
    if (e->type != REDIS_REPLY_ARRAY || e->elements != 9) {
        cli_error("status %s: unexpected reply to EXEC", name);
        rc = EXIT_FAILED;
        goto out;
    }
    redisReply **el = e->element;
    s->type = el[0]->type == REDIS_REPLY_STATUS ? el[0]->str : "unknown";
    if (!reply_ll(el[1], &s->ttl_ms))
        s->ttl_ms = -2;
    if (el[2]->type == REDIS_REPLY_ARRAY && el[2]->elements >= 2) {
        s->n_holders = el[2]->elements / 2;
        s->holders = calloc(s->n_holders, sizeof *s->holders);
        for (size_t i = 0; s->holders && i < s->n_holders; i++) {
            s->holders[i].owner = el[2]->element[2 * i]->str;
            s->holders[i].holds_ok = reply_ll(el[2]->element[2 * i + 1], &s->holders[i].holds);
        }
        if (!s->holders)
            s->n_holders = 0;
    }
    s->has_value = reply_ll(el[3], &s->value);
    if (el[4]->type == REDIS_REPLY_ARRAY && el[4]->elements > 0) {
        s->n_queue = el[4]->elements;
        s->queue = calloc(s->n_queue, sizeof *s->queue);
        for (size_t i = 0; s->queue && i < s->n_queue; i++) {
            waiter *w = &s->queue[i];
            w->owner = el[4]->element[i]->str;
            /* its deadline: the score beside the same owner in the timeout set */
            for (size_t j = 0; el[5]->type == REDIS_REPLY_ARRAY && j + 1 < el[5]->elements;
                 j += 2) {
                if (strcmp(el[5]->element[j]->str, w->owner) == 0) {
                    double d = strtod(el[5]->element[j + 1]->str, NULL);
                    w->deadline = (long long)d;
                    w->has_deadline = true;
                }
            }
        }
        if (!s->queue)
            s->n_queue = 0;
    }
    s->has_token = reply_ll(el[6], &s->token);
    if (el[7]->type == REDIS_REPLY_ARRAY && el[7]->elements == 2) {
        long long sec = 0, usec = 0;
        reply_ll(el[7]->element[0], &sec);
        reply_ll(el[7]->element[1], &usec);
        s->now_ms = sec * 1000 + usec / 1000;
    }
    if (el[8]->type == REDIS_REPLY_ARRAY && el[8]->elements == 6) {
        reply_ll(el[8]->element[1], &s->subs_lock);
        reply_ll(el[8]->element[3], &s->subs_semaphore);
        reply_ll(el[8]->element[5], &s->subs_latch);
    }

    bool fair_keys = s->n_queue > 0 || (el[5]->type == REDIS_REPLY_ARRAY && el[5]->elements > 0);
    if (strcmp(s->type, "hash") == 0)
        s->kind = fair_keys ? "fairlock" : "lock";
    else if (strcmp(s->type, "string") == 0 && s->has_value && s->value <= 0)
        s->kind = "semaphore"; /* a latch's key is gone when its count reaches zero */
    else if (strcmp(s->type, "string") == 0 && s->has_value)
        s->kind = s->subs_semaphore && !s->subs_latch   ? "semaphore"
                  : s->subs_latch && !s->subs_semaphore ? "latch"
                                                        : "semaphore-or-latch";
    else if (strcmp(s->type, "none") == 0)
        s->kind = fair_keys ? "fairlock" : "absent";
    else
        s->kind = "other";
out:
    free(queue);
    free(timeout);
    free(token);
    free(lock_ch);
    free(sem_ch);
    free(latch_ch);
    return rc;
}

/* ------------------------------- text ------------------------------------------------- */

static void format_ms(long long ms, char *buf, size_t len)
{
    if (ms < 0)
        snprintf(buf, len, "-%lld.%03llds", -ms / 1000, -ms % 1000);
    else if (ms < 10000)
        snprintf(buf, len, "%lld.%03llds", ms / 1000, ms % 1000);
    else
        snprintf(buf, len, "%llds", ms / 1000);
}

static void print_text(const char *name, const snapshot *s)
{
    char t[32];
    if (strcmp(s->kind, "lock") == 0 || strcmp(s->kind, "fairlock") == 0) {
        bool held = strcmp(s->type, "hash") == 0;
        printf("%s: %s, ", name, strcmp(s->kind, "lock") == 0 ? "lock" : "fair lock");
        if (!held)
            printf("free");
        else if (s->ttl_ms == -1)
            printf("held, no expiry");
        else
            format_ms(s->ttl_ms, t, sizeof t), printf("held, TTL %s", t);
        if (s->has_token)
            printf(", last fencing token %lld", s->token);
        printf("\n");
        for (size_t i = 0; i < s->n_holders; i++) {
            if (s->holders[i].holds_ok)
                printf("  holder %s  holds %lld\n", s->holders[i].owner, s->holders[i].holds);
            else
                printf("  holder %s  holds ?\n", s->holders[i].owner);
        }
        if (s->n_queue)
            printf("  queue (%zu waiting, first in line first):\n", s->n_queue);
        for (size_t i = 0; i < s->n_queue; i++) {
            const waiter *w = &s->queue[i];
            if (w->has_deadline) {
                format_ms(w->deadline - s->now_ms, t, sizeof t);
                printf("  %4zu. %s  deadline %lld (in %s)\n", i + 1, w->owner, w->deadline, t);
            } else {
                printf("  %4zu. %s  no deadline\n", i + 1, w->owner);
            }
        }
        if (s->subs_lock)
            printf("  %lld client%s subscribed for the unlock message\n", s->subs_lock,
                   s->subs_lock == 1 ? "" : "s");
    } else if (strcmp(s->kind, "semaphore") == 0) {
        printf("%s: semaphore, %lld permit%s available, %lld client%s waiting\n", name, s->value,
               s->value == 1 ? "" : "s", s->subs_semaphore, s->subs_semaphore == 1 ? "" : "s");
    } else if (strcmp(s->kind, "latch") == 0) {
        printf("%s: latch, count %lld, %lld client%s waiting\n", name, s->value, s->subs_latch,
               s->subs_latch == 1 ? "" : "s");
    } else if (strcmp(s->kind, "semaphore-or-latch") == 0) {
        printf("%s: semaphore or latch, value %lld (a semaphore's available permits or a "
               "latch's count)\n",
               name, s->value);
    } else if (strcmp(s->kind, "absent") == 0) {
        printf("%s: nothing (no key: free lock, open or unset latch, unset semaphore)\n", name);
    } else {
        printf("%s: not a baton object (a Redis %s)\n", name, s->type);
    }
    if (s->ttl_ms >= 0 && strcmp(s->type, "hash") != 0 && strcmp(s->type, "none") != 0) {
        format_ms(s->ttl_ms, t, sizeof t);
        printf("  expires in %s\n", t);
    }
}

/* ------------------------------- JSON ------------------------------------------------- */

/* Length of the valid UTF-8 sequence at s (0 if invalid). */
static size_t utf8_len(const unsigned char *s)
{
    if (s[0] < 0x80)
        return 1;
    size_t n = (s[0] & 0xe0) == 0xc0   ? 2
               : (s[0] & 0xf0) == 0xe0 ? 3
               : (s[0] & 0xf8) == 0xf0 ? 4
                                       : 0;
    if (n == 0 || (n == 2 && s[0] < 0xc2) || (n == 4 && s[0] > 0xf4))
        return 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if (n == 3 && ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0)))
        return 0; /* overlong, or a surrogate */
    if (n == 4 && ((s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90)))
        return 0;
    return n;
}

/* A JSON string. Bytes that are not UTF-8 come out as the code point of the same number
 * (U+0080..U+00FF), so the output is always valid JSON. */
static void json_str(const char *str)
{
    const unsigned char *s = (const unsigned char *)(str ? str : "");
    putchar('"');
    while (*s) {
        size_t n = utf8_len(s);
        if (*s == '"' || *s == '\\') {
            printf("\\%c", *s);
        } else if (*s == '\n') {
            printf("\\n");
        } else if (*s == '\t') {
            printf("\\t");
        } else if (*s < 0x20 || *s == 0x7f || n == 0) {
            printf("\\u%04x", *s);
            n = 1;
        } else {
            fwrite(s, 1, n, stdout);
        }
        s += n ? n : 1;
    }
    putchar('"');
}

static void print_json(const char *name, const snapshot *s, bool first)
{
    printf("%s\n  {\"name\": ", first ? "" : ",");
    json_str(name);
    printf(", \"kind\": \"%s\", \"redis_type\": ", s->kind);
    json_str(s->type);
    printf(", \"ttl_ms\": %lld,\n   \"holders\": [", s->ttl_ms);
    for (size_t i = 0; i < s->n_holders; i++) {
        printf("%s{\"owner\": ", i ? ", " : "");
        json_str(s->holders[i].owner);
        if (s->holders[i].holds_ok)
            printf(", \"holds\": %lld}", s->holders[i].holds);
        else
            printf(", \"holds\": null}");
    }
    printf("],\n   \"queue\": [");
    for (size_t i = 0; i < s->n_queue; i++) {
        const waiter *w = &s->queue[i];
        printf("%s{\"owner\": ", i ? ", " : "");
        json_str(w->owner);
        if (w->has_deadline)
            printf(", \"deadline_ms\": %lld, \"remaining_ms\": %lld}", w->deadline,
                   w->deadline - s->now_ms);
        else
            printf(", \"deadline_ms\": null, \"remaining_ms\": null}");
    }
    printf("],\n   \"value\": ");
    if (s->has_value && strcmp(s->type, "string") == 0)
        printf("%lld", s->value);
    else
        printf("null");
    printf(", \"fencing_token\": ");
    if (s->has_token)
        printf("%lld", s->token);
    else
        printf("null");
    printf(", \"server_time_ms\": %lld,\n   \"subscribers\": {\"lock\": %lld, \"semaphore\": "
           "%lld, \"latch\": %lld}}",
           s->now_ms, s->subs_lock, s->subs_semaphore, s->subs_latch);
}

/* ------------------------------- --watch ---------------------------------------------- */

/* Reads and prints every name each interval until killed (issue 15). A terminal gets its
 * screen redrawn in place (cursor home, clear); anything else gets one block per interval
 * after a "-- time" line: plain text that a log or a pipe can take. */
static int watch(redisContext *r, const char **names, size_t n, int64_t interval_ms)
{
    bool tty = isatty(STDOUT_FILENO) == 1;
    snapshot *snaps = calloc(n, sizeof *snaps);
    if (!snaps)
        return EXIT_FAILED;
    int rc = 0;
    while (!rc) {
        for (size_t i = 0; !rc && i < n; i++)
            rc = read_name(r, names[i], &snaps[i]);
        if (!rc) {
            char when[32];
            time_t now = time(NULL);
            struct tm tm;
            strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", localtime_r(&now, &tm));
            if (tty)
                printf("\033[H\033[2Jbaton status, every %lld ms, at %s (Ctrl-C stops)\n\n",
                       (long long)interval_ms, when);
            else
                printf("-- %s\n", when);
            for (size_t i = 0; i < n; i++)
                print_text(names[i], &snaps[i]);
            fflush(stdout);
        }
        for (size_t i = 0; i < n; i++)
            snapshot_free(&snaps[i]);
        memset(snaps, 0, n * sizeof *snaps);
        struct timespec ts = {(time_t)(interval_ms / 1000), (long)(interval_ms % 1000) * 1000000};
        while (!rc && nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
    free(snaps);
    return rc;
}

/* ------------------------------- the command ------------------------------------------ */

int cli_cmd_status(cli_global *g, int argc, char **argv)
{
    const char **names = calloc((size_t)argc + 1, sizeof *names);
    if (!names)
        return EXIT_FAILED;
    size_t n = 0;
    bool json = false, watching = false;
    int64_t interval_ms = 1000;
    int rc = 0;
    for (int i = 0; i < argc && !rc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--watch") == 0) {
            watching = true;
        } else if (strcmp(a, "--interval") == 0) {
            if (i + 1 >= argc || !cli_parse_duration(argv[++i], &interval_ms) || interval_ms < 10)
                rc = cli_usage_error("status", "--interval needs a duration of at least 10ms");
        } else if (strcmp(a, "--json") == 0) {
            json = true;
        } else if (strcmp(a, "--url") == 0) {
            if (i + 1 >= argc)
                rc = cli_usage_error("status", "--url needs a value");
            else
                rc = cli_set_url(g, argv[++i]);
        } else if (strncmp(a, "--url=", 6) == 0) {
            rc = cli_set_url(g, a + 6);
        } else if (a[0] == '-' && a[1] != '\0') {
            rc = cli_usage_error("status", "unknown option '%s'", a);
        } else {
            names[n++] = a;
        }
    }
    if (!rc && n == 0)
        rc = cli_usage_error("status", "no NAME");
    if (!rc && watching && json)
        rc = cli_usage_error("status", "--watch prints text: it does not take --json");
    for (size_t i = 0; !rc && i < n; i++)
        if (strlen(names[i]) > BATON_MAX_NAME_LEN)
            rc = cli_usage_error("status", "a NAME is longer than %d bytes", BATON_MAX_NAME_LEN);
    if (rc) {
        free(names);
        return rc;
    }

    /* The client checks the URL, the server and the credentials, with the library's
     * messages and codes; the reads go through a connection of our own. */
    baton_client *c = NULL;
    rc = cli_open_client(g, &c);
    redisContext *r = NULL;
    if (!rc) {
        r = cli_redis_connect(g);
        if (!r)
            rc = EXIT_CONN;
    }
    if (!rc && watching) {
        rc = watch(r, names, n, interval_ms); /* returns only when a read failed */
        rc = rc ? rc : EXIT_FAILED;
    }
    /* Read every name first, so that a failure half-way prints no half of a JSON text. */
    snapshot *snaps = rc ? NULL : calloc(n, sizeof *snaps);
    if (!snaps && !rc)
        rc = EXIT_FAILED;
    for (size_t i = 0; !rc && i < n; i++)
        rc = read_name(r, names[i], &snaps[i]);
    if (!rc) {
        if (json)
            printf("[");
        for (size_t i = 0; i < n; i++) {
            if (json)
                print_json(names[i], &snaps[i], i == 0);
            else
                print_text(names[i], &snaps[i]);
        }
        if (json)
            printf("\n]\n");
    }
    for (size_t i = 0; snaps && i < n; i++)
        snapshot_free(&snaps[i]);
    free(snaps);
    if (r)
        redisFree(r);
    baton_client_close(c);
    free(names);
    return rc;
}
