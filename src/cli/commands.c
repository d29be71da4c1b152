/*
 * The commands that act: lock and semaphore (run COMMAND under a hold), latch (the latch
 * verbs) and unlock --force. Each parses its own options (which may come in any order
 * before "--"), opens the client, does one thing through the public API, and maps the
 * outcome to an exit code.
 */
#define _GNU_SOURCE
#include "cli.h"

#include <hiredis/hiredis.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------- option parsing --------------------------------------- */

/*
 * A small parser over argv: options "--name VALUE" or "--name=VALUE", flags "--name",
 * positional words, and "--" after which everything is COMMAND.
 */
typedef struct args {
    int argc, i;
    char **argv;
    const char *command; /* for usage lines */
    const char *value;   /* the value of the option just matched */
    int error;           /* an exit code once a usage error was printed */
} args;

static bool at_end(const args *a)
{
    return a->i >= a->argc;
}

/* True if argv[i] is the option `name` (with a value if want_value), consuming it. */
static bool option(args *a, const char *name, bool want_value)
{
    const char *s = a->argv[a->i];
    size_t n = strlen(name);
    if (strncmp(s, name, n) != 0)
        return false;
    if (s[n] == '\0') {
        a->i++;
        if (!want_value)
            return true;
        if (at_end(a)) {
            a->error = cli_usage_error(a->command, "%s needs a value", name);
            a->value = NULL;
            return true;
        }
        a->value = a->argv[a->i++];
        return true;
    }
    if (s[n] == '=' && want_value) {
        a->value = s + n + 1;
        a->i++;
        return true;
    }
    return false;
}

static bool duration_option(args *a, const char *name, int64_t *ms, bool *given)
{
    if (!option(a, name, true))
        return false;
    if (a->error)
        return true;
    if (!cli_parse_duration(a->value, ms)) {
        a->error = cli_usage_error(a->command,
                                   "bad duration '%s' for %s (use 250ms, 10s, 5m, 1h, or "
                                   "seconds)",
                                   a->value, name);
        return true;
    }
    if (given)
        *given = true;
    return true;
}

static bool count_option(args *a, const char *name, int64_t min, int64_t *v)
{
    if (!option(a, name, true))
        return false;
    if (a->error)
        return true;
    if (!cli_parse_count(a->value, INT64_MAX / 2, v) || *v < min)
        a->error = cli_usage_error(a->command, "%s needs a whole number from %lld, not '%s'", name,
                                   (long long)min, a->value);
    return true;
}

/* What lock and semaphore do when busy: flock(1)'s -n, -w, -E and -q. */
typedef struct busy {
    int64_t wait_ms; /* --wait / -w; -n is 0 */
    bool has_wait;
    int64_t code; /* -E: the exit code when not acquired (EXIT_NOT_ACQUIRED) */
    bool quiet;   /* -q: nothing on stderr when not acquired */
} busy;

#define BUSY_INIT                                                                                  \
    {                                                                                              \
        BATON_WAIT_FOREVER, false, EXIT_NOT_ACQUIRED, false                                        \
    }

static bool busy_option(args *a, busy *b)
{
    if (duration_option(a, "--wait", &b->wait_ms, &b->has_wait) ||
        duration_option(a, "-w", &b->wait_ms, &b->has_wait))
        return true;
    if (option(a, "-n", false) || option(a, "--nonblock", false)) {
        b->wait_ms = 0;
        b->has_wait = true;
        return true;
    }
    if (option(a, "-q", false) || option(a, "--quiet", false)) {
        b->quiet = true;
        return true;
    }
    if (option(a, "-E", true) || option(a, "--conflict-exit-code", true)) {
        if (!a->error && (!cli_parse_count(a->value, 255, &b->code)))
            a->error = cli_usage_error(a->command, "-E needs an exit code from 0 to 255, not '%s'",
                                       a->value);
        return true;
    }
    return false;
}

/* --url is accepted after the command too. */
static bool url_option(args *a, cli_global *g)
{
    if (!option(a, "--url", true))
        return false;
    if (!a->error)
        a->error = cli_set_url(g, a->value);
    return true;
}

static int unknown_option(args *a)
{
    return cli_usage_error(a->command, "unknown option '%s'", a->argv[a->i]);
}

