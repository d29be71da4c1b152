/*
 * The C side of the cluster and Sentinel fixtures (see ha_helper.h): their ports from the
 * environment, and who serves a slot, asked of the cluster itself.
 */
#include "ha_helper.h"
#include "slots.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void th_cluster_attach(th_cluster *cl)
{
    memset(cl, 0, sizeof *cl);
    const char *ports = getenv("BATON_TEST_CLUSTER_PORTS");
    cr_assert(ports && *ports, "BATON_TEST_CLUSTER_PORTS is not set: run under with-cluster.sh");
    size_t off = (size_t)snprintf(cl->url, sizeof cl->url, "redis+cluster://");
    for (const char *p = ports; *p && cl->n < TH_CLUSTER_MAX;) {
        char *end;
        long port = strtol(p, &end, 10);
        if (end == p)
            break;
        cl->ports[cl->n] = (int)port;
        off += (size_t)snprintf(cl->url + off, sizeof cl->url - off, "%s127.0.0.1:%ld",
                                cl->n ? "," : "", port);
        cl->n++;
        p = end;
        while (*p == ' ')
            p++;
    }
    cr_assert(cl->n > 0, "no port in BATON_TEST_CLUSTER_PORTS");
}

int th_cluster_master_of(const th_cluster *cl, int slot)
{
    for (int i = 0; i < cl->n; i++) {
        redisContext *r = redisConnect("127.0.0.1", cl->ports[i]);
        if (!r || r->err) {
            if (r)
                redisFree(r);
            continue;
        }
        redisReply *rep = redisCommand(r, "CLUSTER SLOTS");
        int found = -1;
        for (size_t k = 0; rep && rep->type == REDIS_REPLY_ARRAY && k < rep->elements; k++) {
            redisReply *e = rep->element[k];
            if (e->elements >= 3 && slot >= e->element[0]->integer &&
                slot <= e->element[1]->integer)
                found = (int)e->element[2]->element[1]->integer;
        }
        if (rep)
            freeReplyObject(rep);
        redisFree(r);
        if (found >= 0)
            return found;
    }
    return -1;
}

int th_cluster_slot(const char *name)
{
    return baton__key_slot(name, strlen(name));
}

/* A short-lived connection to a node, or NULL when it does not answer within 300 ms. */
static redisContext *node(int port)
{
    redisContext *r = redisConnectWithTimeout("127.0.0.1", port, (struct timeval){0, 300000});
    if (!r || r->err) {
        if (r)
            redisFree(r);
        return NULL;
    }
    redisSetTimeout(r, (struct timeval){2, 0});
    return r;
}

bool th_cluster_map(const th_cluster *cl, int owner[TH_CLUSTER_SLOTS])
{
    for (int s = 0; s < TH_CLUSTER_SLOTS; s++)
        owner[s] = -1;
    for (int i = 0; i < cl->n; i++) {
        redisContext *r = node(cl->ports[i]);
        if (!r)
            continue;
        redisReply *rep = redisCommand(r, "CLUSTER SLOTS");
        bool ok = rep && rep->type == REDIS_REPLY_ARRAY;
        for (size_t k = 0; ok && k < rep->elements; k++) {
            redisReply *e = rep->element[k];
            if (e->elements < 3)
                continue;
            for (long long s = e->element[0]->integer; s <= e->element[1]->integer; s++)
                owner[s] = (int)e->element[2]->element[1]->integer;
        }
        if (rep)
            freeReplyObject(rep);
        redisFree(r);
        if (ok)
            return true;
    }
    return false;
}

int th_cluster_masters(const th_cluster *cl, int *ports, int max)
{
    static int owner[TH_CLUSTER_SLOTS];
    cr_assert(th_cluster_map(cl, owner), "no cluster node answers");
    int n = 0;
    for (int s = 0; s < TH_CLUSTER_SLOTS; s++) {
        int known = 0;
        for (int i = 0; i < n; i++)
            known |= ports[i] == owner[s];
        if (!known && owner[s] > 0 && n < max)
            ports[n++] = owner[s];
    }
    for (int i = 0; i < n; i++) /* ascending */
        for (int j = i + 1; j < n; j++)
            if (ports[j] < ports[i]) {
                int t = ports[i];
                ports[i] = ports[j];
                ports[j] = t;
            }
    return n;
}

