-- taking (put in front of the acquire scripts, after audit.lua): how acquire.lua and
-- acquire_all.lua take a lock.
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
-- new_fence(counter, t): the fence of a lock taken now (t: the server's TIME), and its text.
-- It is above every fence handed out before, even when the counter was lost (a restart without
-- persistence, a flush, a failover to a lagging replica): it is at least the server's clock in
-- microseconds (below 2^53 until the year 2255, so JSON readers keep it exact). The counter
-- lives as long as the records (RETAIN) after the last take: a fence handed out after it
-- expired is still above every earlier one, floored by the clock. The clock is written first
-- and the counter read in the same command (SET ... GET, Redis 6.2); one at or above it is
-- raised by one, which the clock makes rare. Before 6.2 the counter is read, then written.
local function new_fence(counter, t)
  local fence = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local fence_text = string.format('%d', fence)
  local old = redis.pcall('SET', counter, fence_text, 'PX', RETAIN, 'GET')
  if type(old) == 'table' then
    old = redis.call('GET', counter)
    if (tonumber(old) or 0) < fence then
      redis.call('SET', counter, fence_text, 'PX', RETAIN)
    end
  end
  if (tonumber(old) or 0) >= fence then
    fence = tonumber(old) + 1
    fence_text = string.format('%d', fence)
    redis.call('SET', counter, fence_text, 'PX', RETAIN)
  end
  return fence, fence_text
end
