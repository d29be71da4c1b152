-- The plain lock's line of starved waiters (src/lock/lock.c, docs/ARCHITECTURE.md), put in
-- front of every script whose header says "-- uses: line" by cmake/embed_lua.cmake.
-- Two keys beside Redisson's, in the lock's slot; Redisson's clients do not know them:
--   baton_lock_next:{name}  the reservation: the owner field the free lock goes to next
--                           (a string, RESERVE_MS life: a waiter that died or stalled costs
--                           the lock that long)
--   baton_lock_line:{name}  the line: owner field -> when its wait passes the starvation
--                           bound (server time in µs, a sorted set: first due, first
--                           served)
-- A key of another type at either is no reservation and no line, and is left alone (pcall).
local RESERVE_MS = 50
-- tell_first: the line's first has left it by itself (it took the free lock, or gave up):
-- the waiter first now is told on its own channel, "1" (its place, not the lock; one the
-- line serves is told by the release that serves it, and tells the next at its own
-- release, so promote need not), so that it looks at once,
-- finds itself first and from then on hears the lock's channel too. Without this it learns
-- it at its next look (50 ms x its rank before), and meanwhile a Redisson client's unlock,
-- published on the lock's channel alone, reaches no waiter of the line (issue 49).
local function tell_first(line, channel)
    local head = redis.pcall('zrange', line, 0, 0)
    if type(head) == 'table' and head[1] ~= nil then
        redis.pcall('publish', channel .. ':' .. head[1], '1')
    end
end
-- promote: the lock is free and nobody holds its reservation: the line's first waiter gets
-- it, and is told on its own channel (<channel>:<owner>, the fair lock's form: the ACL
-- patterns that let waiters hear the lock let them hear this), unless it is except (the
-- caller, taking the lock now: nothing is written for it). With now_us, only a first
-- waiter whose due time has come (its score: when its wait passed its starvation bound,
-- server µs) gets it; one not due yet gets nothing, and the lock goes to whoever asks first
-- (Go's sync.Mutex hands itself over only to a waiter starved past its bound). Returns that
-- owner, or nil when the line is empty or its first is not due.
local function promote(nxt, line, channel, except, now_us)
    local head
    if now_us == nil then
        head = redis.pcall('zpopmin', line)
    else
        head = redis.pcall('zrange', line, 0, 0, 'WITHSCORES')
    end
    if type(head) ~= 'table' or head[1] == nil then
        return nil
    end
    if now_us ~= nil then
        -- not due; or it cannot leave the line (ZREM refused by an ACL): nobody is
        -- reserved for, rather than the same waiter again and again
        if tonumber(head[2]) > now_us or type(redis.pcall('zrem', line, head[1])) ~= 'number' then
            return nil
        end
    end
    if head[1] ~= except then
        redis.pcall('set', nxt, head[1], 'px', RESERVE_MS)
        redis.pcall('publish', channel .. ':' .. head[1], '0')
    end
    return head[1]
end
-- leave: member leaves the line (it took the lock, or gave up); if it was the first, the
-- next is told that it is first now.
local function leave(line, member, channel)
    local rank = redis.pcall('zrank', line, member)
    if type(rank) == 'number' and type(redis.pcall('zrem', line, member)) == 'number' and
        rank == 0 then
        tell_first(line, channel)
    end
end
-- The server's time in µs.
local function now_us()
    local t = redis.call('time')
    return t[1] * 1000000 + t[2]
end
