-- hold_check: whether holds still exist, without touching them: after the master moved
-- (Sentinel), each hold with a lease of its own is checked on the new master.
-- KEYS[i]    a lock hash
-- ARGV[i]    the owner field whose hold on KEYS[i] is checked
-- Returns    {r1, ..., rn}: ri = 1 the owner still holds KEYS[i], 0 it does not
local out = {}
for i = 1, #KEYS do
    out[i] = redis.pcall('hexists', KEYS[i], ARGV[i]) == 1 and 1 or 0
end
return out
