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
-- sem_admit needs lib/line_join.lua before this text: a script lists "-- uses: semline"
-- above "-- uses: line_join" (each library is put in front of what is there already).
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
    if type(redis.pcall('zrem', line, head[1])) ~= 'number' then
        return nil -- it cannot leave the line (ZREM refused by an ACL): no line is served
    end
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
-- sem_admit: whether the caller may take `want` of the `value` permits free, by the line's
-- rules: with no line and no reservation, if they are there; else if they are reserved for
-- it, or if nobody holds the reservation and it is the line's first (what is free is served
-- to the first first). member is the caller's "<permits>:<owner>", mode "0" (never join the
-- line), "1" (join it if it is not empty) or "2" (join it), life the line's life in ms, and
-- refused what a refusal without a line answers (a value, or a function that gives it).
-- Returns true, lined (take now; lined: a line may remain, to serve from what is left), or
-- false, false, reply: {0, refused}, {3, ms the reservation for another lasts}, or
-- {5, rank} (in the line, rank waiters before it).
local function sem_admit(nxt, line, channel, value, want, member, mode, life, refused)
    local function no()
        if type(refused) == 'function' then
            return {0, refused()}
        end
        return {0, refused}
    end
    local function refuse(reply)
        if mode ~= '0' then
            local joined = line_join(line, member, life)
            if joined then
                return false, false, joined
            end
        end
        return false, false, reply or no()
    end
    if redis.call('exists', nxt, line) == 0 then
        if value >= want then
            return true, false
        end
        if mode == '2' then
            return false, false, line_join(line, member, life) or no()
        end
        return false, false, no()
    end
    local held = redis.pcall('get', nxt)
    if held == member then
        redis.call('del', nxt)
        if value >= want then
            return true, true
        end
        -- taken meanwhile by a client that does not know the line (Redisson's): it stays first
        if type(redis.pcall('zadd', line, 0, member)) == 'number' then
            redis.call('pexpire', line, life)
        end
        return false, false, {5, 0}
    end
    if type(held) == 'string' then
        return refuse({3, redis.call('pttl', nxt)})
    end
    if held ~= false then -- a key of another type: no reservation, and no line served from it
        if value >= want then
            return true, true
        end
        return refuse(nil)
    end
    -- nobody holds the reservation: what is free goes to the line's first, if it fits
    local head = nil
    if value > 0 then
        head = sem_promote(nxt, line, channel, value, member)
    end
    if (head == nil or head == member) and value >= want then
        return true, true
    end
    if head ~= nil and head ~= member and redis.call('exists', nxt) == 1 then
        return refuse({3, redis.call('pttl', nxt)})
    end
    return refuse(nil)
end
