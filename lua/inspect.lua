-- inspect: one atomic, read-only snapshot of what lives at a name (baton_inspect).
-- KEYS[1]  the name: a lock's hash, or a semaphore's permits / a latch's count (a string)
-- KEYS[2]  redisson_lock_queue:{name}, the fair lock's queue (a list)
-- KEYS[3]  redisson_lock_timeout:{name}, the fair lock's waiter deadlines (a zset)
-- KEYS[4]  redisson_lock_token:{name}, the fencing-token counter (a string)
-- KEYS[5]  baton_lock_meta:{name}, baton's side hash: holder owner -> "host:pid"
-- KEYS[6]  {name}:timeout, permit leases: permit id (16 raw bytes) -> lease end (a zset)
-- KEYS[7]  baton_lock_line:{name}, the plain lock's starved waiters (a zset, by join time)
-- KEYS[8]  baton_lock_next:{name}, the plain lock's reservation: the owner a free lock is
--          kept for (a string with a TTL)
-- KEYS[9]  baton_semaphore_line:{name}, the semaphore's starved waiters ("<permits>:<owner>",
--          a zset, by join time)
-- KEYS[10] baton_semaphore_next:{name}, the semaphore's reservation ("<permits>:<owner>")
-- ARGV[1]  the lock's channel, ARGV[2] the semaphore's, ARGV[3] the latch's
-- Returns  {type, pttl, fields, value, queue, deadlines, token, time, numsub, origins,
--           leases, line, reserved, semline}:
--          type      the name's TYPE ("none", "hash", "string", ...)
--          pttl      its PTTL (-2 absent, -1 no expiry)
--          fields    a hash's HGETALL (owner, holds, ...), else nil
--          value     a string's value, else nil
--          queue     LRANGE of KEYS[2] ({} unless a list)
--          deadlines ZRANGE WITHSCORES of KEYS[3] ({} unless a zset)
--          token     GET of KEYS[4] (nil unless a string)
--          time      the server's TIME {seconds, microseconds}
--          numsub    PUBSUB NUMSUB of the three channels {ch, n, ch, n, ch, n}
--          origins   HGETALL of KEYS[5] ({} unless a hash)
--          leases    ZRANGE WITHSCORES of KEYS[6] from now on ({} unless a zset)
--          line      ZRANGE of KEYS[7], first come first ({} unless a zset)
--          reserved  {"lock", owner, pttl} from KEYS[8] or {"semaphore", member, pttl} from
--                    KEYS[10], whichever is a string (the lock's first); {} when neither
--          semline   ZRANGE of KEYS[9], first come first ({} unless a zset)
-- Auxiliary keys of an unexpected type read as absent rather than failing the snapshot.
local function type_of(key)
    return redis.call('type', key)['ok']
end
local t = type_of(KEYS[1])
local fields, value = false, false
if t == 'hash' then
    fields = redis.call('hgetall', KEYS[1])
elseif t == 'string' then
    value = redis.call('get', KEYS[1])
end
local queue, deadlines, token, origins = {}, {}, false, {}
if type_of(KEYS[2]) == 'list' then
    queue = redis.call('lrange', KEYS[2], 0, -1)
end
if type_of(KEYS[3]) == 'zset' then
    deadlines = redis.call('zrange', KEYS[3], 0, -1, 'withscores')
end
if type_of(KEYS[4]) == 'string' then
    token = redis.call('get', KEYS[4])
end
if type_of(KEYS[5]) == 'hash' then
    origins = redis.call('hgetall', KEYS[5])
end
local now = redis.call('time')
local leases = {}
if type_of(KEYS[6]) == 'zset' then
    local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
    leases = redis.call('zrangebyscore', KEYS[6], '(' .. ms, '+inf', 'withscores')
end
local line = {}
if type_of(KEYS[7]) == 'zset' then
    line = redis.call('zrange', KEYS[7], 0, -1)
end
local reserved = {}
if type_of(KEYS[8]) == 'string' then
    reserved = {'lock', redis.call('get', KEYS[8]), redis.call('pttl', KEYS[8])}
elseif type_of(KEYS[10]) == 'string' then
    reserved = {'semaphore', redis.call('get', KEYS[10]), redis.call('pttl', KEYS[10])}
end
local semline = {}
if type_of(KEYS[9]) == 'zset' then
    semline = redis.call('zrange', KEYS[9], 0, -1)
end
return {t, redis.call('pttl', KEYS[1]), fields, value, queue, deadlines, token,
        now, redis.call('pubsub', 'numsub', ARGV[1], ARGV[2], ARGV[3]), origins, leases, line,
        reserved, semline}
