/*
 * Connections: bytes and TLS. A connection's reads and writes (through the reply guard),
 * its commands and replies, and TLS over its socket. Its TCP connect is in connect.c, the
 * server handshake in handshake.c, the pool of command connections in pool.c, the shared
 * connection in mux.c; these five files are the only ones in baton that touch a socket,
 * and share conn_impl.h.
 *
 * Why baton owns its sockets: hiredis 0.14.1 (Debian 12) has no TLS, and its blocking
 * context reads and writes the socket itself, so it cannot be given any. hiredis stays for
 * the protocol: redisFormatCommandArgv encodes, redisReader parses, behind a guard that
 * refuses what no baton reply can be (see "the reply guard"). Every socket here is
 * non-blocking; "blocking" calls poll() against a deadline, looked at on every turn (the
 * connect timeout while connecting, one command timeout per round trip after), so no call
 * can hang on a server that went silent, or that sends without end. Writes never raise SIGPIPE
 * (MSG_NOSIGNAL, and TLS goes through a BIO that writes the same way): a library must not kill its
 * host over a closed connection.
 */
#define _GNU_SOURCE
#include "conn_impl.h"

#include "client_fields.h"
#include "hooks.h"
#include "sentinel.h"
#include "topology.h"

#include <hiredis/hiredis.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* ------------------------------- the reply guard -------------------------------------- */

/* hiredis 0.14.1's reader trusts the server: it buffers a line until its CRLF however long,
 * a bulk string until all of its announced length arrived (2^62 bytes: until memory runs
 * out), and an array of any announced size; and it rescans an unfinished line, and moves
 * what is left of its buffer, on every call. So every byte read goes through this small
 * scanner of RESP2's framing first, once: it refuses what baton's limits refuse (conn.h,
 * BATON__REPLY_MAX_*) as soon as the header that announces it arrives, and it counts the
 * replies that are complete, so that hiredis is asked only for those (each parse is then
 * linear in its reply, and its buffer never holds more than one chunk beyond the reply
 * being parsed). It is stricter than hiredis (a bulk must end with CRLF, a length below -1
 * is refused), never looser. Its state (struct guard) is in conn_impl.h. */

/* Whether TLS records are read blocking (with the slice above) on this thread: the BIO
 * below reads with MSG_DONTWAIT unless set, around one SSL_read in read_until(). */
static _Thread_local bool bio_blocking;

/* ------------------------------- small pieces ----------------------------------------- */

void baton__conn_set_err(baton__conn *k, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(k->errstr, sizeof k->errstr, fmt, ap);
    va_end(ap);
    k->broken = true;
}

