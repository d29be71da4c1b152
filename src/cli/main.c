/*
 * The baton command: flock(1) for a whole cluster. This file is its entry point: the
 * global options (--url, --help, --version), the dispatch to the commands, and what every
 * command shares: usage errors, durations, counts, opening the client and turning a
 * library error into a message and an exit code (the codes are listed in cli.h, in
 * `baton --help` and in docs/baton.1.md).
 */
#define _GNU_SOURCE
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const usage_lines[][2] = {
    {"lock", "baton [--url URL] lock NAME... [--wait DUR] [--lease DUR | --watchdog DUR] [--fair]"
             " -- COMMAND [ARG...]"},
    {"semaphore", "baton [--url URL] semaphore NAME [--permits N] [--take K] [--wait DUR]"
                  " [--kill-after DUR] -- COMMAND [ARG...]"},
    {"latch", "baton [--url URL] latch NAME set N | count-down | count | await [--timeout DUR]"},
    {"status", "baton [--url URL] status NAME... [--json]"},
    {"unlock", "baton [--url URL] unlock --force NAME"},
    {"", "baton --help | --version"},
};

static const char help_text[] =
    "baton: distributed locks, semaphores and latches for shell scripts, over Redis\n"
    "(Redisson-compatible: a Java service using Redisson can share the same locks).\n"
    "\n"
    "Usage:\n"
    "%s"
    "\n"
    "Commands:\n"
    "  lock NAME... -- COMMAND    Run COMMAND while holding the lock NAME (several names:\n"
    "                             all of them or none, a multi-lock); exit with its status.\n"
    "      --wait DUR             give up after DUR if the lock is held (default: wait\n"
    "                             forever; 0: one attempt)\n"
    "      --lease DUR            hold for at most DUR, no renewal (COMMAND still running\n"
    "                             then counts as the lock lost)\n"
    "      --watchdog DUR         renewed lease: the lock expires DUR after baton stops\n"
    "                             renewing it; renewed every DUR/3 (default 30s)\n"
    "      --fair                 fair locks: waiters acquire in the order they asked\n"
    "      --kill-after DUR       when the lock is lost or baton dies (even by kill -9),\n"
    "                             COMMAND gets SIGTERM, and SIGKILL DUR later (10s)\n"
    "  semaphore NAME -- COMMAND  Run COMMAND holding K permits of the semaphore NAME.\n"
    "      --permits N            set the semaphore to N permits if it has no count yet\n"
    "      --take K               permits to take (default 1)\n"
    "      --wait DUR             give up after DUR (default: wait forever)\n"
    "      --kill-after DUR       as for lock\n"
    "  latch NAME set N           set the count to N if none is set (exit 1 if one is)\n"
    "  latch NAME count-down      count down by one (at zero the latch opens)\n"
    "  latch NAME count           print the count (0: open or never set)\n"
    "  latch NAME await           wait until the count is zero\n"
    "      --timeout DUR          give up after DUR (default: wait forever)\n"
    "  status NAME...             show what lives at each NAME: lock holders, hold counts\n"
    "                             and TTL, a fair lock's queue, a semaphore's permits or a\n"
    "                             latch's count\n"
    "      --json                 the same as JSON\n"
    "  unlock --force NAME        delete the lock NAME whoever holds it (exit 1 if it was\n"
    "                             not locked)\n"
    "\n"
    "Options:\n"
    "  --url URL   the server: redis://[[USER]:PASSWORD@]HOST[:PORT][/DB] or\n"
    "              unix:///PATH[?db=N]; default $BATON_URL, else " CLI_DEFAULT_URL "\n"
    "  --help      print this help;  --version  print the version\n"
    "DUR is 250ms, 10s, 5m, 1h, or a bare number of seconds.\n"
    "COMMAND gets BATON_FENCING_TOKEN (the lock's fencing token) in its environment;\n"
    "SIGINT, SIGTERM and SIGHUP sent to baton are forwarded to it.\n"
    "\n"
    "Exit status:\n"
    "  COMMAND's status      lock and semaphore, when COMMAND ran under the lock\n"
    "  0                     success (latch, status, unlock)\n"
    "  1                     latch set: a count was already set; unlock: was not locked\n"
    "  2                     bad usage\n"
    "  120                   cannot connect to the server (or lost it while waiting)\n"
    "  121                   authentication refused\n"
    "  122                   the lock was lost while COMMAND ran (COMMAND got SIGTERM)\n"
    "  123                   latch await: --timeout passed before the latch opened\n"
    "  124                   not acquired within --wait; COMMAND did not run\n"
    "  125                   other failure (server error, wrong kind of key)\n"
    "  126, 127              COMMAND could not be run, was not found\n"
    "  128+N                 COMMAND (or baton while waiting) was ended by signal N\n"
    "\n"
    "See man baton (docs/baton.1.md in baton's source) for the full reference.\n";

