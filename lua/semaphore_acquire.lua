-- semaphore_acquire: take ARGV[1] permits at once, or none, once per request id; or take a
-- place in the line of waiters that have waited too long (baton's starvation bound,
-- lib/semline.lua).
-- KEYS[1]  the semaphore: a string holding the permit count (absent = 0 permits)
-- KEYS[2]  baton's reservation, baton_semaphore_next:{name} (lib/semline.lua)
-- KEYS[3]  baton's line, baton_semaphore_line:{name} (lib/semline.lua)
-- KEYS[4]  the request latch, baton_request:{name}:<request-id>: written when the permits
--          are taken, so that a re-send after a lost reply answers "taken" instead of
--          taking them again
-- ARGV[1]  permits to take (>= 1)
-- ARGV[2]  the waiter, "<permits>:<owner>" (its place in the line; it hears its turn on
--          ARGV[4]:<owner>)
-- ARGV[3]  "0": never join the line (a try, or a client without the bound); "1": join it
--          if it is not empty (a waiter: newcomers queue behind starved waiters); "2":
--          join it (a starved waiter, or one in the line already: keeps its place)
-- ARGV[4]  the semaphore's channel, redisson_sc:{name}
-- ARGV[5]  how long the line lasts after its last join or look, in ms
-- ARGV[6]  how long the request latch lives, in ms
-- ARGV[7]  "0": the request's first attempt (no latch can exist yet: it is not read);
--          "1" (or absent): a retry
-- Status   the first element of the reply is a baton__acquire_status (src/core/internal.h)
-- Returns  {1, left}       taken; left = the permits that remained after this request's
--                          take (a re-sent request: its first run's)
--          {0, available}  not enough permits; nothing changed, no latch written (a
--                          re-send may then take them: only one run of a request ever does)
--          {3, pttl}       the permits freed are reserved for another waiter, pttl ms more
--          {5, rank}       not taken; the caller is in the line, rank waiters before it
--          A key of another type at KEYS[1], or a string that is not an integer, fails
--          with an error reply (WRONGTYPE / ERR) and is left untouched; one at KEYS[2] or
--          KEYS[3] is none.
-- With no line, a first attempt is 2 commands when too few permits are free (GET, EXISTS
-- of the reservation and the line in one), 4 when it takes them (GET, EXISTS, DECRBY, SET
-- of the latch).
-- uses: semline
-- uses: line_join
if ARGV[7] ~= '0' then
    local done = redis.call('get', KEYS[4])
    if done ~= false then
        return {1, tonumber(done)}
    end
end
local raw = redis.call('get', KEYS[1]) -- a key of another type: WRONGTYPE, nothing written
local value = 0
if raw ~= false then
    if not string.match(raw, '^-?%d+$') then
        return redis.error_reply('ERR semaphore permit count is not an integer')
    end
    value = tonumber(raw)
end
local want = tonumber(ARGV[1])
-- lined: a line or a reservation may exist (else nothing is served from what is left)
local function take(lined)
    -- DECRBY rather than SET: keeps a TTL someone set on the key
    local left = redis.call('decrby', KEYS[1], ARGV[1])
    redis.call('set', KEYS[4], left, 'px', ARGV[6])
    -- what is left goes on to the line's next
    if lined and left > 0 then
        sem_serve(KEYS[2], KEYS[3], ARGV[4], left)
    end
    return {1, left}
end
local ok, lined, out = sem_admit(KEYS[2], KEYS[3], ARGV[4], value, want, ARGV[2], ARGV[3], ARGV[5],
                                value)
if not ok then
    return out
end
return take(lined)
