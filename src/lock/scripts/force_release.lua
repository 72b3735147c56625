-- force_release (release --force): delete the lock whoever holds it, every shared holder too.
-- KEYS[1] lock   KEYS[2] holder record   KEYS[3] the audit log (see audit.lua): one 'forced'
--         entry per holder removed   KEYS[4] the lock's record (counters)
-- KEYS[5] queue   KEYS[6] queue liveness   KEYS[7] waiters (see acquire.lua)
-- KEYS[8] shared leases   KEYS[9] shared holders (see shapes.lua)   KEYS[10] unused
-- ARGV[1] release channel   ARGV[2] record ttl (ms)   ARGV[3] who forced it (host, user)
-- Reply: false when there was no lock; otherwise {token ('' when none), the holder record it
-- removed (see holder.lua; false when none), {each shared holder it removed, as the holders
-- hash keeps it}}.
local token = redis.call('GET', KEYS[1])
local h = nil
if token then
  h = holder_read(KEYS[2])
  redis.call('DEL', KEYS[1], KEYS[2])
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local sharers = {}
for _, holder in ipairs(redis.call('ZRANGEBYSCORE', KEYS[8], '(' .. now, '+inf')) do
  sharers[#sharers + 1] = redis.call('HMGET', KEYS[9], holder)[1] or ''
end
redis.call('DEL', KEYS[8], KEYS[9])
if not token and #sharers == 0 then return false end
wake(ARGV[1])
redis.call('HINCRBY', KEYS[4], 'forced', '1')
redis.call('PEXPIRE', KEYS[4], ARGV[2])
if token then
  local function field(name)
    return string.match(h or '', '\31' .. name .. '=([^\31]*)') or ''
  end
  audit(KEYS[3], now, 'forced', 'host=' .. field('host') .. '\31pid=' .. field('pid') ..
    '\31user=' .. field('user') .. '\31fence=' .. field('fence') .. '\31by=' .. ARGV[3])
end
for _, v in ipairs(sharers) do
  local p = {}
  for part in string.gmatch(v .. '\31', '(.-)\31') do p[#p + 1] = part end
  audit(KEYS[3], now, 'forced', 'slot=' .. (p[1] or '') .. '\31fence=' .. (p[2] or '') ..
    '\31host=' .. (p[5] or '') .. '\31pid=' .. (p[6] or '') .. '\31user=' .. (p[7] or '') ..
    '\31by=' .. ARGV[3])
end
return {token or '', h or false, sharers}
