/*
 * Leader election on the lock's machinery. The leadership is a plain lock (lock.c) taken
 * for an owner of the handle's own (a baton_owner, so that any thread may resign): its
 * lease, watchdog renewal, fencing token, lost signals and the wait on its unlock channel
 * are the lock's. What the election adds is a record of the leader (value, term, origin,
 * since) and a log of changes, written by scripts that check the lock hash first, so that a
 * deposed leader can never write either:
 *
 *   campaign  = lock acquire, then election_proclaim('elect') with the new fencing token;
 *   proclaim  = election_proclaim('proclaim');
 *   resign    = election_resign: the lock release (through lockbase's release protocol, so
 *               the watchdog goes first and a lost reply is retried once) plus RESIGNED;
 *   observe   = election_observe: the log after a cursor, and an expired leader found and
 *               logged; the observer waits on the election's channel, at most until the
 *               leader's lease would end (or recheck_ms), then looks again.
 *
 * The handle is a baton__object (core/object.h: its keys from election_kind's table); the
 * asynchronous verbs hand the engine the blocking ones (baton__op_start), and observe_fd
 * and set_observer run the observation as an operation of the library's own on the same
 * engine (baton__op_spawn), not a thread per handle.
 */
#define _GNU_SOURCE
#include "../core/prim.h"
#include "../lockbase/lockbase.h"

#include <hiredis/hiredis.h>

#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------- keys and scripts (one place) ------------------------ */

#define RECORD_PREFIX BATON__KEY_ELECTION          /* the leader's record (hash) */
#define LOG_PREFIX BATON__KEY_ELECTION_LOG         /* the change log (stream) */
#define CHANNEL_PREFIX BATON__KEY_ELECTION_CHANNEL /* observers' wake-ups (the base's) */
#define UNLOCK_LATCH_PREFIX BATON__KEY_UNLOCK_LATCH
#define LOG_CAP "1000"
#define LOG_BATCH "64"

/* ------------------------------- the handle ------------------------------------------ */

/* The base's name is the lock hash (the leadership), its channel the observers'. */
struct baton_election {
    baton__object base;
    char *record_key, *log_key, *latch_pfx, *meta_key;
    baton_lock *lock;    /* the leadership: Redisson's lock hash at the name */
    baton_owner *owner;  /* whose hold it is: the handle's, not a thread's */
    pthread_mutex_t mu;  /* guards term and busy */
    pthread_cond_t turn; /* busy went false */
    bool busy;           /* a campaign, proclaim or resign has its turn (take_turn) */
    int64_t term;        /* the term this handle leads, 0: none */
    char cursor[48];     /* observe: the next log id wanted; "" before the first call */
    int64_t skipped;     /* log entries observation skipped: not a change baton logs
                            (another writer's); atomic */
    void (*lost_fn)(baton_election *, void *);
    void *lost_arg;
    /* observation on the client's engine (observe_fd, set_observer): an operation of the
     * library's own (baton__op_spawn) named by `watch`, not a thread per handle */
    struct watch {
        baton_election *e;
    } watch;
    bool watching;               /* observe_next reads the queue (under mu_q, as the rest) */
    bool running;                /* the watching operation runs */
    bool stop;                   /* close: it ends and does not start again */
    uint64_t cancels;            /* baton_election_cancel_waits calls: a wait on the queue ends */
    atomic_int in_queue;         /* threads in observe_next's queued path (not counted calls:
                                    the close of the handle, or its client's, waits for them) */
    atomic_bool closing_q;       /* the handle is closing: no thread enters the queue's wait */
    pthread_cond_t changed;      /* the queue changed */
    pthread_mutex_t mu_q;        /* guards the queue and the observer */
    baton_election_event *queue; /* QUEUE_LEN changes waiting for observe_next */
    int q_head, q_len;
    int pipe_fd[2]; /* readable while the queue holds a change */
    void (*observer)(baton_election *, const baton_election_event *, void *);
    void *observer_arg;
};

#define QUEUE_LEN 32
#define MAX_SKIPS_PER_LOOK 64 /* unreadable log entries skipped in one look */
#define WATCH_PAUSE_MS 250    /* after a server error, the watcher looks again this much later */

/* The keys beside the lock hash, derived and freed by the base. */
static size_t election_keys(baton__object *o, baton__key_spec *k)
{
    baton_election *e = (baton_election *)o;
    k[0] = (baton__key_spec){&e->record_key, RECORD_PREFIX, NULL};
    k[1] = (baton__key_spec){&e->log_key, LOG_PREFIX, NULL};
    k[2] = (baton__key_spec){&e->latch_pfx, UNLOCK_LATCH_PREFIX, ":"};
    k[3] = (baton__key_spec){&e->meta_key, BATON__KEY_LOCK_META, NULL};
    return 4;
}

/* The lock's owner field for the handle's owner. */
static void owner_field(baton_election *e, char *buf, size_t len)
{
    uint64_t prev = baton__owner_act(baton_owner_id(e->owner));
    baton__lock_owner(e->lock, buf, len);
    baton__owner_act(prev);
}

