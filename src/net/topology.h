/*
 * Private to the core: where commands go (topology.c). On one server: its address. Under
 * Sentinel: the master the sentinels name, checked with ROLE by every new connection,
 * looked up again every second (Redisson's scanInterval) and at once when a connection
 * fails or a node answers READONLY or is not master. A change is one event (conn.h,
 * BATON__EV_MASTER) that the pool, the dispatcher and the watchdog all hear.
 */
#ifndef BATON_CORE_TOPOLOGY_H
#define BATON_CORE_TOPOLOGY_H

#include "net.h"

/* Under Sentinel: asks the sentinels for the master once (BATON_ECONN when none can say),
 * then starts the thread that keeps looking. Nothing to do for one server. */
int baton__topology_start(baton_client *c);
/* Stops the thread (no event fires after it returns; a redirection's pause ends at once).
 * The map and the pools stay until baton__topology_free, which comes after every thread
 * that routes (the watchdog's, the dispatcher's) has ended. */
void baton__topology_stop(baton_client *c, bool forked);
/* Stops the thread if it still runs and frees (forked: only memory). */
void baton__topology_free(baton_client *c, bool forked);
/* The address a new data connection goes to, and the generation of that answer (it rises
 * with every change of master; 0 for one server). host holds at least 256 bytes. */
void baton__topology_target(baton_client *c, char *host, size_t hostlen, int *port, uint64_t *gen);
/* The current generation (see above). */
uint64_t baton__topology_gen(baton_client *c);
/* Something suggests the master moved (a failed connection, READONLY, a node that is not
 * master): look again now, without waiting for the next second. Never blocks. */
void baton__topology_kick(baton_client *c);

/* ------------------------------- Cluster ---------------------------------------------- */

struct baton__pool;

/* Whether the client talks to a Cluster (redis+cluster://). */
bool baton__topology_cluster(const baton_client *c);
/* The pool of the master serving slot (slot < 0: any master); NULL when no node serves it
 * as far as the client knows (the map is being read again). */
struct baton__pool *baton__topology_slot_pool(baton_client *c, int slot);
/* The pool of a node by address, made on first sight (a redirection's target); NULL only
 * without memory. */
struct baton__pool *baton__topology_node_pool(baton_client *c, const char *host, int port);
/* A MOVED reply: slot belongs to `to` now. The map takes it at once, and is read again in
 * the background; the change is then announced (BATON__EV_MASTER). */
void baton__topology_moved(baton_client *c, int slot, struct baton__pool *to);
/* TRYAGAIN, CLUSTERDOWN: asks for a new map and waits until it differs from generation gen
 * (baton__topology_cluster_gen) or the deadline: the bounded back-off of a redirection. */
bool baton__topology_wait_change(baton_client *c, uint64_t gen, int64_t deadline_us);
/* (It returns false once the client is closing: the caller gives up at once.) */
uint64_t baton__topology_cluster_gen(baton_client *c);
/* The pools of the masters that serve slots now, up to max; returns how many. */
size_t baton__topology_masters(baton_client *c, struct baton__pool **out, size_t max);

#endif /* BATON_CORE_TOPOLOGY_H */
