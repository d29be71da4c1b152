-- rwlock_read_acquire: take or re-enter the read lock of a read-write lock (Redisson's
-- RReadWriteLock layout), unless a writer holds it or waits for it.
-- KEYS[1]  the lock: a hash at the lock's name; field 'mode' = 'read' | 'write', reader
--          fields <owner> -> hold count, the writer's field <owner>:write -> hold count
-- KEYS[2]  the fencing-token counter, redisson_lock_token:{name}, never expires
-- KEYS[3]  the waiting writers, baton_rwlock_writers:{name}: a zset, writer field ->
--          server time (ms) until which its claim stands (baton's; Redisson has none)
-- KEYS[4]  the prefix of the readers' timeout keys, {name}; one key per hold,
--          {name}:<owner>:rwlock_timeout:<n>, with the hold's lease (Redisson's)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  reader field, "<client-uuid>:<thread-id>"
-- ARGV[3]  the same thread's writer field, "<client-uuid>:<thread-id>:write"
-- ARGV[4]  recheck_ms (optional): the most a refusal for a plain lock asks the caller to
--          sleep (that lock's release publishes on its own channel, which the caller does
--          not hear); absent: the plain lock's whole pttl
-- Status   the first element of the reply is a baton__acquire_status (src/core/internal.h)
-- Returns  {1, token}  a first read hold of this owner; token = the counter, incremented
--          {2, token}  re-entered (this owner held read already); token unchanged
--          {0, wait}   not acquired: another owner writes, or a writer waits (its claim is
--                      live), or a plain lock (RLock) holds the name; wait = ms to sleep at
--                      most before trying again (-1: none)
-- A hash without a 'mode' field is a plain lock's (baton_lock, Redisson's RLock): it is
-- held, and nothing is written. Redisson's read lock would add 'mode' = 'read' and its
-- field, and the reader's release would then delete the plain lock: two holders of one
-- name (docs/rwlock.md).
-- A thread that holds a part of the lock (read, or write) is never refused for a waiting
-- writer: it would wait for a writer that waits for it. A key of another type (or a token
-- that is not an integer) fails with WRONGTYPE (ERR) before anything is written.
-- uses: keys (lua/lib/keys.lua, put in front of this script by the build)
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    local held = redis.call('pttl', KEYS[1])
    if held ~= -2 then -- a plain lock's hash
        local recheck = tonumber(ARGV[4])
        if recheck and (held < 0 or recheck < held) then
            held = recheck
        end
        return {0, held}
    end
end
local writing = mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1
if mode == 'write' and not writing then
    return {0, redis.call('pttl', KEYS[1])}
end
local mine = writing or (mode == 'read' and redis.call('hexists', KEYS[1], ARGV[2]) == 1)
if not mine and redis.call('exists', KEYS[3]) == 1 then
    local t = redis.call('time')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    redis.call('zremrangebyscore', KEYS[3], '-inf', now)
    local last = redis.call('zrange', KEYS[3], -1, -1, 'withscores')
    if last[2] then
        local wait = tonumber(last[2]) - now
        local pttl = redis.call('pttl', KEYS[1])
        if pttl > 0 and pttl < wait then
            wait = pttl
        end
        return {0, math.max(wait, 1)}
    end
end
-- The token counter is read before the first write: a key of another type, or a value that
-- is not an integer, fails here (its INCR below would fail after the writes).
local token = redis.call('get', KEYS[2])
if token ~= false and not string.match(token, '^-?%d+$') then
    return redis.error_reply('ERR the fencing-token counter is not an integer')
end
if mode == false then
    redis.call('hset', KEYS[1], 'mode', 'read')
end
local n = redis.call('hincrby', KEYS[1], ARGV[2], 1)
redis.call('set', KEYS[4] .. ':' .. ARGV[2] .. KEY_RWLOCK_TIMEOUT .. n, 1, 'px', ARGV[1])
local pttl = redis.call('pttl', KEYS[1])
redis.call('pexpire', KEYS[1], math.max(pttl, tonumber(ARGV[1])))
if n == 1 then
    return {1, redis.call('incr', KEYS[2])}
end
return {2, tonumber(token or '0')}
