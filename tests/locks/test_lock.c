/*
 * The reentrant lock against a real redis-server: mutual exclusion across threads and
 * processes, expiry, waits, reentrancy, the watchdog, subscriptions, script-cache flushes,
 * a killed subscriber connection, bad input and server faults.
 */
#define _GNU_SOURCE
#include "helper.h"
#include "internal.h"
#include "lockbase.h" /* the watchdog's rounds */

#include "new_assert.h"
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

TestSuite(lock, .timeout = 60);

/* ---------------------------------------------------------------- mutual exclusion --- */

typedef struct counter_job {
    const char *name;
    const char *counter;
    int iterations;
    int errors;
} counter_job;

/* acquire, GET, pause 1 ms, SET + 1, release: lost updates show a broken lock */
static int count_with_lock(counter_job *j, baton_client *c, redisContext *r)
{
    baton_lock *l;
    if (baton_lock_open(c, j->name, &l) != BATON_OK)
        return 1;
    int errors = 0;
    for (int i = 0; i < j->iterations; i++) {
        if (baton_lock_acquire(l, BATON_LEASE_WATCHDOG) != BATON_OK) {
            errors++;
            continue;
        }
        redisReply *rep = redisCommand(r, "GET %s", j->counter);
        long long v = rep && rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : 0;
        if (rep)
            freeReplyObject(rep);
        th_sleep_ms(1);
        rep = redisCommand(r, "SET %s %lld", j->counter, v + 1);
        if (rep)
            freeReplyObject(rep);
        if (baton_lock_release(l) != BATON_OK)
            errors++;
    }
    baton_lock_close(l);
    return errors;
}

static void *counter_thread(void *arg)
{
    counter_job *j = arg;
    baton_client *c = th_client(NULL);
    redisContext *r = th_redis();
    j->errors = count_with_lock(j, c, r);
    redisFree(r);
    baton_client_close(c);
    return NULL;
}

Test(lock, sixteen_threads_sixteen_clients_no_lost_update)
{
    const char *name = th_tmpname("lk-threads"), *counter = th_tmpname("ctr");
    counter_job jobs[16];
    pthread_t t[16];
    for (int i = 0; i < 16; i++) {
        jobs[i] = (counter_job){name, counter, 100, 0};
        pthread_create(&t[i], NULL, counter_thread, &jobs[i]);
    }
    for (int i = 0; i < 16; i++) {
        pthread_join(t[i], NULL);
        cr_assert(eq(int, jobs[i].errors, 0), "thread %d", i);
    }
    redisContext *r = th_redis();
    cr_assert(eq(i64, th_cmd_int(r, "GET %s", counter), 1600));
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s", name), 0));
    redisFree(r);
}

static int counter_process(void *arg)
{
    counter_job *j = arg;
    baton_client *c;
    baton_options o;
    baton_options_init(&o);
    o.url = th_url();
    if (baton_client_open(&o, &c) != BATON_OK)
        return 100;
    struct timeval tv = {5, 0};
    redisContext *r = redisConnectWithTimeout("127.0.0.1", th_port(), tv);
    int errors = count_with_lock(j, c, r);
    redisFree(r);
    baton_client_close(c);
    return errors > 99 ? 99 : errors;
}

Test(lock, eight_processes_no_lost_update)
{
    const char *name = th_tmpname("lk-procs"), *counter = th_tmpname("ctr");
    counter_job job = {name, counter, 200, 0};
    pid_t pids[8];
    for (int i = 0; i < 8; i++)
        pids[i] = th_fork((int (*)(void *))counter_process, &job);
    for (int i = 0; i < 8; i++)
        cr_assert(eq(int, th_wait(pids[i]), 0), "process %d", i);
    redisContext *r = th_redis();
    cr_assert(eq(i64, th_cmd_int(r, "GET %s", counter), 1600));
    redisFree(r);
}

/* ---------------------------------------------------------------- expiry and waits --- */

typedef struct waiter {
    baton_lock *lock;
    int64_t wait_ms, lease_ms;
    int rc;
    int64_t done_ms;
} waiter;

static void *try_acquire_thread(void *arg)
{
    waiter *w = arg;
    w->rc = baton_lock_try_acquire(w->lock, w->wait_ms, w->lease_ms);
    w->done_ms = th_ms();
    return NULL;
}

static void *acquire_release_thread(void *arg)
{
    waiter *w = arg;
    w->rc = baton_lock_try_acquire(w->lock, w->wait_ms, w->lease_ms);
    w->done_ms = th_ms();
    if (w->rc == BATON_OK)
        w->rc = baton_lock_release(w->lock);
    return NULL;
}

Test(lock, expired_lease_frees_the_lock_without_a_message)
{
    baton_client *c = th_client(NULL);
    const char *name = th_tmpname("lk-expiry");
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(c, name, &l), BATON_OK));
    int64_t t0 = th_ms();
    cr_assert(eq(int, baton_lock_acquire(l, 2000), BATON_OK)); /* "thread A" = this one */
    waiter b = {l, BATON_WAIT_FOREVER, 10000, -100, 0};
    pthread_t t;
    pthread_create(&t, NULL, try_acquire_thread, &b);
    pthread_join(t, NULL);
    cr_assert(eq(int, b.rc, BATON_OK));
    int64_t took = b.done_ms - t0;
    cr_assert(ge(i64, took, 1990), "B acquired after %lld ms", (long long)took);
    cr_assert(le(i64, took, 2300), "B acquired after %lld ms", (long long)took);
    cr_assert(eq(int, baton_lock_release(l), BATON_ENOTHELD));
    cr_assert(ne(str, (char *)baton_client_errmsg(c), ""));
    /* B still holds it */
    bool locked = false;
    cr_assert(eq(int, baton_lock_is_locked(l, &locked), BATON_OK));
    cr_assert(locked);
    baton_lock_close(l);
    baton_client_close(c);
}

Test(lock, try_acquire_times_out_on_time)
{
    baton_client *holder = th_client(NULL), *other = th_client(NULL);
    const char *name = th_tmpname("lk-timeout");
    baton_lock *lh, *lo;
    cr_assert(eq(int, baton_lock_open(holder, name, &lh), BATON_OK));
    cr_assert(eq(int, baton_lock_open(other, name, &lo), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(lh, BATON_LEASE_WATCHDOG), BATON_OK));
    int64_t t0 = th_ms();
    cr_assert(eq(int, baton_lock_try_acquire(lo, 3000, BATON_LEASE_WATCHDOG), BATON_ETIMEDOUT));
    int64_t took = th_ms() - t0;
    cr_assert(ge(i64, took, 2990), "%lld ms", (long long)took);
    cr_assert(le(i64, took, 3350), "%lld ms", (long long)took);
    /* nothing left behind: no subscription on the waiter's client */
    cr_assert(eq(int, baton__sub_count(other), 0));
    redisContext *r = th_redis();
    cr_assert(eq(i64, th_numsub(r, "redisson_lock__channel:{%s}", name), 0));
    redisFree(r);
    cr_assert(eq(int, baton_lock_try_acquire(lo, 0, 1000), BATON_ETIMEDOUT));
    cr_assert(eq(int, baton_lock_release(lh), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(lo, 0, 1000), BATON_OK));
    cr_assert(eq(int, baton_lock_release(lo), BATON_OK));
    baton_lock_close(lh);
    baton_lock_close(lo);
    baton_client_close(holder);
    baton_client_close(other);
}

/* ---------------------------------------------------------------- reentrancy --------- */

static void *try_once_thread(void *arg)
{
    waiter *w = arg;
    w->rc = baton_lock_try_acquire(w->lock, 0, 5000);
    return NULL;
}

static int other_thread_try(baton_lock *l)
{
    waiter w = {l, 0, 5000, -100, 0};
    pthread_t t;
    pthread_create(&t, NULL, try_once_thread, &w);
    pthread_join(t, NULL);
    return w.rc;
}

static int64_t holds(baton_lock *l)
{
    int64_t n = -1;
    cr_assert(eq(int, baton_lock_hold_count(l, &n), BATON_OK));
    return n;
}

