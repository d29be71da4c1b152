/*
 * The baton client: the connections to one Redis server (or one Redis-compatible endpoint)
 * that every baton object of a process is built on.
 *
 * Threads: a baton_client is thread-safe. Any thread may call any function on it, except
 * that baton_client_close() must not run concurrently with other calls on the same client or
 * on objects opened from it.
 *
 * A client owns: a small pool of command connections (created on demand, replaced when
 * broken), one subscriber connection with its dispatcher thread (started on the first wait),
 * and a watchdog thread (started on the first lock held without a lease).
 */
#ifndef BATON_CLIENT_H
#define BATON_CLIENT_H

#include <baton/common.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct baton_client baton_client;

/*
 * Options for baton_client_open(). Zero (or NULL) in any field means "the default" written
 * beside it, so a zeroed struct is a valid configuration.
 *
 * ABI: new fields are only ever appended, and the existing ones never change order, type or
 * meaning. A library reads the whole struct as its own header declares it, so it must never
 * run with a program compiled against a shorter one: before 1.0, each minor release that
 * appends a field has its own SONAME (libbaton.so.0.MINOR); from 1.0, fields are appended
 * in a new major release only (libbaton.so.MAJOR). Source compatibility is kept throughout:
 * a program that zeroes the struct or calls baton_options_init() and then sets the fields
 * it knows builds and behaves the same against a newer header.
 */
