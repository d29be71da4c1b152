-- permits_acquire: take n permits at once (all or none), each a lease with its own id
-- (Redisson's RPermitExpirableSemaphore layout), after giving back the permits whose lease
-- has ended.
-- KEYS[1]  the semaphore: a string holding the available permit count (absent = 0 permits)
-- KEYS[2]  the leases, {name}:timeout: a zset of permit id (16 raw bytes) -> end of lease,
--          in the server's milliseconds (TIME)
-- KEYS[3]  the channel, redisson_sc:{name}: the new count is published when leases that
--          ended are given back
-- ARGV[1]  the lease in milliseconds (>= 1)
-- ARGV[2..n+1]  the new permits' ids: 32 hex digits each
-- Returns  {1, lease}   taken: every id is in KEYS[2] until now + lease
--          {0, wait}    fewer than n free, nothing taken; wait = ms until the nearest
--                       lease ends (-1: none ends, e.g. only Redisson's non-expiring
--                       permits are out)
--          A count that is not an integer, or keys of another type, fail with an error reply
--          before anything is written.
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
local n = #ARGV - 1
if value >= n then
    redis.call('decrby', KEYS[1], n)
    local lease_end = now_up + tonumber(ARGV[1])
    for i = 2, #ARGV do
        local id = string.gsub(ARGV[i], '..', function(h) return string.char(tonumber(h, 16)) end)
        redis.call('zadd', KEYS[2], lease_end, id)
    end
    if #ended > 0 and value > n then
        redis.pcall('publish', KEYS[3], value - n)
    end
    return {1, tonumber(ARGV[1])}
end
local first = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
-- 922337203685477: Redisson's score for a permit without a lease
if first[1] and tonumber(first[2]) < 922337203685477 then
    return {0, tonumber(first[2]) - now}
end
return {0, -1}
