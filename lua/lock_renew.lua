-- lock_renew: the watchdog's batched lease renewal, one call for up to 100 holds.
-- KEYS[i]    a lock hash (plain, fair, or read-write lock)
-- ARGV[1]    the lease in milliseconds
-- ARGV[1+i]  the owner field whose hold on KEYS[i] is renewed
-- Returns    {r1, ..., rn}: ri = 1 renewed, 0 the owner no longer holds KEYS[i] (deleted,
--            expired, taken over, or the key is no longer a hash); renewal of it stops
-- Each renewed lock's side hash baton_lock_meta:{name} (its holders' "host:pid", written by
-- the acquire scripts) gets the same lease. Its name is made here from KEYS[i] with the
-- hash-tag rule of baton__derive_key rather than passed, so the watchdog's batches stay as
-- they are; it shares KEYS[i]'s hash slot, so a Cluster node serves both.
-- A read hold of a read-write lock (a hash with a 'mode' field, an owner without ":write")
-- also has one timeout key per hold, {name}:<owner>:rwlock_timeout:<n> (Redisson's
-- layout), which a read release reads to decide the hash's lease: those of this owner are
-- renewed too. Only hashes with more than one field pay for the check (a plain lock has one).
-- uses: keys (lua/lib/keys.lua, put in front of this script by the build)
local function tagged(name)
    if string.find(name, '{', 1, true) then
        return name
    end
    return '{' .. name .. '}'
end
local out = {}
for i = 1, #KEYS do
    if redis.pcall('hexists', KEYS[i], ARGV[i + 1]) == 1 then
        redis.call('pexpire', KEYS[i], ARGV[1])
        redis.pcall('pexpire', KEY_LOCK_META .. tagged(KEYS[i]), ARGV[1])
        out[i] = 1
        local owner = ARGV[i + 1]
        if redis.call('hlen', KEYS[i]) > 1 and redis.call('hexists', KEYS[i], 'mode') == 1
            and string.sub(owner, -6) ~= ':write' then
            local holds = tonumber(redis.call('hget', KEYS[i], owner)) or 0
            for n = holds, 1, -1 do
                redis.call('pexpire', tagged(KEYS[i]) .. ':' .. owner .. KEY_RWLOCK_TIMEOUT .. n,
                    ARGV[1])
            end
        end
    else
        out[i] = 0
    end
end
return out
