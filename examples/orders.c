/*
 * The multi-item order scene: N processes, each with its own baton client, place random
 * orders over a small catalogue (6 items, each with its stock in Redis). An order names 1
 * to 3 items with a quantity each; it locks all its items at once with a multi-lock (in
 * whatever order the customer listed them: the multi-lock takes them in one canonical
 * order, so two orders sharing items never deadlock), then reads every item's stock with
 * GET, and if every item has enough, writes each one back decremented with SET,
 * deliberately not atomic. Otherwise the whole order is refused: all or nothing.
 *
 *   orders --port P [--procs N] [--orders K] [--stock S]
 *
 * K orders in all (split among the processes), S units of each item at the start. At the
 * end it checks that no stock was ever seen below zero and that for every item the units
 * sold plus the units left equal the initial stock, prints one line per item and a
 * summary, and exits 0 when both hold, 1 otherwise (2 on a usage or connection error).
 */
#define _GNU_SOURCE
#include <baton/baton.h>
#include <hiredis/hiredis.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ITEMS 6

static const char *const catalogue[ITEMS] = {"anvil", "bell", "candle", "drum", "easel", "flute"};
static int port = 6379, procs = 6, orders = 400, stock = 250;

typedef struct tally {
    int placed, filled, refused, errors;
    int negative_seen; /* reads of a stock below zero */
    long long sold[ITEMS];
} tally;

static redisContext *connect_raw(void)
{
    struct timeval tv = {5, 0};
    redisContext *r = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (!r || r->err) {
        fprintf(stderr, "orders: cannot reach redis on port %d\n", port);
        exit(2);
    }
    return r;
}

static long long get_stock(redisContext *r, int item)
{
    redisReply *rep = redisCommand(r, "GET demo:orders:stock:%s", catalogue[item]);
    long long v = rep && rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : 0;
    freeReplyObject(rep);
    return v;
}

static void set_stock(redisContext *r, int item, long long v)
{
    freeReplyObject(redisCommand(r, "SET demo:orders:stock:%s %lld", catalogue[item], v));
}

