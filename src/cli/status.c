/*
 * `baton status`: what lives at each name, for an operator ("who holds it, who waits, until
 * when?"), where the other commands answer a holder's questions. The reading is the
 * library's (baton_inspect(), include/baton/inspect.h: one atomic snapshot per name through
 * the client's own connections); this file prints it as text or JSON, once or every
 * --interval (--watch).
 */
#define _GNU_SOURCE
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------- text ------------------------------------------------- */

#define E cli_esc
#define json_str cli_json_str

/* A queue entry's deadline no waiter sets: none (absent, inf, nan) or more than a day
 * ahead. Such an entry never lapses and blocks the queue behind it: a poisoned queue, which
 * `baton unlock --force NAME` clears. */
#define SANE_DEADLINE_MS (24LL * 3600 * 1000)
static bool impossible_deadline(const baton_inspection *s, const baton_inspect_waiter *w)
{
    return !w->has_deadline || w->deadline_ms - s->server_time_ms > SANE_DEADLINE_MS;
}

/* The waiter's host and pid, in a library that fills them (0.4 on). */
static const char *waiter_host(const baton_inspect_waiter *w, int64_t *pid)
{
    bool known = offsetof(baton_inspect_waiter, pid) < w->size;
    *pid = known ? w->pid : 0;
    return known ? w->host : NULL;
}

/* A plain lock's line, if the library that filled s has one (a later field). */
static size_t line_length(const baton_inspection *s)
{
    return offsetof(baton_inspection, n_line) < s->size ? s->n_line : 0;
}

/* A semaphore's line, if the library that filled s has one (a later field). */
static size_t semaphore_line_length(const baton_inspection *s)
{
    return offsetof(baton_inspection, n_semaphore_line) < s->size ? s->n_semaphore_line : 0;
}

/* The waiter a free lock or freed permits are kept for, if the library fills it; NULL. */
static const baton_inspect_waiter *reserved_for(const baton_inspection *s)
{
    return offsetof(baton_inspection, reserved) < s->size ? s->reserved : NULL;
}

/* The permits a semaphore's waiter wants (-1: unknown, or a library without the field). */
static long long waiter_permits(const baton_inspect_waiter *w)
{
    return offsetof(baton_inspect_waiter, permits) < w->size ? (long long)w->permits : -1;
}

/* A waiter's place, owner and process (a queue's or a line's), without the line's end. */
static void print_waiter_text(size_t i, const baton_inspect_waiter *w)
{
    int64_t pid;
    const char *host = waiter_host(w, &pid);
    printf("  %4zu. %s", i + 1, E(w->owner));
    if (host)
        printf("  host %s  pid %lld", E(host), (long long)pid);
}

/* The client status and list read with (an election is told by its record). */
static baton_client *text_client;

/* Whether NAME is an election's leadership lock: its record baton_election:{NAME} is a
 * hash (read with baton_inspect, which changes nothing); *term its term field. */
static bool election_of(const char *name, int64_t *term)
{
    baton_inspection *r = NULL;
    char *key = NULL;
    *term = 0;
    if (!text_client || asprintf(&key, "baton_election:{%s}", name) < 0)
        return false;
    bool yes =
        baton_inspect(text_client, key, &r) == BATON_OK && r && strcmp(r->redis_type, "hash") == 0;
    for (size_t i = 0; yes && i < r->n_holders; i++)
        if (strcmp(r->holders[i]->owner, "term") == 0)
            *term = r->holders[i]->holds;
    baton_inspection_free(r);
    free(key);
    return yes;
}

/* A lock's or a fair lock's lines: state, holders, queue, line, listeners. An election's
 * leadership lock says so, and its line is of standbys. */
