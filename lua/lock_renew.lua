-- lock_renew: the watchdog's batched lease renewal, one call for up to 100 holds.
-- KEYS[i]    a lock hash (plain or fair lock)
-- ARGV[1]    the lease in milliseconds
-- ARGV[1+i]  the owner field whose hold on KEYS[i] is renewed
-- Returns    {r1, ..., rn}: ri = 1 renewed, 0 the owner no longer holds KEYS[i] (deleted,
--            expired, taken over, or the key is no longer a hash); renewal of it stops
local out = {}
for i = 1, #KEYS do
    if redis.pcall('hexists', KEYS[i], ARGV[i + 1]) == 1 then
        redis.call('pexpire', KEYS[i], ARGV[1])
        out[i] = 1
    else
        out[i] = 0
    end
end
return out
