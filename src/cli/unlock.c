/*
 * `unlock --force`: frees a lock (plain or fair) whoever holds it, after checking that the
 * name is a lock.
 */
#define _GNU_SOURCE
#include "command.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether NAME is a fair lock (its queue or deadline set exists): then its waiters listen on
 * their own channels, which only a fair lock's force release wakes. A failed read answers
 * "no": the force release that follows reports the failure. */
static bool has_fair_queue(baton_client *c, const char *name)
{
    baton_inspection *ins = NULL;
    bool fair = baton_inspect(c, name, &ins) == BATON_OK && ins->kind == BATON_OBJECT_FAIRLOCK;
    baton_inspection_free(ins);
    return fair;
}

/* False, with why, when NAME holds a hash that is not a lock's: a lock's fields are owners
 * ("<client-id>:<thread-id>") with hold counts from 1, and it has a lease (Redisson and
 * baton always set one). Anything else (nothing, a read-write lock, another type) is left
 * to the force release, which says "not locked" or WRONGTYPE. */
static bool is_a_lock(baton_client *c, const char *name, char *why, size_t len)
{
    baton_inspection *s = NULL;
    if (baton_inspect(c, name, &s) != BATON_OK || !s)
        return true; /* the release says what is wrong */
    bool lock = s->kind != BATON_OBJECT_LOCK && s->kind != BATON_OBJECT_FAIRLOCK;
    if (!lock && s->n_holders > 0) {
        lock = s->ttl_ms != -1;
        for (size_t i = 0; lock && i < s->n_holders; i++)
            lock = s->holders[i]->holds >= 1 && strchr(s->holders[i]->owner, ':') != NULL;
        if (!lock)
            snprintf(why, len, "a Redis hash that is not a lock's (%s)",
                     s->ttl_ms == -1 ? "no lease" : "a field that is not an owner's hold count");
    } else if (!lock) {
        lock = true;
    }
    baton_inspection_free(s);
    return lock;
}

static const struct option unlock_options[] = {CLI_FLAG("force", OPT_FORCE), CLI_END};

/* What `unlock` was asked. */
typedef struct unlock_args {
    const char *name;
    bool force;
} unlock_args;

static int unlock_option(cli_opts *o, int c, cli_global *g, void *arg)
{
    (void)g;
    unlock_args *ua = arg;
    if (c == CLI_OPT_WORD || c == CLI_OPT_NAME)
        return cli_one_word(o, &ua->name, "lock NAME");
    if (c != OPT_FORCE)
        return CLI_NOT_MINE;
    ua->force = true;
    return 0;
}

int cli_cmd_unlock(cli_global *g, int argc, char **argv)
{
    unlock_args ua = {NULL, false};
    cli_opts o;
    cli_opts_init(&o, "unlock", g, argc, argv, "", unlock_options);
    if (o.rest) {
        cli_opts_free(&o);
        return cli_usage_error("unlock", "unexpected '--'");
    }
    int rc = cli_each_option(&o, g, NULL, unlock_option, &ua);
    if (ua.name)
        cli_note_name(g, ua.name);
    const char *name = ua.name;
    bool force = ua.force;
    if (!rc && !force)
        rc = cli_usage_error("unlock", "unlock deletes the lock whoever holds it: say --force");
    else if (!rc && !name)
        rc = cli_usage_error("unlock", "no lock NAME");
    baton_client *c;
    if (!cli_start(g, &rc, &c))
        return rc;
    char why[200];
    if (!is_a_lock(c, name, why, sizeof why)) {
        cli_error("unlock %s: %s: nothing deleted", name, why);
        baton_client_close(c);
        return EXIT_FAILED;
    }
    baton_lock *l = NULL;
    bool fair = has_fair_queue(c, name);
    int brc = fair ? baton_fairlock_open(c, name, &l) : baton_lock_open(c, name, &l);
    bool was_locked = false;
    if (brc == BATON_OK)
        brc = baton_lock_force_release(l, &was_locked);
    if (brc != BATON_OK) {
        rc = cli_fail(c, brc, "unlock %s", name);
    } else if (!was_locked) {
        cli_warn(c, name);
        cli_error("%s was not locked%s", name, fair ? " (its queue is cleared)" : "");
        rc = EXIT_NO;
    } else {
        cli_warn(c, name);
        cli_eprintf("%s%s released%s", fair ? "fair lock " : "lock ", name,
                    fair ? ", its queue cleared" : "");
    }
    baton_lock_close(l);
    baton_client_close(c);
    return rc;
}
