-- fairlock_force_release: delete a fair lock whoever holds it, and wake the queue's head.
-- The queue and its deadlines stay: the waiters keep their places.
-- KEYS[1]  the lock hash
-- KEYS[2]  the queue, redisson_lock_queue:{name}
-- KEYS[3]  the deadlines, redisson_lock_timeout:{name}
-- KEYS[4]  the waiters' channel prefix, redisson_lock__channel:{name}
-- KEYS[5]  baton's side hash baton_lock_meta:{name} (holders' "host:pid"), deleted too
-- ARGV[1]  the unlock message, "0"
-- Returns  1 the lock was held and is deleted, 0 it was not held.
--          A key of another type fails with WRONGTYPE and is left untouched.
-- Queued owners whose deadline (server time) has passed are dropped from the head of the
-- queue first; whenever the lock ends up free with a head, "0" goes to the head's channel.
local function kind(key, want)
    local t = redis.call('type', key).ok
    return t == 'none' or t == want
end
if not (kind(KEYS[1], 'hash') and kind(KEYS[2], 'list') and kind(KEYS[3], 'zset')) then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

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
end
local existed = redis.call('del', KEYS[1])
redis.call('del', KEYS[5])
if head ~= false then
    redis.call('publish', KEYS[4] .. ':' .. head, ARGV[1])
end
return existed