/* The lock and the owner; the mutexes first: fini destroys them whatever failed. */
static int election_init(baton__object *o, void *arg)
{
    (void)arg;
    baton_election *e = (baton_election *)o;
    e->pipe_fd[0] = e->pipe_fd[1] = -1;
    baton__mutex_init(&e->mu);
    baton__cond_init(&e->turn);
    baton__mutex_init(&e->mu_q);
    baton__cond_init(&e->changed);
    /* the lock's watchdog is the election's (its options at open, or the client's) */
    baton_handle_options lo;
    baton_handle_options_init(&lo);
    lo.watchdog_ms = o->cfg.watchdog_ms;
    int rc = baton_lock_open_opts(o->client, o->name, &lo, &e->lock);
    return rc == BATON_OK ? baton_owner_new(o->client, &e->owner) : rc;
}

static void election_fini(baton__object *o);

/* A thread waiting on the watcher's queue ends its wait (baton_election_cancel_waits). */
static void election_cancel(baton__object *o)
{
    baton_election *e = (baton_election *)o;
    baton__mutex_lock(&e->mu_q);
    e->cancels++;
    baton__cond_broadcast(&e->changed);
    baton__mutex_unlock(&e->mu_q);
}

static const baton__object_kind election_kind = {"election",
                                                 CHANNEL_PREFIX,
                                                 sizeof(baton_election),
                                                 election_keys,
                                                 election_init,
                                                 election_fini,
                                                 election_cancel,
                                                 BATON__OPT_WATCHDOG | BATON__OPT_RECHECK};

int baton_election_open(baton_client *c, const char *name, baton_election **out)
{
    return baton__object_new(c, name, &election_kind, NULL, NULL, out);
}

int baton_election_open_opts(baton_client *c, const char *name, const baton_handle_options *opts,
                             baton_election **out)
{
    return baton__object_new(c, name, &election_kind, opts, NULL, out);
}

/* What the election adds to the base, freed at close (after its operations ended). */
static void election_fini(baton__object *o)
{
    baton_election *e = (baton_election *)o;
    bool forked = baton__client_forked(o->client);
    if (!forked) { /* a child has no engine, and a mutex copied locked would stay so */
        /* A thread blocked on the queue (observe_next from another thread while the client
         * closes, which orphans this handle) is woken and let out before the queue's mutex
         * goes: no thread enters after closing_q, and those in are waited for. Those that
         * counted themselves in but saw closing_q leave without the mutex and without a
         * signal, hence the bounded waits. */
        atomic_store(&e->closing_q, true);
        baton__mutex_lock(&e->mu_q);
        e->stop = true; /* the watcher ends, and is not started again */
        e->cancels++;
        baton__cond_broadcast(&e->changed);
        while (atomic_load(&e->in_queue) > 0)
            baton__cond_wait_until(&e->changed, &e->mu_q, baton__now_us() + 1000);
        baton__mutex_unlock(&e->mu_q);
        baton__evloop_drop_handle(o->client, &e->watch);
    }
    if (e->pipe_fd[0] >= 0) {
        close(e->pipe_fd[0]);
        close(e->pipe_fd[1]);
    }
    free(e->queue);
    baton_lock_close(e->lock);
    baton_owner_free(e->owner);
    if (!forked) {
        baton__mutex_destroy(&e->mu_q);
        baton__cond_destroy(&e->changed);
        baton__mutex_destroy(&e->mu);
        baton__cond_destroy(&e->turn);
    }
}

/* baton_election_cancel_waits, baton_election_close, baton_election_name */
BATON__OBJECT_VERBS(baton_election, election_kind)
BATON__OBJECT_NAME_VERB(baton_election)

int baton_election_skipped(baton_election *e, int64_t *n)
{
    int rc = baton__object_enter_out((baton__object *)e, n, "n");
    if (rc == BATON_OK)
        *n = __atomic_load_n(&e->skipped, __ATOMIC_RELAXED);
    return rc;
}

static int enter(baton_election *e)
{
    return baton__object_enter((baton__object *)e);
}

/* enter(), and the caller's output pointer `what` is not NULL. */
static int enter_out(baton_election *e, const void *out, const char *what)
{
    return baton__object_enter_out((baton__object *)e, out, what);
}

static int not_leading(baton_election *e)
{
    return baton__fail(e->base.client, BATON_ENOTHELD, "election %s: this handle does not lead",
                       e->base.name);
}

static int check_value(baton_election *e, const char *value)
{
    if (value && strlen(value) > BATON_ELECTION_MAX_VALUE)
        return baton__fail(e->base.client, BATON_EINVAL, "election %s: value over %d bytes",
                           e->base.name, BATON_ELECTION_MAX_VALUE);
    return BATON_OK;
}

/* ------------------------------- campaign, proclaim ---------------------------------- */

/* Runs election_proclaim; BATON_OK (recorded), BATON_ENOTHELD (the server says this handle
 * does not lead) or an error. */
