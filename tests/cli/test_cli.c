/*
 * The baton command, run as a program (fork/exec of the built binary) against the test
 * server: mutual exclusion of concurrent runs, --wait, exit status passthrough, signal
 * forwarding and release, a lease running out while COMMAND runs, status (text and JSON)
 * against the real state, unlock --force, bad usage, and servers that cannot be reached
 * or refuse the password.
 */
#define _GNU_SOURCE
#include "cli_helper.h"
#include "faultproxy.h"

#include "new_assert.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

TestSuite(cli, .timeout = 60);

/* The lock key's existence, read directly. */
static long long exists(const char *key)
{
    redisContext *r = th_redis();
    long long n = th_cmd_int(r, "EXISTS %s", key);
    redisFree(r);
    return n;
}

/* A client holding `name` (watchdog lease) on this thread. */
static baton_client *hold(const char *name, baton_lock **out)
{
    baton_client *c = th_client(NULL);
    cr_assert(eq(int, baton_lock_open(c, name, out), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(*out, BATON_LEASE_WATCHDOG), BATON_OK));
    return c;
}

/* ---------------------------------------------------------------- mutual exclusion --- */

Test(cli, twenty_concurrent_runs_leave_exactly_twenty)
{
    const char *name = th_tmpname("cli-count");
    char *file = cli_path("counter");
    FILE *f = fopen(file, "w");
    fputs("0\n", f);
    fclose(f);
    /* read, pause, write: without the lock, concurrent runs would lose updates */
    const char *script = "n=$(cat \"$1\"); sleep 0.02; echo $((n + 1)) > \"$1\"";
    pid_t pids[20];
    for (int i = 0; i < 20; i++)
        pids[i] = cli_spawn(ARGS("lock", name, "--", "sh", "-c", script, "sh", file));
    for (int i = 0; i < 20; i++) {
        int st = th_wait(pids[i]);
        char *err = cli_bg_err(pids[i]);
        cr_assert(eq(int, st, 0), "run %d: %s", i, err);
        free(err);
    }
    char *content = cli_read_file(file);
    cr_assert(eq(str, content, "20\n"));
    cr_assert(eq(i64, exists(name), 0));
    free(content);
    free(file);
}

/* ---------------------------------------------------------------- --wait ------------- */

Test(cli, wait_gives_up_after_about_a_second_without_running)
{
    const char *name = th_tmpname("cli-wait");
    char *marker = cli_path("marker");
    baton_lock *l;
    baton_client *c = hold(name, &l);
    cli_result r;
    cli_exec(&r, ARGS("lock", name, "--wait", "1s", "--", "touch", marker));
    cr_assert(eq(int, r.status, 124), "stderr: %s", r.err);
    cr_assert(ge(i64, r.ms, 990), "%lld ms", (long long)r.ms);
    cr_assert(le(i64, r.ms, 1400), "%lld ms", (long long)r.ms);
    cr_assert(access(marker, F_OK) != 0, "COMMAND ran");
    cr_assert(strstr(r.err, "not acquired") != NULL, "stderr: %s", r.err);
    cli_result_free(&r);

    /* --wait 0: one attempt, at once; --wait=250ms form */
    cli_exec(&r, ARGS("lock", name, "--wait", "0", "--", "touch", marker));
    cr_assert(eq(int, r.status, 124));
    cr_assert(le(i64, r.ms, 400), "%lld ms", (long long)r.ms);
    cli_result_free(&r);
    cli_exec(&r, ARGS("lock", "--wait=250ms", name, "--", "touch", marker));
    cr_assert(eq(int, r.status, 124));
    cr_assert(ge(i64, r.ms, 245), "%lld ms", (long long)r.ms);
    cli_result_free(&r);
    cr_assert(access(marker, F_OK) != 0, "COMMAND ran");

    /* the holder keeps its lock; once released, the same command runs */
    bool mine = false;
    cr_assert(eq(int, baton_lock_is_held_by_current_thread(l, &mine), BATON_OK));
    cr_assert(mine);
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    cli_exec(&r, ARGS("lock", name, "--wait", "1s", "--", "touch", marker));
    cr_assert(eq(int, r.status, 0), "stderr: %s", r.err);
    cr_assert(access(marker, F_OK) == 0);
    cli_result_free(&r);
    baton_lock_close(l);
    baton_client_close(c);
    free(marker);
}

/* A plain lock held on a name keeps `rwlock --read` and `--write` out (busy, 124), and its
 * holder keeps it: the read lock once got in and its release deleted the plain lock. */
Test(cli, rwlock_is_busy_while_a_plain_lock_holds_the_name)
{
    const char *name = th_tmpname("cli-rw-plain");
    char *marker = cli_path("rw-plain-marker");
    baton_lock *l;
    baton_client *c = hold(name, &l);
    const char *parts[2] = {"--read", "--write"};
    for (int i = 0; i < 2; i++) {
        cli_result r;
        cli_exec(&r, ARGS("rwlock", name, parts[i], "-n", "--", "touch", marker));
        cr_assert(eq(int, r.status, 124), "%s: status %d, stderr: %s", parts[i], r.status, r.err);
        cli_result_free(&r);
        cr_assert(access(marker, F_OK) != 0, "%s: COMMAND ran", parts[i]);
    }
    redisContext *rc = th_redis();
    cr_assert(eq(i64, th_cmd_int(rc, "HLEN %s", name), 1), "the plain lock's hash was written");
    redisFree(rc);
    bool mine = false;
    cr_assert(eq(int, baton_lock_is_held_by_current_thread(l, &mine), BATON_OK));
    cr_assert(mine, "the holder lost its lock");
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    cli_result r;
    cli_exec(&r, ARGS("rwlock", name, "--read", "-n", "--", "touch", marker));
    cr_assert(eq(int, r.status, 0), "stderr: %s", r.err);
    cli_result_free(&r);
    cr_assert(access(marker, F_OK) == 0);
    cr_assert(eq(i64, exists(name), 0));
    baton_lock_close(l);
    baton_client_close(c);
    free(marker);
}

Test(cli, a_waiting_run_gets_the_lock_when_the_holder_releases)
{
    const char *name = th_tmpname("cli-handover");
    char *marker = cli_path("marker");
    baton_lock *l;
    baton_client *c = hold(name, &l);
    pid_t pid = cli_spawn(ARGS("lock", name, "--", "touch", marker));
    th_sleep_ms(300);
    cr_assert(access(marker, F_OK) != 0, "ran while the lock was held");
    int64_t t0 = th_ms();
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    cr_assert(eq(int, th_wait(pid), 0));
    cr_assert(le(i64, th_ms() - t0, 500), "woken after %lld ms", (long long)(th_ms() - t0));
    cr_assert(access(marker, F_OK) == 0);
    baton_lock_close(l);
    baton_client_close(c);
    free(marker);
}

/* ---------------------------------------------------------------- COMMAND ------------ */

Test(cli, exit_status_passes_through)
{
    const char *name = th_tmpname("cli-status");
    const char *codes[] = {"0", "1", "42"};
    for (int i = 0; i < 3; i++) {
        char script[32];
        snprintf(script, sizeof script, "exit %s", codes[i]);
        cli_result r;
        cli_exec(&r, ARGS("lock", name, "--", "sh", "-c", script));
        cr_assert(eq(int, r.status, atoi(codes[i])), "exit %s: stderr %s", codes[i], r.err);
        cr_assert(eq(i64, exists(name), 0), "lock left behind after exit %s", codes[i]);
        cli_result_free(&r);
    }
    cli_result r;
    cli_exec(&r, ARGS("lock", name, "--", "sh", "-c", "kill -KILL $$"));
    cr_assert(eq(int, r.status, 128 + SIGKILL));
    cli_result_free(&r);
    cli_exec(&r, ARGS("lock", name, "--", "/nonexistent/command"));
    cr_assert(eq(int, r.status, 127));
    cr_assert(strstr(r.err, "not found") != NULL, "stderr: %s", r.err);
    cli_result_free(&r);
    cli_exec(&r, ARGS("lock", name, "--", "/dev/null"));
    cr_assert(eq(int, r.status, 126));
    cli_result_free(&r);
    cr_assert(eq(i64, exists(name), 0));
}

Test(cli, command_keeps_stdin_stdout_and_inherited_descriptors)
{
    const char *name = th_tmpname("cli-stdio");
    char *file = cli_path("fd3");
    cli_result r;
    /* stdin and stdout through baton */
    cli_exec_program(
        &r, ARGS("/bin/sh", "-c", "echo hello | \"$0\" lock \"$1\" -- cat", BATON_CLI_PATH, name));
    cr_assert(eq(int, r.status, 0), "stderr: %s", r.err);
    cr_assert(eq(str, r.out, "hello\n"));
    cli_result_free(&r);
    /* a descriptor the caller opened reaches COMMAND */
    cli_exec_program(&r,
                     ARGS("/bin/sh", "-c", "\"$0\" lock \"$1\" -- sh -c 'echo three >&3' 3>\"$2\"",
                          BATON_CLI_PATH, name, file));
    cr_assert(eq(int, r.status, 0), "stderr: %s", r.err);
    char *content = cli_read_file(file);
    cr_assert(eq(str, content, "three\n"));
    free(content);
    cli_result_free(&r);
    /* ...but none of baton's own (its connections to the server) */
    /* (a builtin and a glob: no pipe or child of the shell's own in the listing) */
    const char *list = "cd /proc/$$/fd && echo *";
    cli_exec_program(&r, ARGS("/bin/sh", "-c", list));
    char *direct = strdup(r.out);
    cli_result_free(&r);
    cli_exec(&r, ARGS("lock", name, "--", "sh", "-c", list));
    cr_assert(eq(int, r.status, 0));
    cr_assert(eq(str, r.out, direct));
    free(direct);
    cli_result_free(&r);
    free(file);
}

Test(cli, sigterm_and_sigint_reach_the_command_and_the_lock_is_released_after)
{
    const int sigs[] = {SIGTERM, SIGINT};
    for (int i = 0; i < 2; i++) {
        const char *name = th_tmpname("cli-signal");
        char *ready = cli_path("ready");
        char *got = cli_path("got");
        char script[512];
        snprintf(script, sizeof script,
                 "trap 'echo caught > \"%s\"; exit 7' %s; touch \"%s\"; "
                 "while :; do sleep 0.05; done",
                 got, sigs[i] == SIGTERM ? "TERM" : "INT", ready);
        pid_t pid = cli_spawn(ARGS("lock", name, "--", "sh", "-c", script));
        cr_assert(cli_wait_file(ready, 5000), "COMMAND did not start");
        cr_assert(eq(i64, exists(name), 1), "the lock is not held while COMMAND runs");
        kill(pid, sigs[i]);
        int st = th_wait(pid);
        char *err = cli_bg_err(pid);
        cr_assert(eq(int, st, 7), "signal %d: stderr %s", sigs[i], err);
        free(err);
        char *content = cli_read_file(got);
        cr_assert(content && strcmp(content, "caught\n") == 0, "the trap did not run");
        free(content);
        cr_assert(eq(i64, exists(name), 0), "the lock outlived baton");
        free(ready);
        free(got);
    }
}

Test(cli, command_killed_by_the_forwarded_signal_gives_128_plus_it)
{
    const char *name = th_tmpname("cli-signal-default");
    char *ready = cli_path("ready");
    char script[256];
    snprintf(script, sizeof script, "touch \"%s\"; exec sleep 30", ready);
    pid_t pid = cli_spawn(ARGS("lock", name, "--", "sh", "-c", script));
    cr_assert(cli_wait_file(ready, 5000));
    th_sleep_ms(50); /* let sh exec sleep */
    int64_t t0 = th_ms();
    kill(pid, SIGTERM);
    cr_assert(eq(int, th_wait(pid), 128 + SIGTERM));
    cr_assert(le(i64, th_ms() - t0, 1000));
    cr_assert(eq(i64, exists(name), 0));
    free(ready);
}

Test(cli, a_signal_while_waiting_ends_baton_and_runs_nothing)
{
    const char *name = th_tmpname("cli-wait-signal");
    char *marker = cli_path("marker");
    baton_lock *l;
    baton_client *c = hold(name, &l);
    pid_t pid = cli_spawn(ARGS("lock", name, "--wait", "20s", "--", "touch", marker));
    th_sleep_ms(400);
    int64_t t0 = th_ms();
    kill(pid, SIGTERM);
    cr_assert(eq(int, th_wait(pid), 128 + SIGTERM));
    cr_assert(le(i64, th_ms() - t0, 1000));
    cr_assert(access(marker, F_OK) != 0);
    bool mine = false;
    cr_assert(eq(int, baton_lock_is_held_by_current_thread(l, &mine), BATON_OK));
    cr_assert(mine, "the holder lost its lock");
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    baton_lock_close(l);
    baton_client_close(c);
    free(marker);
}

/* ---------------------------------------------------------------- baton killed ------- */

/*
 * Runs `baton lock` with COMMAND `script` (which writes its pid to the file "cmdpid"), kills
 * baton with SIGKILL once COMMAND started, and returns the ms until COMMAND was gone. The
 * test process is a child subreaper, so COMMAND becomes its child and can be reaped here.
 */
static int64_t ms_until_command_ends_after_kill9(const char *const *args, const char *pidfile)
{
    cr_assert(eq(int, prctl(PR_SET_CHILD_SUBREAPER, 1), 0));
    pid_t pid = cli_spawn(args);
    cr_assert(cli_wait_file(pidfile, 5000), "COMMAND did not start");
    th_sleep_ms(100); /* let sh set its trap or exec */
    char *text = cli_read_file(pidfile);
    pid_t cmd = (pid_t)atoi(text);
    free(text);
    int64_t t0 = th_ms();
    kill(pid, SIGKILL);
    cr_assert(eq(int, th_wait(pid), 128 + SIGKILL));
    int64_t gone = -1;
    while (gone < 0 && th_ms() - t0 < 10000) {
        int st;
        pid_t r = waitpid(cmd, &st, WNOHANG);
        if (r == cmd || (r < 0 && errno == ECHILD && kill(cmd, 0) != 0))
            gone = th_ms() - t0;
        else
            th_sleep_ms(10);
    }
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    } /* baton's reaper, once done */
    cr_assert(ge(i64, gone, 0), "COMMAND %d outlived baton by 10 s", (int)cmd);
    return gone;
}

Test(cli, kill_9_of_baton_ends_command_within_a_second)
{
    const char *name = th_tmpname("cli-kill9");
    char *pidfile = cli_path("cmdpid");
    char script[256];
    snprintf(script, sizeof script, "echo $$ > \"%s\"; exec sleep 30", pidfile);
    int64_t ms =
        ms_until_command_ends_after_kill9(ARGS("lock", name, "--", "sh", "-c", script), pidfile);
    cr_assert(le(i64, ms, 1000), "COMMAND ended %lld ms after baton", (long long)ms);
    free(pidfile);
}

Test(cli, kill_9_of_baton_sigkills_a_command_ignoring_sigterm_after_kill_after)
{
    const char *name = th_tmpname("cli-kill9-term");
    char *pidfile = cli_path("cmdpid");
    char script[256];
    snprintf(script, sizeof script, "trap '' TERM; echo $$ > \"%s\"; while :; do sleep 0.05; done",
             pidfile);
    int64_t ms = ms_until_command_ends_after_kill9(
        ARGS("lock", name, "--kill-after", "500ms", "--", "sh", "-c", script), pidfile);
    cr_assert(ge(i64, ms, 450), "COMMAND ended %lld ms after baton", (long long)ms);
    cr_assert(le(i64, ms, 1500), "COMMAND ended %lld ms after baton", (long long)ms);
    free(pidfile);
}

/* ---------------------------------------------------------------- loss --------------- */

Test(cli, a_lease_running_out_while_command_runs_is_a_loss)
{
    const char *name = th_tmpname("cli-lease");
    char *pidfile = cli_path("pid");
    char script[256];
    snprintf(script, sizeof script, "echo $$ > \"%s\"; exec sleep 30", pidfile);
    cli_result r;
    cli_exec(&r, ARGS("lock", name, "--lease", "1s", "--", "sh", "-c", script));
    cr_assert(eq(int, r.status, 122), "stderr: %s", r.err);
    cr_assert(ge(i64, r.ms, 900), "%lld ms", (long long)r.ms);
    cr_assert(le(i64, r.ms, 1500), "%lld ms", (long long)r.ms);
    cr_assert(strstr(r.err, "lost") != NULL, "stderr: %s", r.err);
    char *pid = cli_read_file(pidfile);
    cr_assert(pid != NULL);
    /* COMMAND was terminated and reaped: its pid is gone */
    cr_assert(kill(atoi(pid), 0) != 0 && errno == ESRCH, "COMMAND %s still runs", pid);
    free(pid);
    cli_result_free(&r);
    free(pidfile);
}

/* elect's COMMAND: "start TERM NS" when it starts, "end TERM NS" when SIGTERM ends it. */
static const char *const MARK_SCRIPT =
    "trap 'echo end $BATON_FENCING_TOKEN $(date +%s%N) >> \"$0\"; exit 0' TERM; "
    "echo start $BATON_FENCING_TOKEN $(date +%s%N) >> \"$0\"; while :; do sleep 0.02; done";

/* The n-th line of the marks file that starts with `what` ("start" or "end"): its term and
 * time (ns since the epoch). False if there is none yet. */
static bool read_mark(const char *path, const char *what, int n, long long *term, long long *ns)
{
    char *text = cli_read_file(path);
    bool found = false;
    for (char *line = text ? strtok(text, "\n") : NULL; line && !found; line = strtok(NULL, "\n")) {
        char w[8];
        if (sscanf(line, "%7s %lld %lld", w, term, ns) == 3 && strcmp(w, what) == 0 && n-- == 0)
            found = true;
    }
    free(text);
    return found;
}

