-- release: compare-and-delete (or, with --hold-at-least, compare-and-pexpire), plus the record
-- of the run and the counters.
-- KEYS[1] lock   KEYS[2] holder record   KEYS[3] last-run record (hash)   KEYS[4] counters
-- KEYS[5] queue   KEYS[6] queue liveness   KEYS[7] waiters (see acquire.lua)
-- KEYS[8] shared leases   KEYS[9] shared holders (see shapes.lua)
-- KEYS[10] the --once-per window's record (see acquire.lua): the run that took the window
--          (its record has once_per) records how it ended there; an acquire undone (no record)
--          gives the window back.
-- KEYS[11] the audit log (see audit.lua): a recorded end is logged, 'released' or 'lost'
-- ARGV[1] token   ARGV[2] release channel ('' to publish nothing)   ARGV[3] keep (ms; 0 deletes)
-- ARGV[4] outcome ('' records nothing)   ARGV[5] record ttl (ms)
-- ARGV[6..] the last-run record as field/value pairs (record.rs writes them)
-- A run whose lock was no longer ours at the release was not covered the whole time: its
-- record says 'lease lost', whatever the caller's outcome, and counts as lost. A run that
-- ended 'ok' stamps the counters' last_ok with the server's clock (ms): when a run last
-- succeeded, which the last-run record alone forgets at the next failure.
-- A shared holder (--shared, --slots) ends only its own lease, and wakes the next waiter: a
-- slot, or the last shared hold, may have become free. Kept (--hold-at-least), its lease
-- ends at the kept time and the holders hash says its command ended (TOKEN:finished).
-- Reply: 1 released (or kept), 0 the lock was no longer ours.
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
elseif redis.call('EXISTS', KEYS[8]) == 1 then
  local deadline = tonumber(redis.call('ZSCORE', KEYS[8], ARGV[1]))
  if deadline then
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    local keep = tonumber(ARGV[3])
    if deadline > now and keep > 0 then
      redis.call('ZADD', KEYS[8], 'XX', now + keep, ARGV[1])
      local finished = ARGV[1] .. ':finished'
      redis.call('HSET', KEYS[9], finished, 1)
    else
      redis.call('ZREM', KEYS[8], ARGV[1])
      redis.call('HDEL', KEYS[9], ARGV[1])
    end
    sharers_expire(KEYS[8], KEYS[9], now)
    if deadline > now then
      if keep == 0 and ARGV[2] ~= '' then wake(ARGV[2]) end
      released = 1
    end
  end
end
if ARGV[4] ~= '' then
  local outcome = ARGV[4]
  redis.call('HSET', KEYS[3], unpack(ARGV, 6))
  if released == 0 then
    outcome = 'lease lost'
    redis.call('HSET', KEYS[3], 'outcome', outcome)
  end
  redis.call('PEXPIRE', KEYS[3], ARGV[5])
  local pairs, f = {}, {}
  for i = 6, #ARGV - 1, 2 do
    local value = ARGV[i + 1]
    if ARGV[i] == 'outcome' then value = outcome end
    pairs[#pairs + 1] = ARGV[i]
    pairs[#pairs + 1] = value
    f[ARGV[i]] = value
  end
  local event = 'released'
  if released == 0 then event = 'lost' end
  -- The entry's ID is the server's clock: when a run last succeeded, without a TIME call. The
  -- age trim is counted back from the run's end (this host's clock: days do not mind seconds).
  local id = audit_aged(KEYS[11], tonumber(f.ended) or 0, event, unpack(pairs))
  redis.call('HINCRBY', KEYS[4], 'runs', 1)
  if outcome == 'lease lost' then redis.call('HINCRBY', KEYS[4], 'lost', 1) end
  if outcome == 'ok' then
    local ms = string.match(id, '^(%d+)')
    redis.call('HSET', KEYS[4], 'last_ok', ms)
  end
  if outcome == 'failed' or outcome == 'killed' or outcome == 'timed out' then
    redis.call('HINCRBY', KEYS[4], 'failed', 1)
  end
  redis.call('PEXPIRE', KEYS[4], ARGV[5])
  -- The --once-per window's run (its record says once_per) records how it ended.
  if f.once_per and redis.call('HMGET', KEYS[10], 'token')[1] == ARGV[1] then
    redis.call('HSET', KEYS[10], 'outcome', outcome, 'ended', f.ended or '', 'exit', f.exit or '')
  end
elseif redis.call('HMGET', KEYS[10], 'token')[1] == ARGV[1] then
  redis.call('DEL', KEYS[10])
end
return released
