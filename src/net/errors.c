/*
 * What a server's error reply means: the code it maps to (baton__reply_error), for every
 * caller from the handshake up, and the topology told when the reply says the master moved.
 */
#include "net.h"

#include "redirect.h"
#include "topology.h"

#include <hiredis/hiredis.h>

#include <string.h>

/* Whether a server error text is an ACL refusal: BATON_EPERM. */
static bool acl_refusal(const char *s)
{
    /* NOPERM: a command refused before it ran (its name, or "one of the keys/channels");
     * inside a script Redis 7.0 says "ERR The user executing the script can't ...", and
     * Redis 7.2+, 8 and Valkey 8 say "ERR ACL failure in script: User u has no permissions
     * to run the 'hincrby' command script: ..." */
    return strncmp(s, "NOPERM", 6) == 0 ||
           strncmp(s, "ERR The user executing the script can't", 39) == 0 ||
           strncmp(s, "ERR ACL failure in script", 25) == 0;
}

int baton__reply_error(baton_client *c, const redisReply *r)
{
    if (!r || r->type != REDIS_REPLY_ERROR)
        return BATON_OK;
    const char *s = r->str ? r->str : "";
    int code = BATON_EPROTO;
    if (strncmp(s, "NOAUTH", 6) == 0 || strncmp(s, "WRONGPASS", 9) == 0)
        code = BATON_EAUTH;
    else if (acl_refusal(s))
        code = BATON_EPERM;
    else if (strncmp(s, "OOM", 3) == 0)
        code = BATON_ENOMEM;
    else if (strncmp(s, "READONLY", 8) == 0) {
        /* a replica: the master moved under us (Sentinel); the topology looks again and
         * the next connection goes to the new master */
        code = BATON_ECONN;
        baton__topology_kick(c);
    } else if (baton__redirection_msg(s)) {
        /* redirections left after the retries (Cluster: the slot is in flux, a
         * connection-level failure), or a cluster node behind a redis:// URL: a mistake of
         * configuration, which no retry mends (the command did not run) */
        if (!baton__topology_cluster(c))
            return baton__fail(c, BATON_EPROTO,
                               "server replied: %s (the server is a Redis Cluster node: use a "
                               "redis+cluster:// URL)",
                               s);
        code = BATON_ECONN;
    }
    return baton__fail(c, code, "server replied: %s", s);
}
