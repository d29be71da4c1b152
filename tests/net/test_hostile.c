/*
 * A hostile or broken server: every call ends by its deadline whatever the server sends,
 * what a reply can make the client allocate is capped, and the parse is linear in the
 * bytes received (docs/guarantees.md, "Limits on replies").
 *
 * A scripted fake server (a forked process on loopback, one child per connection) answers
 * the handshake honestly and one chosen command with a hostile byte stream: a simple
 * string that never ends, a reply trickled one byte per 100 ms, a bulk string of 2^62
 * bytes, an array of 2^31 - 1 elements. A real redis-server then floods a waiter's channel
 * with PUBLISH while it waits, and refuses a waiter's SUBSCRIBE (an ACL user without
 * channel permissions) while its reconnections are counted.
 */
#define _GNU_SOURCE
#include "helper.h"

#include "new_assert.h"
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

TestSuite(hostile, .timeout = 60);

/* ------------------------------- the fake server -------------------------------------- */

typedef enum hostile_kind {
    H_ENDLESS_LINE, /* "+BBBB..." with no CRLF, as fast as the socket takes it */
    H_TRICKLE,      /* a valid reply, one byte per 100 ms */
    H_HUGE_BULK,    /* "$4611686018427387904\r\n" then bytes as fast as they go */
    H_HUGE_ARRAY,   /* "*2147483647\r\n" then ":1\r\n" elements as fast as they go */
    H_SLOW_ROUND,   /* the script's reply, then WAIT's, each trickled over 0.9 s */
} hostile_kind;

typedef struct fake {
    int port;
    pid_t pid;
} fake;

static void send_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
        if (n <= 0) {
            if (n < 0 && errno == EINTR)
                continue;
            _exit(0); /* the client went away */
        }
        buf += n;
        len -= (size_t)n;
    }
}

static void send_str(int fd, const char *s)
{
    send_all(fd, s, strlen(s));
}

/* Sends s a byte every ms milliseconds. */
static void trickle(int fd, const char *s, int ms)
{
    for (const char *p = s; *p; p++) {
        send_all(fd, p, 1);
        usleep((useconds_t)ms * 1000);
    }
}

/* Sends the hostile stream, forever (until the client closes); H_SLOW_ROUND returns. */
static void hostile(int fd, hostile_kind kind)
{
    static char chunk[65536];
    switch (kind) {
    case H_SLOW_ROUND:
        trickle(fd, "*2\r\n:0\r\n:9\r\n", 80); /* lock_acquire: held, 9 ms left */
        return;
    case H_ENDLESS_LINE:
        memset(chunk, 'B', sizeof chunk);
        send_str(fd, "+");
        for (;;)
            send_all(fd, chunk, sizeof chunk);
    case H_TRICKLE: {
        /* a script's reply as a server would send it, if it sent it slowly enough */
        trickle(fd, "*3\r\n:1\r\n$40\r\n0123456789012345678901234567890123456789\r\n:2\r\n", 100);
        for (;;)
            pause();
    }
    case H_HUGE_BULK:
        memset(chunk, 'x', sizeof chunk);
        send_str(fd, "$4611686018427387904\r\n");
        for (;;)
            send_all(fd, chunk, sizeof chunk);
    case H_HUGE_ARRAY:
        for (size_t i = 0; i + 4 <= sizeof chunk; i += 4)
            memcpy(chunk + i, ":1\r\n", 4);
        send_str(fd, "*2147483647\r\n");
        for (;;)
            send_all(fd, chunk, sizeof chunk);
    }
}

