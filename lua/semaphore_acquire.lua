-- semaphore_acquire: take ARGV[1] permits at once, or none, once per request id.
-- KEYS[1]  the semaphore: a string holding the permit count (absent = 0 permits)
-- KEYS[2]  the request latch, baton_request:{name}:<request-id>: written when the permits
--          are taken, so that a re-send after a lost reply answers "taken" instead of
--          taking them again
-- ARGV[1]  permits to take (>= 1)
-- ARGV[2]  how long the request latch lives, in ms
-- ARGV[3]  "0": the request's first attempt (no latch can exist yet: it is not read);
--          "1" (or absent): a retry
-- Returns  {1, left}       taken; left = the permits that remained after this request's
--                          take (a re-sent request: its first run's)
--          {0, available}  not enough permits; nothing changed, no latch written (a
--                          re-send may then take them: only one run of a request ever does)
--          A key of another type, or a string that is not an integer, fails with an error
--          reply (WRONGTYPE / ERR) and is left untouched.
-- A first attempt is 1 command when too few permits are free (GET), 3 when it takes them
-- (GET, DECRBY, SET of the latch).
if ARGV[3] ~= '0' then
    local done = redis.call('get', KEYS[2])
    if done ~= false then
        return {1, tonumber(done)}
    end
end
local raw = redis.call('get', KEYS[1]) -- a key of another type: WRONGTYPE, nothing written
if raw == false then
    return {0, 0}
end
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
