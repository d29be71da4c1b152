-- latch_delete: delete a count-down latch and release every waiter.
-- KEYS[1]  the latch: a string at the latch's name holding the count
-- KEYS[2]  the latch's channel, redisson_countdownlatch__channel__{name}
-- ARGV[1]  the "reached zero" message, "0": with the key gone the count is 0, so waiters
--          return (Redisson publishes "new count" here, which leaves them waiting)
-- Returns  1 the latch existed and is deleted, 0 it did not exist (nothing published).
--          A key of another type, or a string that is not a count, fails (WRONGTYPE, or
--          ERR) and is left untouched: DEL alone would destroy data that is not a latch.
-- A PUBLISH that the server's ACL refuses (pcall) leaves the writes before it in place: the
-- outcome is then returned inside an error reply, BATON_UNPUBLISHED <outcome> <what>
-- <channel length> <channel> <server's error>, which the library turns back into the
-- outcome with a warning (client.c, unpublished()). A waiter not told finds out at its
-- recheck.
local refused
local function publish(channel, message)
    local r = redis.pcall('publish', channel, message)
    if type(r) == 'table' and r.err then
        refused = {channel, r.err}
    end
end
local function reply(outcome, what)
    if refused == nil then
        return outcome
    end
    local o = outcome == nil and 'nil' or string.format('%.0f', outcome)
    return redis.error_reply('BATON_UNPUBLISHED ' .. o .. ' ' .. what .. ' ' .. #refused[1] .. ' ' ..
                             refused[1] .. ' ' .. refused[2])
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
redis.call('del', KEYS[1])
publish(KEYS[2], ARGV[1])
return reply(1, 'deleted')
