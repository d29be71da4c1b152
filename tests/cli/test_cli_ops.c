/*
 * The baton command as an operator lives with it (issue 33): `baton list`, the help's usage
 * lines, redis-cli's option spellings, connection names (CLIENT SETNAME), --password-file
 * and systemd's credential, status's kinds, escapes and loss causes, and the small ones
 * (one "warning:", --askpass without input, semaphore add -N). Each case runs the built
 * binary against the program's private server (or one of its own).
 */
#define _GNU_SOURCE
#include "cli_helper.h"

#include "new_assert.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

TestSuite(cli_ops, .timeout = 60);

/* The object named name in `list --json`'s "objects", or NULL. */
static const json *listed(const json *j, const char *name)
{
    const json *objs = json_get(j, "objects");
    for (size_t i = 0; objs && i < objs->n; i++)
        if (strcmp(json_get(objs->items[i], "name")->string, name) == 0)
            return objs->items[i];
    return NULL;
}

/* Polls `status NAME --json` until f(object) holds or ms pass. */
static bool status_until(const char *name, bool (*f)(const json *), int64_t ms)
{
    int64_t end = th_ms() + ms;
    do {
        cli_result r;
        cli_exec(&r, ARGS("status", "--json", "--object", name));
        json *j = json_parse(r.out);
        bool ok = j && f(json_at(j, 0));
        json_free(j);
        cli_result_free(&r);
        if (ok)
            return true;
        th_sleep_ms(20);
    } while (th_ms() < end);
    return false;
}

static bool held(const json *o)
{
    return json_get(o, "holders")->n > 0;
}

static bool queued(const json *o)
{
    return json_get(o, "queue")->n > 0;
}

static bool latch_waited(const json *o)
{
    return json_get(json_get(o, "subscribers"), "latch")->number > 0;
}

/* ---------------------------------------------------------------- list --------------- */

Test(cli_ops, list_shows_every_kind_under_the_pattern_with_holders_and_waiters)
{
    char p[128], lock[160], fair[160], rw[160], sem[160], per[160], latch[160], other[160];
    snprintf(p, sizeof p, "%s", th_tmpname("ops-list"));
    snprintf(lock, sizeof lock, "%s:lock", p);
    snprintf(fair, sizeof fair, "%s:fair", p);
    snprintf(rw, sizeof rw, "%s:rw", p);
    snprintf(sem, sizeof sem, "%s:sem", p);
    snprintf(per, sizeof per, "%s:per", p);
    snprintf(latch, sizeof latch, "%s:latch", p);
    snprintf(other, sizeof other, "%s:other", p);
    pid_t h_lock = cli_spawn(ARGS("lock", lock, "--hold"));
    pid_t h_fair = cli_spawn(ARGS("lock", "--fair", fair, "--hold"));
    cr_assert(status_until(fair, held, 5000));
    pid_t w_fair = cli_spawn(ARGS("lock", "--fair", fair, "--", "true"));
    pid_t h_rw = cli_spawn(ARGS("rwlock", rw, "--read", "--hold"));
    pid_t h_per = cli_spawn(ARGS("semaphore", per, "--permits", "2", "--", "sleep", "30"));
    cli_result r;
    cli_exec(&r, ARGS("semaphore", sem, "--counting", "set", "4"));
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cli_result_free(&r);
    cli_exec(&r, ARGS("latch", latch, "set", "2"));
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cli_result_free(&r);
    pid_t w_latch = cli_spawn(ARGS("latch", latch, "await"));
    redisContext *rc = th_redis();
    freeReplyObject(th_cmd(rc, "RPUSH %s x", other)); /* not baton's: left out */
    cr_assert(status_until(lock, held, 5000));
    cr_assert(status_until(fair, queued, 5000));
    cr_assert(status_until(rw, held, 5000));
    cr_assert(status_until(latch, latch_waited, 5000));
    int64_t end = th_ms() + 5000;
    const json *o = NULL;
    json *j = NULL;
    char pattern[160];
    snprintf(pattern, sizeof pattern, "%s:*", p);
    do { /* the permit lease, once taken */
        json_free(j);
        cli_exec(&r, ARGS("list", pattern, "--json"));
        cr_assert(eq(int, r.status, 0), "%s", r.err);
        j = json_parse(r.out);
        cr_assert(j != NULL, "not JSON: %s", r.out);
        cli_result_free(&r);
        o = listed(j, per);
    } while ((!o || strcmp(json_get(o, "kind")->string, "permits") != 0) && th_ms() < end);
    cr_assert(eq(sz, json_get(j, "objects")->n, 6), "six objects, the list left out");
    cr_assert(json_get(j, "cut")->type == JSON_BOOL && !json_get(j, "cut")->boolean);
    o = listed(j, lock);
    cr_assert(o != NULL);
    cr_assert(eq(str, json_get(o, "kind")->string, "lock"));
    const json *holder = json_at(json_get(o, "holders"), 0);
    cr_assert(eq(int, (int)json_get(holder, "pid")->number, (int)h_lock));
    char host[256];
    gethostname(host, sizeof host);
    cr_assert(eq(str, json_get(holder, "host")->string, host));
    cr_assert(gt(int, (int)json_get(o, "ttl_ms")->number, 0));
    o = listed(j, fair);
    cr_assert(o != NULL);
    cr_assert(eq(str, json_get(o, "kind")->string, "fairlock"));
    cr_assert(eq(sz, json_get(o, "queue")->n, 1));
    o = listed(j, rw);
    cr_assert(o != NULL);
    cr_assert(eq(str, json_get(o, "kind")->string, "rwlock"));
    o = listed(j, sem);
    cr_assert(o != NULL);
    cr_assert(eq(int, (int)json_get(o, "value")->number, 4));
    o = listed(j, per);
    cr_assert(o != NULL);
    cr_assert(eq(str, json_get(o, "kind")->string, "permits"));
    cr_assert(eq(sz, json_get(o, "permits")->n, 1));
    o = listed(j, latch);
    cr_assert(o != NULL);
    cr_assert(eq(str, json_get(o, "kind")->string, "latch"));
    json_free(j);

    /* text: one line per object, holder with host and pid */
    cli_exec(&r, ARGS("list", pattern));
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    char want[400];
    snprintf(want, sizeof want, "@%s:%d", host, (int)h_lock);
    cr_assert(strstr(r.out, want) != NULL, "%s", r.out);
    size_t lines = 0;
    for (const char *s = r.out; (s = strchr(s, '\n')); s++)
        lines++;
    cr_assert(eq(sz, lines, 6), "%s", r.out);
    cr_assert(strstr(r.out, other) == NULL, "%s", r.out);
    cli_result_free(&r);

    /* a PATTERN narrows it: the queue of a fair lock is found by its NAME */
    char only_fair[200];
    snprintf(only_fair, sizeof only_fair, "%s:fa*", p);
    cli_exec(&r, ARGS("list", only_fair, "--json"));
    j = json_parse(r.out);
    cr_assert(j != NULL, "%s", r.out);
    cr_assert(eq(sz, json_get(j, "objects")->n, 1), "%s", r.out);
    json_free(j);
    cli_result_free(&r);

    kill(h_lock, SIGTERM);
    kill(h_fair, SIGTERM);
    kill(h_rw, SIGTERM);
    kill(h_per, SIGTERM);
    cr_assert(eq(int, th_wait(h_lock), 0));
    cr_assert(eq(int, th_wait(h_fair), 0));
    cr_assert(eq(int, th_wait(w_fair), 0));
    cr_assert(eq(int, th_wait(h_rw), 0));
    th_wait(h_per);
    cli_exec(&r, ARGS("latch", latch, "delete"));
    cli_result_free(&r);
    th_wait(w_latch);
    redisFree(rc);
}

