/*
 * Private to baton: what the transport (src/net) offers every floor above it besides
 * connections (conn.h): the URL's parse, the meaning of a server's error reply, and whether
 * a call's last failure was a Cluster slot in flux. Nothing here is API.
 */
#ifndef BATON_NET_H
#define BATON_NET_H

#include "util.h"

struct redisReply;

typedef struct baton__conn baton__conn;

/* Parses a URL (see baton_options.url). On BATON_EINVAL, errbuf says why (no password). */
int baton__url_parse(const char *url, baton__endpoint *ep, char *errbuf, size_t errlen);
void baton__endpoint_free(baton__endpoint *ep);

/* Maps a reply that is an error to a code (recording the detail), BATON_OK otherwise. */
int baton__reply_error(baton_client *c, const struct redisReply *r);
/* True when the calling thread's last failure on c was a Cluster slot in flux: TRYAGAIN,
 * ASK, MOVED or CLUSTERDOWN still answered when a call's redirections ran out (a slot held
 * migrating, a failover). The call did not run; a wait may try again within its bound. */
bool baton__in_flux(const baton_client *c);

/* Where key lives: "host:port" of the node that serves it (a Cluster: its slot's master as
 * the client knows it now; otherwise the server, or "unix:<path>"), and its slot (-1 when
 * not a Cluster; slot may be NULL). */
void baton__node_of_key(baton_client *c, const char *key, char *buf, size_t len, int *slot);

#endif /* BATON_NET_H */
