/*
 * Decoders for a Sentinel deployment (see sentinel.h): the master's address a sentinel
 * gives, the role a node claims, the +switch-master announcement and the list of peer
 * sentinels. The Sentinel client asks a sentinel for the master, then asks that address
 * itself with ROLE, and uses it only if it says "master": an old master restarted empty, or
 * one Sentinel has not yet demoted, must never take locks. Pure functions, unit-tested and
 * fuzzed.
 */
#include "sentinel.h"

#include "reply.h"

#include <hiredis/hiredis.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Fills *a from a host reply and a port reply; false when either is not one. */
static bool set_addr(baton__addr *a, const redisReply *host, const redisReply *port)
{
    int p = baton__reply_port(port);
    if (!baton__reply_is_str(host) || host->len == 0 || host->len >= BATON__HOST_LEN || p < 0 ||
        memchr(host->str, '\0', host->len))
        return false;
    memcpy(a->host, host->str, host->len);
    a->host[host->len] = '\0';
    a->port = p;
    return true;
}

int baton__sentinel_master_addr(const redisReply *r, baton__addr *out)
{
    if (r && r->type == REDIS_REPLY_NIL)
        return BATON_ENOTHELD;
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2)
        return BATON_EPROTO;
    return set_addr(out, r->element[0], r->element[1]) ? BATON_OK : BATON_EPROTO;
}

baton__role baton__role_of(const redisReply *r, baton__addr *master)
{
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        !baton__reply_is_str(r->element[0]))
        return BATON__ROLE_UNKNOWN;
    const char *role = r->element[0]->str;
    if (strcmp(role, "master") == 0)
        return BATON__ROLE_MASTER;
    if (strcmp(role, "sentinel") == 0)
        return BATON__ROLE_SENTINEL;
    if (strcmp(role, "slave") == 0 || strcmp(role, "replica") == 0) {
        baton__addr a;
        if (r->elements < 3 || !set_addr(&a, r->element[1], r->element[2]))
            return BATON__ROLE_UNKNOWN;
        if (master)
            *master = a;
        return BATON__ROLE_REPLICA;
    }
    return BATON__ROLE_UNKNOWN;
}

int baton__sentinel_switch(const char *payload, size_t len, const char *name, baton__addr *to)
{
    /* five space-separated words */
    const char *w[5];
    size_t wl[5];
    size_t i = 0;
    for (int k = 0; k < 5; k++) {
        while (i < len && payload[i] == ' ')
            i++;
        if (i >= len)
            return BATON_EPROTO;
        w[k] = payload + i;
        while (i < len && payload[i] != ' ' && payload[i] != '\0')
            i++;
        wl[k] = (size_t)(payload + i - w[k]);
    }
    while (i < len && payload[i] == ' ')
        i++;
    if (i != len || wl[3] >= BATON__HOST_LEN || baton__port_from(w[2], wl[2]) < 0 ||
        baton__port_from(w[4], wl[4]) < 0)
        return BATON_EPROTO;
    if (strlen(name) != wl[0] || memcmp(name, w[0], wl[0]) != 0)
        return BATON_EINVAL;
    memcpy(to->host, w[3], wl[3]);
    to->host[wl[3]] = '\0';
    to->port = baton__port_from(w[4], wl[4]);
    return BATON_OK;
}

int baton__sentinel_peers(const redisReply *r, baton__addr *out, int max)
{
    if (!r || r->type != REDIS_REPLY_ARRAY)
        return -1;
    int n = 0;
    for (size_t i = 0; i < r->elements && n < max; i++) {
        const redisReply *e = r->element[i];
        if (!set_addr(&out[n], baton__reply_field(e, "ip"), baton__reply_field(e, "port")))
            return -1;
        n++;
    }
    return n;
}
