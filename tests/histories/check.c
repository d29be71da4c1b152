/*
 * The checkers of the checked histories (see hist.h for the format).
 *
 * Holds. A hold of an exclusive object begins at the server time recorded when its
 * acquire returned ok (after the fact, so later than the server's grant) and ends at the
 * server time recorded just before its release was sent, or when the holder saw its lost
 * signal, or when the nemesis killed its process: the interval is the time the holder
 * *acted* as holder, and it lies inside the time the holder believed it held. Two such
 * intervals of different holders that overlap are two holders at once, whatever the
 * clocks of the clients (every time is read from one server).
 *
 * Allowed. The guarantees (docs/guarantees.md) allow an overlap when the earlier holder's
 * process was stopped past its lease (a pause the holder cannot notice: fencing is the
 * answer) or the lock's data was lost (a restart without AOF, a failover without
 * sync_replicas) during the earlier hold; such overlaps are counted as "allowed", with
 * their excerpt, not as violations. Everything else is a violation.
 */
#define _GNU_SOURCE
#include "hist.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- reading ------------- */

bool hist_parse_line(const char *line, hev *e)
{
    memset(e, 0, sizeof *e);
    long long t, mono, token, value;
    int n = sscanf(line, "%lld %lld %d %d %15s %15s %7s %lld %d %lld", &t, &mono, &e->proc, &e->inc,
                   e->obj, e->op, e->type, &token, &e->rc, &value);
    if (n != 10)
        return false;
    e->t = t;
    e->mono = mono;
    e->token = token;
    e->value = value;
    return strcmp(e->type, "invoke") == 0 || strcmp(e->type, "ok") == 0 ||
           strcmp(e->type, "fail") == 0 || strcmp(e->type, "info") == 0;
}

void hist_add(hist *h, const hev *e)
{
    if (h->n == h->cap) {
        h->cap = h->cap ? h->cap * 2 : 1024;
        h->ev = realloc(h->ev, h->cap * sizeof *h->ev);
        if (!h->ev)
            abort();
    }
    h->ev[h->n] = *e;
    h->ev[h->n].seq = (long)h->n;
    h->n++;
}

bool hist_read_file(hist *h, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "hist: cannot read %s\n", path);
        return false;
    }
    char line[512];
    long no = 0;
    bool good = true;
    while (fgets(line, sizeof line, f)) {
        no++;
        hev e;
        size_t len = strlen(line);
        if (len == 0 || line[len - 1] != '\n') {
            /* a last line cut by kill -9: the event was not completely written */
            if (!feof(f))
                good = false;
            break;
        }
        if (!hist_parse_line(line, &e)) {
            fprintf(stderr, "hist: %s:%ld does not parse: %s", path, no, line);
            good = false;
            continue;
        }
        hist_add(h, &e);
    }
    fclose(f);
    return good;
}