/* Reads one command (an array of bulk strings) into argv; false when the client closed. */
static bool read_command(int fd, char *buf, size_t cap, size_t *have, char *name, size_t namelen)
{
    for (;;) {
        /* "*N\r\n$L\r\nNAME\r\n..." : enough to name the command and skip its arguments */
        buf[*have] = '\0';
        char *end = NULL;
        if (*have > 0 && buf[0] == '*') {
            long n = strtol(buf + 1, &end, 10);
            char *p = strstr(buf, "\r\n");
            bool whole = p != NULL;
            name[0] = '\0';
            for (long i = 0; whole && i < n; i++) {
                p += 2;
                if (p >= buf + *have || *p != '$') {
                    whole = false;
                    break;
                }
                long len = strtol(p + 1, NULL, 10);
                char *q = strstr(p, "\r\n");
                if (!q || q + 2 + len + 2 > buf + *have) {
                    whole = false;
                    break;
                }
                if (i == 0) {
                    size_t m = (size_t)len < namelen - 1 ? (size_t)len : namelen - 1;
                    memcpy(name, q + 2, m);
                    name[m] = '\0';
                }
                p = q + 2 + len;
            }
            if (whole) {
                p += 2;
                size_t used = (size_t)(p - buf);
                memmove(buf, p, *have - used);
                *have -= used;
                return true;
            }
        }
        if (*have + 1 >= cap)
            return false;
        ssize_t n = read(fd, buf + *have, cap - 1 - *have);
        if (n <= 0)
            return false;
        *have += (size_t)n;
    }
}

/* One connection: honest answers, and the hostile stream for the victim command. */
static void serve(int fd, const char *victim, hostile_kind kind)
{
    static char buf[1 << 16];
    size_t have = 0;
    char name[32];
    while (read_command(fd, buf, sizeof buf, &have, name, sizeof name)) {
        if (strcasecmp(name, victim) == 0)
            hostile(fd, kind);
        else if (strcasecmp(name, "WAIT") == 0 && kind == H_SLOW_ROUND)
            trickle(fd, ":1\r\n", 240);
        else if (strcasecmp(name, "WAIT") == 0)
            send_str(fd, ":1\r\n");
        else if (strcasecmp(name, "PING") == 0)
            send_str(fd, "+PONG\r\n");
        else if (strcasecmp(name, "INFO") == 0) {
            const char *info = "# Server\r\nredis_version:7.0.15\r\n"
                               "run_id:0123456789abcdef0123456789abcdef01234567\r\n"
                               "# Memory\r\nmaxmemory_policy:noeviction\r\n";
            char head[32];
            snprintf(head, sizeof head, "$%zu\r\n", strlen(info));
            send_str(fd, head);
            send_str(fd, info);
            send_str(fd, "\r\n");
        } else if (strcasecmp(name, "EVALSHA") == 0 || strcasecmp(name, "EVAL") == 0)
            send_str(fd, "$-1\r\n");
        else
            send_str(fd, "+OK\r\n");
    }
    _exit(0);
}

/* A fake server whose connections answer `victim` with the hostile stream. It and its
 * children are killed by fake_stop (they die with the test process too). */
static void fake_start(fake *f, const char *victim, hostile_kind kind)
{
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert(ge(int, lfd, 0));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    cr_assert(eq(int, bind(lfd, (struct sockaddr *)&sa, sizeof sa), 0));
    cr_assert(eq(int, listen(lfd, 16), 0));
    cr_assert(eq(int, getsockname(lfd, (struct sockaddr *)&sa, &len), 0));
    f->port = ntohs(sa.sin_port);
    pid_t parent = getpid();
    f->pid = fork();
    cr_assert(ge(int, f->pid, 0));
    if (f->pid == 0) {
        setpgid(0, 0); /* fake_stop kills the group: the server and every connection */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(0);
        signal(SIGCHLD, SIG_IGN); /* no zombies */
        for (;;) {
            int fd = accept(lfd, NULL, NULL);
            if (fd < 0)
                continue;
            pid_t c = fork();
            if (c == 0) {
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                close(lfd);
                serve(fd, victim, kind);
            }
            close(fd);
        }
    }
    setpgid(f->pid, f->pid); /* either side may run first */
    close(lfd);
}

static void fake_stop(fake *f)
{
    kill(-f->pid, SIGKILL);
    waitpid(f->pid, NULL, 0);
}

/* ------------------------------- measures --------------------------------------------- */

