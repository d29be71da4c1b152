/*
 * The watchdog: the registry of every hold this client has, and the renewal of those held
 * without an explicit lease, from one thread, every third of the hold's watchdog lease
 * (Redisson's rule). Each hold has its own watchdog lease: its handle's watchdog_ms (the
 * options per handle, handle.h) or the client's. The holds of one lease form a group with
 * one timer, renewed together every third of that lease (the client's holds as one group,
 * as before handles had leases of their own); the thread wakes for the earliest group due
 * (or the earliest lease end of a hold whose renewals failed).
 *
 * Renewal is batched: up to 100 holds per EVALSHA of their kind's renew script (lock_renew.lua
 * for the locks, permits_renew.lua for permit leases; a batch holds one kind and one lease,
 * the script's ARGV[1]), every batch
 * pipelined on one connection, so a period costs one round trip per hundred holds at most. A batch
 * answers, per hold, whether the owner still held it; a hold found gone is dropped (renewal
 * stops by itself) and its lost callback runs on this thread. A renewal that fails because
 * the server cannot be reached is tried again next period; once a hold's last successful
 * renewal is older than its lease, the lease has surely run out and the hold is reported
 * lost as well.
 *
 * Holds with an explicit lease are registered too, without renewal: when the client finds
 * that the server restarted (its run_id changed, see client.c), every registered hold may
 * have been wiped, and all of them are reported lost. A leased hold sends nothing until its
 * release, so while the registry holds anything it pins the dispatcher's subscriber
 * connection: a restart closes that connection at once, and its reconnection reads the new
 * run_id within the dispatcher's reconnect pause.
 *
 * Registration happens before an acquire returns and cancellation before a release is sent,
 * so a renewal can never outlive the release it belongs to (Redisson #7272).
 */
#define _GNU_SOURCE /* qsort_r */
#include "lockbase.h"

#include "client_fields.h"
#include "baton_scripts.h"
#include "conn.h"
#include "send.h"
#include "slots.h"
#include "topology.h"

#include <hiredis/hiredis.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCH 100

typedef struct lost_cb {
    void (*fn)(void *);
    void *arg;
} lost_cb;

typedef struct wd_entry {
    char *name;
    char *owner;
    lost_cb *regs; /* who registered this (name, owner): each is told of its loss */
    int nregs;
    bool renew;       /* renewed every period (a hold without an explicit lease) */
    int64_t lease_ms; /* its watchdog lease (the shortest of its handles'), renewed every third */
    const baton__script *script; /* the renew script of the hold's kind */
    const baton__script *check;  /* and its check script (leased holds, master moved) */
    int64_t last_ok_us;          /* last successful renewal (or registration), boot clock */
} wd_entry;

/* The renewed holds of one watchdog lease: renewed together, every third of it. */
typedef struct wd_group {
    int64_t lease_ms;
    int64_t next_us; /* its next renewal, monotonic */
    bool due;        /* renewed by the pass under way */
    bool used;       /* a renewed hold has this lease (the last scan's) */
} wd_group;

struct baton__watchdog {
    baton_client *c;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cond; /* closing, or a callback finished */
    bool closing;
    bool in_callback;   /* lost callbacks are running */
    bool epoch_changed; /* the server restarted: report every hold lost */
    bool verify;        /* the master moved: check every hold there now, leased ones too */
    bool pinned;        /* the subscriber connection is pinned for the holds (see sync_pin) */
    baton__map entries; /* key(name, owner) -> wd_entry */
    wd_group *groups;   /* one per lease of the renewed holds */
    size_t ngroups, groups_cap;
    size_t nregs;    /* registrations in all entries */
    uint64_t rounds; /* renewal EVALSHAs sent */
};

/*
 * How long after a renewal was sent (or an acquisition) a renewed hold is still surely
 * held: the lease less a margin for the server's clock running faster than ours, as
 * Redlock's drift allowance (1 % of the lease + 2 ms). A holder whose renewals fail is told
 * then, before the server can have let the lease run out.
 */
/* The watchdog's certainty (the last renewal the server acknowledged, a lease surely run
 * out) is counted on CLOCK_BOOTTIME, which counts a suspend of the machine: after a resume
 * the next pass reports a hold whose lease ran out meanwhile without asking the server.
 * Its waits are on CLOCK_MONOTONIC (pthread's clocks): a boot-clock end becomes a
 * monotonic deadline through the clocks' difference now. */
static int64_t to_monotonic(int64_t boot_us)
{
    if (boot_us == BATON__NO_DEADLINE)
        return boot_us;
    return boot_us - (baton__boot_us() - baton__now_us());
}

static int64_t to_boot(int64_t monotonic_us)
{
    return monotonic_us + (baton__boot_us() - baton__now_us());
}

static int64_t sure_us(int64_t lease_ms)
{
    int64_t lease_us = lease_ms * 1000;
    return lease_us - lease_us / 100 - 2000;
}

/* The group of a lease, or NULL (w->mu held). */
static wd_group *group_find(baton__watchdog *w, int64_t lease_ms)
{
    for (size_t i = 0; i < w->ngroups; i++)
        if (w->groups[i].lease_ms == lease_ms)
            return &w->groups[i];
    return NULL;
}

