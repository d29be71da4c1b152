-- lock_force_release: delete a lock whoever holds it, and wake a waiter.
-- KEYS[1]  the lock hash
-- KEYS[2]  the lock's channel
-- KEYS[3]  baton's reservation baton_lock_next:{name} (lib/line.lua), deleted too
-- KEYS[4]  baton's line baton_lock_line:{name} (lib/line.lua): its first waiter gets the
--          reservation and is told
-- ARGV[1]  the unlock message, "0"
-- Returns  1 the lock was held and is deleted, 0 it was not held.
--          A key of another type fails with WRONGTYPE and is left untouched.
-- A PUBLISH that the server's ACL refuses (pcall) leaves the writes before it in place: the
-- outcome is then returned inside an error reply, BATON_UNPUBLISHED <outcome> <what>
-- <channel length> <channel> <server's error>, which the library turns back into the
-- outcome with a warning (client.c, unpublished()). A waiter not told finds out at its
-- recheck.
-- uses: publish
-- uses: line
local t = redis.call('type', KEYS[1]).ok
if t == 'none' then
    return 0
end
if t ~= 'hash' then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
redis.call('del', KEYS[1], KEYS[3])
publish(KEYS[2], ARGV[1])
promote(KEYS[3], KEYS[4], KEYS[2], nil)
return reply(1, 'force_released')
