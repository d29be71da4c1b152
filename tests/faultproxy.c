/*
 * The fault proxy (see faultproxy.h). One thread, one poll() loop over the listening
 * socket, a wake-up pipe and both sockets of every connection. Bytes read from one side are
 * queued as chunks stamped with the time they may leave (now + that direction's delay) and
 * written to the other side when due. Holding simply stops reading and writing (the bytes
 * wait in the kernel and in the queues, as in a partition); a cut sets SO_LINGER to zero
 * before closing, so the peer sees a reset, not an orderly close.
 */
#define _GNU_SOURCE
#include "faultproxy.h"

#include "helper.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 256
#define CHUNK 16384

typedef struct chunk {
    struct chunk *next;
    int64_t due_us;
    size_t len, off;
    char data[];
} chunk;

typedef struct conn {
    int fd[2];                /* [TH_UP] the client's side (read requests from it), [TH_DOWN] the
                                 server's side; -1 while not connected upstream */
    chunk *head[2], *tail[2]; /* queued to be written: [TH_UP] to the server, [TH_DOWN] to
                                 the client */
    long nth;                 /* accepted as the proxy's nth connection (from 1) */
    bool held;                /* this connection alone is held (th_proxy_hold_conn) */
    bool drop[2];             /* bytes read in this direction are discarded (a blackhole) */
    int delay_ms[2];          /* this connection's own delay per direction */
} conn;

struct th_proxy {
    int upstream;
    int port;
    char url[64];
    int listen_fd;
    int pipe[2];
    pthread_t thread;
    pthread_mutex_t mu;
    bool stopping, hold, cut_now;
    long cut_nth; /* reset that connection (th_proxy_cut_conn); 0: none */
    int delay_ms[2];
    bool drop[2];      /* every connection's bytes in that direction are discarded */
    long cut_after[2]; /* bytes still allowed through before a reset; -1: off */
    long accepted;
    int nconns;
    conn conns[MAX_CONNS];
};

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static void reset_fd(int fd)
{
    if (fd < 0)
        return;
    struct linger lg = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
}

static void drop_conn(th_proxy *p, int i, bool reset)
{
    conn *c = &p->conns[i];
    for (int d = 0; d < 2; d++) {
        if (reset)
            reset_fd(c->fd[d]);
        else if (c->fd[d] >= 0)
            close(c->fd[d]);
        while (c->head[d]) {
            chunk *k = c->head[d];
            c->head[d] = k->next;
            free(k);
        }
    }
    p->conns[i] = p->conns[--p->nconns];
}

static int connect_upstream(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    nonblock(fd);
    return fd;
}

/* Reads what side `from` has and queues it for the other side. false: closed or error. */
static bool pump_in(th_proxy *p, conn *c, th_dir from)
{
    chunk *k = malloc(sizeof *k + CHUNK);
    if (!k)
        return false;
    ssize_t n = read(c->fd[from], k->data, CHUNK);
    if (n <= 0) {
        free(k);
        return n < 0 && (errno == EAGAIN || errno == EINTR);
    }
    k->next = NULL;
    k->len = (size_t)n;
    k->off = 0;
    if (p->drop[from] || c->drop[from]) { /* a blackhole: read, and gone */
        free(k);
        return true;
    }
    int delay = c->delay_ms[from] > p->delay_ms[from] ? c->delay_ms[from] : p->delay_ms[from];
    k->due_us = now_us() + (int64_t)delay * 1000;
    if (c->tail[from])
        c->tail[from]->next = k;
    else
        c->head[from] = k;
    c->tail[from] = k;
    return true;
}

/* Writes the due chunks queued in direction dir. false: the connection must go (error, or
 * a cut_after ran out: *reset tells). */
static bool pump_out(th_proxy *p, conn *c, th_dir dir, bool *reset)
{
    int to = dir == TH_UP ? TH_DOWN : TH_UP;
    int64_t now = now_us();
    while (c->head[dir] && c->head[dir]->due_us <= now) {
        chunk *k = c->head[dir];
        size_t want = k->len - k->off;
        bool last = false;
        if (p->cut_after[dir] >= 0 && (long)want >= p->cut_after[dir]) {
            want = (size_t)p->cut_after[dir];
            last = true;
        }
        ssize_t n = want ? write(c->fd[to], k->data + k->off, want) : 0;
        if (n < 0)
            return errno == EAGAIN || errno == EINTR;
        k->off += (size_t)n;
        if (p->cut_after[dir] >= 0)
            p->cut_after[dir] -= n;
        if (last && (size_t)n == want) {
            p->cut_after[dir] = -1; /* one reset per cut_after() */
            *reset = true;
            return false;
        }
        if (k->off < k->len)
            return true; /* the socket is full: later */
        c->head[dir] = k->next;
        if (!c->head[dir])
            c->tail[dir] = NULL;
        free(k);
    }
    return true;
}