/* A field of /proc/self/status in kB. */
static long status_kb(const char *field)
{
    FILE *fp = fopen("/proc/self/status", "r");
    cr_assert(fp != NULL);
    char line[256];
    long v = -1;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, fp))
        if (strncmp(line, field, n) == 0 && line[n] == ':')
            v = atol(line + n + 1);
    fclose(fp);
    cr_assert(ge(long, v, 0), "%s in /proc/self/status", field);
    return v;
}

/* Resets VmHWM to the current RSS (Linux >= 4.0): the peak is then this case's own. */
static long reset_peak(void)
{
    FILE *fp = fopen("/proc/self/clear_refs", "w");
    cr_assert(fp != NULL);
    fputs("5", fp);
    fclose(fp);
    return status_kb("VmRSS");
}

static int64_t cpu_ms(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (int64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
}

#define TIMEOUT_MS 1000
#define BOUND_MS 1500      /* each call: its timeout + 0.5 s */
#define PEAK_KB (64 << 10) /* what a hostile reply may add to the peak RSS */

static void options_for(baton_options *o, char *url, size_t len, const fake *f)
{
    snprintf(url, len, "redis://127.0.0.1:%d", f->port);
    baton_options_init(o);
    o->url = url;
    o->connect_timeout_ms = TIMEOUT_MS;
    o->command_timeout_ms = TIMEOUT_MS;
}

/* A connect whose handshake meets the stream (PING's reply) fails by its deadline, with
 * `code`, within the memory bound. */
static void connect_meets(hostile_kind kind, int code)
{
    fake f;
    fake_start(&f, "PING", kind);
    char url[64];
    baton_options o;
    options_for(&o, url, sizeof url, &f);
    long base = reset_peak();
    int64_t cpu0 = cpu_ms(), t0 = th_ms();
    baton_client *c = NULL;
    int rc = baton_client_open(&o, &c);
    int64_t took = th_ms() - t0, cpu = cpu_ms() - cpu0;
    long peak = status_kb("VmHWM") - base;
    fake_stop(&f);
    cr_assert(eq(int, rc, code), "open: %s (%s) after %lld ms", baton_err_name(rc),
              baton_open_errmsg(), (long long)took);
    cr_assert(le(i64, took, BOUND_MS), "open returned after %lld ms: %s", (long long)took,
              baton_open_errmsg());
    cr_assert(le(long, peak, PEAK_KB), "the peak RSS grew by %ld kB", peak);
    cr_assert(le(i64, cpu, BOUND_MS), "%lld ms of CPU", (long long)cpu);
    cr_log_info("open: %s in %lld ms, %lld ms CPU, peak +%ld kB: %s", baton_err_name(rc),
                (long long)took, (long long)cpu, peak, baton_open_errmsg());
}

/* A lock attempt whose script reply is the stream fails by its deadline, with `code`,
 * within the memory bound; the client then works again (a new connection). */
static void command_meets(hostile_kind kind, int code)
{
    fake f;
    fake_start(&f, "EVALSHA", kind);
    char url[64];
    baton_options o;
    options_for(&o, url, sizeof url, &f);
    if (kind == H_SLOW_ROUND) {
        o.sync_replicas = 1;     /* WAIT follows the script in the same round trip */
        o.sync_timeout_ms = 100; /* the round trip's bound: 1 s + WAIT's own 100 ms */
    }
    baton_client *c = NULL;
    cr_assert(eq(int, baton_client_open(&o, &c), BATON_OK), "%s", baton_open_errmsg());
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(c, "hostile", &l), BATON_OK));
    long base = reset_peak();
    int64_t cpu0 = cpu_ms(), t0 = th_ms();
    int rc = baton_lock_try_acquire(l, 0, 10000);
    int64_t took = th_ms() - t0, cpu = cpu_ms() - cpu0;
    long peak = status_kb("VmHWM") - base;
    char msg[256];
    snprintf(msg, sizeof msg, "%s", baton_client_errmsg(c));
    baton_lock_close(l);
    baton_client_close(c);
    fake_stop(&f);
    cr_assert(eq(int, rc, code), "try_acquire: %s (%s) after %lld ms", baton_err_name(rc), msg,
              (long long)took);
    cr_assert(le(i64, took, BOUND_MS), "try_acquire returned after %lld ms: %s", (long long)took,
              msg);
    cr_assert(le(long, peak, PEAK_KB), "the peak RSS grew by %ld kB", peak);
    cr_assert(le(i64, cpu, BOUND_MS), "%lld ms of CPU", (long long)cpu);
    cr_log_info("try_acquire: %s in %lld ms, %lld ms CPU, peak +%ld kB: %s", baton_err_name(rc),
                (long long)took, (long long)cpu, peak, msg);
}

