-- election_observe: the current leader and the changes after a cursor; finds a leader
-- whose lease ran out (its record names an owner the lock hash no longer has), removes
-- its record and logs EXPIRED, telling observers.
-- KEYS[1]  the election's lock: Redisson's lock hash at the election's name
-- KEYS[2]  the leader's record, baton_election:{name}
-- KEYS[3]  the change log, baton_election_log:{name}
-- KEYS[4]  the observers' channel, baton_election__channel:{name}
-- ARGV[1]  the first log id wanted ("ms-seq", inclusive); "" for the last entry only; "-"
--          for none (the leader only)
-- ARGV[2]  how many entries at most
-- ARGV[3]  the log's cap (MAXLEN ~)
-- Returns  {term, value, origin, since, pttl, entries}: term "" when nobody leads (or the
--          leader has not recorded itself yet); pttl the lock's remaining lease (-2: none);
--          entries as XRANGE gives them: {{id, {field, value, ...}}, ...}
-- uses: publish (lua/lib/publish.lua, put in front of this script by the build)
-- every key it writes is read first: a key of another type fails before any write
redis.call('xlen', KEYS[3])
local rec = redis.call('hmget', KEYS[2], 'owner', 'term', 'value', 'origin', 'since')
if rec[1] and redis.call('hexists', KEYS[1], rec[1]) == 0 then
    local t = redis.call('time')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    redis.call('del', KEYS[2])
    redis.call('xadd', KEYS[3], 'maxlen', '~', ARGV[3], '*', 'change', 'expired', 'term', rec[2],
               'value', rec[3] or '', 'origin', rec[4] or '', 'since', rec[5] or '0', 'time', now)
    publish(KEYS[4], '0')
    rec = {false}
end
local pttl = redis.call('pttl', KEYS[1])
local entries
if ARGV[1] == '-' then
    entries = {}
elseif ARGV[1] == '' then
    entries = redis.call('xrevrange', KEYS[3], '+', '-', 'count', 1)
else
    entries = redis.call('xrange', KEYS[3], ARGV[1], '+', 'count', ARGV[2])
end
if not rec[1] then
    return {'', '', '', '0', pttl, entries}
end
return {rec[2], rec[3] or '', rec[4] or '', rec[5] or '0', pttl, entries}