Test(lock, reentrancy_counts_holds)
{
    baton_client *c = th_client(NULL);
    const char *name = th_tmpname("lk-reentry");
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(c, name, &l), BATON_OK));
    cr_assert(eq(i64, holds(l), 0));
    cr_assert(eq(int, baton_lock_acquire(l, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(i64, holds(l), 1));
    cr_assert(eq(int, other_thread_try(l), BATON_ETIMEDOUT));
    cr_assert(eq(int, baton_lock_acquire(l, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(i64, holds(l), 2));
    bool held = false;
    cr_assert(eq(int, baton_lock_is_held_by_current_thread(l, &held), BATON_OK));
    cr_assert(held);
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    cr_assert(eq(i64, holds(l), 1));
    cr_assert(eq(int, other_thread_try(l), BATON_ETIMEDOUT));
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    cr_assert(eq(i64, holds(l), 0));
    cr_assert(eq(int, baton_lock_is_held_by_current_thread(l, &held), BATON_OK));
    cr_assert(not(held));
    cr_assert(eq(int, baton_lock_release(l), BATON_ENOTHELD));
    cr_assert(eq(int, other_thread_try(l), BATON_OK)); /* that thread ended holding it */
    baton_lock_close(l);
    baton_client_close(c);
}

Test(lock, remaining_ttl_follows_the_explicit_lease)
{
    baton_options o;
    baton_options_init(&o);
    o.watchdog_ms = 3000;
    baton_client *c = th_client(&o);
    const char *name = th_tmpname("lk-ttl");
    baton_lock *l;
    int64_t ttl = 0;
    cr_assert(eq(int, baton_lock_open(c, name, &l), BATON_OK));
    for (int i = 0; i < 3; i++)
        cr_assert(eq(int, baton_lock_acquire(l, 10000), BATON_OK));
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    cr_assert(eq(int, baton_lock_remaining_ttl(l, &ttl), BATON_OK));
    /* the re-entrant releases re-applied the 10 s lease, not the 3 s watchdog lease */
    cr_assert(ge(i64, ttl, 9000));
    cr_assert(le(i64, ttl, 10000));
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    cr_assert(eq(int, baton_lock_remaining_ttl(l, &ttl), BATON_OK));
    cr_assert(eq(i64, ttl, -2));
    cr_assert(eq(int, baton_lock_acquire(l, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(int, baton_lock_remaining_ttl(l, &ttl), BATON_OK));
    cr_assert(gt(i64, ttl, 0));
    cr_assert(le(i64, ttl, 3000));
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    baton_lock_close(l);
    baton_client_close(c);
}

/* ---------------------------------------------------------------- watchdog ----------- */

Test(lock, watchdog_keeps_a_lock_past_its_lease)
{
    baton_options o;
    baton_options_init(&o);
    o.watchdog_ms = 1500;
    baton_client *c = th_client(&o);
    const char *name = th_tmpname("lk-watchdog");
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(c, name, &l), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(l, BATON_LEASE_WATCHDOG), BATON_OK));
    uint64_t rounds0 = baton__watchdog_rounds(c);
    th_sleep_ms(6000);
    bool held = false;
    int64_t ttl = 0;
    cr_assert(eq(int, baton_lock_is_held_by_current_thread(l, &held), BATON_OK));
    cr_assert(held, "lost after 6 s with a 1.5 s watchdog lease");
    cr_assert(eq(int, baton_lock_remaining_ttl(l, &ttl), BATON_OK));
    cr_assert(gt(i64, ttl, 0));
    cr_assert(le(i64, ttl, 1500));
    uint64_t rounds = baton__watchdog_rounds(c) - rounds0;
    cr_assert(ge(u64, rounds, 10), "renewals every 500 ms: %llu in 6 s",
              (unsigned long long)rounds);
    cr_assert(le(u64, rounds, 13), "renewals every 500 ms: %llu in 6 s",
              (unsigned long long)rounds);
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    /* renewal stopped with the release: the key stays gone */
    th_sleep_ms(700);
    bool locked = true;
    cr_assert(eq(int, baton_lock_is_locked(l, &locked), BATON_OK));
    cr_assert(not(locked));
    baton_lock_close(l);
    baton_client_close(c);
}

typedef struct child_arg {
    const char *name;
    int ready_fd;
} child_arg;

static int hold_forever(void *arg)
{
    child_arg *a = arg;
    baton_options o;
    baton_options_init(&o);
    o.url = th_url();
    o.watchdog_ms = 1500;
    baton_client *c;
    baton_lock *l;
    if (baton_client_open(&o, &c) != BATON_OK || baton_lock_open(c, a->name, &l) != BATON_OK ||
        baton_lock_acquire(l, BATON_LEASE_WATCHDOG) != BATON_OK)
        return 1;
    char b = 1;
    if (write(a->ready_fd, &b, 1) != 1)
        return 2;
    for (;;)
        pause();
}

Test(lock, killed_holder_loses_the_lock_within_the_watchdog_lease)
{
    const char *name = th_tmpname("lk-kill9");
    int fds[2];
    cr_assert(eq(int, pipe(fds), 0));
    child_arg a = {name, fds[1]};
    pid_t pid = th_fork(hold_forever, &a);
    char b;
    cr_assert(eq(sz, (size_t)read(fds[0], &b, 1), 1));
    th_sleep_ms(2000); /* renewed past its first lease */
    baton_client *c = th_client(NULL);
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(c, name, &l), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(l, 0, 1000), BATON_ETIMEDOUT));
    waiter w = {l, 10000, 5000, -100, 0};
    pthread_t t;
    pthread_create(&t, NULL, acquire_release_thread, &w);
    th_sleep_ms(200);
    kill(pid, SIGKILL);
    int64_t killed = th_ms();
    cr_assert(eq(int, th_wait(pid), 128 + SIGKILL));
    pthread_join(t, NULL);
    cr_assert(eq(int, w.rc, BATON_OK));
    int64_t took = w.done_ms - killed;
    cr_assert(le(i64, took, 1700), "waiter got the lock %lld ms after the kill", (long long)took);
    baton_lock_close(l);
    baton_client_close(c);
}

/* ---------------------------------------------------------------- subscriptions ------ */

typedef struct churn {
    baton_lock **locks;
    unsigned seed;
    int errors;
    int done;
} churn;

static void *churn_thread(void *arg)
{
    churn *ch = arg;
    for (int i = 0; i < 200; i++) {
        baton_lock *l = ch->locks[rand_r(&ch->seed) % 5];
        int rc = baton_lock_try_acquire(l, 20000, 10000);
        if (rc != BATON_OK) {
            ch->errors++;
            continue;
        }
        if (rand_r(&ch->seed) % 2)
            th_sleep_ms(rand_r(&ch->seed) % 2);
        if (baton_lock_release(l) != BATON_OK)
            ch->errors++;
        ch->done++;
    }
    return NULL;
}

Test(lock, many_threads_many_names_leave_no_subscription, .timeout = 120)
{
    baton_client *c = th_client(NULL);
    baton_lock *locks[5];
    const char *names[5];
    for (int i = 0; i < 5; i++) {
        names[i] = th_tmpname("lk-churn");
        cr_assert(eq(int, baton_lock_open(c, names[i], &locks[i]), BATON_OK));
    }
    churn ch[32];
    pthread_t t[32];
    for (int i = 0; i < 32; i++) {
        ch[i] = (churn){locks, (unsigned)i * 7919u + 1, 0, 0};
        pthread_create(&t[i], NULL, churn_thread, &ch[i]);
    }
    int total = 0;
    for (int i = 0; i < 32; i++) {
        pthread_join(t[i], NULL);
        cr_assert(eq(int, ch[i].errors, 0), "thread %d: %s", i, baton_client_errmsg(c));
        total += ch[i].done;
    }
    cr_assert(eq(int, total, 32 * 200));
    redisContext *r = th_redis();
    /* unsubscribes are confirmed asynchronously: give them a moment */
    for (int tries = 0; tries < 100 && baton__sub_count(c) > 0; tries++)
        th_sleep_ms(10);
    for (int i = 0; i < 5; i++) {
        cr_assert(eq(i64, th_numsub(r, "redisson_lock__channel:{%s}", names[i]), 0), "%s",
                  names[i]);
        baton_lock_close(locks[i]);
    }
    cr_assert(eq(int, baton__sub_count(c), 0));
    redisFree(r);
    baton_client_close(c);
}

Test(lock, script_flush_is_invisible)
{
    baton_client *c = th_client(NULL);
    const char *name = th_tmpname("lk-flush");
    baton_lock *l;
    redisContext *r = th_redis();
    cr_assert(eq(int, baton_lock_open(c, name, &l), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(l, 5000), BATON_OK));
    freeReplyObject(th_cmd(r, "SCRIPT FLUSH"));
    cr_assert(eq(int, baton_lock_acquire(l, 5000), BATON_OK));
    freeReplyObject(th_cmd(r, "SCRIPT FLUSH"));
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    freeReplyObject(th_cmd(r, "SCRIPT FLUSH"));
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    freeReplyObject(th_cmd(r, "SCRIPT FLUSH"));
    bool was = true;
    cr_assert(eq(int, baton_lock_force_release(l, &was), BATON_OK));
    cr_assert(not(was));
    redisFree(r);
    baton_lock_close(l);
    baton_client_close(c);
}

/* Every script, and the allow-oom variant of those that have one (the suite's servers are
 * Redis >= 7, which take "#!lua flags="). */
Test(lock, embedded_sha1_matches_script_load)
{
    redisContext *r = th_redis();
    int variants = 0;
    for (const baton__script *t = baton__scripts(); t->name; t++) {
        for (const baton__script *s = t; s; s = s == t ? t->oom : NULL) {
            redisReply *rep = th_cmd(r, "SCRIPT LOAD %b", s->body, s->len);
            cr_assert(eq(int, rep->type, REDIS_REPLY_STRING), "%s: %s", s->name,
                      rep->type == REDIS_REPLY_ERROR ? rep->str : "");
            cr_assert(eq(str, rep->str, (char *)s->sha1), "%s", s->name);
            freeReplyObject(rep);
            variants += s != t;
        }
        if (t->oom)
            cr_assert(eq(int, strncmp(t->oom->body, "#!lua flags=allow-oom\n", 22), 0), "%s",
                      t->name);
    }
    cr_assert(eq(int, variants, 10)); /* the scripts marked "-- flags: allow-oom" */
    redisFree(r);
}

typedef struct turn {
    baton_lock *lock;
    atomic_int *inside;
    int rc;
    int overlap;
} turn;

static void *turn_thread(void *arg)
{
    turn *t = arg;
    t->rc = baton_lock_try_acquire(t->lock, 20000, BATON_LEASE_WATCHDOG);
    if (t->rc != BATON_OK)
        return NULL;
    if (atomic_fetch_add(t->inside, 1) != 0)
        t->overlap = 1;
    th_sleep_ms(150);
    atomic_fetch_sub(t->inside, 1);
    t->rc = baton_lock_release(t->lock);
    return NULL;
}

Test(lock, killed_subscriber_connection_does_not_strand_waiters)
{
    baton_client *c = th_client(NULL);
    const char *name = th_tmpname("lk-pubsubkill");
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(c, name, &l), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(l, BATON_LEASE_WATCHDOG), BATON_OK));
    atomic_int inside = 0;
    turn tt[6];
    pthread_t t[6];
    for (int i = 0; i < 6; i++) {
        tt[i] = (turn){l, &inside, -100, 0};
        pthread_create(&t[i], NULL, turn_thread, &tt[i]);
    }
    th_sleep_ms(300); /* all six are waiting on the subscription */
    redisContext *r = th_redis();
    cr_assert(ge(i64, th_cmd_int(r, "CLIENT KILL TYPE pubsub"), 1));
    int64_t t0 = th_ms();
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    for (int i = 0; i < 6; i++) {
        pthread_join(t[i], NULL);
        cr_assert(eq(int, tt[i].rc, BATON_OK), "waiter %d", i);
        cr_assert(eq(int, tt[i].overlap, 0));
    }
    int64_t took = th_ms() - t0;
    /* six holds of 150 ms in turn, plus handoffs: nobody waited for a lease to run out */
    cr_assert(le(i64, took, 3000), "%lld ms", (long long)took);
    redisFree(r);
    baton_lock_close(l);
    baton_client_close(c);
}

