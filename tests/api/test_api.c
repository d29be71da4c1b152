/*
 * The public API's edges against a real redis-server, as a program written from the
 * headers would meet them: misuse that must never crash (a call on a closed handle, a
 * handle used after its client was closed, a double close), the detail of every failing
 * call, and the argument checks.
 */
#define _GNU_SOURCE
#include "helper.h"

#include "new_assert.h"
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

TestSuite(misuse, .timeout = 60);

/* ---------------------------------------------------------------- helpers ------------ */

/* Runs fn in a child whose stderr is captured into out (len bytes); returns the child's
 * status as th_wait does (128 + signal for a signal). */
static int run_captured(void (*fn)(void), char *out, size_t len)
{
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        fn();
        _exit(0);
    }
    close(fds[1]);
    size_t n = 0;
    ssize_t r;
    while (n + 1 < len && (r = read(fds[0], out + n, len - 1 - n)) > 0)
        n += (size_t)r;
    out[n] = '\0';
    close(fds[0]);
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
}

/* ------------------------------------------------ a handle after its client's close --- */

Test(misuse, lock_used_after_its_client_was_closed_returns_eclosed)
{
    baton_client *c = th_client(NULL);
    baton_lock *l = NULL;
    char *name = th_name("api-orphan");
    cr_assert_eq(baton_lock_open(c, name, &l), BATON_OK);
    cr_assert_eq(baton_lock_acquire(l, BATON_LEASE_WATCHDOG), BATON_OK);
    baton_client_close(c);

    cr_assert_eq(baton_lock_acquire(l, 1000), BATON_ECLOSED);
    cr_assert_eq(baton_lock_release(l), BATON_ECLOSED);
    bool b;
    cr_assert_eq(baton_lock_is_locked(l, &b), BATON_ECLOSED);
    int64_t t;
    cr_assert_eq(baton_lock_fencing_token(l, &t), BATON_ECLOSED);
    cr_assert_eq(baton_lock_cancel_waits(l), BATON_ECLOSED);
    cr_assert_str_eq(baton_lock_name(l), "");
    /* the detail, one call away, through the closed client's pointer (never read) */
    const char *msg = baton_client_errmsg(c);
    cr_assert(strstr(msg, "lock ") == msg, "%s", msg);
    cr_assert(strstr(msg, name) && strstr(msg, "its client was closed"), "%s", msg);
    baton_lock_close(l); /* frees what the client's close left */
    free(name);
}

Test(misuse, every_kind_used_after_its_client_was_closed_returns_eclosed)
{
    baton_client *c = th_client(NULL);
    char *name = th_name("api-kinds");
    char nm[256];
    baton_semaphore *s;
    baton_permits *p;
    baton_latch *la;
    baton_barrier *ba;
    baton_election *e;
    baton_rwlock *rw;
    baton_lock *m1, *m2, *g;
    snprintf(nm, sizeof nm, "%s-s", name);
    cr_assert_eq(baton_semaphore_open(c, nm, &s), BATON_OK);
    cr_assert_eq(baton_semaphore_add_permits(s, 2), BATON_OK);
    cr_assert_eq(baton_semaphore_acquire(s, 1), BATON_OK);
    snprintf(nm, sizeof nm, "%s-p", name);
    cr_assert_eq(baton_permits_open(c, nm, &p), BATON_OK);
    bool set;
    cr_assert_eq(baton_permits_try_set_permits(p, 2, &set), BATON_OK);
    char id[BATON_PERMIT_ID_SIZE];
    cr_assert_eq(baton_permits_acquire(p, BATON_LEASE_WATCHDOG, id), BATON_OK);
    snprintf(nm, sizeof nm, "%s-l", name);
    cr_assert_eq(baton_latch_open(c, nm, &la), BATON_OK);
    cr_assert_eq(baton_latch_try_set_count(la, 3, &set), BATON_OK);
    snprintf(nm, sizeof nm, "%s-b", name);
    cr_assert_eq(baton_barrier_open(c, nm, 2, &ba), BATON_OK);
    snprintf(nm, sizeof nm, "%s-e", name);
    cr_assert_eq(baton_election_open(c, nm, &e), BATON_OK);
    cr_assert_eq(baton_election_campaign(e, "me", 0, BATON_LEASE_WATCHDOG), BATON_OK);
    int fd;
    cr_assert_eq(baton_election_observe_fd(e, &fd), BATON_OK); /* its watcher runs */
    snprintf(nm, sizeof nm, "%s-rw", name);
    cr_assert_eq(baton_rwlock_open(c, nm, &rw), BATON_OK);
    cr_assert_eq(baton_lock_acquire(baton_rwlock_read(rw), BATON_LEASE_WATCHDOG), BATON_OK);
    snprintf(nm, sizeof nm, "%s-m1", name);
    cr_assert_eq(baton_lock_open(c, nm, &m1), BATON_OK);
    snprintf(nm, sizeof nm, "%s-m2", name);
    cr_assert_eq(baton_lock_open(c, nm, &m2), BATON_OK);
    baton_lock *ms[] = {m1, m2};
    cr_assert_eq(baton_multilock_open(ms, 2, &g), BATON_OK);
    cr_assert_eq(baton_lock_acquire(g, BATON_LEASE_WATCHDOG), BATON_OK);

    baton_client_close(c);

    cr_assert_eq(baton_semaphore_release(s, 1), BATON_ECLOSED);
    cr_assert_eq(baton_semaphore_try_acquire(s, 1, 0), BATON_ECLOSED);
    cr_assert_eq(baton_permits_release(p, id), BATON_ECLOSED);
    cr_assert_eq(baton_permits_try_acquire(p, 0, 1000, id), BATON_ECLOSED);
    cr_assert_eq(baton_latch_count_down(la), BATON_ECLOSED);
    cr_assert_eq(baton_latch_await(la, 10), BATON_ECLOSED);
    cr_assert_eq(baton_barrier_await(ba, 10, NULL, NULL), BATON_ECLOSED);
    cr_assert_eq(baton_election_resign(e), BATON_ECLOSED);
    cr_assert_eq(baton_election_campaign(e, "me", 0, BATON_LEASE_WATCHDOG), BATON_ECLOSED);
    baton_election_event ev;
    cr_assert_eq(baton_election_observe_next(e, 10, &ev), BATON_ECLOSED);
    int64_t term;
    cr_assert_eq(baton_election_term(e, &term), BATON_ECLOSED);
    cr_assert_eq(baton_lock_release(baton_rwlock_read(rw)), BATON_ECLOSED);
    cr_assert_eq(baton_lock_release(g), BATON_ECLOSED);
    cr_assert_eq(baton_lock_release(m1), BATON_ECLOSED);
    const char *msg = baton_client_errmsg(c);
    cr_assert(strstr(msg, "its client was closed") != NULL, "%s", msg);

    /* closed in the order a careless program would: the group after its members */
    baton_semaphore_close(s);
    baton_permits_close(p);
    baton_latch_close(la);
    baton_barrier_close(ba);
    baton_election_close(e);
    baton_rwlock_close(rw);
    baton_lock_close(m1);
    baton_lock_close(m2);
    baton_lock_close(g);
    free(name);
}

