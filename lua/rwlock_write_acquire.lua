-- rwlock_write_acquire: take or re-enter the write lock of a read-write lock (Redisson's
-- RReadWriteLock layout); a waiting writer claims its place so new readers queue behind it.
-- KEYS[1]  the lock hash (see rwlock_read_acquire.lua)
-- KEYS[2]  the fencing-token counter, redisson_lock_token:{name}, never expires
-- KEYS[3]  the waiting writers, baton_rwlock_writers:{name} (zset: field -> claim's end)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  writer field, "<client-uuid>:<thread-id>:write"
-- ARGV[3]  the same thread's reader field, "<client-uuid>:<thread-id>"
-- ARGV[4]  claim_ms: a waiting writer's claim stands until server time + this; the waiting
--          client runs this script again at least every claim_ms / 3 (a renewal)
-- ARGV[5]  "1": a wait, claim a place if not acquired; "0": one try, claim nothing
-- ARGV[6]  recheck_ms (optional): the most a refusal for a plain lock asks the caller to
--          sleep (that lock's release publishes on its own channel, which the caller does
--          not hear); absent: the plain lock's whole pttl (or claim_ms / 3, for a wait)
-- Status   the first element of the reply is a baton__acquire_status (src/core/internal.h)
-- Returns  {1, token}  acquired; token = the counter, incremented
--          {2, token}  re-entered by the writer; token unchanged
--          {0, wait}   not acquired (another owner reads or writes, or a plain lock holds
--                      the name); wait = ms to sleep at most before trying again: the
--                      holder's remaining lease, and for a wait at most claim_ms / 3 (-1: none)
--          {3, 0}      refused: this thread holds the read lock (no upgrade; it would
--                      wait for itself)
-- A hash without a 'mode' field is a plain lock's (baton_lock, Redisson's RLock): it is
-- held, and the hash is not written (a wait still claims its place, in KEYS[3]). Redisson's
-- write lock would add 'mode' = 'write' and its field: two holders (docs/rwlock.md).
-- Time is the server's (TIME). A key of another type (or a token that is not an integer)
-- fails with WRONGTYPE (ERR) before anything is written.
local mode = redis.call('hget', KEYS[1], 'mode')
-- The token counter is read before the first write: a key of another type, or a value that
-- is not an integer, fails here (its INCR below would fail after the writes).
local function token()
    local raw = redis.call('get', KEYS[2])
    if raw ~= false and not string.match(raw, '^-?%d+$') then
        return nil
    end
    return tonumber(raw or '0')
end
local free = mode == false and redis.call('exists', KEYS[1]) == 0
if free then
    if token() == nil then
        return redis.error_reply('ERR the fencing-token counter is not an integer')
    end
    -- the claim's ZREM is the first write: it fails by itself on a key of another type
    redis.call('zrem', KEYS[3], ARGV[2])
    redis.call('hset', KEYS[1], 'mode', 'write')
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, redis.call('incr', KEYS[2])}
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    local t = token()
    if t == nil then
        return redis.error_reply('ERR the fencing-token counter is not an integer')
    end
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {2, t}
end
if mode == 'read' and redis.call('hexists', KEYS[1], ARGV[3]) == 1 then
    return {3, 0}
end
local wait = redis.call('pttl', KEYS[1])
if ARGV[5] == '1' then
    local t = redis.call('time')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    redis.call('zadd', KEYS[3], now + tonumber(ARGV[4]), ARGV[2])
    redis.call('pexpire', KEYS[3], ARGV[4])
    local renew = math.max(math.floor(tonumber(ARGV[4]) / 3), 1)
    if wait < 0 or renew < wait then
        wait = renew
    end
end
local recheck = tonumber(ARGV[6])
if mode == false and recheck and (wait < 0 or recheck < wait) then
    wait = recheck
end
return {0, wait}
