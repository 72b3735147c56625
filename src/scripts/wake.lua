-- wake (put in front of release, force_release and leave; KEYS[5..7] as in acquire.lua):
-- wakes the waiter at the head of the queue (skipping waiters that stopped refreshing their
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
