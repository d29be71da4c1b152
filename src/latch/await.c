/*
 * The latch's count_down_and_await: a count-down and a wait in one call, built on the
 * latch's public verbs only (the count-down keeps its request latch, the wait its rules).
 */
#include <baton/error.h>
#include <baton/latch.h>

int baton_latch_count_down_and_await(baton_latch *l, int64_t timeout_ms)
{
    int rc = baton_latch_count_down(l);
    return rc != BATON_OK ? rc : baton_latch_await(l, timeout_ms);
}
