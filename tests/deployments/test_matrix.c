/*
 * The fault matrix on one Redis (issue 14; docs/guarantees.md holds the table): the faults
 * that tests/net/test_faults.c, test_recovery.c, test_fencing.c, test_lock.c and
 * test_fairlock.c do not cover yet, each with the bound it must meet and the checkers of
 * checkers.h watching exclusion: a holder killed or stopped, a stopped server, paused
 * writes, a busy script, eviction, a password changed under a running client, a
 * subscriber connection blackholed or delayed, and ten thousand cuts in a row.
 *
 * Timing: a client's watchdog_ms is its lease, renewed every third of it (the renewal
 * period); bounds are stated from those and get a slack for a loaded 2-core machine.
 */
#define _GNU_SOURCE
#include "checkers.h"
#include "faultproxy.h"
#include "helper.h"
#include "internal.h"

#include "new_assert.h"
#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
/* the sanitizer runtime's (sanitizer/allocator_interface.h, which gcc does not ship) */
size_t __sanitizer_get_current_allocated_bytes(void);
#endif

TestSuite(matrix, .timeout = 60);

#define SLACK_MS 500 /* scheduling on a loaded 2-core machine */

/* A client on port (or url) with the given timeouts and watchdog lease. */
static baton_client *client_on(const char *url, int64_t command_ms, int64_t watchdog_ms)
{
    baton_options o;
    baton_options_init(&o);
    o.url = url;
    o.connect_timeout_ms = 1000;
    o.command_timeout_ms = command_ms;
    o.watchdog_ms = watchdog_ms;
    baton_client *c = NULL;
    cr_assert(eq(int, baton_client_open(&o, &c), BATON_OK), "%s", baton_open_errmsg());
    return c;
}

static const char *url_of(int port)
{
    static _Thread_local char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    return url;
}

/* ms until fd is readable (waiting at most timeout_ms), -1 if it was not. */
static int64_t wait_readable(int fd, int timeout_ms)
{
    int64_t t0 = th_ms();
    struct pollfd p = {fd, POLLIN, 0};
    int n;
    while ((n = poll(&p, 1, timeout_ms)) < 0) {
    }
    return n == 1 ? th_ms() - t0 : -1;
}

/* ------------------------------------------------ holder killed (kill -9) ----------- */

enum { KILL_WORKERS = 4, KILL_ROUNDS = 3, KILL_LEASE = 1500 };

typedef struct kill_shared {
    atomic_int holder;    /* pid of the worker inside its critical section, 0: none */
    atomic_int stop;      /* the parent says stop */
    atomic_long sections; /* critical sections completed (the counter's SET answered) */
    atomic_long errors;   /* calls that failed, fenced writes refused */
} kill_shared;

typedef struct kill_job {
    const char *name, *counter;
    int port;
    kill_shared *sh;
    th_ilog *log;
    th_fenced *store;
} kill_job;

static int kill_worker(void *arg)
{
    kill_job *j = arg;
    baton_client *c = client_on(url_of(j->port), 2000, KILL_LEASE);
    redisContext *r = th_redis_port(j->port);
    baton_lock *l;
    if (baton_lock_open(c, j->name, &l) != BATON_OK)
        return 1;
    int me = (int)getpid();
    srand((unsigned)me);
    while (!atomic_load(&j->sh->stop)) {
        int rc = baton_lock_try_acquire(l, 10000, BATON_LEASE_WATCHDOG);
        if (rc == BATON_ETIMEDOUT)
            continue;
        if (rc != BATON_OK) {
            atomic_fetch_add(&j->sh->errors, 1);
            continue;
        }
        int64_t token = 0;
        baton_lock_fencing_token(l, &token);
        long slot = th_ilog_begin(j->log, me, token);
        atomic_store(&j->sh->holder, me);
        if (!th_fenced_write(j->store, token))
            atomic_fetch_add(&j->sh->errors, 1);
        if (th_counter_incr(r, j->counter, 3000) < 0)
            atomic_fetch_add(&j->sh->errors, 1);
        else
            atomic_fetch_add(&j->sh->sections, 1);
        atomic_store(&j->sh->holder, 0);
        th_ilog_end(j->log, slot);
        if (baton_lock_release(l) != BATON_OK)
            atomic_fetch_add(&j->sh->errors, 1);
    }
    baton_lock_close(l);
    baton_client_close(c);
    redisFree(r);
    return 0;
}

Test(matrix, holder_killed_in_its_critical_section_frees_within_lease_and_a_renewal)
{
    th_server s;
    th_server_start(&s, NULL);
    kill_shared *sh =
        mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(sh != MAP_FAILED);
    memset(sh, 0, sizeof *sh);
    kill_job j = {"mx-kill", "mx-kill-counter", s.port, sh, th_ilog_new(100000), th_fenced_new()};
    pid_t pids[KILL_WORKERS + KILL_ROUNDS];
    int n = 0;
    for (; n < KILL_WORKERS; n++)
        pids[n] = th_fork(kill_worker, &j);
    th_sleep_ms(800);
    int64_t worst = 0;
    for (int round = 0; round < KILL_ROUNDS; round++) {
        int victim = 0;
        for (int i = 0; i < 2000 && !(victim = atomic_load(&sh->holder)); i++)
            usleep(500);
        cr_assert(gt(int, victim, 0), "nobody held the lock");
        kill(victim, SIGKILL);
        int64_t killed = th_mono_ns();
        cr_assert(eq(int, th_wait(victim), 128 + SIGKILL));
        for (int i = 0; i < n; i++)
            if (pids[i] == victim)
                pids[i] = 0; /* reaped */
        th_ilog_end_open(j.log, victim, killed);
        pids[n++] = th_fork(kill_worker, &j); /* a replacement: the contention stays */
        int64_t next = -1;
        for (int i = 0; i < 400 && (next = th_ilog_next_start(j.log, killed, victim)) < 0; i++)
            th_sleep_ms(10);
        cr_assert(ge(i64, next, 0), "nobody took the lock within 4 s of the kill");
        int64_t gap = (next - killed) / 1000000;
        fprintf(stderr, "matrix: kill -9 of the holder, next holder after %lld ms\n",
                (long long)gap);
        if (gap > worst)
            worst = gap;
        cr_assert(le(i64, gap, KILL_LEASE + KILL_LEASE / 3 + SLACK_MS),
                  "the lock came free %lld ms after the kill", (long long)gap);
        th_sleep_ms(300);
    }
    atomic_store(&sh->stop, 1);
    for (int i = 0; i < n; i++)
        if (pids[i] > 0)
            cr_assert(eq(int, th_wait(pids[i]), 0), "worker %d", i);
    redisContext *r = th_redis_port(s.port);
    long long value = th_counter_get(r, j.counter);
    long done = atomic_load(&sh->sections);
    fprintf(stderr,
            "matrix: kill -9: %ld sections, counter %lld, %zu intervals, worst gap %lld ms\n", done,
            value, th_ilog_count(j.log), (long long)worst);
    cr_assert(eq(int, th_ilog_violations(j.log, 1), 0), "two holders at once");
    /* a worker killed between its SET and its count did one section more than counted */
    cr_assert(ge(i64, value, done), "lost increments: %lld of %ld", done - value, done);
    cr_assert(le(i64, value, done + KILL_ROUNDS));
    cr_assert(eq(i64, atomic_load(&sh->errors), 0), "failed calls or refused fenced writes");
    cr_assert(gt(i64, done, 20), "too little contention to mean anything");
    redisFree(r);
    th_ilog_free(j.log);
    th_fenced_free(j.store);
    munmap(sh, sizeof *sh);
    th_server_stop(&s);
}

/* ------------------------------------------------ holder stopped (SIGSTOP) ---------- */

typedef struct stop_job {
    const char *name;
    int port;
    int64_t watchdog_ms;
    th_fenced *store;
    int to_parent, from_parent; /* pipes */
} stop_job;

/* What the stopped child reports to the parent once it runs again. */
typedef struct stop_report {
    int64_t lost_at_ns; /* when its lost fd became readable, 0: never (within 3 s) */
    int held;           /* is_held_by_current_thread after the resume (-1: error) */
    int fenced_ok;      /* its write with its token was accepted */
    int release_rc;
} stop_report;

/* Holds the lock with the watchdog, tells the parent its token, waits for the parent's
 * "go" (the parent stops and resumes it meanwhile), then reports what it finds. */
static int stop_child(void *arg)
{
    stop_job *j = arg;
    baton_client *c = client_on(url_of(j->port), 1000, j->watchdog_ms);
    baton_lock *l;
    int fd = -1;
    if (baton_lock_open(c, j->name, &l) != BATON_OK || baton_lock_lost_fd(l, &fd) != BATON_OK ||
        baton_lock_acquire(l, BATON_LEASE_WATCHDOG) != BATON_OK)
        return 64;
    int64_t token = 0;
    baton_lock_fencing_token(l, &token);
    if (!th_fenced_write(j->store, token))
        return 65;
    if (write(j->to_parent, &token, sizeof token) != sizeof token)
        return 66;
    /* stopped somewhere in here; after the resume, the lost fd tells within a renewal */
    stop_report rep = {0, -1, 0, 0};
    char go;
    struct pollfd p[2] = {{fd, POLLIN, 0}, {j->from_parent, POLLIN, 0}};
    while (poll(p, 2, 10000) < 0) {
    }
    if (p[0].revents & POLLIN)
        rep.lost_at_ns = th_mono_ns();
    if (read(j->from_parent, &go, 1) != 1)
        return 67;
    if (!rep.lost_at_ns && wait_readable(fd, 0) >= 0)
        rep.lost_at_ns = th_mono_ns();
    bool held = false;
    if (baton_lock_is_held_by_current_thread(l, &held) == BATON_OK)
        rep.held = held;
    rep.fenced_ok = th_fenced_write(j->store, token);
    rep.release_rc = baton_lock_release(l);
    if (write(j->to_parent, &rep, sizeof rep) != sizeof rep)
        return 68;
    baton_lock_close(l);
    baton_client_close(c);
    return 0;
}

typedef struct stopped {
    stop_job job;
    int up[2], down[2];
    pid_t pid;
    int64_t token;
} stopped;

static void stopped_start(stopped *k, const char *name, int port, int64_t watchdog_ms,
                          th_fenced *store)
{
    cr_assert(eq(int, pipe(k->up), 0));
    cr_assert(eq(int, pipe(k->down), 0));
    k->job = (stop_job){name, port, watchdog_ms, store, k->up[1], k->down[0]};
    k->pid = th_fork(stop_child, &k->job);
    cr_assert(eq(sz, (size_t)read(k->up[0], &k->token, sizeof k->token), sizeof k->token),
              "the child never held the lock");
}

