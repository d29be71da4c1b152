/*
 * Connections: the server handshake. Every new connection sends AUTH, SELECT, PING and
 * INFO (and ROLE under Sentinel) in one round trip; INFO tells the client the server's
 * run_id (a new one bumps the epoch and runs the epoch hooks), its eviction policy and its
 * version. Also where a new data connection goes (the topology's target or a node's pool).
 */
#define _GNU_SOURCE
#include "conn_impl.h"

#include "client_fields.h"
#include "sentinel.h"
#include "topology.h"

#include <hiredis/hiredis.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* ------------------------------- handshake -------------------------------------------- */

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
 * later connection to the same address means the server restarted and may have lost every
 * key: the epoch rises and BATON__EV_RESTART fires (the watchdog reports every hold lost).
 * A new run_id at another address (Sentinel moved the master) is the topology's event,
 * BATON__EV_MASTER, which it fired when it switched; here the epoch only counts it. A
 * server that refuses INFO (an ACL without it) is simply not watched. */
static void note_server(baton_client *c, baton__pool *pool, const redisReply *r, const char *where)
{
    char id[48] = "", policy[32] = "", version[32] = "";
    if (r->type == REDIS_REPLY_STRING) {
        info_field(r->str, "run_id", id, sizeof id);
        info_field(r->str, "maxmemory_policy", policy, sizeof policy);
        info_field(r->str, "redis_version", version, sizeof version);
    }
    const char *risk = eviction_risk(policy);
    if (version[0])
        atomic_store(&c->server_major, atoi(version));
    if (!id[0])
        return;
    bool restarted = false, node_restarted = false;
    baton__mutex_lock(&c->run_mu);
    if (pool && pool->host[0]) {
        /* A Cluster node: its own run_id. A restart loses (perhaps) the keys of its slots
         * only, so the holds are checked where they live rather than all reported lost. */
        if (strcmp(pool->run_id, id) != 0) {
            node_restarted = pool->run_id[0] != '\0';
            memcpy(pool->run_id, id, sizeof id);
            if (node_restarted)
                c->epoch++;
        }
    } else if (strcmp(c->run_id, id) != 0) {
        restarted = c->run_id[0] != '\0' && strcmp(c->run_where, where) == 0;
        memcpy(c->run_id, id, sizeof id);
        snprintf(c->run_where, sizeof c->run_where, "%s", where);
        c->epoch++;
    }
    if (risk && !c->warning[0])
        snprintf(c->warning, sizeof c->warning,
                 "warning: the server's maxmemory-policy is %s: %s; baton's exclusion and "
                 "fencing guarantees need noeviction",
                 policy, risk);
    baton__mutex_unlock(&c->run_mu);
    if (restarted) {
        baton__stat_epoch_changed(c);
        baton__event_fire(c, BATON__EV_RESTART);
    }
    if (node_restarted) {
        baton__log(c, BATON_LOG_WARN, "cluster node %s restarted: every hold is checked", where);
        baton__event_fire(c, BATON__EV_MASTER);
    }
}

int baton__epoch_hook_add(baton_client *c, baton__event_fn fn, void *arg)
{
    int rc = BATON_ENOMEM;
    baton__mutex_lock(&c->run_mu);
    for (int i = 0; i < BATON__EPOCH_HOOKS; i++)
        if (!c->epoch_hooks[i].fn) {
            c->epoch_hooks[i].fn = fn;
            c->epoch_hooks[i].arg = arg;
            rc = BATON_OK;
            break;
        }
    baton__mutex_unlock(&c->run_mu);
    return rc;
}

