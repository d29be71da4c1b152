-- rwlock_write_release: release one write hold, idempotently per request id (Redisson's
-- flags: allow-oom (it only shrinks or extends what is stored, and writes at most a small
--        request latch with a TTL: it runs at maxmemory under noeviction; Redis >= 7)
-- RedissonWriteLock unlock, with baton's replies).
-- KEYS[1]  the lock hash
-- KEYS[2]  the lock's channel, redisson_rwlock:{name}
-- KEYS[3]  the unlock latch, redisson_unlock_latch:{name}:<request-id>
-- ARGV[1]  ignored (the shared release protocol's "0"); this script publishes "1",
--          Redisson's READ_UNLOCK_MESSAGE: every waiter may try
-- ARGV[2]  lease in ms re-applied when write holds remain
-- ARGV[3]  writer field, "<client-uuid>:<thread-id>:write"
-- ARGV[4]  how long the latch remembers the outcome, in ms
-- ARGV[5]  "0": the request's first attempt (no latch can exist yet: it is not read);
--          "1" (or absent): a retry
-- Returns  nil  the owner holds no write hold
--          0    one hold released, holds remain (lease re-applied)
--          1    the last write hold released: the hash is deleted, or, when the writer
--               still holds read holds, its mode becomes 'read'; "1" is published in both
--               cases (Redisson publishes only in the first, leaving readers asleep)
-- A PUBLISH that the server's ACL refuses (pcall) leaves the writes before it in place: the
-- outcome is then returned inside an error reply, BATON_UNPUBLISHED <outcome> <what>
-- <channel length> <channel> <server's error>, which the library turns back into the
-- outcome with a warning (client.c, unpublished()). A waiter not told finds out at its
-- recheck.
-- uses: publish (lua/lib/publish.lua, put in front of this script by the build)
if ARGV[5] ~= '0' then -- a retry: its first attempt may have run
    local done = redis.call('get', KEYS[3])
    if done ~= false then
        return tonumber(done)
    end
end
if redis.call('hget', KEYS[1], 'mode') ~= 'write' or redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
local holds = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if holds > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    redis.call('set', KEYS[3], 0, 'px', ARGV[4])
    return 0
end
redis.call('hdel', KEYS[1], ARGV[3])
if redis.call('hlen', KEYS[1]) == 1 then
    redis.call('del', KEYS[1])
else
    redis.call('hset', KEYS[1], 'mode', 'read')
end
publish(KEYS[2], '1')
redis.call('set', KEYS[3], 1, 'px', ARGV[4])
return reply(1, 'released')
