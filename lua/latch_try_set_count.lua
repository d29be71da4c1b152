-- latch_try_set_count: arm a count-down latch if no count is set (Redisson's trySetCount).
-- KEYS[1]  the latch: a string at the latch's name holding the count
-- KEYS[2]  the latch's channel, redisson_countdownlatch__channel__{name}
-- ARGV[1]  the "new count" message, "1"
-- ARGV[2]  the count to set (>= 1, checked by the caller)
-- Returns  1  the count was set and "1" published
--          0  a count is already set; nothing changed
--          A key of another type fails with WRONGTYPE and is left untouched.
local t = redis.call('type', KEYS[1]).ok
if t == 'none' then
    redis.call('set', KEYS[1], ARGV[2])
    redis.call('publish', KEYS[2], ARGV[1])
    return 1
end
if t ~= 'string' then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
return 0
