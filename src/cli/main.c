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
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

/*
 * The subcommands: name, usage line, the lines of `baton --help` (and `baton NAME --help`),
 * and the function. A new subcommand is one more row.
 */
typedef struct cli_command {
    const char *name;
    const char *usage;
    const char *help;
    int (*fn)(cli_global *, int, char **);
} cli_command;

#define WAIT_HELP                                                                                  \
    "      -w, --wait DUR         give up after DUR if busy (default: wait forever)\n"             \
    "      -n, --nonblock         one attempt: the same as --wait 0\n"                             \
    "      -E, --conflict-exit-code CODE  exit with CODE when busy (default 124)\n"                \
    "      -q, --quiet            say nothing when busy (nor warn of the server's\n"               \
    "                             maxmemory-policy)\n"                                             \
    "      --kill-after DUR       when the hold is lost or baton dies (even by kill -9),\n"        \
    "                             COMMAND's group gets SIGTERM, and SIGKILL DUR later (10s)\n"

static const cli_command commands[] = {
    {"lock",
     "baton [--url URL] lock NAME... [-n | -w DUR] [-E CODE] [-q] [--lease DUR | --watchdog DUR]"
     " [--fair] [--kill-after DUR] [--verbose] -- COMMAND [ARG...]\n"
     "       baton [--url URL] lock NAME... --hold [-n | -w DUR] [-E CODE] [-q]"
     " [--lease DUR | --watchdog DUR] [--fair] [--verbose]",
     "  lock NAME... -- COMMAND    Run COMMAND while holding the lock NAME (several names:\n"
     "                             all of them or none, a multi-lock); exit with its "
     "status.\n" WAIT_HELP
     "      --lease DUR            hold for at most DUR, no renewal (COMMAND still running\n"
     "                             then counts as the lock lost)\n"
     "      --watchdog DUR         renewed lease: the lock expires DUR after baton stops\n"
     "                             renewing it; renewed every DUR/3 (default 30s)\n"
     "      --fair                 fair locks: waiters acquire in the order they asked\n"
     "      --hold                 no COMMAND: hold the lock until SIGINT, SIGTERM or SIGHUP,\n"
     "                             then release it and exit 0 (like etcdctl lock)\n"
     "      --verbose              tell acquire time, renewals and release on stderr\n",
     cli_cmd_lock},
    {"rwlock",
     "baton [--url URL] rwlock NAME --read | --write [-n | -w DUR] [-E CODE] [-q]"
     " [--lease DUR | --watchdog DUR] [--kill-after DUR] [--verbose] -- COMMAND [ARG...]\n"
     "       baton [--url URL] rwlock NAME --read | --write --hold [-n | -w DUR] [-E CODE] [-q]"
     " [--lease DUR | --watchdog DUR] [--verbose]",
     "  rwlock NAME --read -- COMMAND   Run COMMAND holding the read lock of the read-write\n"
     "                             lock NAME (beside other readers, no writer); --write:\n"
     "                             holding its write lock (alone). Redisson's RReadWriteLock;\n"
     "                             a waiting writer holds back new readers.\n"
     "      --read, --write        which half to hold (one of them is required)\n" WAIT_HELP
     "      --lease DUR            hold for at most DUR, no renewal (COMMAND still running\n"
     "                             then counts as the lock lost)\n"
     "      --watchdog DUR         renewed lease: the lock expires DUR after baton stops\n"
     "                             renewing it; renewed every DUR/3 (default 30s)\n"
     "      --hold                 no COMMAND: hold until SIGINT, SIGTERM or SIGHUP, then\n"
     "                             release and exit 0\n"
     "      --verbose              tell acquire time, renewals and release on stderr\n",
     cli_cmd_rwlock},
    {"semaphore",
     "baton [--url URL] semaphore NAME [--permits N] [--take K] [-n | -w DUR] [-E CODE] [-q]"
     " [--watchdog DUR | --counting] [--kill-after DUR] -- COMMAND [ARG...]\n"
     "       baton [--url URL] semaphore NAME [--counting] set N | add [-]N | drain | delete",
     "  semaphore NAME -- COMMAND  Run COMMAND holding K permit leases of the semaphore NAME;\n"
     "                             a killed baton's permits come back when their lease ends.\n"
     "      --permits N            set the semaphore to N permits if it has no count yet\n"
     "      --take K               permits to take (default 1)\n"
     "      --watchdog DUR         the lease, renewed every DUR/3 while COMMAND runs\n"
     "                             (default 30s)\n"
     "      --counting             Redisson's RSemaphore instead: no lease, no owner\n" WAIT_HELP
     "  semaphore NAME set N       set the permits to N if no count is set (exit 1 if one is)\n"
     "  semaphore NAME add [-]N    add N permits (or take them away)\n"
     "  semaphore NAME drain       take every available permit; print how many\n"
     "  semaphore NAME delete      delete the semaphore (exit 1 if absent)\n",
     cli_cmd_semaphore},
    {"latch",
     "baton [--url URL] latch NAME set N | count-down | count | await [--timeout DUR] | delete",
     "  latch NAME set N           set the count to N if none is set (exit 1 if one is)\n"
     "  latch NAME count-down      count down by one (at zero the latch opens)\n"
     "  latch NAME count           print the count (0: open or never set)\n"
     "  latch NAME await           wait until the count is zero\n"
     "      --timeout DUR          give up after DUR (default: wait forever)\n"
     "  latch NAME delete          delete the latch, waking its waiters (exit 1 if absent)\n",
     cli_cmd_latch},
    {"status", "baton [--url URL] status NAME... [--json | --watch [--interval DUR]]",
     "  status NAME...             show what lives at each NAME: lock holders, hold counts\n"
     "                             and TTL, a fair lock's queue, a semaphore's permits or a\n"
     "                             latch's count\n"
     "      --json                 the same as JSON\n"
     "      --watch                redraw every --interval DUR (default 1s) until Ctrl-C\n",
     cli_cmd_status},
    {"list", "baton [--url URL] list [PATTERN] [--json] [--max-keys N]",
     "  list [PATTERN]             every lock, fair lock, read-write lock, semaphore, permit\n"
     "                             semaphore and latch whose NAME matches PATTERN (a Redis\n"
     "                             glob, default '*'): kind, holders (host, pid), TTL,\n"
     "                             waiters; by SCAN, on every master of a Cluster\n"
     "      --json                 the same as JSON (the fields of status --json)\n"
     "      --max-keys N           examine at most N keys in all (default 100000); when\n"
     "                             cut short, list says so (and exits 0)\n",
     cli_cmd_list},
    {"unlock", "baton [--url URL] unlock --force NAME",
     "  unlock --force NAME        delete the lock NAME whoever holds it (exit 1 if it was\n"
     "                             not locked)\n",
     cli_cmd_unlock},
    {"elect", cli_elect_usage, cli_elect_help, cli_cmd_elect},
    {"leader", cli_leader_usage, cli_leader_help, cli_cmd_leader},
    {"barrier", cli_barrier_usage, cli_barrier_help, cli_cmd_barrier},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static const char help_head[] =
    "baton: distributed locks, semaphores and latches for shell scripts, over Redis\n"
    "(Redisson-compatible: a Java service using Redisson can share the same locks).\n"
    "\n"
    "Usage:\n";

static const char help_tail[] =
    "\n"
    "Options:\n"
    "  --url URL   the server: redis://[[USER]:PASSWORD@]HOST[:PORT][/DB], rediss://...\n"
    "              over TLS, redis+sentinel://HOST[:PORT][,HOST[:PORT]...]/MASTER[/DB]\n"
    "              (the sentinels; rediss+sentinel:// over TLS), redis+cluster://HOST[:PORT]\n"
    "              [,HOST[:PORT]...] (any nodes of a Redis Cluster; rediss+cluster://) or\n"
    "              unix:///PATH[?db=N]; -u URL (redis-cli's spelling) is the same;\n"
    "              default $BATON_URL, else " CLI_DEFAULT_URL "\n"
    "  --user USER the user name for AUTH (Redis 6 ACL)\n"
    "  --askpass   read the password from stdin (without echo on a terminal; none: exit 2)\n"
    "  --password-file FILE  the password is FILE's first line (FILE readable by every\n"
    "              user: refused, exit 2). Without either: $BATON_PASSWORD, else\n"
    "              $REDISCLI_AUTH, else $CREDENTIALS_DIRECTORY/baton-password (systemd's\n"
    "              LoadCredential=), else the URL's\n"
    "  --tls-ca FILE, --tls-cert FILE, --tls-key FILE, --tls-sni NAME, --tls-insecure\n"
    "              TLS with rediss:// URLs: the CA that verifies the server (default: the\n"
    "              system's), a client certificate and key (mutual TLS), the name to verify,\n"
    "              or no verification at all (tests only); $BATON_TLS_CA, $BATON_TLS_CERT,\n"
    "              $BATON_TLS_KEY. redis-cli's spellings work too: --tls (a redis:// URL\n"
    "              is taken as rediss://), --cacert, --cacertdir, --cert, --key, --sni,\n"
    "              --insecure\n"
    "  --sync-replicas N  an acquisition counts once N replicas have it (WAIT), else it is\n"
    "              undone and baton fails (exit 125): a failover cannot erase the lock\n"
    "  --name NAME the connections' name (CLIENT SETNAME, seen in CLIENT LIST); default\n"
    "              baton:HOST:PID\n"
    "  --help      print this help (also after a command);  --version  the version\n"
    "The options above may also follow the command; those that say the server or the\n"
    "credentials (--url, -u, --user, --askpass, --password-file, TLS) only before the first\n"
    "NAME. Long options match by their exact name only.\n"
    "  --object NAME  (after the command) NAME as it is, even if it starts with '-'\n"
    "DUR is 250ms, 10s, 1.5s, 5m, 1m30s, 1h, or a bare number of seconds.\n"
    "COMMAND gets BATON_FENCING_TOKEN (the lock's fencing token) in its environment, and\n"
    "not BATON_PASSWORD, REDISCLI_AUTH or a BATON_URL holding an '@'. It runs in a process\n"
    "group of its own (with the terminal, if baton has it); SIGINT, SIGTERM and SIGHUP sent\n"
    "to baton are forwarded to that group.\n"
    "\n"
    "Exit status:\n"
    "  COMMAND's status      lock and semaphore, when COMMAND ran under the lock\n"
    "  0                     success (latch, status, unlock)\n"
    "  1                     latch set: a count was already set; unlock: was not locked\n"
    "  2                     bad usage\n"
    "  119                   the server's ACL refused a command, key or channel\n"
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
    for (size_t i = 0; i < N_COMMANDS; i++) {
        if (command && strcmp(command, commands[i].name) != 0)
            continue;
        fprintf(stderr, "%s %s\n", i == 0 || command ? "usage:" : "      ", commands[i].usage);
    }
    if (!command)
        fprintf(stderr, "       baton --help | --version\n");
    fprintf(stderr, "Try 'baton --help' for more information.\n");
    return EXIT_USAGE;
}