static int cmp_ev(const void *a, const void *b)
{
    const hev *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

void hist_sort(hist *h)
{
    qsort(h->ev, h->n, sizeof *h->ev, cmp_ev);
    for (size_t i = 0; i < h->n; i++)
        h->ev[i].seq = (long)i;
}

void hist_free(hist *h)
{
    free(h->ev);
    memset(h, 0, sizeof *h);
}

void hist_print_event(FILE *out, const hev *e)
{
    fprintf(out, "    %" PRId64 " %" PRId64 " %d %d %s %s %s %" PRId64 " %d %" PRId64 "\n", e->t,
            e->mono, e->proc, e->inc, e->obj, e->op, e->type, e->token, e->rc, e->value);
}

void hist_params_default(hist_params *p)
{
    p->sem_permits = 2;
    p->permits_permits = 3;
    p->latch_count = 2;
    p->fifo_margin_us = 250000;
    p->watchdog_ms = 3000;
    p->barrier_parties = 0;
    p->excerpts = 3;
}

static bool is(const hev *e, const char *obj, const char *op, const char *type)
{
    return (!obj || strcmp(e->obj, obj) == 0) && (!op || strcmp(e->op, op) == 0) &&
           (!type || strcmp(e->type, type) == 0);
}

static bool is_nemesis(const hev *e)
{
    return strcmp(e->obj, "nemesis") == 0;
}

void hist_count(const hist *h, hist_counts *c)
{
    memset(c, 0, sizeof *c);
    int64_t net_t = -1; /* the last partition or slow link counted (-1: none) */
    for (size_t i = 0; i < h->n; i++) {
        const hev *e = &h->ev[i];
        if (is_nemesis(e)) {
            /* a fault is counted once: at its invoke, or its only event; a partition or a
             * slow link has an invoke per client it reaches, all within a few ms */
            bool net = strcmp(e->op, "partition") == 0 || strcmp(e->op, "slow") == 0;
            if (net && strcmp(e->type, "invoke") == 0) {
                if (net_t < 0 || e->t - net_t > 100000)
                    c->faults++;
                net_t = e->t;
            } else if (strcmp(e->type, "invoke") == 0 ||
                       (strcmp(e->type, "ok") == 0 &&
                        (strcmp(e->op, "ckill") == 0 || strcmp(e->op, "flush") == 0)))
                c->faults++;
            continue;
        }
        if (strcmp(e->op, "lost") == 0)
            continue;
        if (strcmp(e->type, "invoke") == 0)
            c->ops++;
        else if (strcmp(e->type, "ok") == 0)
            c->ok++;
        else if (strcmp(e->type, "fail") == 0)
            c->fail++;
        else
            c->info++;
    }
}

/* ------------------------------------------------------------- holds --------------- */

/* What excuses an overlap (see the top of this file). */
#define EX_PAUSE 1        /* the holder's process was stopped past its lease */
#define EX_LOSS 2         /* the server lost the lock's data during the hold */
#define EX_SERVER_PAUSE 4 /* CLIENT PAUSE past the lease minus a renewal period */
#define EX_PARTITION 8    /* the holder cut off past the lease minus a renewal period */
#define EX_MEMBER 16      /* Redlock: a member of the hold restarted empty, the holder told */
/* a counting semaphore: releases after a loss gave back permits the loss took away */
#define EX_SURPLUS 32

typedef struct hold {
    int proc, inc;
    char kind; /* 'x' exclusive, 'r' read, 'w' write, 'p' a permit */
    int64_t start, end, token;
    int64_t invoke;    /* its acquire's invoke (start when none was recorded): the grant
                          came after it */
    int64_t lease_ms;  /* its fixed lease (0: the watchdog's; a counting semaphore: none) */
    int64_t lease_end; /* a fixed lease's end (INT64_MAX: the watchdog's) */
    size_t i_acq, i_end;
    bool lost, killed, open_at_end, expired;
} hold;

typedef struct holds {
    hold *v;
    size_t n, cap;
} holds;

typedef struct open_st {
    int proc, inc;
    long idx; /* into holds, -1 if none open */
} open_st;

static void close_hold(holds *hs, long idx, const hev *e, size_t i)
{
    hold *x = &hs->v[idx];
    x->end = e->t;
    x->i_end = i;
}

static char acquire_kind(const hev *e)
{
    if (strcmp(e->op, "acquire") == 0)
        return strcmp(e->obj, "sem") == 0 || strcmp(e->obj, "permits") == 0 ? 'p' : 'x';
    if (strcmp(e->op, "racquire") == 0)
        return 'r';
    if (strcmp(e->op, "wacquire") == 0)
        return 'w';
    return 0;
}

/* The holds of obj, in the order they began. */
static holds extract(const hist *h, const char *obj)
{
    holds hs = {0};
    open_st st[1024];
    size_t nst = 0;
    for (size_t i = 0; i < h->n; i++) {
        const hev *e = &h->ev[i];
        if (is_nemesis(e)) {
            if (strcmp(e->op, "kill") == 0) {
                for (size_t k = 0; k < nst; k++)
                    if (hist_os_proc(st[k].proc) == e->proc && st[k].idx >= 0) {
                        close_hold(&hs, st[k].idx, e, i);
                        hs.v[st[k].idx].killed = true;
                        st[k].idx = -1;
                    }
            }
            continue;
        }
        if (strcmp(e->obj, obj) != 0)
            continue;
        size_t k;
        for (k = 0; k < nst; k++)
            if (st[k].proc == e->proc && st[k].inc == e->inc)
                break;
        if (k == nst) {
            if (nst == sizeof st / sizeof st[0])
                abort();
            st[nst].proc = e->proc;
            st[nst].inc = e->inc;
            st[nst].idx = -1;
            nst++;
        }
        char kind = acquire_kind(e);
        if (kind && strcmp(e->type, "ok") == 0) {
            if (st[k].idx >= 0) /* a client holds one at a time: close the previous */
                close_hold(&hs, st[k].idx, e, i);
            if (hs.n == hs.cap) {
                hs.cap = hs.cap ? hs.cap * 2 : 256;
                hs.v = realloc(hs.v, hs.cap * sizeof *hs.v);
                if (!hs.v)
                    abort();
            }
            hold *x = &hs.v[hs.n];
            memset(x, 0, sizeof *x);
            x->lease_end = INT64_MAX;
            /* its invoke: the client's last invoke on obj before the ok, if it is this
             * acquire's (hand-made histories may have none) */
            x->invoke = e->t;
            for (size_t q = i; q-- > 0;) {
                const hev *y = &h->ev[q];
                if (y->proc != e->proc || y->inc != e->inc || strcmp(y->obj, obj) != 0 ||
                    strcmp(y->type, "invoke") != 0)
                    continue;
                if (strcmp(y->op, e->op) == 0)
                    x->invoke = y->t;
                break;
            }
            /* a fixed lease: it ends at the latest lease ms after the acquire was sent,
             * whatever the holder does. A counting semaphore has no lease: whatever its
             * acquire's VALUE says (its workload once recorded the permit count there, 1,
             * which cut every semaphore hold to 1 ms), its permit is held until released */
            if (e->value > 0 && strcmp(obj, "sem") != 0) {
                x->lease_ms = e->value;
                x->lease_end = x->invoke + e->value * 1000;
            }
            x->proc = e->proc;
            x->inc = e->inc;
            x->kind = kind;
            x->start = e->t;
            x->token = e->token;
            x->i_acq = i;
            st[k].idx = (long)hs.n++;
        } else if (st[k].idx >= 0 && strcmp(e->op, "release") == 0 &&
                   strcmp(e->type, "invoke") == 0) {
            close_hold(&hs, st[k].idx, e, i);
            st[k].idx = -1;
        } else if (st[k].idx >= 0 && strcmp(e->op, "lost") == 0) {
            close_hold(&hs, st[k].idx, e, i);
            hs.v[st[k].idx].lost = true;
            st[k].idx = -1;
        }
    }
    for (size_t k = 0; k < nst; k++)
        if (st[k].idx >= 0 && h->n > 0) {
            close_hold(&hs, st[k].idx, &h->ev[h->n - 1], h->n - 1);
            hs.v[st[k].idx].open_at_end = true;
        }
    for (size_t k = 0; k < hs.n; k++)
        if (hs.v[k].end > hs.v[k].lease_end) {
            hs.v[k].end = hs.v[k].lease_end;
            hs.v[k].expired = true;
        }
    return hs;
}

/* What excuses a hold's overlap with another that began at `until`: a pause of its
 * process past the lease, or a loss of the server's data, between its start and until. */
/* Whether a loss of the server's data may have happened within [from, to]: a server kill
 * that lost the data (VALUE 0), a failover without sync_replicas (VALUE 0), or memory
 * pressure under an evicting policy (evict, VALUE 0: the guarantees require noeviction), each an
 * interval from its invoke to its end (srvup, or the failover's ok / fail: the nemesis
 * ends them once the deployment has settled), intersecting [from, to]. */
/* The end (SRV_US) of the fault that event i invokes: its own srvup, or its own ok / fail.
 * The nemesis writes a fault's invoke and its end one after the other, but may date the
 * invoke back (a failover the sentinels made on their own is logged when it is seen, from
 * the last look on): by time, another fault's end can come between them. Ends are never
 * dated back, so the first end after the invoke, in time, that was also written after it
 * (MONO_NS) is its own; hand-made histories without MONO_NS take the first end in time.
 * A fault of one process (a pause, a client's partition) ends with that process's event.
 * INT64_MAX when it never ended. */
static int64_t fault_end(const hist *h, size_t i)
{
    const hev *e = &h->ev[i];
    const char *end_op = strcmp(e->op, "srvkill") == 0 ? "srvup" : e->op;
    for (size_t j = i + 1; j < h->n; j++) {
        const hev *x = &h->ev[j];
        if (is_nemesis(x) && strcmp(x->op, end_op) == 0 && strcmp(x->type, "invoke") != 0 &&
            x->proc == e->proc && (e->mono == 0 || x->mono > e->mono))
            return x->t;
    }
    return INT64_MAX;
}

/* Whether a nemesis invoke that kind() accepts lasted into [from, to] (it began by `to`
 * and ended at `from` or later). */
static bool fault_within(const hist *h, int64_t from, int64_t to, bool (*kind)(const hev *))
{
    for (size_t i = 0; i < h->n; i++) {
        const hev *e = &h->ev[i];
        if (e->t > to)
            break;
        if (is_nemesis(e) && strcmp(e->type, "invoke") == 0 && kind(e) && fault_end(h, i) >= from)
            return true;
    }
    return false;
}

/* A fault that may lose data: a server killed without its AOF, a failover, an eviction. */
static bool is_loss(const hev *e)
{
    return e->value == 0 && (strcmp(e->op, "srvkill") == 0 || strcmp(e->op, "failover") == 0 ||
                             strcmp(e->op, "evict") == 0);
}

static bool is_failover(const hev *e)
{
    return strcmp(e->op, "failover") == 0;
}

/* One Redlock server restarted without its data (srvkill VALUE 2). */
static bool is_member_lost(const hev *e)
{
    return strcmp(e->op, "srvkill") == 0 && e->value == 2;
}

static bool loss_within(const hist *h, int64_t from, int64_t to)
{
    return fault_within(h, from, to, is_loss);
}

/* Whether a failover, with or without sync_replicas, may have happened within [from, to]:
 * sync_replicas covers the locks only; a semaphore's count, a permit lease, a latch's count
 * and a barrier's state are replicated as they come, and a failover may lose their last
 * changes (docs/guarantees.md: "a count across a failover" is not kept). */
static bool failover_within(const hist *h, int64_t from, int64_t to)
{
    return fault_within(h, from, to, is_failover);
}

/* Whether one Redlock server restarted without its data within [from, to]. */
static bool member_lost(const hist *h, int64_t from, int64_t to)
{
    return fault_within(h, from, to, is_member_lost);
}

static int excuse(const hist *h, const hold *a, int64_t until, int64_t server_pause_ms)
{
    int ex = 0;
    for (size_t i = 0; i < h->n; i++) {
        const hev *e = &h->ev[i];
        if (!is_nemesis(e))
            continue;
        if (strcmp(e->op, "pause") == 0 && e->proc == hist_os_proc(a->proc) && e->value == 1) {
            /* the stop (invoke) before `until` and its end (ok) after the hold began */
            if (strcmp(e->type, "invoke") == 0 && e->t <= until) {
                int64_t cont = INT64_MAX;
                for (size_t j = i + 1; j < h->n; j++)
                    if (is(&h->ev[j], "nemesis", "pause", "ok") && h->ev[j].proc == e->proc) {
                        cont = h->ev[j].t;
                        break;
                    }
                if (cont >= a->start)
                    ex |= EX_PAUSE;
            }
        } else if (server_pause_ms > 0 && is(e, "nemesis", "partition", "invoke") &&
                   e->proc == hist_os_proc(a->proc) && e->value >= server_pause_ms &&
                   e->t <= until && e->t + e->value * 1000 >= a->start) {
            ex |= EX_PARTITION;
        } else if (server_pause_ms > 0 && is(e, "nemesis", "cpause", "invoke") &&
                   e->value >= server_pause_ms && e->t <= until &&
                   e->t + e->value * 1000 >= a->start) {
            ex |= EX_SERVER_PAUSE;
        }
    }
    if (loss_within(h, a->start, until))
        ex |= EX_LOSS;
    return ex;
}

static void excerpt(FILE *out, const hist *h, const hold *a, const hold *b)
{
    size_t from = a->i_acq, to = b->i_acq > a->i_end ? b->i_acq : a->i_end;
    if (b->i_end > to)
        to = b->i_end;
    int shown = 0;
    for (size_t i = from; i <= to && i < h->n; i++) {
        const hev *e = &h->ev[i];
        bool mine =
            (e->proc == a->proc && e->inc == a->inc) || (e->proc == b->proc && e->inc == b->inc);
        if (!(mine && strcmp(e->obj, h->ev[a->i_acq].obj) == 0) && !is_nemesis(e))
            continue;
        if (shown++ >= 40) {
            fprintf(out, "    ...\n");
            break;
        }
        hist_print_event(out, e);
    }
}

static const char *why(int ex)
{
    return ex & EX_PAUSE          ? "allowed: the earlier holder was stopped past its lease"
           : ex & EX_LOSS         ? "allowed: the server lost its data during the hold"
           : ex & EX_SERVER_PAUSE ? "allowed: the server was paused past the lease's margin"
           : ex & EX_PARTITION    ? "allowed: the holder was partitioned past the lease's margin"
           : ex & EX_MEMBER       ? "allowed: a member of the earlier quorum restarted empty"
           : ex & EX_SURPLUS      ? "allowed: releases after a loss gave back permits the count "
                                    "never lost"
                                  : "VIOLATION";
}

static bool conflict(char a, char b)
{
    if (a == 'x' || b == 'x')
        return true;
    return a == 'w' || b == 'w';
}

/* Whether to print a finding's excerpt: at most `max` of the allowed ones and as many of the
 * violations, counted apart (shown[0] violations, shown[1] allowed), so that a violation is
 * shown whatever number of allowed findings came before it. */
static bool show(int shown[2], bool allowed, int max, FILE *out)
{
    if (!out || shown[allowed] >= max)
        return false;
    shown[allowed]++;
    return true;
}

static hist_verdict overlaps(const hist *h, const char *obj, const char *name, const hist_params *p,
                             FILE *out)
{
    hist_verdict v = {name, 0, 0, 0};
    holds hs = extract(h, obj);
    v.checked = (long)hs.n;
    int shown[2] = {0, 0};
    for (size_t j = 0; j < hs.n; j++) {
        hold *b = &hs.v[j];
        /* every earlier hold that overlaps b, not only the first: an excused overlap must
         * not hide an unexcused one with the same hold. b counts once: as a violation if
         * any of its overlaps is one, else as allowed if any is allowed */
        bool bad = false, excused = false;
        for (size_t i = 0; i < j; i++) {
            hold *a = &hs.v[i];
            if (a->proc == b->proc && a->inc == b->inc)
                continue;
            if (a->end <= b->start || !conflict(a->kind, b->kind))
                continue;
            int ex = excuse(h, a, b->start, p->watchdog_ms * 2 / 3);
            /* Redlock: one server of three restarted without its data (srvkill, VALUE 2)
             * during a hold that had only a bare majority, one of them on that server: the
             * holder keeps one member of three and another can take two. Its holder is told
             * (its hold ends "lost": fewer than two members left), and the guarantees do
             * not keep exclusion then (a member restarted empty within a lease). A hold of
             * all three members survives such a restart (not told lost): not excused. */
            if (!ex && a->lost && strcmp(obj, "redlock") == 0 && member_lost(h, a->start, b->start))
                ex = EX_MEMBER;
            if (ex)
                excused = true;
            else
                bad = true;
            if (show(shown, ex != 0, p->excerpts, out)) {
                fprintf(out,
                        "  %s: %s: hold of %d.%d (token %" PRId64 ", %c) from %" PRId64
                        " to %" PRId64 "%s overlaps hold of %d.%d (token %" PRId64
                        ", %c) from %" PRId64 " by %" PRId64 " us\n",
                        name, why(ex), a->proc, a->inc, a->token, a->kind, a->start, a->end,
                        a->lost     ? " (told lost)"
                        : a->killed ? " (killed)"
                                    : "",
                        b->proc, b->inc, b->token, b->kind, b->start, a->end - b->start);
                excerpt(out, h, a, b);
            }
        }
        if (bad)
            v.violations++;
        else if (excused)
            v.allowed++;
    }
    free(hs.v);
    return v;
}

hist_verdict hist_check_mutex(const hist *h, const char *obj, const hist_params *p, FILE *out)
{
    return overlaps(h, obj,
                    strcmp(obj, "fair") == 0      ? "fair lock"
                    : strcmp(obj, "redlock") == 0 ? "redlock"
                    : strcmp(obj, "elect") == 0   ? "election"
                                                  : "mutex",
                    p, out);
}

hist_verdict hist_check_rw(const hist *h, const hist_params *p, FILE *out)
{
    return overlaps(h, "rw", "read-write lock", p, out);
}

/* ------------------------------------------------------------- fencing ------------- */

static bool data_lost_between(const hist *h, int64_t from, int64_t to)
{
    return loss_within(h, from, to);
}

/* Whether the holder of b had an operation of unknown outcome on obj before b began. */
static bool unknown_before(const hist *h, const char *obj, const hold *b)
{
    for (size_t k = 0; k < b->i_acq; k++) {
        const hev *x = &h->ev[k];
        if (x->proc == b->proc && x->inc == b->inc && strcmp(x->obj, obj) == 0 &&
            strcmp(x->type, "info") == 0)
            return true;
    }
    return false;
}

hist_verdict hist_check_fenced(const hist *h, const char *obj, const hist_params *p, FILE *out)
{
    hist_verdict v = {strcmp(obj, "rw") == 0      ? "fenced rw"
                      : strcmp(obj, "elect") == 0 ? "election terms"
                                                  : "fenced mutex",
                      0, 0, 0};
    holds hs = extract(h, obj);
    int shown[2] = {0, 0};
    /* 1. tokens rise: a hold that began after another ended has a larger token. b is
     * compared with every earlier hold a that ended before it began and whose token is not
     * lower (not only the first such: with a token that does not rise, that is the run's
     * first hold, and one loss after it would excuse every later hold). A pair is excused
     * only by a loss of the data between a's start and b's start; the a that began last
     * leaves the shortest such interval, inside every other one: if a loss excuses it, it
     * excuses them all, so b is a violation exactly when that a's interval has no loss. A
     * token repeated by the same holder after an operation of unknown outcome (the same
     * server hold, re-entered) is allowed and left out of the comparison.
     *
     * Why a later hold must have a larger token: a was granted by its ok (a->start); had b
     * been granted before a, b's lock would have been alive when a was granted (b's
     * release was sent after its ok, after a ended), and a could not have been granted.
     * That holds only while b's lease had not run out: its lease (fixed, or the watchdog's
     * first) counted from its acquire's invoke is all the history proves. An acquire that
     * returned after its lease ran out (seed 502: two acquisitions of 300 ms leases kept
     * 1.3 s in their acquire, granted one after the other while the WAIT of
     * sync_replicas waited for the replica, answered together) may have been granted
     * before a: such a pair orders nothing. Nor does a's own lease: a hold whose lease ran
     * out before its ok "ends" before it begins, but it was granted by its ok, not by its
     * end. */
    for (size_t j = 0; j < hs.n; j++) {
        hold *b = &hs.v[j];
        if (b->kind == 'r')
            continue;
        v.checked++;
        hold *last = NULL;
        bool same = false;
        /* b's lock was certainly alive until then (unless the data was lost) */
        int64_t b_alive = b->invoke + (b->lease_ms > 0 ? b->lease_ms : p->watchdog_ms) * 1000;
        for (size_t i = 0; i < j; i++) {
            hold *a = &hs.v[i];
            if (a->kind == 'r' || a->end > b->start || a->token < b->token)
                continue;
            if (a->start > b_alive)
                continue; /* b may have been granted first and have run out before a */
            if (a->proc == b->proc && a->inc == b->inc && a->token == b->token &&
                unknown_before(h, obj, b)) {
                /* the same server hold: re-entered after an operation of unknown outcome
                 * left it behind (the reentrant checker reports the counts) */
                same = true;
                continue;
            }
            if (!last || a->start > last->start)
                last = a;
        }
        if (!last) {
            if (same)
                v.allowed++;
            continue;
        }
        hold *a = last;
        bool lost = data_lost_between(h, a->start, b->start);
        if (lost)
            v.allowed++;
        else
            v.violations++;
        if (show(shown, lost, p->excerpts, out)) {
            fprintf(out,
                    "  %s: %s: token %" PRId64 " of %d.%d (from %" PRId64 ") after token %" PRId64
                    " of %d.%d (ended %" PRId64 ")\n",
                    v.checker,
                    lost ? "allowed: the server lost its data (the token counter with it)"
                         : "VIOLATION: tokens did not rise",
                    b->token, b->proc, b->inc, b->start, a->token, a->proc, a->inc, a->end);
            excerpt(out, h, a, b);
        }
    }
    /* 2. the store never accepts a lower token after it accepted a higher one: an accepted
     * write's token is at least that of every write accepted before it was sent */
    int64_t top = 0;
    size_t top_i = 0;
    for (size_t i = 0; i < h->n; i++) {
        const hev *e = &h->ev[i];
        if (!is(e, obj, "store", NULL))
            continue;
        if (strcmp(e->type, "ok") == 0) {
            v.checked++;
            /* find its invoke: the last store invoke of the same process before it */
            int64_t sent = e->t;
            for (size_t k = i; k-- > 0;)
                if (is(&h->ev[k], obj, "store", "invoke") && h->ev[k].proc == e->proc &&
                    h->ev[k].inc == e->inc) {
                    sent = h->ev[k].t;
                    break;
                }
            if (e->token < top && h->ev[top_i].t < sent) {
                if (data_lost_between(h, h->ev[top_i].t, e->t))
                    v.allowed++;
                else {
                    v.violations++;
                    if (show(shown, false, p->excerpts, out)) {
                        fprintf(out,
                                "  %s: VIOLATION: the store accepted token %" PRId64
                                " after it had accepted %" PRId64 "\n",
                                v.checker, e->token, top);
                        hist_print_event(out, &h->ev[top_i]);
                        hist_print_event(out, e);
                    }
                }
            }
            if (e->token > top) {
                top = e->token;
                top_i = i;
            }
        }
    }
    free(hs.v);
    return v;
}

/* ------------------------------------------------------------- hold counts --------- */

/* "count" events: VALUE = expected * 1000 + the count the server read. A read larger than
 * expected is a hold the server keeps that the client does not know of (a leftover); a
 * read smaller is a hold lost while the client believed it held. */
hist_verdict hist_check_reentrant(const hist *h, const char *obj, const hist_params *p, FILE *out)
{
    hist_verdict v = {"reentrant", 0, 0, 0};
    int shown[2] = {0, 0};
    for (size_t i = 0; i < h->n; i++) {
        const hev *e = &h->ev[i];
        if (!is(e, obj, "count", "ok"))
            continue;
        v.checked++;
        int64_t expected = e->value / 1000, read = e->value % 1000;
        if (read == expected)
            continue;
        /* allowed: the hold was lost by a fault the guarantees name, or (read > expected)
         * this client had an acquire of unknown outcome before: it may have taken a hold */
        bool ok = false;
        int64_t since = INT64_MIN, lease_ms = 0;
        for (size_t k = i; k-- > 0;) {
            const hev *x = &h->ev[k];
            if (x->proc == e->proc && x->inc == e->inc && is(x, obj, "acquire", "ok")) {
                since = x->t;
                lease_ms = x->value;
                break;
            }
        }
        if (read < expected) {
            /* a fixed lease that had ended (the holder was kept past it in a call), or a
             * fault the guarantees name */
            hold a = {.proc = e->proc, .inc = e->inc, .start = since};
            ok = (lease_ms > 0 && since + lease_ms * 1000 <= e->t) ||
                 excuse(h, &a, e->t, p->watchdog_ms * 2 / 3) != 0;
        } else {
            for (size_t k = 0; k < i && !ok; k++) {
                const hev *x = &h->ev[k];
                if (x->proc == e->proc && x->inc == e->inc && strcmp(x->obj, obj) == 0 &&
                    strcmp(x->type, "info") == 0 &&
                    (strcmp(x->op, "acquire") == 0 || strcmp(x->op, "reenter") == 0 ||
                     strcmp(x->op, "exit") == 0 || strcmp(x->op, "release") == 0))
                    ok = true;
                /* or a release (an exit) of its that a failover or a loss of the data after
                 * it was sent may have undone: a release is not followed by WAIT, so even
                 * with sync_replicas a failover can lose it, and the hold it ended is there
                 * again on the new master for the client's next acquire to re-enter */
                if (x->proc == e->proc && x->inc == e->inc && strcmp(x->obj, obj) == 0 &&
                    strcmp(x->type, "invoke") == 0 &&
                    (strcmp(x->op, "exit") == 0 || strcmp(x->op, "release") == 0) &&
                    (failover_within(h, x->t, e->t) || loss_within(h, x->t, e->t)))
                    ok = true;
            }
        }
        if (ok)
            v.allowed++;
        else
            v.violations++;
        if (show(shown, ok, p->excerpts, out)) {
            fprintf(out,
                    "  reentrant: %s: %d.%d expected hold count %" PRId64
                    ", the server has %" PRId64 "\n",
                    ok ? (read > expected ? "allowed: an earlier operation's outcome was unknown, "
                                            "or a failover or a loss may have undone a release"
                                          : "allowed: its fixed lease ended, or a fault the "
                                            "guarantees name")
                       : (read > expected ? "VIOLATION"
                                          : "VIOLATION: the hold was gone and the holder not told"),
                    e->proc, e->inc, expected, read);
            int n = 0;
            for (size_t k = i + 1; k-- > 0 && n < 12;) {
                const hev *x = &h->ev[k];
                if ((x->proc == e->proc && x->inc == e->inc && strcmp(x->obj, obj) == 0) ||
                    is_nemesis(x)) {
                    hist_print_event(out, x);
                    n++;
                }
            }
        }
    }
    return v;
}

/* ------------------------------------------------------------- permits ------------- */

/*
 * The counting semaphore (sem) under losses: what the check allows, and why it is sound.
 *
 * Redisson's RSemaphore, as baton keeps it: the count is a string; an acquire takes a permit
 * only if the count has one (DECRBY); a release adds its permit whatever the count says
 * (INCRBY; on a missing key it creates a count of 1); try_set_permits sets the count only
 * if there is none ("set" in the history: ok VALUE 1 = it was set). A permit has no lease:
 * a holder stopped past any lease, a CLIENT PAUSE or a partition still holds it (no pause
 * excuses a sem holder; permit leases, "permits", keep those excuses).
 *
 * On one copy of the data, count + holders whose acquire that copy saw = n + E, where E
 * grows by one with each release of a permit the copy never saw taken, and the check is
 * "holders the copy saw <= n + E" (count >= 0). Holders whose acquire a loss may have taken
 * away (a loss lasting into their hold: excused) are not counted. What E may be at an
 * acquire b:
 *
 * 1. A loss that keeps a count (a failover: a replica behind its master) may lose the
 *    acquires of holds that span it; the release of such a hold, on the master that goes
 *    on, adds a permit (seed 504's 3 and 4 holders of 2). Each release adds one at most,
 *    and each client incarnation one per loss at most (it moves once from one master to
 *    the other). A killed holder never releases. After a loss that leaves no count (a
 *    restart without the data, an eviction) a release creates a count of 1 from nothing:
 *    it adds a permit only if a set may have run between the loss and the release (a
 *    "set" whose outcome may be "set", invoked before the release completed).
 * 2. A set that succeeded found no count: the data were lost, and the count is n from the
 *    set on. Every hold open at the set (acquire invoked before the set completed, release
 *    completed after it was invoked, or never) whose acquire a loss before the set may
 *    have taken away (a loss that began before the set completed and ended after the
 *    acquire was invoked) holds a permit the new count does not know: its release adds
 *    one. A hold open at a set without such a loss adds nothing (its permit was in the
 *    count the set found: it could not have been set), and so a count overwritten
 *    rather than found missing shows as an overcommit. An acquire sent after the set
 *    completed does not count the holds open at it as holders (their permits are not in
 *    the new count).
 * 3. A set that succeeded re-creates the count from nothing: what releases had added to
 *    the count before it (1) went with that count. So at an acquire b, only the releases
 *    that may have run after the last set that succeeded before b was sent (its completion
 *    before b's invoke) count: those that completed after that set was invoked. A set of
 *    unknown outcome resets nothing (it may not have run), but its open holds count as
 *    in 2.
 *
 * 4. The workload's reset ("delete", then "set"): a count that exists but has let no
 *    client in for two acquires of 2 s in a row (permits gone with releases of unknown
 *    outcome that never ran, or with killed holders) is deleted and set again. A delete
 *    that may have removed a count is a loss that keeps nothing, from its invoke to its
 *    completion: the holders open across it are excused, and 1 to 3 apply to it as to
 *    any loss (the set after it is rule 2). A hold whose acquire was answered after a
 *    delete began, with no count possible between that delete and the answer (no set or
 *    release that may have made one), took its permit before the delete: it is excused as
 *    one open across it (sem_before_reset). The final count of a run with a reset is not
 *    checked (allowed, as after a loss).
 *
 * So b is a violation when the holders that no loss excuses are n + E(b) or more, E(b) the
 * number of holds of (1) or (2) whose release was sent by b's ok and completed after the
 * last set before b was invoked. Each hold adds one permit at most.
 */

static int cmp_i64(const void *a, const void *b);

/* Whether the release that ended hold x was refused (fail: it did not happen). */
static bool release_failed(const hist *h, const hold *x)
{
    const hev *r = &h->ev[x->i_end];
    for (size_t k = x->i_end + 1; k < h->n; k++) {
        const hev *y = &h->ev[k];
        if (y->proc == r->proc && y->inc == r->inc && strcmp(y->obj, r->obj) == 0 &&
            strcmp(y->op, "release") == 0)
            return strcmp(y->type, "fail") == 0;
    }
    return false;
}

/* When the release that ended hold x completed (INT64_MAX: no completion recorded; it may
 * have run at any time after it was sent). */
static int64_t release_done(const hist *h, const hold *x)
{
    const hev *r = &h->ev[x->i_end];
    if (!is(r, NULL, "release", "invoke"))
        return INT64_MAX;
    for (size_t k = x->i_end + 1; k < h->n; k++) {
        const hev *y = &h->ev[k];
        if (y->proc == r->proc && y->inc == r->inc && strcmp(y->obj, r->obj) == 0 &&
            strcmp(y->op, "release") == 0)
            return strcmp(y->type, "invoke") == 0 ? INT64_MAX : y->t;
    }
    return INT64_MAX;
}

/* A try_set_permits of the counting semaphore ("set"): invoked, completed (its client's
 * kill if it was killed in the call; INT64_MAX: the history ended first), made (ok, VALUE
 * 1: no count was there, and now there is n), maybe (made, or of unknown outcome: info, or
 * cut short). */
typedef struct sem_set {
    int64_t invoke, done;
    bool made, maybe;
} sem_set;

static sem_set *sem_ops(const hist *h, const char *obj, const char *op, size_t *n_out)
{
    sem_set *v = NULL;
    size_t n = 0, cap = 0;
    for (size_t i = 0; i < h->n; i++) {
        const hev *e = &h->ev[i];
        if (strcmp(e->obj, obj) != 0 || !is(e, NULL, op, "invoke"))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            v = realloc(v, cap * sizeof *v);
            if (!v)
                abort();
        }
        sem_set s = {e->t, INT64_MAX, false, true};
        for (size_t k = i + 1; k < h->n; k++) {
            const hev *y = &h->ev[k];
            if (is(y, "nemesis", "kill", "invoke") && y->proc == hist_os_proc(e->proc)) {
                s.done = y->t; /* killed in the call: it ran by then, or never */
                break;
            }
            if (y->proc != e->proc || y->inc != e->inc || strcmp(y->obj, obj) != 0 ||
                strcmp(y->op, op) != 0)
                continue;
            if (strcmp(y->type, "invoke") != 0) {
                s.done = y->t;
                s.made = strcmp(y->type, "ok") == 0 && y->value == 1;
                /* a delete that did not fail may have removed a count, whatever its VALUE
                 * (runs before this was fixed recorded 0 for every delete) */
                s.maybe = s.made || strcmp(y->type, "info") == 0 ||
                          (strcmp(op, "delete") == 0 && strcmp(y->type, "ok") == 0);
            }
            break;
        }
        v[n++] = s;
    }
    *n_out = n;
    return v;
}

