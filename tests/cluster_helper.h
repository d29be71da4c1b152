/*
 * The Redis Cluster of a test program: started once for the whole program by
 * tests/with-cluster.sh (3 masters, 3 replicas on loopback, scripts/cluster-lib.sh), which
 * passes its ports in BATON_TEST_CLUSTER_PORTS and stops it by pid afterwards.
 */
#ifndef BATON_TEST_CLUSTER_HELPER_H
#define BATON_TEST_CLUSTER_HELPER_H

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

#endif
