-- audit (put in front of every script that writes the audit log): the lock's audit log is a
-- stream, KEYS named by each script. Entry IDs are the server's clock. Every entry trims the
-- log to 1000 entries, a stream node of 100 at a time (far cheaper than an exact trim), so it
-- holds at most 1100; a release's entry also drops every entry more than 30 days older than
-- the run's end; and the key expires 30 days after the last entry.
-- audit(stream, event, ...): appends {event, field/value pairs...}; returns the entry's ID.
local function audit(stream, event, ...)
  local id = redis.call('XADD', stream, 'MAXLEN', '~', 1000, '*', 'event', event, ...)
  redis.call('PEXPIRE', stream, 2592000000)
  return id
end
-- audit_aged(stream, now, event, ...): the same, dropping the entries older than 30 days
-- before `now` (ms) too. XADD takes one trim: the entry trims by age (MINID, Redis 6.2) and an
-- XTRIM then by length, so that many releases in a row (shared holders ending together) keep
-- the bound. A server before 6.2 trims by length in the XADD; a user whose ACL lacks XTRIM
-- (the recipe of an earlier version) keeps the age trim, as before.
local function audit_aged(stream, now, event, ...)
  local id = redis.pcall('XADD', stream, 'MINID', now - 2592000000, '*', 'event', event, ...)
  if type(id) == 'table' and id.err then
    id = redis.call('XADD', stream, 'MAXLEN', '~', 1000, '*', 'event', event, ...)
  else
    redis.pcall('XTRIM', stream, 'MAXLEN', '~', 1000)
  end
  redis.call('PEXPIRE', stream, 2592000000)
  return id
end
