/*
 * Connections: the endpoint (TCP, unix socket, TLS over TCP), the handshake, and the pool of
 * command connections. The only file in baton that touches a socket.
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
#include "conn.h"

#include "client.h"
#include "evloop.h"
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
 * is refused), never looser. */

enum { G_TYPE, G_LINE, G_BULK, G_BULK_CR, G_BULK_LF };

#define MAX_DEPTH 7 /* hiredis 0.14's own limit of nested arrays */

typedef struct guard {
    int state;
    char type;               /* of the line being read */
    bool cr;                 /* the line's last byte so far is '\r' */
    size_t line;             /* bytes of the line so far (CR included) */
    char num[24];            /* a $ or * header's digits */
    size_t numlen;           /* > sizeof num - 1: too long to be a length */
    uint64_t bulk;           /* payload bytes of a bulk string still to come */
    int depth;               /* arrays open */
    int64_t left[MAX_DEPTH]; /* elements still to come in each open array */
    uint64_t bytes;          /* of the reply being read */
    uint64_t elements;       /* array elements announced in it, at every depth */
    size_t ready;            /* complete replies fed to hiredis and not yet taken */
} guard;

struct baton__conn {
    int fd;
    SSL *ssl;            /* NULL: plain text */
    redisReader *reader; /* replies parsed from what was read */
    char *out;           /* encoded commands not yet written: out[off..len) */
    size_t off, len, cap;
    bool broken;
    bool ssl_wants_write;     /* a TLS read needs the socket writable first (rare) */
    int64_t last_read_us;     /* monotonic time of the last byte read */
    uint64_t gen;             /* the topology's generation when it connected */
    struct baton__conn *next; /* in the pool's idle list */
    baton__pool *pool;        /* where it goes back */
    bool reused;              /* lent from the pool, not connected for this use */
    bool proto;               /* broken by a reply baton refuses (BATON_EPROTO) */
    bool more;                /* io stopped reading with complete replies to take first */
    guard guard;              /* the framing of what was read (the reply guard) */
    int64_t pending;          /* replies still due to commands appended (blocking use) */
    int64_t round_us;         /* deadline of the round trip being read; 0: none open */
    int64_t round_wait_us;    /* a WAIT in it may hold its reply this long on the server */
    char errstr[160];
};

#define READ_CHUNK 16384

/* A blocking read waits in recv() itself, for at most this long (SO_RCVTIMEO, set once per
 * connection), so that a round trip costs one send() and one recv(), as hiredis's blocking
 * context did, instead of a recv() that finds nothing, a poll() and a recv(). The deadline
 * is looked at after every slice; with less than a slice left, poll() waits for the rest. */
#define READ_SLICE_MS 100

/* A pooled connection is looked at (poll) before it is lent only when it sat idle this
 * long: long enough for a server's idle timeout (whole seconds) or a load balancer to have
 * closed it. One closed sooner (CLIENT KILL, a restart) fails the command sent on it, which
 * the callers resolve like any connection lost mid-command. */
#define IDLE_CHECK_US 1000000

/* Whether TLS records are read blocking (with the slice above) on this thread: the BIO
 * below reads with MSG_DONTWAIT unless set, around one SSL_read in read_until(). */
static _Thread_local bool bio_blocking;

/* ------------------------------- small pieces ----------------------------------------- */

static void set_err(baton__conn *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_err(baton__conn *k, const char *fmt, ...)
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
    set_err(k, "protocol error: %s", why);
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

static baton__conn *conn_new(void)
{
    baton__conn *k = calloc(1, sizeof *k);
    if (!k)
        return NULL;
    k->fd = -1;
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

/* The three outcomes of one read or write attempt. */
enum { IO_BROKEN = -1, IO_AGAIN = 0 };

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
        set_err(k, "connection closed by the server");
        return IO_BROKEN;
    }
    char why[96];
    ssl_reason(why, sizeof why, e == SSL_ERROR_SYSCALL ? strerror(errno) : what);
    set_err(k, "%s", why);
    return IO_BROKEN;
}

