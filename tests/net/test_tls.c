/*
 * TLS (rediss://) and the connection layer's own guarantees, against real redis-servers
 * serving TLS with throw-away certificates (tests/with-tls.sh makes them, in
 * BATON_TEST_TLS_DIR). What must hold: every primitive works over TLS, waits included (the
 * dispatcher's path); mutual TLS works and is enforced; an untrusted, expired or
 * wrong-name certificate (a name only in the common name, without a subjectAltName, is a
 * wrong name) and a wrong protocol on either side fail with BATON_ECONN, a
 * clear reason and quickly, never a hang; no password appears in a message; idle TLS
 * connections are reused; a silent server is noticed within keepalive_ms.
 */
#define _GNU_SOURCE
#include "cli_helper.h"
#include "helper.h"

#include "new_assert.h"
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>

TestSuite(tls, .timeout = 60);

typedef struct tls_server {
    th_server plain; /* its plain port answers the helper's readiness check */
    int port;        /* the TLS port */
    char url[96];    /* rediss://127.0.0.1:<port> */
} tls_server;

static const char *dir(void)
{
    const char *d = getenv("BATON_TEST_TLS_DIR");
    cr_assert(d != NULL, "BATON_TEST_TLS_DIR is not set: run through tests/with-tls.sh");
    return d;
}

static const char *file(const char *name)
{
    static __thread char buf[4][256];
    static __thread int next;
    char *b = buf[next++ % 4];
    snprintf(b, sizeof buf[0], "%s/%s", dir(), name);
    return b;
}

/* A redis-server serving TLS with the certificate `cert` (server, expired, other), and
 * requiring client certificates when `auth_clients`. */
static void tls_start(tls_server *s, const char *cert, bool auth_clients, const char *extra)
{
    /* Both ports are chosen afresh on each attempt (a TLS port another program took makes
     * the server exit at once); not rand(), which th_server_start reseeds with the time.
     * TLS ports above the kernel's ephemeral range, where no fixture starts servers. */
    for (int attempt = 0;; attempt++) {
        cr_assert(lt(int, attempt, 20), "no free ports for a TLS redis-server");
        unsigned short r = 0;
        cr_assert(eq(int, (int)getrandom(&r, sizeof r, 0), (int)sizeof r));
        s->port = 61000 + r % 4000;
        char conf[1024]; /* redis-server arguments, split at spaces by the helper */
        snprintf(conf, sizeof conf,
                 "--tls-port %d --tls-cert-file %s/%s.crt --tls-key-file %s/%s.key "
                 "--tls-ca-cert-file %s/ca.crt --tls-auth-clients %s %s",
                 s->port, dir(), cert, dir(), cert, dir(), auth_clients ? "yes" : "optional",
                 extra ? extra : "");
        if (th_server_try_start(&s->plain, conf))
            break;
    }
    snprintf(s->url, sizeof s->url, "rediss://127.0.0.1:%d", s->port);
}

static void tls_stop(tls_server *s)
{
    th_server_stop(&s->plain);
}

static void trusting(baton_options *o, const char *url)
{
    baton_options_init(o);
    o->url = url;
    o->tls_ca = file("ca.crt");
    o->connect_timeout_ms = 2000;
    o->command_timeout_ms = 2000;
}

/* Opens with o, expecting rc; returns how long it took (ms). */
static int64_t open_expect(const baton_options *o, int rc, const char *why_contains)
{
    baton_client *c = (baton_client *)1;
    int64_t t0 = th_ms();
    int got = baton_client_open(o, &c);
    int64_t took = th_ms() - t0;
    cr_assert(eq(int, got, rc), "%s", baton_open_errmsg());
    if (rc != BATON_OK) {
        cr_assert(eq(ptr, c, NULL));
        if (why_contains)
            cr_assert(strstr(baton_open_errmsg(), why_contains) != NULL, "detail: %s",
                      baton_open_errmsg());
    } else
        baton_client_close(c);
    return took;
}

/* ------------------------------- primitives over TLS ---------------------------------- */

