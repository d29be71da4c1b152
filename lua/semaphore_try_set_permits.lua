-- semaphore_try_set_permits: set the permit count only if none is set (Redisson's RSemaphore).
-- KEYS[1]  the semaphore: a string at the semaphore's name holding the permit count
-- KEYS[2]  its channel, redisson_sc:{name}
-- ARGV[1]  the permit count to set (>= 0)
-- ARGV[2]  baton's reservation, baton_semaphore_next:{name} (lib/semline.lua)
-- ARGV[3]  baton's line, baton_semaphore_line:{name}: its first waiter is served, as by a
--          release (waiters may have queued before the count was set)
-- Returns  1  the count was absent and is now ARGV[1] (published when > 0, to wake waiters)
--          0  a count was already set; nothing changed
--          A key of another type fails with WRONGTYPE and is left untouched.
-- A PUBLISH that the server's ACL refuses (pcall) leaves the writes before it in place: the
-- outcome is then returned inside an error reply, BATON_UNPUBLISHED <outcome> <what>
-- <channel length> <channel> <server's error>, which the library turns back into the
-- outcome with a warning (client.c, unpublished()). A waiter not told finds out at its
-- recheck.
-- uses: publish (lua/lib/publish.lua, put in front of this script by the build)
-- uses: semline
-- uses: line_join
local t = redis.call('type', KEYS[1]).ok
if t == 'string' then
    return 0
end
if t ~= 'none' then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
redis.call('set', KEYS[1], ARGV[1])
if tonumber(ARGV[1]) > 0 then
    publish(KEYS[2], ARGV[1])
    sem_serve(ARGV[2], ARGV[3], KEYS[2], tonumber(ARGV[1]))
end
return reply(1, 'set')