static bool wait_mark(const char *path, const char *what, int n, long long *term, long long *ns)
{
    for (int i = 0; i < 500; i++) {
        if (read_mark(path, what, n, term, ns))
            return true;
        th_sleep_ms(10);
    }
    return false;
}

/* elect --lease: a fixed leadership, not renewed; COMMAND is ended when it runs out (exit
 * 122), and the standby takes over then, with a higher term, after the first COMMAND ended. */
Test(cli, elect_lease_ends_the_command_and_the_standby_takes_over)
{
    const char *name = th_tmpname("cli-el-lease");
    char *log = cli_path("marks");
    pid_t a = cli_spawn(ARGS("elect", name, "--lease", "1500ms", "--kill-after", "500ms", "--",
                             "sh", "-c", MARK_SCRIPT, log));
    long long t1, s1, t2, s2, te, e1;
    cr_assert(wait_mark(log, "start", 0, &t1, &s1), "the first COMMAND did not start");
    pid_t b =
        cli_spawn(ARGS("elect", name, "--lease", "1500ms", "--", "sh", "-c", MARK_SCRIPT, log));
    int status = th_wait(a);
    char *err = cli_bg_err(a);
    cr_assert(eq(int, status, 122), "the leader whose lease ran out exits 122: %s", err);
    cr_assert(strstr(err, "--lease ran out") != NULL, "stderr: %s", err);
    free(err);
    cr_assert(wait_mark(log, "start", 1, &t2, &s2), "the standby did not take over");
    cr_assert(read_mark(log, "end", 0, &te, &e1), "the first COMMAND got no SIGTERM");
    cr_assert(eq(i64, te, t1));
    cr_assert(gt(i64, t2, t1), "the term rises: %lld then %lld", t1, t2);
    cr_assert(lt(i64, e1, s2), "the first COMMAND ended before the next started");
    long long took = (s2 - s1) / 1000000;
    cr_log_info("elect --lease 1500ms: the next COMMAND started %lld ms after the first", took);
    cr_assert(ge(i64, took, 1300), "the lease was not kept: %lld ms", took);
    cr_assert(le(i64, took, 1500 + 700), "the standby took over %lld ms after", took);
    kill(b, SIGTERM);
    cr_assert(eq(int, th_wait(b), 0), "a COMMAND that exits 0 on SIGTERM: baton exits 0");
    /* --lease excludes --watchdog, and must be more than 0 */
    cli_result r;
    cli_exec(&r, ARGS("elect", name, "--lease", "1s", "--watchdog", "3s", "--", "true"));
    cr_assert(eq(int, r.status, 2), "%s", r.err);
    cr_assert(strstr(r.err, "exclude") != NULL, "%s", r.err);
    cli_result_free(&r);
    cli_exec(&r, ARGS("elect", name, "--lease", "0", "--", "true"));
    cr_assert(eq(int, r.status, 2), "%s", r.err);
    cli_result_free(&r);
    free(log);
}

Test(cli, a_deleted_lock_is_reported_lost_within_one_renewal_period)
{
    const char *name = th_tmpname("cli-lost");
    char *pidfile = cli_path("pid");
    char script[256];
    snprintf(script, sizeof script, "echo $$ > \"%s.tmp\"; mv \"%s.tmp\" \"%s\"; exec sleep 30",
             pidfile, pidfile, pidfile);
    pid_t pid = cli_spawn(ARGS("lock", name, "--watchdog", "1500ms", "--", "sh", "-c", script));
    cr_assert(cli_wait_file(pidfile, 5000), "COMMAND did not start");
    char *child = cli_read_file(pidfile);
    th_sleep_ms(100);
    redisContext *r = th_redis();
    int64_t t0 = th_ms();
    cr_assert(eq(i64, th_cmd_int(r, "DEL %s", name), 1));
    int st = th_wait(pid);
    int64_t took = th_ms() - t0;
    char *err = cli_bg_err(pid);
    cr_assert(eq(int, st, 122), "stderr: %s", err);
    /* renewal every 1500 / 3 = 500 ms, plus slack for SIGTERM and exit */
    cr_assert(le(i64, took, 800), "reported after %lld ms", (long long)took);
    cr_assert(strstr(err, "lost") != NULL, "stderr: %s", err);
    cr_assert(kill(atoi(child), 0) != 0 && errno == ESRCH, "COMMAND %s still runs", child);
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s", name), 0));
    free(err);
    free(child);
    redisFree(r);
    free(pidfile);
}

Test(cli, a_lock_taken_over_is_reported_lost)
{
    const char *name = th_tmpname("cli-takeover");
    char *ready = cli_path("ready");
    char script[256];
    snprintf(script, sizeof script, "touch \"%s\"; exec sleep 30", ready);
    pid_t pid = cli_spawn(ARGS("lock", name, "--watchdog", "600ms", "--", "sh", "-c", script));
    cr_assert(cli_wait_file(ready, 5000));
    /* another owner in its place */
    redisContext *r = th_redis();
    freeReplyObject(th_cmd(r, "DEL %s", name));
    freeReplyObject(th_cmd(r, "HSET %s someone-else:1 1", name));
    int64_t t0 = th_ms();
    cr_assert(eq(int, th_wait(pid), 122));
    cr_assert(le(i64, th_ms() - t0, 500));
    /* baton never touched the other owner's hold */
    cr_assert(eq(i64, th_cmd_int(r, "HGET %s someone-else:1", name), 1));
    redisFree(r);
    free(ready);
}

Test(cli, command_gets_the_fencing_token)
{
    const char *name = th_tmpname("cli-token");
    long long seen[3];
    for (int i = 0; i < 3; i++) {
        cli_result r;
        cli_exec(&r, ARGS("lock", name, "--", "sh", "-c", "echo \"$BATON_FENCING_TOKEN\""));
        cr_assert(eq(int, r.status, 0), "stderr: %s", r.err);
        char *end;
        seen[i] = strtoll(r.out, &end, 10);
        cr_assert(eq(str, end, "\n"), "not a number: %s", r.out);
        cr_assert(seen[i] > 0);
        if (i)
            cr_assert(gt(i64, seen[i], seen[i - 1]));
        cli_result_free(&r);
    }
    redisContext *r = th_redis();
    cr_assert(eq(i64, th_cmd_int(r, "GET redisson_lock_token:{%s}", name), seen[2]));
    redisFree(r);
    /* a token already in the environment is replaced, not duplicated */
    setenv("BATON_FENCING_TOKEN", "stale", 1);
    cli_result res;
    cli_exec(&res, ARGS("lock", name, "--", "sh", "-c", "env | grep -c ^BATON_FENCING_TOKEN="));
    unsetenv("BATON_FENCING_TOKEN");
    cr_assert(eq(str, res.out, "1\n"));
    cli_result_free(&res);
}

/* ---------------------------------------------------------------- multi-lock --------- */

Test(cli, several_names_hold_all_of_them_with_a_token_each)
{
    const char *a = th_tmpname("cli-multi-a");
    const char *b = th_tmpname("cli-multi-b");
    char *ready = cli_path("ready");
    char *tokens = cli_path("tokens");
    char script[512];
    snprintf(script, sizeof script,
             "echo \"$BATON_FENCING_TOKEN\" > \"%s\"; touch \"%s\"; sleep 0.5", tokens, ready);
    pid_t pid = cli_spawn(ARGS("lock", a, b, "--", "sh", "-c", script));
    cr_assert(cli_wait_file(ready, 5000));
    cr_assert(eq(i64, exists(a), 1));
    cr_assert(eq(i64, exists(b), 1));
    cr_assert(eq(int, th_wait(pid), 0));
    cr_assert(eq(i64, exists(a), 0));
    cr_assert(eq(i64, exists(b), 0));
    /* the tokens, in NAME order */
    redisContext *r = th_redis();
    char expected[64];
    snprintf(expected, sizeof expected, "%lld,%lld\n",
             th_cmd_int(r, "GET redisson_lock_token:{%s}", a),
             th_cmd_int(r, "GET redisson_lock_token:{%s}", b));
    char *got = cli_read_file(tokens);
    cr_assert(eq(str, got, expected));
    free(got);
    redisFree(r);
    free(ready);
    free(tokens);
}

Test(cli, several_names_are_all_or_none)
{
    const char *a = th_tmpname("cli-multi-a");
    const char *b = th_tmpname("cli-multi-b");
    char *marker = cli_path("marker");
    baton_lock *l;
    baton_client *c = hold(b, &l);
    cli_result r;
    cli_exec(&r, ARGS("lock", a, b, "--wait", "500ms", "--", "touch", marker));
    cr_assert(eq(int, r.status, 124), "stderr: %s", r.err);
    cr_assert(access(marker, F_OK) != 0);
    cr_assert(eq(i64, exists(a), 0), "a member was left held");
    cli_result_free(&r);
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    baton_lock_close(l);
    baton_client_close(c);
    free(marker);
}

Test(cli, overlapping_groups_in_any_order_count_exactly)
{
    /* "A B", "B A" and "B" all guard the counter through B; none may deadlock */
    const char *a = th_tmpname("cli-grp-a");
    const char *b = th_tmpname("cli-grp-b");
    char *file = cli_path("counter");
    FILE *f = fopen(file, "w");
    fputs("0\n", f);
    fclose(f);
    const char *script = "n=$(cat \"$1\"); sleep 0.02; echo $((n + 1)) > \"$1\"";
    pid_t pids[12];
    for (int i = 0; i < 12; i++) {
        if (i % 3 == 0)
            pids[i] = cli_spawn(ARGS("lock", a, b, "--", "sh", "-c", script, "sh", file));
        else if (i % 3 == 1)
            pids[i] = cli_spawn(ARGS("lock", b, a, "--", "sh", "-c", script, "sh", file));
        else
            pids[i] = cli_spawn(ARGS("lock", b, "--", "sh", "-c", script, "sh", file));
    }
    for (int i = 0; i < 12; i++)
        cr_assert(eq(int, th_wait(pids[i]), 0), "run %d", i);
    char *content = cli_read_file(file);
    cr_assert(eq(str, content, "12\n"));
    free(content);
    free(file);
}

/* ---------------------------------------------------------------- fair lock ---------- */

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
        /* each waiter is a baton process of this host: its client's record names it */
        char host[256] = "";
        cr_assert(eq(int, gethostname(host, sizeof host - 1), 0));
        cr_assert(eq(str, json_get(w, "host")->string, host), "%s", r.out);
        bool ours = false;
        for (int k = 0; k < 3; k++)
            ours = ours || (int64_t)json_get(w, "pid")->number == (int64_t)pids[k];
        cr_assert(ours, "waiter %zu: pid %f is none of the three", i, json_get(w, "pid")->number);
    }
    json_free(j);
    cli_result_free(&r);

    /* the text form lists the same queue */
    cli_exec(&r, ARGS("status", name));
    cr_assert(strstr(r.out, "fair lock, held") != NULL, "%s", r.out);
    cr_assert(strstr(r.out, "queue (3 waiting") != NULL, "%s", r.out);
    char want[64];
    snprintf(want, sizeof want, "pid %d", (int)pids[0]);
    cr_assert(strstr(r.out, want) != NULL, "the first waiter's pid: %s", r.out);
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

/* ---------------------------------------------------------------- semaphore ---------- */

Test(cli, semaphore_caps_concurrency_and_returns_its_permits)
{
    const char *name = th_tmpname("cli-sem");
    char *dir = cli_path("inside");
    char *log = cli_path("log");
    cr_assert(mkdir(dir, 0700) == 0);
    /* each run: enter, count who is inside, stay a while, leave */
    const char *script = "touch \"$1/$$\"; ls \"$1\" | wc -l >> \"$2\"; sleep 0.2; "
                         "rm \"$1/$$\"";
    pid_t pids[6];
    for (int i = 0; i < 6; i++)
        pids[i] = cli_spawn(
            ARGS("semaphore", name, "--permits", "2", "--", "sh", "-c", script, "sh", dir, log));
    for (int i = 0; i < 6; i++)
        cr_assert(eq(int, th_wait(pids[i]), 0), "run %d", i);
    char *seen = cli_read_file(log);
    int peak = 0, runs = 0;
    for (char *line = strtok(seen, "\n"); line; line = strtok(NULL, "\n"), runs++)
        if (atoi(line) > peak)
            peak = atoi(line);
    cr_assert(eq(int, runs, 6));
    cr_assert(eq(int, peak, 2), "peak concurrency %d", peak);
    free(seen);
    redisContext *r = th_redis();
    cr_assert(eq(i64, th_cmd_int(r, "GET %s", name), 2), "permits not returned");
    redisFree(r);
    free(dir);
    free(log);
}

/* The default: permit leases renewed while COMMAND runs; a baton killed with -9 gives its
 * permit back within the lease (--watchdog), without any release. */
Test(cli, semaphore_permit_leases_come_back_from_a_killed_baton)
{
    const char *name = th_tmpname("cli-sem-lease");
    redisContext *r = th_redis();
    pid_t holder = cli_spawn(
        ARGS("semaphore", name, "--permits", "1", "--watchdog", "600ms", "--", "sleep", "30"));
    int64_t t0 = th_ms();
    while (th_cmd_int(r, "ZCARD {%s}:timeout", name) == 0 && th_ms() - t0 < 3000)
        th_sleep_ms(10);
    cr_assert(eq(i64, th_cmd_int(r, "ZCARD {%s}:timeout", name), 1), "a permit lease is held");
    th_sleep_ms(1300); /* two leases: renewed meanwhile */
    redisReply *rep = th_cmd(r, "ZRANGE {%s}:timeout 0 0 WITHSCORES", name);
    long long end = atoll(rep->element[1]->str);
    freeReplyObject(rep);
    rep = th_cmd(r, "TIME");
    long long now = atoll(rep->element[0]->str) * 1000 + atoll(rep->element[1]->str) / 1000;
    freeReplyObject(rep);
    cr_assert(gt(i64, end, now), "renewed while COMMAND runs");
    cr_assert(le(i64, end, now + 600));
    cr_assert(eq(int, kill(holder, SIGKILL), 0));
    cr_assert(eq(int, th_wait(holder), 128 + SIGKILL));
    int64_t killed = th_ms();
    cli_result res;
    cli_exec(&res, ARGS("semaphore", name, "--wait", "5s", "--", "true"));
    cr_assert(eq(int, res.status, 0), "stderr: %s", res.err);
    int64_t back = th_ms() - killed;
    cr_assert(le(i64, back, 600 + 1000), "back after %lld ms", (long long)back);
    cli_result_free(&res);
    cr_assert(eq(i64, th_cmd_int(r, "ZCARD {%s}:timeout", name), 0), "nothing left held");
    rep = th_cmd(r, "GET %s", name);
    cr_assert(eq(str, rep->str, "1"));
    freeReplyObject(rep);

    /* --counting: Redisson's RSemaphore, no lease */
    const char *counting = th_tmpname("cli-sem-counting");
    cli_exec(&res, ARGS("semaphore", counting, "--counting", "--permits", "2", "--take", "2", "--",
                        "true"));
    cr_assert(eq(int, res.status, 0), "stderr: %s", res.err);
    cli_result_free(&res);
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS {%s}:timeout", counting), 0));
    cli_exec(&res, ARGS("semaphore", counting, "--counting", "--watchdog", "1s", "--", "true"));
    cr_assert(eq(int, res.status, 2), "--watchdog is for leases: %s", res.err);
    cli_result_free(&res);
    redisFree(r);
}

Test(cli, semaphore_wait_take_and_status)
{
    const char *name = th_tmpname("cli-sem-wait");
    char *marker = cli_path("marker");
    cli_result r;
    /* --permits sets the count only once */
    cli_exec(&r, ARGS("semaphore", name, "--permits", "3", "--take", "3", "--", "true"));
    cr_assert(eq(int, r.status, 0), "stderr: %s", r.err);
    cli_result_free(&r);
    cli_exec(&r,
             ARGS("semaphore", name, "--permits", "1", "--take", "3", "--wait", "0", "--", "true"));
    cr_assert(eq(int, r.status, 0), "stderr: %s", r.err);
    cli_result_free(&r);

    /* all 3 taken elsewhere: --wait gives up, nothing runs */
    baton_client *c = th_client(NULL);
    baton_semaphore *s;
    cr_assert(eq(int, baton_semaphore_open(c, name, &s), BATON_OK));
    cr_assert(eq(int, baton_semaphore_acquire(s, 3), BATON_OK));
    cli_exec(&r, ARGS("semaphore", name, "--wait", "500ms", "--", "touch", marker));
    cr_assert(eq(int, r.status, 124), "stderr: %s", r.err);
    cr_assert(ge(i64, r.ms, 490));
    cr_assert(le(i64, r.ms, 900), "%lld ms", (long long)r.ms);
    cr_assert(access(marker, F_OK) != 0);
    cli_result_free(&r);

    /* status: the count, and a waiter makes the kind certain */
    cli_exec(&r, ARGS("status", name, "--json"));
    json *j = json_parse(r.out);
    cr_assert(j != NULL, "not JSON: %s", r.out);
    /* 0 permits: a latch would have no key at 0, so this is a semaphore */
    cr_assert(eq(str, json_get(json_at(j, 0), "kind")->string, "semaphore"));
    cr_assert(eq(int, (int)json_get(json_at(j, 0), "value")->number, 0));
    json_free(j);
    cli_result_free(&r);
    pid_t waiter = cli_spawn(ARGS("semaphore", name, "--take", "2", "--", "touch", marker));
    th_sleep_ms(300);
    cr_assert(eq(int, baton_semaphore_release(s, 1), BATON_OK));
    th_sleep_ms(100);
    cli_exec(&r, ARGS("status", name, "--json"));
    j = json_parse(r.out);
    cr_assert(j != NULL, "not JSON: %s", r.out);
    json *sem = json_at(j, 0);
    cr_assert(eq(str, json_get(sem, "kind")->string, "semaphore"));
    cr_assert(eq(str, json_get(sem, "redis_type")->string, "string"));
    cr_assert(eq(int, (int)json_get(sem, "value")->number, 1));
    cr_assert(eq(int, (int)json_get(json_get(sem, "subscribers"), "semaphore")->number, 1));
    json_free(j);
    cli_result_free(&r);
    cr_assert(access(marker, F_OK) != 0, "ran with 1 of 2 permits");
    int64_t t0 = th_ms();
    cr_assert(eq(int, baton_semaphore_release(s, 2), BATON_OK));
    cr_assert(eq(int, th_wait(waiter), 0));
    cr_assert(le(i64, th_ms() - t0, 500));
    cr_assert(access(marker, F_OK) == 0);
    int64_t left = 0;
    cr_assert(eq(int, baton_semaphore_available(s, &left), BATON_OK));
    cr_assert(eq(i64, left, 3));
    baton_semaphore_close(s);
    baton_client_close(c);
    free(marker);
}

