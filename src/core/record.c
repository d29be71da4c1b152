/*
 * The client's record: baton_client:{<client id>} = "host:pid" of the process, so that an
 * operator's status (baton_inspect) names the process of every holder and queued waiter
 * of every kind, whose owner field begins with the client id. It is written once per
 * client, not beside every hold: at the client's first hold (or first wait in a fair
 * lock's queue or a plain lock's line), again when a hold's lease would outlive it, by the
 * watchdog while it keeps holds (pipelined with a renewal, no round trip of its own: the
 * watchdog never waits on it), and after the server restarted or the master changed (it
 * may have gone with them). Its life is at least RECORD_LIFE_LEASES watchdog leases; it
 * ends by itself when the process stops.
 *
 * It is advice, never a condition: a server that refuses the write (an ACL without the
 * key, maxmemory) leaves holders without a host, and the write is tried again after one
 * life.
 */
#include "internal.h"

#include "client_fields.h"
#include "conn.h"
#include "topology.h"

#include <hiredis/hiredis.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keys.h"

#define RECORD_PREFIX BATON__KEY_CLIENT_RECORD

/* The record lives this many watchdog leases (or the longest fixed lease taken, if
 * longer); it is written again once less than one lease of it is left. */
#define RECORD_LIFE_LEASES 3

static void forget(baton_client *c, int event, void *arg)
{
    (void)event;
    (void)arg;
    atomic_store(&c->record_until_us, 0); /* the server may have lost it: write it again */
}

bool baton__client_record_due(baton_client *c, int64_t lease_ms, const char *argv[5],
                              char key[BATON__RECORD_KEY_LEN], char life[24])
{
    if (baton__client_forked(c))
        return false;
    int64_t wd_ms = baton__watchdog_lease(c);
    if (lease_ms < 0)
        lease_ms = wd_ms;
    int64_t now = baton__now_us();
    int64_t until = atomic_load(&c->record_until_us);
    if (until >= now + (lease_ms > wd_ms ? lease_ms : wd_ms) * 1000)
        return false; /* it outlives this hold */
    int64_t life_ms = RECORD_LIFE_LEASES * wd_ms;
    if (life_ms < lease_ms + wd_ms)
        life_ms = lease_ms + wd_ms;
    /* One thread writes; the others go on (until is set before the write, so that a
     * refused write is tried again only after one life). */
    if (!atomic_compare_exchange_strong(&c->record_until_us, &until, now + life_ms * 1000))
        return false;
    if (!atomic_exchange(&c->record_hooked, true))
        (void)baton__epoch_hook_add(c, forget, NULL);
    snprintf(key, BATON__RECORD_KEY_LEN, RECORD_PREFIX "{%s}", c->id);
    snprintf(life, 24, "%lld", (long long)life_ms);
    argv[0] = "SET";
    argv[1] = key;
    argv[2] = c->origin;
    argv[3] = "PX";
    argv[4] = life;
    return true;
}

void baton__client_record_keep(baton_client *c, int64_t lease_ms)
{
    /* On a Cluster the record's slot is on any master, maybe not the one the caller just
     * reached: a call there could cost the caller a command timeout on a node its own
     * names never touch (cluster_faults). There the watchdog's pipelined write keeps it,
     * when a renewal batch goes to its node. */
    if (baton__topology_cluster(c))
        return;
    const char *argv[5];
    char key[BATON__RECORD_KEY_LEN], life[24];
    if (!baton__client_record_due(c, lease_ms, argv, key, life))
        return;
    redisReply *r = NULL;
    if (baton__query_argv(c, 5, argv, &r) == BATON_OK)
        freeReplyObject(r);
    else
        baton__clear_error(c); /* advice: the caller's outcome is not this write's */
}

char *baton__client_record_key(const char *owner)
{
    /* the client id is a UUID: up to the first ':' (a write hold's field has two) */
    const char *colon = owner ? strchr(owner, ':') : NULL;
    if (!colon || colon == owner || colon - owner > 40)
        return NULL;
    return baton__asprintf(RECORD_PREFIX "{%.*s}", (int)(colon - owner), owner);
}
