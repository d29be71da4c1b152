-- barrier_check: a waiting party looks at its generation: tripped, broken, or still
-- waiting (then its lease is renewed, and a party whose lease ran out breaks it); or the
-- party gives up (timeout, cancellation) and breaks it for the others.
-- KEYS[1]  the barrier's state, baton_barrier:{name} (see barrier_arrive)
-- KEYS[2]  the arrivals, baton_barrier_parties:{name}
-- KEYS[3]  the channel, baton_barrier__channel:{name}
-- ARGV[1]  the party's generation
-- ARGV[2]  the party's id
-- ARGV[3]  its lease in ms
-- ARGV[4]  'wait' (look, renew) or 'leave' (give up: break the generation)
-- ARGV[5]  how long the state lives without arrivals, in ms
-- Returns  {1, 0}       the generation tripped
--          {2, 0}       the generation broke (a party died, gave up, or the state is gone)
--          {0, ms}      still waiting; ms = time until the earliest lease of the others
--                       ends (look again by then)
-- uses: barrier_end (lua/lib/barrier_end.lua)
-- uses: publish (lua/lib/publish.lua, put in front of these by the build)
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local mine = tonumber(ARGV[1])
local st = redis.call('hmget', KEYS[1], 'gen', 'b' .. mine)
local gen = tonumber(st[1] or '-1') or -1
if gen > mine then
    if st[2] then
        return {2, 0}
    end
    return {1, 0}
end
if gen < mine or redis.call('hexists', KEYS[2], ARGV[2]) == 0 then
    return {2, 0}
end
local broken = ARGV[4] == 'leave'
local earliest = -1
if not broken then
    local all = redis.call('hgetall', KEYS[2])
    for i = 1, #all, 2 do
        local d = tonumber(all[i + 1])
        if all[i] ~= ARGV[2] then
            if d < now then
                broken = true
            elseif earliest < 0 or d - now < earliest then
                earliest = d - now
            end
        end
    end
end
if broken then
    barrier_end(gen, true, nil)
    redis.call('pexpire', KEYS[1], ARGV[5])
    return {2, 0}
end
redis.call('hset', KEYS[2], ARGV[2], now + tonumber(ARGV[3]))
redis.call('pexpire', KEYS[1], ARGV[5])
redis.call('pexpire', KEYS[2], ARGV[5])
return {0, earliest}
