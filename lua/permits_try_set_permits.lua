-- permits_try_set_permits: set the number of permits, only if none is set.
-- KEYS[1]  the semaphore's available permit count (string)
-- KEYS[2]  the leases, {name}:timeout (zset)
-- KEYS[3]  the channel, redisson_sc:{name}: the new count is published
-- ARGV[1]  the number of permits (>= 0)
-- Returns  1 set, 0 a count was set already (nothing changed). Leases still in KEYS[2] (the
--          count was deleted while they ran) are subtracted, so that available + held never
--          exceeds ARGV[1] (Redisson sets ARGV[1] as the available count).
if redis.call('exists', KEYS[1]) == 1 then
    return 0
end
local value = tonumber(ARGV[1]) - redis.call('zcard', KEYS[2])
if value < 0 then
    value = 0
end
redis.call('set', KEYS[1], value)
if value > 0 then
    redis.call('publish', KEYS[3], value)
end
return 1
