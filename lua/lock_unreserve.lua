-- lock_unreserve: a waiter that gives up (timed out, cancelled) leaves the plain lock's
-- line and drops its reservation, so that the lock goes on to the next waiter at once
-- rather than after the reservation's life (src/lock/lock.c, lib/line.lua).
-- KEYS[1]  the lock hash
-- KEYS[2]  baton's reservation baton_lock_next:{name}
-- KEYS[3]  baton's line baton_lock_line:{name}
-- ARGV[1]  the waiter's owner field
-- ARGV[2]  the lock's channel, redisson_lock__channel:{name}
-- A waiter that was the line's first tells the next that it is first now (lib/line.lua).
-- Returns  1 it held the reservation (dropped; a free lock went on to the line's next),
--          0 it did not (it left the line if it was in it). A key of another type is left
--          alone.
-- uses: line
leave(KEYS[3], ARGV[1], ARGV[2])
if redis.pcall('get', KEYS[2]) ~= ARGV[1] then
    return 0
end
redis.call('del', KEYS[2])
if redis.call('exists', KEYS[1]) == 0 then
    promote(KEYS[2], KEYS[3], ARGV[2], nil)
end
return 1
