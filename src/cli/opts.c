/*
 * Option parsing for baton and its commands. Long options ("--wait 5s", "--wait=5s") are
 * matched by their exact name only: never by an abbreviation, so that no word can become an
 * option by being a prefix of one (getopt_long(3) accepts "--ur=" for "--url=", which let a
 * lock NAME redirect baton to another server). Short ones: "-w 5s", "-w5s", "-nq". Words
 * come back in order among the options; the words after "--" are COMMAND and are never
 * looked at: they are split off first, so that nothing in COMMAND (its own options
 * included) is taken for baton's.
 *
 * The global options (the server, credentials, TLS, --sync-replicas) are read here for every
 * command, before or after the command's name. Those that say where to connect and how to
 * authenticate (--url, --user, --askpass, --tls-*) must come before the first NAME or other
 * word: a word after a NAME is never taken for the server, and a server given twice is
 * refused. `--object NAME` gives a NAME as it is, even one that starts with '-'. Errors are
 * printed here, with the command's usage line, and exit 2; a message shows an option's name,
 * never its value (it may hold a password).
 */
#define _GNU_SOURCE
#include "cli.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The options every command takes (and `baton` before the command). */
static const struct option global_options[] = {
    {"url", required_argument, NULL, CLI_G_URL},
    {"user", required_argument, NULL, CLI_G_USER},
    {"askpass", no_argument, NULL, CLI_G_ASKPASS},
    {"tls-ca", required_argument, NULL, CLI_G_TLS_CA},
    {"tls-cert", required_argument, NULL, CLI_G_TLS_CERT},
    {"tls-key", required_argument, NULL, CLI_G_TLS_KEY},
    {"tls-sni", required_argument, NULL, CLI_G_TLS_SNI},
    {"tls-insecure", no_argument, NULL, CLI_G_TLS_INSECURE},
    {"password-file", required_argument, NULL, CLI_G_PASSWORD_FILE},
    /* redis-cli's spellings, so that its command lines port as they are */
    {"tls", no_argument, NULL, CLI_G_TLS},
    {"cacert", required_argument, NULL, CLI_G_TLS_CA},
    {"cacertdir", required_argument, NULL, CLI_G_TLS_CA},
    {"cert", required_argument, NULL, CLI_G_TLS_CERT},
    {"key", required_argument, NULL, CLI_G_TLS_KEY},
    {"sni", required_argument, NULL, CLI_G_TLS_SNI},
    {"insecure", no_argument, NULL, CLI_G_TLS_INSECURE},
    /* neither the server nor a credential: accepted after a NAME too */
    {"sync-replicas", required_argument, NULL, CLI_G_SYNC_REPLICAS},
    {"name", required_argument, NULL, CLI_G_NAME},
    {NULL, 0, NULL, 0},
};

/* Only before the command: --help, --version. After it: --object. */
static const struct option top_options[] = {
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};
static const struct option object_option[] = {
    {"object", required_argument, NULL, CLI_G_OBJECT},
    {NULL, 0, NULL, 0},
};

int cli_opts_init(cli_opts *o, const char *command, cli_global *g, int argc, char **argv,
                  const char *shortopts, const struct option *longopts)
{
    memset(o, 0, sizeof *o);
    o->command = command;
    o->g = g;
    o->shortopts = shortopts;
    o->longopts = longopts;
    o->argv = argv;
    int words = 0;
    if (command) {
        while (words < argc && strcmp(argv[words], "--") != 0)
            words++;
        o->rest = words < argc ? argv + words + 1 : NULL;
    } else {
        words = argc; /* before the command: the caller stops at the command's name */
    }
    o->argc = words;
    return EXIT_OK;
}

void cli_opts_free(cli_opts *o)
{
    (void)o;
}

/* The long option named exactly name[0..len) in table, or NULL. */
static const struct option *find_long(const struct option *table, const char *name, size_t len)
{
    for (const struct option *l = table; l && l->name; l++)
        if (strlen(l->name) == len && memcmp(l->name, name, len) == 0)
            return l;
    return NULL;
}

/* A global option's value into g. Returns 0 or EXIT_USAGE (printed). */
static int set_global(cli_opts *o, int val)
{
    cli_global *g = o->g;
    bool connection = val != CLI_G_SYNC_REPLICAS && val != CLI_G_NAME;
    if (connection && o->saw_word)
        return cli_usage_error(o->command,
                               "%s must come before the NAME: a word after a NAME is never "
                               "taken for the server or its credentials (a NAME that starts "
                               "with '-' goes after --object)",
                               o->word);
    switch (val) {
    case CLI_G_URL:
        return cli_set_url(g, o->arg);
    case CLI_G_USER:
        g->user = o->arg;
        return 0;
    case CLI_G_ASKPASS:
        g->askpass = true;
        return 0;
    case CLI_G_TLS_CA:
        g->tls_ca = o->arg;
        return 0;
    case CLI_G_TLS_CERT:
        g->tls_cert = o->arg;
        return 0;
    case CLI_G_TLS_KEY:
        g->tls_key = o->arg;
        return 0;
    case CLI_G_TLS_SNI:
        g->tls_sni = o->arg;
        return 0;
    case CLI_G_TLS_INSECURE:
        g->tls_insecure = true;
        return 0;
    case CLI_G_TLS:
        g->tls = true;
        return 0;
    case CLI_G_PASSWORD_FILE:
        if (g->password_file)
            return cli_usage_error(o->command, "--password-file given twice");
        g->password_file = o->arg;
        return 0;
    case CLI_G_NAME:
        if (!*o->arg || strlen(o->arg) > CLI_MAX_CLIENT_NAME)
            return cli_usage_error(o->command, "--name takes 1 to %d bytes", CLI_MAX_CLIENT_NAME);
        g->client_name = o->arg;
        return 0;
    default: {
        char *end;
        long n = strtol(o->arg, &end, 10);
        if (!*o->arg || *end || n < 0 || n > 100 || o->arg[0] < '0' || o->arg[0] > '9')
            return cli_usage_error(o->command,
                                   "--sync-replicas takes a number of replicas, 0 to 100");
        g->sync_replicas = (int)n;
        return 0;
    }
    }
}

