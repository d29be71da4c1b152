/*
 * What every file of the command shares, and calls nothing else of it for: its messages
 * (cli_error, usage errors with the command's usage line, cli_fail's exit codes), its values
 * (durations, counts), and option parsing for baton and its commands.
 *
 * Option parsing. Long options ("--wait 5s", "--wait=5s") are
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
 * refused. After the command's name they are taken only in their two-word form ("--url URL",
 * "-u URL"; never "--url=URL" or "-uURL") and the flags that weaken a check or change where
 * the password comes from (--tls-insecure, --insecure, --askpass) only before it: a NAME
 * read from a variable is one word, so it can never pick the server, the credentials or the
 * TLS checks. redis-cli's -h HOST, -p PORT, -a PASSWORD and -n DB are refused (exit 2) with
 * what to write instead (baton -h alone is the help, as --help is).
 * `--object NAME` gives a NAME as it is, even one that starts with '-'. Errors are
 * printed here, with the command's usage line, and exit 2; a message shows an option's name,
 * never its value (it may hold a password).
 */
#define _GNU_SOURCE
#include "cli.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------- messages --------------------------------------------- */

/* The command table's rows, for the usage lines (main.c hands them over: cli_set_commands). */
static const cli_command *usage_rows;
static size_t n_usage_rows;

void cli_set_commands(const cli_command *table, size_t n)
{
    usage_rows = table;
    n_usage_rows = n;
}

/* Length of the valid UTF-8 sequence at s (0 if invalid). */
static size_t utf8_len(const unsigned char *s)
{
    if (s[0] < 0x80)
        return 1;
    size_t n = (s[0] & 0xe0) == 0xc0   ? 2
               : (s[0] & 0xf0) == 0xe0 ? 3
               : (s[0] & 0xf8) == 0xf0 ? 4
                                       : 0;
    if (n == 0 || (n == 2 && s[0] < 0xc2) || (n == 4 && s[0] > 0xf4))
        return 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if (n == 3 && ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0)))
        return 0; /* overlong, or a surrogate */
    if (n == 4 && ((s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90)))
        return 0;
    return n;
}

/* The escaping rule for every line a human reads (cli_esc): into out (room for 4 bytes per
 * byte of str, and the NUL). */
static void esc_into(const char *str, char *out)
{
    const unsigned char *s = (const unsigned char *)(str ? str : "");
    size_t o = 0;
    while (*s) {
        size_t n = utf8_len(s);
        /* C0 and C1 controls (ESC, CSI U+009B...), DEL, and bytes that are not UTF-8 */
        bool control = *s < 0x20 || *s == 0x7f || (n == 2 && s[0] == 0xc2 && s[1] < 0xa0);
        if (control || n == 0) {
            n = control ? n : 1;
            for (size_t i = 0; i < n; i++)
                o += (size_t)sprintf(out + o, "\\x%02x", s[i]);
        } else {
            memcpy(out + o, s, n);
            o += n;
        }
        s += n;
    }
    out[o] = '\0';
}

const char *cli_esc(const char *str)
{
    static char *ring[16];
    static unsigned next;
    char *out = malloc(strlen(str ? str : "") * 4 + 1);
    if (!out)
        return "?";
    esc_into(str, out);
    free(ring[next % 16]);
    ring[next++ % 16] = out;
    return out;
}

void cli_json_str(const char *str)
{
    const unsigned char *s = (const unsigned char *)(str ? str : "");
    putchar('"');
    while (*s) {
        size_t n = utf8_len(s);
        if (*s == '"' || *s == '\\') {
            printf("\\%c", *s);
        } else if (*s == '\n') {
            printf("\\n");
        } else if (*s == '\t') {
            printf("\\t");
        } else if (*s < 0x20 || *s == 0x7f || n == 0) {
            printf("\\u%04x", *s);
            n = 1;
        } else if (n == 2 && s[0] == 0xc2 && s[1] < 0xa0) {
            printf("\\u%04x", s[1]); /* a C1 control (CSI U+009B...): the same code point */
        } else {
            fwrite(s, 1, n, stdout);
        }
        s += n ? n : 1;
    }
    putchar('"');
}

void cli_eprintf(const char *fmt, ...)
{
    char buf[2048], out[sizeof buf * 4];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    esc_into(buf, out);
    fprintf(stderr, "baton: %s\n", out);
}

static void verror(const char *fmt, va_list ap)
{
    char buf[2048], out[sizeof buf * 4];
    vsnprintf(buf, sizeof buf, fmt, ap);
    esc_into(buf, out); /* a NAME or the server's text may hold ESC or a newline */
    fprintf(stderr, "baton: %s\n", out);
}

void cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    verror(fmt, ap);
    va_end(ap);
}

int cli_usage_error(const char *command, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    verror(fmt, ap);
    va_end(ap);
    if (command) {
        for (size_t i = 0; i < n_usage_rows; i++)
            if (strcmp(command, usage_rows[i].name) == 0)
                fprintf(stderr, "usage: %s\n", usage_rows[i].usage);
    } else { /* one line, not every command's synopsis */
        fprintf(stderr, "usage: baton [--url URL] COMMAND ... (COMMAND:");
        for (size_t i = 0; i < n_usage_rows; i++)
            fprintf(stderr, " %s", usage_rows[i].name);
        fprintf(stderr, ")\n       baton COMMAND --help | baton --help | --version\n");
    }
    fprintf(stderr, "Try 'baton --help' for more information.\n");
    return EXIT_USAGE;
}

void cli_warn(baton_client *c, const char *what)
{
    const char *w = baton_client_errmsg(c);
    if (w[0])
        cli_eprintf("warning: %s: %s", what, w);
}

int cli_exit_code(int rc)
{
    switch (rc) {
    case BATON_OK:
        return EXIT_OK;
    case BATON_ECONN:
        return EXIT_CONN;
    case BATON_EAUTH:
        return EXIT_AUTH;
    case BATON_EPERM:
        return EXIT_PERM;
    case BATON_EINVAL:
        return EXIT_USAGE;
    default:
        return EXIT_FAILED;
    }
}

int cli_fail(baton_client *c, int rc, const char *fmt, ...)
{
    char what[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    const char *detail = c ? baton_client_errmsg(c) : "";
    if (detail[0])
        cli_error("%s: %s (%s)", what, baton_strerror(rc), detail);
    else
        cli_error("%s: %s", what, baton_strerror(rc));
    return cli_exit_code(rc);
}

void cli_format_duration(int64_t ms, cli_duration_style style, char *buf, size_t len)
{
    long long v = (long long)ms;
    if (style == CLI_DURATION_OPTION) {
        if (v % 1000 != 0 || v == 0)
            snprintf(buf, len, "%lldms", v);
        else
            snprintf(buf, len, "%llds", v / 1000);
    } else if (v < 0) {
        snprintf(buf, len, "-%lld.%03llds", -v / 1000, -v % 1000);
    } else if (v < 10000) {
        snprintf(buf, len, "%lld.%03llds", v / 1000, v % 1000);
    } else {
        snprintf(buf, len, "%llds", v / 1000);
    }
}

bool cli_who_holds(baton_client *c, const char *name, char *buf, size_t len)
{
    baton_inspection *s = NULL;
    buf[0] = '\0';
    if (baton_inspect(c, name, &s) != BATON_OK || !s)
        return false; /* (the ACL may refuse what the acquire did not need) */
    char ttl[64] = "";
    if (s->ttl_ms > 0) {
        char t[32];
        cli_format_duration(s->ttl_ms, CLI_DURATION_READING, t, sizeof t);
        snprintf(ttl, sizeof ttl, ", its lease ends in %s", t);
    }
    size_t n = 0;
    for (size_t i = 0; i < s->n_holders && n < len; i++) {
        const baton_inspect_holder *h = s->holders[i];
        if (i == 2) {
            n += (size_t)snprintf(buf + n, len - n, " and %zu more", s->n_holders - 2);
            break;
        }
        if (h->host)
            n += (size_t)snprintf(buf + n, len - n, "%s%s pid %lld", i ? " and " : "held by ",
                                  h->host, (long long)h->pid);
        else
            n += (size_t)snprintf(buf + n, len - n, "%s%s (not a baton process)",
                                  i ? " and " : "held by ", h->owner);
    }
    if (s->n_holders && n < len)
        snprintf(buf + n, len - n, "%s", ttl);
    else if (!s->n_holders && s->has_value && n < len)
        snprintf(buf, len, "%lld permit%s free", (long long)s->value, s->value == 1 ? "" : "s");
    if (!s->n_holders && s->n_permits && len > 0) {
        n = strlen(buf);
        snprintf(buf + n, len - n, "%s%zu permit lease%s held", n ? ", " : "", s->n_permits,
                 s->n_permits == 1 ? "" : "s");
    }
    baton_inspection_free(s);
    return buf[0] != '\0';
}

/* ------------------------------- values ----------------------------------------------- */

bool cli_parse_count(const char *s, int64_t max, int64_t *out)
{
    if (!s || !*s)
        return false;
    int64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return false;
        if (v > (max - (*p - '0')) / 10)
            return false;
        v = v * 10 + (*p - '0');
    }
    *out = v;
    return true;
}

