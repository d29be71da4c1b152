/*
 * Redis Cluster's arithmetic and the decoding of what a cluster says about itself: the slot
 * of a key (CRC16 of its hash tag, modulo 16384), whether a name keeps every key baton
 * derives from it in one slot, the slot map read from CLUSTER SLOTS (any version) or CLUSTER
 * SHARDS (7.0+), and the MOVED/ASK redirections. Everything here is pure: no connection, no
 * lock, so it is unit-tested without a server and fuzzed, since every reply it decodes
 * comes from the network and is checked element by element before use.
 */
#include "slots.h"

#include "reply.h"

#include <hiredis/hiredis.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------- slots ------------------------------------------------ */

/* CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), the cluster's key hash. */
uint16_t baton__crc16(const char *buf, size_t len)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)((unsigned char)buf[i] << 8);
        for (int b = 0; b < 8; b++)
            crc = (uint16_t)(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
    }
    return crc;
}

/* The bytes a key is hashed by: between the first '{' and the first '}' after it when that
 * is not empty (a hash tag), else the whole key. Redis's keyHashSlot. */
static void hash_part(const char *key, size_t len, size_t *from, size_t *n)
{
    *from = 0;
    *n = len;
    const char *open = memchr(key, '{', len);
    if (!open)
        return;
    size_t s = (size_t)(open - key) + 1;
    const char *close = memchr(key + s, '}', len - s);
    if (!close || close == key + s)
        return;
    *from = s;
    *n = (size_t)(close - (key + s));
}

int baton__key_slot(const char *key, size_t len)
{
    size_t from, n;
    hash_part(key, len, &from, &n);
    return baton__crc16(key + from, n) & (BATON__SLOTS - 1);
}

int baton__check_cluster_name(const char *name)
{
    if (!strchr(name, '{'))
        /* baton wraps it in braces: "{name}" tags the derived keys with the part before the
         * first '}', while the name itself, a key too, hashes whole: they agree only if
         * the name has no '}' */
        return strchr(name, '}') ? BATON_EINVAL : BATON_OK;
    /* Redisson's rule keeps a name that has a '{' as it is, so its keys share a slot only if
     * the name itself holds a hash tag: a '{', then a '}' with at least one byte between. */
    size_t from, n, len = strlen(name);
    hash_part(name, len, &from, &n);
    return from == 0 && n == len ? BATON_EINVAL : BATON_OK;
}

/* ------------------------------- slot maps -------------------------------------------- */

void baton__slot_map_free(baton__slot_map *m)
{
    for (size_t i = 0; i < m->nnodes; i++) {
        free(m->nodes[i].host);
        free(m->nodes[i].id);
    }
    free(m->nodes);
    m->nodes = NULL;
    m->nnodes = 0;
}

static int map_fail(baton__slot_map *m, char *err, size_t errlen, const char *why)
{
    snprintf(err, errlen, "unexpected cluster topology reply: %s", why);
    baton__slot_map_free(m);
    return BATON_EPROTO;
}

/* The address a node is reached at: its announced endpoint, or the seed's host when the
 * node does not know it ("" or "?": Redis's unknown endpoint). */
static const char *host_of(const char *announced, const char *seed_host)
{
    return announced && announced[0] && strcmp(announced, "?") != 0 ? announced : seed_host;
}

/* Index of the node (host, port) in m, adding it if new; -1 when out of memory. */
static int node_index(baton__slot_map *m, const char *host, int port, const char *id, bool master)
{
    for (size_t i = 0; i < m->nnodes; i++)
        if (m->nodes[i].port == port && strcmp(m->nodes[i].host, host) == 0) {
            if (master)
                m->nodes[i].master = true;
            return (int)i;
        }
    if (m->nnodes >= BATON__MAX_NODES)
        return -1;
    baton__cluster_node *nodes = realloc(m->nodes, (m->nnodes + 1) * sizeof *nodes);
    if (!nodes)
        return -1;
    m->nodes = nodes;
    baton__cluster_node *n = &m->nodes[m->nnodes];
    n->host = baton__strdup(host);
    n->id = id ? baton__strdup(id) : NULL;
    n->port = port;
    n->master = master;
    if (!n->host || (id && !n->id)) {
        free(n->host);
        free(n->id);
        return -1;
    }
    return (int)m->nnodes++;
}

static void map_init(baton__slot_map *m)
{
    memset(m, 0, sizeof *m);
    for (int i = 0; i < BATON__SLOTS; i++)
        m->owner[i] = BATON__NO_NODE;
}

/* Assigns the range [from, to] to node; false if the range is not a valid one. */
static bool assign(baton__slot_map *m, long long from, long long to, int node)
{
    if (from < 0 || to < from || to >= BATON__SLOTS)
        return false;
    for (long long s = from; s <= to; s++)
        m->owner[s] = (uint16_t)node;
    return true;
}

