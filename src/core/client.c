/*
 * The client: configuration, the pool of command connections, and the two ways to talk to
 * the server that everything else uses, a plain command and a script run by SHA1.
 *
 * Connections are blocking hiredis contexts with a send/receive timeout. A connection that
 * fails in any way (timeout, reset, protocol error) is closed and never reused; the next
 * command connects a fresh one, which is the whole of "reconnect" for commands. Commands
 * are not retried here: scripts that change state are not idempotent, and the callers that
 * can retry safely do so themselves.
 */
#define _GNU_SOURCE
#include "client.h"

#include <hiredis/hiredis.h>

#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define DEFAULT_URL "redis://127.0.0.1:6379"
#define DEFAULT_CONNECT_TIMEOUT_MS 5000
#define DEFAULT_COMMAND_TIMEOUT_MS 5000
#define DEFAULT_WATCHDOG_MS 30000
#define DEFAULT_FAIR_WAIT_MS 5000
#define DEFAULT_RECHECK_MS 1000
#define DEFAULT_POOL_SIZE 16
#define MIN_WATCHDOG_MS 30 /* renewal every 10 ms: tests go this low, nobody should */

void baton_options_init(baton_options *opts)
{
    if (opts)
        memset(opts, 0, sizeof *opts);
}

const baton__config *baton__client_config(const baton_client *c)
{
    return &c->cfg;
}

int64_t baton__watchdog_lease(const baton_client *c)
{
    return c->cfg.watchdog_ms;
}

const char *baton_client_id(const baton_client *c)
{
    return c ? c->id : "";
}

void baton__owner(const baton_client *c, char *buf, size_t len)
{
    snprintf(buf, len, "%s:%llu", c->id, (unsigned long long)baton__thread_id());
}

static void make_uuid(char out[40])
{
    unsigned char b[16];
    size_t got = 0;
    while (got < sizeof b) {
        ssize_t n = getrandom(b + got, sizeof b - got, 0);
        if (n > 0)
            got += (size_t)n;
        else if (errno != EINTR)
            abort(); /* no entropy on Linux >= 3.17 is not a condition to recover from */
    }
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    snprintf(out, 40, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
}

static struct timeval tv_ms(int64_t ms)
{
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)((ms % 1000) * 1000)};
    return tv;
}

/* ------------------------------- errors from replies ---------------------------------- */

int baton__reply_error(baton_client *c, const redisReply *r)
{
    if (!r || r->type != REDIS_REPLY_ERROR)
        return BATON_OK;
    const char *s = r->str ? r->str : "";
    int code = BATON_EPROTO;
    if (strncmp(s, "NOAUTH", 6) == 0 || strncmp(s, "WRONGPASS", 9) == 0 ||
        strncmp(s, "NOPERM", 6) == 0)
        code = BATON_EAUTH;
    else if (strncmp(s, "OOM", 3) == 0)
        code = BATON_ENOMEM;
    return baton__fail(c, code, "server replied: %s", s);
}

int baton__conn_error(baton_client *c, const redisContext *ctx, const char *what)
{
    if (!ctx)
        return baton__fail(c, BATON_ENOMEM, "%s: out of memory", what);
    const char *msg = ctx->errstr[0] ? ctx->errstr : "connection closed";
    if (ctx->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK))
        msg = "no reply within the timeout";
    return baton__fail(c, BATON_ECONN, "%s: %s", what, msg);
}

/* ------------------------------- connections ------------------------------------------ */

static void describe_endpoint(const baton__endpoint *ep, char *buf, size_t len)
{
    if (ep->path)
        snprintf(buf, len, "unix:%s", ep->path);
    else
        snprintf(buf, len, "%s:%d", ep->host, ep->port);
}