/* The group of a lease, made if there is none: its first renewal a third of the lease from
 * now, and the thread woken to wait for it (w->mu held). false: out of memory. */
static bool group_need(baton__watchdog *w, int64_t lease_ms)
{
    wd_group *g = group_find(w, lease_ms);
    if (g) {
        g->used = true;
        return true;
    }
    if (w->ngroups == w->groups_cap) {
        size_t cap = w->groups_cap ? 2 * w->groups_cap : 4;
        wd_group *more = realloc(w->groups, cap * sizeof *more);
        if (!more)
            return false;
        w->groups = more;
        w->groups_cap = cap;
    }
    w->groups[w->ngroups++] =
        (wd_group){lease_ms, baton__now_us() + lease_ms * 1000 / 3, false, true};
    baton__cond_broadcast(&w->cond);
    return true;
}

/* A map key that no two (name, owner) pairs share, whatever bytes the name holds. */
static char *entry_key(const char *name, const char *owner)
{
    return baton__asprintf("%zu:%s%s", strlen(name), name, owner);
}

static void free_entry(wd_entry *e)
{
    free(e->regs);
    free(e->name);
    free(e->owner);
    free(e);
}

typedef struct snapshot {
    char **names;
    char **owners;
    int64_t *registered;           /* last_ok_us at snapshot time */
    int64_t *leases;               /* per hold: its watchdog lease, ms */
    const baton__script **scripts; /* per hold: its kind's renew (or check) script */
    int *slots;                    /* Cluster: per hold, its slot; -1 elsewhere */
    const void **nodes;            /* Cluster: per hold, its master's pool; NULL elsewhere */
    size_t n;
    bool leased; /* the holds with a lease of their own, not those renewed */
    bool all;    /* every renewed hold, not only those of the groups due */
    baton__watchdog *w;
} snapshot;

static void snap_one(const char *key, void *val, void *arg)
{
    (void)key;
    wd_entry *e = val;
    snapshot *s = arg;
    if (e->renew == s->leased)
        return;
    if (!s->leased && !s->all) {
        const wd_group *g = group_find(s->w, e->lease_ms);
        if (g && !g->due)
            return; /* its group is not due (a hold with no group yet goes now) */
    }
    s->leases[s->n] = e->lease_ms;
    s->names[s->n] = baton__strdup(e->name);
    s->owners[s->n] = baton__strdup(e->owner);
    s->registered[s->n] = e->last_ok_us;
    s->scripts[s->n] = s->leased ? e->check : e->script;
    if (s->names[s->n] && s->owners[s->n]) {
        s->n++;
    } else {
        free(s->names[s->n]);
        free(s->owners[s->n]);
    }
}

static int by_node_script_slot(const void *a, const void *b, void *arg)
{
    const snapshot *s = arg;
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    uintptr_t ni = (uintptr_t)s->nodes[i], nj = (uintptr_t)s->nodes[j];
    uintptr_t ki = (uintptr_t)s->scripts[i], kj = (uintptr_t)s->scripts[j];
    if (ni != nj)
        return ni < nj ? -1 : 1;
    if (ki != kj)
        return ki < kj ? -1 : 1;
    if (s->leases[i] != s->leases[j])
        return s->leases[i] < s->leases[j] ? -1 : 1;
    if (s->slots[i] != s->slots[j])
        return s->slots[i] < s->slots[j] ? -1 : 1;
    return i < j ? -1 : (i > j);
}

/* Puts the holds of one node next to each other (one pipeline per node), and within a node
 * those of one kind, one lease and one slot (a batch runs one script with one lease on keys
 * of one slot: a Cluster refuses a script whose keys span slots, CROSSSLOT). On one server
 * every hold has slot -1 and node NULL: the holds are grouped by kind and lease only. */
static void group(baton_client *c, snapshot *s)
{
    bool cluster = baton__topology_cluster(c);
    for (size_t i = 0; i < s->n; i++) {
        s->slots[i] = cluster ? baton__key_slot(s->names[i], strlen(s->names[i])) : -1;
        s->nodes[i] = cluster ? (const void *)baton__topology_slot_pool(c, s->slots[i]) : NULL;
    }
    size_t *order = malloc((s->n + 1) * sizeof *order);
    char **names = malloc((s->n + 1) * sizeof *names),
         **owners = malloc((s->n + 1) * sizeof *owners);
    int64_t *reg = malloc((s->n + 1) * sizeof *reg);
    int64_t *leases = malloc((s->n + 1) * sizeof *leases);
    const baton__script **scripts = malloc((s->n + 1) * sizeof *scripts);
    int *slots = malloc((s->n + 1) * sizeof *slots);
    const void **nodes = malloc((s->n + 1) * sizeof *nodes);
    if (order && names && owners && reg && leases && scripts && slots && nodes) {
        for (size_t i = 0; i < s->n; i++)
            order[i] = i;
        qsort_r(order, s->n, sizeof *order, by_node_script_slot, s);
        for (size_t i = 0; i < s->n; i++) {
            size_t j = order[i];
            names[i] = s->names[j], owners[i] = s->owners[j], reg[i] = s->registered[j];
            leases[i] = s->leases[j];
            scripts[i] = s->scripts[j], slots[i] = s->slots[j], nodes[i] = s->nodes[j];
        }
        memcpy(s->names, names, s->n * sizeof *names);
        memcpy(s->owners, owners, s->n * sizeof *owners);
        memcpy(s->registered, reg, s->n * sizeof *reg);
        memcpy(s->leases, leases, s->n * sizeof *leases);
        memcpy(s->scripts, scripts, s->n * sizeof *scripts);
        memcpy(s->slots, slots, s->n * sizeof *slots);
        memcpy(s->nodes, nodes, s->n * sizeof *nodes);
    }
    /* out of memory: the order stays, and batch_len below still keeps batches uniform */
    free(order), free(names), free(owners), free(reg), free(leases), free(scripts), free(slots);
    free(nodes);
}

