-- acquire: take the lock if it is free (or already ours) and nobody is queued ahead, in one
-- round trip; a waiter that is refused joins (or stays in) the key's queue.
-- KEYS[1] lock (string: the token)    KEYS[2] fence counter    KEYS[3] holder record (hash)
-- KEYS[4] counters (hash)   KEYS[5] queue (zset: ticket -> arrival)
-- KEYS[6] queue liveness (zset: ticket -> deadline, ms)   KEYS[7] waiters (hash: ticket -> who)
-- KEYS[10] the audit log (stream; see audit.lua): taken, and a counted busy refusal, are logged
-- KEYS[8] the lock's pause record (hash)   KEYS[9] the prefix-wide pause record (hash; the same
--         key as KEYS[8] where it cannot share the lock's slot)
-- ARGV[1] token   ARGV[2] ttl (ms)   ARGV[3] '1' to count a busy refusal   ARGV[4] record ttl (ms)
-- ARGV[5] the waiter's ticket ('' when not waiting)   ARGV[6] its arrival ('' for the server's
--         clock in µs)   ARGV[7] how long an entry lives unrefreshed (ms)   ARGV[8] who waits
--         (record.rs writes it)
-- ARGV[9..] the holder's identity as field/value pairs (record.rs writes them); the script adds
--          started, renewed, ttl, fence and finished.
-- Reply: {1, fence, server time (ms)} when taken;
--        {0, pttl (ms; -2 when free but others are queued), server time (ms),
--         {host, pid, user, started, fence}, waiters ahead of us, queue length,
--         pause} when refused (the holder record's fields record::BRIEF names, in its order;
--        pause: false, or {host, pid, user, reason, since, until, scope} of the pause in force,
--        the fields record::PAUSE_BRIEF names, scope 'key' or 'all').
-- A paused key refuses every taker but its holder's own retry; a waiter stays queued.
-- paused(key, now): the pause record `key` holds while it is in force (its until, ms, is 0
-- or still ahead), else nil.
local function paused(key, now)
  local p = redis.pcall('HMGET', key, 'host', 'pid', 'user', 'reason', 'since', 'until')
  if p.err or not p[5] then return nil end
  local u = tonumber(p[6]) or 0
  if u ~= 0 and u <= now then return nil end
  return p
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ticket = ARGV[5]
local current = redis.call('GET', KEYS[1])
if current == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  local h = redis.call('HMGET', KEYS[3], 'fence', 'started')
  return {1, tonumber(h[1]) or tonumber(redis.call('GET', KEYS[2])) or 0, tonumber(h[2]) or now}
end
local pause = paused(KEYS[8], now)
if pause then
  pause[7] = 'key'
elseif KEYS[9] ~= KEYS[8] then
  pause = paused(KEYS[9], now)
  if pause then pause[7] = 'all' end
end
if not current and not pause then
  local head = redis.call('ZRANGE', KEYS[5], 0, 0)[1]
  if head and head ~= ticket then head = live_head(now) end
  if not head or head == ticket then
    -- The fence is above every fence handed out before, even when the counter was lost (a
    -- restart without persistence, a flush, a failover to a lagging replica): it is at least
    -- the server's clock in microseconds (below 2^53 until the year 2255, so JSON readers keep
    -- it exact).
    local fence = math.max((tonumber(redis.call('GET', KEYS[2])) or 0) + 1,
      tonumber(t[1]) * 1000000 + tonumber(t[2]))
    redis.call('SET', KEYS[2], fence)
    redis.call('HSET', KEYS[3], 'started', now, 'renewed', now, 'ttl', ARGV[2], 'fence', fence,
      'finished', 0, unpack(ARGV, 9))
    redis.call('PEXPIRE', KEYS[3], ARGV[2])
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
    audit(KEYS[10], 'acquired', 'fence', fence, unpack(ARGV, 9))
    -- A quorum waiter (its arrival given) stays queued here until a majority granted it the
    -- lock (it then leaves every node's queue): taken out here alone, it would lose its place
    -- on this node whenever the other nodes refused it, and two waiters could take turns at
    -- heading different nodes for ever.
    if head and ARGV[6] == '' then
      redis.call('ZREM', KEYS[5], ticket)
      redis.call('ZREM', KEYS[6], ticket)
      redis.call('HDEL', KEYS[7], ticket)
    end
    return {1, fence, now}
  end
end
local pttl = redis.call('PTTL', KEYS[1])
if ARGV[3] == '1' then
  redis.call('HINCRBY', KEYS[4], 'busy', 1)
  redis.call('PEXPIRE', KEYS[4], ARGV[4])
  if pause then
    audit(KEYS[10], 'busy', 'reason', 'paused', unpack(ARGV, 9))
  else
    audit(KEYS[10], 'busy', unpack(ARGV, 9))
  end
end
local ahead = 0
if ticket ~= '' then
  local alive = tonumber(ARGV[7])
  local arrival = ARGV[6]
  if arrival == '' then arrival = tonumber(t[1]) * 1000000 + tonumber(t[2]) end
  redis.call('ZADD', KEYS[5], 'NX', arrival, ticket)
  redis.call('ZADD', KEYS[6], now + alive, ticket)
  redis.call('HSETNX', KEYS[7], ticket, now .. '\31' .. ARGV[8])
  for i = 5, 7 do redis.call('PEXPIRE', KEYS[i], 2 * alive) end
  ahead = redis.call('ZRANK', KEYS[5], ticket)
end
local h = redis.pcall('HMGET', KEYS[3], 'host', 'pid', 'user', 'started', 'fence')
if h.err then h = {} end
return {0, pttl, now, h, ahead, redis.call('ZCARD', KEYS[5]), pause or false}