/* Copies the value of "field:" in an INFO reply into buf ("" when absent or too long). */
static void info_field(const char *info, const char *field, char *buf, size_t len)
{
    buf[0] = '\0';
    size_t flen = strlen(field);
    for (const char *p = info; (p = strstr(p, field)) != NULL; p += flen) {
        if ((p != info && p[-1] != '\n') || p[flen] != ':')
            continue; /* a longer field that ends with this name, or a value */
        p += flen + 1;
        size_t n = strcspn(p, "\r\n");
        if (n < len) {
            memcpy(buf, p, n);
            buf[n] = '\0';
        }
        return;
    }
}

/* What an eviction policy does to baton's keys, or NULL when it evicts nothing. */
static const char *eviction_risk(const char *policy)
{
    if (!policy[0] || strcmp(policy, "noeviction") == 0)
        return NULL;
    if (strncmp(policy, "volatile-", 9) == 0)
        return "it may evict keys with a TTL, that is held locks and fair-lock queues, and "
               "their holders learn it only at their next renewal or release";
    return "it may evict any key: held locks, semaphore and latch counts, and the fencing "
           "token counters, whose tokens then repeat";
}

/* Records the server's run_id, and warns once about an eviction policy. A new run_id on a
 * later connection means the server restarted and may have lost every key: the epoch rises
 * and every hold is reported lost. A server that refuses INFO (an ACL without it) is simply
 * not watched. */
static void note_server(baton_client *c, redisContext *ctx)
{
    redisReply *r = redisCommand(ctx, "INFO");
    if (!r)
        return;
    char id[48] = "", policy[32] = "";
    if (r->type == REDIS_REPLY_STRING) {
        info_field(r->str, "run_id", id, sizeof id);
        info_field(r->str, "maxmemory_policy", policy, sizeof policy);
    }
    freeReplyObject(r);
    const char *risk = eviction_risk(policy);
    if (!id[0])
        return;
    bool changed = false;
    baton__mutex_lock(&c->run_mu);
    if (strcmp(c->run_id, id) != 0) {
        changed = c->run_id[0] != '\0';
        memcpy(c->run_id, id, sizeof id);
        c->epoch++;
    }
    if (risk && !c->warning[0])
        snprintf(c->warning, sizeof c->warning,
                 "warning: the server's maxmemory-policy is %s: %s; baton's exclusion and "
                 "fencing guarantees need noeviction",
                 policy, risk);
    baton__mutex_unlock(&c->run_mu);
    if (changed)
        baton__stat_epoch_changed(c);
    if (changed)
        baton__watchdog_epoch_changed(c);
}

uint64_t baton_client_epoch(const baton_client *c)
{
    if (!c)
        return 0;
    baton__mutex_lock((pthread_mutex_t *)&c->run_mu);
    uint64_t e = c->epoch;
    baton__mutex_unlock((pthread_mutex_t *)&c->run_mu);
    return e;
}

/* Runs one handshake command; any error reply is mapped with `code_for_error`. */
static int handshake(baton_client *c, redisContext *ctx, int code_for_error, const char *what,
                     int argc, const char **argv)
{
    redisReply *r = redisCommandArgv(ctx, argc, argv, NULL);
    if (!r)
        return baton__conn_error(c, ctx, what);
    int rc = BATON_OK;
    if (r->type == REDIS_REPLY_ERROR) {
        rc = baton__reply_error(c, r);
        if (rc != BATON_EAUTH)
            rc = code_for_error;
        baton__fail(c, rc, "%s refused: %s", what, r->str);
    }
    freeReplyObject(r);
    return rc;
}

