-- permits_try_set_permits: set the number of permits, only if none is set.
-- KEYS[1]  the semaphore's available permit count (string)
-- KEYS[2]  the leases, {name}:timeout (zset)
-- KEYS[3]  the channel, redisson_sc:{name}: the new count is published
-- ARGV[1]  the number of permits (>= 0)
-- ARGV[2]  baton's reservation, baton_semaphore_next:{name} (lib/semline.lua)
-- ARGV[3]  baton's line, baton_semaphore_line:{name}: its first waiter is served (waiters
--          may have queued before the count was set)
-- Returns  1 set, 0 a count was set already (nothing changed). Leases still in KEYS[2] (the
--          count was deleted while they ran) are subtracted, so that available + held never
--          exceeds ARGV[1] (Redisson sets ARGV[1] as the available count).
-- A PUBLISH that the server's ACL refuses (pcall) leaves the writes before it in place: the
-- outcome is then returned inside an error reply, BATON_UNPUBLISHED <outcome> <what>
-- <channel length> <channel> <server's error>, which the library turns back into the
-- outcome with a warning (client.c, unpublished()). A waiter not told finds out at its
-- recheck.
-- uses: publish (lua/lib/publish.lua, put in front of this script by the build)
-- uses: semline
-- uses: line_join
if redis.call('exists', KEYS[1]) == 1 then
    return 0
end
local value = tonumber(ARGV[1]) - redis.call('zcard', KEYS[2])
if value < 0 then
    value = 0
end
redis.call('set', KEYS[1], value)
if value > 0 then
    publish(KEYS[3], value)
    sem_serve(ARGV[2], ARGV[3], KEYS[3], value)
end
return reply(1, 'set')