static stop_report stopped_finish(stopped *k)
{
    char go = 1;
    cr_assert(eq(sz, (size_t)write(k->down[1], &go, 1), 1));
    stop_report rep;
    cr_assert(eq(sz, (size_t)read(k->up[0], &rep, sizeof rep), sizeof rep));
    cr_assert(eq(int, th_wait(k->pid), 0), "child status");
    for (int i = 0; i < 2; i++) {
        close(k->up[i]);
        close(k->down[i]);
    }
    return rep;
}

Test(matrix, holder_stopped_shorter_than_its_lease_keeps_the_lock)
{
    th_server s;
    th_server_start(&s, NULL);
    th_fenced *store = th_fenced_new();
    stopped k;
    /* lease 3 s renewed every second: at the stop at least 2 s are left */
    stopped_start(&k, "mx-stop-short", s.port, 3000, store);
    baton_client *c = client_on(url_of(s.port), 1000, 3000);
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(c, "mx-stop-short", &l), BATON_OK));
    cr_assert(eq(int, kill(k.pid, SIGSTOP), 0));
    int64_t t0 = th_ms();
    /* a contender waits through the whole stop and does not get the lock */
    cr_assert(eq(int, baton_lock_try_acquire(l, 1200, BATON_LEASE_WATCHDOG), BATON_ETIMEDOUT));
    cr_assert(le(i64, th_ms() - t0, 1200 + 1000 + SLACK_MS), "the wait overran its deadline");
    cr_assert(eq(int, kill(k.pid, SIGCONT), 0));
    th_sleep_ms(1100); /* a renewal period after the resume: the watchdog ran again */
    stop_report rep = stopped_finish(&k);
    cr_assert(eq(i64, rep.lost_at_ns, 0), "the stopped holder was told it lost the lock");
    cr_assert(eq(int, rep.held, 1), "the stopped holder lost the lock");
    cr_assert(eq(int, rep.fenced_ok, 1), "its token was refused though nobody else held");
    cr_assert(eq(int, rep.release_rc, BATON_OK));
    cr_assert(eq(long, th_fenced_refused(store), 0));
    /* released: the contender gets it at once */
    cr_assert(eq(int, baton_lock_try_acquire(l, 0, 5000), BATON_OK));
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    baton_lock_close(l);
    baton_client_close(c);
    th_fenced_free(store);
    th_server_stop(&s);
}

Test(matrix, holder_stopped_past_its_lease_is_told_fenced_off_and_cannot_release)
{
    enum { LEASE = 1500, PERIOD = LEASE / 3 };
    th_server s;
    th_server_start(&s, NULL);
    th_fenced *store = th_fenced_new();
    stopped k;
    stopped_start(&k, "mx-stop-long", s.port, LEASE, store);
    baton_client *c = client_on(url_of(s.port), 1000, 30000);
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(c, "mx-stop-long", &l), BATON_OK));
    cr_assert(eq(int, kill(k.pid, SIGSTOP), 0));
    int64_t stopped_at = th_ms();
    /* the stopped holder's lease runs out: the lock is free within lease + a period */
    cr_assert(eq(int, baton_lock_try_acquire(l, 5000, BATON_LEASE_WATCHDOG), BATON_OK), "%s",
              baton_client_errmsg(c));
    int64_t took = th_ms() - stopped_at;
    fprintf(stderr, "matrix: holder stopped, the lock came free after %lld ms (lease %d)\n",
            (long long)took, LEASE);
    cr_assert(le(i64, took, LEASE + PERIOD + SLACK_MS));
    int64_t token = 0;
    cr_assert(eq(int, baton_lock_fencing_token(l, &token), BATON_OK));
    cr_assert(gt(i64, token, k.token));
    cr_assert(th_fenced_write(store, token), "the new holder's write was refused");
    th_sleep_ms(200);
    int64_t resumed_ns = th_mono_ns();
    cr_assert(eq(int, kill(k.pid, SIGCONT), 0));
    th_sleep_ms(PERIOD + SLACK_MS);
    stop_report rep = stopped_finish(&k);
    cr_assert(gt(i64, rep.lost_at_ns, 0), "the resumed holder was never told");
    int64_t told = (rep.lost_at_ns - resumed_ns) / 1000000;
    fprintf(stderr, "matrix: resumed holder told it lost the lock %lld ms after SIGCONT\n",
            (long long)told);
    cr_assert(le(i64, told, PERIOD + SLACK_MS), "told %lld ms after the resume", (long long)told);
    cr_assert(eq(int, rep.held, 0));
    cr_assert(eq(int, rep.fenced_ok, 0), "the stale token was accepted");
    cr_assert(eq(int, rep.release_rc, BATON_ENOTHELD));
    cr_assert(eq(long, th_fenced_refused(store), 1));
    /* the stale release touched nothing of the new holder's */
    bool held = false;
    cr_assert(eq(int, baton_lock_is_held_by_current_thread(l, &held), BATON_OK));
    cr_assert(held, "the new holder lost the lock to a stale release");
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    redisContext *r = th_redis_port(s.port);
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS mx-stop-long"), 0));
    redisFree(r);
    baton_lock_close(l);
    baton_client_close(c);
    th_fenced_free(store);
    th_server_stop(&s);
}

/* ------------------------------------------------ server stopped (SIGSTOP) ---------- */

/* Runs the call, asserts it returned within bound_ms, returns how long it took. */
#define WITHIN(bound_ms, rc_out, call)                                                             \
    ({                                                                                             \
        int64_t t0_ = th_ms();                                                                     \
        rc_out = (call);                                                                           \
        int64_t took_ = th_ms() - t0_;                                                             \
        cr_assert(le(i64, took_, (int64_t)(bound_ms)), "%s took %lld ms", #call,                   \
                  (long long)took_);                                                               \
        took_;                                                                                     \
    })

