/*
 * baton_scan_keys (include/baton/inspect.h): SCAN on the one server, or on every master of
 * a Cluster, each on a pooled connection of its node. In the core because it walks the
 * topology's masters and their connections, which no primitive sees; the inspection of one
 * name (src/inspect) goes through the script runner like every primitive.
 */
#include "conn.h"
#include "topology.h"

#include <hiredis/hiredis.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool is_array(const redisReply *r)
{
    return r && r->type == REDIS_REPLY_ARRAY;
}

static bool is_str(const redisReply *r)
{
    return r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) && r->str;
}

/* Most masters a scan visits (a Cluster has at most this many in practice). */
#define SCAN_MAX_MASTERS 1024

/* Appends the string keys of a SCAN reply's key array to s. */
static int scan_take_keys(baton_key_scan *s, const redisReply *keys, size_t *cap)
{
    for (size_t i = 0; i < keys->elements; i++) {
        const redisReply *k = keys->element[i];
        if (!is_str(k))
            return BATON_EPROTO;
        if (!baton__grow(&s->keys, cap, s->n_keys, sizeof *s->keys, 64))
            return BATON_ENOMEM;
        if (!(s->keys[s->n_keys] = baton__strndup(k->str, k->len)))
            return BATON_ENOMEM;
        s->n_keys++;
    }
    return BATON_OK;
}

/* SCAN on one connection from cursor 0 until it ends or s->examined reaches max. */
static int scan_one(baton_client *c, baton__conn *k, const char *match, uint64_t max,
                    baton_key_scan *s, size_t *cap)
{
    char cursor[32] = "0", count[32];
    do {
        if (s->examined >= max) {
            s->cut = true;
            return BATON_OK;
        }
        uint64_t n = max - s->examined < 1000 ? max - s->examined : 1000;
        snprintf(count, sizeof count, "%llu", (unsigned long long)n);
        const char *argv[] = {"SCAN", cursor, "MATCH", match, "COUNT", count};
        baton__count_round_trip(c);
        if (baton__conn_append(k, 6, argv, NULL) != BATON_OK)
            return baton__fail(c, BATON_ENOMEM, "SCAN: out of memory");
        redisReply *r = NULL;
        int rc = baton__conn_flush(c, k, "SCAN");
        if (rc == BATON_OK)
            rc = baton__conn_read(c, k, "SCAN", &r);
        if (rc != BATON_OK)
            return rc;
        rc = baton__reply_error(c, r);
        if (rc == BATON_OK && (!is_array(r) || r->elements != 2 || !is_str(r->element[0]) ||
                               r->element[0]->len >= sizeof cursor || !is_array(r->element[1])))
            rc = baton__fail(c, BATON_EPROTO, "SCAN: the reply is not a cursor and keys");
        if (rc == BATON_OK) {
            memcpy(cursor, r->element[0]->str, r->element[0]->len);
            cursor[r->element[0]->len] = '\0';
            s->examined += n;
            rc = scan_take_keys(s, r->element[1], cap);
            if (rc == BATON_ENOMEM)
                rc = baton__fail(c, rc, "out of memory");
            else if (rc == BATON_EPROTO)
                rc = baton__fail(c, rc, "SCAN: a key is not a string");
        }
        freeReplyObject(r);
        if (rc != BATON_OK)
            return rc;
    } while (strcmp(cursor, "0") != 0);
    return BATON_OK;
}

int baton_scan_keys(baton_client *c, const char *match, uint64_t max_examined, baton_key_scan **out)
{
    if (out)
        *out = NULL;
    if (!c || !match || !*match || !out || max_examined == 0)
        return BATON_EINVAL;
    int rc = baton__client_enter(c);
    if (rc != BATON_OK)
        return rc;
    baton_key_scan *s = calloc(1, sizeof *s);
    baton__pool **masters = calloc(SCAN_MAX_MASTERS, sizeof *masters);
    if (!s || !masters) {
        free(s);
        free(masters);
        return baton__fail(c, BATON_ENOMEM, "out of memory");
    }
    s->size = sizeof *s;
    size_t cap = 0;
    size_t n =
        baton__topology_cluster(c) ? baton__topology_masters(c, masters, SCAN_MAX_MASTERS) : 0;
    if (baton__topology_cluster(c) && n == 0) {
        baton__topology_kick(c);
        rc = baton__fail(c, BATON_ECONN, "no master of the cluster is known now");
    }
    /* one server (or the master Sentinel names): its pool; a Cluster: each master's */
    for (size_t i = 0; rc == BATON_OK && i < (n ? n : 1) && !s->cut; i++) {
        baton__conn *k = NULL;
        rc = n ? baton__conn_get_node(c, masters[i], BATON__NO_DEADLINE, &k)
               : baton__conn_get(c, &k);
        if (rc != BATON_OK)
            break;
        rc = scan_one(c, k, match, max_examined, s, &cap);
        baton__conn_put(c, k, rc == BATON_ECONN);
        s->masters++;
    }
    free(masters);
    if (rc != BATON_OK) {
        baton_key_scan_free(s);
        return rc;
    }
    *out = s;
    return BATON_OK;
}

void baton_key_scan_free(baton_key_scan *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_keys; i++)
        free(s->keys[i]);
    free(s->keys);
    free(s);
}
