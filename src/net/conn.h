/*
 * Private to the core: connections (conn.c), the one place in baton where bytes meet
 * sockets. Modules above the core never see a connection; they run commands and scripts
 * through internal.h.
 *
 * A connection is a non-blocking socket (TCP over IPv4 or IPv6, or a unix socket), with
 * TLS on top for rediss://, an output buffer of commands encoded by hiredis
 * (redisFormatCommandArgv) and hiredis's reply parser (redisReader) behind a guard that
 * enforces the limits on replies below. It is used two ways: blocking, by the command pool
 * and the watchdog (append, flush, read: a round trip bounded by the command timeout), and
 * by the dispatcher's own poll() loop (events, io, more, next).
 */
#ifndef BATON_CORE_CONN_H
#define BATON_CORE_CONN_H

#include "net.h"
#include "sentinel.h"

struct baton_options;

/* A pool of command connections to one node. The client's own pool serves its target (the
 * one server, or the master Sentinel names now: host ""); on a Cluster the topology keeps
 * one per node it has seen (host:port), for the life of the client. */
typedef struct baton__pool {
    pthread_mutex_t mu;
    pthread_cond_t cond; /* a connection was returned */
    baton__conn *idle;   /* idle connections, most recently used first */
    int open;            /* idle + borrowed */
    char host[BATON__HOST_LEN];
    int port;
    char run_id[48]; /* Cluster: the node's run_id as last seen ("" before the first) */
    /* The shared connection (mux.c): the requests of every thread and fiber of the client
     * go out on it, those that arrive while a write is under way together in the next. */
    pthread_mutex_t mux_mu;
    pthread_cond_t mux_cond;  /* its connect ended */
    struct baton__link *link; /* the connection new requests go on; NULL: none yet */
    bool connecting;          /* a caller is making it */
    uint64_t connects;        /* connects ended, and whether the last failed, and why: the
                               * callers that waited for it share its failure */
    bool connect_failed;
    char connect_err[200];
    uint64_t mux_requests; /* requests flushed on it, and the writes that took them */
    uint64_t mux_writes;
} baton__pool;

void baton__pool_init(baton__pool *p, const char *host, int port);
/* Closes its idle connections (every borrowed one must be back) and destroys it; forked:
 * only descriptors and memory (see process.c). */
void baton__pool_destroy(baton__pool *p, bool forked);

/* The client's TLS context from its options and URL (nothing when the URL is not
 * rediss://). On failure err says why (never a passphrase); the codes are those of open. */
int baton__tls_setup(baton_client *c, const baton_options *o, char *err, size_t errlen);
void baton__tls_free(baton_client *c);

/* Opens a new connection to the client's server (under Sentinel: the master the topology
 * names now): connect (and the TLS handshake) within the connect timeout, then AUTH,
 * SELECT, PING and INFO (and, under Sentinel, ROLE) pipelined in one round trip. INFO tells
 * the client the server's run_id (a restart bumps the epoch) and eviction policy; a node
 * whose ROLE is not master is refused (and the topology asked to look again). The
 * failure's detail is recorded on c. */
int baton__conn_open(baton_client *c, baton__conn **out);
/* Opens a new connection to one node of a Cluster, outside its pool (the dispatcher's). */
int baton__conn_open_node(baton_client *c, baton__pool *p, baton__conn **out);
/* Opens a connection to a sentinel: connect, TLS as the URL says, AUTH with the Sentinel
 * credentials if any, PING. */
int baton__conn_open_sentinel(baton_client *c, const char *host, int port, baton__conn **out);
/* Closes every idle pooled connection (the master moved: they talk to the old one);
 * borrowed ones are closed when they come back. */
void baton__pool_drop(baton_client *c);
void baton__pool_drop_node(baton_client *c, baton__pool *p);
void baton__conn_close(baton__conn *k);

/* The pool of command connections. baton__conn_get borrows one (connecting if needed, a
 * pooled one only after a look that the server has not closed it); blocks while the pool
 * is exhausted. baton__conn_put gives it back; broken: it is closed, and every idle one
 * with it (whatever broke it may have broken them too). */
int baton__conn_get(baton_client *c, baton__conn **out);
void baton__conn_put(baton_client *c, baton__conn *k, bool broken);
bool baton__conn_reused(const baton__conn *k); /* came from the pool, not a new connect */
/* A request on the pool's shared connection (mux.c), when the client shares one
 * (baton__shared_on): append, flush and read as on a connection of its own, give it back
 * with baton__conn_put. Its replies are its own, in order, whatever the other requests on
 * the connection do; a failure of the connection (a reply refused, one request's timeout)
 * fails every request in flight on it (BATON_ECONN, BATON_EPROTO for the request whose
 * reply was refused). A client that does not share gets a pooled connection. */
bool baton__shared_on(baton_client *c);
int baton__conn_get_shared(baton_client *c, baton__pool *p, int64_t deadline_us, baton__conn **out);
int baton__conn_get_shared_slot(baton_client *c, int slot, int64_t deadline_us, baton__conn **out);
/* Requests flushed on the client's shared connections and the writes that took them
 * (every node of a Cluster). */