int baton__connect(baton_client *c, redisContext **out)
{
    const baton__endpoint *ep = &c->cfg.ep;
    char where[300];
    describe_endpoint(ep, where, sizeof where);
    struct timeval ctv = tv_ms(c->cfg.connect_timeout_ms);
    redisContext *ctx = ep->path ? redisConnectUnixWithTimeout(ep->path, ctv)
                                 : redisConnectWithTimeout(ep->host, ep->port, ctv);
    *out = NULL;
    if (!ctx)
        return baton__fail(c, BATON_ENOMEM, "connect to %s: out of memory", where);
    if (ctx->err) {
        int rc = baton__fail(c, BATON_ECONN, "connect to %s: %s", where, ctx->errstr);
        redisFree(ctx);
        return rc;
    }
    redisSetTimeout(ctx, ctv);
    if (!ep->path)
        redisEnableKeepAlive(ctx);

    int rc = BATON_OK;
    if (ep->password) {
        const char *argv[3] = {"AUTH", ep->username, ep->password};
        if (ep->username)
            rc = handshake(c, ctx, BATON_EAUTH, "AUTH", 3, argv);
        else {
            argv[1] = ep->password;
            rc = handshake(c, ctx, BATON_EAUTH, "AUTH", 2, argv);
        }
    }
    if (rc == BATON_OK && ep->db != 0) {
        char db[16];
        snprintf(db, sizeof db, "%d", ep->db);
        const char *argv[2] = {"SELECT", db};
        rc = handshake(c, ctx, BATON_EPROTO, "SELECT", 2, argv);
    }
    if (rc == BATON_OK) {
        /* A server that wants a password answers NOAUTH here, before any real work. */
        const char *argv[1] = {"PING"};
        rc = handshake(c, ctx, BATON_EPROTO, "PING", 1, argv);
    }
    if (rc == BATON_OK)
        note_server(c, ctx);
    if (rc != BATON_OK) {
        redisFree(ctx);
        return rc;
    }
    redisSetTimeout(ctx, tv_ms(c->cfg.command_timeout_ms));
    *out = ctx;
    return BATON_OK;
}

/* Whether an idle command connection can still be used. Nothing ever arrives on one
 * unasked, so a readable socket means the server closed it (its idle timeout, CLIENT KILL,
 * a restart, a load balancer) or it broke: it would fail the next command, or worse, take
 * the command and lose its reply. */
static bool idle_usable(const redisContext *ctx)
{
    struct pollfd p = {ctx->fd, POLLIN, 0};
    int n;
    while ((n = poll(&p, 1, 0)) < 0 && errno == EINTR) {
    }
    return n == 0;
}

static void free_conn(baton__conn *conn)
{
    redisFree(conn->ctx);
    free(conn);
}

int baton__conn_get(baton_client *c, baton__conn **out)
{
    baton__mutex_lock(&c->pool_mu);
    for (;;) {
        while (c->idle) {
            baton__conn *conn = c->idle;
            c->idle = conn->next;
            conn->next = NULL;
            if (idle_usable(conn->ctx)) {
                baton__mutex_unlock(&c->pool_mu);
                conn->reused = true;
                *out = conn;
                return BATON_OK;
            }
            c->open_conns--; /* closed by the server while it waited: replaced below */
            free_conn(conn);
        }
        if (c->open_conns < c->cfg.pool_size)
            break;
        /* Every connection is busy; each is bounded by the command timeout. */
        baton__cond_wait_until(&c->pool_cond, &c->pool_mu, BATON__NO_DEADLINE);
    }
    c->open_conns++;
    baton__mutex_unlock(&c->pool_mu);

    baton__conn *conn = calloc(1, sizeof *conn);
    int rc = conn ? baton__connect(c, &conn->ctx) : BATON_ENOMEM;
    if (rc != BATON_OK) {
        free(conn);
        baton__mutex_lock(&c->pool_mu);
        c->open_conns--;
        baton__cond_signal(&c->pool_cond);
        baton__mutex_unlock(&c->pool_mu);
        return rc;
    }
    baton__stat_inc(c, BATON__ST_CONNECTS);
    *out = conn;
    return BATON_OK;
}

void baton__conn_put(baton_client *c, baton__conn *conn, bool broken)
{
    baton__conn *stale = NULL;
    baton__mutex_lock(&c->pool_mu);
    if (broken || conn->ctx->err) {
        /* Whatever broke this connection (a restart, a cut, a proxy that dropped its
         * connections) may have broken the idle ones too, in a way a look at their sockets
         * cannot see yet: they go as well, so that the retry that follows runs on a new
         * connection, never on one the same fault hit. */
        stale = c->idle;
        c->idle = NULL;
        for (baton__conn *s = stale; s; s = s->next)
            c->open_conns--;
        c->open_conns--;
        baton__cond_broadcast(&c->pool_cond);
    } else {
        conn->next = c->idle;
        c->idle = conn;
        baton__cond_signal(&c->pool_cond);
        conn = NULL;
    }
    baton__mutex_unlock(&c->pool_mu);
    if (conn)
        free_conn(conn);
    while (stale) {
        baton__conn *next = stale->next;
        free_conn(stale);
        stale = next;
    }
}

