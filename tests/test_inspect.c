/*
 * baton_inspect() against a real redis-server: each object kind as an operator sees it (a
 * held lock with its holder and hold count, a fair lock's queue with deadlines, semaphore
 * permits, a latch's count, listeners on each channel, the fencing token), a missing name,
 * a key of another type, bad input and an unreachable server.
 */
#define _GNU_SOURCE
#include "helper.h"
#include "internal.h"

#include "new_assert.h"
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

TestSuite(inspect, .timeout = 60);

/* ---------------------------------------------------------------- helpers ------------ */

static baton_inspection *inspect(baton_client *c, const char *name)
{
    baton_inspection *ins = NULL;
    int rc = baton_inspect(c, name, &ins);
    cr_assert(eq(int, rc, BATON_OK), "inspect %s: %s", name, baton_client_errmsg(c));
    cr_assert(ne(ptr, ins, NULL));
    cr_assert(eq(sz, ins->size, sizeof *ins));
    cr_assert(eq(str, ins->name, (char *)name));
    return ins;
}

/* The wall clock in ms: the server runs on this machine. */
static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Polls (at most 5 s) until fn's count reaches want; returns the last count. */
static long long await_count(long long (*fn)(redisContext *, const char *), redisContext *r,
                             const char *name, long long want)
{
    long long n = -1;
    for (int i = 0; i < 500 && (n = fn(r, name)) != want; i++)
        th_sleep_ms(10);
    return n;
}

static long long lock_subs(redisContext *r, const char *name)
{
    return th_numsub(r, "redisson_lock__channel:{%s}", name);
}

static long long sem_subs(redisContext *r, const char *name)
{
    return th_numsub(r, "redisson_sc:{%s}", name);
}

static long long latch_subs(redisContext *r, const char *name)
{
    return th_numsub(r, "redisson_countdownlatch__channel__{%s}", name);
}

static long long queue_len(redisContext *r, const char *name)
{
    return th_cmd_int(r, "LLEN redisson_lock_queue:{%s}", name);
}

/* A thread that waits (at most wait_ms) for a lock, permits or a latch. */
typedef struct waiter_arg {
    baton_lock *lock;
    baton_semaphore *sem;
    baton_latch *latch;
    int64_t wait_ms;
    int64_t permits; /* a semaphore's waiter: what it wants (0: 4) */
    int rc;
} waiter_arg;

static void *waiter(void *p)
{
    waiter_arg *a = p;
    if (a->lock)
        a->rc = baton_lock_try_acquire(a->lock, a->wait_ms, BATON_LEASE_WATCHDOG);
    else if (a->sem)
        a->rc = baton_semaphore_try_acquire(a->sem, a->permits ? a->permits : 4, a->wait_ms);
    else
        a->rc = baton_latch_await(a->latch, a->wait_ms);
    if (a->lock && a->rc == BATON_OK)
        baton_lock_release(a->lock);
    return NULL;
}

/* ---------------------------------------------------------------- absent ------------- */

Test(inspect, a_missing_name_is_absent)
{
    baton_client *c = th_client(NULL);
    const char *name = th_tmpname("ins-absent");
    int64_t before = wall_ms();
    baton_inspection *ins = inspect(c, name);
    cr_assert(eq(int, ins->kind, BATON_OBJECT_ABSENT));
    cr_assert(eq(str, (char *)ins->kind_name, "absent"));
    cr_assert(eq(str, ins->redis_type, "none"));
    cr_assert(eq(i64, ins->ttl_ms, -2));
    cr_assert(eq(sz, ins->n_holders, 0));
    cr_assert(eq(sz, ins->n_queue, 0));
    cr_assert(not(ins->has_value));
    cr_assert(not(ins->has_token));
    cr_assert(
        eq(i64, ins->subscribers_lock + ins->subscribers_semaphore + ins->subscribers_latch, 0));
    /* the server's clock, taken during the call (same machine, 1 s of slack each side) */
    cr_assert(ge(i64, ins->server_time_ms, before - 1000));
    cr_assert(le(i64, ins->server_time_ms, wall_ms() + 1000));
    baton_inspection_free(ins);
    baton_client_close(c);
}

/* ---------------------------------------------------------------- locks -------------- */

