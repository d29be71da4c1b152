/*
 * `latch`: the count-down latch's verbs (set, count-down, await, count, delete).
 */
#define _GNU_SOURCE
#include "command.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        return cli_duration_value_of(o, c, &la->timeout_ms, true);
    }
    if (c == CLI_OPT_NAME && la->n > 0)
        return cli_usage_error("latch", "--object gives the NAME, before the verb");
    if (c != CLI_OPT_WORD && c != CLI_OPT_NAME)
        return CLI_NOT_MINE;
    if (la->n == 3)
        return cli_unexpected(o, o->arg);
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
    int rc = cli_each_option(&o, g, NULL, latch_option, la);
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