/* The connection is broken by what the server sent: a protocol error (BATON_EPROTO). */
static void set_proto(baton__conn *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_proto(baton__conn *k, const char *fmt, ...)
{
    char why[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    baton__conn_set_err(k, "protocol error: %s", why);
    k->proto = true;
}

/* One element (or a whole reply at depth 0) ended. */
static void guard_item(guard *g)
{
    g->state = G_TYPE;
    while (g->depth > 0) {
        if (--g->left[g->depth - 1] > 0)
            return;
        g->depth--; /* that array is complete: an element of the one around it */
    }
    g->ready++;
    g->bytes = g->elements = 0;
}

/* A $ or * header's number: -1 (nil) and up; false when it is not one. */
static bool guard_number(guard *g, int64_t *out)
{
    size_t n = g->numlen;
    if (n >= sizeof g->num || n < 2 || g->num[n - 1] != '\r')
        return false;
    n--; /* the CR */
    if (n == 2 && g->num[0] == '-' && g->num[1] == '1') {
        *out = -1;
        return true;
    }
    if (n > 19) /* more than a 63-bit value has digits for */
        return false;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (g->num[i] < '0' || g->num[i] > '9' || v > (INT64_MAX - 9) / 10)
            return false;
        v = v * 10 + (g->num[i] - '0');
    }
    *out = v;
    return true;
}

/* A line ended (its CRLF read). false: refused, why in k->errstr. */
static bool guard_line(baton__conn *k, guard *g)
{
    if (g->type != '$' && g->type != '*') {
        guard_item(g);
        return true;
    }
    int64_t n;
    if (!guard_number(g, &n)) {
        set_proto(k, "a %s length that is not a number", g->type == '$' ? "bulk string" : "array");
        return false;
    }
    if (n == -1) { /* nil */
        guard_item(g);
        return true;
    }
    if (g->type == '$') {
        if ((uint64_t)n > BATON__REPLY_MAX_BYTES ||
            g->bytes + (uint64_t)n + 2 > BATON__REPLY_MAX_BYTES) {
            set_proto(k,
                      "a reply larger than baton's limit of %d MiB (a bulk string of %lld bytes)",
                      BATON__REPLY_MAX_BYTES >> 20, (long long)n);
            return false;
        }
        g->bytes += (uint64_t)n + 2;
        g->bulk = (uint64_t)n;
        g->state = G_BULK;
        return true;
    }
    if (n > BATON__REPLY_MAX_ELEMENTS || g->elements + (uint64_t)n > BATON__REPLY_MAX_ELEMENTS) {
        set_proto(k,
                  "a reply with more array elements than baton's limit of %d (an array of "
                  "%lld)",
                  BATON__REPLY_MAX_ELEMENTS, (long long)n);
        return false;
    }
    if (n == 0) {
        guard_item(g);
        return true;
    }
    if (g->depth == MAX_DEPTH) {
        set_proto(k, "arrays nested deeper than %d", MAX_DEPTH);
        return false;
    }
    g->elements += (uint64_t)n;
    g->left[g->depth++] = n;
    g->state = G_TYPE;
    return true;
}

/* Scans bytes about to be fed to hiredis. false: the stream is refused (k->errstr). */
static bool guard_scan(baton__conn *k, const char *buf, size_t n)
{
    guard *g = &k->guard;
    size_t i = 0;
    while (i < n) {
        switch (g->state) {
        case G_TYPE: {
            char t = buf[i++];
            if (!strchr("+-:$*", t) || t == '\0') {
                set_proto(k, "a reply that begins with byte 0x%02x", (unsigned char)t);
                return false;
            }
            g->type = t;
            g->state = G_LINE;
            g->line = g->numlen = 0;
            g->cr = false;
            g->bytes++;
            break;
        }
        case G_LINE: {
            const char *lf = memchr(buf + i, '\n', n - i);
            size_t end = lf ? (size_t)(lf - buf) : n, seg = end - i;
            if (seg > 0) {
                g->cr = buf[end - 1] == '\r';
                if ((g->type == '$' || g->type == '*') && g->numlen < sizeof g->num) {
                    size_t m = seg < sizeof g->num - g->numlen ? seg : sizeof g->num - g->numlen;
                    memcpy(g->num + g->numlen, buf + i, m);
                    g->numlen += seg; /* past sizeof num: refused as not a number */
                }
                g->line += seg;
                g->bytes += seg;
                if (g->line > BATON__REPLY_MAX_LINE || g->bytes > BATON__REPLY_MAX_BYTES) {
                    set_proto(k, "a line longer than baton's limit of %d KiB",
                              BATON__REPLY_MAX_LINE >> 10);
                    return false;
                }
            }
            if (!lf) {
                i = n;
                break;
            }
            i = end + 1;
            g->bytes++;
            g->line++;
            if (!g->cr) { /* a bare LF is part of the line (hiredis looks for CRLF) */
                if (g->numlen < sizeof g->num)
                    g->num[g->numlen] = '\n';
                g->numlen++;
                continue;
            }
            g->cr = false;
            if (!guard_line(k, g))
                return false;
            break;
        }
        case G_BULK: {
            size_t m = n - i < g->bulk ? n - i : (size_t)g->bulk;
            i += m;
            g->bulk -= m;
            if (g->bulk == 0)
                g->state = G_BULK_CR;
            break;
        }
        case G_BULK_CR:
        case G_BULK_LF:
            if (buf[i++] != (g->state == G_BULK_CR ? '\r' : '\n')) {
                set_proto(k, "a bulk string longer than its announced length");
                return false;
            }
            if (g->state == G_BULK_CR)
                g->state = G_BULK_LF;
            else
                guard_item(g);
            break;
        }
    }
    return true;
}

/* OpenSSL's reason for the last failure on this thread (its error queue), or `fallback`. */
static void ssl_reason(char *buf, size_t len, const char *fallback)
{
    unsigned long e = ERR_peek_last_error();
    if (e) {
        const char *r = ERR_reason_error_string(e);
        snprintf(buf, len, "%s", r ? r : "TLS error");
    } else
        snprintf(buf, len, "%s", fallback);
    ERR_clear_error();
}

baton__conn *baton__conn_new(void)
{
    static atomic_uint_fast64_t serials;
    baton__conn *k = calloc(1, sizeof *k);
    if (!k)
        return NULL;
    k->fd = -1;
    k->serial = atomic_fetch_add(&serials, 1) + 1;
    k->reader = redisReaderCreate();
    if (!k->reader) {
        free(k);
        return NULL;
    }
    k->last_read_us = baton__now_us();
    return k;
}

void baton__conn_close(baton__conn *k)
{
    if (!k)
        return;
    if (k->ssl)
        SSL_free(k->ssl); /* no close_notify: the socket goes at once either way */
    if (k->fd >= 0)
        close(k->fd);
    redisReaderFree(k->reader);
    free(k->out);
    free(k);
}

int baton__conn_fd(const baton__conn *k)
{
    return k->fd;
}

bool baton__conn_more(const baton__conn *k)
{
    return k->more && !k->broken;
}

const char *baton__conn_errstr(const baton__conn *k)
{
    return k->errstr[0] ? k->errstr : "connection closed";
}

int64_t baton__conn_last_read(const baton__conn *k)
{
    return k->last_read_us;
}

bool baton__conn_reused(const baton__conn *k)
{
    return k->reused;
}

/* ------------------------------- raw I/O ---------------------------------------------- */

/* What a failed send/recv means (errno, not EINTR): IO_AGAIN (it would block), or
 * IO_BROKEN with the reason recorded. */
static ssize_t sock_failed(baton__conn *k)
{
    if (errno == EAGAIN || errno == EWOULDBLOCK)
        return IO_AGAIN;
    baton__conn_set_err(k, "%s", strerror(errno));
    return IO_BROKEN;
}

/* The three outcomes of one read or write attempt. */

/* What a failed SSL_read_ex/SSL_write_ex means: IO_AGAIN with *want set (the record layer
 * needs the socket readable or writable), or IO_BROKEN with the reason recorded. */
static ssize_t ssl_failed(baton__conn *k, short *want, const char *what)
{
    int e = SSL_get_error(k->ssl, 0);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        *want = e == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN;
        return IO_AGAIN;
    }
    if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && errno == 0)) {
        baton__conn_set_err(k, "connection closed by the server");
        return IO_BROKEN;
    }
    char why[96];
    ssl_reason(why, sizeof why, e == SSL_ERROR_SYSCALL ? strerror(errno) : what);
    baton__conn_set_err(k, "%s", why);
    return IO_BROKEN;
}

