/*
 * Cluster redirections, in one place: where a call goes (its slot's master as the map the
 * topology reads says, or the node of an ASK), what a refusal means (MOVED: the map is
 * updated for that slot and a fresh one asked for; ASK: ASKING and the command to the
 * target, nothing changed; TRYAGAIN and CLUSTERDOWN: a new map or a pause doubling from
 * 5 ms to 200 ms), and what is left when the redirections run out (baton__in_flux). The
 * slot map itself is read and kept by topology.c, the redirection's text decoded by
 * slots.c (pure); send.c, which sends every command and script, follows what this file says.
 */
#include "redirect.h"

#include "client_fields.h"
#include "slots.h"
#include "topology.h"

#include <hiredis/hiredis.h>

#include <string.h>

/* How many redirections one call follows (a slot that moves while it is asked about moves
 * once or twice; more is a cluster in flux, reported as such). */
#define MAX_HOPS 6

void baton__route_init(baton_client *c, baton__route *rt, int slot)
{
    rt->slot = baton__topology_cluster(c) ? slot : -1;
    rt->ask = NULL;
    rt->hops = 0;
    rt->waits = 0;
    /* Redisson's three retry attempts: a slot being emptied answers TRYAGAIN to a script
     * whose keys are split until the last of them moved (the fencing counter of a free lock
     * stays while its hash is absent), which can take a few seconds of MIGRATE batches */
    rt->deadline_us = baton__deadline_after_ms(3 * c->cfg.command_timeout_ms);
    rt->reach_us = baton__deadline_after_ms(c->cfg.command_timeout_ms);
}

int baton__route_get(baton_client *c, const baton__route *rt, baton__conn **out)
{
    if (rt->ask)
        return baton__conn_get_shared(c, rt->ask, BATON__NO_DEADLINE, out);
    for (;;) {
        uint64_t gen = baton__topology_cluster_gen(c);
        int rc = baton__conn_get_shared_slot(c, rt->slot, BATON__NO_DEADLINE, out);
        if (rc != BATON_ECONN || !baton__topology_cluster(c) || baton__now_us() >= rt->reach_us)
            return rc;
        if (!baton__topology_wait_change(c, gen, rt->reach_us) ||
            baton__topology_cluster_gen(c) == gen)
            return rc; /* nothing changed before the deadline: the error stands */
    }
}

bool baton__redirection_msg(const char *s)
{
    return strncmp(s, "MOVED ", 6) == 0 || strncmp(s, "ASK ", 4) == 0 ||
           strncmp(s, "TRYAGAIN", 8) == 0 || strncmp(s, "CLUSTERDOWN", 11) == 0;
}

bool baton__is_redirection(const redisReply *r)
{
    if (!r || r->type != REDIS_REPLY_ERROR || !r->str)
        return false;
    return baton__redirection_msg(r->str);
}

bool baton__route_redirected(baton_client *c, baton__route *rt, const baton__conn *conn,
                             const redisReply *r)
{
    if (!baton__topology_cluster(c) || !r || r->type != REDIS_REPLY_ERROR || !r->str)
        return false;
    bool ask = false;
    int slot = -1, port = 0;
    char host[BATON__HOST_LEN];
    if (baton__parse_redirect(r->str, &ask, &slot, host, sizeof host, &port) == BATON_OK) {
        if (rt->hops >= MAX_HOPS || baton__now_us() >= rt->deadline_us)
            return false;
        if (!host[0]) { /* "MOVED 3999 :6380": the answering node's own host */
            char where[BATON__HOST_LEN + 16];
            baton__conn_where(c, conn, where, sizeof where);
            char *colon = strrchr(where, ':');
            size_t n = colon ? (size_t)(colon - where) : strlen(where);
            if (n >= sizeof host)
                return false;
            memcpy(host, where, n);
            host[n] = '\0';
        }
        baton__pool *to = baton__topology_node_pool(c, host, port);
        if (!to)
            return false;
        baton__stat_inc(c, BATON__ST_REDIRECTS + (ask ? BATON__REDIR_ASK : BATON__REDIR_MOVED));
        if (ask) {
            rt->ask = to;
        } else {
            rt->ask = NULL;
            baton__topology_moved(c, slot, to);
        }
        rt->hops++;
        return true;
    }
    if (strncmp(r->str, "TRYAGAIN", 8) == 0 || strncmp(r->str, "CLUSTERDOWN", 11) == 0) {
        /* a multi-key command during a migration (some of its keys moved already: they
         * all will be soon), or a cluster without a master for the slot (a failover in
         * progress): a new map, or a pause that doubles from 5 ms up to 200 ms, until the
         * command timeout */
        int64_t now = baton__now_us();
        if (now >= rt->deadline_us)
            return false;
        baton__stat_inc(c, BATON__ST_REDIRECTS + (r->str[0] == 'T' ? BATON__REDIR_TRYAGAIN
                                                                   : BATON__REDIR_CLUSTERDOWN));
        int64_t pause = rt->waits < 6 ? 5000LL << rt->waits : 200000;
        rt->waits++;
        uint64_t gen = baton__topology_cluster_gen(c);
        if (!baton__topology_wait_change(
                c, gen, now + pause < rt->deadline_us ? now + pause : rt->deadline_us))
            return false; /* closing */
        /* back to the slot's master; a migration in progress answers ASK again, which
         * starts a new count of redirections (a slot being emptied alternates ASK and
         * TRYAGAIN for as long as its keys take to move: bounded by the deadline) */
        rt->ask = NULL;
        rt->hops = 0;
        return true;
    }
    return false;
}

bool baton__in_flux(const baton_client *c)
{
    /* the detail baton__reply_error records for what is left of a Cluster's redirections */
    static const char *const in_flux[] = {"server replied: TRYAGAIN", "server replied: ASK ",
                                          "server replied: MOVED ", "server replied: CLUSTERDOWN"};
    if (!baton__topology_cluster(c))
        return false;
    const char *msg = baton_client_errmsg(c);
    for (size_t i = 0; i < sizeof in_flux / sizeof *in_flux; i++)
        if (strncmp(msg, in_flux[i], strlen(in_flux[i])) == 0)
            return true;
    return false;
}
