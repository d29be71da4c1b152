/*
 * The high-availability deployments of a test program, each started once for the whole
 * program by a wrapper that passes its ports in the environment and stops it by pid
 * afterwards: a Redis Cluster (tests/with-cluster.sh: 3 masters, 3 replicas,
 * scripts/cluster-lib.sh) or a Sentinel deployment (tests/with-sentinel.sh: a master, a
 * replica, 3 sentinels, scripts/sentinel-lib.sh).
 */
#ifndef BATON_TEST_HA_HELPER_H
#define BATON_TEST_HA_HELPER_H

#include "helper.h"

#define TH_CLUSTER_MAX 12

typedef struct th_cluster {
    int n;                              /* nodes */
    int ports[TH_CLUSTER_MAX];          /* in the order the wrapper started them */
    char url[TH_CLUSTER_MAX * 24 + 32]; /* "redis+cluster://127.0.0.1:p1,127.0.0.1:p2,..." */
} th_cluster;

/* Reads the program's cluster from the environment (asserts it is there). */
void th_cluster_attach(th_cluster *cl);
/* The port of the node that is master of slot now (the first node that answers tells), or
 * -1 when none serves it. */
int th_cluster_master_of(const th_cluster *cl, int slot);

/* ------------------------------- the cluster's own view -------------------------------- */

#define TH_CLUSTER_SLOTS 16384

/* The slot baton's keys of an object NAME live in: its hash tag when it has one, else
 * the slot of NAME itself (baton writes the others as "...{NAME}..."). */
int th_cluster_slot(const char *name);
/* owner[slot] = the port of each slot's master as the first node that answers says (-1:
 * uncovered); returns false when no node answered. */
bool th_cluster_map(const th_cluster *cl, int owner[TH_CLUSTER_SLOTS]);
/* The ports of the masters that serve slots now, ascending; returns how many. */
int th_cluster_masters(const th_cluster *cl, int *ports, int max);
/* Writes to out a name unique to this run, made of base and a suffix, whose slot the
 * master on port serves now. */
void th_cluster_name_on(const th_cluster *cl, const char *base, int port, char *out, size_t len);
/* The node's 40-hex id (CLUSTER MYID). */
void th_cluster_node_id(int port, char id[41]);
/* A replica of the master on port that the master's own view counts healthy, or -1. */
int th_cluster_replica_of(const th_cluster *cl, int master_port);
/* The pid of the node on port (INFO server). */
pid_t th_node_pid(int port);
/* Waits until every node that answers says cluster_state:ok and names the same master for
 * slot (-1: any slot is enough); returns whether it happened within timeout_ms. */
bool th_cluster_wait_ok(const th_cluster *cl, int slot, int64_t timeout_ms);
/* Moves slot to the master on to_port by hand, as redis-cli --cluster reshard does:
 * CLUSTER SETSLOT IMPORTING on the target and MIGRATING on the source, MIGRATE of the
 * slot's keys batch keys at a time with pause_ms between batches (clients meanwhile get
 * ASK and TRYAGAIN), then SETSLOT NODE on the target, the source and every other master.
 * Returns the keys moved. */
int th_cluster_move_slot(const th_cluster *cl, int slot, int to_port, int batch, int pause_ms);
/* Makes the replica take over its master (CLUSTER FAILOVER on it) and waits until every
 * node that answers names it master of its slots; asserts within timeout_ms. */
void th_cluster_failover(const th_cluster *cl, int replica_port, int64_t timeout_ms);

/* A raw connection to whichever master serves one slot, following MOVED, ASK (ASKING on
 * the target), TRYAGAIN and CLUSTERDOWN as a cluster client would, for a test's own
 * commands on keys that move under it (a counter in the lock's slot). */
typedef struct th_slot_conn {
    const th_cluster *cl;
    int slot;
    int port; /* where the slot's master was last seen; -1: ask the cluster */
    redisContext *r;
} th_slot_conn;

void th_slot_conn_init(th_slot_conn *c, const th_cluster *cl, int slot);
/* Sends the command where the slot is served, following redirections for up to 10 s.
 * Returns the reply (caller frees), or NULL when the connection was lost after the command
 * was sent (it may have run) or nothing answered in 10 s. */
redisReply *th_slot_cmd(th_slot_conn *c, const char *fmt, ...);
void th_slot_conn_close(th_slot_conn *c);

/* The program's Sentinel deployment; the master's name is "mymaster". The ports are those
 * of the start: after a failover the replica's port serves as master. */
typedef struct th_sentinel {
    int master;       /* the master's port at the start */
    int replica;      /* the replica's port at the start */
    int sentinels[3]; /* the sentinels' ports */
    char url[128];    /* "redis+sentinel://127.0.0.1:s1,127.0.0.1:s2,127.0.0.1:s3/mymaster" */
} th_sentinel;

/* Reads the program's Sentinel deployment from the environment (asserts it is there). */
void th_sentinel_attach(th_sentinel *s);

#endif
