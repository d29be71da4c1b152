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
