/*
 * Decoders for a Sentinel deployment (see sentinel.h): the master's address a sentinel
 * gives, the role a node claims, the +switch-master announcement and the list of peer
 * sentinels. The Sentinel client asks a sentinel for the master, then asks that address
 * itself with ROLE, and uses it only if it says "master": an old master restarted empty, or
 * one Sentinel has not yet demoted, must never take locks. Pure functions, unit-tested and
 * fuzzed.
 */
#include "sentinel.h"

#include <hiredis/hiredis.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool is_str(const redisReply *r)
{
    return r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) && r->str;
}

/* A decimal port from n bytes of s, or -1. */
static int port_from(const char *s, size_t n)
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

static int reply_port(const redisReply *r)
{
    if (r && r->type == REDIS_REPLY_INTEGER)
        return r->integer >= 1 && r->integer <= 65535 ? (int)r->integer : -1;
    return is_str(r) ? port_from(r->str, r->len) : -1;
}

/* Fills *a from a host reply and a port reply; false when either is not one. */
static bool set_addr(baton__addr *a, const redisReply *host, const redisReply *port)
{
    int p = reply_port(port);
    if (!is_str(host) || host->len == 0 || host->len >= BATON__HOST_LEN || p < 0 ||
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
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 1 || !is_str(r->element[0]))
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
    if (i != len || wl[3] >= BATON__HOST_LEN || port_from(w[2], wl[2]) < 0 ||
        port_from(w[4], wl[4]) < 0)
        return BATON_EPROTO;
    if (strlen(name) != wl[0] || memcmp(name, w[0], wl[0]) != 0)
        return BATON_EINVAL;
    memcpy(to->host, w[3], wl[3]);
    to->host[wl[3]] = '\0';
    to->port = port_from(w[4], wl[4]);
    return BATON_OK;
}

/* The value of `key` in a RESP2 flat map, or NULL. */
static const redisReply *field(const redisReply *map, const char *key)
{
    if (!map || map->type != REDIS_REPLY_ARRAY)
        return NULL;
    for (size_t i = 0; i + 1 < map->elements; i += 2)
        if (is_str(map->element[i]) && strcmp(map->element[i]->str, key) == 0)
            return map->element[i + 1];
    return NULL;
}

int baton__sentinel_peers(const redisReply *r, baton__addr *out, int max)
{
    if (!r || r->type != REDIS_REPLY_ARRAY)
        return -1;
    int n = 0;
    for (size_t i = 0; i < r->elements && n < max; i++) {
        const redisReply *e = r->element[i];
        if (!set_addr(&out[n], field(e, "ip"), field(e, "port")))
            return -1;
        n++;
    }
    return n;
}