Test(inspect, a_held_lock_shows_its_holder_count_ttl_token_and_waiters)
{
    baton_client *c = th_client(NULL);
    redisContext *r = th_redis();
    char name[128];
    snprintf(name, sizeof name, "%s", th_tmpname("ins-lock"));
    baton_lock *l, *other;
    cr_assert(eq(int, baton_lock_open(c, name, &l), BATON_OK));
    cr_assert(eq(int, baton_lock_open(c, name, &other), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(l, 0, 20000), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(l, 0, 20000), BATON_OK));
    int64_t token = 0;
    cr_assert(eq(int, baton_lock_fencing_token(l, &token), BATON_OK));
    char owner[BATON__OWNER_LEN];
    baton__owner(c, owner, sizeof owner);

    waiter_arg w = {.lock = other, .wait_ms = 20000};
    pthread_t t;
    cr_assert(eq(int, pthread_create(&t, NULL, waiter, &w), 0));
    cr_assert(eq(i64, await_count(lock_subs, r, name, 1), 1), "the waiter never subscribed");

    baton_inspection *ins = inspect(c, name);
    cr_assert(eq(int, ins->kind, BATON_OBJECT_LOCK));
    cr_assert(eq(str, (char *)ins->kind_name, "lock"));
    cr_assert(eq(str, ins->redis_type, "hash"));
    cr_assert(gt(i64, ins->ttl_ms, 15000));
    cr_assert(le(i64, ins->ttl_ms, 20000));
    cr_assert(eq(sz, ins->n_holders, 1));
    cr_assert(eq(sz, ins->holders[0]->size, sizeof(baton_inspect_holder)));
    cr_assert(eq(str, (char *)ins->holders[0]->owner, owner));
    cr_assert(eq(i64, ins->holders[0]->holds, 2));
    cr_assert(ins->has_token);
    cr_assert(eq(i64, ins->token, token));
    cr_assert(eq(i64, ins->subscribers_lock, 1));
    cr_assert(eq(sz, ins->n_queue, 0));
    baton_inspection_free(ins);

    /* released: the name is free, the token counter stays */
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    pthread_join(t, NULL);
    cr_assert(eq(int, w.rc, BATON_OK));
    ins = inspect(c, name);
    cr_assert(eq(int, ins->kind, BATON_OBJECT_ABSENT));
    cr_assert(eq(sz, ins->n_holders, 0));
    cr_assert(ins->has_token);
    cr_assert(eq(i64, ins->token, token + 1), "the waiter's hold took the next token");
    baton_inspection_free(ins);
    baton_lock_close(other);
    baton_lock_close(l);
    redisFree(r);
    baton_client_close(c);
}

Test(inspect, a_name_with_its_own_hash_tag_finds_its_token)
{
    baton_client *c = th_client(NULL);
    char name[160];
    snprintf(name, sizeof name, "{%s}:job", th_tmpname("ins-tag"));
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(c, name, &l), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(l, 0, BATON_LEASE_WATCHDOG), BATON_OK));
    int64_t token = 0;
    cr_assert(eq(int, baton_lock_fencing_token(l, &token), BATON_OK));
    baton_inspection *ins = inspect(c, name);
    cr_assert(eq(int, ins->kind, BATON_OBJECT_LOCK));
    cr_assert(ins->has_token);
    cr_assert(eq(i64, ins->token, token));
    baton_inspection_free(ins);
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    baton_lock_close(l);
    baton_client_close(c);
}

/* The client's record baton_client:{<client id>} = "host:pid" (src/core/record.c). */
static long long record_ttl(redisContext *r, baton_client *c)
{
    return th_cmd_int(r, "PTTL baton_client:{%s}", baton_client_id(c));
}

static void assert_this_process(const char *host_seen, int64_t pid)
{
    char host[256] = "";
    cr_assert(eq(int, gethostname(host, sizeof host - 1), 0));
    cr_assert(ne(ptr, (void *)host_seen, NULL));
    cr_assert(eq(str, (char *)host_seen, host));
    cr_assert(eq(i64, pid, (int64_t)getpid()));
}

Test(inspect, a_fair_lock_shows_its_queue_with_deadlines)
{
    baton_options o;
    baton_options_init(&o);
    o.fair_wait_ms = 4000;
    baton_client *c = th_client(&o);
    redisContext *r = th_redis();
    const char *name = th_tmpname("ins-fair");
    baton_client *c2 = th_client(&o); /* the waiter's client holds nothing */
    baton_lock *l, *other;
    cr_assert(eq(int, baton_fairlock_open(c, name, &l), BATON_OK));
    cr_assert(eq(int, baton_fairlock_open(c2, name, &other), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(l, 0, BATON_LEASE_WATCHDOG), BATON_OK));
    waiter_arg w = {.lock = other, .wait_ms = 20000};
    pthread_t t;
    cr_assert(eq(int, pthread_create(&t, NULL, waiter, &w), 0));
    cr_assert(eq(i64, await_count(queue_len, r, name, 1), 1), "the waiter never queued");

    baton_inspection *ins = inspect(c, name);
    cr_assert(eq(int, ins->kind, BATON_OBJECT_FAIRLOCK));
    cr_assert(eq(str, (char *)ins->kind_name, "fairlock"));
    cr_assert(eq(sz, ins->n_holders, 1));
    cr_assert(eq(i64, ins->holders[0]->holds, 1));
    cr_assert(eq(sz, ins->n_queue, 1));
    const baton_inspect_waiter *q = ins->queue[0];
    cr_assert(eq(sz, q->size, sizeof *q));
    cr_assert(ne(str, (char *)q->owner, (char *)ins->holders[0]->owner));
    cr_assert(q->has_deadline);
    /* server time + fair_wait_ms, renewed by the waiting client */
    cr_assert(gt(i64, q->deadline_ms, ins->server_time_ms));
    cr_assert(le(i64, q->deadline_ms, ins->server_time_ms + 4000));
    assert_this_process(q->host, q->pid); /* the waiter's client wrote its record */
    baton_inspection_free(ins);

    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    pthread_join(t, NULL);
    cr_assert(eq(int, w.rc, BATON_OK));
    ins = inspect(c, name);
    cr_assert(eq(sz, ins->n_queue, 0));
    cr_assert(eq(sz, ins->n_holders, 0));
    baton_inspection_free(ins);
    baton_lock_close(other);
    baton_lock_close(l);
    redisFree(r);
    baton_client_close(c2);
    baton_client_close(c);
}

