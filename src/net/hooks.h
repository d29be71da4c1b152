/*
 * Private to baton: how the transport (src/net) waits. The transport knows no floor above
 * it: where it must wait (for a socket, for a pooled connection to come back, for a moment
 * while a Cluster's map changes) it asks through this table, which the engine
 * (src/engine) installs, as hiredis's reader leaves reading to whichever loop set its
 * ev.addRead, or SQLite's pager reads through id->pMethods. Until a table is installed
 * every caller is a thread, which blocks on its own.
 */
#ifndef BATON_NET_HOOKS_H
#define BATON_NET_HOOKS_H

#include "util.h"

typedef struct baton__wait_hooks {
    /* Whether the caller runs on an asynchronous operation's fiber (which must yield, not
     * block its engine). */
    bool (*on_fiber)(void);
    /* Yields until fd allows events (1) or deadline_us passes (0); -1: the caller is not on
     * a fiber (or memory ran out) and polls on its own. key: the connection's serial (0: a
     * socket still connecting). */
    int (*wait_fd)(int fd, short events, int64_t deadline_us, uint64_t key);
    /* On a fiber: yields until until_us, 0; -1: the caller sleeps as a thread. */
    int (*sleep_until)(int64_t until_us);
    /* Connections handed back to c's pools so far (a fiber waits for this to move). */
    uint64_t (*freed)(baton_client *c);
    /* On a fiber: yields until a connection of pool came back after seen (1), or
     * deadline_us (0). */
    int (*wait_pool)(baton_client *c, const void *pool, uint64_t seen, int64_t deadline_us);
    /* A connection went back to pool, or closed: a fiber waiting for one runs again (all of
     * them when all). */
    void (*conn_freed)(baton_client *c, const void *pool, bool all);
    /* The running fiber as a token for wake (NULL: the caller is a thread). */
    void *(*fiber_self)(void);
    /* On a fiber: yields until wake(its token) (1), fd allows events (1; fd < 0: no socket)
     * or deadline_us (0). A wake that came while it was
     * not parked makes the next park return at once. -1: not on a fiber (or memory ran out):
     * the caller waits on its own. Spurious returns (1) happen: the caller looks again. */
    int (*park)(int fd, short events, int64_t deadline_us, uint64_t key);
    /* From any thread: the fiber `token` parked runs again (or its next park returns). */
    void (*wake)(void *token);
    /* On a fiber: lets the fibers ready now run first (their requests join this one's
     * write); nothing on a thread. */
    void (*yield_turn)(void);
} baton__wait_hooks;

/* Installs h (static storage; the same table every time) for every connection of the
 * process. */
void baton__net_install(const baton__wait_hooks *h);
/* The table installed, or one under which every caller is a thread. Never NULL. */
const baton__wait_hooks *baton__net_waits(void);

#endif /* BATON_NET_HOOKS_H */