/* ---------------------------------------------------------------- latch -------------- */

Test(cli, latch_set_count_count_down_and_await)
{
    const char *name = th_tmpname("cli-latch");
    cli_result r;
    cli_exec(&r, ARGS("latch", name, "await"));
    cr_assert(eq(int, r.status, 0), "an unset latch is open: %s", r.err);
    cli_result_free(&r);
    cli_exec(&r, ARGS("latch", name, "set", "3"));
    cr_assert(eq(int, r.status, 0), "stderr: %s", r.err);
    cli_result_free(&r);
    cli_exec(&r, ARGS("latch", name, "set", "5"));
    cr_assert(eq(int, r.status, 1));
    cr_assert(strstr(r.err, "already set (3)") != NULL, "stderr: %s", r.err);
    cli_result_free(&r);
    cli_exec(&r, ARGS("latch", name, "count"));
    cr_assert(eq(int, r.status, 0));
    cr_assert(eq(str, r.out, "3\n"));
    cli_result_free(&r);

    cli_exec(&r, ARGS("latch", name, "await", "--timeout", "500ms"));
    cr_assert(eq(int, r.status, 123), "stderr: %s", r.err);
    cr_assert(ge(i64, r.ms, 490));
    cr_assert(le(i64, r.ms, 900), "%lld ms", (long long)r.ms);
    cli_result_free(&r);

    /* a waiter, seen by status; three count-downs open it */
    pid_t waiter = cli_spawn(ARGS("latch", name, "await", "--timeout", "20s"));
    th_sleep_ms(300);
    cli_exec(&r, ARGS("status", name, "--json"));
    json *j = json_parse(r.out);
    cr_assert(j != NULL, "not JSON: %s", r.out);
    json *l = json_at(j, 0);
    cr_assert(eq(str, json_get(l, "kind")->string, "latch"));
    cr_assert(eq(str, json_get(l, "redis_type")->string, "string"));
    cr_assert(eq(int, (int)json_get(l, "value")->number, 3));
    cr_assert(eq(int, (int)json_get(json_get(l, "subscribers"), "latch")->number, 1));
    json_free(j);
    cli_result_free(&r);
    for (int i = 0; i < 3; i++) {
        cli_exec(&r, ARGS("latch", name, "count-down"));
        cr_assert(eq(int, r.status, 0), "stderr: %s", r.err);
        cli_result_free(&r);
    }
    int64_t t0 = th_ms();
    cr_assert(eq(int, th_wait(waiter), 0));
    cr_assert(le(i64, th_ms() - t0, 500));
    cli_exec(&r, ARGS("latch", name, "count"));
    cr_assert(eq(str, r.out, "0\n"));
    cli_result_free(&r);
    /* counting down an open latch does nothing */
    cli_exec(&r, ARGS("latch", name, "count-down"));
    cr_assert(eq(int, r.status, 0));
    cli_result_free(&r);
    cli_exec(&r, ARGS("status", name, "--json"));
    j = json_parse(r.out);
    cr_assert(j != NULL);
    cr_assert(eq(str, json_get(json_at(j, 0), "kind")->string, "absent"));
    json_free(j);
    cli_result_free(&r);
}

Test(cli, latch_on_a_lock_key_fails_with_125)
{
    const char *name = th_tmpname("cli-latch-type");
    baton_lock *l;
    baton_client *c = hold(name, &l);
    cli_result r;
    cli_exec(&r, ARGS("latch", name, "count-down"));
    cr_assert(eq(int, r.status, 125), "stderr: %s", r.err);
    cr_assert(strstr(r.err, "WRONGTYPE") != NULL, "stderr: %s", r.err);
    cli_result_free(&r);
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    baton_lock_close(l);
    baton_client_close(c);
}

/* ---------------------------------------------------------------- status ------------- */

Test(cli, status_json_parses_and_matches_a_held_lock)
{
    /* a name that needs escaping: quote, backslash, newline, a byte that is not UTF-8 */
    const char *base = th_tmpname("cli-status");
    const char *absent = th_tmpname("cli-absent");
    char *name = NULL;
    cr_assert(asprintf(&name, "%s \"q\" \\ \n \xff", base) > 0);
    baton_lock *l;
    baton_client *c = hold(name, &l);
    cr_assert(eq(int, baton_lock_acquire(l, BATON_LEASE_WATCHDOG), BATON_OK)); /* holds 2 */
    redisContext *rc = th_redis();
    long long token = th_cmd_int(rc, "GET redisson_lock_token:{%s}", name);
    redisFree(rc);

    cli_result r;
    cli_exec(&r, ARGS("status", name, absent, "--json"));
    cr_assert(eq(int, r.status, 0), "stderr: %s", r.err);
    json *j = json_parse(r.out);
    cr_assert(j != NULL, "not JSON: %s", r.out);
    cr_assert(eq(int, j->type, JSON_ARRAY));
    cr_assert(eq(sz, j->n, 2));

    json *lk = json_at(j, 0);
    char *expected_name = NULL; /* \xff comes back as U+00FF */
    cr_assert(asprintf(&expected_name, "%s \"q\" \\ \n \xc3\xbf", base) > 0);
    cr_assert(eq(str, json_get(lk, "name")->string, expected_name));
    cr_assert(eq(str, json_get(lk, "kind")->string, "lock"));
    cr_assert(eq(str, json_get(lk, "redis_type")->string, "hash"));
    double ttl = json_get(lk, "ttl_ms")->number;
    cr_assert(ttl > 20000 && ttl <= 30000, "ttl %f", ttl);
    json *holders = json_get(lk, "holders");
    cr_assert(eq(sz, holders->n, 1));
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s:", baton_client_id(c));
    const char *owner = json_get(json_at(holders, 0), "owner")->string;
    cr_assert(strncmp(owner, prefix, strlen(prefix)) == 0, "owner %s", owner);
    cr_assert(eq(int, (int)json_get(json_at(holders, 0), "holds")->number, 2));
    cr_assert(eq(sz, json_get(lk, "queue")->n, 0));
    cr_assert(eq(int, json_get(lk, "value")->type, JSON_NULL));
    cr_assert(eq(i64, (int64_t)json_get(lk, "fencing_token")->number, token));

    json *ab = json_at(j, 1);
    cr_assert(eq(str, json_get(ab, "kind")->string, "absent"));
    cr_assert(eq(str, json_get(ab, "redis_type")->string, "none"));
    cr_assert(eq(int, (int)json_get(ab, "ttl_ms")->number, -2));
    cr_assert(eq(sz, json_get(ab, "holders")->n, 0));
    json_free(j);
    cli_result_free(&r);

    /* the text form says the same */
    cli_exec(&r, ARGS("status", base));
    cr_assert(eq(int, r.status, 0));
    cr_assert(strstr(r.out, "nothing") != NULL, "%s", r.out);
    cli_result_free(&r);

    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    baton_lock_close(l);
    baton_client_close(c);
    free(expected_name);
    free(name);
}

Test(cli, status_text_shows_holder_hold_count_and_ttl)
{
    const char *name = th_tmpname("cli-status-text");
    baton_lock *l;
    baton_client *c = hold(name, &l);
    cli_result r;
    cli_exec(&r, ARGS("status", name));
    cr_assert(eq(int, r.status, 0), "stderr: %s", r.err);
    cr_assert(strstr(r.out, "lock, held, TTL") != NULL, "%s", r.out);
    cr_assert(strstr(r.out, baton_client_id(c)) != NULL, "%s", r.out);
    cr_assert(strstr(r.out, "holds 1") != NULL, "%s", r.out);
    cli_result_free(&r);
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    baton_lock_close(l);
    baton_client_close(c);
}

/* The holder's host and pid (issue 22): recorded by the holding baton process beside
 * Redisson's hash, shown by status, gone with the release, and gone with the lease of a
 * holder killed with -9. */
static json *status_holder(const char *name, cli_result *r, json **root)
{
    cli_exec(r, ARGS("status", name, "--json"));
    cr_assert(eq(int, r->status, 0), "stderr: %s", r->err);
    json *j = json_parse(r->out);
    cr_assert(j != NULL, "not JSON: %s", r->out);
    *root = j;
    json *holders = json_get(json_at(j, 0), "holders");
    cr_assert(eq(sz, holders->n, 1), "%s", r->out);
    return json_at(holders, 0);
}

Test(cli, status_shows_the_holders_host_and_pid_until_it_goes)
{
    const char *name = th_tmpname("cli-origin");
    char *ready = cli_path("ready"), *go = cli_path("go");
    char script[512];
    snprintf(script, sizeof script, "touch \"%s\"; while [ ! -e \"%s\" ]; do sleep 0.05; done",
             ready, go);
    pid_t pid = cli_spawn(ARGS("lock", name, "--", "sh", "-c", script));
    cr_assert(cli_wait_file(ready, 5000), "COMMAND did not start");
    char host[256] = "";
    cr_assert(eq(int, gethostname(host, sizeof host - 1), 0));

    cli_result r;
    json *root;
    json *h = status_holder(name, &r, &root);
    cr_assert(eq(str, json_get(h, "host")->string, host), "%s", r.out);
    cr_assert(eq(i64, (int64_t)json_get(h, "pid")->number, (int64_t)pid), "%s", r.out);
    json_free(root);
    cli_result_free(&r);
    char want[64];
    snprintf(want, sizeof want, "pid %d", (int)pid);
    cli_exec(&r, ARGS("status", name));
    cr_assert(strstr(r.out, want) != NULL && strstr(r.out, host) != NULL, "%s", r.out);
    cli_result_free(&r);

    /* released at COMMAND's end; nothing was written beside the lock (the host and pid
     * are the client's record, baton_client:{<client id>}, written once per client) */
    redisContext *rc = th_redis();
    cr_assert(eq(int, creat(go, 0600) >= 0, 1));
    cr_assert(eq(int, th_wait(pid), 0));
    cr_assert(eq(i64, th_cmd_int(rc, "EXISTS %s baton_lock_meta:{%s}", name, name), 0));
    redisFree(rc);
    free(ready);
    free(go);
}

Test(cli, a_killed_holders_lock_and_client_record_expire)
{
    const char *name = th_tmpname("cli-origin-kill");
    char *ready = cli_path("ready");
    char script[256];
    snprintf(script, sizeof script, "touch \"%s\"; exec sleep 30", ready);
    pid_t pid = cli_spawn(ARGS("lock", name, "--watchdog", "1500ms", "--", "sh", "-c", script));
    cr_assert(cli_wait_file(ready, 5000), "COMMAND did not start");
    th_sleep_ms(1000); /* past the watchdog's first renewal (every 500 ms) */
    redisContext *rc = th_redis();
    /* the holder's client record, named by the owner field's client id, lives three
     * watchdog leases (4.5 s) and is kept by the renewals */
    cli_result r;
    json *root;
    json *h = status_holder(name, &r, &root);
    const char *owner = json_get(h, "owner")->string;
    char record[96];
    snprintf(record, sizeof record, "baton_client:{%.*s}", (int)strcspn(owner, ":"), owner);
    json_free(root);
    cli_result_free(&r);
    long long record_ttl = th_cmd_int(rc, "PTTL %s", record);
    cr_assert(gt(i64, record_ttl, 0), "%s", record);
    cr_assert(le(i64, record_ttl, 4500), "%lld", record_ttl);
    cr_assert(eq(int, kill(pid, SIGKILL), 0));
    cr_assert(eq(int, th_wait(pid), 128 + SIGKILL));
    /* nobody renews: both are gone within the lease */
    int64_t t0 = th_ms();
    while (th_cmd_int(rc, "EXISTS %s", name) == 1 && th_ms() - t0 < 5000)
        th_sleep_ms(20);
    cr_assert(eq(i64, th_cmd_int(rc, "EXISTS %s", name), 0), "the lock outlived its lease");
    while (th_cmd_int(rc, "EXISTS %s", record) == 1 && th_ms() - t0 < 6000)
        th_sleep_ms(20);
    cr_assert(eq(i64, th_cmd_int(rc, "EXISTS %s", record), 0), "the record outlived its life");
    redisFree(rc);
    free(ready);
}

/* ---------------------------------------------------------------- unlock --force ----- */

Test(cli, unlock_force_frees_a_lock_whoever_holds_it)
{
    const char *name = th_tmpname("cli-unlock");
    char *marker = cli_path("marker");
    baton_lock *l;
    baton_client *c = hold(name, &l);
    pid_t waiter = cli_spawn(ARGS("lock", name, "--", "touch", marker));
    th_sleep_ms(300);
    cli_result r;
    cli_exec(&r, ARGS("unlock", "--force", name));
    cr_assert(eq(int, r.status, 0), "stderr: %s", r.err);
    cli_result_free(&r);
    /* the waiting run was woken by the unlock message and ran */
    int64_t t0 = th_ms();
    cr_assert(eq(int, th_wait(waiter), 0));
    cr_assert(le(i64, th_ms() - t0, 1000));
    cr_assert(access(marker, F_OK) == 0);
    cr_assert(eq(int, baton_lock_release(l), BATON_ENOTHELD));
    cli_exec(&r, ARGS("unlock", "--force", name));
    cr_assert(eq(int, r.status, 1), "stderr: %s", r.err);
    cr_assert(strstr(r.err, "not locked") != NULL);
    cli_result_free(&r);
    /* a key of another type is left alone */
    redisContext *rc = th_redis();
    freeReplyObject(th_cmd(rc, "SET %s hello", name));
    cli_exec(&r, ARGS("unlock", "--force", name));
    cr_assert(eq(int, r.status, 125), "stderr: %s", r.err);
    cr_assert(eq(i64, th_cmd_int(rc, "EXISTS %s", name), 1));
    cli_result_free(&r);
    redisFree(rc);
    baton_lock_close(l);
    baton_client_close(c);
    free(marker);
}

/* ---------------------------------------------------------------- usage -------------- */

Test(cli, bad_usage_exits_2_with_a_usage_line)
{
    char *marker = cli_path("marker");
    const char *const *cases[] = {
        ARGS("--bogus"),
        ARGS("frobnicate"),
        ARGS("--url"),
        ARGS("lock"),
        ARGS("lock", "x"),
        ARGS("lock", "x", "touch", marker),
        ARGS("lock", "x", "--"),
        ARGS("lock", "--", "touch", marker),
        ARGS("lock", "x", "--wait", "5parsecs", "--", "touch", marker),
        ARGS("lock", "x", "--wait", "-1", "--", "touch", marker),
        ARGS("lock", "x", "--wait", "1.5 s", "--", "touch", marker),
        ARGS("lock", "x", "--wait", "1m30", "--", "touch", marker),
        ARGS("lock", "x", "--wait", ".5s", "--", "touch", marker),
        ARGS("lock", "x", "-E", "256", "--", "touch", marker),
        ARGS("lock", "x", "-w", "--", "touch", marker),
        ARGS("lock", "x", "--wait", "--", "touch", marker),
        ARGS("lock", "x", "--lease", "1s", "--watchdog", "3s", "--", "touch", marker),
        ARGS("lock", "x", "--lease", "0", "--", "touch", marker),
        ARGS("lock", "x", "--watchdog", "10ms", "--", "touch", marker),
        ARGS("lock", "x", "--frobnicate", "--", "touch", marker),
        ARGS("semaphore", "s", "--take", "0", "--", "touch", marker),
        ARGS("semaphore", "s", "--permits", "many", "--", "touch", marker),
        ARGS("semaphore", "s", "t", "--", "touch", marker),
        ARGS("semaphore", "s", "touch", marker),
        ARGS("latch"),
        ARGS("latch", "l"),
        ARGS("latch", "l", "set"),
        ARGS("latch", "l", "set", "0"),
        ARGS("latch", "l", "open"),
        ARGS("latch", "l", "count-down", "--timeout", "1s"),
        ARGS("latch", "l", "await", "--timeout", "soon"),
        ARGS("status"),
        ARGS("status", "x", "--yaml"),
        ARGS("unlock", "x"),
        ARGS("unlock", "--force"),
        ARGS("unlock", "--force", "x", "y"),
        ARGS("--url", "", "status", "x"),
        ARGS("--url=", "status", "x"),
        ARGS("--tls-ca"),
        ARGS("status", "x", "--url", ""),
        ARGS("--url", "redis://127.0.0.1:1", "status", "x", "--url", "redis://127.0.0.1:2"),
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cli_result r;
        cli_exec(&r, cases[i]);
        cr_assert(eq(int, r.status, 2), "case %zu (%s %s): status %d, stderr %s", i, cases[i][0],
                  cases[i][1] ? cases[i][1] : "", r.status, r.err);
        cr_assert(strstr(r.err, "usage: baton") != NULL, "case %zu: stderr %s", i, r.err);
        cr_assert(eq(str, r.out, ""), "case %zu printed on stdout", i);
        cli_result_free(&r);
    }
    cr_assert(access(marker, F_OK) != 0, "a COMMAND ran despite bad usage");
    free(marker);
}

