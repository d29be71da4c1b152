/*
 * The fault probe's defects (issue 16), each reproduced against real servers: releases whose
 * reply is lost to a server paused past the command timeout are applied exactly once (the
 * semaphore's, the latch's count_down, the lock's); a holder with a fixed lease is told at
 * once that the server restarted, and so is `baton lock --lease`, which kills its command;
 * a client copied into a forked child neither touches the parent's holds nor aborts when
 * closed; an evicting maxmemory-policy is reported when the client opens.
 */
#define _GNU_SOURCE
#include "helper.h"
#include "internal.h"
#include "lockbase.h" /* the watchdog's rounds */

#include "new_assert.h"
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

TestSuite(recovery, .timeout = 60);

/* A client on a server of the test's own, with short timeouts. */
static baton_client *open_on(const th_server *s, int64_t command_timeout_ms)
{
    static _Thread_local char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", s->port);
    baton_options o;
    baton_options_init(&o);
    o.url = url;
    o.connect_timeout_ms = 1000;
    o.command_timeout_ms = command_timeout_ms;
    o.watchdog_ms = 1500;
    baton_client *c = NULL;
    cr_assert(eq(int, baton_client_open(&o, &c), BATON_OK), "%s", baton_open_errmsg());
    return c;
}

/* ------------------------------------------------ writes under a paused server ------ */

/* CLIENT PAUSE <ms> WRITE from a connection of the test's own: every script waits until
 * the pause ends, and a connection closed meanwhile takes its command with it. */
static void pause_writes(redisContext *r, int ms)
{
    freeReplyObject(th_cmd(r, "CLIENT PAUSE %d WRITE", ms));
}

Test(recovery, semaphore_release_survives_a_pause_longer_than_the_command_timeout)
{
    th_server s;
    th_server_start(&s, NULL);
    baton_client *c = open_on(&s, 1000);
    redisContext *r = th_redis_port(s.port);
    baton_semaphore *sem;
    cr_assert(eq(int, baton_semaphore_open(c, "rc-sem", &sem), BATON_OK));
    bool set = false;
    cr_assert(eq(int, baton_semaphore_try_set_permits(sem, 1, &set), BATON_OK));
    cr_assert(eq(int, baton_semaphore_acquire(sem, 1), BATON_OK));
    cr_assert(eq(i64, th_cmd_int(r, "GET rc-sem"), 0));

    pause_writes(r, 2500);
    int64_t t0 = th_ms();
    int rc = baton_semaphore_release(sem, 1);
    int64_t took = th_ms() - t0;
    cr_assert(eq(int, rc, BATON_OK), "%s", baton_client_errmsg(c));
    cr_assert(ge(i64, took, 2000), "the release returned before the pause ended (%lld ms)",
              (long long)took);
    cr_assert(le(i64, took, 4000), "the release took %lld ms", (long long)took);
    int64_t avail = -1;
    cr_assert(eq(int, baton_semaphore_available(sem, &avail), BATON_OK));
    cr_assert(eq(i64, avail, 1), "the permit is counted exactly once");
    /* and the next acquirer gets it at once */
    cr_assert(eq(int, baton_semaphore_try_acquire(sem, 1, 0), BATON_OK));
    cr_assert(eq(int, baton_semaphore_add_permits(sem, 1), BATON_OK));
    cr_assert(eq(i64, th_cmd_int(r, "GET rc-sem"), 1));

    baton_semaphore_close(sem);
    baton_client_close(c);
    redisFree(r);
    th_server_stop(&s);
}

