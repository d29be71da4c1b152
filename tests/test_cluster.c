/*
 * Against a real Redis Cluster (3 masters, 3 replicas, started once for the program by
 * with-cluster.sh): the
 * client's slot arithmetic and topology decoding agree with what the cluster itself says.
 * The cluster client (routing every primitive by slot) builds on exactly these pieces.
 */
#include "ha_helper.h"
#include "slots.h"

#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static th_cluster cluster;

static void setup(void)
{
    th_cluster_attach(&cluster);
}

TestSuite(cluster, .init = setup, .timeout = 60);

Test(cluster, the_fixture_serves_every_slot)
{
    redisContext *r = th_redis_port(cluster.ports[0]);
    redisReply *info = th_cmd(r, "CLUSTER INFO");
    cr_assert(not(eq(ptr, strstr(info->str, "cluster_slots_ok:16384"), NULL)));
    cr_assert(not(eq(ptr, strstr(info->str, "cluster_known_nodes:6"), NULL)));
    freeReplyObject(info);
    redisFree(r);
}

Test(cluster, key_slots_agree_with_the_server)
{
    redisContext *r = th_redis_port(cluster.ports[1]);
    const char *shapes[] = {"k%d", "{tag%d}.x", "a{b%d", "{}x%d", "x{%d}y{z}", "lock:%d:é"};
    for (int i = 0; i < 600; i++) {
        char key[64];
        snprintf(key, sizeof key, shapes[i % 6], i);
        long long server = th_cmd_int(r, "CLUSTER KEYSLOT %s", key);
        cr_assert(eq(int, baton__key_slot(key, strlen(key)), (int)server), "%s", key);
    }
    redisFree(r);
}

Test(cluster, slots_and_shards_decode_to_the_same_map)
{
    redisContext *r = th_redis_port(cluster.ports[2]);
    redisReply *slots = th_cmd(r, "CLUSTER SLOTS");
    redisReply *shards = th_cmd(r, "CLUSTER SHARDS");
    baton__slot_map a, b;
    char err[128] = "";
    cr_assert(
        eq(int, baton__slot_map_from_slots(slots, "127.0.0.1", &a, err, sizeof err), BATON_OK),
        "%s", err);
    cr_assert(eq(int, baton__slot_map_from_shards(shards, "127.0.0.1", false, &b, err, sizeof err),
                 BATON_OK),
              "%s", err);
    /* CLUSTER SHARDS lists every node; CLUSTER SLOTS (cached by Redis 7.0) may list a
     * replica only once its slot table changes after it joined: the masters are what
     * routing needs from both */
    cr_assert(ge(sz, a.nnodes, 3));
    cr_assert(eq(sz, b.nnodes, 6));
    int masters = 0;
    for (size_t i = 0; i < a.nnodes; i++)
        masters += a.nodes[i].master;
    cr_assert(eq(int, masters, 3));
    for (int s = 0; s < BATON__SLOTS; s++) {
        cr_assert(not(eq(u16, a.owner[s], BATON__NO_NODE)), "slot %d uncovered", s);
        const baton__cluster_node *x = &a.nodes[a.owner[s]], *y = &b.nodes[b.owner[s]];
        cr_assert(eq(int, x->port, y->port), "slot %d", s);
        cr_assert(eq(str, x->host, y->host));
        if (s % 1000 == 0) /* what the cluster itself says, now and then */
            cr_assert(eq(int, th_cluster_master_of(&cluster, s), x->port), "slot %d", s);
    }
    baton__slot_map_free(&a);
    baton__slot_map_free(&b);
    freeReplyObject(slots);
    freeReplyObject(shards);
    redisFree(r);
}

Test(cluster, a_real_moved_reply_names_the_owner)
{
    redisContext *r0 = th_redis_port(cluster.ports[0]);
    redisReply *slots = th_cmd(r0, "CLUSTER SLOTS");
    baton__slot_map m;
    char err[128] = "";
    cr_assert(
        eq(int, baton__slot_map_from_slots(slots, "127.0.0.1", &m, err, sizeof err), BATON_OK));
    int moved = 0;
    for (int i = 0; i < 30; i++) {
        char key[32];
        snprintf(key, sizeof key, "mv-%d", i);
        int slot = baton__key_slot(key, strlen(key));
        redisReply *rep = redisCommand(r0, "GET %s", key);
        cr_assert(rep != NULL);
        if (rep->type == REDIS_REPLY_ERROR) {
            bool ask = true;
            int s = -1, port = -1;
            char host[64];
            cr_assert(eq(int, baton__parse_redirect(rep->str, &ask, &s, host, sizeof host, &port),
                         BATON_OK),
                      "%s", rep->str);
            cr_assert(not(ask));
            cr_assert(eq(int, s, slot));
            cr_assert(eq(int, port, m.nodes[m.owner[slot]].port));
            moved++;
        } else {
            cr_assert(eq(int, m.nodes[m.owner[slot]].port, cluster.ports[0]));
        }
        freeReplyObject(rep);
    }
    cr_assert(gt(int, moved, 10), "two thirds of the keys live elsewhere");
    baton__slot_map_free(&m);
    freeReplyObject(slots);
    redisFree(r0);
}

/* The lock's side hash of holders' origins (baton_lock_meta:{name}) shares the lock's slot,
 * so a Cluster node runs the scripts that touch it: the acquire and release name it as a
 * key, the watchdog's renewal derives it from the lock's name (undeclared, same slot), and
 * the inspection reads it. */
Test(cluster, scripts_reach_the_side_hash_in_the_locks_slot)
{
    const char *names[] = {"origin-plain", "{origin-tag}:job"};
    for (size_t i = 0; i < 2; i++) {
        const char *name = names[i];
        char meta[64], token[64];
        bool tagged = strchr(name, '{') != NULL;
        snprintf(meta, sizeof meta, tagged ? "baton_lock_meta:%s" : "baton_lock_meta:{%s}", name);
        snprintf(token, sizeof token,
                 tagged ? "redisson_lock_token:%s" : "redisson_lock_token:{%s}", name);
        int slot = baton__key_slot(name, strlen(name));
        cr_assert(eq(int, baton__key_slot(meta, strlen(meta)), slot), "%s", meta);
        int port = th_cluster_master_of(&cluster, slot);
        cr_assert(gt(int, port, 0));
        redisContext *r = th_redis_port(port);
        const baton__script *acq = baton__script_find("lock_acquire");
        const baton__script *renew = baton__script_find("lock_renew");
        redisReply *rep = th_cmd(r, "EVAL %b 3 %s %s %s 1000 owner:1 host-a:42", acq->body,
                                 acq->len, name, token, meta);
        freeReplyObject(rep);
        cr_assert(eq(i64, th_cmd_int(r, "PTTL %s", meta) <= 1000, 1));
        rep = th_cmd(r, "EVAL %b 1 %s 60000 owner:1", renew->body, renew->len, name);
        cr_assert(eq(int, rep->type, REDIS_REPLY_ARRAY));
        cr_assert(eq(i64, rep->element[0]->integer, 1));
        freeReplyObject(rep);
        cr_assert(gt(i64, th_cmd_int(r, "PTTL %s", meta), 50000), "renewed with the lock");
        rep = th_cmd(r, "HGET %s owner:1", meta);
        cr_assert(eq(str, rep->str, "host-a:42"));
        freeReplyObject(rep);
        freeReplyObject(th_cmd(r, "DEL %s %s %s", name, meta, token));
        redisFree(r);
    }
}