Test(hostile, a_simple_string_that_never_ends_fails_the_connect_by_its_deadline)
{
    connect_meets(H_ENDLESS_LINE, BATON_EPROTO);
}

Test(hostile, a_simple_string_that_never_ends_fails_the_command_by_its_deadline)
{
    command_meets(H_ENDLESS_LINE, BATON_EPROTO);
}

Test(hostile, a_reply_trickled_byte_by_byte_fails_the_connect_by_its_deadline)
{
    connect_meets(H_TRICKLE, BATON_ECONN);
}

Test(hostile, a_script_reply_trickled_byte_by_byte_fails_by_the_command_timeout)
{
    command_meets(H_TRICKLE, BATON_ECONN);
}

/* Before, each reply of a round trip had a command timeout of its own: the script's reply
 * and WAIT's, each in time, took 1.7 s against a 1 s timeout. Now WAIT's is given up at
 * 1.1 s (WAIT may block 100 ms on the server): the script's reply said the lock is held
 * (ETIMEDOUT). */
Test(hostile, a_round_trip_whose_every_reply_comes_just_in_time_ends_by_one_command_timeout)
{
    command_meets(H_SLOW_ROUND, BATON_ETIMEDOUT);
}

Test(hostile, a_bulk_of_2_to_the_62_bytes_is_refused_at_connect)
{
    connect_meets(H_HUGE_BULK, BATON_EPROTO);
}

Test(hostile, a_bulk_of_2_to_the_62_bytes_is_refused_as_a_script_reply)
{
    command_meets(H_HUGE_BULK, BATON_EPROTO);
}

Test(hostile, an_array_of_2_to_the_31_elements_is_refused_at_connect)
{
    connect_meets(H_HUGE_ARRAY, BATON_EPROTO);
}

Test(hostile, an_array_of_2_to_the_31_elements_is_refused_as_a_script_reply)
{
    command_meets(H_HUGE_ARRAY, BATON_EPROTO);
}

/* ------------------------------- a real server, flooded ------------------------------- */

/* 400,000 in the plain build; a sanitizer's parse of the backlog is several times slower
 * (under ASan 400,000 cost 12 s of CPU), and its builds check memory, not this figure: the
 * flood shrinks by the same factor. */
#define FLOOD (400000 / SLOW)
#define CHUNK (FLOOD < 100000 ? FLOOD : 100000)

typedef struct flood {
    int port;
    const char *channel;
    int64_t *longest_ms; /* shared: the longest of the flood's scripts, which block the server */
} flood;

/* Publishes FLOOD unlock messages ("0": each wakes a waiter) on the channel once somebody
 * listens, in one burst: a script publishes 100,000 at a time, faster than a client reads
 * them, so a backlog builds up on the subscriber connection. Exits 0 when every message
 * was published. */