/* A duration as the user would write it. */
static void format_ms(int64_t ms, char *buf, size_t len)
{
    if (ms % 1000 != 0 || ms == 0)
        snprintf(buf, len, "%lldms", (long long)ms);
    else
        snprintf(buf, len, "%llds", (long long)(ms / 1000));
}

/* "BATON_FENCING_TOKEN=<t1>[,<t2>...]" for the calling thread's holds of the members, or
 * NULL if a token is not available. */
static char *fencing_env(baton_lock **members, size_t n)
{
    static const char var[] = "BATON_FENCING_TOKEN=";
    size_t cap = sizeof var + 21 * n, len = sizeof var - 1;
    char *env = malloc(cap);
    if (!env)
        return NULL;
    memcpy(env, var, sizeof var);
    for (size_t i = 0; i < n; i++) {
        int64_t t;
        if (baton_lock_fencing_token(members[i], &t) != BATON_OK) {
            free(env);
            return NULL;
        }
        len += (size_t)snprintf(env + len, cap - len, "%s%lld", i ? "," : "", (long long)t);
    }
    return env;
}

/* ------------------------------- lock ------------------------------------------------- */

int cli_cmd_lock(cli_global *g, int argc, char **argv)
{
    args a = {argc, 0, argv, "lock", NULL, 0};
    const char **names = calloc((size_t)argc + 1, sizeof *names);
    if (!names)
        return EXIT_FAILED;
    size_t n = 0;
    int64_t lease_ms = 0, watchdog_ms = 0;
    int64_t kill_after_ms = CLI_DEFAULT_KILL_AFTER_MS;
    busy b = BUSY_INIT;
    bool hold = false;
    bool has_lease = false, has_watchdog = false, fair = false;
    char **command = NULL;
    while (!at_end(&a) && !a.error) {
        const char *s = argv[a.i];
        if (strcmp(s, "--") == 0) {
            command = argv + a.i + 1;
            break;
        }
        if (busy_option(&a, &b) || duration_option(&a, "--lease", &lease_ms, &has_lease) ||
            duration_option(&a, "--watchdog", &watchdog_ms, &has_watchdog) ||
            duration_option(&a, "--kill-after", &kill_after_ms, NULL) || url_option(&a, g))
            continue;
        if (option(&a, "--fair", false)) {
            fair = true;
            continue;
        }
        if (option(&a, "--hold", false)) {
            hold = true;
            continue;
        }
        if (option(&a, "--verbose", false)) {
            g->verbose = true;
            continue;
        }
        if (s[0] == '-' && s[1] != '\0') {
            a.error = unknown_option(&a);
            break;
        }
        names[n++] = s;
        a.i++;
    }
    int rc = a.error;
    if (!rc && n == 0)
        rc = cli_usage_error("lock", "no lock NAME");
    else if (!rc && hold && command)
        rc = cli_usage_error("lock", "--hold runs no COMMAND");
    else if (!rc && !hold && !command)
        rc = cli_usage_error("lock", "missing '--' before COMMAND (or --hold)");
    else if (!rc && !hold && !command[0])
        rc = cli_usage_error("lock", "no COMMAND after '--'");
    else if (!rc && has_lease && has_watchdog)
        rc = cli_usage_error("lock", "--lease and --watchdog exclude each other");
    else if (!rc && has_lease && lease_ms == 0)
        rc = cli_usage_error("lock", "--lease must be more than 0");
    else if (!rc && has_watchdog && watchdog_ms < 30)
        rc = cli_usage_error("lock", "--watchdog must be at least 30ms");
    if (rc) {
        free(names);
        return rc;
    }

    g->watchdog_ms = watchdog_ms;
    baton_client *c = NULL;
    baton_lock **members = calloc(n, sizeof *members);
    baton_lock *l = NULL;
    char *token_env = NULL;
    int *lost_fds = NULL;
    char what[300];
    snprintf(what, sizeof what, "%s %s%s",
             n > 1  ? "multi-lock"
             : fair ? "fair lock"
                    : "lock",
             names[0], n > 1 ? ", ..." : "");
    if (!members) {
        rc = EXIT_FAILED;
        goto done;
    }
    rc = cli_open_client(g, &c);
    if (rc)
        goto done;
    for (size_t i = 0; i < n; i++) {
        int brc = fair ? baton_fairlock_open(c, names[i], &members[i])
                       : baton_lock_open(c, names[i], &members[i]);
        if (brc != BATON_OK) {
            rc = cli_fail(c, brc, "lock %s", names[i]);
            goto done;
        }
    }
    if (n == 1) {
        l = members[0];
    } else {
        int brc = baton_multilock_open(members, n, &l);
        if (brc != BATON_OK) {
            rc = cli_fail(c, brc, "%s", what);
            goto done;
        }
    }

    int64_t lease = has_lease ? lease_ms : BATON_LEASE_WATCHDOG;
    int64_t asked = cli_now_ms();
    int brc =
        b.has_wait ? baton_lock_try_acquire(l, b.wait_ms, lease) : baton_lock_acquire(l, lease);
    if (g->verbose && brc == BATON_OK)
        fprintf(stderr, "baton: acquired %s in %lld ms\n", what, (long long)(cli_now_ms() - asked));
    if (brc == BATON_ETIMEDOUT) {
        char shown[32];
        format_ms(b.wait_ms, shown, sizeof shown);
        if (!b.quiet)
            cli_error("%s: not acquired within %s%s%s", what, shown,
                      hold ? "" : "; not run: ", hold ? "" : command[0]);
        rc = (int)b.code;
        goto done;
    }
    if (brc != BATON_OK) {
        rc = cli_fail(c, brc, "%s", what);
        goto done;
    }
    cli_guard_hold();

    /* What COMMAND learns (its fencing tokens) and what baton watches while it runs: the
     * members' lost descriptors (a multi-lock's signals are its members'). */
    token_env = fencing_env(members, n);
    lost_fds = calloc(n, sizeof *lost_fds);
    size_t n_fds = 0;
    for (size_t i = 0; lost_fds && i < n; i++)
        if (baton_lock_lost_fd(members[i], &lost_fds[n_fds]) == BATON_OK)
            n_fds++;
    int64_t lease_end = 0;
    if (has_lease) {
        /* The lease runs from the server's acquire: end it at the earliest member's
         * remaining TTL, counted from before asking, so baton's end is never the later. */
        lease_end = cli_now_ms() + lease_ms;
        for (size_t i = 0; i < n; i++) {
            int64_t t0 = cli_now_ms(), ttl;
            if (baton_lock_remaining_ttl(members[i], &ttl) != BATON_OK)
                continue;
            if (ttl == -1)
                continue;                           /* no expiry: nothing to watch */
            int64_t end = t0 + (ttl < 0 ? 0 : ttl); /* -2: gone already */
            if (end < lease_end)
                lease_end = end;
        }
    }

    cli_watch w = {lost_fds, n_fds, lease_end, what, token_env, kill_after_ms};
    cli_outcome out = {0, false, false};
    if (hold) {
        fprintf(stderr, "baton: holding %s until interrupted\n", what);
        out.status = cli_hold(&w);
        out.lost = out.status == EXIT_LOST;
        out.ran = true;
    } else {
        cli_run(command, &w, &out);
    }

    brc = baton_lock_release(l);
    if (g->verbose)
        fprintf(stderr, "baton: released %s after %lld ms (%s)\n", what,
                (long long)(cli_now_ms() - asked), brc == BATON_OK ? "ok" : baton_err_name(brc));
    if (out.lost) {
        rc = EXIT_LOST;
    } else if (out.ran && brc == BATON_ENOTHELD) {
        cli_error("%s was lost before %s finished (found at release)", what,
                  hold ? "the hold" : command[0]);
        rc = EXIT_LOST;
    } else {
        if (brc != BATON_OK && brc != BATON_ENOTHELD)
            cli_fail(c, brc, "releasing %s (it expires by its lease)", what);
        rc = out.status;
    }

done:
    free(token_env);
    free(lost_fds);
    if (n > 1)
        baton_lock_close(l);
    for (size_t i = 0; members && i < n; i++)
        baton_lock_close(members[i]);
    free(members);
    free(names);
    baton_client_close(c);
    return rc;
}