/* The losses that may take a semaphore's acquisitions: a failover (with sync_replicas or
 * not: it covers the locks only), a restart without the data, an eviction; each from its
 * invoke to its end. keeps[l]: a failover (the new master has a count, perhaps behind). */
typedef struct sem_losses {
    int64_t *from, *to;
    bool *keeps;
    size_t n;
} sem_losses;

static sem_losses sem_loss_list(const hist *h, const sem_set *dels, size_t ndels)
{
    sem_losses L = {0};
    size_t cap = 0;
    for (size_t i = 0; i < h->n + ndels; i++) {
        const hev *e = i < h->n ? &h->ev[i] : NULL;
        if (e &&
            (!is_nemesis(e) || strcmp(e->type, "invoke") != 0 || !(is_loss(e) || is_failover(e))))
            continue;
        if (!e && !dels[i - h->n].maybe)
            continue;
        if (L.n == cap) {
            cap = cap ? cap * 2 : 64;
            L.from = realloc(L.from, cap * sizeof *L.from);
            L.to = realloc(L.to, cap * sizeof *L.to);
            L.keeps = realloc(L.keeps, cap * sizeof *L.keeps);
            if (!L.from || !L.to || !L.keeps)
                abort();
        }
        if (e) {
            L.from[L.n] = e->t;
            L.to[L.n] = fault_end(h, i);
            L.keeps[L.n] = is_failover(e);
        } else { /* the workload's reset: the count deleted, none left */
            L.from[L.n] = dels[i - h->n].invoke;
            L.to[L.n] = dels[i - h->n].done;
            L.keeps[L.n] = false;
        }
        L.n++;
    }
    return L;
}

