-- The semaphore's line of starved waiters (src/semaphore/semaphore.c, docs/ARCHITECTURE.md),
-- put in front of every script whose header says "-- uses: semline" by
-- cmake/embed_lua.cmake. The plain lock's line (lib/line.lua) for a count: two keys beside
-- Redisson's, in the semaphore's slot; Redisson's clients do not know them:
--   baton_semaphore_next:{name}  the reservation: the waiter the permits freed go to next
--                                (a string, SEM_RESERVE_MS life: a waiter that died or
--                                stalled costs the semaphore that long)
--   baton_semaphore_line:{name}  the line: "<permits>:<owner>" -> when it joined (server time
--                                in µs, a sorted set: first come, first served)
-- A key of another type at either is no reservation and no line, and is left alone (pcall).
local SEM_RESERVE_MS = 50
-- sem_promote: value permits are free and nobody holds the reservation. The line's first
-- waiter gets them if it wants no more than value (if it wants more, it stays first and
-- nobody behind it is served: first come, first served, as Go's x/sync/semaphore), and is
-- told on its own channel (<channel>:<owner>), unless it is except (the caller, taking the
-- permits now: nothing is written for it). Returns the line's first ("<permits>:<owner>"),
-- or nil when the line is empty.
local function sem_promote(nxt, line, channel, value, except)
    local head = redis.pcall('zrange', line, 0, 0)
    if type(head) ~= 'table' or head[1] == nil then
        return nil
    end
    local want, who = string.match(head[1], '^(%d+):(.+)$')
    if want == nil then
        redis.pcall('zrem', line, head[1]) -- not a waiter's: dropped
        return nil
    end
    if tonumber(want) > value then
        return head[1]
    end
    redis.pcall('zrem', line, head[1])
    if head[1] ~= except then
        redis.pcall('set', nxt, head[1], 'px', SEM_RESERVE_MS)
        redis.pcall('publish', channel .. ':' .. who, value)
    end
    return head[1]
end
-- sem_serve: after value permits became free (a release, an add), the line's first gets
-- them if nobody holds the reservation.
local function sem_serve(nxt, line, channel, value)
    if value > 0 and redis.pcall('exists', line) == 1 and redis.pcall('exists', nxt) == 0 then
        sem_promote(nxt, line, channel, value, nil)
    end
end
