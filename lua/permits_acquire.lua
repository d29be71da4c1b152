-- permits_acquire: take n permits at once (all or none), each a lease with its own id
-- (Redisson's RPermitExpirableSemaphore layout), after giving back the permits whose lease
-- has ended.
-- KEYS[1]  the semaphore: a string holding the available permit count (absent = 0 permits)
-- KEYS[2]  the leases, {name}:timeout: a zset of permit id (16 raw bytes) -> end of lease,
--          in the server's milliseconds (TIME)
-- KEYS[3]  the channel, redisson_sc:{name}: the new count is published when leases that
--          ended are given back
-- KEYS[4]  baton's reservation, baton_semaphore_next:{name} (lib/semline.lua: the counting
--          semaphore's line, which the permits share)
-- KEYS[5]  baton's line, baton_semaphore_line:{name}
-- ARGV[1]  the lease in milliseconds (>= 1)
-- ARGV[2]  the waiter, "<n>:<owner>" (its place in the line; it hears its turn on
--          KEYS[3]:<owner>)
-- ARGV[3]  "0": never join the line; "1": join it if it is not empty; "2": join it
-- ARGV[4]  how long the line lasts after its last join or look, in ms
-- ARGV[5..n+4]  the new permits' ids: 32 hex digits each
-- Status   the first element of the reply is a baton__acquire_status (src/core/internal.h)
-- Returns  {1, lease}   taken: every id is in KEYS[2] until now + lease
--          {0, wait}    fewer than n free, nothing taken; wait = ms until the nearest
--                       lease ends (-1: none ends, e.g. only Redisson's non-expiring
--                       permits are out)
--          {3, pttl}    the permits free are reserved for another waiter, pttl ms more
--          {5, rank}    not taken; the caller is in the line, rank waiters before it
--          A count that is not an integer, or keys of another type at KEYS[1] or KEYS[2],
--          fail with an error reply before anything is written; one at KEYS[4] or KEYS[5]
--          is none.
-- uses: semline
-- uses: line_join
local raw = redis.call('get', KEYS[1])
local value = 0
if raw then
    value = tonumber(raw)
    if not value or not string.match(raw, '^-?%d+$') then
        return redis.error_reply('ERR semaphore permit count is not an integer')
    end
end
local t = redis.call('time')
-- now: the server's ms, rounded down (a lease ends once now >= its end); a new end is
-- rounded up, so that no lease is shorter than asked
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local now_up = tonumber(t[1]) * 1000 + math.ceil(tonumber(t[2]) / 1000)
local ended = redis.call('zrangebyscore', KEYS[2], '-inf', now, 'limit', 0, 100)
if #ended > 0 then
    redis.call('zrem', KEYS[2], unpack(ended))
    value = redis.call('incrby', KEYS[1], #ended)
end
local n = #ARGV - 4
-- the ms until the nearest lease ends (-1: none does), for a caller that waits
local function nearest()
    local first = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
    -- 922337203685477: Redisson's score for a permit without a lease
    if first[1] and tonumber(first[2]) < 922337203685477 then
        return tonumber(first[2]) - now
    end
    return -1
end
local ok, lined, out = sem_admit(KEYS[4], KEYS[5], KEYS[3], value, n, ARGV[2], ARGV[3], ARGV[4],
                                nearest)
if not ok then
    return out
end
redis.call('decrby', KEYS[1], n)
local lease_end = now_up + tonumber(ARGV[1])
for i = 5, #ARGV do
    local id = string.gsub(ARGV[i], '..', function(h) return string.char(tonumber(h, 16)) end)
    redis.call('zadd', KEYS[2], lease_end, id)
end
if #ended > 0 and value > n then
    redis.pcall('publish', KEYS[3], value - n)
end
if lined and value > n then
    sem_serve(KEYS[4], KEYS[5], KEYS[3], value - n)
end
return {1, tonumber(ARGV[1])}