Test(cli_ops, list_stops_at_max_keys_and_says_so)
{
    const char *p = th_tmpname("ops-cut");
    redisContext *rc = th_redis();
    for (int i = 0; i < 300; i++)
        freeReplyObject(th_cmd(rc, "SET %s:%d 1", p, i));
    cli_result r;
    char pattern[160];
    snprintf(pattern, sizeof pattern, "%s:*", p);
    cli_exec(&r, ARGS("list", pattern, "--json", "--max-keys", "20"));
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    json *j = json_parse(r.out);
    cr_assert(j != NULL, "%s", r.out);
    cr_assert(json_get(j, "cut")->boolean, "%s", r.out);
    cr_assert(le(int, (int)json_get(j, "examined")->number, 20));
    cr_assert(strstr(r.err, "stopped after examining") != NULL, "%s", r.err);
    json_free(j);
    cli_result_free(&r);
    cli_exec(&r, ARGS("list", pattern, "--json"));
    j = json_parse(r.out);
    cr_assert(j && !json_get(j, "cut")->boolean);
    cr_assert(eq(sz, json_get(j, "objects")->n, 300), "%s", r.err);
    json_free(j);
    cli_result_free(&r);
    redisFree(rc);
}

/* The election's and barrier's side keys and the clients' records are not objects: `list`
 * shows an election as the lock at its NAME and nothing of the rest (baton_key_object). */
Test(cli_ops, list_leaves_out_election_barrier_and_client_record_keys)
{
    const char *p = th_tmpname("ops-side");
    redisContext *rc = th_redis();
    freeReplyObject(th_cmd(rc, "HSET %s:el owner:1 1", p));
    freeReplyObject(th_cmd(rc, "HSET baton_election:{%s:el} term 1", p));
    freeReplyObject(th_cmd(rc, "XADD baton_election_log:{%s:el} * change elected", p));
    freeReplyObject(th_cmd(rc, "HSET baton_barrier:{%s:ba} generation 1", p));
    freeReplyObject(th_cmd(rc, "ZADD baton_barrier_parties:{%s:ba} 1 x", p));
    freeReplyObject(th_cmd(rc, "SET baton_client:{%s:id} host:1", p));
    freeReplyObject(th_cmd(rc, "SET baton_lock_next:{%s:el} owner:1", p));
    freeReplyObject(th_cmd(rc, "ZADD baton_lock_line:{%s:el} 1 owner:2", p));
    cli_result r;
    cli_exec(&r, ARGS("list", "--json"));
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    json *j = json_parse(r.out);
    cr_assert(j != NULL, "%s", r.out);
    char el[160];
    snprintf(el, sizeof el, "%s:el", p);
    cr_assert(listed(j, el) != NULL, "the election is listed at its NAME: %s", r.out);
    cr_assert(eq(str, json_get(listed(j, el), "kind")->string, "lock"));
    const json *objs = json_get(j, "objects");
    for (size_t i = 0; i < objs->n; i++) {
        const char *name = json_get(objs->items[i], "name")->string;
        cr_assert(strstr(name, p) == NULL || strcmp(name, el) == 0, "listed %s", name);
    }
    json_free(j);
    cli_result_free(&r);
    redisFree(rc);
}

/* ---------------------------------------------------------------- help --------------- */

