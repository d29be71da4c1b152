-- semaphore_add_permits: add ARGV[1] permits, or remove them when negative, never going
-- below zero.
-- KEYS[1]  the semaphore: a string holding the permit count (absent = 0 permits)
-- KEYS[2]  its channel, redisson_sc:{name}
-- KEYS[3]  the request latch, baton_request:{name}:<request-id>: remembers this request's
--          outcome, so a re-send after a lost reply returns it instead of adding twice
-- ARGV[1]  delta: > 0 adds (creating the key if absent) and publishes the new count;
--          < 0 removes what there is, down to 0 at most (an absent key stays absent);
--          0 changes nothing
-- ARGV[2]  baton's reservation, baton_semaphore_next:{name} (lib/semline.lua)
-- ARGV[3]  baton's line, baton_semaphore_line:{name}: its first waiter is served, as by a
--          release
-- ARGV[4]  how long the request latch lives, in ms
-- ARGV[5]  "0": the request's first attempt (no latch can exist yet: it is not read);
--          "1" (or absent): a retry
-- Returns  the new permit count (a re-sent request: the count its first run returned).
--          A key of another type, or a string that is not an integer, fails with an error
--          reply (WRONGTYPE / ERR) and is left untouched; so does an overflow (INCRBY's).
-- A PUBLISH that the server's ACL refuses (pcall) leaves the writes before it in place: the
-- outcome is then returned inside an error reply, BATON_UNPUBLISHED <outcome> <what>
-- <channel length> <channel> <server's error>, which the library turns back into the
-- outcome with a warning (client.c, unpublished()). A waiter not told finds out at its
-- recheck.
-- uses: publish (lua/lib/publish.lua, put in front of this script by the build)
-- uses: semline
-- uses: line_join
if ARGV[5] ~= '0' then -- a retry: its first attempt may have run
    local done = redis.call('get', KEYS[3])
    if done ~= false then
        return tonumber(done)
    end
end
local t = redis.call('type', KEYS[1]).ok
if t ~= 'none' and t ~= 'string' then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
local value = 0
if t == 'string' then
    local raw = redis.call('get', KEYS[1])
    if not string.match(raw, '^-?%d+$') then
        return redis.error_reply('ERR semaphore permit count is not an integer')
    end
    value = tonumber(raw)
end
local delta = tonumber(ARGV[1])
if delta > 0 then
    value = redis.call('incrby', KEYS[1], ARGV[1])
    publish(KEYS[2], value)
    sem_serve(ARGV[2], ARGV[3], KEYS[2], value)
    redis.call('set', KEYS[3], value, 'px', ARGV[4])
    return reply(value, 'added')
end
if delta < 0 and t == 'string' and value > 0 then
    -- take min(-delta, value): the count stops at 0; DECRBY keeps a TTL on the key
    local take = -delta
    if take > value then
        take = value
    end
    value = redis.call('decrby', KEYS[1], take)
    redis.call('set', KEYS[3], value, 'px', ARGV[4])
    return value
end
return value