/* Writes what it can: bytes written (> 0), IO_AGAIN with *want set, or IO_BROKEN. */
ssize_t baton__conn_io_write(baton__conn *k, const char *buf, size_t len, short *want)
{
    *want = POLLOUT;
    if (k->ssl) {
        ERR_clear_error();
        size_t n = 0;
        return SSL_write_ex(k->ssl, buf, len, &n) == 1 ? (ssize_t)n
                                                       : ssl_failed(k, want, "TLS write failed");
    }
    for (;;) {
        ssize_t n = send(k->fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n >= 0)
            return n;
        if (errno != EINTR)
            return sock_failed(k);
    }
}

/* Reads what it can: bytes read (> 0), IO_AGAIN with *want set, or IO_BROKEN (closed).
 * block: wait in the read for up to BATON__READ_SLICE_MS (IO_AGAIN when nothing came). */
ssize_t baton__conn_io_read(baton__conn *k, char *buf, size_t len, short *want, bool block)
{
    *want = POLLIN;
    if (k->ssl) {
        ERR_clear_error();
        size_t n = 0;
        bio_blocking = block;
        int ok = SSL_read_ex(k->ssl, buf, len, &n);
        bio_blocking = false;
        return ok == 1 ? (ssize_t)n : ssl_failed(k, want, "TLS read failed");
    }
    for (;;) {
        ssize_t n = recv(k->fd, buf, len, block ? 0 : MSG_DONTWAIT);
        if (n > 0)
            return n;
        if (n == 0) {
            baton__conn_set_err(k, "connection closed by the server");
            return IO_BROKEN;
        }
        if (errno != EINTR)
            return sock_failed(k);
    }
}

