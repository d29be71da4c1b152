/*
 * The client, at the top of the core: its configuration (options checked, defaults
 * applied), its identity (uuid, origin), and its open and close, which make and end every
 * part of it below: the engine (src/engine), the pools and the topology (src/net), the
 * dispatcher and the watchdog once made. Commands and scripts run through run.c.
 */
#define _GNU_SOURCE
#include "internal.h"

#include "client_fields.h"
#include "conn.h"
#include "slots.h"
#include "topology.h"

#include "evloop.h"

#include <errno.h>
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
/* The plain lock's starvation bound (src/lock/lock.c). s2, 8 workers, no think time
 * (bench/RESULTS.md, issue 30's second round, once a reserved unlock woke only the thread
 * it was for): 5 ms gave a max wait of 14-20 ms and a p99 of 9.5-10.9 ms (100 ms: 101-155
 * ms max) at 1.00-1.13x the rate with threads and 0.89-0.90x with processes; 3 ms was no
 * better. The price: 50 processes on one lock wait longer at the tail (docs/ARCHITECTURE.md). */
#define DEFAULT_STARVE_MS 5
#define DEFAULT_POOL_SIZE 16
#define DEFAULT_KEEPALIVE_MS 15000
#define MIN_WATCHDOG_MS 30 /* renewal every 10 ms: tests go this low, nobody should */

void baton_options_init(baton_options *opts)
{
    if (opts)
        memset(opts, 0, sizeof *opts);
}

void baton_handle_options_init(baton_handle_options *o)
{
    if (o) {
        memset(o, 0, sizeof *o);
        o->size = sizeof *o;
    }
}

/* The first version's size: size, watchdog_ms, fair_wait_ms, recheck_ms. */
#define HANDLE_OPTIONS_V1 (offsetof(baton_handle_options, recheck_ms) + sizeof(int64_t))

