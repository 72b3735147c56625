-- release: compare-and-delete (or, with --hold-at-least, compare-and-pexpire), plus the record
-- of the run and the counters.
-- KEYS[1] lock   KEYS[2] holder record   KEYS[3] the audit log (see audit.lua): a recorded end
--         is logged, 'released' or 'lost'   KEYS[4] the lock's record (hash: the counters and
--         the last run)   KEYS[5] queue   KEYS[6] queue liveness   KEYS[7] waiters (see
--         acquire.lua)
-- KEYS[8] shared leases   KEYS[9] shared holders (see shapes.lua): given by a shared or slotted
--         holder's release, by one that names KEYS[10], and by one that knows no run (an
--         exclusive holder has no lease there)
-- KEYS[10] the --once-per window's record (see acquire.lua), given by a run of a window and by
--          a release that knows no run: the window's run records how it ended there; an
--          acquire undone (no outcome) gives the window back
-- ARGV[1] token   ARGV[2] keep (ms; 0 deletes; '' deletes and wakes nobody: an acquire
--         attempt undone, see hold.rs)   ARGV[3] outcome ('' records nothing)
-- ARGV[4] when the run ended (ms: its start on the server's clock plus its duration, which
--         costs the server no TIME; '' for the server's clock)
-- ARGV[5] the last run after its outcome, as the record keeps it: 'EXIT\31STARTED\31DURATION_MS
--         \31FENCE' (record::LastRun writes it)   ARGV[6..9] its host, pid, user, command
-- ARGV[10] the audit entry's fields after the outcome (exit=, duration_ms=, fence=, by=, host=,
--          pid=; record.rs writes them)   ARGV[11] who replaced the run (none when nobody did)
-- Without a run (ARGV[3] ''), ARGV[4] says why the hold ends ('given back': a grant nothing ran
-- under, 'not started': a run that started nothing, 'by token': `redlock release --token`; none
-- reads as 'given back') and ARGV[5] who ends it (host=, pid=; none when unknown).
-- The lock's record keeps the last run in few fields ('last' and the identity), each under the
-- 64 bytes of Redis's compact hash encoding, and the layout ('v', see audit.lua).
-- A run whose lock was no longer ours at the release was not covered the whole time: its
-- record says 'lease lost', whatever the caller's outcome, and counts as lost. A run that
-- ended 'ok' stamps last_ok with when it ended: when a run last succeeded, which the last
-- run's fields alone forget at the next failure.
-- A shared holder (--shared, --slots) ends only its own lease, and wakes the next waiter: a
-- slot, or the last shared hold, may have become free. Kept (--hold-at-least), its lease
-- ends at the kept time and the holders hash says its command ended (TOKEN:finished).
-- A hold that ends without a run is logged too, when the token still held the lock: every
-- 'acquired' in the audit log has one end, 'released' with the why of ARGV[4] as its outcome
-- and the fence the take logged (read here, before the hold's records go: a run's release
-- knows its fence and pays nothing for this).
-- Reply: 1 released (or kept), 0 the lock was no longer ours.
-- (A plain release's keep, '0', is not converted: a conversion costs the server.)
local keep = 0
if ARGV[2] ~= '0' then keep = tonumber(ARGV[2]) or 0 end
-- The fence of a hold ended without a run, for its audit entry.
local given_fence = nil
-- finish(released): records the run (when ARGV[3] gives an outcome) and replies.
local function finish(released)
  if ARGV[3] ~= '' then
    local outcome = ARGV[3]
    if released == 0 then outcome = 'lease lost' end
    local ended = ARGV[4]
    if ended == '' then
      local t = redis.call('TIME')
      ended = string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
    end
    local last = outcome .. '\31' .. ARGV[5]
    local created
    if outcome == 'ok' then
      created = redis.call('HSET', KEYS[4], 'last', last, 'host', ARGV[6], 'pid', ARGV[7], 'user',
        ARGV[8], 'cmd', ARGV[9], 'last_ok', ended)
    else
      created = redis.call('HSET', KEYS[4], 'last', last, 'host', ARGV[6], 'pid', ARGV[7], 'user',
        ARGV[8], 'cmd', ARGV[9])
    end
    if ARGV[11] then redis.call('HSET', KEYS[4], 'replaced_by', ARGV[11]) end
    redis.call('HINCRBY', KEYS[4], 'runs', '1')
    if outcome == 'lease lost' then redis.call('HINCRBY', KEYS[4], 'lost', '1') end
    if outcome == 'failed' or outcome == 'killed' or outcome == 'timed out' then
      redis.call('HINCRBY', KEYS[4], 'failed', '1')
    elseif outcome == 'replaced' then
      redis.call('HINCRBY', KEYS[4], 'replaced', '1')
    end
    -- The record's expiry is written by the take that began its window (acquire.lua), and here
    -- only when this write made the record (or a field of it) anew.
    if created > 0 then
      redis.call('HSET', KEYS[4], 'v', LAYOUT)
      redis.call('PEXPIRE', KEYS[4], RETAIN)
    end
    local event = 'released'
    if released == 0 then event = 'lost' end
    audit(KEYS[3], ended, event, 'outcome=' .. outcome .. '\31' .. ARGV[10])
    -- The --once-per window's run records how it ended.
    if KEYS[10] and redis.call('HMGET', KEYS[10], 'token')[1] == ARGV[1] then
      redis.call('HSET', KEYS[10], 'outcome', outcome, 'ended', ended, 'exit',
        string.match(ARGV[5], '^[^\31]*'))
    end
  else
    if released == 1 then
      local t = redis.call('TIME')
      local why = ARGV[4]
      if not why or why == '' then why = 'given back' end
      local body = 'outcome=' .. why .. '\31fence=' .. (given_fence or '')
      if ARGV[5] and ARGV[5] ~= '' then body = body .. '\31' .. ARGV[5] end
      audit(KEYS[3], string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)),
        'released', body)
    end
    if KEYS[10] and redis.call('HMGET', KEYS[10], 'token')[1] == ARGV[1] then
      redis.call('DEL', KEYS[10])
    end
  end
  return released
end
local released, head = 0, nil
if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  if ARGV[3] == '' then
    local f = redis.pcall('HMGET', KEYS[2], 'fence', 'v')
    if not f.err then
      if f[2] and f[2] ~= LAYOUT then
        error({err = 'LAYOUT ' .. 'the holder record ' .. KEYS[2] .. ' is of data layout ' .. f[2] .. ', not ' .. LAYOUT ..
          ': written by another redlock, which this one does not read'})
      end
      given_fence = f[1]
    end
  end
  if keep > 0 then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    if redis.call('PEXPIRE', KEYS[2], ARGV[2]) == 1 then
      redis.call('HSET', KEYS[2], 'finished', '1')
    end
  else
    redis.call('DEL', KEYS[1], KEYS[2])
    if ARGV[2] ~= '' then head = redis.call('ZRANGE', KEYS[5], '0', '0')[1] end
  end
  released = 1
end
-- The common release, of an exclusive hold with nobody queued, ends here: the functions that
-- wake a waiter or end a shared hold (queue.lua, shapes.lua, release_rest.lua) are defined
-- only by a release that goes on (see acquire.lua).
if not head and (released == 1 or not KEYS[8]) then return finish(released) end
