/*
 * The baton command's tests that need the fair lock (issue 3), which is not in main yet.
 * NOT registered in tests/CMakeLists.txt: it cannot link until baton_fairlock_open exists
 * in libbaton. Once it does, move these cases into test_cli.c (same helpers, same suite)
 * and delete this file.
 */
#define _GNU_SOURCE
#include "cli_helper.h"

#include <criterion/new/assert.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

TestSuite(cli, .timeout = 60);

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* A client holding the fair lock `name` (watchdog lease) on this thread. */
static baton_client *hold_fair(const char *name, baton_lock **out)
{
    baton_client *c = th_client(NULL);
    cr_assert(eq(int, baton_fairlock_open(c, name, out), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(*out, BATON_LEASE_WATCHDOG), BATON_OK));
    return c;
}

Test(cli, status_json_shows_a_fair_lock_queue_of_three_in_order)
{
    const char *name = th_tmpname("cli-fair");
    char *order = cli_path("order");
    baton_lock *l;
    baton_client *c = hold_fair(name, &l);
    pid_t pids[3];
    for (int i = 0; i < 3; i++) {
        char script[256];
        snprintf(script, sizeof script, "echo %d >> \"%s\"", i + 1, order);
        pids[i] = cli_spawn(ARGS("lock", "--fair", name, "--", "sh", "-c", script));
        th_sleep_ms(300); /* each one queued before the next asks */
    }

    cli_result r;
    cli_exec(&r, ARGS("status", name, "--json"));
    cr_assert(eq(int, r.status, 0), "stderr: %s", r.err);
    json *j = json_parse(r.out);
    cr_assert(j != NULL, "not JSON: %s", r.out);
    json *fl = json_at(j, 0);
    cr_assert(eq(str, json_get(fl, "kind")->string, "fairlock"));
    cr_assert(eq(str, json_get(fl, "redis_type")->string, "hash"));
    json *holders = json_get(fl, "holders");
    cr_assert(eq(sz, holders->n, 1));
    const char *holder = json_get(json_at(holders, 0), "owner")->string;
    cr_assert(strncmp(holder, baton_client_id(c), strlen(baton_client_id(c))) == 0);
    json *queue = json_get(fl, "queue");
    cr_assert(eq(sz, queue->n, 3), "%s", r.out);
    for (size_t i = 0; i < 3; i++) {
        json *w = json_at(queue, i);
        const char *owner = json_get(w, "owner")->string;
        cr_assert(strcmp(owner, holder) != 0);
        for (size_t k = 0; k < i; k++)
            cr_assert(strcmp(owner, json_get(json_at(queue, k), "owner")->string) != 0);
        cr_assert(eq(int, json_get(w, "deadline_ms")->type, JSON_NUMBER));
        double left = json_get(w, "remaining_ms")->number;
        /* fair_wait_ms is 5000 by default; waiters keep renewing their place */
        cr_assert(left > 0 && left <= 5000, "remaining %f", left);
        cr_assert(eq(i64, (int64_t)json_get(w, "deadline_ms")->number,
                     (int64_t)(json_get(fl, "server_time_ms")->number + left)));
    }
    json_free(j);
    cli_result_free(&r);

    /* the text form lists the same queue */
    cli_exec(&r, ARGS("status", name));
    cr_assert(strstr(r.out, "fair lock, held") != NULL, "%s", r.out);
    cr_assert(strstr(r.out, "queue (3 waiting") != NULL, "%s", r.out);
    cli_result_free(&r);

    /* released: they run in the order they asked */
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    for (int i = 0; i < 3; i++)
        cr_assert(eq(int, th_wait(pids[i]), 0), "run %d", i);
    char *seen = cli_read_file(order);
    cr_assert(eq(str, seen, "1\n2\n3\n"));
    free(seen);
    free(order);
    baton_lock_close(l);
    baton_client_close(c);
}

Test(cli, unlock_force_on_a_fair_lock_wakes_the_head_of_its_queue)
{
    const char *name = th_tmpname("cli-fair-unlock");
    char *marker = cli_path("marker");
    baton_lock *l;
    baton_client *c = hold_fair(name, &l);
    pid_t waiter = cli_spawn(ARGS("lock", "--fair", name, "--", "touch", marker));
    th_sleep_ms(300);
    cli_result r;
    cli_exec(&r, ARGS("unlock", "--force", name));
    cr_assert(eq(int, r.status, 0), "stderr: %s", r.err);
    cr_assert(strstr(r.err, "fair lock") != NULL, "stderr: %s", r.err);
    cli_result_free(&r);
    int64_t t0 = th_ms();
    cr_assert(eq(int, th_wait(waiter), 0));
    /* woken by the message to the head, not by its re-check (fair_wait_ms / 3) */
    cr_assert(le(i64, th_ms() - t0, 500), "%lld ms", (long long)(th_ms() - t0));
    cr_assert(access(marker, F_OK) == 0);
    cr_assert(eq(int, baton_lock_release(l), BATON_ENOTHELD));
    free(marker);
    baton_lock_close(l);
    baton_client_close(c);
}

Test(cli, fair_multi_lock_and_wait)
{
    const char *a = th_tmpname("cli-fair-a");
    const char *b = th_tmpname("cli-fair-b");
    char *marker = cli_path("marker");
    baton_lock *l;
    baton_client *c = hold_fair(b, &l);
    cli_result r;
    cli_exec(&r, ARGS("lock", "--fair", a, b, "--wait", "500ms", "--", "touch", marker));
    cr_assert(eq(int, r.status, 124), "stderr: %s", r.err);
    cr_assert(ge(i64, r.ms, 490));
    cr_assert(le(i64, r.ms, 900), "%lld ms", (long long)r.ms);
    cr_assert(access(marker, F_OK) != 0);
    cli_result_free(&r);
    /* a timed-out fair waiter leaves no place in the queue behind */
    redisContext *rc = th_redis();
    cr_assert(eq(i64, th_cmd_int(rc, "LLEN redisson_lock_queue:{%s}", b), 0));
    cr_assert(eq(i64, th_cmd_int(rc, "EXISTS %s", a), 0));
    redisFree(rc);
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    cli_exec(&r, ARGS("lock", "--fair", a, b, "--", "touch", marker));
    cr_assert(eq(int, r.status, 0), "stderr: %s", r.err);
    cr_assert(access(marker, F_OK) == 0);
    cli_result_free(&r);
    free(marker);
    baton_lock_close(l);
    baton_client_close(c);
}
