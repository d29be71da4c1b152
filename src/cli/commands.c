/*
 * The commands that act: lock, rwlock and semaphore (run COMMAND under a hold), latch (the latch
 * verbs) and unlock --force. Each parses its own options (which may come in any order
 * before "--"), opens the client, does one thing through the public API, and maps the
 * outcome to an exit code.
 */
#define _GNU_SOURCE
#include "cli.h"

#include <getopt.h> /* struct option: the tables cli_opts reads */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------- option parsing --------------------------------------- */

/* The long-only options' values (short ones use their letter). */
enum {
    OPT_LEASE = 256,
    OPT_WATCHDOG,
    OPT_KILL_AFTER,
    OPT_FAIR,
    OPT_HOLD,
    OPT_VERBOSE,
    OPT_PERMITS,
    OPT_TAKE,
    OPT_TIMEOUT,
    OPT_FORCE,
    OPT_COUNTING,
    OPT_READ,
    OPT_WRITE,
    OPT_NOTIFY,
};

/* An option handler's answer when the option is not one it knows. */
#define NOT_MINE (-1)

/* An option by its long name ("--wait", whether given as -w or --wait), for messages. */
static void option_shown(const struct option *longopts, int c, char *buf, size_t len)
{
    for (const struct option *l = longopts; l->name; l++) {
        if (l->val == c) {
            snprintf(buf, len, "--%s", l->name);
            return;
        }
    }
    snprintf(buf, len, "-%c", c);
}

/* A duration option's value into *ms (a wait's or a timeout's: "infinity" too, as
 * BATON_WAIT_FOREVER). Returns 0 or EXIT_USAGE (printed). */
static int duration_value_of(const cli_opts *o, int c, int64_t *ms, bool wait)
{
    if (wait ? cli_parse_wait(o->arg, ms) : cli_parse_duration(o->arg, ms))
        return 0;
    char name[32];
    option_shown(o->longopts, c, name, sizeof name);
    return cli_usage_error(o->command, "bad duration '%s' for %s (" CLI_DURATION_HINT ")", o->arg,
                           name);
}

static int duration_value(const cli_opts *o, int c, int64_t *ms)
{
    return duration_value_of(o, c, ms, false);
}

