/*
 * A single-threaded epoll server whose requests take a distributed lock without blocking
 * the loop (include/baton/async.h).
 *
 *   evloop --port P [--clients N] [--requests K] [--keys M] [--loop]
 *
 * The server listens on a loopback TCP port and forks N client processes. Each client sends
 * K lines "INC <key>" (key 0..M-1) on one connection, one at a time, and reads "OK <value>"
 * back. For every request the server makes an owner (a request is not a thread), starts
 * baton_lock_acquire_async on lock "evloop:<key>" and goes back to epoll. When the lock is
 * taken, baton_client_process() runs the callback on the loop: it reads the key's counter
 * from Redis, writes it back plus one (deliberately not atomic: only the lock keeps it
 * right), starts the release and answers. All N connections are served at once by the one
 * thread. At the end the counters must add up to N x K; it prints a summary and exits 0
 * when they do, 1 otherwise (2 on a usage or connection error).
 *
 * --loop: the client has no engine thread (BATON_CALLBACKS_LOOP): the operations run on
 * this loop's thread too, inside baton_client_process(), and baton's descriptor is an epoll
 * descriptor, added to the server's epoll like any other.
 */
#define _GNU_SOURCE
#include <baton/baton.h>
#include <hiredis/hiredis.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_KEYS 64

static int port = 6379, nclients = 50, nrequests = 20, nkeys = 8;
static bool loop_mode;

typedef struct server {
    baton_client *c;
    redisContext *r;
    baton_lock *locks[MAX_KEYS];
    int served, errors;
} server;

typedef struct request {
    server *s;
    int fd;
    int key;
    baton_owner *owner;
} request;

static char *counter_key(int key)
{
    static char buf[64];
    snprintf(buf, sizeof buf, "evloop:counter:%d", key);
    return buf;
}

static void answer(int fd, const char *line)
{
    ssize_t n = write(fd, line, strlen(line));
    (void)n; /* a client that went away is noticed by epoll */
}

static void released(void *handle, baton_owner *owner, int rc, void *arg)
{
    (void)handle;
    server *s = arg;
    if (rc != BATON_OK)
        s->errors++;
    baton_owner_free(owner);
}

/* The lock is held by this request's owner: the critical section, then release. */
static void locked(void *handle, baton_owner *owner, int rc, void *arg)
{
    request *q = arg;
    server *s = q->s;
    char line[64];
    if (rc != BATON_OK) {
        fprintf(stderr, "evloop: lock %d: %s\n", q->key, baton_client_errmsg(s->c));
        s->errors++;
        answer(q->fd, "ERR\n");
        baton_owner_free(owner);
        free(q);
        return;
    }
    redisReply *rep = redisCommand(s->r, "GET %s", counter_key(q->key));
    long long v = rep && rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : 0;
    freeReplyObject(rep);
    rep = redisCommand(s->r, "SET %s %lld", counter_key(q->key), v + 1);
    freeReplyObject(rep);
    if (baton_lock_release_async(handle, owner, released, s, NULL) != BATON_OK) {
        s->errors++;
        baton_owner_free(owner);
    }
    snprintf(line, sizeof line, "OK %lld\n", v + 1);
    answer(q->fd, line);
    s->served++;
    free(q);
}

/* A line arrived on a connection: "INC <key>". */
static void on_request(server *s, int fd, const char *line)
{
    int key;
    if (sscanf(line, "INC %d", &key) != 1 || key < 0 || key >= nkeys) {
        answer(fd, "ERR\n");
        return;
    }
    request *q = malloc(sizeof *q);
    if (!q || baton_owner_new(s->c, &q->owner) != BATON_OK) {
        free(q);
        answer(fd, "ERR\n");
        return;
    }
    q->s = s;
    q->fd = fd;
    q->key = key;
    if (baton_lock_acquire_async(s->locks[key], q->owner, 10000, BATON_LEASE_WATCHDOG, locked, q,
                                 NULL) != BATON_OK) {
        fprintf(stderr, "evloop: %s\n", baton_client_errmsg(s->c));
        baton_owner_free(q->owner);
        free(q);
        answer(fd, "ERR\n");
    }
}

/* A client process: K requests, one at a time, on one connection. */
static int client_main(int listen_port, int id)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)listen_port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        return 2;
    FILE *in = fdopen(fd, "r");
    char line[64];
    int ok = 0;
    for (int i = 0; i < nrequests; i++) {
        char req[32];
        snprintf(req, sizeof req, "INC %d\n", (id * 7 + i) % nkeys);
        if (write(fd, req, strlen(req)) < 0 || !fgets(line, sizeof line, in))
            break;
        ok += strncmp(line, "OK ", 3) == 0;
    }
    fclose(in);
    return ok == nrequests ? 0 : 1;
}

