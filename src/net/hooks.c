/*
 * The table through which the transport waits (hooks.h): the engine's once it installed
 * it, until then one under which every caller is a thread.
 */
#include "hooks.h"

#include <stdatomic.h>

static bool never_on_fiber(void)
{
    return false;
}

static int not_on_fiber(int fd, short events, int64_t deadline_us, uint64_t key)
{
    (void)fd, (void)events, (void)deadline_us, (void)key;
    return -1;
}

static int sleep_as_thread(int64_t until_us)
{
    (void)until_us;
    return -1;
}

static uint64_t none_freed(baton_client *c)
{
    (void)c;
    return 0;
}

static int no_pool_wait(baton_client *c, const void *pool, uint64_t seen, int64_t deadline_us)
{
    (void)c, (void)pool, (void)seen, (void)deadline_us;
    return 0;
}

static void nobody_waits(baton_client *c, const void *pool, bool all)
{
    (void)c, (void)pool, (void)all;
}

static void *no_fiber(void)
{
    return NULL;
}

static int no_park(int fd, short events, int64_t deadline_us, uint64_t key)
{
    (void)fd, (void)events, (void)deadline_us, (void)key;
    return -1;
}

static void no_wake(void *token)
{
    (void)token;
}

static void no_turn(void)
{
}

static const baton__wait_hooks threads_only = {
    never_on_fiber, not_on_fiber, sleep_as_thread, none_freed, no_pool_wait,
    nobody_waits,   no_fiber,     no_park,         no_wake,    no_turn,
};

static _Atomic(const baton__wait_hooks *) installed = &threads_only;

void baton__net_install(const baton__wait_hooks *h)
{
    atomic_store_explicit(&installed, h ? h : &threads_only, memory_order_release);
}

const baton__wait_hooks *baton__net_waits(void)
{
    return atomic_load_explicit(&installed, memory_order_acquire);
}