static void print_lock_text(const char *name, const baton_inspection *s)
{
    char t[32];
    bool held = strcmp(s->redis_type, "hash") == 0;
    int64_t term = 0;
    bool election = s->kind == BATON_OBJECT_LOCK && election_of(name, &term);
    if (election)
        printf("%s: election (term %lld), leadership ", E(name), (long long)term);
    else if (s->kind == BATON_OBJECT_RWLOCK)
        printf("%s: read-write lock, %s by the holders below, ", E(name),
               strcmp(s->rwlock_mode, "write") == 0 ? "written (\":write\")" : "read");
    else
        printf("%s: %s, ", E(name), s->kind == BATON_OBJECT_LOCK ? "lock" : "fair lock");
    if (!held)
        printf("free");
    else if (s->ttl_ms == -1)
        printf("held, no expiry");
    else
        cli_format_duration(s->ttl_ms, CLI_DURATION_READING, t, sizeof t),
            printf("held, TTL %s", t);
    if (s->has_token)
        printf(", last fencing token %lld", (long long)s->token);
    printf("\n");
    for (size_t i = 0; i < s->n_holders; i++) {
        const baton_inspect_holder *h = s->holders[i];
        if (h->holds >= 0)
            printf("  holder %s  holds %lld", E(h->owner), (long long)h->holds);
        else
            printf("  holder %s  holds ?", E(h->owner));
        if (h->host) /* recorded by baton; a Redisson holder has none */
            printf("  host %s  pid %lld", E(h->host), (long long)h->pid);
        printf("\n");
    }
    if (s->n_queue)
        printf("  queue (%zu waiting, first in line first):\n", s->n_queue);
    for (size_t i = 0; i < s->n_queue; i++) {
        const baton_inspect_waiter *w = s->queue[i];
        const char *bad = impossible_deadline(s, w) ? "  IMPOSSIBLE: never lapses (a poisoned "
                                                      "queue? baton unlock --force clears it)"
                                                    : "";
        print_waiter_text(i, w);
        if (w->has_deadline) {
            cli_format_duration(w->deadline_ms - s->server_time_ms, CLI_DURATION_READING, t,
                                sizeof t);
            printf("  deadline %lld (in %s)%s\n", (long long)w->deadline_ms, t, bad);
        } else {
            printf("  no valid deadline (none, inf or nan)%s\n", bad);
        }
    }
    size_t n_line = line_length(s);
    if (n_line && election)
        printf("  standbys in line (%zu, first in line leads next):\n", n_line);
    else if (n_line)
        printf("  line (%zu starved waiter%s, first in line first):\n", n_line,
               n_line == 1 ? "" : "s");
    for (size_t i = 0; i < n_line; i++) {
        print_waiter_text(i, s->line[i]);
        printf("\n");
    }
    if (s->subscribers_lock && election)
        printf("  %lld standby client%s waiting to lead\n", (long long)s->subscribers_lock,
               s->subscribers_lock == 1 ? "" : "s");
    else if (s->subscribers_lock)
        printf("  %lld client%s subscribed for the unlock message\n",
               (long long)s->subscribers_lock, s->subscribers_lock == 1 ? "" : "s");
}

/* A waiter's ", \"permits\": N" (null when unknown), for json_entry's fields. */
static void json_permits(const baton_inspect_waiter *w, char *buf, size_t len)
{
    long long n = waiter_permits(w);
    if (n >= 0)
        snprintf(buf, len, ", \"permits\": %lld", n);
    else
        snprintf(buf, len, ", \"permits\": null");
}

/* A semaphore's line and a reservation (a lock's or a semaphore's). */
static void print_line_and_reservation_text(const baton_inspection *s)
{
    size_t n = semaphore_line_length(s);
    if (n)
        printf("  line (%zu starved waiter%s, first in line first):\n", n, n == 1 ? "" : "s");
    for (size_t i = 0; i < n; i++) {
        long long want = waiter_permits(s->semaphore_line[i]);
        print_waiter_text(i, s->semaphore_line[i]);
        if (want >= 0)
            printf("  wants %lld permit%s", want, want == 1 ? "" : "s");
        printf("\n");
    }
    const baton_inspect_waiter *w = reserved_for(s);
    if (!w)
        return;
    int64_t pid;
    const char *host = waiter_host(w, &pid);
    long long kept = waiter_permits(w);
    printf("  reserved for %s", E(w->owner));
    if (host)
        printf("  host %s  pid %lld", E(host), (long long)pid);
    if (kept > 0)
        printf("  (%lld permit%s)", kept, kept == 1 ? "" : "s");
    if (w->has_deadline) {
        char t[32];
        cli_format_duration(w->deadline_ms - s->server_time_ms, CLI_DURATION_READING, t, sizeof t);
        printf("  lapses in %s", t);
    }
    printf("\n");
}