/* An empty BATON_URL is a usage error, not the default server (issue 16). */
Test(cli, an_empty_baton_url_exits_2)
{
    setenv("BATON_URL", "", 1);
    cli_result r;
    cli_exec(&r, ARGS("status", "x"));
    cr_assert(eq(int, r.status, 2), "stderr: %s", r.err);
    cr_assert(strstr(r.err, "BATON_URL") != NULL, "stderr: %s", r.err);
    cli_result_free(&r);
}

/* %00 in a URL's credentials is refused, not silently cut short. */
Test(cli, a_nul_escape_in_the_url_password_exits_2)
{
    cli_result r;
    cli_exec(&r, ARGS("--url", "redis://u:topsecret%00x@127.0.0.1:1", "status", "x"));
    cr_assert(eq(int, r.status, 2), "stderr: %s", r.err);
    cr_assert(strstr(r.err, "%00") != NULL, "stderr: %s", r.err);
    cr_assert(strstr(r.err, "topsecret") == NULL, "stderr: %s", r.err);
    cli_result_free(&r);
}

Test(cli, help_and_version)
{
    cli_result r;
    cli_exec(&r, ARGS("--help"));
    cr_assert(eq(int, r.status, 0));
    const char *must[] = {"lock NAME",
                          "semaphore NAME",
                          "latch NAME",
                          "status NAME",
                          "unlock --force",
                          "--wait",
                          "--lease",
                          "--watchdog",
                          "--fair",
                          "--permits",
                          "--take",
                          "--timeout",
                          "--json",
                          "--url",
                          "BATON_URL",
                          "BATON_FENCING_TOKEN",
                          "122",
                          "124",
                          "128+N"};
    for (size_t i = 0; i < sizeof must / sizeof must[0]; i++)
        cr_assert(strstr(r.out, must[i]) != NULL, "--help does not mention %s", must[i]);
    cli_result_free(&r);
    cli_exec(&r, ARGS("--version"));
    cr_assert(eq(int, r.status, 0));
    char expected[64];
    snprintf(expected, sizeof expected, "baton %s", BATON_VERSION_STRING);
    cr_assert(strncmp(r.out, expected, strlen(expected)) == 0, "%s", r.out);
    cli_result_free(&r);
}

/* ---------------------------------------------------------------- servers ------------ */

/* A loopback port nobody listens on. */
static int closed_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert(bind(s, (struct sockaddr *)&a, sizeof a) == 0);
    socklen_t len = sizeof a;
    getsockname(s, (struct sockaddr *)&a, &len);
    close(s);
    return ntohs(a.sin_port);
}

Test(cli, an_unreachable_server_exits_120)
{
    char url[64], *marker = cli_path("marker");
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", closed_port());
    const char *const *cases[] = {
        ARGS("--url", url, "lock", "x", "--", "touch", marker),
        ARGS("--url", url, "status", "x"),
        ARGS("lock", "--url", url, "x", "--", "touch", marker),
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cli_result r;
        cli_exec(&r, cases[i]);
        cr_assert(eq(int, r.status, 120), "case %zu: stderr %s", i, r.err);
        cr_assert(le(i64, r.ms, 1000));
        cr_assert(strstr(r.err, "baton: ") == r.err &&
                      strchr(r.err, '\n') == r.err + strlen(r.err) - 1,
                  "not one line: %s", r.err);
        cli_result_free(&r);
    }
    /* BATON_URL is used when --url is not given */
    setenv("BATON_URL", url, 1);
    cli_result r;
    cli_exec(&r, ARGS("status", "x"));
    cr_assert(eq(int, r.status, 120), "stderr %s", r.err);
    cli_result_free(&r);
    /* ...and --url wins over it */
    cli_exec(&r, ARGS("--url", th_url(), "status", "x"));
    cr_assert(eq(int, r.status, 0), "stderr %s", r.err);
    cli_result_free(&r);
    unsetenv("BATON_URL");
    cr_assert(access(marker, F_OK) != 0);
    free(marker);
}

Test(cli, a_silent_server_exits_120_within_the_connect_timeout)
{
    /* accepts connections (the kernel does) and never answers */
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert(bind(s, (struct sockaddr *)&a, sizeof a) == 0);
    cr_assert(listen(s, 16) == 0);
    socklen_t len = sizeof a;
    getsockname(s, (struct sockaddr *)&a, &len);
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", ntohs(a.sin_port));
    cli_result r;
    cli_exec(&r, ARGS("--url", url, "lock", "x", "--", "true"));
    cr_assert(eq(int, r.status, 120), "stderr %s", r.err);
    /* the default connect timeout is 5 s: once, not twice (a loaded 2-core machine under
     * AddressSanitizer measured 5.56 s for spawning, the timeout and the exit) */
    cr_assert(le(i64, r.ms, 6500), "%lld ms", (long long)r.ms);
    cli_result_free(&r);
    close(s);
}

Test(cli, a_refused_password_exits_121_without_showing_it, .timeout = 30)
{
    th_server srv;
    th_server_start(&srv, "--requirepass right-password");
    char url[128];
    snprintf(url, sizeof url, "redis://:wrong-password@127.0.0.1:%d", srv.port);
    cli_result r;
    cli_exec(&r, ARGS("--url", url, "lock", "x", "--", "true"));
    cr_assert(eq(int, r.status, 121), "stderr %s", r.err);
    cr_assert(strstr(r.err, "wrong-password") == NULL, "the password shows: %s", r.err);
    cli_result_free(&r);
    /* no password at all: the server says NOAUTH */
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", srv.port);
    cli_exec(&r, ARGS("--url", url, "status", "x"));
    cr_assert(eq(int, r.status, 121), "stderr %s", r.err);
    cli_result_free(&r);
    /* the right one works, for status's own connection too */
    snprintf(url, sizeof url, "redis://:right-password@127.0.0.1:%d/3", srv.port);
    cli_exec(&r, ARGS("--url", url, "lock", "pw", "--", "true"));
    cr_assert(eq(int, r.status, 0), "stderr %s", r.err);
    cli_result_free(&r);
    cli_exec(&r, ARGS("--url", url, "status", "pw", "--json"));
    cr_assert(eq(int, r.status, 0), "stderr %s", r.err);
    cr_assert(strstr(r.out, "right-password") == NULL);
    json *j = json_parse(r.out);
    cr_assert(j != NULL);
    cr_assert(eq(str, json_get(json_at(j, 0), "kind")->string, "absent"));
    json_free(j);
    cli_result_free(&r);
    th_server_stop(&srv);
}

/* ---------------------------------------------------------------- issue 22 ----------- */

Test(cli, every_subcommand_has_its_own_help)
{
    const char *cmds[] = {"lock", "semaphore", "latch", "status", "unlock"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        for (int form = 0; form < 2; form++) {
            cli_result r;
            cli_exec(&r, ARGS(cmds[i], "NAME", form ? "-h" : "--help"));
            if (form) { /* -h after a command may be redis-cli's -h HOST: refused (46.1) */
                cr_assert(eq(int, r.status, 2), "%s -h: %d", cmds[i], r.status);
                cr_assert(strstr(r.err, "--help") != NULL, "%s -h: %s", cmds[i], r.err);
                cli_result_free(&r);
                continue;
            }
            cr_assert(eq(int, r.status, 0), "%s --help: %d, stderr %s", cmds[i], r.status, r.err);
            char want[64];
            snprintf(want, sizeof want, "usage: baton [--url URL] %s ", cmds[i]);
            cr_assert(strstr(r.out, want) != NULL, "%s --help: %s", cmds[i], r.out);
            cr_assert(strstr(r.out, "Exit status") != NULL, "%s --help: %s", cmds[i], r.out);
            cr_assert(eq(str, r.err, ""));
            cli_result_free(&r);
        }
    }
}

Test(cli, flock_idioms_n_w_E_q)
{
    const char *name = th_tmpname("cli-flock");
    char *marker = cli_path("marker");
    baton_lock *l;
    baton_client *c = hold(name, &l);
    cli_result r;
    /* -n: one attempt, exit 124 and a message */
    cli_exec(&r, ARGS("lock", name, "-n", "--", "touch", marker));
    cr_assert(eq(int, r.status, 124), "stderr: %s", r.err);
    cr_assert(le(i64, r.ms, 400), "%lld ms", (long long)r.ms);
    cr_assert(strstr(r.err, "not acquired") != NULL, "stderr: %s", r.err);
    cli_result_free(&r);
    /* -E 3 -q: exit 3, silent */
    cli_exec(&r, ARGS("lock", "-n", "-E", "3", "-q", name, "--", "touch", marker));
    cr_assert(eq(int, r.status, 3), "stderr: %s", r.err);
    cr_assert(eq(str, r.err, ""));
    cli_result_free(&r);
    /* -w with a fractional duration */
    cli_exec(&r, ARGS("lock", name, "-w", "0.3", "--", "touch", marker));
    cr_assert(eq(int, r.status, 124), "stderr: %s", r.err);
    cr_assert(ge(i64, r.ms, 295), "%lld ms", (long long)r.ms);
    cr_assert(le(i64, r.ms, 800), "%lld ms", (long long)r.ms);
    cli_result_free(&r);
    /* the semaphore too */
    cli_exec(&r, ARGS("semaphore", name, "-n", "-q", "-E", "9", "--", "touch", marker));
    cr_assert(eq(int, r.status, 125), "a lock key is not a semaphore: %s", r.err);
    cli_result_free(&r);
    cr_assert(access(marker, F_OK) != 0, "COMMAND ran");
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    /* free: -n runs COMMAND */
    cli_exec(&r, ARGS("lock", name, "-n", "--", "touch", marker));
    cr_assert(eq(int, r.status, 0), "stderr: %s", r.err);
    cr_assert(access(marker, F_OK) == 0, "COMMAND did not run");
    cli_result_free(&r);
    baton_lock_close(l);
    baton_client_close(c);
    free(marker);
}

Test(cli, fractional_and_compound_durations)
{
    const char *name = th_tmpname("cli-dur");
    baton_lock *l;
    baton_client *c = hold(name, &l);
    const char *forms[][2] = {{"1.5s", "1500"}, {"0m1.2s", "1200"}, {"1s250ms", "1250"}};
    for (size_t i = 0; i < 3; i++) {
        cli_result r;
        cli_exec(&r, ARGS("lock", name, "--wait", forms[i][0], "--", "true"));
        int64_t want = atoll(forms[i][1]);
        cr_assert(eq(int, r.status, 124), "%s: stderr %s", forms[i][0], r.err);
        cr_assert(ge(i64, r.ms, want - 5), "%s: %lld ms", forms[i][0], (long long)r.ms);
        cr_assert(le(i64, r.ms, want + 700), "%s: %lld ms", forms[i][0], (long long)r.ms);
        cli_result_free(&r);
    }
    /* 1m30s is accepted as a lease (the key's TTL shows it) */
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    char *ready = cli_path("ready");
    char script[256];
    snprintf(script, sizeof script, "touch \"%s\"; sleep 0.5", ready);
    pid_t pid = cli_spawn(ARGS("lock", name, "--lease", "1m30s", "--", "sh", "-c", script));
    cr_assert(cli_wait_file(ready, 5000));
    redisContext *rc = th_redis();
    long long ttl = th_cmd_int(rc, "PTTL %s", name);
    redisFree(rc);
    cr_assert(ge(i64, ttl, 85000), "PTTL %lld", ttl);
    cr_assert(le(i64, ttl, 90000), "PTTL %lld", ttl);
    cr_assert(eq(int, th_wait(pid), 0));
    free(ready);
    baton_lock_close(l);
    baton_client_close(c);
}

Test(cli, passwords_from_the_environment_and_askpass, .timeout = 30)
{
    th_server srv;
    th_server_start(&srv, "--requirepass right-password");
    char url[128];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", srv.port);
    const char *vars[] = {"BATON_PASSWORD", "REDISCLI_AUTH"};
    for (size_t i = 0; i < 2; i++) {
        setenv(vars[i], "right-password", 1);
        cli_result r;
        cli_exec(&r, ARGS("--url", url, "lock", "pw", "--", "true"));
        cr_assert(eq(int, r.status, 0), "%s: stderr %s", vars[i], r.err);
        cli_result_free(&r);
        cli_exec(&r, ARGS("--url", url, "status", "pw", "--json"));
        cr_assert(eq(int, r.status, 0), "%s: stderr %s", vars[i], r.err);
        cli_result_free(&r);
        setenv(vars[i], "wrong-password", 1);
        cli_exec(&r, ARGS("--url", url, "lock", "pw", "--", "true"));
        cr_assert(eq(int, r.status, 121), "%s: stderr %s", vars[i], r.err);
        cr_assert(strstr(r.err, "wrong-password") == NULL, "%s", r.err);
        cli_result_free(&r);
        unsetenv(vars[i]);
    }
    /* --askpass reads it from stdin; --user names the ACL user */
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "echo right-password | \"$0\" --askpass --user default --url %s lock pw -- true", url);
    cli_result r;
    cli_exec_program(&r, ARGS("/bin/sh", "-c", cmd, BATON_CLI_PATH));
    cr_assert(eq(int, r.status, 0), "stderr %s", r.err);
    cli_result_free(&r);
    snprintf(cmd, sizeof cmd, "echo nope | \"$0\" --askpass --url %s lock pw -- true", url);
    cli_exec_program(&r, ARGS("/bin/sh", "-c", cmd, BATON_CLI_PATH));
    cr_assert(eq(int, r.status, 121), "stderr %s", r.err);
    cli_result_free(&r);
    th_server_stop(&srv);
}

Test(cli, semaphore_and_latch_admin_verbs)
{
    const char *name = th_tmpname("cli-admin-sem");
    cli_result r;
    cli_exec(&r, ARGS("semaphore", name, "set", "3"));
    cr_assert(eq(int, r.status, 0), "stderr %s", r.err);
    cli_result_free(&r);
    cli_exec(&r, ARGS("semaphore", name, "set", "5"));
    cr_assert(eq(int, r.status, 1), "a second set: stderr %s", r.err);
    cli_result_free(&r);
    cli_exec(&r, ARGS("semaphore", name, "add", "2"));
    cr_assert(eq(int, r.status, 0), "stderr %s", r.err);
    cli_result_free(&r);
    cli_exec(&r, ARGS("semaphore", name, "add", "-1"));
    cr_assert(eq(int, r.status, 0), "stderr %s", r.err);
    cli_result_free(&r);
    redisContext *rc = th_redis();
    redisReply *rep = redisCommand(rc, "GET %s", name);
    cr_assert(rep && rep->type == REDIS_REPLY_STRING && strcmp(rep->str, "4") == 0);
    freeReplyObject(rep);
    cli_exec(&r, ARGS("semaphore", name, "drain"));
    cr_assert(eq(int, r.status, 0), "stderr %s", r.err);
    cr_assert(eq(str, r.out, "4\n"));
    cli_result_free(&r);
    cli_exec(&r, ARGS("semaphore", name, "delete"));
    cr_assert(eq(int, r.status, 0), "stderr %s", r.err);
    cli_result_free(&r);
    cr_assert(eq(i64, th_cmd_int(rc, "EXISTS %s", name), 0));
    cli_exec(&r, ARGS("semaphore", name, "delete"));
    cr_assert(eq(int, r.status, 1), "absent: stderr %s", r.err);
    cli_result_free(&r);
    cli_exec(&r, ARGS("semaphore", name, "add", "x"));
    cr_assert(eq(int, r.status, 2));
    cli_result_free(&r);

    const char *latch = th_tmpname("cli-admin-latch");
    cli_exec(&r, ARGS("latch", latch, "set", "2"));
    cr_assert(eq(int, r.status, 0), "stderr %s", r.err);
    cli_result_free(&r);
    cli_exec(&r, ARGS("latch", latch, "delete"));
    cr_assert(eq(int, r.status, 0), "stderr %s", r.err);
    cli_result_free(&r);
    cr_assert(eq(i64, th_cmd_int(rc, "EXISTS %s", latch), 0));
    cli_exec(&r, ARGS("latch", latch, "delete"));
    cr_assert(eq(int, r.status, 1), "absent: stderr %s", r.err);
    cli_result_free(&r);
    redisFree(rc);
}

Test(cli, hold_keeps_the_lock_until_sigint_then_releases_and_exits_0)
{
    const char *name = th_tmpname("cli-hold");
    pid_t pid = cli_spawn(ARGS("lock", name, "--hold"));
    int64_t t0 = th_ms();
    while (exists(name) == 0 && th_ms() - t0 < 5000)
        th_sleep_ms(10);
    cr_assert(eq(i64, exists(name), 1), "not held");
    th_sleep_ms(300);
    cr_assert(eq(i64, exists(name), 1), "not held 300 ms later");
    /* a second one is busy */
    cli_result r;
    cli_exec(&r, ARGS("lock", name, "-n", "--", "true"));
    cr_assert(eq(int, r.status, 124), "stderr %s", r.err);
    cli_result_free(&r);
    t0 = th_ms();
    kill(pid, SIGINT);
    int st = th_wait(pid);
    char *err = cli_bg_err(pid);
    cr_assert(eq(int, st, 0), "stderr %s", err);
    free(err);
    cr_assert(le(i64, th_ms() - t0, 1000));
    cr_assert(eq(i64, exists(name), 0), "not released");
    cli_exec(&r, ARGS("lock", name, "--hold", "--", "true"));
    cr_assert(eq(int, r.status, 2), "--hold with a COMMAND: stderr %s", r.err);
    cli_result_free(&r);
}

/* The TLS flags and variables are parsed, and refused until the library speaks TLS: never a
 * plain-text connection to a server the caller meant to reach over TLS. */
