-- semaphore_try_set_permits: set the permit count only if none is set (Redisson's RSemaphore).
-- KEYS[1]  the semaphore: a string at the semaphore's name holding the permit count
-- KEYS[2]  its channel, redisson_sc:{name}
-- ARGV[1]  the permit count to set (>= 0)
-- Returns  1  the count was absent and is now ARGV[1] (published when > 0, to wake waiters)
--          0  a count was already set; nothing changed
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
if t == 'string' then
    return 0
end
if t ~= 'none' then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
redis.call('set', KEYS[1], ARGV[1])
if tonumber(ARGV[1]) > 0 then
    publish(KEYS[2], ARGV[1])
end
return reply(1, 'set')
