-- acquire: take the lock if it is free (or already ours), in one round trip.
-- KEYS[1] lock (string: the token)    KEYS[2] fence counter    KEYS[3] holder record (hash)
-- KEYS[4] counters (hash)
-- ARGV[1] token   ARGV[2] ttl (ms)   ARGV[3] '1' to count a busy refusal   ARGV[4] record ttl (ms)
-- ARGV[5..] the holder's identity as field/value pairs (record.rs writes them); the script adds
--          started, renewed, ttl, fence and finished.
-- Reply: {1, fence, server time (ms)} when taken;
--        {0, pttl (ms), server time (ms), {host, pid, user, started, fence}} when busy
--        (the holder record's fields record::BRIEF names, in its order).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local current = redis.call('GET', KEYS[1])
if current == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  local h = redis.call('HMGET', KEYS[3], 'fence', 'started')
  return {1, tonumber(h[1]) or tonumber(redis.call('GET', KEYS[2])) or 0, tonumber(h[2]) or now}
end
if not current then
  -- The fence is above every fence handed out before, even when the counter was lost (a restart
  -- without persistence, a flush, a failover to a lagging replica): it is at least the server's
  -- clock in microseconds (below 2^53 until the year 2255, so JSON readers keep it exact).
  local fence = math.max((tonumber(redis.call('GET', KEYS[2])) or 0) + 1,
    tonumber(t[1]) * 1000000 + tonumber(t[2]))
  redis.call('SET', KEYS[2], fence)
  redis.call('HSET', KEYS[3], 'started', now, 'renewed', now, 'ttl', ARGV[2], 'fence', fence,
    'finished', 0, unpack(ARGV, 5))
  redis.call('PEXPIRE', KEYS[3], ARGV[2])
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return {1, fence, now}
end
local pttl = redis.call('PTTL', KEYS[1])
if ARGV[3] == '1' then
  redis.call('HINCRBY', KEYS[4], 'busy', 1)
  redis.call('PEXPIRE', KEYS[4], ARGV[4])
end
local h = redis.pcall('HMGET', KEYS[3], 'host', 'pid', 'user', 'started', 'fence')
if h.err then h = {} end
return {0, pttl, now, h}
