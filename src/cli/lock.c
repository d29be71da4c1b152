/*
 * `lock` and `rwlock`: run COMMAND (or hold, --hold) under one or more locks, a fair lock,
 * or one half of a read-write lock; the busy options as flock(1)'s.
 */
#define _GNU_SOURCE
#include "command.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    cli_busy b;
    bool hold, has_lease, has_watchdog, fair;
    char **command; /* after "--"; NULL with --hold */
} lock_args;

/* lock's and rwlock's options; lock adds --fair, rwlock --read and --write. */
#define LOCK_LONG                                                                                  \
    CLI_BUSY_LONG, CLI_ARG("lease", OPT_LEASE), CLI_ARG("watchdog", OPT_WATCHDOG),                 \
        CLI_FLAG("hold", OPT_HOLD), CLI_FLAG("verbose", OPT_VERBOSE)

static const struct option lock_options[] = {LOCK_LONG, CLI_FLAG("fair", OPT_FAIR), CLI_END};
static const struct option rwlock_options[] = {LOCK_LONG, CLI_FLAG("read", OPT_READ),
                                               CLI_FLAG("write", OPT_WRITE), CLI_END};

/* One of lock's own options. Returns CLI_NOT_MINE, 0, or an exit code (printed). */
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
        return cli_duration_value(o, c, &la->lease_ms);
    case OPT_WATCHDOG:
        la->has_watchdog = true;
        return cli_duration_value(o, c, &la->watchdog_ms);
    case OPT_KILL_AFTER:
        return cli_duration_value(o, c, &la->kill_after_ms);
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
        return CLI_NOT_MINE;
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
                      .b = CLI_BUSY_INIT};
    la->names = calloc((size_t)argc + 1, sizeof *la->names);
    if (!la->names)
        return EXIT_FAILED;
    cli_opts o;
    cli_opts_init(&o, la->cmd, g, argc, argv, CLI_BUSY_SHORT, rw ? rwlock_options : lock_options);
    la->command = o.rest;
    int rc = cli_each_option(&o, g, &la->b, lock_option, la);
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
        cli_format_duration(la->b.wait_ms, CLI_DURATION_OPTION, shown, sizeof shown);
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
