-- audit (put in front of every script that writes the audit log): a lock's audit log is a list
-- (KEYS named by each script) of entries 'MS\31EVENT\31name=value\31...', MS the server's clock. It
-- keeps its last 1000 entries, trimmed back to them every 32nd entry (so at most 1023: a trim moves
-- the rest of the list's first node, which on every append would cost more than the append); as it
-- grows, entries more than 30 days older than the newest go (the oldest is looked at every 32nd
-- entry while it holds 1000 or fewer); and the key expires RETAIN after its last entry but those
-- that follow a take: the end of a run ('released', 'lost') and a refusal ('busy', 'skipped')
-- write no expiry unless they create the list, since the take before them set one (the audit
-- log of a lock in use lives at least 30 days after its last take). A take writes it only when
-- it is the first of its window (`fresh`, see taking.lua's new_fence). A list rather than a stream: a stream's first node takes
-- 4 KB, most of what an idle lock would cost the server.
-- audit(list, now, event, body, fresh): appends an entry; now is the server's clock in ms (a
-- number, or text written with %d), body '' or name=value pairs separated by '\31'; fresh:
-- false for a take that is not the first of its window (nil: any other entry); entry: the
-- entry itself, when the caller made it (a body is then nil): one concatenation makes one
-- string, where body and entry made apart make two, each hashed and collected by the server.
-- pushed: the list's length when the caller appended the entry itself (a plain run's take and
-- release do, and call audit only when its length or `fresh` asks for a trim or an expiry:
-- a call costs the server more than the append), which audit then only trims and expires.
-- audit uses no local of the script's (RETAIN is written out in it: scripts.rs checks that the
-- two agree): a function that does is given the local as an upvalue when it is defined,
-- which costs the server on every call of the script, whether audit is called or not.
-- Every number the scripts give redis.call is text written with %d (NUMBERS below): Redis
-- would write a Lua number with %.17g, many times slower, and Lua's own conversion writes a
-- fence as 1.79e+15.
-- RETAIN: how long a lock's records (the fence counter, the lock's record, the audit log) are
-- kept after their last write, in ms (keys.rs's RECORD_TTL): 30 days and a window of the
-- server's clock (10^8 ms, about 28 hours). A take writes the expiry of the lock's record and
-- of its audit log only when it is the first take of its window (new_fence's `fresh`): an
-- expiry costs the server more than the write it follows, and a lock taken every minute needs
-- it once a day. Each is kept at least 30 days after the lock's last take, at most 31.2.
local RETAIN = '2692000000'
-- LAYOUT: the version of the data layout the scripts write and read (record::LAYOUT): the field
-- 'v' of the holder record and of the lock's record. A script refuses (an error reply LAYOUT,
-- which redlock reports with status 78) a record of another layout, before anything is
-- written, where it reads one (the check is written out there: a function would be defined
-- on every call, which costs the server, the common paths included); a record without the
-- field is this layout's.
local LAYOUT = '1'
local function audit(list, now, event, body, fresh, entry, pushed)
  if type(now) == 'number' then now = string.format('%d', now) end
  local n = pushed
  if not n then
    if entry then
    elseif body ~= '' then entry = now .. '\31' .. event .. '\31' .. body
    else entry = now .. '\31' .. event end
    n = redis.call('RPUSH', list, entry)
  end
  if n % 32 == 0 then
    if n > 1000 then
      redis.call('LTRIM', list, '-1000', '-1')
    else
      local cutoff = tonumber(now) - 2592000000
      for _ = 1, 32 do
        local oldest = redis.call('LINDEX', list, '0')
        if not oldest or (tonumber(string.match(oldest, '^(%d+)')) or 0) >= cutoff then break end
        redis.call('LPOP', list)
      end
    end
  end
  if n == 1 or (fresh ~= false and not (event == 'released' or event == 'lost'
      or event == 'busy' or event == 'skipped')) then
    redis.call('PEXPIRE', list, '2692000000')
  end
end
