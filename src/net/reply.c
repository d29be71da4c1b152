/*
 * Readers of reply elements shared by the cluster topology decoders (slots.c) and the
 * Sentinel decoders (sentinel.c): one place that decides what counts as a string, a port,
 * and a field of a flat map.
 */
#include "reply.h"

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
