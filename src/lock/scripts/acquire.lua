-- acquire: take the lock if it is free (or already ours) and nobody is queued ahead, in one
-- round trip; a waiter that is refused joins (or stays in) the key's queue.
-- KEYS[1] lock (string: the token)    KEYS[2] fence counter    KEYS[3] holder record (hash)
-- KEYS[4] counters (hash)   KEYS[5] queue (zset: ticket -> arrival)
-- KEYS[6] queue liveness (zset: ticket -> deadline, ms)   KEYS[7] waiters (hash: ticket -> who)
-- KEYS[8] shared leases (zset: token -> lease deadline, ms)
-- KEYS[9] shared holders (hash: 'shape' -> 'shared' | N; token -> the holder, see shapes.lua)
-- KEYS[10] the lock's pause record (hash)   KEYS[11] the prefix-wide pause record (hash; the same
--         key as KEYS[10] where it cannot share the lock's slot)
-- KEYS[12] the audit log (a list; see audit.lua): a take, a counted busy refusal and a skip
--         (--once-per) are logged
-- KEYS[13] the record of the current --once-per window (hash; see below)   KEYS[14] the holders'
--         stop lists, named KEYS[14]:FENCE (a list each; see below): given by a run with
--         --once-per or --replace only
-- ARGV[1] token   ARGV[2] ttl (ms)   ARGV[3] '1' to count a busy refusal
-- ARGV[4] who takes it, as the audit log writes it (name=value pairs; record.rs writes them);
--         the holder record keeps it as 'who'
-- ARGV[5] 'no' when --replace may not ask this holder to stop (--no-replace, `redlock
--         acquire`), '' otherwise
-- ARGV[6..14], given by a run that waits, shares, runs once per window or replaces (none
-- otherwise, which is read as ''):
-- ARGV[6] the waiter's ticket ('' when not waiting)   ARGV[7] its arrival ('' for the server's
--         clock in µs)   ARGV[8] who waits or holds a shared lease (record.rs writes it; ''
--         when neither)
-- ARGV[9] the shape: '' exclusive (the lock key), 'shared', or a number of slots (>= 2)
-- ARGV[10] --once-per's window length (ms; '' without it)   ARGV[11] '1' with --retry-failed
-- ARGV[12] the provisional lease (ms) a waiter that heads the queue is granted ('' for none; see
--          below)
-- ARGV[13] --max-waiters N: a waiter joins the queue only while fewer than N live entries are
--          queued ('' for no limit; one already queued keeps its place)
-- ARGV[14] --replace: who asks the holder to stop, as its redlock reports it ('' when not
--          replacing; see below)
-- ARGV[15..] (--once-per) the holder's identity as field/value pairs (record.rs writes them),
--          for the window's record
-- The holder record is started, ttl, fence, who (and replace=no); a renewal adds renewed, a
-- kept release finished, a replacer stop. The release channel is the queue's key with
-- 'released' for 'queue' (`{L}:redlock:released`).
-- The retention of the records (RETAIN) is audit.lua's.
-- Reply: {1, fence, server time (ms), slot (-1: none), 1 when the lease is provisional} when
--        taken;
--        {0, pttl (ms; -2 when free but others are queued), server time (ms),
--         {host, pid, user, started, fence, who}, waiters ahead of us, queue length,
--         shared holders' shape ('' when none), shared holders, pause, full} when refused
--        (the holder record's fields record::BRIEF names, in its order; pause: false, or
--        {host, pid, user, reason, since, until, scope} of the pause in force, the fields
--        record::PAUSE_BRIEF names, scope 'key' or 'all'; full: 0, or how many wait when
--        --max-waiters kept this waiter out of a full queue; replacing: 1 when the holder
--        was asked to stop (now or before), 0 otherwise);
--        {-1, the shape the key is held with} when a shared taker asks for another shape;
--        {-2, window start (ms), window length (ms), host, pid, user, started, ended, exit,
--         outcome} when --once-per finds this window's run already taken (see below).
-- A paused key refuses every taker but its holder's own retry; a waiter stays queued.
-- A waiter that heads the queue is granted a provisional lease (ARGV[12]), which only its own
-- confirmation (extend.lua) makes the full one: the grant may be made while the waiter cannot
-- act on it (its attempt waits on the server behind its grant list, and its host died or it
-- was frozen meanwhile), and a dead head must not hold the queue for a whole TTL. Its
-- --once-per window is 'granted' until then: not taken while the grant is unconfirmed.
-- --replace (ARGV[14]): a refused replacer asks the exclusive holder to stop, once per holder:
-- the holder record gets 'stop' (who asked), which the holder's renewals then refuse
-- (extend.lua), and who asked is pushed to the holder's stop list, on which its heartbeat waits
-- between renewals, so it learns at once. A holder whose record says replace=no (--no-replace,
-- `redlock acquire`), one without a record (a foreign client), shared or slotted holders, and a
-- paused key are not asked: the replacer is a plain busy run. A replacer that asked (or found
-- the holder already asked) queues ahead of every plain waiter, behind earlier replacers: its
-- arrival is moved 2^52 back (scores stay exact doubles).
-- confirmed(record): a --once-per window's record says its run is running (no longer only
-- 'granted').
local RUNNING = 'running'
local function confirmed(record)
  redis.call('HSET', record, 'outcome', RUNNING)
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- Numbers go to redis.call as text written with %d (see audit.lua).
local now_text = string.format('%d', now)
-- The options of a rare run (ARGV[6..14]); a run without them sends none.
local ticket, arrival, waiting, shape = ARGV[6] or '', ARGV[7] or '', ARGV[8] or '', ARGV[9] or ''
local every_text, retry_failed, grant = ARGV[10] or '', ARGV[11] or '', ARGV[12] or ''
local max_waiters, replacer = ARGV[13] or '', ARGV[14] or ''
-- The lock key, pauses, shared holders and waiters: a free lock finds none of them, in the
-- common case, with one EXISTS, and the script looks closer only at what is there. The queue is
-- counted in it, so a free lock with nobody queued needs no look at the queue; a queue that is
-- the only key there (one found besides the lock, and it has a head) is nothing rare.
local found = redis.call('EXISTS', KEYS[1], KEYS[8], KEYS[10], KEYS[11], KEYS[5])
local current = false
if found > 0 then
  current = redis.call('GET', KEYS[1])
  if current then found = found - 1 end