static long long line_len(redisContext *r, const char *name)
{
    return th_cmd_int(r, "ZCARD baton_lock_line:{%s}", name);
}

static long long semaphore_line_len(redisContext *r, const char *name)
{
    return th_cmd_int(r, "ZCARD baton_semaphore_line:{%s}", name);
}

/* A semaphore's starved waiters are listed in their line's order, each with the permits it
 * wants and its process; a first that wants more than is free holds up the line, so
 * nothing is reserved; once served, the line is gone. */
Test(inspect, a_semaphore_shows_its_line_of_starved_waiters, .timeout = 30)
{
    baton_client *c = th_client(NULL);
    redisContext *r = th_redis();
    const char *name = th_tmpname("ins-semline");
    baton_client *cw[2] = {th_client(NULL), th_client(NULL)};
    baton_semaphore *s, *other[2];
    bool set = false;
    cr_assert(eq(int, baton_semaphore_open(c, name, &s), BATON_OK));
    cr_assert(eq(int, baton_semaphore_try_set_permits(s, 1, &set), BATON_OK));
    cr_assert(set);
    waiter_arg w[2];
    pthread_t t[2];
    const int64_t wants[2] = {3, 2};
    for (int i = 0; i < 2; i++) {
        cr_assert(eq(int, baton_semaphore_open(cw[i], name, &other[i]), BATON_OK));
        w[i] = (waiter_arg){.sem = other[i], .wait_ms = 20000, .permits = wants[i]};
        cr_assert(eq(int, pthread_create(&t[i], NULL, waiter, &w[i]), 0));
        cr_assert(eq(i64, await_count(semaphore_line_len, r, name, i + 1), i + 1),
                  "waiter %d never queued", i);
    }
    baton_inspection *ins = inspect(c, name);
    cr_assert(eq(int, ins->kind, BATON_OBJECT_SEMAPHORE), "%s", ins->kind_name);
    cr_assert(eq(i64, ins->value, 1));
    cr_assert(eq(sz, ins->n_line, 0));
    cr_assert(eq(sz, ins->n_semaphore_line, 2));
    for (int i = 0; i < 2; i++) {
        const baton_inspect_waiter *q = ins->semaphore_line[i];
        cr_assert(
            eq(int, strncmp(q->owner, baton_client_id(cw[i]), strlen(baton_client_id(cw[i]))), 0),
            "place %d is %s", i, q->owner);
        cr_assert(eq(i64, q->permits, wants[i]), "place %d", i);
        cr_assert(not(q->has_deadline));
        assert_this_process(q->host, q->pid);
    }
    cr_assert(ins->reserved == NULL, "reserved for %s", ins->reserved->owner);
    baton_inspection_free(ins);
    /* 3 free: the first is served; then 2 more for the second */
    cr_assert(eq(int, baton_semaphore_add_permits(s, 2), BATON_OK));
    pthread_join(t[0], NULL);
    cr_assert(eq(int, w[0].rc, BATON_OK));
    cr_assert(eq(int, baton_semaphore_add_permits(s, 2), BATON_OK));
    pthread_join(t[1], NULL);
    cr_assert(eq(int, w[1].rc, BATON_OK));
    ins = inspect(c, name);
    cr_assert(eq(sz, ins->n_semaphore_line, 0));
    cr_assert(eq(i64, ins->value, 0));
    cr_assert(ins->reserved == NULL);
    baton_inspection_free(ins);
    for (int i = 0; i < 2; i++) {
        baton_semaphore_close(other[i]);
        baton_client_close(cw[i]);
    }
    baton_semaphore_close(s);
    redisFree(r);
    baton_client_close(c);
}

/* A reservation (the lock's, the semaphore's) shows whom it is kept for, what, and for how
 * long; a line member that does not say what it wants is shown whole. A free lock with a
 * reservation is a lock, a string with a semaphore's line a semaphore (not a latch). */