Test(cli_ops, help_lists_hold_options_cluster_urls_and_rwlock_options)
{
    cli_result r;
    cli_exec(&r, ARGS("lock", "--help"));
    cr_assert(strstr(r.out, "--hold [-n | -w DUR] [-E CODE] [-q] [--lease DUR | --watchdog DUR] "
                            "[--fair]") != NULL,
              "%s", r.out);
    cli_result_free(&r);
    cli_exec(&r, ARGS("--help"));
    cr_assert(strstr(r.out, "redis+cluster://") != NULL);
    cr_assert(strstr(r.out, "--password-file") != NULL);
    cr_assert(strstr(r.out, "list [PATTERN]") != NULL);
    cli_result_free(&r);
    cli_exec(&r, ARGS("rwlock", "--help"));
    cr_assert(eq(int, r.status, 0));
    cr_assert(strstr(r.out, "as lock") == NULL, "%s", r.out);
    cr_assert(strstr(r.out, "--watchdog DUR") != NULL, "%s", r.out);
    cr_assert(strstr(r.out, "--read, --write") != NULL, "%s", r.out);
    cr_assert(strstr(r.out, "--kill-after DUR") != NULL, "%s", r.out);
    cli_result_free(&r);
}

/* ---------------------------------------------------------------- redis-cli ---------- */

Test(cli_ops, redis_cli_spellings_are_aliases_with_the_same_rules)
{
    const char *name = th_tmpname("ops-alias");
    cli_result r;
    unsetenv("BATON_URL");
    cli_exec(&r, ARGS("-u", th_url(), "status", name));
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cli_result_free(&r);
    char joined[200];
    snprintf(joined, sizeof joined, "-u%s", th_url());
    cli_exec(&r, ARGS(joined, "status", name));
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cli_result_free(&r);
    /* after the command word only as two words (issue 46.2) */
    cli_exec(&r, ARGS("status", joined, name));
    cr_assert(eq(int, r.status, 2), "%s", r.err);
    cli_result_free(&r);
    cli_exec(&r, ARGS("status", "-u", th_url(), name));
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cli_result_free(&r);
    /* never after a NAME, and once */
    const char *const *after[] = {
        ARGS("status", name, "-u", th_url()),
        ARGS("status", name, "--cacert", "/dev/null"),
        ARGS("status", name, "--cacertdir", "/tmp"),
        ARGS("status", name, "--cert", "/dev/null"),
        ARGS("status", name, "--key", "/dev/null"),
        ARGS("status", name, "--sni", "x"),
        ARGS("status", name, "--insecure"),
        ARGS("status", name, "--tls"),
        ARGS("status", name, "--password-file", "/dev/null"),
        ARGS("-u", th_url(), "status", "--url", th_url(), name),
    };
    for (size_t i = 0; i < sizeof after / sizeof after[0]; i++) {
        cli_exec(&r, after[i]);
        cr_assert(eq(int, r.status, 2), "case %zu: %d %s", i, r.status, r.err);
        cli_result_free(&r);
    }
    /* TLS options with a redis:// URL are refused as their baton names are */
    cli_exec(&r, ARGS("--cacert", "/dev/null", "status", name));
    cr_assert(eq(int, r.status, 2), "%s", r.err);
    cli_result_free(&r);
    cli_exec(&r, ARGS("--tls", "-u", "unix:///tmp/none.sock", "status", name));
    cr_assert(eq(int, r.status, 2), "%s", r.err);
    cli_result_free(&r);

    /* --tls speaks TLS to a redis:// URL: the first byte is a TLS handshake record */
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert(eq(int, bind(s, (struct sockaddr *)&a, sizeof a), 0));
    cr_assert(eq(int, listen(s, 4), 0));
    socklen_t len = sizeof a;
    getsockname(s, (struct sockaddr *)&a, &len);
    char url[100];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", ntohs(a.sin_port));
    pid_t pid = cli_spawn(ARGS("--tls", "--insecure", "-u", url, "status", name));
    /* the bound is for a hang, not for speed: a loaded CI machine running the sanitizer
     * build has taken more than 5 s to start the CLI; on a miss, say what the CLI said */
    struct pollfd pf = {s, POLLIN, 0};
    int ready = poll(&pf, 1, 30000);
    if (ready != 1) {
        kill(pid, SIGKILL);
        int st = th_wait(pid);
        char *err = cli_bg_err(pid);
        cr_assert(false, "the CLI never connected (poll %d, status %d): %s", ready, st, err);
    }
    int k = accept(s, NULL, NULL);
    unsigned char first = 0;
    pf = (struct pollfd){k, POLLIN, 0};
    cr_assert(eq(int, poll(&pf, 1, 30000), 1));
    cr_assert(eq(int, (int)read(k, &first, 1), 1));
    cr_assert(eq(int, first, 0x16), "not a TLS handshake: 0x%02x", first);
    close(k);
    close(s);
    cr_assert(eq(int, th_wait(pid), 120));
}

/* ---------------------------------------------------------------- passwords ---------- */

static char *write_file(const char *base, const char *text, mode_t mode)
{
    char *path = cli_path(base);
    FILE *f = fopen(path, "w");
    cr_assert(f != NULL);
    fputs(text, f);
    fclose(f);
    chmod(path, mode);
    return path;
}