/* A count option's value (min or more) into *v. Returns 0 or EXIT_USAGE (printed). */
static int count_value(const cli_opts *o, int c, int64_t min, int64_t *v)
{
    if (cli_parse_count(o->arg, INT64_MAX / 2, v) && *v >= min)
        return 0;
    char name[32];
    option_shown(o->longopts, c, name, sizeof name);
    return cli_usage_error(o->command, "%s needs a whole number from %lld, not '%s'", name,
                           (long long)min, o->arg);
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

#define BUSY_SHORT "w:nE:q"
#define BUSY_LONG                                                                                  \
    CLI_ARG("wait", 'w'), CLI_FLAG("nonblock", 'n'), CLI_ARG("conflict-exit-code", 'E'),           \
        CLI_FLAG("quiet", 'q'), CLI_ARG("kill-after", OPT_KILL_AFTER),                             \
        CLI_FLAG("notify", OPT_NOTIFY)

/* -w, -n, -E, -q. Returns NOT_MINE, 0, or an exit code (printed). */
static int busy_option(const cli_opts *o, int c, busy *b)
{
    switch (c) {
    case 'w':
        b->has_wait = true;
        return duration_value_of(o, c, &b->wait_ms, true);
    case 'n':
        b->wait_ms = 0;
        b->has_wait = true;
        return 0;
    case 'q':
        b->quiet = true;
        return 0;
    case OPT_NOTIFY:
        if (!cli_notify_supported())
            return cli_usage_error(o->command, "--notify: this baton was built without "
                                               "libsystemd (sd_notify)");
        o->g->notify = true;
        return 0;
    case 'E':
        if (!cli_parse_count(o->arg, 255, &b->code))
            return cli_usage_error(o->command, "-E needs an exit code from 0 to 255, not '%s'",
                                   o->arg);
        return 0;
    default:
        return NOT_MINE;
    }
}

/* The parser's own errors (the global options are applied by the parser). Returns
 * NOT_MINE or an exit code (printed). */
static int common_option(const cli_opts *o, int c, cli_global *g)
{
    (void)o;
    (void)g;
    return c == CLI_OPT_ERROR ? EXIT_USAGE : NOT_MINE;
}

static int unexpected(const cli_opts *o, const char *what)
{
    return cli_usage_error(o->command, "unexpected '%s'", what);
}

/* A command's own options and words: returns NOT_MINE, 0, or an exit code (printed). */
typedef int option_fn(cli_opts *o, int c, cli_global *g, void *arg);

/* Reads every option and word of o: the parser's errors here, -w/-n/-E/-q into b
 * (NULL: the command takes none), the rest to fn. Frees o. Returns 0 or the exit code after
 * a message. */
static int each_option(cli_opts *o, cli_global *g, busy *b, option_fn *fn, void *arg)
{
    int rc = 0;
    for (int c; !rc && (c = cli_opts_next(o)) != CLI_OPT_END;) {
        rc = common_option(o, c, g);
        if (rc == NOT_MINE && b)
            rc = busy_option(o, c, b);
        if (rc == 0 && b && b->quiet)
            g->quiet = true; /* -q silences the open's warning too */
        if (rc == NOT_MINE)
            rc = fn(o, c, g, arg);
        if (rc == NOT_MINE)
            rc = cli_usage_error(o->command, "unexpected %s", o->word);
    }
    cli_opts_free(o);
    return rc;
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

/* What `lock` holds: its lock(s); for `rwlock`, one half of a read-write lock. */
typedef enum lock_part { PART_NONE, PART_READ, PART_WRITE } lock_part;

/* What `lock` (or `rwlock`) was asked to do. */
typedef struct lock_args {
    const char *cmd;    /* "lock" or "rwlock", for messages */
    bool rw;            /* rwlock: --read or --write names the half */
    lock_part part;     /* the half asked for (the last of --read, --write) */
    int parts;          /* how many of --read, --write were given */
    const char **names; /* borrowed from argv */
    size_t n;
    int64_t lease_ms, watchdog_ms, kill_after_ms;
    busy b;
    bool hold, has_lease, has_watchdog, fair;
    char **command; /* after "--"; NULL with --hold */
} lock_args;

/* lock's and rwlock's options; lock adds --fair, rwlock --read and --write. */
#define LOCK_LONG                                                                                  \
    BUSY_LONG, CLI_ARG("lease", OPT_LEASE), CLI_ARG("watchdog", OPT_WATCHDOG),                     \
        CLI_FLAG("hold", OPT_HOLD), CLI_FLAG("verbose", OPT_VERBOSE)

static const struct option lock_options[] = {LOCK_LONG, CLI_FLAG("fair", OPT_FAIR), CLI_END};
static const struct option rwlock_options[] = {LOCK_LONG, CLI_FLAG("read", OPT_READ),
                                               CLI_FLAG("write", OPT_WRITE), CLI_END};

/* One of lock's own options. Returns NOT_MINE, 0, or an exit code (printed). */
static int lock_option(cli_opts *o, int c, cli_global *g, void *arg)
{
    lock_args *la = arg;
    bool *flag = c == OPT_FAIR      ? &la->fair
                 : c == OPT_HOLD    ? &la->hold
                 : c == OPT_VERBOSE ? &g->verbose
                                    : NULL;
    if (flag) {
        *flag = true;
        return 0;
    }
    switch (c) {
    case OPT_LEASE:
        la->has_lease = true;
        return duration_value(o, c, &la->lease_ms);
    case OPT_WATCHDOG:
        la->has_watchdog = true;
        return duration_value(o, c, &la->watchdog_ms);
    case OPT_KILL_AFTER:
        return duration_value(o, c, &la->kill_after_ms);
    case OPT_READ:
    case OPT_WRITE:
        la->part = c == OPT_READ ? PART_READ : PART_WRITE;
        la->parts++;
        return 0;
    case CLI_OPT_WORD:
    case CLI_OPT_NAME:
        la->names[la->n++] = o->arg;
        return 0;
    default:
        return NOT_MINE;
    }
}

/* The combinations lock refuses. Returns 0 or EXIT_USAGE (printed). */
static int lock_check(const lock_args *la)
{
    if (la->n == 0)
        return cli_usage_error(la->cmd, "no lock NAME");
    if (la->rw && la->parts != 1)
        return cli_usage_error(la->cmd, la->parts ? "--read or --write, not both"
                                                  : "--read or --write is required");
    if (la->rw && la->n > 1)
        return cli_usage_error(la->cmd, "one NAME only");
    if (la->hold && la->command)
        return cli_usage_error(la->cmd, "--hold runs no COMMAND");
    if (!la->hold && !la->command)
        return cli_usage_error(la->cmd, "missing '--' before COMMAND (or --hold)");
    if (!la->hold && !la->command[0])
        return cli_usage_error(la->cmd, "no COMMAND after '--'");
    if (la->has_lease && la->has_watchdog)
        return cli_usage_error(la->cmd, "--lease and --watchdog exclude each other");
    if (la->has_lease && la->lease_ms == 0)
        return cli_usage_error(la->cmd, "--lease must be more than 0");
    if (la->has_watchdog && la->watchdog_ms < CLI_MIN_WATCHDOG_MS)
        return cli_usage_error(la->cmd, "--watchdog must be at least %dms", CLI_MIN_WATCHDOG_MS);
    return 0;
}

/* Parses lock's arguments into *la (la->names allocated: free it). Returns 0 or the exit
 * code after a message. */
static int lock_parse(cli_global *g, int argc, char **argv, bool rw, lock_args *la)
{
    *la = (lock_args){.cmd = rw ? "rwlock" : "lock",
                      .rw = rw,
                      .kill_after_ms = CLI_DEFAULT_KILL_AFTER_MS,
                      .b = BUSY_INIT};
    la->names = calloc((size_t)argc + 1, sizeof *la->names);
    if (!la->names)
        return EXIT_FAILED;
    cli_opts o;
    cli_opts_init(&o, la->cmd, g, argc, argv, BUSY_SHORT, rw ? rwlock_options : lock_options);
    la->command = o.rest;
    int rc = each_option(&o, g, &la->b, lock_option, la);
    for (size_t i = 0; i < la->n; i++)
        cli_note_name(g, la->names[i]);
    return rc ? rc : lock_check(la);
}

/* A lock run's state, from the open to the close. */
typedef struct lock_run {
    const lock_args *la;
    baton_client *c;
    baton_lock **members; /* one per NAME */
    baton_lock *l;        /* members[0], or the multi-lock over them */
    baton_rwlock *rw;     /* rwlock: members[0] is one of its halves */
    char what[300];       /* "lock NAME", "fair lock NAME", "multi-lock NAME, ...": messages */
    int64_t asked_ms;     /* when the acquire was asked (--verbose) */
} lock_run;

/* Opens the client, a handle per NAME and, for several, the multi-lock over them. Returns
 * 0 or the exit code after a message. */
static int lock_open(cli_global *g, lock_run *r)
{
    const lock_args *la = r->la;
    snprintf(r->what, sizeof r->what, "%s %s%s",
             la->part == PART_READ    ? "read lock"
             : la->part == PART_WRITE ? "write lock"
             : la->n > 1              ? "multi-lock"
             : la->fair               ? "fair lock"
                                      : "lock",
             la->names[0], la->n > 1 ? ", ..." : "");
    r->members = calloc(la->n, sizeof *r->members);
    if (!r->members)
        return EXIT_FAILED;
    g->watchdog_ms = la->watchdog_ms;
    int rc = cli_open_client(g, &r->c);
    if (!rc && la->rw) {
        int brc = baton_rwlock_open(r->c, la->names[0], &r->rw);
        if (brc != BATON_OK)
            return cli_fail(r->c, brc, "read-write lock %s", la->names[0]);
        r->members[0] =
            la->part == PART_READ ? baton_rwlock_read(r->rw) : baton_rwlock_write(r->rw);
    }
    for (size_t i = 0; !rc && !la->rw && i < la->n; i++) {
        int brc = la->fair ? baton_fairlock_open(r->c, la->names[i], &r->members[i])
                           : baton_lock_open(r->c, la->names[i], &r->members[i]);
        if (brc != BATON_OK)
            rc = cli_fail(r->c, brc, "lock %s", la->names[i]);
    }
    if (!rc && la->n == 1) {
        r->l = r->members[0];
    } else if (!rc) {
        int brc = baton_multilock_open(r->members, la->n, &r->l);
        if (brc != BATON_OK)
            rc = cli_fail(r->c, brc, "%s", r->what);
    }
    return rc;
}

static void lock_close(lock_run *r)
{
    if (r->la->n > 1)
        baton_lock_close(r->l);
    for (size_t i = 0; r->members && !r->rw && i < r->la->n; i++)
        baton_lock_close(r->members[i]);
    baton_rwlock_close(r->rw); /* closes its halves */
    free(r->members);
    baton_client_close(r->c);
}

/* Acquires, waiting as --wait/-n say. Returns 0 with *held set, or the exit code after a
 * message (-E's code when busy, -q: without one) with *held false: -E 0 is an exit code of
 * 0 that runs nothing, as with flock -n -E 0. */
static int lock_acquire(const cli_global *g, lock_run *r, bool *held)
{
    *held = false;
    const lock_args *la = r->la;
    int64_t lease = la->has_lease ? la->lease_ms : BATON_LEASE_WATCHDOG;
    r->asked_ms = cli_now_ms();
    cli_notify_status(g, "waiting for %s", r->what);
    int brc = la->b.has_wait ? baton_lock_try_acquire(r->l, la->b.wait_ms, lease)
                             : baton_lock_acquire(r->l, lease);
    if (g->verbose && brc == BATON_OK)
        cli_eprintf("acquired %s in %lld ms", r->what, (long long)(cli_now_ms() - r->asked_ms));
    if (brc == BATON_ETIMEDOUT) {
        char shown[32];
        format_ms(la->b.wait_ms, shown, sizeof shown);
        if (!la->b.quiet) {
            /* who holds: each busy member of a multi-lock named */
            char who[1024] = "", one[400];
            size_t n = 0;
            for (size_t i = 0; i < (la->rw ? 1 : la->n) && n < sizeof who; i++)
                if (cli_who_holds(r->c, la->names[i], one, sizeof one))
                    n += (size_t)snprintf(who + n, sizeof who - n, "%s%s%s%s", n ? "; " : ": ",
                                          la->n > 1 ? la->names[i] : "", la->n > 1 ? " " : "", one);
            cli_error("%s: not acquired within %s%s%s%s", r->what, shown, who,
                      la->hold ? "" : "; not run: ", la->hold ? "" : la->command[0]);
        }
        return (int)la->b.code;
    }
    if (brc != BATON_OK)
        return cli_fail(r->c, brc, "%s", r->what);
    *held = true;
    int64_t token = 0;
    if (baton_lock_fencing_token(r->members[0], &token) == BATON_OK)
        cli_notify_ready(g, "holding %s (fencing token %lld)", r->what, (long long)token);
    else
        cli_notify_ready(g, "holding %s", r->what);
    return 0;
}

/* With --lease: when baton must consider the hold ended (cli_lease_end); 0 without. */
static int64_t lock_lease_end(const lock_run *r)
{
    return r->la->has_lease ? cli_lease_end(r->members, r->la->n, r->la->lease_ms) : 0;
}

/* Runs COMMAND (or, with --hold, waits for a signal) while held: COMMAND learns its
 * fencing tokens, and baton watches the members' lost descriptors (a multi-lock's signals
 * are its members') and the lease's end. */
static void lock_hold(lock_run *r, cli_outcome *out)
{
    const lock_args *la = r->la;
    char *token_env = fencing_env(r->members, la->n);
    int *lost_fds = calloc(la->n, sizeof *lost_fds);
    size_t n_fds = 0;
    for (size_t i = 0; lost_fds && i < la->n; i++)
        if (baton_lock_lost_fd(r->members[i], &lost_fds[n_fds]) == BATON_OK)
            n_fds++;
    cli_watch w = {lost_fds, n_fds, lock_lease_end(r), r->what, token_env, la->kill_after_ms, r->c};
    *out = (cli_outcome){0, false, false};
    if (la->hold) {
        cli_eprintf("holding %s until interrupted", r->what);
        out->status = cli_hold(&w);
        out->lost = out->status == EXIT_LOST;
        out->ran = true;
    } else {
        cli_run(la->command, &w, out);
    }
    free(token_env);
    free(lost_fds);
}

/* Releases after the run; the exit code: COMMAND's, or EXIT_LOST if the hold was lost
 * while it ran (seen then, or found at the release). */
static int release_lock(void *l)
{
    return baton_lock_release(l);
}

static int lock_release(const cli_global *g, lock_run *r, const cli_outcome *out)
{
    const lock_args *la = r->la;
    int brc;
    /* after a loss, the release is tidying up: bounded, however unreachable the server */
    if (!out->lost) {
        brc = baton_lock_release(r->l);
    } else if (!cli_call_bounded(release_lock, r->l, CLI_LOST_RELEASE_MS, &brc)) {
        cli_error("releasing %s: no answer within %d ms; what is left of the hold expires "
                  "by its lease",
                  r->what, CLI_LOST_RELEASE_MS);
        cli_exit_now(EXIT_LOST);
    }
    if (g->verbose)
        cli_eprintf("released %s after %lld ms (%s)", r->what,
                    (long long)(cli_now_ms() - r->asked_ms),
                    brc == BATON_OK ? "ok" : baton_err_name(brc));
    if (out->lost)
        return EXIT_LOST;
    if (out->ran && brc == BATON_ENOTHELD) {
        cli_error("%s was lost before %s finished (found at release)", r->what,
                  la->hold ? "the hold" : la->command[0]);
        return EXIT_LOST;
    }
    if (brc == BATON_OK)
        cli_warn(r->c, r->what);
    else if (brc != BATON_ENOTHELD)
        cli_fail(r->c, brc, "releasing %s (unless it was released, it expires by its lease)",
                 r->what);
    return out->status;
}

/* lock and rwlock: parse, open, acquire, run COMMAND (or --hold), release. */
static int lock_command(cli_global *g, int argc, char **argv, bool rw)
{
    lock_args la;
    int rc = lock_parse(g, argc, argv, rw, &la);
    if (rc || g->parse_only) {
        free(la.names);
        return rc;
    }
    lock_run r = {.la = &la};
    rc = lock_open(g, &r);
    bool held = false;
    if (!rc)
        rc = lock_acquire(g, &r, &held);
    if (held) {
        cli_guard_hold();
        cli_outcome out;
        lock_hold(&r, &out);
        rc = lock_release(g, &r, &out);
    }
    lock_close(&r);
    free(la.names);
    return rc;
}

int cli_cmd_lock(cli_global *g, int argc, char **argv)
{
    return lock_command(g, argc, argv, false);
}

/* rwlock NAME --read|--write: everything else is lock's. */
int cli_cmd_rwlock(cli_global *g, int argc, char **argv)
{
    return lock_command(g, argc, argv, true);
}

/* ------------------------------- semaphore -------------------------------------------- */

static bool is_semaphore_verb(const char *s)
{
    return strcmp(s, "set") == 0 || strcmp(s, "add") == 0 || strcmp(s, "drain") == 0 ||
           strcmp(s, "delete") == 0;
}

/* add -N: the library removes up to N permits, never going below 0. *removed is told from
 * the counts read just before and after (another client changing it in between may blur
 * it); *left is the count after. */
static int remove_permits(baton_semaphore *s, int64_t n, int64_t *removed, int64_t *left)
{
    int64_t before = 0;
    int brc = baton_semaphore_available(s, &before);
    if (brc == BATON_OK)
        brc = baton_semaphore_add_permits(s, -n);
    if (brc == BATON_OK)
        brc = baton_semaphore_available(s, left);
    if (brc == BATON_OK) {
        int64_t r = before - *left;
        *removed = r < 0 ? 0 : r > n ? n : r;
    }
    return brc;
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
    int64_t drained = 0, removed = 0, left = 0;
    if (brc == BATON_OK) {
        if (set)
            brc = leases ? baton_permits_try_set_permits(p, n, &yes)
                         : baton_semaphore_try_set_permits(s, n, &yes);
        else if (add && neg) /* the count stops at 0: say what was taken */
            brc = remove_permits(s, n, &removed, &left);
        else if (add)
            brc = baton_semaphore_add_permits(s, n);
        else if (strcmp(verb, "drain") == 0)
            brc = baton_semaphore_drain(s, &drained);
        else
            brc = leases ? baton_permits_delete(p, &yes) : baton_semaphore_delete(s, &yes);
    }
    if (brc == BATON_OK) {
        char what[1100];
        snprintf(what, sizeof what, "semaphore %s: %s", name, verb);
        cli_warn(c, what); /* done, and a warning said (a refused PUBLISH: waiters not told) */
    }
    if (brc != BATON_OK) {
        rc = cli_fail(c, brc, "semaphore %s: %s", name, verb);
    } else if (!yes) {
        cli_error("semaphore %s: %s", name,
                  set ? "a count is already set; left as it is" : "does not exist");
        rc = EXIT_NO;
    } else if (strcmp(verb, "drain") == 0) {
        printf("%lld\n", (long long)drained);
    } else if (add && neg) {
        printf("removed %lld, %lld left\n", (long long)removed, (long long)left);
    }
    baton_semaphore_close(s);
    baton_permits_close(p);
    baton_client_close(c);
    return rc;
}

/* What `semaphore` was asked to do. */
typedef struct semaphore_args {
    const char *name;
    int64_t permits, take, kill_after_ms;
    busy b;
    bool has_permits;
    int64_t watchdog_ms;         /* --watchdog: the permit leases' lease */
    bool has_watchdog, counting; /* --counting: the old RSemaphore way, no leases */
    char **command;              /* after "--" */
    const char *verb, *number;   /* the admin forms: set N, add [-]N, drain, delete */
    bool wants_number;           /* the verb takes a number, not given yet */
} semaphore_args;

static const struct option semaphore_options[] = {BUSY_LONG,
                                                  CLI_ARG("permits", OPT_PERMITS),
                                                  CLI_ARG("take", OPT_TAKE),
                                                  CLI_ARG("watchdog", OPT_WATCHDOG),
                                                  CLI_FLAG("counting", OPT_COUNTING),
                                                  CLI_END};

/* One of semaphore's own options or words. Returns NOT_MINE, 0, or an exit code. */
static int semaphore_option(cli_opts *o, int c, cli_global *g, void *arg)
{
    (void)g;
    semaphore_args *sa = arg;
    switch (c) {
    case OPT_PERMITS:
        sa->has_permits = true;
        return count_value(o, c, 0, &sa->permits);
    case OPT_TAKE:
        return count_value(o, c, 1, &sa->take);
    case OPT_KILL_AFTER:
        return duration_value(o, c, &sa->kill_after_ms);
    case OPT_WATCHDOG:
        sa->has_watchdog = true;
        return duration_value(o, c, &sa->watchdog_ms);
    case OPT_COUNTING:
        sa->counting = true;
        return 0;
    case CLI_OPT_NAME:
        if (sa->name)
            return cli_usage_error("semaphore", "one semaphore NAME only");
        sa->name = o->arg;
        return 0;
    case CLI_OPT_WORD:
        break;
    default:
        return NOT_MINE;
    }
    if (sa->wants_number) {
        sa->number = o->arg;
        sa->wants_number = false;
    } else if (sa->name && !sa->verb && is_semaphore_verb(o->arg)) {
        sa->verb = o->arg;
        if (strcmp(sa->verb, "set") == 0 || strcmp(sa->verb, "add") == 0) {
            sa->number = cli_opts_take_number(o); /* add's may be negative */
            sa->wants_number = !sa->number;
        }
    } else if (sa->name) {
        return cli_usage_error("semaphore", "one semaphore NAME only ('%s' is a second)", o->arg);
    } else {
        sa->name = o->arg;
    }
    return 0;
}

/* Parses semaphore's arguments into *sa. Returns 0 or the exit code after a message. */
static int semaphore_parse(cli_global *g, int argc, char **argv, semaphore_args *sa)
{
    *sa = (semaphore_args){.take = 1, .kill_after_ms = CLI_DEFAULT_KILL_AFTER_MS, .b = BUSY_INIT};
    cli_opts o;
    cli_opts_init(&o, "semaphore", g, argc, argv, BUSY_SHORT, semaphore_options);
    sa->command = o.rest;
    int rc = each_option(&o, g, &sa->b, semaphore_option, sa);
    if (sa->name)
        cli_note_name(g, sa->name);
    return rc;
}

static bool quiet_of(const busy *b)
{
    return b->quiet;
}

/* --permits N found a count set already: says so when the semaphore's count is not N (the
 * permit leases': free + held; --counting's: only more free than N can be told). */
static void permits_not_applied(baton_client *c, const char *name, int64_t permits, bool counting,
                                bool quiet)
{
    baton_inspection *s = NULL;
    if (quiet || baton_inspect(c, name, &s) != BATON_OK || !s || !s->has_value) {
        baton_inspection_free(s);
        return;
    }
    int64_t total = s->value + (counting ? 0 : (int64_t)s->n_permits);
    char held[32] = "";
    if (!counting)
        snprintf(held, sizeof held, ": %lld free, %zu held", (long long)s->value, s->n_permits);
    if (counting ? total > permits : total != permits)
        cli_eprintf("warning: semaphore %s: --permits %lld not applied: its count is set "
                    "already (%s%lld%s); change it with 'baton semaphore %s add N'",
                    name, (long long)permits, counting ? "free: " : "", (long long)total, held,
                    name);
    baton_inspection_free(s);
}

/* The acquire failed: -w ran out (exit -E's code, or quiet) or an error. */
static int not_acquired(baton_client *c, int brc, const char *name, int64_t take, const busy *b,
                        const char *command)
{
    if (brc != BATON_ETIMEDOUT)
        return cli_fail(c, brc, "semaphore %s", name);
    char shown[32], who[400] = ": ";
    format_ms(b->wait_ms, shown, sizeof shown);
    if (!cli_who_holds(c, name, who + 2, sizeof who - 2))
        who[0] = '\0';
    if (!b->quiet)
        cli_error("semaphore %s: %lld permit%s not acquired within %s%s; not run: %s", name,
                  (long long)take, take == 1 ? "" : "s", shown, who, command);
    return (int)b->code;
}

/* The RSemaphore way (--counting): K permits of the count, no owner, no lease. */
static int semaphore_counting(const cli_global *g, baton_client *c, const char *name,
                              bool has_permits, int64_t permits, int64_t take, const busy *b,
                              int64_t kill_after_ms, char **command)
{
    baton_semaphore *s = NULL;
    int rc = 0;
    int brc = baton_semaphore_open(c, name, &s);
    bool was_set = true;
    if (brc == BATON_OK && has_permits)
        brc = baton_semaphore_try_set_permits(s, permits, &was_set);
    if (brc == BATON_OK && !was_set)
        permits_not_applied(c, name, permits, true, quiet_of(b));
    cli_notify_status(g, "waiting for %lld permit%s of semaphore %s", (long long)take,
                      take == 1 ? "" : "s", name);
    if (brc == BATON_OK)
        brc = b->has_wait ? baton_semaphore_try_acquire(s, take, b->wait_ms)
                          : baton_semaphore_acquire(s, take);
    if (brc == BATON_OK)
        cli_notify_ready(g, "holding %lld permit%s of semaphore %s", (long long)take,
                         take == 1 ? "" : "s", name);
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
        if (brc == BATON_OK)
            cli_warn(c, what);
        else
            cli_fail(c, brc, "returning %lld permit%s of semaphore %s", (long long)take,
                     take == 1 ? "" : "s", name);
        rc = out.status;
    }
    baton_semaphore_close(s);
    return rc;
}

/* Returning the permit leases taken; lost: one was found gone. */
typedef struct permits_return {
    baton_client *c;
    baton_permits *p;
    char (*ids)[BATON_PERMIT_ID_SIZE];
    int64_t take;
    const char *what;
    bool lost;
} permits_return;

static int return_permits(void *arg)
{
    permits_return *r = arg;
    for (int64_t i = 0; i < r->take; i++) {
        int brc = baton_permits_release(r->p, r->ids[i]);
        if (brc == BATON_OK)
            cli_warn(r->c, r->what); /* released, and a warning (a refused PUBLISH) said */
        else if (brc == BATON_ENOTHELD)
            r->lost = true;
        else if (brc != BATON_OK)
            cli_fail(r->c, brc, "returning a permit of %s (it comes back when its lease ends)",
                     r->what);
    }
    return 0;
}

/* The default: K permit leases (Redisson's RPermitExpirableSemaphore), renewed by the
 * watchdog while COMMAND runs; a baton killed with -9 gives them back within the lease. */
static int semaphore_leases(const cli_global *g, baton_client *c, const char *name,
                            bool has_permits, int64_t permits, int64_t take, const busy *b,
                            int64_t kill_after_ms, char **command)
{
    baton_permits *p = NULL;
    int rc = 0;
    char(*ids)[BATON_PERMIT_ID_SIZE] = calloc((size_t)take, sizeof *ids);
    if (!ids)
        return EXIT_FAILED;
    int brc = baton_permits_open(c, name, &p);
    bool was_set = true;
    if (brc == BATON_OK && has_permits)
        brc = baton_permits_try_set_permits(p, permits, &was_set);
    if (brc == BATON_OK && !was_set)
        permits_not_applied(c, name, permits, false, quiet_of(b));
    cli_notify_status(g, "waiting for %lld permit%s of semaphore %s", (long long)take,
                      take == 1 ? "" : "s", name);
    if (brc == BATON_OK)
        brc = baton_permits_try_acquire_many(p, take, b->has_wait ? b->wait_ms : BATON_WAIT_FOREVER,
                                             BATON_LEASE_WATCHDOG, ids);
    if (brc == BATON_OK)
        cli_notify_ready(g, "holding %lld permit%s of semaphore %s", (long long)take,
                         take == 1 ? "" : "s", name);
    char what[300];
    snprintf(what, sizeof what, "semaphore %s", name);
    if (brc != BATON_OK) {
        rc = not_acquired(c, brc, name, take, b, command[0]);
    } else {
        cli_guard_hold();
        int lost_fd = -1;
        bool has_fd = baton_permits_lost_fd(p, &lost_fd) == BATON_OK;
        cli_watch w = {has_fd ? &lost_fd : NULL, has_fd ? 1 : 0, 0, what, NULL, kill_after_ms, c};
        cli_outcome out = {0, false, false};
        cli_run(command, &w, &out);
        permits_return ret = {c, p, ids, take, what, out.lost};
        int ignored;
        /* after a loss, returning the others is tidying up: bounded (see lock_release) */
        if (!out.lost)
            return_permits(&ret);
        else if (!cli_call_bounded(return_permits, &ret, CLI_LOST_RELEASE_MS, &ignored)) {
            cli_error("returning the permits of %s: no answer within %d ms; they come back "
                      "when their leases end",
                      what, CLI_LOST_RELEASE_MS);
            cli_exit_now(EXIT_LOST);
        }
        bool lost = ret.lost;
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
    semaphore_args sa;
    int rc = semaphore_parse(g, argc, argv, &sa);
    const char *name = sa.name;
    int64_t permits = sa.permits, take = sa.take, kill_after_ms = sa.kill_after_ms;
    int64_t watchdog_ms = sa.watchdog_ms;
    busy b = sa.b;
    bool has_permits = sa.has_permits, has_watchdog = sa.has_watchdog, counting = sa.counting;
    char **command = sa.command;
    if (rc || g->parse_only)
        return rc;
    if (!rc && name && sa.verb && !command)
        return semaphore_admin(g, name, sa.verb, sa.number, counting);
    if (!rc && !name)
        rc = cli_usage_error("semaphore", "no semaphore NAME");
    else if (!rc && !command)
        rc = cli_usage_error("semaphore", "missing '--' before COMMAND");
    else if (!rc && !command[0])
        rc = cli_usage_error("semaphore", "no COMMAND after '--'");
    else if (!rc && has_watchdog && counting)
        rc = cli_usage_error("semaphore", "--watchdog is for permit leases, not --counting");
    else if (!rc && has_watchdog && watchdog_ms < CLI_MIN_WATCHDOG_MS)
        rc = cli_usage_error("semaphore", "--watchdog must be at least %dms", CLI_MIN_WATCHDOG_MS);
    else if (!rc && !counting && take > BATON_PERMITS_MAX_MANY)
        rc = cli_usage_error("semaphore", "--take takes at most %d permit leases",
                             BATON_PERMITS_MAX_MANY);
    g->watchdog_ms = watchdog_ms;
    baton_client *c;
    if (!cli_start(g, &rc, &c))
        return rc;
    rc =
        counting
            ? semaphore_counting(g, c, name, has_permits, permits, take, &b, kill_after_ms, command)
            : semaphore_leases(g, c, name, has_permits, permits, take, &b, kill_after_ms, command);
    baton_client_close(c);
    return rc;
}

/* ------------------------------- latch ------------------------------------------------ */

static const struct option latch_options[] = {CLI_ARG("timeout", OPT_TIMEOUT), CLI_END};

/* What `latch` was asked: up to 3 words (NAME, verb, N) and --timeout. */
typedef struct latch_args {
    const char *words[3];
    size_t n;
    int64_t timeout_ms;
    bool has_timeout;
} latch_args;

static int latch_option(cli_opts *o, int c, cli_global *g, void *arg)
{
    (void)g;
    latch_args *la = arg;
    if (c == OPT_TIMEOUT) {
        la->has_timeout = true;
        return duration_value_of(o, c, &la->timeout_ms, true);
    }
    if (c == CLI_OPT_NAME && la->n > 0)
        return cli_usage_error("latch", "--object gives the NAME, before the verb");
    if (c != CLI_OPT_WORD && c != CLI_OPT_NAME)
        return NOT_MINE;
    if (la->n == 3)
        return unexpected(o, o->arg);
    la->words[la->n++] = o->arg;
    const char *negative = la->n == 2 ? cli_opts_take_number(o) : NULL;
    if (negative) /* "set -1": refused below with the count's message */
        la->words[la->n++] = negative;
    return 0;
}

/* Parses latch's arguments into *la and checks them: a NAME, a known verb, set's count
 * (into *count), --timeout with await only. Returns 0 or the exit code after a message. */
static int latch_parse(cli_global *g, int argc, char **argv, latch_args *la, int64_t *count)
{
    cli_opts o;
    cli_opts_init(&o, "latch", g, argc, argv, "", latch_options);
    if (o.rest) {
        cli_opts_free(&o);
        return cli_usage_error("latch", "unexpected '--'");
    }
    int rc = each_option(&o, g, NULL, latch_option, la);
    if (la->n > 0)
        cli_note_name(g, la->words[0]);
    if (rc)
        return rc;
    const char **words = la->words;
    if (la->n < 2)
        return cli_usage_error("latch", la->n == 0 ? "no latch NAME" : "no latch verb");
    const char *verb = words[1];
    bool set = strcmp(verb, "set") == 0, await = strcmp(verb, "await") == 0;
    if (!set && !await && strcmp(verb, "count-down") != 0 && strcmp(verb, "count") != 0 &&
        strcmp(verb, "delete") != 0)
        return cli_usage_error("latch", "unknown latch verb '%s'", verb);
    if (set && (!words[2] || !cli_parse_count(words[2], INT64_MAX / 2, count) || *count < 1))
        return cli_usage_error("latch", "latch set needs a count from 1%s%s%s",
                               words[2] ? ", not '" : "", words[2] ? words[2] : "",
                               words[2] ? "'" : "");
    if (!set && words[2])
        return cli_usage_error("latch", "unexpected '%s'", words[2]);
    if (la->has_timeout && !await)
        return cli_usage_error("latch", "--timeout goes with await only");
    return 0;
}

/* latch set N: exit 1 (EXIT_NO) if a count is set already. */
static int latch_set(baton_client *c, baton_latch *l, const char *name, int64_t count)
{
    bool was_set = false;
    int brc = baton_latch_try_set_count(l, count, &was_set);
    if (brc != BATON_OK)
        return cli_fail(c, brc, "latch %s: set", name);
    cli_warn(c, name);
    if (was_set)
        return 0;
    int64_t now = 0;
    baton_latch_count(l, &now);
    cli_error("latch %s: a count is already set (%lld); left as it is", name, (long long)now);
    return EXIT_NO;
}

/* latch await [--timeout DUR]: EXIT_AWAIT_TIMEOUT if the latch stayed closed. */
static int latch_await(baton_client *c, baton_latch *l, const char *name, int64_t timeout_ms)
{
    int brc = baton_latch_await(l, timeout_ms);
    if (brc == BATON_ETIMEDOUT) {
        cli_error("latch %s: not open within --timeout", name);
        return EXIT_AWAIT_TIMEOUT;
    }
    return brc == BATON_OK ? 0 : cli_fail(c, brc, "latch %s: await", name);
}

/* latch count, delete and count-down. */
static int latch_other(baton_client *c, baton_latch *l, const char *name, const char *verb)
{
    int brc;
    if (strcmp(verb, "count") == 0) {
        int64_t v = 0;
        brc = baton_latch_count(l, &v);
        if (brc == BATON_OK)
            printf("%lld\n", (long long)v);
    } else if (strcmp(verb, "delete") == 0) {
        bool existed = false;
        brc = baton_latch_delete(l, &existed);
        if (brc == BATON_OK)
            cli_warn(c, name);
        if (brc == BATON_OK && !existed) {
            cli_error("latch %s does not exist", name);
            return EXIT_NO;
        }
    } else {
        brc = baton_latch_count_down(l);
        if (brc == BATON_OK)
            cli_warn(c, name);
    }
    return brc == BATON_OK ? 0 : cli_fail(c, brc, "latch %s: %s", name, verb);
}

int cli_cmd_latch(cli_global *g, int argc, char **argv)
{
    latch_args la = {.timeout_ms = BATON_WAIT_FOREVER};
    int64_t count = 0;
    int rc = latch_parse(g, argc, argv, &la, &count);
    baton_client *c;
    if (!cli_start(g, &rc, &c))
        return rc;
    const char *name = la.words[0], *verb = la.words[1];
    baton_latch *l = NULL;
    int brc = baton_latch_open(c, name, &l);
    if (brc != BATON_OK)
        rc = cli_fail(c, brc, "latch %s", name);
    else if (strcmp(verb, "set") == 0)
        rc = latch_set(c, l, name, count);
    else if (strcmp(verb, "await") == 0)
        rc = latch_await(c, l, name, la.timeout_ms);
    else
        rc = latch_other(c, l, name, verb);
    baton_latch_close(l);
    baton_client_close(c);
    return rc;
}

/* ------------------------------- unlock --force --------------------------------------- */

/* Whether NAME is a fair lock (its queue or deadline set exists): then its waiters listen on
 * their own channels, which only a fair lock's force release wakes. A failed read answers
 * "no": the force release that follows reports the failure. */
static bool has_fair_queue(baton_client *c, const char *name)
{
    baton_inspection *ins = NULL;
    bool fair = baton_inspect(c, name, &ins) == BATON_OK && ins->kind == BATON_OBJECT_FAIRLOCK;
    baton_inspection_free(ins);
    return fair;
}

/* False, with why, when NAME holds a hash that is not a lock's: a lock's fields are owners
 * ("<client-id>:<thread-id>") with hold counts from 1, and it has a lease (Redisson and
 * baton always set one). Anything else (nothing, a read-write lock, another type) is left
 * to the force release, which says "not locked" or WRONGTYPE. */
static bool is_a_lock(baton_client *c, const char *name, char *why, size_t len)
{
    baton_inspection *s = NULL;
    if (baton_inspect(c, name, &s) != BATON_OK || !s)
        return true; /* the release says what is wrong */
    bool lock = s->kind != BATON_OBJECT_LOCK && s->kind != BATON_OBJECT_FAIRLOCK;
    if (!lock && s->n_holders > 0) {
        lock = s->ttl_ms != -1;
        for (size_t i = 0; lock && i < s->n_holders; i++)
            lock = s->holders[i]->holds >= 1 && strchr(s->holders[i]->owner, ':') != NULL;
        if (!lock)
            snprintf(why, len, "a Redis hash that is not a lock's (%s)",
                     s->ttl_ms == -1 ? "no lease" : "a field that is not an owner's hold count");
    } else if (!lock) {
        lock = true;
    }
    baton_inspection_free(s);
    return lock;
}

static const struct option unlock_options[] = {CLI_FLAG("force", OPT_FORCE), CLI_END};

/* What `unlock` was asked. */
typedef struct unlock_args {
    const char *name;
    bool force;
} unlock_args;

static int unlock_option(cli_opts *o, int c, cli_global *g, void *arg)
{
    (void)g;
    unlock_args *ua = arg;
    if (c == CLI_OPT_WORD || c == CLI_OPT_NAME)
        return cli_one_word(o, &ua->name, "lock NAME");
    if (c != OPT_FORCE)
        return NOT_MINE;
    ua->force = true;
    return 0;
}

int cli_cmd_unlock(cli_global *g, int argc, char **argv)
{
    unlock_args ua = {NULL, false};
    cli_opts o;
    cli_opts_init(&o, "unlock", g, argc, argv, "", unlock_options);
    if (o.rest) {
        cli_opts_free(&o);
        return cli_usage_error("unlock", "unexpected '--'");
    }
    int rc = each_option(&o, g, NULL, unlock_option, &ua);
    if (ua.name)
        cli_note_name(g, ua.name);
    const char *name = ua.name;
    bool force = ua.force;
    if (!rc && !force)
        rc = cli_usage_error("unlock", "unlock deletes the lock whoever holds it: say --force");
    else if (!rc && !name)
        rc = cli_usage_error("unlock", "no lock NAME");
    baton_client *c;
    if (!cli_start(g, &rc, &c))
        return rc;
    char why[200];
    if (!is_a_lock(c, name, why, sizeof why)) {
        cli_error("unlock %s: %s: nothing deleted", name, why);
        baton_client_close(c);
        return EXIT_FAILED;
    }
    baton_lock *l = NULL;
    bool fair = has_fair_queue(c, name);
    int brc = fair ? baton_fairlock_open(c, name, &l) : baton_lock_open(c, name, &l);
    bool was_locked = false;
    if (brc == BATON_OK)
        brc = baton_lock_force_release(l, &was_locked);
    if (brc != BATON_OK) {
        rc = cli_fail(c, brc, "unlock %s", name);
    } else if (!was_locked) {
        cli_warn(c, name);
        cli_error("%s was not locked%s", name, fair ? " (its queue is cleared)" : "");
        rc = EXIT_NO;
    } else {
        cli_warn(c, name);
        cli_eprintf("%s%s released%s", fair ? "fair lock " : "lock ", name,
                    fair ? ", its queue cleared" : "");
    }
    baton_lock_close(l);
    baton_client_close(c);
    return rc;
}
