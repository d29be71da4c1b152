/*
 * What a reply means. Readers of reply elements shared by the cluster topology decoders
 * (slots.c) and the Sentinel decoders (sentinel.c): one place that decides what counts as a
 * string, a port, and a field of a flat map; and the code a server's error reply maps to
 * (baton__reply_error), for every caller from the handshake up.
 */
#include "reply.h"

#include "redirect.h"
#include "topology.h"

#include <hiredis/hiredis.h>

#include <string.h>

bool baton__reply_is_str(const redisReply *r)
{
    return r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) && r->str;
}

int baton__port_from(const char *s, size_t n)
{
    if (n == 0 || n > 5)
        return -1;
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v >= 1 && v <= 65535 ? v : -1;
}

int baton__reply_port(const redisReply *r)
{
    if (r && r->type == REDIS_REPLY_INTEGER)
        return r->integer >= 1 && r->integer <= 65535 ? (int)r->integer : -1;
    return baton__reply_is_str(r) ? baton__port_from(r->str, r->len) : -1;
}

const redisReply *baton__reply_field(const redisReply *map, const char *key)
{
    if (!map || map->type != REDIS_REPLY_ARRAY)
        return NULL;
    for (size_t i = 0; i + 1 < map->elements; i += 2)
        if (baton__reply_is_str(map->element[i]) && strcmp(map->element[i]->str, key) == 0)
            return map->element[i + 1];
    return NULL;
}

/* ------------------------------- errors from replies ---------------------------------- */

/* Whether a server error text is an ACL refusal: BATON_EPERM. */
static bool acl_refusal(const char *s)
{
    /* NOPERM: a command refused before it ran (its name, or "one of the keys/channels");
     * inside a script Redis 7.0 says "ERR The user executing the script can't ..." */
    return strncmp(s, "NOPERM", 6) == 0 ||
           strncmp(s, "ERR The user executing the script can't", 39) == 0;
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