typedef struct waiter {
    baton_lock *l;
    int rc;
    int64_t waited_ms;
} waiter;

static void *wait_lock(void *arg)
{
    waiter *w = arg;
    int64_t t0 = th_ms();
    w->rc = baton_lock_try_acquire(w->l, 10000, 5000);
    w->waited_ms = th_ms() - t0;
    if (w->rc == BATON_OK)
        baton_lock_release(w->l);
    return NULL;
}

Test(tls, every_primitive_works_over_tls_waits_included)
{
    tls_server s;
    tls_start(&s, "server", false, NULL);
    baton_options o;
    trusting(&o, s.url);
    o.watchdog_ms = 300; /* renewals over TLS too */
    baton_client *a, *b;
    cr_assert(eq(int, baton_client_open(&o, &a), BATON_OK), "%s", baton_open_errmsg());
    cr_assert(eq(int, baton_client_open(&o, &b), BATON_OK), "%s", baton_open_errmsg());

    /* lock: held past several watchdog leases, a waiter on the other client is woken by
     * the release (pub/sub over TLS) well before its wait runs out */
    const char *name = th_tmpname("tls-lock");
    baton_lock *la, *lb;
    cr_assert(eq(int, baton_lock_open(a, name, &la), BATON_OK));
    cr_assert(eq(int, baton_lock_open(b, name, &lb), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(la, BATON_LEASE_WATCHDOG), BATON_OK));
    waiter w = {lb, -1, 0};
    pthread_t t;
    pthread_create(&t, NULL, wait_lock, &w);
    th_sleep_ms(1000); /* three leases: only renewals keep it */
    bool locked = false;
    cr_assert(eq(int, baton_lock_is_locked(la, &locked), BATON_OK));
    cr_assert(locked, "the watchdog kept the lock over TLS");
    int64_t released_at = th_ms();
    cr_assert(eq(int, baton_lock_release(la), BATON_OK));
    pthread_join(t, NULL);
    cr_assert(eq(int, w.rc, BATON_OK), "%s", baton_client_errmsg(b));
    int64_t after_release = th_ms() - released_at;
    cr_assert(lt(i64, after_release, 1000), "woken by the release's message: %lld ms",
              (long long)after_release);

    /* fair lock */
    baton_lock *fa;
    cr_assert(eq(int, baton_fairlock_open(a, th_tmpname("tls-fair"), &fa), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(fa, 0, 5000), BATON_OK));
    int64_t token = 0;
    cr_assert(eq(int, baton_lock_fencing_token(fa, &token), BATON_OK));
    cr_assert(gt(i64, token, 0));
    cr_assert(eq(int, baton_lock_release(fa), BATON_OK));

    /* semaphore */
    baton_semaphore *sem;
    bool set = false;
    int64_t avail = -1;
    cr_assert(eq(int, baton_semaphore_open(a, th_tmpname("tls-sem"), &sem), BATON_OK));
    cr_assert(eq(int, baton_semaphore_try_set_permits(sem, 2, &set), BATON_OK));
    cr_assert(eq(int, baton_semaphore_try_acquire(sem, 2, 1000), BATON_OK));
    cr_assert(eq(int, baton_semaphore_try_acquire(sem, 1, 0), BATON_ETIMEDOUT));
    cr_assert(eq(int, baton_semaphore_release(sem, 2), BATON_OK));
    cr_assert(eq(int, baton_semaphore_available(sem, &avail), BATON_OK));
    cr_assert(eq(i64, avail, 2));

    /* latch */
    baton_latch *lat;
    cr_assert(eq(int, baton_latch_open(a, th_tmpname("tls-latch"), &lat), BATON_OK));
    cr_assert(eq(int, baton_latch_try_set_count(lat, 1, &set), BATON_OK));
    cr_assert(eq(int, baton_latch_count_down(lat), BATON_OK));
    cr_assert(eq(int, baton_latch_await(lat, 1000), BATON_OK));

    /* multi-lock over two locks */
    baton_lock *m1, *m2, *multi;
    cr_assert(eq(int, baton_lock_open(a, th_tmpname("tls-m1"), &m1), BATON_OK));
    cr_assert(eq(int, baton_lock_open(a, th_tmpname("tls-m2"), &m2), BATON_OK));
    baton_lock *parts[2] = {m1, m2};
    cr_assert(eq(int, baton_multilock_open(parts, 2, &multi), BATON_OK));
    cr_assert(eq(int, baton_lock_try_acquire(multi, 0, 5000), BATON_OK));
    cr_assert(eq(int, baton_lock_release(multi), BATON_OK));

    baton_lock_close(multi);
    baton_lock_close(m1);
    baton_lock_close(m2);
    baton_latch_close(lat);
    baton_semaphore_close(sem);
    baton_lock_close(fa);
    baton_lock_close(la);
    baton_lock_close(lb);
    baton_client_close(a);
    baton_client_close(b);
    tls_stop(&s);
}

