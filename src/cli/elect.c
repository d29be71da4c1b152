/*
 * `baton elect NAME -- COMMAND` and `baton leader NAME`: leader election for shell scripts
 * (etcdctl elect's two forms). elect campaigns, then runs COMMAND while leader the way
 * `lock` runs it (cli_run: the lost descriptor and a --lease's end watched, a deposed
 * leader's COMMAND ended with SIGTERM, exit 122), and resigns when COMMAND ends, so that a
 * standby takes over at once. leader prints the current leader, or follows every change (--watch).
 */
#define _GNU_SOURCE
#include "cli.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char cli_elect_usage[] =
    "baton [--url URL] elect NAME [--value V] [-n | -w DUR] [-E CODE] [-q]"
    " [--lease DUR | --watchdog DUR] [--kill-after DUR] [--notify] -- COMMAND [ARG...]";
const char cli_elect_help[] =
    "  elect NAME -- COMMAND      Campaign for the leadership of NAME and run COMMAND while\n"
    "                             leader; standbys wait and take over when the leader ends\n"
    "                             or dies. COMMAND gets the term as BATON_FENCING_TOKEN; a\n"
    "                             deposed leader's COMMAND gets SIGTERM (exit 122). The\n"
    "                             leadership is resigned when COMMAND ends.\n"
    "      --value V              the leader's value, shown by `baton leader` (default:\n"
    "                             HOST:PID)\n"
    "      -w, --wait DUR         give up after DUR as a standby (default: wait forever)\n"
    "      -n, --nonblock         one attempt: the same as --wait 0\n"
    "      -E, --conflict-exit-code CODE  exit with CODE when not elected (default 124)\n"
    "      -q, --quiet            say nothing when not elected\n"
    "      --watchdog DUR         the leadership's lease, renewed every DUR/3 (default 30s):\n"
    "                             a dead leader is replaced within DUR + DUR/3\n"
    "      --lease DUR            a fixed lease, not renewed: the leadership ends DUR after\n"
    "                             the election (COMMAND still running gets SIGTERM, exit\n"
    "                             122) and a standby takes over then\n"
    "      --kill-after DUR       SIGKILL DUR after SIGTERM when deposed (10s)\n"
    "      --notify               tell systemd (Type=notify) READY=1 once elected, STATUS=\n"
    "                             while a standby\n";
const char cli_leader_usage[] = "baton [--url URL] leader NAME [--watch] [--json]";
const char cli_leader_help[] =
    "  leader NAME                print the leader of the election NAME: term, value, host,\n"
    "                             pid, since (exit 1 if nobody leads)\n"
    "      --watch                then print every change (elected, proclaimed, resigned,\n"
    "                             expired), one line each, until interrupted\n"
    "      --json                 one JSON object per line\n";

enum {
    OPT_VALUE = 0x2000,
    OPT_LEASE,
    OPT_WATCHDOG,
    OPT_KILL_AFTER,
    OPT_WATCH,
    OPT_JSON,
    OPT_NOTIFY
};

static const struct option elect_options[] = {CLI_ARG("value", OPT_VALUE),
                                              {"wait", required_argument, NULL, 'w'},
                                              CLI_FLAG("nonblock", 'n'),
                                              {"conflict-exit-code", required_argument, NULL, 'E'},
                                              CLI_FLAG("quiet", 'q'),
                                              CLI_ARG("lease", OPT_LEASE),
                                              CLI_ARG("watchdog", OPT_WATCHDOG),
                                              CLI_ARG("kill-after", OPT_KILL_AFTER),
                                              CLI_FLAG("notify", OPT_NOTIFY),
                                              CLI_END};

static int bad_duration(const char *cmd, const char *opt, const char *arg)
{
    return cli_usage_error(cmd, "bad duration '%s' for %s (" CLI_DURATION_HINT ")", arg, opt);
}

/* ------------------------------- elect ---------------------------------------------- */

typedef struct elect_args {
    const char *name, *value;
    int64_t wait_ms, lease_ms, watchdog_ms, kill_after_ms, code;
    bool quiet, has_lease;
    char **command;
} elect_args;