static void *proxy_main(void *arg)
{
    th_proxy *p = arg;
    struct pollfd fds[2 + 2 * MAX_CONNS];
    pthread_mutex_lock(&p->mu);
    while (!p->stopping) {
        if (p->cut_now) {
            p->cut_now = false;
            while (p->nconns)
                drop_conn(p, 0, true);
        }
        for (int i = 0; p->cut_nth && i < p->nconns; i++)
            if (p->conns[i].nth == p->cut_nth)
                drop_conn(p, i, true);
        p->cut_nth = 0;
        if (!p->hold) /* connections accepted during a hold are connected now */
            for (int i = 0; i < p->nconns; i++)
                if (p->conns[i].fd[TH_DOWN] < 0 &&
                    (p->conns[i].fd[TH_DOWN] = connect_upstream(p->upstream)) < 0)
                    drop_conn(p, i--, true);
        int n = 0;
        fds[n++] = (struct pollfd){p->pipe[0], POLLIN, 0};
        fds[n++] = (struct pollfd){p->listen_fd, POLLIN, 0};
        int64_t next_due = INT64_MAX;
        for (int i = 0; i < p->nconns; i++) {
            conn *c = &p->conns[i];
            bool held = p->hold || c->held;
            for (int d = 0; d < 2; d++) {
                short ev = 0;
                if (!held && c->fd[d] >= 0)
                    ev |= POLLIN;
                int to = d == TH_UP ? TH_DOWN : TH_UP;
                if (!held && c->head[to] && c->fd[d] >= 0) {
                    if (c->head[to]->due_us <= now_us())
                        ev |= POLLOUT;
                    else if (c->head[to]->due_us < next_due)
                        next_due = c->head[to]->due_us;
                }
                /* held: not even a hang-up is looked at until the heal */
                fds[n++] = (struct pollfd){held ? -1 : c->fd[d], ev, 0};
            }
        }
        int timeout = -1;
        if (next_due != INT64_MAX) {
            int64_t ms = (next_due - now_us() + 999) / 1000;
            timeout = ms < 0 ? 0 : (int)ms;
        }
        int nconns = p->nconns;
        pthread_mutex_unlock(&p->mu);
        int r = poll(fds, (nfds_t)n, timeout);
        pthread_mutex_lock(&p->mu);
        if (r < 0)
            continue;
        if (fds[0].revents) {
            char buf[64];
            while (read(p->pipe[0], buf, sizeof buf) > 0) {
            }
            continue; /* the settings changed: rebuild the poll set */
        }
        for (int i = nconns - 1; i >= 0; i--) {
            conn *c = &p->conns[i];
            bool ok = true, reset = false, held = p->hold || c->held;
            for (int d = 0; d < 2 && ok; d++) {
                short rev = fds[2 + 2 * i + d].revents;
                if (!held && (rev & (POLLIN | POLLHUP | POLLERR)))
                    ok = pump_in(p, c, (th_dir)d);
            }
            for (int d = 0; d < 2 && ok; d++)
                if (!held && c->head[d] && c->fd[d == TH_UP ? TH_DOWN : TH_UP] >= 0)
                    ok = pump_out(p, c, (th_dir)d, &reset);
            if (!ok)
                drop_conn(p, i, reset);
        }
        if (fds[1].revents & POLLIN) {
            int fd = accept4(p->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
            if (fd >= 0 && p->nconns < MAX_CONNS) {
                int one = 1;
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                conn *c = &p->conns[p->nconns++];
                memset(c, 0, sizeof *c);
                c->fd[TH_UP] = fd;
                c->fd[TH_DOWN] = p->hold ? -1 : connect_upstream(p->upstream);
                c->nth = ++p->accepted;
                if (!p->hold && c->fd[TH_DOWN] < 0)
                    drop_conn(p, p->nconns - 1, true);
            } else if (fd >= 0) {
                reset_fd(fd);
            }
        }
    }
    while (p->nconns)
        drop_conn(p, 0, false);
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void poke(th_proxy *p)
{
    char b = 1;
    ssize_t n = write(p->pipe[1], &b, 1);
    (void)n;
}

th_proxy *th_proxy_start(int upstream_port)
{
    th_proxy *p = calloc(1, sizeof *p);
    cr_assert(p != NULL);
    p->upstream = upstream_port;
    p->cut_after[0] = p->cut_after[1] = -1;
    p->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof a;
    cr_assert(p->listen_fd >= 0 && bind(p->listen_fd, (struct sockaddr *)&a, sizeof a) == 0 &&
                  listen(p->listen_fd, 128) == 0 &&
                  getsockname(p->listen_fd, (struct sockaddr *)&a, &alen) == 0,
              "proxy socket: %s", strerror(errno));
    nonblock(p->listen_fd);
    p->port = ntohs(a.sin_port);
    snprintf(p->url, sizeof p->url, "redis://127.0.0.1:%d", p->port);
    cr_assert(pipe2(p->pipe, O_NONBLOCK | O_CLOEXEC) == 0);
    pthread_mutex_init(&p->mu, NULL);
    cr_assert(pthread_create(&p->thread, NULL, proxy_main, p) == 0);
    return p;
}

int th_proxy_port(const th_proxy *p)
{
    return p->port;
}

const char *th_proxy_url(const th_proxy *p)
{
    return p->url;
}

void th_proxy_hold(th_proxy *p, bool on)
{
    pthread_mutex_lock(&p->mu);
    p->hold = on;
    pthread_mutex_unlock(&p->mu);
    poke(p);
}

void th_proxy_hold_conn(th_proxy *p, long nth, bool on)
{
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < p->nconns; i++)
        if (p->conns[i].nth == nth)
            p->conns[i].held = on;
    pthread_mutex_unlock(&p->mu);
    poke(p);
}

void th_proxy_blackhole(th_proxy *p, th_dir dir, bool on)
{
    pthread_mutex_lock(&p->mu);
    p->drop[dir] = on;
    pthread_mutex_unlock(&p->mu);
    poke(p);
}

void th_proxy_blackhole_conn(th_proxy *p, long nth, th_dir dir, bool on)
{
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < p->nconns; i++)
        if (p->conns[i].nth == nth)
            p->conns[i].drop[dir] = on;
    pthread_mutex_unlock(&p->mu);
    poke(p);
}

