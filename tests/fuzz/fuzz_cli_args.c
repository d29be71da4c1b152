/*
 * Fuzz target: baton's command-line parser (src/cli/, through cli_parse_only: nothing is
 * read, opened or run). The input is a command line: its first byte picks the command, the
 * rest is split into words at '\n' and '\0', and a word whose first byte is below 0x20 is
 * replaced by a token from a dictionary (every option of every command, the global options
 * in both spellings, "--object", "--", URLs, verbs), so that short mutations reach every
 * option: dictionary[B] for a first byte B (1 to 31), or, when the second byte is below 0x20
 * too, dictionary[(B * 32 + second) % N_DICT], which reaches every entry. Properties, besides
 * never crashing:
 *
 *  1. Every NAME the parser returns is a word of the command line given as a NAME: a word
 *     that does not start with '-' (or is "-"), or the value of --object; never an option
 *     nor an option's value. Each word is returned at most once.
 *  2. A server (--url) comes only from an exact "--url VALUE" or "--url=VALUE" (or
 *     redis-cli's "-u VALUE", "-uVALUE", also at the end of a group of short options) that
 *     no NAME precedes, never from a word returned as a NAME.
 *  2b. The value of every other global option that takes one (--user, the TLS files and
 *     name, --password-file, --name, in either spelling) is the word after its option, or
 *     the part after its "=": never a NAME, never a word after "--"; and those that say how
 *     to connect (all but --name) come before the first NAME.
 *  2c. After the command word (when it is the first word), a single word never picks the
 *     server, the credentials or the TLS checks (issue 46.2): every value of 2 and 2b but
 *     --name's comes from the word after its option ("--url URL", "-u URL"), never from
 *     "--url=URL" or "-uURL" there; and --tls-insecure, --insecure and --askpass (the flags
 *     that weaken a check or change where the password comes from) are never taken there.
 *  3. A NAME is inert: the same command line with an arbitrary word planted as a NAME
 *     (`--object WORD`) parses exactly as with a plain NAME there: same outcome, same
 *     server and options, the same NAMEs but that one.
 */
#include "../../src/cli/cli.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

#define MAX_WORDS 40

static const char *const commands[] = {"lock",   "rwlock", "semaphore", "latch",
                                       "status", "unlock", "list"};
/* Picked by a first byte of 0x80 or more, so that the seeds before them keep their command. */
static const char *const later_commands[] = {"elect", "leader", "barrier"};

static const char *const dictionary[] = {
    "--url",
    "--url=redis://127.0.0.1:1",
    "--object",
    "--object=-n",
    "--",
    "-n",
    "-w",
    "--wait",
    "-E",
    "0",
    "-q",
    "--hold",
    "--read",
    "--write",
    "--fair",
    "--lease",
    "1s",
    "--watchdog",
    "set",
    "add",
    "-3",
    "drain",
    "count",
    "await",
    "--timeout",
    "--json",
    "--force",
    "--ur=x",
    "--user",
    "--askpass",
    "--tls-ca",
    "--sync-replicas",
    "2",
    "-nqE3",
    "-w5s",
    "--permits",
    "-u",
    "--tls",
    "--cacert",
    "--password-file",
    "--name",
    "--insecure",
    /* reached by two-byte tokens: the first 32 entries above keep the seeds' meaning */
    "--tls-cert",
    "--tls-key",
    "--tls-sni",
    "--tls-insecure",
    "--cacertdir",
    "--cert",
    "--key",
    "--sni",
    "--name=x y",
    "-uredis://127.0.0.1:2",
    "--kill-after",
    "--verbose",
    "--nonblock",
    "--conflict-exit-code",
    "--quiet",
    "--take",
    "--counting",
    "delete",
    "count-down",
    "--watch",
    "--interval",
    "--max-keys",
    "--help",
    "-h",
    "--version",
    "-V",
    "--sync-replicas=1",
    "--password-file=/x",
    "--user=u",
    "-nu",
    "--object=--",
    "*",
    "--url=",
    "--hold=yes",
    "-E256",
    "10ms",
    "--tls-ca=/ca",
    "--cert=/c",
    "-qu",
    "--watchdog=30ms",
    "--lease=0",
    "--interval=5ms",
    "--value",
    "--parties",
    "--lease=2s",
    "-p",
    "-a",
    "--askpass=x",
    "--tls-sni=evil",
    "--password-file=/etc/secret",
    "-u",
    "infinity",
    "1d",
};
#define N_DICT (sizeof dictionary / sizeof dictionary[0])

/* The parse of argv[0..argc): outcome and what it set. */
typedef struct parse {
    int rc;
    cli_global g;
    const char *names[MAX_WORDS + 8];
} parse;