/* The length of the batch that starts at `from`: up to BATCH holds of one kind, lease and
 * slot. */
static size_t batch_len(const snapshot *s, size_t from)
{
    size_t cnt = 1;
    while (from + cnt < s->n && cnt < BATCH && s->scripts[from + cnt] == s->scripts[from] &&
           s->leases[from + cnt] == s->leases[from] && s->slots[from + cnt] == s->slots[from])
        cnt++;
    return cnt;
}

/* The end of the node group that starts at `from`. */
static size_t node_end(const snapshot *s, size_t from)
{
    size_t to = from + 1;
    while (to < s->n && s->nodes[to] == s->nodes[from])
        to++;
    return to;
}

static void snapshot_free(snapshot *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->names[i]);
        free(s->owners[i]);
    }
    free(s->names);
    free(s->owners);
    free(s->registered);
    free(s->leases);
    free(s->scripts);
    free(s->slots);
    free(s->nodes);
}

/* Moves an entry that leaves the registry's callbacks to cbs (room for w->nregs). */
static void take_regs(baton__watchdog *w, const wd_entry *e, lost_cb *cbs, size_t *ncb)
{
    for (int i = 0; i < e->nregs; i++)
        if (cbs && e->regs[i].fn)
            cbs[(*ncb)++] = e->regs[i];
    w->nregs -= (size_t)e->nregs;
}

/* A batch's reply: one 1/0 per hold, in order; anything else leaves them unknown. */
static void take_results(const redisReply *r, size_t cnt, signed char *result)
{
    if (r->type == REDIS_REPLY_ARRAY && r->elements == cnt)
        for (size_t i = 0; i < cnt; i++)
            if (r->element[i]->type == REDIS_REPLY_INTEGER)
                result[i] = r->element[i]->integer ? 1 : 0;
}

/* Whether a batch's reply asks for it to go again through the script runner (which sends
 * the body, and follows a Cluster's redirections): NOSCRIPT, MOVED, ASK, TRYAGAIN,
 * CLUSTERDOWN. */
static bool send_again(baton_client *c, const redisReply *r)
{
    if (r->type != REDIS_REPLY_ERROR || !r->str)
        return false;
    if (strncmp(r->str, "NOSCRIPT", 8) == 0) {
        baton__stat_inc(c, BATON__ST_NOSCRIPT);
        return true;
    }
    return strncmp(r->str, "MOVED ", 6) == 0 || strncmp(r->str, "ASK ", 4) == 0 ||
           strncmp(r->str, "TRYAGAIN", 8) == 0 || strncmp(r->str, "CLUSTERDOWN", 11) == 0;
}

/* One pipelined pass of the batches of holds [from, to) (one node's) on one pooled
 * connection: fills result (1 renewed, 0 gone) and flags (again, at each batch's first
 * hold) the batches to send again through the script runner. false: the connection broke
 * (it took the idle ones with it; the batches not answered stay unknown). */