/* Rule 1 above: marks in adds[] the holds whose release may have added a permit after a
 * loss. sets/nsets: the history's "set" operations; a history without any (recorded before
 * the workload recorded them) takes the start of a new client incarnation, which set the
 * count, for them. */
static void sem_loss_releases(const hist *h, const holds *hs, const sem_losses *L,
                              const sem_set *sets, size_t nsets, bool *adds)
{
    size_t nl = L->n;
    if (nl == 0)
        return;
    int64_t *set_from = malloc(nl * sizeof *set_from);
    if (!set_from)
        abort();
    for (size_t l = 0; l < nl; l++) {
        set_from[l] = L->keeps[l] ? INT64_MIN : INT64_MAX;
        for (size_t q = 0; q < nsets && !L->keeps[l]; q++)
            if (sets[q].maybe && sets[q].done >= L->from[l] && sets[q].invoke < set_from[l])
                set_from[l] = sets[q].invoke;
    }
    if (nsets == 0) {
        /* no "set" recorded: a new incarnation of a client of obj set the count between its
         * predecessor's kill and its first operation */
        const char *obj = hs->n > 0 ? h->ev[hs->v[0].i_acq].obj : "";
        for (size_t k = 0; k < h->n; k++) {
            const hev *x = &h->ev[k];
            if (x->inc == 0 || strcmp(x->obj, obj) != 0)
                continue;
            bool first = true;
            for (size_t r = k; r-- > 0 && first;)
                if (h->ev[r].proc == x->proc && h->ev[r].inc == x->inc &&
                    strcmp(h->ev[r].obj, obj) == 0)
                    first = false;
            if (!first)
                continue;
            int64_t killed = INT64_MIN;
            for (size_t r = k; r-- > 0;)
                if (is(&h->ev[r], "nemesis", "kill", "invoke") &&
                    h->ev[r].proc == hist_os_proc(x->proc)) {
                    killed = h->ev[r].t;
                    break;
                }
            for (size_t l = 0; l < nl; l++)
                if (!L->keeps[l] && x->t >= L->from[l]) {
                    int64_t at = killed > L->from[l] ? killed : L->from[l];
                    if (at < set_from[l])
                        set_from[l] = at;
                }
        }
    }
    /* per client incarnation: the losses its holds spanned, its releases of such holds,
     * and the permits counted so far */
    typedef struct {
        int proc, inc;
        bool *spanned;
        long losses, releases, added;
    } who;
    who *w = NULL;
    size_t nw = 0, wcap = 0;
    for (size_t k = 0; k < hs->n; k++) { /* a client's holds in their order */
        const hold *x = &hs->v[k];
        if (x->killed || x->lost || x->open_at_end || release_failed(h, x))
            continue;
        int64_t done = release_done(h, x);
        size_t q;
        for (q = 0; q < nw; q++)
            if (w[q].proc == x->proc && w[q].inc == x->inc)
                break;
        bool spans = false;
        for (size_t l = 0; l < nl; l++) {
            if (x->invoke > L->to[l] || x->end < L->from[l] || done < set_from[l])
                continue;
            if (q == nw) {
                if (nw == wcap) {
                    wcap = wcap ? wcap * 2 : 16;
                    w = realloc(w, wcap * sizeof *w);
                    if (!w)
                        abort();
                }
                w[nw] = (who){x->proc, x->inc, calloc(nl, sizeof(bool)), 0, 0, 0};
                if (!w[nw].spanned)
                    abort();
                nw++;
            }
            spans = true;
            if (!w[q].spanned[l]) {
                w[q].spanned[l] = true;
                w[q].losses++;
            }
        }
        if (!spans)
            continue;
        w[q].releases++;
        long now = w[q].releases < w[q].losses ? w[q].releases : w[q].losses;
        if (w[q].added < now) { /* at most one a release */
            w[q].added++;
            adds[k] = true;
        }
    }
    for (size_t q = 0; q < nw; q++)
        free(w[q].spanned);
    free(w);
    free(set_from);
}

