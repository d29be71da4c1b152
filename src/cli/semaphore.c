/*
 * `semaphore`: run COMMAND under permits (counting, or permit leases by default), and the
 * semaphore's admin verbs (set, add, drain, delete, available).
 */
#define _GNU_SOURCE
#include "command.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    cli_busy b;
    bool has_permits;
    int64_t watchdog_ms;         /* --watchdog: the permit leases' lease */
    bool has_watchdog, counting; /* --counting: the old RSemaphore way, no leases */
    char **command;              /* after "--" */
    const char *verb, *number;   /* the admin forms: set N, add [-]N, drain, delete */
    bool wants_number;           /* the verb takes a number, not given yet */
} semaphore_args;

static const struct option semaphore_options[] = {CLI_BUSY_LONG,
                                                  CLI_ARG("permits", OPT_PERMITS),
                                                  CLI_ARG("take", OPT_TAKE),
                                                  CLI_ARG("watchdog", OPT_WATCHDOG),
                                                  CLI_FLAG("counting", OPT_COUNTING),
                                                  CLI_END};

/* One of semaphore's own options or words. Returns CLI_NOT_MINE, 0, or an exit code. */
static int semaphore_option(cli_opts *o, int c, cli_global *g, void *arg)
{
    (void)g;
    semaphore_args *sa = arg;
    switch (c) {
    case OPT_PERMITS:
        sa->has_permits = true;
        return cli_count_value(o, c, 0, &sa->permits);
    case OPT_TAKE:
        return cli_count_value(o, c, 1, &sa->take);
    case OPT_KILL_AFTER:
        return cli_duration_value(o, c, &sa->kill_after_ms);
    case OPT_WATCHDOG:
        sa->has_watchdog = true;
        return cli_duration_value(o, c, &sa->watchdog_ms);
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
        return CLI_NOT_MINE;
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
    *sa =
        (semaphore_args){.take = 1, .kill_after_ms = CLI_DEFAULT_KILL_AFTER_MS, .b = CLI_BUSY_INIT};
    cli_opts o;
    cli_opts_init(&o, "semaphore", g, argc, argv, CLI_BUSY_SHORT, semaphore_options);
    sa->command = o.rest;
    int rc = cli_each_option(&o, g, &sa->b, semaphore_option, sa);
    if (sa->name)
        cli_note_name(g, sa->name);
    return rc;
}

static bool quiet_of(const cli_busy *b)
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
static int not_acquired(baton_client *c, int brc, const char *name, int64_t take, const cli_busy *b,
                        const char *command)
{
    if (brc != BATON_ETIMEDOUT)
        return cli_fail(c, brc, "semaphore %s", name);
    char shown[32], who[400] = ": ";
    cli_format_duration(b->wait_ms, CLI_DURATION_OPTION, shown, sizeof shown);
    if (!cli_who_holds(c, name, who + 2, sizeof who - 2))
        who[0] = '\0';
    if (!b->quiet)
        cli_error("semaphore %s: %lld permit%s not acquired within %s%s; not run: %s", name,
                  (long long)take, take == 1 ? "" : "s", shown, who, command);
    return (int)b->code;
}

/* The RSemaphore way (--counting): K permits of the count, no owner, no lease. */
static int semaphore_counting(const cli_global *g, baton_client *c, const char *name,
                              bool has_permits, int64_t permits, int64_t take, const cli_busy *b,
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
                            bool has_permits, int64_t permits, int64_t take, const cli_busy *b,
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
    cli_busy b = sa.b;
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