Test(matrix, stopped_server_costs_each_call_its_timeout_then_recovers)
{
    enum { CMD = 500, CONNECT = 1000, LEASE = 1500 };
    th_server s;
    th_server_start(&s, NULL);
    baton_options o;
    baton_options_init(&o);
    o.url = url_of(s.port);
    o.connect_timeout_ms = CONNECT;
    o.command_timeout_ms = CMD;
    o.watchdog_ms = LEASE;
    baton_client *c = NULL;
    cr_assert(eq(int, baton_client_open(&o, &c), BATON_OK));
    baton_lock *a, *b;
    th_lost_probe probe = {0};
    cr_assert(eq(int, baton_lock_open(c, "mx-sstop-a", &a), BATON_OK));
    cr_assert(eq(int, baton_lock_open(c, "mx-sstop-b", &b), BATON_OK));
    cr_assert(eq(int, baton_lock_set_lost_handler(a, th_lost_probe_fn, &probe), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(a, BATON_LEASE_WATCHDOG), BATON_OK));
    th_sleep_ms(100);

    cr_assert(eq(int, kill(s.pid, SIGSTOP), 0));
    int64_t stopped_at = th_ms();
    int rc = 0;
    bool locked = false;
    /* an attempt: one command timeout, then a resolution on a new connection (connect
     * timeout): the acquire's documented bound is wait + a command timeout, and the
     * resolution is the "+ 1 s" */
    int64_t t1 = WITHIN(2 * (CMD + CONNECT) + SLACK_MS, rc, baton_lock_try_acquire(b, 0, 5000));
    cr_assert(eq(int, rc, BATON_ECONN), "%s", baton_client_errmsg(c));
    int64_t t2 = WITHIN(2 * (CMD + CONNECT) + SLACK_MS, rc, baton_lock_is_locked(b, &locked));
    cr_assert(eq(int, rc, BATON_ECONN));
    int64_t t3 =
        WITHIN(800 + 2 * (CMD + CONNECT) + SLACK_MS, rc, baton_lock_try_acquire(b, 800, 5000));
    cr_assert(eq(int, rc, BATON_ECONN));
    fprintf(stderr,
            "matrix: stopped server: try_acquire(0) %lld ms, is_locked %lld ms, "
            "try_acquire(800) %lld ms (command timeout %d, connect timeout %d)\n",
            (long long)t1, (long long)t2, (long long)t3, CMD, CONNECT);
    /* the hold whose renewals fail is reported lost once its lease has surely run out, as
     * seen by a renewal pass that returns: today such a pass may take two command and
     * connect timeouts (the same renewal once more on a new connection) */
    while (atomic_load(&probe.calls) == 0 &&
           th_ms() - stopped_at < LEASE + LEASE / 3 + 2 * (CMD + CONNECT) + SLACK_MS)
        th_sleep_ms(10);
    cr_assert(eq(int, atomic_load(&probe.calls), 1), "the unrenewable hold was never reported");
    int64_t told = atomic_load(&probe.at_ms) - stopped_at;
    fprintf(stderr, "matrix: stopped server: hold reported lost %lld ms after the stop\n",
            (long long)told);
    cr_assert(le(i64, told, LEASE + LEASE / 3 + 2 * (CMD + CONNECT) + SLACK_MS));

    cr_assert(eq(int, kill(s.pid, SIGCONT), 0));
    int64_t resumed = th_ms();
    cr_assert(eq(int, baton_lock_try_acquire(b, 3000, 5000), BATON_OK), "%s",
              baton_client_errmsg(c));
    fprintf(stderr, "matrix: stopped server: first acquire %lld ms after SIGCONT\n",
            (long long)(th_ms() - resumed));
    cr_assert(le(i64, th_ms() - resumed, CMD + CONNECT + SLACK_MS));
    cr_assert(eq(int, baton_lock_release(b), BATON_OK));
    cr_assert(eq(int, baton_lock_release(a), BATON_ENOTHELD), "the lost hold is not released");
    cr_assert(eq(int, baton_lock_acquire(a, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(int, baton_lock_release(a), BATON_OK));
    baton_lock_close(a);
    baton_lock_close(b);
    baton_client_close(c);
    th_server_stop(&s);
}

/* ------------------------------------------------ CLIENT PAUSE past the lease ------- */

typedef struct contender {
    baton_lock *l;
    th_fenced *store;
    int rc;
    int64_t token;
    bool fenced_ok;
    _Atomic int64_t at_ms; /* when it acquired */
    int64_t took_ms;       /* of the try_acquire */
} contender;

static void *contend(void *arg)
{
    contender *k = arg;
    int64_t t0 = th_ms();
    k->rc = baton_lock_try_acquire(k->l, 6000, BATON_LEASE_WATCHDOG);
    k->took_ms = th_ms() - t0;
    if (k->rc == BATON_OK) {
        atomic_store(&k->at_ms, th_ms());
        baton_lock_fencing_token(k->l, &k->token);
        k->fenced_ok = th_fenced_write(k->store, k->token);
        th_sleep_ms(100);
        baton_lock_release(k->l);
    }
    return NULL;
}

/* strict: the holder must be told by its lease's end, before anyone can take the lock. */
static void pause_past_the_lease(const char *mode, bool strict)
{
    enum { LEASE = 1500, PERIOD = LEASE / 3, PAUSE = 3000 };
    th_server s;
    th_server_start(&s, NULL);
    /* the holder's commands time out during the pause; the contender's wait through it */
    baton_client *hc = client_on(url_of(s.port), 1000, LEASE);
    baton_client *cc = client_on(url_of(s.port), 5000, 30000);
    th_fenced *store = th_fenced_new();
    char name[64];
    snprintf(name, sizeof name, "mx-pause-%s", mode);
    baton_lock *h, *l;
    th_lost_probe probe = {0};
    int fd = -1;
    cr_assert(eq(int, baton_lock_open(hc, name, &h), BATON_OK));
    cr_assert(eq(int, baton_lock_open(cc, name, &l), BATON_OK));
    cr_assert(eq(int, baton_lock_set_lost_handler(h, th_lost_probe_fn, &probe), BATON_OK));
    cr_assert(eq(int, baton_lock_lost_fd(h, &fd), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(h, BATON_LEASE_WATCHDOG), BATON_OK));
    int64_t htoken = 0;
    cr_assert(eq(int, baton_lock_fencing_token(h, &htoken), BATON_OK));
    cr_assert(th_fenced_write(store, htoken));
    contender k = {.l = l, .store = store, .rc = -100};
    pthread_t t;
    pthread_create(&t, NULL, contend, &k);
    th_sleep_ms(200); /* the contender waits on the lock */

    redisContext *r = th_redis_port(s.port);
    freeReplyObject(th_cmd(r, "CLIENT PAUSE %d %s", PAUSE, mode));
    int64_t paused = th_ms();
    th_sleep_ms(PAUSE + PERIOD + SLACK_MS);
    cr_assert(eq(int, atomic_load(&probe.calls), 1), "the holder was never told");
    int64_t told = atomic_load(&probe.at_ms) - paused;
    cr_assert(ge(i64, wait_readable(fd, 0), 0), "the lost fd is not readable");
    pthread_join(t, NULL);
    int64_t taken = atomic_load(&k.at_ms) - paused;
    fprintf(stderr,
            "matrix: CLIENT PAUSE %s %d ms: holder told at %lld ms, contender held at %lld ms "
            "(its wait took %lld ms): %lld ms of two believed holders\n",
            mode, PAUSE, (long long)told, (long long)taken, (long long)k.took_ms,
            (long long)(told > taken ? told - taken : 0));
    /* the pause stops the renewals and the lease's expiry alike: the contender takes the
     * lock when the pause ends, and the holder is told within a renewal period of that;
     * its stale token is refused. (Told by its lease's end, before anyone can take the
     * lock, is what it should be: see the case at the tip of the branch.) */
    cr_assert(le(i64, told, PAUSE + PERIOD + SLACK_MS));
    if (strict) {
        /* the last renewal was sent before the pause: the server's expiry is no earlier
         * than that + the lease, so a watchdog that keeps its own deadline tells the
         * holder by then, whatever its renewal pass is waiting for */
        cr_assert(le(i64, told, LEASE + SLACK_MS), "told %lld ms after the pause began",
                  (long long)told);
        cr_assert(lt(i64, told, taken), "the contender held before the holder was told");
    }
    cr_assert(eq(int, k.rc, BATON_OK), "%s", baton_client_errmsg(cc));
    cr_assert(le(i64, k.took_ms, 6000 + 1000));
    cr_assert(ge(i64, taken, PAUSE - 100), "the lock was taken during the pause");
    cr_assert(gt(i64, k.token, htoken));
    cr_assert(k.fenced_ok);
    cr_assert(not(th_fenced_write(store, htoken)), "the stale token was accepted");
    cr_assert(eq(int, baton_lock_release(h), BATON_ENOTHELD));
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s", name), 0), "left behind");
    redisFree(r);
    baton_lock_close(h);
    baton_lock_close(l);
    baton_client_close(hc);
    baton_client_close(cc);
    th_fenced_free(store);
    th_server_stop(&s);
}

Test(matrix, client_pause_write_past_the_lease_fences_the_holder_off)
{
    pause_past_the_lease("WRITE", false);
}

Test(matrix, client_pause_all_past_the_lease_fences_the_holder_off)
{
    pause_past_the_lease("ALL", false);
}

/* FAILS today: the watchdog checks the lease only after a renewal pass returns, and a pass
 * against a paused server waits two command + connect timeouts; see docs/guarantees.md,
 * "Known gaps". Needs src/lockbase/watchdog.c to report a hold lost at its last successful
 * renewal + the lease, independently of a pass in flight. */
Test(matrix, a_holder_whose_renewals_hang_is_told_by_its_lease_end)
{
    pause_past_the_lease("WRITE", true);
}

/* ------------------------------------------------ a busy script --------------------- */

static void *busy_script(void *arg)
{
    int port = *(int *)arg;
    redisContext *r = th_redis_port(port);
    /* 2.5 s of a script that never yields (TIME is allowed in scripts since Redis 5) */
    redisReply *rep =
        redisCommand(r, "EVAL %s 0",
                     "local t = redis.call('TIME') local e = t[1] * 1000000 + t[2] + 2500000 "
                     "while true do local n = redis.call('TIME') "
                     "if n[1] * 1000000 + n[2] > e then break end end return 1");
    if (rep)
        freeReplyObject(rep);
    redisFree(r);
    return NULL;
}

Test(matrix, a_busy_script_is_a_clear_error_without_a_hang)
{
    enum { CMD = 1000, LEASE = 6000 };
    th_server s;
    th_server_start(&s, "--busy-reply-threshold 200");
    baton_client *c = client_on(url_of(s.port), CMD, LEASE);
    baton_lock *a, *b;
    th_lost_probe probe = {0};
    cr_assert(eq(int, baton_lock_open(c, "mx-busy-a", &a), BATON_OK));
    cr_assert(eq(int, baton_lock_open(c, "mx-busy-b", &b), BATON_OK));
    cr_assert(eq(int, baton_lock_set_lost_handler(a, th_lost_probe_fn, &probe), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(a, BATON_LEASE_WATCHDOG), BATON_OK));
    pthread_t t;
    pthread_create(&t, NULL, busy_script, &s.port);
    th_sleep_ms(400); /* past the threshold: the server answers BUSY */
    int rc = 0;
    bool locked = false;
    int64_t t1 = WITHIN(CMD + 1000, rc, baton_lock_try_acquire(b, 0, 5000));
    cr_assert(not(eq(int, rc, BATON_OK)));
    cr_assert(not(eq(ptr, strstr(baton_client_errmsg(c), "BUSY"), NULL)), "the message: %s",
              baton_client_errmsg(c));
    fprintf(stderr, "matrix: busy script: try_acquire -> %s in %lld ms: %s\n", baton_err_name(rc),
            (long long)t1, baton_client_errmsg(c));
    int64_t t2 = WITHIN(CMD + 1000, rc, baton_lock_is_locked(b, &locked));
    fprintf(stderr, "matrix: busy script: is_locked -> %s in %lld ms\n", baton_err_name(rc),
            (long long)t2);
    cr_assert(not(eq(int, rc, BATON_OK)));
    pthread_join(t, NULL);
    /* once the script is done, everything works; the hold survived (lease 6 s) */
    cr_assert(eq(int, baton_lock_try_acquire(b, 1000, 5000), BATON_OK), "%s",
              baton_client_errmsg(c));
    cr_assert(eq(int, baton_lock_release(b), BATON_OK));
    th_sleep_ms(LEASE / 3 + 200); /* a renewal after the busy spell */
    cr_assert(eq(int, atomic_load(&probe.calls), 0), "a busy spell shorter than the lease lost it");
    cr_assert(eq(int, baton_lock_release(a), BATON_OK));
    baton_lock_close(a);
    baton_lock_close(b);
    baton_client_close(c);
    th_server_stop(&s);
}

/* ------------------------------------------------ maxmemory ------------------------- */

/* Writes 64 KB values without an expiry until stop(r, arg) is true or the server refuses
 * (OOM). Returns how many it wrote. */
static int fill_memory(redisContext *r, bool (*stop)(redisContext *, void *), void *arg, bool *oom)
{
    static char blob[65536];
    memset(blob, 'x', sizeof blob - 1);
    *oom = false;
    int n = 0;
    for (; n < 20000 && !(stop && stop(r, arg)); n++) {
        redisReply *rep = redisCommand(r, "SET mx-junk-%d %b", n, blob, sizeof blob);
        cr_assert(rep != NULL);
        bool refused = rep->type == REDIS_REPLY_ERROR;
        if (refused)
            cr_assert(not(eq(ptr, strstr(rep->str, "OOM"), NULL)), "%s", rep->str);
        freeReplyObject(rep);
        if (refused) {
            *oom = true;
            break;
        }
    }
    return n;
}

static bool key_gone(redisContext *r, void *arg)
{
    redisReply *rep = redisCommand(r, "EXISTS %s", (const char *)arg);
    bool gone = rep && rep->type == REDIS_REPLY_INTEGER && rep->integer == 0;
    if (rep)
        freeReplyObject(rep);
    return gone;
}

Test(matrix, an_evicted_lock_is_reported_lost_within_a_renewal)
{
    enum { LEASE = 1500, PERIOD = LEASE / 3 };
    th_server s;
    /* volatile-lru evicts keys with an expiry only: the lock is the one candidate */
    th_server_start(&s, "--maxmemory 8mb --maxmemory-policy volatile-lru");
    baton_client *c = client_on(url_of(s.port), 1000, LEASE);
    cr_assert(not(eq(ptr, strstr(baton_client_errmsg(c), "volatile-lru"), NULL)),
              "no warning at open: \"%s\"", baton_client_errmsg(c));
    baton_lock *l;
    th_lost_probe probe = {0};
    int fd = -1;
    cr_assert(eq(int, baton_lock_open(c, "mx-evict", &l), BATON_OK));
    cr_assert(eq(int, baton_lock_set_lost_handler(l, th_lost_probe_fn, &probe), BATON_OK));
    cr_assert(eq(int, baton_lock_lost_fd(l, &fd), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(l, BATON_LEASE_WATCHDOG), BATON_OK));
    redisContext *r = th_redis_port(s.port);
    bool oom = false;
    int n = fill_memory(r, key_gone, "mx-evict", &oom);
    int64_t evicted = th_ms();
    cr_assert(key_gone(r, "mx-evict"), "the lock was not evicted (%d values, oom %d)", n, oom);
    cr_assert(gt(i64, th_cmd_int(r, "EXISTS redisson_lock_token:{mx-evict}"), 0),
              "the fencing counter has no expiry and stays");
    int64_t took = wait_readable(fd, LEASE + 2000);
    cr_assert(ge(i64, took, 0), "the evicted hold was never reported");
    fprintf(stderr, "matrix: evicted lock (after %d values) reported lost %lld ms later\n", n,
            (long long)took);
    cr_assert(le(i64, took, PERIOD + SLACK_MS));
    /* the callback runs right after the fd is signalled, on the watchdog's thread */
    for (int i = 0; i < 100 && atomic_load(&probe.calls) == 0; i++)
        th_sleep_ms(5);
    cr_assert(eq(int, atomic_load(&probe.calls), 1));
    cr_assert(le(i64, atomic_load(&probe.at_ms) - evicted, PERIOD + SLACK_MS));
    cr_assert(eq(int, baton_lock_release(l), BATON_ENOTHELD));
    freeReplyObject(th_cmd(r, "FLUSHALL"));
    cr_assert(eq(int, baton_lock_try_acquire(l, 0, 5000), BATON_OK), "%s", baton_client_errmsg(c));
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    redisFree(r);
    baton_lock_close(l);
    baton_client_close(c);
    th_server_stop(&s);
}

/* ------------------------------------------------ a password changed mid-run -------- */

#define OLD_PW "mx-old-pw-7Hq2"
#define NEW_PW "mx-new-pw-3Zx9"

Test(matrix, a_password_changed_under_the_client_is_eauth_without_the_password)
{
    enum { CMD = 1000, CONNECT = 1000, LEASE = 1500 };
    th_server s;
    th_server_start(&s, NULL);
    redisContext *r = th_redis_port(s.port);
    freeReplyObject(th_cmd(r, "ACL SETUSER mxuser on >" OLD_PW " ~* &* +@all"));
    baton_options o;
    baton_options_init(&o);
    o.url = url_of(s.port);
    o.username = "mxuser";
    o.password = OLD_PW;
    o.connect_timeout_ms = CONNECT;
    o.command_timeout_ms = CMD;
    o.watchdog_ms = LEASE;
    baton_client *c = NULL;
    cr_assert(eq(int, baton_client_open(&o, &c), BATON_OK), "%s", baton_open_errmsg());
    baton_lock *a, *b;
    th_lost_probe probe = {0};
    cr_assert(eq(int, baton_lock_open(c, "mx-auth-a", &a), BATON_OK));
    cr_assert(eq(int, baton_lock_open(c, "mx-auth-b", &b), BATON_OK));
    cr_assert(eq(int, baton_lock_set_lost_handler(a, th_lost_probe_fn, &probe), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(a, BATON_LEASE_WATCHDOG), BATON_OK));

    /* the operator rotates the password and drops the user's connections */
    freeReplyObject(th_cmd(r, "ACL SETUSER mxuser resetpass >" NEW_PW));
    freeReplyObject(th_cmd(r, "CLIENT KILL USER mxuser"));
    int64_t changed = th_ms();
    int rc = 0;
    bool locked = false;
    int64_t t1 = WITHIN(CMD + CONNECT + 1000, rc, baton_lock_try_acquire(b, 0, 5000));
    cr_assert(eq(int, rc, BATON_EAUTH), "%s: %s", baton_err_name(rc), baton_client_errmsg(c));
    const char *msg = baton_client_errmsg(c);
    fprintf(stderr, "matrix: password changed: %s in %lld ms: %s\n", baton_err_name(rc),
            (long long)t1, msg);
    cr_assert(eq(ptr, strstr(msg, OLD_PW), NULL), "the password is in the message");
    cr_assert(eq(ptr, strstr(msg, NEW_PW), NULL));
    WITHIN(CMD + CONNECT + 1000, rc, baton_lock_is_locked(b, &locked));
    cr_assert(eq(int, rc, BATON_EAUTH));
    /* the hold cannot be renewed: reported lost once its lease has surely run out */
    while (atomic_load(&probe.calls) == 0 && th_ms() - changed < LEASE + 2000)
        th_sleep_ms(10);
    cr_assert(eq(int, atomic_load(&probe.calls), 1), "the unrenewable hold was never reported");
    int64_t told = atomic_load(&probe.at_ms) - changed;
    fprintf(stderr, "matrix: password changed: hold reported lost after %lld ms\n",
            (long long)told);
    cr_assert(le(i64, told, LEASE + LEASE / 3 + SLACK_MS));
    /* the old password back: the client recovers on its own */
    freeReplyObject(th_cmd(r, "ACL SETUSER mxuser >" OLD_PW));
    cr_assert(eq(int, baton_lock_try_acquire(b, 1000, 5000), BATON_OK), "%s",
              baton_client_errmsg(c));
    cr_assert(eq(int, baton_lock_release(b), BATON_OK));
    /* told a margin before its lease can end on the server (1 % + 2 ms), the hold may still
     * be there that long: released then, else not held; never another owner's */
    rc = baton_lock_release(a);
    cr_assert(rc == BATON_ENOTHELD || rc == BATON_OK, "%s", baton_err_name(rc));
    cr_assert(eq(int, atomic_load(&probe.calls), 1), "told once");
    baton_lock_close(a);
    baton_lock_close(b);
    baton_client_close(c);
    redisFree(r);
    th_server_stop(&s);
}

/* ------------------------------------------------ the subscriber connection --------- */

/* A waiter on a client that reaches the server through the proxy, a holder on a client
 * that does not. */
typedef struct sub_rig {
    th_server server;
    th_proxy *proxy;
    baton_client *wc, *hc;
    redisContext *direct;
} sub_rig;

typedef struct sub_waiter {
    baton_lock *l;
    baton_client *c;
    int rc;
    int64_t started_ms;
    _Atomic int64_t at_ms;
    char msg[256]; /* the error message, read on the waiter's thread */
    pthread_t t;
} sub_waiter;

static void *sub_wait(void *arg)
{
    sub_waiter *w = arg;
    w->started_ms = th_ms();
    w->rc = baton_lock_try_acquire(w->l, 10000, 30000);
    atomic_store(&w->at_ms, th_ms());
    snprintf(w->msg, sizeof w->msg, "%s", baton_client_errmsg(w->c));
    if (w->rc == BATON_OK)
        baton_lock_release(w->l);
    return NULL;
}

static void sub_rig_up(sub_rig *g)
{
    th_server_start(&g->server, NULL);
    g->proxy = th_proxy_start(g->server.port);
    g->wc = client_on(th_proxy_url(g->proxy), 1000, 30000);
    /* the waiter wakes by the unlock message only (these cases time the subscriber's
     * path): a starving waiter's reservation would re-check on its own (lock.c) */
    baton_client_close(g->wc);
    baton_options o;
    baton_options_init(&o);
    o.url = th_proxy_url(g->proxy);
    o.connect_timeout_ms = 1000;
    o.command_timeout_ms = 1000;
    o.watchdog_ms = 30000;
    o.starve_ms = BATON_STARVE_NEVER;
    cr_assert(eq(int, baton_client_open(&o, &g->wc), BATON_OK), "%s", baton_open_errmsg());
    g->hc = client_on(url_of(g->server.port), 1000, 30000);
    g->direct = th_redis_port(g->server.port);
}

static void sub_rig_down(sub_rig *g)
{
    baton_client_close(g->wc);
    baton_client_close(g->hc);
    th_proxy_stop(g->proxy);
    redisFree(g->direct);
    th_server_stop(&g->server);
}

/* The proxy's number of the connection the server sees as a subscriber (the waiter's:
 * the holder's client reaches the server directly). */
static long subscriber_conn(sub_rig *g)
{
    redisReply *rep = th_cmd(g->direct, "CLIENT LIST TYPE pubsub");
    long nth = 0;
    for (const char *a = rep->str; !nth && (a = strstr(a, " addr=127.0.0.1:")) != NULL; a++)
        nth = th_proxy_conn_of(g->proxy, atoi(a + strlen(" addr=127.0.0.1:")));
    freeReplyObject(rep);
    cr_assert(gt(long, nth, 0), "no subscriber connection through the proxy");
    return nth;
}

/* The holder takes `name` with a lease, a waiter thread waits for it. When `subscribed`,
 * returns once the waiter listens on the lock's channel. */
static void sub_round_start(sub_rig *g, const char *name, int64_t lease_ms, baton_lock **held,
                            sub_waiter *w, bool subscribed)
{
    cr_assert(eq(int, baton_lock_open(g->hc, name, held), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(*held, lease_ms), BATON_OK));
    *w = (sub_waiter){.c = g->wc, .rc = -100};
    cr_assert(eq(int, baton_lock_open(g->wc, name, &w->l), BATON_OK));
    pthread_create(&w->t, NULL, sub_wait, w);
    for (int i = 0; subscribed && th_numsub(g->direct, "redisson_lock__channel:{%s}", name) == 0;
         i++) {
        cr_assert(lt(int, i, 500), "the waiter never subscribed");
        th_sleep_ms(5);
    }
    if (!subscribed)
        th_sleep_ms(300);
}

/* Releases the holder's lock; returns the ms between the release and the waiter's
 * acquisition, and in *lease_left the lease the lock had left at the release. With
 * may_fail, the waiter may also have failed with BATON_ECONN within its command timeout
 * (a subscription never confirmed): -1. */
static int64_t sub_round_end(sub_rig *g, const char *name, baton_lock *held, sub_waiter *w,
                             int64_t *lease_left, bool may_fail)
{
    *lease_left = th_cmd_int(g->direct, "PTTL %s", name);
    int64_t released = th_ms();
    cr_assert(eq(int, baton_lock_release(held), BATON_OK));
    pthread_join(w->t, NULL);
    baton_lock_close(held);
    baton_lock_close(w->l);
    if (may_fail && w->rc == BATON_ECONN) {
        int64_t took = atomic_load(&w->at_ms) - w->started_ms;
        fprintf(stderr, "matrix: waiter failed after %lld ms: %s\n", (long long)took, w->msg);
        cr_assert(le(i64, took, 1000 + SLACK_MS), "failed after %lld ms", (long long)took);
        cr_assert(gt(sz, strlen(w->msg), 0), "no message");
        return -1;
    }
    cr_assert(eq(int, w->rc, BATON_OK), "%s: %s", baton_err_name(w->rc), w->msg);
    return atomic_load(&w->at_ms) - released;
}

Test(matrix, a_blackholed_subscriber_costs_at_most_the_lease_and_recovers)
{
    sub_rig g;
    sub_rig_up(&g);
    baton_lock *held;
    sub_waiter w;
    int64_t left = 0;
    sub_round_start(&g, "mx-bh-1", 2000, &held, &w, true);
    long sub = subscriber_conn(&g);
    th_proxy_blackhole_conn(g.proxy, sub, TH_DOWN, true); /* the unlock message is lost */
    int64_t woke = sub_round_end(&g, "mx-bh-1", held, &w, &left, false);
    fprintf(stderr,
            "matrix: blackholed pushes: woken %lld ms after the release (lease left %lld)\n",
            (long long)woke, (long long)left);
    cr_assert(le(i64, woke, left + SLACK_MS), "woken %lld ms after the release, lease left %lld",
              (long long)woke, (long long)left);

    /* both ways: a new subscription goes into the hole as well; the waiter either gets
     * the lock within the lease or fails clearly once its subscription goes unconfirmed
     * for a command timeout (what it does today): never a hang */
    th_proxy_blackhole_conn(g.proxy, sub, TH_UP, true);
    sub_round_start(&g, "mx-bh-2", 2000, &held, &w, false);
    woke = sub_round_end(&g, "mx-bh-2", held, &w, &left, true);
    if (woke >= 0)
        fprintf(stderr, "matrix: blackholed both ways: woken %lld ms after the release\n",
                (long long)woke);
    cr_assert(le(i64, woke, left + SLACK_MS));

    /* healed: a release wakes the next waiter at once again */
    th_proxy_heal(g.proxy);
    sub_round_start(&g, "mx-bh-3", 10000, &held, &w, true);
    woke = sub_round_end(&g, "mx-bh-3", held, &w, &left, false);
    fprintf(stderr, "matrix: healed: woken %lld ms after the release\n", (long long)woke);
    cr_assert(le(i64, woke, SLACK_MS));
    sub_rig_down(&g);
}

Test(matrix, a_delayed_subscriber_wakes_late_by_the_delay_only)
{
    enum { DELAY = 700 };
    sub_rig g;
    sub_rig_up(&g);
    baton_lock *held;
    sub_waiter w;
    int64_t left = 0;
    sub_round_start(&g, "mx-delay", 10000, &held, &w, true);
    th_proxy_delay_conn(g.proxy, subscriber_conn(&g), TH_DOWN, DELAY);
    int64_t woke = sub_round_end(&g, "mx-delay", held, &w, &left, false);
    fprintf(stderr, "matrix: pushes delayed %d ms: woken %lld ms after the release\n", DELAY,
            (long long)woke);
    cr_assert(ge(i64, woke, DELAY - 50), "woken before the message arrived");
    cr_assert(le(i64, woke, DELAY + SLACK_MS));
    sub_rig_down(&g);
}

/* ------------------------------------------------ ten thousand faults --------------- */

static int count_dir(const char *path)
{
    DIR *d = opendir(path);
    cr_assert(d != NULL);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Live heap in KB: the sanitizer's allocator count in a sanitizer build (its quarantine
 * keeps freed memory resident, so RSS would only grow), glibc's otherwise. */
static long heap_kb(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    return (long)(__sanitizer_get_current_allocated_bytes() / 1024);
#else
    return (long)(mallinfo2().uordblks / 1024);
#endif
}

Test(matrix, ten_thousand_cuts_leave_fds_threads_and_memory_flat, .timeout = 120)
{
    enum { CYCLES = 10000, WARM = 500 };
    th_server s;
    th_server_start(&s, NULL);
    th_proxy *p = th_proxy_start(s.port);
    baton_client *c = client_on(th_proxy_url(p), 1000, 30000);
    redisContext *r = th_redis_port(s.port);
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(c, "mx-cycles", &l), BATON_OK));
    int fds0 = 0, threads0 = 0, econn = 0;
    long heap0 = 0;
    /* once unharmed: the server has the scripts (a cut NOSCRIPT answer is an acquire that
     * surely did not run, and fails) */
    cr_assert(eq(int, baton_lock_try_acquire(l, 0, 30000), BATON_OK));
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    int64_t t0 = th_ms();
    for (int i = 0; i < CYCLES; i++) {
        if (i == WARM) { /* pools, scripts and allocator caches are settled */
            fds0 = count_dir("/proc/self/fd");
            threads0 = count_dir("/proc/self/task");
            heap0 = heap_kb();
        }
        /* a reply cut after 0..5 bytes (a nil reply has 5): the acquire's when i is even,
         * the release's when odd; a cut that lands on a new connection's handshake fails
         * the call cleanly (BATON_ECONN, nothing done) */
        if (i % 2 == 0)
            th_proxy_cut_after(p, TH_DOWN, (i / 2) % 6);
        int rc = baton_lock_try_acquire(l, 0, 30000);
        th_proxy_cut_after(p, TH_DOWN, -1);
        if (rc == BATON_ECONN) {
            econn++;
            cr_assert(eq(i64, th_cmd_int(r, "EXISTS mx-cycles"), 0),
                      "cycle %d: an acquire that failed holds the lock", i);
            continue;
        }
        cr_assert(eq(int, rc, BATON_OK), "cycle %d: %s", i, baton_client_errmsg(c));
        if (i % 2 == 1)
            th_proxy_cut_after(p, TH_DOWN, (i / 2) % 5);
        rc = baton_lock_release(l);
        th_proxy_cut_after(p, TH_DOWN, -1);
        if (rc == BATON_ECONN) { /* it failed cleanly: the hold is still there, once */
            econn++;
            rc = baton_lock_release(l);
        }
        cr_assert(eq(int, rc, BATON_OK), "cycle %d: %s", i, baton_client_errmsg(c));
        cr_assert(eq(i64, th_cmd_int(r, "EXISTS mx-cycles"), 0), "cycle %d: still held", i);
    }
    int64_t took = th_ms() - t0;
    int fds1 = count_dir("/proc/self/fd"), threads1 = count_dir("/proc/self/task");
    long heap1 = heap_kb();
    fprintf(stderr,
            "matrix: %d cut cycles in %lld ms, %ld connections, %d clean ECONN; fds %d -> %d, "
            "threads %d -> %d, heap %ld -> %ld KB\n",
            CYCLES, (long long)took, th_proxy_accepted(p), econn, fds0, fds1, threads0, threads1,
            heap0, heap1);
    cr_assert(lt(int, econn, CYCLES / 4), "most cuts should be resolved, not failed");
    cr_assert(le(int, fds1, fds0 + 2), "fds grew from %d to %d", fds0, fds1);
    cr_assert(eq(int, threads1, threads0), "threads went from %d to %d", threads0, threads1);
    cr_assert(le(i64, heap1 - heap0, 256), "the heap grew by %ld KB", heap1 - heap0);
    cr_assert(ge(long, th_proxy_accepted(p), CYCLES / 2), "the cuts did not cost connections");
    baton_lock_close(l);
    baton_client_close(c);
    redisFree(r);
    th_proxy_stop(p);
    th_server_stop(&s);
}

