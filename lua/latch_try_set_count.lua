-- latch_try_set_count: arm a count-down latch if no count is set (Redisson's trySetCount).
-- KEYS[1]  the latch: a string at the latch's name holding the count
-- KEYS[2]  the latch's channel, redisson_countdownlatch__channel__{name}
-- ARGV[1]  the "new count" message, "1"
-- ARGV[2]  the count to set (>= 1, checked by the caller)
-- Returns  1  the count was set and "1" published
--          0  a count is already set; nothing changed
--          A key of another type fails with WRONGTYPE and is left untouched.
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
    redis.call('set', KEYS[1], ARGV[2])
    publish(KEYS[2], ARGV[1])
    return reply(1, 'set')
end
if t ~= 'string' then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
return 0