static bool renew_pass(baton__watchdog *w, snapshot *s, size_t from0, size_t to,
                       signed char *result, bool *again, int64_t deadline_us)
{
    baton_client *c = w->c;
    baton__conn *conn;
    if (baton__conn_get_slot(c, s->slots[from0], deadline_us, &conn) != BATON_OK)
        return false;
    size_t nbatches = 0;
    const char *args[BATCH + 1];
    char lease[32];
    args[0] = lease;
    for (size_t from = from0, cnt; from < to; from += cnt, nbatches++) {
        cnt = batch_len(s, from);
        snprintf(lease, sizeof lease, "%lld", (long long)s->leases[from]);
        for (size_t i = 0; i < cnt; i++)
            args[1 + i] = s->owners[from + i];
        if (baton__script_append(conn, baton__script_variant(c, s->scripts[from]), (int)cnt,
                                 (const char **)&s->names[from], (int)cnt + 1, args) != BATON_OK) {
            /* Out of memory: a pass short of a batch would wait for a reply never asked. */
            baton__conn_put(c, conn, true);
            return false;
        }
    }
    /* The client's record (record.c), when due, rides with the first node's batches: no
     * round trip of its own. On a Cluster, a node that does not serve its slot answers
     * MOVED, and it waits for the client's next hold. */
    const char *rec[5];
    char rec_key[BATON__RECORD_KEY_LEN], rec_life[24];
    bool record =
        from0 == 0 && baton__client_record_due(c, BATON_LEASE_WATCHDOG, rec, rec_key, rec_life);
    if (record && baton__conn_append(conn, 5, rec, NULL) != BATON_OK) {
        baton__conn_put(c, conn, true);
        return false;
    }
    baton__mutex_lock(&w->mu);
    w->rounds += nbatches;
    baton__mutex_unlock(&w->mu);
    /* sync_replicas: a renewal counts only once enough replicas have it (WAIT, in the same
     * round trip); otherwise a failover could bring back the older, shorter lease */
    bool waited = baton__append_wait(c, conn);
    baton__count_round_trip(c); /* the batches travel pipelined: one round trip */
    bool broken = baton__conn_flush_by(c, conn, "renew", deadline_us) != BATON_OK;
    for (size_t from = from0, cnt; from < to && !broken; from += cnt) {
        cnt = batch_len(s, from);
        redisReply *r = NULL;
        if (baton__conn_read_by(c, conn, "renew", deadline_us, &r) != BATON_OK) {
            broken = true;
            break;
        }
        again[from] = send_again(c, r);
        take_results(r, cnt, &result[from]);
        freeReplyObject(r);
    }
    if (record && !broken) {
        redisReply *r = NULL;
        broken = baton__conn_read_by(c, conn, "renew", deadline_us, &r) != BATON_OK;
        freeReplyObject(r); /* advice: whatever it says */
    }
    if (waited && !broken) {
        /* The master has the renewal either way; a replica that lags (one resyncing after a
         * failover, say) only makes a second failover cost the newer lease. Reported, not
         * counted against the hold: a lock must survive the failover sync_replicas guards. */
        int acked = baton__read_wait(c, conn);
        broken = acked == BATON_ECONN;
        if (acked == BATON_ENOTSYNCED)
            baton__log(c, BATON_LOG_WARN, "renewal not acknowledged by %d replica%s%s in time",
                       c->cfg.sync_replicas, c->cfg.sync_replicas == 1 ? "" : "s",
                       c->cfg.sync_aof ? " or the append-only file" : "");
    }
    baton__conn_put(c, conn, broken);
    return !broken;
}

/* Outcome of one hold's renewal: 1 renewed, 0 gone, -1 unknown (no reply). A renewal is
 * idempotent (it only extends a lease the owner still has), so a pass whose connection
 * broke is sent once more on a new connection. */
/* The earliest end of the snapshot's leases (last success + the lease): no renewal step may
 * wait past it, so that an expiry is reported on time whatever the server does. */
static int64_t earliest_end(const snapshot *s)
{
    int64_t end = BATON__NO_DEADLINE;
    for (size_t i = 0; i < s->n; i++)
        if (s->registered[i] + sure_us(s->leases[i]) < end)
            end = s->registered[i] + sure_us(s->leases[i]);
    return end;
}

static void renew_all(baton__watchdog *w, snapshot *s, signed char *result)
{
    baton_client *c = w->c;
    memset(result, -1, s->n);
    if (s->n == 0)
        return;
    group(c, s);
    bool *again = calloc(s->n, sizeof *again); /* at each batch's first hold */
    if (!again)
        return;
    int64_t deadline = to_monotonic(earliest_end(s));
    /* one pipeline per node (one server: one in all); a broken one once more, on a new
     * connection */
    for (size_t from = 0, to; from < s->n; from = to) {
        to = node_end(s, from);
        if (!renew_pass(w, s, from, to, result, again, deadline) && baton__now_us() < deadline)
            renew_pass(w, s, from, to, result, again, deadline);
    }
    /* Script cache flushed, or the slot moved: those batches again through the script
     * runner, after the pipeline's connection went back (a pool of one must not wait on
     * itself). */
    const char *args[BATCH + 1];
    char lease[32];
    args[0] = lease;
    for (size_t from = 0, cnt; from < s->n; from += cnt) {
        cnt = batch_len(s, from);
        if (!again[from] || baton__now_us() >= deadline)
            continue;
        snprintf(lease, sizeof lease, "%lld", (long long)s->leases[from]);
        for (size_t i = 0; i < cnt; i++)
            args[1 + i] = s->owners[from + i];
        redisReply *r = NULL;
        if (baton__script_run(c, s->scripts[from], (int)cnt, (const char **)&s->names[from],
                              (int)cnt + 1, args, &r) != BATON_OK)
            continue;
        take_results(r, cnt, &result[from]);
        freeReplyObject(r);
    }
    free(again);
}

/* Runs lost callbacks with the mutex released; drop() waits for them to finish. */
static void run_callbacks(baton__watchdog *w, lost_cb *cbs, size_t ncb)
{
    if (!ncb)
        return;
    w->in_callback = true;
    baton__mutex_unlock(&w->mu);
    for (size_t i = 0; i < ncb; i++)
        cbs[i].fn(cbs[i].arg);
    baton__mutex_lock(&w->mu);
    w->in_callback = false;
    baton__cond_broadcast(&w->cond);
}

