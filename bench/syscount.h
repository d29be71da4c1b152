/*
 * syscount: counts the socket system calls of the process that links it (bench/syscount.c).
 *
 * It interposes the libc wrappers a client's socket I/O goes through (send, recv, read,
 * write, their vector and message forms, poll, ppoll, select and the _FORTIFY_SOURCE _chk
 * variants) and counts a call when it touches a socket the process connected with
 * connect(2) (TCP or Unix) and has not closed or asked to ignore; a poll/ppoll/select call
 * counts once when any descriptor of its set is such a socket. Everything else passes
 * through untouched. Linked into an executable (the bench, tests/net/test_syscalls.c), its
 * definitions take the place of libc's for the executable and for every library it loads,
 * libbaton included; each call then costs one relaxed atomic add beside the system call.
 * The same file built as a shared object works with LD_PRELOAD.
 *
 * Counters are process-wide (threads share them); a forked child starts from its parent's.
 */
#ifndef BATON_BENCH_SYSCOUNT_H
#define BATON_BENCH_SYSCOUNT_H

#include <stddef.h>
#include <stdint.h>

/* The calls counted apart, the index of syscount.n[]. */
enum {
    SC_SEND,    /* send, sendto, sendmsg */
    SC_WRITE,   /* write, writev */
    SC_RECV,    /* recv, recvfrom, recvmsg (and their _chk forms) */
    SC_READ,    /* read, readv */
    SC_POLL,    /* poll, ppoll, select, pselect */
    SC_EAGAIN,  /* of the reads and writes above, those that failed with EAGAIN */
    SC_CONNECT, /* connect */
    SC_KINDS
};

typedef struct syscount {
    uint64_t n[SC_KINDS];
    uint64_t total; /* send + write + recv + read + poll (EAGAIN and connect not again) */
} syscount;

/* A snapshot of the counters. */
void syscount_read(syscount *out);
/* b - a, kind by kind. */
void syscount_diff(const syscount *a, const syscount *b, syscount *out);
/* "send=N,write=N,recv=N,read=N,poll=N,eagain=N,connect=N" of a difference, the kinds
 * that are not 0, into buf (always NUL-terminated). */
void syscount_format(const syscount *d, char *buf, size_t len);
/* Calls on fd are no longer counted, until it is closed: the caller's own connections
 * (the bench's raw hiredis connections, for example). */
void syscount_ignore_fd(int fd);
/* Only TCP sockets connected to this port count from now on (0: every connected socket);
 * a connection made before the call keeps its state. */
void syscount_only_port(int port);

#endif
