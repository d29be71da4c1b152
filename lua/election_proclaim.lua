-- election_proclaim: record (or change) the leader of an election, only while the caller
-- still holds the election's lock; log the change and tell observers.
-- KEYS[1]  the election's lock: Redisson's lock hash at the election's name
-- KEYS[2]  the leader's record, baton_election:{name}: owner, term, value, origin, since
-- KEYS[3]  the change log, baton_election_log:{name}: a stream capped near ARGV[6] entries
-- KEYS[4]  the observers' channel, baton_election__channel:{name}
-- ARGV[1]  the caller's owner field in the lock hash
-- ARGV[2]  the value to announce
-- ARGV[3]  'elect' (a new term starts: the caller just took the lock) or 'proclaim'
-- ARGV[4]  the term (the lock's fencing token of this hold)
-- ARGV[5]  "host:pid" of the caller
-- ARGV[6]  the log's cap (MAXLEN ~)
-- Returns  {1, server time ms}  recorded
--          {0, 0}               the caller does not hold the lock (or, for 'proclaim', is
--                               not the recorded leader): nothing written
-- An 'elect' re-sent after a lost reply finds its own record and logs nothing twice.
-- An 'elect' that finds the record of an earlier term still there (that leader's lease ran
-- out unseen) logs its expiry first, so the log reads expired(old) before elected(new).
-- uses: publish (lua/lib/publish.lua, put in front of this script by the build)
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
    return {0, 0}
end
-- every key it writes is read first: a key of another type fails before any write
redis.call('xlen', KEYS[3])
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local old = redis.call('hmget', KEYS[2], 'owner', 'term', 'value', 'origin', 'since')
if ARGV[3] == 'elect' then
    if old[1] == ARGV[1] and old[2] == ARGV[4] then
        -- a re-sent 'elect' whose first run's reply was lost: recorded and logged already
        return {1, now}
    end
    if old[1] and old[2] ~= ARGV[4] then
        redis.call('xadd', KEYS[3], 'maxlen', '~', ARGV[6], '*', 'change', 'expired', 'term',
                   old[2], 'value', old[3] or '', 'origin', old[4] or '', 'since', old[5] or '0',
                   'time', now)
    end
    redis.call('hset', KEYS[2], 'owner', ARGV[1], 'term', ARGV[4], 'value', ARGV[2], 'origin',
               ARGV[5], 'since', now)
    redis.call('xadd', KEYS[3], 'maxlen', '~', ARGV[6], '*', 'change', 'elected', 'term', ARGV[4],
               'value', ARGV[2], 'origin', ARGV[5], 'since', now, 'time', now)
else
    if old[1] ~= ARGV[1] or old[2] ~= ARGV[4] then
        return {0, 0}
    end
    redis.call('hset', KEYS[2], 'value', ARGV[2])
    redis.call('xadd', KEYS[3], 'maxlen', '~', ARGV[6], '*', 'change', 'proclaimed', 'term',
               ARGV[4], 'value', ARGV[2], 'origin', ARGV[5], 'since', old[5], 'time', now)
end
publish(KEYS[4], '0')
return {1, now}