static void print_text(const char *name, const baton_inspection *s)
{
    long long v = s->value, sem = s->subscribers_semaphore, latch = s->subscribers_latch;
    switch (s->kind) {
    case BATON_OBJECT_LOCK:
    case BATON_OBJECT_FAIRLOCK:
    case BATON_OBJECT_RWLOCK:
        print_lock_text(name, s);
        break;
    case BATON_OBJECT_SEMAPHORE:
        printf("%s: semaphore, %lld permit%s available, %lld client%s waiting\n", E(name), v,
               v == 1 ? "" : "s", sem, sem == 1 ? "" : "s");
        break;
    case BATON_OBJECT_PERMITS:
        printf("%s: semaphore with permit leases, %lld permit%s available, %lld client%s "
               "waiting\n",
               E(name), v, v == 1 ? "" : "s", sem, sem == 1 ? "" : "s");
        break;
    case BATON_OBJECT_LATCH:
        printf("%s: latch, count %lld, %lld client%s waiting\n", E(name), v, latch,
               latch == 1 ? "" : "s");
        break;
    case BATON_OBJECT_SEMAPHORE_OR_LATCH:
        printf("%s: semaphore or latch, value %lld (a semaphore's available permits or a "
               "latch's count)\n",
               E(name), v);
        break;
    case BATON_OBJECT_ABSENT:
        printf("%s: nothing (no key: free lock, open or unset latch, unset semaphore)\n", E(name));
        break;
    default:
        printf("%s: not a baton object (a Redis %s)\n", E(name), E(s->redis_type));
        break;
    }
    print_line_and_reservation_text(s);
    if (s->ttl_ms >= 0 && strcmp(s->redis_type, "hash") != 0 &&
        strcmp(s->redis_type, "none") != 0) {
        char t[32];
        cli_format_duration(s->ttl_ms, CLI_DURATION_READING, t, sizeof t);
        printf("  expires in %s\n", t);
    }
    if (s->slot >= 0)
        printf("  served by %s (cluster slot %d)\n", E(s->node), s->slot);
    if (s->n_permits)
        printf("  %zu permit lease%s held:\n", s->n_permits, s->n_permits == 1 ? "" : "s");
    for (size_t i = 0; i < s->n_permits; i++) {
        char t[32];
        cli_format_duration(s->permits[i]->lease_end_ms - s->server_time_ms, CLI_DURATION_READING,
                            t, sizeof t);
        printf("    %s  lease ends in %s\n", s->permits[i]->id, t);
    }
}

/* ------------------------------- JSON ------------------------------------------------- */

/* One holder or waiter: {"owner": ...<fields>, "host": ..., "pid": ...<tail>} (host and pid
 * null when none is recorded), after a ", " unless it is the first (i == 0). */
static void json_entry(size_t i, const char *owner, const char *fields, const char *host,
                       int64_t pid, const char *tail)
{
    printf("%s{\"owner\": ", i ? ", " : "");
    json_str(owner);
    printf("%s, \"host\": ", fields);
    if (host) {
        json_str(host);
        printf(", \"pid\": %lld", (long long)pid);
    } else {
        printf("null, \"pid\": null");
    }
    printf("%s}", tail);
}

