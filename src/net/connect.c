/*
 * Connections: the TCP connect (every address of the host in turn, or the unix socket),
 * non-blocking within the connect timeout, with keepalive; then TLS if the URL says so
 * (conn.c). See conn.c for why baton owns its sockets.
 */
#define _GNU_SOURCE
#include "conn_impl.h"

#include "client_fields.h"
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
 * (MSG_DONTWAIT, conn.c): only a blocking read waits in recv(), a slice at a time
 * (BATON__READ_SLICE_MS). If the socket cannot be made so, it stays non-blocking and the
 * read polls: slower, the same. */
static void make_blocking(int fd)
{
    struct timeval tv = {BATON__READ_SLICE_MS / 1000, (BATON__READ_SLICE_MS % 1000) * 1000};
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
        if (!baton__conn_wait_fd(fd, POLLOUT, deadline_us, 0)) {
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
            baton__conn_set_err(k, "the socket path is too long");
            return false;
        }
        memcpy(sa.sun_path, ep->path, strlen(ep->path) + 1);
        k->fd =
            connect_addr(AF_UNIX, (struct sockaddr *)&sa, sizeof sa, deadline_us, why, sizeof why);
        if (k->fd < 0)
            baton__conn_set_err(k, "%s", why);
        return k->fd >= 0;
    }
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int g = getaddrinfo(host, portstr, &hints, &res);
    if (g != 0) {
        baton__conn_set_err(k, "cannot resolve the host: %s", gai_strerror(g));
        return false;
    }
    for (struct addrinfo *a = res; a && k->fd < 0; a = a->ai_next)
        k->fd = connect_addr(a->ai_family, a->ai_addr, a->ai_addrlen, deadline_us, why, sizeof why);
    freeaddrinfo(res);
    if (k->fd < 0) {
        baton__conn_set_err(k, "%s", why[0] ? why : "no address");
        return false;
    }
    tune_tcp(k->fd, c->cfg.keepalive_ms);
    return true;
}

/* Connects a socket to host:port (or the URL's unix socket when host is NULL) and starts
 * TLS if the client has it; the detail of a failure is recorded on c. */
int baton__conn_connect(baton_client *c, const char *host, int port, int64_t deadline,
                        const char *where, baton__conn **out)
{
    *out = NULL;
    baton__conn *k = baton__conn_new();
    if (!k)
        return baton__fail(c, BATON_ENOMEM, "connect to %s: out of memory", where);
    if (!connect_socket(c, k, host, port, deadline) ||
        (c->tls && !baton__tls_start(c, k, host, deadline))) {
        int rc = baton__fail(c, BATON_ECONN, "connect to %s: %s", where, baton__conn_errstr(k));
        baton__conn_close(k);
        return rc;
    }
    *out = k;
    return BATON_OK;
}
