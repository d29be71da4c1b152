/*
 * Private to the core: where commands go (topology.c). On one server: its address. Under
 * Sentinel: the master the sentinels name, checked with ROLE by every new connection,
 * looked up again every second (Redisson's scanInterval) and at once when a connection
 * fails or a node answers READONLY or is not master. A change is one event (conn.h,
 * BATON__EV_MASTER) that the pool, the dispatcher and the watchdog all hear.
 */
#ifndef BATON_CORE_TOPOLOGY_H
#define BATON_CORE_TOPOLOGY_H

#include "internal.h"

/* Under Sentinel: asks the sentinels for the master once (BATON_ECONN when none can say),
 * then starts the thread that keeps looking. Nothing to do for one server. */
int baton__topology_start(baton_client *c);
/* Stops the thread and frees (forked: only memory). */
void baton__topology_stop(baton_client *c, bool forked);
/* The address a new data connection goes to, and the generation of that answer (it rises
 * with every change of master; 0 for one server). host holds at least 256 bytes. */
void baton__topology_target(baton_client *c, char *host, size_t hostlen, int *port, uint64_t *gen);
/* The current generation (see above). */
uint64_t baton__topology_gen(baton_client *c);
/* Something suggests the master moved (a failed connection, READONLY, a node that is not
 * master): look again now, without waiting for the next second. Never blocks. */
void baton__topology_kick(baton_client *c);

#endif /* BATON_CORE_TOPOLOGY_H */
