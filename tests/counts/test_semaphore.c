/*
 * The counting semaphore against a real redis-server: a worker pool capped across threads
 * and processes, multi-permit waits, timeouts, wake-ups as many as the permits serve, a
 * killed subscriber connection, a count changed without a message, the administrative
 * verbs, Redisson's layout, bad input and keys of another type.
 */
#define _GNU_SOURCE
#include "helper.h"
#include "internal.h"

#include "new_assert.h"
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

TestSuite(semaphore, .timeout = 60);

static baton_semaphore *open_sem(baton_client *c, const char *name)
{
    baton_semaphore *s = NULL;
    cr_assert(eq(int, baton_semaphore_open(c, name, &s), BATON_OK));
    return s;
}

static int64_t available(baton_semaphore *s)
{
    int64_t n = -100;
    cr_assert(eq(int, baton_semaphore_available(s, &n), BATON_OK));
    return n;
}

/* A client whose waiters sleep recheck_ms between looks, and never queue in the line of
 * starved waiters (they stay on the shared channel, whose wake-ups these tests count). */
static baton_client *client_with_recheck(int64_t recheck_ms)
{
    baton_options o;
    baton_options_init(&o);
    o.recheck_ms = recheck_ms;
    o.starve_ms = BATON_STARVE_NEVER;
    return th_client(&o);
}

/* ---------------------------------------------------------------- worker pool -------- */

typedef struct pool_job {
    baton_semaphore *sem;
    const char *holders; /* INCR on entry, DECR on exit: how many hold a permit now */
    redisContext *r;     /* this worker's own raw connection, or NULL to open one */
    int iterations;
    int errors;
    int done;
    long long max; /* the most holders this worker saw */
} pool_job;

/* acquire(1), INCR holders (record the maximum), short work, DECR, release(1) */
static void pool_loop(pool_job *j)
{
    for (int i = 0; i < j->iterations; i++) {
        if (baton_semaphore_acquire(j->sem, 1) != BATON_OK) {
            j->errors++;
            continue;
        }
        redisReply *rep = redisCommand(j->r, "INCR %s", j->holders);
        if (rep && rep->type == REDIS_REPLY_INTEGER && rep->integer > j->max)
            j->max = rep->integer;
        if (rep)
            freeReplyObject(rep);
        else
            j->errors++;
        usleep(300); /* the work */
        rep = redisCommand(j->r, "DECR %s", j->holders);
        if (rep)
            freeReplyObject(rep);
        else
            j->errors++;
        if (baton_semaphore_release(j->sem, 1) != BATON_OK)
            j->errors++;
        else
            j->done++;
    }
}

static void *pool_thread(void *arg)
{
    pool_job *j = arg;
    struct timeval tv = {5, 0};
    j->r = redisConnectWithTimeout("127.0.0.1", th_port(), tv);
    if (!j->r || j->r->err) {
        j->errors = j->iterations;
        return NULL;
    }
    pool_loop(j);
    redisFree(j->r);
    j->r = NULL;
    return NULL;
}

/* What an uncontended acquire and release cost the server, command by command (issue 30,
 * docs/ARCHITECTURE.md): acquire = EVALSHA, GET, EXISTS (of the line and its reservation),
 * DECRBY, SET of its request latch; release = EVALSHA, INCRBY, PUBLISH, EXISTS (of the
 * line), SET of its latch. No TYPE, and a first attempt reads no latch (before: 7 and 7;
 * 4 and 4 before the line). */
Test(semaphore, an_acquire_and_release_cost_ten_server_commands)
{
    baton_client *c = th_client(NULL);
    char *name = th_name("sem-cost");
    baton_semaphore *s = open_sem(c, name);
    cr_assert(eq(int, baton_semaphore_try_set_permits(s, 1, NULL), BATON_OK));
    cr_assert(eq(int, baton_semaphore_acquire(s, 1), BATON_OK)); /* scripts loaded, */
    cr_assert(eq(int, baton_semaphore_release(s, 1), BATON_OK)); /* a connection open */
    redisContext *r = th_redis();
    freeReplyObject(th_cmd(r, "CONFIG RESETSTAT"));
    enum { PAIRS = 10 };
    for (int i = 0; i < PAIRS; i++) {
        cr_assert(eq(int, baton_semaphore_acquire(s, 1), BATON_OK));
        cr_assert(eq(int, baton_semaphore_release(s, 1), BATON_OK));
    }
    static const struct {
        const char *cmd;
        long long per_pair;
    } want[] = {{"evalsha", 2}, {"get", 1}, {"exists", 2}, {"decrby", 1}, {"incrby", 1},
                {"publish", 1}, {"set", 2}, {"type", 0},   {"eval", 0}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_assert(eq(i64, th_cmdstat(r, want[i].cmd), want[i].per_pair * PAIRS), "%s", want[i].cmd);
    cr_assert(eq(i64, available(s), 1));
    redisFree(r);
    baton_semaphore_close(s);
    baton_client_close(c);
    free(name);
}

Test(semaphore, pool_of_sixteen_threads_never_exceeds_four_permits)
{
    /* Without the starvation bound: this case counts hand-overs within the client. With the
     * default (a waiter queues in the line after 20 ms, and the line stops hand-overs), a
     * sanitizer build on a loaded machine slowed its threads past the bound and made 1.5 to
     * 3.0 scripts an acquisition; the line against hand-overs has cases of its own
     * (a_waiter_of_another_client_gets_a_permit_while_a_cohort_passes_it). */
    baton_options o;
    baton_options_init(&o);
    o.starve_ms = BATON_STARVE_NEVER;
    baton_client *c = th_client(&o);
    char *name = th_name("sem-pool"), *holders = th_name("holders");
    baton_semaphore *s = open_sem(c, name);
    bool set = false;
    cr_assert(eq(int, baton_semaphore_try_set_permits(s, 4, &set), BATON_OK));
    cr_assert(set);
    redisContext *r = th_redis();
    freeReplyObject(th_cmd(r, "CONFIG RESETSTAT"));
    long long cmds0 = th_commands_processed(r);

    pool_job jobs[16];
    pthread_t t[16];
    int64_t t0 = th_ms();
    for (int i = 0; i < 16; i++) {
        jobs[i] = (pool_job){s, holders, NULL, 200, 0, 0, 0};
        pthread_create(&t[i], NULL, pool_thread, &jobs[i]);
    }
    long long max = 0;
    int done = 0;
    for (int i = 0; i < 16; i++) {
        pthread_join(t[i], NULL);
        cr_assert(eq(int, jobs[i].errors, 0), "thread %d: %s", i, baton_client_errmsg(c));
        done += jobs[i].done;
        if (jobs[i].max > max)
            max = jobs[i].max;
    }
    int64_t took = th_ms() - t0;
    cr_assert(eq(int, done, 3200));
    cr_assert(eq(i64, max, 4), "the most holders at once");
    cr_assert(eq(i64, available(s), 4));
    cr_assert(eq(i64, th_cmd_int(r, "GET %s", holders), 0));

    /* The figures the issue asks for: throughput and server work per acquisition. The
     * pool's own INCR and DECR (2 per acquisition), the first INFO and the two GETs above
     * are not counted. */
    long long cmds = th_commands_processed(r) - cmds0 - 2LL * done - 3;
    long long evalsha = th_cmdstat(r, "evalsha") + th_cmdstat(r, "eval");
    long long subs = th_cmdstat(r, "subscribe") + th_cmdstat(r, "unsubscribe");
    fprintf(stderr,
            "semaphore pool: %d acquire+release by 16 threads, 4 permits, 0.3 ms work: "
            "%lld ms, %.0f per second; per acquisition %.2f script runs (acquire attempts "
            "+ release), %.3f SUBSCRIBE/UNSUBSCRIBE, %.2f server commands (calls inside "
            "scripts included)\n",
            done, (long long)took, done * 1000.0 / (double)(took ? took : 1),
            (double)evalsha / done, (double)subs / done, (double)cmds / done);
    /* A release hands its permit to a thread of the client asleep for it, in the process
     * (cohorting): most acquisitions cost no script at all (0.23 per acquisition on a quiet
     * machine). Before, each cost at least two (its acquire and its release: 2.2 to 3.6 per
     * acquisition). */
    cr_assert(lt(i64, evalsha, done), "%.2f scripts per acquisition", (double)evalsha / done);
    redisFree(r);
    baton_semaphore_close(s);
    baton_client_close(c);
    free(name);
    free(holders);
}

typedef struct giver {
    baton_semaphore *s;
    int64_t wait_ms;
    atomic_int *inside, *most;
    int rounds, acquired, timeouts, errors;
} giver;

/* try_acquire(1) with a wait of 1 to 3 ms, a short hold, release: waits end at every
 * moment of the hand-overs. */
static void *quit_or_hold(void *arg)
{
    giver *q = arg;
    for (int i = 0; i < q->rounds; i++) {
        int rc = baton_semaphore_try_acquire(q->s, 1, q->wait_ms + i % 3);
        if (rc == BATON_ETIMEDOUT) {
            q->timeouts++;
            continue;
        }
        if (rc != BATON_OK) {
            q->errors++;
            continue;
        }
        q->acquired++;
        int now = atomic_fetch_add(q->inside, 1) + 1;
        int most = atomic_load(q->most);
        while (now > most && !atomic_compare_exchange_weak(q->most, &most, now))
            ;
        usleep(200); /* the work */
        atomic_fetch_sub(q->inside, 1);
        if (baton_semaphore_release(q->s, 1) != BATON_OK)
            q->errors++;
    }
    return NULL;
}

/* 12 threads of one client, 3 permits, waits of 1 to 3 ms that end as releases hand
 * permits over: a waiter that gave up is never handed a permit (it would drop it), so no
 * permit is lost and no fourth holder ever runs. */
Test(semaphore, waiters_that_give_up_during_hand_overs_lose_no_permit)
{
    baton_client *c = th_client(NULL);
    char *name = th_name("sem-quit");
    baton_semaphore *s = open_sem(c, name);
    cr_assert(eq(int, baton_semaphore_try_set_permits(s, 3, NULL), BATON_OK));
    atomic_int inside = 0, most = 0;
    giver q[12];
    pthread_t t[12];
    for (int i = 0; i < 12; i++) {
        q[i] = (giver){.s = s, .wait_ms = 1, .inside = &inside, .most = &most, .rounds = 200};
        cr_assert(eq(int, pthread_create(&t[i], NULL, quit_or_hold, &q[i]), 0));
    }
    int acquired = 0, timeouts = 0;
    for (int i = 0; i < 12; i++) {
        pthread_join(t[i], NULL);
        cr_assert(eq(int, q[i].errors, 0), "thread %d", i);
        acquired += q[i].acquired;
        timeouts += q[i].timeouts;
    }
    fprintf(stderr, "semaphore cohort: %d acquired, %d waits gave up, at most %d holders\n",
            acquired, timeouts, atomic_load(&most));
    cr_assert(le(int, atomic_load(&most), 3), "more holders than permits");
    cr_assert(eq(i64, available(s), 3), "a permit was lost or made");
    cr_assert(gt(int, timeouts, 0), "no wait gave up: the race was not run");
    cr_assert(gt(int, acquired, 0));
    baton_semaphore_close(s);
    baton_client_close(c);
    free(name);
}

typedef struct proc_arg {
    const char *name, *holders;
    int fd; /* where the child writes its proc_result */
} proc_arg;

typedef struct proc_result {
    int errors, done;
    long long max;
} proc_result;

/* One process: one client, four threads sharing it, 200 acquisitions each. */
static int pool_process(void *arg)
{
    proc_arg *a = arg;
    baton_options o;
    baton_options_init(&o);
    o.url = th_url();
    baton_client *c;
    baton_semaphore *s;
    if (baton_client_open(&o, &c) != BATON_OK || baton_semaphore_open(c, a->name, &s) != BATON_OK)
        return 100;
    pool_job jobs[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (pool_job){s, a->holders, NULL, 200, 0, 0, 0};
        pthread_create(&t[i], NULL, pool_thread, &jobs[i]);
    }
    proc_result res = {0, 0, 0};
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        res.errors += jobs[i].errors;
        res.done += jobs[i].done;
        if (jobs[i].max > res.max)
            res.max = jobs[i].max;
    }
    baton_semaphore_close(s);
    baton_client_close(c);
    return write(a->fd, &res, sizeof res) == sizeof res ? 0 : 101;
}

