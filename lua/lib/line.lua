-- The plain lock's line of starved waiters (src/lock/lock.c, docs/ARCHITECTURE.md), put in
-- front of every script whose header says "-- uses: line" by cmake/embed_lua.cmake.
-- Two keys beside Redisson's, in the lock's slot; Redisson's clients do not know them:
--   baton_lock_next:{name}  the reservation: the owner field the free lock goes to next
--                           (a string, RESERVE_MS life: a waiter that died or stalled costs
--                           the lock that long)
--   baton_lock_line:{name}  the line: owner field -> when it joined (server time in µs, a
--                           sorted set: first come, first served)
-- A key of another type at either is no reservation and no line, and is left alone (pcall).
local RESERVE_MS = 50
-- promote: the lock is free and nobody holds its reservation: the line's first waiter gets
-- it, and is told on its own channel (<channel>:<owner>, the fair lock's form: the ACL
-- patterns that let waiters hear the lock let them hear this), unless it is except (the
-- caller, taking the lock now: nothing is written for it). Returns that owner, or nil when
-- the line is empty.
local function promote(nxt, line, channel, except)
    local head = redis.pcall('zpopmin', line)
    if type(head) ~= 'table' or head[1] == nil then
        return nil
    end
    if head[1] ~= except then
        redis.pcall('set', nxt, head[1], 'px', RESERVE_MS)
        redis.pcall('publish', channel .. ':' .. head[1], '0')
    end
    return head[1]
end
