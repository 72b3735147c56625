-- audit (put in front of every script that writes the audit log): a lock's audit log is a
-- list (KEYS named by each script) of entries 'MS\31EVENT\31name=value\31...', MS the server's
-- clock. It keeps its last 1000 entries; as it grows, entries more than 30 days older than the
-- newest go (the oldest is looked at every 32nd entry); and the key expires 30 days after its
-- last entry. A list rather than a stream: a stream's first node takes 4 KB, most of what an
-- idle lock would cost the server.
-- audit(list, now, event, body): appends an entry; now is the server's clock in ms (a number,
-- or text written with %d), body '' or name=value pairs separated by '\31'.
-- Every number the scripts give redis.call is text written with %d (NUMBERS below): Redis
-- would write a Lua number with %.17g, many times slower, and Lua's own conversion writes a
-- fence as 1.79e+15.
local function audit(list, now, event, body)
  if type(now) == 'number' then now = string.format('%d', now) end
  local entry = now .. '\31' .. event
  if body ~= '' then entry = entry .. '\31' .. body end
  local n = redis.call('RPUSH', list, entry)
  if n > 1000 then
    redis.call('LTRIM', list, '-1000', '-1')
  elseif n % 32 == 0 then
    local cutoff = tonumber(now) - 2592000000
    for _ = 1, 32 do
      local oldest = redis.call('LINDEX', list, '0')
      if not oldest or (tonumber(string.match(oldest, '^(%d+)')) or 0) >= cutoff then break end
      redis.call('LPOP', list)
    end
  end
  redis.call('PEXPIRE', list, '2592000000')
end
