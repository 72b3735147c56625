-- paused (put in front of the acquire scripts' rare paths): a lock's pause records.
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
