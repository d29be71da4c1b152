-- fairlock_cancel: a waiter gives up (timed out, or an error): leave the queue and the
-- deadline set, and if that leaves the lock free with a new head, wake the new head.
-- KEYS[1]  the lock hash
-- KEYS[2]  the queue, redisson_lock_queue:{name}
-- KEYS[3]  the deadlines, redisson_lock_timeout:{name}
-- KEYS[4]  the waiters' channel prefix, redisson_lock__channel:{name}
-- ARGV[1]  owner field, "<client-uuid>:<thread-id>"
-- Returns  1 the owner was queued and is removed, 0 it was not queued.
-- Queued owners whose deadline (server time) has passed are dropped from the head of the
-- queue as well. A key of another type fails with WRONGTYPE before anything is written.
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
local function kind(key, want)
    local t = redis.call('type', key).ok
    return t == 'none' or t == want
end
if not (kind(KEYS[1], 'hash') and kind(KEYS[2], 'list') and kind(KEYS[3], 'zset')) then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local was_head = redis.call('lindex', KEYS[2], 0) == ARGV[1]
redis.call('lrem', KEYS[2], 0, ARGV[1])
local removed = redis.call('zrem', KEYS[3], ARGV[1])
local changed = was_head
local head
while true do
    head = redis.call('lindex', KEYS[2], 0)
    if head == false then
        break
    end
    local deadline = redis.call('zscore', KEYS[3], head)
    if deadline ~= false and tonumber(deadline) >= now then
        break
    end
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], head)
    changed = true
end
if changed and head ~= false and redis.call('exists', KEYS[1]) == 0 then
    publish(KEYS[4] .. ':' .. head, '0')
end
return reply(removed, 'withdrawn')