Test(semaphore, pool_of_eight_processes_never_exceeds_four_permits, .timeout = 120)
{
    baton_client *c = th_client(NULL);
    char *name = th_name("sem-procs"), *holders = th_name("holders");
    baton_semaphore *s = open_sem(c, name);
    cr_assert(eq(int, baton_semaphore_try_set_permits(s, 4, NULL), BATON_OK));
    int fds[2];
    cr_assert(eq(int, pipe(fds), 0));
    proc_arg a = {name, holders, fds[1]};
    pid_t pids[8];
    int64_t t0 = th_ms();
    for (int i = 0; i < 8; i++)
        pids[i] = th_fork(pool_process, &a);
    for (int i = 0; i < 8; i++)
        cr_assert(eq(int, th_wait(pids[i]), 0), "process %d", i);
    int64_t took = th_ms() - t0;
    long long max = 0;
    int done = 0;
    for (int i = 0; i < 8; i++) {
        proc_result res;
        cr_assert(eq(sz, (size_t)read(fds[0], &res, sizeof res), sizeof res));
        cr_assert(eq(int, res.errors, 0), "process result %d", i);
        done += res.done;
        if (res.max > max)
            max = res.max;
    }
    close(fds[0]);
    close(fds[1]);
    cr_assert(eq(int, done, 8 * 4 * 200));
    cr_assert(eq(i64, max, 4), "the most holders at once");
    cr_assert(eq(i64, available(s), 4));
    redisContext *r = th_redis();
    cr_assert(eq(i64, th_cmd_int(r, "GET %s", holders), 0));
    redisFree(r);
    fprintf(stderr, "semaphore pool: %d acquire+release by 8 processes x 4 threads: %lld ms\n",
            done, (long long)took);
    baton_semaphore_close(s);
    baton_client_close(c);
    free(name);
    free(holders);
}

/* ---------------------------------------------------------------- waits -------------- */

typedef struct waiter {
    baton_semaphore *sem;
    int64_t permits, wait_ms;
    int rc;
    atomic_bool finished;
    int64_t done_ms;
    atomic_int *count; /* incremented when acquired, or NULL */
} waiter;

static void *try_acquire_thread(void *arg)
{
    waiter *w = arg;
    w->rc = baton_semaphore_try_acquire(w->sem, w->permits, w->wait_ms);
    w->done_ms = th_ms();
    if (w->rc == BATON_OK && w->count)
        atomic_fetch_add(w->count, 1);
    atomic_store(&w->finished, true);
    return NULL;
}

Test(semaphore, acquire_two_waits_for_the_second_permit)
{
    /* A long recheck: only the add_permits message can explain a prompt return. */
    baton_client *a = client_with_recheck(60000), *b = th_client(NULL);
    char *name = th_name("sem-two");
    baton_semaphore *sa = open_sem(a, name), *sb = open_sem(b, name);
    cr_assert(eq(int, baton_semaphore_try_set_permits(sb, 1, NULL), BATON_OK));
    waiter w = {sa, 2, BATON_WAIT_FOREVER, -100, false, 0, NULL};
    pthread_t t;
    pthread_create(&t, NULL, try_acquire_thread, &w);
    th_sleep_ms(300);
    cr_assert(not(atomic_load(&w.finished)), "acquire(2) returned with 1 permit: %s",
              baton_err_name(w.rc));
    cr_assert(eq(i64, available(sb), 1), "a waiter takes nothing until it can take all");
    int64_t t0 = th_ms();
    cr_assert(eq(int, baton_semaphore_add_permits(sb, 1), BATON_OK));
    pthread_join(t, NULL);
    cr_assert(eq(int, w.rc, BATON_OK));
    int64_t took = w.done_ms - t0;
    cr_assert(lt(i64, took, 50), "acquire(2) returned %lld ms after add_permits(1)",
              (long long)took);
    cr_assert(eq(i64, available(sb), 0));
    baton_semaphore_close(sa);
    baton_semaphore_close(sb);
    baton_client_close(a);
    baton_client_close(b);
    free(name);
}

