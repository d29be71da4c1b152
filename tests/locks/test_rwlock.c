/*
 * The read-write lock against a real redis-server: 8 reader and 2 writer processes checked
 * by their interval log, killed readers and writers, Redisson's layout and messages, a
 * Redisson peer on the same lock, reentrancy, the writers-first claim, tokens, queries,
 * multi-lock membership and bad input.
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
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

TestSuite(rwlock, .timeout = 60);

static baton_client *client_with(int64_t watchdog_ms, int64_t fair_wait_ms)
{
    baton_options o;
    baton_options_init(&o);
    o.url = th_url();
    o.watchdog_ms = watchdog_ms;
    o.fair_wait_ms = fair_wait_ms;
    return th_client(&o);
}

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* In a forked child (no Criterion asserts there): a client of its own and one half of the
 * read-write lock name; NULL when either cannot be opened. */
static baton_lock *child_open(const char *name, int writer, int64_t watchdog_ms)
{
    baton_options o;
    baton_options_init(&o);
    o.url = th_url();
    o.watchdog_ms = watchdog_ms;
    baton_client *c;
    baton_rwlock *rw;
    if (baton_client_open(&o, &c) != BATON_OK)
        return NULL;
    if (baton_rwlock_open(c, name, &rw) != BATON_OK) {
        baton_client_close(c);
        return NULL;
    }
    return writer ? baton_rwlock_write(rw) : baton_rwlock_read(rw);
}

/* ---------------------------------------------------------------- the interval log --- */

/* One hold, in CLOCK_MONOTONIC µs (one clock for every process of the machine): asked is
 * when the acquire was called, from/to lie inside the hold (after the acquire returned,
 * before the release was sent), so two logged holds that overlap really did. */
typedef struct hold_rec {
    int writer;
    int64_t asked, from, to;
} hold_rec;

#define LOG_MAX 20000

typedef struct shared_log {
    atomic_int n;
    hold_rec rec[LOG_MAX];
} shared_log;

typedef struct worker {
    shared_log *log;
    const char *name;
    int writer;
    unsigned seed;
    int64_t end_us;
} worker;

/* A reader holds 5-25 ms and comes back at once; a writer holds 5-20 ms, then rests
 * 50-150 ms. Exit status: the number of calls that failed. */
static int work(void *arg)
{
    worker *w = arg;
    baton_lock *l = child_open(w->name, w->writer, 0);
    if (!l)
        return 100;
    int errors = 0;
    while (now_us() < w->end_us) {
        int64_t asked = now_us();
        if (baton_lock_try_acquire(l, 20000, BATON_LEASE_WATCHDOG) != BATON_OK) {
            errors++;
            continue;
        }
        int64_t from = now_us();
        th_sleep_ms(5 + rand_r(&w->seed) % (w->writer ? 16 : 21));
        int64_t to = now_us();
        if (baton_lock_release(l) != BATON_OK)
            errors++;
        int i = atomic_fetch_add(&w->log->n, 1);
        if (i < LOG_MAX)
            w->log->rec[i] = (hold_rec){w->writer, asked, from, to};
        if (w->writer)
            th_sleep_ms(50 + rand_r(&w->seed) % 101);
    }
    return errors > 99 ? 99 : errors; /* every hold released; the client ends with the child */
}

static bool overlap(const hold_rec *a, const hold_rec *b)
{
    return a->from < b->to && b->from < a->to;
}

/* The bound docs/rwlock.md states for a writer's wait, loosened for a loaded 2-core test
 * machine: the read holds in progress (<= 25 ms) plus the other writer's hold (<= 20 ms)
 * plus wake-up and scheduling latency. */
#define WRITER_WAIT_BOUND_MS 1000