Test(cli_ops, password_file_and_the_systemd_credential, .timeout = 30)
{
    th_server srv;
    th_server_start(&srv, "--requirepass right-password");
    char url[128];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", srv.port);
    unsetenv("BATON_PASSWORD");
    unsetenv("REDISCLI_AUTH");
    char *good = write_file("pw-good", "right-password\nsecond line\n", 0600);
    char *bad = write_file("pw-bad", "wrong-password\n", 0600);
    char *open_to_all = write_file("pw-world", "right-password\n", 0644);
    char *empty = write_file("pw-empty", "\n", 0600);
    cli_result r;
    cli_exec(&r, ARGS("--url", url, "--password-file", good, "lock", "pf", "--", "true"));
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cli_result_free(&r);
    cli_exec(&r, ARGS("--url", url, "--password-file", bad, "status", "pf"));
    cr_assert(eq(int, r.status, 121), "%s", r.err);
    cr_assert(strstr(r.err, "wrong-password") == NULL);
    cli_result_free(&r);
    cli_exec(&r, ARGS("--url", url, "--password-file", open_to_all, "status", "pf"));
    cr_assert(eq(int, r.status, 2), "%s", r.err);
    cr_assert(strstr(r.err, "readable by every user") != NULL, "%s", r.err);
    cli_result_free(&r);
    cli_exec(&r, ARGS("--url", url, "--password-file", empty, "status", "pf"));
    cr_assert(eq(int, r.status, 2), "%s", r.err);
    cli_result_free(&r);
    cli_exec(&r, ARGS("--url", url, "--password-file", "/nonexistent/pw", "status", "pf"));
    cr_assert(eq(int, r.status, 2), "%s", r.err);
    cli_result_free(&r);

    /* systemd's LoadCredential=baton-password:...: $CREDENTIALS_DIRECTORY/baton-password */
    char *dir = cli_path("creds");
    mkdir(dir, 0700);
    char *cred = NULL;
    cr_assert(asprintf(&cred, "%s/baton-password", dir) > 0);
    FILE *f = fopen(cred, "w");
    cr_assert(f != NULL);
    fputs("right-password\n", f);
    fclose(f);
    chmod(cred, 0400);
    setenv("CREDENTIALS_DIRECTORY", dir, 1);
    cli_exec(&r, ARGS("--url", url, "status", "pf"));
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cli_result_free(&r);
    /* $BATON_PASSWORD comes first */
    setenv("BATON_PASSWORD", "wrong-password", 1);
    cli_exec(&r, ARGS("--url", url, "status", "pf"));
    cr_assert(eq(int, r.status, 121), "%s", r.err);
    cli_result_free(&r);
    unsetenv("BATON_PASSWORD");
    unsetenv("CREDENTIALS_DIRECTORY");
    cli_exec(&r, ARGS("--url", url, "status", "pf"));
    cr_assert(eq(int, r.status, 121), "no password: %s", r.err);
    cli_result_free(&r);

    /* --askpass with nothing on stdin: a usage error, exit 2 */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "\"$0\" --askpass --url %s status pf </dev/null", url);
    cli_exec_program(&r, ARGS("/bin/sh", "-c", cmd, BATON_CLI_PATH));
    cr_assert(eq(int, r.status, 2), "%s", r.err);
    cli_result_free(&r);
    snprintf(cmd, sizeof cmd, "echo | \"$0\" --askpass --url %s status pf", url);
    cli_exec_program(&r, ARGS("/bin/sh", "-c", cmd, BATON_CLI_PATH));
    cr_assert(eq(int, r.status, 2), "%s", r.err);
    cli_result_free(&r);
    free(good);
    free(bad);
    free(open_to_all);
    free(empty);
    free(dir);
    free(cred);
    th_server_stop(&srv);
}

/* ---------------------------------------------------------------- status ------------- */

Test(cli_ops, status_escapes_control_bytes_on_a_terminal_and_not_in_json)
{
    const char *name = th_tmpname("ops-esc");
    redisContext *rc = th_redis();
    freeReplyObject(th_cmd(rc, "HSET %s %b 1", name, "x\033[31mRED", (size_t)9));
    cli_result r;
    cli_exec(&r, ARGS("status", name));
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cr_assert(strchr(r.out, '\033') == NULL, "an ESC reached the terminal: %s", r.out);
    cr_assert(strstr(r.out, "holder x\\x1b[31mRED") != NULL, "%s", r.out);
    cli_result_free(&r);
    cli_exec(&r, ARGS("list", name));
    cr_assert(strchr(r.out, '\033') == NULL, "%s", r.out);
    cli_result_free(&r);
    cli_exec(&r, ARGS("status", name, "--json"));
    json *j = json_parse(r.out);
    cr_assert(j != NULL, "%s", r.out);
    const json *h = json_at(json_get(json_at(j, 0), "holders"), 0);
    cr_assert(eq(str, json_get(h, "owner")->string, "x\033[31mRED"));
    json_free(j);
    cli_result_free(&r);
    redisFree(rc);
}

Test(cli_ops, the_loss_message_names_the_cause)
{
    const char *name = th_tmpname("ops-loss");
    pid_t pid = cli_spawn(ARGS("lock", name, "--watchdog", "900ms", "--", "sleep", "20"));
    cr_assert(status_until(name, held, 5000));
    redisContext *rc = th_redis();
    freeReplyObject(th_cmd(rc, "DEL %s", name));
    cr_assert(eq(int, th_wait(pid), 122));
    char *err = cli_bg_err(pid);
    cr_assert(strstr(err, "deleted or taken over") != NULL, "%s", err);
    free(err);
    redisFree(rc);
}

/* Another cause the library counts: a lease that ran out while baton could not renew it
 * (stopped past it). */