/* ------------------------------- semaphore -------------------------------------------- */

static bool is_semaphore_verb(const char *s)
{
    return strcmp(s, "set") == 0 || strcmp(s, "add") == 0 || strcmp(s, "drain") == 0 ||
           strcmp(s, "delete") == 0;
}

/* `semaphore NAME set N | add [-]N | drain | delete`: the library's admin calls. set: exit 1
 * if a count was set already; drain: prints the permits taken; delete: exit 1 if absent.
 * set and delete act on the permit leases' keys too (set counts the leases running, delete
 * removes them) unless --counting; add and drain change the count as for RSemaphore. */
static int semaphore_admin(cli_global *g, const char *name, const char *verb, const char *number,
                           bool counting)
{
    bool set = strcmp(verb, "set") == 0, add = strcmp(verb, "add") == 0;
    bool del = strcmp(verb, "delete") == 0;
    int64_t n = 0;
    bool neg = add && number && number[0] == '-';
    if ((set || add) &&
        (!number || !cli_parse_count(number + neg, INT64_MAX / 2, &n) || (add && n == 0)))
        return cli_usage_error("semaphore", "semaphore %s needs a %s, not '%s'", verb,
                               set ? "count from 0" : "non-zero whole number",
                               number ? number : "");
    if (!set && !add && number)
        return cli_usage_error("semaphore", "unexpected '%s'", number);
    baton_client *c = NULL;
    baton_semaphore *s = NULL;
    baton_permits *p = NULL;
    int rc = cli_open_client(g, &c);
    if (rc)
        return rc;
    bool leases = !counting && (set || del);
    int brc = leases ? baton_permits_open(c, name, &p) : baton_semaphore_open(c, name, &s);
    bool yes = true;
    int64_t drained = 0;
    if (brc == BATON_OK) {
        if (set)
            brc = leases ? baton_permits_try_set_permits(p, n, &yes)
                         : baton_semaphore_try_set_permits(s, n, &yes);
        else if (add)
            brc = baton_semaphore_add_permits(s, neg ? -n : n);
        else if (strcmp(verb, "drain") == 0)
            brc = baton_semaphore_drain(s, &drained);
        else
            brc = leases ? baton_permits_delete(p, &yes) : baton_semaphore_delete(s, &yes);
    }
    if (brc != BATON_OK) {
        rc = cli_fail(c, brc, "semaphore %s: %s", name, verb);
    } else if (!yes) {
        cli_error("semaphore %s: %s", name,
                  set ? "a count is already set; left as it is" : "does not exist");
        rc = EXIT_NO;
    } else if (strcmp(verb, "drain") == 0) {
        printf("%lld\n", (long long)drained);
    }
    baton_semaphore_close(s);
    baton_permits_close(p);
    baton_client_close(c);
    return rc;
}