Test(recovery, add_permits_and_count_down_survive_a_pause_and_count_once)
{
    th_server s;
    th_server_start(&s, NULL);
    baton_client *c = open_on(&s, 800);
    redisContext *r = th_redis_port(s.port);
    baton_semaphore *sem;
    baton_latch *latch;
    cr_assert(eq(int, baton_semaphore_open(c, "rc-add", &sem), BATON_OK));
    cr_assert(eq(int, baton_latch_open(c, "rc-latch", &latch), BATON_OK));
    bool set = false;
    cr_assert(eq(int, baton_latch_try_set_count(latch, 3, &set), BATON_OK));

    pause_writes(r, 1800);
    cr_assert(eq(int, baton_semaphore_add_permits(sem, 2), BATON_OK), "%s", baton_client_errmsg(c));
    pause_writes(r, 1800);
    cr_assert(eq(int, baton_latch_count_down(latch), BATON_OK), "%s", baton_client_errmsg(c));
    cr_assert(eq(i64, th_cmd_int(r, "GET rc-add"), 2), "two permits added, once");
    cr_assert(eq(i64, th_cmd_int(r, "GET rc-latch"), 2), "one count down, once");

    baton_semaphore_close(sem);
    baton_latch_close(latch);
    baton_client_close(c);
    redisFree(r);
    th_server_stop(&s);
}

Test(recovery, lock_release_survives_a_pause_longer_than_the_command_timeout)
{
    th_server s;
    th_server_start(&s, NULL);
    baton_client *c = open_on(&s, 800);
    redisContext *r = th_redis_port(s.port);
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(c, "rc-lock", &l), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(l, 30000), BATON_OK));
    pause_writes(r, 1800);
    cr_assert(eq(int, baton_lock_release(l), BATON_OK), "%s", baton_client_errmsg(c));
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS rc-lock"), 0));
    baton_lock_close(l);
    baton_client_close(c);
    redisFree(r);
    th_server_stop(&s);
}

/* The request latch, on the server alone: the same request sent twice counts once. */
Test(recovery, a_request_sent_twice_is_counted_once)
{
    redisContext *r = th_redis();
    const char *name = th_tmpname("rc-twice");
    const baton__script *rel = baton__script_find("semaphore_release");
    const baton__script *down = baton__script_find("latch_count_down");
    cr_assert(rel && down);
    freeReplyObject(th_cmd(r, "SET %s 0", name));
    for (int i = 0; i < 2; i++) {
        redisReply *rep = th_cmd(r, "EVAL %b 3 %s ch-%s req-{%s}:1 1 next-{%s} line-{%s} 10000",
                                 rel->body, rel->len, name, name, name, name, name);
        cr_assert(eq(i64, rep->integer, 1), "both runs answer the first outcome");
        freeReplyObject(rep);
    }
    cr_assert(eq(i64, th_cmd_int(r, "GET %s", name), 1));
    freeReplyObject(th_cmd(r, "SET %s 5", name));
    for (int i = 0; i < 2; i++) {
        redisReply *rep = th_cmd(r, "EVAL %b 3 %s ch-%s req-{%s}:2 0 10000", down->body, down->len,
                                 name, name, name);
        cr_assert(eq(i64, rep->integer, 4));
        freeReplyObject(rep);
    }
    cr_assert(eq(i64, th_cmd_int(r, "GET %s", name), 4));
    cr_assert(gt(i64, th_cmd_int(r, "PTTL req-{%s}:2", name), 0), "the latch expires");
    redisFree(r);
}

/* ------------------------------------------------ restarts under fixed leases ------- */

typedef struct lost_probe {
    atomic_int calls;
    _Atomic int64_t at_ms;
} lost_probe;

static void on_lost(baton_lock *l, void *arg)
{
    (void)l;
    lost_probe *p = arg;
    atomic_store(&p->at_ms, th_ms());
    atomic_fetch_add(&p->calls, 1);
}

