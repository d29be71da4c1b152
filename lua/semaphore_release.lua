-- semaphore_release: return ARGV[1] permits and publish the new count (Redisson's layout:
-- waiters wake as many of themselves as the new count can serve); the line's first waiter,
-- if any, gets the permits reserved and is told on its own channel (lib/semline.lua).
-- flags: allow-oom (it only shrinks or extends what is stored, and writes at most a small
--        request latch with a TTL and a reservation of SEM_RESERVE_MS: it runs at maxmemory
--        under noeviction; Redis >= 7)
-- KEYS[1]  the semaphore: a string holding the permit count; created if absent (Redisson)
-- KEYS[2]  its channel, redisson_sc:{name}
-- KEYS[3]  the request latch, baton_request:{name}:<request-id>: remembers this request's
--          outcome, so a re-send after a lost reply returns it instead of releasing twice
-- ARGV[1]  permits to return (>= 1)
-- ARGV[2]  baton's reservation, baton_semaphore_next:{name} (lib/semline.lua)
-- ARGV[3]  baton's line, baton_semaphore_line:{name} (lib/semline.lua): reached with
--          redis.pcall, as the lock's release reaches its line
-- ARGV[4]  how long the request latch lives, in ms
-- ARGV[5]  "0": the request's first attempt (no latch can exist yet: it is not read);
--          "1" (or absent): a retry
-- Returns  the new permit count (a re-sent request: the count its first run returned).
--          A key of another type, or a string that is not an integer, fails with an error
--          reply (WRONGTYPE / ERR) and is left untouched; so does an overflow (INCRBY's).
-- A PUBLISH that the server's ACL refuses (pcall) leaves the writes before it in place: the
-- outcome is then returned inside an error reply, BATON_UNPUBLISHED <outcome> <what>
-- <channel length> <channel> <server's error>, which the library turns back into the
-- outcome with a warning (client.c, unpublished()). A waiter not told finds out at its
-- recheck.
-- uses: publish (lua/lib/publish.lua, put in front of this script by the build)
-- uses: semline
-- uses: line_join
-- A first attempt is 4 commands with no line: INCRBY, PUBLISH, EXISTS of the line, SET of
-- the latch. With a line and no reservation, its first waiter is served (ZRANGE, ZREM,
-- SET of the reservation, PUBLISH on its own channel).
if ARGV[5] ~= '0' then
    local done = redis.call('get', KEYS[3])
    if done ~= false then
        return tonumber(done)
    end
end
-- INCRBY is the first write and checks what the key holds itself: another type
-- (WRONGTYPE), a string that is not an integer or an overflow (ERR ... not an integer or
-- out of range) fail it before anything is written.
local value = redis.call('incrby', KEYS[1], ARGV[1])
publish(KEYS[2], value)
sem_serve(ARGV[2], ARGV[3], KEYS[2], value)
redis.call('set', KEYS[3], value, 'px', ARGV[4])
return reply(value, 'released')
