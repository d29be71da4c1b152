-- latch_count_down: decrement a count-down latch; at zero delete it and wake the waiters.
-- flags: allow-oom (it only shrinks or extends what is stored, and writes at most a small
--        request latch with a TTL: it runs at maxmemory under noeviction; Redis >= 7)
-- KEYS[1]  the latch: a string at the latch's name holding the count
-- KEYS[2]  the latch's channel, redisson_countdownlatch__channel__{name}
-- KEYS[3]  the request latch, baton_request:{name}:<request-id>: remembers this request's
--          outcome, so a re-send after a lost reply returns it instead of counting twice
-- ARGV[1]  the "reached zero" message, "0"
-- ARGV[2]  how long the request latch lives, in ms
-- ARGV[3]  "0": the request's first attempt (no latch can exist yet: it is not read);
--          "1" (or absent): a retry
-- Returns  the count after the call: 0 when the latch is (now) open. An absent latch is
--          left absent (the count never goes negative); the count that reaches 0 deletes
--          the key and publishes "0", once.
--          A key of another type, or a string that is not an integer, fails (WRONGTYPE, or
--          ERR) before anything is written.
-- A PUBLISH that the server's ACL refuses (pcall) leaves the writes before it in place: the
-- outcome is then returned inside an error reply, BATON_UNPUBLISHED <outcome> <what>
-- <channel length> <channel> <server's error>, which the library turns back into the
-- outcome with a warning (client.c, unpublished()). A waiter not told finds out at its
-- recheck.
-- uses: publish (lua/lib/publish.lua, put in front of this script by the build)
if ARGV[3] ~= '0' then -- a retry: its first attempt may have run
    local done = redis.call('get', KEYS[3])
    if done ~= false then
        return tonumber(done)
    end
end
local t = redis.call('type', KEYS[1]).ok
if t == 'none' then
    return 0
end
if t ~= 'string' then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
if tonumber(redis.call('get', KEYS[1])) == nil then
    return redis.error_reply('ERR the latch holds a value that is not a count')
end
local v = redis.call('decr', KEYS[1])
if v <= 0 then
    redis.call('del', KEYS[1])
    publish(KEYS[2], ARGV[1])
    redis.call('set', KEYS[3], 0, 'px', ARGV[2])
    return reply(0, 'counted_down')
end
redis.call('set', KEYS[3], v, 'px', ARGV[2])
return v