int baton__slot_map_from_slots(const redisReply *r, const char *seed_host, baton__slot_map *m,
                               char *err, size_t errlen)
{
    map_init(m);
    if (!r || r->type != REDIS_REPLY_ARRAY)
        return map_fail(m, err, errlen, "CLUSTER SLOTS did not answer an array");
    for (size_t i = 0; i < r->elements; i++) {
        /* [start, end, [host, port, id, ...] (the master), [replica]...] */
        const redisReply *e = r->element[i];
        if (!e || e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
            e->element[0]->type != REDIS_REPLY_INTEGER ||
            e->element[1]->type != REDIS_REPLY_INTEGER)
            return map_fail(m, err, errlen, "a slot range is malformed");
        int master = -1;
        for (size_t j = 2; j < e->elements; j++) {
            const redisReply *n = e->element[j];
            if (!n || n->type != REDIS_REPLY_ARRAY || n->elements < 2 ||
                !baton__reply_is_str(n->element[0]))
                return map_fail(m, err, errlen, "a node entry is malformed");
            int port = baton__reply_port(n->element[1]);
            if (port <= 0)
                return map_fail(m, err, errlen, "a node's port is not a port");
            const char *id =
                n->elements > 2 && baton__reply_is_str(n->element[2]) ? n->element[2]->str : NULL;
            int idx = node_index(m, host_of(n->element[0]->str, seed_host), port, id, j == 2);
            if (idx < 0)
                return map_fail(m, err, errlen, "too many nodes, or out of memory");
            if (j == 2)
                master = idx;
        }
        if (!assign(m, e->element[0]->integer, e->element[1]->integer, master))
            return map_fail(m, err, errlen, "a slot range is out of bounds");
    }
    return BATON_OK;
}

int baton__slot_map_from_shards(const redisReply *r, const char *seed_host, bool tls,
                                baton__slot_map *m, char *err, size_t errlen)
{
    map_init(m);
    if (!r || r->type != REDIS_REPLY_ARRAY)
        return map_fail(m, err, errlen, "CLUSTER SHARDS did not answer an array");
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *slots = baton__reply_field(r->element[i], "slots");
        const redisReply *nodes = baton__reply_field(r->element[i], "nodes");
        if (!slots || slots->type != REDIS_REPLY_ARRAY || slots->elements % 2 != 0 || !nodes ||
            nodes->type != REDIS_REPLY_ARRAY)
            return map_fail(m, err, errlen, "a shard is malformed");
        int master = -1;
        for (size_t j = 0; j < nodes->elements; j++) {
            const redisReply *n = nodes->element[j];
            const redisReply *role = baton__reply_field(n, "role"),
                             *health = baton__reply_field(n, "health");
            const redisReply *ep = baton__reply_field(n, "endpoint"),
                             *ip = baton__reply_field(n, "ip");
            const redisReply *id = baton__reply_field(n, "id");
            int port = baton__reply_port(baton__reply_field(n, tls ? "tls-port" : "port"));
            if (!baton__reply_is_str(role))
                return map_fail(m, err, errlen, "a node has no role");
            bool is_master = strcmp(role->str, "master") == 0;
            if (baton__reply_is_str(health) && strcmp(health->str, "online") != 0)
                continue; /* failed or still loading: not a place to send commands */
            if (port <= 0)
                return map_fail(m, err, errlen, "a node's port is not a port");
            const char *host = host_of(baton__reply_is_str(ep) ? ep->str : NULL, NULL);
            if (!host)
                host = host_of(baton__reply_is_str(ip) ? ip->str : NULL, seed_host);
            int idx =
                node_index(m, host, port, baton__reply_is_str(id) ? id->str : NULL, is_master);
            if (idx < 0)
                return map_fail(m, err, errlen, "too many nodes, or out of memory");
            if (is_master)
                master = idx;
        }
        for (size_t k = 0; k < slots->elements; k += 2) {
            const redisReply *a = slots->element[k], *b = slots->element[k + 1];
            if (!a || !b || a->type != REDIS_REPLY_INTEGER || b->type != REDIS_REPLY_INTEGER)
                return map_fail(m, err, errlen, "a slot range is malformed");
            if (master < 0)
                continue; /* a shard whose master is down: its slots stay uncovered */
            if (!assign(m, a->integer, b->integer, master))
                return map_fail(m, err, errlen, "a slot range is out of bounds");
        }
    }
    return BATON_OK;
}

/* ------------------------------- redirections ----------------------------------------- */

int baton__parse_redirect(const char *msg, bool *ask, int *slot, char *host, size_t hostlen,
                          int *port)
{
    const char *p;
    if (strncmp(msg, "MOVED ", 6) == 0) {
        *ask = false;
        p = msg + 6;
    } else if (strncmp(msg, "ASK ", 4) == 0) {
        *ask = true;
        p = msg + 4;
    } else {
        return BATON_EINVAL;
    }
    char *end;
    errno = 0;
    long s = strtol(p, &end, 10);
    if (errno || end == p || *end != ' ' || s < 0 || s >= BATON__SLOTS)
        return BATON_EPROTO;
    const char *addr = end + 1;
    const char *colon = strrchr(addr, ':'); /* the last: an IPv6 address has colons too */
    if (!colon)
        return BATON_EPROTO;
    size_t hl = (size_t)(colon - addr);
    if (hl >= 2 && addr[0] == '[' && addr[hl - 1] == ']') { /* [::1]:7000 */
        addr++;
        hl -= 2;
    }
    if (hl >= hostlen)
        return BATON_EPROTO;
    long pt = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || *end != '\0' || pt <= 0 || pt > 65535)
        return BATON_EPROTO;
    memcpy(host, addr, hl);
    host[hl] = '\0'; /* "": the node's endpoint is unknown, the caller's node answers */
    *slot = (int)s;
    *port = (int)pt;
    return BATON_OK;
}