/* The counting semaphore's allowance (rules 1 to 3 above). */
typedef struct sem_model {
    int64_t *add_from, *add_done; /* a permit may exist from add_from (its release sent),
                                     if that release completed at add_done or later than
                                     the last set before */
    size_t nadd;
    int64_t *gone;        /* per hold: from when an acquire sent does not count it (INT64_MAX) */
    bool *before_reset;   /* per hold: its permit came from a count a reset deleted (rule 4) */
    sem_set *sets, *dels; /* the "set" and "delete" operations */
    size_t nsets, made, ndels, resets;
    int64_t *made_done, *made_since; /* the sets made, by completion; the latest invoke of
                                        those completed by then */
} sem_model;

typedef struct sent_done {
    int64_t sent, done;
} sent_done;

static int cmp_sent(const void *a, const void *b)
{
    const sent_done *x = a, *y = b;
    return x->sent < y->sent ? -1 : x->sent > y->sent;
}

/* Rule 4, a hold whose acquire completed after a reset's delete began: if no count can have
 * been there between that delete and the acquire's completion (no set that may have made
 * one was sent by then and completed after the delete began; no release, which makes a
 * count of 1 where there is none, likewise), its acquire ran before the delete, on the count
 * the delete removed: it holds no permit of a later count, as a hold open across the
 * delete. (Seed 509: two clients reset within a millisecond; an acquire answered between
 * the second delete and the second set was counted among the new count's holders.) r[0..nr):
 * the holds' releases (sent, completed), as sem_model_build found them; sorted here. */
static bool *sem_before_reset(const holds *hs, const sem_set *sets, size_t nsets,
                              const sem_set *dels, size_t ndels, sent_done *r, size_t nr)
{
    bool *v = calloc(hs->n ? hs->n : 1, sizeof *v);
    if (!v)
        abort();
    if (nr > 0)
        qsort(r, nr, sizeof *r, cmp_sent);
    for (size_t i = 1; i < nr; i++) /* done: the latest completion of those sent by then */
        if (r[i].done < r[i - 1].done)
            r[i].done = r[i - 1].done;
    for (size_t k = 0; k < hs->n && ndels > 0; k++) {
        const hold *a = &hs->v[k];
        /* the latest completion of the releases sent before the acquire completed */
        size_t lo = 0, hi = nr;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (r[mid].sent < a->start)
                lo = mid + 1;
            else
                hi = mid;
        }
        int64_t released = lo > 0 ? r[lo - 1].done : INT64_MIN;
        for (size_t q = 0; q < ndels && !v[k]; q++) {
            const sem_set *d = &dels[q];
            if (!d->maybe || d->invoke >= a->start || d->done < a->invoke || released >= d->invoke)
                continue;
            bool remade = false;
            for (size_t s = 0; s < nsets && !remade; s++)
                remade = sets[s].maybe && sets[s].invoke < a->start && sets[s].done >= d->invoke;
            v[k] = !remade;
        }
    }
    return v;
}

static int cmp_set_done(const void *a, const void *b)
{
    const sem_set *x = a, *y = b;
    return x->done < y->done ? -1 : x->done > y->done;
}

static sem_model sem_model_build(const hist *h, const holds *hs)
{
    sem_model m = {0};
    const char *obj = hs->n > 0 ? h->ev[hs->v[0].i_acq].obj : "sem";
    m.sets = sem_ops(h, obj, "set", &m.nsets);
    m.dels = sem_ops(h, obj, "delete", &m.ndels);
    for (size_t q = 0; q < m.ndels; q++)
        m.resets += m.dels[q].maybe;
    sem_losses L = sem_loss_list(h, m.dels, m.ndels);
    bool *adds = calloc(hs->n ? hs->n : 1, sizeof *adds);
    m.gone = malloc((hs->n ? hs->n : 1) * sizeof *m.gone);
    if (!adds || !m.gone)
        abort();
    int64_t *rdone = malloc((hs->n ? hs->n : 1) * sizeof *rdone);
    sent_done *rel = malloc((hs->n ? hs->n : 1) * sizeof *rel); /* the releases (rule 4) */
    if (!rdone || !rel)
        abort();
    size_t nrel = 0;
    for (size_t k = 0; k < hs->n; k++) {
        const hold *x = &hs->v[k];
        m.gone[k] = INT64_MAX;
        /* when its permit came back (INT64_MAX: never, or not known) */
        bool released = !x->killed && !x->lost && !x->open_at_end && !release_failed(h, x);
        rdone[k] = released ? release_done(h, x) : INT64_MAX;
        if (released)
            rel[nrel++] = (sent_done){x->end, rdone[k]};
    }
    sem_loss_releases(h, hs, &L, m.sets, m.nsets, adds);
    /* rule 2: the holds open at a set that may have succeeded, whose acquire a loss before
     * it may have taken away */
    for (size_t q = 0; q < m.nsets; q++) {
        const sem_set *s = &m.sets[q];
        if (s->made)
            m.made++;
        if (!s->maybe)
            continue;
        for (size_t k = 0; k < hs->n; k++) {
            const hold *x = &hs->v[k];
            if (x->invoke >= s->done)
                break; /* holds in the order they began: the rest began later */
            if (rdone[k] <= s->invoke)
                continue;
            bool released = !(x->killed || x->lost || x->open_at_end) && !release_failed(h, x);
            bool spanned = false;
            for (size_t l = 0; l < L.n && !spanned; l++)
                spanned = L.from[l] <= s->done && L.to[l] >= x->invoke;
            if (!spanned)
                continue;
            if (released)
                adds[k] = true;
            if (s->made && s->done < m.gone[k])
                m.gone[k] = s->done;
        }
    }
    for (size_t k = 0; k < hs->n; k++)
        if (adds[k])
            m.nadd++;
    m.add_from = malloc((m.nadd ? m.nadd : 1) * sizeof *m.add_from);
    m.add_done = malloc((m.nadd ? m.nadd : 1) * sizeof *m.add_done);
    if (!m.add_from || !m.add_done)
        abort();
    size_t a = 0;
    for (size_t k = 0; k < hs->n; k++)
        if (adds[k]) {
            m.add_from[a] = hs->v[k].end;
            m.add_done[a] = release_done(h, &hs->v[k]);
            a++;
        }
    free(adds);
    free(rdone);
    m.before_reset = sem_before_reset(hs, m.sets, m.nsets, m.dels, m.ndels, rel, nrel);
    free(rel);
    if (m.nsets > 0) /* qsort wants a pointer even for nothing: sets may be NULL */
        qsort(m.sets, m.nsets, sizeof *m.sets, cmp_set_done);
    m.made_done = malloc((m.made ? m.made : 1) * sizeof *m.made_done);
    m.made_since = malloc((m.made ? m.made : 1) * sizeof *m.made_since);
    if (!m.made_done || !m.made_since)
        abort();
    size_t q2 = 0;
    for (size_t q = 0; q < m.nsets; q++)
        if (m.sets[q].made) {
            m.made_done[q2] = m.sets[q].done;
            m.made_since[q2] = m.sets[q].invoke;
            if (q2 > 0 && m.made_since[q2 - 1] > m.made_since[q2])
                m.made_since[q2] = m.made_since[q2 - 1];
            q2++;
        }
    free(L.from);
    free(L.to);
    free(L.keeps);
    return m;
}

static void sem_model_free(sem_model *m)
{
    free(m->add_from);
    free(m->add_done);
    free(m->gone);
    free(m->before_reset);
    free(m->sets);
    free(m->dels);
    free(m->made_done);
    free(m->made_since);
}

/* Whether the workload's reset deleted the count within [from, to] (a delete of unknown
 * outcome too): the holds open then hold permits the next count does not know. */
static bool sem_deleted_within(const sem_model *m, int64_t from, int64_t to)
{
    for (size_t q = 0; q < m->ndels; q++)
        if (m->dels[q].maybe && m->dels[q].invoke <= to && m->dels[q].done >= from)
            return true;
    return false;
}

/* The permits added (E) at an acquire sent at `invoke` that returned ok at `start`. */
static long sem_added(const sem_model *m, int64_t invoke, int64_t start)
{
    /* the last set that succeeded before the acquire was sent: the latest invoke of the
     * sets made that completed by then */
    int64_t since = INT64_MIN;
    size_t lo = 0, hi = m->made; /* the first completed after invoke */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->made_done[mid] <= invoke)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo > 0)
        since = m->made_since[lo - 1];
    long n = 0;
    for (size_t a = 0; a < m->nadd; a++)
        if (m->add_from[a] <= start && m->add_done[a] >= since)
            n++;
    return n;
}

/* What the semaphore's verdict was worth: with c clients holding one permit each at most,
 * an overcommit can show only while n + the permits added are fewer than c, and only while
 * the clients hold permits (a semaphore without a count times out every acquire: seed 504
 * had a free permit about 37 s of 30 minutes). Writes the shares of the clients' time (from
 * their first to their last operation) into note. */
