/*
 * Private to the transport: Cluster redirections (redirect.c), followed by send.c, where
 * every command and script goes (net/send.h).
 */
#ifndef BATON_CORE_REDIRECT_H
#define BATON_CORE_REDIRECT_H

#include "conn.h"

struct redisReply;

/* Where a call goes on a Cluster: its slot, and the node of an ASK redirection. */
typedef struct baton__route {
    int slot;            /* -1: no key (any master) */
    baton__pool *ask;    /* the next attempt goes there, after ASKING; NULL: the slot's master */
    int hops;            /* redirections followed */
    int waits;           /* TRYAGAIN / CLUSTERDOWN pauses taken */
    int64_t deadline_us; /* TRYAGAIN and CLUSTERDOWN wait no longer than this */
    int64_t reach_us;    /* nor a master that cannot be reached (one command timeout) */
} baton__route;

/* A call's route for the key slot `slot` (-1: none; not a Cluster: -1 whatever). */
void baton__route_init(baton_client *c, baton__route *rt, int slot);
/* A connection for the route's next attempt. On a Cluster, a master that cannot be reached
 * (killed, its failover under way) or a slot nobody serves is waited out until the slot map
 * changes, within one command timeout: the call then goes to the promoted replica rather
 * than failing in the seconds a failover takes, and a partitioned master costs no more. */
int baton__route_get(baton_client *c, const baton__route *rt, baton__conn **out);
/* After a reply on a Cluster: true when it redirects (MOVED, ASK) or asks to wait (TRYAGAIN,
 * CLUSTERDOWN), the command did not run, and the call should go again as rt now says. */
bool baton__route_redirected(baton_client *c, baton__route *rt, const baton__conn *conn,
                             const struct redisReply *r);
/* Whether an error text is a refusal to run the command where it was sent (MOVED, ASK,
 * TRYAGAIN, CLUSTERDOWN), and whether a reply is one. */
bool baton__redirection_msg(const char *s);
bool baton__is_redirection(const struct redisReply *r);

#endif /* BATON_CORE_REDIRECT_H */
