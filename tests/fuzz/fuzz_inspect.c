/* Fuzz target: whatever comes back for lua/inspect.lua's snapshot, baton_inspect()'s
 * decoder accepts or rejects it without crashing, and what it accepts is well formed: a
 * known kind with its name, a Redis type, holders and waiters that each have an owner, a
 * host only with a positive pid. Partial results of a rejected reply are freed. */
#include "../../src/inspect/decode.h"

#include <baton/baton.h>

#include <hiredis/hiredis.h>

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static void check(const baton_inspection *ins)
{
    if (ins->kind > BATON_OBJECT_OTHER || !ins->kind_name || !ins->redis_type)
        abort();
    for (size_t i = 0; i < ins->n_holders; i++) {
        const baton_inspect_holder *h = ins->holders[i];
        if (!h || !h->owner || h->size != sizeof *h || (h->host && h->pid <= 0) ||
            (!h->host && h->pid != 0))
            abort();
    }
    for (size_t i = 0; i < ins->n_queue; i++)
        if (!ins->queue[i] || !ins->queue[i]->owner)
            abort();
    for (size_t i = 0; i < ins->n_line; i++)
        if (!ins->line[i] || !ins->line[i]->owner || ins->line[i]->has_deadline)
            abort();
    for (size_t i = 0; i < ins->n_semaphore_line; i++) {
        const baton_inspect_waiter *w = ins->semaphore_line[i];
        if (!w || !w->owner || w->has_deadline || w->permits < -1)
            abort();
    }
    if (ins->reserved &&
        (!ins->reserved->owner || ins->reserved->permits < -1 ||
         (ins->reserved->has_deadline && ins->reserved->deadline_ms < ins->server_time_ms)))
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
        baton_inspection *ins = calloc(1, sizeof *ins);
        if (!ins)
            abort();
        ins->size = sizeof *ins;
        if (baton__inspect_decode(ins, r) == BATON_OK)
            check(ins);
        baton_inspection_free(ins);
        freeReplyObject(r);
    }
    redisReaderFree(rd);
    return 0;
}