/* What a worker that reconnects does: its client closed and opened again while a thread
 * still has the old election (the election workload under kill -9 + restart aborted with
 * "pthread_mutex_lock failed: Invalid argument"). */
Test(misuse, election_outlives_its_client_across_a_reopen)
{
    char *name = th_name("api-elect");
    for (int round = 0; round < 3; round++) {
        baton_client *c = th_client(NULL);
        baton_election *e;
        cr_assert_eq(baton_election_open(c, name, &e), BATON_OK);
        cr_assert_eq(baton_election_campaign(e, "w", 2000, BATON_LEASE_WATCHDOG), BATON_OK);
        int fd;
        cr_assert_eq(baton_election_observe_fd(e, &fd), BATON_OK);
        baton_client_close(c); /* the leadership's hold is forgotten, not renewed */
        cr_assert_eq(baton_election_resign(e), BATON_ECLOSED);
        baton_leader ld;
        cr_assert_eq(baton_election_leader(e, &ld), BATON_ECLOSED);
        baton_election_close(e);
        /* the next round's campaign waits out the lease the old client left (30 s) unless
         * it is deleted, as an operator would after a crash */
        redisContext *r = th_redis();
        freeReplyObject(th_cmd(r, "DEL %s", name));
        redisFree(r);
    }
    free(name);
}

typedef struct observing {
    baton_election *e;
    int rc;
    int64_t done_ms;
} observing;

static void *observe_forever(void *arg)
{
    observing *o = arg;
    baton_election_event ev;
    o->rc = baton_election_observe_next(o->e, BATON_WAIT_FOREVER, &ev);
    o->done_ms = th_ms();
    return NULL;
}

/* A thread blocked in observe_next (the watcher's queue, not a core wait) while another
 * thread closes the client: it returns an error at once, and the handle's calls after that
 * return BATON_ECLOSED; nothing crashes (ASan build: nothing read after it was freed). */
Test(misuse, an_observer_blocked_while_its_client_closes_returns)
{
    char *name = th_name("api-observe");
    baton_client *c = th_client(NULL);
    baton_election *e;
    cr_assert_eq(baton_election_open(c, name, &e), BATON_OK);
    int fd;
    cr_assert_eq(baton_election_observe_fd(e, &fd), BATON_OK); /* the queue */
    baton_election_event ev;
    while (baton_election_observe_next(e, 200, &ev) == BATON_OK) /* the first look's */
        ;
    observing o = {.e = e, .rc = 1};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, observe_forever, &o), 0);
    th_sleep_ms(200);
    int64_t closed = th_ms();
    baton_client_close(c);
    pthread_join(t, NULL);
    cr_assert(o.rc == BATON_ECANCELED || o.rc == BATON_ECLOSED, "observe_next: %d", o.rc);
    cr_assert(le(i64, o.done_ms - closed, 1000), "returned %lld ms after the close",
              (long long)(o.done_ms - closed));
    cr_assert_eq(baton_election_observe_next(e, 0, &ev), BATON_ECLOSED);
    baton_election_close(e);
    free(name);
}

/* A Redlock over members of three clients, one of which is closed: the group goes on with
 * the members left (a majority: 2 of 3 acquire, release), the closed member counted as not
 * taken; nothing is read of the closed client (ASan build). */
Test(misuse, a_redlock_with_a_members_client_closed_goes_on_without_it)
{
    char *name = th_name("api-redlock");
    baton_client *c[3];
    baton_lock *m[3];
    for (int i = 0; i < 3; i++) {
        c[i] = th_client(NULL);
        char member[300];
        snprintf(member, sizeof member, "%s-%d", name, i);
        cr_assert_eq(baton_lock_open(c[i], member, &m[i]), BATON_OK);
    }
    baton_lock *g;
    cr_assert_eq(baton_redlock_open(m, 3, &g), BATON_OK);
    cr_assert_eq(baton_lock_try_acquire(g, 1000, 5000), BATON_OK);
    cr_assert_eq(baton_lock_release(g), BATON_OK);
    baton_client_close(c[1]); /* its member is orphaned */
    cr_assert_eq(baton_lock_try_acquire(m[1], 0, 5000), BATON_ECLOSED);
    int rc = baton_lock_try_acquire(g, 1000, 5000);
    cr_assert_eq(rc, BATON_OK, "the majority of 2 members left: %d", rc);
    bool held0 = false, held2 = false;
    cr_assert_eq(baton_lock_is_held_by_current_thread(m[0], &held0), BATON_OK);
    cr_assert_eq(baton_lock_is_held_by_current_thread(m[2], &held2), BATON_OK);
    cr_assert(held0 && held2, "%s", "the two members left are taken");
    cr_assert_eq(baton_lock_release(g), BATON_OK);
    cr_assert_eq(baton_lock_is_held_by_current_thread(m[0], &held0), BATON_OK);
    cr_assert(not(held0), "released");
    baton_lock_close(g);
    for (int i = 0; i < 3; i++)
        baton_lock_close(m[i]);
    baton_client_close(c[0]);
    baton_client_close(c[2]);
    free(name);
}