Test(cli_ops, the_loss_message_names_an_expiry, .timeout = 30)
{
    const char *name = th_tmpname("ops-expired");
    pid_t pid = cli_spawn(ARGS("lock", name, "--watchdog", "600ms", "--", "sleep", "20"));
    cr_assert(status_until(name, held, 5000));
    kill(pid, SIGSTOP);
    redisContext *rc = th_redis();
    int64_t end = th_ms() + 5000;
    while (th_cmd_int(rc, "EXISTS %s", name) == 1 && th_ms() < end)
        th_sleep_ms(20);
    cr_assert(eq(i64, (int64_t)th_cmd_int(rc, "EXISTS %s", name), 0), "the lease never ran out");
    kill(pid, SIGCONT);
    cr_assert(eq(int, th_wait(pid), 122));
    char *err = cli_bg_err(pid);
    cr_assert(strstr(err, "expired") != NULL, "%s", err);
    free(err);
    redisFree(rc);
}

/* ---------------------------------------------------------------- small ones --------- */

Test(cli_ops, the_maxmemory_warning_says_warning_once_and_q_silences_it, .timeout = 30)
{
    th_server srv;
    th_server_start(&srv, "--maxmemory-policy allkeys-lru");
    char url[128];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", srv.port);
    cli_result r;
    cli_exec(&r, ARGS("--url", url, "lock", "mm", "--", "true"));
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cr_assert(strstr(r.err, "baton: warning: the server's maxmemory-policy is allkeys-lru") != NULL,
              "%s", r.err);
    cr_assert(strstr(r.err, "warning: warning") == NULL, "%s", r.err);
    cli_result_free(&r);
    cli_exec(&r, ARGS("--url", url, "lock", "mm", "-q", "--", "true"));
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cr_assert(eq(str, r.err, ""), "-q: %s", r.err);
    cli_result_free(&r);
    th_server_stop(&srv);
}

/* cron runs baton every few minutes: the maxmemory-policy's warning is told by the first run
 * of the day only (the lock baton:warned:maxmemory, held until 00:00 UTC, marks it told), by
 * every command; -q never tells it and takes no marker. The marker gone (the next day),
 * the next run tells it again. */
Test(cli_ops, the_maxmemory_warning_is_told_once_a_day_per_server, .timeout = 30)
{
    th_server srv;
    th_server_start(&srv, "--maxmemory 64mb --maxmemory-policy allkeys-lru");
    char url[128];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", srv.port);
    redisContext *rc = th_redis_port(srv.port);
    cli_result r;
    cli_exec(&r, ARGS("--url", url, "lock", "mm", "-q", "--", "true"));
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cr_assert(eq(str, r.err, ""), "-q: %s", r.err);
    cli_result_free(&r);
    redisReply *v = th_cmd(rc, "EXISTS baton:warned:maxmemory");
    cr_assert(eq(i64, (int64_t)v->integer, 0), "-q took the marker");
    freeReplyObject(v);

    cli_exec(&r, ARGS("--url", url, "lock", "mm", "--", "true"));
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cr_assert(strstr(r.err, "baton: warning: the server's maxmemory-policy is allkeys-lru") != NULL,
              "the first run: %s", r.err);
    cr_assert(strstr(r.err, "told once a day") != NULL, "%s", r.err);
    cli_result_free(&r);
    /* the marker lasts until 00:00 UTC */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    long long to_midnight =
        86400000LL - ((long long)now.tv_sec * 1000 + now.tv_nsec / 1000000) % 86400000LL;
    v = th_cmd(rc, "PTTL baton:warned:maxmemory");
    cr_assert(gt(i64, (int64_t)v->integer, 0), "no marker: PTTL %lld", v->integer);
    cr_assert(le(i64, (int64_t)v->integer, (int64_t)to_midnight + 1000),
              "PTTL %lld, midnight in %lld", v->integer, to_midnight);
    freeReplyObject(v);

    /* the runs after it, of any command: nothing */
    const char *const *later[] = {
        ARGS("--url", url, "lock", "mm", "--", "true"),
        ARGS("--url", url, "status", "mm"),
        ARGS("--url", url, "latch", "mm-latch", "count"),
    };
    for (size_t i = 0; i < sizeof later / sizeof later[0]; i++) {
        cli_exec(&r, later[i]);
        cr_assert(eq(int, r.status, 0), "case %zu: %s", i, r.err);
        cr_assert(eq(str, r.err, ""), "case %zu, a later run: %s", i, r.err);
        cli_result_free(&r);
    }

    /* the next day (the marker expired): told again, once */
    freeReplyObject(th_cmd(rc, "DEL baton:warned:maxmemory"));
    cli_exec(&r, ARGS("--url", url, "status", "mm"));
    cr_assert(strstr(r.err, "maxmemory-policy is allkeys-lru") != NULL, "the next day: %s", r.err);
    cli_result_free(&r);
    cli_exec(&r, ARGS("--url", url, "status", "mm"));
    cr_assert(eq(str, r.err, ""), "%s", r.err);
    cli_result_free(&r);
    redisFree(rc);
    th_server_stop(&srv);
}

Test(cli_ops, semaphore_add_negative_stops_at_zero_and_says_what_it_removed)
{
    const char *name = th_tmpname("ops-add");
    cli_result r;
    cli_exec(&r, ARGS("semaphore", name, "add", "3"));
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cli_result_free(&r);
    cli_exec(&r, ARGS("semaphore", name, "add", "-2"));
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cr_assert(eq(str, r.out, "removed 2, 1 left\n"));
    cli_result_free(&r);
    cli_exec(&r, ARGS("semaphore", name, "add", "-5"));
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cr_assert(eq(str, r.out, "removed 1, 0 left\n"));
    cli_result_free(&r);
    redisContext *rc = th_redis();
    redisReply *v = th_cmd(rc, "GET %s", name);
    cr_assert(eq(str, v->str, "0"));
    freeReplyObject(v);
    redisFree(rc);
}

/* ---------------------------------------------------------------- names -------------- */

