-- force_release (release --force): delete the lock whoever holds it.
-- KEYS[1] lock   KEYS[2] holder record   KEYS[3] last-run record (unused)   KEYS[4] counters
-- KEYS[5] queue   KEYS[6] queue liveness   KEYS[7] waiters (see acquire.lua)
-- KEYS[8] the audit log (see audit.lua)
-- ARGV[1] release channel   ARGV[2] record ttl (ms)   ARGV[3] who forced it (host, user)
-- Reply: false when there was no lock; otherwise {token, {host, pid, user, started, fence}} of
-- the holder it removed (the fields record::BRIEF names, in its order).
local token = redis.call('GET', KEYS[1])
if not token then return false end
local h = redis.call('HMGET', KEYS[2], 'host', 'pid', 'user', 'started', 'fence')
redis.call('DEL', KEYS[1], KEYS[2])
wake(ARGV[1])
redis.call('HINCRBY', KEYS[4], 'forced', 1)
redis.call('PEXPIRE', KEYS[4], ARGV[2])
audit(KEYS[8], 'forced', 'host', h[1] or '', 'pid', h[2] or '', 'user', h[3] or '', 'fence',
  h[5] or '', 'by', ARGV[3])
return {token, h}
