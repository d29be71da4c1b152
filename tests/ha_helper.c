/*
 * The C side of the cluster and Sentinel fixtures (see ha_helper.h): their ports from the
 * environment, and who serves a slot, asked of the cluster itself.
 */
#include "ha_helper.h"

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