/* Waits until the socket allows `events` or the deadline passes: 1 ready, 0 timed out. */
int baton__conn_wait_fd(int fd, short events, int64_t deadline_us, uint64_t key)
{
    int yielded = baton__net_waits()->wait_fd(fd, events, deadline_us, key); /* on a fiber */
    if (yielded >= 0)
        return yielded;
    for (;;) {
        int64_t left = deadline_us - baton__now_us();
        if (left <= 0)
            return 0;
        struct pollfd p = {fd, events, 0};
        int n = poll(&p, 1, (int)((left + 999) / 1000));
        if (n > 0)
            return 1; /* readiness, or an error the next read/write will name */
        if (n < 0 && errno != EINTR)
            return 1;
    }
}

/* Waits for k's socket (its serial as the key). */
static int wait_conn(const baton__conn *k, short events, int64_t deadline_us)
{
    return baton__conn_wait_fd(k->fd, events, deadline_us, k->serial);
}

/* Feeds bytes just read to the parser, through the guard. */
bool baton__conn_take(baton__conn *k, const char *buf, size_t n)
{
    k->last_read_us = baton__now_us();
    k->sent_unread = false;
    if (!guard_scan(k, buf, n))
        return false;
    if (redisReaderFeed(k->reader, buf, n) != REDIS_OK) {
        baton__conn_set_err(k, "out of memory reading a reply");
        return false;
    }
    return true;
}

/* ------------------------------- output and replies ----------------------------------- */

int baton__conn_append(baton__conn *k, int argc, const char **argv, const size_t *lens)
{
    char *cmd = NULL;
    int n = redisFormatCommandArgv(&cmd, argc, argv, lens);
    if (n < 0 || !cmd)
        return BATON_ENOMEM;
    if (k->off == k->len)
        k->off = k->len = 0;
    if (k->len + (size_t)n > k->cap) {
        size_t cap = k->cap ? k->cap : 256;
        while (cap < k->len + (size_t)n)
            cap *= 2;
        char *out = realloc(k->out, cap);
        if (!out) {
            redisFreeCommand(cmd);
            return BATON_ENOMEM;
        }
        k->out = out;
        k->cap = cap;
    }
    memcpy(k->out + k->len, cmd, (size_t)n);
    k->len += (size_t)n;
    k->pending++;
    if (argc == 3 && !lens && strcmp(argv[0], "WAIT") == 0)    /* baton__append_wait's */
        k->round_wait_us += strtoll(argv[2], NULL, 10) * 1000; /* the server's own bound */
    if (argc == 4 && !lens && strcmp(argv[0], "WAITAOF") == 0) /* sync_aof's */
        k->round_wait_us += strtoll(argv[3], NULL, 10) * 1000;
    redisFreeCommand(cmd);
    return BATON_OK;
}