void th_cluster_name_on(const th_cluster *cl, const char *base, int port, char *out, size_t len)
{
    static int owner[TH_CLUSTER_SLOTS];
    cr_assert(th_cluster_map(cl, owner), "no cluster node answers");
    char *unique = th_name(base);
    for (int i = 0; i < 100000; i++) {
        snprintf(out, len, "%s-%d", unique, i);
        if (owner[th_cluster_slot(out)] == port) {
            free(unique);
            return;
        }
    }
    cr_assert_fail("no name of %s lands on the master on %d", base, port);
}

void th_cluster_node_id(int port, char id[41])
{
    redisContext *r = th_redis_port(port);
    redisReply *rep = th_cmd(r, "CLUSTER MYID");
    snprintf(id, 41, "%s", rep->str);
    freeReplyObject(rep);
    redisFree(r);
}

int th_cluster_replica_of(const th_cluster *cl, int master_port)
{
    char id[41];
    th_cluster_node_id(master_port, id);
    redisContext *r = th_redis_port(master_port);
    redisReply *rep = th_cmd(r, "CLUSTER NODES");
    int port = -1;
    /* "<id> <ip:port@bus> <flags> <master-id> ..." one line per node */
    for (char *line = rep->str; line && *line && port < 0;) {
        char *end = strchr(line, '\n');
        char nid[64], addr[96], flags[128], of[64];
        if (sscanf(line, "%63s %95s %127s %63s", nid, addr, flags, of) == 4 &&
            strcmp(of, id) == 0 && strstr(flags, "slave") && !strstr(flags, "fail")) {
            char *colon = strrchr(addr, ':');
            if (colon)
                port = atoi(colon + 1);
        }
        line = end ? end + 1 : NULL;
    }
    freeReplyObject(rep);
    redisFree(r);
    (void)cl;
    return port;
}

pid_t th_node_pid(int port)
{
    redisContext *r = th_redis_port(port);
    redisReply *rep = th_cmd(r, "INFO server");
    const char *p = strstr(rep->str, "process_id:");
    pid_t pid = p ? (pid_t)atol(p + 11) : 0;
    freeReplyObject(rep);
    redisFree(r);
    cr_assert(pid > 0);
    return pid;
}

bool th_cluster_wait_ok(const th_cluster *cl, int slot, int64_t timeout_ms)
{
    int64_t t0 = th_ms();
    do {
        bool ok = true;
        int master = -1, answered = 0;
        for (int i = 0; i < cl->n && ok; i++) {
            redisContext *r = node(cl->ports[i]);
            if (!r)
                continue;
            answered++;
            redisReply *rep = redisCommand(r, "CLUSTER INFO");
            ok = rep && rep->type == REDIS_REPLY_STRING && strstr(rep->str, "cluster_state:ok");
            if (rep)
                freeReplyObject(rep);
            redisFree(r);
            if (ok && slot >= 0) {
                th_cluster one = *cl;
                one.n = 1;
                one.ports[0] = cl->ports[i];
                int m = th_cluster_master_of(&one, slot);
                ok = m > 0 && (master < 0 || m == master);
                master = m;
            }
        }
        if (ok && answered > 0)
            return true;
        th_sleep_ms(50);
    } while (th_ms() - t0 < timeout_ms);
    return false;
}

static void setslot_node(int port, int slot, const char *id)
{
    redisContext *r = th_redis_port(port);
    freeReplyObject(th_cmd(r, "CLUSTER SETSLOT %d NODE %s", slot, id));
    redisFree(r);
}