static int record(baton_election *e, const char *mode, const char *value, int64_t term)
{
    baton_client *c = e->base.client;
    char owner[BATON__OWNER_LEN], term_s[32];
    owner_field(e, owner, sizeof owner);
    snprintf(term_s, sizeof term_s, "%lld", (long long)term);
    const char *keys[4] = {e->base.name, e->record_key, e->log_key, e->base.channel};
    const char *args[6] = {owner,  value ? value : "",      mode,
                           term_s, baton__client_origin(c), LOG_CAP};
    redisReply *r;
    int rc = baton__script_run(c, BATON__SCRIPT(election_proclaim), 4, keys, 6, args, &r);
    if (rc == BATON_ECONN) /* recording twice logs twice; never records a non-leader */
        rc = baton__script_run(c, BATON__SCRIPT(election_proclaim), 4, keys, 6, args, &r);
    if (rc != BATON_OK)
        return rc;
    bool ok = r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
              r->element[0]->type == REDIS_REPLY_INTEGER;
    long long done = ok ? r->element[0]->integer : 0;
    freeReplyObject(r);
    if (!ok)
        return baton__fail(c, BATON_EPROTO, "election %s: unexpected reply to election_proclaim",
                           e->base.name);
    return done ? BATON_OK : not_leading(e);
}

/* Called with e->mu held: whether the handle still leads as far as it knows (the lock's
 * record: not released, not found lost). */
static bool leads(baton_election *e)
{
    int64_t token;
    if (e->term == 0)
        return false;
    if (baton_lock_fencing_token_as(e->lock, e->owner, &token) != BATON_OK || token != e->term) {
        e->term = 0;
        return false;
    }
    return true;
}

/* The term this handle leads, as far as it knows; 0: none. */
static int64_t term_now(baton_election *e)
{
    baton__mutex_lock(&e->mu);
    int64_t term = leads(e) ? e->term : 0;
    baton__mutex_unlock(&e->mu);
    return term;
}

static void set_term(baton_election *e, int64_t term)
{
    baton__mutex_lock(&e->mu);
    e->term = term;
    baton__mutex_unlock(&e->mu);
}

/* Campaign, proclaim and resign take turns on a handle (two campaigns of one owner would
 * re-enter its lock). The turn is a flag, not a mutex held throughout: an asynchronous
 * operation's fiber yields in its round trips and waits, and a mutex held across a yield
 * would stop the engine thread of a second one that asked for it. A thread waits for its
 * turn; a fiber finding another's turn in progress fails with BATON_EINVAL. */
static int take_turn(baton_election *e)
{
    baton__mutex_lock(&e->mu);
    while (e->busy && !baton__on_fiber())
        baton__cond_wait_until(&e->turn, &e->mu, BATON__NO_DEADLINE);
    bool busy = e->busy;
    e->busy = true;
    baton__mutex_unlock(&e->mu);
    if (busy)
        return baton__fail(e->base.client, BATON_EINVAL,
                           "election %s: a campaign, proclaim or resign is in progress on this "
                           "handle (one at a time per handle)",
                           e->base.name);
    return BATON_OK;
}

/* What campaign, proclaim and resign do first: the handle, the value, then the turn. */
static int enter_turn(baton_election *e, const char *value)
{
    int rc = enter(e);
    if (rc == BATON_OK)
        rc = check_value(e, value);
    return rc == BATON_OK ? take_turn(e) : rc;
}

static int give_turn(baton_election *e, int rc)
{
    baton__mutex_lock(&e->mu);
    e->busy = false;
    baton__cond_broadcast(&e->turn);
    baton__mutex_unlock(&e->mu);
    return rc;
}

/* Before the lock is taken: the record and the log are absent or of their types. The
 * record's script refuses another type, but only after the lock was taken (its fencing
 * counter advanced, its release's latch written): a wrong type found here writes nothing. */
static int keys_usable(baton_election *e)
{
    const char *keys[2] = {e->record_key, e->log_key}, *want[2] = {"hash", "stream"};
    for (int i = 0; i < 2; i++) {
        const char *argv[2] = {"TYPE", keys[i]};
        redisReply *r;
        int rc = baton__query_argv(e->base.client, 2, argv, &r);
        if (rc != BATON_OK)
            return rc;
        bool ok = r->type == REDIS_REPLY_STATUS &&
                  (strcmp(r->str, "none") == 0 || strcmp(r->str, want[i]) == 0);
        char type[32];
        snprintf(type, sizeof type, "%s", r->type == REDIS_REPLY_STATUS ? r->str : "?");
        freeReplyObject(r);
        if (!ok)
            return baton__fail(e->base.client, BATON_EPROTO,
                               "election %s: WRONGTYPE: %s holds a %s, not a %s: nothing written",
                               e->base.name, keys[i], type, want[i]);
    }
    return BATON_OK;
}