int baton__conn_next(baton__conn *k, redisReply **out)
{
    void *r = NULL;
    *out = NULL;
    if (k->proto)
        return BATON_EPROTO;
    if (k->guard.ready == 0)
        return BATON_OK; /* nothing complete: hiredis is not asked to look again */
    if (redisReaderGetReply(k->reader, &r) != REDIS_OK) {
        set_proto(k, "%s", k->reader->errstr); /* e.g. "Bad integer value" */
        return BATON_EPROTO;
    }
    if (!r) { /* the guard counted a reply hiredis did not find: never, says the fuzzer */
        set_proto(k, "a reply the parser did not complete");
        return BATON_EPROTO;
    }
    k->guard.ready--;
    *out = r;
    return BATON_OK;
}

/* Writes the whole output buffer before the deadline. */
int baton__conn_flush_until(baton__conn *k, int64_t deadline_us)
{
    while (!k->broken && k->off < k->len) {
        if (baton__now_us() >= deadline_us) {
            baton__conn_set_err(k, "could not send within the timeout");
            break;
        }
        short want;
        ssize_t n = baton__conn_io_write(k, k->out + k->off, k->len - k->off, &want);
        if (n > 0) {
            k->off += (size_t)n;
            k->sent_unread = true;
        } else if (n == IO_AGAIN && !wait_conn(k, want, deadline_us))
            baton__conn_set_err(k, "could not send within the timeout");
    }
    return k->broken ? BATON_ECONN : BATON_OK;
}

/* Why a read ran out of time: nothing came, or a reply began and did not end. */
void baton__conn_timed_out(baton__conn *k)
{
    if (k->guard.state != G_TYPE || k->guard.depth > 0)
        baton__conn_set_err(k, "the reply did not end within the timeout (%llu bytes of it read)",
                            (unsigned long long)k->guard.bytes);
    else
        baton__conn_set_err(k, "no reply within the timeout");
}

/* Reads until one whole reply is parsed, before the deadline, which is looked at on every
 * turn: a server that sends without end, or a byte at a time, is given up on time. One
 * chunk is read at a time, and only when no complete reply is waiting (see the guard).
 * BATON_ECONN or BATON_EPROTO (k->proto) on failure. */
int baton__conn_read_until(baton__conn *k, int64_t deadline_us, redisReply **out)
{
    char buf[READ_CHUNK];
    bool may_block = !baton__net_waits()->on_fiber(); /* a fiber yields instead (wait_fd) */
    *out = NULL;
    while (!k->broken) {
        if (baton__conn_next(k, out) != BATON_OK)
            break;
        if (*out) {
            if (k->pending > 0 && --k->pending == 0)
                k->round_us = k->round_wait_us = 0; /* every reply of the round trip is in */
            return BATON_OK;
        }
        if (k->fd < 0) { /* detached: nothing more will come */
            baton__conn_set_err(k, "connection closed by the server");
            break;
        }
        int64_t left = deadline_us - baton__now_us();
        if (left <= 0) {
            baton__conn_timed_out(k);
            break;
        }
        short want;
        bool block = may_block && left >= BATON__READ_SLICE_MS * 1000;
        if (!may_block && k->sent_unread && !k->ssl) {
            /* On a fiber, a reply to what was just sent is not there yet: a recv() now
             * would find nothing (EAGAIN) and cost a system call per round trip. The
             * engine's one poll() for all its fibers says when it is. Over TLS the
             * library may hold decrypted bytes the socket does not show: it reads first. */
            k->sent_unread = false;
            if (!wait_conn(k, POLLIN, deadline_us)) {
                baton__conn_timed_out(k);
                break;
            }
        }
        ssize_t n = baton__conn_io_read(k, buf, sizeof buf, &want, block);
        if (n > 0)
            baton__conn_take(k, buf, (size_t)n);
        else if (n == IO_AGAIN && (!block || want == POLLOUT) && !wait_conn(k, want, deadline_us))
            baton__conn_timed_out(k);
    }
    return k->proto ? BATON_EPROTO : BATON_ECONN;
}

/* The deadline of the round trip on k: the earlier of deadline_us and one command timeout
 * from the flush that began it (plus what a WAIT in it may block on the server:
 * sync_timeout_ms). Every reply of the round trip (ASKING, the command, WAIT) shares it,
 * so a server that answers each of them just in time cannot stretch the round trip to a
 * command timeout per reply. */