static int elect_parse(cli_global *g, int argc, char **argv, elect_args *a)
{
    *a = (elect_args){.wait_ms = BATON_WAIT_FOREVER,
                      .kill_after_ms = CLI_DEFAULT_KILL_AFTER_MS,
                      .code = EXIT_NOT_ACQUIRED};
    cli_opts o;
    cli_opts_init(&o, "elect", g, argc, argv, "w:nE:q", elect_options);
    a->command = o.rest;
    int rc = 0, c;
    while (!rc && (c = cli_opts_next(&o)) != CLI_OPT_END) {
        switch (c) {
        case OPT_VALUE:
            a->value = o.arg;
            break;
        case 'w':
            if (!cli_parse_wait(o.arg, &a->wait_ms))
                rc = bad_duration("elect", "--wait", o.arg);
            break;
        case 'n':
            a->wait_ms = 0;
            break;
        case 'E':
            if (!cli_parse_count(o.arg, 255, &a->code))
                rc = cli_usage_error("elect", "-E needs an exit code from 0 to 255, not '%s'",
                                     o.arg);
            break;
        case 'q':
            a->quiet = true;
            break;
        case OPT_LEASE:
            a->has_lease = true;
            if (!cli_parse_duration(o.arg, &a->lease_ms))
                rc = bad_duration("elect", "--lease", o.arg);
            else if (a->lease_ms == 0)
                rc = cli_usage_error("elect", "--lease must be more than 0");
            break;
        case OPT_WATCHDOG:
            if (!cli_parse_duration(o.arg, &a->watchdog_ms))
                rc = bad_duration("elect", "--watchdog", o.arg);
            else if (a->watchdog_ms < 30)
                rc = cli_usage_error("elect", "--watchdog must be at least 30ms");
            break;
        case OPT_KILL_AFTER:
            if (!cli_parse_duration(o.arg, &a->kill_after_ms))
                rc = bad_duration("elect", "--kill-after", o.arg);
            break;
        case OPT_NOTIFY:
            if (!cli_notify_supported())
                rc = cli_usage_error("elect", "--notify: this baton was built without "
                                              "libsystemd (sd_notify)");
            g->notify = true;
            break;
        case CLI_OPT_WORD:
        case CLI_OPT_NAME:
            if ((rc = cli_one_word(&o, &a->name, NULL)) == 0)
                cli_note_name(g, o.arg);
            break;
        default:
            rc = EXIT_USAGE;
        }
    }
    if (!rc && a->has_lease && a->watchdog_ms)
        rc = cli_usage_error("elect", "--lease and --watchdog exclude each other");
    if (!rc && !a->name)
        rc = cli_usage_error("elect", "no election NAME");
    if (!rc && !a->command)
        rc = cli_usage_error("elect", "missing '--' before COMMAND");
    if (!rc && !a->command[0])
        rc = cli_usage_error("elect", "no COMMAND after '--'");
    return rc;
}

/* A fixed lease's end (cli_lease_end): the leadership is the lock hash at NAME. */
static int64_t lease_end(baton_client *c, const char *name, int64_t lease_ms)
{
    baton_lock *l = NULL;
    if (baton_lock_open(c, name, &l) != BATON_OK)
        return cli_now_ms() + lease_ms;
    int64_t end = cli_lease_end(&l, 1, lease_ms);
    baton_lock_close(l);
    return end;
}

/* ": led by HOST pid PID for 2.4s (term T)" into buf, or "" when no leader can be read. */
static void led_by(baton_client *c, baton_election *e, const char *name, char *buf, size_t len)
{
    baton_leader *ld = calloc(1, sizeof *ld);
    baton_inspection *s = NULL;
    buf[0] = '\0';
    if (ld && baton_election_leader(e, ld) == BATON_OK && ld->term > 0) {
        char since[64] = "";
        if (baton_inspect(c, name, &s) == BATON_OK && s && s->server_time_ms >= ld->since_ms) {
            int64_t ms = s->server_time_ms - ld->since_ms;
            snprintf(since, sizeof since, " for %lld.%llds", (long long)(ms / 1000),
                     (long long)(ms % 1000 / 100));
        }
        snprintf(buf, len, ": led by %s pid %lld%s (term %lld)", ld->host, (long long)ld->pid,
                 since, (long long)ld->term);
    }
    baton_inspection_free(s);
    free(ld);
}

