/*
 * Leader election through a Sentinel failover (with-sentinel.sh: a master, a replica, 3
 * sentinels), with sync_replicas = 1: a leadership the replica confirmed survives the
 * failover (not reported lost, proclaims and resigns on the new master), and the next
 * leader's term is higher.
 */
#define _GNU_SOURCE
#include "ha_helper.h"
#include "internal.h"

#include <criterion/logging.h>
#include "new_assert.h"
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(election_sentinel, .timeout = 90);

static th_sentinel dep;

/* The master's port as sentinel s names it. */
static int named_master(int s)
{
    redisContext *r = th_redis_port(s);
    redisReply *rep = th_cmd(r, "SENTINEL GET-MASTER-ADDR-BY-NAME mymaster");
    int port =
        rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 ? atoi(rep->element[1]->str) : -1;
    freeReplyObject(rep);
    redisFree(r);
    return port;
}

static bool is_master(int port)
{
    redisContext *r = th_redis_port(port);
    redisReply *rep = th_cmd(r, "ROLE");
    bool m = rep->type == REDIS_REPLY_ARRAY && rep->elements > 0 &&
             strcmp(rep->element[0]->str, "master") == 0;
    freeReplyObject(rep);
    redisFree(r);
    return m;
}

/* Forces a failover and waits until every sentinel names the other node and it is master. */
static int fail_over(void)
{
    int before = named_master(dep.sentinels[0]);
    redisContext *r = th_redis_port(dep.sentinels[0]);
    int64_t t0 = th_ms();
    for (;;) {
        redisReply *rep = th_cmd(r, "SENTINEL FAILOVER mymaster");
        bool refused = rep->type == REDIS_REPLY_ERROR;
        freeReplyObject(rep);
        if (!refused)
            break;
        cr_assert(lt(i64, th_ms() - t0, 20000), "SENTINEL FAILOVER kept being refused");
        th_sleep_ms(100);
    }
    redisFree(r);
    int to = before == dep.master ? dep.replica : dep.master;
    for (;;) {
        bool done = is_master(to);
        for (int s = 0; s < 3 && done; s++)
            done = named_master(dep.sentinels[s]) == to;
        if (done)
            return to;
        cr_assert(lt(i64, th_ms() - t0, 30000), "the failover never completed");
        th_sleep_ms(50);
    }
}

static baton_client *synced(void)
{
    baton_options o;
    baton_options_init(&o);
    o.url = dep.url;
    o.sync_replicas = 1;
    o.sync_timeout_ms = 2000;
    o.watchdog_ms = 3000;
    o.connect_timeout_ms = 500;
    o.command_timeout_ms = 1000;
    baton_client *c = NULL;
    cr_assert(eq(int, baton_client_open(&o, &c), BATON_OK), "%s", baton_open_errmsg());
    return c;
}

Test(election_sentinel, a_confirmed_leadership_survives_a_failover_and_terms_still_rise)
{
    th_sentinel_attach(&dep);
    baton_client *c1 = synced(), *c2 = synced();
    const char *name = th_tmpname("sn-el");
    baton_election *a = NULL, *b = NULL;
    cr_assert(eq(int, baton_election_open(c1, name, &a), BATON_OK));
    cr_assert(eq(int, baton_election_open(c2, name, &b), BATON_OK));
    int64_t deadline = th_ms() + 20000, rc;
    /* the replica may still be syncing from an earlier failover: ENOTSYNCED then */
    while ((rc = baton_election_campaign(a, "a", 0, BATON_LEASE_WATCHDOG)) != BATON_OK &&
           th_ms() < deadline)
        th_sleep_ms(100);
    cr_assert(eq(int, (int)rc, BATON_OK), "%s", baton_client_errmsg(c1));
    int64_t t1 = 0;
    cr_assert(eq(int, baton_election_term(a, &t1), BATON_OK));
    int fd = -1;
    cr_assert(eq(int, baton_election_lost_fd(a, &fd), BATON_OK));
    int64_t t0 = th_ms();
    int promoted = fail_over();
    cr_log_info("failover to %d in %lld ms", promoted, (long long)(th_ms() - t0));
    struct pollfd p = {fd, POLLIN, 0};
    cr_assert(eq(int, poll(&p, 1, 1500), 0), "a replicated leadership is not reported lost");
    baton_leader ld;
    deadline = th_ms() + 10000;
    while ((rc = baton_election_proclaim(a, "a2")) != BATON_OK && th_ms() < deadline)
        th_sleep_ms(100);
    cr_assert(eq(int, (int)rc, BATON_OK), "%s", baton_client_errmsg(c1));
    cr_assert(eq(int, baton_election_leader(b, &ld), BATON_OK), "%s", baton_client_errmsg(c2));
    cr_assert(eq(i64, ld.term, t1));
    cr_assert(eq(str, ld.value, "a2"));
    cr_assert(eq(int, baton_election_resign(a), BATON_OK), "%s", baton_client_errmsg(c1));
    /* until the old master, demoted, has synced from the new one: ENOTSYNCED (not leading) */
    deadline = th_ms() + 30000;
    int64_t waited = th_ms();
    while ((rc = baton_election_campaign(b, "b", 5000, BATON_LEASE_WATCHDOG)) == BATON_ENOTSYNCED &&
           th_ms() < deadline)
        th_sleep_ms(100);
    cr_assert(eq(int, (int)rc, BATON_OK), "%s", baton_client_errmsg(c2));
    cr_log_info("the next leader confirmed by a replica %lld ms after the resign",
                (long long)(th_ms() - waited));
    int64_t t2 = 0;
    cr_assert(eq(int, baton_election_term(b, &t2), BATON_OK));
    cr_assert(gt(i64, t2, t1), "the term rises across the failover");
    cr_assert(eq(int, baton_election_resign(b), BATON_OK));
    baton_election_close(a);
    baton_election_close(b);
    baton_client_close(c1);
    baton_client_close(c2);
}
