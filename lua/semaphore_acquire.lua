-- semaphore_acquire: take ARGV[1] permits at once, or none, once per request id.
-- KEYS[1]  the semaphore: a string holding the permit count (absent = 0 permits)
-- KEYS[2]  the request latch, baton_request:{name}:<request-id>: written when the permits
--          are taken, so that a re-send after a lost reply answers "taken" instead of
--          taking them again
-- ARGV[1]  permits to take (>= 1)
-- ARGV[2]  how long the request latch lives, in ms
-- Returns  {1, left}       taken; left = the permits that remained after this request's
--                          take (a re-sent request: its first run's)
--          {0, available}  not enough permits; nothing changed, no latch written (a
--                          re-send may then take them: only one run of a request ever does)
--          A key of another type, or a string that is not an integer, fails with an error
--          reply (WRONGTYPE / ERR) and is left untouched.
local done = redis.call('get', KEYS[2])
if done ~= false then
    return {1, tonumber(done)}
end
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
    local left = redis.call('decrby', KEYS[1], ARGV[1])
    redis.call('set', KEYS[2], left, 'px', ARGV[2])
    return {1, left}
end
return {0, value}
