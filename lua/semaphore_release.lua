-- semaphore_release: return ARGV[1] permits and publish the new count (Redisson's layout:
-- flags: allow-oom (it only shrinks or extends what is stored, and writes at most a small
--        request latch with a TTL: it runs at maxmemory under noeviction; Redis >= 7)
-- waiters wake as many of themselves as the new count can serve).
-- KEYS[1]  the semaphore: a string holding the permit count; created if absent (Redisson)
-- KEYS[2]  its channel, redisson_sc:{name}
-- KEYS[3]  the request latch, baton_request:{name}:<request-id>: remembers this request's
--          outcome, so a re-send after a lost reply returns it instead of releasing twice
-- ARGV[1]  permits to return (>= 1)
-- ARGV[2]  how long the request latch lives, in ms
-- Returns  the new permit count (a re-sent request: the count its first run returned).
--          A key of another type, or a string that is not an integer, fails with an error
--          reply (WRONGTYPE / ERR) and is left untouched; so does an overflow (INCRBY's).
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
local done = redis.call('get', KEYS[3])
if done ~= false then
    return tonumber(done)
end
local t = redis.call('type', KEYS[1]).ok
if t ~= 'none' and t ~= 'string' then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
if t == 'string' and not string.match(redis.call('get', KEYS[1]), '^-?%d+$') then
    return redis.error_reply('ERR semaphore permit count is not an integer')
end
local value = redis.call('incrby', KEYS[1], ARGV[1])
publish(KEYS[2], value)
redis.call('set', KEYS[3], value, 'px', ARGV[2])
return reply(value, 'released')
