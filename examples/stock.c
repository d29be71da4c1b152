/*
 * The stock-deduction scene: W worker processes, each with its own baton client, sell
 * items from one stock counter kept in Redis. Each sale reads the stock with GET and
 * writes it back decremented with SET, deliberately not atomic, under a baton lock. With
 * the lock no item is sold twice; with --no-lock the same workers oversell.
 *
 *   stock --port P [--workers W] [--stock S] [--no-lock]
 *
 * Prints the sales per worker, the total, the final stock and the oversells (sales beyond
 * the initial stock). Exits 0 when the lock kept the oversells at 0 (or with --no-lock),
 * 1 otherwise.
 */
#define _GNU_SOURCE
#include <baton/baton.h>
#include <hiredis/hiredis.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int port = 6379, workers = 8, stock = 1000;
static bool use_lock = true;

static redisContext *connect_raw(void)
{
    struct timeval tv = {5, 0};
    redisContext *r = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (!r || r->err) {
        fprintf(stderr, "stock: cannot reach redis on port %d\n", port);
        exit(2);
    }
    return r;
}

static long long get_stock(redisContext *r)
{
    redisReply *rep = redisCommand(r, "GET demo:stock");
    long long v = rep && rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : 0;
    freeReplyObject(rep);
    return v;
}

static void set_stock(redisContext *r, long long v)
{
    freeReplyObject(redisCommand(r, "SET demo:stock %lld", v));
}

/* One worker: sell until the stock reads 0; returns the number of sales. */
static int work(void)
{
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    baton_client *c;
    baton_lock *lock;
    int rc = baton_client_open_url(url, &c);
    if (rc == BATON_OK)
        rc = baton_lock_open(c, "demo:stock-lock", &lock);
    if (rc != BATON_OK) {
        fprintf(stderr, "worker: %s: %s\n", baton_strerror(rc), baton_open_errmsg());
        exit(2);
    }
    redisContext *r = connect_raw();
    int sold = 0;
    for (;;) {
        if (use_lock && (rc = baton_lock_acquire(lock, BATON_LEASE_WATCHDOG)) != BATON_OK) {
            fprintf(stderr, "worker: acquire: %s\n", baton_client_errmsg(c));
            exit(2);
        }
        long long left = get_stock(r); /* read ...           */
        if (left > 0) {
            usleep(100);            /* ... think ...       */
            set_stock(r, left - 1); /* ... write: a race without the lock */
            sold++;
        }
        if (use_lock && (rc = baton_lock_release(lock)) != BATON_OK) {
            fprintf(stderr, "worker: release: %s\n", baton_client_errmsg(c));
            exit(2);
        }
        if (left <= 0)
            break;
    }
    redisFree(r);
    baton_lock_close(lock);
    baton_client_close(c);
    return sold;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--port") && i + 1 < argc)
            port = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--workers") && i + 1 < argc)
            workers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--stock") && i + 1 < argc)
            stock = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-lock"))
            use_lock = false;
        else {
            fprintf(stderr, "usage: stock --port P [--workers W] [--stock S] [--no-lock]\n");
            return 2;
        }
    }
    if (workers < 1 || workers > 256 || stock < 0) {
        fprintf(stderr, "stock: workers must be 1..256, stock >= 0\n");
        return 2;
    }
    redisContext *r = connect_raw();
    set_stock(r, stock);

    int(*pipes)[2] = calloc((size_t)workers, sizeof *pipes);
    pid_t *pids = calloc((size_t)workers, sizeof *pids);
    for (int w = 0; w < workers; w++) {
        if (pipe(pipes[w]) != 0)
            return 2;
        fflush(NULL);
        pids[w] = fork();
        if (pids[w] == 0) {
            int sold = work();
            if (write(pipes[w][1], &sold, sizeof sold) != sizeof sold)
                _exit(2);
            _exit(0);
        }
    }
    long long total = 0;
    printf("%d workers, initial stock %d, %s\n", workers, stock,
           use_lock ? "each sale under the baton lock" : "NO lock");
    for (int w = 0; w < workers; w++) {
        int sold = 0, st = 0;
        if (read(pipes[w][0], &sold, sizeof sold) != sizeof sold)
            sold = 0;
        waitpid(pids[w], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "worker %d failed\n", w + 1);
            return 1;
        }
        printf("worker %d: %d sales\n", w + 1, sold);
        total += sold;
    }
    long long left = get_stock(r);
    long long oversells = total > stock ? total - stock : 0;
    printf(
        "stock: total sales %lld, final stock %lld, oversells %lld  [%s]\n", total, left, oversells,
        use_lock ? (oversells == 0 && left == 0 ? "OK" : "BROKEN")
                 : (oversells > 0 ? "oversold, as expected without a lock" : "no race this time"));
    redisFree(r);
    free(pipes);
    free(pids);
    return (use_lock && (oversells != 0 || left != 0)) ? 1 : 0;
}
