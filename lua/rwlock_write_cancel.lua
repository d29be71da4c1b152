-- rwlock_write_cancel: a writer that gave up waiting withdraws its claim, and if it was the
-- last one and no writer holds the lock, wakes the readers it kept waiting.
-- KEYS[1]  the lock hash
-- KEYS[2]  the waiting writers, baton_rwlock_writers:{name}
-- KEYS[3]  the lock's channel, redisson_rwlock:{name}
-- ARGV[1]  writer field, "<client-uuid>:<thread-id>:write"
-- Returns  1 a claim was withdrawn, 0 there was none.
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
-- The lock's mode is read before the first write (ZREM): a lock key of another type fails
-- with WRONGTYPE before anything is written.
local mode = redis.call('hget', KEYS[1], 'mode')
if redis.call('zrem', KEYS[2], ARGV[1]) == 0 then
    return 0
end
if redis.call('zcard', KEYS[2]) == 0 and mode ~= 'write' then
    publish(KEYS[3], '1')
end
return reply(1, 'withdrawn')