/* ------------------------------------------------------------ closed handles --------- */

Test(misuse, call_on_a_closed_handle_returns_eclosed)
{
    baton_client *c = th_client(NULL);
    baton_lock *l;
    baton_semaphore *s;
    cr_assert_eq(baton_lock_open(c, th_tmpname("api-closed"), &l), BATON_OK);
    cr_assert_eq(baton_semaphore_open(c, th_tmpname("api-closed-s"), &s), BATON_OK);
    baton_lock_close(l);
    baton_semaphore_close(s);
    cr_assert_eq(baton_lock_acquire(l, 1000), BATON_ECLOSED);
    cr_assert_eq(baton_lock_release(l), BATON_ECLOSED);
    cr_assert_eq(baton_semaphore_release(s, 1), BATON_ECLOSED);
    cr_assert(strstr(baton_client_errmsg(c), "not an open handle") != NULL, "%s",
              baton_client_errmsg(c));
    /* the client still works */
    cr_assert_eq(baton_lock_open(c, th_tmpname("api-closed2"), &l), BATON_OK);
    cr_assert_eq(baton_lock_acquire(l, 1000), BATON_OK);
    cr_assert_str_eq(baton_client_errmsg(c), "");
    cr_assert_eq(baton_lock_release(l), BATON_OK);
    baton_lock_close(l);
    baton_client_close(c);
}

Test(misuse, call_on_a_closed_client_returns_eclosed)
{
    baton_client *c = th_client(NULL);
    baton_client_close(c);
    baton_lock *l = (baton_lock *)&l;
    cr_assert_eq(baton_lock_open(c, "x", &l), BATON_ECLOSED);
    cr_assert_null(l);
    baton_semaphore *s;
    cr_assert_eq(baton_semaphore_open(c, "x", &s), BATON_ECLOSED);
    const char *msg = baton_client_errmsg(c);
    cr_assert(strstr(msg, "client ") == msg && strstr(msg, "not an open client"), "%s", msg);
}

/* --------------------------------------------------------------- double closes ------- */

static void close_client_twice(void)
{
    baton_client *c = th_client(NULL);
    baton_client_close(c);
    baton_client_close(c);
}

static void close_lock_twice(void)
{
    baton_client *c = th_client(NULL);
    baton_lock *l;
    if (baton_lock_open(c, "api-twice", &l) != BATON_OK)
        _exit(3);
    baton_lock_close(l);
    baton_lock_close(l);
}

static void close_semaphore_twice(void)
{
    baton_client *c = th_client(NULL);
    baton_semaphore *s;
    if (baton_semaphore_open(c, "api-twice", &s) != BATON_OK)
        _exit(3);
    baton_semaphore_close(s);
    baton_semaphore_close(s);
}

static void close_rwlock_twice(void)
{
    baton_client *c = th_client(NULL);
    baton_rwlock *rw;
    if (baton_rwlock_open(c, "api-twice-rw", &rw) != BATON_OK)
        _exit(3);
    baton_rwlock_close(rw);
    baton_rwlock_close(rw);
}

Test(misuse, a_double_close_aborts_naming_the_misuse)
{
    struct {
        void (*fn)(void);
        const char *says;
    } cases[] = {{close_client_twice, "baton_client_close("},
                 {close_lock_twice, "baton_lock_close("},
                 {close_semaphore_twice, "baton_semaphore_close("},
                 {close_rwlock_twice, "baton_rwlock_close("}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[1024];
        int st = run_captured(cases[i].fn, err, sizeof err);
        cr_assert_eq(st, 128 + SIGABRT, "case %zu: status %d, stderr: %s", i, st, err);
        cr_assert(strstr(err, cases[i].says) && strstr(err, "closed twice"), "case %zu: %s", i,
                  err);
    }
}

/* ------------------------------------------------------------------- errmsg ---------- */

TestSuite(errmsg, .timeout = 60);

/* The detail starts with the object and its name. */
static void starts_with(baton_client *c, const char *prefix)
{
    const char *msg = baton_client_errmsg(c);
    cr_assert(strncmp(msg, prefix, strlen(prefix)) == 0, "want \"%s...\", got \"%s\"", prefix, msg);
}

Test(errmsg, an_open_with_a_null_out_says_so_on_a_fresh_client_and_after_a_failure)
{
    for (int fresh = 1; fresh >= 0; fresh--) {
        baton_client *c = th_client(NULL);
        baton_lock *l;
        if (!fresh) /* the previous call's message must not stay */
            cr_assert_eq(baton_lock_open(c, "", &l), BATON_EINVAL);
        cr_assert_eq(baton_lock_open(c, "x", NULL), BATON_EINVAL);
        starts_with(c, "lock x: out is NULL");
        cr_assert_eq(baton_fairlock_open(c, "x", NULL), BATON_EINVAL);
        starts_with(c, "fair lock x: out is NULL");
        cr_assert_eq(baton_semaphore_open(c, "x", NULL), BATON_EINVAL);
        starts_with(c, "semaphore x: out is NULL");
        cr_assert_eq(baton_rwlock_open(c, "x", NULL), BATON_EINVAL);
        starts_with(c, "read-write lock x: out is NULL");
        cr_assert_eq(baton_election_open(c, "x", NULL), BATON_EINVAL);
        starts_with(c, "election x: out is NULL");
        baton_client_close(c);
    }
}