static void sem_note(const hist *h, const holds *hs, const sem_model *m, int n, char *note,
                     size_t size)
{
    int64_t t0 = INT64_MAX, t1 = INT64_MIN;
    const char *obj = hs->n > 0 ? h->ev[hs->v[0].i_acq].obj : "sem";
    int procs[1024], c = 0;
    for (size_t i = 0; i < h->n; i++) {
        const hev *e = &h->ev[i];
        if (e->proc < 0 || strcmp(e->obj, obj) != 0 || strcmp(e->op, "final") == 0)
            continue;
        if (e->t < t0)
            t0 = e->t;
        if (e->t > t1)
            t1 = e->t;
    }
    for (size_t k = 0; k < hs->n; k++) {
        int q;
        for (q = 0; q < c && procs[q] != hist_os_proc(hs->v[k].proc); q++) {
        }
        if (q == c && c < 1024)
            procs[c++] = hist_os_proc(hs->v[k].proc);
    }
    if (t1 <= t0) {
        snprintf(note, size, "%s: no operation", "semaphore");
        return;
    }
    /* the union of the holds (they begin in order): when a permit was held */
    int64_t *u0 = malloc((hs->n ? hs->n : 1) * sizeof *u0),
            *u1 = malloc((hs->n ? hs->n : 1) * sizeof *u1);
    if (!u0 || !u1)
        abort();
    size_t nu = 0;
    for (size_t k = 0; k < hs->n; k++) {
        if (nu > 0 && hs->v[k].start <= u1[nu - 1]) {
            if (hs->v[k].end > u1[nu - 1])
                u1[nu - 1] = hs->v[k].end;
            continue;
        }
        u0[nu] = hs->v[k].start;
        u1[nu++] = hs->v[k].end;
    }
    /* sampled every 5 ms (every 1 ms in a run shorter than 10 s) */
    int64_t step = t1 - t0 < 10000000 ? 1000 : 5000;
    long samples = 0, held = 0, low = 0, both = 0;
    size_t u = 0;
    for (int64_t t = t0; t < t1; t += step) {
        samples++;
        while (u < nu && u1[u] <= t)
            u++;
        bool h1 = u < nu && u0[u] <= t;
        bool l1 = n + sem_added(m, t, t) < c;
        held += h1;
        low += l1;
        both += h1 && l1;
    }
    free(u0);
    free(u1);
    double span = (double)(t1 - t0) / 1e6;
    snprintf(note, size,
             "semaphore: of the clients' %.1f s, a permit held %.1f%% (%.1f s); fewer permits "
             "allowed than the %d clients %.1f%%; both, when an overcommit could show: "
             "%.1f%% (%.1f s); %zu sets made the count again, %zu resets deleted a drained "
             "count, %zu releases may have added a permit",
             span, 100.0 * held / samples, span * held / samples, c, 100.0 * low / samples,
             100.0 * both / samples, span * both / samples, m->made, m->resets, m->nadd);
}

/* The faults that may lose data or move the master, each an interval (fault_within's),
 * read once per check: the pairs of open holds a long history has would each scan every
 * event again (seed 508's 30-minute history, 1.2 million events: hours). */
typedef struct fault_iv {
    int64_t start, end;
    bool loss, failover;
} fault_iv;
typedef struct fault_ix {
    fault_iv *v;
    size_t n;
} fault_ix;

static fault_ix fault_index(const hist *h)
{
    fault_ix x = {0};
    size_t cap = 0;
    for (size_t i = 0; i < h->n; i++) {
        const hev *e = &h->ev[i];
        if (!is_nemesis(e) || strcmp(e->type, "invoke") != 0 || !(is_loss(e) || is_failover(e)))
            continue;
        if (x.n == cap) {
            cap = cap ? cap * 2 : 64;
            x.v = realloc(x.v, cap * sizeof *x.v);
            if (!x.v)
                abort();
        }
        x.v[x.n++] = (fault_iv){e->t, fault_end(h, i), is_loss(e), is_failover(e)};
    }
    return x;
}

/* loss_within (failover false) or failover_within (true), from the index. */
static bool ix_within(const fault_ix *x, int64_t from, int64_t to, bool failover)
{
    for (size_t k = 0; k < x->n && x->v[k].start <= to; k++)
        if ((failover ? x->v[k].failover : x->v[k].loss) && x->v[k].end >= from)
            return true;
    return false;
}

hist_verdict hist_check_permits(const hist *h, const char *obj, int n, const hist_params *p,
                                FILE *out)
{
    bool sem = strcmp(obj, "sem") == 0;
    hist_verdict v = {sem ? "semaphore" : "permits", 0, 0, 0};
    holds hs = extract(h, obj);
    v.checked = (long)hs.n;
    int shown[2] = {0, 0};
    /* a counting semaphore: the permits that releases after a loss and holds open at a set
     * may have added */
    sem_model m = {0};
    if (sem)
        m = sem_model_build(h, &hs);
    fault_ix fx = fault_index(h);
    for (size_t j = 0; j < hs.n; j++) {
        hold *b = &hs.v[j];
        /* the holders still open when b took its permit; those the guarantees excuse (a
         * loss of the data; a permit lease: a pause past the lease too) may hold nothing
         * any more, the others hold one each: b is a violation when they alone are n (and
         * the permits added) or more. One excused holder does not excuse the others */
        int open = 0, held = 0, ex = 0;
        for (size_t i = 0; i < j; i++) {
            hold *a = &hs.v[i];
            if (a->end > b->start) {
                open++;
                int e;
                if (sem) /* a counting semaphore's permit has no lease: only a loss */
                    e = ix_within(&fx, a->start, b->start, false) || m.gone[i] <= b->invoke ||
                                sem_deleted_within(&m, a->start, b->start) || m.before_reset[i]
                            ? EX_LOSS
                            : 0;
                else
                    e = excuse(h, a, b->start, p->watchdog_ms * 2 / 3);
                if (!e && ix_within(&fx, a->start, b->start, true))
                    e = EX_LOSS; /* not covered by sync_replicas */
                ex |= e;
                if (!e)
                    held++;
            }
        }
        if (open < n)
            continue;
        long surplus = sem ? sem_added(&m, b->invoke, b->start) : 0;
        if (held >= n + surplus)
            ex = 0;
        else if (held >= n)
            ex = EX_SURPLUS;
        if (ex)
            v.allowed++;
        else
            v.violations++;
        if (show(shown, ex != 0, p->excerpts, out)) {
            fprintf(out,
                    "  %s: %s: %d permits held (%d not excused) when %d.%d took one at %" PRId64
                    " (of %d",
                    v.checker, why(ex), open, held, b->proc, b->inc, b->start, n);
            if (surplus > 0)
                fprintf(out,
                        ", and %ld releases since a loss or a set that may each have added one",
                        surplus);
            fprintf(out, ")\n");
            for (size_t i = 0; i < j; i++)
                if (hs.v[i].end > b->start) {
                    hist_print_event(out, &h->ev[hs.v[i].i_acq]);
                    hist_print_event(out, &h->ev[hs.v[i].i_end]);
                }
            hist_print_event(out, &h->ev[b->i_acq]);
        }
    }
    if (sem) {
        if (out && m.nadd > 0) {
            int64_t first = INT64_MAX;
            for (size_t a = 0; a < m.nadd; a++)
                if (m.add_from[a] < first)
                    first = m.add_from[a];
            fprintf(out,
                    "  %s: releases after losses or sets may have added up to %zu permits, the "
                    "first from %" PRId64
                    " (a set that made the count again drops those before it)\n",
                    v.checker, m.nadd, first);
        }
        sem_note(h, &hs, &m, n, v.note, sizeof v.note);
        sem_model_free(&m);
    }
    free(fx.v);
    free(hs.v);
    return v;
}

/* ------------------------------------------------------------- permits returned ---- */

/* The outcome of one client incarnation's permits on obj, from its own events in order:
 * *certain = permits it took and certainly did not give back (an acquire ok, then no
 * release sent: the holder was killed), *unknown = permits whose fate is unknown (an
 * acquire or a release of unknown outcome: info, or cut short by a kill). */
static void permit_fate(const hist *h, const char *obj, int proc, int inc, long *certain,
                        long *unknown)
{
    const hev *pending = NULL; /* an invoke not yet completed */
    long held = 0;
    for (size_t i = 0; i < h->n; i++) {
        const hev *e = &h->ev[i];
        if (e->proc != proc || e->inc != inc || strcmp(e->obj, obj) != 0)
            continue;
        bool acq = strcmp(e->op, "acquire") == 0, rel = strcmp(e->op, "release") == 0;
        if (!acq && !rel)
            continue;
        if (strcmp(e->type, "invoke") == 0) {
            pending = e;
            continue;
        }
        pending = NULL;
        if (strcmp(e->type, "ok") == 0)
            held += acq ? 1 : -1;
        else if (strcmp(e->type, "info") == 0) {
            (*unknown)++;
            if (rel)
                held--; /* counted as unknown, not as certainly kept */
        }
    }
    if (pending) { /* killed during the call */
        (*unknown)++;
        if (strcmp(pending->op, "release") == 0)
            held--;
    }
    if (held > 0)
        *certain += held;
}

/* After the run, every client stopped and every lease ended, the runner's final client
 * reads the free permits ("final" ok: VALUE = available, TOKEN = leases still running).
 * Permit leases (permits): every permit is back, available == n and none held. A counting
 * semaphore (sem) has no leases: a permit taken by a client killed before its release is
 * gone for good (as with Redisson's RSemaphore), so available lies between n - certain -
 * unknown and n - certain (permit_fate). Allowed: the server lost its data during the run. */