int th_cluster_move_slot(const th_cluster *cl, int slot, int to_port, int batch, int pause_ms)
{
    int from_port = th_cluster_master_of(cl, slot);
    cr_assert(from_port > 0 && from_port != to_port, "slot %d: from %d to %d", slot, from_port,
              to_port);
    char from_id[41], to_id[41];
    th_cluster_node_id(from_port, from_id);
    th_cluster_node_id(to_port, to_id);
    redisContext *src = th_redis_port(from_port), *dst = th_redis_port(to_port);
    freeReplyObject(th_cmd(dst, "CLUSTER SETSLOT %d IMPORTING %s", slot, from_id));
    freeReplyObject(th_cmd(src, "CLUSTER SETSLOT %d MIGRATING %s", slot, to_id));
    th_sleep_ms(pause_ms);
    int moved = 0;
    int64_t t0 = th_ms();
    for (;;) {
        redisReply *keys = th_cmd(src, "CLUSTER GETKEYSINSLOT %d %d", slot, batch);
        if (keys->elements == 0) {
            freeReplyObject(keys);
            break;
        }
        cr_assert(th_ms() - t0 < 30000, "slot %d: keys keep coming back to the source", slot);
        char port[16];
        snprintf(port, sizeof port, "%d", to_port);
        const char *head[] = {"MIGRATE", "127.0.0.1", port, "", "0", "5000", "REPLACE", "KEYS"};
        size_t argc = 8 + keys->elements;
        const char **argv = calloc(argc, sizeof *argv);
        cr_assert(argv != NULL);
        memcpy(argv, head, sizeof head);
        for (size_t k = 0; k < keys->elements; k++)
            argv[8 + k] = keys->element[k]->str;
        redisReply *rep = redisCommandArgv(src, (int)argc, argv, NULL);
        cr_assert(rep != NULL && rep->type != REDIS_REPLY_ERROR, "MIGRATE: %s",
                  rep ? rep->str : src->errstr);
        freeReplyObject(rep);
        moved += (int)keys->elements;
        free(argv);
        freeReplyObject(keys);
        th_sleep_ms(pause_ms);
    }
    setslot_node(to_port, slot, to_id);
    setslot_node(from_port, slot, to_id);
    int masters[TH_CLUSTER_MAX];
    int n = th_cluster_masters(cl, masters, TH_CLUSTER_MAX);
    for (int i = 0; i < n; i++)
        if (masters[i] != to_port && masters[i] != from_port)
            setslot_node(masters[i], slot, to_id);
    redisFree(src);
    redisFree(dst);
    return moved;
}

void th_cluster_failover(const th_cluster *cl, int replica_port, int64_t timeout_ms)
{
    redisContext *r = th_redis_port(replica_port);
    int64_t t0 = th_ms();
    /* a manual failover needs a replica in sync (one that just became a replica is still
     * loading its master's data), and gives up silently after 5 s: ask again then */
    for (;;) {
        redisReply *info = th_cmd(r, "INFO replication");
        bool synced = strstr(info->str, "master_link_status:up") &&
                      strstr(info->str, "master_sync_in_progress:0");
        freeReplyObject(info);
        if (synced)
            break;
        cr_assert(th_ms() - t0 < timeout_ms, "%d never synced with its master", replica_port);
        th_sleep_ms(20);
    }
    int64_t asked = th_ms();
    freeReplyObject(th_cmd(r, "CLUSTER FAILOVER"));
    for (;;) {
        redisReply *role = th_cmd(r, "ROLE");
        bool master = strcmp(role->element[0]->str, "master") == 0;
        freeReplyObject(role);
        if (master)
            break;
        cr_assert(th_ms() - t0 < timeout_ms, "%d never became master", replica_port);
        if (th_ms() - asked > 5500) {
            asked = th_ms();
            freeReplyObject(th_cmd(r, "CLUSTER FAILOVER"));
        }
        th_sleep_ms(20);
    }
    redisFree(r);
    /* and every node says so */
    static int owner[TH_CLUSTER_SLOTS];
    for (;;) {
        bool all = true;
        for (int i = 0; i < cl->n && all; i++) {
            th_cluster one = *cl;
            one.n = 1;
            one.ports[0] = cl->ports[i];
            redisContext *probe = node(cl->ports[i]);
            if (!probe)
                continue;
            redisFree(probe);
            all = th_cluster_map(&one, owner);
            int serves = 0;
            for (int s = 0; all && s < TH_CLUSTER_SLOTS; s++)
                serves += owner[s] == replica_port;
            all = all && serves > 0;
        }
        if (all)
            return;
        cr_assert(th_ms() - t0 < timeout_ms, "the cluster never agreed %d is master", replica_port);
        th_sleep_ms(20);
    }
}

