-- release: compare-and-delete (or, with --hold-at-least, compare-and-pexpire), plus the record
-- of the run and the counters.
-- KEYS[1] lock   KEYS[2] holder record   KEYS[3] last-run record (hash)   KEYS[4] counters
-- KEYS[5] queue   KEYS[6] queue liveness   KEYS[7] waiters (see acquire.lua)
-- ARGV[1] token   ARGV[2] release channel ('' to publish nothing)   ARGV[3] keep (ms; 0 deletes)
-- ARGV[4] outcome ('' records nothing)   ARGV[5] record ttl (ms)
-- ARGV[6..] the last-run record as field/value pairs (record.rs writes them)
-- A run whose lock was no longer ours at the release was not covered the whole time: its
-- record says 'lease lost', whatever the caller's outcome, and counts as lost.
-- Reply: 1 released (or kept), 0 the lock was no longer ours.
-- Wakes the waiter at the head of the queue (skipping waiters that stopped refreshing their
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
local released = 0
if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  local keep = tonumber(ARGV[3])
  if keep > 0 then
    redis.call('PEXPIRE', KEYS[1], keep)
    if redis.call('PEXPIRE', KEYS[2], keep) == 1 then
      redis.call('HSET', KEYS[2], 'finished', 1)
    end
  else
    redis.call('DEL', KEYS[1], KEYS[2])
    if ARGV[2] ~= '' then wake(ARGV[2]) end
  end
  released = 1
end
if ARGV[4] ~= '' then
  local outcome = ARGV[4]
  redis.call('HSET', KEYS[3], unpack(ARGV, 6))
  if released == 0 then
    outcome = 'lease lost'
    redis.call('HSET', KEYS[3], 'outcome', outcome)
  end
  redis.call('PEXPIRE', KEYS[3], ARGV[5])
  redis.call('HINCRBY', KEYS[4], 'runs', 1)
  if outcome == 'lease lost' then redis.call('HINCRBY', KEYS[4], 'lost', 1) end
  if outcome == 'failed' or outcome == 'killed' then
    redis.call('HINCRBY', KEYS[4], 'failed', 1)
  end
  redis.call('PEXPIRE', KEYS[4], ARGV[5])
end
return released