Test(cli, tls_options_without_rediss_are_usage_errors)
{
    setenv("BATON_TLS_CERT", "/nonexistent/cert.pem", 1);
    cli_result r;
    cli_exec(&r, ARGS("status", "x"));
    cr_assert(eq(int, r.status, 2), "stderr %s", r.err);
    cr_assert(not(eq(ptr, strstr(r.err, "TLS"), NULL)), "stderr %s", r.err);
    cli_result_free(&r);
    unsetenv("BATON_TLS_CERT");
    cli_exec(&r, ARGS("--tls-ca", "/nonexistent/ca.pem", "--tls-key=/nonexistent/key.pem",
                      "--tls-sni", "redis.example", "--tls-insecure", "status", "x"));
    cr_assert(eq(int, r.status, 2), "stderr %s", r.err);
    cli_result_free(&r);
    cli_exec(&r, ARGS("--tls-bogus", "status", "x"));
    cr_assert(eq(int, r.status, 2), "an unknown option is still a usage error");
    cli_result_free(&r);
}

Test(cli, status_lists_the_permit_leases_a_semaphore_holds)
{
    const char *name = th_tmpname("cli-sem-status");
    cli_result r;
    /* COMMAND (baton status itself) runs while the permit lease is held */
    cli_exec(&r, ARGS("semaphore", name, "--permits", "2", "--watchdog", "30s", "--",
                      BATON_CLI_PATH, "status", "--json", name));
    cr_assert(eq(int, r.status, 0), "stderr %s", r.err);
    json *j = json_parse(r.out);
    cr_assert(j != NULL, "not JSON: %s", r.out);
    const json *obj = j->items[0];
    const json *permits = json_get(obj, "permits"), *value = json_get(obj, "value");
    cr_assert(permits != NULL && permits->type == JSON_ARRAY, "%s", r.out);
    cr_assert(eq(sz, permits->n, 1), "one lease held: %s", r.out);
    cr_assert(eq(int, (int)value->number, 1), "one of two left: %s", r.out);
    const json *lease = permits->items[0];
    cr_assert(eq(sz, strlen(json_get(lease, "id")->string), 32), "%s", r.out);
    cr_assert(gt(int, (int)json_get(lease, "ttl_ms")->number, 20000), "%s", r.out);
    json_free(j);
    cli_result_free(&r);
}

/* ---------------------------------------------------------------- rwlock ------------- */

Test(cli, rwlock_readers_share_a_writer_excludes_and_waits_for_them)
{
    const char *name = th_tmpname("cli-rw");
    baton_client *c = th_client(NULL);
    baton_rwlock *rw;
    cr_assert(eq(int, baton_rwlock_open(c, name, &rw), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(baton_rwlock_read(rw), BATON_LEASE_WATCHDOG), BATON_OK));
    /* a reader runs beside ours, with its token; a writer is busy */
    cli_result r;
    cli_exec(&r, ARGS("rwlock", name, "--read", "-n", "--", "sh", "-c",
                      "echo \"$BATON_FENCING_TOKEN\""));
    cr_assert(eq(int, r.status, 0), "stderr: %s", r.err);
    cr_assert(gt(i64, atoll(r.out), 0));
    cli_result_free(&r);
    cli_exec(&r, ARGS("rwlock", name, "--write", "-n", "--", "true"));
    cr_assert(eq(int, r.status, 124), "stderr: %s", r.err);
    cli_result_free(&r);
    /* a waiting writer gets in when our read ends */
    char *marker = cli_path("rw-marker");
    pid_t pid = cli_spawn(ARGS("rwlock", name, "--write", "--", "touch", marker));
    th_sleep_ms(300);
    cr_assert(access(marker, F_OK) != 0, "wrote while a reader held the lock");
    /* status: a read-write lock, read, by two readers (ours and none other now) */
    cli_exec(&r, ARGS("status", name));
    cr_assert(eq(int, r.status, 0), "stderr: %s", r.err);
    cr_assert(strstr(r.out, "read-write lock, read") != NULL, "%s", r.out);
    cr_assert(strstr(r.out, "  holder ") != NULL, "%s", r.out);
    cr_assert(strstr(r.out, "holder mode") == NULL, "%s", r.out);
    cli_result_free(&r);
    cli_exec(&r, ARGS("status", name, "--json"));
    json *j = json_parse(r.out);
    cr_assert(j != NULL, "%s", r.out);
    cr_assert(eq(str, json_get(json_at(j, 0), "kind")->string, "rwlock"));
    cr_assert(eq(sz, json_get(json_at(j, 0), "holders")->n, 1));
    json_free(j);
    cli_result_free(&r);
    cr_assert(eq(int, baton_lock_release(baton_rwlock_read(rw)), BATON_OK));
    cr_assert(eq(int, th_wait(pid), 0));
    cr_assert(access(marker, F_OK) == 0);
    free(marker);
    /* usage: exactly one of --read and --write, one NAME */
    cli_exec(&r, ARGS("rwlock", name, "--", "true"));
    cr_assert(eq(int, r.status, 2));
    cli_result_free(&r);
    cli_exec(&r, ARGS("rwlock", name, "--read", "--write", "--", "true"));
    cr_assert(eq(int, r.status, 2));
    cli_result_free(&r);
    cli_exec(&r, ARGS("rwlock", name, "other", "--read", "--", "true"));
    cr_assert(eq(int, r.status, 2));
    cli_result_free(&r);
    baton_rwlock_close(rw);
    baton_client_close(c);
}

/* ---------------------------------------------------------------- -E on a conflict --- */

/*
 * Runs `args` (a conflict is set up by the caller), expecting exit `code`, nothing run
 * (COMMAND would touch `marker`) and, for -E 0, nothing on the way but the message.
 */
static void conflict_exits(const char *const *args, int code, const char *marker)
{
    cli_result r;
    cli_exec(&r, args);
    cr_assert(eq(int, r.status, code), "%s %s: status %d, stderr %s", args[0], args[1], r.status,
              r.err);
    cr_assert(access(marker, F_OK) != 0, "%s %s: COMMAND ran on a conflict (stderr %s)", args[0],
              args[1], r.err);
    cr_assert(strstr(r.out, "RAN") == NULL, "%s %s: COMMAND ran: %s", args[0], args[1], r.out);
    cli_result_free(&r);
}

/* Issue 28.1: a conflict never runs COMMAND, whatever -E says; -E 0 exits 0 (flock -n -E 0). */
Test(cli, a_conflict_never_runs_command_whatever_E_says, .timeout = 60)
{
    const char *name = th_tmpname("cli-e0");
    const char *other = th_tmpname("cli-e0-other");
    char *marker = cli_path("marker");
    char touch[600];
    snprintf(touch, sizeof touch, "echo RAN; touch '%s'", marker);
    baton_lock *l;
    baton_client *c = hold(name, &l);
    for (int code = 0; code <= 7; code += 7) {
        char e[8];
        snprintf(e, sizeof e, "%d", code);
        conflict_exits(ARGS("lock", name, "-n", "-E", e, "--", "sh", "-c", touch), code, marker);
        conflict_exits(ARGS("lock", name, "-w", "200ms", "-E", e, "--", "sh", "-c", touch), code,
                       marker);
        conflict_exits(ARGS("lock", name, "--hold", "-n", "-E", e), code, marker);
        conflict_exits(ARGS("lock", other, name, "-n", "-E", e, "--", "sh", "-c", touch), code,
                       marker);
        conflict_exits(
            ARGS("lock", "--conflict-exit-code", e, name, "-n", "-q", "--", "sh", "-c", touch),
            code, marker);
    }
    cr_assert(eq(i64, exists(other), 0), "a multi-lock member stayed held");
    cr_assert(eq(int, baton_lock_release(l), BATON_OK));
    baton_lock_close(l);
    baton_client_close(c);

    /* a fair lock */
    const char *fair = th_tmpname("cli-e0-fair");
    pid_t holder = cli_spawn(ARGS("lock", fair, "--fair", "--hold"));
    int64_t t0 = th_ms();
    while (exists(fair) == 0 && th_ms() - t0 < 5000)
        th_sleep_ms(10);
    conflict_exits(ARGS("lock", fair, "--fair", "-n", "-E", "0", "--", "sh", "-c", touch), 0,
                   marker);
    conflict_exits(ARGS("lock", fair, "--fair", "--hold", "-n", "-E", "0"), 0, marker);
    kill(holder, SIGTERM);
    cr_assert(eq(int, th_wait(holder), 0));

    /* read-write locks: a reader under a writer, a writer under a reader */
    const char *rwname = th_tmpname("cli-e0-rw");
    c = th_client(NULL);
    baton_rwlock *rw;
    cr_assert(eq(int, baton_rwlock_open(c, rwname, &rw), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(baton_rwlock_write(rw), BATON_LEASE_WATCHDOG), BATON_OK));
    conflict_exits(ARGS("rwlock", rwname, "--read", "-n", "-E", "0", "--", "sh", "-c", touch), 0,
                   marker);
    conflict_exits(ARGS("rwlock", rwname, "--read", "--hold", "-n", "-E", "0"), 0, marker);
    cr_assert(eq(int, baton_lock_release(baton_rwlock_write(rw)), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(baton_rwlock_read(rw), BATON_LEASE_WATCHDOG), BATON_OK));
    conflict_exits(
        ARGS("rwlock", rwname, "--write", "-w", "200ms", "-E", "0", "--", "sh", "-c", touch), 0,
        marker);
    cr_assert(eq(int, baton_lock_release(baton_rwlock_read(rw)), BATON_OK));
    baton_rwlock_close(rw);
    baton_client_close(c);

    /* semaphores: permit leases and --counting, with no permit left */
    const char *sem = th_tmpname("cli-e0-sem");
    cli_result r;
    cli_exec(&r, ARGS("semaphore", sem, "set", "0"));
    cr_assert(eq(int, r.status, 0), "stderr %s", r.err);
    cli_result_free(&r);
    conflict_exits(ARGS("semaphore", sem, "-n", "-E", "0", "--", "sh", "-c", touch), 0, marker);
    conflict_exits(ARGS("semaphore", sem, "-w", "200ms", "-E", "0", "--", "sh", "-c", touch), 0,
                   marker);
    const char *csem = th_tmpname("cli-e0-csem");
    cli_exec(&r, ARGS("semaphore", csem, "--counting", "set", "0"));
    cr_assert(eq(int, r.status, 0), "stderr %s", r.err);
    cli_result_free(&r);
    conflict_exits(ARGS("semaphore", csem, "--counting", "-n", "-E", "0", "--", "sh", "-c", touch),
                   0, marker);
    free(marker);
}

/* ---------------------------------------------------------------- COMMAND's environment */

/* Issue 28.9: COMMAND never inherits the password: BATON_PASSWORD and REDISCLI_AUTH are
 * removed, and BATON_URL too when it carries credentials (kept when it has none, so that a
 * nested baton reaches the same server). */
Test(cli, command_inherits_no_password, .timeout = 30)
{
    th_server srv;
    th_server_start(&srv, "--requirepass pw-Zq81x");
    char url[160], url_pw[160];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", srv.port);
    snprintf(url_pw, sizeof url_pw, "redis://:pw-Zq81x@127.0.0.1:%d", srv.port);
    const char *const *runs[] = {
        ARGS("lock", th_tmpname("cli-env-l"), "--", "env"),
        ARGS("rwlock", th_tmpname("cli-env-rw"), "--read", "--", "env"),
        ARGS("semaphore", th_tmpname("cli-env-p"), "--permits", "1", "--", "env"),
        ARGS("semaphore", th_tmpname("cli-env-s"), "--counting", "--permits", "1", "--", "env"),
    };
    for (int how = 0; how < 3; how++) {
        unsetenv("BATON_PASSWORD");
        unsetenv("REDISCLI_AUTH");
        if (how == 0) { /* in the environment's URL */
            setenv("BATON_URL", url_pw, 1);
        } else {
            setenv("BATON_URL", url, 1);
            setenv(how == 1 ? "BATON_PASSWORD" : "REDISCLI_AUTH", "pw-Zq81x", 1);
            if (how == 1)
                setenv("REDISCLI_AUTH", "pw-Zq81x", 1);
        }
        for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
            cli_result r;
            cli_exec(&r, runs[i]);
            cr_assert(eq(int, r.status, 0), "how %d run %zu: stderr %s", how, i, r.err);
            cr_assert(strstr(r.out, "BATON_FENCING_TOKEN=") != NULL || i >= 2, "%s", r.out);
            cr_assert(strstr(r.out, "PATH=") != NULL, "not env's output: %s", r.out);
            cr_assert(strstr(r.out, "pw-Zq81x") == NULL, "how %d run %zu: the password: %s", how, i,
                      r.out);
            cr_assert(strstr(r.out, "BATON_PASSWORD") == NULL, "%s", r.out);
            cr_assert(strstr(r.out, "REDISCLI_AUTH") == NULL, "%s", r.out);
            if (how == 0)
                cr_assert(strstr(r.out, "BATON_URL") == NULL, "%s", r.out);
            else
                cr_assert(strstr(r.out, url) != NULL, "BATON_URL without a password is kept: %s",
                          r.out);
            cli_result_free(&r);
        }
    }
    unsetenv("BATON_PASSWORD");
    unsetenv("REDISCLI_AUTH");
    unsetenv("BATON_URL");
    th_server_stop(&srv);
}

/* ---------------------------------------------------------------- COMMAND's group ---- */

/*
 * Issue 27.2: COMMAND runs in its own process group, and every stop path signals the whole
 * group, so a background child of COMMAND does not outlive the hold. The script starts a
 * child, writes its pid (atomically) to `pidfile` and waits for it.
 */
static void background_child_script(char *buf, size_t len, const char *pidfile, bool ignore_term)
{
    snprintf(buf, len, "%s & echo $! > \"%s.tmp\"; mv \"%s.tmp\" \"%s\"; wait",
             ignore_term ? "(trap '' TERM; while :; do sleep 0.05; done)" : "sleep 30", pidfile,
             pidfile, pidfile);
}

/* The pid in pidfile, once it is there. */
static pid_t read_pidfile(const char *pidfile)
{
    cr_assert(cli_wait_file(pidfile, 5000), "COMMAND did not start");
    char *text = cli_read_file(pidfile);
    pid_t p = (pid_t)atoi(text);
    free(text);
    cr_assert(gt(int, (int)p, 0));
    return p;
}

/* Waits up to ms for process p to be gone (reaping it if it became this process's child, as
 * the subreaper); returns the ms it took, or -1. */
static int64_t ms_until_gone(pid_t p, int64_t t0, int64_t ms)
{
    while (th_ms() - t0 < ms) {
        int st;
        pid_t r = waitpid(p, &st, WNOHANG);
        if (r == p || (kill(p, 0) != 0 && errno == ESRCH))
            return th_ms() - t0;
        th_sleep_ms(5);
    }
    return -1;
}

Test(cli, kill_9_of_baton_ends_commands_background_child_too)
{
    cr_assert(eq(int, prctl(PR_SET_CHILD_SUBREAPER, 1), 0));
    const char *name = th_tmpname("cli-kill9-group");
    char *pidfile = cli_path("grandchild");
    char script[512];
    background_child_script(script, sizeof script, pidfile, false);
    pid_t pid = cli_spawn(ARGS("lock", name, "--", "sh", "-c", script));
    pid_t g = read_pidfile(pidfile);
    int64_t t0 = th_ms();
    kill(pid, SIGKILL);
    cr_assert(eq(int, th_wait(pid), 128 + SIGKILL));
    int64_t ms = ms_until_gone(g, t0, 5000);
    cr_assert(ge(i64, ms, 0), "COMMAND's child %d outlived baton by 5 s", (int)g);
    cr_assert(le(i64, ms, 1000), "COMMAND's child ended %lld ms after baton", (long long)ms);
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
    free(pidfile);
}

/* The child ignores SIGTERM and COMMAND itself exits at once: the child still gets SIGKILL
 * --kill-after later. */
Test(cli, kill_9_of_baton_sigkills_commands_child_after_kill_after_though_command_exited)
{
    cr_assert(eq(int, prctl(PR_SET_CHILD_SUBREAPER, 1), 0));
    const char *name = th_tmpname("cli-kill9-group-term");
    char *pidfile = cli_path("grandchild");
    char script[512];
    background_child_script(script, sizeof script, pidfile, true);
    pid_t pid = cli_spawn(ARGS("lock", name, "--kill-after", "500ms", "--", "sh", "-c", script));
    pid_t g = read_pidfile(pidfile);
    th_sleep_ms(100); /* let the subshell set its trap */
    int64_t t0 = th_ms();
    kill(pid, SIGKILL);
    cr_assert(eq(int, th_wait(pid), 128 + SIGKILL));
    int64_t ms = ms_until_gone(g, t0, 5000);
    cr_assert(ge(i64, ms, 0), "COMMAND's child %d outlived baton by 5 s", (int)g);
    cr_assert(ge(i64, ms, 450), "COMMAND's child ended %lld ms after baton", (long long)ms);
    cr_assert(le(i64, ms, 1500), "COMMAND's child ended %lld ms after baton", (long long)ms);
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
    free(pidfile);
}

/* A lost lock (deleted behind baton's back): exit 122, and COMMAND's child is gone too; one
 * that ignores SIGTERM gets SIGKILL --kill-after later. */
