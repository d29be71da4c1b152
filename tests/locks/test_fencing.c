/*
 * Fencing tokens, lock-lost signals and idempotent release, against real redis-servers:
 * tokens across processes, a stale holder paused with SIGSTOP and fenced off, a deleted key
 * reported lost (callback and fd), a server restart reported lost, and a release whose
 * reply is lost and retried.
 */
#define _GNU_SOURCE
#include "helper.h"
#include "internal.h"

#include "new_assert.h"
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

TestSuite(fencing, .timeout = 60);

/* ------------------------------------------------------------ tokens across processes - */

typedef struct stamp {
    int64_t ns;
    int64_t token;
} stamp;

typedef struct token_job {
    const char *name;
    int fd; /* where the child writes its stamps */
} token_job;

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int token_child(void *arg)
{
    token_job *j = arg;
    baton_options o;
    baton_options_init(&o);
    o.url = th_url();
    baton_client *c;
    baton_lock *l;
    if (baton_client_open(&o, &c) != BATON_OK || baton_lock_open(c, j->name, &l) != BATON_OK)
        return 1;
    stamp *log = calloc(300, sizeof *log);
    for (int i = 0; i < 300; i++) {
        if (baton_lock_acquire(l, 10000) != BATON_OK)
            return 2;
        int64_t t = 0;
        if (baton_lock_fencing_token(l, &t) != BATON_OK)
            return 3;
        log[i] = (stamp){mono_ns(), t}; /* inside the critical section */
        if (baton_lock_release(l) != BATON_OK)
            return 4;
    }
    ssize_t n = write(j->fd, log, 300 * sizeof *log);
    free(log);
    if (n != (ssize_t)(300 * sizeof *log))
        return 5;
    baton_lock_close(l);
    baton_client_close(c);
    return 0;
}

static int by_time(const void *a, const void *b)
{
    const stamp *x = a, *y = b;
    return (x->ns > y->ns) - (x->ns < y->ns);
}

Test(fencing, tokens_rise_in_acquisition_order_across_processes)
{
    const char *name = th_tmpname("fc-order");
    stamp *all = calloc(8 * 300, sizeof *all);
    int fds[8][2];
    pid_t pids[8];
    token_job jobs[8];
    for (int i = 0; i < 8; i++) {
        cr_assert(eq(int, pipe(fds[i]), 0));
        jobs[i] = (token_job){name, fds[i][1]};
        pids[i] = th_fork(token_child, &jobs[i]);
    }
    for (int i = 0; i < 8; i++) {
        size_t want = 300 * sizeof(stamp), got = 0;
        char *p = (char *)&all[i * 300];
        while (got < want) {
            ssize_t n = read(fds[i][0], p + got, want - got);
            cr_assert(gt(sz, (size_t)(n > 0 ? n : 0), 0), "child %d wrote too little", i);
            got += (size_t)n;
        }
        cr_assert(eq(int, th_wait(pids[i]), 0), "child %d", i);
    }
    qsort(all, 8 * 300, sizeof *all, by_time);
    for (int i = 1; i < 8 * 300; i++)
        cr_assert(gt(i64, all[i].token, all[i - 1].token),
                  "acquisition %d has token %lld after %lld", i, (long long)all[i].token,
                  (long long)all[i - 1].token);
    free(all);
}

Test(fencing, reentry_keeps_the_token_and_release_forgets_it)
{
    baton_client *c = th_client(NULL);
    const char *name = th_tmpname("fc-reentry");
    baton_lock *l;
    int64_t t1 = 0, t2 = 0, t3 = 0;
    cr_assert(eq(int, baton_lock_open(c, name, &l), BATON_OK));
    cr_assert(eq(int, baton_lock_fencing_token(l, &t1), BATON_ENOTHELD));
    cr_assert(eq(int, baton_lock_acquire(l, 5000), BATON_OK));
    cr_assert(eq(int, baton_lock_fencing_token(l, &t1), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(l, 5000), BATON_OK));
    cr_assert(eq(int, baton_lock_fencing_token(l, &t2), BATON_OK));
    cr_assert(eq(i64, t2, t1));
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    cr_assert(eq(int, baton_lock_fencing_token(l, &t3), BATON_ENOTHELD));
    cr_assert(eq(int, baton_lock_acquire(l, 5000), BATON_OK));
    cr_assert(eq(int, baton_lock_fencing_token(l, &t3), BATON_OK));
    cr_assert(gt(i64, t3, t1));
    redisContext *r = th_redis();
    cr_assert(eq(i64, th_cmd_int(r, "GET redisson_lock_token:{%s}", name), t3));
    cr_assert(eq(i64, th_cmd_int(r, "PTTL redisson_lock_token:{%s}", name), -1));
    redisFree(r);
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    cr_assert(eq(int, baton_lock_fencing_token(NULL, &t3), BATON_EINVAL));
    cr_assert(eq(int, baton_lock_fencing_token(l, NULL), BATON_EINVAL));
    baton_lock_close(l);
    baton_client_close(c);
}

