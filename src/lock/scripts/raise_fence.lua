-- raise_fence (quorum): raise this node's fence counter to at least the fence handed out,
-- and record it in our holder record if we hold the lock here.
-- KEYS[1] fence counter   KEYS[2] lock   KEYS[3] holder record
-- ARGV[1] fence   ARGV[2] token   ARGV[3] how long the counter is kept after its last write (ms)
-- Reply: 1.
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
local fence = tonumber(ARGV[1])
if current < fence then redis.call('SET', KEYS[1], fence, 'PX', ARGV[3]) end
if redis.pcall('GET', KEYS[2]) == ARGV[2] then
  local h = holder_read(KEYS[3])
  if h then holder_update(KEYS[3], holder_with(h, 'fence', ARGV[1])) end
end
return 1