Test(cli, a_lost_lock_ends_commands_background_child_too)
{
    cr_assert(eq(int, prctl(PR_SET_CHILD_SUBREAPER, 1), 0));
    for (int ignore = 0; ignore < 2; ignore++) {
        const char *name = th_tmpname("cli-lost-group");
        char *pidfile = cli_path("grandchild");
        char script[512];
        background_child_script(script, sizeof script, pidfile, ignore);
        pid_t pid = cli_spawn(ARGS("lock", name, "--watchdog", "1500ms", "--kill-after", "700ms",
                                   "--", "sh", "-c", script));
        pid_t g = read_pidfile(pidfile);
        th_sleep_ms(100);
        redisContext *r = th_redis();
        int64_t t0 = th_ms();
        cr_assert(eq(i64, th_cmd_int(r, "DEL %s", name), 1));
        redisFree(r);
        int st = th_wait(pid);
        char *err = cli_bg_err(pid);
        cr_assert(eq(int, st, 122), "stderr: %s", err);
        free(err);
        int64_t ms = ms_until_gone(g, t0, 5000);
        cr_assert(ge(i64, ms, 0), "COMMAND's child %d outlived the loss by 5 s", (int)g);
        /* told within a renewal period (500 ms); SIGKILL 700 ms after the SIGTERM */
        cr_assert(le(i64, ms, ignore ? 1700 : 900), "ignore %d: the child ended %lld ms after",
                  ignore, (long long)ms);
        if (ignore)
            cr_assert(ge(i64, ms, 650), "the child ended %lld ms after", (long long)ms);
        while (waitpid(-1, NULL, WNOHANG) > 0) {
        }
        free(pidfile);
    }
}

/* The same through `baton unlock --force`. */
Test(cli, unlock_force_while_command_runs_ends_commands_child)
{
    cr_assert(eq(int, prctl(PR_SET_CHILD_SUBREAPER, 1), 0));
    const char *name = th_tmpname("cli-force-group");
    char *pidfile = cli_path("grandchild");
    char script[512];
    background_child_script(script, sizeof script, pidfile, false);
    pid_t pid = cli_spawn(ARGS("lock", name, "--watchdog", "1500ms", "--", "sh", "-c", script));
    pid_t g = read_pidfile(pidfile);
    cli_result r;
    int64_t t0 = th_ms();
    cli_exec(&r, ARGS("unlock", "--force", name));
    cr_assert(eq(int, r.status, 0), "stderr %s", r.err);
    cli_result_free(&r);
    cr_assert(eq(int, th_wait(pid), 122));
    int64_t ms = ms_until_gone(g, t0, 5000);
    cr_assert(ge(i64, ms, 0), "COMMAND's child %d outlived the loss by 5 s", (int)g);
    cr_assert(le(i64, ms, 900), "the child ended %lld ms after", (long long)ms);
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
    free(pidfile);
}

/* A SIGTERM sent to baton reaches COMMAND's whole group. */
Test(cli, a_forwarded_sigterm_reaches_commands_background_child)
{
    cr_assert(eq(int, prctl(PR_SET_CHILD_SUBREAPER, 1), 0));
    const char *name = th_tmpname("cli-fwd-group");
    char *pidfile = cli_path("grandchild");
    char script[512];
    background_child_script(script, sizeof script, pidfile, false);
    pid_t pid = cli_spawn(ARGS("lock", name, "--", "sh", "-c", script));
    pid_t g = read_pidfile(pidfile);
    int64_t t0 = th_ms();
    kill(pid, SIGTERM);
    cr_assert(eq(int, th_wait(pid), 128 + SIGTERM));
    int64_t ms = ms_until_gone(g, t0, 5000);
    cr_assert(ge(i64, ms, 0), "COMMAND's child %d outlived baton by 5 s", (int)g);
    cr_assert(le(i64, ms, 1000), "the child ended %lld ms after", (long long)ms);
    cr_assert(eq(i64, exists(name), 0));
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
    free(pidfile);
}

/*
 * Runs baton under a new pseudo-terminal, as an interactive shell runs a job: a "shell"
 * process leads the terminal's session and runs baton in a process group of its own, in the
 * foreground, with stdin the terminal (stdin_tty) or /dev/null; stdout and stderr go to the
 * terminal. When baton stops, the shell appends "stopped <1 if baton's group had the
 * terminal>\n" to `stops` (if not NULL) and continues it in the foreground (as `fg`).
 * Returns the shell's pid, which exits with baton's status, and *master.
 */
static pid_t spawn_on_pty(const char *const *args, bool stdin_tty, const char *stops, int *master)
{
    int m = posix_openpt(O_RDWR | O_NOCTTY);
    cr_assert(m >= 0 && grantpt(m) == 0 && unlockpt(m) == 0);
    const char *slave = ptsname(m);
    cr_assert(slave != NULL);
    size_t n = 0;
    while (args[n])
        n++;
    const char **argv = calloc(n + 2, sizeof *argv);
    argv[0] = "baton";
    memcpy(argv + 1, args, n * sizeof *args);
    if (!getenv("BATON_URL"))
        setenv("BATON_URL", th_url(), 1);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        setsid();
        int s = open(slave, O_RDWR); /* the session's controlling terminal */
        int null = open("/dev/null", O_RDONLY);
        if (s < 0 || null < 0)
            _exit(98);
        close(m);
        signal(SIGTTOU, SIG_IGN);
        pid_t b = fork();
        if (b == 0) {
            setpgid(0, 0);
            tcsetpgrp(s, getpid());
            signal(SIGTTOU, SIG_DFL);
            dup2(stdin_tty ? s : null, 0);
            dup2(s, 1);
            dup2(s, 2);
            execv(BATON_CLI_PATH, (char **)argv);
            _exit(99);
        }
        setpgid(b, b);
        tcsetpgrp(s, b);
        for (;;) {
            int st;
            if (waitpid(b, &st, WUNTRACED) != b)
                _exit(97);
            if (WIFEXITED(st))
                _exit(WEXITSTATUS(st));
            if (WIFSIGNALED(st))
                _exit(128 + WTERMSIG(st));
            if (stops) {
                FILE *f = fopen(stops, "a");
                fprintf(f, "stopped %d\n", tcgetpgrp(s) == b);
                fclose(f);
            }
            tcsetpgrp(s, b);
            kill(-b, SIGCONT);
        }
    }
    free(argv);
    *master = m;
    return pid;
}

/* Reads from the terminal's master until `want` shows up or ms pass; true if it did. */
static bool pty_expect(int m, const char *want, int64_t ms, char *seen, size_t len)
{
    size_t have = strlen(seen);
    int64_t end = th_ms() + ms;
    while (strstr(seen, want) == NULL) {
        int64_t left = end - th_ms();
        if (left <= 0)
            return false;
        struct pollfd p = {m, POLLIN, 0};
        if (poll(&p, 1, (int)left) <= 0)
            continue;
        ssize_t r = read(m, seen + have, len - have - 1);
        if (r <= 0)
            return false;
        have += (size_t)r;
        seen[have] = '\0';
    }
    return true;
}

/* COMMAND has the terminal while it runs: it reads it, and Ctrl-C reaches it (once). */
Test(cli, an_interactive_command_reads_the_terminal_and_gets_ctrl_c)
{
    const char *name = th_tmpname("cli-tty");
    char *log = cli_path("ints");
    char script[512];
    snprintf(script, sizeof script,
             "trap 'echo INT >> \"%s\"; exit 9' INT; read x; echo \"got:$x\"; "
             "while :; do sleep 0.05; done",
             log);
    int m;
    pid_t pid = spawn_on_pty(ARGS("lock", name, "--", "sh", "-c", script), true, NULL, &m);
    char seen[8192] = "";
    cr_assert(eq(int, (int)write(m, "hello\n", 6), 6));
    cr_assert(pty_expect(m, "got:hello", 5000, seen, sizeof seen), "terminal: %s", seen);
    th_sleep_ms(100);
    cr_assert(eq(int, (int)write(m, "\003", 1), 1)); /* Ctrl-C */
    int st = th_wait(pid);
    cr_assert(eq(int, st, 9), "terminal: %s", seen);
    char *ints = cli_read_file(log);
    cr_assert(ints && strcmp(ints, "INT\n") == 0, "the trap ran: %s", ints ? ints : "never");
    free(ints);
    cr_assert(eq(i64, exists(name), 0));
    close(m);
    free(log);
}

/* With stdin not the terminal, baton keeps it; Ctrl-C goes to baton's group and baton
 * forwards it to COMMAND's (once). */
Test(cli, ctrl_c_to_batons_group_reaches_command_once)
{
    const char *name = th_tmpname("cli-tty-bg");
    char *log = cli_path("ints");
    char script[512];
    snprintf(script, sizeof script,
             "trap 'echo INT >> \"%s\"; exit 9' INT; echo ready; while :; do sleep 0.05; done",
             log);
    int m;
    pid_t pid = spawn_on_pty(ARGS("lock", name, "--", "sh", "-c", script), false, NULL, &m);
    char seen[8192] = "";
    cr_assert(pty_expect(m, "ready", 5000, seen, sizeof seen), "terminal: %s", seen);
    th_sleep_ms(100);
    cr_assert(eq(int, (int)write(m, "\003", 1), 1)); /* Ctrl-C */
    int st = th_wait(pid);
    cr_assert(eq(int, st, 9), "terminal: %s", seen);
    char *ints = cli_read_file(log);
    cr_assert(ints && strcmp(ints, "INT\n") == 0, "the trap ran: %s", ints ? ints : "never");
    free(ints);
    cr_assert(eq(i64, exists(name), 0));
    close(m);
    free(log);
}

/* Ctrl-Z stops COMMAND's group: baton takes the terminal back and stops too (a shell sees the
 * job stopped); continued, it gives COMMAND the terminal again and continues it. */
Test(cli, ctrl_z_stops_baton_with_command_and_continue_resumes_both)
{
    const char *name = th_tmpname("cli-tty-stop");
    int m;
    char *stops = cli_path("stops");
    pid_t pid = spawn_on_pty(ARGS("lock", name, "--", "sh", "-c",
                                  "echo ready; read x; echo \"got:$x\"; read y; echo \"got:$y\""),
                             true, stops, &m);
    char seen[8192] = "";
    cr_assert(pty_expect(m, "ready", 5000, seen, sizeof seen), "terminal: %s", seen);
    th_sleep_ms(100);
    cr_assert(eq(int, (int)write(m, "\032", 1), 1)); /* Ctrl-Z */
    cr_assert(cli_wait_file(stops, 5000), "baton did not stop with COMMAND");
    th_sleep_ms(50);
    cr_assert(eq(int, (int)write(m, "one\n", 4), 4));
    cr_assert(pty_expect(m, "got:one", 5000, seen, sizeof seen), "terminal: %s", seen);
    cr_assert(eq(int, (int)write(m, "two\n", 4), 4));
    cr_assert(pty_expect(m, "got:two", 5000, seen, sizeof seen), "terminal: %s", seen);
    cr_assert(eq(int, th_wait(pid), 0), "terminal: %s", seen);
    char *text = cli_read_file(stops);
    cr_assert(eq(str, text, "stopped 1\n"), "baton took the terminal back and stopped once");
    free(text);
    free(stops);
    close(m);
}

/* ---------------------------------------------------------------- names vs options --- */

/* A listening socket on a free loopback port that nothing should ever reach. */
static int trap_listener(int *port)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    cr_assert(s >= 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert(bind(s, (struct sockaddr *)&a, sizeof a) == 0);
    cr_assert(listen(s, 64) == 0);
    socklen_t len = sizeof a;
    cr_assert(getsockname(s, (struct sockaddr *)&a, &len) == 0);
    *port = ntohs(a.sin_port);
    return s;
}

/* Asserts that no connection reached the listener (printing what one sent if it did). */
static void assert_never_reached(int s, const char *secret)
{
    int c = accept(s, NULL, NULL);
    if (c < 0) {
        int e = errno;
        cr_assert(e == EAGAIN || e == EWOULDBLOCK, "accept: %s", strerror(e));
        return;
    }
    char buf[1024] = "";
    th_sleep_ms(200);
    ssize_t n = recv(c, buf, sizeof buf - 1, MSG_DONTWAIT);
    buf[n > 0 ? n : 0] = '\0';
    close(c);
    cr_assert(strstr(buf, secret) == NULL, "the password reached the other server: %s", buf);
    cr_assert(false, "baton connected to the server named in a NAME's place; it sent: %s", buf);
}

/* Issue 28.2: a word in a NAME's place never names the server. --url after a NAME, given
 * twice, or abbreviated is a usage error (exit 2) that connects nowhere and runs nothing;
 * the password never reaches the other server. */
Test(cli, a_name_never_redirects_baton_to_another_server, .timeout = 60)
{
    int port;
    int s = trap_listener(&port);
    char url[160], url_pw[160], bad_eq[200], ab1[200], ab2[200];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    snprintf(url_pw, sizeof url_pw, "redis://:Sekr1t-pw@127.0.0.1:%d", port);
    snprintf(bad_eq, sizeof bad_eq, "--url=%s", url_pw);
    snprintf(ab1, sizeof ab1, "--ur=%s", url_pw);
    snprintf(ab2, sizeof ab2, "--u=%s", url);
    setenv("BATON_PASSWORD", "Sekr1t-pw", 1);
    char *marker = cli_path("marker");
    const char *const *cases[] = {
        /* the issue's command line */
        ARGS("lock", "item:A", bad_eq, "-n", "--", "touch", marker),
        ARGS("lock", "item:A", "--url", url_pw, "-n", "--", "touch", marker),
        ARGS("lock", "item:A", "item:B", bad_eq, "--", "touch", marker),
        ARGS("rwlock", "item:A", "--read", bad_eq, "--", "touch", marker),
        ARGS("semaphore", "item:A", bad_eq, "--", "touch", marker),
        ARGS("semaphore", "item:A", bad_eq, "set", "3"),
        ARGS("latch", "item:A", bad_eq, "count"),
        ARGS("latch", "item:A", "count", bad_eq),
        ARGS("status", "item:A", bad_eq),
        ARGS("unlock", "--force", "item:A", bad_eq),
        ARGS("lock", "--object", "x", bad_eq, "--", "touch", marker),
        /* abbreviations, anywhere */
        ARGS("lock", "item:A", ab1, "--", "touch", marker),
        ARGS("lock", ab1, "item:A", "--", "touch", marker),
        ARGS(ab1, "lock", "item:A", "--", "touch", marker),
        ARGS("--ur", url, "status", "item:A"),
        ARGS("status", ab2, "item:A"),
        ARGS("lock", "item:A", "--wa", "1s", "--", "touch", marker),
        /* twice */
        ARGS("--url", th_url(), "lock", "--url", url, "item:A", "--", "touch", marker),
        ARGS("lock", "--url", th_url(), bad_eq, "item:A", "--", "touch", marker),
        /* the other connection options after a NAME */
        ARGS("lock", "item:A", "--tls-insecure", "--", "touch", marker),
        ARGS("lock", "item:A", "--user", "admin", "--", "touch", marker),
        ARGS("status", "item:A", "--askpass"),
        ARGS("lock", "item:A", "--tls-sni=x", "--", "touch", marker),
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cli_result r;
        cli_exec(&r, cases[i]);
        cr_assert(eq(int, r.status, 2), "case %zu: status %d, stderr %s", i, r.status, r.err);
        cr_assert(strstr(r.err, "Sekr1t") == NULL, "case %zu: the password shown: %s", i, r.err);
        cli_result_free(&r);
        assert_never_reached(s, "Sekr1t");
    }
    cr_assert(access(marker, F_OK) != 0, "a COMMAND ran");
    unsetenv("BATON_PASSWORD");
    close(s);
    free(marker);
}

/* --object gives any NAME, even one that looks like an option, and it stays a NAME. */
Test(cli, object_passes_a_name_that_starts_with_a_dash)
{
    int port;
    int s = trap_listener(&port);
    char name[200];
    snprintf(name, sizeof name, "--url=redis://127.0.0.1:%d-%s", port, th_tmpname("obj"));
    char script[600];
    snprintf(script, sizeof script, "%s status --json --object '%s'", BATON_CLI_PATH, name);
    cli_result r;
    cli_exec(&r, ARGS("lock", "--object", name, "-n", "--", "sh", "-c", script));
    cr_assert(eq(int, r.status, 0), "stderr %s", r.err);
    json *j = json_parse(r.out);
    cr_assert(j != NULL, "%s", r.out);
    cr_assert(eq(str, json_get(json_at(j, 0), "name")->string, name), "%s", r.out);
    cr_assert(eq(str, json_get(json_at(j, 0), "kind")->string, "lock"), "%s", r.out);
    json_free(j);
    cli_result_free(&r);
    /* --object=NAME, several, among other names; latch, semaphore, unlock */
    const char *dash = th_tmpname("-n");
    cli_exec(&r, ARGS("lock", "--object=-E", th_tmpname("plain"), "--object", dash, "--", "true"));
    cr_assert(eq(int, r.status, 0), "stderr %s", r.err);
    cli_result_free(&r);
    cli_exec(&r, ARGS("latch", "--object", dash, "set", "2"));
    cr_assert(eq(int, r.status, 0), "stderr %s", r.err);
    cli_result_free(&r);
    cli_exec(&r, ARGS("latch", "--object", dash, "count"));
    cr_assert(eq(int, r.status, 0), "stderr %s", r.err);
    cr_assert(eq(str, r.out, "2\n"));
    cli_result_free(&r);
    const char *sem = th_tmpname("-sem");
    cli_exec(&r, ARGS("semaphore", "--object", sem, "--permits", "1", "--", "true"));
    cr_assert(eq(int, r.status, 0), "stderr %s", r.err);
    cli_result_free(&r);
    const char *held = th_tmpname("--hold");
    baton_lock *l;
    baton_client *c = hold(held, &l);
    cli_exec(&r, ARGS("unlock", "--force", "--object", held));
    cr_assert(eq(int, r.status, 0), "stderr %s", r.err);
    cli_result_free(&r);
    baton_lock_close(l);
    baton_client_close(c);
    /* a word that starts with '-' and is not an option is refused, with the way out */
    cli_exec(&r, ARGS("lock", "-x-name", "--", "true"));
    cr_assert(eq(int, r.status, 2));
    cr_assert(strstr(r.err, "--object") != NULL, "stderr %s", r.err);
    cli_result_free(&r);
    assert_never_reached(s, "");
    close(s);
}

/* Issue 33: the global options that do not say where to connect are taken after the
 * command and its NAMEs too; the server and credentials come before the first NAME. */