/* Campaigns until the handle leads (its turn taken): the lock, then the record. */
static int win(baton_election *e, const char *value, int64_t wait_ms, int64_t lease_ms)
{
    int checked = keys_usable(e);
    if (checked != BATON_OK)
        return checked;
    int64_t deadline = wait_ms < 0 ? BATON__NO_DEADLINE : baton__deadline_after_ms(wait_ms);
    for (;;) {
        int64_t left = wait_ms;
        if (wait_ms > 0) {
            left = (deadline - baton__now_us()) / 1000;
            if (left < 0)
                left = 0;
        }
        int rc = baton_lock_try_acquire_as(e->lock, e->owner, left, lease_ms);
        if (rc != BATON_OK)
            return rc;
        int64_t term = 0;
        rc = baton_lock_fencing_token_as(e->lock, e->owner, &term);
        if (rc == BATON_OK)
            rc = record(e, "elect", value, term);
        if (rc == BATON_OK) {
            set_term(e, term);
            return BATON_OK;
        }
        /* Lost between the acquire and the record (its lease ran out), or an error: the
         * hold, if any is left, is given back; "lost" campaigns again within the wait. The
         * error's detail (the command an ACL refused, the server's text) outlives the
         * release, which records its own. */
        char why[512];
        snprintf(why, sizeof why, "%s", baton_client_errmsg(e->base.client));
        baton_lock_release_as(e->lock, e->owner);
        if (why[0])
            baton__fail(e->base.client, rc, "%s", why);
        if (rc != BATON_ENOTHELD || wait_ms == 0 || baton__now_us() >= deadline)
            return rc;
    }
}

static int campaign(baton_election *e, const char *value, int64_t wait_ms, int64_t lease_ms);

/* Counted for close from start to end; its wait is cancelled through e (core/ops.h). */
int baton_election_campaign(baton_election *e, const char *value, int64_t wait_ms, int64_t lease_ms)
{
    int entered_ = baton__object_enter((baton__object *)e); /* before its client is read */
    if (entered_ != BATON_OK)
        return entered_;
    BATON__COUNTED_CALL(e ? e->base.client : NULL, e, campaign(e, value, wait_ms, lease_ms));
}

static int campaign(baton_election *e, const char *value, int64_t wait_ms, int64_t lease_ms)
{
    int rc = enter(e);
    if (rc == BATON_OK)
        rc = baton__check_wait_lease(e->base.client, "election", e->base.name, wait_ms, &lease_ms);
    if (rc == BATON_OK)
        rc = enter_turn(e, value);
    if (rc != BATON_OK)
        return rc;
    int64_t term = term_now(e);
    if (term) /* leading already: a proclaim */
        return give_turn(e, record(e, "proclaim", value, term));
    rc = give_turn(e, win(e, value, wait_ms, lease_ms));
    if (rc == BATON_ETIMEDOUT)
        return baton__fail(e->base.client, rc, "election %s: not elected within %lld ms",
                           e->base.name, (long long)wait_ms);
    return rc;
}

int baton_election_proclaim(baton_election *e, const char *value)
{
    int rc = enter_turn(e, value);
    if (rc != BATON_OK)
        return rc;
    int64_t term = term_now(e);
    return give_turn(e, term ? record(e, "proclaim", value, term) : not_leading(e));
}

int baton_election_resign(baton_election *e)
{
    int rc = enter_turn(e, NULL);
    if (rc != BATON_OK)
        return rc;
    const char *keys[6] = {e->base.name,  e->lock->channel, e->meta_key,
                           e->record_key, e->log_key,       e->base.channel};
    uint64_t prev = baton__owner_act(baton_owner_id(e->owner));
    rc = baton__hold_release(e->lock, BATON__SCRIPT(election_resign), e->latch_pfx, 6, keys);
    baton__owner_act(prev);
    set_term(e, 0);
    return give_turn(e, rc);
}

int baton_election_term(baton_election *e, int64_t *term)
{
    int rc = enter_out(e, term, "term");
    if (rc != BATON_OK)
        return rc;
    *term = term_now(e);
    return *term ? BATON_OK : not_leading(e);
}

/* ------------------------------- asynchronous forms ---------------------------------- */

/* What an asynchronous operation's fiber runs (async.c): the blocking verbs. */
static int async_campaign(void *h, const baton__op_args *a)
{
    return baton_election_campaign(h, a->in, a->wait_ms, a->lease_ms);
}

static int async_resign(void *h, const baton__op_args *a)
{
    (void)a;
    return baton_election_resign(h);
}

static int async_proclaim(void *h, const baton__op_args *a)
{
    return baton_election_proclaim(h, a->in);
}

/* Starts run on the engine for e, after the checks the blocking verb would make first. */
static int start_op(baton_election *e, baton__op_run_fn run, bool is_release,
                    const baton__op_args *a, baton_async_fn fn, void *arg, baton_op **op)
{
    if (op)
        *op = NULL;
    int rc = enter(e);
    if (rc == BATON_OK)
        rc = check_value(e, a->in);
    baton__op_args checked = *a; /* its lease as read (0: the watchdog's) */
    if (rc == BATON_OK)
        rc = baton__check_wait_lease(e->base.client, "election", e->base.name, a->wait_ms,
                                     &checked.lease_ms);
    a = &checked;
    return rc == BATON_OK ? baton__op_start(e->base.client, e, run, is_release, a, fn, arg, op)
                          : rc;
}