Test(inspect, a_reservation_shows_whom_it_is_kept_for, .timeout = 30)
{
    baton_client *c = th_client(NULL);
    redisContext *r = th_redis();
    const char *lock = th_tmpname("ins-next");
    freeReplyObject(th_cmd(r, "SET baton_lock_next:{%s} first:1 PX 5000", lock));
    baton_inspection *ins = inspect(c, lock);
    cr_assert(eq(int, ins->kind, BATON_OBJECT_LOCK), "%s", ins->kind_name);
    cr_assert(ins->reserved != NULL);
    cr_assert(eq(str, (char *)ins->reserved->owner, "first:1"));
    cr_assert(eq(i64, ins->reserved->permits, 0));
    cr_assert(ins->reserved->has_deadline);
    cr_assert(gt(i64, ins->reserved->deadline_ms, ins->server_time_ms));
    cr_assert(le(i64, ins->reserved->deadline_ms, ins->server_time_ms + 5000));
    baton_inspection_free(ins);

    const char *sem = th_tmpname("ins-semnext");
    freeReplyObject(th_cmd(r, "SET %s 2", sem));
    freeReplyObject(th_cmd(r, "SET baton_semaphore_next:{%s} 2:first:1 PX 5000", sem));
    freeReplyObject(th_cmd(r, "ZADD baton_semaphore_line:{%s} 1 1:second:1 2 bogus", sem));
    ins = inspect(c, sem);
    cr_assert(eq(int, ins->kind, BATON_OBJECT_SEMAPHORE), "%s", ins->kind_name);
    cr_assert(ins->reserved != NULL);
    cr_assert(eq(str, (char *)ins->reserved->owner, "first:1"));
    cr_assert(eq(i64, ins->reserved->permits, 2));
    cr_assert(le(i64, ins->reserved->deadline_ms, ins->server_time_ms + 5000));
    cr_assert(eq(sz, ins->n_semaphore_line, 2));
    cr_assert(eq(str, (char *)ins->semaphore_line[0]->owner, "second:1"));
    cr_assert(eq(i64, ins->semaphore_line[0]->permits, 1));
    cr_assert(eq(str, (char *)ins->semaphore_line[1]->owner, "bogus"));
    cr_assert(eq(i64, ins->semaphore_line[1]->permits, -1));
    baton_inspection_free(ins);
    freeReplyObject(
        th_cmd(r, "DEL %s baton_semaphore_next:{%s} baton_semaphore_line:{%s}", sem, sem, sem));
    redisFree(r);
    baton_client_close(c);
}

/* A plain lock's starved waiters are listed in their line's order, with their processes,
 * and the lock is still a plain lock (not taken for a fair one). */
Test(inspect, a_plain_lock_shows_its_line_of_starved_waiters)
{
    baton_client *c = th_client(NULL);
    redisContext *r = th_redis();
    const char *name = th_tmpname("ins-line");
    baton_client *cw[2] = {th_client(NULL), th_client(NULL)};
    baton_lock *l, *other[2];
    cr_assert(eq(int, baton_lock_open(c, name, &l), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(l, 0, BATON_LEASE_WATCHDOG), BATON_OK));
    waiter_arg w[2];
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        cr_assert(eq(int, baton_lock_open(cw[i], name, &other[i]), BATON_OK));
        w[i] = (waiter_arg){.lock = other[i], .wait_ms = 20000};
        cr_assert(eq(int, pthread_create(&t[i], NULL, waiter, &w[i]), 0));
        cr_assert(eq(i64, await_count(line_len, r, name, i + 1), i + 1), "waiter %d never queued",
                  i);
    }
    baton_inspection *ins = inspect(c, name);
    cr_assert(eq(int, ins->kind, BATON_OBJECT_LOCK));
    cr_assert(eq(sz, ins->n_queue, 0));
    cr_assert(eq(sz, ins->n_line, 2));
    for (int i = 0; i < 2; i++) {
        const baton_inspect_waiter *q = ins->line[i];
        cr_assert(
            eq(int, strncmp(q->owner, baton_client_id(cw[i]), strlen(baton_client_id(cw[i]))), 0),
            "place %d is %s", i, q->owner);
        cr_assert(not(q->has_deadline));
        assert_this_process(q->host, q->pid);
    }
    baton_inspection_free(ins);
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        cr_assert(eq(int, w[i].rc, BATON_OK));
    }
    ins = inspect(c, name);
    cr_assert(eq(sz, ins->n_line, 0));
    baton_inspection_free(ins);
    for (int i = 0; i < 2; i++) {
        baton_lock_close(other[i]);
        baton_client_close(cw[i]);
    }
    baton_lock_close(l);
    redisFree(r);
    baton_client_close(c);
}

/* ---------------------------------------------------------------- origins ------------ */