/* The acquire failed: -w ran out (exit -E's code, or quiet) or an error. */
static int not_acquired(baton_client *c, int brc, const char *name, int64_t take, const busy *b,
                        const char *command)
{
    if (brc != BATON_ETIMEDOUT)
        return cli_fail(c, brc, "semaphore %s", name);
    char shown[32];
    format_ms(b->wait_ms, shown, sizeof shown);
    if (!b->quiet)
        cli_error("semaphore %s: %lld permit%s not acquired within %s; %s not run", name,
                  (long long)take, take == 1 ? "" : "s", shown, command);
    return (int)b->code;
}

/* The RSemaphore way (--counting): K permits of the count, no owner, no lease. */
static int semaphore_counting(baton_client *c, const char *name, bool has_permits, int64_t permits,
                              int64_t take, const busy *b, int64_t kill_after_ms, char **command)
{
    baton_semaphore *s = NULL;
    int rc = 0;
    int brc = baton_semaphore_open(c, name, &s);
    if (brc == BATON_OK && has_permits)
        brc = baton_semaphore_try_set_permits(s, permits, NULL);
    if (brc == BATON_OK)
        brc = b->has_wait ? baton_semaphore_try_acquire(s, take, b->wait_ms)
                          : baton_semaphore_acquire(s, take);
    if (brc != BATON_OK) {
        rc = not_acquired(c, brc, name, take, b, command[0]);
    } else {
        cli_guard_hold();
        char what[300];
        snprintf(what, sizeof what, "semaphore %s", name);
        cli_watch w = {NULL, 0, 0, what, NULL, kill_after_ms};
        cli_outcome out;
        cli_run(command, &w, &out);
        brc = baton_semaphore_release(s, take);
        if (brc != BATON_OK)
            cli_fail(c, brc, "returning %lld permit%s of semaphore %s", (long long)take,
                     take == 1 ? "" : "s", name);
        rc = out.status;
    }
    baton_semaphore_close(s);
    return rc;
}