int baton_election_campaign_async(baton_election *e, const char *value, int64_t wait_ms,
                                  int64_t lease_ms, baton_async_fn fn, void *arg, baton_op **op)
{
    baton__op_args a = {.wait_ms = wait_ms, .lease_ms = lease_ms, .in = value};
    return start_op(e, async_campaign, false, &a, fn, arg, op);
}

/* A resign is a release: cancelled or not, it runs (the engine's is_release). */
int baton_election_resign_async(baton_election *e, baton_async_fn fn, void *arg, baton_op **op)
{
    baton__op_args a = {.lease_ms = BATON_LEASE_WATCHDOG};
    return start_op(e, async_resign, true, &a, fn, arg, op);
}

int baton_election_proclaim_async(baton_election *e, const char *value, baton_async_fn fn,
                                  void *arg, baton_op **op)
{
    baton__op_args a = {.lease_ms = BATON_LEASE_WATCHDOG, .in = value};
    return start_op(e, async_proclaim, false, &a, fn, arg, op);
}

/* ------------------------------- lost ------------------------------------------------ */

static void on_lock_lost(baton_lock *l, void *arg)
{
    (void)l;
    baton_election *e = arg;
    if (e->lost_fn)
        e->lost_fn(e, e->lost_arg);
}

int baton_election_set_lost_handler(baton_election *e, void (*fn)(baton_election *, void *),
                                    void *arg)
{
    int rc = enter(e);
    if (rc != BATON_OK)
        return rc;
    baton_lock_set_lost_handler(e->lock, NULL, NULL); /* no call while they change */
    e->lost_fn = fn;
    e->lost_arg = arg;
    return fn ? baton_lock_set_lost_handler(e->lock, on_lock_lost, e) : BATON_OK;
}

int baton_election_lost_fd(baton_election *e, int *fd)
{
    int rc = enter(e);
    return rc != BATON_OK ? rc : baton_lock_lost_fd(e->lock, fd);
}

/* ------------------------------- leader, observe ------------------------------------- */

static int64_t num(const redisReply *r)
{
    if (r->type == REDIS_REPLY_INTEGER)
        return r->integer;
    if (r->type == REDIS_REPLY_STRING)
        return strtoll(r->str, NULL, 10);
    return 0;
}

static void copy_str(char *dst, size_t len, const redisReply *r)
{
    dst[0] = '\0';
    if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS)
        snprintf(dst, len, "%.*s", (int)r->len, r->str);
}

/* "host:pid" into the leader's host and pid. */
static void set_origin(baton_leader *ld, const char *origin)
{
    const char *colon = strrchr(origin, ':');
    ld->pid = colon ? strtoll(colon + 1, NULL, 10) : 0;
    size_t n = colon ? (size_t)(colon - origin) : strlen(origin);
    if (n >= sizeof ld->host)
        n = sizeof ld->host - 1;
    memcpy(ld->host, origin, n);
    ld->host[n] = '\0';
}

/* One run of election_observe. cursor: as its ARGV[1]. */
static int observe_once(baton_election *e, const char *cursor, redisReply **out)
{
    const char *keys[4] = {e->base.name, e->record_key, e->log_key, e->base.channel};
    const char *args[3] = {cursor, LOG_BATCH, LOG_CAP};
    redisReply *r;
    int rc =
        baton__script_run(e->base.client, BATON__SCRIPT(election_observe), 4, keys, 3, args, &r);
    if (rc == BATON_ECONN) /* logging an expiry twice is refused by the record's absence */
        rc = baton__script_run(e->base.client, BATON__SCRIPT(election_observe), 4, keys, 3, args,
                               &r);
    if (rc != BATON_OK)
        return rc;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 6 ||
        r->element[5]->type != REDIS_REPLY_ARRAY) {
        freeReplyObject(r);
        return baton__fail(e->base.client, BATON_EPROTO,
                           "election %s: unexpected reply to election_observe", e->base.name);
    }
    *out = r;
    return BATON_OK;
}

int baton_election_leader(baton_election *e, baton_leader *out)
{
    int rc = enter_out(e, out, "out");
    if (rc != BATON_OK)
        return rc;
    redisReply *r;
    rc = observe_once(e, "-", &r);
    if (rc != BATON_OK)
        return rc;
    memset(out, 0, sizeof *out);
    out->term = num(r->element[0]);
    if (out->term > 0) {
        char origin[BATON__ORIGIN_LEN + 160];
        copy_str(out->value, sizeof out->value, r->element[1]);
        copy_str(origin, sizeof origin, r->element[2]);
        set_origin(out, origin);
        out->since_ms = num(r->element[3]);
    }
    freeReplyObject(r);
    return BATON_OK;
}

