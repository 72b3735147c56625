-- taking (put in front of the acquire scripts, after audit.lua and holder.lua): how
-- acquire.lua and acquire_all.lua take a lock.
-- write_holder(record, ttl, now, fence, who, replace, ticket): writes the holder record of a
-- lock just taken (see holder.lua: its layout, started, ttl, fence, who: the holder's identity
-- as the audit log writes it, replace=no when `replace` is 'no', and a replacer's grant's
-- ticket), living `ttl`. A record that outlived its lock (a foreign client deleted the key)
-- lends the new holder none of its fields, a stop request (--replace) above all: it is
-- written whole.
local function write_holder(record, ttl, now, fence, who, replace, ticket)
  local s = 'v=' .. LAYOUT .. '\31started=' .. now .. '\31ttl=' .. ttl .. '\31fence=' .. fence ..
    '\31' .. who
  if replace == 'no' then s = s .. '\31replace=no' end
  if ticket then s = s .. '\31ticket=' .. ticket end
  redis.call('SET', record, s, 'PX', ttl)
end
-- counter_refusal(counter, old): the error (LAYOUT) for a fence counter no take may pass, nil
-- for one it may: a counter that is not a decimal is another layout's (a later layout that 1.x
-- must not take writes it as VERSION:FENCE); one at 2^53 - 1 or above was set by hand (a fence
-- stays below 2^53, which JSON readers keep exact, and the next would be no larger). new_fence
-- and acquire_all.lua's reading of every lock ask it; acquire.lua's common take writes the
-- same out (keep the two alike).
local function counter_refusal(counter, old)
  if not string.find(old, '^%d+$') then
    return {err = 'LAYOUT the fence counter ' .. counter .. ' is ' .. old ..
      ', not of data layout ' .. LAYOUT .. ': written by another redlock; nothing was taken'}
  end
  if #old > 16 or (#old == 16 and old >= '9007199254740991') then
    return {err = 'LAYOUT the fence counter ' .. counter .. ' is ' .. old ..
      ', at the end of the fences redlock hands out (below 2^53): set by hand, it cannot ' ..
      'grow; nothing was taken'}
  end
end
-- new_fence(counter, us): the fence of a lock taken now (us: the server's clock in µs, as
-- text), as text (twice: the fence, and the text of it), and whether it is the first take of
-- its window of the server's clock (fresh: the counter was missing, or its last fence was
-- handed out in another window, its first five digits another 10^11 µs), which writes the
-- records' expiry (see audit.lua's RETAIN). It is above every fence handed out
-- before, even when the counter was lost (a restart without persistence, a flush, a failover
-- to a lagging replica): it is at least the server's clock in microseconds (below 2^53 until
-- the year 2255, so JSON readers keep it exact). The counter lives as long as the records
-- (RETAIN) after the last take: a fence handed out after it expired is still above every
-- earlier one, floored by the clock. The clock is written first and the counter read in the
-- same command (SET ... GET, Redis 6.2); one at or above it is raised by one, which the clock
-- makes rare. Before 6.2 the counter is read, then written. Two decimals of the same length
-- compare as text, so the common case converts no number. A counter that counter_refusal
-- turns down refuses the take (LAYOUT), the counter given back as it was.
local function new_fence(counter, fence_text)
  local old = redis.pcall('SET', counter, fence_text, 'PX', RETAIN, 'GET')
  if type(old) == 'table' then
    old = redis.call('GET', counter)
    if not old or (#old == #fence_text and old < fence_text) then
      redis.call('SET', counter, fence_text, 'PX', RETAIN)
    end
  end
  if old and (#old ~= #fence_text or old >= fence_text) then
    local refusal = counter_refusal(counter, old)
    if refusal then
      redis.call('SET', counter, old, 'KEEPTTL')
      error(refusal)
    end
    if tonumber(old) >= tonumber(fence_text) then
      fence_text = string.format('%d', tonumber(old) + 1)
      redis.call('SET', counter, fence_text, 'PX', RETAIN)
    end
  end
  local fresh = not old or #old ~= #fence_text
    or string.sub(old, 1, 5) ~= string.sub(fence_text, 1, 5)
  return fence_text, fence_text, fresh
end
