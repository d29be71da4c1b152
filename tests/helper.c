/* The tests' helper; see helper.h. */
#define _GNU_SOURCE
#include "helper.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int th_port(void)
{
    const char *p = getenv("BATON_TEST_PORT");
    cr_assert(p && *p, "BATON_TEST_PORT is not set: run the tests through ctest "
                       "(tests/with-redis.sh starts the server)");
    return atoi(p);
}

const char *th_url(void)
{
    static _Thread_local char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", th_port());
    return url;
}

baton_client *th_client_on(int port, int64_t timeout_ms)
{
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    baton_options o;
    baton_options_init(&o);
    o.url = url;
    o.connect_timeout_ms = timeout_ms;
    o.command_timeout_ms = timeout_ms;
    return th_client(&o);
}

baton_client *th_client(baton_options *opts)
{
    baton_options o;
    if (!opts) {
        baton_options_init(&o);
        opts = &o;
    }
    if (!opts->url)
        opts->url = th_url();
    baton_client *c = NULL;
    int rc = baton_client_open(opts, &c);
    cr_assert_eq(rc, BATON_OK, "baton_client_open: %s (%s)", baton_err_name(rc),
                 baton_open_errmsg());
    return c;
}

redisContext *th_redis_port(int port)
{
    struct timeval tv = {5, 0};
    redisContext *r = redisConnectWithTimeout("127.0.0.1", port, tv);
    cr_assert(r && !r->err, "connect to redis on %d: %s", port, r ? r->errstr : "nomem");
    redisSetTimeout(r, tv);
    return r;
}

redisContext *th_redis(void)
{
    return th_redis_port(th_port());
}

redisReply *th_cmd(redisContext *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(r, fmt, ap);
    va_end(ap);
    cr_assert(rep, "redis command %s failed: %s", fmt, r->errstr);
    return rep;
}

long long th_cmd_int(redisContext *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(r, fmt, ap);
    va_end(ap);
    cr_assert(rep, "redis command %s failed: %s", fmt, r->errstr);
    long long v = 0;
    if (rep->type == REDIS_REPLY_INTEGER)
        v = rep->integer;
    else if (rep->type == REDIS_REPLY_STRING)
        v = atoll(rep->str);
    else
        cr_assert(rep->type == REDIS_REPLY_NIL, "%s: unexpected reply type %d (%s)", fmt, rep->type,
                  rep->type == REDIS_REPLY_ERROR ? rep->str : "");
    freeReplyObject(rep);
    return v;
}

/* The integer after `field` in an INFO section's text, or 0 if the field is absent. */
static long long info_int(redisContext *r, const char *section, const char *field)
{
    redisReply *rep = th_cmd(r, "INFO %s", section);
    cr_assert(rep->type == REDIS_REPLY_STRING, "INFO %s: unexpected reply type %d", section,
              rep->type);
    const char *p = strstr(rep->str, field);
    long long v = p ? atoll(p + strlen(field)) : 0;
    freeReplyObject(rep);
    return v;
}

long long th_commands_processed(redisContext *r)
{
    long long v = info_int(r, "stats", "total_commands_processed:");
    cr_assert(v > 0, "INFO stats has no total_commands_processed");
    return v;
}

long long th_cmdstat(redisContext *r, const char *cmd)
{
    char field[80];
    snprintf(field, sizeof field, "cmdstat_%s:calls=", cmd);
    return info_int(r, "commandstats", field);
}

void th_two_releases_in_one_read(redisContext *r, const char *name)
{
    freeReplyObject(th_cmd(r, "EVAL %s 2 %s redisson_sc:{%s}",
                           "redis.call('incrby', KEYS[1], 1) redis.call('publish', KEYS[2], '1') "
                           "redis.call('incrby', KEYS[1], 1) redis.call('publish', KEYS[2], '2')",
                           name, name));
}

long long th_numsub(redisContext *r, const char *fmt, ...)
{
    char channel[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(channel, sizeof channel, fmt, ap);
    va_end(ap);
    redisReply *rep = th_cmd(r, "PUBSUB NUMSUB %s", channel);
    cr_assert(rep->type == REDIS_REPLY_ARRAY && rep->elements == 2, "PUBSUB NUMSUB %s", channel);
    long long n = rep->element[1]->integer;
    freeReplyObject(rep);
    return n;
}

char *th_name(const char *base)
{
    static int counter;
    char *s = NULL;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    cr_assert(asprintf(&s, "%s-%d-%d-%ld", base, (int)getpid(), ++counter, ts.tv_nsec) > 0);
    return s;
}

const char *th_tmpname(const char *base)
{
    static char pool[256][200];
    static int used;
    cr_assert(used < 256, "th_tmpname: too many names in one test");
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(pool[used], sizeof pool[used], "%s-%d-t%d-%ld", base, (int)getpid(), used, ts.tv_nsec);
    return pool[used++];
}

int64_t th_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void th_sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

pid_t th_fork(int (*fn)(void *), void *arg)
{
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    cr_assert(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        /* A child outlives its test only by mistake (a Criterion assertion in a child waits
         * for an answer that never comes): it must not hold ctest's pipe open for ever. It
         * dies with the test's process (forked from the test's own thread, which ends with
         * it). */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127); /* the parent ended before the line above */
        _exit(fn(arg));
    }
    return pid;
}