void baton__event_fire(baton_client *c, int event)
{
    struct {
        baton__event_fn fn;
        void *arg;
    } hooks[BATON__EPOCH_HOOKS];
    int n = 0;
    baton__mutex_lock(&c->run_mu);
    for (int i = 0; i < BATON__EPOCH_HOOKS; i++)
        if (c->epoch_hooks[i].fn) {
            hooks[n].fn = c->epoch_hooks[i].fn;
            hooks[n++].arg = c->epoch_hooks[i].arg;
        }
    baton__mutex_unlock(&c->run_mu);
    for (int i = 0; i < n; i++)
        hooks[i].fn(c, event, hooks[i].arg);
}

/* The handshake's commands, pipelined: [AUTH] [SELECT] PING INFO CLIENT SETNAME. */
typedef struct hs_step {
    const char *what;
    int code; /* for an error reply other than an authentication failure */
} hs_step;

/* The handshake of a data node ([AUTH] [SELECT] PING INFO [ROLE] under Sentinel) or of a
 * sentinel ([AUTH] PING, with the Sentinel credentials), pipelined in one round trip. */
static int handshake(baton_client *c, baton__conn *k, int64_t deadline_us, const char *where,
                     bool sentinel)
{
    const baton__endpoint *ep = &c->cfg.ep;
    const char *user = sentinel ? c->cfg.sentinel_username : ep->username;
    const char *pass = sentinel ? c->cfg.sentinel_password : ep->password;
    bool check_role = !sentinel && ep->kind == BATON__EP_SENTINEL;
    hs_step steps[6];
    int n = 0, rc = BATON_OK;
    char db[16];
    snprintf(db, sizeof db, "%d", ep->db);
    if (pass) {
        const char *argv[3] = {"AUTH", user ? user : pass, pass};
        rc |= baton__conn_append(k, user ? 3 : 2, argv, NULL);
        steps[n++] = (hs_step){"AUTH", BATON_EAUTH};
    }
    if (!sentinel && ep->db != 0 && ep->kind != BATON__EP_CLUSTER) {
        const char *argv[2] = {"SELECT", db};
        rc |= baton__conn_append(k, 2, argv, NULL);
        steps[n++] = (hs_step){"SELECT", BATON_EPROTO};
    }
    /* PING: a server that wants a password answers NOAUTH here, before any real work. */
    const char *ping[1] = {"PING"}, *info[1] = {"INFO"};
    rc |= baton__conn_append(k, 1, ping, NULL);
    steps[n++] = (hs_step){"PING", BATON_EPROTO};
    if (!sentinel) {
        rc |= baton__conn_append(k, 1, info, NULL);
        steps[n++] = (hs_step){"INFO", BATON_OK};
        /* the connection's name for CLIENT LIST; a server that refuses it is used anyway */
        const char *setname[3] = {"CLIENT", "SETNAME", c->cfg.client_name};
        rc |= baton__conn_append(k, 3, setname, NULL);
        steps[n++] = (hs_step){"CLIENT SETNAME", BATON_OK};
    }
    if (check_role) {
        const char *role[1] = {"ROLE"};
        rc |= baton__conn_append(k, 1, role, NULL);
        steps[n++] = (hs_step){"ROLE", BATON_ECONN};
    }
    if (rc != BATON_OK)
        return baton__fail(c, BATON_ENOMEM, "connect to %s: out of memory", where);
    if (baton__conn_flush_until(k, deadline_us) != BATON_OK)
        return baton__fail(c, BATON_ECONN, "connect to %s: %s", where, baton__conn_errstr(k));
    rc = BATON_OK;
    for (int i = 0; i < n; i++) {
        redisReply *r = NULL;
        int got = baton__conn_read_until(k, deadline_us, &r);
        if (got != BATON_OK) {
            const char *hint =
                i == 0 && !ep->tls && (strstr(k->errstr, "closed") || strstr(k->errstr, "reset"))
                    ? " (a TLS port? use rediss://)"
                    : "";
            return baton__fail(c, got, "connect to %s: %s%s", where, baton__conn_errstr(k), hint);
        }
        if (r->type == REDIS_REPLY_ERROR && steps[i].code != BATON_OK && rc == BATON_OK) {
            rc = baton__reply_error(c, r);
            if (rc != BATON_EAUTH && rc != BATON_EPERM)
                rc = steps[i].code;
            baton__fail(c, rc, "%s refused: %s", steps[i].what, r->str);
        } else if (strcmp(steps[i].what, "INFO") == 0 && rc == BATON_OK)
            note_server(c, k->pool, r, where);
        else if (strcmp(steps[i].what, "ROLE") == 0 && rc == BATON_OK &&
                 baton__role_of(r, NULL) != BATON__ROLE_MASTER) {
            /* Never a lock on a node that is not master: a replica, or an old master the
             * sentinels have demoted (or not yet). The topology looks again. */
            rc = baton__fail(c, BATON_ECONN, "connect to %s: the node is not the master", where);
            baton__topology_kick(c);
        }
        freeReplyObject(r);
    }
    return rc;
}