/* ------------------------------------------------ a semaphore under cuts ------------ */

enum { SEM_PERMITS = 2, SEM_THREADS = 4, SEM_RUN_MS = 4000, SEM_CUT_EVERY_MS = 100 };

/* Resets every connection through p every every_ms for run_ms; returns how many times. */
static int cut_every(th_proxy *p, int every_ms, int64_t run_ms)
{
    int cuts = 0;
    for (int64_t end = th_ms() + run_ms; th_ms() < end; cuts++) {
        th_sleep_ms(every_ms);
        th_proxy_cut(p);
    }
    return cuts;
}

typedef struct sem_worker {
    baton_semaphore *s;
    th_ilog *log;
    atomic_int *stop;
    int who;
    int ok, econn, timedout, errors; /* acquires: taken, ECONN, ETIMEDOUT, other */
    int release_failed;
} sem_worker;

static void *sem_work(void *arg)
{
    sem_worker *w = arg;
    while (!atomic_load(w->stop)) {
        int rc = baton_semaphore_try_acquire(w->s, 1, 1000);
        if (rc == BATON_ECONN) { /* cut: the permit may or may not have been taken */
            w->econn++;
            continue;
        }
        if (rc == BATON_ETIMEDOUT) {
            w->timedout++;
            continue;
        }
        if (rc != BATON_OK) {
            w->errors++;
            continue;
        }
        w->ok++;
        long slot = th_ilog_begin(w->log, w->who, 0);
        usleep(1000 + (unsigned)(rand() % 3000));
        th_ilog_end(w->log, slot);
        /* a release is counted once even when cut; ECONN means no attempt was answered */
        if (baton_semaphore_release(w->s, 1) != BATON_OK)
            w->release_failed++;
    }
    return NULL;
}

