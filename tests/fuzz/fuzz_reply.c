/* Fuzz target: whatever bytes arrive on the subscriber connection, the dispatcher's decoding
 * (hiredis's reader, then the dispatcher's handling of each reply) never crashes, never
 * wakes more waiters than hold references, and leaves the subscription table consistent.
 * dispatch.c is compiled into this file so its internals can be driven without a server.
 * The same bytes then go through a command connection's reader path (conn.c: a connection
 * without a socket, fed directly, through its reply guard): every reply is parsed or the
 * connection is broken, and either way it frees cleanly; fed whole or a byte at a time, the
 * same replies come out, and the guard never counts a reply complete that hiredis cannot
 * parse. */
#include "../../src/core/dispatch.c"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

/* The replies a detached connection yields from data fed `step` bytes at a time (each feed
 * followed by taking every complete reply), up to the first error (*broken); *digest gets
 * a digest of their types and sizes. */
static int through_conn(const unsigned char *data, size_t size, size_t step, unsigned long *digest,
                        bool *broken)
{
    baton__conn *k = baton__conn_detached();
    if (!k)
        abort();
    int n = 0;
    *digest = 0;
    *broken = false;
    for (size_t off = 0; off < size; off += step) {
        size_t len = size - off < step ? size - off : step;
        if (baton__conn_feed(k, (const char *)data + off, len) != BATON_OK) {
            *broken = true;
            break;
        }
        redisReply *r = NULL;
        int rc;
        while ((rc = baton__conn_next(k, &r)) == BATON_OK && r) {
            *digest = *digest * 31 + (unsigned long)r->type * 7 + r->len + r->elements;
            freeReplyObject(r);
            n++;
        }
        if (rc != BATON_OK) {
            if (strstr(baton__conn_errstr(k), "did not complete"))
                abort(); /* the guard and hiredis disagree on where a reply ends */
            *broken = true;
            break;
        }
    }
    baton__conn_close(k);
    return n;
}

/* The tables the lock, the latch and the semaphore hand the dispatcher with their waits. */
extern const baton__sub_type baton__lock_sub, baton__latch_sub, baton__semaphore_sub;

static baton__sub *add_sub(baton__dispatcher *d, const char *channel, const baton__sub_type *type,
                           sub_state state)
{
    baton__sub *s = calloc(1, sizeof *s);
    s->d = d;
    s->channel = baton__strdup(channel);
    s->type = type;
    s->refs = 3;
    s->state = state;
    set_link(s, d->links[0]);
    s->inflight = state == S_SUBSCRIBING;
    s->sem.permits = state == S_SUBSCRIBING ? 0 : 1;
    baton__map_put(&d->subs, s->channel, s);
    return s;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    baton__dispatcher d;
    memset(&d, 0, sizeof d);
    sub_link l0;
    memset(&l0, 0, sizeof l0);
    d.links[0] = &l0; /* a link without a connection: replies are fed to it directly */
    d.nlinks = 1;
    baton__mutex_init(&d.mu);
    baton__cond_init(&d.unsubscribed);
    baton__cond_init(&d.ready);
    baton__map_init_borrowing(&d.subs);
    baton__sub *subs[3] = {
        add_sub(&d, "redisson_lock__channel:{a}", &baton__lock_sub, S_SUBSCRIBED),
        add_sub(&d, "redisson_countdownlatch__channel__{b}", &baton__latch_sub, S_SUBSCRIBING),
        add_sub(&d, "redisson_sc:{c}", &baton__semaphore_sub, S_SUBSCRIBED),
    };
    redisReader *reader = redisReaderCreate();
    redisReaderFeed(reader, (const char *)data, size);
    baton__mutex_lock(&d.mu);
    for (int i = 0; i < 1000; i++) {
        void *reply = NULL;
        if (redisReaderGetReply(reader, &reply) != REDIS_OK || !reply)
            break;
        baton__dispatch_reply(&d, reply);
        freeReplyObject(reply);
    }
    for (int i = 0; i < 3; i++)
        if (subs[i]->permits < 0 || subs[i]->permits > subs[i]->refs)
            abort();
    baton__mutex_unlock(&d.mu);
    redisReaderFree(reader);
    for (int i = 0; i < 3; i++) {
        baton__map_remove(&d.subs, subs[i]->channel);
        free_sub(subs[i], false);
    }
    baton__map_free(&d.subs);
    baton__cond_destroy(&d.unsubscribed);
    baton__cond_destroy(&d.ready);
    baton__mutex_destroy(&d.mu);

    baton__conn *k = baton__conn_detached();
    if (!k)
        return 0;
    if (baton__conn_feed(k, (const char *)data, size) == BATON_OK)
        for (int i = 0; i < 1000; i++) {
            redisReply *r = NULL;
            if (baton__conn_next(k, &r) != BATON_OK) {
                if (baton__conn_errstr(k)[0] == '\0')
                    abort(); /* broken without a reason */
                break;
            }
            if (!r)
                break;
            freeReplyObject(r);
        }
    baton__conn_close(k);

    /* Fed whole, the replies before a refused byte are lost with the connection; a byte at
     * a time they were taken first. Otherwise the chunks must not change what is parsed. */
    unsigned long whole, bytewise;
    bool whole_broken, bytewise_broken;
    int n_whole = through_conn(data, size, size ? size : 1, &whole, &whole_broken);
    int n_bytewise = through_conn(data, size, 1, &bytewise, &bytewise_broken);
    if (whole_broken != bytewise_broken ||
        (!whole_broken && (n_whole != n_bytewise || whole != bytewise)) ||
        (whole_broken && n_whole > n_bytewise))
        abort();
    return 0;
}