/* ------------------------------- messages --------------------------------------------- */

void cli_error(const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "baton: %s\n", buf);
}

int cli_usage_error(const char *command, const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "baton: %s\n", buf);
    size_t n = sizeof usage_lines / sizeof usage_lines[0];
    for (size_t i = 0; i < n; i++) {
        if (command && strcmp(command, usage_lines[i][0]) != 0)
            continue;
        fprintf(stderr, "%s %s\n", i == 0 || command ? "usage:" : "      ", usage_lines[i][1]);
    }
    fprintf(stderr, "Try 'baton --help' for more information.\n");
    return EXIT_USAGE;
}

int cli_fail(baton_client *c, int rc, const char *fmt, ...)
{
    char what[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    const char *detail = c ? baton_client_errmsg(c) : "";
    if (detail[0])
        cli_error("%s: %s (%s)", what, baton_strerror(rc), detail);
    else
        cli_error("%s: %s", what, baton_strerror(rc));
    switch (rc) {
    case BATON_ECONN:
        return EXIT_CONN;
    case BATON_EAUTH:
        return EXIT_AUTH;
    case BATON_EINVAL:
        return EXIT_USAGE;
    default:
        return EXIT_FAILED;
    }
}

/* ------------------------------- values ----------------------------------------------- */

bool cli_parse_count(const char *s, int64_t max, int64_t *out)
{
    if (!s || !*s)
        return false;
    int64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return false;
        if (v > (max - (*p - '0')) / 10)
            return false;
        v = v * 10 + (*p - '0');
    }
    *out = v;
    return true;
}

bool cli_parse_duration(const char *s, int64_t *ms)
{
    if (!s)
        return false;
    size_t n = strspn(s, "0123456789");
    if (n == 0 || n > 15)
        return false;
    char digits[16];
    memcpy(digits, s, n);
    digits[n] = '\0';
    int64_t v;
    if (!cli_parse_count(digits, BATON_MAX_DURATION_MS, &v))
        return false;
    const char *unit = s + n;
    int64_t scale;
    if (strcmp(unit, "ms") == 0)
        scale = 1;
    else if (strcmp(unit, "s") == 0 || strcmp(unit, "") == 0)
        scale = 1000;
    else if (strcmp(unit, "m") == 0)
        scale = 60 * 1000;
    else if (strcmp(unit, "h") == 0)
        scale = 3600 * 1000;
    else
        return false;
    if (v > BATON_MAX_DURATION_MS / scale)
        return false;
    *ms = v * scale;
    return true;
}

/* ------------------------------- the client ------------------------------------------- */

int cli_set_url(cli_global *g, const char *url)
{
    if (g->url)
        return cli_usage_error(NULL, "--url given twice");
    if (!*url)
        return cli_usage_error(NULL, "--url is empty");
    g->url = url;
    return EXIT_OK;
}

/* The URL without its password, for messages. */
static void redact_url(const char *url, char *buf, size_t len)
{
    const char *scheme_end = strstr(url, "://");
    const char *at = scheme_end ? strrchr(scheme_end, '@') : NULL;
    const char *slash = scheme_end ? strchr(scheme_end + 3, '/') : NULL;
    if (at && (!slash || at < slash))
        snprintf(buf, len, "%.*s***@%s", (int)(scheme_end + 3 - url), url, at + 1);
    else
        snprintf(buf, len, "%s", url);
}

const char *cli_url(const cli_global *g)
{
    const char *env = getenv("BATON_URL");
    return g->url ? g->url : env && *env ? env : CLI_DEFAULT_URL;
}