Test(inspect, a_holders_host_and_pid_come_from_its_clients_record)
{
    baton_client *c = th_client(NULL);
    redisContext *r = th_redis();
    const char *name = th_tmpname("ins-origin");
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(c, name, &l), BATON_OK));
    cr_assert(eq(i64, record_ttl(r, c), -2), "nothing held yet: no record");
    cr_assert(eq(int, baton_lock_try_acquire(l, 0, 40000), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(l, 0, 40000), BATON_OK));
    baton_inspection *ins = inspect(c, name);
    cr_assert(eq(sz, ins->n_holders, 1));
    assert_this_process(ins->holders[0]->host, ins->holders[0]->pid);
    baton_inspection_free(ins);
    /* one record per client, outliving the hold; nothing written beside the lock */
    long long ttl = record_ttl(r, c);
    cr_assert(ge(i64, ttl, 40000), "the record outlives the hold's lease (%lld)", ttl);
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS baton_lock_meta:{%s}", name), 0));
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));

    /* a read-write lock's readers and writer show theirs too */
    const char *rwname = th_tmpname("ins-origin-rw");
    baton_rwlock *rw;
    cr_assert(eq(int, baton_rwlock_open(c, rwname, &rw), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(baton_rwlock_read(rw), 0, 20000), BATON_OK));
    ins = inspect(c, rwname);
    cr_assert(eq(sz, ins->n_holders, 1));
    assert_this_process(ins->holders[0]->host, ins->holders[0]->pid);
    baton_inspection_free(ins);
    cr_assert(eq(int, baton_lock_release(baton_rwlock_read(rw)), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(baton_rwlock_write(rw), 0, 20000), BATON_OK));
    ins = inspect(c, rwname);
    cr_assert(eq(sz, ins->n_holders, 1));
    assert_this_process(ins->holders[0]->host, ins->holders[0]->pid);
    baton_inspection_free(ins);
    cr_assert(eq(int, baton_lock_release(baton_rwlock_write(rw)), BATON_OK));
    baton_rwlock_close(rw);

    /* the record is written again when the server lost it (here: deleted) and the
     * client's next hold needs it */
    freeReplyObject(th_cmd(r, "DEL baton_client:{%s}", baton_client_id(c)));
    cr_assert(eq(int, baton_lock_try_acquire(l, 0, 200000), BATON_OK));
    cr_assert(ge(i64, record_ttl(r, c), 200000), "a longer lease than the record's life");
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    baton_lock_close(l);
    redisFree(r);
    baton_client_close(c);
}

Test(inspect, the_watchdog_keeps_the_clients_record_alive)
{
    baton_options o;
    baton_options_init(&o);
    o.watchdog_ms = 900; /* renewed every 300 ms; the record lives 3 leases: 2.7 s */
    baton_client *c = th_client(&o);
    redisContext *r = th_redis();
    const char *name = th_tmpname("ins-origin-renew");
    baton_lock *l;
    cr_assert(eq(int, baton_fairlock_open(c, name, &l), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(l, 0, BATON_LEASE_WATCHDOG), BATON_OK));
    long long first = record_ttl(r, c);
    cr_assert(gt(i64, first, 1800));
    cr_assert(le(i64, first, 2700));
    th_sleep_ms(4000); /* well past the record's first life */
    cr_assert(gt(i64, record_ttl(r, c), 0), "kept with the hold");
    baton_inspection *ins = inspect(c, name);
    cr_assert(eq(int, ins->kind, BATON_OBJECT_LOCK), "no queue: seen as a plain lock");
    assert_this_process(ins->holders[0]->host, ins->holders[0]->pid);
    baton_inspection_free(ins);
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    baton_lock_close(l);
    redisFree(r);
    baton_client_close(c);
}

Test(inspect, a_redisson_holder_has_no_host_or_pid)
{
    baton_client *c = th_client(NULL);
    redisContext *r = th_redis();
    const char *name = th_tmpname("ins-redisson");
    freeReplyObject(th_cmd(r, "HSET %s 6f0c3b1e-0000-4000-8000-000000000001:42 1", name));
    freeReplyObject(th_cmd(r, "PEXPIRE %s 30000", name));
    /* a malformed entry in the side hash older versions wrote is no origin either, nor a
     * malformed client record */
    freeReplyObject(th_cmd(r, "HSET baton_lock_meta:{%s} x:1 nopid", name));
    freeReplyObject(th_cmd(r, "SET baton_client:{6f0c3b1e-0000-4000-8000-000000000001} nopid"));
    baton_inspection *ins = inspect(c, name);
    cr_assert(eq(sz, ins->n_holders, 1));
    cr_assert(eq(i64, ins->holders[0]->holds, 1));
    cr_assert(eq(ptr, (void *)ins->holders[0]->host, NULL));
    cr_assert(eq(i64, ins->holders[0]->pid, 0));
    baton_inspection_free(ins);
    redisFree(r);
    baton_client_close(c);
}

/* ---------------------------------------------------------------- counts ------------- */

