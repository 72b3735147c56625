-- queue (put in front of acquire, release, force_release and leave; KEYS[5..7] as in
-- acquire.lua): the waiters' queue, shared.
-- live_head(now): the head of the queue, after skipping (and removing) waiters that stopped
-- refreshing their entry (killed, cut off). now: the server's clock in ms.
local function live_head(now)
  for _, w in ipairs(redis.call('ZRANGEBYSCORE', KEYS[6], '-inf', now)) do
    redis.call('ZREM', KEYS[5], w)
    redis.call('ZREM', KEYS[6], w)
    redis.call('HDEL', KEYS[7], w)
  end
  return redis.call('ZRANGE', KEYS[5], 0, 0)[1]
end
-- wake(channel): wakes the live head of the queue on its own channel or, with nobody queued,
-- whoever listens on the plain one.
local function wake(channel)
  local head = redis.call('ZRANGE', KEYS[5], 0, 0)[1]
  if head then
    local t = redis.call('TIME')
    head = live_head(tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
  end
  if head then
    redis.call('PUBLISH', channel .. ':' .. head, 'released')
  else
    redis.call('PUBLISH', channel, 'released')
  end
end