Test(matrix, a_semaphore_under_cuts_never_exceeds_its_permits)
{
    th_server s;
    th_server_start(&s, NULL);
    th_proxy *p = th_proxy_start(s.port);
    redisContext *r = th_redis_port(s.port);
    th_ilog *log = th_ilog_new(100000);
    atomic_int stop = 0;
    baton_client *cs[SEM_THREADS];
    sem_worker w[SEM_THREADS];
    pthread_t t[SEM_THREADS];
    for (int i = 0; i < SEM_THREADS; i++) {
        cs[i] = client_on(th_proxy_url(p), 1000, 30000);
        w[i] = (sem_worker){.log = log, .stop = &stop, .who = i};
        cr_assert(eq(int, baton_semaphore_open(cs[i], "mx-sem", &w[i].s), BATON_OK));
    }
    bool set = false;
    cr_assert(eq(int, baton_semaphore_try_set_permits(w[0].s, SEM_PERMITS, &set), BATON_OK));
    for (int i = 0; i < SEM_THREADS; i++)
        pthread_create(&t[i], NULL, sem_work, &w[i]);
    /* every connection, commands and subscribers, reset again and again while they work */
    int cuts = cut_every(p, SEM_CUT_EVERY_MS, SEM_RUN_MS);
    atomic_store(&stop, 1);
    int ok = 0, econn = 0, timedout = 0, errors = 0, release_failed = 0;
    for (int i = 0; i < SEM_THREADS; i++) {
        pthread_join(t[i], NULL);
        ok += w[i].ok;
        econn += w[i].econn;
        timedout += w[i].timedout;
        errors += w[i].errors;
        release_failed += w[i].release_failed;
    }
    long long left = th_cmd_int(r, "GET mx-sem");
    fprintf(stderr,
            "matrix: semaphore of %d under %d cuts: %d acquired, %d ECONN, %d timed out, "
            "%d other errors, %d releases failed, deepest %d, %lld permits left\n",
            SEM_PERMITS, cuts, ok, econn, timedout, errors, release_failed, th_ilog_max_depth(log),
            left);
    cr_assert(eq(int, th_ilog_violations(log, SEM_PERMITS), 0), "more holders than permits");
    cr_assert(le(int, th_ilog_max_depth(log), SEM_PERMITS));
    cr_assert(eq(int, errors, 0));
    cr_assert(gt(int, ok, 0), "nothing was ever acquired");
    /* never more permits than there were; fewer only by calls that failed with ECONN (an
     * acquire or release re-sends its request with the same id, up to 3 attempts, so only
     * a call none of whose attempts was answered leaves its outcome unknown) */
    cr_assert(le(i64, left, SEM_PERMITS));
    cr_assert(ge(i64, left + econn + release_failed, SEM_PERMITS), "permits vanished");
    for (int i = 0; i < SEM_THREADS; i++) {
        baton_semaphore_close(w[i].s);
        baton_client_close(cs[i]);
    }
    th_ilog_free(log);
    redisFree(r);
    th_proxy_stop(p);
    th_server_stop(&s);
}

