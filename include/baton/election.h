/*
 * Leader election (etcd's concurrency.Election, Curator's LeaderLatch): processes campaign
 * for the leadership of NAME; one at a time leads, with a value it may change (proclaim)
 * and a term that rises with every new leader (a fencing token: a resource that remembers
 * the highest term it has seen refuses a deposed leader's late write). Anyone may read the
 * current leader and follow every change in order (observe).
 *
 * Leadership is a lock: the election's name is a Redisson lock hash (a Redisson client sees
 * the leader as the lock's holder), taken with the lock's machinery: a lease renewed by the
 * client's watchdog (or a fixed one), standbys waiting on the lock's unlock channel (woken
 * at once by a resign, at the dead leader's lease end otherwise), the term the lock's
 * fencing token, a loss told by a lost callback and descriptor. Beside it, in the same hash
 * slot (every key carries the {NAME} tag): the leader's record baton_election:{NAME} (owner,
 * term, value, host:pid, since), the change log baton_election_log:{NAME} (a stream of the
 * last 1000 changes: elected, proclaimed, resigned, expired, each with the server's time)
 * and the channel baton_election__channel:{NAME}. docs/election.md has the layout.
 *
 * The leadership belongs to the handle, not to a thread: any thread may resign or proclaim.
 * A process that campaigns twice at once for one name uses two handles.
 *
 * Threads: a handle may be used from any thread; campaign, resign and proclaim take turns
 * on it (a thread waits for its turn; an asynchronous one finding another in progress
 * completes with BATON_EINVAL: one campaign at a time per handle); baton_election_observe_next()
 * must not run on two threads at once for one handle. baton_election_close() must not run
 * concurrently with other calls on it.
 */
#ifndef BATON_ELECTION_H
#define BATON_ELECTION_H

#include <baton/async.h>
#include <baton/client.h>
#include <baton/handle.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct baton_election baton_election;

/* The longest value a leader may announce, in bytes. */
#define BATON_ELECTION_MAX_VALUE 4096

/* A leader as the server records it. */
typedef struct baton_leader {
    int64_t term;     /* the leader's term (fencing token, >= 1); 0: no leader */
    int64_t since_ms; /* the server's time (ms since the epoch) when it was elected */
    int64_t pid;      /* the leading process's pid */
    char host[256];   /* the leading process's host name */
    char value[BATON_ELECTION_MAX_VALUE + 1]; /* the value it announced (NUL-terminated) */
} baton_leader;

/* What an observed change was. */
typedef enum baton_election_change {
    BATON_ELECTION_ELECTED = 1,    /* a new leader (a new term) */
    BATON_ELECTION_PROCLAIMED = 2, /* the leader changed its value */
    BATON_ELECTION_RESIGNED = 3,   /* the leader resigned */
    BATON_ELECTION_EXPIRED = 4,    /* the leader's lease ran out (it died or was cut off) */
} baton_election_change;

/* One change, in the order the server made them. */
typedef struct baton_election_event {
    baton_election_change change;
    int64_t time_ms;     /* the server's time of the change (ms since the epoch); for
                            EXPIRED, when the expiry was found (at most about one lease
                            after it happened) */
    baton_leader leader; /* the leader concerned: the new one, or the one whose term ended */
} baton_election_event;

/*
 * Opens a handle on the election NAME (1 to BATON_MAX_NAME_LEN bytes). Sends nothing. The
 * handle belongs to client c and must be closed before it. Returns BATON_OK; BATON_EINVAL
 * (NULL argument, bad name); BATON_ENOTSUP (a forked copy of the client); BATON_ENOMEM.
 */
BATON_API int baton_election_open(baton_client *c, const char *name, baton_election **out);
/* As baton_election_open with options of its own (handle.h; NULL: as the plain open): the
 * election reads watchdog_ms (a leader's lease without one of its own, renewed every third
 * of it: a dead leader is replaced within it) and recheck_ms (how often a watcher looks
 * whatever it hears); fair_wait_ms set is BATON_EINVAL. */
BATON_API int baton_election_open_opts(baton_client *c, const char *name,
                                       const baton_handle_options *opts, baton_election **out);

/*
 * Closes the handle. A leadership still held is not resigned: its renewal stops and it ends
 * by its lease (standbys take over then); resign first for an immediate hand-over. NULL is
 * a no-op.
 */
BATON_API void baton_election_close(baton_election *e);