static void run(parse *p, int argc, char **argv)
{
    memset(p, 0, sizeof *p);
    p->g.names = p->names;
    p->rc = cli_parse_only(argc, argv, &p->g);
}

static int index_of(char **argv, int argc, const char *ptr)
{
    for (int i = 0; i < argc; i++)
        if (ptr >= argv[i] && ptr <= argv[i] + strlen(argv[i]))
            return i;
    return -1;
}

static bool same_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* Property 2b for one option's value v (NULL: not given): the word after an option, or what
 * follows "=" in a long one; not a NAME (used), before "--" (end), before the first NAME. */
static void check_value(const char *v, char **argv, int argc, const bool *used, int first_name,
                        int end, int command_at)
{
    if (!v)
        return;
    int i = index_of(argv, argc, v);
    if (i < 1)
        abort(); /* not from the command line */
    bool whole = v == argv[i] && argv[i - 1][0] == '-';
    bool joined = v > argv[i] && v[-1] == '=' && strncmp(argv[i], "--", 2) == 0;
    if ((!whole && !joined) || used[i] || i >= end || i >= first_name)
        abort();
    if (i > command_at && !whole)
        abort(); /* 2c: one word after the command word set it */
}

/* Properties 1, 2 and 2b for one parse. */
static void check(const parse *p, int argc, char **argv, bool command_first)
{
    bool used[MAX_WORDS + 8] = {false};
    int first_name = argc;
    int end = argc; /* "--" after the command (when it is argv[1]): COMMAND follows */
    for (int i = 2; i < argc && command_first; i++)
        if (strcmp(argv[i], "--") == 0) {
            end = i;
            break;
        }
    for (size_t k = 0; k < p->g.n_names; k++) {
        const char *n = p->g.names[k];
        int i = index_of(argv, argc, n);
        if (i < 2 || i >= end || used[i])
            abort(); /* not a word after the command, or twice */
        used[i] = true;
        bool plain = n == argv[i] && (n[0] != '-' || n[1] == '\0');
        bool object = (n == argv[i] && strcmp(argv[i - 1], "--object") == 0) ||
                      (n == argv[i] + 9 && strncmp(argv[i], "--object=", 9) == 0);
        if (!plain && !object)
            abort(); /* an option, or an option's value, taken for a NAME */
        if (i < first_name)
            first_name = i;
    }
    if (p->g.url) {
        int i = index_of(argv, argc, p->g.url);
        bool whole = i >= 1 && p->g.url == argv[i] && strcmp(argv[i - 1], "--url") == 0;
        bool joined = i >= 0 && p->g.url == argv[i] + 6 && strncmp(argv[i], "--url=", 6) == 0;
        /* -u VALUE, -nu VALUE, -uVALUE */
        bool short_whole = i >= 1 && p->g.url == argv[i] && argv[i - 1][0] == '-' &&
                           argv[i - 1][1] != '-' && argv[i - 1][strlen(argv[i - 1]) - 1] == 'u';
        bool short_joined = i >= 0 && p->g.url > argv[i] + 1 && argv[i][0] == '-' &&
                            argv[i][1] != '-' && p->g.url[-1] == 'u';
        if (!whole && !joined && !short_whole && !short_joined)
            abort();
        if (i >= first_name || (i < argc && used[i]))
            abort(); /* a server after a NAME, or from a NAME */
        if (command_first && i > 1 && !whole && !short_whole)
            abort(); /* 2c: "--url=URL" or "-uURL" after the command word */
    }
    if (command_first && (p->g.tls_insecure || p->g.askpass))
        abort(); /* 2c: nothing before the command word could have set them */
    const char *connection[] = {p->g.user,    p->g.tls_ca,  p->g.tls_cert,
                                p->g.tls_key, p->g.tls_sni, p->g.password_file};
    for (size_t k = 0; k < sizeof connection / sizeof connection[0]; k++)
        check_value(connection[k], argv, argc, used, first_name, end, command_first ? 1 : argc);
    check_value(p->g.client_name, argv, argc, used, argc, end, argc);
}

/* Property 3: a and b differ only in the planted NAME at argv index `at` (after "--object="
 * in that word if joined). */
