-- semaphore_delete: delete the semaphore.
-- KEYS[1]  the semaphore: a string holding the permit count
-- Returns  1 it existed and is deleted, 0 it did not exist.
--          A key of another type, or a string that is not an integer, fails with an error
--          reply (WRONGTYPE / ERR) and is left untouched: DEL alone would destroy data
--          that is not a semaphore.
local t = redis.call('type', KEYS[1]).ok
if t == 'none' then
    return 0
end
if t ~= 'string' then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
if not string.match(redis.call('get', KEYS[1]), '^-?%d+$') then
    return redis.error_reply('ERR semaphore permit count is not an integer')
end
redis.call('del', KEYS[1])
return 1
