-- permits_available: give back the permits whose lease has ended, then count.
-- KEYS[1]  the semaphore's available permit count (string; absent = 0)
-- KEYS[2]  the leases, {name}:timeout: zset of permit id (16 raw bytes) -> end of lease (ms)
-- KEYS[3]  the channel, redisson_sc:{name}: the new count is published if leases ended
-- Returns  {available, held}: held = leases still running (Redisson's non-expiring permits
--          included). A count that is not an integer, or keys of another type, fail with an
--          error reply before anything is written.
local raw = redis.call('get', KEYS[1])
local value = 0
if raw then
    value = tonumber(raw)
    if not value or not string.match(raw, '^-?%d+$') then
        return redis.error_reply('ERR semaphore permit count is not an integer')
    end
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ended = redis.call('zrangebyscore', KEYS[2], '-inf', now, 'limit', 0, 1000)
if #ended > 0 then
    redis.call('zrem', KEYS[2], unpack(ended))
    value = redis.call('incrby', KEYS[1], #ended)
    if value > 0 then
        redis.pcall('publish', KEYS[3], value)
    end
end
return {value, redis.call('zcard', KEYS[2])}