static int64_t round_deadline(const baton_client *c, baton__conn *k, int64_t deadline_us)
{
    if (k->round_us == 0)
        k->round_us = baton__deadline_after_ms(c->cfg.command_timeout_ms) + k->round_wait_us;
    return deadline_us < k->round_us ? deadline_us : k->round_us;
}

int baton__conn_flush_by(baton_client *c, baton__conn *k, const char *what, int64_t deadline_us)
{
    if (k->link)
        return baton__mux_flush(c, k, what, round_deadline(c, k, deadline_us));
    if (baton__conn_flush_until(k, round_deadline(c, k, deadline_us)) == BATON_OK)
        return BATON_OK;
    return baton__fail(c, BATON_ECONN, "%s: %s", what, baton__conn_errstr(k));
}

int baton__conn_read_by(baton_client *c, baton__conn *k, const char *what, int64_t deadline_us,
                        redisReply **out)
{
    if (k->link)
        return baton__mux_read(c, k, what, round_deadline(c, k, deadline_us), out);
    int rc = baton__conn_read_until(k, round_deadline(c, k, deadline_us), out);
    if (rc == BATON_OK)
        return BATON_OK;
    return baton__fail(c, rc, "%s: %s", what, baton__conn_errstr(k));
}

int baton__conn_flush(baton_client *c, baton__conn *k, const char *what)
{
    return baton__conn_flush_by(c, k, what, BATON__NO_DEADLINE);
}

int baton__conn_read(baton_client *c, baton__conn *k, const char *what, redisReply **out)
{
    return baton__conn_read_by(c, k, what, BATON__NO_DEADLINE, out);
}

short baton__conn_events(const baton__conn *k)
{
    short ev = POLLIN;
    if (k->off < k->len || k->ssl_wants_write)
        ev |= POLLOUT;
    return ev;
}

bool baton__conn_io(baton__conn *k, short revents)
{
    if (k->broken)
        return false;
    k->more = false;
    if (revents & (POLLIN | POLLHUP | POLLERR) || k->ssl_wants_write) {
        /* Read until the socket has nothing more, or until replies are complete: they are
         * taken before more is read (see the guard), and k->more tells the caller to come
         * back without waiting for poll(), which cannot see records OpenSSL decrypted. */
        char buf[READ_CHUNK];
        k->ssl_wants_write = false;
        for (;;) {
            if (k->guard.ready > 0) {
                k->more = true;
                break;
            }
            short want;
            ssize_t n = baton__conn_io_read(k, buf, sizeof buf, &want, false);
            if (n > 0) {
                if (!baton__conn_take(k, buf, (size_t)n))
                    return false;
                if (!k->ssl && (size_t)n < sizeof buf)
                    break; /* the socket had no more: what comes later wakes poll(), and a
                            * recv() now would find nothing (EAGAIN: a system call for each
                            * message a subscriber gets) */
                continue;
            }
            if (n == IO_BROKEN)
                return false;
            k->ssl_wants_write = want == POLLOUT;
            break;
        }
    }
    while (k->off < k->len) {
        short want;
        ssize_t n = baton__conn_io_write(k, k->out + k->off, k->len - k->off, &want);
        if (n == IO_BROKEN)
            return false;
        if (n == IO_AGAIN)
            break;
        k->off += (size_t)n;
    }
    return true;
}

baton__conn *baton__conn_detached(void)
{
    return baton__conn_new();
}

int baton__conn_feed(baton__conn *k, const char *buf, size_t len)
{
    return baton__conn_take(k, buf, len) ? BATON_OK : BATON_ENOMEM;
}

/* ------------------------------- TLS -------------------------------------------------- */

/* The socket BIO writes with write(2), which raises SIGPIPE on a connection the peer
 * closed, and reads with read(2), which blocks on baton's blocking sockets; this one is the
 * socket BIO with send(MSG_NOSIGNAL | MSG_DONTWAIT) for its write and recv() for its read,
 * blocking only inside read_until() (bio_blocking). */
