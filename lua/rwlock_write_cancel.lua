-- rwlock_write_cancel: a writer that gave up waiting withdraws its claim, and if it was the
-- last one and no writer holds the lock, wakes the readers it kept waiting.
-- KEYS[1]  the lock hash
-- KEYS[2]  the waiting writers, baton_rwlock_writers:{name}
-- KEYS[3]  the lock's channel, redisson_rwlock:{name}
-- ARGV[1]  writer field, "<client-uuid>:<thread-id>:write"
-- Returns  1 a claim was withdrawn, 0 there was none.
if redis.call('zrem', KEYS[2], ARGV[1]) == 0 then
    return 0
end
if redis.call('zcard', KEYS[2]) == 0 and redis.call('hget', KEYS[1], 'mode') ~= 'write' then
    redis.call('publish', KEYS[3], '1')
end
return 1
