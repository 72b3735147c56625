-- release (the rest, after release.lua and the preludes it needs, in the block release.lua
-- opens, which this closes): a waiter to wake, or the lease of a shared or slotted holder.
if head then
  wake(nil, head)
elseif KEYS[8] and redis.call('EXISTS', KEYS[8]) == 1 then
  local deadline = tonumber(redis.call('ZSCORE', KEYS[8], ARGV[1]))
  if deadline then
    if ARGV[3] == '' then
      local _, fence = sharer(KEYS[9], ARGV[1])
      given_fence = string.format('%d', fence)
    end
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    if deadline > now and keep > 0 then
      redis.call('ZADD', KEYS[8], 'XX', string.format('%d', now + keep), ARGV[1])
      local finished = ARGV[1] .. ':finished'
      redis.call('HSET', KEYS[9], finished, '1')
    else
      redis.call('ZREM', KEYS[8], ARGV[1])
      redis.call('HDEL', KEYS[9], ARGV[1])
    end
    sharers_expire(KEYS[8], KEYS[9], now)
    if deadline > now then
      if keep == 0 and ARGV[2] ~= '' then wake() end
      released = 1
    end
  end
end
end
