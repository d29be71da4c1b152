/*
 * Error codes and their details. The code names and sentences come from the one X-macro in
 * baton/error.h. The detail of a failure (the server's text, hiredis's message, which
 * argument was wrong) is kept per calling thread and per client, like errno, so two threads
 * sharing a client never read each other's message.
 */
#define _GNU_SOURCE
#include "client_fields.h"

#include <stdio.h>
#include <string.h>

/* A code's name and sentence, from the X-macro (BATON_OK's last; any other code: unknown). */
typedef struct error_row {
    int code;
    const char *name, *msg;
} error_row;

static const error_row rows[] = {
#define BATON_ERROR_ROW_(name, value, msg) {BATON_##name, "BATON_" #name, msg},
    BATON_ERRNO_MAP(BATON_ERROR_ROW_)
#undef BATON_ERROR_ROW_
        {BATON_OK, "BATON_OK", "success"},
};
static const error_row unknown = {0, "BATON_UNKNOWN", "unknown error"};

static const error_row *row_of(int code)
{
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (rows[i].code == code)
            return &rows[i];
    return &unknown;
}

const char *baton_strerror(int code)
{
    return row_of(code)->msg;
}

const char *baton_err_name(int code)
{
    return row_of(code)->name;
}

/* A thread remembers the detail of its last failure on a few clients at once. */
#define SLOTS 8
#define MSG_LEN 512

typedef struct slot {
    uint64_t serial; /* the client's serial; 0 = free */
    uint64_t stamp;  /* when it was last set or cleared (the thread's count of details) */
    char msg[MSG_LEN];
} slot;

static _Thread_local slot slots[SLOTS];
static _Thread_local unsigned next_victim;
static _Thread_local uint64_t stamps;
/* The detail of the thread's last call that had no open object to record it on (a closed
 * handle or client: live.c), shown by baton_client_errmsg when it is newer than the
 * client's own. */
static _Thread_local slot misuse;

static slot *find_slot(uint64_t serial, bool create)
{
    for (unsigned i = 0; i < SLOTS; i++)
        if (slots[i].serial == serial)
            return &slots[i];
    if (!create)
        return NULL;
    for (unsigned i = 0; i < SLOTS; i++) {
        if (slots[i].serial == 0) {
            slots[i].serial = serial;
            return &slots[i];
        }
    }
    slot *s = &slots[next_victim++ % SLOTS];
    s->serial = serial;
    return s;
}

int baton__fail(baton_client *c, int code, const char *fmt, ...)
{
    if (!c)
        return code;
    slot *s = find_slot(c->serial, true);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->msg, sizeof s->msg, fmt, ap);
    va_end(ap);
    s->stamp = ++stamps;
    return code;
}

int baton__misuse(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(misuse.msg, sizeof misuse.msg, fmt, ap);
    va_end(ap);
    misuse.stamp = ++stamps;
    return code;
}

const char *baton__misuse_msg(void)
{
    return misuse.msg;
}

void baton__clear_error(baton_client *c)
{
    if (!c)
        return;
    misuse.msg[0] = '\0'; /* the thread's last call is this one */
    slot *s = find_slot(c->serial, false);
    if (s) {
        s->msg[0] = '\0';
        s->stamp = ++stamps;
    }
}

void baton__forget_errors(baton_client *c)
{
    slot *s = find_slot(c->serial, false);
    if (s)
        s->serial = 0;
}

const char *baton__errmsg_of(const baton_client *c)
{
    slot *s = find_slot(c->serial, false);
    return s ? s->msg : "";
}

const char *baton_client_errmsg(const baton_client *c)
{
    if (!c)
        return "";
    int st = baton__live_state(c, BATON__MAGIC_CLIENT);
    if (st != BATON__LIVE_OPEN && st != BATON__LIVE_CLOSING)
        return baton__misuse_msg(); /* a closed client, or a call on one of its handles */
    slot *s = find_slot(c->serial, false);
    if (misuse.stamp > (s ? s->stamp : 0) && misuse.msg[0])
        return misuse.msg; /* the thread's last call was on a closed handle */
    return s ? s->msg : "";
}

static _Thread_local char open_msg[MSG_LEN];

void baton__set_open_errmsg(const char *msg)
{
    snprintf(open_msg, sizeof open_msg, "%s", msg);
}

const char *baton_open_errmsg(void)
{
    return open_msg;
}