/*
 * Campaigns: waits until this handle leads (or wait_ms passes), then announces value
 * (NULL: ""; at most BATON_ELECTION_MAX_VALUE bytes) as the new term's value. lease_ms as
 * a lock's: BATON_LEASE_WATCHDOG (renewed every watchdog_ms / 3 until resigned or lost) or
 * a fixed lease in ms (a lease of -1, BATON_WAIT_FOREVER, is refused as a swapped argument:
 * common.h). A handle that already leads only proclaims value.
 *
 * Blocks until leader, wait_ms (0: one attempt; BATON_WAIT_FOREVER) or a server error.
 * Returns BATON_OK; BATON_ETIMEDOUT (another leads; nothing left behind); BATON_EINVAL (bad
 * wait, lease or value; nothing sent); BATON_ECANCELED (baton_client_cancel_waits);
 * BATON_ENOTSYNCED (sync_replicas not met: not leading); BATON_ECONN; BATON_EPROTO;
 * BATON_EPERM.
 */
BATON_API int baton_election_campaign(baton_election *e, const char *value, int64_t wait_ms,
                                      int64_t lease_ms);

/*
 * Starts baton_election_campaign(e, value, wait_ms, lease_ms) on the client's engine
 * (include/baton/async.h): returns at once, and fn(e, NULL, rc, arg) runs once when it
 * completes, with the campaign's results: BATON_OK (this handle leads; its term is
 * baton_election_term's), BATON_ETIMEDOUT, BATON_ECANCELED (baton_op_cancel,
 * baton_election_cancel_waits, baton_client_cancel_waits, or a close of the handle or the
 * client while it waited: no hold and no reservation left), BATON_EINVAL (another campaign,
 * proclaim or resign of this handle was in progress), or the campaign's errors. value must
 * stay valid until the callback. Returns BATON_OK (started; *op, if op is not NULL, is the
 * operation), or, with nothing started and fn never called, BATON_EINVAL (NULL handle or
 * fn, bad wait, lease or value), BATON_ENOTSUP (forked copy of the client), BATON_ECANCELED
 * (the client is closing), BATON_ENOMEM.
 */
BATON_API int baton_election_campaign_async(baton_election *e, const char *value, int64_t wait_ms,
                                            int64_t lease_ms, baton_async_fn fn, void *arg,
                                            baton_op **op);

/*
 * Starts baton_election_resign(e); completes with its results. Like a lock's release, it is
 * not cancelled (baton_op_cancel, cancel_waits and close let it run). Returns as
 * baton_election_campaign_async().
 */
BATON_API int baton_election_resign_async(baton_election *e, baton_async_fn fn, void *arg,
                                          baton_op **op);

/*
 * Starts baton_election_proclaim(e, value); completes with its results (BATON_ENOTHELD when
 * this handle does not lead). value must stay valid until the callback. A proclaim is one
 * round trip, not a wait: cancelled before it runs, it completes with BATON_ECANCELED and
 * changes nothing. Returns as baton_election_campaign_async().
 */
BATON_API int baton_election_proclaim_async(baton_election *e, const char *value, baton_async_fn fn,
                                            void *arg, baton_op **op);

/*
 * Ends this handle's leadership at once: the lock is released (a standby takes over within
 * a round trip) and RESIGNED is logged for observers, in one script. Returns BATON_OK;
 * BATON_ENOTHELD (not leading: never elected, resigned, or the lease ran out);
 * BATON_EINVAL; BATON_ECONN; BATON_EPROTO; BATON_EPERM.
 */
BATON_API int baton_election_resign(baton_election *e);

/*
 * Changes the leader's value without giving up the leadership, only while this handle
 * still leads (checked by the server in the same script). Observers see PROCLAIMED.
 * Returns BATON_OK; BATON_ENOTHELD (not leading); BATON_EINVAL (value too long);
 * BATON_ECONN; BATON_EPROTO; BATON_EPERM.
 */
BATON_API int baton_election_proclaim(baton_election *e, const char *value);

/*
 * *term = this handle's term while it leads (asks nothing of the server). Returns
 * BATON_OK; BATON_ENOTHELD (not leading, or the leadership was found lost); BATON_EINVAL.
 */
BATON_API int baton_election_term(baton_election *e, int64_t *term);

/*
 * Reads the current leader into *out (out->term == 0: nobody leads now). A leader whose
 * lease ran out is found here: its record is removed and EXPIRED logged for observers.
 * Returns BATON_OK, BATON_EINVAL, BATON_ECONN, BATON_EPROTO.
 */
BATON_API int baton_election_leader(baton_election *e, baton_leader *out);

