/*
 * Event-loop programs (issue 13) against a real redis-server: explicit owners, asynchronous
 * acquisition from one loop thread against other processes using the blocking API,
 * cancellation of every blocking wait, close with waiters in progress, and fork safety.
 */
#define _GNU_SOURCE
#include "helper.h"
#include "internal.h"
#include "lockbase.h" /* the watchdog's rounds */

#include "new_assert.h"
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

TestSuite(async, .timeout = 120);

/* ------------------------------------------------------------------ owners ---------- */

typedef struct owner_job {
    baton_lock *l;
    baton_owner *o;
    int rc;
} owner_job;

static void *release_for_owner(void *arg)
{
    owner_job *j = arg;
    j->rc = baton_lock_release_as(j->l, j->o);
    return NULL;
}

Test(async, owner_hold_released_from_another_thread, .timeout = 30)
{
    baton_client *c = th_client(NULL);
    baton_lock *l;
    baton_owner *o;
    cr_assert(eq(int, baton_lock_open(c, th_tmpname("own-x"), &l), BATON_OK));
    cr_assert(eq(int, baton_owner_new(c, &o), BATON_OK));
    cr_assert(baton_owner_id(o) >= (UINT64_C(1) << 62), "owner ids never equal a thread id");
    cr_assert(eq(int, baton_lock_try_acquire_as(l, o, 0, BATON_LEASE_WATCHDOG), BATON_OK));
    /* the field in Redis is "<uuid>:<owner-id>" (Redisson's layout) */
    redisContext *r = th_redis();
    char field[128];
    snprintf(field, sizeof field, "%s:%llu", baton_client_id(c),
             (unsigned long long)baton_owner_id(o));
    cr_assert(eq(int, th_cmd_int(r, "HEXISTS %s %s", baton_lock_name(l), field), 1));
    /* the thread itself does not hold it */
    bool held = true;
    cr_assert(eq(int, baton_lock_is_held_by_current_thread(l, &held), BATON_OK));
    cr_assert(not(held));
    cr_assert(eq(int, baton_lock_release(l), BATON_ENOTHELD));
    owner_job j = {l, o, -100};
    pthread_t t;
    pthread_create(&t, NULL, release_for_owner, &j);
    pthread_join(t, NULL);
    cr_assert(eq(int, j.rc, BATON_OK));
    cr_assert(eq(int, th_cmd_int(r, "EXISTS %s", baton_lock_name(l)), 0));
    redisFree(r);
    baton_owner_free(o);
    baton_lock_close(l);
    baton_client_close(c);
}