static void print_json_holders(const baton_inspection *s)
{
    for (size_t i = 0; i < s->n_holders; i++) {
        const baton_inspect_holder *h = s->holders[i];
        char holds[48] = ", \"holds\": null";
        if (h->holds >= 0)
            snprintf(holds, sizeof holds, ", \"holds\": %lld", (long long)h->holds);
        json_entry(i, h->owner, holds, h->host, h->pid, "");
    }
}

static void print_json_queue(const baton_inspection *s)
{
    for (size_t i = 0; i < s->n_queue; i++) {
        const baton_inspect_waiter *w = s->queue[i];
        char deadline[96] = ", \"deadline_ms\": null, \"remaining_ms\": null";
        if (w->has_deadline)
            snprintf(deadline, sizeof deadline, ", \"deadline_ms\": %lld, \"remaining_ms\": %lld",
                     (long long)w->deadline_ms, (long long)(w->deadline_ms - s->server_time_ms));
        int64_t pid;
        const char *host = waiter_host(w, &pid);
        json_entry(i, w->owner, deadline, host, pid,
                   impossible_deadline(s, w) ? ", \"impossible\": true"
                                             : ", \"impossible\": false");
    }
}

static void print_json(const char *name, const baton_inspection *s, bool first)
{
    printf("%s\n  {\"name\": ", first ? "" : ",");
    json_str(name);
    printf(", \"kind\": \"%s\", \"redis_type\": ", s->kind_name);
    json_str(s->redis_type);
    printf(", \"ttl_ms\": %lld, \"node\": ", (long long)s->ttl_ms);
    json_str(s->node);
    printf(", \"slot\": ");
    if (s->slot >= 0)
        printf("%d", s->slot);
    else
        printf("null");
    printf(",\n   \"holders\": [");
    print_json_holders(s);
    printf("],\n   \"queue\": [");
    print_json_queue(s);
    printf("],\n   \"line\": [");
    for (size_t i = 0; i < line_length(s); i++) {
        int64_t pid;
        const char *host = waiter_host(s->line[i], &pid);
        json_entry(i, s->line[i]->owner, "", host, pid, "");
    }
    printf("],\n   \"semaphore_line\": [");
    for (size_t i = 0; i < semaphore_line_length(s); i++) {
        int64_t pid;
        const baton_inspect_waiter *w = s->semaphore_line[i];
        const char *host = waiter_host(w, &pid);
        char want[48];
        json_permits(w, want, sizeof want);
        json_entry(i, w->owner, want, host, pid, "");
    }
    printf("],\n   \"reserved\": ");
    const baton_inspect_waiter *kept = reserved_for(s);
    if (kept) {
        int64_t pid;
        const char *host = waiter_host(kept, &pid);
        char fields[48];
        json_permits(kept, fields, sizeof fields);
        char tail[64] = ", \"remaining_ms\": null";
        if (kept->has_deadline)
            snprintf(tail, sizeof tail, ", \"remaining_ms\": %lld",
                     (long long)(kept->deadline_ms - s->server_time_ms));
        json_entry(0, kept->owner, fields, host, pid, tail);
    } else {
        printf("null");
    }
    printf(",\n   \"permits\": [");
    for (size_t i = 0; i < s->n_permits; i++)
        printf("%s{\"id\": \"%s\", \"lease_end_ms\": %lld, \"ttl_ms\": %lld}", i ? ", " : "",
               s->permits[i]->id, (long long)s->permits[i]->lease_end_ms,
               (long long)(s->permits[i]->lease_end_ms - s->server_time_ms));
    printf("],\n   \"value\": ");
    if (s->has_value && strcmp(s->redis_type, "string") == 0)
        printf("%lld", (long long)s->value);
    else
        printf("null");
    printf(", \"fencing_token\": ");
    if (s->has_token)
        printf("%lld", (long long)s->token);
    else
        printf("null");
    printf(", \"server_time_ms\": %lld,\n   \"subscribers\": {\"lock\": %lld, \"semaphore\": "
           "%lld, \"latch\": %lld}}",
           (long long)s->server_time_ms, (long long)s->subscribers_lock,
           (long long)s->subscribers_semaphore, (long long)s->subscribers_latch);
}

