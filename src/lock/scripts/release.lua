-- release: compare-and-delete (or, with --hold-at-least, compare-and-pexpire), plus the record
-- of the run and the counters.
-- KEYS[1] lock   KEYS[2] holder record (see holder.lua)   KEYS[3] the audit log (see
--         audit.lua): a recorded end is logged, 'released' or 'lost'   KEYS[4] the lock's
--         record (hash: the counters and the last run)   KEYS[5] queue   KEYS[6] queue
--         liveness   KEYS[7] waiters (see acquire.lua): KEYS[5..7] are not given by an
--         exclusive run's release (each key a script is given costs the server), which looks
--         at the queue only when a waiter queued behind its hold (the holder record's
--         KEYS[2]:queued, see holder.lua, which it deletes with the lock), and then names them
--         after the holder record, in its slot
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
--         \31FENCE\31PID\31USER' (record::LastRun writes it)   ARGV[6] its host   ARGV[7] its
--         command   ARGV[8] the audit entry's fields after the outcome (exit=, duration_ms=,
--         fence=, by=, host=, pid=; record.rs writes them)   ARGV[9] who replaced the run (none
--         when nobody did)
-- Without a run (ARGV[3] ''), ARGV[4] says why the hold ends ('given back': a grant nothing ran
-- under, 'not started': a run that started nothing, 'by token': `redlock release --token`; none
-- reads as 'given back') and ARGV[5] who ends it (host=, pid=; none when unknown).
-- The lock's record keeps the last run in three fields ('last', 'host', 'cmd'), each under the
-- 64 bytes of Redis's compact hash encoding, and the layout ('v', see audit.lua).
-- A run whose lock was no longer ours at the release was not covered the whole time: its
-- record says 'lease lost', whatever the caller's outcome, and counts as lost. When a run last
-- ended ok is 'last' while the last run did; a run that ends otherwise after one that ended ok
-- moves that run's end to 'last_ok' (an ok run, the common one, writes a field less).
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
local released, head = 0, nil
-- The lock key of another type is not ours (the run lost it); any other refusal of the read (an
-- ACL's) is the release's error, not a lost lease.
local current = redis.pcall('GET', KEYS[1])
if current == ARGV[1] then
  -- The holder record (holder.lua's holder_read and holder_with, written out: release.lua
  -- defines no function its common path does not call, see acquire.lua), read by a hold
  -- ended without a run, for the fence its take logged, and by one kept, which marks it
  -- finished.
  local h = nil
  if ARGV[3] == '' or keep > 0 then
    h = redis.pcall('GET', KEYS[2])
    if type(h) == 'table' and not string.find(h.err or '', 'WRONGTYPE', 1, true) then error(h) end
    if type(h) ~= 'string' then h = nil
    elseif string.sub(h, 1, 4) ~= 'v=' .. LAYOUT .. '\31' then
      local v = string.match(h, '^v=([^\31]*)')
      if v then
        error({err = 'LAYOUT the holder record ' .. KEYS[2] .. ' is of data layout ' .. v ..
          ', not ' .. LAYOUT .. ': written by another redlock, which this one does not read'})
      end
      h = nil
    end
    if h and ARGV[3] == '' then given_fence = string.match(h, '\31fence=(%d+)') end
  end
  if keep > 0 then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    if h then
      if not string.find(h, '\31finished=1', 1, true) then h = h .. '\31finished=1' end
      redis.call('SET', KEYS[2], h, 'PX', ARGV[2])
    end
  else
    -- (An undoing, which wakes nobody, leaves the waiters' mark to the next release.)
    local gone = 0
    if ARGV[2] == '' then redis.call('DEL', KEYS[1], KEYS[2])
    else gone = redis.call('DEL', KEYS[1], KEYS[2], KEYS[2] .. ':queued') end
    if gone > 2 or (KEYS[5] and ARGV[2] ~= '') then
      if not KEYS[5] then
        local named = string.sub(KEYS[2], 1, -7)
        KEYS[5], KEYS[6], KEYS[7] = named .. 'queue', named .. 'alive', named .. 'waiters'
      end
      head = redis.call('ZRANGE', KEYS[5], '0', '0')[1]
    end
  end
  released = 1
elseif type(current) == 'table' and not string.find(current.err or '', 'WRONGTYPE', 1, true) then
  error(current)
end
-- The common release, of an exclusive hold with nobody queued, goes on to the record of the
-- run (release_record.lua): the functions that wake a waiter or end a shared hold (queue.lua,
-- shapes.lua, release_rest.lua) are defined only in the block this opens, by a release that
-- needs them, and the record is written in the script's body, not by a function, since each
-- function a script defines costs the server on every call that reaches its definition (see
-- acquire.lua). release_rest.lua closes the block.
if head or (released == 0 and KEYS[8]) then
