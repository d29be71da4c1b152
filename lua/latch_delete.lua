-- latch_delete: delete a count-down latch and release every waiter.
-- KEYS[1]  the latch: a string at the latch's name holding the count
-- KEYS[2]  the latch's channel, redisson_countdownlatch__channel__{name}
-- ARGV[1]  the "reached zero" message, "0": with the key gone the count is 0, so waiters
--          return (Redisson publishes "new count" here, which leaves them waiting)
-- Returns  1 the latch existed and is deleted, 0 it did not exist (nothing published).
--          A key of another type fails with WRONGTYPE and is left untouched.
local t = redis.call('type', KEYS[1]).ok
if t == 'none' then
    return 0
end
if t ~= 'string' then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[1])
return 1