typedef struct lost_list {
    lost_cb *cbs; /* room for every registration */
    size_t n;     /* keys collected */
    char **keys;
} lost_list;

static void collect_lost(const char *key, void *val, void *arg)
{
    wd_entry *e = val;
    lost_list *l = arg;
    (void)e;
    l->keys[l->n] = baton__strdup(key);
    l->n++;
}

/* Called with w->mu held after the registry changed: while it holds anything, the
 * subscriber connection is kept up, so a server restart is noticed at once and reported to
 * every hold, leased or renewed (the dispatcher never calls into the watchdog with its own
 * mutex held, so taking it here cannot deadlock). */
static void sync_pin(baton__watchdog *w)
{
    bool want = w->entries.count > 0;
    if (want != w->pinned) {
        w->pinned = want;
        baton__sub_pin(w->c, want);
    }
}

/* The server restarted without (perhaps) keeping its data: every hold is reported lost. */
static void report_all_lost(baton__watchdog *w)
{
    w->epoch_changed = false;
    size_t n = w->entries.count;
    lost_list l = {calloc(w->nregs + 1, sizeof(lost_cb)), 0, calloc(n + 1, sizeof(char *))};
    if (!l.cbs || !l.keys) {
        free(l.cbs);
        free(l.keys);
        return;
    }
    baton__map_each(&w->entries, collect_lost, &l);
    size_t ncb = 0;
    for (size_t i = 0; i < l.n; i++) {
        wd_entry *e = l.keys[i] ? baton__map_remove(&w->entries, l.keys[i]) : NULL;
        baton__stat_lost(w->c, BATON__LOST_RESTARTED, e ? e->name : NULL);
        if (e) {
            take_regs(w, e, l.cbs, &ncb);
            free_entry(e);
        }
        free(l.keys[i]);
    }
    sync_pin(w);
    run_callbacks(w, l.cbs, ncb);
    free(l.cbs);
    free(l.keys);
}

/* Whether leased holds (which the watchdog never renews) still exist: their kind's check
 * script (hold_check for the locks) in batches, after the master moved. result as for
 * renew_all. */
static void check_all(baton__watchdog *w, snapshot *s, signed char *result)
{
    memset(result, -1, s->n);
    group(w->c, s);
    for (size_t from = 0, cnt; from < s->n; from += cnt) {
        cnt = batch_len(s, from);
        redisReply *r = NULL;
        if (baton__script_run(w->c, s->scripts[from], (int)cnt, (const char **)&s->names[from],
                              (int)cnt, (const char **)&s->owners[from], &r) != BATON_OK)
            return; /* unknown: checked again next period */
        take_results(r, cnt, &result[from]);
        freeReplyObject(r);
    }
}

/* One pass over the holds, called and returning with w->mu held: the renewed holds are
 * renewed (leased false: those of the groups due, or every one if `all`), or the leased ones
 * checked (leased true). A hold found gone, or
 * renewed holds whose lease surely ran out while the server could not be reached, are
 * removed and reported. moved: the pass follows a change of master (the cause reported).
 * Returns whether some hold's fate stayed unknown. */
static bool pass(baton__watchdog *w, bool leased, bool moved, bool all)
{
    baton_client *c = w->c;
    snapshot s = {.leased = leased, .all = all, .w = w};
    size_t n = w->entries.count;
    s.leases = calloc(n + 1, sizeof *s.leases);
    s.names = calloc(n + 1, sizeof *s.names);
    s.owners = calloc(n + 1, sizeof *s.owners);
    s.registered = calloc(n + 1, sizeof *s.registered);
    s.scripts = calloc(n + 1, sizeof *s.scripts);
    s.slots = calloc(n + 1, sizeof *s.slots);
    s.nodes = calloc(n + 1, sizeof *s.nodes);
    signed char *result = malloc(n + 1);
    if (!s.names || !s.owners || !s.registered || !s.leases || !s.scripts || !s.slots || !s.nodes ||
        !result) {
        free(result);
        snapshot_free(&s);
        return true; /* try next period */
    }
    baton__map_each(&w->entries, snap_one, &s);
    baton__mutex_unlock(&w->mu);

    int64_t started = baton__boot_us();
    if (leased) {
        check_all(w, &s, result);
    } else {
        renew_all(w, &s, result);
        baton__stat_renewals(c, result, s.n);
    }

    baton__mutex_lock(&w->mu);
    int64_t ended = baton__boot_us();
    bool unknown = false;
    lost_cb *cbs = calloc(w->nregs + 1, sizeof *cbs);
    size_t ncb = 0;
    for (size_t i = 0; i < s.n; i++) {
        char *key = entry_key(s.names[i], s.owners[i]);
        wd_entry *e = key ? baton__map_get(&w->entries, key) : NULL;
        /* a renewal counts from when it was sent (started): the server's expiry is no
         * earlier than that + the lease, so reporting at that point is never late */
        bool expired =
            !leased && e && result[i] != 1 && ended - e->last_ok_us >= sure_us(e->lease_ms);
        if (e && result[i] == 1) {
            if (!leased)
                e->last_ok_us = started;
        } else if (e && (result[i] == 0 || expired)) {
            /* The owner is gone from the hash, or the lease has surely run out while the
             * server could not be reached: stop renewing and say so. */
            baton__map_remove(&w->entries, key);
            /* A restart seen while the renewal ran (the new connection's handshake read
             * the new run_id before the renewal went out on it) is the cause, not a
             * deletion: report_all_lost() would have said so had it run first. */
            baton__stat_lost(c,
                             result[i] == 0 && moved              ? BATON__LOST_MASTER_CHANGED
                             : result[i] == 0 && w->epoch_changed ? BATON__LOST_RESTARTED
                             : result[i] == 0 && !expired         ? BATON__LOST_DELETED
                                                                  : BATON__LOST_EXPIRED,
                             e->name);
            take_regs(w, e, cbs, &ncb);
            free_entry(e);
        } else if (e)
            unknown = true;
        free(key);
    }
    sync_pin(w);
    run_callbacks(w, cbs, ncb);
    free(cbs);
    free(result);
    snapshot_free(&s);
    return unknown;
}