end
if current == ARGV[1] then
  -- An earlier attempt landed but its reply was lost: ours, renewed (the waiter that asks
  -- again is alive, which confirms a provisional grant too).
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  if every_text ~= '' and redis.call('HMGET', KEYS[13], 'token')[1] == ARGV[1] then
    confirmed(KEYS[13])
  end
  local h = redis.call('HMGET', KEYS[3], 'fence', 'started')
  return {1, tonumber(h[1]) or tonumber(redis.call('GET', KEYS[2])) or 0, tonumber(h[2]) or now, -1}
end
local head, queue_read = nil, false
local rare = shape ~= ''
if not rare then
  if found > 0 then
    head = redis.call('ZRANGE', KEYS[5], '0', '0')[1]
    rare = not (head and found == 1)
  end
  queue_read = true
end
local pause
if rare then
  pause = paused(KEYS[10], now)
  if pause then
    pause[7] = 'key'
  elseif KEYS[11] ~= KEYS[10] then
    pause = paused(KEYS[11], now)
    if pause then pause[7] = 'all' end
  end
end
local sharers, held_shape = 0, ''
if rare then
  sharers = sharers_live(KEYS[8], KEYS[9], now)
  if sharers > 0 then held_shape = redis.call('HMGET', KEYS[9], 'shape')[1] or '' end
end
if shape ~= '' then
  local mine = redis.call('ZSCORE', KEYS[8], ARGV[1])
  if mine then
    -- An earlier attempt landed but its reply was lost: ours, renewed.
    redis.call('ZADD', KEYS[8], 'GT', now + tonumber(ARGV[2]), ARGV[1])
    if every_text ~= '' and redis.call('HMGET', KEYS[13], 'token')[1] == ARGV[1] then
      confirmed(KEYS[13])
    end
    sharers_expire(KEYS[8], KEYS[9], now)
    local slot, fence, started = sharer(KEYS[9], ARGV[1])
    return {1, fence, started, slot}
  end
  if held_shape ~= '' and held_shape ~= shape then return {-1, held_shape} end
