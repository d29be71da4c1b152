-- permits_release: give back the permit with this id, once however often the request is sent.
-- flags: allow-oom (it only shrinks or extends what is stored, and writes at most a small
--        request latch with a TTL: it runs at maxmemory under noeviction; Redis >= 7)
-- KEYS[1]  the semaphore's available permit count (string)
-- KEYS[2]  the leases, {name}:timeout: zset of permit id (16 raw bytes) -> end of lease (ms)
-- KEYS[3]  the channel, redisson_sc:{name}: the new count is published
-- KEYS[4]  the request latch, baton_request:{name}:<request-id>: remembers this request's
--          outcome, so a re-send after a lost reply returns it instead of releasing twice
-- ARGV[1]  the permit id: 32 hex digits
-- ARGV[2]  baton's reservation, baton_semaphore_next:{name} (lib/semline.lua)
-- ARGV[3]  baton's line, baton_semaphore_line:{name}: its first waiter is served
-- ARGV[4]  how long the request latch lives, in ms
-- ARGV[5]  "0": the request's first attempt (no latch can exist yet: it is not read);
--          "1" (or absent): a retry
-- Returns  1  given back within its lease
--          2  given back, but its lease had ended (not yet reclaimed by anyone)
--          0  no such permit: never taken, released already, or reclaimed after its lease
--          A count that is not an integer, or keys of another type, fail with an error reply
--          before anything is written.
-- A PUBLISH that the server's ACL refuses (pcall) leaves the writes before it in place: the
-- outcome is then returned inside an error reply, BATON_UNPUBLISHED <outcome> <what>
-- <channel length> <channel> <server's error>, which the library turns back into the
-- outcome with a warning (client.c, unpublished()). A waiter not told finds out at its
-- recheck.
-- uses: publish (lua/lib/publish.lua, put in front of this script by the build)
-- uses: semline
-- uses: line_join
if ARGV[5] ~= '0' then -- a retry: its first attempt may have run
    local done = redis.call('get', KEYS[4])
    if done then
        return tonumber(done)
    end
end
local id = string.gsub(ARGV[1], '..', function(h) return string.char(tonumber(h, 16)) end)
local score = redis.call('zscore', KEYS[2], id)
local out = 0
if score then
    local value = redis.call('incr', KEYS[1])
    redis.call('zrem', KEYS[2], id)
    publish(KEYS[3], value)
    sem_serve(ARGV[2], ARGV[3], KEYS[3], value)
    local t = redis.call('time')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    out = tonumber(score) > now and 1 or 2
end
redis.call('set', KEYS[4], out, 'px', ARGV[4])
return reply(out, 'released')
