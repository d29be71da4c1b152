-- permits_renew: the watchdog's batched lease renewal of permits, one call for up to 100.
-- flags: allow-oom (it only shrinks or extends what is stored, and writes at most a small
--        request latch with a TTL: it runs at maxmemory under noeviction; Redis >= 7)
-- KEYS[i]    the leases zset ({name}:timeout) of the permit ARGV[1+i]
-- ARGV[1]    the new lease in milliseconds, from the server's now
-- ARGV[1+i]  a permit id: 32 hex digits
-- Returns    {r1, ..., rn}: ri = 1 renewed; 0 the permit is gone (released, reclaimed, its
--            lease ended already, or KEYS[i] is not a zset): renewal of it stops, and a
--            lease that ended is never brought back
local t = redis.call('time')
-- now: the server's ms, rounded down (a lease ends once now >= its end); a new end is
-- rounded up, so that no lease is shorter than asked
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local now_up = tonumber(t[1]) * 1000 + math.ceil(tonumber(t[2]) / 1000)
local out = {}
for i = 1, #KEYS do
    local id = string.gsub(ARGV[i + 1], '..', function(h) return string.char(tonumber(h, 16)) end)
    local score = redis.pcall('zscore', KEYS[i], id)
    if type(score) == 'string' and tonumber(score) > now then
        redis.call('zadd', KEYS[i], now_up + tonumber(ARGV[1]), id)
        out[i] = 1
    else
        out[i] = 0
    end
end
return out
