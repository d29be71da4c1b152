/*
 * syscount: the socket system calls of this process, counted by interposing libc's
 * wrappers (see syscount.h). Each wrapper finds libc's own function with dlsym(RTLD_NEXT)
 * on its first call, counts when the descriptor is a counted socket, and calls through.
 *
 * Which descriptors count: those connect(2) was called on for an AF_INET, AF_INET6 or
 * AF_UNIX address (with syscount_only_port(), TCP to that port only), from the connect on
 * until close(2) or syscount_ignore_fd(). Descriptors at or above SC_MAX_FD are never
 * counted. Built without _GNU_SOURCE so that connect(2) and sendto(2) take plain
 * struct sockaddr pointers (glibc's transparent unions are GNU-only).
 */
#define _DEFAULT_SOURCE
#include "syscount.h"

#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#ifndef RTLD_NEXT
#define RTLD_NEXT ((void *)-1L) /* glibc's value; dlfcn.h names it under _GNU_SOURCE only */
#endif

#define SC_MAX_FD 65536

enum { FD_NONE = 0, FD_COUNTED = 1, FD_IGNORED = 2 };

static _Atomic unsigned char fd_state[SC_MAX_FD];
static _Atomic uint64_t counts[SC_KINDS];
static _Atomic int only_port;

/* Declared here: glibc declares ppoll under _GNU_SOURCE and the _chk forms with
 * _FORTIFY_SOURCE only. */
int ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *tmo, const sigset_t *mask);
ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags,
                       struct sockaddr *addr, socklen_t *alen);
int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen);
int __ppoll_chk(struct pollfd *fds, nfds_t nfds, const struct timespec *tmo, const sigset_t *mask,
                size_t fdslen);

/* libc's function of that name (found once; a race finds the same pointer twice). */
#define REAL(name)                                                                                 \
    static void *real_##name##_p;                                                                  \
    __typeof__(name) *real_##name =                                                                \
        (__typeof__(name) *)__atomic_load_n(&real_##name##_p, __ATOMIC_RELAXED);                   \
    if (!real_##name) {                                                                            \
        real_##name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name);                                 \
        __atomic_store_n(&real_##name##_p, (void *)real_##name, __ATOMIC_RELAXED);                 \
    }

static int counted(int fd)
{
    return fd >= 0 && fd < SC_MAX_FD &&
           atomic_load_explicit(&fd_state[fd], memory_order_relaxed) == FD_COUNTED;
}

static void bump(int kind)
{
    atomic_fetch_add_explicit(&counts[kind], 1, memory_order_relaxed);
}

/* Counts one call of kind on fd that returned r (errno as it left it). */
static ssize_t note(int fd, int kind, ssize_t r)
{
    if (counted(fd)) {
        int e = errno;
        bump(kind);
        if (r < 0 && (e == EAGAIN || e == EWOULDBLOCK))
            bump(SC_EAGAIN);
        errno = e;
    }
    return r;
}

static int any_counted(const struct pollfd *fds, nfds_t n)
{
    for (nfds_t i = 0; i < n; i++)
        if (counted(fds[i].fd))
            return 1;
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * The API
 * ---------------------------------------------------------------------------------------- */

void syscount_read(syscount *out)
{
    memset(out, 0, sizeof *out);
    for (int k = 0; k < SC_KINDS; k++)
        out->n[k] = atomic_load_explicit(&counts[k], memory_order_relaxed);
    out->total =
        out->n[SC_SEND] + out->n[SC_WRITE] + out->n[SC_RECV] + out->n[SC_READ] + out->n[SC_POLL];
}

void syscount_diff(const syscount *a, const syscount *b, syscount *out)
{
    for (int k = 0; k < SC_KINDS; k++)
        out->n[k] = b->n[k] - a->n[k];
    out->total = b->total - a->total;
}

void syscount_format(const syscount *d, char *buf, size_t len)
{
    static const char *const names[SC_KINDS] = {"send", "write",  "recv",   "read",
                                                "poll", "eagain", "connect"};
    size_t off = 0;
    if (len)
        buf[0] = '\0';
    for (int k = 0; k < SC_KINDS && off < len; k++)
        if (d->n[k])
            off += (size_t)snprintf(buf + off, len - off, "%s%s=%llu", off ? "," : "", names[k],
                                    (unsigned long long)d->n[k]);
}

void syscount_ignore_fd(int fd)
{
    if (fd >= 0 && fd < SC_MAX_FD)
        atomic_store(&fd_state[fd], FD_IGNORED);
}

void syscount_only_port(int port)
{
    atomic_store(&only_port, port);
}

/* ------------------------------------------------------------------------------------------
 * Which descriptors count
 * ---------------------------------------------------------------------------------------- */

static int wanted(const struct sockaddr *a)
{
    int port = atomic_load(&only_port);
    if (!a)
        return 0;
    if (a->sa_family == AF_INET)
        return !port || ntohs(((const struct sockaddr_in *)(const void *)a)->sin_port) == port;
    if (a->sa_family == AF_INET6)
        return !port || ntohs(((const struct sockaddr_in6 *)(const void *)a)->sin6_port) == port;
    return a->sa_family == AF_UNIX && !port;
}

int connect(int fd, const struct sockaddr *addr, socklen_t alen)
{
    REAL(connect);
    int r = real_connect(fd, addr, alen);
    int e = errno;
    if (fd >= 0 && fd < SC_MAX_FD && (r == 0 || e == EINPROGRESS) && wanted(addr)) {
        atomic_store(&fd_state[fd], FD_COUNTED);
        bump(SC_CONNECT);
    }
    errno = e;
    return r;
}

int close(int fd)
{
    REAL(close);
    if (fd >= 0 && fd < SC_MAX_FD)
        atomic_store(&fd_state[fd], FD_NONE);
    return real_close(fd);
}

/* ------------------------------------------------------------------------------------------
 * Writes and reads
 * ---------------------------------------------------------------------------------------- */

ssize_t send(int fd, const void *buf, size_t len, int flags)
{
    REAL(send);
    return note(fd, SC_SEND, real_send(fd, buf, len, flags));
}

ssize_t sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *to,
               socklen_t tolen)
{
    REAL(sendto);
    return note(fd, SC_SEND, real_sendto(fd, buf, len, flags, to, tolen));
}

ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
    REAL(sendmsg);
    return note(fd, SC_SEND, real_sendmsg(fd, msg, flags));
}

ssize_t write(int fd, const void *buf, size_t len)
{
    REAL(write);
    return note(fd, SC_WRITE, real_write(fd, buf, len));
}

ssize_t writev(int fd, const struct iovec *iov, int n)
{
    REAL(writev);
    return note(fd, SC_WRITE, real_writev(fd, iov, n));
}

ssize_t recv(int fd, void *buf, size_t len, int flags)
{
    REAL(recv);
    return note(fd, SC_RECV, real_recv(fd, buf, len, flags));
}

ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags)
{
    REAL(__recv_chk);
    return note(fd, SC_RECV, real___recv_chk(fd, buf, len, buflen, flags));
}

