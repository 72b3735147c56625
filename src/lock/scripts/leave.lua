-- leave: a waiter that gives up (its --wait ran out, a signal) leaves the key's queue at once;
-- if it was the head and the lock is free, the next waiter is woken. Its own attempt, if one
-- waits on the server behind its grant list (queue.lua), is let through at once: the waiter
-- reads it before it goes (wait/on_server.rs, step_out).
-- KEYS[1] lock   KEYS[2..4] holder record, audit log, the lock's record (unused: the same keys
-- as release.lua)   KEYS[5] queue   KEYS[6] queue liveness   KEYS[7] waiters (see acquire.lua)
-- ARGV[1] the waiter's ticket   ARGV[2] release channel
-- Reply: 1.
redis.call('ZREM', KEYS[5], ARGV[1])
redis.call('ZREM', KEYS[6], ARGV[1])
redis.call('HDEL', KEYS[7], ARGV[1])
local grant = KEYS[5] .. ':' .. ARGV[1]
redis.call('LPUSH', grant, '1')
redis.call('PEXPIRE', grant, '2000')
if not redis.pcall('GET', KEYS[1]) then wake(ARGV[2]) end
return 1
