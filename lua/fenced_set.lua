-- fenced_set: a write that a stale holder cannot make (README, "Fencing"): sets the value
-- only for a token at least the highest that ever wrote it, which the fence remembers.
-- KEYS[1]  the key written (a string)
-- KEYS[2]  its fence, baton_fence:{key}: the highest token that wrote KEYS[1]
-- ARGV[1]  the writer's fencing token (>= 1)
-- ARGV[2]  the value
-- Returns  0: written (the fence now holds ARGV[1]); else the fence's token, higher than
--          ARGV[1]: refused, nothing written.
--          A fence or key of another type fails (WRONGTYPE) before anything is written.
local kind = redis.call('type', KEYS[1]).ok
if kind ~= 'none' and kind ~= 'string' then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
local seen = tonumber(redis.call('get', KEYS[2]) or '0')
local token = tonumber(ARGV[1])
if token < seen then
    return seen
end
redis.call('set', KEYS[2], ARGV[1])
redis.call('set', KEYS[1], ARGV[2])
return 0