int baton__conn_open_by(baton_client *c, baton__pool *pool, int64_t deadline_us, baton__conn **out)
{
    const baton__endpoint *ep = &c->cfg.ep;
    char host[BATON__HOST_LEN], where[BATON__HOST_LEN + 16];
    int port = 0;
    uint64_t gen = 0;
    bool unix_socket = ep->path && ep->kind == BATON__EP_SINGLE;
    if (pool && pool->host[0]) {
        snprintf(host, sizeof host, "%s", pool->host);
        port = pool->port;
    } else
        baton__topology_target(c, host, sizeof host, &port, &gen);
    if (unix_socket)
        snprintf(where, sizeof where, "unix:%s", ep->path);
    else
        snprintf(where, sizeof where, "%s:%d", host, port);
    int64_t deadline = baton__deadline_after_ms(c->cfg.connect_timeout_ms);
    if (deadline_us < deadline)
        deadline = deadline_us;
    baton__conn *k = NULL;
    int rc = baton__conn_connect(c, unix_socket ? NULL : host, port, deadline, where, &k);
    if (rc == BATON_OK) {
        k->gen = gen;
        k->pool = pool;
        rc = handshake(c, k, deadline, where, false);
    }
    if (rc != BATON_OK) {
        if (rc == BATON_ECONN)
            baton__topology_kick(c); /* the master may have moved */
        baton__conn_close(k);
        *out = NULL;
        return rc;
    }
    *out = k;
    return BATON_OK;
}

int baton__conn_open(baton_client *c, baton__conn **out)
{
    return baton__conn_open_by(c, c->pool, BATON__NO_DEADLINE, out);
}

int baton__conn_open_node(baton_client *c, baton__pool *p, baton__conn **out)
{
    return baton__conn_open_by(c, p, BATON__NO_DEADLINE, out);
}

void baton__conn_where(const baton_client *c, const baton__conn *k, char *buf, size_t len)
{
    if (k && k->pool && k->pool->host[0]) {
        snprintf(buf, len, "%s:%d", k->pool->host, k->pool->port);
        return;
    }
    char host[BATON__HOST_LEN];
    int port;
    uint64_t gen;
    baton__topology_target((baton_client *)c, host, sizeof host, &port, &gen);
    snprintf(buf, len, "%s:%d", host, port);
}

int baton__conn_open_sentinel(baton_client *c, const char *host, int port, baton__conn **out)
{
    char where[BATON__HOST_LEN + 32];
    snprintf(where, sizeof where, "sentinel %s:%d", host, port);
    int64_t deadline = baton__deadline_after_ms(c->cfg.connect_timeout_ms);
    baton__conn *k = NULL;
    int rc = baton__conn_connect(c, host, port, deadline, where, &k);
    if (rc == BATON_OK)
        rc = handshake(c, k, deadline, where, true);
    if (rc != BATON_OK) {
        baton__conn_close(k);
        return rc;
    }
    *out = k;
    return BATON_OK;
}