static void same_but_name(const parse *a, const parse *b, char **argv_a, char **argv_b, int at,
                          bool joined)
{
    if (a->rc != b->rc || a->g.n_names != b->g.n_names || !same_str(a->g.url, b->g.url) ||
        !same_str(a->g.user, b->g.user) || !same_str(a->g.tls_ca, b->g.tls_ca) ||
        !same_str(a->g.tls_cert, b->g.tls_cert) || !same_str(a->g.tls_key, b->g.tls_key) ||
        !same_str(a->g.tls_sni, b->g.tls_sni) || a->g.tls_insecure != b->g.tls_insecure ||
        a->g.askpass != b->g.askpass || a->g.sync_replicas != b->g.sync_replicas ||
        a->g.tls != b->g.tls || !same_str(a->g.password_file, b->g.password_file) ||
        !same_str(a->g.client_name, b->g.client_name) || a->g.verbose != b->g.verbose)
        abort();
    bool planted = false;
    size_t skip = joined ? 9 : 0;
    for (size_t k = 0; k < a->g.n_names; k++) {
        if (a->g.names[k] == argv_a[at] + skip) {
            if (b->g.names[k] != argv_b[at] + skip)
                abort();
            planted = true;
        } else if (!same_str(a->g.names[k], b->g.names[k])) {
            abort();
        }
    }
    /* the planted NAME is returned whenever the command reached its NAMEs' end */
    if (!planted && a->rc == 0 && a->g.n_names > 0)
        abort();
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    static bool quiet;
    /* usage errors and --help go nowhere; under libFuzzer, set BATON_FUZZ_KEEP_FDS=1 and pass
     * -close_fd_mask=3 instead, which keeps libFuzzer's own reports on its copy of stderr */
    if (!quiet && !getenv("BATON_FUZZ_KEEP_FDS")) {
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) {
            dup2(null, 1);
            dup2(null, 2);
            close(null);
        }
        quiet = true;
    }
    if (size < 1)
        return 0;
    char *copy = malloc(size + 1);
    if (!copy)
        return 0;
    memcpy(copy, data + 1, size - 1);
    copy[size - 1] = '\0';
    const char *command =
        data[0] >= 0x80
            ? later_commands[data[0] % (sizeof later_commands / sizeof later_commands[0])]
            : commands[data[0] % (sizeof commands / sizeof commands[0])];
    bool plant = (data[0] / 6) % 2;
    char *argv[MAX_WORDS + 8];
    int argc = 0;
    argv[argc++] = (char *)"baton";
    int command_at = -1;
    if ((data[0] / 12) % 4 != 0) /* mostly: the command first, then the words */
        argv[command_at = argc++] = (char *)command;
    char *w = copy;
    char *tokens[MAX_WORDS]; /* each word its own memory: words are told apart by address */
    int n_tokens = 0;
    for (size_t i = 0; i <= size - 1 && argc < MAX_WORDS; i++) {
        if (copy[i] == '\n' || copy[i] == '\0') {
            bool last = i == size - 1;
            copy[i] = '\0';
            char *t = NULL;
            unsigned char b0 = (unsigned char)w[0], b1 = b0 ? (unsigned char)w[1] : 0;
            if (b0 >= 1 && b0 < 0x20)
                t = tokens[n_tokens++] =
                    strdup(dictionary[(b1 >= 1 && b1 < 0x20 ? b0 * 32u + b1 : b0) % N_DICT]);
            argv[argc++] = t ? t : w;
            w = copy + i + 1;
            if (last)
                break;
        }
    }
    argv[argc] = NULL;

    parse p;
    run(&p, argc, argv);
    check(&p, argc, argv, command_at == 1);

    const char *last_word = argc > command_at + 1 ? argv[argc - 1] : "-x";
    if (plant && command_at > 0 && argc < MAX_WORDS && strlen(last_word) <= 1000) {
        /* `--object WORD` right after the command, WORD the last word of the input; once
         * with a plain NAME there */
        /* "--object WORD", or "--object=WORD" (the only way to give the NAME "--", which
         * otherwise starts COMMAND) */
        bool joined = strcmp(last_word, "--") == 0 || size % 2;
        char *word = malloc(strlen(last_word) + 10), plain[] = "--object=plain";
        strcpy(word, joined ? "--object=" : "");
        strcat(word, last_word);
        char *a[MAX_WORDS + 8], *b[MAX_WORDS + 8];
        int n = 0;
        for (int i = 0; i <= command_at; i++)
            a[n] = b[n] = argv[i], n++;
        if (!joined)
            a[n] = b[n] = (char *)"--object", n++;
        int at = n;
        a[n] = word;
        b[n] = joined ? plain : plain + 9;
        n++;
        for (int i = command_at + 1; i < argc && n < MAX_WORDS + 6; i++)
            a[n] = b[n] = argv[i], n++;
        a[n] = b[n] = NULL;
        parse pa, pb;
        run(&pa, n, a);
        run(&pb, n, b);
        check(&pa, n, a, true);
        check(&pb, n, b, true);
        same_but_name(&pa, &pb, a, b, at, joined);
        free(word);
    }
    for (int i = 0; i < n_tokens; i++)
        free(tokens[i]);
    free(copy);
    return 0;
}
