/*
 * baton_client_command: one command of the caller's on the client's own connection to the
 * server that holds a name (run.c routes it), and its reply copied into a baton_reply, so
 * that no hiredis type reaches the caller; and baton_fenced_set, the README's fenced write
 * as one script run (lua/fenced_set.lua).
 */
#include "internal.h"

#include "baton_scripts.h"

#include <hiredis/hiredis.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct baton_reply {
    baton_reply_type type;
    int64_t integer;
    char *str; /* STRING, STATUS: NUL-terminated copy */
    size_t len;
    size_t n;              /* ARRAY: elements */
    baton_reply **element; /* ARRAY */
};

/* A copy of r (depth-first); NULL when out of memory. */
static baton_reply *copy(const redisReply *r)
{
    baton_reply *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    switch (r->type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
        b->type = r->type == REDIS_REPLY_STRING ? BATON_REPLY_STRING : BATON_REPLY_STATUS;
        b->str = malloc(r->len + 1);
        if (!b->str)
            break;
        memcpy(b->str, r->str, r->len);
        b->str[r->len] = '\0';
        b->len = r->len;
        return b;
    case REDIS_REPLY_INTEGER:
        b->type = BATON_REPLY_INTEGER;
        b->integer = r->integer;
        return b;
    case REDIS_REPLY_ARRAY:
        b->type = BATON_REPLY_ARRAY;
        b->element = r->elements ? calloc(r->elements, sizeof *b->element) : NULL;
        if (r->elements && !b->element)
            break;
        for (b->n = 0; b->n < r->elements; b->n++)
            if (!(b->element[b->n] = copy(r->element[b->n])))
                goto fail;
        return b;
    default: /* NIL (an error reply never gets here: run.c made it a code) */
        b->type = BATON_REPLY_NIL;
        return b;
    }
fail:
    baton_reply_free(b);
    return NULL;
}

void baton_reply_free(baton_reply *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        baton_reply_free(r->element[i]);
    free(r->element);
    free(r->str);
    free(r);
}

baton_reply_type baton_reply_kind(const baton_reply *r)
{
    return r ? r->type : BATON_REPLY_NIL;
}

const char *baton_reply_str(const baton_reply *r, size_t *len)
{
    bool s = r && r->str;
    if (len)
        *len = s ? r->len : 0;
    return s ? r->str : "";
}

int64_t baton_reply_integer(const baton_reply *r)
{
    return r && r->type == BATON_REPLY_INTEGER ? r->integer : 0;
}

size_t baton_reply_len(const baton_reply *r)
{
    return r ? r->n : 0;
}

const baton_reply *baton_reply_element(const baton_reply *r, size_t i)
{
    return r && i < r->n ? r->element[i] : NULL;
}

int baton_client_command(baton_client *c, const char *name, int argc, const char *const *argv,
                         baton_reply **out)
{
    if (out)
        *out = NULL;
    if (!c)
        return baton__misuse(BATON_EINVAL, "command: client is NULL");
    int rc = baton__client_enter(c);
    if (rc != BATON_OK)
        return rc;
    if (!out || !argv || argc < 1)
        return baton__fail(c, BATON_EINVAL, "command: %s",
                           !out    ? "out is NULL"
                           : !argv ? "argv is NULL"
                                   : "argc < 1");
    for (int i = 0; i < argc; i++)
        if (!argv[i])
            return baton__fail(c, BATON_EINVAL, "command: argv[%d] is NULL", i);
    redisReply *r = NULL;
    rc = baton__command_once(c, name, argc, (const char **)argv, &r);
    if (rc != BATON_OK) {
        char why[400];
        snprintf(why, sizeof why, "%s", baton_client_errmsg(c));
        return baton__fail(c, rc, "command %s: %s", argv[0], why);
    }
    *out = copy(r);
    freeReplyObject(r);
    return *out ? BATON_OK : baton__fail(c, BATON_ENOMEM, "out of memory");
}

int baton_fenced_set(baton_client *c, const char *key, const char *value, int64_t token,
                     bool *written)
{
    if (written)
        *written = false;
    if (!c)
        return baton__misuse(BATON_EINVAL, "fenced set: client is NULL");
    int rc = baton__client_enter(c);
    if (rc != BATON_OK)
        return rc;
    if (baton__check_name(key) != BATON_OK || !value || token < 1)
        return baton__fail(c, BATON_EINVAL, "fenced set %s: %s", key ? key : "(NULL)",
                           !key || baton__check_name(key) != BATON_OK
                               ? "key must be 1 to 1024 bytes"
                           : !value ? "value is NULL"
                                    : "token must be >= 1");
    char *fence = baton__derive_key("baton_fence:", key, NULL);
    if (!fence)
        return baton__fail(c, BATON_ENOMEM, "out of memory");
    char tok[32];
    snprintf(tok, sizeof tok, "%lld", (long long)token);
    const char *keys[2] = {key, fence};
    const char *args[2] = {tok, value};
    redisReply *r = NULL;
    rc = baton__script_call(c, &baton__script_fenced_set, 2, keys, 2, args, &r, NULL);
    free(fence);
    if (rc != BATON_OK)
        return rc;
    bool ok = r->type == REDIS_REPLY_INTEGER && r->integer == 0;
    long long seen = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    if (seen < 0)
        return baton__fail(c, BATON_EPROTO, "fenced set %s: unexpected reply", key);
    if (written)
        *written = ok;
    if (!ok)
        baton__fail(c, BATON_OK,
                    "fenced set %s: refused: token %lld is older than %lld, which wrote", key,
                    (long long)token, seen);
    return BATON_OK;
}
