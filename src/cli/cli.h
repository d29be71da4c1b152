/*
 * Private to the baton command-line tool (src/cli/): what its files share. The tool is a
 * client of libbaton's public API like any other program; it includes no library-internal
 * header and no hiredis: `status` and `unlock --force` read through baton_inspect().
 */
#ifndef BATON_CLI_H
#define BATON_CLI_H

#include <baton/baton.h>

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Exit codes, documented in docs/baton.1.md and `baton --help`. As with flock(1) and
 * timeout(1), the wrapper's own outcomes sit in a high block that ordinary commands rarely
 * use; below it, `lock` and `semaphore` pass COMMAND's status through unchanged.
 */
enum {
    EXIT_OK = 0,
    EXIT_NO = 1,              /* a query answered "no": latch set found a count already set,
                                 unlock --force found nothing locked */
    EXIT_USAGE = 2,           /* bad usage: unknown option, missing --, bad duration, ... */
    EXIT_PERM = 119,          /* the server's ACL refused a command, key or channel (NOPERM) */
    EXIT_CONN = 120,          /* cannot reach the server, or lost it while waiting */
    EXIT_AUTH = 121,          /* the server refused the credentials */
    EXIT_LOST = 122,          /* the lock was lost while COMMAND ran (COMMAND got SIGTERM) */
    EXIT_AWAIT_TIMEOUT = 123, /* latch await: the latch did not open within --timeout */
    EXIT_NOT_ACQUIRED = 124,  /* lock/semaphore: not acquired within --wait; nothing ran */
    EXIT_FAILED = 125,        /* any other failure of baton itself (server error, wrong type
                                 at the key, out of memory) */
    EXIT_CANNOT_RUN = 126,    /* COMMAND was found but could not be run */
    EXIT_NOT_FOUND = 127,     /* COMMAND was not found */
    EXIT_SIGNAL_BASE = 128,   /* COMMAND (or baton, while waiting) was killed by signal N:
                                 128 + N */
};

/* The global settings every command uses. */
typedef struct cli_global {
    const char *url;           /* --url (given once, before any NAME); NULL if not */
    int64_t watchdog_ms;       /* --watchdog (lock only): client option watchdog_ms; 0 default */
    const char *user;          /* --user, or NULL: the URL's */
    const char *password;      /* --askpass, $BATON_PASSWORD, $REDISCLI_AUTH, or NULL: the URL's */
    bool askpass;              /* --askpass: the password is read from stdin at the open */
    const char *tls_ca;        /* --tls-ca or $BATON_TLS_CA: client option tls_ca */
    const char *tls_cert;      /* --tls-cert or $BATON_TLS_CERT */
    const char *tls_key;       /* --tls-key or $BATON_TLS_KEY */
    const char *tls_sni;       /* --tls-sni */
    bool tls_insecure;         /* --tls-insecure (--insecure): tls_insecure_skip_verify */
    bool tls;                  /* --tls: a redis:// URL (or redis+sentinel://, redis+cluster://)
                                  is taken as its TLS form, rediss:// */
    const char *password_file; /* --password-file FILE: the password is its first line */
    const char *client_name;   /* --name: CLIENT SETNAME; NULL: baton:<host>:<pid> */
    int sync_replicas;         /* --sync-replicas: client option sync_replicas */
    bool sync_aof;             /* --sync-aof: client option sync_aof */
    bool verbose; /* --verbose (lock only): the library's events, DEBUG up, on stderr */
    bool notify;  /* --notify (lock, rwlock, semaphore, elect): sd_notify READY=1 once held */
    bool quiet;   /* -q: no warning at the open either (the maxmemory-policy's) */

    /* Parsing only (the argument parser's fuzz target): the command parses its arguments,
     * records its NAMEs here and returns without connecting or running anything. */
    bool parse_only;
    const char **names; /* room for argc NAMEs, provided by the caller */
    size_t n_names;
} cli_global;

#define CLI_DEFAULT_URL "redis://127.0.0.1:6379"
/* --name's longest value */
#define CLI_MAX_CLIENT_NAME 128

/* --watchdog's least value: the library's own floor, MIN_WATCHDOG_MS in src/core/client.c
 * (baton_options.watchdog_ms), checked here first so that the usage error names the option. */