/* ------------------------------- the loop mode over TLS ------------------------------ */

/* Owners of one loop thread, with no engine thread (BATON_CALLBACKS_LOOP), take one lock
 * in turn over TLS: every operation, the wait on the pub/sub connection included, runs in
 * baton_client_process on the TLS sockets the loop polls. */
#define LOOP_OWNERS 6
#define LOOP_ROUNDS 20
typedef struct tls_loop {
    baton_client *c;
    baton_lock *l;
    baton_owner *owners[LOOP_OWNERS];
    int rounds[LOOP_OWNERS];
    int acquired;  /* acquisitions, all owners */
    int released;  /* releases completed */
    int errors;    /* failed operations */
    int64_t token; /* the last fencing token seen: each acquisition's is larger */
    bool tokens_rise;
    char why[200]; /* the first token that did not rise */
} tls_loop;

static void tls_loop_acquired(void *handle, baton_owner *owner, int rc, void *arg);

static int tls_loop_index(tls_loop *t, baton_owner *owner)
{
    for (int i = 0; i < LOOP_OWNERS; i++)
        if (t->owners[i] == owner)
            return i;
    return -1;
}

static void tls_loop_released(void *handle, baton_owner *owner, int rc, void *arg)
{
    tls_loop *t = arg;
    (void)handle;
    t->released++;
    if (rc != BATON_OK) {
        t->errors++;
        return;
    }
    int i = tls_loop_index(t, owner);
    if (i >= 0 && ++t->rounds[i] < LOOP_ROUNDS &&
        baton_lock_acquire_async(t->l, owner, 20000, BATON_LEASE_WATCHDOG, tls_loop_acquired, t,
                                 NULL) != BATON_OK)
        t->errors++;
}

static void tls_loop_acquired(void *handle, baton_owner *owner, int rc, void *arg)
{
    tls_loop *t = arg;
    (void)handle;
    if (rc != BATON_OK) {
        t->errors++;
        return;
    }
    t->acquired++;
    int64_t token = 0;
    int trc = baton_lock_fencing_token_as(t->l, owner, &token);
    if ((trc != BATON_OK || token <= t->token) && t->tokens_rise) {
        t->tokens_rise = false;
        snprintf(t->why, sizeof t->why, "token %lld after %lld (rc %d: %s)", (long long)token,
                 (long long)t->token, trc, trc ? baton_client_errmsg(t->c) : "");
    }
    t->token = token;
    if (baton_lock_release_async(t->l, owner, tls_loop_released, t, NULL) != BATON_OK)
        t->errors++;
}

