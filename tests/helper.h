/*
 * The tests' small helper: the private redis-server of the run (started by
 * tests/with-redis.sh, port in BATON_TEST_PORT), clients, a raw hiredis connection for
 * looking at Redis directly, unique names, time, processes, and servers of a test's own.
 */
#ifndef BATON_TEST_HELPER_H
#define BATON_TEST_HELPER_H

#include <baton/baton.h>
#include <criterion/criterion.h>
#include <hiredis/hiredis.h>
#include <sys/types.h>

/* The shared test server's port. */
int th_port(void);
/* "redis://127.0.0.1:<port>" of the shared server. */
const char *th_url(void);
/* A client on the shared server (asserts success); options may be NULL. */
baton_client *th_client(baton_options *opts);
/* A client on a server of the test's own (port), with connect and command timeouts of
 * timeout_ms: for tests that stop that server under it. Asserts success. */
baton_client *th_client_on(int port, int64_t timeout_ms);
/* A raw hiredis connection to the shared server (or port), asserting success. */
redisContext *th_redis(void);
redisContext *th_redis_port(int port);
/* Runs a command on a raw connection and asserts it did not fail; caller frees. */
redisReply *th_cmd(redisContext *r, const char *fmt, ...);
long long th_cmd_int(redisContext *r, const char *fmt, ...);
/* Commands the server has processed (INFO stats): with a count before and after, a test
 * proves that a call sent nothing (the second INFO itself counts one). */
long long th_commands_processed(redisContext *r);
/* Calls of one command (lower case, "evalsha") since the server started or the last
 * CONFIG RESETSTAT (INFO commandstats); 0 if it never ran. */
long long th_cmdstat(redisContext *r, const char *cmd);
/* What two of baton's semaphore releases of 1 permit write and publish (counts "1", then
 * "2"), in one script: one reply, so both messages reach a subscriber in one read. */
void th_two_releases_in_one_read(redisContext *r, const char *name);
/* Subscribers of a channel (PUBSUB NUMSUB), the channel given printf-style. */
long long th_numsub(redisContext *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A name unique to this run: "<base>-<pid>-<counter>-<random>". Caller frees. */
char *th_name(const char *base);
/* The same in storage the helper owns for the test process's life: do not free. */
const char *th_tmpname(const char *base);
/* Monotonic milliseconds. */
int64_t th_ms(void);
void th_sleep_ms(int64_t ms);
/* Forks a child that runs fn(arg) and exits with its return value. */
pid_t th_fork(int (*fn)(void *), void *arg);
/* Waits for a child; returns its exit status, or 128 + signal. */
int th_wait(pid_t pid);

/* A private redis-server of a test's own, started on a free port and stopped by pid. */
typedef struct th_server {
    int port;
    pid_t pid;
    char dir[128];
} th_server;
void th_server_start(th_server *s, const char *extra_conf);
/* One attempt on a random free port: false (nothing left running) when the server exited
 * at once, for a caller whose extra_conf names other ports to choose again. */
bool th_server_try_start(th_server *s, const char *extra_conf);
void th_server_start_on(th_server *s, int port, const char *extra_conf);
void th_server_stop(th_server *s);

/* The factor on bounds that include starting processes (sh, date, baton) or that a
 * sanitizer slows: 10 under ThreadSanitizer, 4 under AddressSanitizer, else 1. */
#if defined(__SANITIZE_THREAD__)
#define SLOW 10
#elif defined(__SANITIZE_ADDRESS__)
#define SLOW 4
#else
#define SLOW 1
#endif

#endif