Test(semaphore, try_acquire_times_out_on_time_taking_nothing)
{
    baton_client *c = th_client(NULL);
    char *name = th_name("sem-timeout");
    baton_semaphore *s = open_sem(c, name);
    cr_assert(eq(int, baton_semaphore_try_set_permits(s, 0, NULL), BATON_OK));
    int64_t t0 = th_ms();
    cr_assert(eq(int, baton_semaphore_try_acquire(s, 1, 1000), BATON_ETIMEDOUT));
    int64_t took = th_ms() - t0;
    cr_assert(ge(i64, took, 990), "%lld ms", (long long)took);
    cr_assert(le(i64, took, 1300), "%lld ms", (long long)took);
    cr_assert(ne(str, (char *)baton_client_errmsg(c), ""));
    cr_assert(eq(i64, available(s), 0));
    /* nothing left behind: no subscription, the count untouched */
    cr_assert(eq(int, baton__sub_count(c), 0));
    redisContext *r = th_redis();
    cr_assert(eq(i64, th_numsub(r, "redisson_sc:{%s}", name), 0));
    redisReply *rep = th_cmd(r, "GET %s", name);
    cr_assert(eq(str, rep->str, "0"));
    freeReplyObject(rep);
    /* a single attempt: immediate, and it never subscribes */
    t0 = th_ms();
    cr_assert(eq(int, baton_semaphore_try_acquire(s, 1, 0), BATON_ETIMEDOUT));
    cr_assert(le(i64, th_ms() - t0, 100));
    cr_assert(eq(int, baton__sub_count(c), 0));
    /* an absent semaphore has no permits */
    char *absent = th_name("sem-absent");
    baton_semaphore *sa = open_sem(c, absent);
    cr_assert(eq(int, baton_semaphore_try_acquire(sa, 1, 200), BATON_ETIMEDOUT));
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s", absent), 0));
    redisFree(r);
    baton_semaphore_close(sa);
    baton_semaphore_close(s);
    baton_client_close(c);
    free(name);
    free(absent);
}

static void start_waiters(waiter *w, pthread_t *t, int n, baton_semaphore *s, atomic_int *count)
{
    for (int i = 0; i < n; i++) {
        w[i] = (waiter){s, 1, 20000, -100, false, 0, count};
        pthread_create(&t[i], NULL, try_acquire_thread, &w[i]);
    }
}

/* Four threads of one client (recheck_ms 60 s) asleep for 1 permit of a semaphore with
 * none, another client's handle on it, and the server's command counts reset. */
typedef struct four_asleep {
    baton_client *c, *other;
    char *name;
    baton_semaphore *s, *so;
    atomic_int acquired;
    waiter w[4];
    pthread_t t[4];
    redisContext *r;
} four_asleep;

static void four_asleep_start(four_asleep *f, const char *tag)
{
    f->c = client_with_recheck(60000);
    f->other = th_client(NULL);
    f->name = th_name(tag);
    f->s = open_sem(f->c, f->name);
    f->so = open_sem(f->other, f->name);
    cr_assert(eq(int, baton_semaphore_try_set_permits(f->so, 0, NULL), BATON_OK));
    atomic_store(&f->acquired, 0);
    start_waiters(f->w, f->t, 4, f->s, &f->acquired);
    th_sleep_ms(300); /* all four are asleep on one subscription */
    cr_assert(eq(int, baton__sub_count(f->c), 1));
    f->r = th_redis();
    freeReplyObject(th_cmd(f->r, "CONFIG RESETSTAT"));
}

/* Two permits more (two waiters are still asleep), then every waiter got one; closes all. */
static void four_asleep_finish(four_asleep *f)
{
    cr_assert(eq(int, baton_semaphore_release(f->so, 2), BATON_OK));
    for (int i = 0; i < 4; i++) {
        pthread_join(f->t[i], NULL);
        cr_assert(eq(int, f->w[i].rc, BATON_OK), "waiter %d", i);
    }
    cr_assert(eq(i64, available(f->s), 0));
    redisFree(f->r);
    baton_semaphore_close(f->s);
    baton_semaphore_close(f->so);
    baton_client_close(f->c);
    baton_client_close(f->other);
    free(f->name);
}

Test(semaphore, release_wakes_as_many_waiters_as_it_has_permits)
{
    four_asleep f;
    four_asleep_start(&f, "sem-wake");
    int64_t t0 = th_ms();
    cr_assert(eq(int, baton_semaphore_release(f.so, 2), BATON_OK));
    th_sleep_ms(300);
    cr_assert(eq(int, atomic_load(&f.acquired), 2), "release(2) let %d waiters in",
              atomic_load(&f.acquired));
    /* not one waiter woken, not all four: the release plus exactly two attempts */
    cr_assert(eq(i64, th_cmdstat(f.r, "evalsha"), 3));
    int promptly = 0;
    for (int i = 0; i < 4; i++)
        if (atomic_load(&f.w[i].finished) && f.w[i].done_ms - t0 < 100)
            promptly++;
    cr_assert(eq(int, promptly, 2));
    four_asleep_finish(&f);
}

/* Two releases whose messages come in one read: the second announces 2 permits while the
 * waiter the first woke has not tried yet. Two waiters try, not three (1 + 2): a message's
 * count includes the waiters already woken. */
Test(semaphore, a_message_counts_the_waiters_already_woken)
{
    four_asleep f;
    four_asleep_start(&f, "sem-woken");
    th_two_releases_in_one_read(f.r, f.name);
    th_sleep_ms(300);
    cr_assert(eq(int, atomic_load(&f.acquired), 2));
    /* 3 on the library before this change: the second message woke two more */
    cr_assert(eq(i64, th_cmdstat(f.r, "evalsha"), 2), "attempts by the woken waiters");
    four_asleep_finish(&f);
}

typedef struct retaker {
    baton_semaphore *s;
    atomic_bool released; /* it gave its permit back, and asks again */
    int rc;
    int64_t got_ms;
    atomic_bool got; /* it holds the permit again */
} retaker;

static void *release_and_retake(void *arg)
{
    retaker *a = arg;
    a->rc = baton_semaphore_release(a->s, 1);
    atomic_store(&a->released, true);
    if (a->rc == BATON_OK)
        a->rc = baton_semaphore_try_acquire(a->s, 1, 20000);
    a->got_ms = th_ms();
    atomic_store(&a->got, a->rc == BATON_OK);
    return NULL;
}

/* A thread that gives its permit back and asks again at once, while threads of its client
 * wait for 1 permit: its release hands the permit to one of them in the process (cohorting:
 * no script at all; before, the release and one attempt by the thread woken, and before
 * that the releaser took its permit back and the woken waiter lost, a third), and it
 * queues behind them rather than trying. */
Test(semaphore, a_release_then_acquire_queues_behind_its_clients_waiters)
{
    baton_client *c = client_with_recheck(60000);
    char *name = th_name("sem-behind");
    baton_semaphore *s = open_sem(c, name);
    cr_assert(eq(int, baton_semaphore_try_set_permits(s, 1, NULL), BATON_OK));
    cr_assert(eq(int, baton_semaphore_acquire(s, 1), BATON_OK));
    atomic_int acquired = 0;
    waiter w[2];
    pthread_t t[2];
    start_waiters(w, t, 2, s, &acquired);
    th_sleep_ms(300); /* both asleep */
    redisContext *r = th_redis();
    freeReplyObject(th_cmd(r, "CONFIG RESETSTAT"));
    retaker a = {.s = s};
    pthread_t ta;
    pthread_create(&ta, NULL, release_and_retake, &a);
    th_sleep_ms(300);
    cr_assert(atomic_load(&a.released));
    cr_assert(eq(i64, th_cmdstat(r, "evalsha"), 0), "handed over in the process");
    /* one holder: a waiter (the releaser queued behind them) */
    int holders = atomic_load(&acquired) + atomic_load(&a.got);
    cr_assert(eq(int, holders, 1));
    cr_assert(eq(int, atomic_load(&acquired), 1), "a waiter, not the releaser");
    /* the rest get the permit in turn */
    for (int turn = 0; turn < 2; turn++) {
        cr_assert(eq(int, baton_semaphore_release(s, 1), BATON_OK));
        th_sleep_ms(200);
        cr_assert(eq(int, atomic_load(&acquired) + atomic_load(&a.got), holders + turn + 1));
    }
    pthread_join(ta, NULL);
    cr_assert(eq(int, a.rc, BATON_OK));
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        cr_assert(eq(int, w[i].rc, BATON_OK), "waiter %d", i);
    }
    fprintf(stderr, "semaphore: after its release, the releaser got the permit %s\n",
            a.got_ms <= w[0].done_ms && a.got_ms <= w[1].done_ms ? "first" : "after a waiter");
    cr_assert(eq(i64, available(s), 0));
    redisFree(r);
    baton_semaphore_close(s);
    baton_client_close(c);
    free(name);
}

Test(semaphore, killed_subscriber_connection_loses_no_waiter)
{
    /* A long recheck: the dispatcher's reconnection must wake the waiters, not the timer. */
    baton_client *c = client_with_recheck(60000), *other = th_client(NULL);
    char *name = th_name("sem-pubsubkill");
    baton_semaphore *s = open_sem(c, name), *so = open_sem(other, name);
    cr_assert(eq(int, baton_semaphore_try_set_permits(so, 0, NULL), BATON_OK));
    atomic_int acquired = 0;
    waiter w[4];
    pthread_t t[4];
    start_waiters(w, t, 4, s, &acquired);
    th_sleep_ms(300);
    cr_assert(eq(int, atomic_load(&acquired), 0));
    redisContext *r = th_redis();
    cr_assert(ge(i64, th_cmd_int(r, "CLIENT KILL TYPE pubsub"), 1));
    int64_t t0 = th_ms();
    cr_assert(eq(int, baton_semaphore_release(so, 4), BATON_OK));
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        cr_assert(eq(int, w[i].rc, BATON_OK), "waiter %d", i);
        int64_t took = w[i].done_ms - t0;
        cr_assert(le(i64, took, 500), "waiter %d acquired %lld ms after the release", i,
                  (long long)took);
    }
    cr_assert(eq(i64, available(s), 0));
    redisFree(r);
    baton_semaphore_close(s);
    baton_semaphore_close(so);
    baton_client_close(c);
    baton_client_close(other);
    free(name);
}