Test(inspect, semaphore_permits_and_who_waits_for_them)
{
    baton_client *c = th_client(NULL);
    redisContext *r = th_redis();
    const char *name = th_tmpname("ins-sem");
    baton_semaphore *s;
    cr_assert(eq(int, baton_semaphore_open(c, name, &s), BATON_OK));
    bool set = false;
    cr_assert(eq(int, baton_semaphore_try_set_permits(s, 3, &set), BATON_OK));

    /* nobody waits: a count above zero could be a latch's */
    baton_inspection *ins = inspect(c, name);
    cr_assert(eq(int, ins->kind, BATON_OBJECT_SEMAPHORE_OR_LATCH));
    cr_assert(eq(str, (char *)ins->kind_name, "semaphore-or-latch"));
    cr_assert(eq(str, ins->redis_type, "string"));
    cr_assert(ins->has_value);
    cr_assert(eq(i64, ins->value, 3));
    baton_inspection_free(ins);

    /* a waiter for 4 permits makes it certain */
    waiter_arg w = {.sem = s, .wait_ms = 20000};
    pthread_t t;
    cr_assert(eq(int, pthread_create(&t, NULL, waiter, &w), 0));
    cr_assert(eq(i64, await_count(sem_subs, r, name, 1), 1), "the waiter never subscribed");
    ins = inspect(c, name);
    cr_assert(eq(int, ins->kind, BATON_OBJECT_SEMAPHORE));
    cr_assert(eq(i64, ins->subscribers_semaphore, 1));
    cr_assert(eq(i64, ins->subscribers_latch, 0));
    baton_inspection_free(ins);
    cr_assert(eq(int, baton_semaphore_release(s, 1), BATON_OK));
    pthread_join(t, NULL);
    cr_assert(eq(int, w.rc, BATON_OK));

    /* all taken: 0 permits is a semaphore (a latch at 0 has no key) */
    ins = inspect(c, name);
    cr_assert(eq(int, ins->kind, BATON_OBJECT_SEMAPHORE));
    cr_assert(eq(i64, ins->value, 0));
    baton_inspection_free(ins);
    baton_semaphore_close(s);
    redisFree(r);
    baton_client_close(c);
}

Test(inspect, permit_leases_show_their_ids_and_lease_ends)
{
    baton_client *c = th_client(NULL);
    const char *name = th_tmpname("ins-permits");
    baton_permits *p;
    cr_assert(eq(int, baton_permits_open(c, name, &p), BATON_OK));
    bool set = false;
    cr_assert(eq(int, baton_permits_try_set_permits(p, 3, &set), BATON_OK));
    char a[BATON_PERMIT_ID_SIZE], b[BATON_PERMIT_ID_SIZE];
    cr_assert(eq(int, baton_permits_try_acquire(p, 0, 60000, a), BATON_OK));
    cr_assert(eq(int, baton_permits_try_acquire(p, 0, 20000, b), BATON_OK));
    int64_t now = wall_ms();

    baton_inspection *ins = inspect(c, name);
    cr_assert(eq(i64, ins->value, 1), "one permit left");
    cr_assert(eq(sz, ins->n_permits, 2));
    /* soonest end first: b (20 s), then a (60 s) */
    cr_assert(eq(str, ins->permits[0]->id, b));
    cr_assert(eq(str, ins->permits[1]->id, a));
    cr_assert(eq(sz, ins->permits[0]->size, sizeof(baton_inspect_permit)));
    int64_t left = ins->permits[1]->lease_end_ms - now;
    cr_assert(ge(i64, left, 59000), "%lld ms", (long long)left);
    cr_assert(le(i64, left, 61000), "%lld ms", (long long)left);
    baton_inspection_free(ins);

    cr_assert(eq(int, baton_permits_release(p, b), BATON_OK));
    ins = inspect(c, name);
    cr_assert(eq(sz, ins->n_permits, 1));
    cr_assert(eq(str, ins->permits[0]->id, a));
    baton_inspection_free(ins);
    cr_assert(eq(int, baton_permits_release(p, a), BATON_OK));
    ins = inspect(c, name);
    cr_assert(eq(sz, ins->n_permits, 0));
    cr_assert(eq(i64, ins->value, 3));
    baton_inspection_free(ins);
    baton_permits_close(p);
    baton_client_close(c);
}

Test(inspect, a_latch_count_and_its_waiters)
{
    baton_client *c = th_client(NULL);
    redisContext *r = th_redis();
    const char *name = th_tmpname("ins-latch");
    baton_latch *l;
    cr_assert(eq(int, baton_latch_open(c, name, &l), BATON_OK));
    bool set = false;
    cr_assert(eq(int, baton_latch_try_set_count(l, 2, &set), BATON_OK));
    waiter_arg w = {.latch = l, .wait_ms = 20000};
    pthread_t t;
    cr_assert(eq(int, pthread_create(&t, NULL, waiter, &w), 0));
    cr_assert(eq(i64, await_count(latch_subs, r, name, 1), 1), "the waiter never subscribed");

    baton_inspection *ins = inspect(c, name);
    cr_assert(eq(int, ins->kind, BATON_OBJECT_LATCH));
    cr_assert(eq(str, (char *)ins->kind_name, "latch"));
    cr_assert(eq(i64, ins->value, 2));
    cr_assert(eq(i64, ins->subscribers_latch, 1));
    cr_assert(eq(i64, ins->subscribers_semaphore, 0));
    baton_inspection_free(ins);

    cr_assert(eq(int, baton_latch_count_down(l), BATON_OK));
    cr_assert(eq(int, baton_latch_count_down(l), BATON_OK));
    pthread_join(t, NULL);
    cr_assert(eq(int, w.rc, BATON_OK));
    ins = inspect(c, name);
    cr_assert(eq(int, ins->kind, BATON_OBJECT_ABSENT), "an open latch has no key");
    baton_inspection_free(ins);
    baton_latch_close(l);
    redisFree(r);
    baton_client_close(c);
}

/* ---------------------------------------------------------------- others ------------- */

