-- force_release (release --force): delete the lock whoever holds it.
-- KEYS[1] lock   KEYS[2] holder record   KEYS[3] counters
-- KEYS[4] last-run record (unused)   KEYS[5] queue   KEYS[6] queue liveness   KEYS[7] waiters
-- (see acquire.lua)
-- ARGV[1] release channel   ARGV[2] record ttl (ms)
-- Reply: false when there was no lock; otherwise {token, {host, pid, user, started, fence}} of
-- the holder it removed (the fields record::BRIEF names, in its order).
-- Wakes the waiter at the head of the queue (skipping waiters that stopped refreshing their
-- entry), or, with nobody queued, whoever listens on the plain channel.
local function wake(channel)
  local head = redis.call('ZRANGE', KEYS[5], 0, 0)[1]
  if head then
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    for _, w in ipairs(redis.call('ZRANGEBYSCORE', KEYS[6], '-inf', now)) do
      redis.call('ZREM', KEYS[5], w)
      redis.call('ZREM', KEYS[6], w)
      redis.call('HDEL', KEYS[7], w)
    end
    head = redis.call('ZRANGE', KEYS[5], 0, 0)[1]
  end
  if head then
    redis.call('PUBLISH', channel .. ':' .. head, 'released')
  else
    redis.call('PUBLISH', channel, 'released')
  end
end
local token = redis.call('GET', KEYS[1])
if not token then return false end
local h = redis.call('HMGET', KEYS[2], 'host', 'pid', 'user', 'started', 'fence')
redis.call('DEL', KEYS[1], KEYS[2])
wake(ARGV[1])
redis.call('HINCRBY', KEYS[3], 'forced', 1)
redis.call('PEXPIRE', KEYS[3], ARGV[2])
return {token, h}