typedef struct end_scan {
    baton__watchdog *w;
    int64_t end;
} end_scan;

static void scan_end(const char *key, void *val, void *arg)
{
    (void)key;
    const wd_entry *e = val;
    end_scan *es = arg;
    if (!e->renew)
        return;
    if (e->last_ok_us + sure_us(e->lease_ms) < es->end)
        es->end = e->last_ok_us + sure_us(e->lease_ms);
    group_need(es->w, e->lease_ms); /* out of memory: tried again at the next scan */
}

/* The earliest lease end of the renewed holds, on the boot clock, and the groups brought in
 * line with the holds: a group no renewed hold uses goes, one missing is made (w->mu
 * held). */
static int64_t renewed_end(baton__watchdog *w)
{
    for (size_t i = 0; i < w->ngroups; i++)
        w->groups[i].used = false;
    end_scan es = {w, BATON__NO_DEADLINE};
    baton__map_each(&w->entries, scan_end, &es);
    size_t kept = 0;
    for (size_t i = 0; i < w->ngroups; i++)
        if (w->groups[i].used)
            w->groups[kept++] = w->groups[i];
    w->ngroups = kept;
    return es.end;
}

typedef struct due_scan {
    int64_t now;
    lost_list l;
} due_scan;

static void scan_due(const char *key, void *val, void *arg)
{
    const wd_entry *e = val;
    due_scan *ds = arg;
    if (e->renew && ds->now - e->last_ok_us >= sure_us(e->lease_ms))
        collect_lost(key, val, &ds->l);
}

/* Reports the renewed holds whose lease ended while their renewals failed (w->mu held). */
static void expire_due(baton__watchdog *w)
{
    size_t n = w->entries.count;
    due_scan ds = {baton__boot_us(),
                   {calloc(w->nregs + 1, sizeof(lost_cb)), 0, calloc(n + 1, sizeof(char *))}};
    if (ds.l.cbs && ds.l.keys) {
        baton__map_each(&w->entries, scan_due, &ds);
        size_t ncb = 0;
        for (size_t i = 0; i < ds.l.n; i++) {
            wd_entry *e = ds.l.keys[i] ? baton__map_remove(&w->entries, ds.l.keys[i]) : NULL;
            if (e) {
                baton__stat_lost(w->c, BATON__LOST_EXPIRED, e->name);
                take_regs(w, e, ds.l.cbs, &ncb);
                free_entry(e);
            }
            free(ds.l.keys[i]);
        }
        sync_pin(w);
        run_callbacks(w, ds.l.cbs, ncb);
    }
    free(ds.l.cbs);
    free(ds.l.keys);
}

static void *watchdog_main(void *arg)
{
    baton__watchdog *w = arg;
    baton_client *c = w->c;
    /* leased holds not yet checked on a new master: looked at again every third of the
     * client's watchdog lease */
    int64_t check_period_us = c->cfg.watchdog_ms * 1000 / 3;
    int64_t next_check = BATON__NO_DEADLINE;
    bool leased_unknown = false;
    baton__mutex_lock(&w->mu);
    while (!w->closing) {
        if (w->epoch_changed) {
            report_all_lost(w);
            continue;
        }
        if (w->verify) {
            /* The master moved: a hold is kept only if the new master has it (it
             * replicated in time); the renewed ones are renewed there at once, the leased
             * ones checked. */
            w->verify = false;
            pass(w, false, true, true);
            leased_unknown = pass(w, true, true, true);
            next_check = leased_unknown ? baton__now_us() + check_period_us : BATON__NO_DEADLINE;
            continue;
        }
        /* Wake for the earliest group's renewal, or earlier when a lease whose renewals
         * failed ends first: its holder is told then, not a period later. */
        int64_t end = to_monotonic(renewed_end(w)), due = next_check;
        for (size_t i = 0; i < w->ngroups; i++)
            if (w->groups[i].next_us < due)
                due = w->groups[i].next_us;
        if (baton__cond_wait_until(&w->cond, &w->mu, end < due ? end : due) != ETIMEDOUT)
            continue;
        int64_t now = baton__now_us();
        bool renew = false;
        for (size_t i = 0; i < w->ngroups; i++) {
            wd_group *g = &w->groups[i];
            int64_t period_us = g->lease_ms * 1000 / 3;
            g->due = g->next_us <= now;
            if (!g->due)
                continue;
            renew = true;
            baton__stat_renewal_late(c, now - g->next_us, period_us);
            g->next_us += period_us;
            if (g->next_us < now)
                g->next_us = now + period_us; /* fell behind: don't burst */
        }
        bool check = leased_unknown && next_check <= now;
        if (!renew && !check) {
            expire_due(w);
            continue;
        }
        if (renew)
            pass(w, false, false, false);
        if (check) {
            leased_unknown = pass(w, true, true, true);
            next_check = leased_unknown ? baton__now_us() + check_period_us : BATON__NO_DEADLINE;
        }
    }
    baton__mutex_unlock(&w->mu);
    return NULL;
}