/* ------------------------------------------------ cut acquires leave no orphan ------ */

Test(matrix, acquires_cut_either_way_leave_no_orphan_renewal)
{
    enum { LEASE = 1500 };
    th_server s;
    th_server_start(&s, NULL);
    th_proxy *p = th_proxy_start(s.port);
    baton_client *c = client_on(th_proxy_url(p), 1000, LEASE);
    redisContext *r = th_redis_port(s.port);
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(c, "mx-orphan", &l), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(l, 0, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(int, baton_lock_release(l), BATON_OK)); /* the scripts are loaded */
    int ok = 0, failed = 0;
    /* the request cut after n bytes (it never runs, or runs whole), or its reply */
    static const struct {
        th_dir dir;
        long n;
    } cuts[] = {{TH_UP, 0},   {TH_UP, 1},   {TH_UP, 20},  {TH_UP, 60},  {TH_UP, 120},
                {TH_DOWN, 0}, {TH_DOWN, 1}, {TH_DOWN, 2}, {TH_DOWN, 3}, {TH_DOWN, 4}};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        th_proxy_cut_after(p, cuts[i].dir, cuts[i].n);
        int rc = baton_lock_try_acquire(l, 0, BATON_LEASE_WATCHDOG);
        th_proxy_cut_after(p, cuts[i].dir, -1);
        int64_t count = -1;
        cr_assert(eq(int, baton_lock_hold_count(l, &count), BATON_OK));
        if (rc == BATON_ECONN) { /* failed cleanly: nothing held */
            failed++;
            cr_assert(eq(i64, count, 0), "cut %zu: failed, yet holds", i);
            cr_assert(eq(i64, th_cmd_int(r, "EXISTS mx-orphan"), 0));
            continue;
        }
        cr_assert(eq(int, rc, BATON_OK), "cut %zu: %s", i, baton_client_errmsg(c));
        ok++;
        cr_assert(eq(i64, count, 1), "cut %zu", i);
        cr_assert(eq(int, baton_lock_release(l), BATON_OK));
        cr_assert(eq(i64, th_cmd_int(r, "EXISTS mx-orphan"), 0), "cut %zu: one release", i);
    }
    /* nothing held: no renewal is sent for two periods, and nothing comes back */
    freeReplyObject(th_cmd(r, "CONFIG RESETSTAT"));
    th_sleep_ms(2 * LEASE / 3 + 200);
    fprintf(stderr, "matrix: cut acquires: %d resolved, %d failed cleanly; %lld scripts after\n",
            ok, failed, th_cmdstat(r, "evalsha") + th_cmdstat(r, "eval"));
    cr_assert(eq(i64, th_cmdstat(r, "evalsha") + th_cmdstat(r, "eval"), 0), "an orphan renewal");
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS mx-orphan"), 0));
    baton_lock_close(l);
    baton_client_close(c);
    redisFree(r);
    th_proxy_stop(p);
    th_server_stop(&s);
}

/* An acquire's reply cut at every byte, and its request cut at every byte: each call
 * takes its permit exactly once (the re-sent request finds its request latch and answers
 * "taken"), returns BATON_OK within its bound, and one release gives it back. Before the
 * request id, a cut reply was BATON_ECONN with the permit taken for good. */
Test(matrix, a_semaphore_acquire_cut_at_every_byte_takes_once)
{
    enum { CMD = 1000, CONNECT = 1000, PERMITS = 3 };
    th_server s;
    th_server_start(&s, NULL);
    th_proxy *p = th_proxy_start(s.port);
    redisContext *r = th_redis_port(s.port);
    baton_client *c = client_on(th_proxy_url(p), CMD, 30000);
    baton_semaphore *sem;
    cr_assert(eq(int, baton_semaphore_open(c, "mx-sem-cut", &sem), BATON_OK));
    cr_assert(eq(int, baton_semaphore_try_set_permits(sem, PERMITS, NULL), BATON_OK));
    /* once without a fault: the script is cached, the connection pooled */
    cr_assert(eq(int, baton_semaphore_try_acquire(sem, 1, 0), BATON_OK));
    cr_assert(eq(int, baton_semaphore_release(sem, 1), BATON_OK));
    /* the reply is "*2\r\n:1\r\n:2\r\n" (12 bytes); the request, EVALSHA with the
     * semaphore, the request latch, the count and the latch's life, is longer: cut it at
     * every byte up to 200 (past its end the cut falls on the next request, the release,
     * which counts once as well) */
    int64_t slowest = 0;
    int cases = 0;
    for (int dir = TH_DOWN; dir >= TH_UP; dir--) {
        long bytes = dir == TH_DOWN ? 12 : 200;
        for (long n = 0; n < bytes; n++, cases++) {
            th_proxy_cut_after(p, (th_dir)dir, n);
            int rc = 0;
            int64_t took =
                WITHIN(3 * (CMD + CONNECT) + 1000, rc, baton_semaphore_try_acquire(sem, 1, 0));
            slowest = took > slowest ? took : slowest;
            cr_assert(eq(int, rc, BATON_OK), "%s cut after %ld: %s: %s",
                      dir == TH_DOWN ? "reply" : "request", n, baton_err_name(rc),
                      baton_client_errmsg(c));
            cr_assert(eq(i64, th_cmd_int(r, "GET mx-sem-cut"), PERMITS - 1),
                      "%s cut after %ld: taken twice or not at all",
                      dir == TH_DOWN ? "reply" : "request", n);
            cr_assert(eq(int, baton_semaphore_release(sem, 1), BATON_OK), "%s",
                      baton_client_errmsg(c));
            cr_assert(eq(i64, th_cmd_int(r, "GET mx-sem-cut"), PERMITS));
            th_proxy_heal(p); /* a cut that fell past the request is not left pending */
        }
    }
    fprintf(stderr,
            "matrix: semaphore acquire cut in %d places (reply 0-11, request 0-199 bytes): "
            "every one took 1 permit once, slowest call %lld ms, %ld connections\n",
            cases, (long long)slowest, th_proxy_accepted(p));
    baton_semaphore_close(sem);
    baton_client_close(c);
    redisFree(r);
    th_proxy_stop(p);
    th_server_stop(&s);
}

/* ------------------------------------------------ Redlock over proxied masters ------ */

/* Three independent servers, each behind its own fault proxy, and a quorum lock over one
 * member on each (a client per server). Members are tried one after the other, so a silent
 * member costs its client's timeouts: a command timeout, then the resolution of the lost
 * reply on a new connection (connect + command), that is 2 x (command + connect). */
enum { RL_CMD = 300, RL_CONNECT = 300, RL_PER_FAULT = 2 * (RL_CMD + RL_CONNECT) };

typedef struct rl_rig {
    th_server s[3];
    th_proxy *p[3];
    redisContext *direct[3];
} rl_rig;

static void rl_up(rl_rig *g)
{
    for (int i = 0; i < 3; i++) {
        th_server_start(&g->s[i], NULL);
        g->p[i] = th_proxy_start(g->s[i].port);
        g->direct[i] = th_redis_port(g->s[i].port);
    }
}

static void rl_down(rl_rig *g)
{
    for (int i = 0; i < 3; i++) {
        redisFree(g->direct[i]);
        th_proxy_stop(g->p[i]);
        th_server_stop(&g->s[i]);
    }
}

/* One member lock `name` per server, each on its own client through the proxy, and the
 * quorum lock over them. */
typedef struct rl_lock {
    baton_client *c[3];
    baton_lock *m[3];
    baton_lock *g;
} rl_lock;

static void rl_open(rl_rig *g, rl_lock *q, const char *name)
{
    for (int i = 0; i < 3; i++) {
        baton_options o;
        baton_options_init(&o);
        o.url = th_proxy_url(g->p[i]);
        o.connect_timeout_ms = RL_CONNECT;
        o.command_timeout_ms = RL_CMD;
        cr_assert(eq(int, baton_client_open(&o, &q->c[i]), BATON_OK), "%s", baton_open_errmsg());
        cr_assert(eq(int, baton_lock_open(q->c[i], name, &q->m[i]), BATON_OK));
    }
    cr_assert(eq(int, baton_redlock_open(q->m, 3, &q->g), BATON_OK));
}

static void rl_close(rl_lock *q)
{
    baton_lock_close(q->g);
    for (int i = 0; i < 3; i++) {
        baton_lock_close(q->m[i]);
        baton_client_close(q->c[i]);
    }
}