/* A NAME given by --object is taken as it is, "-h" and "--help" too: a lock named so, not a
 * request for help (which printed the usage and exited 0 without running COMMAND; found by
 * fuzz_cli_args's property 3). */
Test(cli_ops, object_help_is_a_name_not_a_help_request)
{
    cli_result r;
    cli_exec(&r, ARGS("lock", "--object", "--help", "-n", "--", "sh", "-c", "echo ran"));
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cr_assert(eq(str, r.out, "ran\n"), "COMMAND did not run: %s", r.out);
    cli_result_free(&r);
    cli_exec(&r, ARGS("unlock", "--force", "--object", "-h"));
    cr_assert(eq(int, r.status, 1), "%s", r.out);
    cr_assert(strstr(r.err, "-h was not locked") != NULL, "%s", r.err);
    cli_result_free(&r);
    /* --help itself still is one, after --object's NAME too */
    cli_exec(&r, ARGS("lock", "--object", "x", "--help"));
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cr_assert(strstr(r.out, "usage: baton") != NULL, "%s", r.out);
    cli_result_free(&r);
}

/* Whether CLIENT LIST shows a connection named want, within ms. */
static bool client_named(const char *want, int64_t ms)
{
    redisContext *rc = th_redis();
    char needle[200];
    snprintf(needle, sizeof needle, " name=%s ", want);
    int64_t end = th_ms() + ms;
    bool seen = false;
    do {
        redisReply *r = th_cmd(rc, "CLIENT LIST");
        seen = r->type == REDIS_REPLY_STRING && strstr(r->str, needle) != NULL;
        freeReplyObject(r);
        if (!seen)
            th_sleep_ms(20);
    } while (!seen && th_ms() < end);
    redisFree(rc);
    return seen;
}

Test(cli_ops, client_list_shows_the_connections_name_while_command_runs)
{
    const char *name = th_tmpname("ops-name");
    char *marker = cli_path("started");
    char script[300];
    snprintf(script, sizeof script, "touch %s; sleep 30", marker);
    pid_t pid = cli_spawn(ARGS("--name", "nightly report", "lock", name, "--", "sh", "-c", script));
    cr_assert(cli_wait_file(marker, 5000));
    cr_assert(client_named("nightly_report", 2000), "no connection named nightly_report");
    kill(pid, SIGTERM);
    th_wait(pid);
    unlink(marker);

    /* the default: baton:<host>:<pid> */
    pid = cli_spawn(ARGS("lock", name, "--", "sh", "-c", script));
    cr_assert(cli_wait_file(marker, 5000));
    char host[200], want[300];
    gethostname(host, sizeof host);
    snprintf(want, sizeof want, "baton:%s:%d", host, (int)pid);
    cr_assert(client_named(want, 2000), "no connection named %s", want);
    kill(pid, SIGTERM);
    th_wait(pid);
    free(marker);
}

/* `status NAME`'s text for a line of two: its header, then `first` before `second`. */
static void assert_line_text(const char *out, const char *first, const char *second)
{
    const char *line = strstr(out, "line (2 starved waiters, first in line first)");
    cr_assert(line != NULL, "%s", out);
    const char *a = strstr(line, first), *b = strstr(line, second);
    cr_assert(a != NULL && b != NULL && a < b, "%s", out);
}

/* `status --json NAME`, parsed (the caller frees it), after asserting that it succeeded and
 * found an object of `kind`. */
static json *status_json(const char *name, const char *kind)
{
    cli_result r;
    cli_exec(&r, ARGS("status", "--json", name));
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    json *j = json_parse(r.out);
    cr_assert(j != NULL, "%s", r.out);
    cr_assert(eq(str, json_get(json_at(j, 0), "kind")->string, (char *)kind), "%s", r.out);
    cli_result_free(&r);
    return j;
}

/* A JSON line of two waiters: `first`, then `second`. */
static void assert_line_json(const json *l, const char *first, const char *second)
{
    cr_assert(eq(sz, l->n, 2));
    cr_assert(eq(str, json_get(json_at(l, 0), "owner")->string, (char *)first));
    cr_assert(eq(str, json_get(json_at(l, 1), "owner")->string, (char *)second));
}

/* `status` shows a plain lock's line of starved waiters in order, text and JSON. */
Test(cli_ops, status_shows_a_plain_locks_line_in_order)
{
    const char *name = th_tmpname("ops-line");
    redisContext *rc = th_redis();
    freeReplyObject(th_cmd(rc, "HSET %s holder:1 1", name));
    freeReplyObject(th_cmd(rc, "PEXPIRE %s 30000", name));
    freeReplyObject(th_cmd(rc, "ZADD baton_lock_line:{%s} 2 second:1 1 first:1", name));
    cli_result r;
    cli_exec(&r, ARGS("status", name));
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    assert_line_text(r.out, "1. first:1", "2. second:1");
    cli_result_free(&r);
    json *j = status_json(name, "lock");
    assert_line_json(json_get(json_at(j, 0), "line"), "first:1", "second:1");
    json_free(j);
    freeReplyObject(th_cmd(rc, "DEL %s baton_lock_line:{%s}", name, name));
    redisFree(rc);
}

/* `status` shows a semaphore's line, each waiter with what it wants, and the reservation,
 * text and JSON; `list` counts the line. */