static void on_event(baton_client *c, int event, void *arg);

static int get_watchdog(baton_client *c, baton__watchdog **out)
{
    baton__mutex_lock(&c->lazy_mu);
    if (!c->wd) {
        baton__watchdog *w = calloc(1, sizeof *w);
        if (!w) {
            baton__mutex_unlock(&c->lazy_mu);
            return baton__fail(c, BATON_ENOMEM, "out of memory");
        }
        w->c = c;
        baton__mutex_init(&w->mu);
        baton__cond_init(&w->cond);
        baton__map_init(&w->entries);
        int rc = pthread_create(&w->thread, NULL, watchdog_main, w);
        if (rc != 0) {
            baton__mutex_destroy(&w->mu);
            baton__cond_destroy(&w->cond);
            free(w);
            baton__mutex_unlock(&c->lazy_mu);
            return baton__fail(c, BATON_ENOMEM, "pthread_create: %s", strerror(rc));
        }
        c->wd_free = baton__watchdog_free;
        c->wd = w;
        /* Registered once, with the watchdog: a restart found by any connection (a
         * command's, the dispatcher's) reaches it without the connection layer knowing it. */
        baton__epoch_hook_add(c, on_event, NULL);
    }
    *out = c->wd;
    baton__mutex_unlock(&c->lazy_mu);
    return BATON_OK;
}

int baton__watchdog_add(baton_client *c, const char *name, const char *owner, bool renew,
                        int64_t lease_ms, void (*lost)(void *arg), void *arg, int64_t since_us)
{
    return baton__watchdog_add_kind(c, &baton__script_lock_renew, &baton__script_hold_check, name,
                                    owner, renew, lease_ms, lost, arg, since_us);
}

int baton__watchdog_add_kind(baton_client *c, const baton__script *script,
                             const baton__script *check, const char *name, const char *owner,
                             bool renew, int64_t lease_ms, void (*lost)(void *arg), void *arg,
                             int64_t since_us)
{
    if (lease_ms <= 0)
        lease_ms = c->cfg.watchdog_ms;
    baton__watchdog *w = NULL;
    int rc = get_watchdog(c, &w);
    if (rc != BATON_OK)
        return rc;
    char *key = entry_key(name, owner);
    if (!key)
        return baton__fail(c, BATON_ENOMEM, "out of memory");
    baton__mutex_lock(&w->mu);
    wd_entry *e = baton__map_get(&w->entries, key);
    lost_cb *regs = e ? realloc(e->regs, (size_t)(e->nregs + 1) * sizeof *regs) : NULL;
    if (e && !regs) {
        baton__mutex_unlock(&w->mu);
        free(key);
        return baton__fail(c, BATON_ENOMEM, "out of memory");
    }
    if (e) {
        /* another handle of the same (name, owner): one renewal, each handle told; the
         * shortest of their watchdog leases (the acquisition just sent set it, so the
         * renewals count from now) */
        e->regs = regs;
        e->regs[e->nregs++] = (lost_cb){lost, arg};
        w->nregs++;
        if (lease_ms < e->lease_ms) {
            e->lease_ms = lease_ms;
            e->last_ok_us = baton__boot_us();
        }
        if (renew && !e->renew) {
            e->renew = true;
            e->last_ok_us = baton__boot_us();
        }
    } else {
        e = calloc(1, sizeof *e);
        if (e) {
            e->name = baton__strdup(name);
            e->owner = baton__strdup(owner);
            e->regs = calloc(1, sizeof *e->regs);
        }
        if (!e || !e->name || !e->owner || !e->regs ||
            baton__map_put(&w->entries, key, e) != BATON_OK) {
            if (e)
                free_entry(e);
            baton__mutex_unlock(&w->mu);
            free(key);
            return baton__fail(c, BATON_ENOMEM, "out of memory");
        }
        e->regs[0] = (lost_cb){lost, arg};
        e->nregs = 1;
        w->nregs++;
        e->renew = renew;
        e->lease_ms = lease_ms;
        e->script = script;
        e->check = check;
        /* the lease runs from when the acquisition was sent, not from its reply */
        e->last_ok_us =
            since_us > 0 && since_us < baton__now_us() ? to_boot(since_us) : baton__boot_us();
        sync_pin(w);
    }
    /* its lease's group, made if new (the thread then wakes for its first renewal);
     * without memory for it the hold is renewed with the next group due */
    if (e->renew)
        group_need(w, e->lease_ms);
    baton__mutex_unlock(&w->mu);
    free(key);
    return BATON_OK;
}

