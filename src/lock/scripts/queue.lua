-- queue (put in front of acquire, release, force_release and leave; KEYS[5..7] as in
-- acquire.lua): the waiters' queue, shared.
-- live_head(now): the head of the queue, after skipping (and removing) waiters that stopped
-- refreshing their entry (killed, cut off). now: the server's clock in ms.
local function live_head(now)
  for _, w in ipairs(redis.call('ZRANGEBYSCORE', KEYS[6], '-inf', string.format('%d', now))) do
    redis.call('ZREM', KEYS[5], w)
    redis.call('ZREM', KEYS[6], w)
    redis.call('HDEL', KEYS[7], w)
  end
  return redis.call('ZRANGE', KEYS[5], '0', '0')[1]
end
-- wake(channel): wakes the live head of the queue or, with nobody queued, whoever listens on the
-- plain channel. The head is woken twice over: on its own channel (a waiter in a quorum or on a
-- cluster listens there) and by a push to its grant list, KEYS[5]:TICKET in the lock's hash slot
-- (a waiter on one server keeps its next attempt queued behind a blocking pop of that list, so
-- the server runs the attempt right after this script). The list lives 2 s unless popped.
local function wake(channel)
  local head = redis.call('ZRANGE', KEYS[5], '0', '0')[1]
  if head then
    local t = redis.call('TIME')
    head = live_head(tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
  end
  if head then
    local grant = KEYS[5] .. ':' .. head
    redis.call('LPUSH', grant, '1')
    redis.call('PEXPIRE', grant, '2000')
    redis.call('PUBLISH', channel .. ':' .. head, 'released')
  else
    redis.call('PUBLISH', channel, 'released')
  end
end