Test(recovery, a_fixed_lease_holder_is_told_of_a_restart_within_a_second)
{
    th_server s;
    th_server_start(&s, NULL);
    baton_client *c = open_on(&s, 1000);
    baton_lock *l;
    lost_probe p = {0};
    cr_assert(eq(int, baton_lock_open(c, "rc-leased", &l), BATON_OK));
    cr_assert(eq(int, baton_lock_set_lost_handler(l, on_lost, &p), BATON_OK));
    int fd = -1;
    cr_assert(eq(int, baton_lock_lost_fd(l, &fd), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(l, 60000), BATON_OK)); /* a lease: no watchdog */
    th_sleep_ms(200);
    cr_assert(eq(int, atomic_load(&p.calls), 0));

    th_server_stop(&s);
    th_server_start_on(&s, s.port, NULL); /* empty: the hold is gone */
    int64_t back = th_ms();
    while (atomic_load(&p.calls) == 0 && th_ms() - back < 3000)
        th_sleep_ms(5);
    cr_assert(eq(int, atomic_load(&p.calls), 1), "the leased hold was never reported lost");
    int64_t late = atomic_load(&p.at_ms) - back;
    cr_assert(le(i64, late, 1000), "reported %lld ms after the server was back", (long long)late);
    char b;
    cr_assert(eq(int, (int)read(fd, &b, 1), 1), "the lost fd is readable");
    cr_assert(eq(u64, baton_client_epoch(c), 2));
    cr_assert(eq(int, baton_lock_release(l), BATON_ENOTHELD));
    baton_lock_close(l);
    baton_client_close(c);
    th_server_stop(&s);
}

#ifdef BATON_CLI_PATH
Test(recovery, baton_lock_with_a_lease_kills_its_command_on_a_restart)
{
    th_server s;
    th_server_start(&s, NULL);
    char url[64], marker[96];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", s.port);
    snprintf(marker, sizeof marker, "/tmp/baton-rc-%d", (int)getpid());
    unlink(marker);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        /* COMMAND writes the marker only if it lives 6 s: it must be killed long before */
        char script[160];
        snprintf(script, sizeof script, "sleep 6; touch %s", marker);
        execl(BATON_CLI_PATH, "baton", "--url", url, "lock", "rc-cli", "--lease", "20s", "--", "sh",
              "-c", script, (char *)NULL);
        _exit(127);
    }
    /* wait until it holds the lock */
    redisContext *r = th_redis_port(s.port);
    for (int i = 0; i < 300 && th_cmd_int(r, "EXISTS rc-cli") == 0; i++)
        th_sleep_ms(10);
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS rc-cli"), 1), "baton lock never took the lock");
    redisFree(r);

    th_server_stop(&s);
    th_server_start_on(&s, s.port, NULL);
    int64_t back = th_ms();
    int st = 0;
    pid_t done = 0;
    while ((done = waitpid(pid, &st, WNOHANG)) == 0 && th_ms() - back < 4000)
        th_sleep_ms(10);
    if (done == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
    }
    cr_assert(eq(int, done, pid), "baton lock went on after the restart");
    int64_t late = th_ms() - back;
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    cr_assert(eq(int, code, 122), "the lost lock's exit status");
    cr_assert(le(i64, late, 1500), "baton exited %lld ms after the server was back",
              (long long)late);
    th_sleep_ms(200);
    cr_assert(eq(int, access(marker, F_OK), -1), "COMMAND was not killed");
    th_server_stop(&s);
}
#endif

/* ------------------------------------------------ fork ------------------------------ */

