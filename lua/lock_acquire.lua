-- lock_acquire: take or re-enter a reentrant lock (Redisson's RLock layout), with a
-- reservation for a waiter that has waited too long (baton's starvation bound).
-- KEYS[1]  the lock: a hash at the lock's name, field <owner> -> hold count
-- KEYS[2]  the fencing-token counter, redisson_lock_token:{name}, never expires
-- KEYS[3]  baton's reservation baton_lock_next:{name}: the owner field of the one waiter
--          the next free lock goes to, with a short life (ARGV[4]); Redisson's clients do
--          not know it (they may still take a free lock first: they did before, too)
-- ARGV[1]  lease in milliseconds (PEXPIRE of the hash)
-- ARGV[2]  owner field, "<client-uuid>:<thread-id>"
-- ARGV[3]  "1": the caller has waited past the starvation bound and may reserve; "0": not
-- ARGV[4]  how long a reservation lasts, in ms (renewed by each attempt of its waiter)
-- Returns  {1, token}  acquired; token is the new fencing token (the counter, incremented)
--          {2, token}  re-entered by the owner; token is unchanged (the outer hold's)
--          {0, pttl}   held by another owner; pttl = its remaining lease in ms (-1: none)
--          {3, pttl}   free, but reserved for another waiter for pttl ms more
--          {4, pttl}   held by another owner, and reserved for the caller: pttl as {0}
-- A key of another type at KEYS[1] or KEYS[2] (or a token that is not an integer) fails
-- with WRONGTYPE (ERR) before anything is written; one at KEYS[3] is no reservation. Uncontended, this is 4 commands: EXISTS (of the lock and
-- the reservation in one), INCR, HINCRBY, PEXPIRE.
local function take()
    local token = redis.call('incr', KEYS[2])
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, token}
end
local present = redis.call('exists', KEYS[1], KEYS[3])
if present == 0 then
    return take()
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    -- the token is read before the first write: a key of another type fails here
    local token = redis.call('get', KEYS[2])
    if token ~= false and not string.match(token, '^-?%d+$') then
        return redis.error_reply('ERR the fencing-token counter is not an integer')
    end
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {2, tonumber(token or '0')}
end
-- a reservation of another type is none, and is left alone (pcall)
local next = redis.pcall('get', KEYS[3])
local reserved = type(next) == 'string'
if present == 1 and next ~= false then
    -- the lock is free: only the reservation (or a key of another type there) exists
    if not reserved then
        return take()
    end
    if next == ARGV[2] then
        redis.call('del', KEYS[3])
        return take()
    end
    return {3, redis.call('pttl', KEYS[3])}
end
-- held by another owner
if next == ARGV[2] or (next == false and ARGV[3] == '1') then
    redis.call('set', KEYS[3], ARGV[2], 'px', ARGV[4])
    return {4, redis.call('pttl', KEYS[1])}
end
return {0, redis.call('pttl', KEYS[1])}