Test(semaphore, a_count_written_without_a_message_is_seen_within_recheck)
{
    baton_client *c = client_with_recheck(200);
    char *name = th_name("sem-silent");
    baton_semaphore *s = open_sem(c, name);
    cr_assert(eq(int, baton_semaphore_try_set_permits(s, 0, NULL), BATON_OK));
    waiter w = {s, 1, 10000, -100, false, 0, NULL};
    pthread_t t;
    pthread_create(&t, NULL, try_acquire_thread, &w);
    th_sleep_ms(500);
    cr_assert(not(atomic_load(&w.finished)));
    redisContext *r = th_redis();
    freeReplyObject(th_cmd(r, "SET %s 1", name)); /* no PUBLISH: no wake-up */
    int64_t t0 = th_ms();
    pthread_join(t, NULL);
    cr_assert(eq(int, w.rc, BATON_OK));
    int64_t took = w.done_ms - t0;
    cr_assert(le(i64, took, 400), "acquired %lld ms after the silent SET (recheck 200 ms)",
              (long long)took);
    cr_assert(eq(i64, available(s), 0));
    redisFree(r);
    baton_semaphore_close(s);
    baton_client_close(c);
    free(name);
}

/* ---------------------------------------------------------------- administration ----- */

Test(semaphore, try_set_permits_sets_only_an_absent_count)
{
    baton_client *c = th_client(NULL);
    char *name = th_name("sem-set");
    baton_semaphore *s = open_sem(c, name);
    bool set = false, existed = true;
    cr_assert(eq(int, available(s), 0));
    cr_assert(eq(int, baton_semaphore_try_set_permits(s, 3, &set), BATON_OK));
    cr_assert(set);
    cr_assert(eq(i64, available(s), 3));
    cr_assert(eq(int, baton_semaphore_try_set_permits(s, 7, &set), BATON_OK));
    cr_assert(not(set));
    cr_assert(eq(i64, available(s), 3));
    cr_assert(eq(int, baton_semaphore_delete(s, &existed), BATON_OK));
    cr_assert(existed);
    cr_assert(eq(int, baton_semaphore_delete(s, &existed), BATON_OK));
    cr_assert(not(existed));
    cr_assert(eq(i64, available(s), 0));
    cr_assert(eq(int, baton_semaphore_try_set_permits(s, 0, &set), BATON_OK));
    cr_assert(set, "0 is a count: set once the key is gone");
    cr_assert(eq(int, baton_semaphore_try_set_permits(s, 2, &set), BATON_OK));
    cr_assert(not(set));
    cr_assert(eq(i64, available(s), 0));
    baton_semaphore_close(s);
    baton_client_close(c);
    free(name);
}

Test(semaphore, drain_takes_every_permit)
{
    baton_client *c = th_client(NULL);
    char *name = th_name("sem-drain"), *absent = th_name("sem-drain-absent");
    baton_semaphore *s = open_sem(c, name), *sa = open_sem(c, absent);
    cr_assert(eq(int, baton_semaphore_try_set_permits(s, 5, NULL), BATON_OK));
    cr_assert(eq(int, baton_semaphore_acquire(s, 2), BATON_OK));
    int64_t drained = -1;
    cr_assert(eq(int, baton_semaphore_drain(s, &drained), BATON_OK));
    cr_assert(eq(i64, drained, 3));
    cr_assert(eq(i64, available(s), 0));
    redisContext *r = th_redis();
    redisReply *rep = th_cmd(r, "GET %s", name);
    cr_assert(eq(str, rep->str, "0"));
    freeReplyObject(rep);
    cr_assert(eq(int, baton_semaphore_drain(s, &drained), BATON_OK));
    cr_assert(eq(i64, drained, 0));
    cr_assert(eq(int, baton_semaphore_drain(s, NULL), BATON_OK));
    cr_assert(eq(int, baton_semaphore_drain(sa, &drained), BATON_OK));
    cr_assert(eq(i64, drained, 0));
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s", absent), 0), "drain creates nothing");
    /* the permits taken before the drain come back */
    cr_assert(eq(int, baton_semaphore_release(s, 2), BATON_OK));
    cr_assert(eq(i64, available(s), 2));
    redisFree(r);
    baton_semaphore_close(s);
    baton_semaphore_close(sa);
    baton_client_close(c);
    free(name);
    free(absent);
}

Test(semaphore, release_on_an_absent_semaphore_creates_it)
{
    baton_client *c = th_client(NULL), *w = th_client(NULL);
    char *name = th_name("sem-create");
    baton_semaphore *s = open_sem(c, name), *sw = open_sem(w, name);
    redisContext *r = th_redis();
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s", name), 0));
    /* a waiter on the absent semaphore is woken by the release that creates it */
    waiter wt = {sw, 1, 10000, -100, false, 0, NULL};
    pthread_t t;
    pthread_create(&t, NULL, try_acquire_thread, &wt);
    th_sleep_ms(200);
    cr_assert(eq(int, baton_semaphore_release(s, 3), BATON_OK));
    pthread_join(t, NULL);
    cr_assert(eq(int, wt.rc, BATON_OK));
    cr_assert(eq(i64, available(s), 2));
    redisReply *rep = th_cmd(r, "GET %s", name);
    cr_assert(eq(str, rep->str, "2"));
    freeReplyObject(rep);
    cr_assert(eq(int, baton_semaphore_release(s, 1), BATON_OK), "no owner: anyone releases");
    cr_assert(eq(i64, available(s), 3));
    redisFree(r);
    baton_semaphore_close(s);
    baton_semaphore_close(sw);
    baton_client_close(c);
    baton_client_close(w);
    free(name);
}

Test(semaphore, add_permits_adds_and_removes_never_below_zero)
{
    baton_client *c = th_client(NULL);
    char *name = th_name("sem-add"), *absent = th_name("sem-add-absent");
    baton_semaphore *s = open_sem(c, name), *sa = open_sem(c, absent);
    redisContext *r = th_redis();
    cr_assert(eq(int, baton_semaphore_try_set_permits(s, 3, NULL), BATON_OK));
    cr_assert(eq(int, baton_semaphore_add_permits(s, -2), BATON_OK));
    cr_assert(eq(i64, available(s), 1));
    cr_assert(eq(int, baton_semaphore_add_permits(s, -5), BATON_OK));
    cr_assert(eq(i64, available(s), 0), "clamped at zero");
    redisReply *rep = th_cmd(r, "GET %s", name);
    cr_assert(eq(str, rep->str, "0"));
    freeReplyObject(rep);
    cr_assert(eq(int, baton_semaphore_add_permits(s, 0), BATON_OK));
    cr_assert(eq(i64, available(s), 0));
    cr_assert(eq(int, baton_semaphore_add_permits(s, 5), BATON_OK));
    cr_assert(eq(i64, available(s), 5));
    /* a TTL someone set survives the script's writes */
    freeReplyObject(th_cmd(r, "PEXPIRE %s 60000", name));
    cr_assert(eq(int, baton_semaphore_add_permits(s, -1), BATON_OK));
    cr_assert(eq(int, baton_semaphore_acquire(s, 1), BATON_OK));
    cr_assert(eq(int, baton_semaphore_drain(s, NULL), BATON_OK));
    cr_assert(gt(i64, th_cmd_int(r, "PTTL %s", name), 0));
    /* removing from an absent semaphore leaves it absent; adding creates it */
    cr_assert(eq(int, baton_semaphore_add_permits(sa, -3), BATON_OK));
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s", absent), 0));
    bool set = false;
    cr_assert(eq(int, baton_semaphore_add_permits(sa, 2), BATON_OK));
    cr_assert(eq(i64, available(sa), 2));
    cr_assert(eq(int, baton_semaphore_try_set_permits(sa, 9, &set), BATON_OK));
    cr_assert(not(set));
    redisFree(r);
    baton_semaphore_close(s);
    baton_semaphore_close(sa);
    baton_client_close(c);
    free(name);
    free(absent);
}