Test(cli_ops, status_shows_a_semaphores_line_and_its_reservation)
{
    const char *name = th_tmpname("ops-semline");
    redisContext *rc = th_redis();
    freeReplyObject(th_cmd(rc, "SET %s 1", name));
    freeReplyObject(th_cmd(rc, "ZADD baton_semaphore_line:{%s} 2 2:second:1 1 3:first:1", name));
    freeReplyObject(th_cmd(rc, "SET baton_semaphore_next:{%s} 1:early:1 PX 20000", name));
    cli_result r;
    cli_exec(&r, ARGS("status", name));
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cr_assert(strstr(r.out, ": semaphore, 1 permit available") != NULL, "%s", r.out);
    assert_line_text(r.out, "1. first:1  wants 3 permits", "2. second:1  wants 2 permits");
    cr_assert(strstr(r.out, "reserved for early:1  (1 permit)  lapses in ") != NULL, "%s", r.out);
    cli_result_free(&r);

    json *j = status_json(name, "semaphore");
    const json *o = json_at(j, 0);
    const json *l = json_get(o, "semaphore_line");
    assert_line_json(l, "first:1", "second:1");
    cr_assert(eq(dbl, json_get(json_at(l, 0), "permits")->number, 3));
    const json *kept = json_get(o, "reserved");
    cr_assert(eq(str, json_get(kept, "owner")->string, "early:1"));
    cr_assert(eq(dbl, json_get(kept, "permits")->number, 1));
    double left = json_get(kept, "remaining_ms")->number;
    cr_assert(left > 0 && left <= 20000, "remaining_ms %f", left);
    json_free(j);

    cli_exec(&r, ARGS("list", name));
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cr_assert(strstr(r.out, "  line 2") != NULL, "%s", r.out);
    cli_result_free(&r);
    freeReplyObject(
        th_cmd(rc, "DEL %s baton_semaphore_line:{%s} baton_semaphore_next:{%s}", name, name, name));
    redisFree(rc);
}

/* ---------------------------------------------------------------- the man page ------- */

/* Every field `status --json` prints (a lock's, a permit semaphore's) has its row in the man
 * page's field table. */
Test(cli_ops, the_man_page_lists_every_json_field)
{
    char *page = cli_read_file(BATON_SOURCE_DIR "/docs/baton.1.md");
    cr_assert(page != NULL);
    const char *name = th_tmpname("ops-fields");
    cli_result r;
    cli_exec(&r, ARGS("lock", name, "--", BATON_CLI_PATH, "status", "--json", name));
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    json *j = json_parse(r.out);
    cr_assert(j != NULL, "%s", r.out);
    const json *o = json_at(j, 0);
    cr_assert(eq(sz, o->n, 16), "%s", r.out);
    for (size_t i = 0; i < o->n; i++) {
        char row[80];
        snprintf(row, sizeof row, "\n| `%s` |", o->keys[i]);
        cr_assert(strstr(page, row) != NULL, "the man page has no row for '%s'", o->keys[i]);
    }
    cr_assert(strstr(page, "`permits` (a semaphore with permit leases held now)") != NULL);
    cr_assert(strstr(page, "as `flock -q`") == NULL);
    json_free(j);
    cli_result_free(&r);
    free(page);
}
Test(cli_ops, the_loss_message_names_a_restart, .timeout = 30)
{
    th_server srv;
    th_server_start(&srv, NULL);
    char url[128];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", srv.port);
    pid_t pid = cli_spawn(
        ARGS("--url", url, "lock", "ops-restart", "--watchdog", "900ms", "--", "sleep", "20"));
    redisContext *rc = th_redis_port(srv.port);
    int64_t end = th_ms() + 5000;
    while (th_cmd_int(rc, "EXISTS ops-restart") == 0 && th_ms() < end)
        th_sleep_ms(10);
    cr_assert(eq(i64, (int64_t)th_cmd_int(rc, "EXISTS ops-restart"), 1), "never held");
    redisFree(rc);
    th_server_stop(&srv);
    th_server_start_on(&srv, srv.port, NULL); /* empty: the lock is gone */
    cr_assert(eq(int, th_wait(pid), 122));
    char *err = cli_bg_err(pid);
    cr_assert(strstr(err, "the server restarted") != NULL, "%s", err);
    free(err);
    th_server_stop(&srv);
}

/* ---------------------------------------------------------------- issue 46.11 -------- */

/* --password-file refuses a file any user may write (0602: another user could plant the
 * password baton sends), as it refuses one any user may read. */
Test(cli_ops, password_file_writable_by_every_user_is_refused, .timeout = 30)
{
    th_server srv;
    th_server_start(&srv, "--requirepass right-password");
    char url[128];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", srv.port);
    unsetenv("BATON_PASSWORD");
    unsetenv("REDISCLI_AUTH");
    char *writable = write_file("pw-602", "right-password\n", 0602);
    char *fine = write_file("pw-600", "right-password\n", 0600);
    cli_result r;
    cli_exec(&r, ARGS("--url", url, "--password-file", writable, "status", "pf"));
    cr_assert(eq(int, r.status, 2), "%s", r.err);
    cr_assert(strstr(r.err, "writable by every user") != NULL, "%s", r.err);
    cli_result_free(&r);
    cli_exec(&r, ARGS("--url", url, "--password-file", fine, "status", "pf"));
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cli_result_free(&r);
    free(writable);
    free(fine);
    th_server_stop(&srv);
}