/* c's watchdog, NULL if it never started (read under the lazy lock). */
static baton__watchdog *started(baton_client *c)
{
    baton__mutex_lock(&c->lazy_mu);
    baton__watchdog *w = c->wd;
    baton__mutex_unlock(&c->lazy_mu);
    return w;
}

/* Drops arg's registration (every one if `all`), and waits out a running lost callback so
 * that none runs for this hold after the call returns (unless called from one). */
static void drop(baton_client *c, const char *name, const char *owner, const void *arg, bool all)
{
    baton__watchdog *w = started(c);
    if (!w)
        return;
    char *key = entry_key(name, owner);
    if (!key)
        return;
    baton__mutex_lock(&w->mu);
    wd_entry *e = baton__map_get(&w->entries, key);
    if (e && !all) {
        /* arg's registration goes (nothing if arg never registered: another handle's is
         * not this caller's to drop); no callback is left pointing at a handle that may be
         * freed next */
        int i = -1;
        for (int j = 0; j < e->nregs; j++)
            if (e->regs[j].arg == arg)
                i = j;
        if (i >= 0) {
            e->regs[i] = e->regs[e->nregs - 1];
            e->nregs--;
            w->nregs--;
        }
    }
    if (e && (all || e->nregs == 0)) {
        w->nregs -= (size_t)e->nregs;
        baton__map_remove(&w->entries, key);
        free_entry(e);
        sync_pin(w);
    }
    if (!pthread_equal(pthread_self(), w->thread))
        while (w->in_callback)
            baton__cond_wait_until(&w->cond, &w->mu, BATON__NO_DEADLINE);
    baton__mutex_unlock(&w->mu);
    free(key);
}

void baton__watchdog_remove(baton_client *c, const char *name, const char *owner, const void *arg)
{
    drop(c, name, owner, arg, false);
}

void baton__watchdog_forget(baton_client *c, const char *name, const char *owner)
{
    drop(c, name, owner, NULL, true);
}

int baton__watchdog_refs(baton_client *c, const char *name, const char *owner)
{
    baton__watchdog *w = started(c);
    char *key = w ? entry_key(name, owner) : NULL;
    if (!key)
        return 0;
    baton__mutex_lock(&w->mu);
    wd_entry *e = baton__map_get(&w->entries, key);
    int refs = e ? e->nregs : 0;
    baton__mutex_unlock(&w->mu);
    free(key);
    return refs;
}

void baton__watchdog_renew(baton_client *c, const char *name, const char *owner)
{
    baton__watchdog *w = started(c);
    char *key = w ? entry_key(name, owner) : NULL;
    if (!key)
        return;
    baton__mutex_lock(&w->mu);
    wd_entry *e = baton__map_get(&w->entries, key);
    if (e && !e->renew) {
        e->renew = true;
        e->last_ok_us = baton__boot_us();
        group_need(w, e->lease_ms);
    }
    baton__mutex_unlock(&w->mu);
    free(key);
}

/* The topology's events (conn.h). The server restarted: its keys may be gone, every hold
 * is reported lost. Another node is master (Sentinel): each hold is checked there, kept if
 * it replicated in time, reported lost if not. */
static void on_event(baton_client *c, int event, void *arg)
{
    (void)arg;
    baton__watchdog *w = started(c);
    if (!w)
        return;
    baton__mutex_lock(&w->mu);
    if (event == BATON__EV_MASTER)
        w->verify = true;
    else
        w->epoch_changed = true;
    baton__cond_broadcast(&w->cond);
    baton__mutex_unlock(&w->mu);
}

uint64_t baton__watchdog_rounds(baton_client *c)
{
    baton__watchdog *w = started(c);
    if (!w)
        return 0;
    baton__mutex_lock(&w->mu);
    uint64_t n = w->rounds;
    baton__mutex_unlock(&w->mu);
    return n;
}

static void free_value(const char *key, void *val, void *arg)
{
    (void)key;
    (void)arg;
    free_entry(val);
}

void baton__watchdog_free(baton__watchdog *w, bool forked)
{
    if (!forked) {
        baton__mutex_lock(&w->mu);
        w->closing = true;
        baton__cond_broadcast(&w->cond);
        baton__mutex_unlock(&w->mu);
        pthread_join(w->thread, NULL);
    }
    baton__map_each(&w->entries, free_value, NULL);
    baton__map_free(&w->entries);
    free(w->groups);
    if (!forked) {
        baton__mutex_destroy(&w->mu);
        baton__cond_destroy(&w->cond);
    }
    free(w);
}
