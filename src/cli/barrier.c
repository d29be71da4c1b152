/*
 * `baton barrier NAME --parties N [--timeout DUR] [-- COMMAND]`: without COMMAND, one
 * await of the cyclic barrier (prints the arrival index and generation); with COMMAND, the
 * double barrier: enter, run COMMAND, leave, so that the N commands start together and end
 * together (Curator's DistributedDoubleBarrier).
 */
#define _GNU_SOURCE
#include "cli.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char cli_barrier_usage[] =
    "baton [--url URL] barrier NAME --parties N [--timeout DUR] [--watchdog DUR]"
    " [--kill-after DUR] [-- COMMAND [ARG...]]";
const char cli_barrier_help[] =
    "  barrier NAME --parties N   wait until N parties reached the barrier NAME, then\n"
    "                             print the arrival index and generation; with -- COMMAND:\n"
    "                             wait for N to enter, run COMMAND, wait for N to leave\n"
    "                             (all start together and finish together). A party that\n"
    "                             dies or times out breaks the generation for the others\n"
    "                             (exit 125) within about --watchdog (30s) + a third.\n"
    "      --parties N            the number of parties (2 or more; the same for all)\n"
    "      --timeout DUR          give up after DUR at each wait (exit 123)\n"
    "      --watchdog DUR         a waiting party's lease, renewed every DUR/3\n"
    "      --kill-after DUR       SIGKILL DUR after SIGTERM when baton is ended (10s)\n";

enum { OPT_PARTIES = 0x2100, OPT_TIMEOUT, OPT_WATCHDOG, OPT_KILL_AFTER };

static const struct option barrier_options[] = {
    CLI_ARG("parties", OPT_PARTIES), CLI_ARG("timeout", OPT_TIMEOUT),
    CLI_ARG("watchdog", OPT_WATCHDOG), CLI_ARG("kill-after", OPT_KILL_AFTER), CLI_END};

/* The exit code of a failed wait, after a message. */
static int wait_failed(baton_client *c, int brc, const char *name, const char *what)
{
    if (brc == BATON_ETIMEDOUT) {
        cli_error("barrier %s: %s: not complete within --timeout (broken for the others)", name,
                  what);
        return EXIT_AWAIT_TIMEOUT;
    }
    return cli_fail(c, brc, "barrier %s: %s", name, what);
}

/* With COMMAND: enter, run COMMAND, leave. The exit code: COMMAND's, or the failed wait's. */
static int double_barrier(baton_client *cl, baton_barrier *b, const char *name, int64_t timeout_ms,
                          int64_t kill_after_ms, char **command)
{
    int brc = baton_barrier_enter(b, timeout_ms);
    if (brc != BATON_OK)
        return wait_failed(cl, brc, name, "enter");
    cli_guard_hold();
    char what[1100];
    snprintf(what, sizeof what, "barrier %s", name);
    cli_watch w = {NULL, 0, 0, what, NULL, kill_after_ms, cl};
    cli_outcome out;
    cli_run(command, &w, &out);
    int rc = out.status;
    if (out.ran) {
        brc = baton_barrier_leave(b, timeout_ms);
        if (brc != BATON_OK) {
            int lrc = wait_failed(cl, brc, name, "leave");
            rc = rc ? rc : lrc;
        }
    }
    return rc;
}

int cli_cmd_barrier(cli_global *g, int argc, char **argv)
{
    const char *name = NULL;
    int64_t parties = 0, timeout_ms = BATON_WAIT_FOREVER, watchdog_ms = 0;
    int64_t kill_after_ms = CLI_DEFAULT_KILL_AFTER_MS;
    cli_opts o;
    cli_opts_init(&o, "barrier", g, argc, argv, "", barrier_options);
    char **command = o.rest;
    int rc = 0, c;
    while (!rc && (c = cli_opts_next(&o)) != CLI_OPT_END) {
        switch (c) {
        case OPT_PARTIES:
            if (!cli_parse_count(o.arg, 100000, &parties) || parties < 2)
                rc = cli_usage_error("barrier", "--parties needs a whole number from 2, not '%s'",
                                     o.arg);
            break;
        case OPT_TIMEOUT:
        case OPT_WATCHDOG:
        case OPT_KILL_AFTER:
            if (c == OPT_TIMEOUT
                    ? !cli_parse_wait(o.arg, &timeout_ms)
                    : !cli_parse_duration(o.arg, c == OPT_WATCHDOG ? &watchdog_ms : &kill_after_ms))
                rc = cli_usage_error("barrier", "bad duration '%s' (" CLI_DURATION_HINT ")", o.arg);
            else if (c == OPT_WATCHDOG && watchdog_ms < 30)
                rc = cli_usage_error("barrier", "--watchdog must be at least 30ms");
            break;
        case CLI_OPT_WORD:
        case CLI_OPT_NAME:
            if ((rc = cli_one_word(&o, &name, NULL)) == 0)
                cli_note_name(g, o.arg);
            break;
        default:
            rc = EXIT_USAGE;
        }
    }
    cli_opts_free(&o);
    if (!rc && !name)
        rc = cli_usage_error("barrier", "no barrier NAME");
    if (!rc && parties == 0)
        rc = cli_usage_error("barrier", "--parties is required");
    if (!rc && command && !command[0])
        rc = cli_usage_error("barrier", "no COMMAND after '--'");
    baton_client *cl;
    g->watchdog_ms = watchdog_ms;
    if (!cli_start(g, &rc, &cl))
        return rc;
    baton_barrier *b = NULL;
    int brc = baton_barrier_open(cl, name, parties, &b);
    if (brc != BATON_OK) {
        rc = cli_fail(cl, brc, "barrier %s", name);
    } else if (!command) {
        int64_t index = 0, gen = 0;
        brc = baton_barrier_await(b, timeout_ms, &index, &gen);
        if (brc == BATON_OK)
            printf("index %lld generation %lld\n", (long long)index, (long long)gen);
        else
            rc = wait_failed(cl, brc, name, "await");
    } else {
        rc = double_barrier(cl, b, name, timeout_ms, kill_after_ms, command);
    }
    baton_barrier_close(b);
    baton_client_close(cl);
    return rc;
}
