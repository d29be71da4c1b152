-- lock_acquire: take or re-enter a reentrant lock (Redisson's RLock layout), or take a place
-- in the line of waiters that have waited too long (baton's starvation bound, lib/line.lua).
-- KEYS[1]  the lock: a hash at the lock's name, field <owner> -> hold count
-- KEYS[2]  the fencing-token counter, redisson_lock_token:{name}, never expires
-- KEYS[3]  baton's reservation, baton_lock_next:{name} (lib/line.lua)
-- KEYS[4]  baton's line, baton_lock_line:{name} (lib/line.lua)
-- ARGV[1]  lease in milliseconds (PEXPIRE of the hash)
-- ARGV[2]  owner field, "<client-uuid>:<thread-id>"
-- ARGV[3]  "0": never join the line (a try, or a client without the bound); "1": join it
--          if it is not empty (a waiter: newcomers queue behind starved waiters); "2":
--          join it (a starved waiter, or one in the line already: keeps its place)
-- ARGV[4]  the lock's channel, redisson_lock__channel:{name} (a waiter in the line hears
--          ARGV[4]:<owner>)
-- ARGV[5]  how long the line lasts after its last join or look, in ms
-- ARGV[6]  when the caller's wait passes its starvation bound, in µs from now (<= 0: it
--          has; its score in the line, which is served first due, first served)
-- Status   the first element of the reply is a baton__acquire_status (src/core/internal.h)
-- Returns  {1, token}  acquired; token is the new fencing token (the counter, incremented)
--          {2, token}  re-entered by the owner; token is unchanged (the outer hold's)
--          {0, pttl}   held by another owner; pttl = its remaining lease in ms (-1: none)
--          {3, pttl}   free, but reserved for another waiter for pttl ms more
--          {5, rank}   not taken; the caller is in the line, rank waiters before it
--          {5, 0, pttl} not taken; the caller is the line's first, behind a holder whose
--                      lease runs pttl ms more: it hears every way the lock comes free but
--                      the lease's end (the holder's unlock on ARGV[4], a release's
--                      reservation on its own channel), so it need look only then; the line
--                      lasts ARGV[5] ms after that
-- A key of another type at KEYS[1] or KEYS[2] (or a token that is not an integer) fails
-- with WRONGTYPE (ERR) before anything is written; one at KEYS[3] or KEYS[4] is none.
-- Uncontended, this is 4 commands: EXISTS (of the lock, the reservation and the line in
-- one), INCR, HINCRBY, PEXPIRE. Held by another owner, with no line, 3: EXISTS, HEXISTS
-- (the caller's own hold?), PTTL (held? and for how long).
-- uses: line
-- uses: line_join
local function take()
    local token = redis.call('incr', KEYS[2])
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, token}
end
local function join()
    return line_join(KEYS[4], ARGV[2], ARGV[5], ARGV[6])
end
local present = redis.call('exists', KEYS[1], KEYS[3], KEYS[4])
if present == 0 then
    return take()
end
-- The token, read before the first write where a write comes before its INCR: a key of
-- another type fails here. Returns it, or nil after a reply that says what is wrong.
local function token_read()
    local token = redis.call('get', KEYS[2])
    if token ~= false and not string.match(token, '^-?%d+$') then
        return nil
    end
    return token or '0'
end
local NOT_INTEGER = 'ERR the fencing-token counter is not an integer'
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    local token = token_read()
    if token == nil then
        return redis.error_reply(NOT_INTEGER)
    end
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {2, tonumber(token)}
end
-- PTTL tells both whether the lock is held (-2: no key) and what the caller waits for.
local pttl = redis.call('pttl', KEYS[1])
if pttl == -2 then
    -- free: it goes to the waiter it is reserved for, else to the line's first
    if token_read() == nil then
        return redis.error_reply(NOT_INTEGER)
    end
    local nxt = redis.pcall('get', KEYS[3])
    local mine = nxt == ARGV[2]
    local lined = false -- a line that the caller may be in, and leaves when it takes
    if nxt == false then
        -- only a first waiter that is due gets it; one not due yet, and those behind it,
        -- let whoever asks first take it (the caller, in the line or not)
        nxt = promote(KEYS[3], KEYS[4], ARGV[4], ARGV[2], now_us())
        lined = nxt == nil
    elseif type(nxt) ~= 'string' then
        nxt = nil -- a key of another type: no reservation, and no line is served from it
    end
    if nxt == nil or nxt == ARGV[2] then
        if mine then
            redis.call('del', KEYS[3])
        end
        if lined then
            leave(KEYS[4], ARGV[2], ARGV[4])
        end
        return take()
    end
    return ARGV[3] ~= '0' and join() or {3, redis.call('pttl', KEYS[3])}
end
-- held by another owner; the line may exist only if more than the lock did
if ARGV[3] == '2' or (ARGV[3] == '1' and present > 1 and redis.pcall('exists', KEYS[4]) == 1) then
    local joined = join()
    if joined and joined[2] == 0 and pttl > 0 then
        -- the first behind a lease: the line lives until the lease's end, and ARGV[5] more
        -- (never shorter than line_join left it: pttl > 0)
        redis.call('pexpire', KEYS[4], pttl + tonumber(ARGV[5]))
        joined[3] = pttl
    end
    if joined then
        return joined
    end
end
return {0, pttl}