static BIO_METHOD *nosig_method;
static pthread_once_t nosig_once = PTHREAD_ONCE_INIT;

static int nosig_write(BIO *b, const char *buf, int len)
{
    int fd = -1;
    BIO_get_fd(b, &fd);
    BIO_clear_retry_flags(b);
    ssize_t n;
    while ((n = send(fd, buf, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT)) < 0 && errno == EINTR) {
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        BIO_set_retry_write(b);
    return (int)n;
}

static int bio_read(BIO *b, char *buf, int len)
{
    int fd = -1;
    BIO_get_fd(b, &fd);
    BIO_clear_retry_flags(b);
    if (!buf || len <= 0)
        return 0;
    ssize_t n;
    while ((n = recv(fd, buf, (size_t)len, bio_blocking ? 0 : MSG_DONTWAIT)) < 0 &&
           errno == EINTR) {
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        BIO_set_retry_read(b);
    return (int)n;
}

static void make_nosig_method(void)
{
    const BIO_METHOD *s = BIO_s_socket();
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR,
                                 "baton socket");
    if (!m)
        return;
    if (!BIO_meth_set_write(m, nosig_write) || !BIO_meth_set_read(m, bio_read) ||
        !BIO_meth_set_puts(m, BIO_meth_get_puts(s)) ||
        !BIO_meth_set_ctrl(m, BIO_meth_get_ctrl(s)) ||
        !BIO_meth_set_create(m, BIO_meth_get_create(s)) ||
        !BIO_meth_set_destroy(m, BIO_meth_get_destroy(s))) {
        BIO_meth_free(m);
        return;
    }
    nosig_method = m;
}

/* An encrypted key would make OpenSSL prompt on the terminal for its passphrase; a library
 * must fail instead. */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
    (void)buf, (void)size, (void)rwflag, (void)u;
    return 0;
}

static int tls_fail(char *err, size_t errlen, const char *what, const char *path)
{
    char why[96];
    ssl_reason(why, sizeof why, "unreadable or invalid");
    /* Paths are configuration the caller wrote, not secrets; a passphrase never reaches
     * OpenSSL's messages (there is none: see no_passphrase). */
    snprintf(err, errlen, "TLS %s %s: %s", what, path, why);
    return BATON_EINVAL;
}

int baton__tls_setup(baton_client *c, const baton_options *o, char *err, size_t errlen)
{
    bool any_option =
        o && (o->tls_ca || o->tls_cert || o->tls_key || o->tls_sni || o->tls_insecure_skip_verify);
    if (!c->cfg.ep.tls) {
        if (any_option) {
            /* Plain text to a server the caller configured TLS for would be worse than no
             * connection. */
            snprintf(err, errlen, "TLS options are set, but the URL is not rediss://");
            return BATON_EINVAL;
        }
        return BATON_OK;
    }
    if (c->cfg.ep.path) {
        snprintf(err, errlen, "TLS over a unix socket is not supported");
        return BATON_EINVAL;
    }
    if (o && ((o->tls_cert != NULL) != (o->tls_key != NULL))) {
        snprintf(err, errlen, "tls_cert and tls_key go together (mutual TLS needs both)");
        return BATON_EINVAL;
    }
    pthread_once(&nosig_once, make_nosig_method);
    if (!nosig_method)
        return BATON_ENOMEM;
    ERR_clear_error();
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx)
        return BATON_ENOMEM;
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_default_passwd_cb(ctx, no_passphrase);
    int rc = BATON_OK;
    const char *ca = o ? o->tls_ca : NULL;
    if (ca) {
        struct stat st;
        bool dir = stat(ca, &st) == 0 && S_ISDIR(st.st_mode);
        if (SSL_CTX_load_verify_locations(ctx, dir ? NULL : ca, dir ? ca : NULL) != 1)
            rc = tls_fail(err, errlen, "CA", ca);
    } else if (SSL_CTX_set_default_verify_paths(ctx) != 1)
        rc = tls_fail(err, errlen, "CA", "(system store)");
    if (rc == BATON_OK && o && o->tls_cert) {
        if (SSL_CTX_use_certificate_chain_file(ctx, o->tls_cert) != 1)
            rc = tls_fail(err, errlen, "certificate", o->tls_cert);
        else if (SSL_CTX_use_PrivateKey_file(ctx, o->tls_key, SSL_FILETYPE_PEM) != 1)
            rc = tls_fail(err, errlen, "key", o->tls_key);
        else if (SSL_CTX_check_private_key(ctx) != 1)
            rc = tls_fail(err, errlen, "key (does not match the certificate)", o->tls_key);
    }
    bool insecure = o && o->tls_insecure_skip_verify;
    SSL_CTX_set_verify(ctx, insecure ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
    if (rc == BATON_OK && o && o->tls_sni) {
        c->tls_name = baton__strdup(o->tls_sni);
        if (!c->tls_name)
            rc = BATON_ENOMEM;
    }
    if (rc != BATON_OK) {
        SSL_CTX_free(ctx);
        return rc;
    }
    c->tls = ctx;
    c->tls_insecure = insecure;
    return BATON_OK;
}

