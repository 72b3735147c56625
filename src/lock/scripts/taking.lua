-- taking (put in front of the acquire scripts): what acquire.lua and acquire_all.lua share.
-- paused(key, now): the pause record `key` holds while it is in force (its until, ms, is 0 or
-- still ahead), else nil; its fields are record::PAUSE_BRIEF's (host, pid, user, reason,
-- since, until). A record the script may not read (another type of key) counts as none.
local function paused(key, now)
  local p = redis.pcall('HMGET', key, 'host', 'pid', 'user', 'reason', 'since', 'until')
  if p.err or not p[5] then return nil end
  local u = tonumber(p[6]) or 0
  if u ~= 0 and u <= now then return nil end
  return p
end
-- write_holder(record, ttl, now, fence, from): writes the holder record of a lock just taken
-- (started, renewed, ttl, fence, finished, and the holder's identity pairs from ARGV[from]),
-- living `ttl`. A record that outlived its lock (a foreign client deleted the key) must not lend
-- the new holder its fields, a stop request (--replace) above all: HSET counts the fields it
-- added, and fewer than written means some were there; the record is then written anew.
local function write_holder(record, ttl, now, fence, from)
  local function write()
    return redis.call('HSET', record, 'started', now, 'renewed', now, 'ttl', ttl,
      'fence', fence, 'finished', '0', unpack(ARGV, from))
  end
  if write() < 5 + (#ARGV - from + 1) / 2 then
    redis.call('DEL', record)
    write()
  end
  redis.call('PEXPIRE', record, ttl)
end