/* The default: K permit leases (Redisson's RPermitExpirableSemaphore), renewed by the
 * watchdog while COMMAND runs; a baton killed with -9 gives them back within the lease. */
static int semaphore_leases(baton_client *c, const char *name, bool has_permits, int64_t permits,
                            int64_t take, const busy *b, int64_t kill_after_ms, char **command)
{
    baton_permits *p = NULL;
    int rc = 0;
    char(*ids)[BATON_PERMIT_ID_SIZE] = calloc((size_t)take, sizeof *ids);
    if (!ids)
        return EXIT_FAILED;
    int brc = baton_permits_open(c, name, &p);
    if (brc == BATON_OK && has_permits)
        brc = baton_permits_try_set_permits(p, permits, NULL);
    if (brc == BATON_OK)
        brc = baton_permits_try_acquire_many(p, take, b->has_wait ? b->wait_ms : BATON_WAIT_FOREVER,
                                             BATON_LEASE_WATCHDOG, ids);
    char what[300];
    snprintf(what, sizeof what, "semaphore %s", name);
    if (brc != BATON_OK) {
        rc = not_acquired(c, brc, name, take, b, command[0]);
    } else {
        cli_guard_hold();
        int lost_fd = -1;
        bool has_fd = baton_permits_lost_fd(p, &lost_fd) == BATON_OK;
        cli_watch w = {has_fd ? &lost_fd : NULL, has_fd ? 1 : 0, 0, what, NULL, kill_after_ms};
        cli_outcome out = {0, false, false};
        cli_run(command, &w, &out);
        bool lost = out.lost;
        for (int64_t i = 0; i < take; i++) {
            brc = baton_permits_release(p, ids[i]);
            if (brc == BATON_ENOTHELD)
                lost = true;
            else if (brc != BATON_OK)
                cli_fail(c, brc, "returning a permit of %s (it comes back when its lease ends)",
                         what);
        }
        if (lost && !out.lost)
            cli_error("%s: a permit was lost before %s finished (found at release)", what,
                      command[0]);
        rc = lost ? EXIT_LOST : out.status;
    }
    baton_permits_close(p);
    free(ids);
    return rc;
}