Test(semaphore, layout_is_redissons)
{
    baton_client *c = th_client(NULL);
    char *name = th_name("sem-layout");
    baton_semaphore *s = open_sem(c, name);
    cr_assert(eq(int, baton_semaphore_try_set_permits(s, 3, NULL), BATON_OK));
    redisContext *sub = th_redis();
    char channel[256];
    snprintf(channel, sizeof channel, "redisson_sc:{%s}", name);
    freeReplyObject(th_cmd(sub, "SUBSCRIBE %s", channel));
    cr_assert(eq(int, baton_semaphore_release(s, 2), BATON_OK));
    redisReply *msg = NULL;
    cr_assert(eq(int, redisGetReply(sub, (void **)&msg), REDIS_OK));
    cr_assert(eq(str, msg->element[1]->str, channel));
    cr_assert(eq(str, msg->element[2]->str, "5"), "release publishes the new count");
    freeReplyObject(msg);
    cr_assert(eq(int, baton_semaphore_add_permits(s, 1), BATON_OK));
    cr_assert(eq(int, redisGetReply(sub, (void **)&msg), REDIS_OK));
    cr_assert(eq(str, msg->element[2]->str, "6"), "add_permits publishes the new count");
    freeReplyObject(msg);
    redisContext *r = th_redis();
    redisReply *rep = th_cmd(r, "TYPE %s", name);
    cr_assert(eq(str, rep->str, "string"));
    freeReplyObject(rep);
    /* a name with a hash tag of its own keeps it: the channel adds no braces */
    baton_semaphore *tagged = open_sem(c, "sem{layout}tag");
    cr_assert(eq(int, baton_semaphore_delete(tagged, NULL), BATON_OK));
    redisContext *sub2 = th_redis();
    freeReplyObject(th_cmd(sub2, "SUBSCRIBE redisson_sc:sem{layout}tag"));
    cr_assert(eq(int, baton_semaphore_release(tagged, 1), BATON_OK));
    cr_assert(eq(int, redisGetReply(sub2, (void **)&msg), REDIS_OK));
    cr_assert(eq(str, msg->element[2]->str, "1"));
    freeReplyObject(msg);
    cr_assert(eq(int, baton_semaphore_delete(tagged, NULL), BATON_OK));
    redisFree(sub);
    redisFree(sub2);
    redisFree(r);
    baton_semaphore_close(tagged);
    baton_semaphore_close(s);
    baton_client_close(c);
    free(name);
}

/* ---------------------------------------------------------------- the line ----------- */

static long long line_length(redisContext *r, const char *name)
{
    return th_cmd_int(r, "ZCARD baton_semaphore_line:{%s}", name);
}

static uint64_t semaphore_attempts(baton_client *c)
{
    baton_stats st;
    baton_client_stats(c, &st);
    return st.kind[BATON_KIND_SEMAPHORE].attempts;
}

static void wait_line_length(redisContext *r, const char *name, long long n)
{
    int64_t t0 = th_ms();
    while (line_length(r, name) != n && th_ms() - t0 < 5000)
        th_sleep_ms(2);
    cr_assert(eq(i64, line_length(r, name), n), "the line's length");
}

/* A client of its own (a process, as far as waking goes) taking 1 permit SEM_ROUNDS times,
 * holding it 2 ms; holders counts who holds one now, most the most at once. */
enum { SEM_ROUNDS = 12 };
typedef struct sem_rounds {
    baton_client *c;
    baton_semaphore *s;
    atomic_int *holders, *most;
    int rc, done;
} sem_rounds;

static void *take_sem_rounds(void *p)
{
    sem_rounds *w = p;
    for (int i = 0; i < SEM_ROUNDS && w->rc == BATON_OK; i++) {
        w->rc = baton_semaphore_try_acquire(w->s, 1, 20000);
        if (w->rc != BATON_OK)
            break;
        int now = atomic_fetch_add(w->holders, 1) + 1, was = atomic_load(w->most);
        while (now > was && !atomic_compare_exchange_weak(w->most, &was, now))
            ;
        th_sleep_ms(2);
        atomic_fetch_sub(w->holders, 1);
        w->rc = baton_semaphore_release(w->s, 1);
        w->done += w->rc == BATON_OK;
    }
    return NULL;
}

/* A release hands its permit to the first waiter of the line alone, not to a race every
 * waiting process joins and all but one lose (issue 30: 50 processes on a 1-permit
 * semaphore made 27-29 attempts per acquisition; 8 clients here made 4.6 before the
 * line). Eight clients, each its own dispatcher as a process has, take the one permit 12
 * times each with no pause between rounds. */
Test(semaphore, a_release_goes_to_the_first_of_the_line_alone, .timeout = 60)
{
    enum { N = 8 };
    baton_client *c0 = th_client(NULL);
    char *name = th_name("sem-line");
    baton_semaphore *s0 = open_sem(c0, name);
    cr_assert(eq(int, baton_semaphore_try_set_permits(s0, 1, NULL), BATON_OK));
    atomic_int holders = 0, most = 0;
    sem_rounds w[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        w[i] = (sem_rounds){.c = th_client(NULL), .holders = &holders, .most = &most};
        w[i].s = open_sem(w[i].c, name);
    }
    for (int i = 0; i < N; i++)
        cr_assert(eq(int, pthread_create(&t[i], NULL, take_sem_rounds, &w[i]), 0));
    uint64_t tried = 0;
    int taken = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        cr_assert(eq(int, w[i].rc, BATON_OK), "client %d: %s", i, baton_err_name(w[i].rc));
        taken += w[i].done;
        tried += semaphore_attempts(w[i].c);
        baton_semaphore_close(w[i].s);
        baton_client_close(w[i].c);
    }
    cr_assert(eq(int, taken, N *SEM_ROUNDS));
    cr_assert(eq(int, atomic_load(&most), 1), "one holder at a time");
    cr_assert(eq(i64, available(s0), 1));
    double per = (double)tried / taken;
    fprintf(stderr, "semaphore line: %d acquisitions by %d clients, %.2f attempts each\n", taken, N,
            per);
    cr_assert(le(dbl, per, 3.5), "%.2f attempts per acquisition (%llu for %d)", per,
              (unsigned long long)tried, taken);
    redisContext *r = th_redis();
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS baton_semaphore_line:{%s}", name), 0),
              "the line is gone with its waiters");
    redisFree(r);
    baton_semaphore_close(s0);
    baton_client_close(c0);
    free(name);
}

/* A starved waiter takes a place in the line by itself (with no release to wake it), and
 * the releasing client that asks again at once (the race it would win every time) is
 * refused: the release reserved the permit for the line's first (issue 30). With
 * BATON_STARVE_NEVER no line forms and the releaser takes the permit back. */
Test(semaphore, a_starved_waiter_queues_and_the_releaser_cannot_take_the_permit_back)
{
    for (int never = 0; never < 2; never++) {
        baton_options o;
        baton_options_init(&o);
        o.starve_ms = never ? BATON_STARVE_NEVER : 10; /* the line after 40 ms */
        baton_client *ch = th_client(&o), *cw = th_client(&o);
        redisContext *r = th_redis();
        char *name = th_name("sem-starve");
        baton_semaphore *h = open_sem(ch, name), *sw = open_sem(cw, name);
        cr_assert(eq(int, baton_semaphore_try_set_permits(h, 1, NULL), BATON_OK));
        cr_assert(eq(int, baton_semaphore_try_acquire(h, 1, 0), BATON_OK));
        waiter wt = {sw, 1, 20000, -100, false, 0, NULL};
        pthread_t t;
        cr_assert(eq(int, pthread_create(&t, NULL, try_acquire_thread, &wt), 0));
        int64_t t0 = th_ms();
        while (line_length(r, name) == 0 && th_ms() - t0 < (never ? 300 : 5000))
            th_sleep_ms(2);
        bool holding = true;
        if (never) {
            cr_assert(eq(i64, line_length(r, name), 0), "no line without the bound");
            for (int i = 0; i < 5 && holding; i++) {
                cr_assert(eq(int, baton_semaphore_release(h, 1), BATON_OK));
                holding = baton_semaphore_try_acquire(h, 1, 0) == BATON_OK;
            }
            cr_assert(eq(i64, line_length(r, name), 0), "no line without the bound");
        } else {
            cr_assert(eq(i64, line_length(r, name), 1), "the starved waiter is in the line");
            /* its member: "<permits>:<owner>", the owner "<client id>:<thread id>" */
            redisReply *m = th_cmd(r, "ZRANGE baton_semaphore_line:{%s} 0 -1", name);
            cr_assert(eq(sz, m->elements, 1));
            char want[128];
            snprintf(want, sizeof want, "1:%s:", baton_client_id(cw));
            cr_assert(eq(int, strncmp(m->element[0]->str, want, strlen(want)), 0), "%s",
                      m->element[0]->str);
            freeReplyObject(m);
            cr_assert(eq(int, baton_semaphore_release(h, 1), BATON_OK));
            cr_assert(eq(int, baton_semaphore_try_acquire(h, 1, 0), BATON_ETIMEDOUT),
                      "reserved for the line's first: the releaser is refused");
            holding = false;
        }
        if (holding)
            cr_assert(eq(int, baton_semaphore_release(h, 1), BATON_OK));
        pthread_join(t, NULL);
        cr_assert(eq(int, wt.rc, BATON_OK), "%s", baton_client_errmsg(cw));
        cr_assert(eq(i64,
                     th_cmd_int(r, "EXISTS baton_semaphore_next:{%s} baton_semaphore_line:{%s}",
                                name, name),
                     0),
                  "the reservation and the line go with the hand-over");
        cr_assert(eq(i64, available(h), 0));
        baton_semaphore_close(sw);
        baton_semaphore_close(h);
        redisFree(r);
        baton_client_close(cw);
        baton_client_close(ch);
        free(name);
    }
}

