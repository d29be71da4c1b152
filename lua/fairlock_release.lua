-- fairlock_release: release one hold of a fair lock, idempotently per request id, and wake
-- flags: allow-oom (it only shrinks or extends what is stored, and writes at most a small
--        request latch with a TTL: it runs at maxmemory under noeviction; Redis >= 7)
-- the head of the queue.
-- KEYS[1]  the lock hash
-- KEYS[2]  the queue, redisson_lock_queue:{name}
-- KEYS[3]  the deadlines, redisson_lock_timeout:{name}
-- KEYS[4]  the waiters' channel prefix, redisson_lock__channel:{name}
-- KEYS[5]  baton's older side hash baton_lock_meta:{name} (holders' "host:pid", no longer
--          written: the client's record has them): deleted with the lock, in the same DEL
-- KEYS[6]  the unlock latch, redisson_unlock_latch:{name}:<request-id>: remembers this
--          request's outcome, so a retry after a lost reply returns the first result
-- ARGV[1]  the unlock message, "0"
-- ARGV[2]  lease in ms re-applied when holds remain (the lease the lock was taken with)
-- ARGV[3]  owner field, "<client-uuid>:<thread-id>"
-- ARGV[4]  how long the latch remembers the outcome, in ms
-- Returns  nil  the owner holds nothing (never held, released, or expired)
--          0    one hold released, holds remain (lease re-applied)
--          1    the last hold released: the key is deleted and "0" published on the
--               channel of the queue's head, <prefix>:<head>, only
-- Whenever the lock ends up free with a head in the queue, the head is told.
--
-- Cost: a release by a holder runs a fast path of 4 or 5 commands: HGET and LINDEX read the lock's and the queue's types
-- (each fails with WRONGTYPE by itself) before the first write, and SET NX both records
-- the outcome and finds a retry (the latch already set: its first outcome is returned).
-- The fast path wakes the head without looking at its deadline: a head whose place has
-- lapsed is dropped by the next waiter's run, which its bound (the head's deadline)
-- schedules. A release by an owner that holds nothing (or the retry of a release that
-- freed the lock) takes the general path below: the latch first, every key's type
-- checked, lapsed heads dropped from the queue.
-- A PUBLISH that the server's ACL refuses (pcall) leaves the writes before it in place: the
-- outcome is then returned inside an error reply, BATON_UNPUBLISHED <outcome> <what>
-- <channel length> <channel> <server's error>, which the library turns back into the
-- outcome with a warning (client.c, unpublished()). A waiter not told finds out at its
-- recheck.
-- uses: publish (lua/lib/publish.lua, put in front of this script by the build)

-- The general path, with every key's type checked first.
local function general()
    local done = redis.call('get', KEYS[6])
    if done ~= false then
        return tonumber(done)
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

    if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
        if head ~= false and redis.call('exists', KEYS[1]) == 0 then
            publish(KEYS[4] .. ':' .. head, ARGV[1])
        end
        return reply(nil, 'nothing_released')
    end
    local holds = redis.call('hincrby', KEYS[1], ARGV[3], -1)
    if holds > 0 then
        redis.call('pexpire', KEYS[1], ARGV[2])
        redis.call('set', KEYS[6], 0, 'px', ARGV[4])
        return 0
    end
    redis.call('del', KEYS[1], KEYS[5])
    if head ~= false then
        publish(KEYS[4] .. ':' .. head, ARGV[1])
    end
    redis.call('set', KEYS[6], 1, 'px', ARGV[4])
    return reply(1, 'released')
end

local held = redis.call('hget', KEYS[1], ARGV[3]) -- fails with WRONGTYPE if not a hash
if held == false then
    return general()
end
-- The latch records the outcome unless it is already set: then this is the retry of a
-- release that ran, and its first outcome is the answer.
local function record(outcome)
    return redis.call('set', KEYS[6], outcome, 'nx', 'px', ARGV[4]) ~= false
end
if tonumber(held) > 1 then
    if not record(0) then
        return tonumber(redis.call('get', KEYS[6]))
    end
    redis.call('hincrby', KEYS[1], ARGV[3], -1)
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 0
end
local head = redis.call('lindex', KEYS[2], 0) -- fails with WRONGTYPE if not a list
if not record(1) then
    return tonumber(redis.call('get', KEYS[6]))
end
redis.call('del', KEYS[1], KEYS[5])
if head ~= false then
    publish(KEYS[4] .. ':' .. head, ARGV[1])
end
return reply(1, 'released')
