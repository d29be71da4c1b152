-- election_resign: the leader gives up: release its lock (as lock_release does, waking one
-- standby) and log RESIGNED for observers, in one step, idempotently per request id.
-- KEYS[1]  the election's lock: Redisson's lock hash at the election's name
-- KEYS[2]  the lock's channel, redisson_lock__channel:{name} (standbys wait there)
-- KEYS[3]  baton's side hash baton_lock_meta:{name} (holders' "host:pid")
-- KEYS[4]  the leader's record, baton_election:{name}
-- KEYS[5]  the change log, baton_election_log:{name}
-- KEYS[6]  the observers' channel, baton_election__channel:{name}
-- KEYS[7]  the unlock latch, redisson_unlock_latch:{name}:<request-id>
-- ARGV[1]  the unlock message, "0"
-- ARGV[2]  lease in ms re-applied when holds remain
-- ARGV[3]  the leader's owner field
-- ARGV[4]  how long the latch remembers the outcome, in ms
-- ARGV[5]  "0": the request's first attempt (no latch can exist yet: it is not read);
--          "1" (or absent): a retry
-- Returns  nil  the owner holds nothing (never held, resigned, or expired)
--          0    one hold released, holds remain (a campaign never re-enters: not expected)
--          1    released; RESIGNED logged if the record was this owner's
-- uses: publish (lua/lib/publish.lua, put in front of this script by the build)
-- every key it writes is read first: a key of another type fails before any write
redis.call('xlen', KEYS[5])
if ARGV[5] ~= '0' then -- a retry: its first attempt may have run
    local done = redis.call('get', KEYS[7])
    if done ~= false then
        return tonumber(done)
    end
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
local rec = redis.call('hmget', KEYS[4], 'owner', 'term', 'value', 'origin', 'since')
local holds = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if holds > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    redis.call('set', KEYS[7], 0, 'px', ARGV[4])
    return 0
end
redis.call('del', KEYS[1])
redis.call('del', KEYS[3])
if rec[1] == ARGV[3] then
    local t = redis.call('time')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    redis.call('del', KEYS[4])
    redis.call('xadd', KEYS[5], 'maxlen', '~', '1000', '*', 'change', 'resigned', 'term', rec[2],
               'value', rec[3] or '', 'origin', rec[4] or '', 'since', rec[5] or '0', 'time', now)
end
redis.call('set', KEYS[7], 1, 'px', ARGV[4])
publish(KEYS[2], ARGV[1])
publish(KEYS[6], '0')
return reply(1, 'resigned')
