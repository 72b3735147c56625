-- shapes (put in front of acquire, extend, release, force_release and held): the holders of a
-- shared or slotted lock. Each has an entry in the leases (a zset: token -> lease deadline, the
-- server's clock in ms; Redis cannot expire one field of a hash) and in the holders hash
-- (token -> slot, fence, started (ms), ttl (ms), host, pid, user, command, separated by the
-- ASCII unit separator; the slot is empty when shared). The holders hash also says the shape:
-- 'shape' -> 'shared' or the number of slots; 'TOKEN:finished' -> 1 once a holder's command
-- ended while its hold is kept (--hold-at-least). Both keys expire with the latest lease.
-- sharers_live(leases, holders, now): how many leases are running, after removing the lapsed.
local function sharers_live(leases, holders, now)
  for _, gone in ipairs(redis.call('ZRANGEBYSCORE', leases, '-inf', string.format('%d', now))) do
    redis.call('ZREM', leases, gone)
    redis.call('HDEL', holders, gone, gone .. ':finished')
  end
  return redis.call('ZCARD', leases)
end
-- sharers_expire(leases, holders, now): both keys expire with the latest lease (at once when
-- there is none).
local function sharers_expire(leases, holders, now)
  local last = redis.call('ZRANGE', leases, '-1', '-1', 'WITHSCORES')
  if last[2] then
    local left = math.max(tonumber(last[2]) - now, 1)
    left = string.format('%d', left)
    redis.call('PEXPIRE', leases, left)
    redis.call('PEXPIRE', holders, left)
  else
    redis.call('DEL', leases, holders)
  end
end
-- sharer(holders, token): the slot (-1: none), fence and start of a holder.
local function sharer(holders, token)
  local slot, fence, started = string.match(redis.call('HMGET', holders, token)[1] or '',
    '^([^\31]*)\31([^\31]*)\31([^\31]*)')
  return tonumber(slot) or -1, tonumber(fence) or 0, tonumber(started) or 0
end
-- free_slot(leases, holders, n): the lowest slot in 0..n-1 no live holder has (-1: none).
local function free_slot(leases, holders, n)
  local used = {}
  for _, token in ipairs(redis.call('ZRANGE', leases, '0', '-1')) do
    used[sharer(holders, token)] = true
  end
  for i = 0, n - 1 do
    if not used[i] then return i end
  end
  return -1
end
