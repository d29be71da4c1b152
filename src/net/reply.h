/*
 * Private to baton's core: small readers of server replies shared by the decoders of
 * topology and Sentinel replies (reply.c). Each checks the element it is given, so a
 * malformed reply is an answer of "not that", never a crash.
 */
#ifndef BATON_CORE_REPLY_H
#define BATON_CORE_REPLY_H

#include "net.h"

struct redisReply;

/* True for a string or status reply with text. */
bool baton__reply_is_str(const struct redisReply *r);
/* A TCP port (1..65535) from n decimal digits, or -1. */
int baton__port_from(const char *s, size_t n);
/* A TCP port from an integer or a string reply, or -1. */
int baton__reply_port(const struct redisReply *r);
/* The value of `key` in a RESP2 flat map ([k1, v1, k2, v2, ...]), or NULL. */
const struct redisReply *baton__reply_field(const struct redisReply *map, const char *key);

#endif /* BATON_CORE_REPLY_H */