#define CLI_MIN_WATCHDOG_MS 30

/* The lock whose hold marks the open's warning as told today (client.c). */
#define CLI_WARNED_MARKER "baton:warned:maxmemory"

/*
 * The files and who calls whom: opts.c (messages, values, option parsing) calls only the
 * library; client.c (the open), run.c (signals, COMMAND) and command.c (the acting
 * commands' shared options, command.h) call opts.c; the commands, one file each (lock.c,
 * semaphore.c, latch.c, unlock.c, elect.c, barrier.c, status.c), call those; main.c (the
 * command table, help, dispatch) calls them all, and nothing calls it.
 */

/* ------------------------------- main.c: the command table ---------------------------- */

/*
 * A subcommand: its name, usage line(s), the lines of `baton --help` (and `baton NAME
 * --help`), and the function that runs it with the arguments after its name (argv[0] is the
 * first of them). The table is `commands[]` in main.c: a new subcommand is one more row there
 * (and its function declared below, in its own file).
 */
typedef struct cli_command {
    const char *name;
    const char *usage;
    const char *help;
    int (*fn)(cli_global *g, int argc, char **argv);
} cli_command;

/* ------------------------------- opts.c: messages and values -------------------------- */

/* Hands the command table to cli_usage_error (main() does it first). */
void cli_set_commands(const cli_command *table, size_t n);

/* Prints "baton: <message>" and the one-line usage of `command` (NULL: all) on stderr;
 * returns EXIT_USAGE. */
