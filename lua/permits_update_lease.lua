-- permits_update_lease: a held permit's lease becomes ARGV[2] ms from the server's now.
-- flags: allow-oom (it only shrinks or extends what is stored, and writes at most a small
--        request latch with a TTL: it runs at maxmemory under noeviction; Redis >= 7)
-- KEYS[1]  the leases, {name}:timeout: zset of permit id (16 raw bytes) -> end of lease (ms)
-- ARGV[1]  the permit id: 32 hex digits
-- ARGV[2]  the new lease in milliseconds (>= 1)
-- Returns  1 updated; 0 no such permit, or its lease had ended (it is not brought back)
local id = string.gsub(ARGV[1], '..', function(h) return string.char(tonumber(h, 16)) end)
local score = redis.call('zscore', KEYS[1], id)
local t = redis.call('time')
-- now: the server's ms, rounded down (a lease ends once now >= its end); a new end is
-- rounded up, so that no lease is shorter than asked
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local now_up = tonumber(t[1]) * 1000 + math.ceil(tonumber(t[2]) / 1000)
if score and tonumber(score) > now then
    redis.call('zadd', KEYS[1], now_up + tonumber(ARGV[2]), id)
    return 1
end
return 0
