/*
 * What the commands that act (lock and rwlock, semaphore, latch, unlock --force: one file
 * each) share: their long-only options, flock(1)'s busy options (-w, -n, -E, -q), and the
 * reading of a command's options and words (command.c). Private to src/cli.
 */
#ifndef BATON_CLI_COMMAND_H
#define BATON_CLI_COMMAND_H

#include "cli.h"

#include <getopt.h> /* struct option: the tables cli_opts reads */

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
#define CLI_NOT_MINE (-1)

/* An option handler's answer when the option is not one it knows. */
#define CLI_NOT_MINE (-1)

/* What lock and semaphore do when busy: flock(1)'s -n, -w, -E and -q. */
typedef struct cli_busy {
    int64_t wait_ms; /* --wait / -w; -n is 0 */
    bool has_wait;
    int64_t code; /* -E: the exit code when not acquired (EXIT_NOT_ACQUIRED) */
    bool quiet;   /* -q: nothing on stderr when not acquired */
} cli_busy;

#define CLI_BUSY_INIT                                                                              \
    {                                                                                              \
        BATON_WAIT_FOREVER, false, EXIT_NOT_ACQUIRED, false                                        \
    }

#define CLI_BUSY_SHORT "w:nE:q"
#define CLI_BUSY_LONG                                                                              \
    CLI_ARG("wait", 'w'), CLI_FLAG("nonblock", 'n'), CLI_ARG("conflict-exit-code", 'E'),           \
        CLI_FLAG("quiet", 'q'), CLI_ARG("kill-after", OPT_KILL_AFTER),                             \
        CLI_FLAG("notify", OPT_NOTIFY)

/* A command's own options and words: returns CLI_NOT_MINE, 0, or an exit code (printed). */
typedef int cli_option_fn(cli_opts *o, int c, cli_global *g, void *arg);

/* An option by its long name ("--wait", whether given as -w or --wait), for messages. */
void cli_option_shown(const struct option *longopts, int c, char *buf, size_t len);
/* A duration option's value into *ms (wait: "infinity" too, as BATON_WAIT_FOREVER).
 * Returns 0 or EXIT_USAGE (printed). */
int cli_duration_value_of(const cli_opts *o, int c, int64_t *ms, bool wait);
int cli_duration_value(const cli_opts *o, int c, int64_t *ms);
/* A count option's value (min or more) into *v. Returns 0 or EXIT_USAGE (printed). */
int cli_count_value(const cli_opts *o, int c, int64_t min, int64_t *v);
/* -w, -n, -E, -q. Returns CLI_NOT_MINE, 0, or an exit code (printed). */
int cli_busy_option(const cli_opts *o, int c, cli_busy *b);
/* "unexpected 'what'" as a usage error: EXIT_USAGE. */
int cli_unexpected(const cli_opts *o, const char *what);
/* Reads every option and word of o: the parser's errors here, -w/-n/-E/-q into b
 * (NULL: the command takes none), the rest to fn. Frees o. Returns 0 or the exit code after
 * a message. */
int cli_each_option(cli_opts *o, cli_global *g, cli_busy *b, cli_option_fn *fn, void *arg);

#endif
