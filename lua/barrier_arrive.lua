-- barrier_arrive: a party arrives at a cyclic barrier; the N-th arrival trips the
-- generation (every party of it returns) and starts the next.
-- KEYS[1]  the barrier's state, baton_barrier:{name}: a hash: parties, gen (the current
--          generation), count (arrivals in it), b<G> = 1 for each broken generation G
--          (the last 64 kept)
-- KEYS[2]  the arrivals, baton_barrier_parties:{name}: a hash party -> lease end (server
--          time, ms)
-- KEYS[3]  the channel, baton_barrier__channel:{name}: "0" when a generation trips or
--          breaks (every waiter looks again)
-- ARGV[1]  the number of parties
-- ARGV[2]  the arriving party's id
-- ARGV[3]  the arrival's lease in ms (renewed by barrier_check while the party waits)
-- ARGV[4]  how long the state lives without arrivals, in ms
-- Returns  {1, index, gen}  this arrival tripped generation gen (index = parties - 1)
--          {0, index, gen}  arrived as index (0-based) in generation gen: wait
--          {2, index, gen}  (an arrival sent again) generation gen broke since
--          {-1, parties, gen}  a generation in progress has another number of parties
-- An arrival whose generation holds a party whose lease ran out (it died) breaks that
-- generation first (its waiters are told) and arrives in the next.
-- The same party id sent again (its reply was lost) is not counted twice: its record
-- a:<party> (lua/lib/barrier_end.lua) says where it arrived, and the answer is what became
-- of that generation.
-- uses: barrier_end (lua/lib/barrier_end.lua)
-- uses: publish (lua/lib/publish.lua, put in front of these by the build)
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- every key it writes is read first: a key of another type fails before any write
redis.call('hlen', KEYS[2])
local st = redis.call('hmget', KEYS[1], 'parties', 'gen', 'count', 'a:' .. ARGV[2])
local gen = tonumber(st[2] or '0') or 0
local count = tonumber(st[3] or '0') or 0
if st[4] then
    local g, i = string.match(st[4], '^(%d+):(%d+)$')
    g, i = tonumber(g), tonumber(i)
    if g == gen then
        return {0, i, g}
    end
    if redis.call('hexists', KEYS[1], 'b' .. g) == 1 then
        return {2, i, g}
    end
    return {1, i, g}
end
if count > 0 then
    for _, deadline in pairs(redis.call('hvals', KEYS[2])) do
        if tonumber(deadline) < now then
            barrier_end(gen, true, nil)
            gen = gen + 1
            count = 0
            break
        end
    end
end
if count > 0 and st[1] ~= ARGV[1] then
    return {-1, tonumber(st[1]), gen}
end
count = count + 1
local record = gen .. ':' .. (count - 1)
if count >= tonumber(ARGV[1]) then
    redis.call('hset', KEYS[1], 'parties', ARGV[1], 'a:' .. ARGV[2], record)
    barrier_end(gen, false, ARGV[2])
    redis.call('pexpire', KEYS[1], ARGV[4])
    return {1, count - 1, gen}
end
redis.call('hset', KEYS[1], 'parties', ARGV[1], 'gen', gen, 'count', count, 'a:' .. ARGV[2], record)
redis.call('hset', KEYS[2], ARGV[2], now + tonumber(ARGV[3]))
redis.call('pexpire', KEYS[1], ARGV[4])
redis.call('pexpire', KEYS[2], ARGV[4])
return {0, count - 1, gen}