typedef struct baton_options {
    const char *url;            /* where to connect; NULL: "redis://127.0.0.1:6379". Forms:
                                   redis://[[user]:password@]host[:port][/db],
                                   rediss://... (the same over TLS),
                                   redis+sentinel://[[user]:password@]host[:port][,host
                                   [:port]...]/master[/db] (the sentinels, default port
                                   26379, and the master's name; rediss+sentinel:// over
                                   TLS), redis+cluster://[[user]:password@]host[:port]
                                   [,host[:port]...] (any nodes of a Redis Cluster, read
                                   for its slot map; database 0 only; rediss+cluster://
                                   over TLS; a name whose keys would land in different
                                   slots, "a{b", is BATON_EINVAL there) and
                                   unix:///path/to/socket[?db=N]. A '/' in the password
                                   is written %2F and a '@' after the host %40: a '@'
                                   after the first '/' is BATON_EINVAL (which part would
                                   be the password is a guess). Messages show the URL
                                   only as baton_url_redact() gives it. */
    const char *username;       /* ACL user; overrides the URL's; NULL: the URL's, or none */
    const char *password;       /* overrides the URL's; NULL: the URL's, or none */
    int64_t connect_timeout_ms; /* connect + AUTH + SELECT on one connection; 0: 5000 */
    int64_t command_timeout_ms; /* one command's reply; 0: 5000 */
    int64_t watchdog_ms;        /* lease of locks held without one, renewed every third of
                                   it; 0: 30000 (Redisson's lockWatchdogTimeout) */
    int64_t fair_wait_ms;       /* fair lock: how long a silent waiter keeps its place in
                                   the queue; 0: 5000 */
    int64_t recheck_ms;         /* latch and semaphore waiters re-read the server at least
                                   this often, so a lost message costs at most this; 0: 1000.
                                   These three are every handle's unless it was opened with
                                   its own (baton/handle.h, baton_lock_open_opts ...) */
    int pool_size;              /* most command connections at once; 0: 16 */
    /* TLS, used with rediss:// URLs (OpenSSL; TLS 1.2 or newer). NULL or 0 in each means the
     * default beside it. The server's certificate chain and its name (tls_sni, or the URL's
     * host, checked against the certificate's subjectAltName entries, never its common
     * name; an IP address against its IP entries) are verified
     * unless tls_insecure_skip_verify. Any of these set with a URL that is not rediss://
     * is refused (BATON_EINVAL) rather than connect in plain text to a server the caller
     * meant to reach over TLS. */
    const char *tls_ca;            /* CA certificate file (PEM) or directory of them that
                                      verifies the server; NULL: the system's store */
    const char *tls_cert;          /* client certificate (PEM) for mutual TLS; NULL: none */
    const char *tls_key;           /* the client certificate's private key (PEM, not
                                      encrypted: there is no passphrase prompt); NULL: none */
    const char *tls_sni;           /* server name sent as SNI and checked against the server's
                                      certificate; NULL: the URL's host */
    bool tls_insecure_skip_verify; /* true: accept any server certificate and name (tests
                                      only: it gives up TLS's protection); false: verify */
    /* Log hook: events a human wants to see (reconnect, hold lost, server restarted,
     * renewal late or failed, slow acquire). NULL: nothing is logged, nothing printed.
     * Called with one line of text (no newline, never a password or a key's value) on the
     * thread that saw the event, often a library thread holding internal locks: it must
     * return quickly and must not call baton functions. */
    void (*log_fn)(void *log_arg, int level, const char *msg);
    void *log_arg;           /* passed to log_fn as is */
    int log_level;           /* most verbose BATON_LOG_* level passed on; 0: BATON_LOG_WARN */
    int64_t slow_acquire_ms; /* an acquisition that took longer is logged (BATON_LOG_WARN)
                                and counted in baton_stats.slow_acquires; 0: never */
    int64_t keepalive_ms;    /* how soon a server that fell silent is noticed on idle
                                connections: the pub/sub connection sends PING after half
                                of it without a byte and gives up after the other half
                                (waiters are woken and it reconnects), and TCP keepalive
                                probes give up after about the same; at least 1000;
                                0: 15000 */
    /* Sentinel (redis+sentinel:// URLs): credentials for the sentinels themselves, which
     * often differ from the data nodes' (the URL's are the data nodes'). NULL: none. */
    const char *sentinel_username;
    const char *sentinel_password;
    /* Durability against failover (Redisson's checkLockSyncedSlaves): with sync_replicas
     * N > 0, every lock acquisition and every watchdog renewal is followed, in the same
     * round trip, by WAIT N sync_timeout_ms. An acquisition fewer than N replicas
     * acknowledged is undone and returns BATON_ENOTSYNCED, so no holder runs on a lock a
     * failover could erase (an old master cut off from its replicas cannot satisfy it
     * either); a renewal not acknowledged is logged (BATON_LOG_WARN) but counts, since the
     * master has it (after a failover the new master's replica resyncs for a while). Locks
     * of every kind; semaphores and latches are not covered. The WAIT's reply has
     * sync_timeout_ms of its own besides command_timeout_ms, so an acquisition no replica
     * confirms is BATON_ENOTSYNCED, never BATON_ECONN, whatever the two are; one whose
     * WAIT the server's ACL refused is undone too and returns BATON_EPERM.
     * 0: off (Redisson's default). sync_timeout_ms 0: 1000. */
    int sync_replicas;
    int64_t sync_timeout_ms;
    /* The name every connection of the client gives itself (CLIENT SETNAME), so that
     * CLIENT LIST tells an operator whose connections these are. Bytes CLIENT SETNAME
     * refuses (spaces, control bytes, non-ASCII) become '_'; at most 128 bytes are kept.
     * NULL or "": "baton:<host>:<pid>". A server that refuses CLIENT SETNAME (an ACL
     * without it) is used anyway, unnamed. */
    const char *client_name;
    /* The plain lock's starvation bound: a waiter that has waited this long queues in the
     * lock's line, and the lock goes to the line's waiters in turn before any newcomer
     * (the releasing thread included: newcomers queue behind the line while it is not
     * empty), as Go's sync.Mutex hands itself to a starved waiter; a newcomer queued first
     * is handed the lock only once it has waited this long too (until then the releasing
     * thread may take the lock back). Redisson's own clients
     * do not see the line. 0: 5 ms (0.1.0: 100 ms; see docs/ARCHITECTURE.md for the
     * figures behind it); BATON_STARVE_NEVER: this client's waiters never queue
     * (Redisson's RLock: a waiter may lose every race for its whole wait), though they
     * still leave a lock reserved for another client's queued waiter alone. The
     * semaphore's waiters queue in its line after 4 x starve_ms (docs/semaphore.md). */
    int64_t starve_ms;
    /* Durability against a power loss of the master's machine: with sync_aof 1, every lock
     * acquisition and renewal is followed, in the same round trip, by WAITAOF 1
     * sync_replicas sync_timeout_ms (Redis 7.2+, Valkey 8+) instead of WAIT: it counts once
     * the master's append-only file has it fsynced (and, with sync_replicas N, N replicas'
     * files). As with sync_replicas, an acquisition not on disk in time is undone and
     * returns BATON_ENOTSYNCED (so does every one on a server with appendonly no); on a
     * server without WAITAOF (Redis 7.0) it is undone and returns BATON_ENOTSUP, naming
     * the server's refusal; a renewal not on disk is logged (BATON_LOG_WARN) but counts.
     * 0: off. docs/guarantees.md says what it adds and what it costs. */
    int sync_aof;
    /* Commands of every thread, baton_owner and asynchronous operation of the client share
     * one connection per server (per master on a Cluster), pipelined: those sent while a
     * write is under way go out together in the next write, replies are matched to their
     * requests in order, and each caller waits for its own (docs/ARCHITECTURE.md,
     * "Transport"). 0 (the default) or 1: on; -1: off, a pooled connection per command in
     * flight (pool_size), as before 0.3.0. With sync_replicas or sync_aof commands take
     * pooled connections whatever this says (WAIT holds its connection on the server). */
    int multiplex;
} baton_options;

#define BATON_STARVE_NEVER (-1)

/* Levels of the log hook, most severe first:
 * ERROR a hold was lost (deleted, taken over, expired, server restarted);
 * WARN  the server restarted (new epoch), renewals failed or ran late, the pub/sub
 *       connection was lost, an acquisition was slower than slow_acquire_ms;
 * INFO  the pub/sub connection came back;
 * DEBUG every watchdog round that renewed its holds. Above DEBUG means DEBUG. */
#define BATON_LOG_ERROR 1
#define BATON_LOG_WARN 2
#define BATON_LOG_INFO 3
#define BATON_LOG_DEBUG 4

