/*
 * The cost of a blocking lock+unlock pair in socket system calls (issue 30): at most 4,
 * one write and one read for each of its two round trips, as hiredis's blocking context
 * made. Counted by bench/syscount.c, linked into this program: it interposes libc's send,
 * recv, read, write, poll and their kin and counts the calls on sockets connected to the
 * test server's port (Criterion's own sockets are not counted).
 *
 * Before issue 30 the transport made about 4.8 calls per round trip (send; recv that
 * fails EAGAIN; poll; recv; a liveness poll when a pooled connection is lent): 9.5 per pair.
 */
#include "helper.h"
#include "../bench/syscount.h"

#include <stdio.h>

#define WARM 50
#define PAIRS 500
#define BOUND_PER_PAIR 4.0

/* Waits (at most 10 s) until the process has connected at least `connects` sockets and no
 * counted call happened for 200 ms. */
static void wait_for_quiet_sockets(uint64_t connects)
{
    syscount prev, now;
    syscount_read(&prev);
    int quiet_ms = 0;
    for (int waited = 0; waited < 10000; waited += 20) {
        th_sleep_ms(20);
        syscount_read(&now);
        int same = now.total == prev.total && now.n[SC_CONNECT] == prev.n[SC_CONNECT];
        quiet_ms = same ? quiet_ms + 20 : 0;
        prev = now;
        if (now.n[SC_CONNECT] >= connects && quiet_ms >= 200)
            return;
    }
    char what[200];
    syscount_format(&now, what, sizeof what);
    cr_assert_fail("the client's sockets did not settle in 10 s: %s", what);
}

/* Socket calls and round trips of PAIRS uncontended lock+unlock pairs on one lock, after
 * WARM pairs that load the scripts and fill the pool. */
static void measure(syscount *d, uint64_t *rtts)
{
    syscount_only_port(th_port()); /* before the client connects */
    syscount base;
    syscount_read(&base); /* Criterion's own connect came before: not the client's */
    baton_client *c = th_client(NULL);
    baton_lock *l;
    cr_assert_eq(baton_lock_open(c, th_tmpname("syscalls"), &l), BATON_OK);
    for (int i = 0; i < WARM; i++) {
        cr_assert_eq(baton_lock_try_acquire(l, 1000, 10000), BATON_OK);
        cr_assert_eq(baton_lock_release(l), BATON_OK);
    }
    /* A hold with a lease pins the dispatcher's connection (it hears a restart): it is not
     * the pair's, so it is made before the count begins. Its thread connects only if it sees
     * a hold when it runs: after 50 short pairs it may see none (CI once counted its connect,
     * send, recv and poll inside the window), so a hold stays taken until it has connected
     * and finished its handshake; once up, the connection stays up. */
    cr_assert_eq(baton_lock_try_acquire(l, 1000, 10000), BATON_OK);
    wait_for_quiet_sockets(base.n[SC_CONNECT] + 2);
    cr_assert_eq(baton_lock_release(l), BATON_OK);
    baton_stats st0, st1;
    syscount s0, s1;
    int bad = 0;
    baton_client_stats(c, &st0);
    syscount_read(&s0);
    for (int i = 0; i < PAIRS; i++) { /* no assertion inside: nothing else on the sockets */
        bad += baton_lock_try_acquire(l, 1000, 10000) != BATON_OK;
        bad += baton_lock_release(l) != BATON_OK;
    }
    syscount_read(&s1);
    baton_client_stats(c, &st1);
    cr_assert_eq(bad, 0, "%d calls failed", bad);
    syscount_diff(&s0, &s1, d);
    *rtts = st1.round_trips - st0.round_trips;
    baton_lock_close(l);
    baton_client_close(c);
}

Test(syscalls, blocking_pair_makes_at_most_four, .timeout = 60)
{
    syscount d;
    uint64_t rtts;
    measure(&d, &rtts);
    char what[200];
    syscount_format(&d, what, sizeof what);
    double per_pair = (double)d.total / PAIRS, per_rt = (double)d.total / (double)rtts;
    fprintf(stderr,
            "syscalls: %.2f socket system calls per blocking lock+unlock pair, %.2f per round "
            "trip (%llu round trips for %d pairs; %s)\n",
            per_pair, per_rt, (unsigned long long)rtts, PAIRS, what);
    /* the counter works: every round trip wrote its request and read its reply */
    cr_assert_eq(rtts, 2 * PAIRS, "round trips: %llu", (unsigned long long)rtts);
    cr_assert_geq(d.n[SC_SEND] + d.n[SC_WRITE], rtts, "%s", what);
    cr_assert_geq(d.n[SC_RECV] + d.n[SC_READ], rtts, "%s", what);
    cr_assert_leq(per_pair, BOUND_PER_PAIR,
                  "a blocking lock+unlock pair made %.2f socket system calls (at most %.0f): %s",
                  per_pair, BOUND_PER_PAIR, what);
}
