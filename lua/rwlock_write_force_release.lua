-- rwlock_write_force_release: delete the write lock of a read-write lock whoever holds it, and
-- wake the waiters (Redisson's forceUnlock of RedissonWriteLock).
-- KEYS[1]  the lock hash
-- KEYS[2]  the lock's channel, redisson_rwlock:{name}
-- ARGV[1]  "0" (the shared force-release protocol's; ignored)
-- Returns  1 the lock was in write mode and is deleted ("1" published), 0 otherwise.
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
if redis.call('hget', KEYS[1], 'mode') ~= 'write' then
    return 0
end
redis.call('del', KEYS[1])
publish(KEYS[2], '1')
return reply(1, 'force_released')