redisContext *baton__conn_ctx(baton__conn *conn)
{
    return conn->ctx;
}

/* ------------------------------- commands --------------------------------------------- */

/* Runs a command on a borrowed connection; maps a broken connection. *sent (may be NULL)
 * tells whether every byte of the command was written: a command that failed before that
 * never reached the server whole, so it never ran, whatever it was. */
static int run_on(baton_client *c, baton__conn *conn, int argc, const char **argv,
                  const size_t *lens, redisReply **reply, bool *sent)
{
    redisContext *ctx = conn->ctx;
    if (sent)
        *sent = false;
    baton__count_round_trip(c);
    if (redisAppendCommandArgv(ctx, argc, argv, lens) != REDIS_OK)
        return baton__conn_error(c, ctx, argv[0]);
    int done = 0;
    while (!done)
        if (redisBufferWrite(ctx, &done) != REDIS_OK)
            return baton__conn_error(c, ctx, argv[0]);
    if (sent)
        *sent = true;
    void *r = NULL;
    if (redisGetReply(ctx, &r) != REDIS_OK || !r)
        return baton__conn_error(c, ctx, argv[0]);
    *reply = r;
    return BATON_OK;
}

/* One command on a pooled connection; error replies become codes (detail recorded). */
static int command(baton_client *c, int argc, const char **argv, redisReply **reply)
{
    baton__conn *conn;
    *reply = NULL;
    int rc = baton__conn_get(c, &conn);
    if (rc != BATON_OK)
        return rc;
    redisReply *r = NULL;
    rc = run_on(c, conn, argc, argv, NULL, &r, NULL);
    baton__conn_put(c, conn, rc != BATON_OK);
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

int baton__query_argv(baton_client *c, int argc, const char **argv, redisReply **reply)
{
    int rc = command(c, argc, argv, reply);
    if (rc == BATON_ECONN) /* once more: the broken connection took the idle ones with it,
                              so this runs on a new connection */
        rc = command(c, argc, argv, reply);
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

int baton__script_append(redisContext *ctx, const baton__script *s, int nkeys, const char **keys,
                         int nargs, const char **args)
{
    script_argv a;
    if (build_argv(&a, "EVALSHA", nkeys, keys, nargs, args) != BATON_OK)
        return BATON_ENOMEM;
    a.argv[1] = s->sha1;
    int rc =
        redisAppendCommandArgv(ctx, a.argc, a.argv, NULL) == REDIS_OK ? BATON_OK : BATON_ENOMEM;
    free_argv(&a);
    return rc;
}

int baton__script_run(baton_client *c, const baton__script *s, int nkeys, const char **keys,
                      int nargs, const char **args, redisReply **reply)
{
    return baton__script_call(c, s, nkeys, keys, nargs, args, reply, NULL);
}

/* One attempt at a script: EVALSHA on a pooled connection, and EVAL with the body on the
 * same connection if the server answers NOSCRIPT. *sent: a command that could run the
 * script was written whole (its reply may then be lost after it ran); *reused: the
 * connection came from the pool rather than a new connect. */
static int script_attempt(baton_client *c, const baton__script *s, script_argv *a, redisReply **out,
                          bool *sent, bool *reused)
{
    *sent = *reused = false;
    baton__conn *conn;
    int rc = baton__conn_get(c, &conn);
    if (rc != BATON_OK)
        return rc;
    *reused = conn->reused;
    a->argv[0] = "EVALSHA";
    a->argv[1] = s->sha1;
    redisReply *r = NULL;
    rc = run_on(c, conn, a->argc, a->argv, NULL, &r, sent);
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
            rc = run_on(c, conn, a->argc, a->argv, lens, &r, sent);
            free(lens);
        }
    }
    baton__conn_put(c, conn, rc != BATON_OK && rc != BATON_ENOMEM);
    *out = r;
    return rc;
}

