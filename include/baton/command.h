/*
 * Commands on the data a lock guards, through the client's own connections: the stock a
 * multi-lock protects, the store a fencing token protects. No second connection, no
 * hiredis in the caller.
 *
 * Threads: as the client (client.h): any thread, concurrently. A baton_reply belongs to
 * the caller until baton_reply_free(); its elements are borrowed from it.
 */
#ifndef BATON_COMMAND_H
#define BATON_COMMAND_H

#include <baton/client.h>
#include <baton/lock.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A server's reply: a tree of values (a copy; no connection is kept). */
typedef struct baton_reply baton_reply;

/* What a reply (or an element) is. */
typedef enum baton_reply_type {
    BATON_REPLY_NIL = 0,     /* no value (a missing key) */
    BATON_REPLY_STRING = 1,  /* baton_reply_str */
    BATON_REPLY_STATUS = 2,  /* a status line ("OK"): baton_reply_str */
    BATON_REPLY_INTEGER = 3, /* baton_reply_integer */
    BATON_REPLY_ARRAY = 4    /* baton_reply_len elements, baton_reply_element */
} baton_reply_type;

/*
 * Runs one command, argv[0..argc) (NUL-terminated strings, argv[0] the command's name), on
 * the client's connection to the server that holds `name` (the key the command acts on;
 * on a Redis Cluster the master of its slot, redirections followed; NULL: any connection,
 * for a command without a key). Sent once: a reply lost to a broken connection is
 * BATON_ECONN and the command may or may not have run (it is not sent again). Blocks for at
 * most about the client's command_timeout_ms (connect_timeout_ms more for a new
 * connection).
 *
 * Returns BATON_OK and *out (free it with baton_reply_free); BATON_EINVAL (c, argv or out
 * NULL, argc < 1, a NULL argument: named in baton_client_errmsg); BATON_ECLOSED; BATON_ECONN;
 * BATON_EPROTO (an error reply: "command GET: server replied: WRONGTYPE ..."); BATON_EPERM
 * (the server's ACL refused it); BATON_EAUTH; BATON_ENOMEM. On failure *out is NULL.
 */
BATON_API int baton_client_command(baton_client *c, const char *name, int argc,
                                   const char *const *argv, baton_reply **out);

/* Frees a reply and its elements. NULL is a no-op. */
BATON_API void baton_reply_free(baton_reply *r);
/* The reply's type; NULL is BATON_REPLY_NIL. */
BATON_API baton_reply_type baton_reply_kind(const baton_reply *r);
/* A string's or status's bytes (borrowed, NUL-terminated; *len its length if len is not
 * NULL), or "" for other types and NULL. */
BATON_API const char *baton_reply_str(const baton_reply *r, size_t *len);
/* An integer's value; 0 for other types and NULL. */
BATON_API int64_t baton_reply_integer(const baton_reply *r);
/* An array's element count; 0 for other types and NULL. */
BATON_API size_t baton_reply_len(const baton_reply *r);
/* An array's element i (borrowed: freed with r), or NULL out of range. */
BATON_API const baton_reply *baton_reply_element(const baton_reply *r, size_t i);

/*
 * A fenced write, README's fencing section in one call: sets key to value only if token is
 * at least the highest token that ever wrote key, which it then remembers (the fence:
 * baton_fence:{key}, in key's slot). A holder that paused past its lease and wakes with an
 * older token finds its write refused. token is the writer's fencing token
 * (baton_lock_fencing_token of its hold); *written (may be NULL) says whether the write
 * happened. Blocks for one round trip (as baton_client_command).
 *
 * Returns BATON_OK (written, or *written false: a newer token wrote first; the detail
 * names both tokens); BATON_EINVAL (c, key or value NULL, token < 1); BATON_ECLOSED;
 * BATON_ECONN; BATON_EPROTO (key or its fence holds another type); BATON_EPERM.
 */
BATON_API int baton_fenced_set(baton_client *c, const char *key, const char *value, int64_t token,
                               bool *written);

#ifdef __cplusplus
}
#endif

#endif /* BATON_COMMAND_H */
