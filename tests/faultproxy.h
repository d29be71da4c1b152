/*
 * A fault proxy for tests: a TCP proxy on loopback, run by a thread of the test process,
 * that sits between baton and a redis-server and breaks the network on command. Each
 * direction can be delayed; the proxy can hold every byte (a partition: nothing is lost,
 * nothing arrives, new connections are accepted but not answered), cut every connection
 * with a reset, or let N more bytes through in one direction and then reset (the ambiguous
 * outcome: a request that may have run, a reply cut in the middle), or throw away what one
 * direction carries (a blackhole). heal() undoes it all.
 */
#ifndef BATON_TEST_FAULTPROXY_H
#define BATON_TEST_FAULTPROXY_H

#include <stdbool.h>

typedef struct th_proxy th_proxy;

typedef enum th_dir {
    TH_UP = 0,  /* client -> server: requests */
    TH_DOWN = 1 /* server -> client: replies and pushed messages */
} th_dir;

/* Starts a proxy to 127.0.0.1:upstream_port on a free loopback port (asserts success). */
th_proxy *th_proxy_start(int upstream_port);
/* The port clients connect to. */
int th_proxy_port(const th_proxy *p);
/* "redis://127.0.0.1:<proxy port>" (the proxy owns the string). */
const char *th_proxy_url(const th_proxy *p);
/* Holds every byte from now on, both ways, on every connection, and accepts new ones
 * without connecting them upstream (on: a partition) or lets them flow again (off). */
void th_proxy_hold(th_proxy *p, bool on);
/* Holds (on) or releases one connection: the nth the proxy accepted, counting from 1. */
void th_proxy_hold_conn(th_proxy *p, long nth, bool on);
/* Resets the nth accepted connection, both sides, now (nothing if it is gone). */
void th_proxy_cut_conn(th_proxy *p, long nth);
/* Every byte in dir waits ms before it is passed on (0: none). */
void th_proxy_delay(th_proxy *p, th_dir dir, int ms);
/* The same for the nth accepted connection alone (the larger of the two delays applies). */
void th_proxy_delay_conn(th_proxy *p, long nth, th_dir dir, int ms);
/* A blackhole: every byte in dir, on every connection (old and new, which are still
 * accepted), is read and thrown away (on), or passed on again (off). Unlike a hold, what
 * was dropped never arrives. */
void th_proxy_blackhole(th_proxy *p, th_dir dir, bool on);
/* The same for the nth accepted connection alone. */
void th_proxy_blackhole_conn(th_proxy *p, long nth, th_dir dir, bool on);
/* Resets (RST) every open connection, both sides, now. */
void th_proxy_cut(th_proxy *p);
/* Lets n more bytes through in dir (on any connection), then resets that connection.
 * n = 0: the next byte in dir resets it before anything passes. -1: off. */
void th_proxy_cut_after(th_proxy *p, th_dir dir, long n);
/* The number (nth, as above) of the connection whose upstream side has this local port,
 * the port the server sees the client on (CLIENT LIST addr=127.0.0.1:<port>); 0: none. */
long th_proxy_conn_of(th_proxy *p, int upstream_local_port);
/* Connections accepted since the start. */
long th_proxy_accepted(th_proxy *p);
/* Open connections now. */
int th_proxy_open(th_proxy *p);
/* Back to a plain proxy: no hold, no delay, no blackhole, no pending cut. */
void th_proxy_heal(th_proxy *p);
/* Closes every connection and stops the thread. */
void th_proxy_stop(th_proxy *p);

#endif
