-- barrier_end(gen, broken, tripper): ends generation gen of the barrier whose state is
-- KEYS[1], arrivals KEYS[2] and channel KEYS[3] (barrier_arrive, barrier_check): the next
-- generation starts empty, a broken one is marked b<gen> (the last 64 kept), and every
-- waiter is told ("0"). tripper: the arrival that tripped it (not in KEYS[2]), or nil.
-- Each arrival's record, a:<party> = "<gen>:<index>" in KEYS[1], lets an arrival sent
-- again after a lost reply learn what became of the first (barrier_arrive); the records of
-- a generation are listed in p<gen> and dropped four generations later.
-- It calls publish (lua/lib/publish.lua): a script lists "-- uses: barrier_end" above
-- "-- uses: publish", so that the build puts publish in front of it.
local function barrier_end(gen, broken, tripper)
    local ids = redis.call('hkeys', KEYS[2])
    if tripper then
        ids[#ids + 1] = tripper
    end
    local old = redis.call('hget', KEYS[1], 'p' .. (gen - 4))
    if old then
        for id in string.gmatch(old, '%S+') do
            redis.call('hdel', KEYS[1], 'a:' .. id)
        end
        redis.call('hdel', KEYS[1], 'p' .. (gen - 4))
    end
    if #ids > 0 then
        redis.call('hset', KEYS[1], 'p' .. gen, table.concat(ids, ' '))
    end
    if broken then
        redis.call('hset', KEYS[1], 'gen', gen + 1, 'count', 0, 'b' .. gen, 1)
        redis.call('hdel', KEYS[1], 'b' .. (gen - 64))
    else
        redis.call('hset', KEYS[1], 'gen', gen + 1, 'count', 0)
    end
    redis.call('del', KEYS[2])
    publish(KEYS[3], '0')
end
