/* Fuzz target: whatever a cluster node answers to CLUSTER SLOTS or CLUSTER SHARDS, whatever
 * text follows MOVED or ASK, and whatever a sentinel or a node answers about who is master
 * (GET-MASTER-ADDR-BY-NAME, ROLE, SENTINELS, +switch-master), the decoders accept or reject
 * it without crashing, and what they accept is well formed: a slot map only names nodes it
 * holds, every address has a host and a valid port. */
#include "sentinel.h"
#include "slots.h"

#include <hiredis/hiredis.h>

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static void check_addr(const baton__addr *a)
{
    if (a->port < 1 || a->port > 65535 || strlen(a->host) >= BATON__HOST_LEN)
        abort();
}

static void sentinel_replies(const redisReply *r)
{
    baton__addr a, peers[8];
    if (baton__sentinel_master_addr(r, &a) == BATON_OK)
        check_addr(&a);
    if (baton__role_of(r, &a) == BATON__ROLE_REPLICA)
        check_addr(&a);
    int n = baton__sentinel_peers(r, peers, 8);
    if (n > 8)
        abort();
    for (int i = 0; i < n; i++)
        check_addr(&peers[i]);
}

static void check(const baton__slot_map *m)
{
    for (int s = 0; s < BATON__SLOTS; s++)
        if (m->owner[s] != BATON__NO_NODE && m->owner[s] >= m->nnodes)
            abort();
    for (size_t i = 0; i < m->nnodes; i++)
        if (!m->nodes[i].host || m->nodes[i].port < 1 || m->nodes[i].port > 65535)
            abort();
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    redisReader *rd = redisReaderCreate();
    redisReaderFeed(rd, (const char *)data, size);
    for (int i = 0; i < 4; i++) {
        void *r = NULL;
        if (redisReaderGetReply(rd, &r) != REDIS_OK || !r)
            break;
        baton__slot_map m;
        char err[128];
        if (baton__slot_map_from_slots(r, "seed", &m, err, sizeof err) == BATON_OK)
            check(&m);
        baton__slot_map_free(&m);
        if (baton__slot_map_from_shards(r, "seed", i % 2 == 1, &m, err, sizeof err) == BATON_OK)
            check(&m);
        baton__slot_map_free(&m);
        sentinel_replies(r);
        freeReplyObject(r);
    }
    redisReaderFree(rd);
    /* the same bytes as a redirection's text */
    char *msg = malloc(size + 1);
    if (msg) {
        memcpy(msg, data, size);
        msg[size] = '\0';
        bool ask;
        int slot, port;
        char host[64];
        if (baton__parse_redirect(msg, &ask, &slot, host, sizeof host, &port) == BATON_OK &&
            (slot < 0 || slot >= BATON__SLOTS || port < 1 || port > 65535))
            abort();
        baton__addr to;
        if (baton__sentinel_switch(msg, size, "mymaster", &to) == BATON_OK)
            check_addr(&to);
        free(msg);
    }
    return 0;
}