Test(inspect, keys_of_other_types_are_not_baton_objects)
{
    baton_client *c = th_client(NULL);
    redisContext *r = th_redis();
    const char *list = th_tmpname("ins-list");
    const char *text = th_tmpname("ins-text");
    freeReplyObject(th_cmd(r, "RPUSH %s a b", list));
    freeReplyObject(th_cmd(r, "SET %s hello PX 30000", text));
    /* an auxiliary key of the wrong type reads as absent, not as a failure */
    freeReplyObject(th_cmd(r, "SET redisson_lock_queue:{%s} x", list));

    baton_inspection *ins = inspect(c, list);
    cr_assert(eq(int, ins->kind, BATON_OBJECT_OTHER));
    cr_assert(eq(str, (char *)ins->kind_name, "other"));
    cr_assert(eq(str, ins->redis_type, "list"));
    cr_assert(eq(i64, ins->ttl_ms, -1));
    cr_assert(eq(sz, ins->n_queue, 0));
    baton_inspection_free(ins);

    ins = inspect(c, text);
    cr_assert(eq(int, ins->kind, BATON_OBJECT_OTHER), "a string that is not a count");
    cr_assert(not(ins->has_value));
    cr_assert(gt(i64, ins->ttl_ms, 25000));
    baton_inspection_free(ins);
    redisFree(r);
    baton_client_close(c);
}

Test(inspect, bad_input_is_refused)
{
    baton_client *c = th_client(NULL);
    baton_inspection *ins = (baton_inspection *)&ins; /* not NULL: must be cleared */
    cr_assert(eq(int, baton_inspect(NULL, "x", &ins), BATON_EINVAL));
    cr_assert(eq(ptr, ins, NULL));
    cr_assert(eq(int, baton_inspect(c, "x", NULL), BATON_EINVAL));
    ins = (baton_inspection *)&ins;
    cr_assert(eq(int, baton_inspect(c, NULL, &ins), BATON_EINVAL));
    cr_assert(eq(ptr, ins, NULL));
    cr_assert(eq(int, baton_inspect(c, "", &ins), BATON_EINVAL));
    cr_assert(ne(str, (char *)baton_client_errmsg(c), ""));
    char *big = malloc(BATON_MAX_NAME_LEN + 2);
    memset(big, 'n', BATON_MAX_NAME_LEN + 1);
    big[BATON_MAX_NAME_LEN + 1] = '\0';
    cr_assert(eq(int, baton_inspect(c, big, &ins), BATON_EINVAL));
    big[BATON_MAX_NAME_LEN] = '\0';
    cr_assert(eq(int, baton_inspect(c, big, &ins), BATON_OK), "the longest name is fine");
    cr_assert(eq(int, ins->kind, BATON_OBJECT_ABSENT));
    baton_inspection_free(ins);
    baton_inspection_free(NULL);
    free(big);
    baton_client_close(c);
}

Test(inspect, an_unreachable_server_is_a_connection_error)
{
    th_server s;
    th_server_start(&s, NULL);
    baton_client *c = th_client_on(s.port, 1000);
    baton_inspection *ins = NULL;
    cr_assert(eq(int, baton_inspect(c, "x", &ins), BATON_OK));
    baton_inspection_free(ins);
    th_server_stop(&s);
    ins = (baton_inspection *)&ins;
    cr_assert(eq(int, baton_inspect(c, "x", &ins), BATON_ECONN));
    cr_assert(eq(ptr, ins, NULL));
    baton_client_close(c);
}

/* ---------------------------------------------------------------- keys to objects ---- */

/* One row per prefix (or suffix) of src/core/keys.h: a key under it, its role and NAME. */
static const struct {
    const char *key;
    int role;
    const char *name;
} key_rows[] = {
    {"redisson_lock_queue:{q1}", BATON_KEY_NAMES, "q1"},
    {"redisson_lock__channel:{a}", BATON_KEY_SIDE, "a"},
    {"redisson_lock_timeout:{a}", BATON_KEY_SIDE, "a"},
    {"redisson_lock_token:{a}", BATON_KEY_SIDE, "a"},
    {"redisson_unlock_latch:{a}:0123abcd", BATON_KEY_SIDE, "a"},
    {"redisson_rwlock:{a}", BATON_KEY_SIDE, "a"},
    {"redisson_countdownlatch__channel__{a}", BATON_KEY_SIDE, "a"},
    {"redisson_sc:{a}", BATON_KEY_SIDE, "a"},
    {"{a}:timeout", BATON_KEY_SIDE, "a"},
    {"baton_request:{a}:c1:7", BATON_KEY_SIDE, "a"},
    {"baton_lock_meta:{a}", BATON_KEY_SIDE, "a"},
    {"baton_lock_next:{a}", BATON_KEY_SIDE, "a"},
    {"baton_lock_line:{a}", BATON_KEY_SIDE, "a"},
    {"baton_semaphore_next:{a}", BATON_KEY_SIDE, "a"},
    {"baton_semaphore_line:{a}", BATON_KEY_SIDE, "a"},
    {"baton_client:{0f0f}", BATON_KEY_SIDE, ""},
    {"baton_election:{e}", BATON_KEY_SIDE, "e"},
    {"baton_election_log:{e}", BATON_KEY_SIDE, "e"},
    {"baton_election__channel:{e}", BATON_KEY_SIDE, "e"},
    {"baton_barrier:{b}", BATON_KEY_SIDE, "b"},
    {"baton_barrier_parties:{b}", BATON_KEY_SIDE, "b"},
    {"baton_barrier__channel:{b}", BATON_KEY_SIDE, "b"},
    {"baton_rwlock_writers:{a}", BATON_KEY_SIDE, "a"},
    /* no prefix: a reader's timeout, an object's own key, names holding '{' or '}' */
    {"{a}:7f3a:1:rwlock_timeout:1", BATON_KEY_SIDE, "a"},
    {"jobs", BATON_KEY_OBJECT, "jobs"},
    {"{jobs}", BATON_KEY_OBJECT, "{jobs}"},
    {"redisson_lock_queue:x{y", BATON_KEY_NAMES, "x{y"},
    {"redisson_lock_queue:{a}b}", BATON_KEY_NAMES, "a}b"},
    {"x{y:timeout", BATON_KEY_SIDE, "x{y"},
};

