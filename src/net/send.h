/*
 * Private to baton: where a command goes, and its round trip there (send.c), for the command
 * and script runners of the core (src/core/run.c) and the watchdog's WAIT. The floors above
 * say what to send and what its reply means; where it goes (the slot's master, the node of an
 * ASK, the shared or a pooled connection), the redirections it follows and the WAIT that
 * confirms it are decided here alone.
 */
#ifndef BATON_NET_SEND_H
#define BATON_NET_SEND_H

#include "conn.h"
#include "redirect.h"

struct redisReply;

/* One command, or one script by SHA1 with its body to fall back on, and what became of it.
 * Zero it, fill the first part, and pass it to baton__net_send; a script's second attempt
 * (after a connection that broke before the script was written) passes the same one again:
 * its route (the redirections followed, the TRYAGAIN pauses taken) goes on from where the
 * first left it. */
typedef struct baton__send {
    int slot;          /* the slot of the key the command names first; -1: none */
    int argc;          /* the command: argv[0..argc) (argv is the caller's, and for a */
    const char **argv; /* script its [0] and [1] are rewritten: EVALSHA <sha1> or EVAL <body>) */
    const char *sha1;  /* a script: EVALSHA sha1, and EVAL body (body_len bytes) on the same */
    const char *body;  /* connection when the server answers NOSCRIPT; NULL: a plain command */
    size_t body_len;
    bool sync; /* WAIT (or WAITAOF) after it in the same round trip (sync_replicas, sync_aof) */
    /* out */
    bool sent;           /* a command that could run was written whole (its reply may then
                            be lost after it ran); false after a redirection: it did not run */
    bool reused;         /* the last connection came from the pool rather than a new connect */
    bool connect_failed; /* no connection could be had */
    int synced;          /* with sync and a reply: BATON_OK, or BATON_ENOTSYNCED (recorded) */
    bool routed;         /* route below set (by the first call) */
    baton__route route;
} baton__send;

/* Sends s where the client's topology says, follows redirections (MOVED, ASK, TRYAGAIN,
 * CLUSTERDOWN: the command did not run there), and gives back the reply as the server sent it
 * (an error reply too: what it means is the caller's) with BATON_OK, or the transport's code
 * (recorded). */
int baton__net_send(baton_client *c, baton__send *s, struct redisReply **reply);

/* Appends WAIT sync_replicas sync_timeout_ms when sync_replicas is set, or WAITAOF 1
 * sync_replicas sync_timeout_ms when sync_aof is (pipelines that must be acknowledged, the
 * watchdog's); returns whether it did. */
bool baton__append_wait(baton_client *c, baton__conn *k);
/* Reads a WAIT's reply: BATON_OK when enough replicas acknowledged, BATON_ENOTSYNCED when
 * not (detail recorded), BATON_ECONN when the connection broke. */
int baton__read_wait(baton_client *c, baton__conn *k);

#endif /* BATON_NET_SEND_H */