/* ------------------------------------------------------------ a stale holder, fenced -- */

/* The fenced store: accepts a write only with a token at least the highest seen. */
static const char *FENCED_SET =
    "local top = tonumber(redis.call('get', KEYS[2]) or '0') "
    "if tonumber(ARGV[1]) < top then return 0 end "
    "redis.call('set', KEYS[2], ARGV[1]) redis.call('set', KEYS[1], ARGV[2]) return 1";

static int fenced_write(redisContext *r, const char *store, int64_t token, const char *value)
{
    redisReply *rep = redisCommand(r, "EVAL %s 2 %s %s:top %lld %s", FENCED_SET, store, store,
                                   (long long)token, value);
    int ok = rep && rep->type == REDIS_REPLY_INTEGER ? (int)rep->integer : -1;
    if (rep)
        freeReplyObject(rep);
    return ok;
}

typedef struct stale_job {
    const char *name, *store;
    int to_parent, from_parent;
} stale_job;

/* exit code bits: 1 first write refused, 2 late write accepted, 4 release not ENOTHELD */
static int stale_child(void *arg)
{
    stale_job *j = arg;
    baton_options o;
    baton_options_init(&o);
    o.url = th_url();
    baton_client *c;
    baton_lock *l;
    if (baton_client_open(&o, &c) != BATON_OK || baton_lock_open(c, j->name, &l) != BATON_OK ||
        baton_lock_acquire(l, 1000) != BATON_OK)
        return 64;
    int64_t token = 0;
    baton_lock_fencing_token(l, &token);
    struct timeval tv = {5, 0};
    redisContext *r = redisConnectWithTimeout("127.0.0.1", th_port(), tv);
    int bits = 0;
    if (fenced_write(r, j->store, token, "old-holder") != 1)
        bits |= 1;
    if (write(j->to_parent, &token, sizeof token) != sizeof token)
        return 65;
    char b;
    if (read(j->from_parent, &b, 1) != 1) /* the parent stops us, then lets us go on */
        return 66;
    if (fenced_write(r, j->store, token, "stale-write") != 0)
        bits |= 2;
    if (baton_lock_release(l) != BATON_ENOTHELD)
        bits |= 4;
    redisFree(r);
    baton_lock_close(l);
    baton_client_close(c);
    return bits;
}

Test(fencing, paused_holder_is_fenced_off_and_cannot_release)
{
    const char *name = th_tmpname("fc-stale"), *store = th_tmpname("fc-store");
    int up[2], down[2];
    cr_assert(eq(int, pipe(up), 0));
    cr_assert(eq(int, pipe(down), 0));
    stale_job j = {name, store, up[1], down[0]};
    pid_t pid = th_fork(stale_child, &j);
    int64_t old_token = 0;
    cr_assert(eq(sz, (size_t)read(up[0], &old_token, sizeof old_token), sizeof old_token));
    cr_assert(eq(int, kill(pid, SIGSTOP), 0));
    th_sleep_ms(1300); /* past the child's 1 s lease */

    baton_client *c = th_client(NULL);
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(c, name, &l), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(l, 2000, 10000), BATON_OK));
    int64_t token = 0;
    cr_assert(eq(int, baton_lock_fencing_token(l, &token), BATON_OK));
    cr_assert(gt(i64, token, old_token));
    redisContext *r = th_redis();
    cr_assert(eq(int, fenced_write(r, store, token, "new-holder"), 1));

    cr_assert(eq(int, kill(pid, SIGCONT), 0));
    char b = 1;
    cr_assert(eq(sz, (size_t)write(down[1], &b, 1), 1));
    cr_assert(eq(int, th_wait(pid), 0), "bits: 1 first write refused, 2 stale write accepted, "
                                        "4 stale release not ENOTHELD");
    redisReply *rep = th_cmd(r, "GET %s", store);
    cr_assert(eq(str, rep->str, "new-holder"));
    freeReplyObject(rep);
    bool held = false;
    cr_assert(eq(int, baton_lock_is_held_by_current_thread(l, &held), BATON_OK));
    cr_assert(held, "the new holder still holds");
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    redisFree(r);
    baton_lock_close(l);
    baton_client_close(c);
}

