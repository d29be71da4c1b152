-- fairlock_force_release: delete a fair lock whoever holds it, with its queue and deadlines,
-- and wake the waiters. The operator's way out of any state, a poisoned queue included (an
-- entry whose deadline never comes, such as inf): a waiter still waiting runs its next
-- round at once on the wake-up (or at its bound) and joins a new queue; the order among
-- the waiters is lost. At most 1000 waiters are woken here; the others find out at their
-- next round (fair_wait_ms / 3 at most).
-- KEYS[1]  the lock hash
-- KEYS[2]  the queue, redisson_lock_queue:{name}
-- KEYS[3]  the deadlines, redisson_lock_timeout:{name}
-- KEYS[4]  the waiters' channel prefix, redisson_lock__channel:{name}
-- KEYS[5]  baton's side hash baton_lock_meta:{name} (holders' "host:pid"), deleted too
-- ARGV[1]  the unlock message, "0"
-- Returns  1 the lock was held and is deleted, 0 it was not held (the queue and deadlines
--          are deleted either way). A key of another type fails with WRONGTYPE and
--          nothing is written.
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
local waiters = redis.call('lrange', KEYS[2], 0, 999)
local existed = redis.call('del', KEYS[1])
redis.call('del', KEYS[2], KEYS[3], KEYS[5])
for _, w in ipairs(waiters) do
    publish(KEYS[4] .. ':' .. w, ARGV[1])
end
return reply(existed, 'force_released')