Test(errmsg, every_argument_refused_is_named_after_the_object_and_its_name)
{
    baton_client *c = th_client(NULL);
    baton_lock *l;
    baton_semaphore *s;
    baton_permits *p;
    baton_latch *la;
    baton_election *e;
    cr_assert_eq(baton_lock_open(c, "n1", &l), BATON_OK);
    cr_assert_eq(baton_semaphore_open(c, "n2", &s), BATON_OK);
    cr_assert_eq(baton_permits_open(c, "n3", &p), BATON_OK);
    cr_assert_eq(baton_latch_open(c, "n4", &la), BATON_OK);
    cr_assert_eq(baton_election_open(c, "n5", &e), BATON_OK);
    cr_assert_eq(baton_lock_try_acquire(l, -7, 1000), BATON_EINVAL);
    starts_with(c, "lock n1: wait_ms -7");
    cr_assert_eq(baton_lock_try_acquire(l, 0, -3), BATON_EINVAL);
    starts_with(c, "lock n1: lease_ms -3");
    cr_assert_eq(baton_lock_is_locked(l, NULL), BATON_EINVAL);
    starts_with(c, "lock n1: out is NULL");
    cr_assert_eq(baton_semaphore_try_acquire(s, 1, -7), BATON_EINVAL);
    starts_with(c, "semaphore n2: wait_ms -7");
    cr_assert_eq(baton_semaphore_available(s, NULL), BATON_EINVAL);
    starts_with(c, "semaphore n2: out is NULL");
    cr_assert_eq(baton_permits_try_acquire(p, 0, 1000, NULL), BATON_EINVAL);
    starts_with(c, "permits n3: id is NULL");
    char id[BATON_PERMIT_ID_SIZE];
    cr_assert_eq(baton_permits_try_acquire(p, -7, 1000, id), BATON_EINVAL);
    starts_with(c, "permits n3: wait_ms -7");
    cr_assert_eq(baton_permits_try_acquire(p, 0, -7, id), BATON_EINVAL);
    starts_with(c, "permits n3: lease_ms -7");
    cr_assert_eq(baton_latch_await(la, -7), BATON_EINVAL);
    starts_with(c, "latch n4: timeout_ms -7");
    cr_assert_eq(baton_latch_count(la, NULL), BATON_EINVAL);
    starts_with(c, "latch n4: out is NULL");
    baton_election_event ev;
    cr_assert_eq(baton_election_observe_next(e, -7, &ev), BATON_EINVAL);
    starts_with(c, "election n5: timeout_ms -7");
    cr_assert_eq(baton_election_term(e, NULL), BATON_EINVAL);
    starts_with(c, "election n5: ");
    /* and a call that succeeds clears it */
    bool b;
    cr_assert_eq(baton_lock_is_locked(l, &b), BATON_OK);
    cr_assert_str_eq(baton_client_errmsg(c), "");
    baton_lock_close(l);
    baton_semaphore_close(s);
    baton_permits_close(p);
    baton_latch_close(la);
    baton_election_close(e);
    baton_client_close(c);
}

Test(errmsg, wrongtype_names_the_key_not_the_script)
{
    baton_client *c = th_client(NULL);
    const char *name = th_tmpname("api-wrongtype");
    redisContext *r = th_redis();
    freeReplyObject(th_cmd(r, "SADD %s a", name));
    baton_lock *l;
    cr_assert_eq(baton_lock_open(c, name, &l), BATON_OK);
    cr_assert_eq(baton_lock_try_acquire(l, 0, 1000), BATON_EPROTO);
    const char *msg = baton_client_errmsg(c);
    cr_assert(strstr(msg, "WRONGTYPE") != NULL && strstr(msg, name) != NULL, "%s", msg);
    cr_assert(strstr(msg, "script: ") == NULL, "%s", msg); /* no SHA1 */
    baton_semaphore *s;
    cr_assert_eq(baton_semaphore_open(c, name, &s), BATON_OK);
    cr_assert_eq(baton_semaphore_release(s, 1), BATON_EPROTO);
    msg = baton_client_errmsg(c);
    cr_assert(strstr(msg, "WRONGTYPE") != NULL && strstr(msg, name) != NULL, "%s", msg);
    baton_semaphore_close(s);
    baton_lock_close(l);
    baton_client_close(c);
    redisFree(r);
}

/* ------------------------------------------------------------------- times ----------- */

TestSuite(times, .timeout = 60);

