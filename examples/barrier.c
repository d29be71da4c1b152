/*
 * The barrier scene: N jobs, each a separate process with its own baton client, meet at a
 * count-down latch. The coordinator arms the latch with N; each job works for a while
 * (a different time per job), counts the latch down on arrival, then waits on it. Nobody
 * gets past the barrier until the last job arrived; then everyone passes at once.
 *
 *   barrier --port P [--jobs N]
 *
 * Prints when each job arrived and passed, and a summary line with its check: every job
 * passed, none before the last arrival. Exits 0 when the check holds, 1 otherwise.
 */
#define _GNU_SOURCE
#include <baton/baton.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LATCH "demo:barrier"

static int port = 6379, jobs = 6;
static int64_t start_ms;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* one clock for every process of the machine */
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 - start_ms;
}

typedef struct result {
    int rc;
    int64_t worked, arrived, passed; /* ms; arrived and passed since the start */
} result;

static baton_latch *open_latch(baton_client **c)
{
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    baton_latch *l = NULL;
    int rc = baton_client_open_url(url, c);
    if (rc != BATON_OK) {
        fprintf(stderr, "barrier: %s: %s\n", baton_strerror(rc), baton_open_errmsg());
        exit(2);
    }
    if ((rc = baton_latch_open(*c, LATCH, &l)) != BATON_OK) {
        fprintf(stderr, "barrier: %s\n", baton_client_errmsg(*c));
        exit(2);
    }
    return l;
}

/* One job: work, arrive (count down), wait for everyone. */
static result job(int index)
{
    baton_client *c;
    baton_latch *l = open_latch(&c);
    result r = {0};
    r.worked = 50 + (index * 137) % 350; /* some jobs are slower than others */
    usleep((useconds_t)r.worked * 1000);
    r.arrived = now_ms();
    r.rc = baton_latch_count_down(l);
    if (r.rc == BATON_OK)
        r.rc = baton_latch_await(l, 30000);
    r.passed = now_ms();
    if (r.rc != BATON_OK)
        fprintf(stderr, "job %d: %s\n", index + 1, baton_client_errmsg(c));
    baton_latch_close(l);
    baton_client_close(c);
    return r;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--port") && i + 1 < argc)
            port = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--jobs") && i + 1 < argc)
            jobs = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: barrier --port P [--jobs N]\n");
            return 2;
        }
    }
    if (jobs < 1 || jobs > 256) {
        fprintf(stderr, "barrier: jobs must be 1..256\n");
        return 2;
    }
    start_ms = now_ms();

    /* Arm the latch: forget what an earlier run left, then set the count. */
    baton_client *c;
    baton_latch *l = open_latch(&c);
    bool set = false;
    int rc = baton_latch_delete(l, NULL);
    if (rc == BATON_OK)
        rc = baton_latch_try_set_count(l, jobs, &set);
    if (rc != BATON_OK || !set) {
        fprintf(stderr, "barrier: cannot arm the latch: %s\n", baton_client_errmsg(c));
        return 2;
    }
    printf("%d jobs in %d processes, latch %s set to %d\n", jobs, jobs, LATCH, jobs);

    int(*pipes)[2] = calloc((size_t)jobs, sizeof *pipes);
    pid_t *pids = calloc((size_t)jobs, sizeof *pids);
    result *res = calloc((size_t)jobs, sizeof *res);
    if (!pipes || !pids || !res)
        return 2;
    for (int j = 0; j < jobs; j++) {
        if (pipe(pipes[j]) != 0)
            return 2;
        fflush(NULL);
        pids[j] = fork();
        if (pids[j] < 0)
            return 2;
        if (pids[j] == 0) {
            result r = job(j);
            if (write(pipes[j][1], &r, sizeof r) != sizeof r)
                _exit(2);
            _exit(0);
        }
        close(pipes[j][1]); /* a job that dies then reads as end of file */
    }

    /* The coordinator waits at the same barrier. */
    int crc = baton_latch_await(l, 30000);
    int64_t coordinator_passed = now_ms();

    int64_t last_arrival = 0, last_pass = 0;
    int ok = 0;
    for (int j = 0; j < jobs; j++) {
        int st = 0;
        if (read(pipes[j][0], &res[j], sizeof res[j]) != sizeof res[j])
            res[j].rc = BATON_ECONN;
        waitpid(pids[j], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            res[j].rc = BATON_ECONN;
        if (res[j].arrived > last_arrival)
            last_arrival = res[j].arrived;
        if (res[j].passed > last_pass)
            last_pass = res[j].passed;
    }
    for (int j = 0; j < jobs; j++) {
        bool failed = res[j].rc != BATON_OK;
        printf("job %d: worked %3lld ms, arrived at +%3lld ms, passed at +%3lld ms%s%s\n", j + 1,
               (long long)res[j].worked, (long long)res[j].arrived, (long long)res[j].passed,
               failed ? "  " : "", failed ? baton_err_name(res[j].rc) : "");
        /* met: passed the barrier, and not before the last job arrived */
        if (res[j].rc == BATON_OK && res[j].passed >= last_arrival)
            ok++;
    }
    printf("coordinator: passed at +%lld ms%s%s\n", (long long)coordinator_passed,
           crc == BATON_OK ? "" : "  ", crc == BATON_OK ? "" : baton_err_name(crc));
    bool good = ok == jobs && crc == BATON_OK && coordinator_passed >= last_arrival;
    printf("barrier: %d/%d jobs met at the barrier; last arrival +%lld ms, all through by "
           "+%lld ms [%s]\n",
           ok, jobs, (long long)last_arrival, (long long)last_pass, good ? "OK" : "BROKEN");

    baton_latch_close(l);
    baton_client_close(c);
    free(pipes);
    free(pids);
    free(res);
    return good ? 0 : 1;
}
