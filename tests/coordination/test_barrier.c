/*
 * Barriers against a real redis-server: the cyclic barrier across 8 processes for 50
 * generations (nobody leaves a generation before the last party of it arrived), breaking
 * by a killed party (within its lease) and by a timeout (at once), a mismatched party
 * count, the double barrier, and the latch's count_down_and_await.
 */
#define _GNU_SOURCE
#include "helper.h"
#include "internal.h"

#include <criterion/logging.h>
#include "new_assert.h"
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

TestSuite(barrier, .timeout = 60);

static baton_client *client_wd(int64_t watchdog_ms)
{
    baton_options o;
    baton_options_init(&o);
    o.watchdog_ms = watchdog_ms;
    return th_client(&o);
}

static int64_t mono_us(void)
{
    return baton__now_us();
}

/* ---------------------------------------------------------------- 8 x 50 ------------- */

#define PROCS 8
#define GENS 50

typedef struct run {
    char name[128];
    int64_t arrive_us[GENS][PROCS], leave_us[GENS][PROCS];
    int64_t index[GENS][PROCS], gen[GENS][PROCS];
    int rc[PROCS];
} run;

typedef struct party_arg {
    run *r;
    int k;
} party_arg;

static int party(void *arg)
{
    party_arg *p = arg;
    run *r = p->r;
    baton_client *c = client_wd(3000);
    baton_barrier *b = NULL;
    if (baton_barrier_open(c, r->name, PROCS, &b) != BATON_OK)
        return 1;
    for (int g = 0; g < GENS; g++) {
        r->arrive_us[g][p->k] = mono_us();
        int rc = baton_barrier_await(b, 20000, &r->index[g][p->k], &r->gen[g][p->k]);
        r->leave_us[g][p->k] = mono_us();
        if (rc != BATON_OK) {
            r->rc[p->k] = rc;
            return 2;
        }
    }
    baton_barrier_close(b);
    baton_client_close(c);
    return 0;
}

