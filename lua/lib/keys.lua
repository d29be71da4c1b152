-- keys: the key names a script makes itself instead of taking them in KEYS, put in front of
-- every script whose header says "-- uses: keys" by cmake/embed_lua.cmake. The same strings
-- as src/core/keys.h (BATON__KEY_LOCK_META, BATON__KEY_RWLOCK_TIMEOUT), which
-- scripts/check-floors.sh holds against these.
local KEY_LOCK_META = 'baton_lock_meta:'       -- baton_lock_meta:{name}: a lock's holders' origins
local KEY_RWLOCK_TIMEOUT = ':rwlock_timeout:'  -- {name}:<owner>:rwlock_timeout:<n>: a read hold
