-- line_join(line, member, life, due_us): the caller takes a place in a line of starved
-- waiters (the plain lock's, lib/line.lua; the semaphore's, lib/semline.lua), or keeps the
-- one it has (NX); its score is the server's time plus due_us (nil: 0); the line then
-- lasts life ms more, or longer if it was kept for longer (the plain lock's first,
-- lock_acquire.lua). Put in front of every script whose header says
-- "-- uses: line_join" by cmake/embed_lua.cmake. Returns {5, rank} (rank waiters before it),
-- or nil when a key of another type is at the line (no line: left alone).
local function line_join(line, member, life, due_us)
    local t = redis.call('time')
    local r = redis.pcall('zadd', line, 'NX', t[1] * 1000000 + t[2] + (tonumber(due_us) or 0),
                          member)
    if type(r) == 'table' and r.err then
        return nil
    end
    if redis.call('pttl', line) < tonumber(life) then
        redis.call('pexpire', line, life)
    end
    local rank = redis.pcall('zrank', line, member) -- refused by an ACL: 0, not a failure
    return {5, type(rank) == 'number' and rank or 0}
end