int cli_cmd_semaphore(cli_global *g, int argc, char **argv)
{
    args a = {argc, 0, argv, "semaphore", NULL, 0};
    const char *name = NULL;
    int64_t permits = 0, take = 1, watchdog_ms = 0;
    int64_t kill_after_ms = CLI_DEFAULT_KILL_AFTER_MS;
    busy b = BUSY_INIT;
    bool has_permits = false, has_watchdog = false, counting = false;
    char **command = NULL;
    const char *verb = NULL, *number = NULL;
    int rc = 0;
    while (!at_end(&a) && !a.error && !rc) {
        const char *s = argv[a.i];
        if (strcmp(s, "--") == 0) {
            command = argv + a.i + 1;
            break;
        }
        if (count_option(&a, "--permits", 0, &permits)) {
            has_permits = true;
            continue;
        }
        if (count_option(&a, "--take", 1, &take) || busy_option(&a, &b) ||
            duration_option(&a, "--watchdog", &watchdog_ms, &has_watchdog) ||
            duration_option(&a, "--kill-after", &kill_after_ms, NULL) || url_option(&a, g))
            continue;
        if (option(&a, "--counting", false)) {
            counting = true;
            continue;
        }
        if (name && !verb && is_semaphore_verb(s)) {
            verb = s;
            a.i++;
            if ((strcmp(verb, "set") == 0 || strcmp(verb, "add") == 0) && !at_end(&a))
                number = argv[a.i++]; /* add's may be negative */
            continue;
        }
        if (s[0] == '-' && s[1] != '\0')
            rc = unknown_option(&a);
        else if (name)
            rc = cli_usage_error("semaphore", "one semaphore NAME only ('%s' is a second)", s);
        name = s;
        a.i++;
    }
    if (!rc)
        rc = a.error;
    if (!rc && name && verb && !command)
        return semaphore_admin(g, name, verb, number, counting);
    if (!rc && !name)
        rc = cli_usage_error("semaphore", "no semaphore NAME");
    else if (!rc && !command)
        rc = cli_usage_error("semaphore", "missing '--' before COMMAND");
    else if (!rc && !command[0])
        rc = cli_usage_error("semaphore", "no COMMAND after '--'");
    else if (!rc && has_watchdog && counting)
        rc = cli_usage_error("semaphore", "--watchdog is for permit leases, not --counting");
    else if (!rc && has_watchdog && watchdog_ms < 30)
        rc = cli_usage_error("semaphore", "--watchdog must be at least 30ms");
    else if (!rc && !counting && take > BATON_PERMITS_MAX_MANY)
        rc = cli_usage_error("semaphore", "--take takes at most %d permit leases",
                             BATON_PERMITS_MAX_MANY);
    if (rc)
        return rc;

    g->watchdog_ms = watchdog_ms;
    baton_client *c = NULL;
    rc = cli_open_client(g, &c);
    if (rc)
        return rc;
    rc = counting
             ? semaphore_counting(c, name, has_permits, permits, take, &b, kill_after_ms, command)
             : semaphore_leases(c, name, has_permits, permits, take, &b, kill_after_ms, command);
    baton_client_close(c);
    return rc;
}

/* ------------------------------- latch ------------------------------------------------ */

int cli_cmd_latch(cli_global *g, int argc, char **argv)
{
    args a = {argc, 0, argv, "latch", NULL, 0};
    const char *words[3] = {NULL, NULL, NULL}; /* NAME, verb, N */
    size_t n = 0;
    int64_t timeout_ms = BATON_WAIT_FOREVER;
    bool has_timeout = false;
    int rc = 0;
    while (!at_end(&a) && !a.error && !rc) {
        const char *s = argv[a.i];
        if (duration_option(&a, "--timeout", &timeout_ms, &has_timeout) || url_option(&a, g))
            continue;
        if (s[0] == '-' && s[1] != '\0' && !(n == 2 && s[1] >= '0' && s[1] <= '9')) {
            rc = unknown_option(&a);
            break;
        }
        if (n == 3) {
            rc = cli_usage_error("latch", "unexpected '%s'", s);
            break;
        }
        words[n++] = s;
        a.i++;
    }
    if (!rc)
        rc = a.error;
    if (rc)
        return rc;
    if (n < 2)
        return cli_usage_error("latch", n == 0 ? "no latch NAME" : "no latch verb");
    const char *name = words[0], *verb = words[1];
    int64_t count = 0;
    bool set = strcmp(verb, "set") == 0, await = strcmp(verb, "await") == 0;
    if (!set && !await && strcmp(verb, "count-down") != 0 && strcmp(verb, "count") != 0 &&
        strcmp(verb, "delete") != 0)
        return cli_usage_error("latch", "unknown latch verb '%s'", verb);
    if (set && (!words[2] || !cli_parse_count(words[2], INT64_MAX / 2, &count) || count < 1))
        return cli_usage_error("latch", "latch set needs a count from 1%s%s%s",
                               words[2] ? ", not '" : "", words[2] ? words[2] : "",
                               words[2] ? "'" : "");
    if (!set && words[2])
        return cli_usage_error("latch", "unexpected '%s'", words[2]);
    if (has_timeout && !await)
        return cli_usage_error("latch", "--timeout goes with await only");

    baton_client *c = NULL;
    baton_latch *l = NULL;
    rc = cli_open_client(g, &c);
    if (rc)
        return rc;
    int brc = baton_latch_open(c, name, &l);
    if (brc != BATON_OK) {
        rc = cli_fail(c, brc, "latch %s", name);
    } else if (set) {
        bool was_set = false;
        brc = baton_latch_try_set_count(l, count, &was_set);
        if (brc != BATON_OK) {
            rc = cli_fail(c, brc, "latch %s: set", name);
        } else if (!was_set) {
            int64_t now = 0;
            baton_latch_count(l, &now);
            cli_error("latch %s: a count is already set (%lld); left as it is", name,
                      (long long)now);
            rc = EXIT_NO;
        }
    } else if (await) {
        brc = baton_latch_await(l, timeout_ms);
        if (brc == BATON_ETIMEDOUT) {
            cli_error("latch %s: not open within --timeout", name);
            rc = EXIT_AWAIT_TIMEOUT;
        } else if (brc != BATON_OK) {
            rc = cli_fail(c, brc, "latch %s: await", name);
        }
    } else if (strcmp(verb, "count") == 0) {
        int64_t v = 0;
        brc = baton_latch_count(l, &v);
        if (brc != BATON_OK)
            rc = cli_fail(c, brc, "latch %s: count", name);
        else
            printf("%lld\n", (long long)v);
    } else if (strcmp(verb, "delete") == 0) {
        bool existed = false;
        brc = baton_latch_delete(l, &existed);
        if (brc != BATON_OK) {
            rc = cli_fail(c, brc, "latch %s: delete", name);
        } else if (!existed) {
            cli_error("latch %s does not exist", name);
            rc = EXIT_NO;
        }
    } else {
        brc = baton_latch_count_down(l);
        if (brc != BATON_OK)
            rc = cli_fail(c, brc, "latch %s: count-down", name);
    }
    baton_latch_close(l);
    baton_client_close(c);
    return rc;
}

