/*
 * The baton command: flock(1) for a whole cluster. This file is its entry point: the
 * command table, `--help`, `--version`, the options before the command and the dispatch
 * to the commands. What the commands share lives beside it: messages, values and options in
 * opts.c, opening the client in client.c, signals and COMMAND in run.c (the exit codes are
 * listed in cli.h, in `baton --help` and in docs/baton.1.md).
 */
#define _GNU_SOURCE
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * The subcommands (cli_command in cli.h): name, usage line, the lines of `baton --help` (and
 * `baton NAME --help`), and the function. A new subcommand is one more row of commands[]
 * below; the first row's usage line opens `baton --help` and the usage errors.
 */
#define WAIT_HELP                                                                                  \
    "      -w, --wait DUR         give up after DUR if busy (default: wait forever)\n"             \
    "      -n, --nonblock         one attempt: the same as --wait 0\n"                             \
    "      -E, --conflict-exit-code CODE  exit with CODE when busy (default 124)\n"                \
    "      -q, --quiet            say nothing when busy (nor warn of the server's\n"               \
    "                             maxmemory-policy)\n"                                             \
    "      --kill-after DUR       when the hold is lost or baton dies (even by kill -9),\n"        \
    "                             COMMAND's group gets SIGTERM, and SIGKILL DUR later (10s)\n"     \
    "      --notify               tell systemd (a Type=notify unit) READY=1 once held, and\n"      \
    "                             STATUS= while waiting (sd_notify)\n"