/* One waiter of its own client for `permits`: notes its turn when it gets them. */
typedef struct sem_turn {
    baton_client *c;
    baton_semaphore *s;
    int64_t permits, wait_ms;
    atomic_int *turns;
    int turn, rc;
    int64_t done_ms;
} sem_turn;

static void *take_sem_turn(void *p)
{
    sem_turn *w = p;
    w->turn = -1;
    w->rc = baton_semaphore_try_acquire(w->s, w->permits, w->wait_ms);
    w->done_ms = th_ms();
    if (w->rc == BATON_OK)
        w->turn = atomic_fetch_add(w->turns, 1);
    return NULL;
}

static void sem_turn_open(sem_turn *w, const char *name, int64_t permits, int64_t wait_ms,
                          atomic_int *turns)
{
    *w = (sem_turn){.c = th_client(NULL), .permits = permits, .wait_ms = wait_ms, .turns = turns};
    w->s = open_sem(w->c, name);
}

static void sem_turn_close(sem_turn *w)
{
    baton_semaphore_close(w->s);
    baton_client_close(w->c);
}

/* A semaphore with no permit, a handle on it of a client of its own, and a raw connection
 * to look at its line. */
typedef struct line_fix {
    baton_client *c;
    redisContext *r;
    char *name;
    baton_semaphore *h;
} line_fix;

/* Takes name (th_name's) over. */
static void line_fix_open(line_fix *f, char *name)
{
    f->c = th_client(NULL);
    f->r = th_redis();
    f->name = name;
    f->h = open_sem(f->c, name);
    cr_assert(eq(int, baton_semaphore_try_set_permits(f->h, 0, NULL), BATON_OK));
}

static void line_fix_close(line_fix *f)
{
    baton_semaphore_close(f->h);
    redisFree(f->r);
    baton_client_close(f->c);
    free(f->name);
}

/* The line is first come, first served, whatever each waiter wants (Go's
 * x/sync/semaphore): a waiter for 2 permits first in the line is not passed by a waiter for
 * 1 behind it when 1 permit comes free; the first is served when a second comes, and the
 * second waiter when a third does. */
Test(semaphore, the_line_serves_in_order_a_larger_want_first, .timeout = 60)
{
    line_fix f;
    line_fix_open(&f, th_name("sem-order"));
    redisContext *r = f.r;
    const char *name = f.name;
    baton_semaphore *h = f.h;
    atomic_int turns = 0;
    sem_turn big, small;
    pthread_t tb, ts;
    sem_turn_open(&big, name, 2, 20000, &turns);
    sem_turn_open(&small, name, 1, 20000, &turns);
    cr_assert(eq(int, pthread_create(&tb, NULL, take_sem_turn, &big), 0));
    wait_line_length(r, name, 1);
    cr_assert(eq(int, pthread_create(&ts, NULL, take_sem_turn, &small), 0));
    wait_line_length(r, name, 2);
    cr_assert(eq(int, baton_semaphore_release(h, 1), BATON_OK));
    th_sleep_ms(300); /* both look by themselves meanwhile (50 and 100 ms) */
    cr_assert(eq(int, atomic_load(&turns), 0), "1 permit: the first wants 2, so nobody");
    cr_assert(eq(i64, available(h), 1));
    /* 2 free: the first (2) is served, the second (1) still waits: nothing is left for it */
    cr_assert(eq(int, baton_semaphore_release(h, 1), BATON_OK));
    pthread_join(tb, NULL);
    cr_assert(eq(int, big.rc, BATON_OK), "%s", baton_err_name(big.rc));
    cr_assert(eq(int, big.turn, 0), "the first in the line is served first");
    th_sleep_ms(200); /* the second looks by itself meanwhile */
    cr_assert(eq(int, atomic_load(&turns), 1), "the second was served with no permit free");
    cr_assert(eq(i64, available(h), 0));
    cr_assert(eq(int, baton_semaphore_release(h, 1), BATON_OK));
    pthread_join(ts, NULL);
    cr_assert(eq(int, small.rc, BATON_OK), "%s", baton_err_name(small.rc));
    cr_assert(eq(int, small.turn, 1));
    cr_assert(eq(i64, available(h), 0));
    cr_assert(eq(i64, line_length(r, name), 0));
    sem_turn_close(&big);
    sem_turn_close(&small);
    line_fix_close(&f);
}

/* A waiter that gives up (its wait ran out) leaves the line: the permit goes on to the next
 * at the release, not after a reservation for a waiter that is gone. */
Test(semaphore, a_waiter_that_gives_up_leaves_the_line, .timeout = 60)
{
    line_fix f;
    line_fix_open(&f, th_name("sem-giveup"));
    redisContext *r = f.r;
    const char *name = f.name;
    baton_semaphore *h = f.h;
    atomic_int turns = 0;
    sem_turn quitter, stayer;
    pthread_t tq, ts;
    sem_turn_open(&quitter, name, 1, 400, &turns);
    sem_turn_open(&stayer, name, 1, 20000, &turns);
    cr_assert(eq(int, pthread_create(&tq, NULL, take_sem_turn, &quitter), 0));
    wait_line_length(r, name, 1);
    cr_assert(eq(int, pthread_create(&ts, NULL, take_sem_turn, &stayer), 0));
    pthread_join(tq, NULL);
    cr_assert(eq(int, quitter.rc, BATON_ETIMEDOUT));
    wait_line_length(r, name, 1); /* the stayer alone */
    int64_t released = th_ms();
    cr_assert(eq(int, baton_semaphore_release(h, 1), BATON_OK));
    pthread_join(ts, NULL);
    cr_assert(eq(int, stayer.rc, BATON_OK), "%s", baton_err_name(stayer.rc));
    cr_assert(lt(i64, stayer.done_ms - released, 40), "handed on at the release: %lld ms",
              (long long)(stayer.done_ms - released));
    /* a cancelled waiter leaves it too: the next permit goes to whoever asks */
    sem_turn_close(&quitter);
    sem_turn_open(&quitter, name, 1, 20000, &turns);
    cr_assert(eq(int, pthread_create(&tq, NULL, take_sem_turn, &quitter), 0));
    wait_line_length(r, name, 1);
    cr_assert(eq(int, baton_semaphore_cancel_waits(quitter.s), BATON_OK));
    pthread_join(tq, NULL);
    cr_assert(eq(int, quitter.rc, BATON_ECANCELED));
    cr_assert(eq(i64, line_length(r, name), 0));
    cr_assert(eq(int, baton_semaphore_release(h, 1), BATON_OK));
    cr_assert(eq(int, baton_semaphore_try_acquire(h, 1, 0), BATON_OK), "no reservation left");
    sem_turn_close(&quitter);
    sem_turn_close(&stayer);
    line_fix_close(&f);
}

/* A process killed while in the line costs the semaphore no more than the reservation made
 * for it (50 ms) and a look of the next waiter. The child is forked before this process
 * opens a client, and waits when told. */
typedef struct sem_child {
    const char *name;
    int go_fd;
} sem_child;

static int wait_in_sem_line(void *p)
{
    const sem_child *a = p;
    baton_options o;
    baton_options_init(&o);
    o.url = th_url();
    baton_client *c;
    baton_semaphore *s;
    if (baton_client_open(&o, &c) != BATON_OK || baton_semaphore_open(c, a->name, &s) != BATON_OK)
        return 1;
    char b = 1;
    if (read(a->go_fd, &b, 1) != 1)
        return 2;
    int rc = baton_semaphore_try_acquire(s, 1, 60000);
    fprintf(stderr, "child: %s: %s\n", baton_err_name(rc), baton_client_errmsg(c));
    return 3;
}