/* unlock --force deletes a lock, never another hash that happens to be at NAME. */
Test(cli_ops, unlock_force_leaves_a_hash_that_is_not_a_lock)
{
    const char *name = th_tmpname("not-a-lock"), *counts = th_tmpname("counts");
    redisContext *r = th_redis();
    freeReplyObject(th_cmd(r, "HSET %s name alice age 30", name));
    freeReplyObject(th_cmd(r, "HSET %s a:1 1", counts)); /* looks like a hold, has no lease */
    const char *names[] = {name, counts};
    for (size_t i = 0; i < 2; i++) {
        cli_result res;
        cli_exec(&res, ARGS("unlock", "--force", names[i]));
        cr_assert(eq(int, res.status, 125), "%s", res.err);
        cr_assert(strstr(res.err, "not a lock's") != NULL && strstr(res.err, "nothing deleted"),
                  "%s", res.err);
        cli_result_free(&res);
        cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s", names[i]), 1), "the hash was deleted");
    }
    /* a real lock is still forced */
    const char *lock = th_tmpname("a-lock");
    cli_result res;
    pid_t holder = cli_spawn(ARGS("lock", lock, "--hold"));
    for (int i = 0; i < 500 && th_cmd_int(r, "EXISTS %s", lock) == 0; i++)
        th_sleep_ms(10);
    cli_exec(&res, ARGS("unlock", "--force", lock));
    cr_assert(eq(int, res.status, 0), "%s", res.err);
    cli_result_free(&res);
    cr_assert(eq(i64, th_cmd_int(r, "EXISTS %s", lock), 0));
    kill(holder, SIGTERM);
    int st;
    waitpid(holder, &st, 0);
    redisFree(r);
}

/* --permits N on a semaphore whose count is set already and is not N says so. */
Test(cli_ops, permits_not_applied_to_a_count_set_already_is_told)
{
    const char *name = th_tmpname("perm-set");
    cli_result r;
    cli_exec(&r, ARGS("semaphore", name, "--permits", "2", "--", "true"));
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cr_assert(eq(str, r.err, ""));
    cli_result_free(&r);
    cli_exec(&r, ARGS("semaphore", name, "--permits", "2", "--", "true"));
    cr_assert(eq(str, r.err, ""), "the same count: no word");
    cli_result_free(&r);
    cli_exec(&r, ARGS("semaphore", name, "--permits", "5", "--", "true"));
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cr_assert(strstr(r.err, "--permits 5 not applied") != NULL && strstr(r.err, "(2: 2 free"), "%s",
              r.err);
    cli_result_free(&r);
    cli_exec(&r, ARGS("semaphore", name, "--permits", "5", "-q", "--", "true"));
    cr_assert(eq(str, r.err, ""), "-q: %s", r.err);
    cli_result_free(&r);
    const char *counting = th_tmpname("perm-count");
    cli_exec(&r, ARGS("semaphore", counting, "--counting", "--permits", "3", "--", "true"));
    cli_result_free(&r);
    cli_exec(&r, ARGS("semaphore", counting, "--counting", "--permits", "1", "--", "true"));
    cr_assert(strstr(r.err, "--permits 1 not applied") != NULL, "%s", r.err);
    cli_result_free(&r);
}

/* ---------------------------------------------------------------- issue 46.16 -------- */

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* A usage error before the command prints one usage line, not every command's synopsis;
 * --help's barrier line has --watchdog. */
Test(cli_ops, global_usage_errors_are_short_and_help_lists_barrier_watchdog)
{
    cli_result r;
    cli_exec(&r, ARGS("--bogus"));
    cr_assert(eq(int, r.status, 2));
    cr_assert(le(int, count_lines(r.err), 4), "%s", r.err);
    cr_assert(strstr(r.err, "usage: baton") != NULL && strstr(r.err, "barrier") != NULL, "%s",
              r.err);
    cli_result_free(&r);
    cli_exec(&r, ARGS("frobnicate", "x"));
    cr_assert(eq(int, r.status, 2));
    cr_assert(le(int, count_lines(r.err), 4), "%s", r.err);
    cli_result_free(&r);
    cli_exec(&r, ARGS("--help"));
    const char *line = strstr(r.out, "barrier NAME --parties N");
    cr_assert(line != NULL);
    const char *end = strchr(line, '\n');
    char first[400];
    snprintf(first, sizeof first, "%.*s", (int)(end - line), line);
    cr_assert(strstr(first, "--watchdog DUR") != NULL, "%s", first);
    cli_result_free(&r);
}

/* status and list show an election as one, its waiting campaigners as standbys (they are
 * a lock's line, which status called starved waiters). */
Test(cli_ops, status_shows_an_election_and_its_standbys, .timeout = 30)
{
    const char *name = th_tmpname("ops-elect");
    char *ready = cli_path("el-ready"), *go = cli_path("el-go");
    char script[600];
    snprintf(script, sizeof script, "touch '%s'; while [ ! -e '%s' ]; do sleep 0.05; done", ready,
             go);
    pid_t leader = cli_spawn(ARGS("elect", name, "--", "sh", "-c", script));
    cr_assert(cli_wait_file(ready, 10000));
    pid_t standby = cli_spawn(ARGS("elect", name, "--", "true"));
    cli_result r;
    for (int i = 0;; i++) {
        cli_exec(&r, ARGS("status", name));
        if (strstr(r.out, "standbys in line") || strstr(r.out, "standby client") || i == 300)
            break;
        cli_result_free(&r);
        th_sleep_ms(20);
    }
    cr_assert(strstr(r.out, ": election (term ") != NULL, "%s", r.out);
    cr_assert(strstr(r.out, "starved") == NULL, "%s", r.out);
    cli_result_free(&r);
    cli_exec(&r, ARGS("list", name));
    cr_assert(strncmp(r.out, "election ", 9) == 0, "%s", r.out);
    cli_result_free(&r);
    FILE *f = fopen(go, "w");
    cr_assert(f != NULL);
    fclose(f);
    int st;
    cr_assert(waitpid(leader, &st, 0) == leader && waitpid(standby, &st, 0) == standby);
    free(ready);
    free(go);
}
