-- holder (put in front of the scripts that read or change a holder record, after audit.lua):
-- the holder record of an exclusive hold is a string that lives as long as the lease, its
-- fields name=value pairs separated by the ASCII unit separator, the layout first:
--   v=1 started=MS ttl=MS fence=F host=… pid=… user=… cmd=… [renew=no] [replicas=N]
--   [replace=no]
-- (the identity, host to replicas, as the audit log writes it: record.rs), and then the fields
-- set while it holds: renewed=MS (extend.lua), finished=1 (a release that keeps the lock),
-- stop=WHO (a replacer asked it to stop), ticket=T (a replacer's provisional grant).
-- Beside it, RECORD:queued (a string, '1') says a waiter queued behind the hold: every
-- attempt of a queued waiter writes it, living as long as the queue's keys (QUEUE_KEPT), and
-- so does a take with a queue there; the release deletes it with the lock and the record,
-- and looks at the queue (to wake its head) only when it was there: a plain release reads no
-- queue. One missed (lapsed, or never written by a foreign client's waiter) delays a waiter
-- to its own next attempt, which writes it again. A string
-- rather than a hash: the take writes it and its expiry in one SET, the common release
-- deletes it with the lock, and a string has no size past which Redis stores it larger.
-- acquire.lua writes it on its common path itself; taking.lua's write_holder on the others.
-- holder_read(record): the record's text, nil when there is none or the key is not a string
-- (any other error, an ACL's refusal, stands); a record of another layout is refused (LAYOUT,
-- before anything is written).
local function holder_read(record)
  local s = redis.pcall('GET', record)
  if type(s) == 'table' and not string.find(s.err or '', 'WRONGTYPE', 1, true) then error(s) end
  if type(s) ~= 'string' then return nil end
  if string.sub(s, 1, 4) ~= 'v=' .. LAYOUT .. '\31' then
    local v = string.match(s, '^v=([^\31]*)')
    if v then
      error({err = 'LAYOUT the holder record ' .. record .. ' is of data layout ' .. v ..
        ', not ' .. LAYOUT .. ': written by another redlock, which this one does not read'})
    end
    return nil
  end
  return s
end
-- holder_with(s, name, value): the record's text with name=value, in place of an earlier
-- value of that field or added at the end.
local function holder_with(s, name, value)
  local field = '\31' .. name .. '='
  local at = string.find(s, field, 1, true)
  if not at then return s .. field .. value end
  local after = string.find(s, '\31', at + #field, true)
  return string.sub(s, 1, at - 1) .. field .. value .. (after and string.sub(s, after) or '')
end
-- holder_update(record, s): writes the record's text s, living as long as it has left (a
-- change to a record never lengthens it; nothing is written when it is gone). Redis 5 has no
-- SET … KEEPTTL.
local function holder_update(record, s)
  local left = redis.call('PTTL', record)
  if left > 0 then redis.call('SET', record, s, 'PX', string.format('%d', left)) end
end