/* ------------------------------- reading ---------------------------------------------- */

/* Inspects every name into ins[0..n). Returns 0, or the exit code after a message; on a
 * failure the entries read so far stay in ins for the caller to free. */
static int read_all(baton_client *c, const char **names, size_t n, baton_inspection **ins)
{
    for (size_t i = 0; i < n; i++) {
        int brc = baton_inspect(c, names[i], &ins[i]);
        if (brc != BATON_OK)
            return cli_fail(c, brc, "status %s", names[i]);
    }
    return 0;
}

static void free_all(baton_inspection **ins, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        baton_inspection_free(ins[i]);
        ins[i] = NULL;
    }
}

/* ------------------------------- --watch ---------------------------------------------- */

static void print_watch_header(bool tty, int64_t interval_ms)
{
    char when[32];
    time_t now = time(NULL);
    struct tm tm;
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", localtime_r(&now, &tm));
    if (tty)
        printf("\033[H\033[2Jbaton status, every %lld ms, at %s (Ctrl-C stops)\n\n",
               (long long)interval_ms, when);
    else
        printf("-- %s\n", when);
}

/* Reads and prints every name each interval until killed (issue 15). A terminal gets its
 * screen redrawn in place (cursor home, clear); anything else gets one block per interval
 * after a "-- time" line: plain text that a log or a pipe can take. Returns only when a
 * read failed (its exit code). */
