-- rwlock_read_release: release one read hold, idempotently per request id (Redisson's
-- flags: allow-oom (it only shrinks or extends what is stored, and writes at most a small
--        request latch with a TTL: it runs at maxmemory under noeviction; Redis >= 7)
-- RedissonReadLock unlock, with baton's replies).
-- KEYS[1]  the lock hash
-- KEYS[2]  the lock's channel, redisson_rwlock:{name}
-- KEYS[3]  the prefix of the readers' timeout keys, {name}
-- KEYS[4]  the unlock latch, redisson_unlock_latch:{name}:<request-id>
-- ARGV[1]  the unlock message, "0"
-- ARGV[2]  lease in ms (unused: the hash's lease follows the readers' timeout keys)
-- ARGV[3]  reader field, "<client-uuid>:<thread-id>"
-- ARGV[4]  how long the latch remembers the outcome, in ms
-- ARGV[5]  "0": the request's first attempt (no latch can exist yet: it is not read);
--          "1" (or absent): a retry
-- Returns  nil  the owner holds no read hold
--          0    one hold released, this owner holds more
--          1    this owner's last read hold released (others may still read)
-- The hash's lease becomes the longest remaining timeout key of any reader; when no
-- reader is left (and no writer: the writer's own reads are gone too) the hash is deleted
-- and "0" published.
-- A PUBLISH that the server's ACL refuses (pcall) leaves the writes before it in place: the
-- outcome is then returned inside an error reply, BATON_UNPUBLISHED <outcome> <what>
-- <channel length> <channel> <server's error>, which the library turns back into the
-- outcome with a warning (client.c, unpublished()). A waiter not told finds out at its
-- recheck.
-- uses: publish (lua/lib/publish.lua, put in front of this script by the build)
-- uses: keys (lua/lib/keys.lua, likewise)
if ARGV[5] ~= '0' then -- a retry: its first attempt may have run
    local done = redis.call('get', KEYS[4])
    if done ~= false then
        return tonumber(done)
    end
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false or redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
local holds = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if holds == 0 then
    redis.call('hdel', KEYS[1], ARGV[3])
end
redis.call('del', KEYS[3] .. ':' .. ARGV[3] .. KEY_RWLOCK_TIMEOUT .. (holds + 1))
local outcome = holds == 0 and 1 or 0
if redis.call('hlen', KEYS[1]) > 1 then
    local longest = -3
    for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
        local n = tonumber(redis.call('hget', KEYS[1], field))
        if type(n) == 'number' then
            for i = n, 1, -1 do
                local ttl = redis.call('pttl', KEYS[3] .. ':' .. field .. KEY_RWLOCK_TIMEOUT .. i)
                longest = math.max(longest, ttl)
            end
        end
    end
    if longest > 0 then
        redis.call('pexpire', KEYS[1], longest)
        redis.call('set', KEYS[4], outcome, 'px', ARGV[4])
        return outcome
    end
    if mode == 'write' then
        redis.call('set', KEYS[4], outcome, 'px', ARGV[4])
        return outcome
    end
end
redis.call('del', KEYS[1])
publish(KEYS[2], ARGV[1])
redis.call('set', KEYS[4], outcome, 'px', ARGV[4])
return reply(outcome, 'released')