void th_proxy_delay_conn(th_proxy *p, long nth, th_dir dir, int ms)
{
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < p->nconns; i++)
        if (p->conns[i].nth == nth)
            p->conns[i].delay_ms[dir] = ms;
    pthread_mutex_unlock(&p->mu);
    poke(p);
}

void th_proxy_cut_conn(th_proxy *p, long nth)
{
    pthread_mutex_lock(&p->mu);
    p->cut_nth = nth;
    pthread_mutex_unlock(&p->mu);
    poke(p);
    for (int i = 0; i < 500; i++) {
        pthread_mutex_lock(&p->mu);
        bool done = p->cut_nth == 0;
        pthread_mutex_unlock(&p->mu);
        if (done)
            return;
        th_sleep_ms(2);
    }
}

void th_proxy_delay(th_proxy *p, th_dir dir, int ms)
{
    pthread_mutex_lock(&p->mu);
    p->delay_ms[dir] = ms;
    pthread_mutex_unlock(&p->mu);
    poke(p);
}

void th_proxy_cut(th_proxy *p)
{
    pthread_mutex_lock(&p->mu);
    p->cut_now = true;
    pthread_mutex_unlock(&p->mu);
    poke(p);
    /* done when the thread has dropped them all */
    for (int i = 0; i < 500; i++) {
        pthread_mutex_lock(&p->mu);
        bool done = !p->cut_now;
        pthread_mutex_unlock(&p->mu);
        if (done)
            return;
        th_sleep_ms(2);
    }
}

void th_proxy_cut_after(th_proxy *p, th_dir dir, long n)
{
    pthread_mutex_lock(&p->mu);
    p->cut_after[dir] = n;
    pthread_mutex_unlock(&p->mu);
    poke(p);
}

long th_proxy_conn_of(th_proxy *p, int upstream_local_port)
{
    long nth = 0;
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < p->nconns && !nth; i++) {
        struct sockaddr_in a;
        socklen_t alen = sizeof a;
        if (p->conns[i].fd[TH_DOWN] >= 0 &&
            getsockname(p->conns[i].fd[TH_DOWN], (struct sockaddr *)&a, &alen) == 0 &&
            ntohs(a.sin_port) == upstream_local_port)
            nth = p->conns[i].nth;
    }
    pthread_mutex_unlock(&p->mu);
    return nth;
}

long th_proxy_accepted(th_proxy *p)
{
    pthread_mutex_lock(&p->mu);
    long n = p->accepted;
    pthread_mutex_unlock(&p->mu);
    return n;
}

int th_proxy_open(th_proxy *p)
{
    pthread_mutex_lock(&p->mu);
    int n = p->nconns;
    pthread_mutex_unlock(&p->mu);
    return n;
}

void th_proxy_heal(th_proxy *p)
{
    pthread_mutex_lock(&p->mu);
    p->hold = false;
    for (int i = 0; i < p->nconns; i++) {
        conn *c = &p->conns[i];
        c->held = c->drop[0] = c->drop[1] = false;
        c->delay_ms[0] = c->delay_ms[1] = 0;
    }
    p->delay_ms[0] = p->delay_ms[1] = 0;
    p->drop[0] = p->drop[1] = false;
    p->cut_after[0] = p->cut_after[1] = -1;
    pthread_mutex_unlock(&p->mu);
    poke(p);
}

void th_proxy_stop(th_proxy *p)
{
    pthread_mutex_lock(&p->mu);
    p->stopping = true;
    pthread_mutex_unlock(&p->mu);
    poke(p);
    pthread_join(p->thread, NULL);
    close(p->listen_fd);
    close(p->pipe[0]);
    close(p->pipe[1]);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
