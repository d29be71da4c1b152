/*
 * baton error codes. Every fallible baton function returns int: BATON_OK (0) on success or
 * one of the negative codes below. The list is one X-macro, so the enum, baton_strerror()
 * and baton_err_name() cannot drift apart.
 *
 * A call that fails in a script (a key of another type, a count that is not an integer)
 * has written nothing. BATON_EPERM: the server's ACL refused a command, key or channel
 * (NOPERM); baton_client_errmsg() names it (inside a script: the script, the line and the
 * keys it uses). Under an ACL that lacks a command a script uses (docs/security.md gives
 * the whole rule), a script may fail after a write it made before that command.
 * One refusal is not a failure: a PUBLISH refused after the writes of a release, force
 * release, latch set / count-down / delete or semaphore set / add. The call returns its
 * outcome (BATON_OK) and baton_client_errmsg() holds the warning "<released>; waiters not
 * told: PUBLISH to <channel> refused by the server's ACL (...); they see it at their next
 * recheck". After any other success the message is "".
 * BATON_ECLOSED: a call on a handle already closed or whose client was closed, or on a
 * closed client; the detail is the calling thread's (baton_client_errmsg of any client,
 * the closed one's pointer included).
 */
#ifndef BATON_ERROR_H
#define BATON_ERROR_H

#include <baton/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/* XX(name, value, message) */
#define BATON_ERRNO_MAP(XX)                                                                        \
    XX(ETIMEDOUT, -1, "timed out")                                                                 \
    XX(ENOTHELD, -2, "not held by the calling thread")                                             \
    XX(EINVAL, -3, "invalid argument")                                                             \
    XX(ECONN, -4, "connection to the server failed")                                               \
    XX(EPROTO, -5, "protocol or script error reported by the server")                              \
    XX(EAUTH, -6, "authentication failed")                                                         \
    XX(ENOMEM, -7, "out of memory")                                                                \
    XX(ECANCELED, -8, "operation canceled")                                                        \
    XX(ENOTSUP, -9, "operation not supported by this object")                                      \
    XX(ENOTSYNCED, -10,                                                                            \
       "not acknowledged in time by enough replicas or the disk (sync_replicas, sync_aof)")        \
    XX(EPERM, -11, "refused by the server's ACL (NOPERM)")                                         \
    XX(EBROKEN, -12, "broken: a party of the barrier died, timed out or was cancelled")            \
    XX(ECLOSED, -13, "the handle or its client was closed")

typedef enum baton_errno {
    BATON_OK = 0,
#define BATON_ERRNO_ENUM_(name, value, msg) BATON_##name = (value),
    BATON_ERRNO_MAP(BATON_ERRNO_ENUM_)
#undef BATON_ERRNO_ENUM_
} baton_errno;

/*
 * Returns a fixed English sentence for an error code ("timed out"), or "unknown error" for a
 * value that is not a baton code. The string is static; never free it.
 */
BATON_API const char *baton_strerror(int code);

/*
 * Returns the code's name ("BATON_ETIMEDOUT"), or "BATON_UNKNOWN" for a value that is not a
 * baton code. The string is static; never free it.
 */
BATON_API const char *baton_err_name(int code);

#ifdef __cplusplus
}
#endif

#endif /* BATON_ERROR_H */