end
-- Once per window (--once-per D): a run belongs to the boundary of the server's clock nearest
-- its start (window w covers w*D - D/2 .. w*D + D/2), so hosts whose clocks differ by up to D/4
-- firing the same schedule land in one window. The window's first taker records itself; a later
-- run of the same window is skipped, unless it may retry (--retry-failed) a run that failed,
-- timed out, lost its lease, or died without a release (still 'running' but no longer holding).
local every = tonumber(every_text)
local window
if every then
  window = math.floor((now + every / 2) / every)
  local r = redis.call('HMGET', KEYS[13], 'window', 'every', 'outcome', 'token',
    'host', 'pid', 'user', 'started', 'ended', 'exit')
  -- A window 'granted' to a waiter that has not confirmed it is not taken: while that grant
  -- lives the lock is busy anyway, and once it lapsed the window is the next run's.
  if tonumber(r[1]) == window and tonumber(r[2]) == every and r[3] ~= 'granted' then
    local outcome = r[3]
    if outcome == 'running' and current ~= r[4] then
      local deadline = tonumber(redis.call('ZSCORE', KEYS[8], r[4]))
      if not deadline or deadline <= now then outcome = 'vanished' end
    end
    local failed = outcome == 'failed' or outcome == 'killed' or outcome == 'timed out'
      or outcome == 'lease lost' or outcome == 'vanished' or outcome == 'replaced'
    if not (failed and retry_failed == '1') then
      if ARGV[3] == '1' then
        redis.call('HINCRBY', KEYS[4], 'skipped', '1')
        redis.call('PEXPIRE', KEYS[4], RETAIN)
        audit(KEYS[12], now, 'skipped', ARGV[4])
      end
      return {-2, window * every - math.floor(every / 2), every, r[5] or '', r[6] or '',
        r[7] or '', r[8] or '', r[9] or '', r[10] or '', outcome or ''}
    end
  end
