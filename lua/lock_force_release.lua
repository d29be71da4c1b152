-- lock_force_release: delete a lock whoever holds it, and wake a waiter.
-- KEYS[1]  the lock hash
-- KEYS[2]  the lock's channel
-- KEYS[3]  baton's side hash baton_lock_meta:{name} (holders' "host:pid"), deleted too
-- ARGV[1]  the unlock message, "0"
-- Returns  1 the lock was held and is deleted, 0 it was not held.
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
    return 0
end
if t ~= 'hash' then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
redis.call('del', KEYS[1], KEYS[3])
publish(KEYS[2], ARGV[1])
return reply(1, 'force_released')