/* Fills *opts with zeroes, that is, every default. Safe to call with NULL (does nothing). */
BATON_API void baton_options_init(baton_options *opts);

/*
 * Opens a client with the given options (NULL: all defaults) and stores it in *out.
 * Connects one command connection at once, so a wrong address or password is reported here.
 * Blocks for at most connect_timeout_ms.
 *
 * Returns BATON_OK; BATON_EINVAL (out is NULL, a malformed URL, a negative or absurd
 * timeout); BATON_ECONN (server unreachable); BATON_EAUTH (AUTH refused); BATON_EPROTO
 * (SELECT refused, or an unexpected reply); BATON_ENOMEM. TLS: an unreadable CA, certificate
 * or key, or tls_* options without rediss://, are BATON_EINVAL; a failed handshake (the
 * server's certificate not trusted, expired or for another name; a plain-text server) is
 * BATON_ECONN with OpenSSL's reason in the detail. On failure *out is set to NULL and
 * nothing is left to close. On success baton_client_errmsg(*out) is "" or, once, a warning
 * about the server's configuration: an evicting maxmemory-policy (allkeys-* may evict held
 * locks, counts and fencing counters; volatile-* held locks), since baton's guarantees need
 * noeviction. The detail of a failure to open cannot be read with
 * baton_client_errmsg() (there is no client): use baton_open_errmsg().
 */
BATON_API int baton_client_open(const baton_options *opts, baton_client **out);

/* baton_client_open() with every option at its default but the URL. */
BATON_API int baton_client_open_url(const char *url, baton_client **out);

/*
 * Returns the detail of the last failed baton_client_open() on the calling thread, or "" if
 * there is none. Thread-local; valid until the calling thread's next baton_client_open().
 */
BATON_API const char *baton_open_errmsg(void);

/*
 * Writes into buf (len bytes, always NUL-terminated, cut to fit) the URL as baton
 * understands it, for messages: rebuilt from the library's own parse of url, with the
 * user name and password shown as one "***" (a user name may be the start of a password
 * with an unescaped ':'). A URL that
 * does not parse is not shown at all (only its scheme): which part of it is the password
 * cannot be told. Returns BATON_OK, or BATON_EINVAL (url does not parse, or buf is NULL or
 * len 0). Never blocks.
 */
BATON_API int baton_url_redact(const char *url, char *buf, size_t len);

/*
 * A client serves the process that opened it. In a child made by fork() every call on a
 * copied client and its objects returns BATON_ENOTSUP without sending anything (the child
 * would otherwise act on the parent's holds under the parent's owner ids); closing it there
 * frees the child's copy and closes only the child's descriptors. Open a new client in the
 * child.
 *
 * Closes the client: stops its threads, closes its connections and frees it. Locks still
 * held are not released (their leases run out on the server; their watchdog stops). NULL is
 * a no-op.
 *
 * Objects still open on it are closed into a state where every call on them returns
 * BATON_ECLOSED ("lock <name>: its client was closed", baton_client_errmsg() on the
 * calling thread, even through the closed client's pointer) and only their own close,
 * which frees them, remains to be called. A call on the closed client returns
 * BATON_ECLOSED. Closing a client twice is a misuse that aborts the program with a message
 * on stderr naming it ("baton_client_close(0x...): not an open client: closed twice, ..."),
 * in every build, never memory corruption.
 *
 * Waits in progress are cancelled first (see baton_client_cancel_waits in async.h): threads
 * blocked in an acquire or await return BATON_ECANCELED after leaving nothing behind, and
 * close waits until they have returned from that call (about one round trip; an acquire
 * or await that starts meanwhile returns BATON_ECANCELED at once); pending asynchronous
 * operations complete with BATON_ECANCELED and their callbacks run on the closing thread
 * before close returns. Those threads get BATON_ECLOSED from any later call on the client's
 * objects (cancel, join, close objects, then close the client is still the clean order).
 * Must not be called from a completion callback.
 */
BATON_API void baton_client_close(baton_client *c);

/*
 * Returns the detail of the last failure of a call the calling thread made on this client
 * or on an object opened from it: the server's error text, hiredis's message, or which
 * argument was invalid. Never contains a password. Returns "" if there is none. The string
 * belongs to the library and stays valid until the calling thread's next call on the
 * client or its objects. NULL returns "".
 */
BATON_API const char *baton_client_errmsg(const baton_client *c);

/*
 * Returns the client's identity: a random UUID made when it was opened, the first half of
 * every lock owner field it writes ("<uuid>:<thread-id>", Redisson's layout). Static for
 * the client's life. NULL returns "".
 */
BATON_API const char *baton_client_id(const baton_client *c);

/*
 * Returns how many distinct runs of the server this client has seen: 1 after open, one more
 * each time a reconnection finds a new run_id (the server restarted and may have lost every
 * lock; every hold this client had is then reported lost, see baton_lock_set_lost_handler).
 * Fencing tokens restart only if the server lost its data: compare epochs to notice. 0 for
 * NULL, or when the server does not allow INFO.
 */
BATON_API uint64_t baton_client_epoch(const baton_client *c);

#ifdef __cplusplus
}
#endif

#endif /* BATON_CLIENT_H */