end
local free = not current and sharers == 0
if shape == 'shared' then free = not current end
if shape ~= '' and shape ~= 'shared' then free = not current and sharers < tonumber(shape) end
if free and not pause then
  if not queue_read then head = redis.call('ZRANGE', KEYS[5], '0', '0')[1] end
  if head and head ~= ticket then
    head = live_head(now)
    -- Free, and someone else heads the queue: the front is put on notice (queue.lua).
    if head and head ~= ticket then notice(now, nil, false) end
  end
  if not head or head == ticket then
    local ttl = ARGV[2]
    local provisional = head ~= nil and grant ~= ''
    if provisional then ttl = grant end
    -- The fence is above every fence handed out before, even when the counter was lost (a
    -- restart without persistence, a flush, a failover to a lagging replica): it is at least
    -- the server's clock in microseconds (below 2^53 until the year 2255, so JSON readers keep
    -- it exact). The counter lives as long as the records (RETAIN) after the last take: a fence
    -- handed out after it expired is still above every earlier one, floored by the clock.
    -- The clock is written first and the counter read in the same command (SET ... GET, Redis
    -- 6.2); one at or above it is raised by one, which the clock makes rare. Before 6.2 the
    -- counter is read, then written.
    local fence = tonumber(t[1]) * 1000000 + tonumber(t[2])
    local fence_text = string.format('%d', fence)
    local old = redis.pcall('SET', KEYS[2], fence_text, 'PX', RETAIN, 'GET')
    if type(old) == 'table' then
      old = redis.call('GET', KEYS[2])
      if (tonumber(old) or 0) < fence then
        redis.call('SET', KEYS[2], fence_text, 'PX', RETAIN)
      end
    end
    if (tonumber(old) or 0) >= fence then
      fence = tonumber(old) + 1
      fence_text = string.format('%d', fence)
      redis.call('SET', KEYS[2], fence_text, 'PX', RETAIN)
    end
    local slot = -1
    if shape == '' then
      write_holder(KEYS[3], ttl, now_text, fence_text, ARGV[4], ARGV[5])
      redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
    else
      if shape ~= 'shared' then slot = free_slot(KEYS[8], KEYS[9], tonumber(shape)) end
      local own = ''
      if slot >= 0 then own = slot end
      redis.call('HSET', KEYS[9], 'shape', shape,
        ARGV[1], string.format('%s\31%d\31%d\31%s\31%s', own, fence, now, ttl, waiting))
      redis.call('ZADD', KEYS[8], string.format('%d', now + tonumber(ttl)), ARGV[1])
      sharers_expire(KEYS[8], KEYS[9], now)
    end
    if every then
      local taken = RUNNING
      if provisional then taken = 'granted' end
      redis.call('HSET', KEYS[13], 'window', string.format('%d', window), 'every', every_text,
        'token', ARGV[1], 'fence', fence_text, 'started', now_text, 'outcome', taken, 'ended', '',
        'exit', '', unpack(ARGV, 15))
      redis.call('PEXPIRE', KEYS[13], string.format('%d', 2 * every))
    end
    if shape == '' then
      audit(KEYS[12], now_text, 'acquired', 'fence=' .. fence_text .. '\31' .. ARGV[4])
    elseif slot >= 0 then
      audit(KEYS[12], now, 'acquired',
        string.format('fence=%d\31shape=%s\31slot=%d\31%s', fence, shape, slot, ARGV[4]))
    else
      audit(KEYS[12], now, 'acquired',
        string.format('fence=%d\31shape=%s\31%s', fence, shape, ARGV[4]))
    end
    -- A quorum waiter (its arrival given) stays queued here until a majority granted it the
    -- lock (it then leaves every node's queue): taken out here alone, it would lose its place
    -- on this node whenever the other nodes refused it, and two waiters could take turns at
    -- heading different nodes for ever.
    if head and arrival == '' then
      redis.call('ZREM', KEYS[5], ticket)
      redis.call('ZREM', KEYS[6], ticket)
      redis.call('HDEL', KEYS[7], ticket)
      -- A shared taker leaves room: the next waiter may be one too.
      if shape ~= '' then wake() end
    end
    if provisional then return {1, fence, now, slot, 1} end
    return {1, fence, now, slot, 0}
  end
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl == -2 and sharers > 0 then
  local first = redis.call('ZRANGE', KEYS[8], '0', '0', 'WITHSCORES')
  pttl = math.max(tonumber(first[2]) - now, 0)
end
if ARGV[3] == '1' then
  redis.call('HINCRBY', KEYS[4], 'busy', '1')
  redis.call('PEXPIRE', KEYS[4], RETAIN)
  if pause then
    audit(KEYS[12], now, 'busy', 'reason=paused\31' .. ARGV[4])
  else
    audit(KEYS[12], now, 'busy', ARGV[4])
  end
end
local replacing = 0
if replacer ~= '' and current and not pause then
  local r = redis.call('HMGET', KEYS[3], 'fence', 'replace', 'stop')
  if r[1] and r[2] ~= 'no' then
    replacing = 1
    if not r[3] then
      redis.call('HSET', KEYS[3], 'stop', replacer)
      local stop = KEYS[14] .. ':' .. r[1]
      redis.call('LPUSH', stop, replacer)
      redis.call('PEXPIRE', stop, string.format('%d', math.max(pttl, 1000)))
      audit(KEYS[12], now, 'replacing', 'fence=' .. r[1] .. '\31' .. ARGV[4])
    end
  end
end
local ahead, full = 0, 0
-- --max-waiters N: a waiter not yet queued joins only while fewer than N live entries (not
-- lapsed: a frozen waiter counts until its entry does) are queued.
if ticket ~= '' and max_waiters ~= '' and not redis.call('ZSCORE', KEYS[5], ticket) then
  -- ZRANGEBYSCORE, which the queue already needs, rather than ZCOUNT, which a least-privilege
  -- user may not be granted; at most N entries are read.
  local queued = #redis.call('ZRANGEBYSCORE', KEYS[6], '(' .. now_text, '+inf', 'LIMIT', '0', max_waiters)
  if queued >= tonumber(max_waiters) then
    ticket, full = '', queued
  end
end
if ticket ~= '' then
  local at = arrival
  if at == '' then at = string.format('%d', tonumber(t[1]) * 1000000 + tonumber(t[2])) end
  if replacing == 1 then at = string.format('%d', tonumber(at) - 4503599627370496) end
  redis.call('ZADD', KEYS[5], 'NX', at, ticket)
  ahead = redis.call('ZRANK', KEYS[5], ticket)
  -- An entry lives QUEUE_LIFE unrefreshed at the front of a lock that is free (the waiters
  -- there try again at that pace), ten times as long elsewhere (queue.lua).
  local life = QUEUE_FAR_LIFE
  if free and not pause and ahead < QUEUE_NEAR then life = QUEUE_LIFE end
  redis.call('ZADD', KEYS[6], string.format('%d', now + life), ticket)
  redis.call('HSETNX', KEYS[7], ticket, now_text .. '\31' .. waiting)
  for i = 5, 7 do redis.call('PEXPIRE', KEYS[i], QUEUE_KEPT) end
end
local h = redis.pcall('HMGET', KEYS[3], 'host', 'pid', 'user', 'started', 'fence', 'who')
if h.err then h = {} end
return {0, pttl, now, h, ahead, redis.call('ZCARD', KEYS[5]), held_shape, sharers, pause or false,
  full, replacing}
