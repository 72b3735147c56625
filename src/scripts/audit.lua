-- audit (put in front of every script that writes the audit log): the lock's audit log is a
-- stream, KEYS named by each script. Entry IDs are the server's clock. It keeps 1000 to 1099
-- entries (trimmed a stream node of 100 at a time, which costs far less than an exact trim),
-- the key expires 30 days after the last entry, and every 64th run's release drops entries
-- older than 30 days (audit_age; it needs Redis 6.2, older servers keep the other two bounds).
-- audit(stream, event, ...): appends {event, field/value pairs...}; returns the entry's ID.
local function audit(stream, event, ...)
  local id = redis.call('XADD', stream, 'MAXLEN', '~', 1000, '*', 'event', event, ...)
  redis.call('PEXPIRE', stream, 2592000000)
  return id
end
-- audit_age(stream, id): drops the entries more than 30 days older than entry `id`.
local function audit_age(stream, id)
  local ms = tonumber(string.match(id, '^(%d+)'))
  redis.pcall('XTRIM', stream, 'MINID', ms - 2592000000)
end
