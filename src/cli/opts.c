/*
 * Option parsing for the commands, with getopt_long(3): GNU long options ("--wait 5s",
 * "--wait=5s", unambiguous prefixes) and short ones ("-w 5s", "-w5s", "-nq"), in any order
 * among the positional words. The words after "--" are COMMAND and are never looked at:
 * they are split off before getopt_long runs, so that nothing in COMMAND (its own options
 * included) is taken for baton's. Positional words come back in order (getopt's "-" mode),
 * which lets a command take a negative number where it expects one ("semaphore NAME add
 * -3"). Errors are printed here, with the command's usage line, and exit 2.
 */
#define _GNU_SOURCE
#include "cli.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_opts_init(cli_opts *o, const char *command, int argc, char **argv, const char *shortopts,
                  const struct option *longopts)
{
    memset(o, 0, sizeof *o);
    o->command = command;
    o->longopts = longopts;
    int words = 0;
    while (words < argc && strcmp(argv[words], "--") != 0)
        words++;
    o->rest = words < argc ? argv + words + 1 : NULL;
    /* getopt's view: a program name, then the words before "--" */
    o->argv = calloc((size_t)words + 2, sizeof *o->argv);
    /* "-": positional words in order; ":": a missing value is reported as ':' */
    o->shortopts = malloc(strlen(shortopts) + 3);
    if (!o->argv || !o->shortopts) {
        cli_opts_free(o);
        cli_error("out of memory");
        return EXIT_FAILED;
    }
    sprintf(o->shortopts, "-:%s", shortopts);
    o->argv[0] = (char *)command;
    memcpy(o->argv + 1, argv, (size_t)words * sizeof *argv);
    o->argc = words + 1;
    optind = 0; /* GNU: start afresh (main's parse ran before) */
    opterr = 0; /* the messages are ours */
    return EXIT_OK;
}

void cli_opts_free(cli_opts *o)
{
    free(o->argv);
    free(o->shortopts);
    o->argv = NULL;
    o->shortopts = NULL;
}

/* The long name of the option whose value is val, for messages. */
static const char *long_name(const cli_opts *o, int val)
{
    for (const struct option *l = o->longopts; l && l->name; l++)
        if (l->val == val)
            return l->name;
    return NULL;
}

int cli_opts_next(cli_opts *o)
{
    int c = getopt_long(o->argc, o->argv, o->shortopts, o->longopts, NULL);
    o->arg = optarg;
    switch (c) {
    case -1:
        return CLI_OPT_END;
    case 1:
        return CLI_OPT_WORD;
    case ':': {
        /* the option is the word just passed: "--wait", or "-w" (alone or ending "-nw") */
        const char *word = o->argv[optind - 1];
        if (strncmp(word, "--", 2) == 0)
            cli_usage_error(o->command, "%s needs a value", word);
        else
            cli_usage_error(o->command, "-%c needs a value", optopt);
        return CLI_OPT_ERROR;
    }
    case '?':
        if (optopt > 0 && optopt < 256 && !long_name(o, optopt))
            cli_usage_error(o->command, "unknown option '-%c'", optopt);
        else
            cli_usage_error(o->command, "unknown option '%s'", o->argv[optind - 1]);
        return CLI_OPT_ERROR;
    default:
        return c;
    }
}

const char *cli_opts_take_number(cli_opts *o)
{
    if (optind < o->argc && o->argv[optind][0] == '-' && o->argv[optind][1] >= '0' &&
        o->argv[optind][1] <= '9')
        return o->argv[optind++];
    return NULL;
}
