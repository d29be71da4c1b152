/*
 * The reading of a command's options and words, shared by the commands that act
 * (command.h).
 */
#define _GNU_SOURCE
#include "command.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An option by its long name ("--wait", whether given as -w or --wait), for messages. */
void cli_option_shown(const struct option *longopts, int c, char *buf, size_t len)
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
int cli_duration_value_of(const cli_opts *o, int c, int64_t *ms, bool wait)
{
    if (wait ? cli_parse_wait(o->arg, ms) : cli_parse_duration(o->arg, ms))
        return 0;
    char name[32];
    cli_option_shown(o->longopts, c, name, sizeof name);
    return cli_usage_error(o->command, "bad duration '%s' for %s (" CLI_DURATION_HINT ")", o->arg,
                           name);
}

int cli_duration_value(const cli_opts *o, int c, int64_t *ms)
{
    return cli_duration_value_of(o, c, ms, false);
}

/* A count option's value (min or more) into *v. Returns 0 or EXIT_USAGE (printed). */
int cli_count_value(const cli_opts *o, int c, int64_t min, int64_t *v)
{
    if (cli_parse_count(o->arg, INT64_MAX / 2, v) && *v >= min)
        return 0;
    char name[32];
    cli_option_shown(o->longopts, c, name, sizeof name);
    return cli_usage_error(o->command, "%s needs a whole number from %lld, not '%s'", name,
                           (long long)min, o->arg);
}

/* -w, -n, -E, -q. Returns CLI_NOT_MINE, 0, or an exit code (printed). */
int cli_busy_option(const cli_opts *o, int c, cli_busy *b)
{
    switch (c) {
    case 'w':
        b->has_wait = true;
        return cli_duration_value_of(o, c, &b->wait_ms, true);
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
        return CLI_NOT_MINE;
    }
}

/* The parser's own errors (the global options are applied by the parser). Returns
 * CLI_NOT_MINE or an exit code (printed). */
static int common_option(const cli_opts *o, int c, cli_global *g)
{
    (void)o;
    (void)g;
    return c == CLI_OPT_ERROR ? EXIT_USAGE : CLI_NOT_MINE;
}

int cli_unexpected(const cli_opts *o, const char *what)
{
    return cli_usage_error(o->command, "unexpected '%s'", what);
}

/* Reads every option and word of o: the parser's errors here, -w/-n/-E/-q into b
 * (NULL: the command takes none), the rest to fn. Frees o. Returns 0 or the exit code after
 * a message. */
int cli_each_option(cli_opts *o, cli_global *g, cli_busy *b, cli_option_fn *fn, void *arg)
{
    int rc = 0;
    for (int c; !rc && (c = cli_opts_next(o)) != CLI_OPT_END;) {
        rc = common_option(o, c, g);
        if (rc == CLI_NOT_MINE && b)
            rc = cli_busy_option(o, c, b);
        if (rc == 0 && b && b->quiet)
            g->quiet = true; /* -q silences the open's warning too */
        if (rc == CLI_NOT_MINE)
            rc = fn(o, c, g, arg);
        if (rc == CLI_NOT_MINE)
            rc = cli_usage_error(o->command, "unexpected %s", o->word);
    }
    cli_opts_free(o);
    return rc;
}
