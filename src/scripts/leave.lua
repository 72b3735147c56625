-- leave: a waiter that gives up (its --wait ran out, a signal) leaves the key's queue at once;
-- if it was the head and the lock is free, the next waiter is woken.
-- KEYS[1] lock   KEYS[2..4] holder record, last-run record, counters (unused: the same keys as
-- release.lua)   KEYS[5] queue   KEYS[6] queue liveness   KEYS[7] waiters (see acquire.lua)
-- ARGV[1] the waiter's ticket   ARGV[2] release channel
-- Reply: 1.
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
redis.call('ZREM', KEYS[5], ARGV[1])
redis.call('ZREM', KEYS[6], ARGV[1])
redis.call('HDEL', KEYS[7], ARGV[1])
if not redis.pcall('GET', KEYS[1]) then wake(ARGV[2]) end
return 1
