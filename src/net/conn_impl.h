/*
 * Private to the connection files (conn.c, connect.c, handshake.c, pool.c, mux.c): what a
 * connection is, and the pieces they share. Everything else uses conn.h.
 */
#ifndef BATON_CORE_CONN_IMPL_H
#define BATON_CORE_CONN_IMPL_H

#include "conn.h"

#include <hiredis/hiredis.h>
#include <openssl/ssl.h>

#include <sys/types.h>

/* Replies one request on a shared connection may be due at once (ASKING, the command). */
#define BATON__MUX_REPLIES 4

/* The state of the reply guard (conn.c, "the reply guard"). */
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
    bool sent_unread;         /* bytes were sent and nothing was read since (a fiber then
                               * waits for the socket before it reads: conn.c) */
    uint64_t serial;          /* unique in the process: tells a reused descriptor number
                               * from the connection that had it (baton__fiber_wait_fd) */
    char errstr[160];
    /* A request on a shared connection (mux.c): no socket of its own (fd -1). What was
     * appended goes out on link's connection at the flush, its replies come back here. */
    struct baton__link *link;  /* NULL: a connection of its own */
    struct baton__conn *vnext; /* in link's line of requests whose replies are due */
    int due;                   /* replies still to come */
    int rqh, rqn;              /* replies in, not taken yet: rq[rqh..rqh+rqn) */
    redisReply *rq[BATON__MUX_REPLIES];
    int vrc;        /* the connection failed under the request: BATON_ECONN or
                     * BATON_EPROTO (errstr says why) */
    bool waiting;   /* its thread sleeps on vcond */
    void *fiber;    /* its fiber, parked (the engine's token, hooks.h), or NULL */
    uint64_t end;   /* where its bytes end in the link's output (link->sent) */
    bool abandoned; /* given back before its replies came: dropped as they do */
    pthread_cond_t vcond;
};

#define READ_CHUNK 16384

/* A blocking read waits in recv() itself, for at most this long (SO_RCVTIMEO, set once per
 * connection by connect.c), so that a round trip costs one send() and one recv(), as
 * hiredis's blocking context did, instead of a recv() that finds nothing, a poll() and a
 * recv(). The deadline is looked at after every slice; with less than a slice left, poll()
 * waits for the rest. Every other read and write says MSG_DONTWAIT. */
#define BATON__READ_SLICE_MS 100

/* A pooled connection is looked at (poll) before it is lent only when it sat idle this
 * long (pool.c): long enough for a server's idle timeout (whole seconds) or a load
 * balancer to have closed it. One closed sooner (CLIENT KILL, a restart) fails the command
 * sent on it, which the callers resolve like any connection lost mid-command (an acquire
 * that did not run goes once more: baton__hold_call). */
#define BATON__IDLE_CHECK_US 1000000

/* What a raw read or write returned besides a count of bytes. */
enum { IO_BROKEN = -1, IO_AGAIN = 0 };

/* conn.c */
baton__conn *baton__conn_new(void);
/* Writes what it can of buf: bytes written (> 0), IO_AGAIN with *want set, or IO_BROKEN. */
ssize_t baton__conn_io_write(baton__conn *k, const char *buf, size_t len, short *want);
/* Feeds bytes just read to the parser through the guard; false: refused (k broken). */
bool baton__conn_take(baton__conn *k, const char *buf, size_t n);
/* Why a read ran out of time (k->errstr): nothing came, or a reply began and did not end. */
void baton__conn_timed_out(baton__conn *k);
void baton__conn_set_err(baton__conn *k, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Waits for fd to allow events until deadline_us (a fiber yields meanwhile): 1 ready, 0 not.
 * key: the connection's serial, or 0 for a socket that is not one yet (connect). */
int baton__conn_wait_fd(int fd, short events, int64_t deadline_us, uint64_t key);
/* Reads what it can; block: wait up to BATON__READ_SLICE_MS in the read. */
ssize_t baton__conn_io_read(baton__conn *k, char *buf, size_t len, short *want, bool block);
/* Writes what was appended / reads the next reply, within deadline_us; BATON_OK or
 * BATON_ECONN (k broken, k->errstr says why). */
int baton__conn_flush_until(baton__conn *k, int64_t deadline_us);
int baton__conn_read_until(baton__conn *k, int64_t deadline_us, redisReply **out);
/* The TLS handshake on k's connected socket (host: the name to verify, NULL for none). */
bool baton__tls_start(baton_client *c, baton__conn *k, const char *host, int64_t deadline_us);

/* pool.c: whether an idle connection can still be used (the idle check). */
bool baton__conn_idle_usable(baton__conn *k);
/* An idle pooled connection of p taken out of the pool for good (the shared connection's,
 * so that the one open made is not left idle beside it), or NULL. */
baton__conn *baton__pool_adopt(baton_client *c, baton__pool *p);
/* Closes p's idle pooled connections (whatever broke one may have broken them). */
void baton__pool_drop_idle(baton_client *c, baton__pool *p);

/* mux.c: the shared connection of a pool (conn.h, baton__conn_get_shared): a request's
 * flush, read and return, and the pool's end. */
int baton__mux_flush(baton_client *c, baton__conn *v, const char *what, int64_t deadline_us);
int baton__mux_read(baton_client *c, baton__conn *v, const char *what, int64_t deadline_us,
                    redisReply **out);
void baton__mux_put(baton_client *c, baton__conn *v);
void baton__mux_destroy(baton__pool *p, bool forked);
/* The pool's shared connection is given up for new requests (the master moved): those in
 * flight on it finish there. */
void baton__mux_retire(baton__pool *p);

/* connect.c: a socket to host:port (or the URL's unix socket when host is NULL), with TLS
 * if the client has it; the detail of a failure is recorded on c ("connect to <where>"). */
int baton__conn_connect(baton_client *c, const char *host, int port, int64_t deadline,
                        const char *where, baton__conn **out);

/* handshake.c: a new connection for pool (the client's own, or a Cluster node's),
 * connected and through the handshake by deadline_us (or the connect timeout). */
int baton__conn_open_by(baton_client *c, baton__pool *pool, int64_t deadline_us, baton__conn **out);

#endif /* BATON_CORE_CONN_IMPL_H */
