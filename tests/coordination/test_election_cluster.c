/*
 * Leader election and barriers on the Cluster fixture (with-cluster.sh: 3 masters, 3
 * replicas, Redis 7: sharded pub/sub): every key of one election or barrier in one slot,
 * names on each master, a standby woken by a resign through SSUBSCRIBE/SPUBLISH, an observer
 * in order, a barrier across clients.
 */
#define _GNU_SOURCE
#include "ha_helper.h"
#include "internal.h"

#include <criterion/logging.h>
#include "new_assert.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(election_cluster, .timeout = 60);

static th_cluster cluster;

static baton_client *cl_client(void)
{
    if (cluster.n == 0)
        th_cluster_attach(&cluster);
    baton_options o;
    baton_options_init(&o);
    o.url = cluster.url;
    o.recheck_ms = 200;
    baton_client *c = NULL;
    cr_assert(eq(int, baton_client_open(&o, &c), BATON_OK), "%s", baton_open_errmsg());
    return c;
}

typedef struct standby {
    baton_election *e;
    int rc;
    int64_t at;
} standby;

static void *campaign_thread(void *p)
{
    standby *s = p;
    s->rc = baton_election_campaign(s->e, "b", 10000, BATON_LEASE_WATCHDOG);
    s->at = th_ms();
    return NULL;
}

Test(election_cluster, on_every_master_a_resign_wakes_the_standby_and_observers_see_it)
{
    baton_client *c1 = cl_client(), *c2 = cl_client(), *co = cl_client();
    int masters[TH_CLUSTER_MAX];
    int nm = th_cluster_masters(&cluster, masters, TH_CLUSTER_MAX);
    cr_assert(ge(int, nm, 3));
    for (int m = 0; m < nm; m++) {
        char name[128];
        th_cluster_name_on(&cluster, "el", masters[m], name, sizeof name);
        baton_election *a = NULL, *b = NULL, *o = NULL;
        cr_assert(eq(int, baton_election_open(c1, name, &a), BATON_OK));
        cr_assert(eq(int, baton_election_open(c2, name, &b), BATON_OK));
        cr_assert(eq(int, baton_election_open(co, name, &o), BATON_OK));
        cr_assert(eq(int, baton_election_campaign(a, "a", 0, BATON_LEASE_WATCHDOG), BATON_OK), "%s",
                  baton_client_errmsg(c1));
        standby s = {.e = b};
        pthread_t t;
        pthread_create(&t, NULL, campaign_thread, &s);
        th_sleep_ms(300);
        int64_t t0 = th_ms();
        cr_assert(eq(int, baton_election_resign(a), BATON_OK), "%s", baton_client_errmsg(c1));
        pthread_join(t, NULL);
        cr_assert(eq(int, s.rc, BATON_OK), "%s", baton_client_errmsg(c2));
        cr_log_info("master %d: the standby led %lld ms after the resign", masters[m],
                    (long long)(s.at - t0));
        cr_assert(lt(i64, s.at - t0, 150));
        baton_election_event ev;
        /* the first observation is the latest change: b's election */
        cr_assert(eq(int, baton_election_observe_next(o, 1000, &ev), BATON_OK));
        cr_assert(eq(int, (int)ev.change, (int)BATON_ELECTION_ELECTED));
        cr_assert(eq(str, ev.leader.value, "b"));
        cr_assert(eq(int, baton_election_proclaim(b, "b2"), BATON_OK));
        cr_assert(eq(int, baton_election_observe_next(o, 1000, &ev), BATON_OK));
        cr_assert(eq(int, (int)ev.change, (int)BATON_ELECTION_PROCLAIMED));
        cr_assert(eq(int, baton_election_resign(b), BATON_OK));
        cr_assert(eq(int, baton_election_observe_next(o, 1000, &ev), BATON_OK));
        cr_assert(eq(int, (int)ev.change, (int)BATON_ELECTION_RESIGNED));
        baton_election_close(a);
        baton_election_close(b);
        baton_election_close(o);
    }
    baton_client_close(c1);
    baton_client_close(c2);
    baton_client_close(co);
}

typedef struct party {
    baton_barrier *b;
    int rc;
    int64_t index;
} party;

static void *await_thread(void *p)
{
    party *a = p;
    a->rc = baton_barrier_await(a->b, 5000, &a->index, NULL);
    return NULL;
}

Test(election_cluster, a_barrier_across_clients_on_every_master)
{
    int masters[TH_CLUSTER_MAX];
    baton_client *cs[3] = {cl_client(), cl_client(), cl_client()};
    int nm = th_cluster_masters(&cluster, masters, TH_CLUSTER_MAX);
    for (int m = 0; m < nm; m++) {
        char name[128];
        th_cluster_name_on(&cluster, "bar", masters[m], name, sizeof name);
        party p[3];
        pthread_t t[3];
        for (int i = 0; i < 3; i++) {
            p[i] = (party){0};
            cr_assert(eq(int, baton_barrier_open(cs[i], name, 3, &p[i].b), BATON_OK));
            pthread_create(&t[i], NULL, await_thread, &p[i]);
        }
        int64_t seen = 0;
        for (int i = 0; i < 3; i++) {
            pthread_join(t[i], NULL);
            cr_assert(eq(int, p[i].rc, BATON_OK), "%s", baton_client_errmsg(cs[i]));
            seen |= 1 << p[i].index;
            baton_barrier_close(p[i].b);
        }
        cr_assert(eq(i64, seen, 7));
    }
    for (int i = 0; i < 3; i++)
        baton_client_close(cs[i]);
}
