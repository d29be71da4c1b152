-- permits_check: whether permits are still held, without touching them: after the master
-- moved (Sentinel), each permit with a fixed lease is checked on the new master.
-- KEYS[i]    the leases zset ({name}:timeout) of the permit ARGV[i]
-- ARGV[i]    a permit id: 32 hex digits
-- Returns    {r1, ..., rn}: ri = 1 the permit's lease is running, 0 it is not (gone, ended,
--            or KEYS[i] is not a zset)
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {}
for i = 1, #KEYS do
    local id = string.gsub(ARGV[i], '..', function(h) return string.char(tonumber(h, 16)) end)
    local score = redis.pcall('zscore', KEYS[i], id)
    out[i] = (type(score) == 'string' and tonumber(score) > now) and 1 or 0
end
return out