Test(times, wait_and_lease_constants_differ_and_swapped_ones_are_refused_naming_both)
{
    cr_assert_neq(BATON_WAIT_FOREVER, BATON_LEASE_WATCHDOG);
    baton_client *c = th_client(NULL);
    baton_lock *l;
    baton_permits *p;
    baton_election *e;
    cr_assert_eq(baton_lock_open(c, "t1", &l), BATON_OK);
    cr_assert_eq(baton_permits_open(c, "t2", &p), BATON_OK);
    cr_assert_eq(baton_election_open(c, "t3", &e), BATON_OK);
    /* acquire(l, lease, wait) written by mistake */
    cr_assert_eq(baton_lock_try_acquire(l, BATON_LEASE_WATCHDOG, BATON_WAIT_FOREVER), BATON_EINVAL);
    const char *msg = baton_client_errmsg(c);
    cr_assert(strstr(msg, "lock t1: wait_ms is BATON_LEASE_WATCHDOG and lease_ms is "
                          "BATON_WAIT_FOREVER") == msg,
              "%s", msg);
    cr_assert(strstr(msg, "swapped") != NULL, "%s", msg);
    cr_assert_eq(baton_lock_try_acquire(l, BATON_LEASE_WATCHDOG, 1000), BATON_EINVAL);
    cr_assert(strstr(baton_client_errmsg(c), "swapped") != NULL, "%s", baton_client_errmsg(c));
    char id[BATON_PERMIT_ID_SIZE];
    cr_assert_eq(baton_permits_try_acquire(p, BATON_LEASE_WATCHDOG, 1000, id), BATON_EINVAL);
    cr_assert(strstr(baton_client_errmsg(c), "permits t2: wait_ms is BATON_LEASE_WATCHDOG") != NULL,
              "%s", baton_client_errmsg(c));
    cr_assert_eq(baton_election_campaign(e, "v", BATON_LEASE_WATCHDOG, 1000), BATON_EINVAL);
    cr_assert(strstr(baton_client_errmsg(c), "election t3: wait_ms is BATON_LEASE_WATCHDOG") !=
                  NULL,
              "%s", baton_client_errmsg(c));
    baton_op *op;
    cr_assert_eq(baton_lock_acquire_async(l, NULL, BATON_LEASE_WATCHDOG, 1000, NULL, NULL, &op),
                 BATON_EINVAL);
    cr_assert(strstr(baton_client_errmsg(c), "swapped") != NULL, "%s", baton_client_errmsg(c));
    baton_lock_close(l);
    baton_permits_close(p);
    baton_election_close(e);
    baton_client_close(c);
}

static void async_never(void *handle, baton_owner *owner, int rc, void *arg)
{
    (void)handle, (void)owner, (void)rc, (void)arg;
    cr_assert(false, "an acquire refused at its start completed");
}

/* The scripts the server ran so far (every acquire is one). */
static long long scripts_run(redisContext *r)
{
    return th_cmdstat(r, "evalsha") + th_cmdstat(r, "eval") + th_cmdstat(r, "fcall");
}

/* The detail of a refused swap: the object and its name first, both arguments named. */
#define assert_swapped(c, prefix, wait)                                                            \
    do {                                                                                           \
        const char *m_ = baton_client_errmsg(c);                                                   \
        char want_[600];                                                                           \
        snprintf(want_, sizeof want_, "%s: lease_ms is -1 (BATON_WAIT_FOREVER) and wait_ms is %s", \
                 prefix, wait);                                                                    \
        cr_assert(strstr(m_, want_) == m_, "want \"%s...\", got \"%s\"", want_, m_);               \
        cr_assert(strstr(m_, "swapped?") != NULL, "%s", m_);                                       \
    } while (0)

/* A lease of -1 (BATON_WAIT_FOREVER, BATON_LEASE_WATCHDOG's value before 0.2.0, read as the
 * watchdog's by 0.2) is refused from 0.3.0 in every call that takes a lease: lease and wait
 * swapped, (l, 30000, BATON_WAIT_FOREVER), no longer wait 30 s and hold with the watchdog.
 * Nothing is sent: no script runs, no key of any of these names exists after. */
