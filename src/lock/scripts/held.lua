-- held: whether a token holds the lock, and in which shape, for a nested run under that
-- token's lease. Writes nothing.
-- KEYS[1] lock (string: the token)   KEYS[2] holder record (holder.lua)   KEYS[3] shared leases
-- KEYS[4] shared holders (see shapes.lua)
-- ARGV[1] the token
-- Reply: {1, fence, started (ms), server time (ms), pttl (ms), shape} when the token holds the
--        lock, shape '' (exclusive), 'shared' or the number of slots; {0} otherwise.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  local deadline = tonumber(redis.call('ZSCORE', KEYS[3], ARGV[1]))
  if not deadline or deadline <= now then return {0} end
  local _, fence, started = sharer(KEYS[4], ARGV[1])
  return {1, fence, started, now, deadline - now, redis.call('HMGET', KEYS[4], 'shape')[1] or ''}
end
local h = holder_read(KEYS[2]) or ''
return {1, tonumber(string.match(h, '\31fence=(%d+)')) or 0,
  tonumber(string.match(h, '\31started=(%d+)')) or now, now, redis.call('PTTL', KEYS[1]), ''}
