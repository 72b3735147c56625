-- audit (put in front of every script that writes the audit log): the lock's audit log is a
-- stream, KEYS named by each script, kept to its last 1000 entries and to entries younger than
-- 30 days (the age trim needs Redis 6.2; older servers keep the length bound and the key's
-- expiry, 30 days after the last entry). Entry IDs are the server's clock.
-- audit(stream, event, ...): appends {event, field/value pairs...}.
local function audit(stream, event, ...)
  local id = redis.call('XADD', stream, 'MAXLEN', 1000, '*', 'event', event, ...)
  local ms = tonumber(string.match(id, '^(%d+)'))
  redis.pcall('XTRIM', stream, 'MINID', ms - 2592000000)
  redis.call('PEXPIRE', stream, 2592000000)
end
