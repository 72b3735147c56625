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
-- write_holder(record, ttl, now, fence, who, replace): writes the holder record of a lock just
-- taken (started, ttl, fence, who: the holder's identity as the audit log writes it, and
-- replace=no when `replace` is 'no'), living `ttl`. A record that outlived its lock (a foreign
-- client deleted the key) must not lend the new holder its fields, a stop request (--replace)
-- above all: HSET counts the fields it added, and fewer than written means some were there;
-- the record is then written anew.
local function write_holder(record, ttl, now, fence, who, replace)
  for _ = 1, 2 do
    if replace == 'no' then
      if redis.call('HSET', record, 'started', now, 'ttl', ttl, 'fence', fence, 'who', who,
          'replace', 'no') == 5 then break end
    elseif redis.call('HSET', record, 'started', now, 'ttl', ttl, 'fence', fence, 'who', who)
        == 4 then
      break
    end
    redis.call('DEL', record)
  end
  redis.call('PEXPIRE', record, ttl)
end
