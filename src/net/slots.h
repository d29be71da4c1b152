/*
 * Private to baton's core: Redis Cluster's slot arithmetic and the decoding of topology
 * replies and redirections (slots.c). Pure functions: no connection, no lock.
 */
#ifndef BATON_CORE_SLOTS_H
#define BATON_CORE_SLOTS_H

#include "net.h"

struct redisReply;

#define BATON__SLOTS 16384
/* The most nodes a slot map keeps (masters and replicas): far above any real cluster. */
#define BATON__MAX_NODES 4096
/* A slot no node serves. */
#define BATON__NO_NODE UINT16_MAX

/* CRC16-CCITT (XMODEM), Redis Cluster's key hash. */
uint16_t baton__crc16(const char *buf, size_t len);
/* The slot of a key: CRC16 of its hash tag (the bytes between the first '{' and the next
 * '}', when not empty) or of the whole key, modulo 16384. */
int baton__key_slot(const char *key, size_t len);
/* BATON_OK if every key and channel baton derives from name share one slot: a name with no
 * '{' (baton adds the braces), or one whose first '{' opens a non-empty hash tag.
 * BATON_EINVAL otherwise ("a{b", "{}x": Redisson #1098). */
int baton__check_cluster_name(const char *name);

typedef struct baton__cluster_node {
    char *host;  /* where to connect: the announced endpoint, or the asked node's host */
    int port;    /* the plain or the TLS port, as asked */
    char *id;    /* the node's 40-hex id, or NULL when the reply had none */
    bool master; /* serves at least one range as master */
} baton__cluster_node;

typedef struct baton__slot_map {
    uint16_t owner[BATON__SLOTS]; /* index in nodes of each slot's master, or BATON__NO_NODE */
    baton__cluster_node *nodes;   /* masters and replicas, each (host, port) once */
    size_t nnodes;
} baton__slot_map;

/* Decodes a CLUSTER SLOTS reply (every version) or a CLUSTER SHARDS reply (7.0+; tls: take
 * each node's tls-port) into *m. A node announced without an address ("" or "?") is taken
 * to live at seed_host, the host of the node that answered. Shard nodes that are not
 * "online" are left out; a shard without a live master leaves its slots uncovered.
 * Returns BATON_OK, BATON_EPROTO (err says what was malformed; *m is then empty), never
 * crashes on any reply. Free with baton__slot_map_free. */
int baton__slot_map_from_slots(const struct redisReply *r, const char *seed_host,
                               baton__slot_map *m, char *err, size_t errlen);
int baton__slot_map_from_shards(const struct redisReply *r, const char *seed_host, bool tls,
                                baton__slot_map *m, char *err, size_t errlen);
void baton__slot_map_free(baton__slot_map *m);

/* Decodes an error reply "MOVED <slot> <host>:<port>" or "ASK <slot> <host>:<port>" (host
 * may be an IPv6 address, bracketed or not, or empty: the answering node's own host).
 * Returns BATON_OK, BATON_EINVAL (not a redirection), BATON_EPROTO (malformed). */
int baton__parse_redirect(const char *msg, bool *ask, int *slot, char *host, size_t hostlen,
                          int *port);

#endif /* BATON_CORE_SLOTS_H */