Test(rwlock, eight_readers_two_writers_exclude_and_share, .timeout = 90)
{
    shared_log *log =
        mmap(NULL, sizeof *log, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(log != MAP_FAILED);
    atomic_init(&log->n, 0);
    const char *name = th_tmpname("rw-stress");
    int64_t end = now_us() + 10 * 1000000;
    worker w[10];
    pid_t pids[10];
    for (int i = 0; i < 10; i++) {
        w[i] = (worker){log, name, i >= 8, (unsigned)(i * 7919 + 1), end};
        pids[i] = th_fork(work, &w[i]);
    }
    for (int i = 0; i < 10; i++) {
        int st = th_wait(pids[i]);
        cr_assert(eq(int, st, 0), "process %d (%s): status %d", i, i >= 8 ? "writer" : "reader",
                  st);
    }
    int n = atomic_load(&log->n);
    cr_assert(lt(int, n, LOG_MAX));
    int reads = 0, writes = 0, most_readers = 0, clashes = 0;
    int64_t longest_writer_wait = 0;
    char clash[200] = "";
    for (int i = 0; i < n; i++) {
        const hold_rec *a = &log->rec[i];
        if (a->writer) {
            writes++;
            int64_t waited = a->from - a->asked;
            if (waited > longest_writer_wait)
                longest_writer_wait = waited;
        } else {
            reads++;
        }
        int readers_at_start = 0;
        for (int j = 0; j < n; j++) {
            const hold_rec *b = &log->rec[j];
            if (i == j)
                continue;
            if ((a->writer || b->writer) && overlap(a, b) && clashes++ == 0)
                snprintf(clash, sizeof clash, "%s hold [%lld, %lld] overlaps %s hold [%lld, %lld]",
                         a->writer ? "write" : "read", (long long)a->from, (long long)a->to,
                         b->writer ? "write" : "read", (long long)b->from, (long long)b->to);
            if (!a->writer && !b->writer && b->from <= a->from && a->from < b->to)
                readers_at_start++;
        }
        if (!a->writer && readers_at_start + 1 > most_readers)
            most_readers = readers_at_start + 1;
    }
    cr_assert(eq(int, clashes, 0), "%s", clash);
    cr_log_info("10 s, 8 readers + 2 writers: %d read holds, %d write holds, up to %d readers "
                "at once, longest writer wait %lld ms",
                reads, writes, most_readers, (long long)(longest_writer_wait / 1000));
    cr_assert(gt(int, writes, 20), "writers got in %d times", writes);
    cr_assert(gt(int, reads, 100), "readers got in %d times", reads);
    cr_assert(ge(int, most_readers, 2));
    cr_assert(le(i64, longest_writer_wait / 1000, WRITER_WAIT_BOUND_MS));
    munmap(log, sizeof *log);
}

/* ---------------------------------------------------------------- killed holders ----- */

typedef struct child_arg {
    const char *name;
    int writer;
    int ready_fd;
} child_arg;

/* Takes its part with a 1.5 s watchdog lease, says so, and waits to be killed. */
static int hold_forever(void *arg)
{
    child_arg *a = arg;
    baton_lock *l = child_open(a->name, a->writer, 1500);
    if (!l)
        return 1;
    if (baton_lock_acquire(l, BATON_LEASE_WATCHDOG) != BATON_OK)
        return 2;
    char b = 1;
    if (write(a->ready_fd, &b, 1) != 1)
        return 3;
    for (;;)
        pause();
}

static pid_t start_holder(const char *name, int writer)
{
    int fds[2];
    cr_assert(eq(int, pipe(fds), 0));
    child_arg a = {name, writer, fds[1]};
    pid_t pid = th_fork(hold_forever, &a);
    char b;
    cr_assert(eq(sz, (size_t)read(fds[0], &b, 1), 1));
    close(fds[0]);
    close(fds[1]);
    return pid;
}

typedef struct waiter {
    baton_lock *lock;
    int64_t wait_ms;
    int rc;
    int64_t done_ms;
} waiter;

static void *acquire_release_thread(void *arg)
{
    waiter *w = arg;
    w->rc = baton_lock_try_acquire(w->lock, w->wait_ms, BATON_LEASE_WATCHDOG);
    w->done_ms = th_ms();
    if (w->rc == BATON_OK)
        w->rc = baton_lock_release(w->lock);
    return NULL;
}

Test(rwlock, killed_reader_frees_its_part_within_the_lease)
{
    const char *name = th_tmpname("rw-kill-reader");
    pid_t pid = start_holder(name, 0);
    th_sleep_ms(2000); /* renewed past its first lease: timeout keys included */
    redisContext *r = th_redis();
    /* the renewal kept the child's timeout key alive, not only the hash */
    redisReply *keys = th_cmd(r, "KEYS {%s}:*:rwlock_timeout:1", name);
    cr_assert(eq(sz, keys->elements, 1));
    cr_assert(gt(i64, th_cmd_int(r, "PTTL %s", keys->element[0]->str), 0));
    freeReplyObject(keys);

    /* a live reader of ours (30 s watchdog) beside the child */
    baton_client *c = client_with(0, 600);
    baton_rwlock *rw;
    cr_assert(eq(int, baton_rwlock_open(c, name, &rw), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(baton_rwlock_read(rw), BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(baton_rwlock_write(rw), 0, 1000), BATON_ENOTSUP));

    baton_client *c2 = client_with(0, 600);
    baton_rwlock *rw2;
    cr_assert(eq(int, baton_rwlock_open(c2, name, &rw2), BATON_OK));
    waiter w = {baton_rwlock_write(rw2), 10000, -100, 0};
    pthread_t t;
    pthread_create(&t, NULL, acquire_release_thread, &w);
    th_sleep_ms(200);
    kill(pid, SIGKILL);
    int64_t killed = th_ms();
    cr_assert(eq(int, th_wait(pid), 128 + SIGKILL));
    th_sleep_ms(100);
    cr_assert(eq(int, baton_lock_release(baton_rwlock_read(rw)), BATON_OK));
    pthread_join(t, NULL);
    cr_assert(eq(int, w.rc, BATON_OK), "%s", baton_client_errmsg(c2));
    int64_t took = w.done_ms - killed;
    cr_log_info("writer in %lld ms after the reader's kill (lease 1500 ms)", (long long)took);
    cr_assert(le(i64, took, 1500 + 700), "writer got in %lld ms after the kill", (long long)took);
    redisFree(r);
    baton_rwlock_close(rw);
    baton_rwlock_close(rw2);
    baton_client_close(c);
    baton_client_close(c2);
}

Test(rwlock, killed_writer_frees_the_lock_within_the_lease)
{
    const char *name = th_tmpname("rw-kill-writer");
    pid_t pid = start_holder(name, 1);
    th_sleep_ms(2000); /* renewed past its first lease */
    baton_client *c = th_client(NULL);
    baton_rwlock *rw;
    cr_assert(eq(int, baton_rwlock_open(c, name, &rw), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(baton_rwlock_read(rw), 0, 1000), BATON_ETIMEDOUT));
    waiter w = {baton_rwlock_read(rw), 10000, -100, 0};
    pthread_t t;
    pthread_create(&t, NULL, acquire_release_thread, &w);
    th_sleep_ms(200);
    kill(pid, SIGKILL);
    int64_t killed = th_ms();
    cr_assert(eq(int, th_wait(pid), 128 + SIGKILL));
    pthread_join(t, NULL);
    cr_assert(eq(int, w.rc, BATON_OK));
    int64_t took = w.done_ms - killed;
    cr_log_info("reader in %lld ms after the writer's kill (lease 1500 ms)", (long long)took);
    cr_assert(le(i64, took, 1700), "reader got in %lld ms after the kill", (long long)took);
    baton_rwlock_close(rw);
    baton_client_close(c);
}

/* ---------------------------------------------------------------- layout and peers --- */

/* A subscriber on the lock's channel; next_message() returns the next payload. */
static redisContext *listen_on(const char *name)
{
    redisContext *s = th_redis();
    redisReply *r = redisCommand(s, "SUBSCRIBE redisson_rwlock:{%s}", name);
    cr_assert(r && r->type == REDIS_REPLY_ARRAY);
    freeReplyObject(r);
    return s;
}

static char *next_message(redisContext *s)
{
    void *v = NULL;
    cr_assert(eq(int, redisGetReply(s, &v), REDIS_OK));
    redisReply *r = v;
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 3);
    char *msg = strdup(r->element[2]->str);
    freeReplyObject(r);
    return msg;
}

Test(rwlock, layout_and_messages_are_redissons)
{
    const char *name = th_tmpname("rw-layout");
    baton_client *c = th_client(NULL);
    baton_rwlock *rw;
    cr_assert(eq(int, baton_rwlock_open(c, name, &rw), BATON_OK));
    char owner[BATON__OWNER_LEN];
    baton__owner(c, owner, sizeof owner);
    redisContext *r = th_redis(), *sub = listen_on(name);

    cr_assert(eq(int, baton_lock_acquire(baton_rwlock_read(rw), 5000), BATON_OK));
    redisReply *mode = th_cmd(r, "HGET %s mode", name);
    cr_assert(eq(str, mode->str, "read"));
    freeReplyObject(mode);
    cr_assert(eq(i64, th_cmd_int(r, "HGET %s %s", name, owner), 1));
    int64_t pttl = th_cmd_int(r, "PTTL {%s}:%s:rwlock_timeout:1", name, owner);
    cr_assert(gt(i64, pttl, 4000));
    cr_assert(le(i64, pttl, 5000));
    cr_assert(eq(int, baton_lock_release(baton_rwlock_read(rw)), BATON_OK));
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s {%s}:%s:rwlock_timeout:1", name, name, owner), 0));
    char *m = next_message(sub);
    cr_assert(eq(str, m, "0"), "read unlock publishes \"0\"");
    free(m);

    cr_assert(eq(int, baton_lock_acquire(baton_rwlock_write(rw), 5000), BATON_OK));
    mode = th_cmd(r, "HGET %s mode", name);
    cr_assert(eq(str, mode->str, "write"));
    freeReplyObject(mode);
    cr_assert(eq(i64, th_cmd_int(r, "HGET %s %s:write", name, owner), 1));
    cr_assert(eq(int, baton_lock_release(baton_rwlock_write(rw)), BATON_OK));
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s", name), 0));
    m = next_message(sub);
    cr_assert(eq(str, m, "1"), "write unlock publishes \"1\"");
    free(m);
    redisFree(sub);
    redisFree(r);
    baton_rwlock_close(rw);
    baton_client_close(c);
}

/* A Redisson client on the same lock, played through EVAL: these scripts follow the
 * rules of Redisson's RedissonReadLock / RedissonWriteLock as docs/rwlock.md records them
 * (acquire answers nil or the lock's PTTL; unlocks publish "0" / "1"), without its unlock
 * latches. */
static const char *PEER_READ_LOCK =
    "local mode = redis.call('hget', KEYS[1], 'mode') "
    "if mode == false then "
    "  redis.call('hset', KEYS[1], 'mode', 'read') redis.call('hset', KEYS[1], ARGV[2], 1) "
    "  redis.call('set', KEYS[2] .. ':1', 1, 'px', ARGV[1]) "
    "  redis.call('pexpire', KEYS[1], ARGV[1]) return nil end "
    "if mode == 'read' or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then "
    "  local n = redis.call('hincrby', KEYS[1], ARGV[2], 1) "
    "  redis.call('set', KEYS[2] .. ':' .. n, 1, 'px', ARGV[1]) "
    "  redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), ARGV[1])) "
    "  return nil end "
    "return redis.call('pttl', KEYS[1])";
static const char *PEER_WRITE_LOCK =
    "local mode = redis.call('hget', KEYS[1], 'mode') "
    "if mode == false then "
    "  redis.call('hset', KEYS[1], 'mode', 'write') redis.call('hset', KEYS[1], ARGV[2], 1) "
    "  redis.call('pexpire', KEYS[1], ARGV[1]) return nil end "
    "if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then "
    "  redis.call('hincrby', KEYS[1], ARGV[2], 1) return nil end "
    "return redis.call('pttl', KEYS[1])";
/* KEYS: name, channel, this reader's timeout prefix, the key prefix {name} */
static const char *PEER_READ_UNLOCK =
    "local mode = redis.call('hget', KEYS[1], 'mode') "
    "if mode == false then redis.call('publish', KEYS[2], '0') return 1 end "
    "if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then return nil end "
    "local n = redis.call('hincrby', KEYS[1], ARGV[1], -1) "
    "if n == 0 then redis.call('hdel', KEYS[1], ARGV[1]) end "
    "redis.call('del', KEYS[3] .. ':' .. (n + 1)) "
    "if redis.call('hlen', KEYS[1]) > 1 then "
    "  local longest = -3 "
    "  for _, f in ipairs(redis.call('hkeys', KEYS[1])) do "
    "    local c = tonumber(redis.call('hget', KEYS[1], f)) "
    "    if type(c) == 'number' then for i = c, 1, -1 do "
    "      longest = math.max(longest, redis.call('pttl', KEYS[4] .. ':' .. f .. "
    "                                  ':rwlock_timeout:' .. i)) end end "
    "  end "
    "  if longest > 0 then redis.call('pexpire', KEYS[1], longest) return 0 end "
    "  if mode == 'write' then return 0 end "
    "end "
    "redis.call('del', KEYS[1]) redis.call('publish', KEYS[2], '0') return 1";
static const char *PEER_WRITE_UNLOCK =
    "if redis.call('hget', KEYS[1], 'mode') ~= 'write' then return nil end "
    "if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then return nil end "
    "if redis.call('hincrby', KEYS[1], ARGV[1], -1) > 0 then return 0 end "
    "redis.call('hdel', KEYS[1], ARGV[1]) "
    "if redis.call('hlen', KEYS[1]) == 1 then "
    "  redis.call('del', KEYS[1]) redis.call('publish', KEYS[2], '1') "
    "else redis.call('hset', KEYS[1], 'mode', 'read') end "
    "return 1";

#define PEER "6f1c1f6e-0000-4000-8000-00000000peer:1"

/* The peer's acquire: true when it got the lock (nil reply). */
static bool peer_lock(redisContext *r, const char *name, bool write)
{
    redisReply *rep;
    if (write)
        rep = th_cmd(r, "EVAL %s 1 %s 10000 %s:write", PEER_WRITE_LOCK, name, PEER);
    else
        rep = th_cmd(r, "EVAL %s 2 %s {%s}:%s:rwlock_timeout 10000 %s %s:write", PEER_READ_LOCK,
                     name, name, PEER, PEER, PEER);
    bool got = rep->type == REDIS_REPLY_NIL;
    freeReplyObject(rep);
    return got;
}

static long long peer_unlock(redisContext *r, const char *name, bool write)
{
    redisReply *rep;
    if (write)
        rep = th_cmd(r, "EVAL %s 2 %s redisson_rwlock:{%s} %s:write", PEER_WRITE_UNLOCK, name, name,
                     PEER);
    else
        rep = th_cmd(r, "EVAL %s 4 %s redisson_rwlock:{%s} {%s}:%s:rwlock_timeout {%s} %s",
                     PEER_READ_UNLOCK, name, name, name, PEER, name, PEER);
    long long v = rep->type == REDIS_REPLY_INTEGER ? rep->integer : -1;
    freeReplyObject(rep);
    return v;
}

Test(rwlock, a_redisson_peer_on_the_same_lock_excludes_and_shares)
{
    const char *name = th_tmpname("rw-peer");
    baton_client *c = th_client(NULL);
    baton_rwlock *rw;
    cr_assert(eq(int, baton_rwlock_open(c, name, &rw), BATON_OK));
    baton_lock *rd = baton_rwlock_read(rw), *wr = baton_rwlock_write(rw);
    redisContext *r = th_redis();

    /* the peer writes: baton neither reads nor writes; its unlock "1" wakes our reader */
    cr_assert(peer_lock(r, name, true));
    cr_assert(eq(int, baton_lock_try_acquire(rd, 0, 5000), BATON_ETIMEDOUT));
    cr_assert(eq(int, baton_lock_try_acquire(wr, 0, 5000), BATON_ETIMEDOUT));
    waiter w = {rd, 8000, -100, 0};
    pthread_t t;
    pthread_create(&t, NULL, acquire_release_thread, &w);
    th_sleep_ms(300);
    int64_t released = th_ms();
    cr_assert(eq(i64, peer_unlock(r, name, true), 1));
    pthread_join(t, NULL);
    cr_assert(eq(int, w.rc, BATON_OK));
    cr_assert(lt(i64, w.done_ms - released, 1000), "woken by the message, not the lease");

    /* the peer reads: baton reads beside it, and cannot write */
    cr_assert(peer_lock(r, name, false));
    cr_assert(eq(int, baton_lock_try_acquire(wr, 0, 5000), BATON_ETIMEDOUT));
    cr_assert(eq(int, baton_lock_try_acquire(rd, 0, 5000), BATON_OK));
    /* the peer leaves first: our reader's timeout key keeps the hash alive */
    cr_assert(eq(i64, peer_unlock(r, name, false), 0));
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s", name), 1));
    bool locked = false;
    cr_assert(eq(int, baton_lock_is_locked(rd, &locked), BATON_OK));
    cr_assert(locked);
    /* the peer cannot write while we read; after our release it can, and we cannot */
    cr_assert(not(peer_lock(r, name, true)));
    cr_assert(eq(int, baton_lock_release(rd), BATON_OK));
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s", name), 0));
    cr_assert(peer_lock(r, name, true));
    cr_assert(eq(int, baton_lock_try_acquire(rd, 0, 5000), BATON_ETIMEDOUT));
    cr_assert(eq(i64, peer_unlock(r, name, true), 1));

    /* we write: the peer can neither read nor write */
    cr_assert(eq(int, baton_lock_acquire(wr, 5000), BATON_OK));
    cr_assert(not(peer_lock(r, name, false)));
    cr_assert(not(peer_lock(r, name, true)));
    cr_assert(eq(int, baton_lock_release(wr), BATON_OK));
    cr_assert(peer_lock(r, name, false));
    cr_assert(eq(i64, peer_unlock(r, name, false), 1));
    redisFree(r);
    baton_rwlock_close(rw);
    baton_client_close(c);
}

/* ---------------------------------------------------------------- reentrancy --------- */

Test(rwlock, reentrancy_follows_redisson_and_refuses_an_upgrade)
{
    const char *name = th_tmpname("rw-reenter");
    baton_client *c = th_client(NULL);
    baton_rwlock *rw;
    cr_assert(eq(int, baton_rwlock_open(c, name, &rw), BATON_OK));
    baton_lock *rd = baton_rwlock_read(rw), *wr = baton_rwlock_write(rw);
    int64_t n = 0;

    /* read twice, then the write lock is refused at once (no upgrade, no silent wait) */
    cr_assert(eq(int, baton_lock_acquire(rd, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(rd, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(int, baton_lock_hold_count(rd, &n), BATON_OK));
    cr_assert(eq(i64, n, 2));
    int64_t t0 = th_ms();
    cr_assert(eq(int, baton_lock_try_acquire(wr, 3000, 5000), BATON_ENOTSUP));
    cr_assert(lt(i64, th_ms() - t0, 500));
    cr_assert(eq(int, baton_lock_release(rd), BATON_OK));
    cr_assert(eq(int, baton_lock_release(rd), BATON_OK));
    cr_assert(eq(int, baton_lock_release(rd), BATON_ENOTHELD));

    /* write twice, read inside it, then the downgrade: the write goes, the read stays */
    cr_assert(eq(int, baton_lock_acquire(wr, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(wr, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(rd, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(int, baton_lock_hold_count(wr, &n), BATON_OK));
    cr_assert(eq(i64, n, 2));
    bool held = false;
    cr_assert(eq(int, baton_lock_is_held_by_current_thread(rd, &held), BATON_OK));
    cr_assert(held);
    cr_assert(eq(int, baton_lock_release(wr), BATON_OK));
    cr_assert(eq(int, baton_lock_release(wr), BATON_OK));
    cr_assert(eq(int, baton_lock_is_held_by_current_thread(wr, &held), BATON_OK));
    cr_assert(not(held));
    redisContext *r = th_redis();
    redisReply *mode = th_cmd(r, "HGET %s mode", name);
    cr_assert(eq(str, mode->str, "read"), "downgraded to read");
    freeReplyObject(mode);
    /* another client reads beside the downgraded reader, nobody else writes */
    baton_client *c2 = th_client(NULL);
    baton_rwlock *rw2;
    cr_assert(eq(int, baton_rwlock_open(c2, name, &rw2), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(baton_rwlock_write(rw2), 0, 5000), BATON_ETIMEDOUT));
    cr_assert(eq(int, baton_lock_try_acquire(baton_rwlock_read(rw2), 0, 5000), BATON_OK));
    cr_assert(eq(int, baton_lock_release(baton_rwlock_read(rw2)), BATON_OK));
    cr_assert(eq(int, baton_lock_release(rd), BATON_OK));
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s", name), 0));
    cr_assert(eq(int, baton_lock_release(wr), BATON_ENOTHELD));
    redisFree(r);
    baton_rwlock_close(rw2);
    baton_client_close(c2);
    baton_rwlock_close(rw);
    baton_client_close(c);
}

/* ---------------------------------------------------------------- writers first ------ */

Test(rwlock, a_waiting_writer_holds_back_new_readers_and_its_withdrawal_frees_them)
{
    const char *name = th_tmpname("rw-claim");
    baton_client *a = th_client(NULL), *b = th_client(NULL), *w = th_client(NULL);
    baton_rwlock *ra, *rb, *rwr;
    cr_assert(eq(int, baton_rwlock_open(a, name, &ra), BATON_OK));
    cr_assert(eq(int, baton_rwlock_open(b, name, &rb), BATON_OK));
    cr_assert(eq(int, baton_rwlock_open(w, name, &rwr), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(baton_rwlock_read(ra), BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(baton_rwlock_read(rb), 0, 5000), BATON_OK));
    cr_assert(eq(int, baton_lock_release(baton_rwlock_read(rb)), BATON_OK));

    /* a writer waits: a new reader is held back, the reader inside re-enters freely */
    waiter wt = {baton_rwlock_write(rwr), 8000, -100, 0};
    pthread_t t;
    pthread_create(&t, NULL, acquire_release_thread, &wt);
    th_sleep_ms(300);
    cr_assert(eq(int, baton_lock_try_acquire(baton_rwlock_read(rb), 0, 5000), BATON_ETIMEDOUT));
    cr_assert(eq(int, baton_lock_try_acquire(baton_rwlock_read(ra), 0, 5000), BATON_OK));
    cr_assert(eq(int, baton_lock_release(baton_rwlock_read(ra)), BATON_OK));
    int64_t released = th_ms();
    cr_assert(eq(int, baton_lock_release(baton_rwlock_read(ra)), BATON_OK));
    pthread_join(t, NULL);
    cr_assert(eq(int, wt.rc, BATON_OK));
    cr_assert(lt(i64, wt.done_ms - released, 500), "writer in %lld ms after the last reader",
              (long long)(wt.done_ms - released));

    /* a writer that gives up withdraws its claim and wakes the reader it held back */
    cr_assert(eq(int, baton_lock_acquire(baton_rwlock_read(ra), BATON_LEASE_WATCHDOG), BATON_OK));
    waiter giving_up = {baton_rwlock_write(rwr), 600, -100, 0};
    pthread_create(&t, NULL, acquire_release_thread, &giving_up);
    th_sleep_ms(200);
    waiter reader = {baton_rwlock_read(rb), 8000, -100, 0};
    pthread_t t2;
    pthread_create(&t2, NULL, acquire_release_thread, &reader);
    pthread_join(t, NULL);
    cr_assert(eq(int, giving_up.rc, BATON_ETIMEDOUT));
    pthread_join(t2, NULL);
    cr_assert(eq(int, reader.rc, BATON_OK));
    cr_assert(lt(i64, reader.done_ms - giving_up.done_ms, 500),
              "reader in %lld ms after the writer gave up",
              (long long)(reader.done_ms - giving_up.done_ms));
    redisContext *r = th_redis();
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS baton_rwlock_writers:{%s}", name), 0));
    redisFree(r);
    cr_assert(eq(int, baton_lock_release(baton_rwlock_read(ra)), BATON_OK));
    baton_rwlock_close(ra);
    baton_rwlock_close(rb);
    baton_rwlock_close(rwr);
    baton_client_close(a);
    baton_client_close(b);
    baton_client_close(w);
}

Test(rwlock, a_dead_writers_claim_lapses_within_fair_wait)
{
    const char *name = th_tmpname("rw-claim-lapse");
    redisContext *r = th_redis();
    /* a claim as a writer that died waiting leaves it: 800 ms of server time from now */
    redisReply *tm = th_cmd(r, "TIME");
    long long now = atoll(tm->element[0]->str) * 1000 + atoll(tm->element[1]->str) / 1000;
    freeReplyObject(tm);
    freeReplyObject(th_cmd(r, "ZADD baton_rwlock_writers:{%s} %lld dead:1:write", name, now + 800));
    baton_client *c = th_client(NULL);
    baton_rwlock *rw;
    cr_assert(eq(int, baton_rwlock_open(c, name, &rw), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(baton_rwlock_read(rw), 0, 5000), BATON_ETIMEDOUT));
    int64_t t0 = th_ms();
    cr_assert(eq(int, baton_lock_try_acquire(baton_rwlock_read(rw), 5000, 5000), BATON_OK));
    int64_t took = th_ms() - t0;
    cr_assert(le(i64, took, 1200), "reader in %lld ms", (long long)took);
    cr_assert(eq(int, baton_lock_release(baton_rwlock_read(rw)), BATON_OK));
    redisFree(r);
    baton_rwlock_close(rw);
    baton_client_close(c);
}

/* ------------------------------------------------- a plain lock on the same name --- */

/* The plain lock's hash, as a reader or writer of the same name must leave it: one field,
 * the holder's, with its count, no 'mode', its TTL counting down, the token counter
 * unchanged, no reader timeout key. */
static void assert_plain_untouched(redisContext *r, const char *name, const char *owner,
                                   long long token, int64_t pttl_before)
{
    cr_assert(eq(i64, th_cmd_int(r, "HLEN %s", name), 1), "the plain lock's hash gained fields");
    cr_assert(eq(i64, th_cmd_int(r, "HGET %s %s", name, owner), 1));
    cr_assert(eq(i64, th_cmd_int(r, "HEXISTS %s mode", name), 0));
    int64_t pttl = th_cmd_int(r, "PTTL %s", name);
    cr_assert(gt(i64, pttl, 0));
    cr_assert(le(i64, pttl, pttl_before), "the plain lock's TTL was extended");
    cr_assert(eq(i64, th_cmd_int(r, "GET redisson_lock_token:{%s}", name), token));
    redisReply *k = th_cmd(r, "KEYS {%s}:*", name);
    cr_assert(eq(sz, k->elements, 0), "a reader's timeout key was written");
    freeReplyObject(k);
}

Test(rwlock, a_plain_lock_on_the_name_keeps_readers_and_writers_out)
{
    const char *name = th_tmpname("rw-plain");
    baton_client *p = th_client(NULL), *q = th_client(NULL);
    baton_lock *plain;
    baton_rwlock *rw;
    cr_assert(eq(int, baton_lock_open(p, name, &plain), BATON_OK));
    cr_assert(eq(int, baton_rwlock_open(q, name, &rw), BATON_OK));
    char owner[BATON__OWNER_LEN];
    baton__owner(p, owner, sizeof owner);
    redisContext *r = th_redis();

    cr_assert(eq(int, baton_lock_acquire(plain, 30000), BATON_OK));
    long long token = th_cmd_int(r, "GET redisson_lock_token:{%s}", name);
    int64_t pttl = th_cmd_int(r, "PTTL %s", name);
    /* busy for a reader and a writer alike: what a try answers while a writer holds */
    cr_assert(eq(int, baton_lock_try_acquire(baton_rwlock_read(rw), 0, 5000), BATON_ETIMEDOUT));
    assert_plain_untouched(r, name, owner, token, pttl);
    cr_assert(eq(int, baton_lock_try_acquire(baton_rwlock_write(rw), 0, 5000), BATON_ETIMEDOUT));
    assert_plain_untouched(r, name, owner, token, pttl);
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS baton_rwlock_writers:{%s}", name), 0));
    /* the plain lock's holder still holds, and releases it normally */
    bool mine = false;
    cr_assert(eq(int, baton_lock_is_held_by_current_thread(plain, &mine), BATON_OK));
    cr_assert(mine);
    cr_assert(eq(int, baton_lock_release(plain), BATON_OK));
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s", name), 0));

    /* the other way round (kept): a plain lock sees a read or a write hold as busy */
    cr_assert(eq(int, baton_lock_acquire(baton_rwlock_read(rw), 5000), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(plain, 0, 5000), BATON_ETIMEDOUT));
    cr_assert(eq(int, baton_lock_release(baton_rwlock_read(rw)), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(baton_rwlock_write(rw), 5000), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(plain, 0, 5000), BATON_ETIMEDOUT));
    cr_assert(eq(int, baton_lock_release(baton_rwlock_write(rw)), BATON_OK));
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s", name), 0));
    redisFree(r);
    baton_lock_close(plain);
    baton_rwlock_close(rw);
    baton_client_close(p);
    baton_client_close(q);
}

/* A reader (then a writer) waiting behind a plain lock gets the lock soon after its release:
 * that release publishes on the plain lock's channel, which the waiter does not hear, so it
 * finds out at its recheck (recheck_ms, default 1 s), not at the end of the plain lock's
 * 30 s lease. */
Test(rwlock, a_waiter_behind_a_plain_lock_gets_it_at_its_recheck, .timeout = 60)
{
    const char *name = th_tmpname("rw-plain-wait");
    baton_client *p = th_client(NULL), *q = th_client(NULL);
    baton_lock *plain;
    baton_rwlock *rw;
    cr_assert(eq(int, baton_lock_open(p, name, &plain), BATON_OK));
    cr_assert(eq(int, baton_rwlock_open(q, name, &rw), BATON_OK));
    char owner[BATON__OWNER_LEN];
    baton__owner(p, owner, sizeof owner);
    redisContext *r = th_redis();
    for (int write = 0; write <= 1; write++) {
        cr_assert(eq(int, baton_lock_acquire(plain, 30000), BATON_OK));
        long long token = th_cmd_int(r, "GET redisson_lock_token:{%s}", name);
        int64_t pttl = th_cmd_int(r, "PTTL %s", name);
        waiter w = {write ? baton_rwlock_write(rw) : baton_rwlock_read(rw), 10000, -100, 0};
        pthread_t t;
        pthread_create(&t, NULL, acquire_release_thread, &w);
        th_sleep_ms(1500); /* the waiter tried, and rechecked at least once */
        cr_assert(eq(i64, w.done_ms, 0), "the %s was granted while a plain lock holds",
                  write ? "writer" : "reader");
        assert_plain_untouched(r, name, owner, token, pttl);
        bool mine = false;
        cr_assert(eq(int, baton_lock_is_held_by_current_thread(plain, &mine), BATON_OK));
        cr_assert(mine);
        cr_assert(eq(int, baton_lock_release(plain), BATON_OK));
        int64_t released = th_ms();
        pthread_join(t, NULL);
        cr_assert(eq(int, w.rc, BATON_OK), "the %s waiting: rc %d", write ? "writer" : "reader",
                  w.rc);
        cr_assert(lt(i64, w.done_ms - released, 2500), "the %s got it %lld ms after the release",
                  write ? "writer" : "reader", (long long)(w.done_ms - released));
        cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s", name), 0));
    }
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS baton_rwlock_writers:{%s}", name), 0));
    redisFree(r);
    baton_lock_close(plain);
    baton_rwlock_close(rw);
    baton_client_close(p);
    baton_client_close(q);
}

/* ---------------------------------------------------------------- tokens, queries ---- */

Test(rwlock, tokens_queries_force_release_and_multilock)
{
    const char *name = th_tmpname("rw-misc"), *other = th_tmpname("rw-misc-plain");
    baton_client *c = th_client(NULL);
    baton_rwlock *rw;
    cr_assert(eq(int, baton_rwlock_open(c, name, &rw), BATON_OK));
    baton_lock *rd = baton_rwlock_read(rw), *wr = baton_rwlock_write(rw);
    int64_t t_read = 0, t_write = 0;
    bool locked = true;
    cr_assert(eq(int, baton_lock_is_locked(rd, &locked), BATON_OK));
    cr_assert(not(locked));
    cr_assert(eq(int, baton_lock_fencing_token(rd, &t_read), BATON_ENOTHELD));
    cr_assert(eq(int, baton_lock_acquire(rd, 5000), BATON_OK));
    cr_assert(eq(int, baton_lock_fencing_token(rd, &t_read), BATON_OK));
    cr_assert(eq(int, baton_lock_is_locked(rd, &locked), BATON_OK));
    cr_assert(locked);
    cr_assert(eq(int, baton_lock_is_locked(wr, &locked), BATON_OK));
    cr_assert(not(locked));
    int64_t ttl = 0;
    cr_assert(eq(int, baton_lock_remaining_ttl(rd, &ttl), BATON_OK));
    cr_assert(gt(i64, ttl, 4000));
    cr_assert(eq(int, baton_lock_release(rd), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(wr, BATON_LEASE_WATCHDOG), BATON_OK));
    cr_assert(eq(int, baton_lock_fencing_token(wr, &t_write), BATON_OK));
    cr_assert(gt(i64, t_write, t_read));
    cr_assert(eq(int, baton_lock_is_locked(wr, &locked), BATON_OK));
    cr_assert(locked);

    /* force release of the wrong part does nothing; of the right part frees the lock */
    bool was = true;
    cr_assert(eq(int, baton_lock_force_release(rd, &was), BATON_OK));
    cr_assert(not(was));
    cr_assert(eq(int, baton_lock_force_release(wr, &was), BATON_OK));
    cr_assert(was);
    cr_assert(eq(int, baton_lock_is_locked(wr, &locked), BATON_OK));
    cr_assert(not(locked));

    /* a multi-lock of the write lock and a plain lock */
    baton_lock *plain, *group;
    cr_assert(eq(int, baton_lock_open(c, other, &plain), BATON_OK));
    baton_lock *members[2] = {wr, plain};
    cr_assert(eq(int, baton_multilock_open(members, 2, &group), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(group, 1000, BATON_LEASE_WATCHDOG), BATON_OK));
    baton_client *c2 = th_client(NULL);
    baton_rwlock *rw2;
    cr_assert(eq(int, baton_rwlock_open(c2, name, &rw2), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(baton_rwlock_read(rw2), 0, 5000), BATON_ETIMEDOUT));
    cr_assert(eq(int, baton_lock_release(group), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(baton_rwlock_read(rw2), 0, 5000), BATON_OK));
    cr_assert(eq(int, baton_lock_release(baton_rwlock_read(rw2)), BATON_OK));

    baton_stats s;
    cr_assert(eq(int, baton_client_stats(c, &s), BATON_OK));
    cr_assert(ge(u64, s.kind[BATON_KIND_RWLOCK].acquisitions, 3));
    baton_lock_close(group);
    baton_lock_close(plain);
    baton_rwlock_close(rw2);
    baton_client_close(c2);
    baton_rwlock_close(rw);
    baton_client_close(c);
}

/* ---------------------------------------------------------------- bad input ---------- */

/* ------------------------------------------------------ one read handle, two readers --- */

typedef struct reader {
    baton_lock *read;
    int rc, release_rc;
    atomic_bool holding, go;
} reader;

/* Takes the read lock, says so, holds it until told, releases it. */
static void *hold_read(void *p)
{
    reader *r = p;
    r->rc = baton_lock_acquire(r->read, BATON_LEASE_WATCHDOG);
    atomic_store(&r->holding, r->rc == BATON_OK);
    while (r->rc == BATON_OK && !atomic_load(&r->go))
        th_sleep_ms(5);
    if (r->rc == BATON_OK)
        r->release_rc = baton_lock_release(r->read);
    return NULL;
}

static int read_lost;
static void note_read_lost(baton_lock *l, void *arg)
{
    (void)l;
    (void)arg;
    __atomic_add_fetch(&read_lost, 1, __ATOMIC_SEQ_CST);
}

/* rwlock.h: the handles may be used from any thread, concurrently. Two threads read through
 * one read handle; the second's hold must not end the first's renewal: three leases after
 * the second released, the first still holds (no writer gets in) and no loss is told. */
Test(rwlock, two_readers_of_one_handle_are_each_renewed, .timeout = 30)
{
    baton_client *c = client_with(1000, 0);
    const char *name = th_tmpname("rw-sharedread");
    baton_rwlock *rw;
    cr_assert(eq(int, baton_rwlock_open(c, name, &rw), BATON_OK));
    baton_lock *read = baton_rwlock_read(rw);
    read_lost = 0;
    cr_assert(eq(int, baton_lock_set_lost_handler(read, note_read_lost, NULL), BATON_OK));
    reader r[2] = {{.read = read}, {.read = read}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        cr_assert(eq(int, pthread_create(&t[i], NULL, hold_read, &r[i]), 0));
        for (int k = 0; k < 500 && !atomic_load(&r[i].holding); k++)
            th_sleep_ms(10);
        cr_assert(atomic_load(&r[i].holding), "reader %d: %s", i, baton_client_errmsg(c));
    }
    atomic_store(&r[1].go, true); /* the second reader releases */
    pthread_join(t[1], NULL);
    cr_assert(eq(int, r[1].release_rc, BATON_OK), "%s", baton_client_errmsg(c));

    baton_client *other = client_with(1000, 0);
    baton_rwlock *orw;
    cr_assert(eq(int, baton_rwlock_open(other, name, &orw), BATON_OK));
    int64_t end = th_ms() + 3000; /* three leases: only renewals keep the first's hold */
    while (th_ms() < end) {
        cr_assert(
            eq(int, baton_lock_try_acquire(baton_rwlock_write(orw), 0, 1000), BATON_ETIMEDOUT),
            "a writer got in while the first reader held the read lock");
        th_sleep_ms(100);
    }
    cr_assert(eq(int, __atomic_load_n(&read_lost, __ATOMIC_SEQ_CST), 0),
              "a renewed read hold was reported lost");
    atomic_store(&r[0].go, true);
    pthread_join(t[0], NULL);
    cr_assert(eq(int, r[0].release_rc, BATON_OK), "%s", baton_client_errmsg(c));
    cr_assert(eq(int, baton_lock_try_acquire(baton_rwlock_write(orw), 0, 1000), BATON_OK));
    cr_assert(eq(int, baton_lock_release(baton_rwlock_write(orw)), BATON_OK));
    baton_rwlock_close(orw);
    baton_client_close(other);
    baton_rwlock_close(rw);
    baton_client_close(c);
}

Test(rwlock, bad_input_is_einval)
{
    baton_client *c = th_client(NULL);
    baton_rwlock *rw = (baton_rwlock *)1;
    cr_assert(eq(int, baton_rwlock_open(NULL, "x", &rw), BATON_EINVAL));
    cr_assert(rw == NULL);
    cr_assert(eq(int, baton_rwlock_open(c, NULL, &rw), BATON_EINVAL));
    cr_assert(eq(int, baton_rwlock_open(c, "", &rw), BATON_EINVAL));
    cr_assert(baton_client_errmsg(c)[0] != 0);
    cr_assert(eq(int, baton_rwlock_open(c, "x", NULL), BATON_EINVAL));
    cr_assert(baton_rwlock_read(NULL) == NULL);
    cr_assert(baton_rwlock_write(NULL) == NULL);
    baton_rwlock_close(NULL);
    cr_assert(eq(int, baton_rwlock_open(c, th_tmpname("rw-bad"), &rw), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(baton_rwlock_read(rw), -5, 1000), BATON_EINVAL));
    cr_assert(eq(int, baton_lock_try_acquire(baton_rwlock_write(rw), 0, -3), BATON_EINVAL));
    cr_assert(eq(int, baton_lock_release(baton_rwlock_read(rw)), BATON_ENOTHELD));
    cr_assert(eq(int, baton_lock_release(baton_rwlock_write(rw)), BATON_ENOTHELD));
    baton_rwlock_close(rw);
    baton_client_close(c);
}
