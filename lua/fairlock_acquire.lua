-- fairlock_acquire: take, re-enter, or wait in line for a fair (FIFO) lock.
-- KEYS[1]  the lock: a hash at the lock's name, field <owner> -> hold count, PEXPIRE lease
-- KEYS[2]  the queue of waiting owners, redisson_lock_queue:{name} (a list, head first)
-- KEYS[3]  the waiters' deadlines, redisson_lock_timeout:{name} (a zset, owner -> ms)
-- KEYS[4]  the fencing-token counter, redisson_lock_token:{name}, never expires
-- KEYS[5]  the waiters' channel prefix, redisson_lock__channel:{name}; a waiter listens on
--          <prefix>:<owner>
-- ARGV[1]  lease in milliseconds (PEXPIRE of the hash)
-- ARGV[2]  owner field, "<client-uuid>:<thread-id>"
-- ARGV[3]  fair_wait_ms: a queued owner's place is kept until server time + this, and the
--          waiting client runs this script again well before then (a renewal of its place)
-- ARGV[4]  "1": join the queue (or keep the place) if not acquired; "0": one try, never
--          join the queue
-- Returns  {1, token}  acquired; token is the new fencing token (the counter, incremented)
--          {2, token}  re-entered by the owner; token is unchanged (the outer hold's)
--          {0, wait}   not acquired; wait = how long the waiter may sleep before it runs
--                      this script again, in ms: the least of the holder's remaining lease,
--                      the time left to a head that is not this owner while the lock is
--                      free, and fair_wait_ms / 3
-- Time is the server's (TIME), never a client's. Queued owners whose deadline has passed
-- are dropped from the head of the queue first; if that leaves the lock free with a new
-- head, "0" is published on the new head's channel. When the head takes the lock with a
-- lease shorter than fair_wait_ms, "0" goes to the next waiter, the new head, so that it
-- sleeps no longer than that lease. A key of another type fails with
-- WRONGTYPE before anything is written.
local function kind(key, want)
    local t = redis.call('type', key).ok
    return t == 'none' or t == want
end
if not (kind(KEYS[1], 'hash') and kind(KEYS[2], 'list') and kind(KEYS[3], 'zset') and
        kind(KEYS[4], 'string')) then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local owner = ARGV[2]
local fair_wait = tonumber(ARGV[3])

local purged = false
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
    purged = true
end

local locked = redis.call('exists', KEYS[1]) == 1
if not locked and (head == false or head == owner) then
    local token = redis.call('incr', KEYS[4])
    redis.call('hincrby', KEYS[1], owner, 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    if head == owner then
        redis.call('lpop', KEYS[2])
        redis.call('zrem', KEYS[3], owner)
        -- The next waiter is now the head. It learns the new holder's lease at its next
        -- renewal (at most fair_wait_ms / 3 away); a lease shorter than that could run out
        -- first, unannounced, so it is told to look now.
        local second = redis.call('lindex', KEYS[2], 0)
        if second ~= false and tonumber(ARGV[1]) < fair_wait then
            redis.call('publish', KEYS[5] .. ':' .. second, '0')
        end
    end
    return {1, token}
end
if locked and redis.call('hexists', KEYS[1], owner) == 1 then
    redis.call('hincrby', KEYS[1], owner, 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {2, tonumber(redis.call('get', KEYS[4]) or '0')}
end
if purged and not locked and head ~= false then
    redis.call('publish', KEYS[5] .. ':' .. head, '0')
end

if ARGV[4] == '1' then
    if redis.call('zscore', KEYS[3], owner) == false then
        redis.call('rpush', KEYS[2], owner)
    end
    redis.call('zadd', KEYS[3], now + fair_wait, owner)
    if head == false then
        head = owner
    end
end
local wait = math.floor(fair_wait / 3)
if locked then
    local pttl = redis.call('pttl', KEYS[1])
    if pttl >= 0 and pttl < wait then
        wait = pttl
    end
elseif head ~= owner then
    local left = tonumber(redis.call('zscore', KEYS[3], head)) - now
    if left < wait then
        wait = left
    end
end
if wait < 1 then
    wait = 1
end
return {0, wait}
