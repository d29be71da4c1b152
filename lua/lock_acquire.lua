-- lock_acquire: take or re-enter a reentrant lock (Redisson's RLock layout).
-- KEYS[1]  the lock: a hash at the lock's name, field <owner> -> hold count
-- KEYS[2]  the fencing-token counter, redisson_lock_token:{name}, never expires
-- ARGV[1]  lease in milliseconds (PEXPIRE of the hash)
-- ARGV[2]  owner field, "<client-uuid>:<thread-id>"
-- Returns  {1, token}  acquired; token is the new fencing token (the counter, incremented)
--          {2, token}  re-entered by the owner; token is unchanged (the outer hold's)
--          {0, pttl}   held by another owner; pttl = its remaining lease in ms (-1: none)
-- A key of another type fails with WRONGTYPE before anything is written.
if redis.call('exists', KEYS[1]) == 0 then
    local token = redis.call('incr', KEYS[2])
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, token}
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {2, tonumber(redis.call('get', KEYS[2]) or '0')}
end
return {0, redis.call('pttl', KEYS[1])}