Test(tls, the_loop_mode_works_over_tls_waits_included)
{
    tls_server s;
    tls_start(&s, "server", false, NULL);
    baton_options o;
    trusting(&o, s.url);
    baton_client *c, *holder;
    cr_assert(eq(int, baton_client_open(&o, &c), BATON_OK), "%s", baton_open_errmsg());
    cr_assert(eq(int, baton_client_open(&o, &holder), BATON_OK), "%s", baton_open_errmsg());
    cr_assert(eq(int, baton_client_set_callbacks(c, BATON_CALLBACKS_LOOP), BATON_OK));
    const char *name = th_tmpname("tls-loop");
    baton_lock *held;
    cr_assert(eq(int, baton_lock_open(holder, name, &held), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(held, BATON_LEASE_WATCHDOG), BATON_OK));
    tls_loop t = {.c = c, .tokens_rise = true};
    cr_assert(eq(int, baton_lock_open(c, name, &t.l), BATON_OK));
    int fd = -1;
    cr_assert(eq(int, baton_client_async_fd(c, &fd), BATON_OK));
    for (int i = 0; i < LOOP_OWNERS; i++) {
        cr_assert(eq(int, baton_owner_new(c, &t.owners[i]), BATON_OK));
        cr_assert(eq(int,
                     baton_lock_acquire_async(t.l, t.owners[i], 20000, BATON_LEASE_WATCHDOG,
                                              tls_loop_acquired, &t, NULL),
                     BATON_OK),
                  "%s", baton_client_errmsg(c));
    }
    /* every owner waits behind the other client's hold, on the pub/sub connection over
     * TLS, until its release */
    int64_t start = th_ms();
    while (th_ms() - start < 300) {
        struct pollfd p = {fd, POLLIN, 0};
        poll(&p, 1, 20);
        cr_assert(ge(int, baton_client_process(c), 0));
    }
    cr_assert(eq(int, t.acquired, 0), "acquired while another client held the lock");
    int64_t released_at = th_ms();
    cr_assert(eq(int, baton_lock_release(held), BATON_OK));
    int64_t first_ms = -1;
    while (t.released + t.errors < LOOP_OWNERS * LOOP_ROUNDS) {
        cr_assert(lt(i64, th_ms() - released_at, 30000), "%d acquired, %d released, %d errors",
                  t.acquired, t.released, t.errors);
        struct pollfd p = {fd, POLLIN, 0};
        poll(&p, 1, 20);
        cr_assert(ge(int, baton_client_process(c), 0));
        if (first_ms < 0 && t.acquired > 0)
            first_ms = th_ms() - released_at;
    }
    cr_assert(eq(int, t.errors, 0), "%s", baton_client_errmsg(c));
    cr_assert(eq(int, t.acquired, LOOP_OWNERS *LOOP_ROUNDS));
    cr_assert(t.tokens_rise, "fencing tokens rise with each acquisition: %s", t.why);
    cr_assert(lt(i64, first_ms, 1000), "the release's message reached the loop over TLS: %lld ms",
              (long long)first_ms);
    for (int i = 0; i < LOOP_OWNERS; i++)
        baton_owner_free(t.owners[i]);
    baton_lock_close(t.l);
    baton_lock_close(held);
    baton_client_close(c);
    baton_client_close(holder);
    tls_stop(&s);
}

Test(tls, idle_tls_connections_are_reused_not_reconnected)
{
    /* TLS 1.3 servers send session tickets after the handshake: a look at an idle
     * connection that finds only those must keep it. */
    tls_server s;
    tls_start(&s, "server", false, NULL);
    baton_options o;
    trusting(&o, s.url);
    baton_client *c;
    cr_assert(eq(int, baton_client_open(&o, &c), BATON_OK), "%s", baton_open_errmsg());
    baton_lock *l;
    cr_assert(eq(int, baton_lock_open(c, th_tmpname("tls-idle"), &l), BATON_OK));
    for (int i = 0; i < 20; i++) {
        cr_assert(eq(int, baton_lock_try_acquire(l, 0, 5000), BATON_OK), "%s",
                  baton_client_errmsg(c));
        cr_assert(eq(int, baton_lock_release(l), BATON_OK));
        th_sleep_ms(20);
    }
    baton_stats st;
    cr_assert(eq(int, baton_client_stats(c, &st), BATON_OK));
    cr_assert(eq(u64, st.connections_opened, 1), "one connection served 40 calls");
    baton_lock_close(l);
    baton_client_close(c);
    tls_stop(&s);
}

/* ------------------------------- mutual TLS ------------------------------------------- */