void baton__tls_free(baton_client *c)
{
    SSL_CTX_free(c->tls);
    c->tls = NULL;
    free(c->tls_name);
    c->tls_name = NULL;
}

/* The TLS handshake on a connected socket, within the deadline. */
bool baton__tls_start(baton_client *c, baton__conn *k, const char *host, int64_t deadline_us)
{
    ERR_clear_error();
    const char *name = c->tls_name ? c->tls_name : host;
    k->ssl = SSL_new(c->tls);
    BIO *bio = k->ssl ? BIO_new(nosig_method) : NULL;
    if (!bio) {
        baton__conn_set_err(k, "out of memory");
        return false;
    }
    BIO_set_fd(bio, k->fd, BIO_NOCLOSE);
    SSL_set_bio(k->ssl, bio, bio);
    unsigned char addr[sizeof(struct in6_addr)];
    bool is_ip = inet_pton(AF_INET, name, addr) == 1 || inet_pton(AF_INET6, name, addr) == 1;
    if (!is_ip)
        SSL_set_tlsext_host_name(k->ssl, name); /* SNI carries names, never addresses */
    if (!c->tls_insecure) {
        /* A name is matched against the certificate's subjectAltName entries only, never
         * its common name (OpenSSL falls back to the CN when there is no DNS entry;
         * browsers and curl do not: RFC 6125, and CA/Browser Forum rules since 2012). */
        SSL_set_hostflags(k->ssl, X509_CHECK_FLAG_NEVER_CHECK_SUBJECT);
        int ok = is_ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(k->ssl), name)
                       : SSL_set1_host(k->ssl, name);
        if (ok != 1) {
            baton__conn_set_err(k, "cannot verify the server name");
            return false;
        }
    }
    for (;;) {
        int r = SSL_connect(k->ssl);
        if (r == 1)
            return true;
        int e = SSL_get_error(k->ssl, r);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
            if (!wait_conn(k, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline_us)) {
                baton__conn_set_err(
                    k, "TLS handshake: no answer within the connect timeout (is this a TLS "
                       "port?)");
                return false;
            }
            continue;
        }
        long v = SSL_get_verify_result(k->ssl);
        char why[96];
        if (v != X509_V_OK)
            snprintf(why, sizeof why, "%s", X509_verify_cert_error_string(v));
        else
            ssl_reason(why, sizeof why,
                       e == SSL_ERROR_SYSCALL ? "connection closed during the handshake"
                                              : "handshake failed");
        const char *hint = strstr(why, "wrong version number") || strstr(why, "packet length")
                               ? " (the server does not speak TLS on this port: redis://?)"
                               : "";
        baton__conn_set_err(k, "TLS handshake: %s%s", why, hint);
        return false;
    }
}
