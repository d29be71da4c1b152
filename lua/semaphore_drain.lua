-- semaphore_drain: take every available permit.
-- flags: allow-oom (it only shrinks or extends what is stored, and writes at most a small
--        request latch with a TTL: it runs at maxmemory under noeviction; Redis >= 7)
-- KEYS[1]  the semaphore: a string holding the permit count (absent = 0 permits)
-- Returns  the number of permits taken (0 if absent or none available); the count is then
--          0 (an absent key stays absent). Nothing is published: no waiter can gain.
--          A key of another type, or a string that is not an integer, fails with an error
--          reply (WRONGTYPE / ERR) and is left untouched.
local t = redis.call('type', KEYS[1]).ok
if t == 'none' then
    return 0
end
if t ~= 'string' then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
local raw = redis.call('get', KEYS[1])
if not string.match(raw, '^-?%d+$') then
    return redis.error_reply('ERR semaphore permit count is not an integer')
end
local value = tonumber(raw)
if value <= 0 then
    return 0
end
-- DECRBY by what was read rather than SET 0: keeps a TTL someone set on the key
redis.call('decrby', KEYS[1], raw)
return value
