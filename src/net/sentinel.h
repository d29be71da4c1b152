/*
 * Private to baton's core: decoding what Sentinel and a node say about who is master
 * (sentinel.c). Pure functions: no connection, no lock; every reply is checked element by
 * element, since it comes from the network.
 */
#ifndef BATON_CORE_SENTINEL_H
#define BATON_CORE_SENTINEL_H

#include "net.h"

struct redisReply;

#define BATON__HOST_LEN 256

typedef struct baton__addr {
    char host[BATON__HOST_LEN];
    int port;
} baton__addr;

/* A SENTINEL GET-MASTER-ADDR-BY-NAME reply: [host, port]. BATON_OK; BATON_ENOTHELD when the
 * sentinel does not know the master (a nil reply); BATON_EPROTO when malformed. */
int baton__sentinel_master_addr(const struct redisReply *r, baton__addr *out);

/* What ROLE says a node is. */
typedef enum baton__role {
    BATON__ROLE_UNKNOWN,
    BATON__ROLE_MASTER,
    BATON__ROLE_REPLICA,
    BATON__ROLE_SENTINEL
} baton__role;
/* Decodes a ROLE reply; for a replica, *master (may be NULL) is the master it follows.
 * Anything malformed is BATON__ROLE_UNKNOWN. */
baton__role baton__role_of(const struct redisReply *r, baton__addr *master);

/* A +switch-master message: "<name> <old-host> <old-port> <new-host> <new-port>". BATON_OK
 * when it is about master `name` (the new address in *to), BATON_EINVAL when about another
 * master, BATON_EPROTO when malformed. */
int baton__sentinel_switch(const char *payload, size_t len, const char *name, baton__addr *to);

/* A SENTINEL SENTINELS reply (a list of flat field maps): the other sentinels' addresses,
 * at most max of them, into out; returns how many, or -1 when malformed. */
int baton__sentinel_peers(const struct redisReply *r, baton__addr *out, int max);

#endif /* BATON_CORE_SENTINEL_H */
