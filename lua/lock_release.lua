-- lock_release: release one hold of a reentrant lock, idempotently per request id.
-- flags: allow-oom (it only shrinks or extends what is stored, and writes at most a small
--        request latch with a TTL and a reservation of RESERVE_MS: it runs at maxmemory
--        under noeviction; Redis >= 7)
-- KEYS[1]  the lock hash: the only key declared. While a Cluster slot migrates, Redis
--          answers TRYAGAIN to a script whose declared keys are not all on the node (the
--          channel and the latch never are), for as long as the migration lasts; the lock
--          hash is wherever the lock is. The others below are reached with redis.pcall: on
--          a node that does not have them (a migrating slot) they are skipped, never a
--          failure after a write.
-- ARGV[1]  the unlock message, "0"
-- ARGV[2]  lease in ms re-applied when holds remain (the lease the lock was taken with)
-- ARGV[3]  owner field, "<client-uuid>:<thread-id>"
-- ARGV[4]  the lock's channel, redisson_lock__channel:{name}
-- ARGV[5]  baton's reservation, baton_lock_next:{name} (lib/line.lua)
-- ARGV[6]  baton's line, baton_lock_line:{name} (lib/line.lua)
-- ARGV[7..9], only in the 12-argument form (a hand-over within the client, "cohorting",
--          docs/ARCHITECTURE.md): the fencing-token counter redisson_lock_token:{name}, the
--          owner field of a waiter of the releasing client, and that waiter's lease in ms
-- ARGV[n-2] how long the latch remembers the outcome, in ms (n = #ARGV: 9, or 12)
-- ARGV[n-1] the unlock latch, redisson_unlock_latch:{name}:<request-id>: remembers this
--          request's outcome, so a retry after a lost reply returns the first result (not
--          while the slot migrates: the latch may then be out of reach)
-- ARGV[n]  "0": the request's first attempt (no latch can exist yet: it is not read);
--          "1": a retry
-- Uncontended, the last hold's release is 5 commands: HGET, DEL, PUBLISH, EXISTS (of the
-- line), SET.
-- Returns  nil  the owner holds nothing (never held, released, or expired)
--          0    one hold released, holds remain (lease re-applied)
--          1    the last hold released: the key is deleted and "0" published; the first
--               waiter of the line (if any, none holds the reservation, and its wait has
--               passed its starvation bound) gets it
--          -t   (12-argument form) the last hold handed to the waiter ARGV[8]: the hash's
--               one field is now its, count 1, lease ARGV[9], and the fencing token rose to
--               t as an acquisition's does; nothing published. Only when neither a line
--               nor a reservation exists (a starved waiter, of any client, is served
--               through them) and the counter is an integer; otherwise released as above.
--               Its latch remembers -t.
-- A PUBLISH that the server's ACL refuses (pcall) leaves the writes before it in place: the
-- outcome is then returned inside an error reply, BATON_UNPUBLISHED <outcome> <what>
-- <channel length> <channel> <server's error>, which the library turns back into the
-- outcome with a warning (client.c, unpublished()). A waiter not told finds out at its
-- recheck.
-- uses: publish
-- uses: line
local n = #ARGV
local life, latch = ARGV[n - 2], ARGV[n - 1]
if ARGV[n] ~= '0' then
    local done = redis.pcall('get', latch)
    if type(done) == 'string' then
        return tonumber(done)
    end
end
local count = redis.call('hget', KEYS[1], ARGV[3])
if count == false then
    return nil
end
if not string.match(count, '^-?%d+$') then
    redis.call('hincrby', KEYS[1], ARGV[3], -1) -- fails, before any write: not an integer
end
if tonumber(count) > 1 then
    redis.call('hincrby', KEYS[1], ARGV[3], -1)
    redis.call('pexpire', KEYS[1], ARGV[2])
    redis.pcall('set', latch, 0, 'px', life)
    return 0
end
if n == 12 and redis.pcall('exists', ARGV[5], ARGV[6]) == 0 then
    local token = redis.pcall('incr', ARGV[7])
    if type(token) == 'number' then
        redis.call('del', KEYS[1])
        redis.call('hset', KEYS[1], ARGV[8], 1)
        redis.call('pexpire', KEYS[1], ARGV[9])
        redis.pcall('set', latch, -token, 'px', life)
        return -token
    end
end
redis.call('del', KEYS[1])
publish(ARGV[4], ARGV[1])
if redis.pcall('exists', ARGV[6]) == 1 and redis.pcall('exists', ARGV[5]) == 0 then
    promote(ARGV[5], ARGV[6], ARGV[4], nil, now_us())
end
redis.pcall('set', latch, 1, 'px', life)
return reply(1, 'released')