/* The next value-taking option's value: the rest of the word or the next word. */
static int take_value(cli_opts *o, const char *inline_value)
{
    if (inline_value) {
        o->arg = inline_value;
        return 0;
    }
    if (o->i >= o->argc) {
        cli_usage_error(o->command, "%s needs a value", o->word);
        return CLI_OPT_ERROR;
    }
    o->arg = o->argv[o->i++];
    return 0;
}

/* "--name[=value]" at o->argv[o->i - 1]. */
static int next_long(cli_opts *o, const char *w)
{
    const char *name = w + 2, *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    snprintf(o->word_buf, sizeof o->word_buf, "--%.*s", (int)(len > 64 ? 64 : len), name);
    o->word = o->word_buf;
    const struct option *l = find_long(o->longopts, name, len);
    if (!l)
        l = find_long(global_options, name, len);
    if (!l)
        l = find_long(o->command ? object_option : top_options, name, len);
    if (!l) {
        cli_usage_error(o->command, "unknown option '%s'%s", o->word,
                        o->command ? " (a NAME that starts with '-' goes after --object)" : "");
        return CLI_OPT_ERROR;
    }
    if (l->has_arg == no_argument && eq) {
        cli_usage_error(o->command, "%s takes no value", o->word);
        return CLI_OPT_ERROR;
    }
    o->arg = NULL;
    if (l->has_arg != no_argument && take_value(o, eq ? eq + 1 : NULL) != 0)
        return CLI_OPT_ERROR;
    return l->val;
}

/* The next letter of a "-abc" group, at o->cluster. */
static int next_short(cli_opts *o)
{
    char c = *o->cluster++;
    snprintf(o->word_buf, sizeof o->word_buf, "-%c", c);
    o->word = o->word_buf;
    const char *s = c != ':' && c != '-' ? strchr(o->shortopts ? o->shortopts : "", c) : NULL;
    if (!s && !o->command && (c == 'h' || c == 'V'))
        s = c == 'h' ? "h" : "V";
    if (!s && c == 'u')
        s = "u:"; /* redis-cli's -u URL: --url */
    if (!s || !c) {
        o->cluster = NULL;
        if ((unsigned char)c >= 0x21 && (unsigned char)c < 0x7f)
            cli_usage_error(o->command, "unknown option '-%c'%s", c,
                            o->command ? " (a NAME that starts with '-' goes after --object)" : "");
        else
            cli_usage_error(o->command, "unknown option in '%s'%s", o->argv[o->i - 1],
                            o->command ? " (a NAME that starts with '-' goes after --object)" : "");
        return CLI_OPT_ERROR;
    }
    o->arg = NULL;
    if (s[1] == ':') {
        const char *rest = *o->cluster ? o->cluster : NULL;
        o->cluster = NULL;
        if (take_value(o, rest) != 0)
            return CLI_OPT_ERROR;
    } else if (!*o->cluster) {
        o->cluster = NULL;
    }
    return (unsigned char)c;
}

int cli_opts_next(cli_opts *o)
{
    for (;;) {
        int c;
        if (o->cluster) {
            c = next_short(o);
        } else {
            if (o->i >= o->argc)
                return CLI_OPT_END;
            const char *w = o->argv[o->i];
            if (w[0] != '-' || w[1] == '\0') {
                o->word = o->arg = w;
                if (o->command)
                    o->i++; /* before the command, the word is the command: left there */
                o->saw_word = true;
                return CLI_OPT_WORD;
            }
            o->i++;
            if (w[1] == '-' && w[2] == '\0') {
                cli_usage_error(o->command, "unexpected '--'");
                return CLI_OPT_ERROR;
            }
            if (w[1] == '-') {
                c = next_long(o, w);
            } else {
                o->cluster = w + 1;
                c = next_short(o);
            }
        }
        if (c == CLI_OPT_ERROR)
            return c;
        if (c == 'u' && !strchr(o->shortopts ? o->shortopts : "", 'u'))
            c = CLI_G_URL;
        if (c == CLI_G_OBJECT) {
            o->saw_word = true;
            return CLI_OPT_NAME;
        }
        if (c >= CLI_G_URL && c < CLI_G_OBJECT) {
            if (set_global(o, c) != 0)
                return CLI_OPT_ERROR;
            continue;
        }
        return c;
    }
}

const char *cli_opts_take_number(cli_opts *o)
{
    if (!o->cluster && o->i < o->argc && o->argv[o->i][0] == '-' && o->argv[o->i][1] >= '0' &&
        o->argv[o->i][1] <= '9') {
        o->saw_word = true;
        return o->argv[o->i++];
    }
    return NULL;
}
