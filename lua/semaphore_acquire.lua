-- semaphore_acquire: take ARGV[1] permits at once, or none.
-- KEYS[1]  the semaphore: a string holding the permit count (absent = 0 permits)
-- ARGV[1]  permits to take (>= 1)
-- Returns  {1, left}       taken; left = the permits that remain
--          {0, available}  not enough permits; nothing changed
--          A key of another type, or a string that is not an integer, fails with an error
--          reply (WRONGTYPE / ERR) and is left untouched.
local t = redis.call('type', KEYS[1]).ok
if t == 'none' then
    return {0, 0}
end
if t ~= 'string' then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
local raw = redis.call('get', KEYS[1])
if not string.match(raw, '^-?%d+$') then
    return redis.error_reply('ERR semaphore permit count is not an integer')
end
local value = tonumber(raw)
if value >= tonumber(ARGV[1]) then
    -- DECRBY rather than SET: keeps a TTL someone set on the key
    return {1, redis.call('decrby', KEYS[1], ARGV[1])}
end
return {0, value}
