/* Fuzz target: whatever a cluster node answers to CLUSTER SLOTS or CLUSTER SHARDS, and
 * whatever text follows MOVED or ASK, the decoders accept or reject it without crashing,
 * and an accepted slot map only names nodes it holds, each with a host and a valid port. */
#include "slots.h"

#include <hiredis/hiredis.h>

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

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
        free(msg);
    }
    return 0;
}