static int flooder(void *arg)
{
    flood *f = arg;
    redisContext *r = redisConnect("127.0.0.1", f->port);
    if (!r || r->err)
        return 1;
    for (int i = 0; i < 500; i++) {
        redisReply *n = redisCommand(r, "PUBSUB NUMSUB %s", f->channel);
        bool listening =
            n && n->type == REDIS_REPLY_ARRAY && n->elements == 2 && n->element[1]->integer > 0;
        freeReplyObject(n);
        if (listening)
            break;
        usleep(10 * 1000);
    }
    for (int sent = 0; sent < FLOOD; sent += CHUNK) {
        int64_t t0 = th_ms();
        redisReply *n =
            redisCommand(r, "EVAL %s 0 %s %d",
                         "for i = 1, tonumber(ARGV[2]) do redis.call('publish', ARGV[1], '0') end",
                         f->channel, CHUNK);
        if (th_ms() - t0 > *f->longest_ms)
            *f->longest_ms = th_ms() - t0;
        bool ok = n && n->type == REDIS_REPLY_NIL;
        freeReplyObject(n);
        if (!ok)
            return 1;
    }
    redisFree(r);
    return 0;
}

/* Before: the dispatcher parsed its backlog in one go, quadratic in hiredis's buffer
 * handling, holding the mutex the waiter needs to return: a 5 s wait returned after 9.7 s,
 * with 6 s of CPU. */