/* ---------------------------------------------------------------- bad input ---------- */

/* An attempt on a lock another owner holds, with no line, costs the server 4 commands:
 * EVALSHA, EXISTS (lock, reservation and line in one), HEXISTS (the caller's own hold?),
 * PTTL (held? for how long?). Before: a second EXISTS of the lock, 5. */
Test(lock, an_attempt_on_a_held_lock_costs_four_server_commands)
{
    baton_client *c = th_client(NULL), *other = th_client(NULL);
    const char *name = th_tmpname("lk-cost");
    baton_lock *l, *lo;
    cr_assert(eq(int, baton_lock_open(c, name, &l), BATON_OK));
    cr_assert(eq(int, baton_lock_open(other, name, &lo), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(lo, 0, 10000), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(l, 0, 10000), BATON_ETIMEDOUT)); /* warm */
    redisContext *r = th_redis();
    freeReplyObject(th_cmd(r, "CONFIG RESETSTAT"));
    enum { TRIES = 10 };
    for (int i = 0; i < TRIES; i++)
        cr_assert(eq(int, baton_lock_try_acquire(l, 0, 10000), BATON_ETIMEDOUT));
    static const struct {
        const char *cmd;
        long long per_try;
    } want[] = {{"evalsha", 1}, {"exists", 1}, {"hexists", 1}, {"pttl", 1}, {"eval", 0}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_assert(eq(i64, th_cmdstat(r, want[i].cmd), want[i].per_try * TRIES), "%s", want[i].cmd);
    cr_assert(eq(int, baton_lock_release(lo), BATON_OK));
    redisFree(r);
    baton_lock_close(l);
    baton_lock_close(lo);
    baton_client_close(c);
    baton_client_close(other);
}

Test(lock, bad_input_is_rejected_and_nothing_is_sent)
{
    baton_client *c = th_client(NULL);
    baton_lock *l = NULL, *bad = (baton_lock *)0x1;
    const char *name = th_tmpname("lk-bad");
    char big[BATON_MAX_NAME_LEN + 2];
    memset(big, 'n', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    redisContext *r = th_redis();
    long long before = th_commands_processed(r);

    cr_assert(eq(int, baton_lock_open(NULL, name, &l), BATON_EINVAL));
    cr_assert(eq(int, baton_lock_open(c, NULL, &l), BATON_EINVAL));
    cr_assert(eq(int, baton_lock_open(c, "", &l), BATON_EINVAL));
    cr_assert(eq(int, baton_lock_open(c, big, &bad), BATON_EINVAL));
    cr_assert(eq(ptr, bad, NULL));
    cr_assert(eq(int, baton_lock_open(c, name, NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_lock_open(c, name, &l), BATON_OK));

    cr_assert(eq(int, baton_lock_acquire(NULL, 1000), BATON_EINVAL));
    cr_assert(eq(int, baton_lock_acquire(l, -3), BATON_EINVAL)); /* 0: the watchdog (test_api) */
    cr_assert(ne(str, (char *)baton_client_errmsg(c), ""));
    cr_assert(eq(int, baton_lock_acquire(l, -7), BATON_EINVAL));
    cr_assert(eq(int, baton_lock_acquire(l, BATON_MAX_DURATION_MS + 1), BATON_EINVAL));
    cr_assert(eq(int, baton_lock_try_acquire(l, -2, 1000), BATON_EINVAL));
    cr_assert(eq(int, baton_lock_try_acquire(l, INT64_MAX, 1000), BATON_EINVAL));
    cr_assert(eq(int, baton_lock_try_acquire(l, 10, INT64_MIN), BATON_EINVAL));
    cr_assert(eq(int, baton_lock_release(NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_lock_force_release(NULL, NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_lock_is_locked(NULL, NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_lock_is_locked(l, NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_lock_is_held_by_current_thread(l, NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_lock_hold_count(l, NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_lock_remaining_ttl(l, NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_lock_remaining_ttl(NULL, NULL), BATON_EINVAL));
    baton_lock_close(NULL);
    baton_client_close(NULL);
    cr_assert(eq(str, (char *)baton_client_errmsg(NULL), ""));
    cr_assert(eq(str, (char *)baton_lock_name(NULL), ""));

    /* only the INFO of `before` itself was processed in between */
    cr_assert(eq(i64, th_commands_processed(r) - before, 1));

    baton_client *c2 = (baton_client *)0x1;
    baton_options o;
    baton_options_init(&o);
    o.url = "redis://127.0.0.1:notaport";
    cr_assert(eq(int, baton_client_open(&o, &c2), BATON_EINVAL));
    cr_assert(eq(ptr, c2, NULL));
    cr_assert(ne(str, (char *)baton_open_errmsg(), ""));
    o.url = th_url();
    o.command_timeout_ms = -1;
    cr_assert(eq(int, baton_client_open(&o, &c2), BATON_EINVAL));
    o.command_timeout_ms = 0;
    o.watchdog_ms = 5;
    cr_assert(eq(int, baton_client_open(&o, &c2), BATON_EINVAL));
    cr_assert(eq(int, baton_client_open(NULL, NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_client_open_url(NULL, &c2), BATON_EINVAL));
    redisFree(r);
    baton_lock_close(l);
    baton_client_close(c);
}

static void *release_thread(void *arg)
{
    waiter *w = arg;
    w->rc = baton_lock_release(w->lock);
    return NULL;
}

Test(lock, release_by_a_non_holder_is_refused)
{
    baton_client *c = th_client(NULL), *c2 = th_client(NULL);
    const char *name = th_tmpname("lk-notheld");
    baton_lock *l, *l2;
    cr_assert(eq(int, baton_lock_open(c, name, &l), BATON_OK));
    cr_assert(eq(int, baton_lock_open(c2, name, &l2), BATON_OK));
    cr_assert(eq(int, baton_lock_release(l), BATON_ENOTHELD)); /* never taken */
    cr_assert(eq(int, baton_lock_acquire(l, 10000), BATON_OK));
    cr_assert(eq(int, baton_lock_release(l2), BATON_ENOTHELD)); /* another client */
    waiter w = {l, 0, 0, -100, 0};
    pthread_t t;
    pthread_create(&t, NULL, release_thread, &w); /* another thread, same client and handle */
    pthread_join(t, NULL);
    cr_assert(eq(int, w.rc, BATON_ENOTHELD));
    int64_t n = 0;
    cr_assert(eq(int, baton_lock_hold_count(l, &n), BATON_OK));
    cr_assert(eq(i64, n, 1), "the holder keeps its hold");
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    baton_lock_close(l);
    baton_lock_close(l2);
    baton_client_close(c);
    baton_client_close(c2);
}

/* ---------------------------------------------------------------- faults ------------- */

Test(lock, wrong_type_key_is_an_error_and_left_alone)
{
    baton_client *c = th_client(NULL);
    const char *name = th_tmpname("lk-wrongtype");
    redisContext *r = th_redis();
    freeReplyObject(th_cmd(r, "SET %s precious", name));
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(c, name, &l), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(l, 1000), BATON_EPROTO));
    cr_assert(strstr(baton_client_errmsg(c), "WRONGTYPE") != NULL, "%s", baton_client_errmsg(c));
    cr_assert(eq(int, baton_lock_try_acquire(l, 0, BATON_LEASE_WATCHDOG), BATON_EPROTO));
    cr_assert(eq(int, baton_lock_release(l), BATON_EPROTO));
    bool was;
    cr_assert(eq(int, baton_lock_force_release(l, &was), BATON_EPROTO));
    cr_assert(strstr(baton_client_errmsg(c), "WRONGTYPE") != NULL, "%s", baton_client_errmsg(c));
    int64_t n;
    cr_assert(eq(int, baton_lock_hold_count(l, &n), BATON_EPROTO));
    redisReply *rep = th_cmd(r, "GET %s", name);
    cr_assert(eq(str, rep->str, "precious"));
    freeReplyObject(rep);
    cr_assert(eq(i64, th_cmd_int(r, "PTTL %s", name), -1));
    redisFree(r);
    baton_lock_close(l);
    baton_client_close(c);
}

Test(lock, server_down_is_econn_in_time_and_recovers)
{
    th_server s;
    th_server_start(&s, NULL);
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", s.port);
    baton_options o;
    baton_options_init(&o);
    o.url = url;
    o.connect_timeout_ms = 1000;
    o.command_timeout_ms = 1000;
    baton_client *c;
    cr_assert(eq(int, baton_client_open(&o, &c), BATON_OK));
    baton_lock *l;
    const char *name = th_tmpname("lk-down");
    cr_assert(eq(int, baton_lock_open(c, name, &l), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(l, 5000), BATON_OK));
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    th_server_stop(&s);

    int64_t t0 = th_ms();
    cr_assert(eq(int, baton_lock_acquire(l, 5000), BATON_ECONN));
    cr_assert(le(i64, th_ms() - t0, 1500));
    cr_assert(eq(int, baton_lock_try_acquire(l, 2000, 5000), BATON_ECONN));
    cr_assert(ne(str, (char *)baton_client_errmsg(c), ""));
    bool locked;
    cr_assert(eq(int, baton_lock_is_locked(l, &locked), BATON_ECONN));
    cr_assert(le(i64, th_ms() - t0, 4000));

    th_server_start_on(&s, s.port, NULL);
    cr_assert(eq(int, baton_lock_acquire(l, 5000), BATON_OK));
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    baton_lock_close(l);
    baton_client_close(c);
    th_server_stop(&s);

    /* nothing listens at all: open fails, in time */
    t0 = th_ms();
    baton_client *c2;
    cr_assert(eq(int, baton_client_open(&o, &c2), BATON_ECONN));
    cr_assert(le(i64, th_ms() - t0, 1500));
}

Test(lock, wrong_password_is_eauth_without_the_password)
{
    th_server s;
    th_server_start(&s, "--requirepass right-horse-battery");
    char url[128];
    baton_client *c = NULL;
    snprintf(url, sizeof url, "redis://:wrong-staple-91@127.0.0.1:%d", s.port);
    cr_assert(eq(int, baton_client_open_url(url, &c), BATON_EAUTH));
    cr_assert(ne(str, (char *)baton_open_errmsg(), ""));
    cr_assert(eq(ptr, strstr(baton_open_errmsg(), "wrong-staple-91"), NULL), "%s",
              baton_open_errmsg());
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", s.port); /* no password at all */
    cr_assert(eq(int, baton_client_open_url(url, &c), BATON_EAUTH));

    snprintf(url, sizeof url, "redis://:right-horse-battery@127.0.0.1:%d/2", s.port);
    cr_assert(eq(int, baton_client_open_url(url, &c), BATON_OK));
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(c, "lk-auth", &l), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(l, 5000), BATON_OK));
    redisContext *r = th_redis_port(s.port);
    freeReplyObject(th_cmd(r, "AUTH right-horse-battery"));
    freeReplyObject(th_cmd(r, "SELECT 2"));
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS lk-auth"), 1), "the lock lives in db 2");

    /* an ACL user */
    freeReplyObject(th_cmd(r, "ACL SETUSER alice on >alice-pw ~* &* +@all"));
    baton_client *ca;
    snprintf(url, sizeof url, "redis://alice:alice-pw@127.0.0.1:%d", s.port);
    cr_assert(eq(int, baton_client_open_url(url, &ca), BATON_OK));
    baton_client_close(ca);
    snprintf(url, sizeof url, "redis://alice:not-alice-pw@127.0.0.1:%d", s.port);
    cr_assert(eq(int, baton_client_open_url(url, &ca), BATON_EAUTH));
    cr_assert(eq(ptr, strstr(baton_open_errmsg(), "not-alice-pw"), NULL));

    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    redisFree(r);
    baton_lock_close(l);
    baton_client_close(c);
    th_server_stop(&s);
}

/* ---------------------------------------------------------------- starvation bound --- */

typedef struct waiter_run {
    baton_lock *l;
    int rc, released;
} waiter_run;

/* Acquires, holds 300 ms (the other side's "refused" must not depend on whether this
 * thread released already: it once did, under ASan, before the releaser's next try
 * reached the server), releases. */
static void *wait_for_it(void *p)
{
    waiter_run *w = p;
    w->rc = baton_lock_try_acquire(w->l, 10000, 10000);
    if (w->rc == BATON_OK) {
        th_sleep_ms(300);
        w->released = baton_lock_release(w->l); /* ownership is the thread's */
    }
    return NULL;
}

static uint64_t lock_attempts(baton_client *c)
{
    baton_stats st;
    baton_client_stats(c, &st);
    return st.kind[BATON_KIND_LOCK].attempts;
}

/* A client of its own (a process, as far as waking goes) taking the lock ROUNDS times. */
enum { ROUNDS = 12 };
typedef struct rounds_run {
    baton_client *c;
    baton_lock *l;
    int rc, done;
} rounds_run;

static void *take_rounds(void *p)
{
    rounds_run *w = p;
    for (int i = 0; i < ROUNDS && w->rc == BATON_OK; i++) {
        w->rc = baton_lock_try_acquire(w->l, 20000, 10000);
        if (w->rc != BATON_OK)
            break;
        th_sleep_ms(2);
        w->rc = baton_lock_release(w->l);
        w->done += w->rc == BATON_OK;
    }
    return NULL;
}

/* A release hands the lock to the first waiter of the line alone, not to a race every
 * waiting process joins and all but one lose (issue 30: 50 processes on one plain lock
 * made 28-47 attempts per acquisition). Six clients, each its own dispatcher as a process
 * has, take one lock 12 times each with no pause between rounds; once the line has formed
 * each acquisition costs the attempt that queues, the one after subscribing and the one
 * that takes. */
Test(lock, a_release_goes_to_the_first_of_the_line_alone, .timeout = 60)
{
    enum { N = 6 };
    const char *name = th_tmpname("line");
    rounds_run w[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        w[i] = (rounds_run){.c = th_client(NULL)};
        cr_assert(eq(int, baton_lock_open(w[i].c, name, &w[i].l), BATON_OK));
    }
    for (int i = 0; i < N; i++)
        cr_assert(eq(int, pthread_create(&t[i], NULL, take_rounds, &w[i]), 0));
    uint64_t tried = 0;
    int taken = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        cr_assert(eq(int, w[i].rc, BATON_OK), "client %d: %s", i, baton_err_name(w[i].rc));
        taken += w[i].done;
        tried += lock_attempts(w[i].c);
        baton_lock_close(w[i].l);
        baton_client_close(w[i].c);
    }
    cr_assert(eq(int, taken, N *ROUNDS));
    double per = (double)tried / taken;
    cr_assert(le(dbl, per, 4.0), "%.2f attempts per acquisition (%llu for %d)", per,
              (unsigned long long)tried, taken);
}

/* One waiter of its own client: takes the lock, notes its turn, holds 5 ms, releases. */
typedef struct turn_run {
    baton_client *c;
    baton_lock *l;
    int64_t wait_ms;
    atomic_int *turns;
    int turn, rc;
    int64_t done_ms;
} turn_run;

static void *take_a_turn(void *p)
{
    turn_run *w = p;
    w->turn = -1;
    w->rc = baton_lock_try_acquire(w->l, w->wait_ms, 10000);
    w->done_ms = th_ms();
    if (w->rc == BATON_OK) {
        w->turn = atomic_fetch_add(w->turns, 1);
        th_sleep_ms(5);
        w->rc = baton_lock_release(w->l);
    }
    return NULL;
}

static void turn_open(turn_run *w, const char *name, int64_t wait_ms, atomic_int *turns)
{
    *w = (turn_run){.c = th_client(NULL), .wait_ms = wait_ms, .turns = turns};
    cr_assert(eq(int, baton_lock_open(w->c, name, &w->l), BATON_OK));
}

static void turn_close(turn_run *w)
{
    baton_lock_close(w->l);
    baton_client_close(w->c);
}

static long long line_length(redisContext *r, const char *name)
{
    return th_cmd_int(r, "ZCARD baton_lock_line:{%s}", name);
}

/* Waiters of a lock held long queue once starved, without waiting for a release, and get
 * it in the order they came (each its own client, as processes are): the release is not
 * a race among them. */
Test(lock, waiters_of_a_long_hold_get_the_lock_in_the_order_they_came, .timeout = 60)
{
    enum { N = 4 };
    baton_client *ch = th_client(NULL);
    redisContext *r = th_redis();
    const char *name = th_tmpname("order");
    baton_lock *h;
    cr_assert(eq(int, baton_lock_open(ch, name, &h), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(h, 0, 10000), BATON_OK));
    atomic_int turns = 0;
    turn_run w[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        turn_open(&w[i], name, 20000, &turns);
        cr_assert(eq(int, pthread_create(&t[i], NULL, take_a_turn, &w[i]), 0));
        int64_t t0 = th_ms();
        while (line_length(r, name) < i + 1 && th_ms() - t0 < 5000)
            th_sleep_ms(2);
        cr_assert(eq(i64, line_length(r, name), i + 1), "waiter %d queued by itself", i);
    }
    cr_assert(eq(int, baton_lock_release(h), BATON_OK));
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        cr_assert(eq(int, w[i].rc, BATON_OK), "%d: %s", i, baton_err_name(w[i].rc));
        cr_assert(eq(int, w[i].turn, i), "waiter %d came %d-th", i, w[i].turn);
        turn_close(&w[i]);
    }
    cr_assert(eq(i64, line_length(r, name), 0));
    baton_lock_close(h);
    redisFree(r);
    baton_client_close(ch);
}

/* A waiter that gives up (its wait ran out) leaves the line: the lock goes on to the next
 * at the release, not after a reservation for a waiter that is gone. */
Test(lock, a_waiter_that_gives_up_leaves_the_line, .timeout = 60)
{
    baton_client *ch = th_client(NULL);
    redisContext *r = th_redis();
    const char *name = th_tmpname("giveup");
    baton_lock *h;
    cr_assert(eq(int, baton_lock_open(ch, name, &h), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(h, 0, 10000), BATON_OK));
    atomic_int turns = 0;
    turn_run quitter, stayer;
    pthread_t tq, ts;
    turn_open(&quitter, name, 400, &turns);
    turn_open(&stayer, name, 20000, &turns);
    cr_assert(eq(int, pthread_create(&tq, NULL, take_a_turn, &quitter), 0));
    th_sleep_ms(50);
    cr_assert(eq(int, pthread_create(&ts, NULL, take_a_turn, &stayer), 0));
    pthread_join(tq, NULL);
    cr_assert(eq(int, quitter.rc, BATON_ETIMEDOUT));
    int64_t t0 = th_ms();
    while (line_length(r, name) != 1 && th_ms() - t0 < 2000)
        th_sleep_ms(2);
    cr_assert(eq(i64, line_length(r, name), 1), "the one that gave up left the line");
    int64_t released = th_ms();
    cr_assert(eq(int, baton_lock_release(h), BATON_OK));
    pthread_join(ts, NULL);
    cr_assert(eq(int, stayer.rc, BATON_OK), "%s", baton_err_name(stayer.rc));
    cr_assert(lt(i64, stayer.done_ms - released, 40), "handed on at the release: %lld ms",
              (long long)(stayer.done_ms - released));
    turn_close(&quitter);
    turn_close(&stayer);
    baton_lock_close(h);
    redisFree(r);
    baton_client_close(ch);
}

/* A process killed while in the line costs the lock no more than the reservation made for
 * it (50 ms) and a look of the next waiter: the line is not stuck behind the dead. The
 * child is forked before this process opens a client (a fork copies another thread's locks
 * as they are), and waits when told. */
typedef struct line_child {
    const char *name;
    int go_fd;
} line_child;

static int wait_in_line(void *p)
{
    const line_child *a = p;
    baton_options o;
    baton_options_init(&o);
    o.url = th_url();
    baton_client *c;
    baton_lock *l;
    if (baton_client_open(&o, &c) != BATON_OK || baton_lock_open(c, a->name, &l) != BATON_OK)
        return 1;
    char b = 1;
    if (read(a->go_fd, &b, 1) != 1)
        return 2;
    int rc = baton_lock_try_acquire(l, 60000, 10000);
    fprintf(stderr, "child: %s: %s\n", baton_err_name(rc), baton_client_errmsg(c));
    return 3;
}

Test(lock, a_waiter_killed_in_the_line_costs_the_lock_a_look, .timeout = 60)
{
    const char *name = th_tmpname("deadline");
    int go[2];
    cr_assert(eq(int, pipe(go), 0));
    line_child a = {name, go[0]};
    pid_t pid = th_fork(wait_in_line, &a);
    baton_client *ch = th_client(NULL);
    redisContext *r = th_redis();
    baton_lock *h;
    cr_assert(eq(int, baton_lock_open(ch, name, &h), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(h, 0, 10000), BATON_OK));
    char b = 1;
    cr_assert(eq(sz, (size_t)write(go[1], &b, 1), 1));
    int64_t t0 = th_ms();
    while (line_length(r, name) < 1 && th_ms() - t0 < 5000)
        th_sleep_ms(2);
    cr_assert(eq(i64, line_length(r, name), 1), "the child queued");
    kill(pid, SIGKILL);
    cr_assert(eq(int, th_wait(pid), 128 + SIGKILL));
    atomic_int turns = 0;
    turn_run w;
    turn_open(&w, name, 20000, &turns);
    pthread_t t;
    cr_assert(eq(int, pthread_create(&t, NULL, take_a_turn, &w), 0));
    t0 = th_ms();
    while (line_length(r, name) < 2 && th_ms() - t0 < 5000)
        th_sleep_ms(2);
    cr_assert(eq(i64, line_length(r, name), 2), "the waiter queued behind the dead one");
    int64_t released = th_ms();
    cr_assert(eq(int, baton_lock_release(h), BATON_OK));
    pthread_join(t, NULL);
    cr_assert(eq(int, w.rc, BATON_OK), "%s", baton_err_name(w.rc));
    /* 50 ms of reservation, then its look (every 100 ms at rank 1); a margin for load */
    cr_assert(le(i64, w.done_ms - released, 500), "the lock came %lld ms after the release",
              (long long)(w.done_ms - released));
    turn_close(&w);
    close(go[0]);
    close(go[1]);
    baton_lock_close(h);
    redisFree(r);
    baton_client_close(ch);
}

/* A waiter that waited past starve_ms takes a place in the line (by itself, with no release
 * to wake it): the holder that releases the lock and asks again at once (the race an
 * unfair lock lets it win every time) is refused, since the release reserved the lock for
 * the line's first, and the waiter gets it (issue 30). With BATON_STARVE_NEVER no line
 * forms and the holder takes the lock back. */
Test(lock, a_starved_waiter_queues_and_the_releaser_cannot_take_the_lock_back)
{
    for (int never = 0; never < 2; never++) {
        baton_options o;
        baton_options_init(&o);
        o.starve_ms = never ? BATON_STARVE_NEVER : 50;
        baton_client *ch = th_client(&o), *cw = th_client(&o);
        redisContext *r = th_redis();
        const char *name = th_tmpname("starve");
        baton_lock *h, *w;
        cr_assert(eq(int, baton_lock_open(ch, name, &h), BATON_OK));
        cr_assert(eq(int, baton_lock_open(cw, name, &w), BATON_OK));
        cr_assert(eq(int, baton_lock_try_acquire(h, 0, 10000), BATON_OK));
        waiter_run wr = {.l = w};
        pthread_t t;
        cr_assert(eq(int, pthread_create(&t, NULL, wait_for_it, &wr), 0));
        /* Past starve_ms the waiter queues by itself, without a release. */
        int64_t t0 = th_ms();
        while (line_length(r, name) == 0 && th_ms() - t0 < (never ? 300 : 5000))
            th_sleep_ms(2);
        bool holding = true;
        if (never) {
            cr_assert(eq(i64, line_length(r, name), 0), "no line without the bound");
            /* the holder releases and asks again at once: it wins that race (the waiter
             * needs the message and a round trip), and no line forms */
            for (int i = 0; i < 5 && holding; i++) {
                cr_assert(eq(int, baton_lock_release(h), BATON_OK));
                holding = baton_lock_try_acquire(h, 0, 10000) == BATON_OK;
                cr_assert(eq(i64, line_length(r, name), 0), "no line without the bound");
            }
        } else {
            cr_assert(eq(i64, line_length(r, name), 1), "the starved waiter is in the line");
            cr_assert(eq(int, baton_lock_release(h), BATON_OK));
            cr_assert(eq(int, baton_lock_try_acquire(h, 0, 10000), BATON_ETIMEDOUT),
                      "reserved for the line's first: the releaser is refused");
            holding = false;
        }
        if (holding)
            cr_assert(eq(int, baton_lock_release(h), BATON_OK));
        pthread_join(t, NULL);
        cr_assert(eq(int, wr.rc, BATON_OK), "%s", baton_client_errmsg(cw));
        cr_assert(eq(int, wr.released, BATON_OK));
        cr_assert(eq(i64,
                     th_cmd_int(r, "EXISTS baton_lock_next:{%s} baton_lock_line:{%s}", name, name),
                     0),
                  "the reservation and the line go with the hand-over");
        baton_lock_close(w);
        baton_lock_close(h);
        redisFree(r);
        baton_client_close(cw);
        baton_client_close(ch);
    }
}

/* The line hands the lock only to a first waiter that is due (its wait passed starve_ms:
 * its score), as Go's sync.Mutex hands itself over only to a waiter starved past 1 ms;
 * before, the releasing owner can take the lock back (issue 30: handing over every time
 * cost s2 a fifth of its rate against pollers that barge). The scripts alone, by EVAL:
 * B queues not yet due; A releases and takes the lock back; once B is due, A's release
 * reserves the lock for B, A is refused, and B takes it. */
static redisReply *eval_acquire(redisContext *r, const char *name, const char *owner,
                                const char *mode, const char *due_us)
{
    const baton__script *acq = baton__script_find("lock_acquire");
    cr_assert(acq != NULL);
    return th_cmd(r,
                  "EVAL %b 4 %s redisson_lock_token:{%s} baton_lock_next:{%s} baton_lock_line:{%s} "
                  "30000 %s %s redisson_lock__channel:{%s} 10000 %s",
                  acq->body, acq->len, name, name, name, name, owner, mode, name, due_us);
}

static long long eval_release(redisContext *r, const char *name, const char *owner, int n)
{
    const baton__script *rel = baton__script_find("lock_release");
    cr_assert(rel != NULL);
    redisReply *rep = th_cmd(r,
                             "EVAL %b 1 %s 0 30000 %s redisson_lock__channel:{%s} "
                             "baton_lock_next:{%s} baton_lock_line:{%s} 60000 "
                             "redisson_unlock_latch:{%s}:t%d 0",
                             rel->body, rel->len, name, owner, name, name, name, name, n);
    cr_assert(eq(int, rep->type, REDIS_REPLY_INTEGER), "%s", rep->str ? rep->str : "");
    long long v = rep->integer;
    freeReplyObject(rep);
    return v;
}

static long long status_of(redisReply *rep)
{
    cr_assert(eq(int, rep->type, REDIS_REPLY_ARRAY), "%s", rep->str ? rep->str : "");
    long long s = rep->element[0]->integer;
    freeReplyObject(rep);
    return s;
}

Test(lock, a_releaser_takes_the_lock_back_until_the_lines_first_is_due)
{
    redisContext *r = th_redis();
    const char *name = th_tmpname("due");
    cr_assert(eq(i64, status_of(eval_acquire(r, name, "A:1", "0", "0")), 1), "A takes it");
    /* B waits, due in 10 s: in the line, first, not due */
    cr_assert(eq(i64, status_of(eval_acquire(r, name, "B:1", "2", "10000000")), 5));
    cr_assert(eq(i64, eval_release(r, name, "A:1", 1), 1));
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS baton_lock_next:{%s}", name), 0),
              "nothing reserved for a first waiter not due");
    cr_assert(eq(i64, status_of(eval_acquire(r, name, "A:1", "1", "5000")), 1),
              "the releaser takes the lock back");
    /* B is due now */
    freeReplyObject(th_cmd(r, "ZADD baton_lock_line:{%s} XX 0 B:1", name));
    cr_assert(eq(i64, eval_release(r, name, "A:1", 2), 1));
    redisReply *next = th_cmd(r, "GET baton_lock_next:{%s}", name);
    cr_assert(eq(int, next->type, REDIS_REPLY_STRING));
    cr_assert(eq(str, next->str, "B:1"), "reserved for the first waiter, due");
    freeReplyObject(next);
    cr_assert(eq(i64, status_of(eval_acquire(r, name, "A:1", "0", "5000")), 3),
              "the releaser is refused");
    cr_assert(eq(i64, status_of(eval_acquire(r, name, "B:1", "2", "0")), 1), "B takes it");
    cr_assert(
        eq(i64, th_cmd_int(r, "EXISTS baton_lock_next:{%s} baton_lock_line:{%s}", name, name), 0));
    redisFree(r);
}

/* Redisson's RLock scripts as a Java client runs them (RedissonLock.tryLockInnerAsync and
 * unlockInnerAsync): they know nothing of baton's line, and the unlock publishes "0" on the
 * lock's channel only. KEYS name; ARGV lease, owner. */
static const char REDISSON_TRY_LOCK[] = "if ((redis.call('exists', KEYS[1]) == 0) or "
                                        "(redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then "
                                        "redis.call('hincrby', KEYS[1], ARGV[2], 1); "
                                        "redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; "
                                        "return redis.call('pttl', KEYS[1]);";
/* KEYS name, channel, unlock latch; ARGV "0", lease, owner, publish command, latch life */
static const char REDISSON_UNLOCK[] =
    "local val = redis.call('get', KEYS[3]); if val ~= false then return tonumber(val); end; "
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
    "if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); "
    "redis.call('set', KEYS[3], 0, 'px', ARGV[5]); return 0; "
    "else redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); "
    "redis.call('set', KEYS[3], 1, 'px', ARGV[5]); return 1; end; return nil;";

static void *take_once(void *p)
{
    turn_run *w = p;
    w->rc = baton_lock_try_acquire(w->l, w->wait_ms, 10000);
    w->done_ms = th_ms();
    if (w->rc == BATON_OK)
        w->rc = baton_lock_release(w->l);
    return NULL;
}

/* The Redisson owner java-uuid:1 takes name (30 s), as Java's tryLock does; and unlocks it,
 * its unlock publishing "0" on the lock's channel only (latch id: round). */
static void java_lock(redisContext *r, const char *name)
{
    redisReply *got = th_cmd(r, "EVAL %s 1 %s 30000 java-uuid:1", REDISSON_TRY_LOCK, name);
    cr_assert(eq(int, got->type, REDIS_REPLY_NIL), "the Redisson owner takes the lock");
    freeReplyObject(got);
}

static void java_unlock(redisContext *r, const char *name, int round)
{
    char channel[256];
    snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);
    cr_assert(eq(i64,
                 th_cmd_int(r,
                            "EVAL %s 3 %s %s redisson_unlock_latch:{%s}:j%d 0 30000 "
                            "java-uuid:1 PUBLISH 30000",
                            REDISSON_UNLOCK, name, channel, name, round),
                 1),
              "the Redisson owner unlocks");
}

/* A baton waiter queues behind a Redisson owner's hold (30 s) and becomes the line's first;
 * after quiet_ms (0: 10 ms) the owner unlocks, which must wake it within 25 ms. With
 * quiet_ms, the waiter must not have looked at the lock meanwhile, and the line must live
 * as long as the lease its first sleeps behind. */
static void first_hears_redisson(const char *tag, int rounds, int64_t quiet_ms)
{
    redisContext *r = th_redis();
    const char *name = th_tmpname(tag);
    atomic_int turns = 0;
    turn_run w;
    turn_open(&w, name, 20000, &turns);
    for (int round = 0; round < rounds; round++) {
        java_lock(r, name);
        pthread_t t;
        cr_assert(eq(int, pthread_create(&t, NULL, take_once, &w), 0));
        int64_t t0 = th_ms();
        while (line_length(r, name) < 1 && th_ms() - t0 < 5000)
            th_sleep_ms(1);
        cr_assert(eq(i64, line_length(r, name), 1), "the baton waiter queued");
        if (quiet_ms > 0) {
            th_sleep_ms(100); /* its first look after the join, if any */
            baton_stats st;
            cr_assert(eq(int, baton_client_stats(w.c, &st), BATON_OK));
            uint64_t before = st.kind[BATON_KIND_LOCK].attempts;
            th_sleep_ms(quiet_ms);
            cr_assert(eq(int, baton_client_stats(w.c, &st), BATON_OK));
            uint64_t looks = st.kind[BATON_KIND_LOCK].attempts - before;
            cr_assert(eq(u64, looks, 0), "the line's first looked %llu times in %lld ms",
                      (unsigned long long)looks, (long long)quiet_ms);
            cr_assert(gt(i64, th_cmd_int(r, "PTTL baton_lock_line:{%s}", name), 20000),
                      "the line lives as long as the lease its first sleeps behind");
        } else {
            th_sleep_ms(10);
        }
        int64_t released = th_ms();
        java_unlock(r, name, round);
        pthread_join(t, NULL);
        cr_assert(eq(int, w.rc, BATON_OK), "round %d: %s", round, baton_err_name(w.rc));
        cr_assert(le(i64, w.done_ms - released, 25),
                  "round %d: the baton waiter took the lock %lld ms after the unlock", round,
                  (long long)(w.done_ms - released));
    }
    cr_assert(eq(i64, line_length(r, name), 0));
    turn_close(&w);
    redisFree(r);
}

/* Issue 49, mixed deployments: a baton waiter first in the line of starved waiters listens
 * on a channel of its own, and a Redisson client's unlock publishes on the lock's channel
 * alone. The line's first hears that channel too: the unlock wakes it within a round trip,
 * not at its next look (50 ms after it joined; the unlock comes about 10 ms after). */
Test(lock, a_redisson_unlock_wakes_the_lines_first_at_once, .timeout = 60)
{
    first_hears_redisson("redisson-unlock", 3, 0);
}

/* Issue 49, 100,000 waiters: the line's first, behind a holder whose lease has long to run,
 * hears every way the lock can come free (the holder's unlock on the lock's channel, a
 * baton release's reservation on its own, the lease by its own bound), so it does not look
 * every 50 ms: 100,000 waiters, each first in its own lock's line, looked 2,000,000 times a
 * second at the server, and the server spent its time on the looks, not the releases. It
 * looks when the holder's lease (30 s here) runs out, and the line lives that long. Over
 * 1.5 s it made 30 looks before; now none. The Redisson unlock still wakes it at once. */
Test(lock, the_lines_first_behind_a_long_lease_does_not_poll, .timeout = 60)
{
    first_hears_redisson("first-quiet", 1, 1500);
}

/* Issue 49, mixed deployments: the waiter behind the line's first becomes first when the
 * first leaves (here it gives up; equally when it is served). It is told at once, and so
 * hears the lock's channel from then on: a Redisson client's unlock right after wakes it
 * within a round trip. Before, it learnt it was first at its next look: it joined 30 ms
 * after the first, at rank 1 (a look every 100 ms), the first gave up 150 ms after it came,
 * so the next look was about 80 ms after the unlock. */
Test(lock, a_waiter_that_became_first_hears_a_redisson_unlock_at_once, .timeout = 60)
{
    redisContext *r = th_redis();
    const char *name = th_tmpname("became-first");
    for (int round = 0; round < 3; round++) {
        java_lock(r, name);
        atomic_int turns = 0;
        turn_run quitter, stayer;
        pthread_t tq, ts;
        turn_open(&quitter, name, 150, &turns);
        turn_open(&stayer, name, 20000, &turns);
        cr_assert(eq(int, pthread_create(&tq, NULL, take_a_turn, &quitter), 0));
        int64_t t0 = th_ms();
        while (line_length(r, name) < 1 && th_ms() - t0 < 5000)
            th_sleep_ms(1);
        th_sleep_ms(30);
        cr_assert(eq(int, pthread_create(&ts, NULL, take_a_turn, &stayer), 0));
        while (line_length(r, name) < 2 && th_ms() - t0 < 5000)
            th_sleep_ms(1);
        cr_assert(eq(i64, line_length(r, name), 2), "round %d: both waiters queued", round);
        pthread_join(tq, NULL);
        cr_assert(eq(int, quitter.rc, BATON_ETIMEDOUT), "round %d: the first gave up", round);
        int64_t released = th_ms();
        java_unlock(r, name, round);
        pthread_join(ts, NULL);
        cr_assert(eq(int, stayer.rc, BATON_OK), "round %d: %s", round, baton_err_name(stayer.rc));
        cr_assert(lt(i64, stayer.done_ms - released, 40),
                  "round %d: the waiter first since the other gave up took the lock %lld ms "
                  "after the unlock",
                  round, (long long)(stayer.done_ms - released));
        turn_close(&quitter);
        turn_close(&stayer);
        cr_assert(eq(i64, line_length(r, name), 0));
    }
    redisFree(r);
}

/* ------------------------------------------------ a mixed deployment (issue 49) ------ */

enum { MIX_EACH = 4, MIX_ROUNDS = 60 };

typedef struct mix_run {
    const char *name;
    int id;
    bool redisson; /* a Redisson client (its scripts, its channel) rather than baton */
    atomic_int *inside;
    atomic_int *overlaps;
    int done, errors;
    int64_t max_wait_ms;
} mix_run;

/* One acquisition's critical section: the shared counter, read then written. */
static void mix_count(redisContext *r, mix_run *w)
{
    if (atomic_fetch_add(w->inside, 1) != 0)
        atomic_fetch_add(w->overlaps, 1);
    long long v = th_cmd_int(r, "INCRBY {%s}:mixcount 0", w->name);
    freeReplyObject(th_cmd(r, "SET {%s}:mixcount %lld", w->name, v + 1));
    atomic_fetch_sub(w->inside, 1);
    w->done++;
}

/* Waits on sub (subscribed) for a message, at most ms; drains what came. */
static void mix_listen(redisContext *sub, int64_t ms)
{
    void *rep = NULL;
    if (redisGetReplyFromReader(sub, &rep) == REDIS_OK && rep) {
        freeReplyObject(rep);
        return;
    }
    struct pollfd p = {.fd = sub->fd, .events = POLLIN};
    if (poll(&p, 1, (int)ms) > 0 && redisBufferRead(sub) == REDIS_OK)
        while (redisGetReplyFromReader(sub, &rep) == REDIS_OK && rep) {
            freeReplyObject(rep);
            rep = NULL;
        }
}

/* A Redisson RLock client as Java's does it: its lock script; when held, listen on the
 * lock's channel until "0" or the holder's lease; its unlock script (DEL, PUBLISH). */
static void *mix_redisson(void *p)
{
    mix_run *w = p;
    redisContext *r = th_redis(), *sub = th_redis();
    char owner[64], channel[256];
    snprintf(owner, sizeof owner, "java-%d:1", w->id);
    snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", w->name);
    redisReply *s = redisCommand(sub, "SUBSCRIBE %s", channel);
    cr_assert(s != NULL);
    freeReplyObject(s);
    for (int i = 0; i < MIX_ROUNDS; i++) {
        for (;;) {
            redisReply *got = th_cmd(r, "EVAL %s 1 %s 30000 %s", REDISSON_TRY_LOCK, w->name, owner);
            bool taken = got->type == REDIS_REPLY_NIL;
            int64_t pttl = got->type == REDIS_REPLY_INTEGER ? got->integer : 100;
            freeReplyObject(got);
            if (taken)
                break;
            mix_listen(sub, pttl > 0 && pttl < 1000 ? pttl : 1000);
        }
        mix_count(r, w);
        long long rc = th_cmd_int(r,
                                  "EVAL %s 3 %s %s redisson_unlock_latch:{%s}:%d-%d 0 30000 %s "
                                  "PUBLISH 30000",
                                  REDISSON_UNLOCK, w->name, channel, w->name, w->id, i, owner);
        w->errors += rc != 1;
    }
    redisFree(sub);
    redisFree(r);
    return NULL;
}

static void *mix_baton(void *p)
{
    mix_run *w = p;
    baton_client *c = th_client(NULL);
    redisContext *r = th_redis();
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(c, w->name, &l), BATON_OK));
    for (int i = 0; i < MIX_ROUNDS; i++) {
        int64_t t0 = th_ms();
        int rc = baton_lock_try_acquire(l, 20000, 30000);
        int64_t waited = th_ms() - t0;
        if (rc != BATON_OK) {
            w->errors++;
            continue;
        }
        if (waited > w->max_wait_ms)
            w->max_wait_ms = waited;
        mix_count(r, w);
        w->errors += baton_lock_release(l) != BATON_OK;
    }
    baton_lock_close(l);
    redisFree(r);
    baton_client_close(c);
    return NULL;
}

/* Issue 49: Redisson clients (their scripts, as Java's run them) and baton's on one lock,
 * four of each, no pause between rounds. Exclusion is exact; baton's longest wait is
 * printed, and bounded by its line's longest look (1 s) with a margin. Redisson's clients
 * still take a free lock first (they do not know the line), so the wait is a race this
 * test does not bound tighter: on 2026-11-28, on a loaded 2-core machine, 41-107 ms over
 * three runs, and 56-111 ms with the tree before issue 49 (whose line's first heard
 * Redisson's unlocks only at its looks). */
Test(lock, redisson_and_baton_clients_share_a_lock_and_baton_waits_little, .timeout = 120)
{
    const char *name = th_tmpname("mixed");
    atomic_int inside = 0, overlaps = 0;
    mix_run w[2 * MIX_EACH];
    pthread_t t[2 * MIX_EACH];
    for (int i = 0; i < 2 * MIX_EACH; i++) {
        w[i] = (mix_run){.name = name,
                         .id = i,
                         .redisson = i % 2 == 0,
                         .inside = &inside,
                         .overlaps = &overlaps};
        cr_assert(eq(
            int, pthread_create(&t[i], NULL, w[i].redisson ? mix_redisson : mix_baton, &w[i]), 0));
    }
    int64_t longest = 0;
    for (int i = 0; i < 2 * MIX_EACH; i++) {
        pthread_join(t[i], NULL);
        cr_assert(eq(int, w[i].errors, 0), "worker %d", i);
        cr_assert(eq(int, w[i].done, MIX_ROUNDS), "worker %d", i);
        if (!w[i].redisson && w[i].max_wait_ms > longest)
            longest = w[i].max_wait_ms;
    }
    redisContext *r = th_redis();
    cr_assert(eq(int, atomic_load(&overlaps), 0), "two holders at once");
    cr_assert(eq(i64, th_cmd_int(r, "GET {%s}:mixcount", name), 2 * MIX_EACH * MIX_ROUNDS));
    fprintf(stderr,
            "mixed: %d Redisson and %d baton clients, %d rounds each: baton's longest wait "
            "%lld ms\n",
            MIX_EACH, MIX_EACH, MIX_ROUNDS, (long long)longest);
    cr_assert(le(i64, longest, 1500), "a baton waiter waited %lld ms", (long long)longest);
    redisFree(r);
}

/* ----------------------------------------------- hand-overs within a client (cohorting) --- */

typedef struct cohort_run {
    baton_client *c; /* shared by the threads: one client */
    const char *name, *counter;
    int rounds;
    int64_t wait_ms;          /* each acquire's wait (BATON_WAIT_FOREVER or short) */
    atomic_int *inside;       /* holders at once, seen from inside */
    atomic_int *overlaps;     /* times two were inside */
    atomic_llong *last_token; /* the last hold's fencing token */
    atomic_int *token_falls;  /* holds whose token was not above the one before */
    atomic_int acquired;      /* read while it runs */
    int timeouts, errors;
} cohort_run;

/* Each round: acquire through the thread's own handle, GET and SET the counter on the
 * thread's own connection (the critical section's two round trips), check the token rose,
 * release. */
static void *cohort_rounds(void *arg)
{
    cohort_run *w = arg;
    baton_lock *l;
    if (baton_lock_open(w->c, w->name, &l) != BATON_OK) {
        w->errors++;
        return NULL;
    }
    redisContext *r = th_redis();
    for (int i = 0; i < w->rounds; i++) {
        int rc = w->wait_ms == BATON_WAIT_FOREVER
                     ? baton_lock_acquire(l, BATON_LEASE_WATCHDOG)
                     : baton_lock_try_acquire(l, w->wait_ms, BATON_LEASE_WATCHDOG);
        if (rc == BATON_ETIMEDOUT) {
            w->timeouts++;
            continue;
        }
        if (rc != BATON_OK) {
            w->errors++;
            continue;
        }
        atomic_fetch_add(&w->acquired, 1);
        if (atomic_fetch_add(w->inside, 1) != 0)
            atomic_fetch_add(w->overlaps, 1);
        int64_t token = 0;
        if (baton_lock_fencing_token(l, &token) != BATON_OK)
            w->errors++;
        if (token <= atomic_load(w->last_token))
            atomic_fetch_add(w->token_falls, 1);
        atomic_store(w->last_token, token);
        redisReply *rep = redisCommand(r, "GET %s", w->counter);
        long long v = rep && rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : 0;
        if (rep)
            freeReplyObject(rep);
        rep = redisCommand(r, "SET %s %lld", w->counter, v + 1);
        if (rep)
            freeReplyObject(rep);
        atomic_fetch_sub(w->inside, 1);
        if (baton_lock_release(l) != BATON_OK)
            w->errors++;
    }
    redisFree(r);
    baton_lock_close(l);
    return NULL;
}

typedef struct cohort_totals {
    int acquired, timeouts;
    int overlaps, token_falls;
} cohort_totals;

static cohort_totals cohort_go(baton_client *c, const char *name, const char *counter, int n,
                               int rounds, int64_t wait_ms)
{
    atomic_int inside = 0, overlaps = 0, falls = 0;
    atomic_llong last = 0;
    cohort_run w[16];
    pthread_t t[16];
    cr_assert(le(int, n, 16));
    for (int i = 0; i < n; i++) {
        w[i] = (cohort_run){.c = c,
                            .name = name,
                            .counter = counter,
                            .rounds = rounds,
                            .wait_ms = wait_ms,
                            .inside = &inside,
                            .overlaps = &overlaps,
                            .last_token = &last,
                            .token_falls = &falls};
        cr_assert(eq(int, pthread_create(&t[i], NULL, cohort_rounds, &w[i]), 0));
    }
    cohort_totals tot = {0};
    for (int i = 0; i < n; i++) {
        pthread_join(t[i], NULL);
        cr_assert(eq(int, w[i].errors, 0), "thread %d", i);
        tot.acquired += atomic_load(&w[i].acquired);
        tot.timeouts += w[i].timeouts;
    }
    tot.overlaps = atomic_load(&overlaps);
    tot.token_falls = atomic_load(&falls);
    return tot;
}

/* 8 threads of one client on one lock, no pause between holds: a release that sees a
 * thread of its client asleep on the lock hands it the lock in the release's own script
 * (the owner field replaced, the token raised, nothing published), and the waiter
 * finishes without an attempt of its own. Before: every acquisition was at least one
 * attempt (a successful run of the acquire script), after a wake-up through pub/sub. */
Test(lock, a_release_hands_the_lock_to_a_waiting_thread_of_its_client, .timeout = 60)
{
    /* without the starvation bound: a waiter slowed past starve_ms (a sanitizer, a loaded
     * machine) would join the line, and the line stops the hand-overs (their bound) */
    baton_options o;
    baton_options_init(&o);
    o.starve_ms = BATON_STARVE_NEVER;
    baton_client *c = th_client(&o);
    const char *name = th_tmpname("lk-cohort"), *counter = th_tmpname("ctr-cohort");
    redisContext *r = th_redis();
    baton_stats before, after;
    cr_assert(eq(int, baton_client_stats(c, &before), BATON_OK));
    freeReplyObject(th_cmd(r, "CONFIG RESETSTAT"));
    cohort_totals tot = cohort_go(c, name, counter, 8, 200, BATON_WAIT_FOREVER);
    long long scripts = th_cmdstat(r, "evalsha") + th_cmdstat(r, "eval");
    long long publishes = th_cmdstat(r, "publish");
    cr_assert(eq(int, baton_client_stats(c, &after), BATON_OK));
    uint64_t attempts =
        after.kind[BATON_KIND_LOCK].attempts - before.kind[BATON_KIND_LOCK].attempts;
    cr_assert(eq(int, tot.acquired, 1600));
    cr_assert(eq(i64, th_cmd_int(r, "GET %s", counter), 1600), "an update was lost");
    cr_assert(eq(int, tot.overlaps, 0), "two holders at once");
    cr_assert(eq(int, tot.token_falls, 0), "a hold's token was not above the one before");
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s", name), 0));
    fprintf(stderr,
            "lock cohort: 1600 holds by 8 threads of one client: %.2f attempts and %.2f scripts "
            "per acquisition, %lld PUBLISH\n",
            attempts / 1600.0, scripts / 1600.0, publishes);
    /* handed over: fewer attempts than acquisitions, and scripts per acquisition (acquire
     * attempts + releases) below 2, the least the path through pub/sub could cost */
    cr_assert(lt(u64, attempts, 1600 * 3 / 4), "%llu attempts", (unsigned long long)attempts);
    cr_assert(lt(i64, scripts, 1600 * 7 / 4), "%lld scripts", scripts);
    cr_assert(lt(i64, publishes, 1600 / 2), "%lld PUBLISH", publishes);
    redisFree(r);
    baton_client_close(c);
}

/* Waiters that give up after 1 ms, racing releases that hand them the lock: one that
 * times out while a release is handing it the lock either takes it (the hand-over came
 * first) or leaves the releaser to undo it. No hold is ever left behind, exclusion holds,
 * and the counter counts every hold. */
Test(lock, a_waiter_that_times_out_at_a_hand_over_leaves_no_hold, .timeout = 60)
{
    baton_client *c = th_client(NULL);
    const char *name = th_tmpname("lk-cohort-to"), *counter = th_tmpname("ctr-cohort-to");
    redisContext *r = th_redis();
    int total = 0, timeouts = 0;
    for (int round = 0; round < 3; round++) {
        cohort_totals tot = cohort_go(c, name, counter, 8, 150, 1);
        cr_assert(eq(int, tot.overlaps, 0), "two holders at once");
        cr_assert(eq(int, tot.token_falls, 0));
        total += tot.acquired;
        timeouts += tot.timeouts;
        /* every thread released what it took: nothing is held */
        cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s", name), 0), "a hold was left behind");
    }
    cr_assert(eq(i64, th_cmd_int(r, "GET %s", counter), total));
    fprintf(stderr, "lock cohort: %d holds, %d waits gave up\n", total, timeouts);
    cr_assert(gt(int, timeouts, 0), "no wait gave up: the race was not run");
    redisFree(r);
    baton_client_close(c);
}

typedef struct outsider {
    const char *name;
    int rc;
    int64_t waited_ms;
} outsider;

static void *outsider_takes(void *arg)
{
    outsider *o = arg;
    baton_client *c = th_client(NULL);
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(c, o->name, &l), BATON_OK));
    int64_t t0 = th_ms();
    o->rc = baton_lock_try_acquire(l, 10000, BATON_LEASE_WATCHDOG);
    o->waited_ms = th_ms() - t0;
    if (o->rc == BATON_OK)
        baton_lock_release(l);
    baton_lock_close(l);
    baton_client_close(c);
    return NULL;
}