/* One log entry {id, {field, value, ...}} into ev; false if malformed. */
static bool parse_entry(const redisReply *en, baton_election_event *ev, char *id, size_t idlen)
{
    if (en->type != REDIS_REPLY_ARRAY || en->elements != 2 ||
        en->element[0]->type != REDIS_REPLY_STRING || en->element[1]->type != REDIS_REPLY_ARRAY)
        return false;
    copy_str(id, idlen, en->element[0]);
    memset(ev, 0, sizeof *ev);
    const redisReply *f = en->element[1];
    for (size_t i = 0; i + 1 < f->elements; i += 2) {
        const redisReply *k = f->element[i], *v = f->element[i + 1];
        if (k->type != REDIS_REPLY_STRING)
            return false;
        if (strcmp(k->str, "change") == 0) {
            ev->change = strcmp(v->str, "elected") == 0      ? BATON_ELECTION_ELECTED
                         : strcmp(v->str, "proclaimed") == 0 ? BATON_ELECTION_PROCLAIMED
                         : strcmp(v->str, "resigned") == 0   ? BATON_ELECTION_RESIGNED
                         : strcmp(v->str, "expired") == 0    ? BATON_ELECTION_EXPIRED
                                                             : 0;
        } else if (strcmp(k->str, "term") == 0) {
            ev->leader.term = num(v);
        } else if (strcmp(k->str, "value") == 0) {
            copy_str(ev->leader.value, sizeof ev->leader.value, v);
        } else if (strcmp(k->str, "origin") == 0) {
            char origin[BATON__ORIGIN_LEN + 160];
            copy_str(origin, sizeof origin, v);
            set_origin(&ev->leader, origin);
        } else if (strcmp(k->str, "since") == 0) {
            ev->leader.since_ms = num(v);
        } else if (strcmp(k->str, "time") == 0) {
            ev->time_ms = num(v);
        }
    }
    return ev->change != 0;
}

/* The id right after "ms-seq" (XRANGE's start is inclusive; "(" needs Redis 6.2). */
static void next_id(const char *id, char *out, size_t len)
{
    unsigned long long ms = 0, seq = 0;
    if (sscanf(id, "%llu-%llu", &ms, &seq) != 2)
        ms = seq = 0;
    if (seq == UINT64_MAX) {
        ms++;
        seq = 0;
    } else {
        seq++;
    }
    snprintf(out, len, "%llu-%llu", ms, seq);
}

/* An observation in progress, for the core's wait routine. */
typedef struct observing {
    baton_election *e;
    baton_election_event *ev;
    int64_t bound_ms; /* how long to sleep before looking again */
} observing;

static int observe_attempt(void *arg, baton__sub *sub)
{
    (void)sub;
    observing *o = arg;
    baton_election *e = o->e;
    redisReply *r;
    int rc = observe_once(e, e->cursor, &r);
    if (rc != BATON_OK)
        return rc;
    const redisReply *entries = r->element[5];
    int64_t pttl = num(r->element[4]);
    bool leader = num(r->element[0]) > 0;
    int64_t recheck = e->base.cfg.recheck_ms;
    /* A leader's expiry is announced by nobody: look again when its lease would end. */
    o->bound_ms = leader && pttl >= 0 && pttl + 5 < recheck ? pttl + 5 : recheck;
    rc = BATON_ETIMEDOUT;
    /* An entry that is not a change baton logs (another writer's XADD to the log) is
     * skipped and counted, and the next one read at once: it never ends an observation. */
    for (int skips = 0; entries->elements > 0 && rc == BATON_ETIMEDOUT;) {
        char id[48];
        const redisReply *en = entries->element[0];
        if (parse_entry(en, o->ev, id, sizeof id)) {
            next_id(id, e->cursor, sizeof e->cursor);
            rc = BATON_OK;
            break;
        }
        if (en->type != REDIS_REPLY_ARRAY || en->elements < 1 ||
            en->element[0]->type != REDIS_REPLY_STRING) {
            rc = baton__fail(e->base.client, BATON_EPROTO, "election %s: a log entry without an id",
                             e->base.name);
            break;
        }
        copy_str(id, sizeof id, en->element[0]);
        next_id(id, e->cursor, sizeof e->cursor);
        __atomic_add_fetch(&e->skipped, 1, __ATOMIC_RELAXED);
        if (++skips >= MAX_SKIPS_PER_LOOK)
            break; /* a log full of them: the rest at the next look (recheck_ms) */
        freeReplyObject(r);
        r = NULL;
        rc = observe_once(e, e->cursor, &r);
        if (rc != BATON_OK)
            return rc;
        entries = r->element[5];
        rc = BATON_ETIMEDOUT;
    }
    if (entries->elements > 0) {
        /* handled above */
    } else if (e->cursor[0] == '\0') {
        /* nothing ever logged: everything from the start is new */
        snprintf(e->cursor, sizeof e->cursor, "0-1");
    }
    freeReplyObject(r);
    return rc;
}

static int64_t observe_bound(void *arg)
{
    return ((observing *)arg)->bound_ms;
}

/* How a message wakes the observers on an election's channel: "0" (the leadership changed:
 * proclaimed, resigned, or an observation found it gone) all of them; any other none. The
 * subscription does not linger. */
