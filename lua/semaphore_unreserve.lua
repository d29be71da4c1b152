-- semaphore_unreserve: a waiter that gives up (timed out, cancelled) leaves the semaphore's
-- line and drops its reservation, so that the permits go on to the next waiter at once
-- rather than after the reservation's life (src/semaphore/semaphore.c, lib/semline.lua).
-- KEYS[1]  the semaphore: a string holding the permit count
-- KEYS[2]  baton's reservation baton_semaphore_next:{name}
-- KEYS[3]  baton's line baton_semaphore_line:{name}
-- ARGV[1]  the waiter, "<permits>:<owner>"
-- ARGV[2]  the semaphore's channel, redisson_sc:{name}
-- Returns  1 it held the reservation (dropped; the free permits went on to the line's
--          next), 0 it did not (it left the line if it was in it). Keys of another type are
--          left alone.
-- uses: semline
-- uses: line_join
local was_first = false
local head = redis.pcall('zrange', KEYS[3], 0, 0)
if type(head) == 'table' and head[1] == ARGV[1] then
    was_first = true
end
redis.pcall('zrem', KEYS[3], ARGV[1])
local held = redis.pcall('get', KEYS[2]) == ARGV[1]
if held then
    redis.call('del', KEYS[2])
end
if held or was_first then
    -- the first waiter that wanted more than was free may have kept smaller ones waiting
    local raw = redis.pcall('get', KEYS[1])
    local value = type(raw) == 'string' and tonumber(raw) or 0
    sem_serve(KEYS[2], KEYS[3], ARGV[2], value or 0)
end
return held and 1 or 0
