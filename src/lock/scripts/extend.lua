-- extend: compare-and-pexpire; renews only our own lease, and the holder record with it.
-- A renewal never shortens the key's life: it moves the expiry only later, so a late renewal
-- cannot undo a longer hold (--hold-at-least, or an extend with a longer TTL), and once the
-- command has finished (the release kept the key: 'finished' is set) it changes nothing.
-- A shared holder (--shared, --slots) renews its own entry in the leases, never past its end.
-- KEYS[1] lock   KEYS[2] holder record (see holder.lua)   KEYS[3] shared leases
-- KEYS[4] shared holders
-- KEYS[5] (a waiter confirming its provisional grant, see acquire.lua) the --once-per window's
--         record: a window 'granted' to this token is now 'running'
-- ARGV[1] token   ARGV[2] ttl (ms)
-- Reply: 1 renewed (or already living at least that long), 0 someone else's, -1 free (the key
-- is gone: expired, released, or lost by the server); who asked, when a run asked this holder
-- to stop (--replace, see acquire.lua): not renewed, its command is to be stopped.
local RUNNING = 'running'
local function confirm_window()
  if not KEYS[5] then return end
  local r = redis.call('HMGET', KEYS[5], 'token', 'outcome')
  if r[1] == ARGV[1] and r[2] == 'granted' then
    redis.call('HSET', KEYS[5], 'outcome', RUNNING)
  end
end
local current = redis.call('GET', KEYS[1])
if current ~= ARGV[1] then
  local deadline = redis.call('ZSCORE', KEYS[3], ARGV[1])
  if deadline then
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    if tonumber(deadline) > now then
      redis.call('ZADD', KEYS[3], 'GT', string.format('%d', now + tonumber(ARGV[2])), ARGV[1])
      sharers_expire(KEYS[3], KEYS[4], now)
      confirm_window()
      return 1
    end
  end
  if current then return 0 end
  return -1
end
local h = holder_read(KEYS[2])
if h then
  if string.find(h, '\31finished=1', 1, true) then return 1 end
  local stop = string.match(h, '\31stop=([^\31]*)')
  if stop then return stop end
end
confirm_window()
-- Numbers go to redis.call as text written with %d (see audit.lua).
local longer = redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2])
if longer then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
if h then
  local t = redis.call('TIME')
  local now = string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
  h = holder_with(h, 'renewed', now)
  if longer then
    redis.call('SET', KEYS[2], holder_with(h, 'ttl', ARGV[2]), 'PX', ARGV[2])
  else
    holder_update(KEYS[2], h)
  end
end
return 1