int cli_usage_error(const char *command, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prints "baton: <message>\n" on stderr, the message escaped as cli_esc does. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same (a line that is not an error: "acquired ...", "warning: ..."). */
void cli_eprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The one escaping rule for every line a human reads (stdout and stderr): C0 and C1 control
 * characters (ESC, newline, CSI...), DEL and bytes that are not UTF-8 come out as \xNN, so
 * that no name, value or server text can move the cursor, recolour the screen or forge a
 * line. The result lives until the 16th call after this one. */
const char *cli_esc(const char *s);
/* A JSON string on stdout, the one way --json encodes bytes everywhere: valid UTF-8 as it
 * is, C0 and C1 control characters as \u00NN (\n, \t, \", \\), and each byte that is not UTF-8 as
 * the code point of the same number (\u0080..\u00ff). */
void cli_json_str(const char *s);
/* A duration for a message: as an option would be written ("250ms", "2s"), or as a
 * reading ("1.500s" under 10 s, "12s" from there, "-0.250s" in the past). */
typedef enum cli_duration_style { CLI_DURATION_OPTION, CLI_DURATION_READING } cli_duration_style;
void cli_format_duration(int64_t ms, cli_duration_style style, char *buf, size_t len);

/* Parses a duration: numbers with units ms, s, m, h, d, fractions and sums allowed ("250ms",
 * "1.5s", "1m30s", "1d"), or a bare number of seconds ("3", "0.25"), from 0 to
 * BATON_MAX_DURATION_MS, rounded down to whole ms. Returns false (with *ms untouched) if s is
 * not one. */
bool cli_parse_duration(const char *s, int64_t *ms);
/* A wait's or a timeout's duration: cli_parse_duration's, or "infinity" (timeout(1)'s and
 * systemd's word; also "inf"): BATON_WAIT_FOREVER. */
bool cli_parse_wait(const char *s, int64_t *ms);
#define CLI_DURATION_HINT "use 250ms, 10s, 5m, 1h, 1d, or seconds; infinity for a wait"

/* Parses a non-negative decimal integer up to max. */
bool cli_parse_count(const char *s, int64_t max, int64_t *out);

/* The exit code for a library return code: EXIT_OK, EXIT_CONN, EXIT_AUTH, EXIT_PERM,
 * EXIT_USAGE (invalid argument), or EXIT_FAILED. */
int cli_exit_code(int rc);
/* The exit code for a failed baton call (cli_exit_code). Prints "baton: <what>: <reason>"
 * first. */
int cli_fail(baton_client *c, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* After a call that succeeded with a warning in baton_client_errmsg (a PUBLISH the ACL
 * refused: done, waiters not told): prints "baton: warning: <what>: <warning>". */
void cli_warn(baton_client *c, const char *what);

/* Who holds NAME, for a "not acquired" message, into buf: "held by HOST pid PID and HOST2
 * pid PID2, its lease ends in 28.1s" (a holder that is not baton: its owner field), or a
 * semaphore's "0 permits free, 2 permit leases held". False (buf "") when nothing can be
 * said: free by now, or the inspection refused. */
bool cli_who_holds(baton_client *c, const char *name, char *buf, size_t len);

/* Sets g->url from --url: a usage error (EXIT_USAGE, printed) if it is empty or a URL was
 * given already; EXIT_OK otherwise. */
int cli_set_url(cli_global *g, const char *url);

/* ------------------------------- opts.c: options -------------------------------------- */

struct option;

/* Rows of a getopt.h long-option table (struct option): an option that takes a value, one
 * that does not, and the table's end. */
#define CLI_ARG(name, val)                                                                         \
    {                                                                                              \
        name, required_argument, NULL, val                                                         \
    }
#define CLI_FLAG(name, val)                                                                        \
    {                                                                                              \
        name, no_argument, NULL, val                                                               \
    }
#define CLI_END                                                                                    \
    {                                                                                              \
        NULL, 0, NULL, 0                                                                           \
    }

/* The global options' values (cli_opts_next applies them to the cli_global itself). */
enum {
    CLI_G_URL = 0x1000,
    CLI_G_USER,
    CLI_G_ASKPASS,
    CLI_G_TLS_CA,
    CLI_G_TLS_CERT,
    CLI_G_TLS_KEY,
    CLI_G_TLS_SNI,
    CLI_G_TLS_INSECURE,
    CLI_G_SYNC_REPLICAS,
    CLI_G_TLS,           /* redis-cli's --tls: redis:// taken as rediss:// */
    CLI_G_PASSWORD_FILE, /* --password-file FILE */
    CLI_G_NAME,          /* --name NAME: CLIENT SETNAME */
    CLI_G_SYNC_AOF,      /* --sync-aof: WAITAOF after acquisitions */
    CLI_G_OBJECT,        /* --object NAME (the last: the ones before it are global) */
};

/* One command's arguments (or baton's own before the command); see opts.c. */
typedef struct cli_opts {
    const char *command;           /* "lock", ...: for usage lines; NULL: before the command */
    cli_global *g;                 /* where the global options go */
    int argc;                      /* the words before "--" */
    char **argv;                   /* (borrowed) */
    int i;                         /* the next word */
    const char *cluster;           /* the rest of a "-abc" group being read, or NULL */
    char **rest;                   /* the words after "--" (COMMAND), or NULL: no "--" */
    const char *shortopts;         /* the command's short options ("w:nq") */
    const struct option *longopts; /* the command's long options (getopt.h's table) */
    const char *arg;               /* the value of the option, or the word, just returned */
    const char *word;              /* the option as written ("--wait", "-w"), for messages */
    bool inline_value;             /* the value just taken was in the option's word
                                      ("--url=URL", "-uURL") */
    bool saw_word;                 /* a word (NAME, verb, number) or --object came already */
    char word_buf[80];
} cli_opts;

/* What cli_opts_next() returns besides an option's val. */
enum { CLI_OPT_END = -1, CLI_OPT_WORD = -2, CLI_OPT_ERROR = -3, CLI_OPT_NAME = -4 };

/* Prepares to parse argv[0..argc) for `command`, splitting it at the first "--" (command
 * NULL: baton's own options before the command; the command's name is then returned as a
 * word and left at argv[o->i]). Returns 0. */
int cli_opts_init(cli_opts *o, const char *command, cli_global *g, int argc, char **argv,
                  const char *shortopts, const struct option *longopts);
void cli_opts_free(cli_opts *o);
/* The next option's val (o->arg: its value), CLI_OPT_WORD (o->arg: the positional word, in
 * order), CLI_OPT_NAME (o->arg: a NAME given by --object, taken as it is), CLI_OPT_END, or
 * CLI_OPT_ERROR after a usage error was printed (exit EXIT_USAGE). The global options are
 * applied to o->g and not returned; before the command, -h/--help and -V/--version are
 * returned as 'h' and 'V'. */
int cli_opts_next(cli_opts *o);
/* The next word if it is a negative number ("-3"), consumed; else NULL. For a command that
 * takes one where it expects a number. */
const char *cli_opts_take_number(cli_opts *o);

/* A command's one positional word (its NAME, a PATTERN: o->arg) into *slot. A second is a
 * usage error, "one WHAT only ('X' is a second)", or "unexpected 'X'" when what is NULL.
 * Returns 0 or EXIT_USAGE (printed). */
int cli_one_word(const cli_opts *o, const char **slot, const char *what);

/* Records a NAME the command was given (parse_only: into g->names). */
void cli_note_name(cli_global *g, const char *name);

/* Parses the whole command line as main() does (argv[0] is the program), without reading
 * a password, connecting or running anything: for the fuzz target. g->names must have room
 * for argc NAMEs. Returns the exit code a usage error would give (printed), or 0. */
int cli_parse_only(int argc, char **argv, cli_global *g);

/* ------------------------------- client.c --------------------------------------------- */

/* The server's URL: --url, else $BATON_URL, else CLI_DEFAULT_URL. */
const char *cli_url(const cli_global *g);

/* Opens the client for g (watchdog_ms applied), or prints why not and returns its exit
 * code (EXIT_CONN, EXIT_AUTH, EXIT_USAGE for a malformed URL or a password that cannot be
 * read). An open that leaves a warning (an evicting maxmemory-policy) prints it unless
 * g->quiet, once a day per server (the lock CLI_WARNED_MARKER marks it told). */
int cli_open_client(const cli_global *g, baton_client **out);

/* A command's start once its arguments are parsed: false (with *rc as it is) if the parse
 * failed (*rc, printed) or g->parse_only; else opens the client into *c (cli_open_client),
 * false with *rc its exit code if it cannot. True: go on with *c open (*c NULL otherwise). */
bool cli_start(const cli_global *g, int *rc, baton_client **c);

/* ------------------------------- lock.c, semaphore.c, latch.c, unlock.c --------------- */

/* The commands (cli_command.fn); what they share is command.h. */
int cli_cmd_lock(cli_global *g, int argc, char **argv);
int cli_cmd_semaphore(cli_global *g, int argc, char **argv);
int cli_cmd_latch(cli_global *g, int argc, char **argv);
int cli_cmd_unlock(cli_global *g, int argc, char **argv);
/* `lock` with one half of a read-write lock (--read or --write) instead of locks. */
int cli_cmd_rwlock(cli_global *g, int argc, char **argv);

/* ------------------------------- elect.c, barrier.c --------------------------------- */

/* `elect`, `leader`, `barrier`: their functions, usage lines and help (main.c's rows). */
int cli_cmd_elect(cli_global *g, int argc, char **argv);
int cli_cmd_leader(cli_global *g, int argc, char **argv);
int cli_cmd_barrier(cli_global *g, int argc, char **argv);
extern const char cli_elect_usage[], cli_elect_help[], cli_leader_usage[], cli_leader_help[];
extern const char cli_barrier_usage[], cli_barrier_help[];

/* ------------------------------- status.c --------------------------------------------- */

int cli_cmd_status(cli_global *g, int argc, char **argv);
/* `list [PATTERN]`: every object under PATTERN, by SCAN (baton_scan_keys) and inspection. */
int cli_cmd_list(cli_global *g, int argc, char **argv);

/* ------------------------------- run.c ------------------------------------------------ */

/*
 * Signals. cli_signals_init() runs first in main(): it blocks SIGINT, SIGTERM, SIGHUP and
 * SIGCHLD in the process (every thread the library starts inherits the mask, so the
 * signals stay pending for a signalfd), ignores SIGPIPE (a broken connection is an error
 * return, not a death), and starts the guard: a thread that ends baton with 128 + N when
 * SIGINT, SIGTERM or SIGHUP arrives while baton waits for a lock, permits or a latch.
 *
 * cli_guard_hold() tells the guard that baton now holds something that must be released:
 * a signal arriving after it is recorded instead, and cli_run() returns 128 + N without
 * running COMMAND. cli_guard_stop() ends the guard thread before COMMAND is started.
 */
int cli_signals_init(void);
void cli_guard_hold(void);
/* Ends the guard; returns the signal it recorded while holding, or 0. */
int cli_guard_stop(void);

/* What cli_run() watches while COMMAND runs. */
typedef struct cli_watch {
    const int *lost_fds; /* readable when a hold is lost; may be NULL */
    size_t n_lost_fds;
    int64_t lease_end_ms;  /* a fixed lease ends at this cli_now_ms(); 0 = no such lease */
    const char *what;      /* "lock NAME" for messages */
    const char *token_env; /* "BATON_FENCING_TOKEN=..." to add to the environment, or NULL */
    int64_t kill_after_ms; /* SIGTERM, then SIGKILL this much later (--kill-after) */
    baton_client *client;  /* whose counters name a loss's cause (baton_client_stats); may
                              be NULL */
} cli_watch;

/* The cause of a loss the library counted on c ("deleted or taken over", "expired", "the
 * server restarted", "the master changed"), or a generic sentence when it counted none. */
const char *cli_loss_cause(baton_client *c);

#define CLI_DEFAULT_KILL_AFTER_MS 10000

/* The outcome of cli_run(). */
typedef struct cli_outcome {
    int status; /* exit code to pass through: COMMAND's status, 128 + signal, 126, 127 */
    bool ran;   /* COMMAND was started */
    bool lost;  /* the hold was lost (lost fd or lease) while COMMAND ran */
} cli_outcome;

/*
 * Runs argv[0] (found on PATH) with argv in a process group of its own (in the terminal's
 * foreground if baton was), stdin/stdout/stderr untouched, the environment without the
 * password's variables plus w->token_env, and the signal state baton was started with.
 * Forwards SIGINT, SIGTERM and SIGHUP to its group. Returns when it has exited. If a lost fd
 * becomes readable or the lease runs out first, prints why on stderr, sends the group
 * SIGTERM (SIGKILL w->kill_after_ms later if any of it is still running, COMMAND or not),
 * waits for it and sets out->lost. The group does not outlive baton: if baton dies (even by
 * SIGKILL) it gets SIGTERM at once and SIGKILL w->kill_after_ms later.
 */
void cli_run(char **argv, const cli_watch *w, cli_outcome *out);

/*
 * `lock --hold`: holds until SIGINT, SIGTERM or SIGHUP arrives (EXIT_OK then; the caller
 * releases) or the hold is lost (a lost fd or the lease end of w: prints why, EXIT_LOST).
 */
int cli_hold(const cli_watch *w);

/*
 * Runs fn(arg) on a thread of its own and waits for it at most ms. True, with *rc its
 * result, if it returned in time; false if not: it is still running, on objects the caller
 * must then neither close nor free, and the caller ends baton with cli_exit_now().
 */
bool cli_call_bounded(int (*fn)(void *), void *arg, int64_t ms, int *rc);
/* Flushes the output and ends baton now with code, whatever its threads are doing. */
void cli_exit_now(int code) __attribute__((noreturn));

/* After a loss, how long baton waits for its release (or the return of a semaphore's
 * permits): the hold is over or ends by its lease anyway, and a server that cannot be
 * reached would otherwise keep baton for 3 x (connect + command timeout). */
#define CLI_LOST_RELEASE_MS 1000

/* A fixed lease's end for cli_watch.lease_end_ms, as cli_now_ms(): lease_ms from now, or
 * earlier if a member's key expires sooner. The lease runs from the server's acquire, so each
 * member's remaining TTL is counted from before asking: baton's end is never the later. */
int64_t cli_lease_end(baton_lock *const *members, size_t n, int64_t lease_ms);

/*
 * --notify: systemd's notification protocol (sd_notify(3), libsystemd) for a Type=notify
 * unit. cli_notify_status() tells STATUS= while baton waits; cli_notify_ready() tells
 * READY=1 with a STATUS= once the lock is held or the leadership won, and takes
 * NOTIFY_SOCKET out of the environment COMMAND gets (COMMAND is not the unit's main
 * process: its own notifications would be refused, or taken for baton's). Nothing without
 * g->notify or without $NOTIFY_SOCKET. cli_notify_supported(): whether baton was built
 * with libsystemd (without it, --notify is a usage error).
 */
void cli_notify_status(const cli_global *g, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void cli_notify_ready(const cli_global *g, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
bool cli_notify_supported(void);

/* CLOCK_MONOTONIC in milliseconds. */
int64_t cli_now_ms(void);

#endif /* BATON_CLI_H */
