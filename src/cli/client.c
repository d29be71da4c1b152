/*
 * Opening the client: the options from the command line and the environment, the password
 * (--askpass, --password-file, the environment, systemd's credential), the library's
 * warning at the open (the maxmemory-policy's told once a day per server), and a failed
 * open's message and exit code. Every command that talks to the server opens its client
 * here.
 */
#define _GNU_SOURCE
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------- the password ----------------------------------------- */

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
    if (fstat(fileno(f), &st) != 0 || (st.st_mode & (S_IROTH | S_IWOTH))) {
        cli_error("%s %s: %s by every user: refused (chmod o-rw, or 0600)", what, path,
                  st.st_mode & S_IROTH ? "readable" : "writable");
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

const char *cli_url(const cli_global *g)
{
    const char *env = getenv("BATON_URL");
    return g->url ? g->url : env && *env ? env : CLI_DEFAULT_URL;
}

/* ------------------------------- the open's warning ---------------------------------- */

/*
 * Whether this run is the first today to tell the open's warning (an evicting
 * maxmemory-policy) about this server. cron runs baton every few minutes and mails what it
 * prints: the warning is told once a day (UTC) per server. The first run of the day takes
 * the lock CLI_WARNED_MARKER with a fixed lease that ends at the next 00:00 UTC; the runs
 * after it find the lock held and say nothing. The public API has no call that sets a key of
 * the caller's choosing: a lock taken with one attempt and a fixed lease is the cheapest
 * public SET NX PX (one script; it also keeps the lock's fencing-token counter, one small
 * key for good, and baton's holder record, which expires with the lease). The name stays the same
 * every day, so no key is left per day. A run that cannot tell (the ACL refuses the key, the server
 * is gone, a key of another type) warns: better twice than never.
 */
static bool first_warning_today(baton_client *c)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int64_t day_ms = 24LL * 3600 * 1000;
    int64_t ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
    baton_lock *marker = NULL;
    int brc = baton_lock_open(c, CLI_WARNED_MARKER, &marker);
    if (brc == BATON_OK)
        brc = baton_lock_try_acquire(marker, 0, day_ms - ms % day_ms);
    baton_lock_close(marker); /* the hold stays: it ends with its lease */
    return brc != BATON_ETIMEDOUT;
}

/* The warning an open that succeeded may leave: on stderr unless -q; an evicting
 * maxmemory-policy's once a day per server. */
static void tell_open_warning(const cli_global *g, baton_client *c)
{
    char warning[1024];
    const char *w = baton_client_errmsg(c);
    if (strncmp(w, "warning: ", 9) == 0)
        w += 9; /* the library's text says it already */
    if (!w[0] || g->quiet)
        return;
    snprintf(warning, sizeof warning, "%s", w); /* the next call on c replaces it */
    if (!strstr(warning, "maxmemory-policy"))
        cli_eprintf("warning: %s", warning);
    else if (first_warning_today(c))
        cli_eprintf("warning: %s (told once a day: %s marks it until 00:00 UTC; -q: never)",
                    warning, CLI_WARNED_MARKER);
}

/* ------------------------------- the open --------------------------------------------- */

/* --verbose: the library's events (renewals, reconnects, losses) as they happen. */
static void log_to_stderr(void *arg, int level, const char *msg)
{
    (void)arg;
    static const char *const names[] = {"", "error", "warning", "info", "debug"};
    cli_eprintf("%s: %s", names[level >= 1 && level <= 4 ? level : 0], msg);
}

/* The server's URL into o->url: cli_url(), in its TLS form (into tls_url) with --tls.
 * EXIT_OK or EXIT_USAGE (printed). */
static int set_url(const cli_global *g, baton_options *o, char *tls_url, size_t len)
{
    o->url = cli_url(g);
    if (!g->tls)
        return EXIT_OK;
    /* redis-cli's --tls: the URL's TLS form */
    static const char *const plain[] = {"redis://", "redis+sentinel://", "redis+cluster://"};
    for (size_t k = 0; k < sizeof plain / sizeof plain[0]; k++)
        if (strncmp(o->url, plain[k], strlen(plain[k])) == 0) {
            snprintf(tls_url, len, "rediss%s", o->url + 5);
            o->url = tls_url;
        }
    if (strncmp(o->url, "rediss", 6) != 0)
        return cli_usage_error(NULL, "--tls takes a redis:// URL (a unix socket has no TLS)");
    return EXIT_OK;
}

/* The client's options from g, but the URL and the password. */
static void set_options(const cli_global *g, baton_options *o)
{
    o->username = g->user;
    o->tls_ca = g->tls_ca;
    o->tls_cert = g->tls_cert;
    o->tls_key = g->tls_key;
    o->tls_sni = g->tls_sni;
    o->tls_insecure_skip_verify = g->tls_insecure;
    o->watchdog_ms = g->watchdog_ms;
    o->sync_replicas = g->sync_replicas;
    o->sync_aof = g->sync_aof;
    o->client_name = g->client_name; /* NULL: the library's baton:<host>:<pid> */
    if (g->verbose) {
        o->log_fn = log_to_stderr;
        o->log_level = BATON_LOG_DEBUG;
    }
}

bool cli_start(const cli_global *g, int *rc, baton_client **c)
{
    *c = NULL;
    if (*rc || g->parse_only)
        return false;
    *rc = cli_open_client(g, c);
    return *rc == 0;
}

int cli_open_client(const cli_global *g, baton_client **out)
{
    baton_options o;
    baton_options_init(&o);
    char tls_url[4096];
    int rc = set_url(g, &o, tls_url, sizeof tls_url);
    if (rc != EXIT_OK)
        return rc;
    set_options(g, &o);
    if (g->tls_insecure) /* every run: a flag left in a script must not be forgotten */
        cli_eprintf("warning: --tls-insecure: the server's certificate and name are "
                    "not checked; anyone on the path can pose as the server");
    const char *password = NULL;
    rc = find_password(g, &password); /* read once the command line parsed */
    if (rc != EXIT_OK)
        return rc;
    o.password = password && *password ? password : NULL;
    rc = baton_client_open(&o, out);
    if (rc == BATON_OK) {
        tell_open_warning(g, *out);
        return EXIT_OK;
    }
    char shown[512];
    baton_url_redact(o.url, shown, sizeof shown); /* the library's parse: no password */
    const char *detail = baton_open_errmsg();
    cli_error("%s: %s%s%s", shown, baton_strerror(rc), detail[0] ? ": " : "", detail);
    return cli_exit_code(rc);
}