Test(recovery, a_forked_child_cannot_touch_the_parents_hold_and_closes_cleanly)
{
    th_server s;
    th_server_start(&s, NULL);
    baton_client *c = open_on(&s, 1000);
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(c, "rc-fork", &l), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(l, BATON_LEASE_WATCHDOG), BATON_OK));
    baton_semaphore *sem;
    cr_assert(eq(int, baton_semaphore_open(c, "rc-fork-sem", &sem), BATON_OK));
    redisContext *r = th_redis_port(s.port);
    /* one renewal first: the first one on a new server also loads its script (EVALSHA,
     * NOSCRIPT, EVAL), which would count three scripts for one round below */
    for (int i = 0; baton__watchdog_rounds(c) == 0; i++) {
        cr_assert(lt(int, i, 300), "no renewal within 3 s");
        th_sleep_ms(10);
    }
    th_sleep_ms(50);
    freeReplyObject(th_cmd(r, "CONFIG RESETSTAT"));
    uint64_t rounds0 = baton__watchdog_rounds(c);

    for (int i = 0; i < 20; i++) {
        fflush(NULL);
        pid_t pid = fork();
        cr_assert(pid >= 0);
        if (pid == 0) {
            int code = 0;
            if (baton_lock_release(l) != BATON_ENOTSUP)
                code = 1;
            else if (!strstr(baton_client_errmsg(c), "fork"))
                code = 2;
            else if (baton_semaphore_release(sem, 1) != BATON_ENOTSUP)
                code = 3;
            bool held = false;
            if (baton_lock_is_locked(l, &held) != BATON_ENOTSUP)
                code = 4;
            baton_lock_close(l);
            baton_semaphore_close(sem);
            baton_client_close(c);
            _exit(code);
        }
        int st = th_wait(pid);
        cr_assert(eq(int, st, 0),
                  "child %d: status %d (1: released, 2: message, 3: semaphore, "
                  "4: query, 134: abort)",
                  i, st);
    }
    /* the children sent nothing: every script the server ran was a parent's renewal */
    long long scripts = th_cmdstat(r, "evalsha") + th_cmdstat(r, "eval");
    cr_assert(le(i64, scripts, (long long)(baton__watchdog_rounds(c) - rounds0)),
              "a child ran a script");
    /* the parent's renewal script runs one HEXISTS per round (for its one hold) */
    cr_assert(eq(i64, th_cmdstat(r, "exists"), 0), "a child ran a query");
    cr_assert(le(i64, th_cmdstat(r, "hexists"), (long long)(baton__watchdog_rounds(c) - rounds0)),
              "a child ran a query");
    th_sleep_ms(1700); /* past the 1500 ms lease: only the parent's renewals keep it */
    bool held = false;
    cr_assert(eq(int, baton_lock_is_held_by_current_thread(l, &held), BATON_OK));
    cr_assert(held, "the parent lost its lock");
    cr_assert(gt(i64, th_cmd_int(r, "PTTL rc-fork"), 0));
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS rc-fork-sem"), 0), "no child released a permit");
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS rc-fork"), 0));
    baton_semaphore_close(sem);
    baton_lock_close(l);
    baton_client_close(c);
    redisFree(r);
    th_server_stop(&s);
}

/* ------------------------------------------------ eviction -------------------------- */

static void expect_warning(const char *conf, const char *needle)
{
    th_server s;
    th_server_start(&s, conf);
    baton_client *c = open_on(&s, 1000);
    const char *msg = baton_client_errmsg(c);
    if (needle) {
        cr_assert(not(eq(ptr, strstr(msg, needle), NULL)), "warning was \"%s\"", msg);
        cr_assert(not(eq(ptr, strstr(msg, "noeviction"), NULL)), "says what is needed: %s", msg);
    } else {
        cr_assert(eq(str, (char *)msg, ""));
    }
    /* told once: the next call starts clean */
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(c, "rc-evict", &l), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(l, 1000), BATON_OK));
    cr_assert(eq(str, (char *)baton_client_errmsg(c), ""));
    baton_lock_release(l);
    baton_lock_close(l);
    baton_client_close(c);
    th_server_stop(&s);
}

Test(recovery, an_evicting_policy_is_reported_at_open)
{
    expect_warning("--maxmemory 64mb --maxmemory-policy allkeys-lru",
                   "maxmemory-policy is allkeys-lru");
    expect_warning("--maxmemory 64mb --maxmemory-policy volatile-ttl",
                   "maxmemory-policy is volatile-ttl");
    expect_warning("--maxmemory-policy noeviction", NULL);
}
