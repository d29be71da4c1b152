-- lock_acquire: take or re-enter a reentrant lock (Redisson's RLock layout).
-- KEYS[1]  the lock: a hash at the lock's name, field <owner> -> hold count
-- KEYS[2]  the fencing-token counter, redisson_lock_token:{name}, never expires
-- KEYS[3]  baton's side hash baton_lock_meta:{name}, field <owner> -> "host:pid" of the
--          holding process, with the lock's lease (not Redisson's: its holders have none)
-- ARGV[1]  lease in milliseconds (PEXPIRE of the hash)
-- ARGV[2]  owner field, "<client-uuid>:<thread-id>"
-- ARGV[3]  "host:pid" of the holder
-- Returns  {1, token}  acquired; token is the new fencing token (the counter, incremented)
--          {2, token}  re-entered by the owner; token is unchanged (the outer hold's)
--          {0, pttl}   held by another owner; pttl = its remaining lease in ms (-1: none)
-- A key of another type (or a token that is not an integer) fails with WRONGTYPE (ERR)
-- before anything is written. The side hash is
-- advisory: a key of another type there is left alone (pcall) and the lock still taken.
if redis.call('exists', KEYS[1]) == 0 then
    local token = redis.call('incr', KEYS[2])
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    redis.pcall('hset', KEYS[3], ARGV[2], ARGV[3])
    redis.pcall('pexpire', KEYS[3], ARGV[1])
    return {1, token}
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    -- the token is read before the first write: a key of another type fails here
    local token = redis.call('get', KEYS[2])
    if token ~= false and not string.match(token, '^-?%d+$') then
        return redis.error_reply('ERR the fencing-token counter is not an integer')
    end
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    redis.pcall('pexpire', KEYS[3], ARGV[1])
    return {2, tonumber(token or '0')}
end
return {0, redis.call('pttl', KEYS[1])}