static int64_t zero_wakeups(const char *payload, size_t len, int refs, int64_t pending)
{
    (void)pending;
    bool ok;
    int64_t v = baton__sub_payload_int(payload, len, &ok);
    return (ok && v == 0) ? refs : 0;
}

static const baton__sub_type observe_sub = {zero_wakeups, false, false};

/* channel, counted as, join a live subscription, attempt, sleep bound, give up */
static const baton__wait_ops observe_wait = {&observe_sub, BATON_KIND_ELECTION, true,
                                             observe_attempt, observe_bound};

/* What an observation checks first: the handle, its timeout and where the change goes. */
static int enter_observe(baton_election *e, int64_t timeout_ms, const baton_election_event *ev)
{
    int rc = enter_out(e, ev, "ev");
    if (rc == BATON_OK && baton__check_wait(timeout_ms) != BATON_OK)
        rc = baton__fail(e->base.client, BATON_EINVAL,
                         "election %s: timeout_ms %lld: use BATON_WAIT_FOREVER or 0..%lld ms",
                         e->base.name, (long long)timeout_ms, (long long)BATON_MAX_DURATION_MS);
    return rc;
}

/* One observation from the handle's cursor (the watcher thread's, or the caller's). */
static int observe_next(baton_election *e, int64_t timeout_ms, baton_election_event *ev)
{
    int rc = enter_observe(e, timeout_ms, ev);
    if (rc != BATON_OK)
        return rc;
    observing o = {.e = e, .ev = ev, .bound_ms = -1};
    rc = baton__wait_for(e->base.client, &observe_wait, e->base.channel, timeout_ms, &o);
    if (rc == BATON_ETIMEDOUT)
        return baton__fail(e->base.client, rc, "election %s: no change within %lld ms",
                           e->base.name, (long long)timeout_ms);
    return rc;
}

/* ------------------------------- observation on the engine -------------------------- */

/* Hands a change to the observer callback, or queues it for observe_next and makes the
 * descriptor readable (mu_q held). */
static void hand_over(baton_election *e, const baton_election_event *ev)
{
    if (e->observer) {
        e->observer(e, ev, e->observer_arg); /* under mu_q: never with a set_observer */
        return;
    }
    e->queue[(e->q_head + e->q_len++) % QUEUE_LEN] = *ev;
    char b = 1;
    if (e->q_len == 1 && write(e->pipe_fd[1], &b, 1) < 0) {
        /* full: readable already */
    }
    baton__cond_broadcast(&e->changed);
}

static int watch_start(baton_election *e);

/* Whether the watcher goes on (mu_q held): not closing, and room for a change. When it
 * stops for a full queue, observe_next starts it again (watch_resume). */
static bool watch_goes_on(baton_election *e)
{
    e->running = !e->stop && (e->observer || e->q_len < QUEUE_LEN);
    return e->running;
}

/* A cancelled watcher's operation ends; a fresh one goes on unless the handle closes. */
static int watch_again(baton_election *e)
{
    baton__mutex_lock(&e->mu_q);
    e->running = false;
    baton__mutex_unlock(&e->mu_q);
    return watch_start(e);
}

/* The watcher, on a fiber of the client's engine: observes from the handle's cursor and
 * hands every change over, while there is room. */
static int watch_run(void *h, const baton__op_args *a)
{
    (void)a;
    baton_election *e = ((struct watch *)h)->e;
    baton_election_event ev;
    for (;;) {
        baton__mutex_lock(&e->mu_q);
        bool on = watch_goes_on(e);
        baton__mutex_unlock(&e->mu_q);
        if (!on)
            return BATON_OK;
        int rc = observe_next(e, BATON_WAIT_FOREVER, &ev);
        if (rc == BATON_ECANCELED) /* the client's cancel_waits, or close */
            return watch_again(e);
        if (rc != BATON_OK) { /* a server error: look again after a pause */
            baton__fiber_sleep_until(baton__deadline_after_ms(WATCH_PAUSE_MS));
            continue;
        }
        baton__mutex_lock(&e->mu_q);
        hand_over(e, &ev);
        baton__mutex_unlock(&e->mu_q);
    }
}

/* Starts the watcher's operation unless it runs or the handle closes. BATON_OK or the
 * start's error (recorded). */
static int watch_start(baton_election *e)
{
    baton__mutex_lock(&e->mu_q);
    bool start = !e->running && !e->stop;
    e->running = e->running || start;
    baton__mutex_unlock(&e->mu_q);
    baton__op_args a = {.wait_ms = 0};
    int rc = start ? baton__op_spawn(e->base.client, &e->watch, watch_run, &a) : BATON_OK;
    if (rc != BATON_OK) {
        baton__mutex_lock(&e->mu_q);
        e->running = false;
        baton__mutex_unlock(&e->mu_q);
    }
    return rc;
}

/* The first observe_fd or set_observer: the queue, its descriptor, then the watcher.
 * Returns BATON_OK or an error (recorded). */