/*
 * The next change of the election, in order. The first call on a handle returns the last
 * change logged (the current state, as etcd's Observe starts with the current leader) or,
 * if none was ever logged, waits for the first; each later call returns the change after
 * the previous one returned, so none is skipped (the log keeps the last 1000: an observer
 * further behind resumes at the oldest kept). A leader's expiry is found within about its
 * remaining lease (or recheck_ms) by the waiting observer itself. Once
 * baton_election_observe_fd() or baton_election_set_observer() was called, it reads the
 * changes the handle's observation queued.
 *
 * Blocks until a change, timeout_ms (0: just look; BATON_WAIT_FOREVER) or an error.
 * Returns BATON_OK; BATON_ETIMEDOUT; BATON_ECANCELED; BATON_EINVAL; BATON_ECONN;
 * BATON_EPROTO.
 */
BATON_API int baton_election_observe_next(baton_election *e, int64_t timeout_ms,
                                          baton_election_event *ev);

/*
 * *fd = a descriptor, owned by the handle, readable while a change waits for
 * baton_election_observe_next() (which then returns at once), for programs built around
 * poll(). The first call starts the handle's observation on the client's engine (its one
 * thread for every asynchronous operation: observing handles cost no thread each; the
 * first change it queues is the last one logged, as for observe_next); from then on
 * observe_next reads what it queued (32 changes at most: the observation pauses while the
 * queue is full, and resumes where it stopped; baton_client_cancel_waits does not end
 * it). Returns BATON_OK, BATON_EINVAL, BATON_ENOMEM, BATON_ECANCELED (the client is
 * closing).
 */
BATON_API int baton_election_observe_fd(baton_election *e, int *fd);

/*
 * Registers fn(e, ev, arg) to run for every change, in order, on the client's engine thread
 * (the handle's observation, started if need be, as by baton_election_observe_fd); changes
 * then go to fn, not to the queue. fn must not block for long (every asynchronous
 * operation of the client waits behind it) nor call baton_election_close(),
 * baton_election_observe_next() or this function; it may call other baton functions.
 * NULL unregisters (changes queue again). Neither this function nor observe_next may be
 * called from a completion callback run on baton's thread (BATON_CALLBACKS_BATON) while
 * an observer is set. Returns BATON_OK, BATON_EINVAL, BATON_ENOMEM, BATON_ECANCELED.
 */
BATON_API int baton_election_set_observer(baton_election *e,
                                          void (*fn)(baton_election *, const baton_election_event *,
                                                     void *),
                                          void *arg);

/*
 * Registers fn(e, arg) to run when this handle's leadership is found lost (renewal found
 * it taken or expired, the server restarted, a lease ran out while the server could not
 * be reached), as baton_lock_set_lost_handler(); fn runs on a library thread, must not
 * block nor call baton on this handle. NULL unregisters. Returns BATON_OK, BATON_EINVAL.
 */
BATON_API int baton_election_set_lost_handler(baton_election *e,
                                              void (*fn)(baton_election *, void *), void *arg);

/*
 * *fd = a descriptor, owned by the handle, readable once the leadership is found lost (as
 * for the lost handler) until the next campaign succeeds. Returns BATON_OK, BATON_EINVAL,
 * BATON_ENOMEM.
 */
BATON_API int baton_election_lost_fd(baton_election *e, int *fd);

/*
 * Cancels the waits through this handle, as baton_lock_cancel_waits() does for a lock:
 * a campaign waiting to lead returns BATON_ECANCELED (no hold, no reservation left) and a
 * blocked baton_election_observe_next() returns BATON_ECANCELED; waits through other
 * handles go on. Waits that start after the call are not affected. Never blocks. Returns
 * BATON_OK; BATON_EINVAL (NULL); BATON_ENOTSUP (a forked copy of the client).
 */
BATON_API int baton_election_cancel_waits(baton_election *e);

/*
 * *n = how many entries of the election's change log this handle's observation skipped
 * because they are not changes baton logs (an entry another writer added to
 * baton_election_log:{NAME}, or one this version cannot read): observation never ends on
 * one, it goes on with the next entry. Returns BATON_OK; BATON_EINVAL (NULL argument).
 */
BATON_API int baton_election_skipped(baton_election *e, int64_t *n);

/* Returns the election's name (borrowed; valid until close), or "" for NULL. */
BATON_API const char *baton_election_name(const baton_election *e);

#ifdef __cplusplus
}
#endif

#endif /* BATON_ELECTION_H */
