/*
 * Private to baton: the decoder of lua/inspect.lua's reply (src/inspect/inspect.c), apart so
 * that tests/fuzz/fuzz_inspect.c can feed it whatever a server might answer.
 */
#ifndef BATON_INSPECT_DECODE_H
#define BATON_INSPECT_DECODE_H

#include <baton/inspect.h>

struct redisReply;

/* Fills ins (zeroed, size and name set by the caller) from the script's reply. Returns
 * BATON_OK, BATON_EPROTO (not a snapshot) or BATON_ENOMEM; on failure ins may hold part of
 * what was decoded, which baton_inspection_free() frees. */
int baton__inspect_decode(baton_inspection *ins, const struct redisReply *r);

#endif /* BATON_INSPECT_DECODE_H */