static int start_watching(baton_election *e)
{
    baton__mutex_lock(&e->mu_q);
    int rc = BATON_OK;
    if (!e->watching) {
        e->queue = calloc(QUEUE_LEN, sizeof *e->queue);
        if (!e->queue || pipe2(e->pipe_fd, O_NONBLOCK | O_CLOEXEC) != 0) {
            e->pipe_fd[0] = e->pipe_fd[1] = -1;
            rc = baton__fail(e->base.client, BATON_ENOMEM, "election %s: no memory or pipe",
                             e->base.name);
        } else {
            e->watch.e = e;
            e->watching = true;
        }
    }
    baton__mutex_unlock(&e->mu_q);
    return rc == BATON_OK ? watch_start(e) : rc;
}

int baton_election_observe_fd(baton_election *e, int *fd)
{
    int rc = enter_out(e, fd, "fd");
    if (rc == BATON_OK)
        rc = start_watching(e);
    if (rc == BATON_OK)
        *fd = e->pipe_fd[0];
    return rc;
}

/* The observer from now on (under mu_q: never while the old one runs). */
static void observer_swap(baton_election *e,
                          void (*fn)(baton_election *, const baton_election_event *, void *),
                          void *arg)
{
    baton__mutex_lock(&e->mu_q);
    e->observer = fn;
    e->observer_arg = arg;
    baton__mutex_unlock(&e->mu_q);
}

int baton_election_set_observer(baton_election *e,
                                void (*fn)(baton_election *, const baton_election_event *, void *),
                                void *arg)
{
    int rc = enter(e);
    if (rc != BATON_OK)
        return rc;
    observer_swap(e, fn, fn ? arg : NULL);
    return fn ? start_watching(e) : BATON_OK;
}

/* Takes the next queued change, waiting for one until deadline or a cancellation through
 * the handle (mu_q held). BATON_OK, BATON_ETIMEDOUT or BATON_ECANCELED. */
static int dequeue(baton_election *e, int64_t deadline, baton_election_event *ev)
{
    uint64_t cancels = e->cancels;
    while (e->q_len == 0 && e->cancels == cancels && !atomic_load(&e->closing_q))
        if (baton__cond_wait_until(&e->changed, &e->mu_q, deadline) != 0)
            return BATON_ETIMEDOUT;
    if (e->q_len == 0)
        return BATON_ECANCELED;
    *ev = e->queue[e->q_head];
    e->q_head = (e->q_head + 1) % QUEUE_LEN;
    if (--e->q_len == 0) {
        char buf[16];
        while (read(e->pipe_fd[0], buf, sizeof buf) > 0) {
        }
    }
    return BATON_OK;
}

/* The next change from the watcher's queue; a watcher stopped for a full queue goes on. */
static int observe_queued(baton_election *e, int64_t timeout_ms, baton_election_event *ev)
{
    int rc = dequeue(e, baton__deadline_after_ms(timeout_ms), ev);
    baton__mutex_unlock(&e->mu_q);
    if (rc == BATON_OK) { /* the change is the caller's, whether or not the watcher goes on */
        watch_start(e);
        return BATON_OK;
    }
    if (rc == BATON_ECANCELED)
        return baton__fail(e->base.client, rc, "election %s: wait cancelled", e->base.name);
    if (rc == BATON_ETIMEDOUT)
        return baton__fail(e->base.client, rc, "election %s: no change within %lld ms",
                           e->base.name, (long long)timeout_ms);
    return rc;
}

static int observe_counted(baton_election *e, int64_t timeout_ms, baton_election_event *ev);

/* From the watcher's queue once it runs (a wait of a condition variable, not a counted
 * call: the handle's close, or its client's, which orphans it, wakes the thread and waits
 * for it to leave before the queue goes), else observed on this thread. */
int baton_election_observe_next(baton_election *e, int64_t timeout_ms, baton_election_event *ev)
{
    int rc = enter_observe(e, timeout_ms, ev);
    if (rc != BATON_OK)
        return rc;
    atomic_fetch_add(&e->in_queue, 1);
    if (atomic_load(&e->closing_q)) { /* its client is closing: the queue is going */
        atomic_fetch_sub(&e->in_queue, 1);
        return baton__fail(e->base.client, BATON_ECANCELED, "election %s: closing", e->base.name);
    }
    baton__mutex_lock(&e->mu_q);
    if (e->watching) {
        rc = observe_queued(e, timeout_ms, ev); /* unlocks mu_q */
        baton__mutex_lock(&e->mu_q);
        atomic_fetch_sub(&e->in_queue, 1);
        baton__cond_broadcast(&e->changed); /* a close waiting for it */
        baton__mutex_unlock(&e->mu_q);
        return rc;
    }
    atomic_fetch_sub(&e->in_queue, 1); /* a counted call from here: the close ends it */
    baton__mutex_unlock(&e->mu_q);
    return observe_counted(e, timeout_ms, ev);
}

/* Counted for close from start to end; its wait is cancelled through e (core/ops.h). */
static int observe_counted(baton_election *e, int64_t timeout_ms, baton_election_event *ev)
{
    BATON__COUNTED_CALL(e->base.client, e, observe_next(e, timeout_ms, ev));
}