Test(times, a_lease_of_minus_1_is_refused_as_swapped_for_every_kind)
{
    cr_assert_eq(BATON_WAIT_FOREVER, -1);
    baton_client *c = th_client(NULL);
    redisContext *r = th_redis();
    char *base = th_name("api-swap");
    char n[6][200];
    const char *kinds[6] = {"lock", "fair", "rw", "perm", "elect", "multi"};
    for (int i = 0; i < 6; i++)
        snprintf(n[i], sizeof n[i], "%s-%s", base, kinds[i]);
    baton_lock *l, *f, *m;
    baton_rwlock *rw;
    baton_permits *p;
    baton_election *e;
    baton_owner *o;
    cr_assert_eq(baton_lock_open(c, n[0], &l), BATON_OK);
    cr_assert_eq(baton_fairlock_open(c, n[1], &f), BATON_OK);
    cr_assert_eq(baton_rwlock_open(c, n[2], &rw), BATON_OK);
    cr_assert_eq(baton_permits_open(c, n[3], &p), BATON_OK);
    cr_assert_eq(baton_election_open(c, n[4], &e), BATON_OK);
    const char *members[2] = {n[5], n[0]};
    cr_assert_eq(baton_multilock_open_names(c, members, 2, &m), BATON_OK);
    cr_assert_eq(baton_owner_new(c, &o), BATON_OK);
    char pre[8][260];
    snprintf(pre[0], sizeof pre[0], "lock %s", n[0]);
    snprintf(pre[1], sizeof pre[1], "fair lock %s", n[1]);
    snprintf(pre[3], sizeof pre[3], "permits %s", n[3]);
    snprintf(pre[4], sizeof pre[4], "election %s", n[4]);
    long long scripts0 = scripts_run(r);

    /* the lock: the order of the issue, every form */
    cr_assert_eq(baton_lock_try_acquire(l, 30000, BATON_WAIT_FOREVER), BATON_EINVAL);
    assert_swapped(c, pre[0], "30000");
    cr_assert_eq(baton_lock_try_acquire(l, 0, -1), BATON_EINVAL);
    assert_swapped(c, pre[0], "0");
    cr_assert_eq(baton_lock_try_acquire(l, BATON_WAIT_FOREVER, BATON_WAIT_FOREVER), BATON_EINVAL);
    assert_swapped(c, pre[0], "BATON_WAIT_FOREVER, -1");
    cr_assert_eq(baton_lock_acquire(l, BATON_WAIT_FOREVER), BATON_EINVAL);
    assert_swapped(c, pre[0], "BATON_WAIT_FOREVER, -1");
    cr_assert_eq(baton_lock_try_acquire_as(l, o, 30000, -1), BATON_EINVAL);
    assert_swapped(c, pre[0], "30000");
    cr_assert_eq(baton_lock_acquire_as(l, o, -1), BATON_EINVAL);
    assert_swapped(c, pre[0], "BATON_WAIT_FOREVER, -1");
    baton_op *op = (baton_op *)&op;
    cr_assert_eq(baton_lock_acquire_async(l, NULL, 30000, -1, async_never, NULL, &op),
                 BATON_EINVAL);
    cr_assert_null(op);
    assert_swapped(c, pre[0], "30000");
    cr_assert_eq(baton_lock_acquire_async(l, o, BATON_WAIT_FOREVER, -1, async_never, NULL, &op),
                 BATON_EINVAL);
    assert_swapped(c, pre[0], "BATON_WAIT_FOREVER, -1");
    /* the fair lock */
    cr_assert_eq(baton_lock_try_acquire(f, 30000, -1), BATON_EINVAL);
    assert_swapped(c, pre[1], "30000");
    cr_assert_eq(baton_lock_acquire_async(f, NULL, 5, -1, async_never, NULL, &op), BATON_EINVAL);
    assert_swapped(c, pre[1], "5");
    /* the read-write lock's two sides (the message names the side as its kind does) */
    cr_assert_eq(baton_lock_try_acquire(baton_rwlock_read(rw), 30000, -1), BATON_EINVAL);
    cr_assert(strstr(baton_client_errmsg(c), n[2]) != NULL, "%s", baton_client_errmsg(c));
    cr_assert(strstr(baton_client_errmsg(c),
                     ": lease_ms is -1 (BATON_WAIT_FOREVER) and wait_ms is 30000: swapped?") !=
                  NULL,
              "%s", baton_client_errmsg(c));
    cr_assert_eq(baton_lock_acquire(baton_rwlock_write(rw), -1), BATON_EINVAL);
    cr_assert(strstr(baton_client_errmsg(c), n[2]) != NULL, "%s", baton_client_errmsg(c));
    cr_assert(strstr(baton_client_errmsg(c), ": lease_ms is -1 (BATON_WAIT_FOREVER) and wait_ms "
                                             "is BATON_WAIT_FOREVER, -1: swapped?") != NULL,
              "%s", baton_client_errmsg(c));
    /* the multi-lock */
    cr_assert_eq(baton_lock_try_acquire(m, 30000, -1), BATON_EINVAL);
    cr_assert(strstr(baton_client_errmsg(c),
                     ": lease_ms is -1 (BATON_WAIT_FOREVER) and wait_ms is 30000: swapped?") !=
                  NULL,
              "%s", baton_client_errmsg(c));
    cr_assert(strstr(baton_client_errmsg(c), "multi") == baton_client_errmsg(c), "%s",
              baton_client_errmsg(c));
    /* permits: acquire, try_acquire, many, async */
    char id[BATON_PERMIT_ID_SIZE];
    char ids[2][BATON_PERMIT_ID_SIZE];
    cr_assert_eq(baton_permits_try_acquire(p, 30000, -1, id), BATON_EINVAL);
    assert_swapped(c, pre[3], "30000");
    cr_assert_eq(baton_permits_acquire(p, BATON_WAIT_FOREVER, id), BATON_EINVAL);
    assert_swapped(c, pre[3], "BATON_WAIT_FOREVER, -1");
    cr_assert_eq(baton_permits_try_acquire_many(p, 2, 30000, -1, ids), BATON_EINVAL);
    assert_swapped(c, pre[3], "30000");
    cr_assert_eq(baton_permits_acquire_async(p, 30000, -1, id, async_never, NULL, &op),
                 BATON_EINVAL);
    assert_swapped(c, pre[3], "30000");
    /* the election: campaign and its async form */
    cr_assert_eq(baton_election_campaign(e, "v", 30000, BATON_WAIT_FOREVER), BATON_EINVAL);
    assert_swapped(c, pre[4], "30000");
    cr_assert_eq(baton_election_campaign_async(e, "v", 30000, -1, async_never, NULL, &op),
                 BATON_EINVAL);
    assert_swapped(c, pre[4], "30000");

    /* nothing was sent: no script ran (this count's own INFO is no script) and no key of
     * these names exists */
    cr_assert_eq(scripts_run(r), scripts0, "scripts ran: %lld", scripts_run(r) - scripts0);
    redisReply *k = th_cmd(r, "KEYS *%s*", base);
    cr_assert_eq(k->elements, 0, "%zu keys, the first %s", k->elements,
                 k->elements ? k->element[0]->str : "");
    freeReplyObject(k);
    /* and the same calls the right way round work */
    cr_assert_eq(baton_lock_try_acquire(l, 0, BATON_LEASE_WATCHDOG), BATON_OK, "%s",
                 baton_client_errmsg(c));
    cr_assert_eq(baton_lock_release(l), BATON_OK);

    baton_owner_free(o);
    baton_lock_close(m);
    baton_election_close(e);
    baton_permits_close(p);
    baton_rwlock_close(rw);
    baton_lock_close(f);
    baton_lock_close(l);
    baton_client_close(c);
    redisFree(r);
    free(base);
}

/* A lease of 0 is the watchdog's for every kind (it was EINVAL for a lock, the watchdog for
 * permits), as BATON_LEASE_WATCHDOG is. */
