-- lock_unreserve: a waiter that gives up (timed out, cancelled) drops its reservation of the
-- plain lock, so that the lock is free for others at once rather than after the
-- reservation's life (src/lock/lock.c).
-- KEYS[1]  baton's reservation baton_lock_next:{name}
-- ARGV[1]  the waiter's owner field
-- Returns  1 dropped, 0 it was not (or no longer) this waiter's. A key of another type is
--          left alone.
if redis.pcall('get', KEYS[1]) == ARGV[1] then
    return redis.call('del', KEYS[1])
end
return 0
