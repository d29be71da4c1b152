-- publish(channel, message) and reply(outcome, what), put in front of every script whose
-- header says "-- uses: publish" by cmake/embed_lua.cmake (a script sent to Redis is one
-- text: nothing is shared between scripts at run time).
-- publish: a PUBLISH that the server's ACL refuses (pcall) must not fail a script after its
-- writes; the refusal is remembered instead.
-- reply: the script's outcome, or, after a refused PUBLISH, the outcome inside an error
-- reply, BATON_UNPUBLISHED <outcome> <what> <channel length> <channel> <server's error>,
-- which the library turns back into the outcome with a warning (client.c).
local refused
local function publish(channel, message)
    local r = redis.pcall('publish', channel, message)
    if type(r) == 'table' and r.err then
        refused = {channel, r.err}
    end
end
local function reply(outcome, what)
    if refused == nil then
        return outcome
    end
    local o = outcome == nil and 'nil' or string.format('%.0f', outcome)
    return redis.error_reply('BATON_UNPUBLISHED ' .. o .. ' ' .. what .. ' ' .. #refused[1] .. ' ' ..
                             refused[1] .. ' ' .. refused[2])
end