/* ------------------------------- unlock --force --------------------------------------- */

/* Whether NAME has a fair lock's queue or deadline set: then its waiters listen on their
 * own channels, which only a fair lock's force release wakes. */
static bool has_fair_queue(const cli_global *g, const char *name)
{
    redisContext *r = cli_redis_connect(g);
    if (!r)
        return false;
    char *queue = cli_tagged("redisson_lock_queue:", name);
    char *timeout = cli_tagged("redisson_lock_timeout:", name);
    bool fair = false;
    if (queue && timeout) {
        redisReply *rep = redisCommand(r, "EXISTS %s %s", queue, timeout);
        fair = rep && rep->type == REDIS_REPLY_INTEGER && rep->integer > 0;
        if (rep)
            freeReplyObject(rep);
    }
    free(queue);
    free(timeout);
    redisFree(r);
    return fair;
}

int cli_cmd_unlock(cli_global *g, int argc, char **argv)
{
    args a = {argc, 0, argv, "unlock", NULL, 0};
    const char *name = NULL;
    bool force = false;
    int rc = 0;
    while (!at_end(&a) && !a.error && !rc) {
        const char *s = argv[a.i];
        if (url_option(&a, g))
            continue;
        if (option(&a, "--force", false)) {
            force = true;
            continue;
        }
        if (s[0] == '-' && s[1] != '\0')
            rc = unknown_option(&a);
        else if (name)
            rc = cli_usage_error("unlock", "one lock NAME only ('%s' is a second)", s);
        name = s;
        a.i++;
    }
    if (!rc)
        rc = a.error;
    if (!rc && !force)
        rc = cli_usage_error("unlock", "unlock deletes the lock whoever holds it: say --force");
    else if (!rc && !name)
        rc = cli_usage_error("unlock", "no lock NAME");
    if (rc)
        return rc;

    baton_client *c = NULL;
    baton_lock *l = NULL;
    rc = cli_open_client(g, &c);
    if (rc)
        return rc;
    bool fair = has_fair_queue(g, name);
    int brc = fair ? baton_fairlock_open(c, name, &l) : baton_lock_open(c, name, &l);
    bool was_locked = false;
    if (brc == BATON_OK)
        brc = baton_lock_force_release(l, &was_locked);
    if (brc != BATON_OK) {
        rc = cli_fail(c, brc, "unlock %s", name);
    } else if (!was_locked) {
        cli_error("%s was not locked", name);
        rc = EXIT_NO;
    } else {
        fprintf(stderr, "baton: %s%s released\n", fair ? "fair lock " : "lock ", name);
    }
    baton_lock_close(l);
    baton_client_close(c);
    return rc;
}