Test(times, a_lease_of_0_is_the_watchdogs_for_every_kind)
{
    baton_options o;
    baton_options_init(&o);
    o.url = th_url();
    o.watchdog_ms = 900;
    baton_client *c = th_client(&o);
    char *name = th_name("api-lease0");
    baton_lock *l;
    cr_assert_eq(baton_lock_open(c, name, &l), BATON_OK);
    for (int64_t lease = 0; lease >= BATON_LEASE_WATCHDOG; lease += BATON_LEASE_WATCHDOG) {
        cr_assert_eq(baton_lock_try_acquire(l, 0, lease), BATON_OK, "lease %lld: %s",
                     (long long)lease, baton_client_errmsg(c));
        int64_t t0 = th_ms();
        th_sleep_ms(1500); /* past the watchdog's lease: still held, renewed */
        bool held = false;
        cr_assert_eq(baton_lock_is_held_by_current_thread(l, &held), BATON_OK);
        cr_assert(held, "lease %lld: not held after %lld ms", (long long)lease,
                  (long long)(th_ms() - t0));
        int64_t ttl = 0;
        cr_assert_eq(baton_lock_remaining_ttl(l, &ttl), BATON_OK);
        cr_assert(ttl > 0 && ttl <= 900, "ttl %lld", (long long)ttl);
        cr_assert_eq(baton_lock_release(l), BATON_OK);
    }
    baton_election *e;
    cr_assert_eq(baton_election_open(c, name, &e), BATON_OK);
    cr_assert_eq(baton_election_campaign(e, "v", 0, 0), BATON_OK, "%s", baton_client_errmsg(c));
    cr_assert_eq(baton_election_resign(e), BATON_OK);
    baton_election_close(e);
    baton_lock_close(l);
    baton_client_close(c);
    free(name);
}

/* ------------------------------------------------------------ multi-lock by names ----- */

TestSuite(names, .timeout = 60);

Test(names, a_multilock_opened_from_names_owns_its_members)
{
    baton_client *c = th_client(NULL);
    baton_client *c2 = th_client(NULL);
    char *base = th_name("api-order");
    char n0[200], n1[200], n2[200];
    snprintf(n0, sizeof n0, "%s-apple", base);
    snprintf(n1, sizeof n1, "%s-pear", base);
    snprintf(n2, sizeof n2, "%s-fig", base);
    const char *items[] = {n0, n1, n2};
    baton_lock *g;
    cr_assert_eq(baton_multilock_open_names(c, items, 3, &g), BATON_OK);
    cr_assert_eq(baton_lock_try_acquire(g, 0, 1000), BATON_OK);
    /* every member is held: another client cannot take any of them */
    for (int i = 0; i < 3; i++) {
        baton_lock *x;
        cr_assert_eq(baton_lock_open(c2, items[i], &x), BATON_OK);
        cr_assert_eq(baton_lock_try_acquire(x, 0, 1000), BATON_ETIMEDOUT, "member %d", i);
        baton_lock_close(x);
    }
    cr_assert_eq(baton_lock_release(g), BATON_OK);
    baton_lock_close(g); /* closes the members too (ASan: nothing leaked) */

    /* bad input, named */
    cr_assert_eq(baton_multilock_open_names(c, items, 0, &g), BATON_EINVAL);
    cr_assert_null(g);
    const char *dup[] = {n0, n1, n0};
    cr_assert_eq(baton_multilock_open_names(c, dup, 3, &g), BATON_EINVAL);
    cr_assert(strstr(baton_client_errmsg(c), "appears twice") != NULL, "%s",
              baton_client_errmsg(c));
    const char *bad[] = {n0, ""};
    cr_assert_eq(baton_multilock_open_names(c, bad, 2, &g), BATON_EINVAL);
    cr_assert(strstr(baton_client_errmsg(c), "multi-lock: name 1: ") != NULL, "%s",
              baton_client_errmsg(c));
    cr_assert_eq(baton_multilock_open_names(c, items, 3, NULL), BATON_EINVAL);

    /* left open when the client closes: closed with it, then freed by its own close */
    cr_assert_eq(baton_multilock_open_names(c, items, 3, &g), BATON_OK);
    cr_assert_eq(baton_lock_try_acquire(g, 0, 1000), BATON_OK);
    baton_client_close(c);
    cr_assert_eq(baton_lock_release(g), BATON_ECLOSED);
    baton_lock_close(g);
    baton_client_close(c2);
    free(base);
}

/* ------------------------------------------------------------- command, fence -------- */

TestSuite(command, .timeout = 60);

Test(command, a_command_runs_on_the_clients_connection_and_its_reply_is_a_tree)
{
    baton_client *c = th_client(NULL);
    const char *key = th_tmpname("api-cmd");
    const char *set[] = {"SET", key, "41"};
    baton_reply *r;
    cr_assert_eq(baton_client_command(c, key, 3, set, &r), BATON_OK, "%s", baton_client_errmsg(c));
    cr_assert_eq(baton_reply_kind(r), BATON_REPLY_STATUS);
    cr_assert_str_eq(baton_reply_str(r, NULL), "OK");
    baton_reply_free(r);
    const char *incr[] = {"INCR", key};
    cr_assert_eq(baton_client_command(c, key, 2, incr, &r), BATON_OK);
    cr_assert_eq(baton_reply_kind(r), BATON_REPLY_INTEGER);
    cr_assert_eq(baton_reply_integer(r), 42);
    baton_reply_free(r);
    const char *mget[] = {"MGET", key, "api-cmd-absent-key"};
    cr_assert_eq(baton_client_command(c, key, 3, mget, &r), BATON_OK);
    cr_assert_eq(baton_reply_kind(r), BATON_REPLY_ARRAY);
    cr_assert_eq(baton_reply_len(r), 2);
    size_t len;
    cr_assert_str_eq(baton_reply_str(baton_reply_element(r, 0), &len), "42");
    cr_assert_eq(len, 2);
    cr_assert_eq(baton_reply_kind(baton_reply_element(r, 1)), BATON_REPLY_NIL);
    cr_assert_null(baton_reply_element(r, 2));
    baton_reply_free(r);
    /* an error reply: a code and a detail naming the command */
    const char *lpush[] = {"LPUSH", key, "x"};
    cr_assert_eq(baton_client_command(c, key, 3, lpush, &r), BATON_EPROTO);
    cr_assert_null(r);
    const char *msg = baton_client_errmsg(c);
    cr_assert(strstr(msg, "command LPUSH: ") == msg && strstr(msg, "WRONGTYPE") != NULL, "%s", msg);
    const char *bad[] = {"GET", NULL};
    cr_assert_eq(baton_client_command(c, key, 2, bad, &r), BATON_EINVAL);
    cr_assert(strstr(baton_client_errmsg(c), "argv[1] is NULL") != NULL, "%s",
              baton_client_errmsg(c));
    baton_client_close(c);
    cr_assert_eq(baton_client_command(c, key, 2, incr, &r), BATON_ECLOSED);
}