/* One "<digits>[.<digits>]" at *p, in microunits (value * 10^6); advances *p. */
static bool parse_decimal(const char **p, int64_t *micro)
{
    const char *s = *p;
    size_t n = strspn(s, "0123456789");
    if (n == 0 || n > 12)
        return false;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = v * 10 + (s[i] - '0');
    s += n;
    int64_t frac = 0, scale = 1000000;
    if (*s == '.') {
        s++;
        size_t f = strspn(s, "0123456789");
        if (f == 0 || f > 6)
            return false;
        for (size_t i = 0; i < f; i++) {
            scale /= 10;
            frac += (s[i] - '0') * scale;
        }
        s += f;
    }
    *micro = v * 1000000 + frac;
    *p = s;
    return true;
}

bool cli_parse_duration(const char *s, int64_t *ms)
{
    static const struct {
        const char *name;
        int64_t ms;
    } units[] = {{"ms", 1}, {"d", 86400000}, {"h", 3600000}, {"m", 60000}, {"s", 1000}};
    if (!s || !*s)
        return false;
    const char *p = s;
    int64_t total_us = 0; /* microseconds */
    while (*p) {
        const char *start = p;
        int64_t micro;
        if (!parse_decimal(&p, &micro))
            return false;
        int64_t unit = -1;
        for (size_t i = 0; i < sizeof units / sizeof units[0] && unit < 0; i++) {
            size_t n = strlen(units[i].name);
            if (strncmp(p, units[i].name, n) == 0) {
                unit = units[i].ms;
                p += n;
            }
        }
        if (unit < 0 && *p == '\0' && start == s)
            unit = 1000; /* a bare number, alone, is seconds */
        if (unit < 0)
            return false;
        /* micro / 10^6 units of `unit` ms: in microseconds, micro * unit / 1000 */
        if (micro > (BATON_MAX_DURATION_MS + 1) * (int64_t)1000 / unit * 1000)
            return false;
        total_us += micro / 1000 * unit + micro % 1000 * unit / 1000;
        if (total_us > BATON_MAX_DURATION_MS * (int64_t)1000)
            return false;
    }
    *ms = total_us / 1000;
    return true;
}

bool cli_parse_wait(const char *s, int64_t *ms)
{
    if (s && (strcmp(s, "infinity") == 0 || strcmp(s, "inf") == 0)) {
        *ms = BATON_WAIT_FOREVER;
        return true;
    }
    return cli_parse_duration(s, ms);
}

/* ------------------------------- options ---------------------------------------------- */

/* The options every command takes (and `baton` before the command). */
static const struct option global_options[] = {
    CLI_ARG("url", CLI_G_URL), CLI_ARG("user", CLI_G_USER), CLI_FLAG("askpass", CLI_G_ASKPASS),
    CLI_ARG("tls-ca", CLI_G_TLS_CA), CLI_ARG("tls-cert", CLI_G_TLS_CERT),
    CLI_ARG("tls-key", CLI_G_TLS_KEY), CLI_ARG("tls-sni", CLI_G_TLS_SNI),
    CLI_FLAG("tls-insecure", CLI_G_TLS_INSECURE), CLI_ARG("password-file", CLI_G_PASSWORD_FILE),
    /* redis-cli's spellings, so that its command lines port as they are */
    CLI_FLAG("tls", CLI_G_TLS), CLI_ARG("cacert", CLI_G_TLS_CA), CLI_ARG("cacertdir", CLI_G_TLS_CA),
    CLI_ARG("cert", CLI_G_TLS_CERT), CLI_ARG("key", CLI_G_TLS_KEY), CLI_ARG("sni", CLI_G_TLS_SNI),
    CLI_FLAG("insecure", CLI_G_TLS_INSECURE),
    /* neither the server nor a credential: accepted after a NAME too */
    CLI_ARG("sync-replicas", CLI_G_SYNC_REPLICAS), CLI_ARG("name", CLI_G_NAME),
    CLI_FLAG("sync-aof", CLI_G_SYNC_AOF), CLI_END};

/* Only before the command: --help, --version. After it: --object. */
static const struct option top_options[] = {CLI_FLAG("help", 'h'), CLI_FLAG("version", 'V'),
                                            CLI_END};
static const struct option object_option[] = {CLI_ARG("object", CLI_G_OBJECT), CLI_END};

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

/* Where a global option that only stores its value (a string) goes in g, or NULL. */
static const char **stored_text(cli_global *g, int val)
{
    return val == CLI_G_USER       ? &g->user
           : val == CLI_G_TLS_CA   ? &g->tls_ca
           : val == CLI_G_TLS_CERT ? &g->tls_cert
           : val == CLI_G_TLS_KEY  ? &g->tls_key
           : val == CLI_G_TLS_SNI  ? &g->tls_sni
                                   : NULL;
}