Test(semaphore, a_waiter_killed_in_the_line_costs_the_semaphore_a_look, .timeout = 60)
{
    char *name = th_name("sem-dead");
    int go[2];
    cr_assert(eq(int, pipe(go), 0));
    sem_child a = {name, go[0]};
    pid_t pid = th_fork(wait_in_sem_line, &a);
    baton_client *ch = th_client(NULL);
    redisContext *r = th_redis();
    baton_semaphore *h = open_sem(ch, name);
    cr_assert(eq(int, baton_semaphore_try_set_permits(h, 0, NULL), BATON_OK));
    char b = 1;
    cr_assert(eq(sz, (size_t)write(go[1], &b, 1), 1));
    wait_line_length(r, name, 1);
    kill(pid, SIGKILL);
    cr_assert(eq(int, th_wait(pid), 128 + SIGKILL));
    atomic_int turns = 0;
    sem_turn w;
    sem_turn_open(&w, name, 1, 20000, &turns);
    pthread_t t;
    cr_assert(eq(int, pthread_create(&t, NULL, take_sem_turn, &w), 0));
    wait_line_length(r, name, 2);
    int64_t released = th_ms();
    cr_assert(eq(int, baton_semaphore_release(h, 1), BATON_OK));
    pthread_join(t, NULL);
    cr_assert(eq(int, w.rc, BATON_OK), "%s", baton_err_name(w.rc));
    /* 50 ms of reservation, then its look (every 100 ms at rank 1); a margin for load */
    cr_assert(le(i64, w.done_ms - released, 500), "the permit came %lld ms after the release",
              (long long)(w.done_ms - released));
    sem_turn_close(&w);
    close(go[0]);
    close(go[1]);
    baton_semaphore_close(h);
    redisFree(r);
    baton_client_close(ch);
    free(name);
}

/* Redisson's own scripts do not know the line: a permit a Redisson client returns (its
 * release: INCRBY and PUBLISH on the shared channel) reaches a waiter in the line by its
 * next look, and a Redisson acquire takes a free permit whatever the line holds. */
static const char REDISSON_RELEASE[] = "local value = redis.call('incrby', KEYS[1], ARGV[1]); "
                                       "redis.call('publish', KEYS[2], value); ";
static const char REDISSON_TRY_ACQUIRE[] =
    "local value = redis.call('get', KEYS[1]); "
    "if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then "
    "local val = redis.call('decrby', KEYS[1], ARGV[1]); return 1; end; return 0;";

Test(semaphore, redissons_scripts_share_the_semaphore_with_the_line, .timeout = 60)
{
    line_fix f;
    line_fix_open(&f, th_name("sem-redisson"));
    redisContext *r = f.r;
    const char *name = f.name;
    baton_semaphore *h = f.h;
    atomic_int turns = 0;
    sem_turn w;
    sem_turn_open(&w, name, 1, 20000, &turns);
    pthread_t t;
    cr_assert(eq(int, pthread_create(&t, NULL, take_sem_turn, &w), 0));
    wait_line_length(r, name, 1);
    char channel[256];
    snprintf(channel, sizeof channel, "redisson_sc:{%s}", name);
    int64_t released = th_ms();
    freeReplyObject(th_cmd(r, "EVAL %s 2 %s %s 1", REDISSON_RELEASE, name, channel));
    pthread_join(t, NULL);
    cr_assert(eq(int, w.rc, BATON_OK), "%s", baton_err_name(w.rc));
    cr_assert(le(i64, w.done_ms - released, 300), "the permit came %lld ms after the release",
              (long long)(w.done_ms - released));
    /* a waiter in the line again; Redisson's acquire takes a permit freed meanwhile */
    w.wait_ms = 300;
    cr_assert(eq(int, pthread_create(&t, NULL, take_sem_turn, &w), 0));
    wait_line_length(r, name, 1);
    /* the permit freed and Redisson's acquire in one MULTI: the waiter's own looks (every
     * 50 ms) cannot come between them and take it first */
    freeReplyObject(th_cmd(r, "MULTI"));
    freeReplyObject(th_cmd(r, "SET %s 1", name));
    freeReplyObject(th_cmd(r, "EVAL %s 1 %s 1", REDISSON_TRY_ACQUIRE, name));
    redisReply *ex = th_cmd(r, "EXEC");
    cr_assert(eq(int, ex->type, REDIS_REPLY_ARRAY));
    cr_assert(eq(sz, ex->elements, 2));
    cr_assert(eq(int, ex->element[1]->type, REDIS_REPLY_INTEGER));
    cr_assert(eq(i64, ex->element[1]->integer, 1), "Redisson's acquire took the freed permit");
    freeReplyObject(ex);
    pthread_join(t, NULL);
    cr_assert(eq(int, w.rc, BATON_ETIMEDOUT), "%s", baton_err_name(w.rc));
    cr_assert(eq(i64, available(h), 0));
    cr_assert(eq(i64, line_length(r, name), 0));
    sem_turn_close(&w);
    line_fix_close(&f);
}

/* Issue 49, mixed deployments: the line's first waiter hears the shared channel too, so a
 * Redisson client's release (INCRBY and PUBLISH of the count on redisson_sc:{name} only)
 * wakes it within a round trip, not at its next look (50 ms after it joined; the release
 * comes about 10 ms after). */
Test(semaphore, a_redisson_release_wakes_the_lines_first_at_once, .timeout = 60)
{
    line_fix f;
    line_fix_open(&f, th_name("sem-redisson-wake"));
    redisContext *r = f.r;
    const char *name = f.name;
    char channel[256];
    snprintf(channel, sizeof channel, "redisson_sc:{%s}", name);
    atomic_int turns = 0;
    sem_turn w;
    sem_turn_open(&w, name, 1, 20000, &turns);
    for (int round = 0; round < 3; round++) {
        pthread_t t;
        cr_assert(eq(int, pthread_create(&t, NULL, take_sem_turn, &w), 0));
        int64_t t0 = th_ms();
        while (line_length(r, name) < 1 && th_ms() - t0 < 5000)
            th_sleep_ms(1);
        cr_assert(eq(i64, line_length(r, name), 1), "the baton waiter queued");
        th_sleep_ms(10);
        int64_t released = th_ms();
        freeReplyObject(th_cmd(r, "EVAL %s 2 %s %s 1", REDISSON_RELEASE, name, channel));
        pthread_join(t, NULL);
        cr_assert(eq(int, w.rc, BATON_OK), "round %d: %s", round, baton_err_name(w.rc));
        cr_assert(le(i64, w.done_ms - released, 25),
                  "round %d: the permit came %lld ms after the release", round,
                  (long long)(w.done_ms - released));
    }
    cr_assert(eq(i64, available(f.h), 0));
    cr_assert(eq(i64, line_length(r, name), 0));
    sem_turn_close(&w);
    line_fix_close(&f);
}

/* ---------------------------------------------------------------- bad input ---------- */