static int listen_loopback(int *out_port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 256) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        return -1;
    *out_port = ntohs(a.sin_port);
    return fd;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i += 2) {
        if (strcmp(argv[i], "--loop") == 0) {
            loop_mode = true;
            i--; /* a flag: no value */
        } else if (i + 1 >= argc) {
            fprintf(stderr, "evloop: %s needs a value\n", argv[i]);
            return 2;
        } else if (strcmp(argv[i], "--port") == 0)
            port = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--clients") == 0)
            nclients = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--requests") == 0)
            nrequests = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--keys") == 0)
            nkeys = atoi(argv[i + 1]);
        else {
            fprintf(stderr,
                    "usage: evloop --port P [--clients N] [--requests K] [--keys M] [--loop]\n");
            return 2;
        }
    }
    if (nkeys < 1 || nkeys > MAX_KEYS || nclients < 1 || nrequests < 1) {
        fprintf(stderr, "evloop: --keys 1..%d, --clients and --requests >= 1\n", MAX_KEYS);
        return 2;
    }
    int lport;
    int lfd = listen_loopback(&lport);
    if (lfd < 0) {
        perror("evloop: listen");
        return 2;
    }
    /* The clients first, while this process has no thread of baton's yet. */
    pid_t *kids = calloc((size_t)nclients, sizeof *kids);
    for (int i = 0; i < nclients; i++)
        if ((kids[i] = fork()) == 0) {
            close(lfd);
            _exit(client_main(lport, i));
        }

    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    server s = {0};
    if (baton_client_open_url(url, &s.c) != BATON_OK || !(s.r = redisConnect("127.0.0.1", port)) ||
        s.r->err) {
        fprintf(stderr, "evloop: cannot reach redis on port %d: %s\n", port, baton_open_errmsg());
        return 2;
    }
    for (int k = 0; k < nkeys; k++) {
        char name[32];
        snprintf(name, sizeof name, "evloop:%d", k);
        baton_lock_open(s.c, name, &s.locks[k]);
        freeReplyObject(redisCommand(s.r, "DEL %s", counter_key(k)));
    }

    if (loop_mode && baton_client_set_callbacks(s.c, BATON_CALLBACKS_LOOP) != BATON_OK) {
        fprintf(stderr, "evloop: %s\n", baton_client_errmsg(s.c));
        return 2;
    }
    int baton_fd;
    baton_client_async_fd(s.c, &baton_fd);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event e = {.events = EPOLLIN, .data.fd = lfd};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &e);
    e.data.fd = baton_fd;
    epoll_ctl(ep, EPOLL_CTL_ADD, baton_fd, &e);

    int closed = 0, total = nclients * nrequests;
    while (closed < nclients) {
        struct epoll_event evs[64];
        int n = epoll_wait(ep, evs, 64, 1000);
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == baton_fd) {
                baton_client_process(s.c); /* callbacks run here, on the loop */
            } else if (fd == lfd) {
                int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
                struct epoll_event ce = {.events = EPOLLIN, .data.fd = cfd};
                if (cfd >= 0)
                    epoll_ctl(ep, EPOLL_CTL_ADD, cfd, &ce);
            } else {
                char buf[256];
                ssize_t got = read(fd, buf, sizeof buf - 1);
                if (got <= 0) {
                    epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
                    close(fd);
                    closed++;
                    continue;
                }
                buf[got] = '\0';
                for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n"))
                    on_request(&s, fd, line);
            }
        }
    }
    int failed_clients = 0;
    for (int i = 0; i < nclients; i++) {
        int st;
        waitpid(kids[i], &st, 0);
        failed_clients += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    while (baton_client_process(s.c) > 0) /* the last releases' callbacks */
        ;
    long long sum = 0;
    for (int k = 0; k < nkeys; k++) {
        redisReply *rep = redisCommand(s.r, "GET %s", counter_key(k));
        sum += rep && rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : 0;
        freeReplyObject(rep);
        freeReplyObject(redisCommand(s.r, "DEL %s", counter_key(k)));
        baton_lock_close(s.locks[k]);
    }
    printf("evloop: one thread served %d clients x %d requests on %d locks: %d served, "
           "counters sum %lld of %d, %d errors, %d clients failed\n",
           nclients, nrequests, nkeys, s.served, sum, total, s.errors, failed_clients);
    close(ep);
    close(lfd);
    free(kids);
    redisFree(s.r);
    baton_client_close(s.c); /* runs the callbacks of releases still in flight */
    return (sum == total && s.errors == 0 && failed_clients == 0) ? 0 : 1;
}
