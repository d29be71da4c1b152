/*
 * baton-waiters: many asynchronous waiters in one process (issue 49, item 4).
 *
 *   baton-waiters --port P --n N [--pool S] [--starve-ms M] [--multiplex M]
 *
 * One client, one lock handle per name, N names. Each name is first held by a foreign
 * owner in Redisson's layout (a hash whose one field "<uuid>:<thread>" counts 1, and a
 * PEXPIRE), written by this program on its own hiredis connection. Then one asynchronous
 * acquisition per handle (wait forever, watchdog lease); when every waiter has run its two
 * attempts (before and after its subscription) and sleeps, the resident set size is read
 * again: bytes per waiter = (RSS with the N handles and N sleeping waiters − RSS of the
 * client alone, its engine started) / N, handles included. Then every hold is released as
 * Redisson's unlock does (DEL of the hash, PUBLISH "0" on redisson_lock__channel:{name}),
 * pipelined from a second thread, and the waiters' callbacks are counted on the main
 * thread's loop (baton_client_process on the async descriptor). The rate is N over the
 * time from the first release sent to the last acquisition's callback.
 *
 * Prints one JSON line on stdout (the figures) and a line of words on stderr. Public API
 * and hiredis only. BATON_WAITERS_PAUSE=S: a pause of S seconds before the releases (to
 * attach a profiler to them).
 */
#define _GNU_SOURCE
#include <baton/baton.h>

#include <hiredis/hiredis.h>

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int port = 6379;
static int n = 10000;
static int pool = 0;
static int64_t starve_ms = 0;
/* the shared connection (baton_options.multiplex: 1 on, -1 off, 0 the default: on) */
static int multiplex = 0;
static const char *prefix = "bench:waiters";

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "baton-waiters: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The resident set size, in bytes (/proc/self/statm's second field, in pages). */
static long long rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long long size = 0, res = 0;
    if (!f || fscanf(f, "%lld %lld", &size, &res) != 2)
        die("cannot read /proc/self/statm");
    fclose(f);
    return res * sysconf(_SC_PAGESIZE);
}

/* How many mappings the process has (/proc/self/maps lines). */
static long maps_count(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return -1;
    long lines = 0;
    int ch;
    while ((ch = fgetc(f)) != EOF)
        lines += ch == '\n';
    fclose(f);
    return lines;
}

static void name_of(char *buf, size_t len, int i)
{
    snprintf(buf, len, "%s:%d:%d", prefix, (int)getpid(), i);
}

static redisContext *connect_ctl(void)
{
    redisContext *r = redisConnect("127.0.0.1", port);
    if (!r || r->err)
        die("cannot connect to 127.0.0.1:%d", port);
    return r;
}

/* Sends the commands queued with redisAppendCommand and reads `replies` replies. */
static void drain(redisContext *r, int replies)
{
    for (int i = 0; i < replies; i++) {
        redisReply *rep = NULL;
        if (redisGetReply(r, (void **)&rep) != REDIS_OK)
            die("redis: %s", r->errstr);
        if (rep->type == REDIS_REPLY_ERROR)
            die("redis: %s", rep->str);
        freeReplyObject(rep);
    }
}

/* Every name held by a foreign owner, as Redisson writes a hold. */
static void hold_all(redisContext *r)
{
    char name[128];
    int queued = 0;
    for (int i = 0; i < n; i++) {
        name_of(name, sizeof name, i);
        redisAppendCommand(r, "HSET %s 6e0f0261-922f-4ca9-9275-5cd246e2e294:57 1", name);
        redisAppendCommand(r, "PEXPIRE %s 600000", name);
        queued += 2;
        if (queued >= 2000) {
            drain(r, queued);
            queued = 0;
        }
    }
    drain(r, queued);
}

static atomic_int acquired, failed;
static atomic_llong last_done_us;
static int first_rc;

static void on_acquired(void *handle, baton_owner *owner, int rc, void *arg)
{
    (void)handle, (void)owner, (void)arg;
    if (rc == BATON_OK) {
        atomic_fetch_add(&acquired, 1);
    } else if (atomic_fetch_add(&failed, 1) == 0) {
        first_rc = rc;
    }
    atomic_store(&last_done_us, now_us());
}

