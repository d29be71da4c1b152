/*
 * The live views of the baton command (issue 15): `baton status NAME --watch` redrawn in a
 * real terminal (tmux: new-session, capture-pane) and as plain lines into a file, each
 * showing a change of holder within one interval; `baton lock --verbose` telling the
 * acquire time, the renewals and the release on stderr.
 */
#define _GNU_SOURCE
#include "cli_helper.h"

#include "new_assert.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

TestSuite(watch, .timeout = 60);

#define INTERVAL_MS 300
/* What a redraw may take beyond its interval: one read of the server, the terminal's (or
 * the file's) update and this test's own polling, on a loaded 2-core machine. */
#define SLACK_MS 400

/* Runs a shell command, returning its stdout (caller frees). */
static char *sh(const char *cmd)
{
    FILE *f = popen(cmd, "r");
    cr_assert(not(eq(ptr, f, NULL)));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while ((got = fread(buf + n, 1, cap - 1 - n, f)) > 0)
        n += got;
    buf[n] = '\0';
    pclose(f);
    return buf;
}

/* A screen (or file) source: returns what is shown now (caller frees). */
typedef char *(*screen_fn)(void *arg);

/* Waits until the screen shows `want` (and, if `gone` is non-NULL, no longer shows it);
 * returns the time that took, or -1 after limit_ms. */
static int64_t wait_for(screen_fn fn, void *arg, const char *want, const char *gone,
                        int64_t limit_ms)
{
    int64_t t0 = th_ms();
    while (th_ms() - t0 <= limit_ms) {
        char *s = fn(arg);
        bool ok = strstr(s, want) && (!gone || !strstr(s, gone));
        free(s);
        if (ok)
            return th_ms() - t0;
        th_sleep_ms(20);
    }
    return -1;
}

/* Holder A, then holder B: the view shows A, then B within one interval of the change. */
static void holder_change(screen_fn fn, void *arg, const char *name, bool redrawn)
{
    baton_client *a = th_client(NULL), *b = th_client(NULL);
    baton_lock *la, *lb;
    cr_assert(eq(int, baton_lock_open(a, name, &la), BATON_OK));
    cr_assert(eq(int, baton_lock_open(b, name, &lb), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(la, 30000), BATON_OK));
    cr_assert(ge(i64, wait_for(fn, arg, baton_client_id(a), NULL, 5000), 0),
              "the first holder never showed");
    cr_assert(eq(int, baton_lock_release(la), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(lb, 30000), BATON_OK));
    int64_t took = wait_for(fn, arg, baton_client_id(b), redrawn ? baton_client_id(a) : NULL,
                            INTERVAL_MS + SLACK_MS);
    cr_assert(ge(i64, took, 0), "the new holder did not show within %d ms", INTERVAL_MS + SLACK_MS);
    cr_assert(eq(int, baton_lock_release(lb), BATON_OK));
    baton_lock_close(la);
    baton_lock_close(lb);
    baton_client_close(a);
    baton_client_close(b);
}

/* ---------------------------------------------------------------- a terminal --------- */

typedef struct tmux {
    char sock[64];
} tmux;

static char *tmux_screen(void *arg)
{
    tmux *t = arg;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "tmux -L %s capture-pane -p -t w 2>/dev/null", t->sock);
    return sh(cmd);
}

Test(watch, status_watch_redraws_a_terminal)
{
    const char *name = th_tmpname("w-tty");
    tmux t;
    snprintf(t.sock, sizeof t.sock, "baton-test-%d", (int)getpid());
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "tmux -L %s new-session -d -s w -x 120 -y 40 "
             "'exec env BATON_URL=%s %s status %s --watch --interval %dms'",
             t.sock, th_url(), BATON_CLI_PATH, name, INTERVAL_MS);
    cr_assert(eq(int, system(cmd), 0), "%s", cmd);
    holder_change(tmux_screen, &t, name, true);
    /* a redraw, not a scroll: the object is on the screen once */
    char *s = tmux_screen(&t);
    int seen = 0;
    for (const char *p = s; (p = strstr(p, name)) != NULL; p += strlen(name))
        seen++;
    cr_assert(eq(int, seen, 1), "%s", s);
    free(s);
    snprintf(cmd, sizeof cmd, "tmux -L %s kill-server", t.sock);
    cr_assert(eq(int, system(cmd), 0));
}

/* ---------------------------------------------------------------- plain lines -------- */

static char *file_screen(void *arg)
{
    char *s = cli_read_file(arg);
    return s ? s : strdup("");
}

Test(watch, status_watch_prints_plain_lines_when_not_a_tty)
{
    const char *name = th_tmpname("w-plain");
    char interval[32];
    snprintf(interval, sizeof interval, "%dms", INTERVAL_MS);
    const char *args[] = {"status", name, "--watch", "--interval", interval, NULL};
    pid_t pid = cli_spawn(args);
    char path[256];
    snprintf(path, sizeof path, "%s/bg-%d.out", cli_tmpdir(), (int)pid);
    holder_change(file_screen, path, name, false);
    kill(pid, SIGTERM);
    cr_assert(eq(int, th_wait(pid), 128 + SIGTERM));
    char *out = file_screen(path);
    cr_assert(eq(ptr, strchr(out, '\033'), NULL), "no terminal escapes in plain output");
    free(out);
}

/* ---------------------------------------------------------------- --verbose ---------- */

Test(watch, lock_verbose_tells_acquire_renewals_and_release)
{
    const char *name = th_tmpname("w-verbose");
    cli_result r;
    const char *args[] = {"lock", name,    "--verbose", "--watchdog", "300ms",
                          "--",   "sleep", "0.5",       NULL};
    cli_exec(&r, args);
    cr_assert(eq(int, r.status, 0), "%s", r.err);
    cr_assert(not(eq(ptr, strstr(r.err, "acquired"), NULL)), "%s", r.err);
    cr_assert(not(eq(ptr, strstr(r.err, "renewal: 1 hold renewed"), NULL)), "%s", r.err);
    cr_assert(not(eq(ptr, strstr(r.err, "released"), NULL)), "%s", r.err);
    cli_result_free(&r);

    /* without --verbose: nothing on stderr */
    const char *quiet[] = {"lock", name, "--watchdog", "300ms", "--", "sleep", "0.5", NULL};
    cli_exec(&r, quiet);
    cr_assert(eq(int, r.status, 0));
    cr_assert(eq(str, r.err, ""));
    cli_result_free(&r);
}