int baton__handle_cfg_read(baton_client *c, const char *what, const char *name,
                           const baton_handle_options *o, unsigned reads, baton__handle_cfg *out)
{
    out->watchdog_ms = c->cfg.watchdog_ms;
    out->fair_wait_ms = c->cfg.fair_wait_ms;
    out->recheck_ms = c->cfg.recheck_ms;
    if (!o)
        return BATON_OK;
    if (o->size < HANDLE_OPTIONS_V1)
        return baton__fail(c, BATON_EINVAL,
                           "%s %s: options size %zu: at least %zu; call "
                           "baton_handle_options_init first",
                           what, name, o->size, (size_t)HANDLE_OPTIONS_V1);
    /* A caller built against a later header: what this library does not know must be 0. */
    for (size_t i = sizeof *o; i < o->size; i++)
        if (((const unsigned char *)o)[i] != 0)
            return baton__fail(c, BATON_EINVAL,
                               "%s %s: options size %zu: this library knows %zu bytes, and byte "
                               "%zu is set (an option of a later version)",
                               what, name, o->size, sizeof *o, i);
    static const struct {
        const char *field;
        size_t offset;
        unsigned bit;
        int64_t least;
    } fields[] = {
        {"watchdog_ms", offsetof(baton_handle_options, watchdog_ms), BATON__OPT_WATCHDOG,
         MIN_WATCHDOG_MS},
        {"fair_wait_ms", offsetof(baton_handle_options, fair_wait_ms), BATON__OPT_FAIR_WAIT, 1},
        {"recheck_ms", offsetof(baton_handle_options, recheck_ms), BATON__OPT_RECHECK, 1},
    };
    int64_t *dst[3] = {&out->watchdog_ms, &out->fair_wait_ms, &out->recheck_ms};
    for (size_t i = 0; i < 3; i++) {
        int64_t v;
        memcpy(&v, (const char *)o + fields[i].offset, sizeof v);
        if (v == 0)
            continue;
        if (!(reads & fields[i].bit))
            return baton__fail(c, BATON_EINVAL,
                               "%s %s: %s %lld: means nothing to the %s kind; leave it 0", what,
                               name, fields[i].field, (long long)v, what);
        if (v < fields[i].least || v > BATON_MAX_DURATION_MS)
            return baton__fail(c, BATON_EINVAL,
                               "%s %s: %s %lld: use 0 (the client's) or %lld..%lld ms", what, name,
                               fields[i].field, (long long)v, (long long)fields[i].least,
                               (long long)BATON_MAX_DURATION_MS);
        *dst[i] = v;
    }
    return BATON_OK;
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

const char *baton__client_origin(const baton_client *c)
{
    return c->origin;
}

/* "host:pid"; a host that cannot be named is "?" (the pid still tells the process). */
static void make_origin(baton_client *c)
{
    char host[BATON__ORIGIN_LEN - 24] = ""; /* 24: room for ":", a 64-bit pid and NUL */
    if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0')
        snprintf(host, sizeof host, "?");
    host[sizeof host - 1] = '\0';
    snprintf(c->origin, sizeof c->origin, "%s:%ld", host, c->pid);
}

static void make_uuid(char out[40])
{
    unsigned char b[16];
    if (baton__random_bytes(b, sizeof b) < sizeof b)
        abort(); /* no entropy on Linux >= 3.17 is not a condition to recover from */
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    snprintf(out, 40, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
}

int baton__check_open_name(baton_client *c, const char *name, const char *what)
{
    int rc = baton__client_enter(c);
    if (rc != BATON_OK)
        return rc;
    const char *sp = what[0] ? " " : "";
    if (baton__check_name(name) != BATON_OK)
        return baton__fail(c, BATON_EINVAL, "%s%sname must be 1 to %d bytes", what, sp,
                           BATON_MAX_NAME_LEN);
    if (baton__topology_cluster(c) && baton__check_cluster_name(name) != BATON_OK)
        return baton__fail(c, BATON_EINVAL,
                           "%s%sname has a '{' that opens no hash tag (no '}' after it, or "
                           "\"{}\"), or a '}' with no '{': on a Redis Cluster its keys would land "
                           "in different slots",
                           what, sp);
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
        check_timeout(o->slow_acquire_ms, "slow_acquire_ms", err, errlen) ||
        check_timeout(o->keepalive_ms, "keepalive_ms", err, errlen) ||
        check_timeout(o->sync_timeout_ms, "sync_timeout_ms", err, errlen) ||
        (o->starve_ms != BATON_STARVE_NEVER &&
         check_timeout(o->starve_ms, "starve_ms (or BATON_STARVE_NEVER)", err, errlen)))
        return BATON_EINVAL;
    if (o->watchdog_ms != 0 && o->watchdog_ms < MIN_WATCHDOG_MS) {
        snprintf(err, errlen, "watchdog_ms must be at least %d", MIN_WATCHDOG_MS);
        return BATON_EINVAL;
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
    if ((o->sentinel_username || o->sentinel_password) && cfg->ep.kind != BATON__EP_SENTINEL) {
        snprintf(err, errlen, "sentinel credentials are set, but the URL is not redis+sentinel://");
        return BATON_EINVAL;
    }
    if ((o->sentinel_username && !(cfg->sentinel_username = baton__strdup(o->sentinel_username))) ||
        (o->sentinel_password && !(cfg->sentinel_password = baton__strdup(o->sentinel_password))))
        return BATON_ENOMEM;
    cfg->connect_timeout_ms =
        o->connect_timeout_ms ? o->connect_timeout_ms : DEFAULT_CONNECT_TIMEOUT_MS;
    cfg->command_timeout_ms =
        o->command_timeout_ms ? o->command_timeout_ms : DEFAULT_COMMAND_TIMEOUT_MS;
    cfg->watchdog_ms = o->watchdog_ms ? o->watchdog_ms : DEFAULT_WATCHDOG_MS;
    cfg->fair_wait_ms = o->fair_wait_ms ? o->fair_wait_ms : DEFAULT_FAIR_WAIT_MS;
    cfg->recheck_ms = o->recheck_ms ? o->recheck_ms : DEFAULT_RECHECK_MS;
    cfg->starve_ms = o->starve_ms ? o->starve_ms : DEFAULT_STARVE_MS;
    cfg->pool_size = o->pool_size ? o->pool_size : DEFAULT_POOL_SIZE;
    cfg->keepalive_ms = o->keepalive_ms ? o->keepalive_ms : DEFAULT_KEEPALIVE_MS;
    if (o->sync_replicas < 0 || o->sync_replicas > 100) {
        snprintf(err, errlen, "sync_replicas must be 0 (off) to 100");
        return BATON_EINVAL;
    }
    cfg->sync_replicas = o->sync_replicas;
    if (o->sync_aof != 0 && o->sync_aof != 1) {
        snprintf(err, errlen, "sync_aof must be 0 (off) or 1 (on)");
        return BATON_EINVAL;
    }
    cfg->sync_aof = o->sync_aof == 1;
    if (o->multiplex < -1 || o->multiplex > 1) {
        snprintf(err, errlen, "multiplex must be 0 (default: on), 1 (on) or -1 (off)");
        return BATON_EINVAL;
    }
    cfg->mux = o->multiplex != -1;
    if (o->client_name)
        snprintf(cfg->client_name, 129, "%s", o->client_name);
    cfg->sync_timeout_ms = o->sync_timeout_ms ? o->sync_timeout_ms : 1000;
    if (cfg->keepalive_ms < 1000) {
        snprintf(err, errlen, "keepalive_ms must be at least 1000");
        return BATON_EINVAL;
    }
    return BATON_OK;
}

static void free_config(baton__config *cfg)
{
    baton__endpoint_free(&cfg->ep);
    free(cfg->sentinel_username);
    if (cfg->sentinel_password) {
        memset(cfg->sentinel_password, 0, strlen(cfg->sentinel_password));
        free(cfg->sentinel_password);
    }
}

static void free_client(baton_client *c, bool forked)
{
    baton__evloop_free(c->ev, forked);
    baton__topology_free(c, forked);
    baton__pool_destroy(c->pool, forked);
    free(c->pool);
    baton__tls_free(c);
    free_config(&c->cfg);
    if (!forked) {
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
    if (rc == BATON_OK)
        rc = baton__tls_setup(c, opts, err, sizeof err);
    if (rc != BATON_OK) {
        baton__tls_free(c);
        free_config(&c->cfg);
        free(c);
        baton__set_open_errmsg(rc == BATON_ENOMEM ? "out of memory" : err);
        return rc;
    }
    c->serial = atomic_fetch_add(&serials, 1);
    c->generation = baton__process_generation();
    c->pid = (long)getpid();
    make_origin(c);
    if (!c->cfg.client_name[0])
        snprintf(c->cfg.client_name, 129, "baton:%s", c->origin);
    for (char *p = c->cfg.client_name; *p; p++) /* CLIENT SETNAME takes no space */
        if (*p <= ' ' || *p > '~')
            *p = '_';
    make_uuid(c->id);
    baton__stats_configure(c, opts);
    c->pool = malloc(sizeof *c->pool);
    if (!c->pool) {
        baton__tls_free(c);
        free_config(&c->cfg);
        free(c);
        baton__set_open_errmsg("out of memory");
        return BATON_ENOMEM;
    }
    baton__pool_init(c->pool, NULL, 0);
    baton__mutex_init(&c->lazy_mu);
    baton__mutex_init(&c->run_mu);
    /* Registered (live.c) before its first command: what runs from here on reads its detail
     * through baton_client_errmsg like any caller. */
    if (baton__live_add(c, BATON__MAGIC_CLIENT, c, NULL, "client", c->id) != BATON_OK) {
        baton__set_open_errmsg("out of memory");
        free_client(c, false);
        return BATON_ENOMEM;
    }
    c->ev = baton__evloop_new(
        c, &baton__dispatcher_subs); /* waits and asynchronous operations (async.c) */

    /* Under Sentinel, the master first (on a Cluster, the slot map); then one connection
     * now, so that a wrong address or password is reported by open. */
    baton__conn *conn = NULL;
    rc = c->ev ? baton__topology_start(c) : baton__fail(c, BATON_ENOMEM, "out of memory");
    if (rc == BATON_OK)
        rc = baton__conn_get(c, &conn);
    if (rc != BATON_OK) {
        baton__set_open_errmsg(baton__errmsg_of(c));
        baton__forget_errors(c);
        baton__live_remove(c, BATON__MAGIC_CLIENT);
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
    /* Closing from here on: a call on it is refused, a second close aborts, its detail can
     * still be read (by its own threads, until they have ended). */
    if (!baton__live_closing(c, BATON__MAGIC_CLIENT))
        baton__misuse_abort("baton_client_close", c, "client");
    bool forked = baton__client_forked(c);
    /* First, while everything still runs: waits in progress are cancelled (they leave
     * nothing behind), asynchronous operations complete, their callbacks run here. */
    baton__evloop_shut(c->ev, forked); /* freed last (free_client) */
    /* Then the handles the program left open: each lets go of what it had on the client
     * and answers BATON_ECLOSED from now on; its own close frees it. Then no call can
     * reach the client: it is unregistered before anything of it is freed. */
    baton__live_orphan_all(c);
    baton__topology_stop(c, forked); /* its events reach the two below; its map and pools
                                         stay until they have ended (free_client) */
    if (c->wd)
        c->wd_free(c->wd, forked);
    if (c->disp)
        baton__dispatcher_free(c->disp, forked);
    baton__forget_errors(c);
    baton__live_remove(c, BATON__MAGIC_CLIENT);
    free_client(c, forked);
}