static int resign_bounded(void *e)
{
    return baton_election_resign(e);
}

int cli_cmd_elect(cli_global *g, int argc, char **argv)
{
    elect_args a;
    int rc = elect_parse(g, argc, argv, &a);
    baton_client *c;
    g->watchdog_ms = a.watchdog_ms;
    if (!cli_start(g, &rc, &c))
        return rc;
    baton_election *e = NULL;
    int brc = baton_election_open(c, a.name, &e);
    char value[300];
    if (!a.value) {
        char host[256] = "";
        gethostname(host, sizeof host - 1);
        snprintf(value, sizeof value, "%s:%d", host, (int)getpid());
        a.value = value;
    }
    cli_notify_status(g, "standby for election %s", a.name);
    if (brc == BATON_OK)
        brc = baton_election_campaign(e, a.value, a.wait_ms,
                                      a.has_lease ? a.lease_ms : BATON_LEASE_WATCHDOG);
    if (brc == BATON_ETIMEDOUT) {
        if (!a.quiet) {
            char shown[32], who[600] = "";
            if (a.wait_ms == BATON_WAIT_FOREVER)
                snprintf(shown, sizeof shown, "?");
            else if (a.wait_ms % 1000 || a.wait_ms == 0)
                snprintf(shown, sizeof shown, "%lldms", (long long)a.wait_ms);
            else
                snprintf(shown, sizeof shown, "%llds", (long long)(a.wait_ms / 1000));
            led_by(c, e, a.name, who, sizeof who);
            cli_error("election %s: not elected within %s%s; not run: %s", a.name, shown, who,
                      a.command[0]);
        }
        rc = (int)a.code;
    } else if (brc != BATON_OK) {
        rc = cli_fail(c, brc, "election %s", a.name);
    } else {
        cli_guard_hold();
        int64_t term = 0;
        baton_election_term(e, &term);
        cli_notify_ready(g, "leader of election %s (term %lld)", a.name, (long long)term);
        char token_env[64], what[1100];
        snprintf(token_env, sizeof token_env, "BATON_FENCING_TOKEN=%lld", (long long)term);
        snprintf(what, sizeof what, "leadership of %s", a.name);
        int fd = -1;
        size_t nfd = baton_election_lost_fd(e, &fd) == BATON_OK ? 1 : 0;
        cli_watch w = {&fd,  nfd,       a.has_lease ? lease_end(c, a.name, a.lease_ms) : 0,
                       what, token_env, a.kill_after_ms,
                       c};
        cli_outcome out;
        cli_run(a.command, &w, &out);
        if (!out.lost) {
            brc = baton_election_resign(e);
            if (out.ran && brc == BATON_ENOTHELD) {
                cli_error("%s was lost before %s finished (found at resign)", what, a.command[0]);
                rc = EXIT_LOST;
            } else {
                rc = out.status;
            }
        } else {
            if (!cli_call_bounded(resign_bounded, e, CLI_LOST_RELEASE_MS, &brc))
                cli_exit_now(EXIT_LOST);
            rc = EXIT_LOST;
        }
    }
    baton_election_close(e);
    baton_client_close(c);
    return rc;
}

/* ------------------------------- leader --------------------------------------------- */

static const struct option leader_options[] = {CLI_FLAG("watch", OPT_WATCH),
                                               CLI_FLAG("json", OPT_JSON), CLI_END};

static const char *change_word(baton_election_change ch)
{
    switch (ch) {
    case BATON_ELECTION_ELECTED:
        return "elected";
    case BATON_ELECTION_PROCLAIMED:
        return "proclaimed";
    case BATON_ELECTION_RESIGNED:
        return "resigned";
    case BATON_ELECTION_EXPIRED:
        return "expired";
    }
    return "?";
}