static const cli_command commands[] = {
    {"lock",
     "baton [--url URL] lock NAME... [-n | -w DUR] [-E CODE] [-q] [--lease DUR | --watchdog DUR]"
     " [--fair] [--kill-after DUR] [--verbose] [--notify] -- COMMAND [ARG...]\n"
     "       baton [--url URL] lock NAME... --hold [-n | -w DUR] [-E CODE] [-q]"
     " [--lease DUR | --watchdog DUR] [--fair] [--verbose]",
     "  lock NAME... -- COMMAND    Run COMMAND while holding the lock NAME (several names:\n"
     "                             all of them or none, a multi-lock); exit with its "
     "status.\n" WAIT_HELP
     "      --lease DUR            hold for at most DUR, no renewal (COMMAND still running\n"
     "                             then counts as the lock lost)\n"
     "      --watchdog DUR         renewed lease: the lock expires DUR after baton stops\n"
     "                             renewing it; renewed every DUR/3 (default 30s)\n"
     "      --fair                 fair locks: waiters acquire in the order they asked\n"
     "      --hold                 no COMMAND: hold the lock until SIGINT, SIGTERM or SIGHUP,\n"
     "                             then release it and exit 0 (like etcdctl lock)\n"
     "      --verbose              tell acquire time, renewals and release on stderr\n",
     cli_cmd_lock},
    {"rwlock",
     "baton [--url URL] rwlock NAME --read | --write [-n | -w DUR] [-E CODE] [-q]"
     " [--lease DUR | --watchdog DUR] [--kill-after DUR] [--verbose] -- COMMAND [ARG...]\n"
     "       baton [--url URL] rwlock NAME --read | --write --hold [-n | -w DUR] [-E CODE] [-q]"
     " [--lease DUR | --watchdog DUR] [--verbose]",
     "  rwlock NAME --read -- COMMAND   Run COMMAND holding the read lock of the read-write\n"
     "                             lock NAME (beside other readers, no writer); --write:\n"
     "                             holding its write lock (alone). Redisson's RReadWriteLock;\n"
     "                             a waiting writer holds back new readers.\n"
     "      --read, --write        which half to hold (one of them is required)\n" WAIT_HELP
     "      --lease DUR            hold for at most DUR, no renewal (COMMAND still running\n"
     "                             then counts as the lock lost)\n"
     "      --watchdog DUR         renewed lease: the lock expires DUR after baton stops\n"
     "                             renewing it; renewed every DUR/3 (default 30s)\n"
     "      --hold                 no COMMAND: hold until SIGINT, SIGTERM or SIGHUP, then\n"
     "                             release and exit 0\n"
     "      --verbose              tell acquire time, renewals and release on stderr\n",
     cli_cmd_rwlock},
    {"semaphore",
     "baton [--url URL] semaphore NAME [--permits N] [--take K] [-n | -w DUR] [-E CODE] [-q]"
     " [--watchdog DUR | --counting] [--kill-after DUR] -- COMMAND [ARG...]\n"
     "       baton [--url URL] semaphore NAME [--counting] set N | add [-]N | drain | delete",
     "  semaphore NAME -- COMMAND  Run COMMAND holding K permit leases of the semaphore NAME;\n"
     "                             a killed baton's permits come back when their lease ends.\n"
     "      --permits N            set the semaphore to N permits if it has no count yet\n"
     "      --take K               permits to take (default 1)\n"
     "      --watchdog DUR         the lease, renewed every DUR/3 while COMMAND runs\n"
     "                             (default 30s)\n"
     "      --counting             Redisson's RSemaphore instead: no lease, no owner\n" WAIT_HELP
     "  semaphore NAME set N       set the permits to N if no count is set (exit 1 if one is)\n"
     "  semaphore NAME add [-]N    add N permits (or take them away)\n"
     "  semaphore NAME drain       take every available permit; print how many\n"
     "  semaphore NAME delete      delete the semaphore (exit 1 if absent)\n",
     cli_cmd_semaphore},
    {"latch",
     "baton [--url URL] latch NAME set N | count-down | count | await [--timeout DUR] | delete",
     "  latch NAME set N           set the count to N if none is set (exit 1 if one is)\n"
     "  latch NAME count-down      count down by one (at zero the latch opens)\n"
     "  latch NAME count           print the count (0: open or never set)\n"
     "  latch NAME await           wait until the count is zero\n"
     "      --timeout DUR          give up after DUR (default: wait forever)\n"
     "  latch NAME delete          delete the latch, waking its waiters (exit 1 if absent)\n",
     cli_cmd_latch},
    {"status", "baton [--url URL] status NAME... [--json | --watch [--interval DUR]]",
     "  status NAME...             show what lives at each NAME: lock holders, hold counts\n"
     "                             and TTL, a fair lock's queue, a semaphore's permits or a\n"
     "                             latch's count\n"
     "      --json                 the same as JSON\n"
     "      --watch                redraw every --interval DUR (default 1s) until Ctrl-C\n",
     cli_cmd_status},
    {"list", "baton [--url URL] list [PATTERN] [--json] [--max-keys N]",
     "  list [PATTERN]             every lock, fair lock, read-write lock, semaphore, permit\n"
     "                             semaphore and latch whose NAME matches PATTERN (a Redis\n"
     "                             glob, default '*'): kind, holders (host, pid), TTL,\n"
     "                             waiters; by SCAN, on every master of a Cluster\n"
     "      --json                 the same as JSON (the fields of status --json)\n"
     "      --max-keys N           examine at most N keys in all (default 100000); when\n"
     "                             cut short, list says so (and exits 0)\n",
     cli_cmd_list},
    {"unlock", "baton [--url URL] unlock --force NAME",
     "  unlock --force NAME        delete the lock NAME whoever holds it (exit 1 if it was\n"
     "                             not locked)\n",
     cli_cmd_unlock},
    {"elect", cli_elect_usage, cli_elect_help, cli_cmd_elect},
    {"leader", cli_leader_usage, cli_leader_help, cli_cmd_leader},
    {"barrier", cli_barrier_usage, cli_barrier_help, cli_cmd_barrier},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static const char help_head[] =
    "baton: distributed locks, semaphores and latches for shell scripts, over Redis\n"
    "(Redisson-compatible: a Java service using Redisson can share the same locks).\n"
    "\n"
    "Usage:\n";

static const char help_tail[] =
    "\n"
    "Options:\n"
    "  --url URL   the server: redis://[[USER]:PASSWORD@]HOST[:PORT][/DB], rediss://...\n"
    "              over TLS, redis+sentinel://HOST[:PORT][,HOST[:PORT]...]/MASTER[/DB]\n"
    "              (the sentinels; rediss+sentinel:// over TLS), redis+cluster://HOST[:PORT]\n"
    "              [,HOST[:PORT]...] (any nodes of a Redis Cluster; rediss+cluster://) or\n"
    "              unix:///PATH[?db=N]; -u URL (redis-cli's spelling) is the same;\n"
    "              default $BATON_URL, else " CLI_DEFAULT_URL "\n"
    "  --user USER the user name for AUTH (Redis 6 ACL)\n"
    "  --askpass   read the password from stdin (without echo on a terminal; none: exit 2)\n"
    "  --password-file FILE  the password is FILE's first line (FILE readable by every\n"
    "              user: refused, exit 2). Without either: $BATON_PASSWORD, else\n"
    "              $REDISCLI_AUTH, else $CREDENTIALS_DIRECTORY/baton-password (systemd's\n"
    "              LoadCredential=), else the URL's\n"
    "  --tls-ca FILE, --tls-cert FILE, --tls-key FILE, --tls-sni NAME, --tls-insecure\n"
    "              TLS with rediss:// URLs: the CA that verifies the server (default: the\n"
    "              system's), a client certificate and key (mutual TLS), the name to verify,\n"
    "              or no verification at all (tests only); $BATON_TLS_CA, $BATON_TLS_CERT,\n"
    "              $BATON_TLS_KEY. redis-cli's spellings work too: --tls (a redis:// URL\n"
    "              is taken as rediss://), --cacert, --cacertdir, --cert, --key, --sni,\n"
    "              --insecure\n"
    "  --sync-replicas N  an acquisition counts once N replicas have it (WAIT), else it is\n"
    "              undone and baton fails (exit 125): a failover cannot erase the lock\n"
    "  --sync-aof  an acquisition counts once the master's append-only file has it on disk\n"
    "              (WAITAOF; with --sync-replicas N, N replicas' too), else it is undone\n"
    "              and baton fails (exit 125): a power loss cannot erase the lock\n"
    "  --name NAME the connections' name (CLIENT SETNAME, seen in CLIENT LIST); default\n"
    "              baton:HOST:PID\n"
    "  --help      print this help (also after a command);  --version  the version\n"
    "The options above may also follow the command; those that say the server or the\n"
    "credentials (--url, -u, --user, --password-file, TLS) only before the first NAME and\n"
    "there only as two words (--url URL, never --url=URL); --tls-insecure, --insecure and\n"
    "--askpass only before the command. redis-cli's -h HOST, -p PORT, -a PASS, -n DB are\n"
    "refused: write --url redis://HOST:PORT/DB. Long options match by their exact name only.\n"
    "  --object NAME  (after the command) NAME as it is, even if it starts with '-'\n"
    "DUR is 250ms, 10s, 1.5s, 5m, 1m30s, 1h, 1d, or a bare number of seconds; a wait or a\n"
    "timeout may be infinity.\n"
    "COMMAND gets BATON_FENCING_TOKEN (the lock's fencing token) in its environment, and\n"
    "not BATON_PASSWORD, REDISCLI_AUTH or a BATON_URL holding an '@'. It runs in a process\n"
    "group of its own (with the terminal, if baton has it); SIGINT, SIGTERM and SIGHUP sent\n"
    "to baton are forwarded to that group.\n"
    "\n"
    "Exit status:\n"
    "  COMMAND's status      lock and semaphore, when COMMAND ran under the lock\n"
    "  0                     success (latch, status, unlock)\n"
    "  1                     latch set: a count was already set; unlock: was not locked\n"
    "  2                     bad usage\n"
    "  119                   the server's ACL refused a command, key or channel\n"
    "  120                   cannot connect to the server (or lost it while waiting)\n"
    "  121                   authentication refused\n"
    "  122                   the lock was lost while COMMAND ran (COMMAND got SIGTERM)\n"
    "  123                   latch await: --timeout passed before the latch opened\n"
    "  124                   not acquired within --wait; COMMAND did not run\n"
    "  125                   other failure (server error, wrong kind of key)\n"
    "  126, 127              COMMAND could not be run, was not found\n"
    "  128+N                 COMMAND (or baton while waiting) was ended by signal N\n"
    "\n"
    "See man baton (docs/baton.1.md in baton's source) for the full reference.\n";

#if defined(__SANITIZE_THREAD__)
/* ThreadSanitizer sleeps a second at exit by default (atexit_sleep_ms); baton's exit is
 * part of what its tests time. */
const char *__tsan_default_options(void);
const char *__tsan_default_options(void)
{
    return "atexit_sleep_ms=0";
}
#endif

/* ------------------------------- main ------------------------------------------------- */

/* `baton --help` (cmd NULL) or `baton CMD --help`, on stdout. */
static void print_help(const cli_command *cmd)
{
    fputs(cmd ? "" : help_head, stdout);
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!cmd || cmd == &commands[i])
            printf("%s%s\n", cmd ? "usage: " : "  ", commands[i].usage);
    if (!cmd)
        printf("  baton --help | --version\n\nCommands:\n");
    else
        printf("\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!cmd || cmd == &commands[i])
            fputs(commands[i].help, stdout);
    fputs(help_tail, stdout);
}

/* True if args (up to "--") ask for help (--help: -h after the command is refused, it may be
 * redis-cli's -h HOST). The word after --object is a NAME, whatever it is: "--object
 * --help" names the lock "--help". */
static bool wants_help(int argc, char **argv)
{
    for (int i = 0; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (strcmp(argv[i], "--object") == 0 && i + 1 < argc && strcmp(argv[i + 1], "--") != 0)
            i++; /* (a "--" there is COMMAND's start, and --object lacks its value) */
        else if (strcmp(argv[i], "--help") == 0)
            return true;
    }
    return false;
}

/* The options before the command, up to the command's name. Returns -1 to go on with the
 * command at argv[*at], or the exit code to end with (--help and --version: 0). */
static int parse_global(cli_global *g, int argc, char **argv, int *at)
{
    cli_opts o;
    cli_opts_init(&o, NULL, g, argc - 1, argv + 1, "", NULL);
    for (int c; (c = cli_opts_next(&o)) != CLI_OPT_END;) {
        if (c == 'h') {
            print_help(NULL);
            return fflush(stdout) == 0 ? EXIT_OK : EXIT_FAILED;
        } else if (c == 'V') {
            printf("baton %s (libbaton %s)\n", BATON_VERSION_STRING, baton_version());
            return fflush(stdout) == 0 ? EXIT_OK : EXIT_FAILED;
        } else if (c == CLI_OPT_WORD) {
            break;
        } else {
            return EXIT_USAGE; /* printed */
        }
    }
    *at = o.i + 1;
    return -1;
}

/* main() up to running the command; g->parse_only stops before anything is read, opened
 * or run. */
static int cli_main(int argc, char **argv, cli_global *g)
{
    cli_set_commands(commands, N_COMMANDS);
    int i = 0;
    int rc = parse_global(g, argc, argv, &i);
    if (rc >= 0)
        return rc;
    if (i >= argc)
        return cli_usage_error(NULL, "no command");
    const char *cmd = argv[i];
    const cli_command *found = NULL;
    for (size_t k = 0; k < N_COMMANDS && !found; k++)
        if (strcmp(cmd, commands[k].name) == 0)
            found = &commands[k];
    if (!found)
        return cli_usage_error(NULL, "unknown command '%s'", cmd);
    if (wants_help(argc - i - 1, argv + i + 1)) {
        print_help(found);
        return fflush(stdout) == 0 ? EXIT_OK : EXIT_FAILED;
    }
    if (g->parse_only)
        return found->fn(g, argc - i - 1, argv + i + 1);

    const char *tls_env[] = {"BATON_TLS_CA", "BATON_TLS_CERT", "BATON_TLS_KEY"};
    const char **tls_field[] = {&g->tls_ca, &g->tls_cert, &g->tls_key};
    for (size_t k = 0; k < 3; k++)
        if (!*tls_field[k] && getenv(tls_env[k]) && *getenv(tls_env[k]))
            *tls_field[k] = getenv(tls_env[k]);
    const char *env = getenv("BATON_URL");
    if (env && !*env)
        return cli_usage_error(NULL, "BATON_URL is set but empty (unset it for the default "
                                     "server)");

    if (cli_signals_init() != 0)
        return EXIT_FAILED;
    const char *pw = getenv("BATON_PASSWORD");
    g->password = pw && *pw ? pw : getenv("REDISCLI_AUTH"); /* --askpass: read at the open */
    rc = found->fn(g, argc - i - 1, argv + i + 1);
    cli_guard_stop(); /* join the signal thread on every path (a usage error included) */
    if (fflush(stdout) != 0 && rc == EXIT_OK) {
        cli_error("writing the output: %s", strerror(errno));
        rc = EXIT_FAILED;
    }
    return rc;
}

int cli_parse_only(int argc, char **argv, cli_global *g)
{
    g->parse_only = true;
    return cli_main(argc, argv, g);
}

#ifndef BATON_CLI_NO_MAIN
int main(int argc, char **argv)
{
    cli_global g = {0};
    return cli_main(argc, argv, &g);
}
#endif