/* Writes what it can: bytes written (> 0), IO_AGAIN with *want set, or IO_BROKEN. */
static ssize_t io_write(baton__conn *k, const char *buf, size_t len, short *want)
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
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return IO_AGAIN;
        set_err(k, "%s", strerror(errno));
        return IO_BROKEN;
    }
}

/* Reads what it can: bytes read (> 0), IO_AGAIN with *want set, or IO_BROKEN (closed).
 * block: wait in the read for up to READ_SLICE_MS (IO_AGAIN when nothing came). */
static ssize_t io_read(baton__conn *k, char *buf, size_t len, short *want, bool block)
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
            set_err(k, "connection closed by the server");
            return IO_BROKEN;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return IO_AGAIN;
        set_err(k, "%s", strerror(errno));
        return IO_BROKEN;
    }
}

/* Waits until the socket allows `events` or the deadline passes: 1 ready, 0 timed out. */
static int wait_fd(int fd, short events, int64_t deadline_us)
{
    int yielded = baton__fiber_wait_fd(fd, events, deadline_us); /* on an operation's fiber */
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

/* Feeds bytes just read to the parser, through the guard. */
static bool take_bytes(baton__conn *k, const char *buf, size_t n)
{
    k->last_read_us = baton__now_us();
    if (!guard_scan(k, buf, n))
        return false;
    if (redisReaderFeed(k->reader, buf, n) != REDIS_OK) {
        set_err(k, "out of memory reading a reply");
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
static int flush_until(baton__conn *k, int64_t deadline_us)
{
    while (!k->broken && k->off < k->len) {
        if (baton__now_us() >= deadline_us) {
            set_err(k, "could not send within the timeout");
            break;
        }
        short want;
        ssize_t n = io_write(k, k->out + k->off, k->len - k->off, &want);
        if (n > 0)
            k->off += (size_t)n;
        else if (n == IO_AGAIN && !wait_fd(k->fd, want, deadline_us))
            set_err(k, "could not send within the timeout");
    }
    return k->broken ? BATON_ECONN : BATON_OK;
}

/* Why a read ran out of time: nothing came, or a reply began and did not end. */
static void read_timed_out(baton__conn *k)
{
    if (k->guard.state != G_TYPE || k->guard.depth > 0)
        set_err(k, "the reply did not end within the timeout (%llu bytes of it read)",
                (unsigned long long)k->guard.bytes);
    else
        set_err(k, "no reply within the timeout");
}

/* Reads until one whole reply is parsed, before the deadline, which is looked at on every
 * turn: a server that sends without end, or a byte at a time, is given up on time. One
 * chunk is read at a time, and only when no complete reply is waiting (see the guard).
 * BATON_ECONN or BATON_EPROTO (k->proto) on failure. */
static int read_until(baton__conn *k, int64_t deadline_us, redisReply **out)
{
    char buf[READ_CHUNK];
    bool may_block = !baton__on_fiber(); /* a fiber yields instead (wait_fd) */
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
            set_err(k, "connection closed by the server");
            break;
        }
        int64_t left = deadline_us - baton__now_us();
        if (left <= 0) {
            read_timed_out(k);
            break;
        }
        short want;
        bool block = may_block && left >= READ_SLICE_MS * 1000;
        ssize_t n = io_read(k, buf, sizeof buf, &want, block);
        if (n > 0)
            take_bytes(k, buf, (size_t)n);
        else if (n == IO_AGAIN && (!block || want == POLLOUT) && !wait_fd(k->fd, want, deadline_us))
            read_timed_out(k);
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
    if (flush_until(k, round_deadline(c, k, deadline_us)) == BATON_OK)
        return BATON_OK;
    return baton__fail(c, BATON_ECONN, "%s: %s", what, baton__conn_errstr(k));
}

int baton__conn_read_by(baton_client *c, baton__conn *k, const char *what, int64_t deadline_us,
                        redisReply **out)
{
    int rc = read_until(k, round_deadline(c, k, deadline_us), out);
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
            ssize_t n = io_read(k, buf, sizeof buf, &want, false);
            if (n > 0) {
                if (!take_bytes(k, buf, (size_t)n))
                    return false;
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
        ssize_t n = io_write(k, k->out + k->off, k->len - k->off, &want);
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
    return conn_new();
}

int baton__conn_feed(baton__conn *k, const char *buf, size_t len)
{
    return take_bytes(k, buf, len) ? BATON_OK : BATON_ENOMEM;
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
static bool tls_start(baton_client *c, baton__conn *k, const char *host, int64_t deadline_us)
{
    ERR_clear_error();
    const char *name = c->tls_name ? c->tls_name : host;
    k->ssl = SSL_new(c->tls);
    BIO *bio = k->ssl ? BIO_new(nosig_method) : NULL;
    if (!bio) {
        set_err(k, "out of memory");
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
            set_err(k, "cannot verify the server name");
            return false;
        }
    }
    for (;;) {
        int r = SSL_connect(k->ssl);
        if (r == 1)
            return true;
        int e = SSL_get_error(k->ssl, r);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
            if (!wait_fd(k->fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline_us)) {
                set_err(k, "TLS handshake: no answer within the connect timeout (is this a TLS "
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
        set_err(k, "TLS handshake: %s%s", why, hint);
        return false;
    }
}

/* ------------------------------- connect ---------------------------------------------- */

/* Keepalive on a TCP socket: an idle connection to a host that vanished is noticed after
 * about keepalive_ms (idle half of it, then 3 probes), not after the kernel's 2 hours;
 * unacknowledged data gives up after the same time. */
static void tune_tcp(int fd, int64_t keepalive_ms)
{
    int one = 1;
    int idle = (int)((keepalive_ms / 2 + 999) / 1000),
        intvl = (int)((keepalive_ms / 6 + 999) / 1000), cnt = 3;
    unsigned user_timeout = (unsigned)keepalive_ms;
    if (idle < 1)
        idle = 1;
    if (intvl < 1)
        intvl = 1;
    /* Best effort: a socket without these options still works, only slower to notice. */
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
    (void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout);
}

/* Connected, the socket blocks, and every read and write that must not says so
 * (MSG_DONTWAIT): only read_until() waits in recv(), a slice at a time (READ_SLICE_MS). If
 * the socket cannot be made so, it stays non-blocking and read_until() polls: slower, the
 * same. */
static void make_blocking(int fd)
{
    struct timeval tv = {READ_SLICE_MS / 1000, (READ_SLICE_MS % 1000) * 1000};
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0)
        return;
    (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
}

/* A non-blocking connect to one address, finished within the deadline. */
static int connect_addr(int family, const struct sockaddr *sa, socklen_t salen, int64_t deadline_us,
                        char *why, size_t whylen)
{
    int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(why, whylen, "socket: %s", strerror(errno));
        return -1;
    }
    if (connect(fd, sa, salen) != 0) {
        if (errno != EINPROGRESS && errno != EAGAIN) {
            snprintf(why, whylen, "%s", strerror(errno));
            close(fd);
            return -1;
        }
        if (!wait_fd(fd, POLLOUT, deadline_us)) {
            snprintf(why, whylen, "no answer within the connect timeout");
            close(fd);
            return -1;
        }
        int soerr = 0;
        socklen_t len = sizeof soerr;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0)
            soerr = errno;
        if (soerr) {
            snprintf(why, whylen, "%s", strerror(soerr));
            close(fd);
            return -1;
        }
    }
    make_blocking(fd);
    return fd;
}

/* Connects the socket: every address of the host in turn (IPv4 and IPv6), or the unix
 * socket. Name resolution (getaddrinfo) is the one step the deadline cannot bound. */
static bool connect_socket(baton_client *c, baton__conn *k, const char *host, int port,
                           int64_t deadline_us)
{
    const baton__endpoint *ep = &c->cfg.ep;
    char why[128] = "";
    if (ep->path && !host) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(ep->path) >= sizeof sa.sun_path) {
            set_err(k, "the socket path is too long");
            return false;
        }
        memcpy(sa.sun_path, ep->path, strlen(ep->path) + 1);
        k->fd =
            connect_addr(AF_UNIX, (struct sockaddr *)&sa, sizeof sa, deadline_us, why, sizeof why);
        if (k->fd < 0)
            set_err(k, "%s", why);
        return k->fd >= 0;
    }
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int g = getaddrinfo(host, portstr, &hints, &res);
    if (g != 0) {
        set_err(k, "cannot resolve the host: %s", gai_strerror(g));
        return false;
    }
    for (struct addrinfo *a = res; a && k->fd < 0; a = a->ai_next)
        k->fd = connect_addr(a->ai_family, a->ai_addr, a->ai_addrlen, deadline_us, why, sizeof why);
    freeaddrinfo(res);
    if (k->fd < 0) {
        set_err(k, "%s", why[0] ? why : "no address");
        return false;
    }
    tune_tcp(k->fd, c->cfg.keepalive_ms);
    return true;
}

/* ------------------------------- handshake -------------------------------------------- */

/* Copies the value of "field:" in an INFO reply into buf ("" when absent or too long). */
static void info_field(const char *info, const char *field, char *buf, size_t len)
{
    buf[0] = '\0';
    size_t flen = strlen(field);
    for (const char *p = info; (p = strstr(p, field)) != NULL; p += flen) {
        if ((p != info && p[-1] != '\n') || p[flen] != ':')
            continue; /* a longer field that ends with this name, or a value */
        p += flen + 1;
        size_t n = strcspn(p, "\r\n");
        if (n < len) {
            memcpy(buf, p, n);
            buf[n] = '\0';
        }
        return;
    }
}

/* What an eviction policy does to baton's keys, or NULL when it evicts nothing. */
static const char *eviction_risk(const char *policy)
{
    if (!policy[0] || strcmp(policy, "noeviction") == 0)
        return NULL;
    if (strncmp(policy, "volatile-", 9) == 0)
        return "it may evict keys with a TTL, that is held locks and fair-lock queues, and "
               "their holders learn it only at their next renewal or release";
    return "it may evict any key: held locks, semaphore and latch counts, and the fencing "
           "token counters, whose tokens then repeat";
}

/* Records the server's run_id, and warns once about an eviction policy. A new run_id on a
 * later connection to the same address means the server restarted and may have lost every
 * key: the epoch rises and BATON__EV_RESTART fires (the watchdog reports every hold lost).
 * A new run_id at another address (Sentinel moved the master) is the topology's event,
 * BATON__EV_MASTER, which it fired when it switched; here the epoch only counts it. A
 * server that refuses INFO (an ACL without it) is simply not watched. */
static void note_server(baton_client *c, baton__pool *pool, const redisReply *r, const char *where)
{
    char id[48] = "", policy[32] = "", version[32] = "";
    if (r->type == REDIS_REPLY_STRING) {
        info_field(r->str, "run_id", id, sizeof id);
        info_field(r->str, "maxmemory_policy", policy, sizeof policy);
        info_field(r->str, "redis_version", version, sizeof version);
    }
    const char *risk = eviction_risk(policy);
    if (version[0])
        atomic_store(&c->server_major, atoi(version));
    if (!id[0])
        return;
    bool restarted = false, node_restarted = false;
    baton__mutex_lock(&c->run_mu);
    if (pool && pool->host[0]) {
        /* A Cluster node: its own run_id. A restart loses (perhaps) the keys of its slots
         * only, so the holds are checked where they live rather than all reported lost. */
        if (strcmp(pool->run_id, id) != 0) {
            node_restarted = pool->run_id[0] != '\0';
            memcpy(pool->run_id, id, sizeof id);
            if (node_restarted)
                c->epoch++;
        }
    } else if (strcmp(c->run_id, id) != 0) {
        restarted = c->run_id[0] != '\0' && strcmp(c->run_where, where) == 0;
        memcpy(c->run_id, id, sizeof id);
        snprintf(c->run_where, sizeof c->run_where, "%s", where);
        c->epoch++;
    }
    if (risk && !c->warning[0])
        snprintf(c->warning, sizeof c->warning,
                 "warning: the server's maxmemory-policy is %s: %s; baton's exclusion and "
                 "fencing guarantees need noeviction",
                 policy, risk);
    baton__mutex_unlock(&c->run_mu);
    if (restarted) {
        baton__stat_epoch_changed(c);
        baton__event_fire(c, BATON__EV_RESTART);
    }
    if (node_restarted) {
        baton__log(c, BATON_LOG_WARN, "cluster node %s restarted: every hold is checked", where);
        baton__event_fire(c, BATON__EV_MASTER);
    }
}

int baton__epoch_hook_add(baton_client *c, baton__event_fn fn, void *arg)
{
    int rc = BATON_ENOMEM;
    baton__mutex_lock(&c->run_mu);
    for (int i = 0; i < BATON__EPOCH_HOOKS; i++)
        if (!c->epoch_hooks[i].fn) {
            c->epoch_hooks[i].fn = fn;
            c->epoch_hooks[i].arg = arg;
            rc = BATON_OK;
            break;
        }
    baton__mutex_unlock(&c->run_mu);
    return rc;
}

void baton__event_fire(baton_client *c, int event)
{
    struct {
        baton__event_fn fn;
        void *arg;
    } hooks[BATON__EPOCH_HOOKS];
    int n = 0;
    baton__mutex_lock(&c->run_mu);
    for (int i = 0; i < BATON__EPOCH_HOOKS; i++)
        if (c->epoch_hooks[i].fn) {
            hooks[n].fn = c->epoch_hooks[i].fn;
            hooks[n++].arg = c->epoch_hooks[i].arg;
        }
    baton__mutex_unlock(&c->run_mu);
    for (int i = 0; i < n; i++)
        hooks[i].fn(c, event, hooks[i].arg);
}

/* The handshake's commands, pipelined: [AUTH] [SELECT] PING INFO CLIENT SETNAME. */
typedef struct hs_step {
    const char *what;
    int code; /* for an error reply other than an authentication failure */
} hs_step;

/* The handshake of a data node ([AUTH] [SELECT] PING INFO [ROLE] under Sentinel) or of a
 * sentinel ([AUTH] PING, with the Sentinel credentials), pipelined in one round trip. */
static int handshake(baton_client *c, baton__conn *k, int64_t deadline_us, const char *where,
                     bool sentinel)
{
    const baton__endpoint *ep = &c->cfg.ep;
    const char *user = sentinel ? c->cfg.sentinel_username : ep->username;
    const char *pass = sentinel ? c->cfg.sentinel_password : ep->password;
    bool check_role = !sentinel && ep->kind == BATON__EP_SENTINEL;
    hs_step steps[6];
    int n = 0, rc = BATON_OK;
    char db[16];
    snprintf(db, sizeof db, "%d", ep->db);
    if (pass) {
        const char *argv[3] = {"AUTH", user ? user : pass, pass};
        rc |= baton__conn_append(k, user ? 3 : 2, argv, NULL);
        steps[n++] = (hs_step){"AUTH", BATON_EAUTH};
    }
    if (!sentinel && ep->db != 0 && ep->kind != BATON__EP_CLUSTER) {
        const char *argv[2] = {"SELECT", db};
        rc |= baton__conn_append(k, 2, argv, NULL);
        steps[n++] = (hs_step){"SELECT", BATON_EPROTO};
    }
    /* PING: a server that wants a password answers NOAUTH here, before any real work. */
    const char *ping[1] = {"PING"}, *info[1] = {"INFO"};
    rc |= baton__conn_append(k, 1, ping, NULL);
    steps[n++] = (hs_step){"PING", BATON_EPROTO};
    if (!sentinel) {
        rc |= baton__conn_append(k, 1, info, NULL);
        steps[n++] = (hs_step){"INFO", BATON_OK};
        /* the connection's name for CLIENT LIST; a server that refuses it is used anyway */
        const char *setname[3] = {"CLIENT", "SETNAME", c->cfg.client_name};
        rc |= baton__conn_append(k, 3, setname, NULL);
        steps[n++] = (hs_step){"CLIENT SETNAME", BATON_OK};
    }
    if (check_role) {
        const char *role[1] = {"ROLE"};
        rc |= baton__conn_append(k, 1, role, NULL);
        steps[n++] = (hs_step){"ROLE", BATON_ECONN};
    }
    if (rc != BATON_OK)
        return baton__fail(c, BATON_ENOMEM, "connect to %s: out of memory", where);
    if (flush_until(k, deadline_us) != BATON_OK)
        return baton__fail(c, BATON_ECONN, "connect to %s: %s", where, baton__conn_errstr(k));
    rc = BATON_OK;
    for (int i = 0; i < n; i++) {
        redisReply *r = NULL;
        int got = read_until(k, deadline_us, &r);
        if (got != BATON_OK) {
            const char *hint =
                i == 0 && !ep->tls && (strstr(k->errstr, "closed") || strstr(k->errstr, "reset"))
                    ? " (a TLS port? use rediss://)"
                    : "";
            return baton__fail(c, got, "connect to %s: %s%s", where, baton__conn_errstr(k), hint);
        }
        if (r->type == REDIS_REPLY_ERROR && steps[i].code != BATON_OK && rc == BATON_OK) {
            rc = baton__reply_error(c, r);
            if (rc != BATON_EAUTH && rc != BATON_EPERM)
                rc = steps[i].code;
            baton__fail(c, rc, "%s refused: %s", steps[i].what, r->str);
        } else if (strcmp(steps[i].what, "INFO") == 0 && rc == BATON_OK)
            note_server(c, k->pool, r, where);
        else if (strcmp(steps[i].what, "ROLE") == 0 && rc == BATON_OK &&
                 baton__role_of(r, NULL) != BATON__ROLE_MASTER) {
            /* Never a lock on a node that is not master: a replica, or an old master the
             * sentinels have demoted (or not yet). The topology looks again. */
            rc = baton__fail(c, BATON_ECONN, "connect to %s: the node is not the master", where);
            baton__topology_kick(c);
        }
        freeReplyObject(r);
    }
    return rc;
}

/* Connects a socket to host:port (or the URL's unix socket when host is NULL) and starts
 * TLS if the client has it; the detail of a failure is recorded on c. */
static int open_socket(baton_client *c, const char *host, int port, int64_t deadline,
                       const char *where, baton__conn **out)
{
    *out = NULL;
    baton__conn *k = conn_new();
    if (!k)
        return baton__fail(c, BATON_ENOMEM, "connect to %s: out of memory", where);
    if (!connect_socket(c, k, host, port, deadline) ||
        (c->tls && !tls_start(c, k, host, deadline))) {
        int rc = baton__fail(c, BATON_ECONN, "connect to %s: %s", where, baton__conn_errstr(k));
        baton__conn_close(k);
        return rc;
    }
    *out = k;
    return BATON_OK;
}

static int conn_open_by(baton_client *c, baton__pool *pool, int64_t deadline_us, baton__conn **out)
{
    const baton__endpoint *ep = &c->cfg.ep;
    char host[BATON__HOST_LEN], where[BATON__HOST_LEN + 16];
    int port = 0;
    uint64_t gen = 0;
    bool unix_socket = ep->path && ep->kind == BATON__EP_SINGLE;
    if (pool && pool->host[0]) {
        snprintf(host, sizeof host, "%s", pool->host);
        port = pool->port;
    } else
        baton__topology_target(c, host, sizeof host, &port, &gen);
    if (unix_socket)
        snprintf(where, sizeof where, "unix:%s", ep->path);
    else
        snprintf(where, sizeof where, "%s:%d", host, port);
    int64_t deadline = baton__deadline_after_ms(c->cfg.connect_timeout_ms);
    if (deadline_us < deadline)
        deadline = deadline_us;
    baton__conn *k = NULL;
    int rc = open_socket(c, unix_socket ? NULL : host, port, deadline, where, &k);
    if (rc == BATON_OK) {
        k->gen = gen;
        k->pool = pool;
        rc = handshake(c, k, deadline, where, false);
    }
    if (rc != BATON_OK) {
        if (rc == BATON_ECONN)
            baton__topology_kick(c); /* the master may have moved */
        baton__conn_close(k);
        *out = NULL;
        return rc;
    }
    *out = k;
    return BATON_OK;
}

int baton__conn_open(baton_client *c, baton__conn **out)
{
    return conn_open_by(c, c->pool, BATON__NO_DEADLINE, out);
}

int baton__conn_open_node(baton_client *c, baton__pool *p, baton__conn **out)
{
    return conn_open_by(c, p, BATON__NO_DEADLINE, out);
}

void baton__conn_where(const baton_client *c, const baton__conn *k, char *buf, size_t len)
{
    if (k && k->pool && k->pool->host[0]) {
        snprintf(buf, len, "%s:%d", k->pool->host, k->pool->port);
        return;
    }
    char host[BATON__HOST_LEN];
    int port;
    uint64_t gen;
    baton__topology_target((baton_client *)c, host, sizeof host, &port, &gen);
    snprintf(buf, len, "%s:%d", host, port);
}

int baton__conn_open_sentinel(baton_client *c, const char *host, int port, baton__conn **out)
{
    char where[BATON__HOST_LEN + 32];
    snprintf(where, sizeof where, "sentinel %s:%d", host, port);
    int64_t deadline = baton__deadline_after_ms(c->cfg.connect_timeout_ms);
    baton__conn *k = NULL;
    int rc = open_socket(c, host, port, deadline, where, &k);
    if (rc == BATON_OK)
        rc = handshake(c, k, deadline, where, true);
    if (rc != BATON_OK) {
        baton__conn_close(k);
        return rc;
    }
    *out = k;
    return BATON_OK;
}

/* ------------------------------- the pool --------------------------------------------- */

/* Whether an idle command connection can still be used. Nothing arrives on one unasked,
 * so a readable socket means the server closed it (its idle timeout, CLIENT KILL, a
 * restart, a load balancer) or it broke: it would fail the next command, or worse, take the
 * command and lose its reply. Over TLS the server may also send session tickets after the
 * handshake: a read that yields no application data leaves the connection usable. */
static bool idle_usable(baton__conn *k)
{
    if (baton__now_us() - k->last_read_us < IDLE_CHECK_US)
        return true; /* see IDLE_CHECK_US */
    struct pollfd p = {k->fd, POLLIN, 0};
    int n;
    while ((n = poll(&p, 1, 0)) < 0 && errno == EINTR) {
    }
    if (n == 0)
        return true;
    if (!k->ssl || (p.revents & (POLLHUP | POLLERR)))
        return false;
    char b;
    short want;
    return io_read(k, &b, 1, &want, false) == IO_AGAIN; /* a byte of a reply nobody asked for: no */
}

void baton__pool_init(baton__pool *p, const char *host, int port)
{
    memset(p, 0, sizeof *p);
    baton__mutex_init(&p->mu);
    baton__cond_init(&p->cond);
    snprintf(p->host, sizeof p->host, "%s", host ? host : "");
    p->port = port;
}

static baton__conn *take_idle(baton__pool *p)
{
    baton__conn *all = p->idle;
    p->idle = NULL;
    for (baton__conn *s = all; s; s = s->next)
        p->open--;
    return all;
}

static void close_list(baton__conn *k)
{
    while (k) {
        baton__conn *next = k->next;
        baton__conn_close(k);
        k = next;
    }
}

void baton__pool_destroy(baton__pool *p, bool forked)
{
    if (!p)
        return;
    close_list(take_idle(p));
    if (!forked) {
        baton__mutex_destroy(&p->mu);
        baton__cond_destroy(&p->cond);
    }
}

/* The generation a connection of this pool must have to be reused: the topology's for the
 * client's own pool (Sentinel: a new master makes the old connections stale), 0 for a
 * Cluster node's (its address is the node). */
static uint64_t pool_gen(baton_client *c, const baton__pool *p)
{
    return p->host[0] ? 0 : baton__topology_gen(c);
}

int baton__conn_get(baton_client *c, baton__conn **out)
{
    return baton__conn_get_by(c, BATON__NO_DEADLINE, out);
}

int baton__conn_get_node(baton_client *c, baton__pool *p, int64_t deadline_us, baton__conn **out)
{
    baton__mutex_lock(&p->mu);
    for (;;) {
        uint64_t seen = baton__evloop_freed(c);
        while (p->idle) {
            baton__conn *k = p->idle;
            p->idle = k->next;
            k->next = NULL;
            if (k->gen == pool_gen(c, p) && idle_usable(k)) {
                baton__mutex_unlock(&p->mu);
                k->reused = true;
                *out = k;
                return BATON_OK;
            }
            p->open--; /* closed by the server while it waited: replaced below */
            baton__conn_close(k);
        }
        if (p->open < c->cfg.pool_size)
            break;
        /* Every connection is busy; each is bounded by the command timeout. A fiber yields
         * meanwhile: the fibers of its engine may hold them. */
        if (baton__on_fiber()) {
            baton__mutex_unlock(&p->mu);
            if (!baton__fiber_wait_pool(c, p, seen, deadline_us))
                return baton__fail(c, BATON_ECONN, "no connection free before the deadline");
            baton__mutex_lock(&p->mu);
            continue;
        }
        if (baton__cond_wait_until(&p->cond, &p->mu, deadline_us) == ETIMEDOUT) {
            baton__mutex_unlock(&p->mu);
            return baton__fail(c, BATON_ECONN, "no connection free before the deadline");
        }
    }
    p->open++;
    baton__mutex_unlock(&p->mu);

    baton__conn *k = NULL;
    int rc = conn_open_by(c, p, deadline_us, &k);
    if (rc != BATON_OK) {
        baton__mutex_lock(&p->mu);
        p->open--;
        baton__cond_signal(&p->cond);
        baton__mutex_unlock(&p->mu);
        baton__evloop_conn_freed(c, p, false);
        return rc;
    }
    baton__stat_inc(c, BATON__ST_CONNECTS);
    *out = k;
    return BATON_OK;
}

int baton__conn_get_slot(baton_client *c, int slot, int64_t deadline_us, baton__conn **out)
{
    if (!baton__topology_cluster(c))
        return baton__conn_get_node(c, c->pool, deadline_us, out);
    baton__pool *p = baton__topology_slot_pool(c, slot);
    if (!p) {
        baton__topology_kick(c);
        return baton__fail(c, BATON_ECONN, "no node of the cluster serves slot %d now", slot);
    }
    return baton__conn_get_node(c, p, deadline_us, out);
}

int baton__conn_get_by(baton_client *c, int64_t deadline_us, baton__conn **out)
{
    return baton__conn_get_slot(c, -1, deadline_us, out);
}

void baton__conn_put(baton_client *c, baton__conn *k, bool broken)
{
    baton__pool *p = k->pool;
    baton__conn *stale = NULL;
    baton__mutex_lock(&p->mu);
    if (broken || k->broken || k->off < k->len || k->pending != 0 || k->gen != pool_gen(c, p)) {
        /* Whatever broke this connection (a restart, a cut, a proxy that dropped its
         * connections) may have broken the idle ones too, in a way a look at their sockets
         * cannot see yet: they go as well, so that the retry that follows runs on a new
         * connection, never on one the same fault hit. */
        stale = take_idle(p);
        p->open--;
        baton__cond_broadcast(&p->cond);
    } else {
        k->next = p->idle;
        p->idle = k;
        baton__cond_signal(&p->cond);
        k = NULL;
    }
    baton__mutex_unlock(&p->mu);
    baton__evloop_conn_freed(c, p, false);
    baton__conn_close(k);
    close_list(stale);
}

void baton__pool_drop_node(baton_client *c, baton__pool *p)
{
    baton__mutex_lock(&p->mu);
    baton__conn *stale = take_idle(p);
    baton__cond_broadcast(&p->cond);
    baton__mutex_unlock(&p->mu);
    baton__evloop_conn_freed(c, p, true);
    close_list(stale);
}

void baton__pool_drop(baton_client *c)
{
    baton__pool_drop_node(c, c->pool);
}