/* One line: a leader (change NULL) or a change of it. */
static void print_leader(const char *name, const char *change, int64_t time_ms,
                         const baton_leader *ld, bool json)
{
    if (json) {
        printf("{\"name\":");
        cli_json_str(name);
        if (change)
            printf(",\"change\":\"%s\",\"time_ms\":%lld", change, (long long)time_ms);
        if (ld->term > 0) {
            printf(",\"term\":%lld,\"value\":", (long long)ld->term);
            cli_json_str(ld->value);
            printf(",\"host\":");
            cli_json_str(ld->host);
            printf(",\"pid\":%lld,\"since_ms\":%lld", (long long)ld->pid, (long long)ld->since_ms);
        } else {
            printf(",\"term\":0");
        }
        printf("}\n");
    } else if (ld->term == 0) {
        printf("%s: no leader\n", cli_esc(name));
    } else {
        if (change)
            printf("%s ", change);
        printf("term %lld value %s host %s pid %lld since %lld\n", (long long)ld->term,
               cli_esc(ld->value), cli_esc(ld->host), (long long)ld->pid, (long long)ld->since_ms);
    }
    fflush(stdout);
}

/* leader --watch: says on stderr when the observation skipped log entries it cannot read
 * (another writer's): counted, never the watch's end. */
static void tell_skipped(baton_election *e, const char *name, int64_t *told)
{
    int64_t n = 0;
    if (baton_election_skipped(e, &n) == BATON_OK && n > *told) {
        cli_eprintf("warning: election %s: skipped %lld log entr%s not written by baton (%lld "
                    "in all)",
                    name, (long long)(n - *told), n - *told == 1 ? "y" : "ies", (long long)n);
        *told = n;
    }
}

int cli_cmd_leader(cli_global *g, int argc, char **argv)
{
    const char *name = NULL;
    bool watch = false, json = false;
    cli_opts o;
    cli_opts_init(&o, "leader", g, argc, argv, "", leader_options);
    int rc = o.rest ? cli_usage_error("leader", "unexpected '--'") : 0, c;
    while (!rc && (c = cli_opts_next(&o)) != CLI_OPT_END) {
        if (c == OPT_WATCH) {
            watch = true;
        } else if (c == OPT_JSON) {
            json = true;
        } else if (c == CLI_OPT_WORD || c == CLI_OPT_NAME) {
            if ((rc = cli_one_word(&o, &name, NULL)) == 0)
                cli_note_name(g, o.arg);
        } else {
            rc = EXIT_USAGE;
        }
    }
    cli_opts_free(&o);
    if (!rc && !name)
        rc = cli_usage_error("leader", "no election NAME");
    baton_client *cl;
    if (!cli_start(g, &rc, &cl))
        return rc;
    baton_election *e = NULL;
    int brc = baton_election_open(cl, name, &e);
    baton_leader *ld = calloc(1, sizeof *ld);
    baton_election_event *ev = calloc(1, sizeof *ev);
    if (!ld || !ev)
        brc = BATON_ENOMEM;
    if (brc == BATON_OK)
        brc = baton_election_leader(e, ld);
    if (brc != BATON_OK) {
        rc = cli_fail(cl, brc, "election %s", name);
    } else {
        print_leader(name, NULL, 0, ld, json);
        rc = ld->term > 0 || watch ? EXIT_OK : EXIT_NO;
        if (watch) {
            /* the first observation is the latest change: the state just printed */
            brc = baton_election_observe_next(e, 0, ev);
            int64_t told = 0;
            while (brc == BATON_OK || brc == BATON_ETIMEDOUT) {
                tell_skipped(e, name, &told);
                brc = baton_election_observe_next(e, BATON_WAIT_FOREVER, ev);
                tell_skipped(e, name, &told);
                if (brc == BATON_OK)
                    print_leader(name, change_word(ev->change), ev->time_ms, &ev->leader, json);
            }
            rc = cli_fail(cl, brc, "election %s: watch", name);
        }
    }
    free(ld);
    free(ev);
    baton_election_close(e);
    baton_client_close(cl);
    return rc;
}