Test(tls, mutual_tls_works_and_is_enforced)
{
    tls_server s;
    tls_start(&s, "server", true, NULL);
    baton_options o;
    trusting(&o, s.url);
    int64_t took = open_expect(&o, BATON_ECONN, NULL);
    cr_assert(lt(i64, took, 1500), "refused quickly: %lld ms", (long long)took);
    o.tls_cert = file("client.crt");
    o.tls_key = file("client.key");
    open_expect(&o, BATON_OK, NULL);
    o.tls_key = file("other.key"); /* not the certificate's key */
    open_expect(&o, BATON_EINVAL, "mismatch");
    tls_stop(&s);
}

/* ------------------------------- what must fail, clearly and quickly ------------------ */

Test(tls, untrusted_expired_and_wrong_name_certificates_fail_fast)
{
    tls_server good, expired, other;
    tls_start(&good, "server", false, NULL);
    tls_start(&expired, "expired", false, NULL);
    tls_start(&other, "other", false, NULL);
    baton_options o;

    /* the system store does not know the test CA (reading the system's bundle of CA
     * certificates takes seconds under the sanitizers: the bound is "no hang") */
    trusting(&o, good.url);
    o.tls_ca = NULL;
    int64_t took = open_expect(&o, BATON_ECONN, "certificate");
    cr_assert(lt(i64, took, 10000), "%lld ms", (long long)took);

    /* a certificate from a CA that is not the configured one */
    trusting(&o, other.url);
    took = open_expect(&o, BATON_ECONN, "certificate");
    cr_assert(lt(i64, took, 1500), "%lld ms", (long long)took);

    trusting(&o, expired.url);
    took = open_expect(&o, BATON_ECONN, "expired");
    cr_assert(lt(i64, took, 1500), "%lld ms", (long long)took);

    /* the certificate is for 127.0.0.1 and localhost, not this name */
    trusting(&o, good.url);
    o.tls_sni = "redis.example.org";
    took = open_expect(&o, BATON_ECONN, "mismatch");
    cr_assert(lt(i64, took, 1500), "%lld ms", (long long)took);
    /* a name the certificate has */
    o.tls_sni = "localhost";
    open_expect(&o, BATON_OK, NULL);
    /* the explicit opt-out accepts what verification refused */
    trusting(&o, other.url);
    o.tls_ca = NULL;
    o.tls_insecure_skip_verify = true;
    open_expect(&o, BATON_OK, NULL);

    tls_stop(&good);
    tls_stop(&expired);
    tls_stop(&other);
}

/* ------------------------------- a hostile sentinel ---------------------------------- */

/* A sentinel serving TLS (the "server" certificate: 127.0.0.1 and localhost) that names as
 * the master mymaster the server on master_tls_port; its pid. */
static pid_t sentinel_start(int *tls_port, int master_tls_port, char *dirbuf, size_t len)
{
    for (int attempt = 0;; attempt++) {
        cr_assert(lt(int, attempt, 20), "no free ports for a sentinel");
        unsigned short r = 0;
        cr_assert(eq(int, (int)getrandom(&r, sizeof r, 0), (int)sizeof r));
        int plain = 57000 + r % 4000;
        *tls_port = plain + 1;
        snprintf(dirbuf, len, "/tmp/baton-test-sentinel-%d-%d", (int)getpid(), plain);
        mkdir(dirbuf, 0700);
        char conf[512];
        snprintf(conf, sizeof conf, "%s/sentinel.conf", dirbuf);
        FILE *f = fopen(conf, "w");
        cr_assert(f != NULL);
        fprintf(f,
                "port %d\nbind 127.0.0.1\ndir %s\ntls-port %d\ntls-cert-file %s\n"
                "tls-key-file %s\ntls-ca-cert-file %s\ntls-auth-clients no\n"
                "tls-replication yes\nsentinel monitor mymaster 127.0.0.1 %d 1\n"
                "sentinel auth-pass mymaster secret\n",
                plain, dirbuf, *tls_port, file("server.crt"), file("server.key"), file("ca.crt"),
                master_tls_port);
        fclose(f);
        fflush(NULL);
        pid_t pid = fork();
        cr_assert(pid >= 0);
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr))
                _exit(127);
            const char *srv = getenv("BATON_SERVER");
            if (!srv || !*srv)
                srv = "redis-server";
            execlp(srv, srv, conf, "--sentinel", (char *)NULL);
            _exit(127);
        }
        for (int i = 0; i < 250; i++) {
            int st;
            if (waitpid(pid, &st, WNOHANG) == pid)
                break; /* the port was taken: again */
            struct timeval tv = {0, 200000};
            redisContext *c = redisConnectWithTimeout("127.0.0.1", plain, tv);
            redisReply *rep =
                c && !c->err ? redisCommand(c, "SENTINEL get-master-addr-by-name mymaster") : NULL;
            bool up = rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2;
            if (rep)
                freeReplyObject(rep);
            if (c)
                redisFree(c);
            if (up)
                return pid;
            th_sleep_ms(20);
        }
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
}