Test(barrier, eight_processes_fifty_generations_leave_together, .timeout = 120)
{
    run *r = mmap(NULL, sizeof *r, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(r != MAP_FAILED);
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", th_tmpname("bar"));
    pid_t kids[PROCS];
    party_arg args[PROCS];
    int64_t t0 = th_ms();
    for (int k = 0; k < PROCS; k++) {
        args[k] = (party_arg){r, k};
        kids[k] = th_fork(party, &args[k]);
    }
    for (int k = 0; k < PROCS; k++)
        cr_assert(eq(int, th_wait(kids[k]), 0), "party %d: %s", k, baton_err_name(r->rc[k]));
    int64_t spent = th_ms() - t0, max_spread = 0;
    for (int g = 0; g < GENS; g++) {
        int64_t last_arrival = 0, first_leave = INT64_MAX, last_leave = 0;
        bool seen[PROCS] = {false};
        for (int k = 0; k < PROCS; k++) {
            if (r->arrive_us[g][k] > last_arrival)
                last_arrival = r->arrive_us[g][k];
            if (r->leave_us[g][k] < first_leave)
                first_leave = r->leave_us[g][k];
            if (r->leave_us[g][k] > last_leave)
                last_leave = r->leave_us[g][k];
            cr_assert(eq(i64, r->gen[g][k], r->gen[g][0]), "generation %d: one generation", g);
            int64_t i = r->index[g][k];
            cr_assert(i >= 0 && i < PROCS && !seen[i], "generation %d: index %lld twice", g,
                      (long long)i);
            seen[i] = true;
        }
        cr_assert(ge(i64, first_leave, last_arrival),
                  "generation %d: a party left before the last arrived", g);
        if (g > 0)
            cr_assert(eq(i64, r->gen[g][0], r->gen[g - 1][0] + 1));
        if (last_leave - first_leave > max_spread)
            max_spread = last_leave - first_leave;
    }
    cr_log_info("8 parties x 50 generations in %lld ms; widest spread of one generation's "
                "returns %lld ms",
                (long long)spent, (long long)(max_spread / 1000));
    cr_assert(lt(i64, max_spread / 1000, 250 * SLOW));
    munmap(r, sizeof *r);
}

/* ---------------------------------------------------------------- breaking ----------- */

typedef struct waiter {
    baton_barrier *b;
    int64_t timeout;
    int rc;
    int64_t at;
} waiter;

static void *await_thread(void *p)
{
    waiter *w = p;
    w->rc = baton_barrier_await(w->b, w->timeout, NULL, NULL);
    w->at = th_ms();
    return NULL;
}

static int arrive_and_hang(void *arg)
{
    const char *name = arg;
    baton_client *c = client_wd(900);
    baton_barrier *b = NULL;
    if (baton_barrier_open(c, name, 3, &b) != BATON_OK)
        return 1;
    baton_barrier_await(b, BATON_WAIT_FOREVER, NULL, NULL);
    return 2;
}

Test(barrier, a_killed_party_breaks_the_generation_within_its_lease)
{
    const char *name = th_tmpname("bar");
    baton_client *c1 = client_wd(900), *c2 = client_wd(900);
    baton_barrier *b1 = NULL, *b2 = NULL;
    cr_assert(eq(int, baton_barrier_open(c1, name, 3, &b1), BATON_OK));
    cr_assert(eq(int, baton_barrier_open(c2, name, 3, &b2), BATON_OK));
    pid_t kid = th_fork(arrive_and_hang, (void *)name);
    int64_t waiting = 0;
    for (int i = 0; i < 300 && waiting < 1; i++) {
        baton_barrier_state(b1, &waiting, NULL);
        th_sleep_ms(10);
    }
    cr_assert(eq(i64, waiting, 1));
    waiter w1 = {b1, BATON_WAIT_FOREVER, 0, 0}, w2 = {b2, BATON_WAIT_FOREVER, 0, 0};
    pthread_t t1;
    pthread_create(&t1, NULL, await_thread, &w1);
    for (int i = 0; i < 300 && waiting < 2; i++) {
        baton_barrier_state(b1, &waiting, NULL);
        th_sleep_ms(10);
    }
    kill(kid, SIGKILL);
    int64_t killed = th_ms();
    th_wait(kid);
    pthread_join(t1, NULL);
    cr_assert(eq(int, w1.rc, BATON_EBROKEN), "broken: %s", baton_err_name(w1.rc));
    int64_t after = w1.at - killed;
    cr_log_info("generation broken %lld ms after kill -9 (lease 900 ms)", (long long)after);
    cr_assert(le(i64, after, 900 + 300 + 200));
    /* the next generation works */
    pthread_create(&t1, NULL, await_thread, &w1);
    pthread_t t2;
    pthread_create(&t2, NULL, await_thread, &w2);
    baton_barrier *b3 = NULL;
    cr_assert(eq(int, baton_barrier_open(c1, name, 3, &b3), BATON_OK));
    cr_assert(eq(int, baton_barrier_await(b3, 5000, NULL, NULL), BATON_OK));
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    cr_assert(eq(int, w1.rc, BATON_OK));
    cr_assert(eq(int, w2.rc, BATON_OK));
    baton_barrier_close(b1);
    baton_barrier_close(b2);
    baton_barrier_close(b3);
    baton_client_close(c1);
    baton_client_close(c2);
}

Test(barrier, a_party_that_times_out_breaks_it_at_once)
{
    const char *name = th_tmpname("bar");
    baton_client *c = client_wd(5000);
    baton_barrier *b1 = NULL, *b2 = NULL;
    cr_assert(eq(int, baton_barrier_open(c, name, 3, &b1), BATON_OK));
    cr_assert(eq(int, baton_barrier_open(c, name, 3, &b2), BATON_OK));
    waiter w1 = {b1, BATON_WAIT_FOREVER, 0, 0};
    pthread_t t1;
    pthread_create(&t1, NULL, await_thread, &w1);
    th_sleep_ms(100);
    int64_t t0 = th_ms();
    cr_assert(eq(int, baton_barrier_await(b2, 200, NULL, NULL), BATON_ETIMEDOUT));
    int64_t timed_out = th_ms();
    cr_assert(ge(i64, timed_out - t0, 195));
    pthread_join(t1, NULL);
    cr_assert(eq(int, w1.rc, BATON_EBROKEN));
    cr_assert(le(i64, w1.at - timed_out, 100), "told %lld ms after the timeout",
              (long long)(w1.at - timed_out));
    baton_barrier_close(b1);
    baton_barrier_close(b2);
    baton_client_close(c);
}

/* A party's wait cancelled through its handle leaves (ECANCELED) and breaks the generation
 * for the others at once; a wait through another handle of the same client goes on until
 * then, and close waits for nothing left. */
Test(barrier, a_party_cancelled_through_its_handle_breaks_it_for_the_others)
{
    const char *name = th_tmpname("bar");
    baton_client *c = client_wd(5000);
    baton_barrier *b[2];
    waiter w[2];
    pthread_t t[2];
    for (int i = 0; i < 2; i++) { /* two parties of three wait */
        cr_assert(eq(int, baton_barrier_open(c, name, 3, &b[i]), BATON_OK));
        w[i] = (waiter){b[i], BATON_WAIT_FOREVER, 0, 0};
        pthread_create(&t[i], NULL, await_thread, &w[i]);
    }
    int64_t waiting = 0;
    for (int i = 0; i < 200 && waiting < 2; i++) {
        th_sleep_ms(10);
        baton_barrier_state(b[0], &waiting, NULL);
    }
    cr_assert(eq(i64, waiting, 2));
    int64_t t0 = th_ms();
    cr_assert(eq(int, baton_barrier_cancel_waits(b[1]), BATON_OK));
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    cr_assert(eq(int, w[1].rc, BATON_ECANCELED));
    cr_assert(eq(int, w[0].rc, BATON_EBROKEN), "the other party is told");
    cr_assert(le(i64, w[0].at - t0, 300), "told %lld ms after the cancel",
              (long long)(w[0].at - t0));
    cr_assert(eq(int, baton_barrier_cancel_waits(NULL), BATON_EINVAL));
    cr_assert(eq(str, (char *)baton_barrier_name(b[0]), (char *)name));
    for (int i = 0; i < 2; i++)
        baton_barrier_close(b[i]);
    baton_client_close(c);
}

Test(barrier, bad_arguments_and_a_mismatched_party_count)
{
    baton_client *c = th_client(NULL);
    baton_barrier *b = NULL, *b4 = NULL;
    cr_assert(eq(int, baton_barrier_open(c, "x", 1, &b), BATON_EINVAL));
    cr_assert(eq(int, baton_barrier_open(NULL, "x", 2, &b), BATON_EINVAL));
    const char *name = th_tmpname("bar");
    cr_assert(eq(int, baton_barrier_open(c, name, 3, &b), BATON_OK));
    cr_assert(eq(int, baton_barrier_open(c, name, 4, &b4), BATON_OK));
    waiter w = {b, 2000, 0, 0};
    pthread_t t;
    pthread_create(&t, NULL, await_thread, &w);
    int64_t waiting = 0;
    for (int i = 0; i < 300 && waiting < 1; i++) {
        baton_barrier_state(b, &waiting, NULL);
        th_sleep_ms(5);
    }
    cr_assert(eq(int, baton_barrier_await(b4, 1000, NULL, NULL), BATON_EINVAL));
    cr_assert(eq(int, baton_barrier_await(b, -7, NULL, NULL), BATON_EINVAL));
    pthread_join(t, NULL);
    cr_assert(eq(int, w.rc, BATON_ETIMEDOUT));
    cr_assert(eq(str, (char *)baton_barrier_name(b), (char *)name));
    baton_barrier_close(b);
    baton_barrier_close(b4);
    baton_barrier_close(NULL);
    baton_client_close(c);
}

/* ---------------------------------------------------------------- double barrier ----- */

#define JOBS 6

typedef struct dbl {
    char name[128];
    int64_t before_enter[JOBS], entered[JOBS], before_leave[JOBS], left[JOBS];
} dbl;

typedef struct job_arg {
    dbl *d;
    int k;
} job_arg;

static int job(void *arg)
{
    job_arg *j = arg;
    dbl *d = j->d;
    baton_client *c = th_client(NULL);
    baton_barrier *b = NULL;
    if (baton_barrier_open(c, d->name, JOBS, &b) != BATON_OK)
        return 1;
    usleep((useconds_t)(j->k * 30000));
    d->before_enter[j->k] = mono_us();
    if (baton_barrier_enter(b, 10000) != BATON_OK)
        return 2;
    d->entered[j->k] = mono_us();
    usleep((useconds_t)((JOBS - j->k) * 40000)); /* the work: unequal lengths */
    d->before_leave[j->k] = mono_us();
    if (baton_barrier_leave(b, 10000) != BATON_OK)
        return 3;
    d->left[j->k] = mono_us();
    baton_barrier_close(b);
    baton_client_close(c);
    return 0;
}

Test(barrier, the_double_barrier_starts_and_ends_six_jobs_together)
{
    dbl *d = mmap(NULL, sizeof *d, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(d != MAP_FAILED);
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s", th_tmpname("dbl"));
    pid_t kids[JOBS];
    job_arg args[JOBS];
    for (int k = 0; k < JOBS; k++) {
        args[k] = (job_arg){d, k};
        kids[k] = th_fork(job, &args[k]);
    }
    for (int k = 0; k < JOBS; k++)
        cr_assert(eq(int, th_wait(kids[k]), 0), "job %d", k);
    int64_t last_before_enter = 0, first_entered = INT64_MAX, last_entered = 0;
    int64_t last_before_leave = 0, first_left = INT64_MAX, last_left = 0;
    for (int k = 0; k < JOBS; k++) {
        last_before_enter =
            d->before_enter[k] > last_before_enter ? d->before_enter[k] : last_before_enter;
        first_entered = d->entered[k] < first_entered ? d->entered[k] : first_entered;
        last_entered = d->entered[k] > last_entered ? d->entered[k] : last_entered;
        last_before_leave =
            d->before_leave[k] > last_before_leave ? d->before_leave[k] : last_before_leave;
        first_left = d->left[k] < first_left ? d->left[k] : first_left;
        last_left = d->left[k] > last_left ? d->left[k] : last_left;
    }
    cr_assert(ge(i64, first_entered, last_before_enter), "a job started before all entered");
    cr_assert(ge(i64, first_left, last_before_leave), "a job left before all finished");
    cr_log_info("6 jobs: starts within %lld ms, ends within %lld ms",
                (long long)((last_entered - first_entered) / 1000),
                (long long)((last_left - first_left) / 1000));
    cr_assert(lt(i64, (last_entered - first_entered) / 1000, 100 * SLOW));
    cr_assert(lt(i64, (last_left - first_left) / 1000, 100 * SLOW));
    munmap(d, sizeof *d);
}

/* ---------------------------------------------------------------- latch -------------- */

typedef struct cda {
    baton_latch *l;
    int rc;
    int64_t at;
} cda;

static void *count_down_and_await(void *p)
{
    cda *a = p;
    a->rc = baton_latch_count_down_and_await(a->l, 5000);
    a->at = th_ms();
    return NULL;
}

Test(barrier, the_latch_counts_down_and_awaits_in_one_call)
{
    baton_client *c = th_client(NULL);
    const char *name = th_tmpname("cda");
    baton_latch *l = NULL;
    cr_assert(eq(int, baton_latch_open(c, name, &l), BATON_OK));
    cr_assert(eq(int, baton_latch_try_set_count(l, 3, NULL), BATON_OK));
    cda a[3] = {{l, 0, 0}, {l, 0, 0}, {l, 0, 0}};
    pthread_t t[2];
    pthread_create(&t[0], NULL, count_down_and_await, &a[0]);
    pthread_create(&t[1], NULL, count_down_and_await, &a[1]);
    th_sleep_ms(200);
    int64_t count = 0;
    cr_assert(eq(int, baton_latch_count(l, &count), BATON_OK));
    cr_assert(eq(i64, count, 1), "two counted down, both wait");
    int64_t t0 = th_ms();
    count_down_and_await(&a[2]);
    pthread_join(t[0], NULL);
    pthread_join(t[1], NULL);
    for (int i = 0; i < 3; i++) {
        cr_assert(eq(int, a[i].rc, BATON_OK));
        cr_assert(le(i64, a[i].at - t0, 100));
    }
    cr_assert(eq(int, baton_latch_count_down_and_await(NULL, 0), BATON_EINVAL));
    baton_latch_close(l);
    baton_client_close(c);
}

/* ---------------------------------------------------------------- the CLI ------------ */

#ifdef BATON_CLI_PATH
#include "cli_helper.h"

Test(barrier, cli_barrier_with_command_starts_and_ends_six_jobs_together, .timeout = 60)
{
    const char *name = th_tmpname("cli-bar");
    char *log = cli_path("jobs");
    /* job i works i * 50 ms: without the leave barrier they would end 250 ms apart */
    pid_t kids[JOBS];
    char script[256];
    for (int i = 0; i < JOBS; i++) {
        snprintf(script, sizeof script,
                 "echo start $(date +%%s%%N) >> \"$0\"; sleep 0.%02d; echo work $(date +%%s%%N) "
                 ">> \"$0\"",
                 i * 5);
        kids[i] = cli_spawn(ARGS("barrier", name, "--parties", "6", "--timeout", "20s", "--", "sh",
                                 "-c", script, log));
        th_sleep_ms(40);
    }
    int64_t done[JOBS];
    for (int i = 0; i < JOBS; i++) {
        cr_assert(eq(int, th_wait(kids[i]), 0), "job %d", i);
        done[i] = th_ms();
    }
    /* all return after the longest job: waited in order, the first returned last-ish */
    int64_t spread = done[JOBS - 1] - done[0];
    cr_log_info("baton barrier -- COMMAND: the 6 batons exited within %lld ms", (long long)spread);
    cr_assert(lt(i64, spread, 150 * SLOW), "the jobs ended together");
    char *text = cli_read_file(log);
    cr_assert(not(eq(ptr, text, NULL)));
    long long first = 0, last = 0, lastwork = 0;
    int starts = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        long long ns = 0;
        if (sscanf(line, "start %lld", &ns) == 1) {
            first = first == 0 || ns < first ? ns : first;
            last = ns > last ? ns : last;
            starts++;
        } else if (sscanf(line, "work %lld", &ns) == 1) {
            lastwork = ns > lastwork ? ns : lastwork;
        }
    }
    cr_assert(eq(int, starts, JOBS));
    cr_log_info("baton barrier -- COMMAND: 6 starts within %lld ms", (last - first) / 1000000);
    cr_assert(lt(i64, (last - first) / 1000000, 150 * SLOW), "the jobs started together");
    free(text);
    free(log);
}

Test(barrier, cli_barrier_a_party_that_times_out_exits_123_and_the_others_125)
{
    const char *name = th_tmpname("cli-bar");
    pid_t w = cli_spawn(ARGS("barrier", name, "--parties", "3"));
    th_sleep_ms(300);
    cli_result r;
    cli_exec(&r, ARGS("barrier", name, "--parties", "3", "--timeout", "300ms"));
    cr_assert(eq(int, r.status, 123), "%s", r.err);
    cli_result_free(&r);
    int64_t t0 = th_ms();
    cr_assert(eq(int, th_wait(w), 125));
    cr_assert(lt(i64, th_ms() - t0, 500));
}
#endif