Test(inspect, key_object_maps_every_prefix_to_its_object)
{
    for (size_t i = 0; i < sizeof key_rows / sizeof key_rows[0]; i++) {
        char name[BATON_MAX_NAME_LEN + 1] = "junk";
        int role = baton_key_object(key_rows[i].key, name, sizeof name);
        cr_assert(eq(int, role, key_rows[i].role), "%s", key_rows[i].key);
        cr_assert(eq(str, name, (char *)key_rows[i].name), "%s", key_rows[i].key);
    }
    /* every prefix and suffix keys.h spells has its row (the write suffix names a hash
     * field, not a key) */
    char path[1024];
    snprintf(path, sizeof path, "%s/src/core/keys.h", BATON_SOURCE_DIR);
    FILE *f = fopen(path, "r");
    cr_assert(ne(ptr, f, NULL), "%s", path);
    char line[512];
    int defines = 0;
    while (fgets(line, sizeof line, f)) {
        char macro[128], value[128];
        if (sscanf(line, "#define %127s \"%127[^\"]\"", macro, value) != 2)
            continue;
        defines++;
        if (strcmp(macro, "BATON__KEY_WRITE_SUFFIX") == 0)
            continue;
        bool found = false;
        for (size_t i = 0; i < sizeof key_rows / sizeof key_rows[0] && !found; i++)
            found = strstr(key_rows[i].key, value) != NULL;
        cr_assert(found, "no row for %s (\"%s\")", macro, value);
    }
    fclose(f);
    cr_assert(ge(int, defines, 20), "read the prefixes of %s", path);
}

Test(inspect, key_object_refuses_bad_arguments_and_short_buffers)
{
    char name[8] = "junk";
    cr_assert(eq(int, baton_key_object(NULL, name, sizeof name), BATON_EINVAL));
    cr_assert(eq(int, baton_key_object("a", NULL, 8), BATON_EINVAL));
    cr_assert(eq(int, baton_key_object("a", name, 0), BATON_EINVAL));
    cr_assert(eq(int, baton_key_object("redisson_lock_queue:{12345678}", name, sizeof name),
                 BATON_EINVAL));
    cr_assert(eq(str, name, ""), "a NAME that does not fit leaves \"\"");
    cr_assert(eq(int, baton_key_object("1234567", name, sizeof name), BATON_KEY_OBJECT));
    cr_assert(eq(str, name, "1234567"));
}

/* The side patterns find the objects without a key of their own: a fair lock that nobody
 * holds but one waits for is found by its queue and named by baton_key_object. */
Test(inspect, key_side_patterns_find_a_queued_free_fair_lock)
{
    cr_assert(eq(str, (char *)baton_key_side_pattern(0), "redisson_lock_queue:*"));
    cr_assert(eq(ptr, (void *)baton_key_side_pattern(1), NULL));
    const char *name = th_tmpname("keymap-fair");
    redisContext *r = th_redis();
    th_cmd_int(r, "RPUSH redisson_lock_queue:{%s} someone:1", name);
    baton_client *c = th_client(NULL);
    baton_key_scan *s = NULL;
    cr_assert(eq(int, baton_scan_keys(c, baton_key_side_pattern(0), 100000, &s), BATON_OK));
    bool found = false;
    for (size_t i = 0; i < s->n_keys; i++) {
        char obj[BATON_MAX_NAME_LEN + 1];
        if (baton_key_object(s->keys[i], obj, sizeof obj) == BATON_KEY_NAMES &&
            strcmp(obj, name) == 0)
            found = true;
    }
    cr_assert(found, "the queue of %s was found and named", name);
    baton_key_scan_free(s);
    baton_inspection *ins = inspect(c, name);
    cr_assert(eq(int, ins->kind, BATON_OBJECT_FAIRLOCK));
    baton_inspection_free(ins);
    th_cmd_int(r, "DEL redisson_lock_queue:{%s}", name);
    redisFree(r);
    baton_client_close(c);
}
