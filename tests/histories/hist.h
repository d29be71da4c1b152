/*
 * Checked histories (issue 32): the history format the clients (hist_client.c) and the
 * runner's nemesis (hist_run.c) write, and the checkers that decide whether a merged
 * history is possible under each primitive's model (check.c).
 *
 * One event a line, space-separated:
 *
 *   SRV_US MONO_NS PROC INC OBJ OP TYPE TOKEN RC VALUE
 *
 * SRV_US   the time of the event in microseconds, read with TIME from the resource server
 *          (a Redis server of its own that no fault touches, so every process reads one
 *          clock whatever libfaketime does to its own); for an invoke it is read just
 *          before the call, for a completion just after it returned.
 * MONO_NS  the writer's CLOCK_MONOTONIC (informative only).
 * PROC     the logical client (0..N-1), or -1 for the nemesis; an rwshared client's second
 *          thread records as PROC + HIST_THREAD_PROC (hist_os_proc gives its process).
 * INC      the client's incarnation (a client killed with -9 is started again as INC + 1).
 * OBJ      mutex, fair, rw, sem, permits, latch, elect (leader election: a term is a hold,
 *          its TOKEN the term), barrier, nemesis.
 * OP       acquire, racquire, wacquire (rw), reenter, count (hold count read), exit
 *          (re-entry released), release, lost (the lost fd became readable), store (the
 *          fenced write), set (sem: try_set_permits; invoke VALUE = the count asked, ok
 *          VALUE = 1 if it was set: no count was there, 0 if one was), cd / await (latch, VALUE =
 * the round), await (barrier: TOKEN = the arrival index, VALUE = the generation that tripped), and
 * the nemesis' ops: pause (invoke = SIGSTOP, ok = SIGCONT; PROC = target), kill (PROC = target),
 * srvkill (VALUE 1 = data kept by AOF, 0 = data lost), srvup, cpause (invoke/ok), ckill, flush,
 * failover; final (sem, permits: the runner's read of the free permits after the run, VALUE =
 * available, TOKEN = leases still running). TYPE     invoke, ok, fail (it did not happen), info
 * (unknown: a timeout or a connection error; it may or may not have happened). TOKEN    the fencing
 * token of the hold (0 if none). RC       the baton return code. VALUE    op-specific: an acquire's
 * fixed lease in ms (0: the watchdog's), a hold count read (expected * 1000 + read), a latch round,
 * a pause past the lease (1) or short of it (0), a server kill that kept the data (1) or lost it
 * (0).
 */
#ifndef BATON_HIST_H
#define BATON_HIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* An rwshared client (hist_client.c) runs the rw workload in two threads of one process;
 * the second records as its PROC + HIST_THREAD_PROC. A fault that hits a process (pause,
 * kill, partition, slow link) hits both: the checkers match it with hist_os_proc. */
#define HIST_THREAD_PROC 1000
static inline int hist_os_proc(int proc)
{
    return proc >= HIST_THREAD_PROC && proc < 2 * HIST_THREAD_PROC ? proc - HIST_THREAD_PROC : proc;
}

typedef struct hev {
    int64_t t;    /* SRV_US */
    int64_t mono; /* MONO_NS */
    int proc, inc;
    char obj[16];
    char op[16];
    char type[8];
    int64_t token;
    int rc;
    int64_t value;
    long seq; /* order of reading (ties of t keep it) */
} hev;

typedef struct hist {
    hev *ev;
    size_t n, cap;
} hist;

/* Appends the events of a history file; returns false when it cannot be read or a line
 * does not parse (the line is named on stderr). */
bool hist_read_file(hist *h, const char *path);
/* Parses one line into e; returns false when it does not parse. */
bool hist_parse_line(const char *line, hev *e);
void hist_add(hist *h, const hev *e);
/* Sorts by SRV_US (stable for ties). */
void hist_sort(hist *h);
void hist_free(hist *h);
void hist_print_event(FILE *out, const hev *e);

/* Counts over a history: client operations (invokes), ok, fail, info; nemesis faults. */
typedef struct hist_counts {
    long ops, ok, fail, info, faults;
} hist_counts;
void hist_count(const hist *h, hist_counts *c);

/* What the model allows and what it does not. */
typedef struct hist_verdict {
    const char *checker;
    long checked;    /* holds, writes, waits... looked at */
    long violations; /* not possible under the model, and not allowed by the guarantees */
    long allowed;    /* not possible under the model, but allowed by the guarantees (a
                        pause past the lease, a restart that lost the data) */
    char note[320];  /* printed on the line after the verdict when not empty: what the
                        verdict was worth (the counting semaphore: the share of the run in
                        which a permit was held and an overcommit could show) */
} hist_verdict;

typedef struct hist_params {
    int sem_permits;        /* the counting semaphore's permits */
    int permits_permits;    /* the permit semaphore's permits */
    int latch_count;        /* count-downs per round */
    int64_t fifo_margin_us; /* fair lock: a waiter that invoked this long before another
                               must be served first */
    int64_t watchdog_ms;    /* the clients' watchdog lease: a CLIENT PAUSE longer than two
                               thirds of it (the lease minus a renewal period) may let a hold
                               expire, which the guarantees allow */
    int barrier_parties;    /* the barrier's parties (0: the processes that use it) */
    int excerpts;           /* excerpts printed per checker (0: none) */
} hist_params;

void hist_params_default(hist_params *p);

/* The checkers: each reads the sorted history and prints an excerpt of each violation (up
 * to p->excerpts) to out. */
hist_verdict hist_check_mutex(const hist *h, const char *obj, const hist_params *p, FILE *out);
hist_verdict hist_check_fenced(const hist *h, const char *obj, const hist_params *p, FILE *out);
hist_verdict hist_check_reentrant(const hist *h, const char *obj, const hist_params *p, FILE *out);
hist_verdict hist_check_rw(const hist *h, const hist_params *p, FILE *out);
hist_verdict hist_check_permits(const hist *h, const char *obj, int n, const hist_params *p,
                                FILE *out);
/* After the run: the permits are all back once every lease ended (permits), or as many as
 * the killed holders and the unknown outcomes allow (sem): the "final" event. */
hist_verdict hist_check_returned(const hist *h, const char *obj, int n, const hist_params *p,
                                 FILE *out);
/* The MariaDB stock table: no sale with a lower token after one with a higher token
 * returned; the row lost exactly the sales (within the unknown outcomes). */
hist_verdict hist_check_stock(const hist *h, const hist_params *p, FILE *out);
hist_verdict hist_check_latch(const hist *h, const hist_params *p, FILE *out);
hist_verdict hist_check_fifo(const hist *h, const hist_params *p, FILE *out);
/* A cyclic barrier: no party released from a generation before every party arrived in it,
 * none released from one generation twice. */
hist_verdict hist_check_barrier(const hist *h, const hist_params *p, FILE *out);

/* Runs every checker that has events in h, prints one verdict line each, returns the
 * total of violations. */
long hist_check_all(const hist *h, const hist_params *p, FILE *out);

#endif