/* The AUTH commands the server on port ran since its counters were reset on r. */
static long long auths_seen(redisContext *r)
{
    redisReply *rep = redisCommand(r, "INFO commandstats");
    cr_assert(rep && rep->type == REDIS_REPLY_STRING);
    const char *a = strstr(rep->str, "cmdstat_auth:calls=");
    long long n = a ? atoll(a + strlen("cmdstat_auth:calls=")) : 0;
    freeReplyObject(rep);
    return n;
}

/*
 * A sentinel that names a host of its choice as the master (issue 46.4). With --tls-sni
 * NAME (library tls_sni) every connection, the master's too, is verified against NAME, not
 * against the address the sentinel returned: a host with a certificate of the trusted CA
 * for that address but not for NAME fails the handshake and is never sent the password.
 * Without the name, the same host passes (its certificate holds the address) and gets
 * AUTH: what the name protects against.
 */
Test(tls, a_sentinel_naming_a_host_without_the_name_never_sends_it_the_password)
{
    tls_server evil;
    tls_start(&evil, "evil", false, "--requirepass secret");
    char sdir[128];
    int sport = 0;
    pid_t sentinel = sentinel_start(&sport, evil.port, sdir, sizeof sdir);
    redisContext *r = th_redis_port(evil.plain.port);
    redisReply *rep = redisCommand(r, "AUTH secret");
    cr_assert(rep && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    rep = redisCommand(r, "CONFIG RESETSTAT");
    freeReplyObject(rep);

    char url[128];
    snprintf(url, sizeof url, "rediss+sentinel://:secret@127.0.0.1:%d/mymaster", sport);
    baton_options o;
    trusting(&o, url);
    o.tls_sni = "localhost"; /* the sentinel's certificate has it, the named host's not */
    open_expect(&o, BATON_ECONN, "mismatch");
    cr_assert(eq(i64, auths_seen(r), 0), "the host the sentinel named was sent AUTH");
    /* nothing in the message carries the password */
    cr_assert(strstr(baton_open_errmsg(), "secret") == NULL, "%s", baton_open_errmsg());

    /* verified against the address the sentinel returned, the same host passes */
    trusting(&o, url);
    baton_client *c = NULL;
    baton_client_open(&o, &c); /* (the host is no master of anything: ROLE decides) */
    if (c)
        baton_client_close(c);
    cr_assert(ge(i64, auths_seen(r), 1), "without the name the host was not reached: the "
                                         "case above proves nothing");

    redisFree(r);
    kill(sentinel, SIGTERM);
    waitpid(sentinel, NULL, 0);
    char rm[200];
    snprintf(rm, sizeof rm, "rm -rf %s", sdir);
    cr_assert(eq(int, system(rm), 0));
    tls_stop(&evil);
}

/* A certificate whose only name is its common name (CN=localhost, no subjectAltName) is
 * accepted for no host name, as browsers and curl do (RFC 6125: the subject is not looked
 * at when the name is checked); OpenSSL alone would fall back to the CN. */
Test(tls, a_certificate_with_a_common_name_and_no_subject_alt_name_matches_no_host)
{
    tls_server s;
    tls_start(&s, "cn-only", false, NULL);
    baton_options o;
    trusting(&o, s.url);
    o.tls_sni = "localhost";
    int64_t took = open_expect(&o, BATON_ECONN, "mismatch");
    cr_assert(lt(i64, took, 1500), "%lld ms", (long long)took);
    /* the chain itself is good: only the name check refuses it */
    o.tls_insecure_skip_verify = true;
    open_expect(&o, BATON_OK, NULL);
    tls_stop(&s);
}

Test(tls, a_wrong_protocol_on_either_side_fails_clearly)
{
    tls_server s;
    tls_start(&s, "server", false, NULL);
    baton_options o;
    char url[96];

    /* rediss:// to the plain port */
    snprintf(url, sizeof url, "rediss://127.0.0.1:%d", s.plain.port);
    trusting(&o, url);
    int64_t took = open_expect(&o, BATON_ECONN, "TLS");
    cr_assert(lt(i64, took, 2500), "within the connect timeout: %lld ms", (long long)took);

    /* redis:// to the TLS port */
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", s.port);
    baton_options_init(&o);
    o.url = url;
    o.connect_timeout_ms = 2000;
    took = open_expect(&o, BATON_ECONN, "rediss://");
    cr_assert(lt(i64, took, 2500), "within the connect timeout: %lld ms", (long long)took);
    tls_stop(&s);
}

Test(tls, no_password_in_any_message)
{
    tls_server s;
    tls_start(&s, "server", false, "--requirepass rightpass");
    baton_options o;
    char url[128];
    snprintf(url, sizeof url, "rediss://:Wr0ngSecret@127.0.0.1:%d", s.port);
    trusting(&o, url);
    open_expect(&o, BATON_EAUTH, NULL);
    cr_assert(strstr(baton_open_errmsg(), "Wr0ngSecret") == NULL, "%s", baton_open_errmsg());
    /* and a failing handshake with a password in the URL */
    o.tls_sni = "redis.example.org";
    open_expect(&o, BATON_ECONN, NULL);
    cr_assert(strstr(baton_open_errmsg(), "Wr0ngSecret") == NULL, "%s", baton_open_errmsg());
    snprintf(url, sizeof url, "rediss://:rightpass@127.0.0.1:%d", s.port);
    trusting(&o, url);
    open_expect(&o, BATON_OK, NULL);
    tls_stop(&s);
}

/* ------------------------------- keepalive -------------------------------------------- */

static _Atomic int64_t ping_given_up_at; /* th_ms() when the log said so; 0 before */

static void log_hook(void *arg, int level, const char *msg)
{
    (void)arg, (void)level;
    if (strstr(msg, "PING") && ping_given_up_at == 0)
        ping_given_up_at = th_ms();
}

Test(tls, a_silenced_server_is_noticed_within_keepalive_and_waiters_get_errors)
{
    /* SIGSTOP: the server's kernel still answers TCP, so only the dispatcher's PING can
     * tell. The waiter sleeps on a lock held elsewhere; once the PING goes unanswered it is
     * woken, re-checks, and gets an error (its attempt times out, and so does the question
     * whether that attempt ran) before its own deadline. */
    tls_server s;
    tls_start(&s, "server", false, NULL);
    baton_options o;
    trusting(&o, s.url);
    o.keepalive_ms = 2000;
    o.command_timeout_ms = 1000;
    o.connect_timeout_ms = 1000;
    baton_client *holder, *c;
    cr_assert(eq(int, baton_client_open(&o, &holder), BATON_OK), "%s", baton_open_errmsg());
    o.log_fn = log_hook;
    o.log_level = BATON_LOG_WARN;
    cr_assert(eq(int, baton_client_open(&o, &c), BATON_OK), "%s", baton_open_errmsg());
    const char *name = th_tmpname("tls-keepalive");
    baton_lock *lh, *lw;
    cr_assert(eq(int, baton_lock_open(holder, name, &lh), BATON_OK));
    cr_assert(eq(int, baton_lock_open(c, name, &lw), BATON_OK));
    cr_assert(eq(int, baton_lock_acquire(lh, 60000), BATON_OK));
    waiter w = {lw, -1, 0};
    pthread_t t;
    pthread_create(&t, NULL, wait_lock, &w);
    th_sleep_ms(300); /* subscribed and asleep */
    kill(s.plain.pid, SIGSTOP);
    int64_t stopped_at = th_ms();
    pthread_join(t, NULL);
    int64_t returned = th_ms() - stopped_at;
    kill(s.plain.pid, SIGCONT);
    int64_t noticed = ping_given_up_at - stopped_at;
    cr_assert(gt(i64, ping_given_up_at, 0), "the log told of the unanswered PING");
    cr_assert(le(i64, noticed, 2000 + 700), "noticed within keepalive_ms (+ slack): %lld ms",
              (long long)noticed);
    cr_assert(not(eq(int, w.rc, BATON_OK)));
    cr_assert(not(eq(int, w.rc, BATON_ETIMEDOUT)), "an error, not the wait running out");
    cr_assert(lt(i64, w.waited_ms, 10000), "before the waiter's deadline: %lld ms after the stop",
              (long long)returned);
    baton_lock_close(lw);
    baton_lock_close(lh);
    baton_client_close(c);
    baton_client_close(holder);
    tls_stop(&s);
}

/* ------------------------------- the command over TLS --------------------------------- */

Test(tls, the_command_locks_over_tls_with_flags_or_environment_and_mutual_tls)
{
    tls_server s;
    tls_start(&s, "server", true, NULL); /* client certificates required */
    const char *name = th_tmpname("tls-cli");
    cli_result r;
    /* flags */
    cli_exec(&r, ARGS("--url", s.url, "--tls-ca", file("ca.crt"), "--tls-cert", file("client.crt"),
                      "--tls-key", file("client.key"), "lock", name, "--", "sh", "-c",
                      "test -n \"$BATON_FENCING_TOKEN\""));
    cr_assert(eq(int, r.status, 0), "stderr %s", r.err);
    cli_result_free(&r);
    /* environment */
    setenv("BATON_TLS_CA", file("ca.crt"), 1);
    setenv("BATON_TLS_CERT", file("client.crt"), 1);
    setenv("BATON_TLS_KEY", file("client.key"), 1);
    cli_exec(&r, ARGS("--url", s.url, "status", "--json", name));
    cr_assert(eq(int, r.status, 0), "stderr %s", r.err);
    cr_assert(strstr(r.out, "\"kind\": \"absent\"") != NULL, "released: %s", r.out);
    cr_assert(strstr(r.out, "\"fencing_token\": 1") != NULL, "taken once: %s", r.out);
    cli_result_free(&r);
    /* without the client certificate the server refuses: a connection failure, exit 120 */
    unsetenv("BATON_TLS_CERT");
    unsetenv("BATON_TLS_KEY");
    cli_exec(&r, ARGS("--url", s.url, "lock", name, "--", "true"));
    cr_assert(eq(int, r.status, 120), "stderr %s", r.err);
    cli_result_free(&r);
    /* a wrong name: exit 120 with the reason */
    setenv("BATON_TLS_CERT", file("client.crt"), 1);
    setenv("BATON_TLS_KEY", file("client.key"), 1);
    cli_exec(&r,
             ARGS("--url", s.url, "--tls-sni", "redis.example.org", "lock", name, "--", "true"));
    cr_assert(eq(int, r.status, 120), "stderr %s", r.err);
    cr_assert(strstr(r.err, "mismatch") != NULL, "stderr %s", r.err);
    cli_result_free(&r);
    /* --tls-insecure works, and says on every run what it gives up */
    for (int i = 0; i < 2; i++) {
        cli_exec(&r, ARGS("--url", s.url, "--tls-insecure", "lock", name, "--", "true"));
        cr_assert(eq(int, r.status, 0), "stderr %s", r.err);
        cr_assert(strstr(r.err, "warning: --tls-insecure") != NULL, "run %d: %s", i, r.err);
        cli_result_free(&r);
    }
    unsetenv("BATON_TLS_CA");
    unsetenv("BATON_TLS_CERT");
    unsetenv("BATON_TLS_KEY");
    tls_stop(&s);
}
