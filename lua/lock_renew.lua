-- lock_renew: the watchdog's batched lease renewal, one call for up to 100 holds.
-- KEYS[i]    a lock hash (plain or fair lock)
-- ARGV[1]    the lease in milliseconds
-- ARGV[1+i]  the owner field whose hold on KEYS[i] is renewed
-- Returns    {r1, ..., rn}: ri = 1 renewed, 0 the owner no longer holds KEYS[i] (deleted,
--            expired, taken over, or the key is no longer a hash); renewal of it stops
-- Each renewed lock's side hash baton_lock_meta:{name} (its holders' "host:pid", written by
-- the acquire scripts) gets the same lease. Its name is made here from KEYS[i] with the
-- hash-tag rule of baton__derive_key rather than passed, so the watchdog's batches stay as
-- they are; it shares KEYS[i]'s hash slot, so a Cluster node serves both.
local function meta_key(name)
    if string.find(name, '{', 1, true) then
        return 'baton_lock_meta:' .. name
    end
    return 'baton_lock_meta:{' .. name .. '}'
end
local out = {}
for i = 1, #KEYS do
    if redis.pcall('hexists', KEYS[i], ARGV[i + 1]) == 1 then
        redis.call('pexpire', KEYS[i], ARGV[1])
        redis.pcall('pexpire', meta_key(KEYS[i]), ARGV[1])
        out[i] = 1
    else
        out[i] = 0
    end
end
return out