/* ------------------------------------------------------------ lost signals ------------ */

typedef struct lost_probe {
    atomic_int calls;
    _Atomic int64_t at_ms;
    baton_lock *seen;
} lost_probe;

static void on_lost(baton_lock *l, void *arg)
{
    lost_probe *p = arg;
    p->seen = l;
    atomic_store(&p->at_ms, th_ms());
    atomic_fetch_add(&p->calls, 1);
}

static int64_t wait_readable(int fd, int timeout_ms)
{
    int64_t t0 = th_ms();
    struct pollfd p = {fd, POLLIN, 0};
    int n = poll(&p, 1, timeout_ms);
    return n == 1 ? th_ms() - t0 : -1;
}

Test(fencing, deleted_key_is_reported_lost_within_a_renewal_period)
{
    baton_options o;
    baton_options_init(&o);
    o.watchdog_ms = 1500;
    baton_client *c = th_client(&o);
    const char *name = th_tmpname("fc-lost");
    baton_lock *l;
    lost_probe probe = {0};
    int fd = -1;
    cr_assert(eq(int, baton_lock_open(c, name, &l), BATON_OK));
    cr_assert(eq(int, baton_lock_set_lost_handler(l, on_lost, &probe), BATON_OK));
    cr_assert(eq(int, baton_lock_lost_fd(l, &fd), BATON_OK));
    cr_assert(ge(int, fd, 0));
    cr_assert(eq(int, baton_lock_acquire(l, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(i64, wait_readable(fd, 0), -1), "not readable while held");
    th_sleep_ms(700);
    redisContext *r = th_redis();
    int64_t deleted = th_ms();
    cr_assert(eq(i64, th_cmd_int(r, "DEL %s", name), 1));
    int64_t took = wait_readable(fd, 2000);
    cr_assert(ge(i64, took, 0), "the fd never became readable");
    cr_assert(le(i64, took, 600), "readable %lld ms after the DEL (renewal every 500 ms)",
              (long long)took);
    for (int i = 0; i < 100 && atomic_load(&probe.calls) == 0; i++)
        th_sleep_ms(5);
    cr_assert(eq(int, atomic_load(&probe.calls), 1));
    cr_assert(eq(ptr, probe.seen, l));
    cr_assert(le(i64, atomic_load(&probe.at_ms) - deleted, 650));
    int64_t t;
    cr_assert(eq(int, baton_lock_fencing_token(l, &t), BATON_ENOTHELD));
    cr_assert(eq(int, baton_lock_release(l), BATON_ENOTHELD));
    /* a new hold clears the signal */
    cr_assert(eq(int, baton_lock_acquire(l, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(i64, wait_readable(fd, 0), -1));
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    cr_assert(eq(int, atomic_load(&probe.calls), 1));
    redisFree(r);
    baton_lock_close(l);
    baton_client_close(c);
}

Test(fencing, server_restart_is_reported_lost_and_the_client_carries_on)
{
    th_server s;
    th_server_start(&s, NULL);
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", s.port);
    baton_options o;
    baton_options_init(&o);
    o.url = url;
    o.watchdog_ms = 1500;
    o.connect_timeout_ms = 1000;
    o.command_timeout_ms = 1000;
    baton_client *c;
    cr_assert(eq(int, baton_client_open(&o, &c), BATON_OK));
    cr_assert(eq(u64, baton_client_epoch(c), 1));
    baton_lock *wd_lock, *lease_lock;
    lost_probe p1 = {0}, p2 = {0};
    cr_assert(eq(int, baton_lock_open(c, "fc-restart-wd", &wd_lock), BATON_OK));
    cr_assert(eq(int, baton_lock_open(c, "fc-restart-lease", &lease_lock), BATON_OK));
    baton_lock_set_lost_handler(wd_lock, on_lost, &p1);
    baton_lock_set_lost_handler(lease_lock, on_lost, &p2);
    cr_assert(eq(int, baton_lock_acquire(wd_lock, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(lease_lock, 60000), BATON_OK));

    th_server_stop(&s);
    th_server_start_on(&s, s.port, NULL); /* no persistence: every key is gone */
    /* the watchdog's next renewals reconnect, see a new run_id and report both holds */
    for (int i = 0; i < 400 && (atomic_load(&p1.calls) == 0 || atomic_load(&p2.calls) == 0); i++)
        th_sleep_ms(10);
    cr_assert(eq(int, atomic_load(&p1.calls), 1), "the watchdog hold was not reported lost");
    cr_assert(eq(int, atomic_load(&p2.calls), 1), "the leased hold was not reported lost");
    cr_assert(eq(u64, baton_client_epoch(c), 2));
    cr_assert(eq(int, baton_lock_release(wd_lock), BATON_ENOTHELD));
    cr_assert(eq(int, baton_lock_release(lease_lock), BATON_ENOTHELD));
    cr_assert(eq(int, baton_lock_acquire(wd_lock, 5000), BATON_OK));
    int64_t t = 0;
    cr_assert(eq(int, baton_lock_fencing_token(wd_lock, &t), BATON_OK));
    cr_assert(eq(i64, t, 1), "the new server counts tokens from 1: the epoch tells");
    cr_assert(eq(int, baton_lock_release(wd_lock), BATON_OK));
    baton_lock_close(wd_lock);
    baton_lock_close(lease_lock);
    baton_client_close(c);
    th_server_stop(&s);
}

/* ------------------------------------------------------------ idempotent release ------ */

typedef struct blocker {
    int port;
    int ms;
    _Atomic int64_t done_ms; /* when the server answered the blocking command (th_ms) */
} blocker;

/* Blocks the whole server for a while: DEBUG SLEEP (the server started with
 * --enable-debug-command local), which holds every client's commands unanswered and answers
 * none BUSY, on every server version. (A script that spins on TIME does not do it alike:
 * Redis 7.0 gives it the real time, Redis 8 and Valkey 8 the time the script started until
 * busy-reply-threshold, 5 s, passes; then the server answers BUSY.) */
static void *block_server(void *arg)
{
    blocker *b = arg;
    redisContext *r = th_redis_port(b->port);
    redisReply *rep = redisCommand(r, "DEBUG SLEEP %d.%03d", b->ms / 1000, b->ms % 1000);
    atomic_store(&b->done_ms, th_ms());
    if (rep)
        freeReplyObject(rep);
    redisFree(r);
    return NULL;
}

/* A script that keeps the server busy for about ms (the server answers BUSY to every other
 * command once its busy-reply-threshold has passed; the script's TIME moves on from then on
 * Redis 8 and Valkey 8 too). */
static void *busy_script(void *arg)
{
    blocker *b = arg;
    redisContext *r = th_redis_port(b->port);
    redisReply *rep =
        redisCommand(r, "EVAL %s 0 %d",
                     "local t = redis.call('TIME') local start = t[1] * 1000 + t[2] / 1000 "
                     "local now = start while now - start < tonumber(ARGV[1]) do "
                     "t = redis.call('TIME') now = t[1] * 1000 + t[2] / 1000 end return 1",
                     b->ms);
    atomic_store(&b->done_ms, th_ms());
    if (rep)
        freeReplyObject(rep);
    redisFree(r);
    return NULL;
}

/* Whether the server on port answers BUSY now. */
static bool answers_busy(int port)
{
    redisContext *r = redisConnect("127.0.0.1", port);
    redisReply *rep = r && !r->err ? redisCommand(r, "PING") : NULL;
    bool busy = rep && rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "BUSY", 4) == 0;
    if (rep)
        freeReplyObject(rep);
    if (r)
        redisFree(r);
    return busy;
}

Test(fencing, release_whose_reply_is_lost_is_retried_once_and_counted_once)
{
    th_server s;
    th_server_start(&s, "--enable-debug-command local");
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", s.port);
    baton_options o;
    baton_options_init(&o);
    o.url = url;
    o.command_timeout_ms = 300;  /* the release's reply will not come in time ... */
    o.connect_timeout_ms = 3000; /* ... but the retry's connection waits for the server */
    baton_client *c;
    cr_assert(eq(int, baton_client_open(&o, &c), BATON_OK));
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(c, "fc-idem", &l), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(l, 30000), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(l, 30000), BATON_OK));
    redisContext *r = th_redis_port(s.port);
    char owner[BATON__OWNER_LEN];
    baton__owner(c, owner, sizeof owner);
    cr_assert(eq(i64, th_cmd_int(r, "HGET fc-idem %s", owner), 2));

    freeReplyObject(th_cmd(r, "CONFIG RESETSTAT"));
    blocker b = {s.port, 1000, 0};
    pthread_t t;
    pthread_create(&t, NULL, block_server, &b);
    th_sleep_ms(100); /* the server is now asleep for about 900 ms more */
    /* sent, executed only after the busy script, reply lost to the 300 ms timeout, retried
     * with the same request id on a new connection: the retry returns the first outcome */
    cr_assert(eq(int, baton_lock_release(l), BATON_OK), "%s", baton_client_errmsg(c));
    pthread_join(t, NULL);
    cr_assert(eq(i64, th_cmdstat(r, "evalsha"), 2),
              "the release ran twice on the server (sent, then retried)");
    cr_assert(eq(i64, th_cmd_int(r, "HGET fc-idem %s", owner), 1), "one release, one hold");
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS fc-idem"), 0));
    redisFree(r);
    baton_lock_close(l);
    baton_client_close(c);
    th_server_stop(&s);
}

/* A release that meets a server busy with a script (BUSY: refused, not run) waits within its
 * bound, as for a lost reply, and then releases once: on the pooled connection (the BUSY is
 * the script's reply) and on a new one (the BUSY is the reply to its PING). Redis 8 and
 * Valkey 8 answer BUSY where Redis 7.0 only held the reply back (busy_script above). */
Test(fencing, release_that_meets_a_busy_server_waits_within_its_bound)
{
    enum { CMD = 500, CONNECT = 1000, BUSY_MS = 1500 };
    th_server s;
    th_server_start(&s, "--busy-reply-threshold 100");
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", s.port);
    baton_options o;
    baton_options_init(&o);
    o.url = url;
    o.command_timeout_ms = CMD;
    o.connect_timeout_ms = CONNECT;
    baton_client *c;
    cr_assert(eq(int, baton_client_open(&o, &c), BATON_OK));
    baton_lock *l1, *l2;
    cr_assert(eq(int, baton_lock_open(c, "fc-busy-1", &l1), BATON_OK));
    cr_assert(eq(int, baton_lock_open(c, "fc-busy-2", &l2), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(l1, 30000), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(l2, 30000), BATON_OK));
    redisContext *r = th_redis_port(s.port);

    blocker b = {s.port, BUSY_MS, 0};
    pthread_t t;
    pthread_create(&t, NULL, busy_script, &b);
    int64_t t0 = th_ms();
    while (!answers_busy(s.port) && th_ms() - t0 < 3000)
        th_sleep_ms(10);
    cr_assert(answers_busy(s.port), "the server never answered BUSY");
    /* the pooled connection: the release's script is answered BUSY */
    int64_t t1 = th_ms();
    cr_assert(eq(int, baton_lock_release(l1), BATON_OK), "%s", baton_client_errmsg(c));
    int64_t took1 = th_ms() - t1;
    cr_assert(ge(i64, th_ms(), atomic_load(&b.done_ms)), "released before the busy script ended");
    cr_assert(lt(i64, took1, 3 * (CMD + CONNECT)), "the release waited past its bound");
    pthread_join(t, NULL);
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS fc-busy-1"), 0));

    /* a new connection: its PING is answered BUSY */
    freeReplyObject(th_cmd(r, "CLIENT KILL TYPE normal SKIPME yes"));
    b.done_ms = 0;
    pthread_create(&t, NULL, busy_script, &b);
    t0 = th_ms();
    while (!answers_busy(s.port) && th_ms() - t0 < 3000)
        th_sleep_ms(10);
    cr_assert(answers_busy(s.port), "the server never answered BUSY");
    int64_t t2 = th_ms();
    cr_assert(eq(int, baton_lock_release(l2), BATON_OK), "%s", baton_client_errmsg(c));
    int64_t took2 = th_ms() - t2;
    cr_assert(lt(i64, took2, 3 * (CMD + CONNECT)), "the release waited past its bound");
    pthread_join(t, NULL);
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS fc-busy-2"), 0));
    fprintf(stderr, "fencing: releases met BUSY and waited %lld and %lld ms\n", (long long)took1,
            (long long)took2);
    redisFree(r);
    baton_lock_close(l1);
    baton_lock_close(l2);
    baton_client_close(c);
    th_server_stop(&s);
}
