/* The ACL rule's application and the CLI verbs a tenant runs (acl_helper.h). */
#define _GNU_SOURCE
#include "acl_helper.h"
#include "cli_helper.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

void acl_setuser(int port, const char *user, const char *extra)
{
    char *cmd = NULL;
    cr_assert(asprintf(&cmd,
                       "ACL SETUSER %s reset on >pw " ACL_RULE_SCOPE " " ACL_RULE_COMMANDS " %s",
                       user, extra ? extra : "") > 0);
    const char *argv[128];
    int argc = 0;
    for (char *save = NULL, *t = strtok_r(cmd, " ", &save); t && argc < 128;
         t = strtok_r(NULL, " ", &save))
        argv[argc++] = t;
    redisContext *r = th_redis_port(port);
    redisReply *rep = redisCommandArgv(r, argc, argv, NULL);
    cr_assert(rep && rep->type == REDIS_REPLY_STATUS, "ACL SETUSER on %d: %s", port,
              rep ? rep->str : r->errstr);
    freeReplyObject(rep);
    redisFree(r);
    free(cmd);
}

void acl_run_cli_verbs(const char *url, const char *name, const char *what)
{
    char *ename = NULL, *bname = NULL;
    cr_assert(asprintf(&ename, "%s-elect", name) > 0 && asprintf(&bname, "%s-barrier", name) > 0);
    struct {
        const char *const *args;
        int status;
    } runs[] = {
        {ARGS("--url", url, "lock", name, "-n", "--", "true"), 0},
        {ARGS("--url", url, "lock", name, "--fair", "-w", "1s", "--", "true"), 0},
        {ARGS("--url", url, "rwlock", name, "--read", "-n", "--", "true"), 0},
        {ARGS("--url", url, "rwlock", name, "--write", "-n", "--", "true"), 0},
        {ARGS("--url", url, "semaphore", name, "--permits", "2", "-n", "--", "true"), 0},
        {ARGS("--url", url, "semaphore", name, "--counting", "--permits", "2", "-n", "--", "true"),
         0},
        {ARGS("--url", url, "semaphore", name, "--counting", "add", "2"), 0},
        {ARGS("--url", url, "semaphore", name, "--counting", "drain"), 0},
        {ARGS("--url", url, "semaphore", name, "--counting", "delete"), 0},
        {ARGS("--url", url, "semaphore", name, "set", "3"), 0},
        {ARGS("--url", url, "semaphore", name, "delete"), 0},
        {ARGS("--url", url, "latch", name, "set", "1"), 0},
        {ARGS("--url", url, "latch", name, "count"), 0},
        {ARGS("--url", url, "latch", name, "count-down"), 0},
        {ARGS("--url", url, "latch", name, "await", "--timeout", "1s"), 0},
        {ARGS("--url", url, "status", name), 0},
        {ARGS("--url", url, "list", "P*"), 0},
        {ARGS("--url", url, "status", "--json", name), 0},
        {ARGS("--url", url, "unlock", "--force", name), 1},
        /* issue 46.3: elect, leader and barrier too */
        {ARGS("--url", url, "elect", ename, "-n", "--", BATON_CLI_PATH, "--url", url, "leader",
              ename),
         0},
        {ARGS("--url", url, "leader", ename, "--json"), 1}, /* resigned: nobody leads */
    };
    setenv("BATON_URL", url, 1); /* cli_exec's default, off a Sentinel or Cluster program */
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        cli_result r;
        cli_exec(&r, runs[i].args);
        cr_expect(r.status == runs[i].status, "%s: run %zu (%s %s): exit %d: %s", what, i,
                  runs[i].args[2], runs[i].args[4] ? runs[i].args[4] : "", r.status, r.err);
        cr_expect(strstr(r.err, "warning") == NULL, "%s: run %zu: %s", what, i, r.err);
        cli_result_free(&r);
    }
    /* leader --watch follows the election until interrupted (timeout's SIGINT: exit 124) */
    cli_result r;
    cli_exec_program(&r, ARGS("/usr/bin/timeout", "-s", "INT", "1", BATON_CLI_PATH, "--url", url,
                              "leader", ename, "--watch"));
    cr_expect(r.status == 124, "%s: leader --watch: exit %d: %s", what, r.status, r.err);
    cr_expect(strstr(r.out, "no leader") != NULL, "%s: leader --watch: %s", what, r.out);
    cli_result_free(&r);
    /* the other forms that run until interrupted: lock --hold (held, then released on
     * SIGINT) and status --watch (redrawn until SIGINT) */
    cli_exec_program(&r, ARGS("/usr/bin/timeout", "-s", "INT", "1", BATON_CLI_PATH, "--url", url,
                              "lock", name, "--hold"));
    cr_expect(r.status == 124, "%s: lock --hold: exit %d: %s", what, r.status, r.err);
    cr_expect(strstr(r.err, "holding lock") != NULL && strstr(r.err, "refused") == NULL,
              "%s: lock --hold: %s", what, r.err);
    cli_result_free(&r);
    cli_exec_program(&r, ARGS("/usr/bin/timeout", "-s", "INT", "1", BATON_CLI_PATH, "--url", url,
                              "status", name, "--watch", "--interval", "200ms"));
    cr_expect(r.status == 124, "%s: status --watch: exit %d: %s", what, r.status, r.err);
    cr_expect(strstr(r.out, name) != NULL && strstr(r.err, "refused") == NULL,
              "%s: status --watch: %s %s", what, r.out, r.err);
    cli_result_free(&r);
    /* barrier: two parties, the cyclic form and the double barrier around a COMMAND */
    for (int form = 0; form < 2; form++) {
        const char *const *args =
            form ? ARGS("--url", url, "barrier", bname, "--parties", "2", "--timeout", "10s", "--",
                        "true")
                 : ARGS("--url", url, "barrier", bname, "--parties", "2", "--timeout", "10s");
        pid_t other = cli_spawn(args);
        cli_exec(&r, args);
        int st = 0;
        cr_assert(waitpid(other, &st, 0) == other);
        char *err = cli_bg_err(other);
        cr_expect(r.status == 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
                  "%s: barrier (form %d): exit %d and %d: %s %s", what, form, r.status,
                  WIFEXITED(st) ? WEXITSTATUS(st) : -1, r.err, err ? err : "");
        free(err);
        cli_result_free(&r);
    }
    unsetenv("BATON_URL");
    free(ename);
    free(bname);
}

int acl_wait_exit(pid_t pid)
{
    int st = 0;
    cr_assert(waitpid(pid, &st, 0) == pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