static int watch(baton_client *c, const char **names, size_t n, int64_t interval_ms)
{
    bool tty = isatty(STDOUT_FILENO) == 1;
    baton_inspection **ins = calloc(n, sizeof *ins);
    if (!ins)
        return EXIT_FAILED;
    int rc = 0;
    while (!rc) {
        rc = read_all(c, names, n, ins);
        if (!rc) {
            print_watch_header(tty, interval_ms);
            for (size_t i = 0; i < n; i++)
                print_text(names[i], ins[i]);
            fflush(stdout);
        }
        free_all(ins, n);
        struct timespec ts = {(time_t)(interval_ms / 1000), (long)(interval_ms % 1000) * 1000000};
        while (!rc && nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
    free(ins);
    return rc;
}

/* ------------------------------- the command ------------------------------------------ */

typedef struct status_args {
    const char **names;
    size_t n;
    bool json, watching;
    int64_t interval_ms;
} status_args;

enum { OPT_JSON = 256, OPT_WATCH, OPT_INTERVAL };

static const struct option status_options[] = {CLI_FLAG("json", OPT_JSON),
                                               CLI_FLAG("watch", OPT_WATCH),
                                               CLI_ARG("interval", OPT_INTERVAL), CLI_END};

/* One option or word of status. Returns 0 or the exit code after a message. */
static int status_option(cli_global *g, const cli_opts *o, int c, status_args *a)
{
    (void)g;
    if (c == OPT_JSON || c == OPT_WATCH) {
        *(c == OPT_JSON ? &a->json : &a->watching) = true;
        return 0;
    }
    switch (c) {
    case OPT_INTERVAL:
        if (!cli_parse_duration(o->arg, &a->interval_ms) || a->interval_ms < 10)
            return cli_usage_error("status", "--interval needs a duration of at least 10ms");
        return 0;
    case CLI_OPT_WORD:
    case CLI_OPT_NAME:
        a->names[a->n++] = o->arg;
        return 0;
    case CLI_OPT_ERROR: /* printed */
        return EXIT_USAGE;
    default:
        return cli_usage_error("status", "unexpected %s", o->word);
    }
}

/* Parses status's arguments into *a (names borrowed from argv). Returns 0 or the exit code
 * after a message. */
static int parse_args(cli_global *g, int argc, char **argv, status_args *a)
{
    cli_opts o;
    cli_opts_init(&o, "status", g, argc, argv, "", status_options);
    int rc = 0;
    if (o.rest)
        rc = cli_usage_error("status", "unexpected '--'");
    for (int c; !rc && (c = cli_opts_next(&o)) != CLI_OPT_END;)
        rc = status_option(g, &o, c, a);
    cli_opts_free(&o);
    for (size_t i = 0; i < a->n; i++)
        cli_note_name(g, a->names[i]);
    if (!rc && a->n == 0)
        rc = cli_usage_error("status", "no NAME");
    if (!rc && a->watching && a->json)
        rc = cli_usage_error("status", "--watch prints text: it does not take --json");
    for (size_t i = 0; !rc && i < a->n; i++)
        if (strlen(a->names[i]) > BATON_MAX_NAME_LEN)
            rc = cli_usage_error("status", "a NAME is longer than %d bytes", BATON_MAX_NAME_LEN);
    return rc;
}

/* Reads every name first, so that a failure half-way prints no half of a JSON text. */
static int status_once(baton_client *c, const status_args *a)
{
    baton_inspection **ins = calloc(a->n, sizeof *ins);
    if (!ins)
        return EXIT_FAILED;
    int rc = read_all(c, a->names, a->n, ins);
    if (!rc) {
        if (a->json)
            printf("[");
        for (size_t i = 0; i < a->n; i++) {
            if (a->json)
                print_json(a->names[i], ins[i], i == 0);
            else
                print_text(a->names[i], ins[i]);
        }
        if (a->json)
            printf("\n]\n");
    }
    free_all(ins, a->n);
    free(ins);
    return rc;
}

int cli_cmd_status(cli_global *g, int argc, char **argv)
{
    status_args a = {calloc((size_t)argc + 1, sizeof(const char *)), 0, false, false, 1000};
    if (!a.names)
        return EXIT_FAILED;
    int rc = parse_args(g, argc, argv, &a);
    baton_client *c = NULL;
    if (!rc && !g->parse_only)
        rc = cli_open_client(g, &c);
    text_client = c;
    if (g->parse_only) {
        free(a.names);
        return rc;
    }
    if (!rc && a.watching)
        rc = watch(c, a.names, a.n, a.interval_ms);
    else if (!rc)
        rc = status_once(c, &a);
    baton_client_close(c);
    free(a.names);
    return rc;
}

/* ------------------------------- list ------------------------------------------------- */

/*
 * `baton list [PATTERN]`: every object whose NAME matches PATTERN, found with the library's
 * SCAN over every master (baton_scan_keys) and read with baton_inspect(), as `status` reads
 * one. A SCAN MATCH PATTERN finds the objects' own keys (a lock's or a read-write lock's hash,
 * a semaphore's or a latch's count); more, MATCH baton_key_side_pattern(), find the fair
 * locks that nobody holds but some wait for (their queue). The keys baton and Redisson keep beside
 * an object (queues, deadlines, tokens, holders' origins, request latches, ...) are not objects of
 * their own: they are mapped to their object's NAME or left out.
 */

#include <fnmatch.h>

/* The object NAME a key stands for (malloc'ed), or NULL: a side key to leave out (the
 * library's baton_key_object() knows the layout), or out of memory. */
static char *object_of_key(const char *key)
{
    char name[BATON_MAX_NAME_LEN + 1];
    int role = baton_key_object(key, name, sizeof name);
    return role == BATON_KEY_OBJECT || role == BATON_KEY_NAMES ? strdup(name) : NULL;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

typedef struct list_args {
    const char *pattern;
    bool json;
    int64_t max_keys;
} list_args;

enum { OPT_LIST_JSON = 300, OPT_MAX_KEYS };

static const struct option list_options[] = {CLI_FLAG("json", OPT_LIST_JSON),
                                             CLI_ARG("max-keys", OPT_MAX_KEYS), CLI_END};

static int list_parse(cli_global *g, int argc, char **argv, list_args *a)
{
    cli_opts o;
    cli_opts_init(&o, "list", g, argc, argv, "", list_options);
    int rc = o.rest ? cli_usage_error("list", "unexpected '--'") : 0;
    for (int c; !rc && (c = cli_opts_next(&o)) != CLI_OPT_END;) {
        switch (c) {
        case OPT_LIST_JSON:
            a->json = true;
            break;
        case OPT_MAX_KEYS:
            if (!cli_parse_count(o.arg, INT64_MAX / 2, &a->max_keys) || a->max_keys < 1)
                rc = cli_usage_error("list", "--max-keys needs a whole number from 1");
            break;
        case CLI_OPT_WORD:
        case CLI_OPT_NAME:
            rc = cli_one_word(&o, &a->pattern, "PATTERN");
            break;
        case CLI_OPT_ERROR:
            rc = EXIT_USAGE;
            break;
        default:
            rc = cli_usage_error("list", "unexpected %s", o.word);
        }
    }
    cli_opts_free(&o);
    if (a->pattern)
        cli_note_name(g, a->pattern);
    else
        a->pattern = "*";
    if (!rc && (!*a->pattern || strlen(a->pattern) > BATON_MAX_NAME_LEN))
        rc = cli_usage_error("list", "PATTERN must be 1 to %d bytes", BATON_MAX_NAME_LEN);
    return rc;
}

/* Adds the object NAMEs of the scan's keys that match the pattern to names[*n..]. */
static int collect(const baton_key_scan *s, const char *pattern, char ***names, size_t *n,
                   size_t *cap)
{
    for (size_t i = 0; i < s->n_keys; i++) {
        char *name = object_of_key(s->keys[i]);
        if (!name)
            continue;
        if (fnmatch(pattern, name, 0) != 0 || strlen(name) > BATON_MAX_NAME_LEN) {
            free(name);
            continue;
        }
        if (*n == *cap) {
            size_t ncap = *cap ? *cap * 2 : 64;
            char **grown = realloc(*names, ncap * sizeof *grown);
            if (!grown) {
                free(name);
                return EXIT_FAILED;
            }
            *names = grown;
            *cap = ncap;
        }
        (*names)[(*n)++] = name;
    }
    return 0;
}

/* Scans for the NAMEs under the pattern, sorted, each once. */
static int list_names(baton_client *c, const list_args *a, char ***names, size_t *n, bool *cut,
                      uint64_t *examined)
{
    size_t cap = 0;
    uint64_t budget = (uint64_t)a->max_keys;
    *cut = false;
    *examined = 0;
    for (size_t pass = 0; pass == 0 || baton_key_side_pattern(pass - 1); pass++) {
        const char *match = pass == 0 ? a->pattern : baton_key_side_pattern(pass - 1);
        if (pass > 0 && (strcmp(a->pattern, "*") == 0 || *cut))
            break; /* "*" matched the side keys already */
        baton_key_scan *s = NULL;
        int brc = baton_scan_keys(c, match, budget - *examined, &s);
        if (brc != BATON_OK)
            return cli_fail(c, brc, "list %s", a->pattern);
        *examined += s->examined;
        *cut = *cut || s->cut;
        int rc = collect(s, a->pattern, names, n, &cap);
        baton_key_scan_free(s);
        if (rc)
            return rc;
        if (*examined >= budget && pass == 0) {
            *cut = true;
            break;
        }
    }
    if (*n)
        qsort(*names, *n, sizeof **names, cmp_str);
    size_t k = 0;
    for (size_t i = 0; i < *n; i++) {
        if (k && strcmp((*names)[k - 1], (*names)[i]) == 0)
            free((*names)[i]);
        else
            (*names)[k++] = (*names)[i];
    }
    *n = k;
    return 0;
}

/* One line per object, for a terminal or grep. */
static void print_list_line(const baton_inspection *s)
{
    char t[32] = "-";
    if (s->ttl_ms >= 0)
        cli_format_duration(s->ttl_ms, CLI_DURATION_READING, t, sizeof t);
    int64_t term;
    bool election = s->kind == BATON_OBJECT_LOCK && election_of(s->name, &term);
    printf("%-18s %s  ttl %s", election ? "election" : s->kind_name, E(s->name), t);
    if (s->kind == BATON_OBJECT_SEMAPHORE || s->kind == BATON_OBJECT_PERMITS ||
        s->kind == BATON_OBJECT_SEMAPHORE_OR_LATCH)
        printf("  permits %lld", (long long)s->value);
    if (s->kind == BATON_OBJECT_LATCH)
        printf("  count %lld", (long long)s->value);
    if (s->n_permits)
        printf("  leases %zu", s->n_permits);
    for (size_t i = 0; i < s->n_holders; i++) {
        const baton_inspect_holder *h = s->holders[i];
        if (h->host)
            printf("  holder %s@%s:%lld", E(h->owner), E(h->host), (long long)h->pid);
        else
            printf("  holder %s", E(h->owner));
    }
    long long waiting = (long long)s->n_queue + s->subscribers_semaphore + s->subscribers_latch;
    if (s->n_queue == 0)
        waiting += s->subscribers_lock;
    printf("  waiters %lld", waiting);
    size_t line = line_length(s) + semaphore_line_length(s);
    if (line)
        printf("  line %zu", line);
    if (s->slot >= 0)
        printf("  node %s slot %d", E(s->node), s->slot);
    printf("\n");
}

int cli_cmd_list(cli_global *g, int argc, char **argv)
{
    list_args a = {NULL, false, 100000};
    int rc = list_parse(g, argc, argv, &a);
    baton_client *c;
    if (!cli_start(g, &rc, &c))
        return rc;
    char **names = NULL;
    size_t n = 0;
    bool cut = false;
    uint64_t examined = 0;
    text_client = c;
    rc = list_names(c, &a, &names, &n, &cut, &examined);
    baton_inspection **ins = n ? calloc(n, sizeof *ins) : NULL;
    if (!rc && n && !ins)
        rc = EXIT_FAILED;
    size_t shown = 0, refused = 0;
    for (size_t i = 0; !rc && i < n; i++) {
        int brc = baton_inspect(c, names[i], &ins[i]);
        if (brc == BATON_EPERM) { /* another tenant's (per-tenant ACL scoping): not named */
            ins[i] = NULL;
            refused++;
        } else if (brc != BATON_OK)
            rc = cli_fail(c, brc, "list: %s", E(names[i]));
        else if (ins[i]->kind == BATON_OBJECT_ABSENT || ins[i]->kind == BATON_OBJECT_OTHER) {
            baton_inspection_free(ins[i]); /* gone since the scan, or not baton's */
            ins[i] = NULL;
        }
    }
    if (!rc) {
        if (a.json)
            printf("{\"objects\": [");
        for (size_t i = 0; i < n; i++) {
            if (!ins[i])
                continue;
            if (a.json)
                print_json(ins[i]->name, ins[i], shown == 0);
            else
                print_list_line(ins[i]);
            shown++;
        }
        if (a.json)
            printf("%s], \"examined\": %llu, \"cut\": %s, \"refused\": %zu}\n", shown ? "\n" : "",
                   (unsigned long long)examined, cut ? "true" : "false", refused);
        if (refused)
            cli_eprintf("list: %zu object%s skipped: the server's ACL refuses this user reading "
                        "%s",
                        refused, refused == 1 ? "" : "s", refused == 1 ? "it" : "them");
        if (cut)
            cli_eprintf("list: stopped after examining %llu keys (--max-keys): objects may "
                        "be missing",
                        (unsigned long long)examined);
    }
    for (size_t i = 0; i < n; i++) {
        baton_inspection_free(ins ? ins[i] : NULL);
        free(names[i]);
    }
    free(ins);
    free(names);
    baton_client_close(c);
    return rc;
}