int th_wait(pid_t pid)
{
    int st;
    while (waitpid(pid, &st, 0) < 0)
        cr_assert(errno == EINTR, "waitpid: %s", strerror(errno));
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    return 128 + WTERMSIG(st);
}

static bool ping(int port)
{
    struct timeval tv = {0, 200000};
    redisContext *r = redisConnectWithTimeout("127.0.0.1", port, tv);
    bool ok = false;
    if (r && !r->err) {
        redisReply *rep = redisCommand(r, "PING");
        ok = rep != NULL; /* PONG, or NOAUTH from a server with a password */
        if (rep)
            freeReplyObject(rep);
    }
    if (r)
        redisFree(r);
    return ok;
}

/* The pid of the server answering on port: >0 its process_id, 0 it answers but will not
 * say (NOAUTH: a server with a password), -1 nothing answers. */
static long served_by(int port)
{
    struct timeval tv = {0, 200000};
    redisContext *r = redisConnectWithTimeout("127.0.0.1", port, tv);
    long pid = -1;
    if (r && !r->err) {
        redisReply *rep = redisCommand(r, "INFO server");
        if (rep && rep->type == REDIS_REPLY_STRING && strstr(rep->str, "process_id:"))
            pid = atol(strstr(rep->str, "process_id:") + strlen("process_id:"));
        else if (rep)
            pid = 0;
        if (rep)
            freeReplyObject(rep);
    }
    if (r)
        redisFree(r);
    return pid;
}

/* Starts a server on port; false if it exited at once (the port was taken). */
static bool try_start(th_server *s, int port, const char *extra_conf)
{
    s->port = port;
    snprintf(s->dir, sizeof s->dir, "/tmp/baton-test-%d-%d", (int)getpid(), port);
    mkdir(s->dir, 0700);
    char portbuf[16];
    snprintf(portbuf, sizeof portbuf, "%d", port);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        /* A test that fails (aborts) must not leave its server behind. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr))
            _exit(127);
        const char *srv = getenv("BATON_SERVER"); /* valkey-server runs Valkey */
        if (!srv || !*srv)
            srv = "redis-server";
        const char *argv[40] = {srv,    "--port", portbuf, "--bind",       "127.0.0.1", "--dir",
                                s->dir, "--save", "",      "--appendonly", "no"};
        int n = 11;
        char *conf = extra_conf ? strdup(extra_conf) : NULL;
        for (char *tok = conf ? strtok(conf, " ") : NULL; tok && n < 39; tok = strtok(NULL, " "))
            argv[n++] = tok;
        argv[n] = NULL;
        execvp(srv, (char **)argv);
        _exit(127);
    }
    s->pid = pid;
    for (int i = 0; i < 250; i++) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            s->pid = 0;
            return false;
        }
        long who = served_by(port);
        if (who == pid || who == 0)
            return true;
        if (who > 0) { /* another program's server took the port first: ours will exit */
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            s->pid = 0;
            return false;
        }
        th_sleep_ms(20);
    }
    cr_assert_fail("redis-server on port %d did not answer", port);
    return false;
}

void th_server_start_on(th_server *s, int port, const char *extra_conf)
{
    /* a restart on the same port may race the old socket's release: try a few times */
    for (int attempt = 0; attempt < 25; attempt++) {
        if (try_start(s, port, extra_conf))
            return;
        th_sleep_ms(100);
    }
    cr_assert_fail("redis-server on port %d exited at once (port taken?)", port);
}

void th_server_start(th_server *s, const char *extra_conf)
{
    /* A port from a range the shared server's script does not use; retried if taken. */
    srand((unsigned)(getpid() ^ th_ms()));
    for (int attempt = 0; attempt < 20; attempt++) {
        int port = 40000 + rand() % 20000;
        if (ping(port))
            continue;
        if (try_start(s, port, extra_conf))
            return;
    }
    cr_assert_fail("no free port for a redis-server");
}

bool th_server_try_start(th_server *s, const char *extra_conf)
{
    unsigned short r = 0;
    if (getrandom(&r, sizeof r, 0) != sizeof r)
        return false;
    int port = 40000 + r % 20000;
    return !ping(port) && try_start(s, port, extra_conf);
}

void th_server_stop(th_server *s)
{
    if (s->pid <= 0)
        return;
    kill(s->pid, SIGKILL);
    th_wait(s->pid);
    s->pid = 0;
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s->dir);
    if (system(cmd) != 0) {
        /* leftover temp dir: harmless */
    }
}
