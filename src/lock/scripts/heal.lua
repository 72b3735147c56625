-- heal (quorum): re-establish our lock on a node that lost it (a restart without persistence,
-- a flush) while a majority of the nodes still holds it for us, so that restarting the nodes
-- one at a time never hands a majority to another holder.
-- KEYS[1] lock   KEYS[2] fence counter   KEYS[3] holder record
-- ARGV[1] token   ARGV[2] ttl (ms)   ARGV[3] our fence ('' when unknown)   ARGV[4] how long the
-- fence counter is kept after its last write (ms)
-- ARGV[5] the holder record's fields but its layout, ttl and renewal (started=, fence=, the
--         identity, replace=: see holder.lua; hold.rs writes them; none when unknown); the
--         script writes the record with those.
-- Reply: 1 re-established (or still ours), 0 the key holds another token.
local current = redis.call('GET', KEYS[1])
if current == ARGV[1] then return 1 end
if current then return 0 end
if ARGV[3] ~= '' and (tonumber(redis.call('GET', KEYS[2])) or 0) < tonumber(ARGV[3]) then
  redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
end
if ARGV[5] then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('SET', KEYS[3], 'v=' .. LAYOUT .. '\31ttl=' .. ARGV[2] .. '\31renewed=' ..
    string.format('%d', now) .. '\31' .. ARGV[5], 'PX', ARGV[2])
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
