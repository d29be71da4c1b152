/*
 * Which process a client belongs to. fork() copies a client into the child: its memory,
 * its sockets (shared with the parent's), its owner ids, but none of its threads. A child
 * that used it would speak on the parent's connections and, under the parent's owner ids,
 * could renew or release the parent's holds; its mutexes may even be copied in a locked
 * state. So a client belongs to the process that opened it: a fork handler counts the
 * forks this process came out of, a client remembers the count at open, and every call on
 * a client from a later generation is refused (BATON_ENOTSUP) before it touches anything.
 * Closing it in the child only closes the child's copies of its descriptors and frees its
 * memory: no thread is joined, no mutex is locked or destroyed, nothing is sent.
 */
#include "client_fields.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

static atomic_uint generation; /* forks between the first process and this one */
static pthread_once_t installed = PTHREAD_ONCE_INIT;

static void on_fork_child(void)
{
    atomic_fetch_add_explicit(&generation, 1, memory_order_relaxed);
}

static void install(void)
{
    /* Fails only without memory; forks are then not told apart, as before this file. */
    (void)pthread_atfork(NULL, NULL, on_fork_child);
}

unsigned baton__process_generation(void)
{
    pthread_once(&installed, install);
    return atomic_load_explicit(&generation, memory_order_relaxed);
}

bool baton__client_forked(const baton_client *c)
{
    return c && c->generation != atomic_load_explicit(&generation, memory_order_relaxed);
}

int baton__client_enter(baton_client *c)
{
    int st = c ? baton__live_state(c, BATON__MAGIC_CLIENT) : BATON__LIVE_OPEN;
    /* closing: as before, the call runs into the cancellation (BATON_ECANCELED) */
    if (st != BATON__LIVE_OPEN && st != BATON__LIVE_CLOSING)
        return baton__misuse(BATON_ECLOSED,
                             "client %p: not an open client (used after "
                             "baton_client_close?)",
                             (void *)c);
    baton__clear_error(c);
    if (baton__client_forked(c))
        return baton__fail(c, BATON_ENOTSUP,
                           "this client was opened by process %ld before a fork(); a client "
                           "serves only the process that opened it: open another in this one",
                           (long)c->pid);
    return BATON_OK;
}