void th_slot_conn_init(th_slot_conn *c, const th_cluster *cl, int slot)
{
    c->cl = cl;
    c->slot = slot;
    c->port = -1;
    c->r = NULL;
}

static void drop(th_slot_conn *c)
{
    if (c->r)
        redisFree(c->r);
    c->r = NULL;
}

static bool redirected(const redisReply *rep, const char *kind)
{
    return rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, kind, strlen(kind)) == 0;
}

redisReply *th_slot_cmd(th_slot_conn *c, const char *fmt, ...)
{
    int64_t t0 = th_ms();
    while (th_ms() - t0 < 10000) {
        if (!c->r) {
            if (c->port < 0)
                c->port = th_cluster_master_of(c->cl, c->slot);
            c->r = c->port > 0 ? node(c->port) : NULL;
            if (!c->r) {
                c->port = -1;
                th_sleep_ms(50);
                continue;
            }
        }
        va_list ap;
        va_start(ap, fmt);
        redisReply *rep = redisvCommand(c->r, fmt, ap);
        va_end(ap);
        if (!rep) { /* sent, perhaps run, no answer */
            drop(c);
            c->port = -1;
            return NULL;
        }
        bool ask = false;
        int slot = -1, port = -1;
        char host[64];
        if ((redirected(rep, "MOVED ") || redirected(rep, "ASK ")) &&
            baton__parse_redirect(rep->str, &ask, &slot, host, sizeof host, &port) == BATON_OK) {
            freeReplyObject(rep);
            if (!ask) {
                drop(c);
                c->port = port;
                continue;
            }
            redisContext *t = node(port);
            if (!t) {
                th_sleep_ms(20);
                continue;
            }
            freeReplyObject(redisCommand(t, "ASKING"));
            va_start(ap, fmt);
            rep = redisvCommand(t, fmt, ap);
            va_end(ap);
            redisFree(t);
            if (!rep)
                return NULL;
        }
        if (redirected(rep, "TRYAGAIN") || redirected(rep, "CLUSTERDOWN") ||
            redirected(rep, "LOADING") || redirected(rep, "MOVED ") || redirected(rep, "ASK ")) {
            freeReplyObject(rep);
            th_sleep_ms(20);
            continue;
        }
        return rep;
    }
    return NULL;
}

void th_slot_conn_close(th_slot_conn *c)
{
    drop(c);
}

static int env_port(const char *name)
{
    const char *v = getenv(name);
    cr_assert(v && *v, "%s is not set: run under with-sentinel.sh", name);
    return atoi(v);
}

void th_sentinel_attach(th_sentinel *s)
{
    memset(s, 0, sizeof *s);
    s->master = env_port("BATON_TEST_SENTINEL_MASTER");
    s->replica = env_port("BATON_TEST_SENTINEL_REPLICA");
    const char *ports = getenv("BATON_TEST_SENTINEL_PORTS");
    cr_assert(ports && sscanf(ports, "%d %d %d", &s->sentinels[0], &s->sentinels[1],
                              &s->sentinels[2]) == 3,
              "BATON_TEST_SENTINEL_PORTS is not three ports");
    snprintf(s->url, sizeof s->url,
             "redis+sentinel://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d/mymaster", s->sentinels[0],
             s->sentinels[1], s->sentinels[2]);
}