ssize_t recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *from, socklen_t *flen)
{
    REAL(recvfrom);
    return note(fd, SC_RECV, real_recvfrom(fd, buf, len, flags, from, flen));
}

ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags,
                       struct sockaddr *from, socklen_t *flen)
{
    REAL(__recvfrom_chk);
    return note(fd, SC_RECV, real___recvfrom_chk(fd, buf, len, buflen, flags, from, flen));
}

ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
    REAL(recvmsg);
    return note(fd, SC_RECV, real_recvmsg(fd, msg, flags));
}

ssize_t read(int fd, void *buf, size_t len)
{
    REAL(read);
    return note(fd, SC_READ, real_read(fd, buf, len));
}

ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen)
{
    REAL(__read_chk);
    return note(fd, SC_READ, real___read_chk(fd, buf, len, buflen));
}

ssize_t readv(int fd, const struct iovec *iov, int n)
{
    REAL(readv);
    return note(fd, SC_READ, real_readv(fd, iov, n));
}

/* ------------------------------------------------------------------------------------------
 * Waits: one count per call whose set holds a counted socket
 * ---------------------------------------------------------------------------------------- */

int poll(struct pollfd *fds, nfds_t n, int timeout)
{
    REAL(poll);
    int mine = any_counted(fds, n);
    int r = real_poll(fds, n, timeout);
    if (mine)
        bump(SC_POLL);
    return r;
}

int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen)
{
    REAL(__poll_chk);
    int mine = any_counted(fds, n);
    int r = real___poll_chk(fds, n, timeout, fdslen);
    if (mine)
        bump(SC_POLL);
    return r;
}

int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *tmo, const sigset_t *mask)
{
    REAL(ppoll);
    int mine = any_counted(fds, n);
    int r = real_ppoll(fds, n, tmo, mask);
    if (mine)
        bump(SC_POLL);
    return r;
}

int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *tmo, const sigset_t *mask,
                size_t fdslen)
{
    REAL(__ppoll_chk);
    int mine = any_counted(fds, n);
    int r = real___ppoll_chk(fds, n, tmo, mask, fdslen);
    if (mine)
        bump(SC_POLL);
    return r;
}

static int set_counted(int nfds, const fd_set *a, const fd_set *b, const fd_set *c)
{
    for (int fd = 0; fd < nfds && fd < FD_SETSIZE; fd++)
        if (((a && FD_ISSET(fd, a)) || (b && FD_ISSET(fd, b)) || (c && FD_ISSET(fd, c))) &&
            counted(fd))
            return 1;
    return 0;
}

int select(int nfds, fd_set *r, fd_set *w, fd_set *e, struct timeval *tmo)
{
    REAL(select);
    int mine = set_counted(nfds, r, w, e);
    int got = real_select(nfds, r, w, e, tmo);
    if (mine)
        bump(SC_POLL);
    return got;
}

int pselect(int nfds, fd_set *r, fd_set *w, fd_set *e, const struct timespec *tmo,
            const sigset_t *mask)
{
    REAL(pselect);
    int mine = set_counted(nfds, r, w, e);
    int got = real_pselect(nfds, r, w, e, tmo, mask);
    if (mine)
        bump(SC_POLL);
    return got;
}
