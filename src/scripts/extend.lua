-- extend: compare-and-pexpire; renews only our own lease, and the holder record with it.
-- KEYS[1] lock   KEYS[2] holder record
-- ARGV[1] token   ARGV[2] ttl (ms)
-- Reply: 1 renewed, 0 not the holder (free, or someone else's).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if redis.call('EXISTS', KEYS[2]) == 1 then
  local t = redis.call('TIME')
  redis.call('HSET', KEYS[2], 'renewed', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000),
    'ttl', ARGV[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
end
return 1