Test(cli, global_options_after_the_command)
{
    const char *name = th_tmpname("cli-global-after");
    cli_result r;
    cli_exec(&r, ARGS("lock", name, "--sync-replicas", "0", "--", "true"));
    cr_assert(eq(int, r.status, 0), "stderr %s", r.err);
    cli_result_free(&r);
    cli_exec(&r, ARGS("lock", "--url", th_url(), name, "--sync-replicas=0", "-n", "--", "true"));
    cr_assert(eq(int, r.status, 0), "stderr %s", r.err);
    cli_result_free(&r);
    cli_exec(&r, ARGS("status", "--url", th_url(), name));
    cr_assert(eq(int, r.status, 0), "stderr %s", r.err);
    cli_result_free(&r);
    cli_exec(&r, ARGS("lock", name, "--sync-replicas", "x", "--", "true"));
    cr_assert(eq(int, r.status, 2), "stderr %s", r.err);
    cli_result_free(&r);
    /* no value after "=" for a flag, no value at all for an option that takes one */
    cli_exec(&r, ARGS("lock", name, "--hold=yes"));
    cr_assert(eq(int, r.status, 2), "stderr %s", r.err);
    cli_result_free(&r);
    cli_exec(&r, ARGS("lock", name, "--", "true", "--url"));
    cr_assert(eq(int, r.status, 0), "COMMAND's words are its own: stderr %s", r.err);
    cli_result_free(&r);
}

/* ---------------------------------------------------------------- partition ---------- */

/* Issue 27.3: partitioned from the server, baton is told the lock is lost, stops COMMAND and
 * exits 122 within a bounded time: the release it then tries does not keep it for ~15 s. */
Test(cli, a_partition_ends_baton_within_the_release_bound, .timeout = 60)
{
    for (int sem = 0; sem < 2; sem++) {
        th_proxy *px = th_proxy_start(th_port());
        const char *name = th_tmpname("cli-partition");
        char *pidfile = cli_path("pid");
        char script[256];
        snprintf(script, sizeof script, "echo $$ > \"%s.tmp\"; mv \"%s.tmp\" \"%s\"; exec sleep 30",
                 pidfile, pidfile, pidfile);
        pid_t pid = cli_spawn(ARGS("--url", th_proxy_url(px), sem ? "semaphore" : "lock", name,
                                   "--watchdog", "1500ms", "--kill-after", "300ms",
                                   sem ? "--permits" : "--kill-after", sem ? "1" : "300ms", "--",
                                   "sh", "-c", script));
        cr_assert(cli_wait_file(pidfile, 5000), "COMMAND did not start");
        int64_t t0 = th_ms();
        th_proxy_hold(px, true);
        int st = th_wait(pid);
        int64_t took = th_ms() - t0;
        char *err = cli_bg_err(pid);
        cr_assert(eq(int, st, 122), "stderr: %s", err);
        /* told at the lease's end (1.5 s), COMMAND gone at once; then the release, given
         * CLI_LOST_RELEASE_MS (1 s) */
        cr_assert(le(i64, took, 1500 + 300 + 1000 + 1000),
                  "%s: exited %lld ms after the partition: %s", sem ? "semaphore" : "lock",
                  (long long)took, err);
        cr_assert(strstr(err, "lease") != NULL, "stderr: %s", err);
        cr_log_info("%s: baton exited %lld ms after the partition", sem ? "semaphore" : "lock",
                    (long long)took);
        free(err);
        th_proxy_heal(px);
        th_proxy_stop(px);
        free(pidfile);
    }
}

/* ---------------------------------------------------------------- issue 46 ----------- */

/* Issue 46.1: redis-cli's -h HOST, -p PORT, -a PASSWORD and -n DB are refused (exit 2) with
 * what to write instead, before the command and after it; COMMAND never runs. `baton -h`
 * alone and --help (anywhere) stay the help. */
Test(cli, redis_cli_short_options_are_refused_with_what_to_write)
{
    char *marker = cli_path("marker-rcli");
    const char *name = th_tmpname("rcli");
    struct {
        const char *const *args;
        const char *says;
    } cases[] = {
        {ARGS("-h", "127.0.0.1", "lock", name, "-n", "--", "touch", marker), "--url"},
        {ARGS("-h127.0.0.1", "lock", name, "-n", "--", "touch", marker), "--url"},
        {ARGS("-p", "6379", "lock", name, "-n", "--", "touch", marker), "--url"},
        {ARGS("-a", "Sekr1t-pw", "lock", name, "-n", "--", "touch", marker), "REDISCLI_AUTH"},
        {ARGS("-n", "3", "lock", name, "-n", "--", "touch", marker), "/DB"},
        {ARGS("-h", "127.0.0.1", "-p", "6379", "status", name), "--url"},
        {ARGS("lock", name, "-h", "127.0.0.1", "--", "touch", marker), "--help"},
        {ARGS("lock", "-h", "127.0.0.1", name, "--", "touch", marker), "--help"},
        {ARGS("lock", name, "-p", "6379", "--", "touch", marker), "--url"},
        {ARGS("lock", name, "-a", "Sekr1t-pw", "--", "touch", marker), "REDISCLI_AUTH"},
        {ARGS("status", name, "-n", "3"), "/DB"},
        {ARGS("latch", name, "count", "-n", "3"), "/DB"},
        {ARGS("leader", name, "-h", "127.0.0.1"), "--help"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cli_result r;
        cli_exec(&r, cases[i].args);
        cr_assert(eq(int, r.status, 2), "case %zu: status %d, stderr %s", i, r.status, r.err);
        cr_assert(strstr(r.err, cases[i].says) != NULL, "case %zu: %s", i, r.err);
        cr_assert(strstr(r.err, "Sekr1t") == NULL, "case %zu: the password shown: %s", i, r.err);
        cr_assert(eq(str, r.out, ""), "case %zu printed on stdout: %s", i, r.out);
        cli_result_free(&r);
    }
    cr_assert(access(marker, F_OK) != 0, "a COMMAND ran");
    /* the help stays the help */
    const char *const *help[] = {ARGS("-h"), ARGS("--help"), ARGS("lock", "--help"),
                                 ARGS("lock", name, "--help", "--", "touch", marker)};
    for (size_t i = 0; i < sizeof help / sizeof help[0]; i++) {
        cli_result r;
        cli_exec(&r, help[i]);
        cr_assert(eq(int, r.status, 0), "help %zu: %d %s", i, r.status, r.err);
        cr_assert(strstr(r.out, "usage") != NULL || strstr(r.out, "Usage") != NULL, "%s", r.out);
        cli_result_free(&r);
    }
    /* -n after lock is still flock's -n */
    cli_result r;
    cli_exec(&r, ARGS("lock", name, "-n", "--", "touch", marker));
    cr_assert(eq(int, r.status, 0), "stderr %s", r.err);
    cli_result_free(&r);
    cr_assert(access(marker, F_OK) == 0);
    free(marker);
}

/* Issue 46.2: after the command word, a single word never picks the server, the credentials
 * or the TLS checks: every such option in its one-word form ("--url=URL", "-uURL") is refused
 * there, and the flags that weaken a check (--tls-insecure, --insecure, --askpass) are taken
 * only before the command word. Nothing connects to the other server; COMMAND never runs.
 * The two-word forms after the command word still work. */
Test(cli, a_single_word_after_the_command_never_picks_server_credentials_or_tls, .timeout = 120)
{
    int port;
    int s = trap_listener(&port);
    char *marker = cli_path("marker-word");
    char *secret = cli_path("secret");
    FILE *f = fopen(secret, "w");
    cr_assert(f != NULL);
    fputs("Sekr1t-pw\n", f);
    fclose(f);
    chmod(secret, 0600);
    char url[160], u_word[200];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    snprintf(u_word, sizeof u_word, "-u%s", url);
    const char *opts[] = {"url",     "user",   "password-file", "tls-ca", "tls-cert", "tls-key",
                          "tls-sni", "cacert", "cacertdir",     "cert",   "key",      "sni"};
    setenv("BATON_PASSWORD", "Sekr1t-pw", 1);
    int checked = 0;
    for (size_t k = 0; k < sizeof opts / sizeof opts[0] + 1; k++) {
        char word[400];
        if (k < sizeof opts / sizeof opts[0])
            snprintf(word, sizeof word, "--%s=%s", opts[k],
                     strcmp(opts[k], "url") == 0             ? url
                     : strcmp(opts[k], "password-file") == 0 ? secret
                                                             : "x");
        else
            snprintf(word, sizeof word, "%s", u_word);
        const char *const *cases[] = {
            ARGS("list", word),
            ARGS("status", word, "x"),
            ARGS("lock", word, "job", "-n", "--", "touch", marker),
            ARGS("rwlock", word, "job", "--read", "-n", "--", "touch", marker),
            ARGS("semaphore", word, "job", "-n", "--", "touch", marker),
            ARGS("latch", word, "job", "count"),
            ARGS("unlock", "--force", word),
            ARGS("elect", word, "job", "-n", "--", "touch", marker),
            ARGS("leader", word),
            ARGS("barrier", word, "--parties", "2", "--timeout", "1s"),
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            cli_result r;
            cli_exec(&r, cases[i]);
            cr_assert(eq(int, r.status, 2), "%s: case %zu: status %d, stderr %s", word, i, r.status,
                      r.err);
            cr_assert(strstr(r.err, "Sekr1t") == NULL, "the password shown: %s", r.err);
            cli_result_free(&r);
            assert_never_reached(s, "Sekr1t");
            checked++;
        }
    }
    /* the flags that weaken a check or change where the password comes from */
    const char *flags[] = {"--tls-insecure", "--insecure", "--askpass"};
    char tls_url[160];
    snprintf(tls_url, sizeof tls_url, "rediss://127.0.0.1:%d", port);
    setenv("BATON_URL", tls_url, 1);
    for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++) {
        const char *const *cases[] = {
            ARGS("lock", flags[k], "x", "-n", "--", "touch", marker),
            ARGS("list", flags[k]),
            ARGS("elect", flags[k], "x", "--", "touch", marker),
            ARGS("leader", flags[k]),
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            cli_result r;
            cli_exec(&r, cases[i]);
            cr_assert(eq(int, r.status, 2), "%s: case %zu: status %d, stderr %s", flags[k], i,
                      r.status, r.err);
            cr_assert(strstr(r.err, "before the command") != NULL, "%s", r.err);
            cli_result_free(&r);
            assert_never_reached(s, "Sekr1t");
            checked++;
        }
    }
    unsetenv("BATON_URL");
    unsetenv("BATON_PASSWORD");
    cr_assert(access(marker, F_OK) != 0, "a COMMAND ran");
    cr_assert(gt(int, checked, 130));
    /* the two-word forms still work after the command word */
    cli_result r;
    cli_exec(&r, ARGS("lock", "--url", th_url(), th_tmpname("two-word"), "-n", "--", "true"));
    cr_assert(eq(int, r.status, 0), "stderr %s", r.err);
    cli_result_free(&r);
    cli_exec(&r, ARGS("lock", "-u", th_url(), th_tmpname("two-word"), "-n", "--", "true"));
    cr_assert(eq(int, r.status, 0), "stderr %s", r.err);
    cli_result_free(&r);
    close(s);
    free(marker);
    free(secret);
}

/* Issue 46.16: durations in days (1d, as the maximum is 365 days) and "infinity" for a wait
 * or a timeout (timeout(1)'s and systemd's word); not for a lease. */
Test(cli, durations_in_days_and_infinity)
{
    const char *name = th_tmpname("days");
    char script[600];
    snprintf(script, sizeof script, "%s status --json '%s'", BATON_CLI_PATH, name);
    cli_result r;
    cli_exec(&r, ARGS("lock", name, "--lease", "1d", "-w", "infinity", "--", "sh", "-c", script));
    cr_assert(eq(int, r.status, 0), "stderr %s", r.err);
    json *j = json_parse(r.out);
    cr_assert(j != NULL, "%s", r.out);
    double ttl = json_get(json_at(j, 0), "ttl_ms")->number;
    cr_assert(ttl > 86000000 && ttl <= 86400000, "ttl %f", ttl);
    json_free(j);
    cli_result_free(&r);
    const char *latch = th_tmpname("days-latch");
    cli_exec(&r, ARGS("latch", latch, "await", "--timeout", "infinity"));
    cr_assert(eq(int, r.status, 0), "stderr %s", r.err); /* never set: open */
    cli_result_free(&r);
    cli_exec(&r, ARGS("lock", name, "-w", "1d12h", "--", "true"));
    cr_assert(eq(int, r.status, 0), "stderr %s", r.err);
    cli_result_free(&r);
    const char *const *bad[] = {ARGS("lock", name, "--lease", "infinity", "--", "true"),
                                ARGS("lock", name, "-w", "366d", "--", "true"),
                                ARGS("lock", name, "--watchdog", "infinity", "--", "true")};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cli_exec(&r, bad[i]);
        cr_assert(eq(int, r.status, 2), "case %zu: %d %s", i, r.status, r.err);
        cr_assert(strstr(r.err, "1d") != NULL, "case %zu: %s", i, r.err);
        cli_result_free(&r);
    }
}

/* True if s holds a byte a terminal acts on: C0 controls but the final newline, DEL, or the
 * C1 CSI U+009B. */
static bool has_raw_control(const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n; i++) {
        unsigned char b = (unsigned char)s[i];
        if ((b < 0x20 && !(b == '\n' && i == n - 1)) || b == 0x7f)
            return true;
        if (b == 0xc2 && i + 1 < n && (unsigned char)s[i + 1] == 0x9b)
            return true;
    }
    return false;
}

/* Issue 46.7: one escaping rule for every line a human reads (leader, leader --watch,
 * status, list, messages on stderr), and --json encodes a name's bytes one way
 * everywhere (a byte that is not UTF-8, 0xff: \u00ff). */