int baton__script_call(baton_client *c, const baton__script *s, int nkeys, const char **keys,
                       int nargs, const char **args, redisReply **reply, bool *maybe_ran)
{
    *reply = NULL;
    if (maybe_ran)
        *maybe_ran = false;
    script_argv a;
    if (build_argv(&a, "EVALSHA", nkeys, keys, nargs, args) != BATON_OK)
        return baton__fail(c, BATON_ENOMEM, "out of memory");
    redisReply *r = NULL;
    bool sent, reused;
    int rc = script_attempt(c, s, &a, &r, &sent, &reused);
    if (rc == BATON_ECONN && !sent && reused)
        /* A pooled connection failed before the script was written whole: it never ran,
         * so it goes again, whatever it does, on a new connection (the broken one took the
         * idle ones with it). */
        rc = script_attempt(c, s, &a, &r, &sent, &reused);
    if (maybe_ran)
        *maybe_ran = sent; /* a lost reply after the script was sent leaves it unknown */
    free_argv(&a);
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

/* ------------------------------- open and close --------------------------------------- */

static int check_timeout(int64_t v, const char *what, char *err, size_t errlen)
{
    if (v < 0 || v > BATON_MAX_DURATION_MS) {
        snprintf(err, errlen, "%s must be 0 (default) or a positive number of ms, up to %lld", what,
                 (long long)BATON_MAX_DURATION_MS);
        return BATON_EINVAL;
    }
    return BATON_OK;
}

static int configure(baton__config *cfg, const baton_options *o, char *err, size_t errlen)
{
    baton_options zero;
    if (!o) {
        baton_options_init(&zero);
        o = &zero;
    }
    if (check_timeout(o->connect_timeout_ms, "connect_timeout_ms", err, errlen) ||
        check_timeout(o->command_timeout_ms, "command_timeout_ms", err, errlen) ||
        check_timeout(o->watchdog_ms, "watchdog_ms", err, errlen) ||
        check_timeout(o->fair_wait_ms, "fair_wait_ms", err, errlen) ||
        check_timeout(o->recheck_ms, "recheck_ms", err, errlen) ||
        check_timeout(o->slow_acquire_ms, "slow_acquire_ms", err, errlen))
        return BATON_EINVAL;
    if (o->watchdog_ms != 0 && o->watchdog_ms < MIN_WATCHDOG_MS) {
        snprintf(err, errlen, "watchdog_ms must be at least %d", MIN_WATCHDOG_MS);
        return BATON_EINVAL;
    }
    if (o->tls_ca || o->tls_cert || o->tls_key || o->tls_sni || o->tls_insecure_skip_verify) {
        /* Connecting in plain text to a server the caller meant to reach over TLS would be
         * worse than refusing. */
        snprintf(err, errlen,
                 "TLS options are set, but this build of baton does not speak TLS "
                 "yet (rediss:// is not supported)");
        return BATON_ENOTSUP;
    }
    if (o->pool_size < 0 || o->pool_size > 1024) {
        snprintf(err, errlen, "pool_size must be 0 (default) to 1024");
        return BATON_EINVAL;
    }
    int rc = baton__url_parse(o->url ? o->url : DEFAULT_URL, &cfg->ep, err, errlen);
    if (rc != BATON_OK)
        return rc;
    if (o->username) {
        free(cfg->ep.username);
        cfg->ep.username = baton__strdup(o->username);
        if (!cfg->ep.username)
            return BATON_ENOMEM;
    }
    if (o->password) {
        free(cfg->ep.password);
        cfg->ep.password = baton__strdup(o->password);
        if (!cfg->ep.password)
            return BATON_ENOMEM;
    }
    cfg->connect_timeout_ms =
        o->connect_timeout_ms ? o->connect_timeout_ms : DEFAULT_CONNECT_TIMEOUT_MS;
    cfg->command_timeout_ms =
        o->command_timeout_ms ? o->command_timeout_ms : DEFAULT_COMMAND_TIMEOUT_MS;
    cfg->watchdog_ms = o->watchdog_ms ? o->watchdog_ms : DEFAULT_WATCHDOG_MS;
    cfg->fair_wait_ms = o->fair_wait_ms ? o->fair_wait_ms : DEFAULT_FAIR_WAIT_MS;
    cfg->recheck_ms = o->recheck_ms ? o->recheck_ms : DEFAULT_RECHECK_MS;
    cfg->pool_size = o->pool_size ? o->pool_size : DEFAULT_POOL_SIZE;
    return BATON_OK;
}

static void free_client(baton_client *c, bool forked)
{
    while (c->idle) {
        baton__conn *conn = c->idle;
        c->idle = conn->next;
        redisFree(conn->ctx);
        free(conn);
    }
    baton__endpoint_free(&c->cfg.ep);
    if (!forked) {
        baton__mutex_destroy(&c->pool_mu);
        baton__cond_destroy(&c->pool_cond);
        baton__mutex_destroy(&c->lazy_mu);
        baton__mutex_destroy(&c->run_mu);
    }
    free(c);
}

int baton_client_open(const baton_options *opts, baton_client **out)
{
    static atomic_uint_fast64_t serials = 1;
    char err[256] = "";
    baton__set_open_errmsg("");
    if (!out) {
        baton__set_open_errmsg("out is NULL");
        return BATON_EINVAL;
    }
    *out = NULL;
    baton_client *c = calloc(1, sizeof *c);
    if (!c) {
        baton__set_open_errmsg("out of memory");
        return BATON_ENOMEM;
    }
    int rc = configure(&c->cfg, opts, err, sizeof err);
    if (rc != BATON_OK) {
        baton__endpoint_free(&c->cfg.ep);
        free(c);
        baton__set_open_errmsg(rc == BATON_ENOMEM ? "out of memory" : err);
        return rc;
    }
    c->serial = atomic_fetch_add(&serials, 1);
    c->generation = baton__process_generation();
    c->pid = (long)getpid();
    make_uuid(c->id);
    baton__stats_configure(c, opts);
    baton__mutex_init(&c->pool_mu);
    baton__cond_init(&c->pool_cond);
    baton__mutex_init(&c->lazy_mu);
    baton__mutex_init(&c->run_mu);

    /* One connection now, so a wrong address or password is reported by open. */
    baton__conn *conn;
    rc = baton__conn_get(c, &conn);
    if (rc != BATON_OK) {
        baton__set_open_errmsg(baton_client_errmsg(c));
        baton__forget_errors(c);
        free_client(c, false);
        return rc;
    }
    baton__conn_put(c, conn, false);
    if (c->warning[0]) /* told once, as the detail of the open that found it */
        baton__fail(c, BATON_OK, "%s", c->warning);
    *out = c;
    return BATON_OK;
}

int baton_client_open_url(const char *url, baton_client **out)
{
    baton_options o;
    baton_options_init(&o);
    o.url = url;
    if (!url) {
        baton__set_open_errmsg("url is NULL");
        if (out)
            *out = NULL;
        return BATON_EINVAL;
    }
    return baton_client_open(&o, out);
}

void baton_client_close(baton_client *c)
{
    if (!c)
        return;
    bool forked = baton__client_forked(c);
    if (c->wd)
        baton__watchdog_free(c->wd, forked);
    if (c->disp)
        baton__dispatcher_free(c->disp, forked);
    baton__forget_errors(c);
    free_client(c, forked);
}

const baton__script *baton__script_find(const char *name)
{
    for (const baton__script *s = baton__scripts(); s->name; s++)
        if (strcmp(s->name, name) == 0)
            return s;
    return NULL;
}
