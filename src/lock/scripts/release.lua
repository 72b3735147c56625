-- release: compare-and-delete (or, with --hold-at-least, compare-and-pexpire), plus the record
-- of the run and the counters.
-- KEYS[1] lock   KEYS[2] holder record   KEYS[3] the last-run record of an earlier version
--         (unused)   KEYS[4] the lock's record (hash: the counters and the last run)
-- KEYS[5] queue   KEYS[6] queue liveness   KEYS[7] waiters (see acquire.lua)
-- KEYS[8] shared leases   KEYS[9] shared holders (see shapes.lua)
-- KEYS[10] the --once-per window's record (see acquire.lua): the window's run (ARGV[6] given)
--          records how it ended there; an acquire undone (no record) gives the window back.
-- KEYS[11] the audit log (see audit.lua): a recorded end is logged, 'released' or 'lost'
-- ARGV[1] token   ARGV[2] release channel ('' to publish nothing)   ARGV[3] keep (ms; 0 deletes)
-- ARGV[4] outcome ('' records nothing)   ARGV[5] record ttl (ms)   ARGV[6] '1' for the run of a
-- --once-per window ('' otherwise)   ARGV[7] who ends it, as the audit log writes it (host=,
-- pid=; record.rs writes it)
-- ARGV[8..] the last run as field/value pairs (record.rs writes them), stored in KEYS[4] as given
-- A run whose lock was no longer ours at the release was not covered the whole time: its
-- record says 'lease lost', whatever the caller's outcome, and counts as lost. A run that
-- ended 'ok' stamps last_ok with when it ended: when a run last succeeded, which the last
-- run's fields alone forget at the next failure. When a run ended (last_ok, the audit entry,
-- the --once-per window's end) is its start on the server's clock plus its duration (the
-- record's started and duration_ms), which costs the server no TIME.
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
      redis.call('HSET', KEYS[2], 'finished', '1')
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
      redis.call('ZADD', KEYS[8], 'XX', string.format('%d', now + keep), ARGV[1])
      local finished = ARGV[1] .. ':finished'
      redis.call('HSET', KEYS[9], finished, '1')
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
  if released == 0 then outcome = 'lease lost' end
  local record, f = {}, {}
  for i = 8, #ARGV - 1, 2 do
    local value = ARGV[i + 1]
    if ARGV[i] == 'outcome' then value = outcome end
    record[#record + 1] = ARGV[i]
    record[#record + 1] = value
    f[ARGV[i]] = value
  end
  local now = (tonumber(f.started) or 0) + (tonumber(f.duration_ms) or 0)
  if not (f.started and f.duration_ms) then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  now = string.format('%d', now)
  if outcome == 'ok' then
    record[#record + 1] = 'last_ok'
    record[#record + 1] = now
  end
  redis.call('HSET', KEYS[4], unpack(record))
  redis.call('HINCRBY', KEYS[4], 'runs', '1')
  if outcome == 'lease lost' then redis.call('HINCRBY', KEYS[4], 'lost', '1') end
  if outcome == 'failed' or outcome == 'killed' or outcome == 'timed out' then
    redis.call('HINCRBY', KEYS[4], 'failed', '1')
  end
  redis.call('PEXPIRE', KEYS[4], ARGV[5])
  local event = 'released'
  if released == 0 then event = 'lost' end
  local by = ''
  if f.replaced_by then by = '\31by=' .. f.replaced_by end
  audit(KEYS[11], now, event, 'outcome=' .. outcome .. '\31exit=' .. (f.exit or '') ..
    '\31duration_ms=' .. (f.duration_ms or '') .. '\31fence=' .. (f.fence or '') .. by .. '\31' ..
    ARGV[7])
  -- The --once-per window's run records how it ended.
  if ARGV[6] ~= '' and redis.call('HMGET', KEYS[10], 'token')[1] == ARGV[1] then
    redis.call('HSET', KEYS[10], 'outcome', outcome, 'ended', now, 'exit', f.exit or '')
  end
elseif redis.call('HMGET', KEYS[10], 'token')[1] == ARGV[1] then
  redis.call('DEL', KEYS[10])
end
return released