static int64_t release_start_us, release_end_us;

/* Redisson's unlock of every hold: DEL, then PUBLISH "0" on the lock's channel. */
static void *release_all(void *arg)
{
    (void)arg;
    redisContext *r = connect_ctl();
    char name[128];
    int queued = 0;
    release_start_us = now_us();
    for (int i = 0; i < n; i++) {
        name_of(name, sizeof name, i);
        redisAppendCommand(r, "DEL %s", name);
        redisAppendCommand(r, "PUBLISH redisson_lock__channel:{%s} 0", name);
        queued += 2;
        if (queued >= 1000) {
            drain(r, queued);
            queued = 0;
        }
    }
    drain(r, queued);
    release_end_us = now_us();
    redisFree(r);
    return NULL;
}

/* Runs the client's callbacks until cond() or the deadline. */
static void loop_until(baton_client *c, int fd, bool (*cond)(baton_client *), int64_t deadline)
{
    while (!cond(c) && now_us() < deadline) {
        struct pollfd p = {fd, POLLIN, 0};
        poll(&p, 1, 10);
        baton_client_process(c);
    }
}

static bool all_asleep(baton_client *c)
{
    baton_stats s;
    baton_client_stats(c, &s);
    /* each waiter's attempt before its subscription and the one after it */
    return s.kind[BATON_KIND_LOCK].attempts >= 2 * (uint64_t)n && s.subscribes >= (uint64_t)n;
}

static bool all_done(baton_client *c)
{
    (void)c;
    return atomic_load(&acquired) + atomic_load(&failed) >= n;
}