/* README's fencing story in one call: a holder that paused past its lease writes with an
 * older token than the next holder's, and is refused. */
Test(command, a_fenced_write_refuses_a_stale_holder)
{
    baton_options o;
    baton_options_init(&o);
    o.url = th_url();
    baton_client *a = th_client(&o), *b = th_client(&o);
    char *name = th_name("api-fence");
    char store[256];
    snprintf(store, sizeof store, "%s-stock", name);
    baton_lock *la, *lb;
    cr_assert_eq(baton_lock_open(a, name, &la), BATON_OK);
    cr_assert_eq(baton_lock_open(b, name, &lb), BATON_OK);
    int64_t ta, tb;
    cr_assert_eq(baton_lock_try_acquire(la, 0, 200), BATON_OK); /* a 200 ms lease */
    cr_assert_eq(baton_lock_fencing_token(la, &ta), BATON_OK);
    bool written;
    cr_assert_eq(baton_fenced_set(a, store, "10", ta, &written), BATON_OK);
    cr_assert(written);
    /* a pauses past its lease; b takes the lock with a newer token and writes */
    cr_assert_eq(baton_lock_try_acquire(lb, 2000, 10000), BATON_OK);
    cr_assert_eq(baton_lock_fencing_token(lb, &tb), BATON_OK);
    cr_assert_gt(tb, ta);
    cr_assert_eq(baton_fenced_set(b, store, "9", tb, &written), BATON_OK);
    cr_assert(written);
    /* a wakes up and writes with its old token: refused, the detail names both */
    cr_assert_eq(baton_fenced_set(a, store, "stale", ta, &written), BATON_OK);
    cr_assert_not(written);
    cr_assert(strstr(baton_client_errmsg(a), "refused") != NULL, "%s", baton_client_errmsg(a));
    const char *get[] = {"GET", store};
    baton_reply *r;
    cr_assert_eq(baton_client_command(a, store, 2, get, &r), BATON_OK);
    cr_assert_str_eq(baton_reply_str(r, NULL), "9");
    baton_reply_free(r);
    cr_assert_eq(baton_fenced_set(a, store, "x", 0, &written), BATON_EINVAL);
    cr_assert_eq(baton_lock_release(lb), BATON_OK);
    baton_lock_close(la);
    baton_lock_close(lb);
    baton_client_close(a);
    baton_client_close(b);
    free(name);
}

/* ------------------------------------------------------- two handles of one name ----- */

TestSuite(handles, .timeout = 60);

static void lost_count(baton_lock *l, void *arg)
{
    (void)l;
    __atomic_add_fetch((int *)arg, 1, __ATOMIC_SEQ_CST);
}

Test(handles, a_release_through_a_second_handle_of_one_name_is_refused)
{
    baton_client *c = th_client(NULL);
    const char *name = th_tmpname("api-two");
    baton_lock *a, *b;
    cr_assert_eq(baton_lock_open(c, name, &a), BATON_OK);
    cr_assert_eq(baton_lock_open(c, name, &b), BATON_OK);
    int lost = 0;
    cr_assert_eq(baton_lock_set_lost_handler(a, lost_count, &lost), BATON_OK);
    cr_assert_eq(baton_lock_acquire(a, BATON_LEASE_WATCHDOG), BATON_OK);
    cr_assert_eq(baton_lock_release(b), BATON_ENOTHELD);
    const char *msg = baton_client_errmsg(c);
    cr_assert(strstr(msg, "through another handle") != NULL, "%s", msg);
    bool locked = false;
    cr_assert_eq(baton_lock_is_locked(a, &locked), BATON_OK);
    cr_assert(locked);
    cr_assert_eq(baton_lock_release(a), BATON_OK); /* the first handle still owns it */
    cr_assert_eq(__atomic_load_n(&lost, __ATOMIC_SEQ_CST), 0);
    /* re-entry through both: each release counts its own handle's hold */
    cr_assert_eq(baton_lock_acquire(a, 5000), BATON_OK);
    cr_assert_eq(baton_lock_acquire(b, 5000), BATON_OK);
    int64_t n = 0;
    cr_assert_eq(baton_lock_hold_count(a, &n), BATON_OK);
    cr_assert_eq(n, 2);
    cr_assert_eq(baton_lock_release(b), BATON_OK);
    cr_assert_eq(baton_lock_release(a), BATON_OK);
    cr_assert_eq(baton_lock_is_locked(a, &locked), BATON_OK);
    cr_assert_not(locked);
    baton_lock_close(a);
    baton_lock_close(b);
    baton_client_close(c);
}