void cli_warn(baton_client *c, const char *what)
{
    const char *w = baton_client_errmsg(c);
    if (w[0])
        fprintf(stderr, "baton: warning: %s: %s\n", what, w);
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
    case BATON_EPERM:
        return EXIT_PERM;
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

/* One "<digits>[.<digits>]" at *p, in microunits (value * 10^6); advances *p. */
static bool parse_decimal(const char **p, int64_t *micro)
{
    const char *s = *p;
    size_t n = strspn(s, "0123456789");
    if (n == 0 || n > 12)
        return false;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = v * 10 + (s[i] - '0');
    s += n;
    int64_t frac = 0, scale = 1000000;
    if (*s == '.') {
        s++;
        size_t f = strspn(s, "0123456789");
        if (f == 0 || f > 6)
            return false;
        for (size_t i = 0; i < f; i++) {
            scale /= 10;
            frac += (s[i] - '0') * scale;
        }
        s += f;
    }
    *micro = v * 1000000 + frac;
    *p = s;
    return true;
}

bool cli_parse_duration(const char *s, int64_t *ms)
{
    static const struct {
        const char *name;
        int64_t ms;
    } units[] = {{"ms", 1}, {"h", 3600000}, {"m", 60000}, {"s", 1000}};
    if (!s || !*s)
        return false;
    const char *p = s;
    int64_t total_us = 0; /* microseconds */
    while (*p) {
        const char *start = p;
        int64_t micro;
        if (!parse_decimal(&p, &micro))
            return false;
        int64_t unit = -1;
        for (size_t i = 0; i < sizeof units / sizeof units[0] && unit < 0; i++) {
            size_t n = strlen(units[i].name);
            if (strncmp(p, units[i].name, n) == 0) {
                unit = units[i].ms;
                p += n;
            }
        }
        if (unit < 0 && *p == '\0' && start == s)
            unit = 1000; /* a bare number, alone, is seconds */
        if (unit < 0)
            return false;
        /* micro / 10^6 units of `unit` ms: in microseconds, micro * unit / 1000 */
        if (micro > (BATON_MAX_DURATION_MS + 1) * (int64_t)1000 / unit * 1000)
            return false;
        total_us += micro / 1000 * unit + micro % 1000 * unit / 1000;
        if (total_us > BATON_MAX_DURATION_MS * (int64_t)1000)
            return false;
    }
    *ms = total_us / 1000;
    return true;
}

/* ------------------------------- the client ------------------------------------------- */

/* --askpass: reads one line from stdin (no echo on a terminal) into *password; -1 (printed)
 * if there is none. */
static int askpass(const char **password)
{
    static char buf[1024];
    bool tty = isatty(STDIN_FILENO);
    struct termios old, quiet;
    if (tty && tcgetattr(STDIN_FILENO, &old) == 0) {
        quiet = old;
        quiet.c_lflag &= ~(tcflag_t)ECHO;
        fputs("Password: ", stderr);
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
    } else {
        tty = false;
    }
    bool ok = fgets(buf, sizeof buf, stdin) != NULL;
    if (tty) {
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
        fputs("\n", stderr);
    }
    if (ok)
        buf[strcspn(buf, "\r\n")] = '\0';
    if (!ok || !buf[0]) {
        cli_error("--askpass: no password on standard input");
        return -1;
    }
    *password = buf;
    return 0;
}

/* The first line of a password file (--password-file, or systemd's credential
 * $CREDENTIALS_DIRECTORY/baton-password) into buf; -1 (printed) if it cannot be read, is
 * readable by others than its owner and group, or holds no password. */
static int password_from_file(const char *path, const char *what, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        cli_error("%s %s: %s", what, path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || (st.st_mode & S_IROTH)) {
        cli_error("%s %s: readable by every user: refused (chmod o-r, or 0600)", what, path);
        fclose(f);
        return -1;
    }
    bool ok = fgets(buf, (int)len, f) != NULL;
    fclose(f);
    if (ok)
        buf[strcspn(buf, "\r\n")] = '\0';
    if (!ok || !buf[0]) {
        cli_error("%s %s: no password on its first line", what, path);
        return -1;
    }
    return 0;
}

/* The password: --askpass, else --password-file, else $BATON_PASSWORD, else
 * $REDISCLI_AUTH, else $CREDENTIALS_DIRECTORY/baton-password if it exists (systemd's
 * LoadCredential=baton-password:...), else none (the URL's). EXIT_OK, or EXIT_USAGE after a
 * message. */
static int find_password(const cli_global *g, const char **password)
{
    static char file_buf[1024];
    *password = g->password;
    if (g->askpass)
        return askpass(password) == 0 ? EXIT_OK : EXIT_USAGE;
    if (g->password_file)
        return password_from_file(g->password_file, "--password-file", file_buf, sizeof file_buf) ==
                       0
                   ? (*password = file_buf, EXIT_OK)
                   : EXIT_USAGE;
    const char *dir = getenv("CREDENTIALS_DIRECTORY");
    if ((!*password || !**password) && dir && *dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/baton-password", dir);
        if (access(path, F_OK) == 0) {
            if (password_from_file(path, "credential", file_buf, sizeof file_buf) != 0)
                return EXIT_USAGE;
            *password = file_buf;
        }
    }
    return EXIT_OK;
}

int cli_set_url(cli_global *g, const char *url)
{
    if (g->url)
        return cli_usage_error(NULL, "--url given twice");
    if (!*url)
        return cli_usage_error(NULL, "--url is empty");
    g->url = url;
    return EXIT_OK;
}

const char *cli_url(const cli_global *g)
{
    const char *env = getenv("BATON_URL");
    return g->url ? g->url : env && *env ? env : CLI_DEFAULT_URL;
}

/* --verbose: the library's events (renewals, reconnects, losses) as they happen. */
static void log_to_stderr(void *arg, int level, const char *msg)
{
    (void)arg;
    static const char *const names[] = {"", "error", "warning", "info", "debug"};
    fprintf(stderr, "baton: %s: %s\n", names[level >= 1 && level <= 4 ? level : 0], msg);
}

int cli_open_client(const cli_global *g, baton_client **out)
{
    baton_options o;
    baton_options_init(&o);
    char tls_url[4096];
    o.url = cli_url(g);
    if (g->tls) { /* redis-cli's --tls: the URL's TLS form */
        static const char *const plain[] = {"redis://", "redis+sentinel://", "redis+cluster://"};
        for (size_t k = 0; k < 3; k++)
            if (strncmp(o.url, plain[k], strlen(plain[k])) == 0) {
                snprintf(tls_url, sizeof tls_url, "rediss%s", o.url + 5);
                o.url = tls_url;
            }
        if (strncmp(o.url, "rediss", 6) != 0)
            return cli_usage_error(NULL, "--tls takes a redis:// URL (a unix socket has no "
                                         "TLS)");
    }
    o.username = g->user;
    o.tls_ca = g->tls_ca;
    o.tls_cert = g->tls_cert;
    o.tls_key = g->tls_key;
    o.tls_sni = g->tls_sni;
    o.tls_insecure_skip_verify = g->tls_insecure;
    if (g->tls_insecure) /* every run: a flag left in a script must not be forgotten */
        fprintf(stderr, "baton: warning: --tls-insecure: the server's certificate and name are "
                        "not checked; anyone on the path can pose as the server\n");
    const char *password = NULL;
    int prc = find_password(g, &password); /* read once the command line parsed */
    if (prc != EXIT_OK)
        return prc;
    o.password = password && *password ? password : NULL;
    o.watchdog_ms = g->watchdog_ms;
    o.sync_replicas = g->sync_replicas;
    o.client_name = g->client_name; /* NULL: the library's baton:<host>:<pid> */
    if (g->verbose) {
        o.log_fn = log_to_stderr;
        o.log_level = BATON_LOG_DEBUG;
    }
    int rc = baton_client_open(&o, out);
    if (rc == BATON_OK) {
        /* an open that succeeded may leave a warning (an evicting maxmemory-policy) */
        const char *warning = baton_client_errmsg(*out);
        if (strncmp(warning, "warning: ", 9) == 0)
            warning += 9; /* the library's text says it already */
        if (warning[0] && !g->quiet)
            fprintf(stderr, "baton: warning: %s\n", warning);
        return EXIT_OK;
    }
    char shown[512];
    baton_url_redact(o.url, shown, sizeof shown); /* the library's parse: no password */
    const char *detail = baton_open_errmsg();
    cli_error("%s: %s%s%s", shown, baton_strerror(rc), detail[0] ? ": " : "", detail);
    switch (rc) {
    case BATON_ECONN:
        return EXIT_CONN;
    case BATON_EAUTH:
        return EXIT_AUTH;
    case BATON_EPERM:
        return EXIT_PERM;
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

/* `baton --help` (cmd NULL) or `baton CMD --help`, on stdout. */
static void print_help(const cli_command *cmd)
{
    fputs(cmd ? "" : help_head, stdout);
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!cmd || cmd == &commands[i])
            printf("%s%s\n", cmd ? "usage: " : "  ", commands[i].usage);
    if (!cmd)
        printf("  baton --help | --version\n\nCommands:\n");
    else
        printf("\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!cmd || cmd == &commands[i])
            fputs(commands[i].help, stdout);
    fputs(help_tail, stdout);
}

/* True if args (up to "--") ask for help. */
static bool wants_help(int argc, char **argv)
{
    for (int i = 0; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return true;
    return false;
}

void cli_note_name(cli_global *g, const char *name)
{
    if (g->parse_only && g->names)
        g->names[g->n_names++] = name;
}

/* The options before the command, up to the command's name. Returns -1 to go on with the
 * command at argv[*at], or the exit code to end with (--help and --version: 0). */
static int parse_global(cli_global *g, int argc, char **argv, int *at)
{
    cli_opts o;
    cli_opts_init(&o, NULL, g, argc - 1, argv + 1, "", NULL);
    for (int c; (c = cli_opts_next(&o)) != CLI_OPT_END;) {
        if (c == 'h') {
            print_help(NULL);
            return fflush(stdout) == 0 ? EXIT_OK : EXIT_FAILED;
        } else if (c == 'V') {
            printf("baton %s (libbaton %s)\n", BATON_VERSION_STRING, baton_version());
            return fflush(stdout) == 0 ? EXIT_OK : EXIT_FAILED;
        } else if (c == CLI_OPT_WORD) {
            break;
        } else {
            return EXIT_USAGE; /* printed */
        }
    }
    *at = o.i + 1;
    return -1;
}

/* main() up to running the command; g->parse_only stops before anything is read, opened
 * or run. */
static int cli_main(int argc, char **argv, cli_global *g)
{
    int i = 0;
    int rc = parse_global(g, argc, argv, &i);
    if (rc >= 0)
        return rc;
    if (i >= argc)
        return cli_usage_error(NULL, "no command");
    const char *cmd = argv[i];
    const cli_command *found = NULL;
    for (size_t k = 0; k < N_COMMANDS && !found; k++)
        if (strcmp(cmd, commands[k].name) == 0)
            found = &commands[k];
    if (!found)
        return cli_usage_error(NULL, "unknown command '%s'", cmd);
    if (wants_help(argc - i - 1, argv + i + 1)) {
        print_help(found);
        return fflush(stdout) == 0 ? EXIT_OK : EXIT_FAILED;
    }
    if (g->parse_only)
        return found->fn(g, argc - i - 1, argv + i + 1);

    const char *tls_env[] = {"BATON_TLS_CA", "BATON_TLS_CERT", "BATON_TLS_KEY"};
    const char **tls_field[] = {&g->tls_ca, &g->tls_cert, &g->tls_key};
    for (size_t k = 0; k < 3; k++)
        if (!*tls_field[k] && getenv(tls_env[k]) && *getenv(tls_env[k]))
            *tls_field[k] = getenv(tls_env[k]);
    const char *env = getenv("BATON_URL");
    if (env && !*env)
        return cli_usage_error(NULL, "BATON_URL is set but empty (unset it for the default "
                                     "server)");

    if (cli_signals_init() != 0)
        return EXIT_FAILED;
    const char *pw = getenv("BATON_PASSWORD");
    g->password = pw && *pw ? pw : getenv("REDISCLI_AUTH"); /* --askpass: read at the open */
    rc = found->fn(g, argc - i - 1, argv + i + 1);
    cli_guard_stop(); /* join the signal thread on every path (a usage error included) */
    if (fflush(stdout) != 0 && rc == EXIT_OK) {
        cli_error("writing the output: %s", strerror(errno));
        rc = EXIT_FAILED;
    }
    return rc;
}

int cli_parse_only(int argc, char **argv, cli_global *g)
{
    g->parse_only = true;
    return cli_main(argc, argv, g);
}

#ifndef BATON_CLI_NO_MAIN
int main(int argc, char **argv)
{
    cli_global g = {0};
    return cli_main(argc, argv, &g);
}
#endif
