/*
 * baton: distributed locks, latches and semaphores for C, with Redis as the shared state
 * and Redisson's semantics and key layout. Include this header; it includes the rest.
 */
#ifndef BATON_H
#define BATON_H

#include <baton/common.h>
#include <baton/version.h>
#include <baton/error.h>
#include <baton/client.h>
#include <baton/handle.h>
#include <baton/lock.h>
#include <baton/rwlock.h>
#include <baton/latch.h>
#include <baton/semaphore.h>
#include <baton/permits.h>
#include <baton/stats.h>
#include <baton/inspect.h>
#include <baton/async.h>
#include <baton/election.h>
#include <baton/barrier.h>
#include <baton/command.h>

#endif /* BATON_H */