/* The holds on server i's member key `name`: the one owner's count, 0 when free. */
static long long rl_holds(rl_rig *g, int i, const char *name)
{
    redisReply *rep = th_cmd(g->direct[i], "HVALS %s", name);
    long long n = 0;
    cr_assert(le(sz, rep->elements, 1), "two owners on server %d", i);
    if (rep->elements == 1)
        n = atoll(rep->element[0]->str);
    freeReplyObject(rep);
    return n;
}

/* One master blackholed: the other two are a majority. With it, the second master's reply
 * cut at every byte: the cut acquire is resolved (asked again as the same owner), so the
 * quorum still holds, with one hold on each of the two. With the second master blackholed
 * as well: no majority, BATON_ECONN, the third's member rolled back. Every call within its
 * wait + one RL_PER_FAULT per silent or cut member + 1 s. */
Test(matrix, redlock_with_one_master_blackholed_and_another_cut_keeps_its_quorum)
{
    enum { WAIT = 1000, LEASE = 10000 };
    rl_rig g;
    rl_up(&g);
    rl_lock q;
    rl_open(&g, &q, "mx-rl");
    cr_assert(eq(int, baton_lock_try_acquire(q.g, 0, LEASE), BATON_OK)); /* scripts cached */
    cr_assert(eq(int, baton_lock_release(q.g), BATON_OK));

    th_proxy_blackhole(g.p[0], TH_UP, true);
    th_proxy_blackhole(g.p[0], TH_DOWN, true);
    int rc = 0;
    int64_t one_down =
        WITHIN(WAIT + RL_PER_FAULT + 1000, rc, baton_lock_try_acquire(q.g, WAIT, LEASE));
    cr_assert(eq(int, rc, BATON_OK), "%s", baton_client_errmsg(q.c[0]));
    cr_assert(eq(i64, rl_holds(&g, 0, "mx-rl"), 0));
    cr_assert(eq(i64, rl_holds(&g, 1, "mx-rl"), 1));
    cr_assert(eq(i64, rl_holds(&g, 2, "mx-rl"), 1));
    int64_t release_ms = WITHIN(2 * RL_PER_FAULT + 1000, rc, baton_lock_release(q.g));
    cr_assert(eq(int, rc, BATON_OK));
    cr_assert(eq(i64, rl_holds(&g, 1, "mx-rl") + rl_holds(&g, 2, "mx-rl"), 0));

    /* the reply of lock_acquire is "*2\r\n:1\r\n:<token>\r\n": 12 to 14 bytes here */
    int64_t slowest_cut = 0;
    for (long n = 0; n < 15; n++) {
        th_proxy_cut_after(g.p[1], TH_DOWN, n);
        int64_t took =
            WITHIN(WAIT + 2 * RL_PER_FAULT + 1000, rc, baton_lock_try_acquire(q.g, WAIT, LEASE));
        slowest_cut = took > slowest_cut ? took : slowest_cut;
        cr_assert(eq(int, rc, BATON_OK), "cut after %ld: %s", n, baton_err_name(rc));
        cr_assert(eq(i64, rl_holds(&g, 1, "mx-rl"), 1), "cut after %ld", n);
        cr_assert(eq(i64, rl_holds(&g, 2, "mx-rl"), 1), "cut after %ld", n);
        WITHIN(2 * RL_PER_FAULT + 1000, rc, baton_lock_release(q.g));
        cr_assert(eq(int, rc, BATON_OK), "cut after %ld: release %s", n, baton_err_name(rc));
        cr_assert(eq(i64, rl_holds(&g, 1, "mx-rl") + rl_holds(&g, 2, "mx-rl"), 0));
        th_proxy_cut_after(g.p[1], TH_DOWN, -1);
    }

    /* two of three silent: no majority, whatever the third granted is given back */
    th_proxy_blackhole(g.p[1], TH_UP, true);
    th_proxy_blackhole(g.p[1], TH_DOWN, true);
    int64_t two_down =
        WITHIN(WAIT + 2 * RL_PER_FAULT + 1000, rc, baton_lock_try_acquire(q.g, WAIT, LEASE));
    fprintf(stderr, "matrix: redlock, 2 of 3 silent -> %s: %s\n", baton_err_name(rc),
            baton_client_errmsg(q.c[0]));
    cr_assert(eq(int, rc, BATON_ECONN));
    cr_assert(eq(i64, rl_holds(&g, 2, "mx-rl"), 0), "the third member was not rolled back");
    cr_assert(eq(int, baton_lock_release(q.g), BATON_ENOTHELD), "a hold was recorded");

    /* healed: the quorum is taken at once */
    for (int i = 0; i < 3; i++)
        th_proxy_heal(g.p[i]);
    int64_t healed =
        WITHIN(WAIT + RL_PER_FAULT + 1000, rc, baton_lock_try_acquire(q.g, WAIT, LEASE));
    cr_assert(eq(int, rc, BATON_OK), "%s", baton_client_errmsg(q.c[0]));
    cr_assert(eq(int, baton_lock_release(q.g), BATON_OK));
    for (int i = 0; i < 3; i++)
        cr_assert(eq(i64, rl_holds(&g, i, "mx-rl"), 0));
    fprintf(stderr,
            "matrix: redlock: 1 of 3 blackholed: acquired in %lld ms, released in %lld ms; "
            "and the 2nd cut at every byte of its reply: slowest acquire %lld ms; 2 of 3 "
            "silent: ECONN in %lld ms; healed: %lld ms\n",
            (long long)one_down, (long long)release_ms, (long long)slowest_cut, (long long)two_down,
            (long long)healed);
    rl_close(&q);
    rl_down(&g);
}

/* Contention over the quorum with one master blackholed throughout and another's
 * connections cut every 150 ms: the non-atomic counter (on the third server) stays exact,
 * no two threads are ever inside at once, and every call returns within its bound. */
enum { RLC_THREADS = 3, RLC_RUN_MS = 6000, RLC_WAIT = 1500, RLC_LEASE = 5000 };

typedef struct rl_worker {
    rl_rig *g;
    rl_lock q; /* opened before the faults: a client connects when it opens */
    th_ilog *log;
    atomic_int *stop;
    int who;
    int sections, timedout, econn, other, release_failed;
    int64_t max_acquire_ms, max_release_ms;
} rl_worker;

static void *rl_work(void *arg)
{
    rl_worker *w = arg;
    rl_lock q = w->q;
    redisContext *r = th_redis_port(w->g->s[2].port);
    while (!atomic_load(w->stop)) {
        int64_t t0 = th_ms();
        int rc = baton_lock_try_acquire(q.g, RLC_WAIT, RLC_LEASE);
        int64_t took = th_ms() - t0;
        w->max_acquire_ms = took > w->max_acquire_ms ? took : w->max_acquire_ms;
        if (rc != BATON_OK) {
            if (rc == BATON_ETIMEDOUT)
                w->timedout++;
            else if (rc == BATON_ECONN)
                w->econn++;
            else
                w->other++;
            continue;
        }
        long slot = th_ilog_begin(w->log, w->who, 0);
        if (th_counter_incr(r, "mx-rlc-counter", 2000) >= 0)
            w->sections++;
        else
            w->other++;
        th_ilog_end(w->log, slot);
        t0 = th_ms();
        if (baton_lock_release(q.g) != BATON_OK)
            w->release_failed++;
        took = th_ms() - t0;
        w->max_release_ms = took > w->max_release_ms ? took : w->max_release_ms;
    }
    redisFree(r);
    return NULL;
}

Test(matrix, redlock_contended_with_a_master_blackholed_and_another_cut_stays_exact)
{
    rl_rig g;
    rl_up(&g);
    th_ilog *log = th_ilog_new(100000);
    atomic_int stop = 0;
    rl_worker w[RLC_THREADS];
    pthread_t t[RLC_THREADS];
    for (int i = 0; i < RLC_THREADS; i++) {
        w[i] = (rl_worker){.g = &g, .log = log, .stop = &stop, .who = i};
        rl_open(&g, &w[i].q, "mx-rlc");
    }
    th_proxy_blackhole(g.p[0], TH_UP, true);
    th_proxy_blackhole(g.p[0], TH_DOWN, true);
    for (int i = 0; i < RLC_THREADS; i++)
        pthread_create(&t[i], NULL, rl_work, &w[i]);
    int cuts = cut_every(g.p[1], 150, RLC_RUN_MS);
    atomic_store(&stop, 1);
    int sections = 0, timedout = 0, econn = 0, other = 0, release_failed = 0;
    int64_t max_acquire = 0, max_release = 0;
    for (int i = 0; i < RLC_THREADS; i++) {
        pthread_join(t[i], NULL);
        sections += w[i].sections;
        timedout += w[i].timedout;
        econn += w[i].econn;
        other += w[i].other;
        release_failed += w[i].release_failed;
        max_acquire = w[i].max_acquire_ms > max_acquire ? w[i].max_acquire_ms : max_acquire;
        max_release = w[i].max_release_ms > max_release ? w[i].max_release_ms : max_release;
        rl_close(&w[i].q);
    }
    long long counter = th_counter_get(g.direct[2], "mx-rlc-counter");
    fprintf(stderr,
            "matrix: redlock, 1 of 3 blackholed, 1 cut %d times: %d sections, counter %lld, "
            "%d timed out, %d ECONN, %d other, %d releases failed, overlaps %d, slowest "
            "acquire %lld ms, slowest release %lld ms\n",
            cuts, sections, counter, timedout, econn, other, release_failed,
            th_ilog_violations(log, 1), (long long)max_acquire, (long long)max_release);
    cr_assert(eq(int, th_ilog_violations(log, 1), 0), "two holders at once");
    cr_assert(eq(i64, counter, sections), "lost or extra increments");
    cr_assert(eq(int, other, 0));
    cr_assert(ge(int, sections, 3), "the quorum was hardly ever taken");
    /* an acquire: its wait, then one more round over the members (the silent one and the
     * cut one each cost up to RL_PER_FAULT), and 1 s; a release: its two members, each up
     * to 3 attempts (connect + command), and 1 s */
    cr_assert(le(i64, max_acquire, RLC_WAIT + 2 * RL_PER_FAULT + 1000));
    cr_assert(le(i64, max_release, 2 * 3 * (RL_CMD + RL_CONNECT) + 1000));
    th_ilog_free(log);
    rl_down(&g);
}

/* ------------------------------------------------ maxmemory with noeviction --------- */

/* Drops the memory limit below what the server uses: every write that may grow the data
 * set is refused from now on, and noeviction frees nothing. */