/* The bound: 4 threads of one client pass the lock among themselves without a pause, and
 * a waiter of a second client still gets it soon (the passes stop at 8 in a row, and
 * while a starved waiter is in the lock's line). */
Test(lock, a_waiter_of_another_client_gets_the_lock_while_a_cohort_passes_it, .timeout = 60)
{
    baton_client *c = th_client(NULL);
    const char *name = th_tmpname("lk-cohort-bound"), *counter = th_tmpname("ctr-cohort-bd");
    outsider o = {.name = name};
    pthread_t to;
    atomic_int inside = 0, overlaps = 0, falls = 0;
    atomic_llong last = 0;
    cohort_run w[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (cohort_run){.c = c,
                            .name = name,
                            .counter = counter,
                            .rounds = 600,
                            .wait_ms = BATON_WAIT_FOREVER,
                            .inside = &inside,
                            .overlaps = &overlaps,
                            .last_token = &last,
                            .token_falls = &falls};
        cr_assert(eq(int, pthread_create(&t[i], NULL, cohort_rounds, &w[i]), 0));
    }
    th_sleep_ms(100); /* the cohort is passing the lock */
    cr_assert(eq(int, pthread_create(&to, NULL, outsider_takes, &o), 0));
    pthread_join(to, NULL);
    bool cohort_busy = false;
    for (int i = 0; i < 4; i++)
        cohort_busy |= atomic_load(&w[i].acquired) < w[i].rounds;
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        cr_assert(eq(int, w[i].errors, 0));
    }
    cr_assert(eq(int, o.rc, BATON_OK));
    fprintf(stderr, "lock cohort: the other client's waiter waited %lld ms\n",
            (long long)o.waited_ms);
    cr_assert(cohort_busy, "the cohort had finished: the bound was not tested");
    cr_assert(le(i64, o.waited_ms, 200 * SLOW), "waited %lld ms", (long long)o.waited_ms);
    cr_assert(eq(int, atomic_load(&overlaps), 0));
}