Test(semaphore, bad_input_is_rejected_and_nothing_is_sent)
{
    baton_client *c = th_client(NULL);
    baton_semaphore *s = NULL, *bad = (baton_semaphore *)0x1;
    char *name = th_name("sem-bad");
    char big[BATON_MAX_NAME_LEN + 2];
    memset(big, 'n', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    redisContext *r = th_redis();
    long long before = th_commands_processed(r);

    cr_assert(eq(int, baton_semaphore_open(NULL, name, &bad), BATON_EINVAL));
    cr_assert(eq(ptr, bad, NULL));
    cr_assert(eq(int, baton_semaphore_open(c, NULL, &s), BATON_EINVAL));
    cr_assert(eq(int, baton_semaphore_open(c, "", &s), BATON_EINVAL));
    bad = (baton_semaphore *)0x1;
    cr_assert(eq(int, baton_semaphore_open(c, big, &bad), BATON_EINVAL));
    cr_assert(eq(ptr, bad, NULL));
    cr_assert(ne(str, (char *)baton_client_errmsg(c), ""));
    cr_assert(eq(int, baton_semaphore_open(c, name, NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_semaphore_open(c, name, &s), BATON_OK));

    cr_assert(eq(int, baton_semaphore_acquire(NULL, 1), BATON_EINVAL));
    cr_assert(eq(int, baton_semaphore_acquire(s, 0), BATON_EINVAL));
    cr_assert(ne(str, (char *)baton_client_errmsg(c), ""));
    cr_assert(eq(int, baton_semaphore_acquire(s, -1), BATON_EINVAL));
    cr_assert(eq(int, baton_semaphore_acquire(s, INT64_MIN), BATON_EINVAL));
    cr_assert(eq(int, baton_semaphore_try_acquire(NULL, 1, 0), BATON_EINVAL));
    cr_assert(eq(int, baton_semaphore_try_acquire(s, 0, 100), BATON_EINVAL));
    cr_assert(eq(int, baton_semaphore_try_acquire(s, -5, 100), BATON_EINVAL));
    cr_assert(eq(int, baton_semaphore_try_acquire(s, 1, -2), BATON_EINVAL));
    cr_assert(eq(int, baton_semaphore_try_acquire(s, 1, BATON_MAX_DURATION_MS + 1), BATON_EINVAL));
    cr_assert(eq(int, baton_semaphore_try_acquire(s, 1, INT64_MIN), BATON_EINVAL));
    cr_assert(eq(int, baton_semaphore_release(NULL, 1), BATON_EINVAL));
    cr_assert(eq(int, baton_semaphore_release(s, 0), BATON_EINVAL));
    cr_assert(eq(int, baton_semaphore_release(s, -3), BATON_EINVAL));
    cr_assert(eq(int, baton_semaphore_try_set_permits(NULL, 1, NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_semaphore_try_set_permits(s, -1, NULL), BATON_EINVAL));
    cr_assert(ne(str, (char *)baton_client_errmsg(c), ""));
    cr_assert(eq(int, baton_semaphore_try_set_permits(s, INT64_MIN, NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_semaphore_available(NULL, NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_semaphore_available(s, NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_semaphore_drain(NULL, NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_semaphore_add_permits(NULL, 1), BATON_EINVAL));
    cr_assert(eq(int, baton_semaphore_add_permits(s, INT64_MIN), BATON_EINVAL));
    cr_assert(eq(int, baton_semaphore_delete(NULL, NULL), BATON_EINVAL));
    baton_semaphore_close(NULL);

    /* only the INFO of `before` itself was processed in between */
    cr_assert(eq(i64, th_commands_processed(r) - before, 1));
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s", name), 0));
    redisFree(r);
    baton_semaphore_close(s);
    baton_client_close(c);
    free(name);
}

static void assert_refused(baton_client *c, int rc, const char *what, const char *expect)
{
    cr_assert(eq(int, rc, BATON_EPROTO), "%s: %s", what, baton_err_name(rc));
    cr_assert(strstr(baton_client_errmsg(c), expect) != NULL, "%s: %s", what,
              baton_client_errmsg(c));
}

Test(semaphore, key_of_another_type_is_refused_and_left_alone)
{
    baton_client *c = th_client(NULL);
    char *hash = th_name("sem-hash"), *text = th_name("sem-text");
    redisContext *r = th_redis();
    freeReplyObject(th_cmd(r, "HSET %s field precious", hash));
    freeReplyObject(th_cmd(r, "SET %s precious", text));
    const char *names[2] = {hash, text};
    const char *expect[2] = {"WRONGTYPE", "not an integer"};
    for (int i = 0; i < 2; i++) {
        baton_semaphore *s = open_sem(c, names[i]);
        bool flag = true;
        int64_t n = -1;
        assert_refused(c, baton_semaphore_acquire(s, 1), "acquire", expect[i]);
        assert_refused(c, baton_semaphore_try_acquire(s, 1, 0), "try_acquire", expect[i]);
        assert_refused(c, baton_semaphore_try_acquire(s, 1, 500), "try_acquire 500", expect[i]);
        assert_refused(c, baton_semaphore_release(s, 1), "release", expect[i]);
        assert_refused(c, baton_semaphore_add_permits(s, 2), "add_permits +", expect[i]);
        assert_refused(c, baton_semaphore_add_permits(s, -2), "add_permits -", expect[i]);
        assert_refused(c, baton_semaphore_drain(s, &n), "drain", expect[i]);
        assert_refused(c, baton_semaphore_delete(s, &flag), "delete", expect[i]);
        assert_refused(c, baton_semaphore_available(s, &n), "available",
                       i == 0 ? "WRONGTYPE" : "integer");
        if (i == 0)
            assert_refused(c, baton_semaphore_try_set_permits(s, 1, &flag), "try_set", "WRONGTYPE");
        else {
            /* a string is where a count lives: it is set, so nothing is written */
            cr_assert(eq(int, baton_semaphore_try_set_permits(s, 1, &flag), BATON_OK));
            cr_assert(not(flag));
        }
        baton_semaphore_close(s);
    }
    cr_assert(eq(int, baton__sub_count(c), 0));
    redisReply *rep = th_cmd(r, "HGETALL %s", hash);
    cr_assert(eq(sz, rep->elements, 2));
    cr_assert(eq(str, rep->element[1]->str, "precious"));
    freeReplyObject(rep);
    rep = th_cmd(r, "GET %s", text);
    cr_assert(eq(str, rep->str, "precious"));
    freeReplyObject(rep);
    cr_assert(eq(i64, th_cmd_int(r, "PTTL %s", hash), -1));
    cr_assert(eq(i64, th_cmd_int(r, "PTTL %s", text), -1));
    redisFree(r);
    baton_client_close(c);
    free(hash);
    free(text);
}

Test(semaphore, server_down_is_econn_and_recovers)
{
    th_server srv;
    th_server_start(&srv, NULL);
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", srv.port);
    baton_options o;
    baton_options_init(&o);
    o.url = url;
    o.connect_timeout_ms = 1000;
    o.command_timeout_ms = 1000;
    baton_client *c;
    cr_assert(eq(int, baton_client_open(&o, &c), BATON_OK));
    baton_semaphore *s = open_sem(c, "sem-down");
    cr_assert(eq(int, baton_semaphore_try_set_permits(s, 1, NULL), BATON_OK));
    cr_assert(eq(int, baton_semaphore_acquire(s, 1), BATON_OK));
    th_server_stop(&srv);
    int64_t t0 = th_ms();
    cr_assert(eq(int, baton_semaphore_release(s, 1), BATON_ECONN));
    cr_assert(eq(int, baton_semaphore_try_acquire(s, 1, 2000), BATON_ECONN));
    int64_t n;
    cr_assert(eq(int, baton_semaphore_available(s, &n), BATON_ECONN));
    cr_assert(le(i64, th_ms() - t0, 4000));
    th_server_start_on(&srv, srv.port, NULL);
    cr_assert(eq(int, baton_semaphore_release(s, 2), BATON_OK), "%s", baton_client_errmsg(c));
    cr_assert(eq(int, baton_semaphore_acquire(s, 2), BATON_OK));
    cr_assert(eq(i64, available(s), 0));
    baton_semaphore_close(s);
    baton_client_close(c);
    th_server_stop(&srv);
}

typedef struct passer {
    baton_semaphore *s;
    atomic_bool *stop;
    int rounds, errors;
} passer;

/* acquire(1), release(1), no pause, until told to stop */
static void *pass_permit(void *arg)
{
    passer *p = arg;
    while (!atomic_load(p->stop)) {
        if (baton_semaphore_acquire(p->s, 1) != BATON_OK) {
            p->errors++;
            break;
        }
        p->rounds++;
        if (baton_semaphore_release(p->s, 1) != BATON_OK)
            p->errors++;
    }
    return NULL;
}

/* The bound: 4 threads of one client pass a 1-permit semaphore among themselves in the
 * process without a pause; after 8 passes in a row a release goes through the server, so a
 * waiter of a second client still gets the permit soon. */
Test(semaphore, a_waiter_of_another_client_gets_a_permit_while_a_cohort_passes_it)
{
    baton_client *c = th_client(NULL), *other = th_client(NULL);
    char *name = th_name("sem-bound");
    baton_semaphore *s = open_sem(c, name), *so = open_sem(other, name);
    cr_assert(eq(int, baton_semaphore_try_set_permits(s, 1, NULL), BATON_OK));
    atomic_bool stop = false;
    passer p[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        p[i] = (passer){.s = s, .stop = &stop};
        cr_assert(eq(int, pthread_create(&t[i], NULL, pass_permit, &p[i]), 0));
    }
    th_sleep_ms(100); /* the cohort is passing the permit */
    int64_t t0 = th_ms();
    int rc = baton_semaphore_try_acquire(so, 1, 10000);
    int64_t waited = th_ms() - t0;
    atomic_store(&stop, true);
    if (rc == BATON_OK)
        cr_assert(eq(int, baton_semaphore_release(so, 1), BATON_OK));
    int rounds = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        cr_assert(eq(int, p[i].errors, 0));
        rounds += p[i].rounds;
    }
    fprintf(stderr, "semaphore cohort: %d passes; the other client's waiter waited %lld ms\n",
            rounds, (long long)waited);
    cr_assert(eq(int, rc, BATON_OK));
    cr_assert(le(i64, waited, 300 * SLOW), "waited %lld ms", (long long)waited);
    cr_assert(eq(i64, available(s), 1));
    baton_semaphore_close(s);
    baton_semaphore_close(so);
    baton_client_close(c);
    baton_client_close(other);
    free(name);
}