int cli_open_client(const cli_global *g, baton_client **out)
{
    baton_options o;
    baton_options_init(&o);
    o.url = cli_url(g);
    o.watchdog_ms = g->watchdog_ms;
    int rc = baton_client_open(&o, out);
    if (rc == BATON_OK) {
        /* an open that succeeded may leave a warning (an evicting maxmemory-policy) */
        const char *warning = baton_client_errmsg(*out);
        if (warning[0])
            fprintf(stderr, "baton: warning: %s\n", warning);
        return EXIT_OK;
    }
    char shown[512];
    redact_url(o.url, shown, sizeof shown);
    const char *detail = baton_open_errmsg();
    cli_error("%s: %s%s%s", shown, baton_strerror(rc), detail[0] ? ": " : "", detail);
    switch (rc) {
    case BATON_ECONN:
        return EXIT_CONN;
    case BATON_EAUTH:
        return EXIT_AUTH;
    case BATON_EINVAL:
        return EXIT_USAGE;
    default:
        return EXIT_FAILED;
    }
}

#if defined(__SANITIZE_THREAD__)
/* ThreadSanitizer sleeps a second at exit by default (atexit_sleep_ms); baton's exit is
 * part of what its tests time. */
const char *__tsan_default_options(void);
const char *__tsan_default_options(void)
{
    return "atexit_sleep_ms=0";
}
#endif

/* ------------------------------- main ------------------------------------------------- */

static void print_help(void)
{
    char usage[2048] = "";
    size_t n = sizeof usage_lines / sizeof usage_lines[0];
    for (size_t i = 0; i < n; i++) {
        strncat(usage, "  ", sizeof usage - strlen(usage) - 1);
        strncat(usage, usage_lines[i][1], sizeof usage - strlen(usage) - 1);
        strncat(usage, "\n", sizeof usage - strlen(usage) - 1);
    }
    printf(help_text, usage);
}

int main(int argc, char **argv)
{
    cli_global g = {0};
    int i = 1;
    for (; i < argc && strncmp(argv[i], "-", 1) == 0; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            print_help();
            return fflush(stdout) == 0 ? EXIT_OK : EXIT_FAILED;
        }
        if (strcmp(a, "--version") == 0 || strcmp(a, "-V") == 0) {
            printf("baton %s (libbaton %s)\n", BATON_VERSION_STRING, baton_version());
            return fflush(stdout) == 0 ? EXIT_OK : EXIT_FAILED;
        }
        if (strcmp(a, "--url") == 0 || strncmp(a, "--url=", 6) == 0) {
            if (a[5] == '\0' && i + 1 >= argc)
                return cli_usage_error(NULL, "--url needs a URL");
            int rc = cli_set_url(&g, a[5] == '=' ? a + 6 : argv[++i]);
            if (rc)
                return rc;
        } else {
            return cli_usage_error(NULL, "unknown option '%s'", a);
        }
    }
    if (i >= argc)
        return cli_usage_error(NULL, "no command");
    const char *env = getenv("BATON_URL");
    if (env && !*env)
        return cli_usage_error(NULL, "BATON_URL is set but empty (unset it for the default "
                                     "server)");

    const char *cmd = argv[i];
    int (*fn)(cli_global *, int, char **) = NULL;
    if (strcmp(cmd, "lock") == 0)
        fn = cli_cmd_lock;
    else if (strcmp(cmd, "semaphore") == 0)
        fn = cli_cmd_semaphore;
    else if (strcmp(cmd, "latch") == 0)
        fn = cli_cmd_latch;
    else if (strcmp(cmd, "status") == 0)
        fn = cli_cmd_status;
    else if (strcmp(cmd, "unlock") == 0)
        fn = cli_cmd_unlock;
    else
        return cli_usage_error(NULL, "unknown command '%s'", cmd);

    if (cli_signals_init() != 0)
        return EXIT_FAILED;
    int rc = fn(&g, argc - i - 1, argv + i + 1);
    cli_guard_stop(); /* join the signal thread on every path (a usage error included) */
    if (fflush(stdout) != 0 && rc == EXIT_OK) {
        cli_error("writing the output: %s", strerror(errno));
        rc = EXIT_FAILED;
    }
    return rc;
}
