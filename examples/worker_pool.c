/*
 * The worker-pool scene: a job queue in Redis (a list) is drained by W worker processes,
 * each with its own baton client. Every job calls a fragile backend that must never see
 * more than N calls at once; a baton semaphore with N permits caps the calls across all
 * the processes. The backend is simulated: a call INCRs an in-flight counter in Redis,
 * works for 1-4 ms, and DECRs it; the highest value INCR ever returned is the concurrency
 * the backend saw.
 *
 *   worker_pool --port P [--workers W] [--cap N] [--jobs J]
 *
 * Prints the jobs done per worker, then e.g.
 *   worker_pool: 200 jobs by 8 workers, peak backend concurrency 3 (cap 3) [OK]
 * Exits 0 when every job was done and the peak equals the cap (never above it, and the
 * workers did keep the backend busy up to it), 1 otherwise, 2 on a usage or setup error.
 */
#define _GNU_SOURCE
#include <baton/baton.h>
#include <hiredis/hiredis.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define QUEUE "demo:wp:jobs"
#define INFLIGHT "demo:wp:backend-inflight"
#define SEMAPHORE "demo:wp:backend"

static int port = 6379, workers = 8, cap = 3, jobs = 200;

typedef struct result {
    int done;       /* jobs this worker completed */
    long long peak; /* the most backend calls in flight this worker saw */
} result;

static redisContext *connect_raw(void)
{
    struct timeval tv = {5, 0};
    redisContext *r = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (!r || r->err) {
        fprintf(stderr, "worker_pool: cannot reach redis on port %d\n", port);
        exit(2);
    }
    return r;
}

static void open_semaphore(baton_client **c, baton_semaphore **s)
{
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    int rc = baton_client_open_url(url, c);
    if (rc != BATON_OK) {
        fprintf(stderr, "worker_pool: %s: %s\n", baton_strerror(rc), baton_open_errmsg());
        exit(2);
    }
    rc = baton_semaphore_open(*c, SEMAPHORE, s);
    if (rc != BATON_OK) {
        fprintf(stderr, "worker_pool: %s\n", baton_client_errmsg(*c));
        exit(2);
    }
}

/* The fragile backend: returns how many calls were in flight during this one. */
static long long backend_call(redisContext *r, unsigned *seed)
{
    redisReply *rep = redisCommand(r, "INCR " INFLIGHT);
    long long now = rep && rep->type == REDIS_REPLY_INTEGER ? rep->integer : 0;
    freeReplyObject(rep);
    usleep(1000 + rand_r(seed) % 3000); /* the work */
    freeReplyObject(redisCommand(r, "DECR " INFLIGHT));
    return now;
}

/* One worker: take jobs until the queue is empty, each backend call under one permit. */
static result work(int id)
{
    baton_client *c;
    baton_semaphore *s;
    open_semaphore(&c, &s);
    redisContext *r = connect_raw();
    unsigned seed = (unsigned)getpid() * 2654435761u + (unsigned)id;
    result res = {0, 0};
    for (;;) {
        redisReply *job = redisCommand(r, "LPOP " QUEUE);
        bool empty = !job || job->type != REDIS_REPLY_STRING;
        freeReplyObject(job);
        if (empty)
            break;
        if (baton_semaphore_acquire(s, 1) != BATON_OK) {
            fprintf(stderr, "worker %d: acquire: %s\n", id, baton_client_errmsg(c));
            exit(2);
        }
        long long inflight = backend_call(r, &seed);
        if (baton_semaphore_release(s, 1) != BATON_OK) {
            fprintf(stderr, "worker %d: release: %s\n", id, baton_client_errmsg(c));
            exit(2);
        }
        if (inflight > res.peak)
            res.peak = inflight;
        res.done++;
    }
    redisFree(r);
    baton_semaphore_close(s);
    baton_client_close(c);
    return res;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--port") && i + 1 < argc)
            port = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--workers") && i + 1 < argc)
            workers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--cap") && i + 1 < argc)
            cap = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--jobs") && i + 1 < argc)
            jobs = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: worker_pool --port P [--workers W] [--cap N] [--jobs J]\n");
            return 2;
        }
    }
    if (workers < 1 || workers > 256 || cap < 1 || cap > workers || jobs < cap) {
        fprintf(stderr, "worker_pool: need 1 <= cap <= workers <= 256 and jobs >= cap "
                        "(fewer workers or jobs could never reach the cap)\n");
        return 2;
    }

    /* A fresh queue, a fresh counter, a semaphore with `cap` permits. */
    redisContext *r = connect_raw();
    freeReplyObject(redisCommand(r, "DEL " QUEUE " " INFLIGHT));
    for (int j = 1; j <= jobs; j++)
        freeReplyObject(redisCommand(r, "RPUSH " QUEUE " job-%d", j));
    baton_client *c;
    baton_semaphore *s;
    open_semaphore(&c, &s);
    bool set = false;
    if (baton_semaphore_delete(s, NULL) != BATON_OK ||
        baton_semaphore_try_set_permits(s, cap, &set) != BATON_OK || !set) {
        fprintf(stderr, "worker_pool: setting up the semaphore: %s\n", baton_client_errmsg(c));
        return 2;
    }

    int(*pipes)[2] = calloc((size_t)workers, sizeof *pipes);
    pid_t *pids = calloc((size_t)workers, sizeof *pids);
    for (int w = 0; w < workers; w++) {
        if (pipe(pipes[w]) != 0)
            return 2;
        fflush(NULL);
        pids[w] = fork();
        if (pids[w] < 0)
            return 2;
        if (pids[w] == 0) {
            result res = work(w + 1);
            if (write(pipes[w][1], &res, sizeof res) != sizeof res)
                _exit(2);
            _exit(0);
        }
    }
    printf("%d workers drain %d jobs; a semaphore of %d permits guards the backend\n", workers,
           jobs, cap);
    int done = 0;
    long long peak = 0;
    for (int w = 0; w < workers; w++) {
        result res = {0, 0};
        int st = 0;
        if (read(pipes[w][0], &res, sizeof res) != sizeof res)
            res.done = 0;
        waitpid(pids[w], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "worker %d failed\n", w + 1);
            return 1;
        }
        printf("worker %d: %d jobs\n", w + 1, res.done);
        done += res.done;
        if (res.peak > peak)
            peak = res.peak;
    }
    int64_t left = -1;
    baton_semaphore_available(s, &left);
    bool ok = done == jobs && peak == cap && left == cap;
    printf("worker_pool: %d jobs by %d workers, peak backend concurrency %lld (cap %d) [%s]\n",
           done, workers, peak, cap, ok ? "OK" : "BROKEN");
    baton_semaphore_delete(s, NULL);
    baton_semaphore_close(s);
    baton_client_close(c);
    freeReplyObject(redisCommand(r, "DEL " QUEUE " " INFLIGHT));
    redisFree(r);
    free(pipes);
    free(pids);
    return ok ? 0 : 1;
}