static void memory_full(redisContext *r)
{
    redisReply *info = th_cmd(r, "INFO memory");
    const char *used = strstr(info->str, "used_memory:");
    cr_assert(used != NULL);
    long long bytes = atoll(used + strlen("used_memory:"));
    freeReplyObject(info);
    freeReplyObject(th_cmd(r, "CONFIG SET maxmemory %lld", bytes / 2));
    redisReply *probe_set = redisCommand(r, "SET mx-oom-probe 1");
    cr_assert(probe_set && probe_set->type == REDIS_REPLY_ERROR, "a write was not refused");
    freeReplyObject(probe_set);
}

/* The release scripts that write (HINCRBY, SET of the request latch) declare
 * "#!lua flags=allow-oom" on Redis >= 7 (see cmake/embed_lua.cmake); renewal (PEXPIRE)
 * is allowed anyway. */
Test(matrix, under_noeviction_acquire_fails_clearly_and_renew_and_release_still_work)
{
    enum { LEASE = 1500, PERIOD = LEASE / 3 };
    th_server s;
    th_server_start(&s, "--maxmemory-policy noeviction");
    baton_client *c = client_on(url_of(s.port), 1000, LEASE);
    baton_lock *held, *other;
    th_lost_probe probe = {0};
    cr_assert(eq(int, baton_lock_open(c, "mx-oom-held", &held), BATON_OK));
    cr_assert(eq(int, baton_lock_open(c, "mx-oom-other", &other), BATON_OK));
    cr_assert(eq(int, baton_lock_set_lost_handler(held, th_lost_probe_fn, &probe), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(held, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(held, BATON_LEASE_WATCHDOG), BATON_OK)); /* 2 holds */
    redisContext *r = th_redis_port(s.port);
    memory_full(r);

    /* a new acquisition would grow the data set: refused, clearly */
    int rc = 0;
    WITHIN(1000 + 1000, rc, baton_lock_try_acquire(other, 0, 5000));
    fprintf(stderr, "matrix: noeviction: acquire -> %s: %s\n", baton_err_name(rc),
            baton_client_errmsg(c));
    cr_assert(eq(int, rc, BATON_ENOMEM));
    cr_assert(not(eq(ptr, strstr(baton_client_errmsg(c), "OOM"), NULL)), "%s",
              baton_client_errmsg(c));
    /* renewals only extend a key: the hold outlives two leases */
    th_sleep_ms(2 * LEASE + PERIOD);
    cr_assert(eq(int, atomic_load(&probe.calls), 0), "the hold was lost: renewals refused");
    cr_assert(gt(i64, th_cmd_int(r, "PTTL mx-oom-held"), 0));
    /* releases only shrink: both work, the second deletes the key */
    rc = baton_lock_release(held);
    fprintf(stderr, "matrix: noeviction: release -> %s: %s\n", baton_err_name(rc),
            baton_client_errmsg(c));
    cr_assert(eq(int, rc, BATON_OK));
    cr_assert(eq(int, baton_lock_release(held), BATON_OK), "%s", baton_client_errmsg(c));
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS mx-oom-held"), 0));
    redisFree(r);
    baton_lock_close(held);
    baton_lock_close(other);
    baton_client_close(c);
    th_server_stop(&s);
}

/* The same for the other primitives, with memory full after each took what it holds: a
 * fair lock (a new waiter is refused and leaves no place in the queue; the holder's two
 * releases work), a read-write lock (read and write releases), a semaphore (release and
 * drain), a latch (count_down to zero), a lock's force release, and a permit whose lease the
 * watchdog renews (ZADD: allow-oom) through two leases, then released. */
Test(matrix, under_noeviction_every_primitive_renews_and_releases)
{
    enum { LEASE = 1500, PERIOD = LEASE / 3 };
    th_server s;
    th_server_start(&s, "--maxmemory-policy noeviction");
    baton_client *c = client_on(url_of(s.port), 1000, LEASE);
    baton_lock *fair, *fair2, *plain;
    baton_rwlock *rw_r, *rw_w;
    baton_semaphore *sem;
    baton_latch *latch;
    baton_permits *pm;
    th_lost_probe fair_lost = {0}, read_lost = {0}, write_lost = {0};
    cr_assert(eq(int, baton_fairlock_open(c, "mx-oom-fair", &fair), BATON_OK));
    cr_assert(eq(int, baton_fairlock_open(c, "mx-oom-fair", &fair2), BATON_OK));
    cr_assert(eq(int, baton_lock_open(c, "mx-oom-plain", &plain), BATON_OK));
    cr_assert(eq(int, baton_rwlock_open(c, "mx-oom-rw-r", &rw_r), BATON_OK));
    cr_assert(eq(int, baton_rwlock_open(c, "mx-oom-rw-w", &rw_w), BATON_OK));
    cr_assert(eq(int, baton_semaphore_open(c, "mx-oom-sem", &sem), BATON_OK));
    cr_assert(eq(int, baton_latch_open(c, "mx-oom-latch", &latch), BATON_OK));
    cr_assert(eq(int, baton_permits_open(c, "mx-oom-permits", &pm), BATON_OK));
    baton_lock *rd = baton_rwlock_read(rw_r), *wr = baton_rwlock_write(rw_w);
    cr_assert(eq(int, baton_lock_set_lost_handler(fair, th_lost_probe_fn, &fair_lost), BATON_OK));
    cr_assert(eq(int, baton_lock_set_lost_handler(rd, th_lost_probe_fn, &read_lost), BATON_OK));
    cr_assert(eq(int, baton_lock_set_lost_handler(wr, th_lost_probe_fn, &write_lost), BATON_OK));
    int lost_fd = -1;
    cr_assert(eq(int, baton_permits_lost_fd(pm, &lost_fd), BATON_OK));

    cr_assert(eq(int, baton_lock_acquire(fair, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(fair, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(plain, 60000), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(rd, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(rd, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(wr, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(int, baton_semaphore_try_set_permits(sem, 5, NULL), BATON_OK));
    cr_assert(eq(int, baton_semaphore_acquire(sem, 3), BATON_OK));
    cr_assert(eq(int, baton_latch_try_set_count(latch, 2, NULL), BATON_OK));
    cr_assert(eq(int, baton_permits_try_set_permits(pm, 2, NULL), BATON_OK));
    char id[BATON_PERMIT_ID_SIZE];
    cr_assert(eq(int, baton_permits_acquire(pm, BATON_LEASE_WATCHDOG, id), BATON_OK));
    redisContext *r = th_redis_port(s.port);
    memory_full(r);

    /* a new fair waiter would grow the queue: refused, and no place is left behind */
    int rc = 0;
    WITHIN(2 * (1000 + 1000), rc, baton_lock_try_acquire(fair2, 300, 5000));
    fprintf(stderr, "matrix: noeviction: fair waiter -> %s: %s\n", baton_err_name(rc),
            baton_client_errmsg(c));
    cr_assert(eq(int, rc, BATON_ENOMEM));
    cr_assert(eq(i64, th_cmd_int(r, "LLEN redisson_lock_queue:{mx-oom-fair}"), 0));
    cr_assert(eq(i64, th_cmd_int(r, "ZCARD redisson_lock_timeout:{mx-oom-fair}"), 0));

    /* two leases: the watchdog renews every hold and the permit */
    th_sleep_ms(2 * LEASE + PERIOD);
    cr_assert(eq(int, atomic_load(&fair_lost.calls), 0), "fair hold lost");
    cr_assert(eq(int, atomic_load(&read_lost.calls), 0), "read hold lost");
    cr_assert(eq(int, atomic_load(&write_lost.calls), 0), "write hold lost");
    cr_assert(eq(i64, wait_readable(lost_fd, 0), -1), "the permit was reported lost");
    cr_assert(gt(i64, th_cmd_int(r, "PTTL mx-oom-fair"), 0));
    cr_assert(gt(i64, th_cmd_int(r, "PTTL mx-oom-rw-r"), 0));
    cr_assert(gt(i64, th_cmd_int(r, "PTTL mx-oom-rw-w"), 0));

    /* every release and count-down works */
    cr_assert(eq(int, baton_lock_release(fair), BATON_OK), "%s", baton_client_errmsg(c));
    cr_assert(eq(int, baton_lock_release(fair), BATON_OK), "%s", baton_client_errmsg(c));
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS mx-oom-fair"), 0));
    cr_assert(eq(int, baton_lock_release(rd), BATON_OK), "%s", baton_client_errmsg(c));
    cr_assert(eq(int, baton_lock_release(rd), BATON_OK), "%s", baton_client_errmsg(c));
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS mx-oom-rw-r"), 0));
    cr_assert(eq(int, baton_lock_release(wr), BATON_OK), "%s", baton_client_errmsg(c));
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS mx-oom-rw-w"), 0));
    bool was = false;
    cr_assert(eq(int, baton_lock_force_release(plain, &was), BATON_OK), "%s",
              baton_client_errmsg(c));
    cr_assert(was);
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS mx-oom-plain"), 0));
    cr_assert(eq(int, baton_semaphore_release(sem, 3), BATON_OK), "%s", baton_client_errmsg(c));
    cr_assert(eq(i64, th_cmd_int(r, "GET mx-oom-sem"), 5));
    int64_t drained = 0;
    cr_assert(eq(int, baton_semaphore_drain(sem, &drained), BATON_OK), "%s",
              baton_client_errmsg(c));
    cr_assert(eq(i64, drained, 5));
    cr_assert(eq(int, baton_latch_count_down(latch), BATON_OK), "%s", baton_client_errmsg(c));
    cr_assert(eq(int, baton_latch_count_down(latch), BATON_OK), "%s", baton_client_errmsg(c));
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS mx-oom-latch"), 0));
    cr_assert(eq(int, baton_permits_release(pm, id), BATON_OK), "%s", baton_client_errmsg(c));
    cr_assert(eq(i64, th_cmd_int(r, "GET mx-oom-permits"), 2));
    cr_assert(eq(i64, th_cmd_int(r, "ZCARD {mx-oom-permits}:timeout"), 0));
    fprintf(stderr, "matrix: noeviction: fair, rwlock, semaphore, latch and permit released; "
                    "holds renewed through two leases\n");
    redisFree(r);
    baton_permits_close(pm);
    baton_latch_close(latch);
    baton_semaphore_close(sem);
    baton_rwlock_close(rw_r);
    baton_rwlock_close(rw_w);
    baton_lock_close(plain);
    baton_lock_close(fair2);
    baton_lock_close(fair);
    baton_client_close(c);
    th_server_stop(&s);
}