void baton__mux_counts(baton_client *c, uint64_t *requests, uint64_t *writes);
/* Cluster: a connection to the master that serves `slot` (any master when slot < 0), or to
 * one given node (a redirection's target, a topology query). */
int baton__conn_get_slot(baton_client *c, int slot, int64_t deadline_us, baton__conn **out);
int baton__conn_get_node(baton_client *c, baton__pool *p, int64_t deadline_us, baton__conn **out);
/* "host:port" of the node a connection talks to (for messages). */
void baton__conn_where(const baton_client *c, const baton__conn *k, char *buf, size_t len);

/* What a reply may be (docs/guarantees.md, "Limits on replies"). A reply past one of
 * these is refused as soon as the header that announces it arrives: a protocol error
 * (BATON_EPROTO), and the connection is closed. The largest replies baton asks for are
 * INFO (kilobytes), a Cluster's slot map (CLUSTER SLOTS of 16384 single-slot ranges:
 * about 200,000 elements) and baton_inspect's snapshot of a name (a fair lock's queue, a
 * semaphore's permit leases: 2 elements a lease); no value baton writes is more than a
 * few hundred bytes. */
#define BATON__REPLY_MAX_BYTES (64 << 20)   /* a whole reply, framing included */
#define BATON__REPLY_MAX_ELEMENTS (1 << 20) /* array elements in one reply, every depth */
#define BATON__REPLY_MAX_LINE (64 << 10)    /* a simple string, error or integer */

/* Blocking use. append encodes a command into the output buffer (BATON_ENOMEM only);
 * flush writes the whole buffer; read returns the next reply (free with freeReplyObject).
 * A round trip (the flush and the reads of every reply its commands are due) gives up
 * after one command timeout from the flush (plus the timeout of a WAIT appended in it),
 * whatever arrives meanwhile; a failure is
 * BATON_ECONN (no answer in time, a broken connection) or BATON_EPROTO (a reply refused:
 * malformed, or past the limits above), with the detail recorded on c ("<what>: <why>"),
 * and leaves the connection broken. */
int baton__conn_append(baton__conn *k, int argc, const char **argv, const size_t *lens);
int baton__conn_flush(baton_client *c, baton__conn *k, const char *what);
int baton__conn_read(baton_client *c, baton__conn *k, const char *what, struct redisReply **out);
/* The same three with a monotonic deadline (µs) that may come before the client's
 * timeouts would (the watchdog must report a lease's end on time, whatever its renewal
 * pass waits for). */
int baton__conn_get_by(baton_client *c, int64_t deadline_us, baton__conn **out);
int baton__conn_flush_by(baton_client *c, baton__conn *k, const char *what, int64_t deadline_us);
int baton__conn_read_by(baton_client *c, baton__conn *k, const char *what, int64_t deadline_us,
                        struct redisReply **out);

/* Non-blocking use, for a poll() loop. fd and the events to wait for (POLLIN, plus POLLOUT
 * while output is pending or TLS needs to write); io does what revents allow: writes
 * pending output, reads what arrived into the parser. next takes one parsed reply (*out
 * NULL when none is complete). false / BATON_EPROTO: the connection is broken. */
int baton__conn_fd(const baton__conn *k);
short baton__conn_events(const baton__conn *k);
bool baton__conn_io(baton__conn *k, short revents);
/* io stopped reading because complete replies wait to be taken (next), with more perhaps
 * in the socket: once they are, call io again with POLLIN without waiting for poll(). (A
 * read that the socket could not fill ends io's reading with more false: the socket had
 * nothing else, and poll() tells when it has.) */
bool baton__conn_more(const baton__conn *k);
int baton__conn_next(baton__conn *k, struct redisReply **out);
const char *baton__conn_errstr(const baton__conn *k);
/* Monotonic µs of the last byte read: a silent connection is probed (the dispatcher). */
int64_t baton__conn_last_read(const baton__conn *k);

/* A connection without a socket whose parser is fed bytes directly: for the fuzz target,
 * which drives the command path's reader (baton__conn_read) with arbitrary replies. */
baton__conn *baton__conn_detached(void);
int baton__conn_feed(baton__conn *k, const char *buf, size_t len);

/* Topology events, heard by hooks (called outside every lock of the client):
 * BATON__EV_RESTART  a connection found a new run_id at the same server: it restarted and
 *                    may have lost every key (the watchdog reports every hold lost);
 * BATON__EV_MASTER   another node is master now (Sentinel), or a Cluster's slot map
 *                    changed or one of its nodes restarted: the dispatcher moves its
 *                    connections and wakes its waiters, the watchdog checks every hold where
 *                    it lives now. At most BATON__EPOCH_HOOKS per client. */
enum { BATON__EV_RESTART = 1, BATON__EV_MASTER = 2 };
#define BATON__EPOCH_HOOKS 4
typedef void (*baton__event_fn)(baton_client *c, int event, void *arg);
int baton__epoch_hook_add(baton_client *c, baton__event_fn fn, void *arg);
void baton__event_fire(baton_client *c, int event);

#endif /* BATON_CORE_CONN_H */
