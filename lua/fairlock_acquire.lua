-- fairlock_acquire: take, re-enter, or wait in line for a fair (FIFO) lock.
-- KEYS[1]  the lock: a hash at the lock's name, field <owner> -> hold count, PEXPIRE lease
-- KEYS[2]  the queue of waiting owners, redisson_lock_queue:{name} (a list, head first)
-- KEYS[3]  the waiters' deadlines, redisson_lock_timeout:{name} (a zset, owner -> ms)
-- KEYS[4]  the fencing-token counter, redisson_lock_token:{name}, never expires
-- KEYS[5]  the waiters' channel prefix, redisson_lock__channel:{name}; a waiter listens on
--          <prefix>:<owner>
-- KEYS[6]  baton's older side hash baton_lock_meta:{name}: no longer written (issue 49: the
--          client's record, baton_client:{<id>}, has the holder's host and pid); named so
--          that the key list stays the same
-- ARGV[1]  lease in milliseconds (PEXPIRE of the hash)
-- ARGV[2]  owner field, "<client-uuid>:<thread-id>"
-- ARGV[3]  fair_wait_ms: a queued owner's place is kept until server time + this, and the
--          waiting client runs this script again well before then (a renewal of its place)
-- ARGV[4]  "0": one try, never join the queue; "1": the first run of a wait: join the queue
--          if not acquired; "2": a later run of the same wait (after subscribing, after a
--          wake-up, or when its bound ran out): keep the place. "2" is a hint only: a run
--          that finds the owner not queued joins the queue as "1" does. "3": as "2", for
--          a run woken by a message (its turn told: the head, most likely); a hint too.
-- Status   the first element of the reply is a baton__acquire_status (src/core/internal.h)
-- Returns  {1, token}  acquired; token is the new fencing token (the counter, incremented)
--          {2, token}  re-entered by the owner; token is unchanged (the outer hold's)
--          {0, wait}   not acquired; wait = how long the waiter may sleep before it runs
--                      this script again, in ms (>= 1): the least of fair_wait_ms / 3, the
--                      holder's remaining lease when the owner is the head, and the time
--                      left to the head's deadline when the head is someone else
-- Time is the server's (TIME), never a client's. Queued owners whose deadline has passed
-- are dropped from the head of the queue; if that leaves the lock free with a new head, "0"
-- is published on the new head's channel. When the head takes the lock with a lease
-- shorter than fair_wait_ms, "0" goes to the next waiter, the new head, so that it sleeps
-- no longer than that lease. A key of another type fails with WRONGTYPE and nothing is
-- written.
--
-- Cost: the common cases run on fast paths of 3 to 7 commands that check no key's type
-- ahead: the first
-- command on each key is one that fails with WRONGTYPE by itself, before any write (the
-- one write that may come first, the token's INCR, is undone if the deadline set then
-- turns out to be of another type). Anything unusual (a lapsed head, a place lost, a
-- one-try that finds others queued) takes the general path below, which checks every
-- key's type with TYPE first.
local owner = ARGV[2]
local fair_wait = tonumber(ARGV[3])
local mode = ARGV[4]
local third = math.floor(fair_wait / 3)
if third < 1 then
    third = 1
end

local function server_now()
    local t = redis.call('time')
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Not acquired: {0, wait}, wait = fair_wait_ms / 3 or the limit if less, at least 1 ms.
local function bound(limit)
    local wait = third
    if limit ~= nil and limit < wait then
        wait = limit
    end
    if wait < 1 then
        wait = 1
    end
    return {0, wait}
end

-- The general path: every case, with every key's type checked first.
local function general()
    local function kind(key, want)
        local t = redis.call('type', key).ok
        return t == 'none' or t == want
    end
    if not (kind(KEYS[1], 'hash') and kind(KEYS[2], 'list') and kind(KEYS[3], 'zset') and
            kind(KEYS[4], 'string')) then
        return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
    end
    local raw = redis.call('get', KEYS[4])
    if raw ~= false and not string.match(raw, '^-?%d+$') then
        return redis.error_reply('ERR the fencing-token counter is not an integer')
    end
    local now = server_now()
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
                redis.pcall('publish', KEYS[5] .. ':' .. second, '0')
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
        redis.pcall('publish', KEYS[5] .. ':' .. head, '0')
    end

    if mode ~= '0' then
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
    return bound(wait)
end

-- The hold, once the token is taken (and the owner left the queue: dequeued).
local function hold(token, dequeued)
    redis.call('hincrby', KEYS[1], owner, 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    if dequeued and tonumber(ARGV[1]) < fair_wait then
        -- The next waiter is now the head. It learns the new holder's lease at its next
        -- renewal (at most fair_wait_ms / 3 away); a lease shorter than that could run out
        -- first, unannounced, so it is told to look now.
        local second = redis.call('lindex', KEYS[2], 0)
        if second ~= false then
            redis.pcall('publish', KEYS[5] .. ':' .. second, '0')
        end
    end
    return {1, token}
end

-- A new hold, the lock being free (PTTL -2: no key, so no type to check). The token's INCR
-- is the first write and checks the token's type itself; the deadline set's type is known
-- only from the ZREM that follows, which undoes the INCR if it fails.
local function take(dequeue)
    local token = redis.call('incr', KEYS[4])
    if dequeue then
        local removed = redis.pcall('zrem', KEYS[3], owner)
        if type(removed) == 'table' and removed.err then
            if token == 1 then
                redis.call('del', KEYS[4])
            else
                redis.call('decr', KEYS[4])
            end
            return redis.error_reply(removed.err .. ' (ZREM ' .. KEYS[3] .. ')')
        end
        redis.call('lpop', KEYS[2])
    end
    return hold(token, dequeue)
end

-- Re-entry (the lock's type is known from HEXISTS); GET reads the token's type first.
local function reenter()
    local raw = redis.call('get', KEYS[4])
    if raw ~= false and not string.match(raw, '^-?%d+$') then
        return redis.error_reply('ERR the fencing-token counter is not an integer')
    end
    local token = tonumber(raw or '0')
    redis.call('hincrby', KEYS[1], owner, 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {2, token}
end

-- A run woken by its turn's message (mode "3"): only the queue's head is told (a release,
-- a purge of lapsed heads, a head that gave up), or every waiter at a force release, which
-- empties the queue. With the lock free, the owner takes it and leaves the queue without
-- reading its head (LINDEX): LREM of its first occurrence, at the head, stops there. PTTL
-- first: -2 means no key, so none of another type; then INCR (the token's type), LREM (the
-- queue's: the INCR is undone if it fails or if the owner is not queued any more, and the
-- run goes on below), ZREM (the deadline set's: both are undone if it fails; the owner goes
-- back at the queue's tail, where it was the only one when nothing else went wrong).
local function undo_incr(token)
    if token == 1 then
        redis.call('del', KEYS[4])
    else
        redis.call('decr', KEYS[4])
    end
end
local pttl_read
if mode == '3' then
    mode = '2'
    pttl_read = redis.call('pttl', KEYS[1])
    if pttl_read == -2 then
        local token = redis.pcall('incr', KEYS[4])
        if type(token) == 'table' then
            return token
        end
        local left = redis.pcall('lrem', KEYS[2], 1, owner)
        if type(left) == 'table' or left == 0 then
            -- not queued, or refused (an ACL without LREM; a key of another type, which
            -- the LINDEX below reports): nothing written, the run goes on as mode "2"
            undo_incr(token)
        else
            local removed = redis.pcall('zrem', KEYS[3], owner)
            if type(removed) == 'table' then
                undo_incr(token)
                redis.call('rpush', KEYS[2], owner)
                return redis.error_reply(removed.err .. ' (ZREM ' .. KEYS[3] .. ')')
            end
            return hold(token, true)
        end
    end
end

local head = redis.call('lindex', KEYS[2], 0) -- fails with WRONGTYPE if not a list

if head == false or head == owner then
    -- The owner's turn if the lock is free. A head that runs this script is alive: its
    -- own deadline is not looked at.
    local pttl = pttl_read or redis.call('pttl', KEYS[1])
    if pttl == -2 then
        return take(head == owner)
    end
    if redis.call('hexists', KEYS[1], owner) == 1 then
        return reenter()
    end
    if mode == '0' then
        return {0, 1}
    end
    -- Held by another: wait as the head, bounded by the holder's lease.
    local now = server_now()
    redis.call('zadd', KEYS[3], now + fair_wait, owner)
    if head == false then
        redis.call('rpush', KEYS[2], owner)
    end
    if pttl >= 0 then
        return bound(pttl)
    end
    return bound(nil)
end

-- Another owner is at the head: not the owner's turn, whatever the lock's state.
if mode == '2' then
    -- A later run of a wait: keep the place, and look at the head's deadline.
    local now = server_now()
    local d = redis.call('zmscore', KEYS[3], head, owner)
    local head_deadline, own_deadline = tonumber(d[1]), tonumber(d[2])
    if head_deadline ~= nil and head_deadline >= now and own_deadline ~= nil then
        -- A place renewed within the last fair_wait_ms / 20 (by this wait's first run,
        -- just before the subscription) is not renewed again.
        if own_deadline - now < fair_wait - math.floor(fair_wait / 20) then
            redis.call('zadd', KEYS[3], now + fair_wait, owner)
        end
        return bound(head_deadline - now)
    end
else
    if redis.call('hexists', KEYS[1], owner) == 1 then
        return reenter()
    end
    -- The first run of a wait joins at the tail. The head's deadline is looked at by the
    -- run that follows at once, after subscribing, or (a wait whose own channel's
    -- subscription lingered from its last wait: no such run) by its next run, within
    -- fair_wait_ms / 3.
    if mode == '1' and redis.call('zadd', KEYS[3], 'nx', server_now() + fair_wait, owner) == 1 then
        redis.call('rpush', KEYS[2], owner)
        return bound(nil)
    end
end
return general()