int main(int argc, char **argv)
{
    static const struct option longs[] = {
        {"port", required_argument, NULL, 'p'},      {"n", required_argument, NULL, 'n'},
        {"pool", required_argument, NULL, 'P'},      {"starve-ms", required_argument, NULL, 'S'},
        {"multiplex", required_argument, NULL, 'M'}, {NULL, 0, NULL, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (ch) {
        case 'p':
            port = atoi(optarg);
            break;
        case 'n':
            n = atoi(optarg);
            break;
        case 'P':
            pool = atoi(optarg);
            break;
        case 'S':
            starve_ms = atoll(optarg);
            break;
        case 'M':
            multiplex = atoi(optarg);
            break;
        default:
            die("usage: baton-waiters --port P --n N [--pool S] [--starve-ms M] "
                "[--multiplex M]");
        }
    }
    if (n < 1)
        die("--n must be at least 1");
    redisContext *ctl = connect_ctl();
    hold_all(ctl);

    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    baton_options o;
    baton_options_init(&o);
    o.url = url;
    o.pool_size = pool;
    o.starve_ms = starve_ms;
    o.multiplex = multiplex;
    baton_client *c;
    if (baton_client_open(&o, &c) != BATON_OK)
        die("open: %s", baton_open_errmsg());
    int fd;
    if (baton_client_async_fd(c, &fd) != BATON_OK)
        die("async_fd: %s", baton_client_errmsg(c));
    /* the client alone, its engine started, one wait done (its connections made) */
    {
        baton_lock *w;
        if (baton_lock_open(c, "bench:waiters:warm", &w) != BATON_OK ||
            baton_lock_acquire_async(w, NULL, 1000, BATON_LEASE_WATCHDOG, on_acquired, NULL,
                                     NULL) != BATON_OK)
            die("warm-up: %s", baton_client_errmsg(c));
        n++;
        loop_until(c, fd, all_done, now_us() + 10000000);
        n--;
        if (atomic_load(&acquired) != 1)
            die("warm-up acquisition failed");
        baton_lock_release(w);
        baton_lock_close(w);
        atomic_store(&acquired, 0);
    }
    long long rss0 = rss_bytes();
    long maps0 = maps_count();

    baton_lock **ls = malloc((size_t)n * sizeof *ls);
    if (!ls)
        die("out of memory");
    char name[128];
    int64_t t_start = now_us();
    for (int i = 0; i < n; i++) {
        name_of(name, sizeof name, i);
        if (baton_lock_open(c, name, &ls[i]) != BATON_OK)
            die("open %d: %s", i, baton_client_errmsg(c));
    }
    long long rss_handles = rss_bytes();
    for (int i = 0; i < n; i++) {
        int rc = baton_lock_acquire_async(ls[i], NULL, BATON_WAIT_FOREVER, BATON_LEASE_WATCHDOG,
                                          on_acquired, NULL, NULL);
        if (rc != BATON_OK)
            die("start %d: %s", i, baton_client_errmsg(c));
    }
    loop_until(c, fd, all_asleep, now_us() + 600000000LL);
    int64_t t_asleep = now_us();
    long long rss1 = rss_bytes();
    long maps1 = maps_count();
    int early = atomic_load(&acquired) + atomic_load(&failed);

    if (getenv("BATON_WAITERS_PAUSE")) { /* time to attach a profiler to the release */
        fprintf(stderr, "baton-waiters: asleep, releasing in %s s\n",
                getenv("BATON_WAITERS_PAUSE"));
        sleep((unsigned)atoi(getenv("BATON_WAITERS_PAUSE")));
    }
    pthread_t t;
    pthread_create(&t, NULL, release_all, NULL);
    loop_until(c, fd, all_done, now_us() + 600000000LL);
    pthread_join(t, NULL);
    int64_t t_end = atomic_load(&last_done_us);
    long long rss2 = rss_bytes();
    int got = atomic_load(&acquired), bad = atomic_load(&failed);
    double secs = (double)(t_end - release_start_us) / 1e6;
    double per = (double)(rss1 - rss0) / n, per_handle = (double)(rss_handles - rss0) / n;
    baton_stats s;
    baton_client_stats(c, &s);
    fprintf(stderr,
            "baton-waiters: %d waiters: %.0f bytes each, %.0f of them the handle (RSS %lld -> %lld "
            "kB, %ld -> %ld "
            "mappings), asleep after %.2f s; %d acquired, %d failed%s%s%s (%d before the "
            "releases); releases sent in %.3f s, all through %.3f s after the first "
            "(%.3f s after the last): %.0f acquisitions/s\n",
            n, per, per_handle, rss0 / 1024, rss1 / 1024, maps0, maps1,
            (double)(t_asleep - t_start) / 1e6, got, bad, bad ? " (first: " : "",
            bad ? baton_strerror(first_rc) : "", bad ? ")" : "", early,
            (double)(release_end_us - release_start_us) / 1e6, secs,
            (double)(t_end - release_end_us) / 1e6, secs > 0 ? n / secs : 0.0);
    printf("{\"suite\":\"baton\",\"scenario\":\"waiters\",\"n\":%d,\"bytes_per_waiter\":%.0f,"
           "\"bytes_per_handle\":%.0f,"
           "\"rss0_kb\":%lld,\"rss_waiting_kb\":%lld,\"rss_after_kb\":%lld,\"maps0\":%ld,"
           "\"maps_waiting\":%ld,\"acquired\":%d,\"failed\":%d,\"asleep_s\":%.3f,"
           "\"release_s\":%.3f,\"through_s\":%.3f,\"after_last_release_s\":%.3f,"
           "\"rate\":%.0f,\"attempts\":%llu,\"wakeups\":%llu}\n",
           n, per, per_handle, rss0 / 1024, rss1 / 1024, rss2 / 1024, maps0, maps1, got, bad,
           (double)(t_asleep - t_start) / 1e6, (double)(release_end_us - release_start_us) / 1e6,
           secs, (double)(t_end - release_end_us) / 1e6, secs > 0 ? n / secs : 0.0,
           (unsigned long long)s.kind[BATON_KIND_LOCK].attempts,
           (unsigned long long)s.kind[BATON_KIND_LOCK].wakeups);
    fflush(stdout);
    /* the holds go with their handles' releases; the rest with the private server */
    for (int i = 0; i < n; i++)
        baton_lock_close(ls[i]);
    free(ls);
    baton_client_close(c);
    redisFree(ctl);
    return bad == 0 && got == n ? 0 : 1;
}