Test(async, two_owners_in_one_thread_exclude_and_reenter_each_its_own, .timeout = 30)
{
    baton_client *c = th_client(NULL);
    baton_lock *l;
    baton_owner *a, *b;
    cr_assert(eq(int, baton_lock_open(c, th_tmpname("own-2"), &l), BATON_OK));
    cr_assert(eq(int, baton_owner_new(c, &a), BATON_OK));
    cr_assert(eq(int, baton_owner_new(c, &b), BATON_OK));
    cr_assert(ne(u64, baton_owner_id(a), baton_owner_id(b)));
    cr_assert(eq(int, baton_lock_try_acquire_as(l, a, 0, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire_as(l, b, 0, BATON_LEASE_WATCHDOG), BATON_ETIMEDOUT));
    cr_assert(eq(int, baton_lock_try_acquire_as(l, b, 50, BATON_LEASE_WATCHDOG), BATON_ETIMEDOUT));
    cr_assert(eq(int, baton_lock_try_acquire(l, 0, BATON_LEASE_WATCHDOG), BATON_ETIMEDOUT),
              "the thread is a third owner");
    cr_assert(eq(int, baton_lock_try_acquire_as(l, a, 0, BATON_LEASE_WATCHDOG), BATON_OK));
    int64_t n = 0, token = 0;
    cr_assert(eq(int, baton_lock_hold_count_as(l, a, &n), BATON_OK));
    cr_assert(eq(i64, n, 2));
    cr_assert(eq(int, baton_lock_hold_count_as(l, b, &n), BATON_OK));
    cr_assert(eq(i64, n, 0));
    cr_assert(eq(int, baton_lock_fencing_token_as(l, a, &token), BATON_OK));
    cr_assert(gt(i64, token, 0));
    cr_assert(eq(int, baton_lock_fencing_token_as(l, b, &token), BATON_ENOTHELD));
    cr_assert(eq(int, baton_lock_release_as(l, b), BATON_ENOTHELD));
    cr_assert(eq(int, baton_lock_release_as(l, a), BATON_OK));
    bool held = false;
    cr_assert(eq(int, baton_lock_is_held_as(l, a, &held), BATON_OK));
    cr_assert(held, "one hold of two released");
    cr_assert(eq(int, baton_lock_release_as(l, a), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire_as(l, b, 0, 5000), BATON_OK));
    cr_assert(eq(int, baton_lock_release_as(l, b), BATON_OK));
    baton_owner_free(a);
    baton_owner_free(b);
    baton_lock_close(l);
    baton_client_close(c);
}

Test(async, bad_input_is_refused_with_a_detail, .timeout = 30)
{
    baton_client *c = th_client(NULL), *c2 = th_client(NULL);
    baton_lock *l;
    baton_owner *o, *other;
    cr_assert(eq(int, baton_lock_open(c, th_tmpname("own-bad"), &l), BATON_OK));
    cr_assert(eq(int, baton_owner_new(NULL, &o), BATON_EINVAL));
    cr_assert(eq(int, baton_owner_new(c, NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_owner_new(c, &o), BATON_OK));
    cr_assert(eq(int, baton_owner_new(c2, &other), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire_as(l, NULL, 0, BATON_LEASE_WATCHDOG), BATON_EINVAL));
    cr_assert(eq(int, baton_lock_try_acquire_as(NULL, o, 0, BATON_LEASE_WATCHDOG), BATON_EINVAL));
    cr_assert(eq(int, baton_lock_try_acquire_as(l, other, 0, BATON_LEASE_WATCHDOG), BATON_EINVAL));
    cr_assert(strstr(baton_client_errmsg(c), "another client") != NULL, "%s",
              baton_client_errmsg(c));
    cr_assert(eq(
        int,
        baton_lock_acquire_async(l, other, 0, BATON_LEASE_WATCHDOG, (baton_async_fn)1, NULL, NULL),
        BATON_EINVAL));
    cr_assert(eq(int, baton_lock_acquire_async(l, o, 0, BATON_LEASE_WATCHDOG, NULL, NULL, NULL),
                 BATON_EINVAL));
    cr_assert(strstr(baton_client_errmsg(c), "fn") != NULL);
    cr_assert(
        eq(int,
           baton_lock_acquire_async(l, o, -5, BATON_LEASE_WATCHDOG, (baton_async_fn)1, NULL, NULL),
           BATON_EINVAL));
    cr_assert(eq(int, baton_op_cancel(NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_client_process(NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_client_async_fd(c, NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_client_set_callbacks(c, 7), BATON_EINVAL));
    cr_assert(eq(int, baton_client_cancel_waits(NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_client_process(c), 0), "nothing completed");
    baton_owner_free(o);
    baton_owner_free(other);
    baton_lock_close(l);
    baton_client_close(c);
    baton_client_close(c2);
}

/* ------------------------------------------------------------------ the loop --------- */

#define NAMES 50
#define HELD 10 /* names held throughout by another client: ops there time out or are cancelled */
#define PER_NAME 18  /* async acquisitions per contended name: 900 */
#define TIMED_OUT 50 /* + 50 with a 200 ms wait on held names */
#define CANCELLED 50 /* + 50 cancelled after 100 ms on held names: 1000 in all */
#define CHILDREN 2
#define CHILD_ROUNDS 5 /* blocking acquisitions per name per child */

typedef struct loop_op {
    struct loop *lp;
    baton_lock *l;
    int name;
    int expect; /* BATON_OK, BATON_ETIMEDOUT, BATON_ECANCELED */
    int rc;     /* -100 until completed */
    baton_op *op;
    baton_owner *owner;
} loop_op;

typedef struct loop {
    baton_client *c;
    redisContext *r;
    char *names[NAMES + HELD];
    baton_lock *locks[NAMES + HELD];
    loop_op ops[NAMES * PER_NAME + TIMED_OUT + CANCELLED];
    int completed, released, errors;
    int refused;           /* acquisitions meant to succeed that failed (nothing to release) */
    char first_error[300]; /* what the first error said */
    int64_t max_call_us;   /* the longest a baton call made by the loop took */
    int64_t max_cb_us;     /* the longest one callback took (critical section included) */
} loop;

static char *counter_key(const char *name)
{
    return baton__asprintf("ctr:%s", name);
}

static void bump(redisContext *r, const char *name)
{
    char *key = counter_key(name);
    redisReply *rep = redisCommand(r, "GET %s", key);
    long long v = rep && rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : 0;
    if (rep)
        freeReplyObject(rep);
    rep = redisCommand(r, "SET %s %lld", key, v + 1);
    if (rep)
        freeReplyObject(rep);
    free(key);
}

static int64_t now_us(void)
{
    return baton__now_us();
}

static const char *max_what = "";
static long vol_switches, invol_switches; /* the loop thread's, at the call's start */
static int64_t max_preempted_us;          /* calls during which the kernel preempted the loop */

static void call_begin(void)
{
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    vol_switches = ru.ru_nvcsw;
    invol_switches = ru.ru_nivcsw;
}

/* A call that slept (a voluntary switch: a mutex, a syscall that waited) counts as the
 * loop blocked by baton; one during which only the kernel preempted the thread (an
 * involuntary switch, the machine's other load) is counted apart. */
static void note_call_what(loop *lp, int64_t t0, const char *what)
{
    int64_t d = now_us() - t0;
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    if (ru.ru_nvcsw == vol_switches && ru.ru_nivcsw != invol_switches) {
        if (d > max_preempted_us)
            max_preempted_us = d;
        return;
    }
    if (d > lp->max_call_us) {
        lp->max_call_us = d;
        max_what = what;
    }
}
#define note_call(lp, t0) note_call_what(lp, t0, __func__)

static void loop_error(loop *lp, const char *what, int rc)
{
    if (lp->errors++ == 0)
        snprintf(lp->first_error, sizeof lp->first_error, "%s: %s: %s", what, baton_err_name(rc),
                 baton_client_errmsg(lp->c));
}

static void on_released(void *handle, baton_owner *owner, int rc, void *arg)
{
    (void)handle;
    (void)owner;
    loop *lp = arg;
    lp->released++;
    if (rc != BATON_OK)
        loop_error(lp, "release", rc);
}

static void on_acquired(void *handle, baton_owner *owner, int rc, void *arg)
{
    loop_op *o = arg;
    loop *lp = o->lp;
    cr_assert(eq(ptr, handle, o->l));
    cr_assert(eq(ptr, owner, o->owner));
    o->rc = rc;
    lp->completed++;
    if (rc != BATON_OK) {
        if (o->expect == BATON_OK) {
            lp->refused++;
            loop_error(lp, "acquire", rc);
        }
        return;
    }
    bump(lp->r, baton_lock_name(o->l)); /* the critical section: GET, SET + 1 */
    call_begin();
    int64_t t0 = now_us();
    int rc2 = baton_lock_release_async(o->l, o->owner, on_released, lp, NULL);
    if (rc2 != BATON_OK)
        loop_error(lp, "release start", rc2);
    note_call(lp, t0);
}

typedef struct child_arg {
    char **names;
    int seed;
} child_arg;

/* Another process contending with the blocking API, fair and plain alike. */
static int contend(void *arg)
{
    child_arg *a = arg;
    baton_client *c = th_client(NULL);
    redisContext *r = th_redis();
    baton_lock *locks[NAMES];
    for (int i = 0; i < NAMES; i++) {
        int rc = i % 2 ? baton_fairlock_open(c, a->names[i], &locks[i])
                       : baton_lock_open(c, a->names[i], &locks[i]);
        if (rc != BATON_OK)
            return 10;
    }
    int errors = 0;
    for (int round = 0; round < CHILD_ROUNDS; round++)
        for (int k = 0; k < NAMES; k++) {
            int i = (k * 7 + round * 13 + a->seed) % NAMES; /* every name once per round */
            if (baton_lock_acquire(locks[i], BATON_LEASE_WATCHDOG) != BATON_OK) {
                errors++;
                continue;
            }
            bump(r, a->names[i]);
            if (baton_lock_release(locks[i]) != BATON_OK)
                errors++;
        }
    for (int i = 0; i < NAMES; i++)
        baton_lock_close(locks[i]);
    redisFree(r);
    baton_client_close(c);
    return errors > 0 ? 1 : 0;
}

/* A client whose operations run as mode says (BATON_CALLBACKS_*). */
static baton_client *client_in(int mode)
{
    baton_client *c = th_client(NULL);
    cr_assert(eq(int, baton_client_set_callbacks(c, mode), BATON_OK));
    return c;
}

static void thousand_acquisitions(int mode)
{
    static loop lp; /* big: not on the stack */
    memset(&lp, 0, sizeof lp);
    for (int i = 0; i < NAMES + HELD; i++)
        lp.names[i] = th_name(i < NAMES ? "evl" : "evl-held");
    /* the contending processes first, while this one has no thread (ThreadSanitizer) */
    child_arg args[CHILDREN];
    pid_t kids[CHILDREN];
    for (int k = 0; k < CHILDREN; k++) {
        args[k] = (child_arg){lp.names, k * 17 + 3};
        kids[k] = th_fork(contend, &args[k]);
    }
    lp.c = client_in(mode);
    lp.r = th_redis();
    baton_client *holder = th_client(NULL);
    for (int i = 0; i < NAMES + HELD; i++) {
        /* odd: fair locks; even: plain */
        int rc = i % 2 ? baton_fairlock_open(lp.c, lp.names[i], &lp.locks[i])
                       : baton_lock_open(lp.c, lp.names[i], &lp.locks[i]);
        cr_assert(eq(int, rc, BATON_OK));
    }
    baton_lock *held[HELD];
    for (int i = 0; i < HELD; i++) {
        int rc = i % 2 ? baton_fairlock_open(holder, lp.names[NAMES + i], &held[i])
                       : baton_lock_open(holder, lp.names[NAMES + i], &held[i]);
        cr_assert(eq(int, rc, BATON_OK));
        cr_assert(eq(int, baton_lock_acquire(held[i], BATON_LEASE_WATCHDOG), BATON_OK));
    }

    /* One owner per operation (a request), every operation started from this thread. */
    int fd = -1;
    cr_assert(eq(int, baton_client_async_fd(lp.c, &fd), BATON_OK));
    int nops = 0;
    int64_t start_ms = th_ms();
    for (int i = 0; i < NAMES * PER_NAME + TIMED_OUT + CANCELLED; i++) {
        loop_op *o = &lp.ops[nops++];
        o->lp = &lp;
        o->rc = -100;
        int64_t wait = BATON_WAIT_FOREVER;
        if (i < NAMES * PER_NAME) {
            o->name = i % NAMES;
            o->expect = BATON_OK;
        } else if (i < NAMES * PER_NAME + TIMED_OUT) {
            o->name = NAMES + i % HELD;
            o->expect = BATON_ETIMEDOUT;
            wait = 200;
        } else {
            o->name = NAMES + i % HELD;
            o->expect = BATON_ECANCELED;
        }
        o->l = lp.locks[o->name];
        cr_assert(eq(int, baton_owner_new(lp.c, &o->owner), BATON_OK));
        call_begin();
        int64_t t0 = now_us();
        int rc = baton_lock_acquire_async(o->l, o->owner, wait, BATON_LEASE_WATCHDOG, on_acquired,
                                          o, &o->op);
        note_call_what(&lp, t0, i == 0 ? "first start" : "start");
        cr_assert(eq(int, rc, BATON_OK), "%s", baton_client_errmsg(lp.c));
    }
    bool cancel_sent = false;
    int total = nops;
    while (lp.completed < total || lp.released + lp.refused < NAMES * PER_NAME) {
        cr_assert(lt(i64, th_ms() - start_ms, 100000),
                  "completed %d of %d, released %d, %d error(s), the first: %s", lp.completed,
                  total, lp.released, lp.errors, lp.first_error);
        if (!cancel_sent && th_ms() - start_ms >= 100) {
            for (int i = NAMES * PER_NAME + TIMED_OUT; i < total; i++) {
                call_begin();
                int64_t t0 = now_us();
                cr_assert(eq(int, baton_op_cancel(lp.ops[i].op), BATON_OK));
                note_call_what(&lp, t0, "cancel");
            }
            cancel_sent = true;
        }
        struct pollfd p = {fd, POLLIN, 0};
        poll(&p, 1, 20);
        call_begin();
        int64_t t0 = now_us();
        int ran = baton_client_process(lp.c);
        int64_t d = now_us() - t0;
        cr_assert(ge(int, ran, 0));
        /* process() runs callbacks; what the loop spent per callback is counted apart */
        if (ran > 0 && d / ran > lp.max_cb_us)
            lp.max_cb_us = d / ran;
        /* BATON_CALLBACKS_LOOP: process() is where the operations themselves run */
        if (ran == 0 && mode != BATON_CALLBACKS_LOOP)
            note_call_what(&lp, t0, "process");
    }
    for (int k = 0; k < CHILDREN; k++)
        cr_assert(eq(int, th_wait(kids[k]), 0), "child %d", k);
    int by_rc[3] = {0};
    for (int i = 0; i < total; i++) {
        cr_assert(eq(int, lp.ops[i].rc, lp.ops[i].expect), "op %d on %s: %s", i,
                  lp.names[lp.ops[i].name], baton_strerror(lp.ops[i].rc));
        by_rc[lp.ops[i].rc == BATON_OK ? 0 : lp.ops[i].rc == BATON_ETIMEDOUT ? 1 : 2]++;
    }
    cr_assert(eq(int, lp.errors, 0), "%d error(s), the first: %s", lp.errors, lp.first_error);
    for (int i = 0; i < NAMES; i++) {
        char *key = counter_key(lp.names[i]);
        cr_assert(eq(int, th_cmd_int(lp.r, "GET %s", key), PER_NAME + CHILDREN * CHILD_ROUNDS),
                  "counter of %s", lp.names[i]);
        free(key);
    }
    int64_t seconds_ms = th_ms() - start_ms;
    fprintf(stderr,
            "async loop: %d ops (%d acquired, %d timed out, %d cancelled) in %lld ms; longest "
            "baton call from the loop %.2f ms (%s), longest callback (GET+SET+release start) %.2f "
            "ms; longest call the kernel preempted (machine load) %.2f ms\n",
            total, by_rc[0], by_rc[1], by_rc[2], (long long)seconds_ms, lp.max_call_us / 1000.0,
            max_what, lp.max_cb_us / 1000.0, max_preempted_us / 1000.0);
#ifndef __SANITIZE_THREAD__ /* TSan serializes every mutex on a starved machine: races only */
    cr_assert(le(i64, lp.max_call_us, 5000 * SLOW), "the loop blocked %lld us in baton (%s)",
              (long long)lp.max_call_us, max_what);
#endif

    for (int i = 0; i < HELD; i++) {
        cr_assert(eq(int, baton_lock_release(held[i]), BATON_OK));
        baton_lock_close(held[i]);
    }
    /* nothing left: no hold, no queue entry, no subscription once lingering ends */
    th_sleep_ms(300);
    for (int i = 0; i < NAMES + HELD; i++) {
        const char *n = lp.names[i];
        cr_assert(eq(int, th_cmd_int(lp.r, "EXISTS %s", n), 0), "%s", n);
        cr_assert(eq(int, th_cmd_int(lp.r, "EXISTS redisson_lock_queue:{%s}", n), 0), "%s", n);
        cr_assert(eq(int, th_cmd_int(lp.r, "EXISTS redisson_lock_timeout:{%s}", n), 0), "%s", n);
        cr_assert(eq(int, th_numsub(lp.r, "redisson_lock__channel:{%s}", n), 0), "%s", n);
    }
    redisReply *rep = th_cmd(lp.r, "PUBSUB CHANNELS *");
    cr_assert(eq(sz, rep->elements, 0), "channels left subscribed");
    freeReplyObject(rep);
    for (int i = 0; i < total; i++)
        baton_owner_free(lp.ops[i].owner);
    for (int i = 0; i < NAMES + HELD; i++) {
        baton_lock_close(lp.locks[i]);
        free(lp.names[i]);
    }
    redisFree(lp.r);
    baton_client_close(lp.c);
    baton_client_close(holder);
}

Test(async, one_loop_thousand_acquisitions_against_processes, .timeout = 120)
{
    thousand_acquisitions(BATON_CALLBACKS_PROCESS);
}

/* The same, with no engine thread: the operations run in the loop thread's process(). */
Test(async, loop_mode_thousand_acquisitions_against_processes, .timeout = 120)
{
    thousand_acquisitions(BATON_CALLBACKS_LOOP);
}

/* ------------------------------------------------------------------ async kinds ------ */

typedef struct done {
    int n;
    int rc[8];
    int64_t at_ms[8];
} done;

static void on_done(void *handle, baton_owner *owner, int rc, void *arg)
{
    (void)handle;
    (void)owner;
    done *d = arg;
    d->at_ms[d->n] = th_ms();
    d->rc[d->n++] = rc;
}

/* Runs the loop until d has n completions or 10 s passed. */
static void run_until(baton_client *c, done *d, int n)
{
    int fd;
    cr_assert(eq(int, baton_client_async_fd(c, &fd), BATON_OK));
    int64_t end = th_ms() + 10000;
    while (d->n < n && th_ms() < end) {
        struct pollfd p = {fd, POLLIN, 0};
        poll(&p, 1, 50);
        baton_client_process(c);
    }
    cr_assert(eq(int, d->n, n));
}

static void every_waitable_kind(int mode)
{
    baton_client *c = client_in(mode), *other = th_client(NULL);
    redisContext *r = th_redis();
    done d = {0};
    /* semaphore: none available, then two permits added */
    const char *sname = th_tmpname("as-sem"), *lname = th_tmpname("as-latch"),
               *pname = th_tmpname("as-perm");
    baton_semaphore *s;
    cr_assert(eq(int, baton_semaphore_open(c, sname, &s), BATON_OK));
    cr_assert(eq(int, baton_semaphore_try_set_permits(s, 0, NULL), BATON_OK));
    cr_assert(eq(int, baton_semaphore_acquire_async(s, 2, 5000, on_done, &d, NULL), BATON_OK));
    /* latch at 1 */
    baton_latch *lt;
    cr_assert(eq(int, baton_latch_open(c, lname, &lt), BATON_OK));
    cr_assert(eq(int, baton_latch_try_set_count(lt, 1, NULL), BATON_OK));
    cr_assert(eq(int, baton_latch_await_async(lt, 5000, on_done, &d, NULL), BATON_OK));
    /* permit lease: none available */
    baton_permits *p;
    char id[BATON_PERMIT_ID_SIZE];
    cr_assert(eq(int, baton_permits_open(c, pname, &p), BATON_OK)); /* absent: no permits */
    cr_assert(
        eq(int, baton_permits_acquire_async(p, 5000, 10000, id, on_done, &d, NULL), BATON_OK));
    /* write side of a read-write lock held for reading by another client */
    baton_rwlock *rw, *rw2;
    const char *rwname = th_tmpname("as-rw");
    cr_assert(eq(int, baton_rwlock_open(c, rwname, &rw), BATON_OK));
    cr_assert(eq(int, baton_rwlock_open(other, rwname, &rw2), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(baton_rwlock_read(rw2), 10000), BATON_OK));
    cr_assert(eq(
        int, baton_lock_acquire_async(baton_rwlock_write(rw), NULL, 5000, 10000, on_done, &d, NULL),
        BATON_OK));
    th_sleep_ms(100);
    cr_assert(eq(int, baton_client_process(c), 0), "all four wait");
    cr_assert(eq(int, d.n, 0));

    baton_semaphore *s2;
    cr_assert(eq(int, baton_semaphore_open(other, sname, &s2), BATON_OK));
    cr_assert(eq(int, baton_semaphore_add_permits(s2, 2), BATON_OK));
    run_until(c, &d, 1);
    baton_latch *lt2;
    cr_assert(eq(int, baton_latch_open(other, lname, &lt2), BATON_OK));
    cr_assert(eq(int, baton_latch_count_down(lt2), BATON_OK));
    run_until(c, &d, 2);
    baton_permits *p2;
    cr_assert(eq(int, baton_permits_open(other, pname, &p2), BATON_OK));
    bool set = false;
    cr_assert(eq(int, baton_permits_try_set_permits(p2, 1, &set), BATON_OK));
    cr_assert(set);
    run_until(c, &d, 3);
    cr_assert(eq(int, baton_lock_release(baton_rwlock_read(rw2)), BATON_OK));
    run_until(c, &d, 4);
    for (int i = 0; i < 4; i++)
        cr_assert(eq(int, d.rc[i], BATON_OK), "completion %d", i);
    cr_assert(eq(sz, strlen(id), (size_t)BATON_PERMIT_ID_LEN));
    cr_assert(eq(int, baton_permits_release(p, id), BATON_OK));
    /* the write hold is the calling thread's: it releases it with the thread form */
    cr_assert(eq(int, baton_lock_release(baton_rwlock_write(rw)), BATON_OK));
    /* the permits go back asynchronously, and a cancellation does not skip a release */
    done d3 = {0};
    cr_assert(eq(int, baton_semaphore_release_async(s, 0, on_done, &d3, NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_semaphore_release_async(NULL, 1, on_done, &d3, NULL), BATON_EINVAL));
    cr_assert(eq(i64, th_cmd_int(r, "GET %s", sname), 0));
    cr_assert(eq(int, baton_semaphore_release_async(s, 2, on_done, &d3, NULL), BATON_OK));
    cr_assert(eq(int, baton_client_cancel_waits(c), BATON_OK));
    run_until(c, &d3, 1);
    cr_assert(eq(int, d3.rc[0], BATON_OK));
    cr_assert(eq(i64, th_cmd_int(r, "GET %s", sname), 2), "both permits are back");
    cr_assert(eq(int, th_cmd_int(r, "EXISTS %s", rwname), 0));

    /* reentrancy per owner, asynchronously */
    baton_lock *l;
    baton_owner *o;
    cr_assert(eq(int, baton_lock_open(c, th_tmpname("as-re"), &l), BATON_OK));
    cr_assert(eq(int, baton_owner_new(c, &o), BATON_OK));
    done d2 = {0};
    cr_assert(eq(int,
                 baton_lock_acquire_async(l, o, 1000, BATON_LEASE_WATCHDOG, on_done, &d2, NULL),
                 BATON_OK));
    run_until(c, &d2, 1);
    cr_assert(eq(int,
                 baton_lock_acquire_async(l, o, 1000, BATON_LEASE_WATCHDOG, on_done, &d2, NULL),
                 BATON_OK));
    run_until(c, &d2, 2);
    int64_t n = 0;
    cr_assert(eq(int, baton_lock_hold_count_as(l, o, &n), BATON_OK));
    cr_assert(eq(i64, n, 2));
    cr_assert(eq(int, baton_lock_release_async(l, o, on_done, &d2, NULL), BATON_OK));
    cr_assert(eq(int, baton_lock_release_async(l, o, on_done, &d2, NULL), BATON_OK));
    run_until(c, &d2, 4);
    for (int i = 0; i < 4; i++)
        cr_assert(eq(int, d2.rc[i], BATON_OK));
    cr_assert(eq(int, baton_lock_release_as(l, o), BATON_ENOTHELD));

    baton_owner_free(o);
    baton_lock_close(l);
    baton_semaphore_close(s);
    baton_semaphore_close(s2);
    baton_latch_close(lt);
    baton_latch_close(lt2);
    baton_permits_close(p);
    baton_permits_close(p2);
    baton_rwlock_close(rw);
    baton_rwlock_close(rw2);
    redisFree(r);
    baton_client_close(c);
    baton_client_close(other);
}

Test(async, every_waitable_kind_completes_on_the_loop, .timeout = 60)
{
    every_waitable_kind(BATON_CALLBACKS_PROCESS);
}

Test(async, loop_mode_every_waitable_kind_completes, .timeout = 60)
{
    every_waitable_kind(BATON_CALLBACKS_LOOP);
}

Test(async, callbacks_on_batons_thread_when_asked, .timeout = 30)
{
    baton_client *c = th_client(NULL);
    cr_assert(eq(int, baton_client_set_callbacks(c, BATON_CALLBACKS_BATON), BATON_OK));
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(c, th_tmpname("as-inline"), &l), BATON_OK));
    static atomic_int fired;
    static _Atomic(pthread_t) where;
    atomic_store(&fired, 0);
    void cb(void *h, baton_owner *o, int rc, void *arg);
    baton_owner *o;
    cr_assert(eq(int, baton_owner_new(c, &o), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire_async(l, o, 1000, 5000, cb, &fired, NULL), BATON_OK));
    int64_t end = th_ms() + 5000;
    while (atomic_load(&fired) == 0 && th_ms() < end)
        th_sleep_ms(5);
    cr_assert(eq(int, atomic_load(&fired), 1));
    cr_assert(eq(int, baton_client_process(c), 0), "nothing queued for the loop");
    cr_assert(eq(int, baton_lock_release_as(l, o), BATON_OK));
    (void)where;
    baton_owner_free(o);
    baton_lock_close(l);
    baton_client_close(c);
}

void cb(void *h, baton_owner *o, int rc, void *arg)
{
    (void)h;
    (void)o;
    atomic_store((atomic_int *)arg, rc == BATON_OK ? 1 : -1);
}

/* A callback that starts a release and then waits, blocking, for the lock it releases:
 * the release must not wait for the callback to end (baton_client_process wakes the engine
 * for what its callbacks start only after them, or before a wait). */
typedef struct release_then_wait {
    baton_lock *l;
    baton_owner *a, *b;
    done released;
    int rc;
    int64_t waited_ms;
    bool ran;
} release_then_wait;

static void release_then_wait_cb(void *h, baton_owner *o, int rc, void *arg)
{
    (void)h;
    (void)o;
    release_then_wait *t = arg;
    t->ran = true;
    if (rc != BATON_OK) {
        t->rc = rc;
        return;
    }
    t->rc = baton_lock_release_async(t->l, t->a, on_done, &t->released, NULL);
    if (t->rc != BATON_OK)
        return;
    int64_t t0 = th_ms();
    t->rc = baton_lock_try_acquire_as(t->l, t->b, 3000 * SLOW, 5000);
    t->waited_ms = th_ms() - t0;
}

static void callback_waits_for_its_release(int mode)
{
    baton_client *c = client_in(mode);
    baton_lock *l, *m;
    baton_owner *a, *b;
    cr_assert(eq(int, baton_lock_open(c, th_tmpname("as-rw-l"), &l), BATON_OK));
    cr_assert(eq(int, baton_lock_open(c, th_tmpname("as-rw-m"), &m), BATON_OK));
    cr_assert(eq(int, baton_owner_new(c, &a), BATON_OK));
    cr_assert(eq(int, baton_owner_new(c, &b), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire_as(l, a, 5000), BATON_OK));
    release_then_wait t = {.l = l, .a = a, .b = b, .rc = -1};
    /* any operation that completes: its callback runs on this thread, from process() */
    cr_assert(eq(int, baton_lock_acquire_async(m, b, 1000, 5000, release_then_wait_cb, &t, NULL),
                 BATON_OK));
    int fd;
    cr_assert(eq(int, baton_client_async_fd(c, &fd), BATON_OK));
    int64_t end = th_ms() + 20000;
    while ((!t.ran || t.released.n == 0) && th_ms() < end) {
        struct pollfd p = {fd, POLLIN, 0};
        poll(&p, 1, 50);
        baton_client_process(c);
    }
    cr_assert(t.ran);
    cr_assert(eq(int, t.rc, BATON_OK), "the wait got the lock (%s after %lld ms)",
              baton_err_name(t.rc), (long long)t.waited_ms);
    cr_assert(t.waited_ms < 1000 * SLOW, "got it %lld ms after the release started",
              (long long)t.waited_ms);
    cr_assert(eq(int, t.released.n, 1));
    cr_assert(eq(int, t.released.rc[0], BATON_OK));
    cr_assert(eq(int, baton_lock_release_as(l, b), BATON_OK));
    cr_assert(eq(int, baton_lock_release_as(m, b), BATON_OK));
    baton_owner_free(a);
    baton_owner_free(b);
    baton_lock_close(l);
    baton_lock_close(m);
    baton_client_close(c);
}

Test(async, a_callback_waits_for_a_release_it_started, .timeout = 60)
{
    callback_waits_for_its_release(BATON_CALLBACKS_PROCESS);
}

/* With no engine thread, the wait sends the release first (its reply is read later). */
Test(async, loop_mode_a_callback_waits_for_a_release_it_started, .timeout = 60)
{
    callback_waits_for_its_release(BATON_CALLBACKS_LOOP);
}

/* ------------------------------------------------------------------ loop mode ------- */

typedef struct other_thread {
    baton_client *c;
    baton_lock *l;
    baton_owner *o;
    done *d;
    int rc;
    char msg[200];
} other_thread;

static void *process_elsewhere(void *arg)
{
    other_thread *t = arg;
    t->rc = baton_client_process(t->c);
    snprintf(t->msg, sizeof t->msg, "%s", baton_client_errmsg(t->c));
    return NULL;
}

static void *start_elsewhere(void *arg)
{
    other_thread *t = arg;
    t->rc = baton_lock_acquire_async(t->l, t->o, 5000, 10000, on_done, t->d, NULL);
    return NULL;
}

static void *release_after_200_ms(void *arg)
{
    owner_job *j = arg;
    th_sleep_ms(200);
    j->rc = baton_lock_release_as(j->l, j->o);
    return NULL;
}

/* Runs c's loop (its descriptor, then process()) until d has n completions, at most
 * limit_ms; the time it took. */
static int64_t loop_until(baton_client *c, done *d, int n, int64_t limit_ms)
{
    int fd;
    cr_assert(eq(int, baton_client_async_fd(c, &fd), BATON_OK));
    int64_t t0 = th_ms();
    while (d->n < n && th_ms() - t0 < limit_ms) {
        struct pollfd p = {fd, POLLIN, 0};
        poll(&p, 1, 50);
        cr_assert(ge(int, baton_client_process(c), 0), "%s", baton_client_errmsg(c));
    }
    cr_assert(eq(int, d->n, n), "%d of %d completions in %lld ms", d->n, n, (long long)limit_ms);
    return th_ms() - t0;
}

/* BATON_CALLBACKS_LOOP: no engine thread (nothing advances outside process()), the timer
 * and pub/sub wake-ups reach the loop through its descriptor, one thread processes, any
 * thread starts, and close on the loop thread ends what is in flight. */
Test(async, loop_mode_runs_on_the_loop_thread_alone, .timeout = 60)
{
    baton_client *c = th_client(NULL), *other = th_client(NULL);
    redisContext *r = th_redis();
    cr_assert(eq(int, baton_client_set_callbacks(c, BATON_CALLBACKS_LOOP), BATON_OK));
    cr_assert(eq(int, baton_client_set_callbacks(c, BATON_CALLBACKS_PROCESS), BATON_OK),
              "not started yet: the mode may still change");
    cr_assert(eq(int, baton_client_set_callbacks(c, BATON_CALLBACKS_LOOP), BATON_OK));
    const char *free_name = th_tmpname("lm-free"), *held_name = th_tmpname("lm-held"),
               *later_name = th_tmpname("lm-later");
    baton_lock *fl, *hl, *ll, *ohl, *oll;
    cr_assert(eq(int, baton_lock_open(c, free_name, &fl), BATON_OK));
    cr_assert(eq(int, baton_lock_open(c, held_name, &hl), BATON_OK));
    cr_assert(eq(int, baton_lock_open(c, later_name, &ll), BATON_OK));
    cr_assert(eq(int, baton_lock_open(other, held_name, &ohl), BATON_OK));
    cr_assert(eq(int, baton_lock_open(other, later_name, &oll), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(ohl, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(oll, BATON_LEASE_WATCHDOG), BATON_OK));
    baton_owner *o[5];
    for (int i = 0; i < 5; i++)
        cr_assert(eq(int, baton_owner_new(c, &o[i]), BATON_OK));

    /* started, but no thread runs it until the loop processes */
    done d = {0};
    cr_assert(
        eq(int, baton_lock_acquire_async(fl, o[0], 5000, 10000, on_done, &d, NULL), BATON_OK));
    cr_assert(eq(int, baton_client_set_callbacks(c, BATON_CALLBACKS_PROCESS), BATON_EINVAL));
    cr_assert(eq(int, baton_client_set_callbacks(c, BATON_CALLBACKS_BATON), BATON_EINVAL));
    th_sleep_ms(200);
    cr_assert(eq(int, th_cmd_int(r, "EXISTS %s", free_name), 0), "nothing ran outside process()");
    loop_until(c, &d, 1, 5000 * SLOW);
    cr_assert(eq(int, d.rc[0], BATON_OK));
    cr_assert(eq(int, th_cmd_int(r, "EXISTS %s", free_name), 1));

    /* another thread may not process; it may start */
    other_thread t = {.c = c, .l = fl, .o = o[1], .d = &d};
    pthread_t th;
    cr_assert(eq(int, pthread_create(&th, NULL, process_elsewhere, &t), 0));
    pthread_join(th, NULL);
    cr_assert(eq(int, t.rc, BATON_EINVAL));
    cr_assert(strstr(t.msg, "one thread") != NULL, "%s", t.msg);
    cr_assert(eq(int, baton_lock_release_as(fl, o[0]), BATON_OK));
    cr_assert(eq(int, pthread_create(&th, NULL, start_elsewhere, &t), 0));
    pthread_join(th, NULL);
    cr_assert(eq(int, t.rc, BATON_OK));
    loop_until(c, &d, 2, 5000 * SLOW);
    cr_assert(eq(int, d.rc[1], BATON_OK), "started by another thread, run by the loop");
    cr_assert(eq(int, baton_lock_release_as(fl, o[1]), BATON_OK));

    /* a bound: the timer; a release by another client: its message */
    cr_assert(eq(int, baton_lock_acquire_async(hl, o[2], 300, 10000, on_done, &d, NULL), BATON_OK));
    cr_assert(
        eq(int, baton_lock_acquire_async(ll, o[3], 20000, 10000, on_done, &d, NULL), BATON_OK));
    int64_t t0 = th_ms();
    loop_until(c, &d, 3, 5000 * SLOW);
    int64_t timed_out_ms = th_ms() - t0;
    cr_assert(eq(int, d.rc[2], BATON_ETIMEDOUT));
    cr_assert(ge(i64, timed_out_ms, 280), "timed out after %lld ms", (long long)timed_out_ms);
    cr_assert(le(i64, timed_out_ms, 300 + 700 * SLOW), "timed out after %lld ms",
              (long long)timed_out_ms);
    cr_assert(eq(int, baton_lock_release(oll), BATON_OK));
    int64_t woken_ms = loop_until(c, &d, 4, 5000 * SLOW);
    cr_assert(eq(int, d.rc[3], BATON_OK));
    cr_assert(le(i64, woken_ms, 500 * SLOW), "the release's message took %lld ms",
              (long long)woken_ms);
    cr_assert(eq(int, baton_lock_release_as(ll, o[3]), BATON_OK));

    /* the loop thread blocks on its own (not in a callback): its operations go on */
    baton_owner *oo;
    cr_assert(eq(int, baton_owner_new(other, &oo), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire_as(oll, oo, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(
        eq(int, baton_lock_acquire_async(ll, o[1], 5000, 10000, on_done, &d, NULL), BATON_OK));
    owner_job j = {.l = oll, .o = oo, .rc = -1};
    cr_assert(eq(int, pthread_create(&th, NULL, release_after_200_ms, &j), 0));
    cr_assert(eq(int, baton_lock_try_acquire(hl, 1000, 10000), BATON_ETIMEDOUT));
    pthread_join(th, NULL);
    cr_assert(eq(int, j.rc, BATON_OK));
    cr_assert(eq(int, d.n, 4), "a callback runs in process() only");
    int64_t holds = 0;
    cr_assert(eq(int, baton_lock_hold_count_as(ll, o[1], &holds), BATON_OK));
    cr_assert(eq(i64, holds, 1), "acquired while the loop thread was blocked");
    cr_assert(eq(int, baton_client_process(c), 1));
    cr_assert(eq(int, d.rc[4], BATON_OK));
    cr_assert(eq(int, baton_lock_release_as(ll, o[1]), BATON_OK));
    baton_owner_free(oo);

    /* close on the loop thread, with a wait in flight: cancelled, nothing left */
    cr_assert(eq(int,
                 baton_lock_acquire_async(hl, o[4], BATON_WAIT_FOREVER, 10000, on_done, &d, NULL),
                 BATON_OK));
    cr_assert(eq(int, baton_client_process(c), 0));
    th_sleep_ms(50);
    baton_client_process(c);
    for (int i = 0; i < 5; i++)
        baton_owner_free(o[i]);
    baton_lock_close(fl);
    baton_lock_close(ll);
    t0 = th_ms();
    baton_lock_close(hl); /* its wait is cancelled, and runs to its end here */
    cr_assert(le(i64, th_ms() - t0, 2000 * SLOW));
    cr_assert(eq(int, baton_client_process(c), 1));
    cr_assert(eq(int, d.n, 6));
    cr_assert(eq(int, d.rc[5], BATON_ECANCELED));
    baton_client_close(c);
    th_sleep_ms(300); /* the subscription's linger */
    cr_assert(eq(int, th_numsub(r, "redisson_lock__channel:{%s}", held_name), 0));
    cr_assert(eq(int, th_cmd_int(r, "EXISTS %s", free_name), 0));
    cr_assert(eq(int, th_cmd_int(r, "EXISTS %s", later_name), 0));
    cr_assert(eq(int, baton_lock_release(ohl), BATON_OK));
    baton_lock_close(ohl);
    baton_lock_close(oll);
    baton_client_close(other);
    redisFree(r);
}

/* BATON_CALLBACKS_LOOP keeps a connection's socket in its epoll set between waits,
 * edge-triggered. Every idle connection of the client is killed between rounds: the next
 * operation meets a socket the server closed while nobody waited on it, then connects
 * again, typically on the same descriptor number. Each round must end well within the
 * command timeout (5 s): a wait that missed its socket's events would last that long. */
Test(async, loop_mode_survives_its_idle_connections_killed, .timeout = 60)
{
    baton_client *c = client_in(BATON_CALLBACKS_LOOP);
    redisContext *r = th_redis();
    baton_lock *l;
    baton_owner *o;
    cr_assert(eq(int, baton_lock_open(c, th_tmpname("lm-killed"), &l), BATON_OK));
    cr_assert(eq(int, baton_owner_new(c, &o), BATON_OK));
    done d = {0};
    for (int round = 0; round < 3; round++) {
        d.n = 0;
        cr_assert(
            eq(int, baton_lock_acquire_async(l, o, 5000, 10000, on_done, &d, NULL), BATON_OK));
        int64_t took = loop_until(c, &d, 1, 10000 * SLOW);
        cr_assert(eq(int, d.rc[0], BATON_OK), "round %d: %s", round, baton_strerror(d.rc[0]));
        cr_assert(lt(i64, took, 1500 * SLOW), "round %d: the acquisition took %lld ms", round,
                  (long long)took);
        cr_assert(eq(int, baton_lock_release_async(l, o, on_done, &d, NULL), BATON_OK));
        took = loop_until(c, &d, 2, 10000 * SLOW);
        cr_assert(eq(int, d.rc[1], BATON_OK), "round %d: %s", round, baton_strerror(d.rc[1]));
        cr_assert(lt(i64, took, 1500 * SLOW), "round %d: the release took %lld ms", round,
                  (long long)took);
        /* the client's connections are idle now: the server closes them */
        cr_assert(ge(int, th_cmd_int(r, "CLIENT KILL TYPE normal SKIPME yes"), 1));
        th_sleep_ms(100);
    }
    baton_owner_free(o);
    baton_lock_close(l);
    baton_client_close(c);
    redisFree(r);
}

/* ------------------------------------------------------------------ wake-ups -------- */

/* A client whose waiters re-read only after 60 s: a wake-up that goes missing shows. Its
 * waiters never queue in a line of starved waiters: they stay on the shared channel, whose
 * wake-ups these tests count. */
static baton_client *client_rechecking_late(void)
{
    baton_options o;
    baton_options_init(&o);
    o.recheck_ms = 60000;
    o.starve_ms = BATON_STARVE_NEVER;
    return th_client(&o);
}

/* Atomic completions, for operations whose callbacks run on baton's thread. */
typedef struct adone {
    atomic_int rc;   /* -100 until it completed */
    atomic_llong ms; /* when */
} adone;

static void on_adone(void *handle, baton_owner *owner, int rc, void *arg)
{
    (void)handle;
    (void)owner;
    adone *d = arg;
    atomic_store(&d->ms, th_ms());
    atomic_store(&d->rc, rc);
}

static void adone_init(adone *d, int n)
{
    for (int i = 0; i < n; i++) {
        atomic_store(&d[i].rc, -100);
        atomic_store(&d[i].ms, 0);
    }
}

static int adone_count(adone *d, int n, int rc)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        k += atomic_load(&d[i].rc) == rc;
    return k;
}

/* Two releases whose messages come in one read, while four operations wait for a permit:
 * the second message (2 permits) counts the operation the first woke, which has not run
 * since. Two attempts, not three. */
Test(async, a_semaphore_message_counts_the_operations_already_woken, .timeout = 60)
{
    baton_client *c = client_rechecking_late();
    cr_assert(eq(int, baton_client_set_callbacks(c, BATON_CALLBACKS_BATON), BATON_OK));
    const char *name = th_tmpname("as-woken");
    baton_semaphore *s;
    cr_assert(eq(int, baton_semaphore_open(c, name, &s), BATON_OK));
    cr_assert(eq(int, baton_semaphore_try_set_permits(s, 0, NULL), BATON_OK));
    adone d[4];
    adone_init(d, 4);
    for (int i = 0; i < 4; i++)
        cr_assert(
            eq(int, baton_semaphore_acquire_async(s, 1, 20000, on_adone, &d[i], NULL), BATON_OK));
    th_sleep_ms(300 * SLOW); /* all four asleep on one subscription */
    redisContext *r = th_redis();
    freeReplyObject(th_cmd(r, "CONFIG RESETSTAT"));
    th_two_releases_in_one_read(r, name);
    th_sleep_ms(300 * SLOW);
    cr_assert(eq(int, adone_count(d, 4, BATON_OK), 2));
    /* 3 before: the second message woke two more */
    cr_assert(eq(i64, th_cmdstat(r, "evalsha"), 2), "attempts by the woken operations");
    cr_assert(eq(int, baton_semaphore_add_permits(s, 2), BATON_OK));
    int64_t end = th_ms() + 5000 * SLOW;
    while (adone_count(d, 4, BATON_OK) < 4 && th_ms() < end)
        th_sleep_ms(5);
    cr_assert(eq(int, adone_count(d, 4, BATON_OK), 4));
    redisFree(r);
    baton_semaphore_close(s);
    baton_client_close(c);
}

/* A release by an owner of the client while operations of the same client wait for the
 * lock hands it to one of them in the release's own script (cohorting): that operation
 * completes with no attempt of its own, nothing is published, and the hash's field is
 * its owner's. Each release after that hands it to the next: one script per pass. */
Test(async, a_release_hands_the_lock_to_a_waiting_operation_of_its_client, .timeout = 60)
{
    baton_client *c = client_rechecking_late();
    cr_assert(eq(int, baton_client_set_callbacks(c, BATON_CALLBACKS_BATON), BATON_OK));
    const char *name = th_tmpname("as-cohort");
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(c, name, &l), BATON_OK));
    enum { N = 4 };
    baton_owner *holder, *o[N];
    cr_assert(eq(int, baton_owner_new(c, &holder), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire_as(l, holder, 0, BATON_LEASE_WATCHDOG), BATON_OK));
    adone d[N];
    adone_init(d, N);
    for (int i = 0; i < N; i++) {
        cr_assert(eq(int, baton_owner_new(c, &o[i]), BATON_OK));
        cr_assert(eq(
            int,
            baton_lock_acquire_async(l, o[i], 20000, BATON_LEASE_WATCHDOG, on_adone, &d[i], NULL),
            BATON_OK));
    }
    th_sleep_ms(300 * SLOW); /* all four asleep on one subscription */
    redisContext *r = th_redis();
    freeReplyObject(th_cmd(r, "CONFIG RESETSTAT"));
    int64_t token = 0, last = 0;
    cr_assert(eq(int, baton_lock_fencing_token_as(l, holder, &last), BATON_OK));
    baton_owner *from = holder;
    for (int pass = 1; pass <= N; pass++) {
        cr_assert(eq(int, baton_lock_release_as(l, from), BATON_OK));
        int64_t end = th_ms() + 2000 * SLOW;
        while (adone_count(d, N, BATON_OK) < pass && th_ms() < end)
            th_sleep_ms(1);
        cr_assert(eq(int, adone_count(d, N, BATON_OK), pass), "pass %d", pass);
        /* the release alone: no attempt by the operation handed the lock, no PUBLISH */
        cr_assert(eq(i64, th_cmdstat(r, "evalsha"), pass), "scripts after pass %d", pass);
        cr_assert(eq(i64, th_cmdstat(r, "publish"), 0));
        from = NULL;
        for (int i = 0; i < N && !from; i++) {
            char field[128];
            snprintf(field, sizeof field, "%s:%llu", baton_client_id(c),
                     (unsigned long long)baton_owner_id(o[i]));
            if (th_cmd_int(r, "HEXISTS %s %s", name, field) == 1)
                from = o[i];
        }
        cr_assert(from != NULL, "the lock is held by an operation's owner");
        cr_assert(eq(int, baton_lock_fencing_token_as(l, from, &token), BATON_OK));
        cr_assert(gt(i64, token, last), "the token rose");
        last = token;
    }
    cr_assert(eq(int, baton_lock_release_as(l, from), BATON_OK));
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s", name), 0));
    redisFree(r);
    for (int i = 0; i < N; i++)
        baton_owner_free(o[i]);
    baton_owner_free(holder);
    baton_lock_close(l);
    baton_client_close(c);
}

/* The members of the semaphore's line, first to last, as the server has them (n at most). */
static int line_members(redisContext *r, const char *name, char members[][160], int n)
{
    redisReply *rep = th_cmd(r, "ZRANGE baton_semaphore_line:{%s} 0 -1", name);
    cr_assert(eq(int, rep->type, REDIS_REPLY_ARRAY));
    int k = 0;
    for (size_t i = 0; i < rep->elements && k < n; i++)
        snprintf(members[k++], 160, "%s", rep->element[i]->str);
    freeReplyObject(rep);
    return k;
}

/* Operations started by one thread act for it, and may wait at once: each takes a place of
 * its own in the semaphore's line (its member is the thread's owner and ":f<n>"), at its
 * end, and each release serves the line's first. The one way past the first is its
 * reservation (SEM_RESERVE_MS, 50 ms) running out before it takes the permit, which the
 * next waiter's look then finds (a stall: under the address sanitizer and a parallel ctest
 * the operation served first was once not the line's first): allowed only when the permit
 * went 50 ms or more after the release. */
Test(async, operations_of_one_thread_queue_in_the_line_each_in_its_place, .timeout = 60)
{
    enum { N = 4 };
    baton_client *c = th_client(NULL);
    cr_assert(eq(int, baton_client_set_callbacks(c, BATON_CALLBACKS_BATON), BATON_OK));
    const char *name = th_tmpname("as-line");
    baton_semaphore *s;
    cr_assert(eq(int, baton_semaphore_open(c, name, &s), BATON_OK));
    cr_assert(eq(int, baton_semaphore_try_set_permits(s, 0, NULL), BATON_OK));
    redisContext *r = th_redis();
    adone d[N];
    adone_init(d, N);
    char member[N][160]; /* operation i's member in the line */
    for (int i = 0; i < N; i++) {
        cr_assert(
            eq(int, baton_semaphore_acquire_async(s, 1, 20000, on_adone, &d[i], NULL), BATON_OK));
        int64_t t0 = th_ms();
        while (th_cmd_int(r, "ZCARD baton_semaphore_line:{%s}", name) < i + 1 &&
               th_ms() - t0 < 5000 * SLOW)
            th_sleep_ms(2);
        char now[N][160];
        cr_assert(eq(int, line_members(r, name, now, N), i + 1),
                  "operation %d queued in a place of its own", i);
        for (int k = 0; k < i; k++)
            cr_assert(eq(str, now[k], member[k]), "operation %d kept its place", k);
        memcpy(member[i], now[i], sizeof member[i]);
    }
    int passed = 0; /* releases whose permit did not go to the line's first */
    for (int j = 0; j < N; j++) {
        /* the waiters not served yet are all in the line (one passed comes back to its end) */
        int64_t t0 = th_ms();
        while (th_cmd_int(r, "ZCARD baton_semaphore_line:{%s}", name) < N - j &&
               th_ms() - t0 < 5000 * SLOW)
            th_sleep_ms(2);
        char now[N][160];
        cr_assert(eq(int, line_members(r, name, now, N), N - j), "release %d: the line", j);
        int first = -1;
        for (int k = 0; k < N; k++)
            if (strcmp(now[0], member[k]) == 0)
                first = k;
        cr_assert(ge(int, first, 0), "release %d: the line's first is an operation's", j);
        int64_t released = th_ms();
        cr_assert(eq(int, baton_semaphore_release(s, 1), BATON_OK));
        int64_t end = th_ms() + 5000 * SLOW;
        while (adone_count(d, N, BATON_OK) < j + 1 && th_ms() < end)
            th_sleep_ms(2);
        cr_assert(eq(int, adone_count(d, N, BATON_OK), j + 1), "one release, one operation");
        if (atomic_load(&d[first].rc) == BATON_OK)
            continue;
        int served = -1;
        for (int k = 0; k < N; k++)
            if (k != first && atomic_load(&d[k].rc) == BATON_OK &&
                atomic_load(&d[k].ms) >= released)
                served = k;
        cr_assert(ge(int, served, 0));
        cr_assert(ge(i64, atomic_load(&d[served].ms) - released, 50),
                  "release %d went to operation %d, %lld ms after it, not to the line's first "
                  "(operation %d) within its reservation",
                  j, served, (long long)(atomic_load(&d[served].ms) - released), first);
        passed++;
    }
    cr_log_info("the line's first passed over %d time(s) in %d releases", passed, N);
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS baton_semaphore_line:{%s}", name), 0));
    redisFree(r);
    baton_semaphore_close(s);
    baton_client_close(c);
}

static atomic_bool stalling;

/* A completion on baton's thread that holds that thread for 600 ms: the engine runs no
 * operation meanwhile. */
static void stall_engine(void *handle, baton_owner *owner, int rc, void *arg)
{
    (void)handle, (void)owner, (void)rc, (void)arg;
    atomic_store(&stalling, true);
    th_sleep_ms(600);
}

/* Holds s's client's engine for 600 ms from now: an operation whose completion, on baton's
 * thread (BATON_CALLBACKS_BATON), is stall_engine. */
static void hold_engine(baton_semaphore *s)
{
    atomic_store(&stalling, false);
    cr_assert(eq(int, baton_semaphore_acquire_async(s, 1, 0, stall_engine, NULL, NULL), BATON_OK));
    int64_t end = th_ms() + 2000 * SLOW;
    while (!atomic_load(&stalling) && th_ms() < end)
        th_sleep_ms(1);
    cr_assert(atomic_load(&stalling));
}

/* An operation woken by a release and cancelled before it ran again hands its wake-up to
 * the next waiter: the permit is taken at once, not after recheck_ms (60 s here). */
Test(async, a_cancelled_operation_hands_its_wake_up_on, .timeout = 60)
{
    baton_client *c = client_rechecking_late(), *other = th_client(NULL);
    cr_assert(eq(int, baton_client_set_callbacks(c, BATON_CALLBACKS_BATON), BATON_OK));
    const char *name = th_tmpname("as-pass");
    baton_semaphore *s, *so;
    cr_assert(eq(int, baton_semaphore_open(c, name, &s), BATON_OK));
    cr_assert(eq(int, baton_semaphore_open(other, name, &so), BATON_OK));
    cr_assert(eq(int, baton_semaphore_try_set_permits(s, 0, NULL), BATON_OK));
    adone d[3];
    adone_init(d, 3);
    baton_op *first;
    /* the first asleep is the first woken (asynchronous waiters: first armed, first fed) */
    cr_assert(
        eq(int, baton_semaphore_acquire_async(s, 1, 20000, on_adone, &d[0], &first), BATON_OK));
    th_sleep_ms(300 * SLOW);
    cr_assert(eq(int, baton_semaphore_acquire_async(s, 1, 20000, on_adone, &d[1], NULL), BATON_OK));
    th_sleep_ms(300 * SLOW);
    hold_engine(s);
    /* while the engine is held: a permit comes, the first is woken, then cancelled */
    cr_assert(eq(int, baton_semaphore_release(so, 1), BATON_OK));
    th_sleep_ms(100);
    cr_assert(eq(int, baton_op_cancel(first), BATON_OK));
    int64_t t0 = th_ms();
    int64_t end = t0 + 5000 * SLOW;
    while (atomic_load(&d[1].rc) == -100 && th_ms() < end)
        th_sleep_ms(5);
    cr_assert(eq(int, atomic_load(&d[0].rc), BATON_ECANCELED));
    cr_assert(eq(int, atomic_load(&d[1].rc), BATON_OK), "the second waiter: %d",
              atomic_load(&d[1].rc));
    cr_assert(lt(i64, atomic_load(&d[1].ms) - t0, 2000 * SLOW), "it got the permit %lld ms later",
              (long long)(atomic_load(&d[1].ms) - t0));
    int64_t left = -1;
    cr_assert(eq(int, baton_semaphore_available(so, &left), BATON_OK));
    cr_assert(eq(i64, left, 0));
    baton_semaphore_close(s);
    baton_semaphore_close(so);
    baton_client_close(c);
    baton_client_close(other);
}

typedef struct sem_taker {
    baton_semaphore *s;
    int rc;
    int64_t took_ms;
} sem_taker;

static void *take_one(void *arg)
{
    sem_taker *t = arg;
    int64_t t0 = th_ms();
    t->rc = baton_semaphore_try_acquire(t->s, 1, 20000);
    t->took_ms = th_ms() - t0;
    return NULL;
}

/* Turns are taken behind waiters that sleep, not behind waiters already woken: two
 * operations woken by a count of 5 (and held from trying by the stalled engine) take 2
 * permits, and a thread that asks meanwhile takes a third at once instead of sleeping
 * until recheck_ms (60 s here) beside 3 free permits. */
Test(async, a_newcomer_does_not_queue_behind_waiters_already_woken, .timeout = 60)
{
    baton_client *c = client_rechecking_late(), *other = th_client(NULL);
    cr_assert(eq(int, baton_client_set_callbacks(c, BATON_CALLBACKS_BATON), BATON_OK));
    const char *name = th_tmpname("as-woken-turn");
    baton_semaphore *s, *so;
    cr_assert(eq(int, baton_semaphore_open(c, name, &s), BATON_OK));
    cr_assert(eq(int, baton_semaphore_open(other, name, &so), BATON_OK));
    cr_assert(eq(int, baton_semaphore_try_set_permits(s, 0, NULL), BATON_OK));
    adone d[2];
    adone_init(d, 2);
    for (int i = 0; i < 2; i++)
        cr_assert(
            eq(int, baton_semaphore_acquire_async(s, 1, 20000, on_adone, &d[i], NULL), BATON_OK));
    th_sleep_ms(300 * SLOW); /* both asleep, counted among the waiters for 1 permit */
    hold_engine(s);
    cr_assert(eq(int, baton_semaphore_add_permits(so, 5), BATON_OK));
    th_sleep_ms(50); /* the message woke both; the engine runs neither yet */
    sem_taker t = {s, -100, 0};
    pthread_t th;
    pthread_create(&th, NULL, take_one, &t);
    pthread_join(th, NULL);
    cr_assert(eq(int, t.rc, BATON_OK));
    cr_assert(lt(i64, t.took_ms, 2000 * SLOW), "the newcomer took %lld ms", (long long)t.took_ms);
    int64_t end = th_ms() + 5000 * SLOW;
    while (adone_count(d, 2, BATON_OK) < 2 && th_ms() < end)
        th_sleep_ms(5);
    cr_assert(eq(int, adone_count(d, 2, BATON_OK), 2));
    int64_t left = -1;
    cr_assert(eq(int, baton_semaphore_available(so, &left), BATON_OK));
    cr_assert(eq(i64, left, 2));
    baton_semaphore_close(s);
    baton_semaphore_close(so);
    baton_client_close(c);
    baton_client_close(other);
}

/* ------------------------------------------------------------------ cancellation ----- */

typedef enum wait_kind {
    W_LOCK,
    W_FAIR,
    W_WRITE,
    W_LATCH,
    W_SEMAPHORE,
    W_PERMITS,
    W_KINDS
} wait_kind;

static const char *kind_name[W_KINDS] = {"lock",  "fair lock", "write lock",
                                         "latch", "semaphore", "permits"};

/* Handles whose client a test closed under their waiting threads: a program may not close
 * them any more (their client is gone); kept reachable here rather than leaked. */
static void *orphans[64];
static atomic_int norphans;

typedef struct blocked {
    baton_client *c;
    wait_kind kind;
    const char *name;
    bool orphan; /* the client is closed under the wait: keep the handle, do not close it */
    atomic_int started;
    void *handle; /* what it waits through (set before started) */
    atomic_int returned;
    int rc;
    int64_t returned_us;
} blocked;

#define DONE_WITH(h, close_fn)                                                                     \
    do {                                                                                           \
        if (b->orphan)                                                                             \
            orphans[atomic_fetch_add(&norphans, 1)] = (h);                                         \
        else                                                                                       \
            close_fn(h);                                                                           \
    } while (0)

static void *block_in_wait(void *arg)
{
    blocked *b = arg;
    baton_client *c = b->c;
    switch (b->kind) {
    case W_LOCK:
    case W_FAIR: {
        baton_lock *l;
        if (b->kind == W_LOCK)
            baton_lock_open(c, b->name, &l);
        else
            baton_fairlock_open(c, b->name, &l);
        b->handle = l;
        atomic_store(&b->started, 1);
        b->rc = baton_lock_acquire(l, BATON_LEASE_WATCHDOG);
        b->returned_us = baton__now_us();
        atomic_store(&b->returned, 1);
        DONE_WITH(l, baton_lock_close);
        break;
    }
    case W_WRITE: {
        baton_rwlock *rw;
        baton_rwlock_open(c, b->name, &rw);
        b->handle = baton_rwlock_write(rw);
        atomic_store(&b->started, 1);
        b->rc = baton_lock_acquire(baton_rwlock_write(rw), BATON_LEASE_WATCHDOG);
        b->returned_us = baton__now_us();
        atomic_store(&b->returned, 1);
        DONE_WITH(rw, baton_rwlock_close);
        break;
    }
    case W_LATCH: {
        baton_latch *l;
        baton_latch_open(c, b->name, &l);
        b->handle = l;
        atomic_store(&b->started, 1);
        b->rc = baton_latch_await(l, BATON_WAIT_FOREVER);
        b->returned_us = baton__now_us();
        atomic_store(&b->returned, 1);
        DONE_WITH(l, baton_latch_close);
        break;
    }
    case W_SEMAPHORE: {
        baton_semaphore *s;
        baton_semaphore_open(c, b->name, &s);
        b->handle = s;
        atomic_store(&b->started, 1);
        b->rc = baton_semaphore_acquire(s, 1);
        b->returned_us = baton__now_us();
        atomic_store(&b->returned, 1);
        DONE_WITH(s, baton_semaphore_close);
        break;
    }
    case W_PERMITS: {
        baton_permits *p;
        char id[BATON_PERMIT_ID_SIZE];
        baton_permits_open(c, b->name, &p);
        b->handle = p;
        atomic_store(&b->started, 1);
        b->rc = baton_permits_acquire(p, 10000, id);
        b->returned_us = baton__now_us();
        atomic_store(&b->returned, 1);
        DONE_WITH(p, baton_permits_close);
        break;
    }
    default:
        break;
    }
    return NULL;
}

/* Makes name something a waiter of kind k must wait for (held by `other`). */
static void make_busy(baton_client *other, wait_kind k, const char *name, void **keep)
{
    *keep = NULL;
    switch (k) {
    case W_LOCK:
    case W_FAIR: {
        baton_lock *l;
        cr_assert(eq(int,
                     k == W_LOCK ? baton_lock_open(other, name, &l)
                                 : baton_fairlock_open(other, name, &l),
                     BATON_OK));
        cr_assert(eq(int, baton_lock_acquire(l, 20000), BATON_OK));
        *keep = l;
        break;
    }
    case W_WRITE: {
        baton_rwlock *rw;
        cr_assert(eq(int, baton_rwlock_open(other, name, &rw), BATON_OK));
        cr_assert(eq(int, baton_lock_acquire(baton_rwlock_read(rw), 20000), BATON_OK));
        *keep = rw;
        break;
    }
    case W_LATCH: {
        baton_latch *l;
        cr_assert(eq(int, baton_latch_open(other, name, &l), BATON_OK));
        cr_assert(eq(int, baton_latch_try_set_count(l, 1, NULL), BATON_OK));
        baton_latch_close(l);
        break;
    }
    case W_SEMAPHORE: {
        baton_semaphore *s;
        cr_assert(eq(int, baton_semaphore_open(other, name, &s), BATON_OK));
        cr_assert(eq(int, baton_semaphore_try_set_permits(s, 0, NULL), BATON_OK));
        baton_semaphore_close(s);
        break;
    }
    case W_PERMITS: {
        baton_permits *p;
        cr_assert(eq(int, baton_permits_open(other, name, &p), BATON_OK));
        cr_assert(eq(int, baton_permits_try_set_permits(p, 0, NULL), BATON_OK));
        baton_permits_close(p);
        break;
    }
    default:
        break;
    }
}

static void unbusy(wait_kind k, void *keep)
{
    if (k == W_LOCK || k == W_FAIR) {
        cr_assert(eq(int, baton_lock_release(keep), BATON_OK));
        baton_lock_close(keep);
    } else if (k == W_WRITE) {
        cr_assert(eq(int, baton_lock_release(baton_rwlock_read(keep)), BATON_OK));
        baton_rwlock_close(keep);
    }
}

/* Nothing left behind by the cancelled waits on name: no queue entry, no write claim, no
 * subscription. */
static void assert_nothing_left(redisContext *r, const char *name, wait_kind k)
{
    cr_assert(eq(int, th_cmd_int(r, "EXISTS redisson_lock_queue:{%s}", name), 0));
    cr_assert(eq(int, th_cmd_int(r, "ZCARD redisson_lock_timeout:{%s}", name), 0));
    redisReply *rep = th_cmd(r, "PUBSUB CHANNELS *%s*", name);
    cr_assert(eq(sz, rep->elements, 0), "%s: a subscription is left", kind_name[k]);
    freeReplyObject(rep);
}

/* A thread's wait returned after a cancellation at t0_us: BATON_ECANCELED, in time. */
static void assert_cancelled(const blocked *b, int64_t t0_us, const char *what)
{
    double ms = (b->returned_us - t0_us) / 1000.0;
    fprintf(stderr, "cancel %s %-10s: returned %s after %.2f ms\n", what, kind_name[b->kind],
            baton_err_name(b->rc), ms);
    cr_assert(eq(int, b->rc, BATON_ECANCELED), "%s", kind_name[b->kind]);
    cr_assert(le(dbl, ms, 10.0 * SLOW), "%s took %.2f ms", kind_name[b->kind], ms);
}

Test(async, each_blocking_wait_is_cancelled_within_10_ms, .timeout = 60)
{
    baton_client *other = th_client(NULL);
    redisContext *r = th_redis();
    for (wait_kind k = 0; k < W_KINDS; k++) {
        baton_client *c = th_client(NULL);
        blocked b = {.c = c, .kind = k, .name = th_tmpname("cancel"), .rc = -100};
        void *keep;
        make_busy(other, k, b.name, &keep);
        pthread_t t;
        pthread_create(&t, NULL, block_in_wait, &b);
        while (!atomic_load(&b.started))
            th_sleep_ms(1);
        th_sleep_ms(150); /* subscribed and asleep */
        int64_t t0 = baton__now_us();
        cr_assert(eq(int, baton_client_cancel_waits(c), BATON_OK));
        pthread_join(t, NULL);
        assert_cancelled(&b, t0, "client");
        assert_nothing_left(r, b.name, k);
        unbusy(k, keep);
        /* a wait that starts after the cancellation is not affected */
        if (k == W_LOCK) {
            baton_lock *l;
            cr_assert(eq(int, baton_lock_open(c, b.name, &l), BATON_OK));
            cr_assert(eq(int, baton_lock_try_acquire(l, 2000, 5000), BATON_OK));
            cr_assert(eq(int, baton_lock_release(l), BATON_OK));
            baton_lock_close(l);
        }
        baton_client_close(c);
    }
    redisFree(r);
    baton_client_close(other);
}

static int cancel_handle(wait_kind k, void *h)
{
    switch (k) {
    case W_LATCH:
        return baton_latch_cancel_waits(h);
    case W_SEMAPHORE:
        return baton_semaphore_cancel_waits(h);
    case W_PERMITS:
        return baton_permits_cancel_waits(h);
    default:
        return baton_lock_cancel_waits(h);
    }
}

/* Issue 13's per-handle cancellation: two threads wait on the same name through two
 * handles of one client; cancelling one handle's waits returns that thread alone. */
Test(async, a_handles_waits_are_cancelled_alone_within_10_ms, .timeout = 90)
{
    baton_client *other = th_client(NULL);
    redisContext *r = th_redis();
    for (wait_kind k = 0; k < W_KINDS; k++) {
        baton_client *c = th_client(NULL);
        const char *name = th_tmpname("hcancel");
        blocked b1 = {.c = c, .kind = k, .name = name, .rc = -100};
        blocked b2 = {.c = c, .kind = k, .name = name, .rc = -100};
        void *keep;
        make_busy(other, k, name, &keep);
        pthread_t t1, t2;
        pthread_create(&t1, NULL, block_in_wait, &b1);
        pthread_create(&t2, NULL, block_in_wait, &b2);
        while (!atomic_load(&b1.started) || !atomic_load(&b2.started))
            th_sleep_ms(1);
        th_sleep_ms(150); /* subscribed and asleep */
        int64_t t0 = baton__now_us();
        cr_assert(eq(int, cancel_handle(k, b1.handle), BATON_OK));
        pthread_join(t1, NULL);
        assert_cancelled(&b1, t0, "handle");
        th_sleep_ms(100);
        cr_assert(eq(int, atomic_load(&b2.returned), 0), "%s: the other handle's wait goes on",
                  kind_name[k]);
        cr_assert(eq(int, baton_client_cancel_waits(c), BATON_OK));
        pthread_join(t2, NULL);
        cr_assert(eq(int, b2.rc, BATON_ECANCELED), "%s", kind_name[k]);
        assert_nothing_left(r, name, k);
        unbusy(k, keep);
        baton_client_close(c);
    }
    /* an asynchronous acquisition on the handle is cancelled too; NULL is refused */
    baton_client *c = th_client(NULL);
    const char *name = th_tmpname("hcancel-op");
    void *keep;
    make_busy(other, W_LOCK, name, &keep);
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(c, name, &l), BATON_OK));
    done d = {0};
    cr_assert(eq(int,
                 baton_lock_acquire_async(l, NULL, BATON_WAIT_FOREVER, BATON_LEASE_WATCHDOG,
                                          on_done, &d, NULL),
                 BATON_OK));
    th_sleep_ms(100);
    cr_assert(eq(int, baton_lock_cancel_waits(l), BATON_OK));
    run_until(c, &d, 1);
    cr_assert(eq(int, d.rc[0], BATON_ECANCELED));
    cr_assert(eq(int, baton_lock_cancel_waits(NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_semaphore_cancel_waits(NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_latch_cancel_waits(NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_permits_cancel_waits(NULL), BATON_EINVAL));
    unbusy(W_LOCK, keep);
    baton_lock_close(l);
    baton_client_close(c);
    redisFree(r);
    baton_client_close(other);
}

Test(async, an_async_operation_is_cancelled_within_10_ms, .timeout = 30)
{
    baton_client *c = th_client(NULL), *other = th_client(NULL);
    redisContext *r = th_redis();
    const char *name = th_tmpname("as-cancel");
    void *keep;
    make_busy(other, W_FAIR, name, &keep);
    baton_lock *l;
    cr_assert(eq(int, baton_fairlock_open(c, name, &l), BATON_OK));
    done d = {0};
    baton_op *op;
    cr_assert(eq(int,
                 baton_lock_acquire_async(l, NULL, BATON_WAIT_FOREVER, BATON_LEASE_WATCHDOG,
                                          on_done, &d, &op),
                 BATON_OK));
    th_sleep_ms(150);
    cr_assert(eq(int, th_cmd_int(r, "LLEN redisson_lock_queue:{%s}", name), 1), "queued");
    int64_t t0 = th_ms();
    cr_assert(eq(int, baton_op_cancel(op), BATON_OK));
    run_until(c, &d, 1);
    cr_assert(eq(int, d.rc[0], BATON_ECANCELED));
    fprintf(stderr, "cancel async fair lock: completed after %lld ms\n",
            (long long)(d.at_ms[0] - t0));
    cr_assert(le(i64, d.at_ms[0] - t0, 10 * SLOW));
    cr_assert(eq(int, th_cmd_int(r, "EXISTS redisson_lock_queue:{%s}", name), 0));
    cr_assert(eq(int,
                 th_numsub(r, "redisson_lock__channel:{%s}:%s:%llu", name, baton_client_id(c),
                           (unsigned long long)baton__thread_id()),
                 0));
    unbusy(W_FAIR, keep);
    baton_lock_close(l);
    redisFree(r);
    baton_client_close(c);
    baton_client_close(other);
}

/* The evloop example's stall: a program answers its last request, its loop ends and it
 * closes the lock handles and the client while that request's asynchronous release is
 * still queued. The close cancelled the release before it started (BATON_ECANCELED, the
 * hold left in Redis, unrenewed once the process exited: the next program to use the lock
 * waited out the lease), and a handle closed under a running release was freed beneath it.
 * A release is not a wait: cancellation, handle close and client close all let it run. */
Test(async, a_release_in_flight_survives_cancel_and_close, .timeout = 60)
{
    baton_client *c = th_client(NULL);
    redisContext *r = th_redis();
    const char *name = th_tmpname("as-rel");
    baton_lock *l;
    baton_owner *o;
    cr_assert(eq(int, baton_lock_open(c, name, &l), BATON_OK));
    cr_assert(eq(int, baton_owner_new(c, &o), BATON_OK));
    /* cancelled at once, before an engine could start it: every round */
    for (int i = 0; i < 20; i++) {
        cr_assert(eq(int, baton_lock_try_acquire_as(l, o, 0, BATON_LEASE_WATCHDOG), BATON_OK));
        done d = {0};
        baton_op *op;
        cr_assert(eq(int, baton_lock_release_async(l, o, on_done, &d, &op), BATON_OK));
        cr_assert(eq(int, baton_op_cancel(op), BATON_OK));
        cr_assert(eq(int, baton_client_cancel_waits(c), BATON_OK));
        run_until(c, &d, 1);
        cr_assert(eq(int, d.rc[0], BATON_OK), "round %d: the release ran", i);
        cr_assert(eq(int, th_cmd_int(r, "EXISTS %s", name), 0), "round %d: nothing held", i);
    }
    /* the example's ending: the handle closed with a release queued, then the client */
    cr_assert(eq(int, baton_lock_try_acquire_as(l, o, 0, BATON_LEASE_WATCHDOG), BATON_OK));
    done d = {0};
    cr_assert(eq(int, baton_lock_release_async(l, o, on_done, &d, NULL), BATON_OK));
    baton_lock_close(l); /* waits for the release: it never runs on a freed handle */
    cr_assert(eq(int, th_cmd_int(r, "EXISTS %s", name), 0), "released before the handle went");
    baton_client_close(c); /* runs the callback still pending */
    cr_assert(eq(int, d.n, 1));
    cr_assert(eq(int, d.rc[0], BATON_OK));
    baton_owner_free(o);
    redisFree(r);
}

Test(async, close_with_waiters_cancels_them, .timeout = 60)
{
    baton_client *c = th_client(NULL), *other = th_client(NULL);
    redisContext *r = th_redis();
    blocked b[W_KINDS];
    void *keep[W_KINDS];
    pthread_t t[W_KINDS];
    for (wait_kind k = 0; k < W_KINDS; k++) {
        b[k] =
            (blocked){.c = c, .kind = k, .name = th_tmpname("close"), .orphan = true, .rc = -100};
        make_busy(other, k, b[k].name, &keep[k]);
        pthread_create(&t[k], NULL, block_in_wait, &b[k]);
    }
    /* and asynchronous operations in progress on a fair lock */
    const char *fname = th_tmpname("close-async");
    void *fkeep;
    make_busy(other, W_FAIR, fname, &fkeep);
    baton_lock *fl;
    cr_assert(eq(int, baton_fairlock_open(c, fname, &fl), BATON_OK));
    done d = {0};
    for (int i = 0; i < 3; i++) {
        baton_owner *o;
        cr_assert(eq(int, baton_owner_new(c, &o), BATON_OK));
        cr_assert(eq(int,
                     baton_lock_acquire_async(fl, o, BATON_WAIT_FOREVER, BATON_LEASE_WATCHDOG,
                                              on_done, &d, NULL),
                     BATON_OK));
        baton_owner_free(o); /* the callback does not use it */
    }
    for (wait_kind k = 0; k < W_KINDS; k++)
        while (!atomic_load(&b[k].started))
            th_sleep_ms(1);
    th_sleep_ms(200);
    cr_assert(eq(int, th_cmd_int(r, "LLEN redisson_lock_queue:{%s}", fname), 3));
    /* the threads return BATON_ECANCELED; their handles outlive the client (orphans) */
    int64_t t0 = th_ms();
    baton_client_close(c);
    int64_t closed = th_ms() - t0;
    for (wait_kind k = 0; k < W_KINDS; k++) {
        pthread_join(t[k], NULL);
        cr_assert(eq(int, b[k].rc, BATON_ECANCELED), "%s", kind_name[k]);
    }
    cr_assert(eq(int, d.n, 3), "every pending callback ran in close");
    for (int i = 0; i < 3; i++)
        cr_assert(eq(int, d.rc[i], BATON_ECANCELED));
    fprintf(stderr, "close with %d blocked threads and 3 async waiters: %lld ms\n", W_KINDS,
            (long long)closed);
    cr_assert(eq(int, th_cmd_int(r, "EXISTS redisson_lock_queue:{%s}", fname), 0));
    for (wait_kind k = 0; k < W_KINDS; k++)
        unbusy(k, keep[k]);
    unbusy(W_FAIR, fkeep);
    redisReply *rep = th_cmd(r, "PUBSUB CHANNELS *close*");
    cr_assert(eq(sz, rep->elements, 0), "a subscription is left");
    freeReplyObject(rep);
    redisFree(r);
    baton_client_close(other);
    orphans[atomic_fetch_add(&norphans, 1)] = fl; /* its client is gone: not closable */
}

/* ------------------------------------------------------------------ fork ------------- */

typedef struct fork_arg {
    baton_client *c;
    baton_lock *l;
    baton_owner *o;
} fork_arg;

/* The child: outlives the parent's lease using the copied client; every call must be
 * refused before anything is sent. Exit status: 0, or which check failed. */
static int child_uses_copy(void *arg)
{
    fork_arg *a = arg;
    th_sleep_ms(700); /* > the 300 ms lease: only the parent's renewals keep the lock */
    bool b;
    int64_t n;
    baton_owner *o2;
    int fd;
    if (baton_lock_release(a->l) != BATON_ENOTSUP)
        return 1;
    if (strstr(baton_client_errmsg(a->c), "fork") == NULL)
        return 2;
    if (baton_lock_release_as(a->l, a->o) != BATON_ENOTSUP)
        return 3;
    if (baton_lock_try_acquire(a->l, 0, 1000) != BATON_ENOTSUP)
        return 4;
    if (baton_lock_is_locked(a->l, &b) != BATON_ENOTSUP ||
        baton_lock_hold_count(a->l, &n) != BATON_ENOTSUP)
        return 5;
    if (baton_owner_new(a->c, &o2) != BATON_ENOTSUP)
        return 6;
    if (baton_lock_acquire_async(a->l, a->o, 0, 1000, on_done, NULL, NULL) != BATON_ENOTSUP ||
        baton_client_async_fd(a->c, &fd) != BATON_ENOTSUP ||
        baton_client_process(a->c) != BATON_ENOTSUP ||
        baton_client_cancel_waits(a->c) != BATON_ENOTSUP)
        return 7;
    /* and no object opens on the copy: each open refuses it, before the name is looked at */
    baton_lock *l2 = (baton_lock *)1;
    baton_latch *la = (baton_latch *)1;
    baton_semaphore *s = (baton_semaphore *)1;
    baton_rwlock *rw = (baton_rwlock *)1;
    baton_permits *p = (baton_permits *)1;
    if (baton_lock_open(a->c, "fork-x", &l2) != BATON_ENOTSUP || l2 ||
        baton_fairlock_open(a->c, "fork-x", &l2) != BATON_ENOTSUP || l2 ||
        baton_latch_open(a->c, "fork-x", &la) != BATON_ENOTSUP || la ||
        baton_semaphore_open(a->c, "fork-x", &s) != BATON_ENOTSUP || s ||
        baton_rwlock_open(a->c, "", &rw) != BATON_ENOTSUP || rw ||
        baton_permits_open(a->c, "fork-x", &p) != BATON_ENOTSUP || p)
        return 8;
    th_sleep_ms(300);
    baton_lock_close(a->l);
    baton_client_close(a->c); /* frees the child's copy; the parent's sockets stay open */
    return 0;
}

Test(async, fork_child_never_acts_on_the_parents_holds, .timeout = 30)
{
    baton_options opts;
    baton_options_init(&opts);
    opts.watchdog_ms = 300; /* renewed every 100 ms */
    baton_client *c = th_client(&opts);
    redisContext *r = th_redis();
    baton_lock *l;
    baton_owner *o;
    const char *name = th_tmpname("fork");
    cr_assert(eq(int, baton_lock_open(c, name, &l), BATON_OK));
    cr_assert(eq(int, baton_owner_new(c, &o), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(l, BATON_LEASE_WATCHDOG), BATON_OK));
    char field[128];
    snprintf(field, sizeof field, "%s:%llu", baton_client_id(c),
             (unsigned long long)baton__thread_id());
    th_sleep_ms(150);
    uint64_t rounds0 = baton__watchdog_rounds(c);
    freeReplyObject(th_cmd(r, "CONFIG RESETSTAT"));
    fork_arg a = {c, l, o};
    pid_t kid = th_fork(child_uses_copy, &a);
    int st = th_wait(kid);
    cr_assert(eq(int, st, 0), "the child's check %d failed", st);
    /* 1 s later, past three leases: still the parent's, renewed by the parent */
    cr_assert(eq(int, th_cmd_int(r, "HGET %s %s", name, field), 1));
    cr_assert(gt(int, th_cmd_int(r, "PTTL %s", name), 0));
    uint64_t rounds = baton__watchdog_rounds(c) - rounds0;
    cr_assert(ge(u64, rounds, 5), "the parent renewed");
    /* nothing released or published, and no script ran but the parent's renewals */
    cr_assert(eq(i64, th_cmdstat(r, "publish"), 0));
    cr_assert(eq(i64, th_cmdstat(r, "hincrby"), 0));
    cr_assert(eq(i64, th_cmdstat(r, "del"), 0));
    long long scripts = th_cmdstat(r, "evalsha") + th_cmdstat(r, "eval");
    fprintf(stderr, "fork: the parent renewed %llu times while its child ran; %lld scripts ran\n",
            (unsigned long long)rounds, scripts);
    cr_assert(le(i64, scripts, (long long)baton__watchdog_rounds(c) - (long long)rounds0));
    /* the parent's connections still work after the child closed its copies */
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    cr_assert(eq(int, th_cmd_int(r, "EXISTS %s", name), 0));
    baton_owner_free(o);
    baton_lock_close(l);
    redisFree(r);
    baton_client_close(c);
}

/* ------------------------------------------------------------------ many waiters ---- */

static long long proc_rss(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long long size = 0, res = 0;
    cr_assert(f != NULL && fscanf(f, "%lld %lld", &size, &res) == 2, "/proc/self/statm");
    fclose(f);
    return res * sysconf(_SC_PAGESIZE);
}

static long proc_maps(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    cr_assert(f != NULL, "/proc/self/maps");
    long lines = 0;
    int ch;
    while ((ch = fgetc(f)) != EOF)
        lines += ch == '\n';
    fclose(f);
    return lines;
}

static atomic_int many_ok, many_bad;

static void on_many(void *handle, baton_owner *owner, int rc, void *arg)
{
    (void)handle, (void)owner, (void)arg;
    atomic_fetch_add(rc == BATON_OK ? &many_ok : &many_bad, 1);
}

/* Issue 49: each waiter was a fiber with a 256 KiB stack of its own (an mmap and a guard
 * page: two of vm.max_map_count's 65,530 mappings), 15-19 KB of memory each. 20,000
 * waiters on 20,000 names, each held by a foreign owner in Redisson's layout, then every
 * hold released as Redisson's unlock does (DEL, PUBLISH "0"): all acquire, at a few
 * hundred mappings in all, under 3 KB each with their handles. (Sanitizers: fewer waiters,
 * and their own memory is not counted; ThreadSanitizer keeps a thread's state, mapped, for
 * each fiber.) */
Test(async, twenty_thousand_waiters_need_no_stack_each, .timeout = 120)
{
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
    enum { N = 2000 };
#else
    enum { N = 20000 };
#endif
    baton_options o;
    baton_options_init(&o);
    /* a waiter of the line listens on its own channel and looks by itself every 50 ms (not
     * what this measures: the line is issue 49's item 2) */
    o.starve_ms = BATON_STARVE_NEVER;
    baton_client *c = th_client(&o);
    redisContext *r = th_redis();
    char prefix[96];
    snprintf(prefix, sizeof prefix, "%s", th_tmpname("many"));
    char name[160];
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "%s:%d", prefix, i);
        redisAppendCommand(r, "HSET %s 6e0f0261-922f-4ca9-9275-5cd246e2e294:57 1", name);
        redisAppendCommand(r, "PEXPIRE %s 120000", name);
    }
    for (int i = 0; i < 2 * N; i++) {
        redisReply *rep = NULL;
        cr_assert(eq(int, redisGetReply(r, (void **)&rep), REDIS_OK));
        freeReplyObject(rep);
    }
    int fd;
    cr_assert(eq(int, baton_client_async_fd(c, &fd), BATON_OK));
    baton_lock **ls = calloc(N, sizeof *ls);
    cr_assert(ls != NULL);
    long long rss0 = proc_rss();
    long maps0 = proc_maps();
    atomic_store(&many_ok, 0);
    atomic_store(&many_bad, 0);
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "%s:%d", prefix, i);
        cr_assert(eq(int, baton_lock_open(c, name, &ls[i]), BATON_OK));
        cr_assert(eq(int,
                     baton_lock_acquire_async(ls[i], NULL, BATON_WAIT_FOREVER, BATON_LEASE_WATCHDOG,
                                              on_many, NULL, NULL),
                     BATON_OK));
    }
    /* every waiter asleep: its attempt before its subscription and the one after it ran */
    int64_t t0 = th_ms();
    baton_stats st;
    for (;;) {
        cr_assert(eq(int, baton_client_stats(c, &st), BATON_OK));
        if (st.kind[BATON_KIND_LOCK].attempts >= 2 * (uint64_t)N && st.subscribes >= (uint64_t)N)
            break;
        cr_assert(lt(i64, th_ms() - t0, 90000), "%llu attempts, %llu subscribes after 90 s",
                  (unsigned long long)st.kind[BATON_KIND_LOCK].attempts,
                  (unsigned long long)st.subscribes);
        struct pollfd p = {fd, POLLIN, 0};
        poll(&p, 1, 10);
        baton_client_process(c);
    }
    long long per = (proc_rss() - rss0) / N;
    long maps = proc_maps() - maps0;
    cr_assert(eq(int, atomic_load(&many_ok) + atomic_load(&many_bad), 0),
              "%d acquired, %d failed while the names were held", atomic_load(&many_ok),
              atomic_load(&many_bad));
    int64_t t1 = th_ms();
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "%s:%d", prefix, i);
        redisAppendCommand(r, "DEL %s", name);
        redisAppendCommand(r, "PUBLISH redisson_lock__channel:{%s} 0", name);
    }
    for (int i = 0; i < 2 * N; i++) {
        redisReply *rep = NULL;
        cr_assert(eq(int, redisGetReply(r, (void **)&rep), REDIS_OK));
        freeReplyObject(rep);
    }
    while (atomic_load(&many_ok) + atomic_load(&many_bad) < N && th_ms() - t1 < 60000) {
        struct pollfd p = {fd, POLLIN, 0};
        poll(&p, 1, 10);
        baton_client_process(c);
    }
    int64_t t2 = th_ms();
    fprintf(stderr,
            "%d waiters: %lld bytes each with their handles, %ld mappings more; asleep after "
            "%lld ms, all through %lld ms after the first release\n",
            N, per, maps, (long long)(t1 - t0), (long long)(t2 - t1));
    cr_assert(eq(int, atomic_load(&many_bad), 0), "%d acquisitions failed", atomic_load(&many_bad));
    cr_assert(eq(int, atomic_load(&many_ok), N), "%d of %d acquired within 60 s",
              atomic_load(&many_ok), N);
#if !defined(__SANITIZE_THREAD__) /* ThreadSanitizer maps its own state for each fiber */
    cr_assert(lt(long, maps, 1000), "%ld mappings for %d waiters", maps, N);
#endif
#if !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
    cr_assert(le(i64, per, 3072), "%lld bytes per waiter", per);
#endif
    for (int i = 0; i < N; i++) {
        cr_assert(eq(int, baton_lock_release(ls[i]), BATON_OK));
        baton_lock_close(ls[i]);
    }
    free(ls);
    redisFree(r);
    baton_client_close(c);
}