hist_verdict hist_check_returned(const hist *h, const char *obj, int n, const hist_params *p,
                                 FILE *out)
{
    hist_verdict v = {strcmp(obj, "sem") == 0 ? "semaphore final" : "permits final", 0, 0, 0};
    bool leases = strcmp(obj, "sem") != 0;
    for (size_t i = 0; i < h->n; i++) {
        const hev *e = &h->ev[i];
        if (!is(e, obj, "final", "ok"))
            continue;
        v.checked++;
        long certain = 0, unknown = 0;
        if (!leases) {
            /* every incarnation that touched obj, once */
            int seen[4096][2];
            size_t ns = 0;
            for (size_t k = 0; k < h->n; k++) {
                const hev *x = &h->ev[k];
                if (strcmp(x->obj, obj) != 0 || !is(x, NULL, "acquire", "invoke"))
                    continue;
                size_t q;
                for (q = 0; q < ns; q++)
                    if (seen[q][0] == x->proc && seen[q][1] == x->inc)
                        break;
                if (q < ns || ns == sizeof seen / sizeof seen[0])
                    continue;
                seen[ns][0] = x->proc;
                seen[ns][1] = x->inc;
                ns++;
                permit_fate(h, obj, x->proc, x->inc, &certain, &unknown);
            }
        }
        int64_t hi = n - certain, lo = n - certain - unknown;
        bool good = leases ? e->value == n && e->token == 0 : e->value >= lo && e->value <= hi;
        if (good)
            continue;
        bool lost = loss_within(h, INT64_MIN, e->t) || failover_within(h, INT64_MIN, e->t);
        /* the workload's reset of a counting semaphore: deleted and set again */
        for (size_t k = 0; k < h->n && !leases && !lost; k++)
            lost = strcmp(h->ev[k].obj, obj) == 0 && strcmp(h->ev[k].op, "delete") == 0 &&
                   strcmp(h->ev[k].type, "invoke") != 0 && strcmp(h->ev[k].type, "fail") != 0;
        if (lost)
            v.allowed++;
        else
            v.violations++;
        if (p->excerpts > 0 && out) {
            if (leases)
                fprintf(out,
                        "  %s: %s: %" PRId64 " of %d permits free and %" PRId64
                        " leases running after every client stopped and every lease ended\n",
                        v.checker,
                        lost ? "allowed: the server lost its data during the run" : "VIOLATION",
                        e->value, n, e->token);
            else
                fprintf(out,
                        "  %s: %s: %" PRId64 " of %d permits free; expected %" PRId64 " to %" PRId64
                        " (%ld kept by killed holders, %ld of unknown outcome)\n",
                        v.checker,
                        lost ? "allowed: the server lost its data during the run" : "VIOLATION",
                        e->value, n, lo, hi, certain, unknown);
            hist_print_event(out, e);
        }
    }
    return v;
}

/* ------------------------------------------------------------- the stock table ---- */

/* The MariaDB stock table (stock init, sql, stock final): the database never accepts a
 * lower token after a higher one (a sale whose UPDATE was sent after another sale returned
 * has a larger fence), and never oversells (qty never below 0, the sales, counted by the
 * clients, are what the row lost: init - final lies between the sales that returned ok and
 * those plus the ones of unknown outcome: answered "unknown", or sent and never answered,
 * their client killed inside `mariadb`). */
hist_verdict hist_check_stock(const hist *h, const hist_params *p, FILE *out)
{
    hist_verdict v = {"stock (MariaDB)", 0, 0, 0};
    int shown[2] = {0, 0};
    int64_t top = 0; /* the highest token of a sale that returned */
    size_t top_i = 0;
    long sold = 0, unknown = 0;
    int64_t init = -1, final = -1;
    /* the sales sent and not answered (yet), by client incarnation: one whose client was
     * killed inside `mariadb` is never answered, and may or may not have happened */
    struct {
        int proc, inc;
    } pending[1024];
    size_t npending = 0;
    for (size_t i = 0; i < h->n; i++) {
        const hev *e = &h->ev[i];
        if (strcmp(e->obj, "stock") != 0)
            continue;
        if (strcmp(e->op, "init") == 0)
            init = e->value;
        if (strcmp(e->op, "final") == 0 && strcmp(e->type, "ok") == 0)
            final = e->value;
        if (strcmp(e->op, "sql") != 0)
            continue;
        size_t pk;
        for (pk = 0; pk < npending; pk++)
            if (pending[pk].proc == e->proc && pending[pk].inc == e->inc)
                break;
        if (strcmp(e->type, "invoke") == 0) {
            if (pk < npending)
                unknown++; /* the one before was never answered */
            else if (npending < sizeof pending / sizeof pending[0]) {
                pending[npending].proc = e->proc;
                pending[npending].inc = e->inc;
                npending++;
            } else
                abort();
            continue;
        }
        if (pk < npending)
            pending[pk] = pending[--npending];
        if (strcmp(e->type, "info") == 0) {
            unknown++;
            continue;
        }
        if (strcmp(e->type, "ok") != 0)
            continue;
        v.checked++;
        sold++;
        int64_t sent = e->t;
        for (size_t k = i; k-- > 0;)
            if (is(&h->ev[k], "stock", "sql", "invoke") && h->ev[k].proc == e->proc &&
                h->ev[k].inc == e->inc) {
                sent = h->ev[k].t;
                break;
            }
        if (top > 0 && e->token <= top && h->ev[top_i].t < sent) {
            v.violations++;
            if (show(shown, false, p->excerpts, out)) {
                fprintf(out,
                        "  stock: VIOLATION: the database sold with token %" PRId64
                        " after it had sold with %" PRId64 "\n",
                        e->token, top);
                hist_print_event(out, &h->ev[top_i]);
                hist_print_event(out, e);
            }
        }
        if (e->token > top) {
            top = e->token;
            top_i = i;
        }
    }
    unknown += (long)npending; /* sent, never answered: the client was killed in it */
    if (init >= 0) {
        /* final < 0: never read, or oversold */
        bool bad = final < 0 || init - final < sold || init - final > sold + unknown;
        if (bad) {
            v.violations++;
            if (out)
                fprintf(out,
                        "  stock: VIOLATION: %" PRId64 " in stock at the start, %" PRId64
                        " at the end, %ld sales returned ok and %ld of unknown outcome\n",
                        init, final, sold, unknown);
        }
    }
    return v;
}

/* ------------------------------------------------------------- latch --------------- */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* A waiter released (await ok, VALUE = its round) before the latch_count-th count-down of
 * its round was even sent was released before the count reached zero (nobody deletes). */
hist_verdict hist_check_latch(const hist *h, const hist_params *p, FILE *out)
{
    hist_verdict v = {"latch", 0, 0, 0};
    int shown[2] = {0, 0};
    for (size_t i = 0; i < h->n; i++) {
        const hev *w = &h->ev[i];
        if (!is(w, "latch", "await", "ok"))
            continue;
        v.checked++;
        int64_t cds[256];
        size_t n = 0;
        int64_t first = w->t;
        for (size_t k = 0; k < h->n; k++) {
            const hev *c = &h->ev[k];
            if (is(c, "latch", NULL, NULL) && c->value == w->value && c->t < first)
                first = c->t;
            if (is(c, "latch", "cd", "invoke") && c->value == w->value && n < 256)
                cds[n++] = c->t;
        }
        qsort(cds, n, sizeof cds[0], cmp_i64);
        int64_t zero = (int)n >= p->latch_count ? cds[p->latch_count - 1] : INT64_MAX;
        if (w->t >= zero)
            continue;
        /* sync_replicas does not cover latches: any failover may lose one; and a Sentinel
         * deployment takes seconds to settle after a failover or a master restarted empty,
         * during which clients may reach different nodes: a loss up to 10 s before the
         * round counts */
        int64_t from = first - 10000000;
        bool lost = data_lost_between(h, from, w->t);
        for (size_t k = 0; k < h->n && !lost; k++)
            lost = is(&h->ev[k], "nemesis", "failover", NULL) && h->ev[k].t >= from &&
                   h->ev[k].t <= w->t;
        if (lost)
            v.allowed++;
        else
            v.violations++;
        if (show(shown, lost, p->excerpts, out)) {
            fprintf(out,
                    "  latch: %s: %d.%d released in round %" PRId64 " at %" PRId64
                    " before count-down %d of %d was sent\n",
                    lost ? "allowed: the server lost its data" : "VIOLATION", w->proc, w->inc,
                    w->value, w->t, (int)n < p->latch_count ? (int)n + 1 : p->latch_count,
                    p->latch_count);
            for (size_t k = 0; k < h->n; k++) {
                const hev *c = &h->ev[k];
                if ((is(c, "latch", NULL, NULL) && c->value == w->value) ||
                    (is_nemesis(c) && c->t >= first - 10000000 && c->t <= w->t))
                    hist_print_event(out, c);
            }
        }
    }
    return v;
}

/* ------------------------------------------------------------- barrier ------------ */

typedef struct await_op {
    int proc, inc;
    int64_t invoke, done; /* done: INT64_MAX when it never completed (killed) */
    int64_t gen;
    long epoch;   /* losses of the data before its invoke: a loss restarts the generations */
    char outcome; /* 'o' ok, 'f' fail (it broke or this party gave up), 'u' unknown */
    size_t i_inv, i_done;
} await_op;

static int cmp_await(const void *a, const void *b)
{
    const await_op *x = a, *y = b;
    /* ok, then fail, then unknown */
    int rx = x->outcome == 'o' ? 0 : x->outcome == 'f' ? 1 : 2;
    int ry = y->outcome == 'o' ? 0 : y->outcome == 'f' ? 1 : 2;
    if (rx != ry)
        return rx < ry ? -1 : 1;
    if (x->epoch != y->epoch)
        return x->epoch < y->epoch ? -1 : 1;
    if (x->gen != y->gen)
        return x->gen < y->gen ? -1 : 1;
    return x->done < y->done ? -1 : x->done > y->done;
}

/* Adds party (proc, inc) to seen (ns of them) if it is not there yet. */
static void add_party(int seen[][2], int *ns, int max, int proc, int inc)
{
    for (int q = 0; q < *ns; q++)
        if (seen[q][0] == proc && seen[q][1] == inc)
            return;
    if (*ns < max) {
        seen[*ns][0] = proc;
        seen[*ns][1] = inc;
        (*ns)++;
    }
}

/* A cyclic barrier of N parties (p->barrier_parties, else the number of processes that
 * use it) trips a generation when its N-th party arrives. A party released (await ok,
 * VALUE = the generation G) at time t needs N parties (client incarnations: a killed
 * party's arrival lives until its lease ends, beside its next incarnation's) arrived in G
 * by then: the awaits sent before t that returned G, or whose outcome is unknown (sent at
 * most 10 s before G's first await: an arrival lives one lease); an await that broke or
 * timed out was not part of a generation that tripped. And no party returns from one
 * generation twice. A loss of the data restarts the generations at 0: the awaits are
 * grouped by the losses sent before them and the generation. Allowed: a loss of the data
 * in that window. */