/* One customer process: places `count` random orders; fills in its tally. */
static void customer(int count, tally *t)
{
    char url[64], name[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    baton_client *c;
    baton_lock *item_lock[ITEMS];
    int rc = baton_client_open_url(url, &c);
    if (rc != BATON_OK) {
        fprintf(stderr, "customer: %s: %s\n", baton_strerror(rc), baton_open_errmsg());
        exit(2);
    }
    for (int i = 0; i < ITEMS; i++) {
        snprintf(name, sizeof name, "demo:orders:item:%s", catalogue[i]);
        if (baton_lock_open(c, name, &item_lock[i]) != BATON_OK)
            exit(2);
    }
    redisContext *r = connect_raw();
    unsigned seed = (unsigned)getpid() ^ (unsigned)time(NULL);
    memset(t, 0, sizeof *t);
    for (int o = 0; o < count; o++) {
        /* 1 to 3 distinct items, in the customer's order, 1 to 3 units each */
        int n = 1 + rand_r(&seed) % 3, item[3], qty[3];
        baton_lock *members[3];
        for (int k = 0; k < n; k++) {
            bool dup;
            do {
                item[k] = rand_r(&seed) % ITEMS;
                dup = false;
                for (int j = 0; j < k; j++)
                    dup = dup || item[j] == item[k];
            } while (dup);
            qty[k] = 1 + rand_r(&seed) % 3;
            members[k] = item_lock[item[k]];
        }
        baton_lock *order;
        if (baton_multilock_open(members, (size_t)n, &order) != BATON_OK ||
            baton_lock_acquire(order, BATON_LEASE_WATCHDOG) != BATON_OK) {
            fprintf(stderr, "customer: order lock: %s\n", baton_client_errmsg(c));
            t->errors++;
            baton_lock_close(order);
            continue;
        }
        t->placed++;
        long long left[3];
        bool enough = true;
        for (int k = 0; k < n; k++) {
            left[k] = get_stock(r, item[k]); /* read ... */
            if (left[k] < 0)
                t->negative_seen++;
            enough = enough && left[k] >= qty[k];
        }
        if (enough) {
            for (int k = 0; k < n; k++) {
                usleep(50);                              /* ... think ... */
                set_stock(r, item[k], left[k] - qty[k]); /* ... write: racy without the lock */
                t->sold[item[k]] += qty[k];
            }
            t->filled++;
        } else {
            t->refused++;
        }
        if (baton_lock_release(order) != BATON_OK) {
            fprintf(stderr, "customer: release: %s\n", baton_client_errmsg(c));
            t->errors++;
        }
        baton_lock_close(order);
    }
    redisFree(r);
    for (int i = 0; i < ITEMS; i++)
        baton_lock_close(item_lock[i]);
    baton_client_close(c);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--port") && i + 1 < argc)
            port = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--procs") && i + 1 < argc)
            procs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--orders") && i + 1 < argc)
            orders = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--stock") && i + 1 < argc)
            stock = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: orders --port P [--procs N] [--orders K] [--stock S]\n");
            return 2;
        }
    }
    if (procs < 1 || procs > 256 || orders < 0 || stock < 0) {
        fprintf(stderr, "orders: procs must be 1..256, orders and stock >= 0\n");
        return 2;
    }
    redisContext *r = connect_raw();
    for (int i = 0; i < ITEMS; i++)
        set_stock(r, i, stock);

    int(*pipes)[2] = calloc((size_t)procs, sizeof *pipes);
    pid_t *pids = calloc((size_t)procs, sizeof *pids);
    if (!pipes || !pids)
        return 2;
    for (int p = 0; p < procs; p++) {
        if (pipe(pipes[p]) != 0)
            return 2;
        fflush(NULL);
        pids[p] = fork();
        if (pids[p] < 0)
            return 2;
        if (pids[p] == 0) {
            tally t;
            customer(orders / procs + (p < orders % procs), &t);
            if (write(pipes[p][1], &t, sizeof t) != sizeof t)
                _exit(2);
            _exit(0);
        }
        close(pipes[p][1]);
    }
    tally all;
    memset(&all, 0, sizeof all);
    bool failed = false;
    for (int p = 0; p < procs; p++) {
        tally t;
        int st = 0;
        bool got = read(pipes[p][0], &t, sizeof t) == sizeof t;
        waitpid(pids[p], &st, 0);
        if (!got || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "orders: customer %d failed\n", p + 1);
            failed = true;
            continue;
        }
        all.placed += t.placed;
        all.filled += t.filled;
        all.refused += t.refused;
        all.errors += t.errors;
        all.negative_seen += t.negative_seen;
        for (int i = 0; i < ITEMS; i++)
            all.sold[i] += t.sold[i];
    }

    printf("%d customer processes, %d orders, %d items with %d units each; every order "
           "locks all its items (multi-lock)\n",
           procs, orders, ITEMS, stock);
    long long sold = 0;
    bool never_negative = all.negative_seen == 0, add_up = true;
    for (int i = 0; i < ITEMS; i++) {
        long long left = get_stock(r, i);
        bool ok = all.sold[i] + left == stock;
        never_negative = never_negative && left >= 0;
        add_up = add_up && ok;
        sold += all.sold[i];
        printf("%-7s sold %4lld  left %4lld  %s\n", catalogue[i], all.sold[i], left,
               ok ? "" : "<- does not add up");
    }
    bool pass = !failed && all.errors == 0 && never_negative && add_up && all.placed == orders;
    printf("orders: %d orders by %d processes (%d filled, %d refused), %lld items sold, "
           "%s, %s [%s]\n",
           all.placed, procs, all.filled, all.refused, sold,
           never_negative ? "stock never negative" : "STOCK WENT NEGATIVE",
           add_up ? "totals add up" : "TOTALS DO NOT ADD UP", pass ? "OK" : "FAILED");
    redisFree(r);
    free(pipes);
    free(pids);
    return pass ? 0 : 1;
}