/* Where a global option that only sets a flag goes in g, or NULL. */
static bool *stored_flag(cli_global *g, int val)
{
    return val == CLI_G_ASKPASS        ? &g->askpass
           : val == CLI_G_TLS_INSECURE ? &g->tls_insecure
           : val == CLI_G_TLS          ? &g->tls
           : val == CLI_G_SYNC_AOF     ? &g->sync_aof
                                       : NULL;
}

/* A global option's value into g. Returns 0 or EXIT_USAGE (printed). */
static int set_global(cli_opts *o, int val)
{
    cli_global *g = o->g;
    bool connection = val != CLI_G_SYNC_REPLICAS && val != CLI_G_NAME && val != CLI_G_SYNC_AOF;
    bool weakening = val == CLI_G_TLS_INSECURE || val == CLI_G_ASKPASS;
    if (weakening && o->command)
        return cli_usage_error(o->command,
                               "%s must come before the command word ('baton %s %s'): after "
                               "it, a word may be a NAME from a variable",
                               o->word, o->word, o->command);
    if (connection && o->command && o->inline_value)
        return cli_usage_error(o->command,
                               "%s takes its value as the next word after the command word "
                               "(write '%s VALUE', or put it before the command word): a NAME "
                               "from a variable is never taken for the server or its "
                               "credentials",
                               o->word, o->word);
    if (connection && o->saw_word)
        return cli_usage_error(o->command,
                               "%s must come before the NAME: a word after a NAME is never "
                               "taken for the server or its credentials (a NAME that starts "
                               "with '-' goes after --object)",
                               o->word);
    const char **text = stored_text(g, val);
    bool *flag = stored_flag(g, val);
    if (text)
        *text = o->arg;
    else if (flag)
        *flag = true;
    if (text || flag)
        return 0;
    switch (val) {
    case CLI_G_URL:
        return cli_set_url(g, o->arg);
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
    o->inline_value = inline_value != NULL;
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
    o->inline_value = false;
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

/* What to write instead of redis-cli's -h HOST, -p PORT, -a PASSWORD, -n DB (c), or NULL. */
static const char *redis_cli_hint(char c)
{
    switch (c) {
    case 'h':
        return "-h is not redis-cli's -h HOST here: write --url redis://HOST[:PORT] (or -u "
               "URL) before the command word; help is --help";
    case 'p':
        return "redis-cli's -p PORT is not taken: write --url redis://HOST:PORT (or -u URL) "
               "before the command word";
    case 'a':
        return "redis-cli's -a PASSWORD is not taken: put the password in $REDISCLI_AUTH or "
               "$BATON_PASSWORD, a --password-file, or --askpass";
    case 'n':
        return "redis-cli's -n DB is not taken: write --url redis://HOST:PORT/DB (or -u URL) "
               "before the command word";
    default:
        return NULL;
    }
}

/* The next letter of a "-abc" group, at o->cluster. */
static int next_short(cli_opts *o)
{
    char c = *o->cluster++;
    o->inline_value = false;
    snprintf(o->word_buf, sizeof o->word_buf, "-%c", c);
    o->word = o->word_buf;
    const char *s = c && c != ':' && c != '-' ? strchr(o->shortopts ? o->shortopts : "", c) : NULL;
    if (!s && !o->command && c == 'V')
        s = "V";
    /* -h alone ("baton -h") is the help; anywhere else it may be redis-cli's -h HOST */
    if (!s && !o->command && c == 'h' && o->argc == 1 && !*o->cluster)
        s = "h";
    const char *hint = !s ? redis_cli_hint(c) : NULL;
    if (hint) {
        o->cluster = NULL;
        cli_usage_error(o->command, "%s", hint);
        return CLI_OPT_ERROR;
    }
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

int cli_one_word(const cli_opts *o, const char **slot, const char *what)
{
    if (*slot && what)
        return cli_usage_error(o->command, "one %s only ('%s' is a second)", what, o->arg);
    if (*slot)
        return cli_usage_error(o->command, "unexpected '%s'", o->arg);
    *slot = o->arg;
    return 0;
}

void cli_note_name(cli_global *g, const char *name)
{
    if (g->parse_only && g->names)
        g->names[g->n_names++] = name;
}

int cli_set_url(cli_global *g, const char *url)
{
    if (g->url)
        return cli_usage_error(NULL, "--url given twice");
    if (!*url)
        return cli_usage_error(NULL, "--url is empty");
    g->url = url;
    return EXIT_OK;
}