hist_verdict hist_check_barrier(const hist *h, const hist_params *p, FILE *out)
{
    hist_verdict v = {"barrier", 0, 0, 0};
    int shown[2] = {0, 0};
    await_op *w = NULL;
    size_t n = 0, cap = 0;
    int procs[256];
    int nprocs = 0;
    long epoch = 0;
    for (size_t i = 0; i < h->n; i++) {
        const hev *e = &h->ev[i];
        if (is_nemesis(e) && strcmp(e->type, "invoke") == 0 &&
            ((e->value == 0 && (strcmp(e->op, "srvkill") == 0 || strcmp(e->op, "evict") == 0)) ||
             strcmp(e->op, "failover") == 0))
            epoch++; /* a failover, with sync_replicas or not: they cover the locks only */
        if (!is(e, "barrier", "await", "invoke"))
            continue;
        int q;
        for (q = 0; q < nprocs && procs[q] != hist_os_proc(e->proc); q++) {
        }
        if (q == nprocs && nprocs < 256)
            procs[nprocs++] = hist_os_proc(e->proc);
        await_op o = {e->proc, e->inc, e->t, INT64_MAX, -1, epoch, 'u', i, i};
        for (size_t k = i + 1; k < h->n; k++) {
            const hev *x = &h->ev[k];
            if (x->proc != e->proc || x->inc != e->inc || !is(x, "barrier", "await", NULL))
                continue;
            if (strcmp(x->type, "invoke") == 0)
                break; /* never completed */
            o.done = x->t;
            o.i_done = k;
            o.outcome = strcmp(x->type, "ok") == 0 ? 'o' : strcmp(x->type, "fail") == 0 ? 'f' : 'u';
            o.gen = x->value;
            break;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 256;
            w = realloc(w, cap * sizeof *w);
            if (!w)
                abort();
        }
        w[n++] = o;
    }
    int parties = p->barrier_parties > 0 ? p->barrier_parties : nprocs;
    /* the oks first, by generation and release; then those that failed; then the unknown */
    qsort(w, n, sizeof *w, cmp_await);
    size_t oks = 0;
    while (oks < n && w[oks].outcome == 'o')
        oks++;
    size_t unk = oks;
    while (unk < n && w[unk].outcome == 'f')
        unk++;
    for (size_t a = 0; a < oks;) {
        size_t b = a;
        int64_t first = INT64_MAX;
        while (b < oks && w[b].gen == w[a].gen && w[b].epoch == w[a].epoch) {
            if (w[b].invoke < first)
                first = w[b].invoke;
            b++;
        }
        for (size_t i = a; i < b; i++) {
            const await_op *o = &w[i];
            v.checked++;
            int seen[256][2];
            int ns = 0;
            bool twice = false;
            for (size_t k = a; k < b; k++) {
                if (w[k].invoke <= o->done)
                    add_party(seen, &ns, 256, w[k].proc, w[k].inc);
                if (k < i && w[k].proc == o->proc && w[k].inc == o->inc)
                    twice = true; /* this party returned from this generation before */
            }
            for (size_t k = unk; k < n; k++)
                if (w[k].invoke <= o->done && w[k].invoke >= first - 10000000)
                    add_party(seen, &ns, 256, w[k].proc, w[k].inc);
            if (ns >= parties && !twice)
                continue;
            bool lost = loss_within(h, first - 10000000, o->done) ||
                        failover_within(h, first - 10000000, o->done);
            if (lost)
                v.allowed++;
            else
                v.violations++;
            if (show(shown, lost, p->excerpts, out)) {
                fprintf(out,
                        "  barrier: %s: %d.%d released from generation %" PRId64 " at %" PRId64
                        " %s (%d of %d parties had arrived)\n",
                        lost ? "allowed: the server lost its data" : "VIOLATION", o->proc, o->inc,
                        o->gen, o->done, twice ? "a second time" : "before every party arrived", ns,
                        parties);
                for (size_t k = a; k < b; k++) {
                    hist_print_event(out, &h->ev[w[k].i_inv]);
                    hist_print_event(out, &h->ev[w[k].i_done]);
                }
            }
        }
        a = b;
    }
    free(w);
    return v;
}

/* ------------------------------------------------------------- fair lock FIFO ------ */

typedef struct wait_op {
    int proc, inc;
    int64_t invoke, done;
    size_t i_inv, i_ok;
} wait_op;

/* Whether a fault reaches the waits of client proc: a pause, kill, partition or slow link
 * only its target's; the others everyone's. */
static bool hits(const hev *x, int proc)
{
    if (strcmp(x->op, "pause") == 0 || strcmp(x->op, "kill") == 0 ||
        strcmp(x->op, "partition") == 0 || strcmp(x->op, "slow") == 0)
        return x->proc == hist_os_proc(proc);
    return true;
}

/* Among the fair lock's acquisitions that succeeded with no fault during their wait, one
 * sent fifo_margin_us before another is served first. */
hist_verdict hist_check_fifo(const hist *h, const hist_params *p, FILE *out)
{
    hist_verdict v = {"fair lock fifo", 0, 0, 0};
    wait_op *w = NULL;
    size_t n = 0, cap = 0;
    for (size_t i = 0; i < h->n; i++) {
        const hev *e = &h->ev[i];
        if (!is(e, "fair", "acquire", "ok"))
            continue;
        for (size_t k = i; k-- > 0;) {
            const hev *x = &h->ev[k];
            if (x->proc == e->proc && x->inc == e->inc && is(x, "fair", "acquire", "invoke")) {
                if (n == cap) {
                    cap = cap ? cap * 2 : 256;
                    w = realloc(w, cap * sizeof *w);
                    if (!w)
                        abort();
                }
                w[n++] = (wait_op){e->proc, e->inc, x->t, e->t, k, i};
                break;
            }
        }
    }
    /* a wait with a fault in it did not "stay": leave it out */
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        bool fault = false;
        for (size_t k = w[i].i_inv; k <= w[i].i_ok && !fault; k++)
            fault = is_nemesis(&h->ev[k]) && hits(&h->ev[k], w[i].proc);
        /* a fault that began before the wait and ended in it or after (a pause, a server
         * down or paused, a failover settling, a partition) */
        for (size_t k = 0; k < w[i].i_inv && !fault; k++) {
            const hev *x = &h->ev[k];
            if (!is_nemesis(x) || strcmp(x->type, "invoke") != 0 || !hits(x, w[i].proc))
                continue;
            fault = fault_end(h, k) >= w[i].invoke;
        }
        if (!fault)
            w[m++] = w[i];
    }
    v.checked = (long)m;
    int shown[2] = {0, 0};
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < m; j++) {
            if (w[i].invoke + p->fifo_margin_us < w[j].invoke && w[j].done < w[i].done) {
                v.violations++;
                if (show(shown, false, p->excerpts, out)) {
                    fprintf(out,
                            "  fair lock fifo: VIOLATION: %d.%d asked at %" PRId64
                            " and was served at %" PRId64 " after %d.%d, who asked at %" PRId64
                            " and was served at %" PRId64 "\n",
                            w[i].proc, w[i].inc, w[i].invoke, w[i].done, w[j].proc, w[j].inc,
                            w[j].invoke, w[j].done);
                    hist_print_event(out, &h->ev[w[i].i_inv]);
                    hist_print_event(out, &h->ev[w[j].i_inv]);
                    hist_print_event(out, &h->ev[w[j].i_ok]);
                    hist_print_event(out, &h->ev[w[i].i_ok]);
                }
                break;
            }
        }
    free(w);
    return v;
}

/* ------------------------------------------------------------- all ----------------- */

static bool has(const hist *h, const char *obj)
{
    for (size_t i = 0; i < h->n; i++)
        if (strcmp(h->ev[i].obj, obj) == 0)
            return true;
    return false;
}

static bool has_op(const hist *h, const char *obj, const char *op)
{
    for (size_t i = 0; i < h->n; i++)
        if (strcmp(h->ev[i].obj, obj) == 0 && strcmp(h->ev[i].op, op) == 0)
            return true;
    return false;
}

static long say(FILE *out, hist_verdict v)
{
    fprintf(out, "verdict %-16s %-5s checked %ld violations %ld allowed %ld\n", v.checker,
            v.violations ? "FAIL" : "ok", v.checked, v.violations, v.allowed);
    if (v.note[0])
        fprintf(out, "  %s\n", v.note);
    return v.violations;
}

long hist_check_all(const hist *h, const hist_params *p, FILE *out)
{
    long bad = 0;
    if (has(h, "mutex")) {
        bad += say(out, hist_check_mutex(h, "mutex", p, out));
        bad += say(out, hist_check_fenced(h, "mutex", p, out));
        bad += say(out, hist_check_reentrant(h, "mutex", p, out));
    }
    if (has(h, "stock"))
        bad += say(out, hist_check_stock(h, p, out));
    if (has(h, "redlock"))
        bad += say(out, hist_check_mutex(h, "redlock", p, out));
    if (has(h, "fair")) {
        bad += say(out, hist_check_mutex(h, "fair", p, out));
        bad += say(out, hist_check_fifo(h, p, out));
    }
    if (has(h, "rw")) {
        bad += say(out, hist_check_rw(h, p, out));
        bad += say(out, hist_check_fenced(h, "rw", p, out));
    }
    if (has(h, "sem")) {
        bad += say(out, hist_check_permits(h, "sem", p->sem_permits, p, out));
        if (has_op(h, "sem", "final"))
            bad += say(out, hist_check_returned(h, "sem", p->sem_permits, p, out));
    }
    if (has(h, "permits")) {
        bad += say(out, hist_check_permits(h, "permits", p->permits_permits, p, out));
        if (has_op(h, "permits", "final"))
            bad += say(out, hist_check_returned(h, "permits", p->permits_permits, p, out));
    }
    if (has(h, "latch"))
        bad += say(out, hist_check_latch(h, p, out));
    if (has(h, "elect")) {
        bad += say(out, hist_check_mutex(h, "elect", p, out));
        bad += say(out, hist_check_fenced(h, "elect", p, out));
    }
    if (has(h, "barrier"))
        bad += say(out, hist_check_barrier(h, p, out));
    return bad;
}
