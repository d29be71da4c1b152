-- rwlock_read_force_release: delete the read lock of a read-write lock whoever holds it, and
-- wake the waiters (Redisson's forceUnlock of RedissonReadLock).
-- KEYS[1]  the lock hash
-- KEYS[2]  the lock's channel, redisson_rwlock:{name}
-- ARGV[1]  "0" (the shared force-release protocol's; ignored)
-- Returns  1 the lock was in read mode and is deleted ("0" published), 0 otherwise.
if redis.call('hget', KEYS[1], 'mode') ~= 'read' then
    return 0
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], '0')
return 1
