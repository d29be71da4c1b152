/*
 * Against a real Sentinel deployment (a master, a replica, three sentinels, started once for
 * the program by with-sentinel.sh): what the sentinels and the nodes say about who is
 * master decodes as the Sentinel client will read it, before and across a failover. The
 * Sentinel client (discovery, ROLE check, following a failover) builds on these pieces.
 */
#include "ha_helper.h"
#include "sentinel.h"

#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static th_sentinel dep;

static void setup(void)
{
    th_sentinel_attach(&dep);
}

TestSuite(sentinel, .init = setup, .timeout = 90);

/* Who the sentinel at port says is master, asserting the reply decodes. */
static baton__addr master_per(int port)
{
    redisContext *r = th_redis_port(port);
    redisReply *rep = th_cmd(r, "SENTINEL GET-MASTER-ADDR-BY-NAME mymaster");
    baton__addr a;
    cr_assert(eq(int, baton__sentinel_master_addr(rep, &a), BATON_OK));
    freeReplyObject(rep);
    redisFree(r);
    return a;
}

static baton__role role_of(int port, baton__addr *master)
{
    redisContext *r = th_redis_port(port);
    redisReply *rep = th_cmd(r, "ROLE");
    baton__role role = baton__role_of(rep, master);
    freeReplyObject(rep);
    redisFree(r);
    return role;
}

/* The port of the data node whose ROLE says master (the cases may run in any order, the
 * failover case included). */
static int current_master(void)
{
    return role_of(dep.master, NULL) == BATON__ROLE_MASTER ? dep.master : dep.replica;
}

Test(sentinel, every_sentinel_names_the_master_and_its_peers)
{
    int master = current_master(), replica = master == dep.master ? dep.replica : dep.master;
    for (int i = 0; i < 3; i++) {
        baton__addr a = master_per(dep.sentinels[i]);
        cr_assert(eq(str, a.host, "127.0.0.1"));
        cr_assert(eq(int, a.port, master));
        redisContext *r = th_redis_port(dep.sentinels[i]);
        redisReply *rep = th_cmd(r, "SENTINEL SENTINELS mymaster");
        baton__addr peers[4];
        cr_assert(eq(int, baton__sentinel_peers(rep, peers, 4), 2));
        for (int k = 0; k < 2; k++)
            cr_assert(ne(int, peers[k].port, dep.sentinels[i]), "a peer is another sentinel");
        freeReplyObject(rep);
        rep = th_cmd(r, "SENTINEL GET-MASTER-ADDR-BY-NAME nosuchmaster");
        baton__addr none;
        cr_assert(eq(int, baton__sentinel_master_addr(rep, &none), BATON_ENOTHELD));
        freeReplyObject(rep);
        redisFree(r);
    }
    baton__addr followed = {"", 0};
    cr_assert(eq(int, role_of(master, NULL), BATON__ROLE_MASTER));
    cr_assert(eq(int, role_of(replica, &followed), BATON__ROLE_REPLICA));
    cr_assert(eq(int, followed.port, master));
    cr_assert(eq(int, role_of(dep.sentinels[0], NULL), BATON__ROLE_SENTINEL));
}

/* Forces a failover through sentinel 0 while sentinel 1's +switch-master is watched, and
 * returns the new master's port once ROLE says so. */
static int fail_over(void)
{
    redisContext *sub = th_redis_port(dep.sentinels[1]);
    freeReplyObject(th_cmd(sub, "SUBSCRIBE +switch-master"));
    baton__addr before = master_per(dep.sentinels[0]);
    redisContext *r = th_redis_port(dep.sentinels[0]);
    int64_t t0 = th_ms();
    freeReplyObject(th_cmd(r, "SENTINEL FAILOVER mymaster"));
    redisFree(r);
    void *msg = NULL;
    cr_assert(eq(int, redisGetReply(sub, &msg), REDIS_OK), "no +switch-master");
    redisReply *m = msg;
    cr_assert(eq(int, (int)m->elements, 3));
    baton__addr to;
    cr_assert(eq(int,
                 baton__sentinel_switch(m->element[2]->str, m->element[2]->len, "mymaster", &to),
                 BATON_OK),
              "%s", m->element[2]->str);
    cr_assert(ne(int, to.port, before.port));
    freeReplyObject(m);
    redisFree(sub);
    while (role_of(to.port, NULL) != BATON__ROLE_MASTER && th_ms() - t0 < 20000)
        th_sleep_ms(20);
    cr_assert(eq(int, role_of(to.port, NULL), BATON__ROLE_MASTER));
    cr_assert(le(i64, th_ms() - t0, 20000), "the failover took %lld ms", (long long)(th_ms() - t0));
    for (int i = 0; i < 3; i++) /* every sentinel agrees in the end */
        for (int tries = 0; master_per(dep.sentinels[i]).port != to.port; tries++) {
            cr_assert(lt(int, tries, 500), "sentinel %d never learnt the new master", i);
            th_sleep_ms(20);
        }
    return to.port;
}

Test(sentinel, a_failover_is_announced_and_the_new_master_says_so)
{
    int old = current_master();
    int promoted = fail_over();
    cr_assert(eq(int, promoted, old == dep.master ? dep.replica : dep.master));
    /* the old master is told to follow, as ROLE shows once it has been reconfigured */
    baton__addr followed = {"", 0};
    for (int tries = 0; role_of(old, &followed) != BATON__ROLE_REPLICA; tries++) {
        cr_assert(lt(int, tries, 500), "the old master never became a replica");
        th_sleep_ms(20);
    }
    cr_assert(eq(int, followed.port, promoted));
}