Test(cli, one_escaping_rule_for_every_line_and_one_json_encoding, .timeout = 60)
{
    char name[200], value[] = "v\x1b[2J\xc2\x9b"
                              "1m\nforged";
    snprintf(name, sizeof name, "esc\x1b[31m\n\xff%s", th_tmpname("n"));
    /* leader and leader --watch (its first line), text and JSON */
    char script[1200];
    snprintf(script, sizeof script,
             "'%s' leader --object \"$N\"; '%s' leader --object \"$N\" --json; "
             "timeout -s INT 1 '%s' leader --object \"$N\" --watch; true",
             BATON_CLI_PATH, BATON_CLI_PATH, BATON_CLI_PATH);
    setenv("N", name, 1);
    cli_result r;
    cli_exec(&r, ARGS("elect", "--object", name, "--value", value, "-n", "--", "sh", "-c", script));
    unsetenv("N");
    cr_assert(eq(int, r.status, 0), "stderr %s", r.err);
    char *save = NULL;
    int lines = 0;
    for (char *line = strtok_r(r.out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        lines++;
        cr_assert(has_raw_control(line) == false, "a raw control byte: %s", line);
        if (line[0] == '{') {
            json *j = json_parse(line);
            cr_assert(j != NULL, "invalid JSON: %s", line);
            json_free(j);
            cr_assert(strstr(line, "\\u00ff") != NULL, "0xff not as \\u00ff: %s", line);
            cr_assert(strstr(line, "\\u001b") != NULL, "%s", line);
        } else {
            cr_assert(strstr(line, "\\x1b[2J") != NULL, "%s", line);
        }
    }
    cr_assert(eq(int, lines, 3), "%d lines: a value's newline forged one? %s", lines, r.out);
    cli_result_free(&r);

    /* status --json and list --json encode the same bytes the same way */
    baton_lock *l;
    baton_client *c = hold(name, &l);
    cli_exec(&r, ARGS("status", "--json", "--object", name));
    cr_assert(eq(int, r.status, 0), "stderr %s", r.err);
    cr_assert(strstr(r.out, "\\u00ff") != NULL && strstr(r.out, "\\\\x") == NULL, "%s", r.out);
    json *sj = json_parse(r.out);
    cr_assert(sj != NULL, "invalid JSON: %s", r.out);
    json_free(sj);
    cli_result_free(&r);
    cli_exec(&r, ARGS("list", "--json", "esc*"));
    cr_assert(eq(int, r.status, 0), "stderr %s", r.err);
    cr_assert(strstr(r.out, "\\u00ff") != NULL && strstr(r.out, "\\\\x") == NULL, "%s", r.out);
    cli_result_free(&r);
    /* the text forms */
    cli_exec(&r, ARGS("status", "--object", name));
    cr_assert(has_raw_control(r.out) == false || strchr(r.out, '\n') != NULL);
    for (char *line = strtok_r(r.out, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        cr_assert(has_raw_control(line) == false, "%s", line);
    cli_result_free(&r);
    /* a message on stderr: the wrong kind of key for a latch, and a busy lock */
    const char *const *errs[] = {ARGS("latch", "--object", name, "count"),
                                 ARGS("lock", "--object", name, "-n", "--", "true")};
    for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++) {
        cli_exec(&r, errs[i]);
        cr_assert(r.status != 0);
        cr_assert(strstr(r.err, "esc\\x1b[31m\\x0a\\xff") != NULL, "case %zu: %s", i, r.err);
        cr_assert(has_raw_control(r.err) == false, "case %zu: a raw control byte: %s", i, r.err);
        cli_result_free(&r);
    }
    baton_lock_close(l);
    baton_client_close(c);
}

/* Issue 46.8: an entry another writer added to an election's log is skipped and counted
 * (a warning on stderr): `leader --watch` goes on and prints the changes after it. */
Test(cli, a_forged_election_log_entry_never_ends_leader_watch, .timeout = 60)
{
    const char *name = th_tmpname("forged");
    char *ready = cli_path("forged-ready"), *go = cli_path("forged-go");
    char script[600];
    snprintf(script, sizeof script, "touch '%s'; while [ ! -e '%s' ]; do sleep 0.05; done", ready,
             go);
    pid_t leader = cli_spawn(ARGS("elect", name, "--", "sh", "-c", script));
    cr_assert(cli_wait_file(ready, 10000), "not elected");
    redisContext *admin = th_redis();
    /* forged before the watch starts: the last entry is unreadable */
    freeReplyObject(th_cmd(admin, "XADD baton_election_log:{%s} * evil 1", name));
    pid_t watch = cli_spawn(ARGS("leader", name, "--watch"));
    char out_path[300];
    snprintf(out_path, sizeof out_path, "%s/bg-%d.out", cli_tmpdir(), (int)watch);
    char *text = NULL;
    for (int i = 0; i < 200; i++) {
        free(text);
        text = cli_read_file(out_path);
        if (text && strstr(text, "term "))
            break;
        th_sleep_ms(20);
    }
    cr_assert(text && strstr(text, "term ") != NULL, "%s", text ? text : "(none)");
    /* forged while it watches, then a real change: the resign */
    freeReplyObject(th_cmd(admin, "XADD baton_election_log:{%s} * change bogus term x", name));
    freeReplyObject(th_cmd(admin, "XADD baton_election_log:{%s} * a b c d", name));
    FILE *f = fopen(go, "w");
    cr_assert(f != NULL);
    fclose(f);
    int st = 0;
    cr_assert(waitpid(leader, &st, 0) == leader);
    cr_assert(eq(int, st, 0), "elect: %d", st);
    for (int i = 0; i < 300; i++) {
        free(text);
        text = cli_read_file(out_path);
        if (text && strstr(text, "resigned"))
            break;
        th_sleep_ms(20);
    }
    cr_assert(text != NULL && strstr(text, "resigned") != NULL, "the watch did not go on: %s",
              text ? text : "(none)");
    cr_assert(waitpid(watch, &st, WNOHANG) == 0, "leader --watch ended");
    kill(watch, SIGINT);
    cr_assert(waitpid(watch, &st, 0) == watch);
    char *err = cli_bg_err(watch);
    cr_assert(strstr(err, "malformed") == NULL, "%s", err);
    cr_assert(strstr(err, "skipped") != NULL && strstr(err, "(3 in all)") != NULL, "%s", err);
    free(err);
    free(text);
    free(ready);
    free(go);
    redisFree(admin);
}

/* Issue 46.14: a busy message says who holds (host and pid, the lease's end), the same way
 * for every command; a multi-lock names its busy member; elect says who leads and for how
 * long. */
Test(cli, busy_messages_say_who_holds, .timeout = 60)
{
    char host[256] = "", want[400];
    gethostname(host, sizeof host - 1);
    snprintf(want, sizeof want, "held by %s pid %d, its lease ends in ", host, (int)getpid());
    const char *busy = th_tmpname("busy"), *free_name = th_tmpname("free");
    baton_lock *l;
    baton_client *c = hold(busy, &l);
    cli_result r;
    cli_exec(&r, ARGS("lock", busy, "-n", "--", "true"));
    cr_assert(eq(int, r.status, 124), "%s", r.err);
    cr_assert(strstr(r.err, "not acquired within 0ms: ") != NULL, "%s", r.err);
    cr_assert(strstr(r.err, want) != NULL, "%s", r.err);
    cr_assert(strstr(r.err, "; not run: true") != NULL, "%s", r.err);
    cli_result_free(&r);
    /* the multi-lock names the busy member, not the free one */
    cli_exec(&r, ARGS("lock", free_name, busy, "-w", "100ms", "--", "true"));
    cr_assert(eq(int, r.status, 124), "%s", r.err);
    char member[900];
    snprintf(member, sizeof member, ": %s %s", busy, want);
    cr_assert(strstr(r.err, member) != NULL, "%s", r.err);
    char freed[300];
    snprintf(freed, sizeof freed, ": %s held", free_name);
    cr_assert(strstr(r.err, freed) == NULL, "%s", r.err);
    cli_result_free(&r);
    baton_lock_close(l);
    baton_client_close(c);

    /* a semaphore: what is free and held */
    const char *sem = th_tmpname("busy-sem");
    char *go = cli_path("busy-go"), *ready = cli_path("busy-ready");
    char script[600];
    snprintf(script, sizeof script, "touch '%s'; while [ ! -e '%s' ]; do sleep 0.05; done", ready,
             go);
    pid_t holder = cli_spawn(ARGS("semaphore", sem, "--permits", "1", "--", "sh", "-c", script));
    cr_assert(cli_wait_file(ready, 10000));
    cli_exec(&r, ARGS("semaphore", sem, "-n", "--", "true"));
    cr_assert(eq(int, r.status, 124), "%s", r.err);
    cr_assert(strstr(r.err, "1 permit not acquired within 0ms: 0 permits free, 1 permit lease "
                            "held; not run: true") != NULL,
              "%s", r.err);
    cli_result_free(&r);
    /* an election: who leads, for how long, the term */
    const char *el = th_tmpname("busy-el");
    char *ready2 = cli_path("busy-ready2");
    snprintf(script, sizeof script, "touch '%s'; while [ ! -e '%s' ]; do sleep 0.05; done", ready2,
             go);
    pid_t leader = cli_spawn(ARGS("elect", el, "--", "sh", "-c", script));
    cr_assert(cli_wait_file(ready2, 10000));
    cli_exec(&r, ARGS("elect", el, "-n", "--", "true"));
    cr_assert(eq(int, r.status, 124), "%s", r.err);
    snprintf(want, sizeof want, "not elected within 0ms: led by %s pid %d for ", host, (int)leader);
    cr_assert(strstr(r.err, want) != NULL && strstr(r.err, "(term 1); not run: true") != NULL, "%s",
              r.err);
    cli_result_free(&r);
    FILE *f = fopen(go, "w");
    cr_assert(f != NULL);
    fclose(f);
    int st;
    cr_assert(waitpid(holder, &st, 0) == holder && waitpid(leader, &st, 0) == leader);
    free(go);
    free(ready);
    free(ready2);
}

/* The keys whose name contains `part` (SCAN). */
static long long keys_with(redisContext *r, const char *part)
{
    redisReply *k = th_cmd(r, "KEYS *%s*", part);
    long long n = (long long)k->elements;
    freeReplyObject(k);
    return n;
}

/* Issue 46.9: a failed call writes nothing: elect on a name whose election record has the
 * wrong type, and a multi-lock whose second member has the wrong type (no fencing counter
 * advanced, no unlock latch left for the first); the message carries the server's word. */
Test(cli, failed_elect_and_multi_lock_on_a_wrong_type_write_nothing)
{
    redisContext *r = th_redis();
    const char *el = th_tmpname("wt-elect");
    freeReplyObject(th_cmd(r, "SET baton_election:{%s} x", el));
    cli_result res;
    cli_exec(&res, ARGS("elect", el, "-n", "--", "true"));
    cr_assert(eq(int, res.status, 125), "%s", res.err);
    cr_assert(strstr(res.err, "WRONGTYPE") != NULL, "no server word: %s", res.err);
    cli_result_free(&res);
    cr_assert(eq(i64, keys_with(r, el), 1), "elect wrote beside the wrong-type record");
    freeReplyObject(th_cmd(r, "DEL baton_election:{%s}", el));
    freeReplyObject(th_cmd(r, "SET baton_election_log:{%s} x", el));
    cli_exec(&res, ARGS("elect", el, "-n", "--", "true"));
    cr_assert(eq(int, res.status, 125), "%s", res.err);
    cli_result_free(&res);
    cr_assert(eq(i64, keys_with(r, el), 1), "elect wrote beside the wrong-type log");

    /* the multi-lock: members in canonical (name) order, the second a string */
    char first[200], second[200];
    const char *base = th_tmpname("wt-multi");
    snprintf(first, sizeof first, "%s-a", base);
    snprintf(second, sizeof second, "%s-b", base);
    freeReplyObject(th_cmd(r, "SET %s x", second));
    cli_exec(&res, ARGS("lock", first, second, "-n", "--", "true"));
    cr_assert(eq(int, res.status, 125), "%s", res.err);
    cr_assert(strstr(res.err, "WRONGTYPE") != NULL, "%s", res.err);
    cli_result_free(&res);
    cr_assert(eq(i64, keys_with(r, first), 0), "the first member was written");
    redisFree(r);
}

/* The nth proxy connection of the pub/sub client of process pid (CLIENT LIST: flags P and
 * the name baton gives its connections, baton:<host>:<pid>); 0 if none yet. */
static long pubsub_conn_of(th_proxy *px, pid_t pid)
{
    redisContext *r = th_redis();
    redisReply *l = th_cmd(r, "CLIENT LIST");
    long nth = 0;
    char want[64];
    snprintf(want, sizeof want, ":%d ", (int)pid);
    for (char *save = NULL, *line = strtok_r(l->str, "\n", &save); line && !nth;
         line = strtok_r(NULL, "\n", &save)) {
        char *flags = strstr(line, " flags="), *name = strstr(line, " name=baton:");
        char *addr = strstr(line, " addr=127.0.0.1:");
        if (!flags || !name || !addr || !strchr(flags + 7, 'P') || flags[7] == ' ')
            continue;
        char *sp = strchr(name + 1, ' ');
        if (!sp || !strstr(name, want) || strstr(name, want) > sp)
            continue;
        nth = th_proxy_conn_of(px, atoi(addr + 16));
    }
    freeReplyObject(l);
    redisFree(r);
    return nth;
}

/* Issue 46.5: a wait ends by its bound even when the server never confirms the UNSUBSCRIBE
 * of the waiter giving up (the pub/sub connection's replies thrown away once subscribed):
 * lock -w 2s and latch await --timeout 2s end within 2.5 s, not 7 (2 s + the 5 s command
 * timeout spent waiting for the confirmation). */
Test(cli, a_wait_ends_by_its_bound_when_unsubscribe_is_never_confirmed, .timeout = 60)
{
    for (int latch = 0; latch < 2; latch++) {
        const char *name = th_tmpname(latch ? "unsub-latch" : "unsub-lock");
        baton_lock *l = NULL;
        baton_client *c = NULL;
        cli_result r;
        if (latch) {
            cli_exec(&r, ARGS("latch", name, "set", "1"));
            cr_assert(eq(int, r.status, 0), "%s", r.err);
            cli_result_free(&r);
        } else {
            c = hold(name, &l);
        }
        th_proxy *px = th_proxy_start(th_port());
        int64_t t0 = th_ms();
        pid_t pid = cli_spawn(
            latch ? ARGS("--url", th_proxy_url(px), "latch", name, "await", "--timeout", "2s")
                  : ARGS("--url", th_proxy_url(px), "lock", name, "-w", "2s", "--", "true"));
        long nth = 0;
        for (int i = 0; i < 150 && !(nth = pubsub_conn_of(px, pid)); i++)
            th_sleep_ms(10);
        cr_assert(gt(i64, nth, 0), "no subscription seen");
        th_proxy_blackhole_conn(px, nth, TH_DOWN, true);
        int st = 0;
        cr_assert(waitpid(pid, &st, 0) == pid);
        int64_t ms = th_ms() - t0;
        bool exited = WIFEXITED(st);
        cr_assert(exited, "status %d", st);
        cr_expect(eq(int, WEXITSTATUS(st), latch ? 123 : 124));
        cr_assert(lt(i64, ms, 2600), "%s: ended after %lld ms", latch ? "latch await" : "lock -w",
                  (long long)ms);
        cr_assert(ge(i64, ms, 1900));
        th_proxy_stop(px);
        if (l) {
            baton_lock_close(l);
            baton_client_close(c);
        }
    }
}

/* ---------------------------------------------------------------- --notify (46.13) ---- */

/* Waits for the child pid: its exit status, or 128 + the signal that ended it. */
static int child_exit(pid_t pid)
{
    int st = 0;
    cr_assert(waitpid(pid, &st, 0) == pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* A NOTIFY_SOCKET listener, as systemd's: a datagram socket bound at a path. */
static int notify_listener(char **path)
{
    *path = cli_path("notify.sock");
    int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    cr_assert(s >= 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", *path);
    unlink(*path);
    cr_assert(bind(s, (struct sockaddr *)&a, sizeof a) == 0, "%s", strerror(errno));
    return s;
}

/* The next notification within ms into buf ("" if none came). */
static void notify_next(int s, char *buf, size_t len, int ms)
{
    struct pollfd p = {s, POLLIN, 0};
    buf[0] = '\0';
    if (poll(&p, 1, ms) == 1) {
        ssize_t n = recv(s, buf, len - 1, 0);
        buf[n > 0 ? n : 0] = '\0';
    }
}

/* Issue 46.13: --notify tells systemd STATUS= while baton waits and READY=1 only once the
 * lock is held (or the leadership won), before COMMAND starts; COMMAND does not inherit
 * NOTIFY_SOCKET. */
Test(cli, notify_tells_ready_only_once_held, .timeout = 60)
{
    char *sock_path;
    int s = notify_listener(&sock_path);
    const char *name = th_tmpname("notify");
    char *env_file = cli_path("notify-env");
    char script[600];
    snprintf(script, sizeof script, "echo \"NOTIFY_SOCKET=$NOTIFY_SOCKET\" > '%s'", env_file);
    baton_lock *l;
    baton_client *c = hold(name, &l);
    setenv("NOTIFY_SOCKET", sock_path, 1);
    pid_t pid = cli_spawn(ARGS("lock", name, "--notify", "--", "sh", "-c", script));
    unsetenv("NOTIFY_SOCKET");
    char msg[1024];
    notify_next(s, msg, sizeof msg, 5000);
    cr_assert(strncmp(msg, "STATUS=waiting for lock ", 24) == 0, "first: '%s'", msg);
    cr_assert(strstr(msg, "READY=1") == NULL, "%s", msg);
    /* nothing more while the lock is held by another */
    notify_next(s, msg, sizeof msg, 700);
    cr_assert(eq(str, msg, ""), "told while still waiting: %s", msg);
    cr_assert(access(env_file, F_OK) != 0);
    baton_lock_release(l);
    notify_next(s, msg, sizeof msg, 5000);
    cr_assert(strncmp(msg, "READY=1\nSTATUS=holding lock ", 28) == 0, "'%s'", msg);
    cr_assert(strstr(msg, "(fencing token ") != NULL, "%s", msg);
    cr_assert(eq(int, child_exit(pid), 0));
    char *env = cli_read_file(env_file);
    cr_assert(env != NULL && strcmp(env, "NOTIFY_SOCKET=\n") == 0, "COMMAND saw %s", env);
    free(env);
    /* elect: standby, then leader */
    const char *el = th_tmpname("notify-el");
    setenv("NOTIFY_SOCKET", sock_path, 1);
    pid = cli_spawn(ARGS("elect", el, "--notify", "--", "true"));
    unsetenv("NOTIFY_SOCKET");
    notify_next(s, msg, sizeof msg, 5000);
    cr_assert(strncmp(msg, "STATUS=standby for election ", 28) == 0, "'%s'", msg);
    notify_next(s, msg, sizeof msg, 5000);
    cr_assert(strncmp(msg, "READY=1\nSTATUS=leader of election ", 34) == 0, "'%s'", msg);
    cr_assert(strstr(msg, "(term 1)") != NULL, "%s", msg);
    cr_assert(eq(int, child_exit(pid), 0));
    /* without --notify, nothing is sent */
    setenv("NOTIFY_SOCKET", sock_path, 1);
    cli_result r;
    cli_exec(&r, ARGS("lock", name, "--", "true"));
    unsetenv("NOTIFY_SOCKET");
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cli_result_free(&r);
    notify_next(s, msg, sizeof msg, 300);
    cr_assert(eq(str, msg, ""), "told without --notify: %s", msg);
    baton_lock_close(l);
    baton_client_close(c);
    close(s);
    free(sock_path);
    free(env_file);
}

typedef struct cli_flood {
    const char *channel;
    atomic_int stop; /* set by the test's thread, read by the flooder's */
    long long sent;
} cli_flood;

/* Publishes to the channel in pipelined batches of 200 until told to stop. */
static void *cli_flooder(void *arg)
{
    cli_flood *f = arg;
    redisContext *r = th_redis();
    while (!atomic_load(&f->stop)) {
        for (int i = 0; i < 200; i++)
            redisAppendCommand(r, "PUBLISH %s flood", f->channel);
        for (int i = 0; i < 200; i++) {
            redisReply *rep = NULL;
            if (redisGetReply(r, (void **)&rep) != REDIS_OK)
                break;
            freeReplyObject(rep);
        }
        f->sent += 200;
    }
    redisFree(r);
    return NULL;
}

/* Issue 46.5, under a flood: a waiter whose channel gets a PUBLISH flood ends by its
 * bound too (lock -w 2s: within 2.9 s), whatever is queued before its UNSUBSCRIBE's
 * confirmation. */
Test(cli, a_wait_under_a_message_flood_ends_by_its_bound, .timeout = 60)
{
    const char *name = th_tmpname("flooded");
    baton_lock *l;
    baton_client *c = hold(name, &l);
    char channel[300];
    snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);
    cli_flood f = {channel, 0, 0};
    pthread_t t;
    pthread_create(&t, NULL, cli_flooder, &f);
    cli_result r;
    cli_exec(&r, ARGS("lock", name, "-w", "2s", "--", "true"));
    atomic_store(&f.stop, 1);
    pthread_join(t, NULL);
    cr_log_info("flood: lock -w 2s ended after %lld ms, %lld messages published", (long long)r.ms,
                f.sent);
    cr_assert(eq(int, r.status, 124), "%s", r.err);
    cr_assert(lt(i64, r.ms, 2900), "lock -w 2s ended after %lld ms under the flood",
              (long long)r.ms);
    cli_result_free(&r);
    baton_lock_close(l);
    baton_client_close(c);
}