Test(hostile, a_publish_flood_on_a_waiters_channel_keeps_its_deadline_and_costs_little_cpu)
{
    th_server s;
    th_server_start(&s, NULL);
    baton_client *holder = th_client_on(s.port, 5000), *waiter = th_client_on(s.port, 5000);
    baton_lock *h, *w;
    cr_assert(eq(int, baton_lock_open(holder, "flooded", &h), BATON_OK));
    cr_assert(eq(int, baton_lock_open(waiter, "flooded", &w), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(h, 0, 60000), BATON_OK));
    int64_t *longest =
        mmap(NULL, sizeof *longest, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(longest != MAP_FAILED);
    *longest = 0;
    flood f = {s.port, "redisson_lock__channel:{flooded}", longest};
    int64_t t_start = th_ms();
    pid_t pid = th_fork(flooder, &f);
    int64_t cpu0 = cpu_ms(), t0 = th_ms();
    int rc = baton_lock_try_acquire(w, 5000, 60000);
    int64_t took = th_ms() - t0, cpu = cpu_ms() - cpu0;
    int status = th_wait(pid);
    int64_t flood_ms = th_ms() - t_start;
    baton_stats st;
    cr_assert(eq(int, baton_client_stats(waiter, &st), BATON_OK));
    cr_log_info("flood: try_acquire %s in %lld ms, %lld ms CPU; %llu messages heard; the "
                "flooder exited after %lld ms",
                baton_err_name(rc), (long long)took, (long long)cpu,
                (unsigned long long)st.messages, (long long)flood_ms);
    cr_assert(eq(int, status, 0), "the flooder published everything");
    cr_assert(eq(int, rc, BATON_ETIMEDOUT), "%s: %s", baton_err_name(rc),
              baton_client_errmsg(waiter));
    /* an attempt sent just before the deadline waits for the script the server runs then
     * (one of the flood's, blocking it): that long more, at most */
    cr_assert(le(i64, took, 5000 + *longest + 500 * SLOW),
              "a 5 s wait returned after %lld ms (the server blocked %lld ms at most)",
              (long long)took, (long long)*longest);
    cr_assert(ge(u64, st.messages, FLOOD / 4), "the flood reached the waiter's connection");
    cr_assert(le(i64, cpu, 2500 * SLOW), "%lld ms of CPU for %llu messages", (long long)cpu,
              (unsigned long long)st.messages);
    baton_lock_close(w);
    baton_lock_close(h);
    baton_client_close(waiter);
    baton_client_close(holder);
    th_server_stop(&s);
}

/* ------------------------------- a refused SUBSCRIBE ---------------------------------- */

static long long connections_received(redisContext *r)
{
    redisReply *rep = th_cmd(r, "INFO stats");
    const char *p = strstr(rep->str, "total_connections_received:");
    cr_assert(p != NULL);
    long long n = atoll(p + strlen("total_connections_received:"));
    freeReplyObject(rep);
    return n;
}

/* A waiter whose user may run scripts but not subscribe to the lock's channel (Redis 7's
 * ACL: no &pattern, the default resetchannels): waits of 5 s against a lock held by
 * another client, one after the other for 5 s. */
typedef struct refused_run {
    int calls, refused, timed_out;
    int64_t slowest_ms;
    char last[256];
} refused_run;

static void wait_refused(th_server *s, int64_t window_ms, bool again, refused_run *out)
{
    redisContext *r = th_redis_port(s->port);
    freeReplyObject(th_cmd(r, "ACL SETUSER nosub on >pw ~* +@all resetchannels"));
    baton_client *holder = th_client_on(s->port, 5000);
    baton_lock *h, *w;
    cr_assert(eq(int, baton_lock_open(holder, "refused", &h), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(h, 0, 60000), BATON_OK));
    char url[96];
    snprintf(url, sizeof url, "redis://nosub:pw@127.0.0.1:%d", s->port);
    baton_options o;
    baton_options_init(&o);
    o.url = url;
    baton_client *waiter = th_client(&o);
    cr_assert(eq(int, baton_lock_open(waiter, "refused", &w), BATON_OK));
    memset(out, 0, sizeof *out);
    long long before = connections_received(r);
    int64_t end = th_ms() + window_ms;
    do {
        int64_t t0 = th_ms();
        int rc = baton_lock_try_acquire(w, 5000, 60000);
        int64_t took = th_ms() - t0;
        out->calls++;
        if (took > out->slowest_ms)
            out->slowest_ms = took;
        snprintf(out->last, sizeof out->last, "%s: %s", baton_err_name(rc),
                 baton_client_errmsg(waiter));
        if (rc == BATON_ETIMEDOUT)
            out->timed_out++;
        else {
            /* the code of NOPERM as a command's reply (baton__reply_error) */
            cr_assert(not(eq(ptr, strstr(out->last, "NOPERM"), NULL)), "%s", out->last);
            cr_assert(not(eq(int, rc, BATON_OK)));
            out->refused++;
        }
    } while (again && th_ms() < end);
    while (th_ms() < end) /* the rest of the window: the dispatcher must stay quiet too */
        th_sleep_ms(50);
    long long conns = connections_received(r) - before - 1; /* the INFO connection is r's */
    cr_log_info("refused SUBSCRIBE: %d calls (%d refused, %d timed out), slowest %lld ms, %lld "
                "connections in %lld ms; last: %s",
                out->calls, out->refused, out->timed_out, (long long)out->slowest_ms, conns,
                (long long)window_ms, out->last);
    cr_assert(le(i64, conns, 20), "%lld connections in %lld ms", conns, (long long)window_ms);
    baton_lock_close(w);
    baton_lock_close(h);
    baton_client_close(waiter);
    baton_client_close(holder);
    redisFree(r);
}

/* Before: the refusal dropped the subscriber connection, which reconnected 10 ms later
 * with its pause started over, and the waiter waited for a confirmation that never came:
 * 463 connections in 5 s. */
Test(hostile, a_waiter_refused_subscribe_gets_the_refusal_without_a_reconnect_storm)
{
    th_server s;
    th_server_start(&s, NULL);
    refused_run run;
    wait_refused(&s, 5000, false, &run);
    cr_assert(le(i64, run.slowest_ms, 5500));
    cr_assert(eq(int, run.refused, 1), "the refusal, not a wait for nothing: %s", run.last);
    cr_assert(not(eq(ptr, strstr(run.last, "NOPERM"), NULL)), "%s", run.last);
    th_server_stop(&s);
}

/* Waits again and again for 5 s: each needs the subscriber connection made again, and the
 * pause before each grows (50 ms doubling to 2 s) since none got a healthy reply. */
Test(hostile, waits_refused_again_and_again_reconnect_with_a_growing_pause)
{
    th_server s;
    th_server_start(&s, NULL);
    refused_run run;
    wait_refused(&s, 5000, true, &run);
    cr_assert(le(i64, run.slowest_ms, 5500));
    cr_assert(ge(int, run.refused, 3), "%d refused of %d", run.refused, run.calls);
    th_server_stop(&s);
}
